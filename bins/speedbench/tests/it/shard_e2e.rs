//! Sharded runs end to end: four `speedbench profile --shard I/4`
//! processes against one simulated server, started together with
//! `--start-at`, then `speedbench report` and `compare` over their parent
//! directory merging them into one run; a deleted shard and a failed
//! shard are named.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use common::*;
use serde_json::Value;
use speedbench_metrics::{RunMetrics, acceptance_by, percentile_sorted};
use speedbench_record::{RequestRecord, RunManifest};
use speedbench_runs::{RunStatus, find_run_dirs, load_run, merge_shards};
use speedbench_sim::SimConfig;

const SHARDS: u32 = 4;
/// The unsharded plan: the first 50 turns of the fixture's rows in order
/// (33 rows of 45 turns, recycled), at concurrency 8, after 4 warmups.
const REQUESTS: u64 = 50;

/// Starts shard `index` of `count` of the run `run_id` into `dir`.
fn shard_command(
    url: &str,
    run_id: &str,
    index: u32,
    count: u32,
    dir: &Path,
    start_at: &str,
) -> tokio::process::Command {
    let mut cmd = bin();
    cmd.args([
        "profile",
        "--url",
        url,
        "-m",
        "speedbench-sim",
        "--streaming",
        "--input-file",
        fixture().to_str().unwrap(),
        "--request-count",
        &REQUESTS.to_string(),
        "--concurrency",
        "8",
        "--warmup-request-count",
        "4",
        "--server-metrics-shutdown-delay",
        "0",
        "--run-id",
        run_id,
        "--shard",
        &format!("{index}/{count}"),
        "--start-at",
        start_at,
        "--output-artifact-dir",
        dir.to_str().unwrap(),
    ]);
    cmd
}

/// A Unix time `secs` seconds from now, as `--start-at` takes it.
fn start_in(secs: f64) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    format!("{:.3}", now.as_secs_f64() + secs)
}

/// Runs the commands at once; their outputs in order.
async fn run_all(cmds: Vec<tokio::process::Command>) -> Vec<std::process::Output> {
    let handles: Vec<_> = cmds
        .into_iter()
        .map(|mut c| tokio::spawn(async move { c.output().await.expect("the binary runs") }))
        .collect();
    let mut outs = Vec::new();
    for h in handles {
        let out = h.await.unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stderr));
        outs.push(out);
    }
    outs
}

fn report_json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("report JSON")
}

/// Accepted and proposed drafts per category.
fn sums<'a>(records: impl Iterator<Item = &'a RequestRecord>) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in records.filter(|r| r.is_success()) {
        let s = r.spec.as_ref().expect("spec stats");
        let e = out.entry(r.category.clone().unwrap()).or_default();
        e.0 += s.accepted_draft_tokens;
        e.1 += s.proposed_draft_tokens;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_shards_merge_into_one_run() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 24)).await;
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().join("bench");
    let start_at = start_in(2.0);
    let dirs: Vec<PathBuf> = (0..SHARDS)
        .map(|i| parent.join(format!("shard{i}")))
        .collect();
    let outs = run_all(
        (0..SHARDS)
            .map(|i| {
                shard_command(
                    &server.url(),
                    "bench",
                    i,
                    SHARDS,
                    &dirs[i as usize],
                    &start_at,
                )
            })
            .collect(),
    )
    .await;
    assert!(outs.iter().all(|o| o.status.success()));
    let truth = server.ground_truth();
    server.shutdown().await;

    // Each shard: its own run id, its place in the group, the planned
    // start it was given and the start it measured.
    let planned_ns = (start_at.parse::<f64>().unwrap() * 1e9).round() as i64;
    let mut pooled: Vec<RequestRecord> = Vec::new();
    let mut per_shard_requests = Vec::new();
    for (i, dir) in dirs.iter().enumerate() {
        let m: RunManifest =
            serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap();
        assert_eq!(m.run_id, format!("bench-shard{i}of4"));
        let shard = m.shard.as_ref().expect("run.json shard");
        assert_eq!(
            (shard.group.as_str(), shard.index, shard.count),
            ("bench", i as u32, 4)
        );
        let start = m.start.as_ref().expect("run.json start");
        assert_eq!(start.barrier, "at");
        assert_eq!(start.planned_unix_ns, planned_ns);
        assert_eq!(
            start.offset_ns,
            start.measured_unix_ns - start.planned_unix_ns
        );
        let records = read_run(dir).unwrap().records;
        assert!(records.iter().all(|r| r.run_id == m.run_id));
        // One warmup per shard, all of it before the measured start; every
        // measured request after it.
        let (warmup, measured): (Vec<_>, Vec<_>) = records.iter().partition(|r| r.warmup);
        assert_eq!(warmup.len(), 1, "shard {i}");
        assert!(
            warmup
                .iter()
                .all(|r| r.end_unix_ns <= start.measured_unix_ns)
        );
        assert!(
            measured
                .iter()
                .all(|r| r.start_unix_ns >= start.measured_unix_ns)
        );
        per_shard_requests.push(measured.len() as u64);
        pooled.extend(records);
    }
    // The shards' shares of the 50 requests (sessions k mod 4 of the
    // fixture in order; session 40 is cut after its first turn).
    assert_eq!(per_shard_requests.iter().sum::<u64>(), REQUESTS);
    assert!(per_shard_requests.iter().all(|&n| n > 0));
    assert_eq!(truth.requests, REQUESTS + 4);
    // Conversations stay whole on one shard: every multi-turn row's turns
    // of one session are in one file (turn 0 and turn 1 share run ids).
    for r in pooled.iter().filter(|r| r.turn_index > 0 && !r.warmup) {
        assert!(
            pooled.iter().any(|f| f.turn_index == 0
                && f.conversation_id == r.conversation_id
                && f.run_id == r.run_id),
            "{} turn {} without its first turn on its shard",
            r.conversation_id,
            r.turn_index
        );
    }

    // The library's merge: one run, the union of the records.
    let runs: Vec<_> = find_run_dirs(std::slice::from_ref(&parent))
        .unwrap()
        .iter()
        .map(|d| load_run(d).unwrap())
        .collect();
    assert_eq!(runs.len(), 4);
    let merged = merge_shards(runs).unwrap();
    assert_eq!(merged.len(), 1);
    let merged_run = &merged[0].run;
    assert_eq!(merged_run.status, RunStatus::Completed);
    assert!(merged[0].shards.as_ref().unwrap().is_complete());
    let records = merged_run.records.as_ref().unwrap();
    assert_eq!(records.len(), pooled.len());
    assert_eq!(
        records.iter().filter(|r| !r.warmup).count() as u64,
        REQUESTS
    );
    // Per-category acceptance sums: merged == the sum over the shards'
    // files == the simulator's own count.
    let mut truth_sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for t in &truth.requests_log {
        let e = truth_sums.entry(t.category.clone().unwrap()).or_default();
        e.0 += t.accepted;
        e.1 += t.proposed;
    }
    assert_eq!(sums(records.iter()), sums(pooled.iter()));
    assert_eq!(sums(records.iter()), truth_sums);
    // TTFT percentiles of the merged run are those of the pooled samples.
    let metrics = RunMetrics::from_records(records);
    let mut ttft: Vec<f64> = pooled
        .iter()
        .filter(|r| !r.warmup && r.is_success())
        .map(|r| r.ttft_ns.unwrap() as f64 / 1e6)
        .collect();
    ttft.sort_by(f64::total_cmp);
    let t = metrics.ttft_ms.unwrap();
    assert_eq!(t.count as u64, REQUESTS);
    assert_eq!(t.p50, percentile_sorted(&ttft, 50.0));
    assert_eq!(t.p90, percentile_sorted(&ttft, 90.0));
    assert_eq!(t.p99, percentile_sorted(&ttft, 99.0));
    assert_eq!((t.min, t.max), (ttft[0], ttft[ttft.len() - 1]));
    // Rates over the union window: earliest measured start to latest end.
    let measured: Vec<&RequestRecord> = pooled.iter().filter(|r| !r.warmup).collect();
    let window = (measured.iter().map(|r| r.end_unix_ns).max().unwrap()
        - measured.iter().map(|r| r.start_unix_ns).min().unwrap()) as f64
        / 1e9;
    assert_eq!(metrics.benchmark_duration_s, Some(window));

    // The binary's report: one row, every request, the pooled acceptance.
    let out = run(&["report", parent.to_str().unwrap(), "--format", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = report_json(&out);
    assert!(stderr.contains("merged 4 shards of run bench"), "{stderr}");
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    let row = &rows[0];
    assert_eq!(row["complete"], true);
    assert_eq!(row["succeeded"], REQUESTS);
    assert_eq!(row["shards"]["merged"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(row["shards"]["missing"], serde_json::json!([]));
    let columns: Vec<&str> = json["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let by_category = acceptance_by(&pooled, |r| r.category.clone());
    for (i, c) in columns.iter().enumerate() {
        let want = by_category[*c].accept_length().unwrap();
        let got = row["cells"][i].as_f64().unwrap();
        assert!((got - want).abs() < 1e-12, "{c}: {got} vs {want}");
    }

    // compare takes the directory of shards as one side.
    let p = parent.to_str().unwrap();
    let out = run(&[
        "compare",
        "--baseline",
        p,
        "--speculative",
        p,
        "--bootstrap",
        "0",
        "--format",
        "json",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the baseline"), "{stderr}");
    assert!(stderr.contains("merged 4 shards of run bench"), "{stderr}");

    // Shard 2 deleted: named, and the merged run incomplete everywhere.
    std::fs::remove_dir_all(&dirs[2]).unwrap();
    let out = run(&["report", p, "--format", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = report_json(&out);
    assert!(
        stderr.contains("shard 2/4 of run bench is missing"),
        "{stderr}"
    );
    assert!(stderr.contains("INCOMPLETE"), "{stderr}");
    let row = &json["rows"][0];
    assert_eq!(row["complete"], false);
    assert_eq!(row["status"], "unfinished");
    assert_eq!(row["shards"]["missing"], serde_json::json!([2]));
    assert!(
        row["status_reason"]
            .as_str()
            .unwrap()
            .contains("merged 3 of 4 shards")
    );
    assert_eq!(
        row["succeeded"],
        REQUESTS - per_shard_requests[2],
        "the three shards' requests"
    );
    let out = run(&[
        "compare",
        "--baseline",
        p,
        "--speculative",
        p,
        "--bootstrap",
        "0",
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("shard 2/4 of run bench is missing"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_that_loaded_different_rows_are_not_merged() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 8)).await;
    let tmp = tempfile::tempdir().unwrap();
    // Two copies of the fixture under one name; the second has one prompt
    // edited: the same dataset name, row count and model.
    let text = std::fs::read_to_string(fixture()).unwrap();
    let edited = text.replacen("[coding 0] Please", "[coding 0] Edited. Please", 1);
    assert_ne!(edited, text, "the fixture's first row was edited");
    let start_at = start_in(1.0);
    let mut cmds = Vec::new();
    for (i, rows) in [&text, &edited].into_iter().enumerate() {
        let input = tmp
            .path()
            .join(format!("copy{i}"))
            .join("speed_bench_mini.jsonl");
        std::fs::create_dir_all(input.parent().unwrap()).unwrap();
        std::fs::write(&input, rows).unwrap();
        let mut cmd = bin();
        cmd.args([
            "profile",
            "--url",
            &server.url(),
            "-m",
            "speedbench-sim",
            "--input-file",
            input.to_str().unwrap(),
            "--request-count",
            "10",
            "--concurrency",
            "2",
            "--server-metrics-shutdown-delay",
            "0",
            "--run-id",
            "split",
            "--shard",
            &format!("{i}/2"),
            "--start-at",
            &start_at,
            "--output-artifact-dir",
            tmp.path()
                .join("runs")
                .join(format!("s{i}"))
                .to_str()
                .unwrap(),
        ]);
        cmds.push(cmd);
    }
    let outs = run_all(cmds).await;
    server.shutdown().await;
    assert!(outs.iter().all(|o| o.status.success()));
    let runs = tmp.path().join("runs");
    let out = run(&["report", runs.to_str().unwrap(), "--format", "json"]).await;
    assert!(!out.status.success(), "different rows were merged");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "the shards of run split split different rows under dataset \"speed_bench_mini\""
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sharded_runs_in_one_parent_are_told_apart_by_run_id() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 8)).await;
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().join("artifacts");
    let start_at = start_in(1.0);
    let mut cmds = Vec::new();
    for run_id in ["base", "spec"] {
        for i in 0..2 {
            let dir = parent.join(format!("speed_bench_mini-{run_id}-shard{i}of2"));
            cmds.push(shard_command(&server.url(), run_id, i, 2, &dir, &start_at));
        }
    }
    let outs = run_all(cmds).await;
    server.shutdown().await;
    assert!(outs.iter().all(|o| o.status.success()));
    let p = parent.to_str().unwrap();

    // One row per run, labelled by its run id.
    let json = report_json(&run(&["report", p, "--format", "json"]).await);
    let labels: Vec<&str> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["label"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        ["speedbench-sim (base)", "speedbench-sim (spec)"],
        "{json}"
    );
    let json =
        report_json(&run(&["report", p, "--format", "json", "--label", "spec=eagle3"]).await);
    let spec_row = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["shards"]["group"] == "spec")
        .unwrap();
    assert_eq!(spec_row["label"], "eagle3", "{json}");

    // report takes DIR#ID too: one run of the two, or both named.
    let group = |id: &str| format!("{p}#{id}");
    let labels_of = |json: &serde_json::Value| -> Vec<String> {
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["shards"]["group"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect()
    };
    let json = report_json(&run(&["report", &group("spec"), "--format", "json"]).await);
    assert_eq!(labels_of(&json), ["spec"], "{json}");
    let json =
        report_json(&run(&["report", &group("base"), &group("spec"), "--format", "json"]).await);
    assert_eq!(labels_of(&json), ["base", "spec"], "{json}");
    let out = run(&["report", &group("nope")]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "{p}#nope: no sharded run \"nope\" among the runs in {p}"
        )),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // compare picks each side by DIR#ID; the parent alone names the ids.
    let base = format!("{p}#base");
    let spec = format!("{p}#spec");
    let out = run(&[
        "compare",
        "--baseline",
        &base,
        "--speculative",
        &spec,
        "--bootstrap",
        "0",
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["compare", "--baseline", p, "--speculative", &spec]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("holds the shards of 2 runs (base, spec)")
            && stderr.contains(&format!("pick one as {p}#base")),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_shard_is_named() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 8)).await;
    // A port nothing listens on: every request of shard 1 fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let tmp = tempfile::tempdir().unwrap();
    let start_at = start_in(1.0);
    let dirs: Vec<PathBuf> = (0..2).map(|i| tmp.path().join(format!("s{i}"))).collect();
    let outs = run_all(vec![
        shard_command(&server.url(), "pair", 0, 2, &dirs[0], &start_at),
        shard_command(&dead, "pair", 1, 2, &dirs[1], &start_at),
    ])
    .await;
    server.shutdown().await;
    assert!(outs[0].status.success());
    assert_eq!(
        outs[1].status.code(),
        Some(1),
        "the shard with no server fails"
    );
    let out = run(&["report", tmp.path().to_str().unwrap(), "--format", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = report_json(&out);
    let row = &json["rows"][0];
    assert_eq!(row["complete"], false);
    assert_eq!(row["status"], "failed");
    let reason = row["status_reason"].as_str().unwrap();
    assert!(reason.contains("shard 1/2 ("), "{reason}");
    assert!(reason.contains("is failed"), "{reason}");
    assert!(stderr.contains("shard 1/2 ("), "{stderr}");
    assert_eq!(row["shards"]["incomplete"][0]["index"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_without_a_run_id_or_with_nothing_to_do_is_refused() {
    let fixture = fixture();
    let base = [
        "profile",
        "--url",
        "127.0.0.1:9",
        "-m",
        "m",
        "--input-file",
        fixture.to_str().unwrap(),
    ];
    let out = run(&[&base[..], &["--shard", "1/4"]].concat()).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("needs --run-id"), "{stderr}");
    // An empty id names nothing: refused, sharded or not.
    for flags in [
        &["--run-id", ""][..],
        &["--shard", "1/4", "--run-id", " "][..],
    ] {
        let out = run(&[&base[..], flags].concat()).await;
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("--run-id: is empty"), "{stderr}");
    }
    let out = run(&[&base[..], &["--shard", "4/4", "--run-id", "x"]].concat()).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("not below the shard count 4"));
    // Concurrency 2 over 4 shards leaves shard 3 without a worker.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("r");
    let out = run(&[
        &base[..],
        &["--shard", "3/4", "--run-id", "x", "--concurrency", "2"],
        &["--output-artifact-dir", dir.to_str().unwrap()],
    ]
    .concat())
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("concurrency 2 over 4 shards"), "{stderr}");
    let out = run(&[&base[..], &["--start-after-barrier", "http://host/go"]].concat()).await;
    assert!(String::from_utf8_lossy(&out.stderr).contains("URL barrier is not supported"));
}
