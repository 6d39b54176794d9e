//! End-to-end tests over real loopback HTTP.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{chat, content_chunks, post, prom_sum, send, streamed_text};
use serde_json::{Value, json};
use speedbench_sim::{AcceptanceProfile, Chunking, SimConfig, SimServer, SpecFlavor};

async fn start(config: SimConfig) -> SimServer {
    SimServer::start(config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("start")
}

const CHAT: &str = "/v1/chat/completions";

fn spec_of(v: &Value) -> &Value {
    &v["metrics"]["speculative_decoding"]
}

fn check_spec_invariants(spec: &Value, completion_tokens: u64) {
    let steps = spec["num_spec_steps"].as_u64().expect("steps");
    let accepted = spec["num_accepted_draft_tokens"]
        .as_u64()
        .expect("accepted");
    let k = spec["num_spec_tokens"].as_u64().expect("k");
    let hist: Vec<u64> =
        serde_json::from_value(spec["acceptance_histogram"].clone()).expect("hist");
    assert_eq!(hist.len() as u64, k + 1);
    assert_eq!(hist.iter().sum::<u64>(), steps);
    let weighted: u64 = hist.iter().enumerate().map(|(j, c)| j as u64 * c).sum();
    assert_eq!(weighted, accepted);
    assert_eq!(spec["num_draft_tokens"].as_u64(), Some(steps * k));
    if k > 0 {
        assert_eq!(steps + accepted, completion_tokens);
        let al = spec["mean_acceptance_length"].as_f64().expect("al");
        assert!((al - (1.0 + accepted as f64 / steps as f64)).abs() < 1e-9);
    }
}

#[tokio::test]
async fn health_models_and_errors() {
    let s = start(SimConfig::default()).await;
    let a = s.local_addr();
    let r = send(a, "GET", "/health", None).await;
    assert_eq!((r.status, r.json()), (200, json!({"status": "ok"})));
    let r = send(a, "GET", "/v1/models", None).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["data"][0]["id"], "speedbench-sim");
    let r = send(a, "GET", "/nope", None).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], 404);
    let r = send(a, "GET", CHAT, None).await;
    assert_eq!(r.status, 405);
    for bad in [
        "{not json",
        r#"{"messages": "x"}"#,
        r#"{"messages": []}"#,
        r#"{"messages":[{"role":"user","content":"x"}],"max_tokens":0}"#,
    ] {
        let r = send(a, "POST", CHAT, Some(bad)).await;
        assert_eq!(r.status, 400, "{bad}");
        let e = &r.json()["error"];
        assert_eq!(e["type"], "invalid_request_error");
        assert_eq!(e["code"], 400);
        assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(s.ground_truth().requests, 0);
    assert!(s.url().starts_with("http://127.0.0.1:"));
    s.shutdown().await;
    // The listener is gone after shutdown.
    assert!(tokio::net::TcpStream::connect(a).await.is_err());
}

#[tokio::test]
async fn non_streaming_vllm_matches_ground_truth() {
    let s = start(SimConfig::default().with_detailed(true)).await;
    let r = post(
        s.local_addr(),
        CHAT,
        &chat("Explain speculative decoding please", json!({})),
    )
    .await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let content = v["choices"][0]["message"]["content"]
        .as_str()
        .expect("content");
    let completion = v["usage"]["completion_tokens"].as_u64().expect("ct");
    assert_eq!(content.split_whitespace().count() as u64, completion);
    assert!((48..=160).contains(&completion));
    assert_eq!(v["usage"]["prompt_tokens"], 4);
    assert_eq!(v["usage"]["total_tokens"].as_u64(), Some(completion + 4));
    assert!(v.get("timings").is_none());
    let spec = spec_of(&v);
    check_spec_invariants(spec, completion);
    assert_eq!(
        spec["per_step_accepted"].as_array().map(Vec::len),
        spec["num_spec_steps"].as_u64().map(|n| n as usize)
    );

    let t = s.ground_truth();
    assert_eq!(t.requests, 1);
    let rt = &t.requests_log[0];
    assert_eq!(rt.conversation, "Explain speculative decoding please");
    assert_eq!(rt.turns, 1);
    assert_eq!(u64::from(rt.completion_tokens), completion);
    assert_eq!(Some(rt.steps), spec["num_spec_steps"].as_u64());
    assert_eq!(
        Some(rt.accepted),
        spec["num_accepted_draft_tokens"].as_u64()
    );
    assert_eq!(Some(rt.proposed), spec["num_draft_tokens"].as_u64());
    assert_eq!(
        t.histogram,
        serde_json::from_value::<Vec<u64>>(spec["acceptance_histogram"].clone()).expect("h")
    );
    // The same log, for a client in another process.
    let r = send(s.local_addr(), "GET", "/debug/requests", None).await;
    assert_eq!(r.status, 200);
    let served: Vec<speedbench_sim::RequestTruth> =
        serde_json::from_value(r.json()["requests"].clone()).expect("request log");
    assert_eq!(served, t.requests_log);
    s.shutdown().await;
}

#[tokio::test]
async fn streaming_per_step_vllm() {
    let s = start(SimConfig::default()).await;
    let a = s.local_addr();
    let prompt = "Write a haiku about tokens";
    let full = post(a, CHAT, &chat(prompt, json!({}))).await.json();
    let full_text = full["choices"][0]["message"]["content"]
        .as_str()
        .expect("c")
        .to_owned();

    let r = post(
        a,
        CHAT,
        &chat(
            prompt,
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
    );
    assert_eq!(r.events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    let chunks = r.chunks();
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(streamed_text(&chunks), full_text);
    let usage_chunk = chunks.last().expect("usage chunk");
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["usage"], full["usage"]);
    assert_eq!(spec_of(usage_chunk), spec_of(&full));
    // vLLM stats ride only the usage chunk; no llama.cpp timings anywhere.
    assert_eq!(
        chunks.iter().filter(|c| c.get("metrics").is_some()).count(),
        1
    );
    assert!(chunks.iter().all(|c| c.get("timings").is_none()));
    // One content chunk per verify step; the last one carries finish_reason.
    let content = content_chunks(&chunks);
    assert_eq!(
        Some(content.len() as u64),
        spec_of(&full)["num_spec_steps"].as_u64()
    );
    let finishes: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .collect();
    assert_eq!(finishes.len(), 1);
    assert_eq!(finishes[0]["choices"][0]["finish_reason"], "stop");

    // Without include_usage: no usage chunk and (as in vLLM) no spec stats.
    let r = post(a, CHAT, &chat(prompt, json!({"stream": true}))).await;
    let chunks = r.chunks();
    assert_eq!(streamed_text(&chunks), full_text);
    assert!(
        chunks
            .iter()
            .all(|c| c.get("usage").is_none() && c.get("metrics").is_none())
    );
    assert_eq!(s.ground_truth().requests, 3);
    s.shutdown().await;
}

#[tokio::test]
async fn streaming_per_token_llamacpp_timings_placement() {
    let s = start(
        SimConfig::default()
            .with_flavor(SpecFlavor::LlamaCpp)
            .with_chunking(Chunking::PerToken),
    )
    .await;
    let a = s.local_addr();
    let prompt = "Summarise the plot of a novel";
    let full = post(a, CHAT, &chat(prompt, json!({}))).await.json();
    assert!(full.get("metrics").is_none());
    let timings = full["timings"].clone();
    let completion = full["usage"]["completion_tokens"].as_u64().expect("ct");
    assert_eq!(timings["predicted_n"].as_u64(), Some(completion));
    assert_eq!(timings["prompt_n"], 6);
    assert_eq!(timings["cache_n"], 0);
    let drafted = timings["draft_n"].as_u64().expect("draft_n");
    let accepted = timings["draft_n_accepted"]
        .as_u64()
        .expect("draft_n_accepted");
    assert!(accepted <= drafted && accepted < completion);
    let t = s.ground_truth();
    assert_eq!((t.proposed, t.accepted), (drafted, accepted));

    // No include_usage: timings on the finish chunk (empty delta).
    let r = post(a, CHAT, &chat(prompt, json!({"stream": true}))).await;
    let chunks = r.chunks();
    assert_eq!(chunks[0]["choices"][0]["delta"]["content"], Value::Null);
    assert_eq!(
        content_chunks(&chunks).len() as u64,
        completion,
        "one chunk per token"
    );
    let last = chunks.last().expect("finish chunk");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["timings"], timings);
    assert_eq!(
        chunks.iter().filter(|c| c.get("timings").is_some()).count(),
        1
    );

    // include_usage: timings move to the extra usage chunk.
    let r = post(
        a,
        CHAT,
        &chat(
            prompt,
            json!({"stream": true, "stream_options": {"include_usage": true}}),
        ),
    )
    .await;
    let chunks = r.chunks();
    let usage_chunk = chunks.last().expect("usage chunk");
    assert_eq!(usage_chunk["choices"], json!([]));
    assert_eq!(usage_chunk["timings"], timings);
    assert!(usage_chunk.get("metrics").is_none());
    let finish = &chunks[chunks.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish.get("timings").is_none());

    let metrics = send(a, "GET", "/metrics", None).await.text();
    assert_eq!(
        prom_sum(&metrics, "llamacpp:spec_decode_num_draft_tokens_total"),
        (3 * drafted) as f64
    );
    assert_eq!(
        prom_sum(&metrics, "llamacpp:spec_decode_num_accepted_tokens_total"),
        (3 * accepted) as f64
    );
    s.shutdown().await;
}

#[tokio::test]
async fn baseline_text_is_identical_and_both_flavor_zeroes() {
    let spec = start(SimConfig::default().with_seed(9)).await;
    let base = start(
        SimConfig::default()
            .with_seed(9)
            .with_flavor(SpecFlavor::Both)
            .with_default_spec(AcceptanceProfile::baseline()),
    )
    .await;
    for i in 0..10 {
        let body = chat(&format!("[qa {i}] question number {i}"), json!({}));
        let a = post(spec.local_addr(), CHAT, &body).await.json();
        let b = post(base.local_addr(), CHAT, &body).await.json();
        assert_eq!(
            a["choices"][0]["message"]["content"],
            b["choices"][0]["message"]["content"]
        );
        assert_eq!(a["usage"], b["usage"]);
        let zero = spec_of(&b);
        assert_eq!(zero["num_spec_steps"], 0);
        assert_eq!(zero["num_draft_tokens"], 0);
        assert_eq!(zero["num_spec_tokens"], 0);
        assert!(
            b["timings"].get("draft_n").is_none() && b["timings"].get("draft_n_accepted").is_none()
        );
        assert!(b["timings"]["predicted_n"].as_u64().is_some());
    }
    // Baseline streaming: one chunk per token even with PerStep chunking.
    let r = post(
        base.local_addr(),
        CHAT,
        &chat("[qa 0] question number 0", json!({"stream": true})),
    )
    .await;
    let chunks = r.chunks();
    let n = chunks.last().expect("last")["timings"]["predicted_n"]
        .as_u64()
        .expect("n");
    assert_eq!(content_chunks(&chunks).len() as u64, n);
    let tb = base.ground_truth();
    assert_eq!((tb.steps, tb.proposed, tb.accepted), (0, 0, 0));
    assert_eq!(
        tb.completion_tokens,
        spec.ground_truth().completion_tokens + n
    );
    spec.shutdown().await;
    base.shutdown().await;
}

#[tokio::test]
async fn categories_and_max_tokens() {
    let mut categories = BTreeMap::new();
    categories.insert("coding".to_owned(), AcceptanceProfile::new(2, 1.0, 0.0));
    let s = start(SimConfig::default().with_categories(categories)).await;
    let a = s.local_addr();
    let v = post(
        a,
        CHAT,
        &chat("[coding 3] sort a list", json!({"max_tokens": 30})),
    )
    .await
    .json();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["completion_tokens"], 30);
    let spec = spec_of(&v);
    assert_eq!(spec["num_spec_tokens"], 2);
    assert_eq!(spec["acceptance_histogram"], json!([0, 0, 10]));
    assert_eq!(spec["mean_acceptance_length"], 3.0);
    let v = post(
        a,
        CHAT,
        &chat(
            "[math 1] add numbers",
            json!({"max_completion_tokens": 7, "max_tokens": 100}),
        ),
    )
    .await
    .json();
    assert_eq!(v["usage"]["completion_tokens"], 7);
    assert_eq!(spec_of(&v)["num_spec_tokens"], 4);
    // Streaming cap.
    let r = post(
        a,
        CHAT,
        &chat(
            "[coding 3] sort a list",
            json!({"max_tokens": 5, "stream": true}),
        ),
    )
    .await;
    let chunks = r.chunks();
    let last = chunks.last().expect("last");
    assert_eq!(last["choices"][0]["finish_reason"], "length");
    assert_eq!(content_chunks(&chunks).len(), 2, "3 + 2 tokens");
    // Multi-turn: conversation key is the first user message, turns counts user messages.
    let body = json!({"messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "[coding 3] sort a list"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "now reverse it"}]},
    ], "max_tokens": 4});
    let v = post(a, CHAT, &body).await.json();
    assert_eq!(v["usage"]["prompt_tokens"], 1 + 5 + 1 + 3);
    // /v1/completions.
    let v = post(
        a,
        "/v1/completions",
        &json!({"prompt": "[coding 1] fn main", "max_tokens": 6}),
    )
    .await
    .json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["choices"][0]["text"]
            .as_str()
            .map(|t| t.split_whitespace().count()),
        Some(6)
    );
    let r = post(a, "/v1/completions", &json!({"prompt": "[coding 1] fn main", "max_tokens": 6, "stream": true, "stream_options": {"include_usage": true}})).await;
    let chunks = r.chunks();
    assert!(chunks.iter().all(|c| c["object"] == "text_completion"));
    assert_eq!(
        streamed_text(&chunks),
        v["choices"][0]["text"].as_str().expect("text")
    );
    assert_eq!(
        chunks.last().expect("usage")["usage"]["completion_tokens"],
        6
    );

    let t = s.ground_truth();
    let log = &t.requests_log;
    assert_eq!(log.len(), 6);
    assert_eq!(log[0].category.as_deref(), Some("coding"));
    assert!(log[0].truncated);
    assert_eq!(log[1].category, None, "math is not configured");
    assert_eq!(
        (log[3].conversation.as_str(), log[3].turns),
        ("[coding 3] sort a list", 2)
    );
    assert_eq!(log[4].conversation, "[coding 1] fn main");
    assert_eq!(t.histogram.len(), 5, "pooled over k = 2 and k = 4");
    s.shutdown().await;
}

#[tokio::test]
async fn metrics_equal_ground_truth() {
    let s = start(SimConfig::default().with_flavor(SpecFlavor::Both)).await;
    let a = s.local_addr();
    for i in 0..12 {
        let extra = if i % 2 == 0 {
            json!({"stream": true})
        } else {
            json!({"max_tokens": 50})
        };
        assert_eq!(
            post(a, CHAT, &chat(&format!("request {i}"), extra))
                .await
                .status,
            200
        );
    }
    let r = send(a, "GET", "/metrics", None).await;
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("text/plain; version=0.0.4"))
    );
    let m = r.text();
    let t = s.ground_truth();
    assert_eq!(t.requests, 12);
    for (name, want) in [
        ("vllm:spec_decode_num_drafts_total", t.steps),
        ("vllm:spec_decode_num_draft_tokens_total", t.proposed),
        ("vllm:spec_decode_num_accepted_tokens_total", t.accepted),
        (
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            t.accepted,
        ),
        ("vllm:prompt_tokens_total", t.prompt_tokens),
        ("vllm:generation_tokens_total", t.completion_tokens),
        ("vllm:request_success_total", 12),
        ("vllm:num_requests_running", 0),
        ("llamacpp:spec_decode_num_drafts_total", t.steps),
        ("llamacpp:spec_decode_num_draft_tokens_total", t.proposed),
        ("llamacpp:spec_decode_num_accepted_tokens_total", t.accepted),
    ] {
        assert_eq!(prom_sum(&m, name), want as f64, "{name}");
    }
    assert_eq!(t.steps + t.accepted, t.completion_tokens);
    assert!(m.contains("# TYPE vllm:num_requests_running gauge"));
    assert!(m.contains("position=\"3\""));
    for (i, v) in t.accepted_per_pos.iter().enumerate() {
        let line = format!("position=\"{i}\"}} {v}.0");
        assert!(m.contains(&line), "{line}");
    }
    s.shutdown().await;
}

#[tokio::test]
async fn timing_is_honoured() {
    let ttft_ms = 150.0;
    let step_ms = 20.0;
    let s = start(
        SimConfig::default()
            .with_ttft_ms(ttft_ms)
            .with_step_ms(step_ms),
    )
    .await;
    let a = s.local_addr();
    let r = post(
        a,
        CHAT,
        &chat(
            "timing test",
            json!({"stream": true, "max_tokens": 40, "stream_options": {"include_usage": true}}),
        ),
    )
    .await;
    let chunks = r.chunks();
    let steps = spec_of(chunks.last().expect("usage"))["num_spec_steps"]
        .as_u64()
        .expect("steps");
    // events[0] is the role chunk; it is sent before the TTFT delay.
    let role_at = r.events[0].0;
    let first_content_at = r
        .events
        .iter()
        .find(|(_, d)| d.contains("\"content\":\"") && !d.contains("\"content\":\"\""))
        .map(|(t, _)| *t)
        .expect("content");
    assert!(role_at < first_content_at);
    assert!(
        first_content_at >= Duration::from_millis(150),
        "{first_content_at:?}"
    );
    let last_at = r.events.last().expect("done").0;
    let min_total = Duration::from_secs_f64((ttft_ms + step_ms * (steps - 1) as f64) / 1e3);
    assert!(last_at >= min_total, "{last_at:?} < {min_total:?}");
    let content_times: Vec<Duration> = r
        .events
        .iter()
        .filter(|(_, d)| d.contains("\"content\":\"") && !d.contains("\"content\":\"\""))
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(content_times.len() as u64, steps);
    // Frames are scheduled from the request start, so chunk i can never
    // arrive before ttft + i * step (1 ms slack for rounding). Only lower
    // bounds: a loaded machine may deliver late.
    for (i, at) in content_times.iter().enumerate() {
        let due = Duration::from_secs_f64((ttft_ms + step_ms * i as f64 - 1.0) / 1e3);
        assert!(*at >= due, "chunk {i} at {at:?}, due {due:?}");
    }

    // Non-streaming waits the same total.
    let t0 = std::time::Instant::now();
    let v = post(a, CHAT, &chat("timing test", json!({"max_tokens": 40})))
        .await
        .json();
    assert!(t0.elapsed() >= min_total);
    assert_eq!(s.ground_truth().requests_log[1].ttft_ms, 150.0);
    assert_eq!(v["usage"]["completion_tokens"], 40);
    s.shutdown().await;
}

#[tokio::test]
async fn disconnect_mid_stream_is_not_counted() {
    let s = start(SimConfig::default().with_step_ms(40.0)).await;
    let a = s.local_addr();
    let mut tcp = tokio::net::TcpStream::connect(a).await.expect("connect");
    let body = chat("long story", json!({"stream": true, "max_tokens": 100})).to_string();
    common::write_request(&mut tcp, "POST", CHAT, Some(&body), true).await;
    let mut buf = [0u8; 4096];
    let mut seen = Vec::new();
    use tokio::io::AsyncReadExt;
    while !String::from_utf8_lossy(&seen).contains("\"content\":\" ") {
        let n = tcp.read(&mut buf).await.expect("read");
        assert!(n > 0);
        seen.extend_from_slice(&buf[..n]);
    }
    let m = send(a, "GET", "/metrics", None).await.text();
    assert_eq!(prom_sum(&m, "vllm:num_requests_running"), 1.0);
    drop(tcp);
    // The server notices on its next write (~step_ms later).
    let mut running = 1.0;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let m = send(a, "GET", "/metrics", None).await.text();
        running = prom_sum(&m, "vllm:num_requests_running");
        if running == 0.0 {
            break;
        }
    }
    assert_eq!(running, 0.0);
    let t = s.ground_truth();
    assert_eq!((t.requests, t.completion_tokens, t.steps), (0, 0, 0));
    s.shutdown().await;
}

#[tokio::test]
async fn keep_alive_serves_several_requests() {
    let s = start(SimConfig::default()).await;
    let mut tcp = tokio::net::TcpStream::connect(s.local_addr())
        .await
        .expect("connect");
    let start_t = tokio::time::Instant::now();
    common::write_request(&mut tcp, "GET", "/health", None, false).await;
    assert_eq!(common::read_response(&mut tcp, start_t).await.status, 200);
    let body = chat("hello", json!({"stream": true})).to_string();
    common::write_request(&mut tcp, "POST", CHAT, Some(&body), false).await;
    let r = common::read_response(&mut tcp, start_t).await;
    assert_eq!(r.events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
    common::write_request(
        &mut tcp,
        "POST",
        CHAT,
        Some(&chat("hello", json!({})).to_string()),
        true,
    )
    .await;
    let v = common::read_response(&mut tcp, start_t).await.json();
    assert_eq!(
        v["choices"][0]["message"]["content"].as_str(),
        Some(streamed_text(&r.chunks()).as_str())
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_deterministic() {
    let config = SimConfig::default().with_seed(42).with_step_ms(1.0);
    let s = start(config.clone()).await;
    let a = s.local_addr();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300usize {
        tasks.spawn(async move {
            let prompt = format!("[coding {}] prompt {}", i % 100, i % 100);
            let stream = i % 2 == 0;
            let r = post(a, CHAT, &chat(&prompt, json!({"stream": stream}))).await;
            let text = if stream {
                streamed_text(&r.chunks())
            } else {
                r.json()["choices"][0]["message"]["content"]
                    .as_str()
                    .expect("c")
                    .to_owned()
            };
            (i % 100, text)
        });
    }
    let mut texts: HashMap<usize, String> = HashMap::new();
    while let Some(res) = tasks.join_next().await {
        let (key, text) = res.expect("task");
        if let Some(prev) = texts.insert(key, text.clone()) {
            assert_eq!(prev, text, "same prompt, same text under concurrency");
        }
    }
    let t = s.ground_truth();
    assert_eq!(t.requests, 300);
    assert_eq!(t.steps + t.accepted, t.completion_tokens);
    assert_eq!(t.histogram.iter().sum::<u64>(), t.steps);
    s.shutdown().await;

    // A fresh server with the same seed reproduces the texts.
    let s2 = start(config).await;
    let v = post(
        s2.local_addr(),
        CHAT,
        &chat("[coding 7] prompt 7", json!({})),
    )
    .await
    .json();
    assert_eq!(
        v["choices"][0]["message"]["content"].as_str(),
        texts.get(&7).map(String::as_str)
    );
    s2.shutdown().await;
}

#[tokio::test]
async fn run_until_returns_ground_truth() {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let handle = tokio::spawn(speedbench_sim::run_until(
        SimConfig::default(),
        "127.0.0.1:0".parse().expect("addr"),
        async {
            let _ = rx.await;
        },
    ));
    tx.send(()).expect("send");
    let truth = handle.await.expect("join").expect("run");
    assert_eq!(truth.requests, 0);
    let bad = SimConfig::default().with_output_tokens(0, 160);
    assert!(
        SimServer::start(bad, "127.0.0.1:0".parse().expect("addr"))
            .await
            .is_err()
    );
}

/// Needs ~4000 file descriptors (client and server in one process), so it is
/// ignored by default: `cargo test -p speedbench-sim -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a file-descriptor limit above 4096"]
async fn two_thousand_concurrent_streams() {
    let s = start(SimConfig::default().with_ttft_ms(200.0).with_step_ms(20.0)).await;
    let a = s.local_addr();
    let t0 = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..2000 {
        tasks.spawn(async move {
            let body = chat(
                &format!("load {i}"),
                json!({"stream": true, "max_tokens": 16}),
            );
            let r = post(a, CHAT, &body).await;
            assert_eq!(r.events.last().map(|(_, d)| d.as_str()), Some("[DONE]"));
        });
    }
    while let Some(res) = tasks.join_next().await {
        res.expect("task");
    }
    // All streams overlap: far less than 2000 x (200 ms + steps x 20 ms).
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let t = s.ground_truth();
    assert_eq!((t.requests, t.completion_tokens), (2000, 2000 * 16));
    s.shutdown().await;
}

#[tokio::test]
async fn ignore_eos_generates_exactly_max_tokens() {
    let s = start(SimConfig::default()).await;
    let a = s.local_addr();
    let v = post(
        a,
        CHAT,
        &chat(
            "fixed length",
            json!({"max_tokens": 400, "ignore_eos": true}),
        ),
    )
    .await
    .json();
    assert_eq!(v["usage"]["completion_tokens"], 400);
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let r = send(
        a,
        "POST",
        CHAT,
        Some(&chat("x", json!({"max_tokens": 999_999_999, "ignore_eos": true})).to_string()),
    )
    .await;
    assert_eq!(r.status, 400);
    s.shutdown().await;
}
