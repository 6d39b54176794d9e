//! End-to-end: `speedbench profile --config SWEEP.toml` (issue 15, point 7):
//! one run directory per variation with that variation's settings, a
//! report over them; a sweep with a bad variation, or an occupied run
//! directory, refused before any request; a failed run does not stop the
//! sweep but fails its exit code; Ctrl-C during a run keeps the
//! finished runs, marks that one interrupted and starts no other; every
//! shipped example in docs/sweeps parses and checks.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::Value;
use speedbench_sim::SimConfig;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn run_json(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// A TOML string literal.
fn quoted(p: &Path) -> String {
    serde_json::to_string(&p.display().to_string()).unwrap()
}

/// Writes a sweep file over the fixture into `dir`: `[profile]` with the
/// model, the fixture and no scrape wait, then `rest`.
fn sweep_file(dir: &Path, rest: &str) -> PathBuf {
    let path = dir.join("sweep.toml");
    let text = format!(
        "[profile]\nmodel = \"m\"\ninput_file = {}\nserver_metrics_shutdown_delay = 0\n{rest}",
        quoted(&fixture())
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn sweep_args<'a>(file: &'a Path, url: &'a str, parent: &'a Path) -> Vec<&'a str> {
    vec![
        "profile",
        "--config",
        file.to_str().unwrap(),
        "--url",
        url,
        "--output-artifact-dir",
        parent.to_str().unwrap(),
    ]
}

/// The summary line of one variation.
fn summary_line<'a>(stdout: &'a str, dir_name: &str) -> &'a str {
    let summary = stdout
        .split("sweep summary")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary in {stdout}"));
    summary
        .lines()
        .find(|l| l.contains(dir_name))
        .unwrap_or_else(|| panic!("{dir_name} not in the summary: {summary}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_makes_one_run_per_variation_and_a_report_over_them() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    // Three listed variations, each setting something else.
    let file = sweep_file(
        dir.path(),
        "request_count = 4\nstreaming = true\n\
         [[variation]]\ncategory = [\"coding\", \"math\"]\n\
         [[variation]]\nname = \"rag only\"\ncategory = [\"rag\"]\nrequest_count = 2\nconcurrency = 3\n\
         [[variation]]\nstreaming = false\nconcurrency = 2\n",
    );
    let url = server.url();
    let out = run(&sweep_args(&file, &url, &parent)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let names = [
        "01-coding+math",
        "02-rag-only",
        "03-streaming-false_concurrency-2",
    ];
    for name in names {
        assert!(
            parent.join(name).join("records.parquet").is_file(),
            "{name}"
        );
    }
    let first = run_json(&parent.join(names[0]));
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["config"]["concurrency"], 1);
    assert_eq!(first["config"]["request_count"], 4);
    assert_eq!(
        first["config"]["categories"],
        serde_json::json!(["coding", "math"])
    );
    assert_eq!(first["config"]["streaming"], true);
    let second = run_json(&parent.join(names[1]));
    assert_eq!(second["config"]["concurrency"], 3);
    assert_eq!(second["config"]["request_count"], 2);
    assert_eq!(second["config"]["categories"], serde_json::json!(["rag"]));
    let third = run_json(&parent.join(names[2]));
    assert_eq!(third["config"]["concurrency"], 2);
    assert_eq!(third["config"]["streaming"], false);
    assert_eq!(third["config"]["request_count"], 4);
    // The command line's --url reached every run.
    assert!(
        first["config"]["url"]
            .as_str()
            .unwrap()
            .contains(&url.replace("http://", "")),
        "{}",
        first["config"]["url"]
    );
    assert_eq!(server.ground_truth().requests, 4 + 2 + 4);
    server.shutdown().await;
    let stdout = stdout(&out);
    let report = stdout
        .split("=== report over 3 run(s) of the sweep ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no report: {stdout}"));
    assert!(report.contains("Acceptance Length Report"), "{report}");
    assert!(
        report.contains("m (01-coding+math)") && report.contains("m (02-rag-only)"),
        "{report}"
    );
    for name in names {
        assert!(summary_line(&stdout, name).contains("completed"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_matrix_gives_one_run_per_combination_with_its_settings() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    let file = sweep_file(
        dir.path(),
        "request_count = 3\n[matrix]\nconcurrency = [1, 2, 3]\n",
    );
    let url = server.url();
    let out = run(&sweep_args(&file, &url, &parent)).await;
    assert!(out.status.success(), "{}", stderr(&out));
    for c in 1..=3 {
        let run_dir = parent.join(format!("0{c}-concurrency-{c}"));
        let manifest = run_json(&run_dir);
        assert_eq!(manifest["outcome"], "completed", "{}", run_dir.display());
        assert_eq!(manifest["config"]["concurrency"], c);
        assert_eq!(read_run(&run_dir).unwrap().records.len(), 3);
    }
    assert_eq!(server.ground_truth().requests, 9);
    assert!(stdout(&out).contains("=== report over 3 run(s) of the sweep ==="));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_does_not_stop_the_sweep_and_makes_the_exit_code_1() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    // The second run's server is a port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let file = sweep_file(
        dir.path(),
        &format!(
            "url = {:?}\nrequest_count = 2\n\
             [[variation]]\nname = \"a\"\n\
             [[variation]]\nname = \"down\"\nurl = \"127.0.0.1:{closed}\"\n\
             [[variation]]\nname = \"c\"\n",
            server.url()
        ),
    );
    let out = run(&[
        "profile",
        "--config",
        file.to_str().unwrap(),
        "--output-artifact-dir",
        parent.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(server.ground_truth().requests, 4, "runs 1 and 3 ran");
    assert_eq!(run_json(&parent.join("01-a"))["outcome"], "completed");
    assert_eq!(run_json(&parent.join("02-down"))["outcome"], "failed");
    assert_eq!(run_json(&parent.join("03-c"))["outcome"], "completed");
    let stdout = stdout(&out);
    assert!(
        summary_line(&stdout, "02-down").contains("failed: "),
        "{stdout}"
    );
    assert!(summary_line(&stdout, "03-c").contains("completed"));
    assert!(
        stdout.contains("=== report over 2 run(s) of the sweep ==="),
        "{stdout}"
    );
    let err = stderr(&out);
    assert!(err.contains("1 of 3 runs failed: 02-down"), "{err}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_no_run_can_have_and_a_million_runs_are_refused_before_any_request() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    let url = server.url();
    // Values a run refuses (a zero concurrency, count, duration or rate)
    // in a later variation: refused with the first variation's checks.
    for (key, value, want) in [
        ("concurrency", "0", "concurrency must be at least 1"),
        ("request_count", "0", "counts must be at least 1"),
        ("benchmark_duration", "0", "duration must be positive"),
        ("request_rate", "0", "rate must be a positive number"),
    ] {
        let file = sweep_file(
            dir.path(),
            &format!(
                "request_count = 2\n[[variation]]\nconcurrency = 1\n[[variation]]\n{key} = {value}\n"
            ),
        );
        let out = run(&sweep_args(&file, &url, &parent)).await;
        assert_eq!(out.status.code(), Some(1), "{key}");
        let err = stderr(&out);
        assert!(
            err.contains("variation 2 (") && err.contains(want) && err.contains("nothing was sent"),
            "{key}: {err}"
        );
    }
    // A matrix of a million runs is refused by its size, at once.
    let values = format!(
        "[{}]",
        (1..=100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let file = sweep_file(
        dir.path(),
        &format!(
            "[matrix]\nconcurrency = {values}\nrequest_count = {values}\nrandom_seed = {values}\n"
        ),
    );
    let out = run(&sweep_args(&file, &url, &parent)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("the sweep expands to 1000000 runs") && err.contains("at most 10000"),
        "{err}"
    );
    // The same cap holds for an AIPerf YAML grid, before it is expanded
    // (a 1,000 x 1,000 grid took a 90 s, 3.9 GB dry run before).
    let thousand = format!(
        "[{}]",
        (1..=1000)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let yaml = dir.path().join("grid.yaml");
    std::fs::write(
        &yaml,
        format!(
            "schemaVersion: \"2.0\"\nsweep:\n  type: grid\n  parameters:\n    \
             phases.profiling.concurrency: {thousand}\n    phases.profiling.requests: {thousand}\n\
             benchmark:\n  model: m\n  endpoint:\n    url: {url}\n  datasets:\n    - name: main\n      \
             type: file\n      path: {}\n  phases:\n    - name: profiling\n      type: concurrency\n      \
             concurrency: 1\n      requests: 1\n",
            fixture().display()
        ),
    )
    .unwrap();
    let out = run(&sweep_args(&yaml, &url, &parent)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("the sweep expands to 1000000 runs") && err.contains("at most 10000"),
        "{err}"
    );
    let truth = server.ground_truth();
    assert_eq!(truth.requests, 0);
    assert!(!parent.exists(), "nothing was made");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_flag_in_the_third_variation_refuses_the_sweep_before_any_request() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    let file = sweep_file(
        dir.path(),
        "request_count = 2\n\
         [[variation]]\nconcurrency = 1\n\
         [[variation]]\nconcurrency = 2\n\
         [[variation]]\nconcurrency = \"many\"\n",
    );
    let url = server.url();
    let out = run(&sweep_args(&file, &url, &parent)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("variation 3 (03-concurrency-many; [[variation]] 3 at ")
            && err.contains("invalid value 'many' for '--concurrency"),
        "{err}"
    );
    assert!(err.contains("1 of 3 variations refused"), "{err}");
    assert!(err.contains("nothing was sent"), "{err}");
    let truth = server.ground_truth();
    assert_eq!(truth.requests, 0);
    assert!(truth.requests_log.is_empty() && truth.faults.is_empty());
    assert_eq!(truth.scrapes, 0);
    assert!(!parent.exists(), "no run directory was made");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_occupied_run_directory_is_refused_up_front_and_overwrite_replaces_it() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    let file = sweep_file(
        dir.path(),
        "request_count = 2\n[matrix]\nconcurrency = [1, 2]\n",
    );
    // The second variation's directory already holds a run.
    let occupied = parent.join("02-concurrency-2");
    std::fs::create_dir_all(&occupied).unwrap();
    std::fs::write(occupied.join("run.json"), "{\"kept\": true}").unwrap();
    let url = server.url();
    let out = run(&sweep_args(&file, &url, &parent)).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("variation 2 (02-concurrency-2;")
            && err.contains("already holds a run (run.json exists)")
            && err.contains("--overwrite"),
        "{err}"
    );
    assert_eq!(server.ground_truth().requests, 0);
    assert!(
        !parent.join("01-concurrency-1").exists(),
        "the first run never started"
    );
    assert_eq!(
        std::fs::read_to_string(occupied.join("run.json")).unwrap(),
        "{\"kept\": true}"
    );
    // --overwrite beside --config applies to every run.
    let mut args = sweep_args(&file, &url, &parent);
    args.push("--overwrite");
    let out = run(&args).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(run_json(&occupied)["outcome"], "completed");
    assert_eq!(server.ground_truth().requests, 4);
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_in_the_second_run_keeps_the_first_and_starts_no_third() {
    let server = sim(SimConfig::speed_bench_demo().with_step_ms(10.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("sweep");
    // Run 1: exactly 4 requests; run 2: the whole fixture, slowly.
    let file = sweep_file(
        dir.path(),
        "streaming = true\nconcurrency = 2\n\
         [[variation]]\nname = \"short\"\nrequest_count = 4\n\
         [[variation]]\nname = \"long\"\n\
         [[variation]]\nname = \"never\"\n",
    );
    let url = server.url();
    let child = bin()
        .args(sweep_args(&file, &url, &parent))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Every request past the first run's 4 is the second run's.
    wait_for_requests(&server, 4 + 3).await;
    // SAFETY: kill sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) },
        0
    );
    let out = child.wait_with_output().await.unwrap();
    let requests = server.ground_truth().requests;
    server.shutdown().await;
    eprintln!("{}", stderr(&out));
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let first = parent.join("01-short");
    let second = parent.join("02-long");
    assert_eq!(run_json(&first)["outcome"], "completed");
    assert_eq!(read_run(&first).unwrap().records.len(), 4);
    assert_eq!(run_json(&second)["outcome"], "interrupted");
    let kept = read_run(&second).unwrap().records.len() as u64;
    assert!((3..46).contains(&kept), "{kept} records of the second run");
    assert!(requests < 4 + 46, "the second run was cut short");
    assert!(
        !parent.join("03-never").exists(),
        "the third run never started"
    );
    let stdout = stdout(&out);
    assert!(summary_line(&stdout, "01-short").contains("completed"));
    assert!(summary_line(&stdout, "02-long").contains("interrupted"));
    assert!(summary_line(&stdout, "03-never").contains("not started"));
    assert!(
        stdout.contains("=== report over 2 run(s) of the sweep ==="),
        "{stdout}"
    );
}

/// Every `docs/sweeps/*.toml`, with its number of runs and a directory it
/// names.
const SHIPPED: [(&str, usize, &str); 4] = [
    ("qualitative-categories.toml", 11, "11-speed_bench_writing"),
    (
        "entropy-tiers.toml",
        3,
        "02-speed_bench_throughput_1k_mixed",
    ),
    ("literature.toml", 5, "05-spec_al_mtbench"),
    ("concurrency-ladder.toml", 7, "07-concurrency-64"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shipped_example_parses_and_checks() {
    let docs = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/sweeps");
    let mut found: Vec<String> = std::fs::read_dir(&docs)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    found.sort();
    let mut listed: Vec<String> = SHIPPED.iter().map(|(n, _, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed, "every shipped example is checked here");
    let dir = tempfile::tempdir().unwrap();
    for (name, runs, a_dir) in SHIPPED {
        let parent = dir.path().join(name);
        let file = docs.join(name);
        // No server: --dry-run sends nothing (not even the model lookup).
        let out = run(&[
            "profile",
            "--config",
            file.to_str().unwrap(),
            "--dry-run",
            "--model",
            "m",
            "--output-artifact-dir",
            parent.to_str().unwrap(),
        ])
        .await;
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let stdout = stdout(&out);
        assert!(
            stdout.contains(&format!(
                "{runs} run{} under {}",
                if runs == 1 { "" } else { "s" },
                parent.display()
            )),
            "{name}: {stdout}"
        );
        assert!(stdout.contains(&format!("  {a_dir}  ")), "{name}: {stdout}");
        assert!(stdout.contains("nothing was sent"), "{name}");
        assert!(!parent.exists(), "{name}: a dry run makes no directory");
    }
}

/// A later variation whose load passes the open-file limit refuses the
/// whole sweep before the first request, not once the earlier runs sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_load_past_the_open_file_limit_refuses_the_sweep_up_front() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("runs");
    let file = sweep_file(
        dir.path(),
        "num_conversations = 200000000\n[matrix]\nconcurrency = [1, 100000000]\n",
    );
    let out = run(&sweep_args(&file, &url, &parent)).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("refused before the first request"), "{err}");
    assert!(err.contains("nothing was sent"), "{err}");
    assert_eq!(server.ground_truth().requests, 0);
    server.shutdown().await;
}
