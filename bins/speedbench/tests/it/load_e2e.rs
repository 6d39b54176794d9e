//! End-to-end load: the real binary runs 2,000 streamed requests at
//! concurrency 512 against the simulated server with no delays, while the
//! test samples the client's open file descriptors from `/proc`. (The full
//! 10,000 × 1,024 run is `cargo xtask bench load`.)

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use speedbench_sim::SimConfig;

const REQUESTS: u64 = 2_000;
const CONCURRENCY: u64 = 512;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_requests_at_concurrency_512() {
    let config = SimConfig::speed_bench_demo().with_output_tokens(4, 16);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let (requests, concurrency) = (REQUESTS.to_string(), CONCURRENCY.to_string());
    let fixture = fixture();
    let started = Instant::now();
    let mut child = bin()
        .args([
            "profile",
            "--url",
            &server.url(),
            "-m",
            "speedbench-sim",
            "--streaming",
            "--input-file",
            fixture.to_str().unwrap(),
            "--request-count",
            &requests,
            "--concurrency",
            &concurrency,
            // No 2 s wait for late /metrics counters after the run.
            "--server-metrics-shutdown-delay",
            "0",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut peak_fds = 0;
    let status = loop {
        if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
            peak_fds = peak_fds.max(dir.count());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let elapsed = started.elapsed();
    let stderr = std::fs::read_to_string(dir.path().join("stderr.txt")).unwrap();
    assert!(status.success(), "exit {status:?}\n{stderr}");
    let truth = server.ground_truth();
    server.shutdown().await;
    eprintln!("{REQUESTS} requests at concurrency {CONCURRENCY}: {elapsed:?}, peak fds {peak_fds}");

    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len() as u64, REQUESTS);
    assert!(
        records.iter().all(|r| r.is_success()),
        "{:?}",
        records.iter().find(|r| !r.is_success())
    );
    assert_eq!(truth.requests, REQUESTS);
    // About one socket per in-flight request plus a small fixed overhead
    // (typically 525-540 here). A connection is back in the pool only once
    // its response is consumed, so a worker may briefly open a new one while
    // its old one idles; the pool keeps at most `concurrency` idle, so the
    // bound is twice the concurrency. A leak across 2,000 requests exceeds it.
    assert!(
        peak_fds as u64 <= 2 * CONCURRENCY + 64,
        "peak {peak_fds} fds for {CONCURRENCY} in flight"
    );
}

/// Several models behind one server (`--model a,b,c`): row i asks for
/// model i mod 3 on every turn and every pass, as the simulator saw; each
/// record names its model; the summary and the console have each model's
/// figures from its own records; `random` keeps each row's model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_share_out_several_models() {
    let names = ["base", "lora-a", "lora-b"];
    for strategy in ["round_robin", "random"] {
        let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let url = server.url();
        let fixture = fixture();
        let out = run(&[
            "profile",
            "--url",
            &url,
            "--model",
            "base,lora-a,lora-b",
            "--model-selection-strategy",
            strategy,
            "--input-file",
            fixture.to_str().unwrap(),
            "--request-count",
            "40",
            "--concurrency",
            "3",
            "--streaming",
            "--no-server-metrics",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .await;
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = read_run(&out_dir).unwrap();
        let dataset = speedbench_dataset::Dataset::from_jsonl_file(&fixture).unwrap();
        let row_of = |id: &str| {
            dataset
                .conversations
                .iter()
                .position(|c| c.id == id)
                .unwrap()
        };
        // The model of each row, as the simulator saw it asked.
        let mut seen: std::collections::HashMap<&str, &str> = Default::default();
        let truth = server.ground_truth();
        for t in &truth.requests_log {
            let first = seen
                .entry(t.conversation.as_str())
                .or_insert(t.model.as_str());
            assert_eq!(*first, t.model, "a conversation changed model");
        }
        for r in &file.records {
            let row = row_of(&r.conversation_id);
            if strategy == "round_robin" {
                assert_eq!(r.model, names[row % 3], "{}", r.conversation_id);
            }
            assert!(names.contains(&r.model.as_str()));
            let asked = seen[dataset.conversations[row].turns[0].as_str()];
            assert_eq!(r.model, asked, "the record names what was sent");
        }
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
        let by_model = summary["metrics"]["by_model"]
            .as_array()
            .or_else(|| summary["by_model"].as_array())
            .unwrap_or_else(|| panic!("no by_model in {summary}"));
        let mut total = 0;
        for m in by_model {
            let name = m["model"].as_str().unwrap();
            let own = file
                .records
                .iter()
                .filter(|r| r.model == name && r.is_success())
                .count();
            assert_eq!(m["metrics"]["counts"]["succeeded"], own as u64, "{name}");
            total += own;
        }
        assert_eq!(total, 40);
        assert!(stdout.contains("Per Model"), "{stdout}");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(manifest["config"]["models"], serde_json::json!(names));
        assert_eq!(manifest["config"]["model_selection_strategy"], strategy);
    }
}

/// Two servers (`--url A --url B`): conversations alternate between them
/// (every turn of one to the same server), as each server's own log
/// shows; each record names its server; the server metrics are both
/// servers' counters together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_share_out_several_servers() {
    let a = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let b = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let (url_a, url_b) = (a.url(), b.url());
    let fixture = fixture();
    let out = run(&[
        "profile",
        "--url",
        &url_a,
        "--url",
        &url_b,
        "--model",
        "m",
        "--input-file",
        fixture.to_str().unwrap(),
        "--num-conversations",
        "20",
        "--concurrency",
        "3",
        "--streaming",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = read_run(&out_dir).unwrap().records;
    let (ta, tb) = (a.ground_truth(), b.ground_truth());
    let served = |i: u32| records.iter().filter(|r| r.server_index == Some(i)).count();
    assert_eq!(served(0), ta.requests_log.len());
    assert_eq!(served(1), tb.requests_log.len());
    assert_eq!(
        served(0) + served(1),
        records.len(),
        "every record names its server"
    );
    // Conversations alternate: the 20 sessions split 10 and 10, and a
    // conversation's turns all went to one server.
    for log in [&ta.requests_log, &tb.requests_log] {
        for later in log.iter().filter(|t| t.turns > 1) {
            assert!(
                log.iter()
                    .any(|t| t.turns == later.turns - 1 && t.conversation == later.conversation),
                "turn {} of {:?} went to another server than the turn before",
                later.turns,
                later.conversation
            );
        }
    }
    assert!(
        (ta.requests_log.iter()).any(|t| t.turns > 1),
        "the fixture has conversations of several turns"
    );
    let firsts = |i: u32| {
        records
            .iter()
            .filter(|r| r.turn_index == 0 && r.server_index == Some(i))
            .count()
    };
    assert_eq!((firsts(0), firsts(1)), (10, 10));
    let prompt_tokens = |i: u32| -> u64 {
        (records.iter())
            .filter(|r| r.server_index == Some(i))
            .filter_map(|r| r.prompt_tokens)
            .sum()
    };
    assert_eq!(prompt_tokens(0), ta.prompt_tokens);
    assert_eq!(prompt_tokens(1), tb.prompt_tokens);
    // The fleet's acceptance: both servers' counters, summed.
    let export: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    let total = |name: &str| export["metrics"][name]["aggregate"]["total"].as_f64();
    assert_eq!(
        total("vllm:spec_decode_num_accepted_tokens"),
        Some((ta.accepted + tb.accepted) as f64),
        "{export}"
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(manifest["config"]["urls"].as_array().map(Vec::len), Some(2));
    // One server named twice is refused before anything is sent.
    let out = run(&[
        "profile",
        "--url",
        &format!("{url_a},{url_a}"),
        "--model",
        "m",
        "--input-file",
        fixture.to_str().unwrap(),
        "--output-artifact-dir",
        dir.path().join("twice").to_str().unwrap(),
    ])
    .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is given twice"));
}

/// `--connection-reuse-strategy` against the simulator's own count of
/// the connection each request came on: `never` opens one per request,
/// the lean client and hyper alike; `pooled` (the default) reuses the
/// closed loop's few; `sticky-user-sessions` keeps each conversation's
/// turns on one connection that no other conversation uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_reused_as_asked() {
    for (strategy, client) in [
        ("never", "lean"),
        ("never", "hyper"),
        ("pooled", "lean"),
        ("sticky-user-sessions", "lean"),
        ("sticky-user-sessions", "hyper"),
    ] {
        let server = sim(SimConfig::speed_bench_demo()
            .with_ttft_ms(1.0)
            .with_step_ms(0.0))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let url = server.url();
        let fixture = fixture();
        let out = run(&[
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--engine",
            "vllm",
            "--input-file",
            fixture.to_str().unwrap(),
            "--num-conversations",
            "12",
            "--concurrency",
            "2",
            "--connection-reuse-strategy",
            strategy,
            "--http-client",
            client,
            "--no-preflight",
            "--no-server-metrics",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .await;
        assert!(
            out.status.success(),
            "{strategy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let records = read_run(&out_dir).unwrap().records;
        let log = server.ground_truth().requests_log;
        assert_eq!(log.len(), records.len(), "{strategy}");
        assert!(
            log.iter().any(|t| t.turns > 1),
            "the fixture has multi-turn rows"
        );
        let mut by_connection: std::collections::BTreeMap<u64, Vec<u32>> = Default::default();
        for t in &log {
            by_connection.entry(t.connection).or_default().push(t.turns);
        }
        match strategy {
            "never" => assert_eq!(by_connection.len(), log.len(), "{client}: one each"),
            "pooled" => assert!(by_connection.len() <= 2, "{by_connection:?}"),
            _ => {
                // Twelve conversations, twelve connections, each carrying
                // turns 1..n of one of them.
                assert_eq!(by_connection.len(), 12, "{client}: {by_connection:?}");
                for turns in by_connection.values() {
                    let want: Vec<u32> = (1..=turns.len() as u32).collect();
                    assert_eq!(turns, &want, "{client}");
                }
            }
        }
    }
}

/// `--dataset-sampling-strategy` (AIPerf's), against the simulator's own
/// log of what it was sent, in order (concurrency 1): `shuffle` sends
/// every row once per pass, each pass in a fresh order; `random` draws
/// with replacement; `sequential` is the rows in turn. The records name
/// the row the simulator read, `run.json` the strategy, and a fixed
/// schedule refuses any order but its own before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_are_sampled_in_the_order_asked() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    let text: String = (0..5)
        .map(|i| format!("{{\"question_id\": \"q{i}\", \"turns\": [\"row {i} asks\"]}}\n"))
        .collect();
    std::fs::write(&rows, text).unwrap();
    let row_of = |prompt: &str| -> usize { prompt[4..5].parse().unwrap() };
    for strategy in ["sequential", "shuffle", "random"] {
        let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
        let out_dir = dir.path().join(strategy);
        let url = server.url();
        let out = run(&[
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--input-file",
            rows.to_str().unwrap(),
            "--dataset-sampling-strategy",
            strategy,
            "--random-seed",
            "7",
            "--request-count",
            "15",
            "--no-server-metrics",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{strategy}: {stderr}");
        let sent: Vec<usize> = (server.ground_truth().requests_log.iter())
            .map(|t| row_of(&t.conversation))
            .collect();
        assert_eq!(sent.len(), 15, "{strategy}");
        let passes: Vec<Vec<usize>> = sent.chunks(5).map(<[usize]>::to_vec).collect();
        let is_permutation = |pass: &Vec<usize>| {
            let mut sorted = pass.clone();
            sorted.sort_unstable();
            sorted == [0, 1, 2, 3, 4]
        };
        match strategy {
            "sequential" => assert!(passes.iter().all(|p| p == &[0, 1, 2, 3, 4])),
            "shuffle" => {
                assert!(passes.iter().all(is_permutation), "{passes:?}");
                assert!(
                    passes[0] != passes[1] || passes[1] != passes[2],
                    "{passes:?}"
                );
                assert!(passes.iter().any(|p| p != &[0, 1, 2, 3, 4]), "{passes:?}");
            }
            _ => assert!(!passes.iter().all(is_permutation), "{passes:?}"),
        }
        // Each record names the row the simulator read at its place.
        let mut records = read_run(&out_dir).unwrap().records;
        records.sort_by_key(|r| r.start_unix_ns);
        let named: Vec<usize> = (records.iter())
            .map(|r| r.conversation_id[1..].parse().unwrap())
            .collect();
        assert_eq!(named, sent, "{strategy}");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(
            manifest["config"]["client"]["dataset_sampling_strategy"],
            strategy
        );
    }
    let timed = dir.path().join("timed.jsonl");
    let text: String = (0..5)
        .map(|i| {
            format!(
                "{{\"question_id\": \"q{i}\", \"timestamp\": {}, \"turns\": [\"row {i}\"]}}\n",
                i * 10
            )
        })
        .collect();
    std::fs::write(&timed, text).unwrap();
    let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let url = server.url();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        timed.to_str().unwrap(),
        "--dataset-sampling-strategy",
        "shuffle",
        "--fixed-schedule",
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("fixed").to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("dataset sampling shuffle: a fixed schedule"),
        "{stderr}"
    );
    assert!(server.ground_truth().requests_log.is_empty());
}
