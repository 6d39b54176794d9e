//! End-to-end: each request's HTTP phases (AIPerf's HTTP Trace Timing,
//! `--show-trace-timing`) held to what the server saw: the simulator's log
//! of the connection that carried every request and of when it answered,
//! and a raw loopback server's count of every byte each way.

use crate::common;

use std::collections::HashSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

use common::*;
use speedbench_dataset::Dataset;
use speedbench_record::{HttpPhases, RequestRecord};
use speedbench_sim::SimConfig;

const TTFT_MS: f64 = 150.0;

fn phases(r: &RequestRecord) -> &HttpPhases {
    r.http_phases
        .as_ref()
        .unwrap_or_else(|| panic!("no HTTP phases in request {}", r.request_index))
}

/// Profiles 10 requests of the fixture at concurrency 2 against `server`.
async fn profile(server: &speedbench_sim::SimServer, dir: &std::path::Path, extra: &[&str]) {
    let url = server.url();
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--input-file",
        fixture.to_str().unwrap(),
        "--concurrency",
        "2",
        "--request-count",
        "10",
        "--osl",
        "8",
        "--show-trace-timing",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("speedbench | HTTP Trace Timing"),
        "{stdout}"
    );
    assert!(stdout.contains("HTTP Waiting (TTFB) (ms)"), "{stdout}");
}

/// Whether each logged request was its connection's first: the
/// simulator's log is in completion order, and a connection carries one
/// request at a time, so its first entry is its first request.
fn reuse_by_request(truth: &speedbench_sim::GroundTruth) -> Vec<bool> {
    let mut seen = HashSet::new();
    (truth.requests_log.iter())
        .map(|t| {
            assert_ne!(t.connection, 0, "the simulator names every connection");
            !seen.insert(t.connection)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phases_match_the_simulators_connections_and_answers() {
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(TTFT_MS)
        .with_step_ms(1.0);
    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    for streaming in [true, false] {
        let server = sim(config.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let extra: &[&str] = if streaming { &["--streaming"] } else { &[] };
        profile(&server, dir.path(), extra).await;
        let truth = server.ground_truth();
        server.shutdown().await;
        let records = read_run(dir.path()).unwrap().records;
        assert_eq!(records.len(), 10);
        let reused = reuse_by_request(&truth);
        for r in &records {
            let p = phases(r);
            let (first, turns) = request_key(&dataset, r);
            let logged = (truth.requests_log.iter())
                .position(|t| t.conversation == first && t.turns as usize == turns)
                .expect("every request in the simulator's log");
            assert_eq!(
                p.connection_reused, reused[logged],
                "request {}: reuse as the server saw it",
                r.request_index
            );
            assert_eq!(p.dns_lookup_ns, 0, "an IP literal is not looked up");
            if !p.connection_reused {
                assert!(p.connecting_ns > 0, "a new connection took no time");
            }
            let delay = (TTFT_MS * 1e6) as u64;
            if streaming {
                // The simulator sends the head at once and the first
                // content after its delay: the first byte comes before
                // the first token, and TTFB is not TTFT.
                assert!(p.waiting_ns < delay, "TTFB {} ns", p.waiting_ns);
                assert!(r.ttft_ns.unwrap() >= delay);
            } else {
                // A whole answer, head included, after the delay.
                assert!(p.waiting_ns >= delay, "TTFB {} ns", p.waiting_ns);
            }
        }
        // As many connections opened as the server accepted for requests.
        let opened = records.iter().filter(|r| !phases(r).connection_reused);
        let connections: HashSet<u64> = truth.requests_log.iter().map(|t| t.connection).collect();
        assert_eq!(opened.count(), connections.len());
        assert!(connections.len() < records.len(), "connections were kept");

        let summary = summary_json(dir.path());
        let http = &summary["http_trace"];
        assert_eq!(http["requests"], 10);
        let share = records
            .iter()
            .filter(|r| phases(r).connection_reused)
            .count() as f64
            / 10.0;
        let reused_avg = http["connection_reused"]["avg"].as_f64().unwrap();
        assert!((reused_avg - share).abs() < 1e-12);
    }
}

/// Each POST's body size and its answer's, in the order they came.
type BodySizes = Arc<Mutex<Vec<(usize, usize)>>>;

/// The API key of the byte-counting run, which its server echoes back in a
/// header.
const API_KEY: &str = "sk-trace-e2e-0123456789abcdef";

/// A server that answers every request with one small JSON response
/// written whole (a header echoing [`API_KEY`]), logging each POST's body
/// size and its answer's.
fn counting_server() -> (String, BodySizes) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    let url = serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        while let Some((line, body, size)) = read_sized_request(&mut stream, &mut buf) {
            let answer = json_response("200 OK", CHAT_COMPLETION).replacen(
                "\r\n",
                &format!("\r\nx-echo: Bearer {API_KEY}\r\n"),
                1,
            );
            assert!(size > body.len(), "a head before the body");
            if line.starts_with("post") {
                seen.lock()
                    .unwrap()
                    .push((body.len(), CHAT_COMPLETION.len()));
            }
            if stream.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
    });
    (url, log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_each_way_and_the_name_lookup_are_counted() {
    let (url, log) = counting_server();
    // By name, so the first connection looks it up.
    let url = url.replace("127.0.0.1", "localhost");
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    let rows: String = (0..4)
        .map(|i| format!("{{\"question_id\": \"q{i}\", \"turns\": [\"question {i}\"]}}\n"))
        .collect();
    std::fs::write(&input, rows).unwrap();
    let run_dir = dir.path().join("run");
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--concurrency",
        "1",
        "--no-server-metrics",
        "--show-trace-timing",
        "--export-http-trace",
        "--api-key",
        API_KEY,
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let records = read_run(&run_dir).unwrap().records;
    let log = log.lock().unwrap().clone();
    assert_eq!(records.len(), 4);
    assert_eq!(log.len(), 4);
    // One request at a time, in order: the server's log is the records'.
    for (r, &(sent, answered)) in records.iter().zip(&log) {
        let p = phases(r);
        assert_eq!(p.bytes_sent, sent as u64, "request {}", r.request_index);
        assert_eq!(p.bytes_received, answered as u64);
        // With its head under the first read's 512 bytes, written at once.
        assert!(answered < 300);
        assert_eq!((p.chunks_sent, p.chunks_received), (1, 1));
        assert_eq!(p.receiving_ns, 0, "one read brought it all");
        let first = r.request_index == 0;
        assert_eq!(p.connection_reused, !first);
        if first {
            assert!(p.dns_lookup_ns > 0, "localhost was looked up");
            assert!(p.connecting_ns > 0);
        }
    }
    // The traces: a line per request, the key the server echoed redacted.
    let text = std::fs::read_to_string(run_dir.join("http_trace.jsonl")).unwrap();
    assert!(!text.contains(API_KEY), "{text}");
    let lines: Vec<speedbench_client::HttpTraceLine> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4);
    for (line, r) in lines.iter().zip(&records) {
        assert_trace_line_matches(line, r, phases(r));
        assert_eq!(
            line.response_headers.get("x-echo").map(String::as_str),
            Some(format!("Bearer {}", speedbench_client::REDACTED).as_str())
        );
        let first = r.request_index == 0;
        assert_eq!(line.dns_lookup_start_ns.is_some(), first, "looked up once");
    }
}

/// AIPerf's `http_trace_metrics` template, unchanged but for its request
/// count (500 at 20/s would take 25 s), against the simulator: the console
/// shows the HTTP Trace Timing table, and `http_trace.jsonl` (its
/// `trace: true`) holds one line per request, each moment and count the
/// record's phases, its body reads adding up, the server's own address
/// and headers, and the reuse the simulator saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_http_trace_metrics_template_runs_and_exports_every_trace() {
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--url", "{url}", "--request-count", "40"];
    let server =
        crate::aiperf_config_e2e::run_template("http_trace_metrics", dir.path(), &[], &extra).await;
    let truth = server.ground_truth();
    let port = server
        .url()
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();
    let run_dir = dir.path().join("artifacts/http_trace");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 40);
    assert_eq!(run_json(&run_dir)["config"]["export_http_trace"], true);
    assert_eq!(summary_json(&run_dir)["http_trace"]["requests"], 40);
    let lines: Vec<speedbench_client::HttpTraceLine> =
        std::fs::read_to_string(run_dir.join("http_trace.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    assert_eq!(lines.len(), records.len());
    for line in &lines {
        let r = records
            .iter()
            .find(|r| r.request_index == line.request_index)
            .expect("a record per line");
        let p = phases(r);
        assert_trace_line_matches(line, r, p);
        assert_eq!(line.remote_port, Some(port));
        assert_eq!(line.remote_ip.as_deref(), Some("127.0.0.1"));
        assert_eq!(line.response_status_code, Some(200));
        assert_eq!(line.response_reason.as_deref(), Some("OK"));
        let content_type = line.response_headers.get("content-type");
        assert_eq!(content_type.map(String::as_str), Some("text/event-stream"));
    }
    // One connection per line that opened one, each its own local port,
    // as many as the simulator accepted for requests.
    let opened = lines.iter().filter(|l| !l.connection_reused).count();
    let ports: HashSet<Option<u16>> = lines.iter().map(|l| l.local_port).collect();
    let connections: HashSet<u64> = truth.requests_log.iter().map(|t| t.connection).collect();
    assert_eq!(truth.requests_log.len(), 40);
    assert_eq!(
        (opened, ports.len()),
        (connections.len(), connections.len())
    );
}

/// One `http_trace.jsonl` line against its record: the moments give the
/// record's times and phases, the counts its counts, the reads add up.
fn assert_trace_line_matches(
    line: &speedbench_client::HttpTraceLine,
    r: &RequestRecord,
    p: &HttpPhases,
) {
    let id = r.request_index;
    let at = |v: Option<i64>| v.unwrap_or_else(|| panic!("request {id}: a moment missing"));
    let (start, sent) = (at(line.request_send_start_ns), at(line.request_send_end_ns));
    let (first, end) = (
        at(line.response_receive_start_ns),
        at(line.response_receive_end_ns),
    );
    assert_eq!(
        (start, end),
        (r.start_unix_ns, r.end_unix_ns),
        "request {id}"
    );
    assert_eq!((sent - start) as u64, p.sending_ns, "request {id}");
    assert_eq!((first - sent) as u64, p.waiting_ns, "request {id}");
    assert_eq!((end - first) as u64, p.receiving_ns, "request {id}");
    assert_eq!(line.connection_reused, p.connection_reused);
    assert_eq!(line.tcp_connect_start_ns.is_none(), p.connection_reused);
    assert_eq!(line.response_bytes_total, p.bytes_received);
    assert_eq!(line.request_bytes_total, p.bytes_sent);
    assert_eq!(line.response_chunks_count, p.chunks_received);
    assert_eq!(line.response_chunks.len() as u64, p.chunks_received);
    let read: u64 = line.response_chunks.iter().map(|c| c.1).sum();
    assert_eq!(read, p.bytes_received, "request {id}: the reads add up");
    assert!(line.response_chunks.windows(2).all(|w| w[0].0 <= w[1].0));
    assert_eq!(line.response_chunks.first().map(|c| c.0), Some(first));
    assert!(line.local_port.is_some() && line.local_ip.as_deref() == Some("127.0.0.1"));
}
