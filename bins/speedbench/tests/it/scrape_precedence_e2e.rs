//! End-to-end: one server-metrics export holding both acceptance counters
//! (the simulated vLLM server's) and an acceptance-length gauge (a second
//! endpoint's) gives one acceptance length: the figure `profile` prints at
//! the end of the run is the one `report --source server` puts in its
//! cell, by the one documented precedence (AIPerf's: the gauge first).

use crate::common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;

use common::*;
use serde_json::Value;
use speedbench_sim::SimConfig;

/// The gauge the second endpoint serves: a time-averaged acceptance length
/// no counter ratio of the run gives.
const GAUGE: f64 = 2.25;

/// Serves `body` as a Prometheus exposition on a loopback port, to every
/// request of every connection, for the rest of the test process.
fn static_metrics_endpoint(body: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    let Ok(n) = stream.read(&mut chunk) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    // One response per request head (GETs have no body).
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                             content-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if stream.write_all(response.as_bytes()).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    url
}

/// The figure after `what ` on the profile's `server metrics:` line.
fn printed(stderr: &str, what: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("server metrics: acceptance length"))
        .unwrap_or_else(|| panic!("no run-level server metrics line in:\n{stderr}"));
    let rest = &line[line.find(what).unwrap_or_else(|| panic!("{line}")) + what.len() + 1..];
    rest.split(' ')
        .next()
        .unwrap()
        .trim_end_matches(',')
        .to_string()
}

async fn server_cell(dir: &Path, metric: &str) -> (f64, String) {
    let out = run(&[
        "report",
        dir.to_str().unwrap(),
        "--metric",
        metric,
        "--source",
        "server",
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success(), "report --metric {metric}");
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let value = m["rows"][0]["cells"][0].as_f64().unwrap();
    (value, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_with_counters_and_a_gauge_gives_one_acceptance_length() {
    // About 350 verify steps at 3 ms over 2 slots plus 10 ms to first
    // token: the run outlasts several 333 ms scrapes, so the gauge has
    // samples inside the profiling window.
    let server = sim(SimConfig::default().with_step_ms(3.0).with_ttft_ms(10.0)).await;
    let gauge = static_metrics_endpoint(format!(
        "# HELP vllm:spec_decode_mean_accepted_length Mean accepted length.\n\
         # TYPE vllm:spec_decode_mean_accepted_length gauge\n\
         vllm:spec_decode_mean_accepted_length {GAUGE}\n"
    ));
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--concurrency",
        "2",
        "--osl",
        "48",
        "--server-metrics-shutdown-delay",
        "0.4",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
        "--server-metrics",
        &gauge,
    ])
    .await;
    let truth = server.ground_truth();
    server.shutdown().await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let stderr = String::from_utf8_lossy(&out.stderr);

    // The export holds both: the simulator's counters and the gauge.
    let export: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    let total = |name: &str| export["metrics"][name]["aggregate"]["total"].as_f64();
    let accepted = total("vllm:spec_decode_num_accepted_tokens").unwrap();
    let drafts = total("vllm:spec_decode_num_drafts").unwrap();
    assert_eq!(accepted, truth.accepted as f64);
    let from_counters = 1.0 + accepted / drafts;
    assert!(
        (from_counters - GAUGE).abs() > 0.01,
        "the counters must give another figure than the gauge: {from_counters}"
    );
    assert_eq!(
        export["metrics"]["vllm:spec_decode_mean_accepted_length"]["type"],
        "gauge"
    );

    // Acceptance length: the gauge, on both sides.
    let (cell, report_stderr) = server_cell(&out_dir, "accept_length").await;
    assert_eq!(cell, GAUGE);
    assert_eq!(printed(&stderr, "acceptance length"), format!("{cell:.3}"));
    assert!(
        stderr.contains("vllm:spec_decode_mean_accepted_length, gauges, time-averaged"),
        "{stderr}"
    );
    assert!(
        report_stderr.contains("accept_length from server (gauges, time-averaged"),
        "{report_stderr}"
    );

    // Acceptance rate: no rate gauge, so the counters, on both sides.
    let (rate, report_stderr) = server_cell(&out_dir, "accept_rate").await;
    assert!(
        report_stderr.contains("accept_rate from server (counters, token-weighted)"),
        "{report_stderr}"
    );
    let proposed = total("vllm:spec_decode_num_draft_tokens").unwrap();
    assert_eq!(rate, accepted / proposed);
    assert_eq!(printed(&stderr, "acceptance rate"), format!("{rate:.3}"));
}
