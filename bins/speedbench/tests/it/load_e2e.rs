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
