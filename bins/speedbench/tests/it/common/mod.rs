//! Helpers shared by the end-to-end tests: the fixture, the binary, and the
//! simulated server's per-category profiles.

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;
use std::process::Output;

use speedbench_dataset::Dataset;
use speedbench_record::RequestRecord;
use speedbench_sim::GroundTruth;

/// Starts the simulated server on a free loopback port.
pub(crate) async fn sim(config: speedbench_sim::SimConfig) -> speedbench_sim::SimServer {
    speedbench_sim::SimServer::start(config, ([127, 0, 0, 1], 0).into())
        .await
        .expect("the simulated server starts")
}

pub(crate) fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/speed_bench_mini.jsonl")
}

/// The binary, without `profile`'s preflight request: these tests compare
/// a run with the simulator's ground truth, which counts every request the
/// server answered, and the preflight is one more, outside the run. The
/// preflight itself is tested by engines_e2e and demo_e2e
/// ([`bin_with_preflight`]).
pub(crate) fn bin() -> tokio::process::Command {
    let mut cmd = bin_with_preflight();
    cmd.env("SPEEDBENCH_NO_PREFLIGHT", "true");
    cmd
}

/// The binary as a user runs it, preflight included.
pub(crate) fn bin_with_preflight() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_speedbench"));
    cmd.env_remove("SPEEDBENCH_NO_PREFLIGHT");
    cmd
}

pub(crate) async fn run(args: &[&str]) -> Output {
    output_of(bin(), args).await
}

/// [`run`], preflight included.
pub(crate) async fn run_with_preflight(args: &[&str]) -> Output {
    output_of(bin_with_preflight(), args).await
}

async fn output_of(mut cmd: tokio::process::Command, args: &[&str]) -> Output {
    let out = cmd.args(args).output().await.expect("the binary runs");
    // Piped stderr is no terminal: no colour codes in what a log keeps.
    assert!(
        !out.stderr.contains(&0x1b),
        "ANSI escape codes in the stderr of {args:?}"
    );
    eprintln!(
        "stderr of {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// `report DIR --metric METRIC --source SOURCE --format json`, parsed; the
/// report must succeed.
pub(crate) async fn report_json(
    dir: &std::path::Path,
    metric: &str,
    source: &str,
) -> serde_json::Value {
    let out = run(&[
        "report",
        dir.to_str().unwrap(),
        "--metric",
        metric,
        "--source",
        source,
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success(), "report --source {source}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The first user message and turn number of a record's request, which is
/// how the simulated server's log identifies a request.
pub(crate) fn request_key(dataset: &Dataset, r: &RequestRecord) -> (String, usize) {
    let conv = dataset
        .conversations
        .iter()
        .find(|c| c.id == r.conversation_id)
        .expect("record of a fixture row");
    (conv.turns[0].clone(), r.turn_index as usize + 1)
}

/// Checks every successful record against the server's own log.
pub(crate) fn assert_matches_truth(
    dataset: &Dataset,
    records: &[RequestRecord],
    truth: &GroundTruth,
) {
    for r in records.iter().filter(|r| r.is_success()) {
        let (first, turns) = request_key(dataset, r);
        let t = truth
            .requests_log
            .iter()
            .find(|t| t.conversation == first && t.turns as usize == turns)
            .unwrap_or_else(|| {
                panic!(
                    "no server log entry for {} turn {}",
                    r.conversation_id, r.turn_index
                )
            });
        let spec = r.spec.as_ref().expect("spec stats on every success");
        assert_eq!(
            spec.accepted_draft_tokens, t.accepted,
            "{}",
            r.conversation_id
        );
        assert_eq!(
            spec.proposed_draft_tokens, t.proposed,
            "{}",
            r.conversation_id
        );
        assert_eq!(spec.verify_steps, Some(t.steps), "{}", r.conversation_id);
        assert_eq!(
            r.completion_tokens,
            Some(u64::from(t.completion_tokens)),
            "{}",
            r.conversation_id
        );
    }
}

/// Reads the records file of the run in `dir`, checking on every record the
/// invariants any run must keep (see [`assert_record_invariants`]).
pub(crate) fn read_run(
    dir: &std::path::Path,
) -> Result<speedbench_record::RecordsFile, speedbench_record::RecordError> {
    let file = speedbench_record::read_records_file(dir.join("records.parquet"))?;
    let streaming = file
        .manifest
        .as_ref()
        .and_then(|m| m.config.get("streaming"))
        .and_then(serde_json::Value::as_bool);
    assert_record_invariants(&file.records, streaming);
    Ok(file)
}

/// A run's `run.json`.
pub(crate) fn run_json(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// A run's `summary.json`.
pub(crate) fn summary_json(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// What holds on every record of every run: TTFT within the end-to-end
/// latency (so `e2e_latency_ns - ttft_ns` never underflows), no TTFT without
/// streaming, timestamps in order and equal to the latency, an error message
/// exactly on failures, skipped turns taking no time, and no more draft
/// tokens accepted than proposed.
pub(crate) fn assert_record_invariants(records: &[RequestRecord], streaming: Option<bool>) {
    use speedbench_record::ErrorKind;
    for r in records {
        let id = (&r.conversation_id, r.turn_index, r.request_index);
        if let Some(ttft) = r.ttft_ns {
            assert!(
                ttft <= r.e2e_latency_ns,
                "ttft {ttft} > e2e {} in {id:?}",
                r.e2e_latency_ns
            );
        }
        if streaming == Some(false) {
            assert_eq!(r.ttft_ns, None, "a TTFT without streaming in {id:?}");
        }
        assert!(
            r.end_unix_ns >= r.start_unix_ns,
            "end before start in {id:?}"
        );
        assert_eq!(
            (r.end_unix_ns - r.start_unix_ns) as u64,
            r.e2e_latency_ns,
            "timestamps and latency disagree in {id:?}"
        );
        assert_eq!(
            r.error_kind.is_some(),
            r.error_message.is_some(),
            "error kind and message in {id:?}"
        );
        if r.error_kind == Some(ErrorKind::Skipped) {
            assert_eq!(r.e2e_latency_ns, 0, "a skipped turn took time in {id:?}");
            assert_eq!(r.http_status, None, "a skipped turn has a status in {id:?}");
        }
        if let Some(s) = &r.spec {
            assert!(
                s.accepted_draft_tokens <= s.proposed_draft_tokens,
                "more accepted than proposed in {id:?}"
            );
        }
        if let Some(p) = &r.http_phases {
            assert_phase_invariants(r, p);
        }
    }
}

/// What holds on every record's HTTP phases: a complete response's
/// sending, waiting and receiving are its latency exactly (first write to
/// last byte), the first byte comes no later than the first token, a
/// reused connection took no connecting, and bytes went both ways.
fn assert_phase_invariants(r: &RequestRecord, p: &speedbench_record::HttpPhases) {
    let id = (&r.conversation_id, r.turn_index, r.request_index);
    if r.is_success() && r.resends == 0 {
        assert_eq!(
            p.sending_ns + p.waiting_ns + p.receiving_ns,
            r.e2e_latency_ns,
            "HTTP phases and latency disagree in {id:?}: {p:?}"
        );
    }
    if let Some(ttft) = r.ttft_ns.filter(|_| r.resends == 0) {
        assert!(
            p.sending_ns + p.waiting_ns <= ttft,
            "first byte after the first token in {id:?}: {p:?}"
        );
    }
    if p.connection_reused {
        assert_eq!(
            (p.dns_lookup_ns, p.connecting_ns),
            (0, 0),
            "a reused connection connected in {id:?}"
        );
    }
    assert!(
        p.bytes_sent > 0 && p.chunks_sent > 0 && p.bytes_received > 0 && p.chunks_received > 0,
        "no bytes one way in {id:?}: {p:?}"
    );
}

/// Starts the binary profiling the fixture at concurrency 2, output piped.
pub(crate) fn spawn_profile(
    server: &speedbench_sim::SimServer,
    out_dir: &std::path::Path,
) -> tokio::process::Child {
    spawn_profile_with(server, out_dir, &["--concurrency", "2"])
}

/// Starts the binary streaming the fixture with `extra` flags, output piped.
pub(crate) fn spawn_profile_with(
    server: &speedbench_sim::SimServer,
    out_dir: &std::path::Path,
    extra: &[&str],
) -> tokio::process::Child {
    bin()
        .args([
            "profile",
            "--url",
            &server.url(),
            "--model",
            "m",
            "--input-file",
            fixture().to_str().unwrap(),
            "--streaming",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

pub(crate) async fn wait_for_requests(server: &speedbench_sim::SimServer, n: u64) {
    for _ in 0..2000 {
        if server.ground_truth().requests >= n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the server never completed {n} requests");
}

/// Reads one whole request (its head and `Content-Length` body) from
/// `stream`, keeping what follows it in `buf`; whether it was a POST, or
/// `None` once the connection ends.
pub(crate) fn read_request(stream: &mut std::net::TcpStream, buf: &mut Vec<u8>) -> Option<bool> {
    read_request_line(stream, buf).map(|line| line.starts_with("post"))
}

/// [`read_request`], giving the request line (lowercased) instead.
pub(crate) fn read_request_line(
    stream: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<String> {
    read_whole_request(stream, buf).map(|(line, _)| line)
}

/// [`read_request`], giving the request line (lowercased) and the body.
pub(crate) fn read_whole_request(
    stream: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>)> {
    read_sized_request(stream, buf).map(|(line, body, _)| (line, body))
}

/// [`read_whole_request`], with the request's size on the wire: its head,
/// the blank line and its body.
pub(crate) fn read_sized_request(
    stream: &mut std::net::TcpStream,
    buf: &mut Vec<u8>,
) -> Option<(String, Vec<u8>, usize)> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                let body = buf[end + 4..end + 4 + len].to_vec();
                buf.drain(..end + 4 + len);
                let line = head.lines().next().unwrap_or_default().to_string();
                return Some((line, body, end + 4 + len));
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Serves every connection to a new loopback listener with `serve` on a
/// thread of its own, for as long as the process lives; returns the URL.
pub(crate) fn serve_connections(
    serve: impl Fn(std::net::TcpStream) + Send + Sync + 'static,
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serve = std::sync::Arc::new(serve);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let serve = serve.clone();
            std::thread::spawn(move || serve(stream));
        }
    });
    url
}

/// A whole HTTP/1.1 response with a JSON `body`.
pub(crate) fn json_response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A one-token chat completion, as an OpenAI-compatible server answers.
pub(crate) const CHAT_COMPLETION: &str = r#"{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;

/// Serves the whole HTTP responses in `responses` in turn, one per
/// request whatever its connection, for as long as the process lives;
/// returns the URL.
pub(crate) fn rotating_server(responses: Vec<Vec<u8>>) -> String {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        while read_request(&mut stream, &mut buf).is_some() {
            let i = next.fetch_add(1, Ordering::SeqCst) % responses.len();
            if stream.write_all(&responses[i]).is_err() {
                return;
            }
        }
    })
}

/// Serves `response` (a whole HTTP response) to every request.
pub(crate) fn fixed_server(response: Vec<u8>) -> String {
    rotating_server(vec![response])
}

/// `speedbench compare` of the runs in `base` and `spec`, no bootstrap,
/// with `extra`.
pub(crate) async fn compare_dirs(
    base: &std::path::Path,
    spec: &std::path::Path,
    extra: &[&str],
) -> Output {
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
