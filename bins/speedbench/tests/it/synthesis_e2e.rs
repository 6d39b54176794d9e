//! A trace reshaped before it is replayed (`--synthesis-*`, AIPerf's trace
//! synthesis), checked against the simulator's own log: the times, the
//! prompts' lengths and shared blocks, the output caps, the rows dropped.

use crate::common;

use common::*;
use speedbench_sim::SimConfig;

/// Four rows given by length (blocks of 16 tokens) at 0, 200, 400 and
/// 600 ms, replayed twice as fast, own lengths doubled, inputs over 60
/// tokens dropped, outputs capped at 4. By hand: ids 1 and 2 are shared
/// (the 70-token row is dropped first); row 0 keeps [1, 2] (32 tokens)
/// and its own 8 become 16 on new id 4: 48 tokens; row 1's own 3 become
/// 6 on id 5: 38; row 3 keeps [1] and its own 34 become 68 on ids 6-10,
/// clamped to 60. Sent at 0, 100 and 300 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthesized_trace_is_replayed_faster_with_its_new_lengths() {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0)
        .with_output_tokens(6, 9))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mooncake.jsonl");
    let rows: [(u32, usize, &[u64], u32); 4] = [
        (0, 40, &[1, 2, 3], 8),
        (200, 35, &[1, 2, 4], 5),
        (400, 70, &[1, 2, 7, 8, 9], 3),
        (600, 50, &[1, 6], 2),
    ];
    let text: String = rows
        .iter()
        .map(|(t, len, ids, out)| {
            format!("{{\"timestamp\": {t}, \"input_length\": {len}, \"output_length\": {out}, \"hash_ids\": {ids:?}}}\n")
        })
        .collect();
    std::fs::write(&trace, text).unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        trace.to_str().unwrap(),
        "--no-server-metrics",
        "--fixed-schedule",
        "--isl-block-size",
        "16",
        "--synthesis-speedup-ratio",
        "2",
        "--synthesis-prompt-len-multiplier",
        "2",
        "--synthesis-max-isl",
        "60",
        "--synthesis-max-osl",
        "4",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 row with an input_length over --synthesis-max-isl 60 is not sent"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    let mut at: Vec<u64> = truth.arrivals.iter().map(|a| a.at_unix_ns).collect();
    at.sort_unstable();
    let offsets: Vec<f64> = at.iter().map(|t| (t - at[0]) as f64 / 1e9).collect();
    assert_eq!(offsets.len(), 3, "{offsets:?}");
    for (got, want) in offsets.iter().zip([0.0, 0.1, 0.3]) {
        assert!((got - want).abs() < 0.02, "{offsets:?}");
    }
    let prompt = |len: u32| -> Vec<&str> {
        let t = (truth.requests_log.iter())
            .find(|t| t.prompt_tokens == len)
            .unwrap_or_else(|| panic!("no prompt of {len} tokens"));
        assert!(
            t.completion_tokens <= 4,
            "{len}: {} tokens",
            t.completion_tokens
        );
        t.conversation.split_whitespace().collect()
    };
    let (a, b, d) = (prompt(48), prompt(38), prompt(60));
    assert_eq!(a[..32], b[..32], "blocks 1 and 2 are shared");
    assert_ne!(a[32..38], b[32..38], "the rows' own blocks differ");
    assert_eq!(a[..16], d[..16], "block 1 is shared");
    assert_ne!(a[16..32], d[16..32], "block 2 is not row 3's");
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r.is_success()));
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["config"]["synthesis"]["speedup_ratio"], 2.0);
    assert_eq!(run_json["config"]["synthesis"]["max_isl"], 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_synthesis_flags_are_refused_before_anything_is_sent() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mooncake.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n",
    )
    .unwrap();
    let url = server.url();
    let cases: [(&[&str], &str); 3] = [
        (
            &["--synthesis-speedup-ratio", "0"],
            "speedup ratio must be a number above 0",
        ),
        (&["--synthesis-prefix-root-multiplier", "0"], "at least 1"),
        (
            &["--synthesis-max-isl", "10"],
            "no row of the trace is left to send",
        ),
    ];
    for (flags, says) in cases {
        let out_dir = dir.path().join("run");
        let mut args = vec![
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--input-file",
            trace.to_str().unwrap(),
            "--no-server-metrics",
            "--no-preflight",
            "--fixed-schedule",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(flags);
        let out = run(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} ran");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert!(server.ground_truth().arrivals.is_empty());
}

/// `--force-min-tokens` (AIPerf's): each trace row's `output_length` goes
/// out as `min_tokens` too, and the simulator (whose own answers run 6-9
/// tokens) writes exactly each row's 12, 20 and 3 tokens; without it the
/// lengths are caps, and the answers stop at the simulator's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_min_tokens_give_each_row_its_own_output_length() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mooncake.jsonl");
    let outputs = [12u32, 20, 3];
    let text: String = outputs
        .iter()
        .enumerate()
        .map(|(i, out)| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {out}}}\n",
                i * 20,
                30 + i
            )
        })
        .collect();
    std::fs::write(&trace, text).unwrap();
    for forced in [true, false] {
        let server = sim(SimConfig::speed_bench_demo()
            .with_ttft_ms(1.0)
            .with_step_ms(0.0)
            .with_output_tokens(6, 9))
        .await;
        let out_dir = dir.path().join(format!("run-{forced}"));
        let url = server.url();
        let mut args = vec![
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--input-file",
            trace.to_str().unwrap(),
            "--no-server-metrics",
            "--fixed-schedule",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ];
        if forced {
            args.push("--force-min-tokens");
        }
        let out = run(&args).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let truth = server.ground_truth();
        let records = read_run(&out_dir).unwrap().records;
        assert_eq!((truth.requests_log.len(), records.len()), (3, 3));
        for (i, want) in outputs.iter().enumerate() {
            let t = (truth.requests_log.iter())
                .find(|t| t.prompt_tokens == 30 + i as u32)
                .unwrap();
            let r = records
                .iter()
                .find(|r| r.prompt_tokens == Some(30 + i as u64))
                .unwrap();
            assert!(r.is_success() && r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns));
            assert_eq!(r.completion_tokens, Some(u64::from(t.completion_tokens)));
            if forced {
                assert_eq!(t.completion_tokens, *want, "row {i}");
            } else {
                assert_eq!(
                    t.completion_tokens,
                    (*want).min(t.completion_tokens),
                    "row {i}"
                );
                assert!(
                    (3..=9).contains(&t.completion_tokens),
                    "row {i}: {}",
                    t.completion_tokens
                );
            }
        }
        let run_json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap())
                .unwrap();
        assert_eq!(run_json["config"]["force_min_tokens"], forced, "{run_json}");
    }
}
