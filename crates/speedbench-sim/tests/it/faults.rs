//! Fault injection on the wire: each fault kind, seen by a raw TCP client.

use std::time::Duration;

use serde_json::Value;
use speedbench_sim::{FaultKind, FaultPlan, SimConfig, SimServer, SpecFlavor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(faults: Vec<FaultPlan>, flavor: SpecFlavor) -> SimServer {
    let config = SimConfig::default()
        .with_faults(faults)
        .with_flavor(flavor)
        .with_output_tokens(8, 16);
    SimServer::start(config, ([127, 0, 0, 1], 0).into())
        .await
        .expect("start")
}

/// Sends one request with `Connection: close` and reads until EOF or 300 ms
/// of silence. Returns the raw bytes and whether EOF was reached.
async fn raw(server: &SimServer, method: &str, path: &str, body: &str) -> (Vec<u8>, bool) {
    let mut tcp = TcpStream::connect(server.local_addr()).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_millis(300), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (out, true),
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => return (out, false),
        }
    }
}

fn chat(stream: bool, prompt: &str) -> String {
    serde_json::json!({
        "messages": [{"role": "user", "content": prompt}],
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
    .to_string()
}

fn text(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

fn json_body(raw: &[u8]) -> Value {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    serde_json::from_slice(&raw[split..]).expect("JSON body")
}

#[tokio::test]
async fn http_status_faults_carry_openai_errors_and_retry_after() {
    let server = start(
        vec![
            FaultPlan::every_nth(FaultKind::HttpStatus(429), 3),
            FaultPlan::every_nth(FaultKind::HttpStatus(503), 2),
        ],
        SpecFlavor::Vllm,
    )
    .await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let (resp, eof) = raw(
            &server,
            "POST",
            "/v1/chat/completions",
            &chat(false, &format!("p{i}")),
        )
        .await;
        assert!(eof);
        let t = text(&resp);
        statuses.push(t[9..12].to_owned());
        if t.starts_with("HTTP/1.1 429") {
            assert!(t.to_ascii_lowercase().contains("retry-after: 1\r\n"), "{t}");
            assert_eq!(json_body(&resp)["error"]["code"], 429);
        }
        if t.starts_with("HTTP/1.1 503") {
            assert!(json_body(&resp)["error"]["message"].is_string());
        }
    }
    assert_eq!(statuses, ["200", "503", "429", "503"]);
    let truth = server.ground_truth();
    assert_eq!(truth.requests, 1, "faulted requests are not completed");
    let ordinals: Vec<_> = truth.faults.iter().map(|f| (f.ordinal, f.kind)).collect();
    assert_eq!(
        ordinals,
        vec![
            (2, FaultKind::HttpStatus(503)),
            (3, FaultKind::HttpStatus(429)),
            (4, FaultKind::HttpStatus(503)),
        ]
    );
    assert_eq!(truth.faults[0].conversation, "p1");
    server.shutdown().await;
}

#[tokio::test]
async fn reset_cuts_the_stream_and_the_body() {
    let kind = FaultKind::ResetMidStream { after_chunks: 2 };
    let server = start(vec![FaultPlan::every_nth(kind, 1)], SpecFlavor::Vllm).await;
    let (resp, eof) = raw(&server, "POST", "/v1/chat/completions", &chat(true, "x")).await;
    assert!(eof, "the server closed the connection");
    let t = text(&resp);
    assert_eq!(t.matches("data: ").count(), 2, "{t}");
    assert!(!t.contains("[DONE]") && !t.ends_with("0\r\n\r\n"), "{t}");
    let (resp, eof) = raw(&server, "POST", "/v1/chat/completions", &chat(false, "x")).await;
    assert!(eof);
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(serde_json::from_slice::<Value>(&resp[split..]).is_err());
    let truth = server.ground_truth();
    assert_eq!((truth.requests, truth.faults.len()), (0, 2));
    server.shutdown().await;
}

#[tokio::test]
async fn malformed_and_non_utf8_chunks_then_done() {
    let server = start(
        vec![
            FaultPlan::every_nth(FaultKind::MalformedJson, 2),
            FaultPlan::every_nth(FaultKind::NonUtf8, 1),
        ],
        SpecFlavor::Vllm,
    )
    .await;
    // Request 1: non-UTF-8 chunk in a stream; request 2: malformed chunk.
    let (resp, _) = raw(&server, "POST", "/v1/chat/completions", &chat(true, "a")).await;
    assert!(resp.windows(2).any(|w| w == [0xFF, 0xFE]));
    assert!(text(&resp).contains("data: [DONE]"));
    let (resp, _) = raw(&server, "POST", "/v1/chat/completions", &chat(true, "b")).await;
    let t = text(&resp);
    assert!(t.contains("data: [DONE]"));
    let bad = t
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .filter(|d| serde_json::from_str::<Value>(d).is_err())
        .count();
    assert_eq!(bad, 1, "{t}");
    // Non-streaming variants: a body that is not JSON / not UTF-8.
    let (resp, _) = raw(&server, "POST", "/v1/chat/completions", &chat(false, "c")).await;
    assert!(std::str::from_utf8(&resp).is_err());
    let (resp, _) = raw(&server, "POST", "/v1/chat/completions", &chat(false, "d")).await;
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(serde_json::from_slice::<Value>(&resp[split..]).is_err());
    assert_eq!(server.ground_truth().requests, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn stall_sends_headers_then_nothing() {
    let server = start(
        vec![FaultPlan::every_nth(FaultKind::Stall, 1)],
        SpecFlavor::Vllm,
    )
    .await;
    let (resp, eof) = raw(&server, "POST", "/v1/chat/completions", &chat(true, "s")).await;
    assert!(!eof, "still open");
    let t = text(&resp);
    assert!(t.starts_with("HTTP/1.1 200"), "{t}");
    assert_eq!(t.matches("data: ").count(), 1, "only the role chunk: {t}");
    let (resp, eof) = raw(&server, "POST", "/v1/chat/completions", &chat(false, "s")).await;
    assert!(!eof && resp.is_empty());
    assert_eq!(server.ground_truth().faults.len(), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn spec_field_faults_corrupt_only_the_stats() {
    for (kind, flavor) in [
        (FaultKind::SpecFieldsMissing, SpecFlavor::Both),
        (FaultKind::SpecFieldsWrongType, SpecFlavor::Both),
    ] {
        let server = start(vec![FaultPlan::every_nth(kind, 1)], flavor).await;
        let (resp, _) = raw(&server, "POST", "/v1/chat/completions", &chat(false, "q")).await;
        let v = json_body(&resp);
        let spec = &v["metrics"]["speculative_decoding"];
        let timings = &v["timings"];
        match kind {
            FaultKind::SpecFieldsMissing => {
                assert!(spec.get("num_accepted_draft_tokens").is_none());
                assert!(spec.get("num_spec_steps").is_none());
                assert!(timings.get("draft_n").is_some());
                assert!(timings.get("draft_n_accepted").is_none());
            }
            _ => {
                assert!(spec["num_accepted_draft_tokens"].is_string());
                assert!(spec["acceptance_histogram"][0].is_string());
                assert!(timings["draft_n_accepted"].is_string());
            }
        }
        assert!(v["choices"][0]["message"]["content"].is_string());
        let truth = server.ground_truth();
        assert_eq!(
            (truth.requests, truth.faults.len()),
            (1, 1),
            "still completed"
        );
        server.shutdown().await;
    }
}

fn drafts(metrics: &str) -> f64 {
    metrics
        .lines()
        .find(|l| l.starts_with("vllm:spec_decode_num_drafts_total{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .expect("drafts counter")
}

#[tokio::test]
async fn counter_reset_restarts_metrics_at_the_chosen_scrape() {
    let server = start(
        vec![FaultPlan::every_nth(FaultKind::CounterReset, 3)],
        SpecFlavor::Vllm,
    )
    .await;
    let scrape = || async { text(&raw(&server, "GET", "/metrics", "").await.0) };
    raw(&server, "POST", "/v1/chat/completions", &chat(false, "one")).await;
    let first = drafts(&scrape().await);
    assert!(first > 0.0);
    raw(&server, "POST", "/v1/chat/completions", &chat(false, "two")).await;
    let second = drafts(&scrape().await);
    assert!(second > first);
    assert_eq!(
        drafts(&scrape().await),
        0.0,
        "third scrape resets: nothing happened since the second"
    );
    raw(
        &server,
        "POST",
        "/v1/chat/completions",
        &chat(false, "three"),
    )
    .await;
    let after = drafts(&scrape().await);
    let truth = server.ground_truth();
    assert_eq!(after, (truth.steps - second as u64) as f64);
    // Increases summed across the reset equal the truth: nothing is lost.
    assert_eq!(second + after, truth.steps as f64);
    assert_eq!(truth.scrapes, 4);
    assert_eq!(truth.counter_resets, vec![3]);
    assert!(truth.faults.is_empty());
    server.shutdown().await;
}
