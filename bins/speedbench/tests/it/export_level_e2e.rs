//! `speedbench profile --export-level summary|records|raw`, as AIPerf has
//! it: which files each level leaves, the raw response bodies (the wire
//! text of every request, credentials scrubbed), and what `report` and
//! `compare` say about a run that kept no records.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use serde_json::Value;
use speedbench_client::{RawResponse, RunSummary};
use speedbench_sim::SimConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn profile(
    url: &str,
    dir: &Path,
    level: Option<&str>,
    streaming: bool,
) -> std::process::Output {
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--model",
        "m",
        "--input-file",
        fixture.to_str().unwrap(),
        "--concurrency",
        "2",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        dir.to_str().unwrap(),
    ];
    if streaming {
        args.push("--streaming");
    }
    if let Some(level) = level {
        args.extend(["--export-level", level]);
    }
    let out = run(&args).await;
    assert!(out.status.success(), "{level:?}: {}", stderr(&out));
    out
}

fn raw_lines(dir: &Path) -> Vec<RawResponse> {
    std::fs::read_to_string(dir.join("raw_responses.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The generated text a raw body carries: the streamed deltas' content
/// joined, or the message content of a JSON body.
fn text_of(raw: &RawResponse) -> String {
    if raw.content_type.as_deref() == Some("text/event-stream") {
        raw.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter_map(|v| {
                v["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(String::from)
            })
            .collect()
    } else {
        let v: Value = serde_json::from_str(&raw.body).unwrap();
        v["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    }
}

fn export_level_of(dir: &Path) -> Value {
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    m["config"]["export_level"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_level_keeps_its_files() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(8, 24)).await;
    let url = server.url();
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name);

    // The default is today's: records, no raw bodies.
    profile(&url, &dir("default"), None, true).await;
    assert!(dir("default").join("records.parquet").is_file());
    assert!(!dir("default").join("raw_responses.jsonl").exists());
    assert_eq!(export_level_of(&dir("default")), "records");
    profile(&url, &dir("records"), Some("records"), true).await;
    assert!(dir("records").join("records.parquet").is_file());
    assert!(!dir("records").join("raw_responses.jsonl").exists());

    // Summary: the run-level files only.
    let out = profile(&url, &dir("summary"), Some("summary"), true).await;
    for kept in ["run.json", "summary.json", "server_metrics_export.json"] {
        assert!(dir("summary").join(kept).is_file(), "{kept}");
    }
    for gone in [
        "records.parquet",
        "records.parquet.partial",
        "raw_responses.jsonl",
    ] {
        assert!(!dir("summary").join(gone).exists(), "{gone}");
    }
    assert_eq!(export_level_of(&dir("summary")), "summary");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("LLM Metrics"),
        "the run summary is printed: {stdout}"
    );
    assert!(
        stderr(&out).contains("summarised, not kept (--export-level summary)"),
        "{}",
        stderr(&out)
    );
    let summary: RunSummary = serde_json::from_str(
        &std::fs::read_to_string(dir("summary").join("summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary.status, "completed");
    let records = read_run(&dir("records")).unwrap().records;
    let measured = records.iter().filter(|r| !r.warmup).count() as u64;
    assert_eq!(
        summary.metrics.counts.succeeded, measured,
        "same fixture, same requests"
    );

    // Raw: records plus one line per request, keyed by request_index.
    profile(&url, &dir("raw"), Some("raw"), true).await;
    profile(&url, &dir("raw-json"), Some("raw"), false).await;
    server.shutdown().await;
    for (name, content_type) in [
        ("raw", "text/event-stream"),
        ("raw-json", "application/json"),
    ] {
        let records = read_run(&dir(name)).unwrap().records;
        let raws = raw_lines(&dir(name));
        assert_eq!(raws.len(), records.len(), "{name}: a line per request");
        let indices: BTreeSet<u64> = raws.iter().map(|r| r.request_index).collect();
        assert_eq!(
            indices,
            records.iter().map(|r| r.request_index).collect(),
            "{name}"
        );
        for raw in &raws {
            let r = records
                .iter()
                .find(|r| r.request_index == raw.request_index)
                .unwrap();
            assert_eq!(raw.run_id, r.run_id);
            assert_eq!(
                (&raw.conversation_id, raw.turn_index),
                (&r.conversation_id, r.turn_index)
            );
            assert_eq!(raw.http_status, Some(200));
            assert!(
                raw.content_type
                    .as_deref()
                    .unwrap()
                    .starts_with(content_type),
                "{raw:?}"
            );
            // The body is what the server sent: its text is the record's.
            assert_eq!(
                text_of(raw),
                r.output_text,
                "{name} request {}",
                r.request_index
            );
            if content_type == "text/event-stream" {
                assert!(raw.body.ends_with("data: [DONE]\n\n"), "{:?}", raw.body);
            }
        }
    }

    // report over the summary-level run: its run-level figures, and why
    // there is nothing per category.
    let csv = tmp.path().join("summary.csv");
    let out = run(&[
        "report",
        dir("summary").to_str().unwrap(),
        "--format",
        "csv",
        "--output",
        csv.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no per-request records (it was profiled with --export-level summary)"),
        "{err}"
    );
    assert!(err.contains("accept_length from summary"), "{err}");
    let al = summary
        .metrics
        .spec_decode
        .token_weighted_acceptance_length()
        .unwrap();
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        csv,
        format!("Model,mini,Overall\r\nm,{al:.2},{al:.2}\r\n"),
        "one column for the whole run, from summary.json"
    );
    // A metric only records give: refused, saying why.
    let out = run(&[
        "report",
        dir("summary").to_str().unwrap(),
        "--metric",
        "latency",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("no per-request records"), "{err}");
    assert!(err.contains("no run gave a latency value"), "{err}");
    // Beside runs that kept records, it is one more row.
    let out = run(&["report", tmp.path().to_str().unwrap(), "--format", "json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 5, "{json}");

    // compare needs the records of both sides.
    for (base, spec, role) in [
        ("summary", "records", "baseline"),
        ("records", "summary", "speculative"),
    ] {
        let out = run(&[
            "compare",
            "--baseline",
            dir(base).to_str().unwrap(),
            "--speculative",
            dir(spec).to_str().unwrap(),
        ])
        .await;
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "the {role} run {} has only summary.json, no records.parquet (it was profiled \
                 with --export-level summary)",
                dir("summary").display()
            )),
            "{err}"
        );
        assert!(err.contains("--export-level records"), "{err}");
    }
    // A records-level run whose records file went missing says so, not
    // that it was profiled at the summary level.
    let lost = dir("records");
    std::fs::remove_file(lost.join("records.parquet")).unwrap();
    let out = run(&[
        "compare",
        "--baseline",
        lost.to_str().unwrap(),
        "--speculative",
        dir("records").to_str().unwrap(),
    ])
    .await;
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("(it was profiled with --export-level records, so the file was lost or removed after the run)"),
        "{err}"
    );

    // speed_bench.py's --output JSON is built from records: refused before
    // anything is sent.
    let out = run(&[
        "profile",
        "--url",
        "127.0.0.1:9",
        "--model",
        "m",
        "--input-file",
        fixture().to_str().unwrap(),
        "--export-level",
        "summary",
        "--output",
        tmp.path().join("sb.json").to_str().unwrap(),
        "--output-artifact-dir",
        dir("refused").to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("--export-level summary does not keep"),
        "{}",
        stderr(&out)
    );
    assert!(!dir("refused").exists());
    let out = run(&[
        "profile",
        "--export-level",
        "full",
        "--model",
        "m",
        "--input-file",
        "x",
    ])
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown export level \"full\": use summary, records or raw"),
        "{}",
        stderr(&out)
    );
}

const KEY: &str = "sk-test-SECRET123";
/// A header value with quotes: JSON escapes it, and the escaped form must
/// go too.
const QUOTED: &str = "zz\"SECRET789\"";
/// A header value with slashes, which some servers escape as `\/`.
const SLASHED: &str = "ab/SECRET456/cd";

/// A chat server that streams back, in the generated text and in an extra
/// field, the credentials it was sent (as a misconfigured proxy or a debug
/// endpoint does), then answers as usual.
async fn echo_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Headers, then the body its Content-Length announces.
                let head_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
                let header = |name: &str| {
                    head.lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                        })
                        .unwrap_or_default()
                };
                let length: usize = header("content-length").parse().unwrap_or(0);
                while buf.len() < head_end + length {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let (auth, token, path) =
                    (header("authorization"), header("x-token"), header("x-path"));
                // The same values as other servers write them: `/` escaped
                // as `\/`, percent-encoded, every character as \uXXXX.
                let percent: String = token
                    .bytes()
                    .map(|b| match b {
                        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
                        _ => format!("%{b:02X}"),
                    })
                    .collect();
                let unicode: String = token
                    .encode_utf16()
                    .map(|u| format!("\\u{u:04x}"))
                    .collect();
                let slashed = path.replace('/', "\\/");
                let content = serde_json::json!({"choices": [{"index": 0,
                    "delta": {"role": "assistant", "content": format!("you sent {auth} and {token}")}}]});
                let last = serde_json::json!({"choices": [{"index": 0, "delta": {},
                    "finish_reason": "stop"}], "debug_headers": {"authorization": auth, "x-token": token},
                    "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}});
                let encoded = format!(
                    r#"{{"choices":[],"echo":{{"path":"{slashed}","query":"?t={percent}","unicode":"{unicode}"}}}}"#
                );
                let body = format!(
                    "data: {content}\n\ndata: {last}\n\ndata: {encoded}\n\ndata: [DONE]\n\n"
                );
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_bodies_are_scrubbed_of_the_credentials_the_server_echoed() {
    let url = echo_server().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("raw");
    let rows = tmp.path().join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"question_id\": \"q1\", \"category\": \"qa\", \"turns\": [\"Hi\", \"Again\"]}\n\
         {\"question_id\": \"q2\", \"category\": \"qa\", \"turns\": [\"Hello\"]}\n",
    )
    .unwrap();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        rows.to_str().unwrap(),
        "--streaming",
        "--no-server-metrics",
        "--api-key",
        KEY,
        "-H",
        &format!("X-Token: {QUOTED}"),
        "-H",
        &format!("X-Path: {SLASHED}"),
        "--export-level",
        "raw",
        "--output-artifact-dir",
        dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let raws = raw_lines(&dir);
    assert_eq!(raws.len(), 3, "two turns and one");
    for raw in &raws {
        // The server did echo them: each place now holds the marker.
        assert!(
            raw.body
                .contains("you sent Bearer <redacted> and <redacted>"),
            "{}",
            raw.body
        );
        assert!(
            raw.body.contains(
                r#""debug_headers":{"authorization":"Bearer <redacted>","x-token":"<redacted>"}"#
            ),
            "{}",
            raw.body
        );
    }
    // Nowhere in the directory, raw file and records included.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        // Also the \uXXXX form of the quoted token's core.
        let unicode_core: String = "SECRET789"
            .encode_utf16()
            .map(|u| format!("\\u{u:04x}"))
            .collect();
        for core in ["SECRET123", "SECRET789", "SECRET456", unicode_core.as_str()] {
            assert!(
                !bytes.windows(core.len()).any(|w| w == core.as_bytes()),
                "{core} leaked into {}",
                path.display()
            );
        }
    }
    let records = read_run(&dir).unwrap().records;
    assert!(records.iter().all(|r| r.is_success()));
    assert!(records.iter().all(|r| !r.output_text.contains("SECRET")));
}
