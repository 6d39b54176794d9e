//! The client on the wire: HTTPS on loopback and awkward SSE streams.

use crate::common;

use common::*;
use speedbench_client::{Load, discover_model_with_roots};
use speedbench_record::ErrorKind;
use speedbench_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_private_ca_reaches_the_server() {
    let sim = start_sim(SimConfig::default()).await;
    let front = tls_front(sim.local_addr()).await;
    let url = format!("https://127.0.0.1:{}", front.addr.port());
    let roots = vec![front.ca_pem.clone().into_bytes()];

    let base = speedbench_client::BaseUrl::parse(&url).unwrap();
    let model = discover_model_with_roots(&base, None, &roots)
        .await
        .unwrap();
    assert_eq!(model, "speedbench-sim");

    let dir = tempfile::tempdir().unwrap();
    let mut t = target(&url);
    t.extra_roots_pem = roots;
    t.max_tokens = Some(8);
    let load = Load::closed_loop(2);
    let records = profile(dir.path(), single_turns(4), t, load).await;
    assert_eq!(records.len(), 4);
    assert!(
        records.iter().all(|r| r.is_success()),
        "{:?}",
        records[0].error_message
    );
    assert!(records.iter().all(|r| r.completion_tokens == Some(8)));
    assert_eq!(sim.ground_truth().requests, 4);

    // Without the CA the same server is refused, and the row says why.
    let dir = tempfile::tempdir().unwrap();
    let records = profile(dir.path(), single_turns(1), target(&url), Load::default()).await;
    assert_eq!(records[0].error_kind, Some(ErrorKind::Connection));
    let msg = records[0].error_message.clone().unwrap_or_default();
    assert!(msg.to_lowercase().contains("certificate"), "{msg}");
    sim.shutdown().await;
}

const ROLE: &str = r#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
const DONE: &str = "[DONE]";

fn content(s: &str) -> String {
    format!(r#"{{"choices":[{{"delta":{{"content":"{s}"}}}}]}}"#)
}

async fn one_request(script: Vec<Piece>) -> speedbench_record::RequestRecord {
    let addr = scripted_sse(script).await;
    let dir = tempfile::tempdir().unwrap();
    let mut records = profile(
        dir.path(),
        single_turns(1),
        target(&addr.to_string()),
        Load::default(),
    )
    .await;
    assert_eq!(records.len(), 1);
    records.remove(0)
}

#[tokio::test]
async fn an_error_object_mid_stream_fails_the_request_with_its_message() {
    let r = one_request(vec![
        data(0, ROLE),
        data(0, &content("partial")),
        data(
            0,
            r#"{"error":{"message":"engine died","type":"InternalServerError","code":500}}"#,
        ),
        data(0, DONE),
    ])
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::ServerError));
    assert_eq!(r.error_message.as_deref(), Some("engine died"));
    assert_eq!(r.output_text, "partial");
}

#[tokio::test]
async fn an_error_event_then_a_close_keeps_the_servers_message() {
    let r = one_request(vec![
        data(0, ROLE),
        data(0, &content("partial")),
        data(
            0,
            r#"{"error":{"message":"CUDA out of memory","type":"InternalServerError","code":500}}"#,
        ),
    ])
    .await;
    assert_eq!(r.error_kind, Some(ErrorKind::ServerError));
    let message = r.error_message.unwrap();
    assert!(
        message.starts_with("CUDA out of memory (then the stream ended: ")
            && message.contains("[DONE]"),
        "{message}"
    );
    assert_eq!(r.output_text, "partial");
}

#[tokio::test]
async fn keep_alive_comments_are_not_output_and_do_not_start_the_clock() {
    let r = one_request(vec![
        data(0, ROLE),
        raw(0, ": keep-alive\n\n"),
        raw(20, ":\n\n"),
        data(20, &content("hi")),
        raw(0, ": ping\n\n"),
        data(0, &content(" there")),
        data(
            0,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        ),
        data(0, DONE),
    ])
    .await;
    assert!(r.is_success(), "{:?}", r.error_message);
    assert_eq!(r.output_text, "hi there");
    assert_eq!(r.output_chunks, 2);
    assert_eq!(r.completion_tokens, Some(2));
    // The first content came 40 ms after the headers; comments do not count.
    assert!(r.ttft_ns.unwrap() >= 40_000_000, "{:?}", r.ttft_ns);
}

#[tokio::test]
async fn reasoning_content_is_output_and_starts_the_clock() {
    let r = one_request(vec![
        data(0, ROLE),
        data(
            30,
            r#"{"choices":[{"delta":{"reasoning_content":"let me think"}}]}"#,
        ),
        data(30, &content(" answer")),
        data(0, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#),
        data(0, DONE),
    ])
    .await;
    assert!(r.is_success(), "{:?}", r.error_message);
    assert_eq!(r.output_text, "let me think answer");
    // Both chunks are output, and the clock starts at the first of them
    // (a lower bound only: the timing tests bound medians from above).
    assert_eq!(r.output_chunks, 2);
    assert_eq!(r.inter_chunk_latencies_ns.len(), 1);
    assert!(r.ttft_ns.unwrap() >= 30_000_000, "{:?}", r.ttft_ns);
    assert_eq!(r.finish_reason.as_deref(), Some("stop"));
}

#[tokio::test]
async fn a_stream_cut_before_done_is_a_truncated_protocol_error() {
    let r = one_request(vec![data(0, ROLE), data(0, &content("x"))]).await;
    assert_eq!(r.error_kind, Some(ErrorKind::Protocol));
    assert!(r.error_message.unwrap().contains("[DONE]"));
}

/// A payload that cannot be right is named in the record; where its
/// message quotes the server's value, a credential in it is not kept.
#[tokio::test]
async fn a_malformed_payload_quoting_a_credential_is_named_without_it() {
    let secret = "sk-proj-0123456789abcdefXYZ";
    let r = one_request(vec![
        data(0, ROLE),
        data(0, &content("x")),
        data(
            0,
            &format!(
                r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop","avg_decoded_tokens_per_iter":"{secret}"}}]}}"#
            ),
        ),
        data(0, DONE),
    ])
    .await;
    assert!(r.is_success(), "{:?}", r.error_message);
    assert_eq!(r.tokens_per_iteration, None);
    let dropped = r.spec_dropped.expect("the malformed payload is named");
    assert!(
        dropped.contains("avg_decoded_tokens_per_iter") && dropped.contains("<redacted>"),
        "{dropped}"
    );
    assert!(!dropped.contains(secret), "{dropped}");
}
