//! End-to-end against hostile servers. A request is sent once: a server
//! answers the first request of each kept-alive connection, then reads the
//! next, holds it and closes without answering; through either HTTP client
//! it sees exactly one POST per record, the unanswered request is recorded
//! as failed with the reason, and no success is timed from a silent
//! re-send. A response past the size cap (a body, or one stream line) is a
//! failed request naming the cap, and `--max-response-bytes` raises it.

use crate::common;

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use speedbench_record::ErrorKind;

/// Serves until the process ends; returns the URL and the POST count.
fn hostile_server(hold: Duration) -> (String, Arc<AtomicU64>) {
    let posts = Arc::new(AtomicU64::new(0));
    let seen = posts.clone();
    let url = serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        for answered in 0.. {
            let Some(is_post) = read_request(&mut stream, &mut buf) else {
                return;
            };
            if is_post {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            if answered > 0 {
                // Read, held, never answered.
                std::thread::sleep(hold);
                return;
            }
            if stream
                .write_all(json_response("200 OK", CHAT_COMPLETION).as_bytes())
                .is_err()
            {
                return;
            }
        }
    });
    (url, posts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_request_is_recorded_failed_and_never_sent_twice() {
    for client in ["lean", "hyper"] {
        let (url, posts) = hostile_server(Duration::from_millis(1_000));
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
            "--http-client",
            client,
            "--no-server-metrics",
            "--max-error-rate",
            "0.9",
            "--output-artifact-dir",
            run_dir.to_str().unwrap(),
        ])
        .await;
        assert!(out.status.success(), "{client}: {out:?}");
        let records = read_run(&run_dir).unwrap().records;
        assert_eq!(records.len(), 4);
        assert_eq!(
            posts.load(Ordering::SeqCst),
            4,
            "{client}: one POST per record, none sent twice"
        );
        let failed: Vec<_> = records.iter().filter(|r| !r.is_success()).collect();
        assert_eq!(failed.len(), 2, "{client}");
        for r in failed {
            assert_eq!(r.error_kind, Some(ErrorKind::Connection));
            let message = r.error_message.as_deref().unwrap();
            assert!(message.contains("not sent again"), "{client}: {message}");
            // Timed from its one send: the server held it a second.
            assert!(
                r.e2e_latency_ns >= 900_000_000,
                "{client}: {}",
                r.e2e_latency_ns
            );
        }
    }
}

async fn one_request(
    url: &str,
    extra: &[&str],
) -> (std::process::Output, Vec<speedbench_record::RequestRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    std::fs::write(&input, "{\"question_id\": \"q\", \"turns\": [\"hi\"]}\n").unwrap();
    let run_dir = dir.path().join("run");
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--no-server-metrics",
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args).await;
    let records = read_run(&run_dir).unwrap().records;
    (out, records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_past_the_size_cap_fail_naming_it() {
    // A 40 MB answer: past the default 32 MiB cap.
    let content = "a".repeat(40_000_000);
    let body = format!(
        r#"{{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"message":{{"role":"assistant","content":"{content}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}}}"#
    );
    let whole = fixed_server(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    );
    let (out, records) = one_request(&whole, &[]).await;
    assert_eq!(out.status.code(), Some(1), "no request succeeded");
    let message = records[0].error_message.as_deref().unwrap();
    assert!(
        message.contains("the response body passed the cap of 33554432 bytes"),
        "{message}"
    );
    // Lowered to one byte: the message says so in words, naming the flag.
    let (_, records) = one_request(&whole, &["--max-response-bytes", "1"]).await;
    let message = records[0].error_message.as_deref().unwrap();
    assert!(
        message.contains("passed the cap of 1 byte (raise it: --max-response-bytes)"),
        "{message}"
    );
    // Raised, the same answer is a success.
    let (out, records) = one_request(&whole, &["--max-response-bytes", "64000000"]).await;
    assert!(out.status.success());
    assert_eq!(records[0].output_text.len(), 40_000_000);

    // A stream whose one data line is 40 MB.
    let line = format!(r#"data: {{"choices":[{{"index":0,"delta":{{"content":"{content}"}}}}]}}"#);
    let sse = format!("{line}\n\ndata: [DONE]\n\n");
    let stream = fixed_server(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{sse}",
            sse.len()
        )
        .into_bytes(),
    );
    let (out, records) = one_request(&stream, &["--streaming"]).await;
    assert_eq!(out.status.code(), Some(1));
    let message = records[0].error_message.as_deref().unwrap();
    assert!(
        message.contains("a stream line or event passed the cap of 33554432 bytes"),
        "{message}"
    );
    assert_eq!(records[0].error_kind, Some(ErrorKind::Protocol));
}

/// Answers one request on each connection (keep-alive, as its headers say),
/// then closes the connection `delay` later without reading the request the
/// client may have written meanwhile, so the kernel resets it. Serves until
/// the process ends; returns the URL and the question (`question N`) of
/// every POST it read, in the order read.
fn closing_server(delay: Duration) -> (String, Arc<Mutex<Vec<String>>>) {
    let posts = Arc::new(Mutex::new(Vec::new()));
    let seen = posts.clone();
    let url = serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        let Some((line, body)) = read_whole_request(&mut stream, &mut buf) else {
            return;
        };
        if !line.starts_with("post") {
            return;
        }
        let body = String::from_utf8_lossy(&body);
        let question = body
            .find("question ")
            .map(|at| {
                body[at..]
                    .chars()
                    .take_while(|c| *c != '"')
                    .collect::<String>()
            })
            .unwrap_or_else(|| format!("no question in {body}"));
        seen.lock().unwrap().push(question);
        let response = json_response("200 OK", CHAT_COMPLETION);
        if stream.write_all(response.as_bytes()).is_ok() {
            std::thread::sleep(delay);
        }
        // Dropped with whatever arrived since unread: a reset.
    });
    (url, posts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_closing_kept_alive_connections_loses_no_request() {
    const REQUESTS: u64 = 120;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    let rows: String = (0..REQUESTS)
        .map(|i| format!("{{\"question_id\": \"q{i}\", \"turns\": [\"question {i}\"]}}\n"))
        .collect();
    std::fs::write(&input, rows).unwrap();
    for client in ["lean", "hyper"] {
        for delay_ms in [0u64, 5, 200, 1_000] {
            let case = format!("{client}, closed {delay_ms} ms after answering");
            let (url, posts) = closing_server(Duration::from_millis(delay_ms));
            let run_dir = dir.path().join(format!("run-{client}-{delay_ms}"));
            let out = run(&[
                "profile",
                "--url",
                &url,
                "--model",
                "m",
                "--input-file",
                input.to_str().unwrap(),
                "--concurrency",
                "8",
                "--http-client",
                client,
                "--no-server-metrics",
                "--output-artifact-dir",
                run_dir.to_str().unwrap(),
            ])
            .await;
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{case}: {out:?}");
            let records = read_run(&run_dir).unwrap().records;
            assert_eq!(records.len() as u64, REQUESTS, "{case}");
            // Every request reached the server exactly once, and succeeded.
            let mut read = posts.lock().unwrap().clone();
            read.sort();
            let mut expected: Vec<String> =
                (0..REQUESTS).map(|i| format!("question {i}")).collect();
            expected.sort();
            if read != expected {
                let twice: Vec<_> = read
                    .windows(2)
                    .filter(|w| w[0] == w[1])
                    .map(|w| &w[0])
                    .collect();
                let missing: Vec<_> = expected.iter().filter(|q| !read.contains(q)).collect();
                let about: Vec<_> = records
                    .iter()
                    .filter(|r| r.resends > 0 || r.error_message.is_some())
                    .map(|r| (&r.conversation_id, r.resends, &r.error_message))
                    .collect();
                panic!(
                    "{case}: the server read {} POSTs; twice {twice:?}; never {missing:?}; resent or failed records {about:?}",
                    read.len()
                );
            }
            for r in &records {
                assert!(r.is_success(), "{case}: {:?}", r.error_message);
                assert!(r.resends <= 1, "{case}");
                assert!(r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns));
            }
            // A request written twice is said, in the summary and on stdout.
            let resent = records.iter().filter(|r| r.resends > 0).count() as u64;
            let summary: serde_json::Value =
                serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap())
                    .unwrap();
            let counted = summary
                .pointer("/counts/resent")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            assert_eq!(counted, resent, "{case}");
            assert_eq!(
                stdout.contains(&format!("Sent twice: {resent} request")),
                resent > 0,
                "{case}: {stdout}"
            );
            if delay_ms >= 200 {
                // The server holds each connection's second request until
                // it closes: some were written twice, timed from the first
                // write.
                assert!(resent > 0, "{case}");
                for r in records.iter().filter(|r| r.resends > 0) {
                    assert!(
                        r.e2e_latency_ns >= delay_ms * 1_000_000 * 9 / 10,
                        "{case}: {}",
                        r.e2e_latency_ns
                    );
                }
            }
        }
    }
}

/// A server whose `GET /v1/models` answers up to `huge` bytes (chunked, as
/// fast as they are read), whose other GETs are 404 and whose POSTs get a
/// chat completion; returns the URL and how many bytes of the model list
/// it managed to send.
fn huge_model_list_server(huge: u64) -> (String, Arc<AtomicU64>) {
    let sent = Arc::new(AtomicU64::new(0));
    let counted = sent.clone();
    let url = serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        while let Some(line) = read_request_line(&mut stream, &mut buf) {
            let response = if line.starts_with("get /v1/models ") {
                let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = format!("{:x}\r\n{}\r\n", 1 << 16, " ".repeat(1 << 16));
                while counted.load(Ordering::SeqCst) < huge {
                    if stream.write_all(chunk.as_bytes()).is_err() {
                        return;
                    }
                    counted.fetch_add(1 << 16, Ordering::SeqCst);
                }
                "0\r\n\r\n".to_string()
            } else if line.starts_with("post") {
                json_response("200 OK", CHAT_COMPLETION)
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
            };
            if stream.write_all(response.as_bytes()).is_err() {
                return;
            }
        }
    });
    (url, sent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_probe_answer_is_read_no_further_than_the_cap() {
    // 256 MiB on offer; the probe reads at most 4 MiB of it.
    let (url, sent) = huge_model_list_server(256 << 20);
    let (out, records) = one_request(&url, &[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(records[0].is_success());
    assert!(
        stderr.contains("GET /v1/models: the answer passed the probe's cap of 4194304 bytes"),
        "{stderr}"
    );
    // What the server could send: the cap, plus what the kernel's socket
    // buffers held when the client stopped reading.
    let sent = sent.load(Ordering::SeqCst);
    assert!(sent < 32 << 20, "the probe read {sent} bytes");
    // `--max-response-bytes` lowers it further.
    let (url, _) = huge_model_list_server(256 << 20);
    let (out, _) = one_request(&url, &["--max-response-bytes", "100000"]).await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cap of 100000 bytes"),
        "{out:?}"
    );
}
