//! End-to-end: a baseline run and a speculative run of the same prompts,
//! then `speedbench compare`.

mod common;

use std::process::Output;

use common::*;
use speedbench_record::{RecordWriter, RequestRecord, RunManifest, SpecDecodeStats};
use speedbench_sim::{AcceptanceProfile, SimConfig, SpecFlavor};

async fn profile_against(config: SimConfig, out: &std::path::Path) {
    let server = sim(config).await;
    let status = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--category",
        "math,roleplay",
        "--streaming",
        "--concurrency",
        "2",
        "--extra-inputs",
        "temperature:0",
        "--output-artifact-dir",
        out.to_str().unwrap(),
    ])
    .await
    .status;
    assert!(status.success());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_reports_speedup_and_a_lossless_check() {
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    let demo = SimConfig::speed_bench_demo()
        .with_step_ms(2.0)
        .with_flavor(SpecFlavor::Both);
    // The same server with speculation off: every step emits one token.
    let mut baseline = demo.clone();
    baseline.default_spec = AcceptanceProfile::baseline();
    baseline.categories.clear();
    profile_against(baseline, &base).await;
    profile_against(demo, &spec).await;

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
        "--format",
        "json",
        "--bootstrap",
        "200",
    ])
    .await;
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["math", "roleplay", "overall"]);
    let overall = &rows[2];
    // The simulator's text does not depend on speculation, so every paired
    // output is byte-identical: 6 rows of math+roleplay, 2 of them two-turn.
    assert_eq!(overall["paired"], 8);
    assert_eq!(overall["identical"], 8);
    assert_eq!(json["diverging"], 0);
    // Each verify step takes the same 2 ms with or without drafts, and the
    // server's own (llama.cpp-shaped) timings say so, so the speculative run
    // decodes faster, by about the acceptance length.
    for row in rows {
        assert_eq!(row["decode_source"], "server");
        let speedup = row["decode_speedup"].as_f64().unwrap();
        let al = row["accept_length"].as_f64().unwrap();
        assert!(speedup > 1.0 && (speedup / al - 1.0).abs() < 0.25, "{row}");
        let ci = &row["accept_length_ci"];
        assert!(ci["low"].as_f64().unwrap() <= row["accept_length"].as_f64().unwrap());
    }
    // math accepts more than roleplay in the demo profiles.
    assert!(
        rows[0]["accept_length"].as_f64().unwrap() > rows[1]["accept_length"].as_f64().unwrap()
    );

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    // Same options on both runs: nothing to warn about but sampling.
    assert!(!stderr(&out).contains("do not match"), "{}", stderr(&out));
    let console = String::from_utf8(out.stdout).unwrap();
    assert!(
        console.contains("Byte-identical outputs: 8 of 8 paired requests (100.0%); 0 differ."),
        "{console}"
    );
    // Said for what it is: identity, not a verdict on losslessness.
    assert!(
        console.contains("some engines are not bit-exact under speculation"),
        "{console}"
    );
    assert!(!console.contains("Lossless check"), "{console}");
    assert!(!console.contains("meaningful"), "{console}");
}

/// A run directory written directly: `records`, and a `run.json` with
/// `outcome` and `config` (no simulator needed for the checks below).
fn synth_run(
    dir: &std::path::Path,
    records: &[RequestRecord],
    outcome: &str,
    config: serde_json::Value,
) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = RunManifest {
        run_id: "r".into(),
        model: "m".into(),
        dataset: "mini".into(),
        outcome: outcome.into(),
        config,
        ..Default::default()
    };
    let mut w = RecordWriter::create(dir.join("records.parquet")).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close(&manifest).unwrap();
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    dir.to_path_buf()
}

fn rec(index: u64, id: &str, turn: u32, category: &str, text: &str) -> RequestRecord {
    RequestRecord {
        run_id: "r".into(),
        request_index: index,
        conversation_id: id.into(),
        turn_index: turn,
        dataset: "mini".into(),
        category: Some(category.into()),
        model: "m".into(),
        e2e_latency_ns: 1_000_000_000,
        ttft_ns: Some(100_000_000),
        prompt_tokens: Some(20 + index),
        completion_tokens: Some(11),
        output_text: text.into(),
        spec: Some(SpecDecodeStats {
            accepted_draft_tokens: 4,
            proposed_draft_tokens: 8,
            verify_steps: Some(6),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn greedy() -> serde_json::Value {
    serde_json::json!({"osl": 64, "endpoint_type": "chat", "streaming": true,
        "extra_inputs": {"temperature": 0}})
}

fn four() -> Vec<RequestRecord> {
    vec![
        rec(0, "a", 0, "math", "one"),
        rec(1, "a", 1, "math", "two"),
        rec(2, "b", 0, "qa", "three"),
        rec(3, "c", 0, "qa", "four"),
    ]
}

async fn compare_dirs(base: &std::path::Path, spec: &std::path::Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
        "--bootstrap",
        "0",
    ];
    args.extend_from_slice(extra);
    run(&args).await
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_do_not_match_are_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    // The same run compares cleanly, with no warning.
    let out = compare_dirs(&base, &base, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    let mut other_osl = greedy();
    other_osl["osl"] = 128.into();
    let mut hot = greedy();
    hot["extra_inputs"]["temperature"] = 0.7.into();
    let mut chat_vs_text = greedy();
    chat_vs_text["endpoint_type"] = "completions".into();
    let mut fewer = four();
    fewer.pop();
    let mut recategorized = four();
    recategorized[2].category = Some("math".into());
    let mut other_prompt = four();
    other_prompt[3].prompt_tokens = Some(99);
    let cases: Vec<(&str, Vec<RequestRecord>, serde_json::Value, &str)> = vec![
        (
            "osl",
            four(),
            other_osl,
            "osl (max_tokens): baseline 64, speculative 128",
        ),
        (
            "temperature",
            four(),
            hot,
            "sampling field extra input temperature: baseline 0, speculative 0.7",
        ),
        (
            "endpoint",
            four(),
            chat_vs_text,
            "endpoint_type: baseline \"chat\", speculative \"completions\"",
        ),
        (
            "fewer",
            fewer,
            greedy(),
            "request \"c\" turn 0: 1 in the baseline, 0 in the speculative run",
        ),
        (
            "recategorized",
            recategorized,
            greedy(),
            "request \"b\" is in category \"qa\" in the baseline, \"math\" in the speculative run",
        ),
        (
            "prompt",
            other_prompt,
            greedy(),
            "request \"c\" turn 0: a prompt of 23 tokens in the baseline, 99 in the speculative run",
        ),
    ];
    for (name, records, config, needle) in cases {
        let spec = synth_run(&tmp.path().join(name), &records, "completed", config);
        let out = compare_dirs(&base, &spec, &[]).await;
        assert_eq!(out.status.code(), Some(1), "{name}: refused");
        let err = stderr(&out);
        assert!(err.contains("the runs do not match"), "{name}: {err}");
        assert!(err.contains(needle), "{name}: {needle:?} not in {err}");
        assert!(err.contains("--force"), "{err}");
        let out = compare_dirs(&base, &spec, &["--force"]).await;
        assert!(
            out.status.success(),
            "{name} with --force: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("warning: the runs differ (--force): "),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }

    // Another dataset under the same ids.
    let dir = tmp.path().join("dataset");
    let spec = synth_run(&dir, &four(), "completed", greedy());
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    m["dataset"] = "another".into();
    std::fs::write(dir.join("run.json"), m.to_string()).unwrap();
    let out = compare_dirs(&base, &spec, &[]).await;
    assert!(
        stderr(&out).contains("dataset: baseline \"mini\", speculative \"another\""),
        "{}",
        stderr(&out)
    );
    assert!(!out.status.success());

    // A request option that does not change sampling only warns.
    let mut tagged = greedy();
    tagged["extra_inputs"]["user"] = "bench".into();
    let spec = synth_run(&tmp.path().join("tagged"), &four(), "completed", tagged);
    let out = compare_dirs(&base, &spec, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: extra input user: baseline not set, speculative \"bench\" (not a sampling field)"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_runs_are_compared_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    let mut part = four();
    part.truncate(2);
    for (outcome, needle) in [
        ("interrupted", "was interrupted before it finished"),
        ("running", "was killed before it finished"),
    ] {
        let spec = synth_run(&tmp.path().join(outcome), &part, outcome, greedy());
        let out = compare_dirs(&base, &spec, &["--format", "json"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "warning: the speculative run {} {needle}",
                spec.display()
            )),
            "{err}"
        );
        assert!(err.contains("holds 2 record(s)"), "{err}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            json["rows"].as_array().unwrap().last().unwrap()["paired"],
            2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_ids_pair_by_occurrence() {
    // One row run twice (as --num-conversations above the row count does,
    // or a dataset with a repeated id recorded before such ids were refused)
    // with different outputs each time: comparing the run with itself must
    // pair first with first and second with second.
    let tmp = tempfile::tempdir().unwrap();
    let records = vec![
        rec(0, "a", 0, "math", "first answer"),
        rec(1, "b", 0, "math", "other"),
        rec(2, "a", 0, "math", "second answer"),
    ];
    let dir = synth_run(&tmp.path().join("run"), &records, "completed", greedy());
    let out = compare_dirs(&dir, &dir, &["--format", "json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let overall = json["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (overall["paired"].as_u64(), overall["identical"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(json["diverging"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_directories_and_huge_bootstraps_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    let missing = tmp.path().join("no_such_run");
    for (b, s) in [(&missing, &base), (&base, &missing)] {
        let out = compare_dirs(b, s, &[]).await;
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "run directory {} does not exist",
                missing.display()
            )),
            "{err}"
        );
        assert!(!err.contains("profile_export_aiperf.json"), "{err}");
    }
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = compare_dirs(&base, &empty, &[]).await;
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the speculative run directory {}: it holds no run",
            empty.display()
        )),
        "{err}"
    );

    // A run killed mid-write: only records.parquet.partial, without a footer.
    let killed = tmp.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let bytes = std::fs::read(base.join("records.parquet")).unwrap();
    std::fs::write(
        killed.join("records.parquet.partial"),
        &bytes[..bytes.len() / 2],
    )
    .unwrap();
    let out = compare_dirs(&base, &killed, &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("records.parquet.partial without a Parquet footer"),
        "{err}"
    );
    assert!(!err.contains("profile_export_aiperf.json"), "{err}");
    // One whose rename never happened: its closed .partial file is compared,
    // with a warning that the run died.
    let unrenamed = tmp.path().join("unrenamed");
    std::fs::create_dir_all(&unrenamed).unwrap();
    std::fs::write(unrenamed.join("records.parquet.partial"), &bytes).unwrap();
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("run.json")).unwrap()).unwrap();
    m["outcome"] = "running".into();
    std::fs::write(unrenamed.join("run.json"), m.to_string()).unwrap();
    let out = compare_dirs(&base, &unrenamed, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("was killed before it finished"),
        "{}",
        stderr(&out)
    );

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        base.to_str().unwrap(),
        "--bootstrap",
        "1000001",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("--bootstrap: 1000001 resamples asked for; at most 1,000,000"),
        "{err}"
    );
    // The cap itself is accepted (small runs: fast).
    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        base.to_str().unwrap(),
        "--bootstrap",
        "10000",
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Two runs of input files that differ only in the text of one later turn
/// (same ids, categories and first-turn lengths): the prompt hashes every
/// record carries tell them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_different_prompts_are_refused_by_their_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |second: &str| {
        format!(
            "{{\"question_id\": \"q1\", \"category\": \"math\", \"turns\": [\"What is 2+2?\", \"{second}\"]}}\n\
             {{\"question_id\": \"q2\", \"category\": \"math\", \"turns\": [\"What is 3+3?\"]}}\n"
        )
    };
    // One file name, so both runs are of dataset "rows".
    let (a, b) = (
        dir.path().join("a/rows.jsonl"),
        dir.path().join("b/rows.jsonl"),
    );
    std::fs::create_dir_all(a.parent().unwrap()).unwrap();
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    std::fs::write(&a, rows("And times 3?")).unwrap();
    std::fs::write(&b, rows("And times 4?")).unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let url = server.url();
    for (input, out) in [(&a, "base"), (&a, "spec"), (&b, "other")] {
        let out_dir = dir.path().join(out);
        let status = run(&[
            "profile",
            "--url",
            &url,
            "--input-file",
            input.to_str().unwrap(),
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .await
        .status;
        assert!(status.success());
        let records = read_run(&out_dir).unwrap().records;
        assert!(
            records
                .iter()
                .all(|r| r.prompt_sha256.as_ref().is_some_and(|h| h.len() == 64))
        );
    }
    server.shutdown().await;
    let same = compare_dirs(&dir.path().join("base"), &dir.path().join("spec"), &[]).await;
    assert!(same.status.success(), "{}", stderr(&same));
    let other = compare_dirs(&dir.path().join("base"), &dir.path().join("other"), &[]).await;
    assert_eq!(other.status.code(), Some(1));
    let err = stderr(&other);
    assert!(
        err.contains("not the same prompts (1 request(s) differ); first: request \"q1\" turn 1"),
        "{err}"
    );
}
