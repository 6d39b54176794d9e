//! What a run waits for before its first request, said and bounded: the
//! engine probes go out at once under one budget (a server that never
//! answers them costs 5 s, not 5 s per endpoint) and name what timed out;
//! probes that name different engines are said to disagree; a stalled
//! preflight is stopped by Ctrl-C as a stop, not waited on for the whole
//! request timeout.

use crate::common;

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;

/// How the stub answers a request line (`get /props http/1.1`, lowercase).
type Behaviour = fn(&str) -> Option<String>;

/// Serves until the process ends: each request gets `answer`'s response,
/// or is held unanswered (`None`) for a minute. Returns the URL and the
/// count of POSTs read.
fn stub(answer: Behaviour) -> (String, Arc<AtomicU64>) {
    let posts = Arc::new(AtomicU64::new(0));
    let seen = posts.clone();
    let url = serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        while let Some(line) = read_request_line(&mut stream, &mut buf) {
            if line.starts_with("post") {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            let Some(response) = answer(&line) else {
                std::thread::sleep(Duration::from_secs(60));
                return;
            };
            if stream.write_all(response.as_bytes()).is_err() {
                return;
            }
        }
    });
    (url, posts)
}

fn one_row(dir: &std::path::Path) -> std::path::PathBuf {
    let input = dir.join("rows.jsonl");
    std::fs::write(
        &input,
        "{\"question_id\": \"q\", \"turns\": [\"the question\"]}\n",
    )
    .unwrap();
    input
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hanging_probes_cost_one_budget_and_are_named() {
    // Every GET hangs; POSTs are answered.
    let (url, posts) = stub(|line| {
        line.starts_with("post")
            .then(|| json_response("200 OK", CHAT_COMPLETION))
    });
    let dir = tempfile::tempdir().unwrap();
    let input = one_row(dir.path());
    let started = Instant::now();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(posts.load(Ordering::SeqCst), 1);
    // What is waited for is said before it is waited for.
    assert!(
        stderr.contains("finding the engine: asking /v1/models, /get_server_info, /props, /prometheus/metrics, /metrics, /v1/metrics at once, at most 5 s"),
        "{stderr}"
    );
    // They timed out, and the evidence says so (not "no endpoint answered").
    assert!(
        stderr.contains(
            "engine: openai (no engine-specific endpoint or name answered (GET /v1/models, \
             GET /get_server_info, GET /props, GET /prometheus/metrics, GET /metrics, GET \
             /v1/metrics timed out after 5 s))"
        ),
        "{stderr}"
    );
    // One budget, not six of them one after another (30 s before).
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_that_name_different_engines_are_said_to_disagree() {
    let (url, _) = stub(|line| {
        Some(match line.split(' ').nth(1).unwrap_or_default() {
            "/v1/models" => json_response(
                "200 OK",
                r#"{"object":"list","data":[{"id":"m","owned_by":"vllm"}]}"#,
            ),
            "/get_server_info" => json_response("200 OK", r#"{"version":"0.5"}"#),
            "/props" => json_response("200 OK", r#"{"total_slots":1}"#),
            "/v1/chat/completions" => json_response("200 OK", CHAT_COMPLETION),
            _ => json_response("404 Not Found", "{}"),
        })
    });
    let dir = tempfile::tempdir().unwrap();
    let input = one_row(dir.path());
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--input-file",
        input.to_str().unwrap(),
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "engine: vllm (GET /v1/models: owned_by \"vllm\"; the probes disagree, taken in \
             order: also GET /get_server_info answered (sglang), GET /props answered (llamacpp))"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_preflight_is_said_and_stopped_as_a_stop() {
    // Probes answer 404 at once; every POST (the preflight) hangs.
    let (url, posts) =
        stub(|line| (!line.starts_with("post")).then(|| json_response("404 Not Found", "{}")));
    let dir = tempfile::tempdir().unwrap();
    let input = one_row(dir.path());
    let child = bin_with_preflight()
        .args([
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--input-file",
            input.to_str().unwrap(),
            "--no-server-metrics",
            "--output-artifact-dir",
            dir.path().join("run").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The preflight is under way once the server has read it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while posts.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        posts.load(Ordering::SeqCst),
        1,
        "the preflight reached the server"
    );
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) };
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("a stop ends the wait for the preflight")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("preflight: one small request to see whether acceptance comes back per request, at most 60 s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped while sending the preflight: no request of the run was sent"),
        "{stderr}"
    );
    assert!(!stderr.contains("closed the connection"), "{stderr}");
}
