//! End-to-end: how a run ends and what it leaves (issue 14, points 2, 3, 4,
//! 5, 8, 11, 13 and 14): the run directory is locked and never overwritten
//! without `--overwrite`; a run where nothing succeeded, or too much failed,
//! fails with exit 1 and says so in `run.json` and `summary.json`; no TTFT
//! without streaming; SIGTERM exits 143; a killed run is recognisable; a huge
//! `--concurrency` costs only the work; a failed write keeps every flushed
//! record readable; the final progress line agrees with the table.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use serde_json::Value;
use speedbench_record::{PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, run_is_live};
use speedbench_sim::{FaultKind, FaultPlan, SimConfig};

/// `profile` of the fixture against `url` into `out_dir`, plus `extra`.
async fn profile(url: &str, out_dir: &Path, extra: &[&str]) -> Output {
    let args = profile_args(url, out_dir, extra);
    run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

fn profile_args(url: &str, out_dir: &Path, extra: &[&str]) -> Vec<String> {
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--model",
        "m",
        "--input-file",
        fixture.to_str().unwrap(),
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    args.into_iter().map(String::from).collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn outcome_of(dir: &Path) -> (String, String) {
    let run = json(&dir.join("run.json"));
    let summary = json(&dir.join("summary.json"));
    (
        run["outcome"].as_str().unwrap().to_string(),
        summary["outcome"].as_str().unwrap().to_string(),
    )
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Files in `dir` other than the lock.
fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != speedbench_record::LOCK_FILE_NAME)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_holding_a_run_is_refused_and_kept() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let first = profile(
        &server.url(),
        &out_dir,
        &["--request-count", "6", "--streaming"],
    )
    .await;
    assert!(first.status.success());
    assert_eq!(
        outcome_of(&out_dir),
        ("completed".into(), "completed".into())
    );
    assert_eq!(
        files_in(&out_dir),
        [
            "records.parquet",
            "run.json",
            "server_metrics_export.json",
            "summary.json"
        ],
        "no partial or temporary file left"
    );
    // The final progress line's rate is the table's request throughput.
    let table = String::from_utf8(first.stdout.clone()).unwrap();
    let table_rate = table
        .lines()
        .find(|l| l.contains("Request Throughput (requests/sec)"))
        .and_then(|l| l.split('│').nth(2))
        .map(|c| c.trim().replace(',', ""))
        .unwrap();
    let progress_line = stderr(&first)
        .lines()
        .find(|l| l.starts_with("profiled: 6/6 requests, "))
        .unwrap()
        .to_string();
    assert!(
        progress_line.contains(&format!(", {table_rate} req/s (request throughput)")),
        "{progress_line:?} vs the table's {table_rate}"
    );

    let kept = std::fs::read(out_dir.join(RECORDS_FILE_NAME)).unwrap();
    let run_json = std::fs::read(out_dir.join("run.json")).unwrap();
    // A re-run against a dead server would have replaced a good run.
    let dead = format!("127.0.0.1:{}", closed_port());
    let again = profile(&dead, &out_dir, &["--request-count", "6"]).await;
    assert_eq!(again.status.code(), Some(1));
    let err = stderr(&again);
    assert!(
        err.contains(&format!("{}: already holds a run", out_dir.display())),
        "{err}"
    );
    assert!(err.contains("--overwrite"), "the way out is named: {err}");
    assert_eq!(
        std::fs::read(out_dir.join(RECORDS_FILE_NAME)).unwrap(),
        kept
    );
    assert_eq!(std::fs::read(out_dir.join("run.json")).unwrap(), run_json);

    // With --overwrite the new run replaces the old one entirely.
    let replaced = profile(
        &server.url(),
        &out_dir,
        &["--request-count", "3", "--overwrite", "--run-id", "second"],
    )
    .await;
    assert!(replaced.status.success());
    let file = read_run(&out_dir).unwrap();
    assert_eq!(file.records.len(), 3);
    assert!(file.records.iter().all(|r| r.run_id == "second"));
    assert_eq!(json(&out_dir.join("run.json"))["run_id"], "second");
    server.shutdown().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_into_a_live_run_directory_is_refused() {
    let server = sim(SimConfig::speed_bench_demo().with_step_ms(10.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let first = spawn_profile(&server, &out_dir);
    wait_for_requests(&server, 1).await;
    // While it runs: the lock is held, records go to the partial file.
    assert!(run_is_live(&out_dir));
    assert!(out_dir.join(PARTIAL_RECORDS_FILE_NAME).is_file());
    assert!(!out_dir.join(RECORDS_FILE_NAME).exists());
    assert_eq!(json(&out_dir.join("run.json"))["outcome"], "running");
    for extra in [&[][..], &["--overwrite"][..]] {
        let second = profile(&server.url(), &out_dir, extra).await;
        assert_eq!(second.status.code(), Some(1));
        let err = stderr(&second);
        assert!(
            err.contains("another speedbench run is writing to this directory"),
            "{err}"
        );
    }
    let out = first.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!run_is_live(&out_dir));
    assert!(!out_dir.join(PARTIAL_RECORDS_FILE_NAME).exists());
    // The first run's records are whole: every turn of the fixture.
    let file = read_run(&out_dir).unwrap();
    assert_eq!(file.records.len(), 46);
    assert_eq!(
        outcome_of(&out_dir),
        ("completed".into(), "completed".into())
    );
    server.shutdown().await;
}

/// A loopback server answering every request with an HTML page.
async fn html_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let _ = sock.read(&mut buf).await;
                let body = "<html><body>It works!</body></html>";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_where_nothing_succeeded_fails() {
    let unauthorized = sim(SimConfig::speed_bench_demo()
        .with_faults(vec![FaultPlan::every_nth(FaultKind::HttpStatus(401), 1)]))
    .await;
    let html = html_server().await;
    let dead = format!("127.0.0.1:{}", closed_port());
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 4] = [
        ("dead", &dead, &[]),
        ("html", &html, &["--streaming"]),
        ("unauthorized", &unauthorized.url(), &[]),
        ("osl0", &unauthorized.url(), &["--osl", "0"]),
    ];
    for (name, url, extra) in cases {
        let out_dir = dir.path().join(name);
        let mut args = vec!["--request-count", "4"];
        args.extend_from_slice(extra);
        let out = profile(url, &out_dir, &args).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {err}");
        assert!(
            err.contains("the run failed: no request succeeded (4 of 4 failed)"),
            "{name}: {err}"
        );
        assert_eq!(
            outcome_of(&out_dir),
            ("failed".into(), "failed".into()),
            "{name}"
        );
        let file = read_run(&out_dir).unwrap();
        assert_eq!(file.manifest.unwrap().status, "failed", "{name}");
        assert!(file.records.iter().all(|r| !r.is_success()), "{name}");
        // The summary says why, in the server's words where it gave some.
        let first = file.records.iter().find_map(|r| r.error_message.clone());
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            shown.contains(&format!(
                "First error: {}",
                first.clone().unwrap_or_default()
            )),
            "{name}: {shown}"
        );
        if name == "unauthorized" {
            assert!(
                shown.contains("First error: HTTP 401")
                    && shown.contains("simulated fault: request rejected"),
                "{shown}"
            );
        }
    }
    unauthorized.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_error_rate_gates_the_exit_code() {
    // Every 4th request fails: 2 of 8 at concurrency 1, 25%.
    let server = sim(SimConfig::speed_bench_demo()
        .with_faults(vec![FaultPlan::every_nth(FaultKind::HttpStatus(500), 4)]))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let strict = dir.path().join("strict");
    let out = profile(
        &server.url(),
        &strict,
        &["--request-count", "8", "--max-error-rate", "0.2"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("2 of 8 requests failed (25.0%), more than the 20.0% allowed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(outcome_of(&strict), ("failed".into(), "failed".into()));

    let lenient = dir.path().join("lenient");
    let out = profile(
        &server.url(),
        &lenient,
        &["--request-count", "8", "--max-error-rate", "0.25"],
    )
    .await;
    assert!(out.status.success(), "25% is within 25%: {}", stderr(&out));
    assert_eq!(
        outcome_of(&lenient),
        ("completed".into(), "completed".into())
    );
    // By default only a run where nothing succeeded fails.
    let default = dir.path().join("default");
    let out = profile(&server.url(), &default, &["--request-count", "8"]).await;
    assert!(out.status.success());

    let out = profile(
        &server.url(),
        &dir.path().join("bad"),
        &["--max-error-rate", "1.5"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("maximum error rate must be between 0 and 1, got 1.5"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_runs_record_and_print_no_ttft() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = profile(&server.url(), &out_dir, &["--request-count", "6"]).await;
    assert!(out.status.success());
    // read_run checks every record: no TTFT without streaming.
    let file = read_run(&out_dir).unwrap();
    assert!(file.records.iter().all(|r| r.ttft_ns.is_none()));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains("Time to First Token"), "{stdout}");
    assert!(stdout.contains("Request Latency"), "{stdout}");
    server.shutdown().await;
}

#[cfg(unix)]
async fn signal_mid_run(signal: i32) -> (tempfile::TempDir, Output) {
    let server = sim(SimConfig::speed_bench_demo().with_step_ms(10.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let child = spawn_profile(&server, &out_dir);
    wait_for_requests(&server, 3).await;
    // SAFETY: kill sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as libc::pid_t, signal) },
        0
    );
    let out = child.wait_with_output().await.unwrap();
    server.shutdown().await;
    (dir, out)
}

/// Ctrl-C at ten points of a run: every request the server finished before
/// the stop is recorded as a success, none as `cancelled`.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_the_server_finished_before_ctrl_c_are_successes() {
    let dataset = speedbench_dataset::Dataset::from_jsonl_file(fixture()).unwrap();
    for attempt in 0..10u64 {
        // Many short requests in flight: completions land all the time,
        // so some land in the same instant as the stop.
        let server = sim(SimConfig::speed_bench_demo()
            .with_step_ms(0.2)
            .with_ttft_ms(1.0))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let child = spawn_profile_with(
            &server,
            &out_dir,
            &[
                "--concurrency",
                "16",
                "--num-conversations",
                "100000",
                "--no-server-metrics",
            ],
        );
        wait_for_requests(&server, 50 + attempt * 37).await;
        // SAFETY: kill sends a signal to the child we spawned.
        assert_eq!(
            unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) },
            0
        );
        let out = child.wait_with_output().await.unwrap();
        let truth = server.ground_truth();
        server.shutdown().await;
        assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
        let records = read_run(&out_dir).unwrap().records;
        let succeeded: std::collections::HashSet<(String, usize)> = records
            .iter()
            .filter(|r| r.is_success())
            .map(|r| request_key(&dataset, r))
            .collect();
        for finished in &truth.requests_log {
            let key = (finished.conversation.clone(), finished.turns as usize);
            assert!(
                succeeded.contains(&key),
                "try {attempt}: the server finished {key:?} before the stop, but it is not a success"
            );
        }
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_run_with_exit_143() {
    let (dir, out) = signal_mid_run(libc::SIGTERM).await;
    let out_dir = dir.path().join("run");
    assert_eq!(out.status.code(), Some(143), "{}", stderr(&out));
    assert_eq!(
        outcome_of(&out_dir),
        ("interrupted".into(), "interrupted".into())
    );
    let file = read_run(&out_dir).unwrap();
    assert!(!file.records.is_empty() && file.records.len() < 46);
}

/// SIGKILL at ten points of a run: every request the simulator had
/// finished more than a flush interval (1 s) before the kill is in the
/// report, read from the crash journal, and `recover` makes it the run's
/// records file, marked interrupted.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_keeps_every_flushed_request() {
    use std::collections::HashMap;
    let dataset = speedbench_dataset::Dataset::from_jsonl_file(fixture()).unwrap();
    for attempt in 0..10u64 {
        let server = sim(SimConfig::speed_bench_demo()
            .with_step_ms(1.0)
            .with_ttft_ms(2.0))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().join("run");
        let child = spawn_profile_with(
            &server,
            &out_dir,
            &[
                "--concurrency",
                "4",
                "--num-conversations",
                "100000",
                "--no-server-metrics",
            ],
        );
        wait_for_requests(&server, 10 + attempt * 23).await;
        // Finished by now, so flushed within the next second.
        let mut finished: HashMap<(String, usize), u64> = HashMap::new();
        for t in &server.ground_truth().requests_log {
            *finished
                .entry((t.conversation.clone(), t.turns as usize))
                .or_default() += 1;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1_600)).await;
        // SAFETY: kill sends a signal to the child we spawned.
        assert_eq!(
            unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGKILL) },
            0
        );
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(out.status.code(), None, "killed");
        server.shutdown().await;
        // The report reads the journal and says what happened.
        let m = report_json(&out_dir, "accept_length", "records").await;
        assert_eq!(m["rows"][0]["status"], "interrupted", "{m}");
        // recover turns it into the run's records file.
        let rec = run(&["recover", out_dir.to_str().unwrap()]).await;
        assert!(rec.status.success(), "{}", stderr(&rec));
        assert_eq!(json(&out_dir.join("run.json"))["outcome"], "interrupted");
        assert!(out_dir.join("summary.json").is_file());
        let records = read_run(&out_dir).unwrap().records;
        let mut got: HashMap<(String, usize), u64> = HashMap::new();
        for r in records.iter().filter(|r| r.is_success()) {
            *got.entry(request_key(&dataset, r)).or_default() += 1;
        }
        for (key, n) in &finished {
            assert!(
                got.get(key).copied().unwrap_or(0) >= *n,
                "try {attempt}: {key:?} finished {n} times more than a second before the kill, \
                 recovered {:?}",
                got.get(key)
            );
        }
        // Recovering twice is refused: the records file is there.
        let again = run(&["recover", out_dir.to_str().unwrap()]).await;
        assert_eq!(again.status.code(), Some(1));
        assert!(stderr(&again).contains("nothing to recover"));
    }
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_is_recognisable_as_one() {
    let (dir, out) = signal_mid_run(libc::SIGKILL).await;
    let out_dir = dir.path().join("run");
    assert_eq!(out.status.code(), None, "killed by the signal");
    // What a reader sees: a run that says it is running, yet nobody holds
    // its lock, and only the partial records file.
    assert_eq!(json(&out_dir.join("run.json"))["outcome"], "running");
    assert!(!run_is_live(&out_dir));
    assert!(out_dir.join(PARTIAL_RECORDS_FILE_NAME).is_file());
    assert!(!out_dir.join(RECORDS_FILE_NAME).exists());
    // A new run may not silently replace it either.
    let again = profile("127.0.0.1:9", &out_dir, &[]).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr(&again).contains("already holds a run"));
}

/// Runs the binary with an address-space or file-size limit set in the
/// child before it starts.
#[cfg(target_os = "linux")]
async fn run_limited(args: &[String], resource: libc::__rlimit_resource_t, limit: u64) -> Output {
    let mut cmd = bin();
    cmd.args(args);
    // SAFETY: between fork and exec only async-signal-safe calls are made
    // (setrlimit, signal).
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: limit,
                rlim_max: limit,
            };
            if libc::setrlimit(resource, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // A write past RLIMIT_FSIZE then fails with EFBIG, as a full disk
            // fails with ENOSPC, instead of killing the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let out = cmd.output().await.unwrap();
    eprintln!(
        "stderr of {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_concurrency_costs_only_the_work() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let args = profile_args(
        &url,
        &out_dir,
        &["--concurrency", "100000000", "--request-count", "5"],
    );
    // 4 GiB of address space: 10^8 workers would need far more.
    let out = run_limited(&args, libc::RLIMIT_AS, 4 << 30).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read_run(&out_dir).unwrap().records.len(), 5);
    server.shutdown().await;
}

/// Under a hard open-file limit of 256 (192 requests in flight fit beside
/// the 64 the run keeps), a load that would not fit is refused before the
/// first request, naming the numbers and the ways past it; one that fits
/// finishes with every promised file.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_past_the_open_file_limit_is_refused_before_anything_is_sent() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    let cases: [&[&str]; 3] = [
        &["--concurrency", "250", "--num-conversations", "250"],
        // Memory follows requests in flight, never the flag.
        &["--concurrency", "100000000", "--benchmark-duration", "3"],
        &[
            "--request-rate",
            "1000",
            "--max-concurrency",
            "500",
            "--request-count",
            "10",
        ],
    ];
    for (i, flags) in cases.iter().enumerate() {
        let out_dir = dir.path().join(format!("refused-{i}"));
        let args = profile_args(&url, &out_dir, flags);
        let out = run_limited(&args, libc::RLIMIT_NOFILE, 256).await;
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{flags:?}: {err}");
        assert!(err.contains("but this process may open 256"), "{err}");
        assert!(err.contains("at most 192"), "{err}");
        assert!(err.contains("--shard I/N"), "{err}");
        assert!(!out_dir.exists(), "nothing written for a refused run");
    }
    assert_eq!(server.ground_truth().requests, 0, "nothing was sent");
    // 180 streams in flight fit: every request and every file.
    let out_dir = dir.path().join("fits");
    let args = profile_args(
        &url,
        &out_dir,
        &[
            "--streaming",
            "--concurrency",
            "180",
            "--num-conversations",
            "180",
        ],
    );
    let out = run_limited(&args, libc::RLIMIT_NOFILE, 256).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let file = read_run(&out_dir).unwrap();
    assert!(file.records.len() >= 180);
    assert!(file.records.iter().all(|r| r.is_success()));
    assert!(out_dir.join("summary.json").is_file());
    assert_eq!(json(&out_dir.join("run.json"))["outcome"], "completed");
    server.shutdown().await;
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_keeps_every_flushed_record_readable() {
    // Long outputs at 2 ms a step: the run spans several one-second row
    // groups before the records file reaches its size limit.
    let server = sim(SimConfig::speed_bench_demo()
        .with_step_ms(2.0)
        .with_output_tokens(200, 200))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let args = profile_args(
        &url,
        &out_dir,
        &[
            "--streaming",
            "--concurrency",
            "8",
            "--num-conversations",
            "400",
            "--no-server-metrics",
        ],
    );
    let out = run_limited(&args, libc::RLIMIT_FSIZE, 192 * 1024).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    // The failure names the records file, and says what was kept.
    assert!(
        err.contains(&format!(
            "error: {}: cannot write: ",
            out_dir.join(PARTIAL_RECORDS_FILE_NAME).display()
        )),
        "{err}"
    );
    assert!(err.contains("records written before it are kept"), "{err}");
    assert!(err.contains("could not be saved"), "{err}");
    // Every record that reached the disk is readable, under the final name.
    let file = read_run(&out_dir).unwrap();
    assert!(
        !file.records.is_empty(),
        "row groups were flushed before the limit"
    );
    let manifest = file.manifest.unwrap();
    assert_eq!(manifest.status, "failed");
    assert_eq!(manifest.record_count, file.records.len() as u64);
    let run_json = json(&out_dir.join("run.json"));
    assert_eq!(run_json["outcome"], "failed");
    assert_eq!(run_json["record_count"], file.records.len() as u64);
    assert!(
        files_in(&out_dir).iter().all(|n| !n.ends_with(".tmp")),
        "{:?}",
        files_in(&out_dir)
    );
    server.shutdown().await;
}

/// A run written into a directory whose children are runs would hide them
/// from `report PARENT`: refused before anything is sent, the children
/// named; `report PARENT` still reports every child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_into_a_parent_of_runs_is_refused() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let parent = dir.path().join("ladder");
    for child in ["c1", "c2"] {
        let out = profile(
            &server.url(),
            &parent.join(child),
            &["--request-count", "2"],
        )
        .await;
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let sent = server.ground_truth().requests;
    let out = profile(&server.url(), &parent, &["--request-count", "2"]).await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("holds 2 run(s) in its subdirectories (c1, c2)")
            && err.contains("give this run a directory of its own"),
        "{err}"
    );
    assert_eq!(server.ground_truth().requests, sent, "nothing was sent");
    assert!(!parent.join("run.json").exists());
    server.shutdown().await;
}

/// `--output` is speed_bench.py's JSON in `profile` and AIPerf's CSV in
/// `report`: each refuses the other's file name before writing anything,
/// each answers to a name that says what it is, and the report's default
/// CSV says where it went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_output_flag_says_what_it_writes_and_refuses_the_other() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let csv = dir.path().join("matrix.csv");
    let out = profile(
        &server.url(),
        &run_dir,
        &["--output", csv.to_str().unwrap()],
    )
    .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("profile's --output writes llama.cpp speed_bench.py's JSON"),
        "{}",
        stderr(&out)
    );
    assert!(!run_dir.exists() && !csv.exists(), "nothing is written");
    let py_json = dir.path().join("sb.json");
    let out = profile(
        &server.url(),
        &run_dir,
        &["--speed-bench-py-output", py_json.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(py_json.is_file());
    server.shutdown().await;

    let json_name = dir.path().join("matrix.json");
    let out = run(&[
        "report",
        run_dir.to_str().unwrap(),
        "--output",
        json_name.to_str().unwrap(),
    ])
    .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("report's --output is the CSV matrix"),
        "{}",
        stderr(&out)
    );
    assert!(!json_name.exists());
    let out = bin()
        .current_dir(dir.path())
        .args(["report", run_dir.to_str().unwrap(), "--format", "csv"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let full = dir
        .path()
        .canonicalize()
        .unwrap()
        .join("speed_bench_report.csv");
    assert!(full.is_file());
    assert!(
        stderr(&out).contains(&format!(
            "CSV written to speed_bench_report.csv ({}",
            full.display()
        )),
        "{}",
        stderr(&out)
    );
    let out = run(&[
        "report",
        run_dir.to_str().unwrap(),
        "--format",
        "csv",
        "--csv-output",
        csv.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success() && csv.is_file(), "{}", stderr(&out));
}

/// A dead run's directory as a SIGKILL leaves it: a partial records file,
/// its crash journal of two flushed batches (3 and 2 records of run
/// `run-a`), the journal's checksums, and `run.json` when given.
fn killed_run(dir: &Path, manifest_run_id: Option<&str>) {
    use speedbench_record::{JOURNAL_FILE_NAME, RecordWriter, RequestRecord, RunManifest};
    std::fs::create_dir_all(dir).unwrap();
    let record = |i: u64| RequestRecord {
        run_id: "run-a".into(),
        request_index: i,
        conversation_id: format!("q{i}"),
        dataset: "mini".into(),
        model: "m".into(),
        output_text: format!("the answer number {i}"),
        start_unix_ns: 1_700_000_000_000_000_000 + i as i64,
        end_unix_ns: 1_700_000_000_000_001_000 + i as i64,
        e2e_latency_ns: 1_000,
        ..Default::default()
    };
    let mut w = RecordWriter::create(dir.join(PARTIAL_RECORDS_FILE_NAME))
        .unwrap()
        .with_journal(dir.join(JOURNAL_FILE_NAME))
        .unwrap();
    for batch in [0..3u64, 3..5] {
        for i in batch {
            w.append(&record(i)).unwrap();
        }
        w.flush().unwrap();
    }
    std::mem::forget(w);
    if let Some(run_id) = manifest_run_id {
        let manifest = RunManifest {
            run_id: run_id.into(),
            model: "m".into(),
            dataset: "mini".into(),
            ..Default::default()
        };
        std::fs::write(dir.join("run.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
    }
}

/// `recover` trusts nothing it finds: a bit flipped in a journal batch is
/// found by its checksum (the batch and the rest are left out, loudly), a
/// journal of another run is refused, and a lost `run.json` is rebuilt
/// from the records and said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_checks_what_it_finds() {
    use speedbench_record::{JOURNAL_FILE_NAME, JOURNAL_SUMS_FILE_NAME};
    let parent = tempfile::tempdir().unwrap();

    // A bit flipped inside the second batch, where its text is.
    let flipped = parent.path().join("flipped");
    killed_run(&flipped, Some("run-a"));
    let journal = flipped.join(JOURNAL_FILE_NAME);
    let mut bytes = std::fs::read(&journal).unwrap();
    let sums = std::fs::read_to_string(flipped.join(JOURNAL_SUMS_FILE_NAME)).unwrap();
    let ends: Vec<usize> = sums
        .lines()
        .map(|l| l.split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(ends.len(), 3, "the schema and two batches: {sums}");
    let second = &bytes[ends[1]..ends[2]];
    let at = ends[1] + second.windows(6).position(|w| w == b"answer").unwrap();
    bytes[at] ^= 0x20; // "answer" -> "Answer"
    std::fs::write(&journal, bytes).unwrap();
    let out = run(&["recover", flipped.to_str().unwrap()]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("batch 1 does not match the checksum written with it")
            && err.contains("3 records before it are recovered"),
        "{err}"
    );
    let records = read_run(&flipped).unwrap().records;
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r.output_text.contains("answer")));

    // Another run's journal under this run.json: refused, nothing written.
    let mixed = parent.path().join("mixed");
    killed_run(&mixed, Some("run-b"));
    let out = run(&["recover", mixed.to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "the crash journal holds the records of run \"run-a\", but run.json is run \"run-b\"'s"
        ),
        "{}",
        stderr(&out)
    );
    assert!(!mixed.join(RECORDS_FILE_NAME).exists());

    // No run.json: rebuilt from the records, and said.
    let lost = parent.path().join("lost");
    killed_run(&lost, None);
    let out = run(&["recover", lost.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("run.json could not be read")
            && stderr(&out).contains(
                "rebuilt from the records (run \"run-a\", model \"m\", dataset \"mini\")"
            ),
        "{}",
        stderr(&out)
    );
    let manifest = json(&lost.join("run.json"));
    assert_eq!(
        (manifest["run_id"].as_str(), manifest["model"].as_str()),
        (Some("run-a"), Some("m"))
    );
    assert_eq!(read_run(&lost).unwrap().records.len(), 5);
}
