//! Which inference engine a server runs, what it needs to report acceptance
//! per request, and a one-request check that it does.
//!
//! Engines differ in what a client must send and where the numbers come
//! back: SGLang reports per-request acceptance only when the request asks
//! for it (`return_spec_tokens_details`), vLLM only when the server was
//! started with `--per-request-spec-decode-metrics`, TensorRT-LLM puts its
//! tokens per iteration on each choice and serves Prometheus text at
//! `/prometheus/metrics`. [`detect_engine`] finds the engine from what the
//! server answers; [`Engine::request_fields`] and [`Engine::metrics_paths`]
//! say what to send and scrape; [`preflight`] sends one small request and
//! says, when no acceptance came back, why and what to change.

use std::time::Duration;

use serde_json::Value;
use speedbench_dataset::Message;
use speedbench_http::{HttpClient as ControlClient, HttpError, get_capped};

use crate::error::ClientError;
use crate::exchange::HttpClient;
use crate::target::{Target, request_headers};

pub use crate::engine_kind::Engine;

/// The engine [`detect_engine`] found, and what showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineGuess {
    /// The engine.
    pub engine: Engine,
    /// What showed it, e.g. `GET /v1/models owned_by "vllm"`.
    pub evidence: String,
}

/// The engine an `owned_by` value names, if it names one.
fn engine_of_owner(owner: &str) -> Option<Engine> {
    let o = owner.to_ascii_lowercase();
    Some(match o.as_str() {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        "llamacpp" | "llama.cpp" | "llama-cpp" => Engine::LlamaCpp,
        "tensorrt_llm" | "tensorrt-llm" | "trtllm" => Engine::TrtLlm,
        "nim" | "nvidia-nim" => Engine::Nim,
        _ => return None,
    })
}

/// The engine whose metric names a Prometheus text (or TensorRT-LLM's JSON
/// iteration statistics) holds.
fn engine_of_metrics(body: &str) -> Option<Engine> {
    if body.trim_start().starts_with('[') {
        return Some(Engine::TrtLlm);
    }
    [
        ("vllm:", Engine::Vllm),
        ("sglang:", Engine::Sglang),
        ("llamacpp:", Engine::LlamaCpp),
        ("trtllm_", Engine::TrtLlm),
    ]
    .into_iter()
    .find(|(prefix, _)| body.lines().any(|l| l.starts_with(prefix)))
    .map(|(_, e)| e)
}

/// The most of a body an engine probe, the model list or a health check
/// reads (never more than the target's `max_response_bytes`): their answers
/// are small, and a server answering gigabytes must not take the client's
/// memory before a run starts.
pub const PROBE_MAX_BODY: usize = 4 * 1024 * 1024;

struct Prober<'a> {
    target: &'a Target,
    client: ControlClient,
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
}

impl Prober<'_> {
    /// The body of `GET path` when it answers 200, else `None`.
    async fn body(&self, path: &str) -> Option<String> {
        let url = self.target.base_url.join(path);
        let cap = PROBE_MAX_BODY.min(self.target.max_response_bytes);
        let resp = get_capped(
            &self.client,
            &url,
            &self.headers,
            Duration::from_secs(5),
            cap,
        )
        .await;
        let resp = match resp {
            Ok(resp) => resp,
            Err(HttpError::BodyTooLarge { limit, .. }) => {
                tracing::warn!(
                    "GET {path}: the answer passed the probe's cap of {limit} bytes; not read as evidence of the engine"
                );
                return None;
            }
            Err(_) => return None,
        };
        (resp.status == 200).then(|| String::from_utf8_lossy(&resp.body).into_owned())
    }

    async fn json(&self, path: &str) -> Option<Value> {
        serde_json::from_str(&self.body(path).await?).ok()
    }
}

/// Finds the engine behind `target`'s server from what it answers, in this
/// order: `owned_by` of `GET /v1/models`; SGLang's `GET /get_server_info`;
/// llama.cpp's `GET /props`; TensorRT-LLM's `GET /prometheus/metrics`; the
/// metric names of `GET /metrics`; NIM's `GET /v1/metrics`. A server that
/// shows none of them is [`Engine::OpenAi`]. Never fails: a probe that
/// errors is a probe that showed nothing.
pub async fn detect_engine(target: &Target) -> Result<EngineGuess, ClientError> {
    // The probes come from the run's source addresses, as its requests do.
    let client = speedbench_http::new_client(&speedbench_http::ClientOptions {
        max_idle_per_host: 1,
        extra_roots_pem: target.extra_roots_pem.clone(),
        local_addrs: target.local_addrs.clone(),
        ..Default::default()
    })
    .map_err(|e| ClientError::Tls(e.to_string()))?;
    let prober = Prober {
        target,
        client,
        headers: request_headers(target.api_key.as_ref(), &target.headers)?,
    };
    let found = |engine, evidence: String| Ok(EngineGuess { engine, evidence });
    if let Some(models) = prober.json("/v1/models").await
        && let Some(owner) = models.pointer("/data/0/owned_by").and_then(Value::as_str)
        && let Some(engine) = engine_of_owner(owner)
    {
        return found(engine, format!("GET /v1/models: owned_by {owner:?}"));
    }
    if let Some(info) = prober.json("/get_server_info").await
        && info.is_object()
    {
        return found(Engine::Sglang, "GET /get_server_info answered".into());
    }
    if let Some(props) = prober.json("/props").await
        && (props.get("default_generation_settings").is_some()
            || props.get("total_slots").is_some())
    {
        return found(Engine::LlamaCpp, "GET /props answered".into());
    }
    if let Some(text) = prober.body("/prometheus/metrics").await
        && text.lines().any(|l| l.starts_with("trtllm_"))
    {
        return found(
            Engine::TrtLlm,
            "GET /prometheus/metrics: trtllm_ metrics".into(),
        );
    }
    if let Some(text) = prober.body("/metrics").await
        && let Some(engine) = engine_of_metrics(&text)
    {
        return found(engine, format!("GET /metrics: {engine} metric names"));
    }
    if prober.body("/v1/metrics").await.is_some() {
        return found(Engine::Nim, "GET /v1/metrics answered".into());
    }
    found(
        Engine::OpenAi,
        "no engine-specific endpoint or name answered".into(),
    )
}

/// What one preflight request showed.
#[derive(Debug, Clone, PartialEq)]
pub struct Preflight {
    /// The engine the request was made for.
    pub engine: Engine,
    /// The request failed: why (then nothing else is known).
    pub error: Option<String>,
    /// The per-request acceptance that came back, in words; `None` when
    /// none did.
    pub acceptance: Option<String>,
    /// A payload came back but could not be right: why.
    pub dropped: Option<String>,
    /// What the server itself says of its speculation when no acceptance
    /// came back (llama-server's `GET /slots`: `"speculative": true` on a
    /// slot); `None` when it says nothing.
    pub server_speculates: Option<bool>,
}

impl Preflight {
    /// True when the response carried usable per-request acceptance.
    pub fn has_acceptance(&self) -> bool {
        self.acceptance.is_some()
    }

    /// When the request succeeded without per-request acceptance: why,
    /// and what to change ([`Engine::missing_acceptance_advice`]); or, where
    /// the server says it speculates, that it drafted nothing for the
    /// preflight's prompt (an n-gram drafter needs repetition), with no
    /// advice to change anything.
    pub fn advice(&self) -> Option<&'static str> {
        if self.error.is_some() || self.acceptance.is_some() {
            return None;
        }
        Some(match self.server_speculates {
            Some(true) => {
                "the server says it speculates (GET /slots: \"speculative\": true); it drafted \
                 nothing for the preflight's short prompt, as an n-gram drafter does where the \
                 context does not repeat itself, so nothing needs changing"
            }
            _ => self.engine.missing_acceptance_advice(),
        })
    }
}

/// The request a preflight sends: one short user turn and at most 32
/// output tokens, so speculation has steps to show.
const PREFLIGHT_PROMPT: &str = "Count from 1 to 20, separated by commas.";
const PREFLIGHT_MAX_TOKENS: u32 = 32;

/// Sends one small request to `target` as the run would (the engine's
/// request fields included, when set on the target) and reports whether
/// per-request acceptance came back. The request is not recorded; run it
/// before the server scrape's first sample so its tokens stay out of the
/// run's counters.
pub async fn preflight(target: &Target, engine: Engine) -> Result<Preflight, ClientError> {
    let mut probe = target.clone();
    probe.max_tokens = Some(PREFLIGHT_MAX_TOKENS);
    // A 32-token answer: anything near the cap is not one.
    probe.max_response_bytes = probe.max_response_bytes.min(PROBE_MAX_BODY);
    for key in ["max_tokens", "max_completion_tokens"] {
        probe.extra_body.remove(key);
    }
    let client = HttpClient::new(&probe, 1)?;
    let history = [Message {
        role: "user".into(),
        content: PREFLIGHT_PROMPT.into(),
    }];
    let ex = client.exchange(&probe, &history).await;
    let mut out = Preflight {
        engine,
        error: ex
            .error
            .as_ref()
            .map(|(kind, message)| format!("{} ({})", message, kind.as_str())),
        acceptance: None,
        dropped: None,
        server_speculates: None,
    };
    if out.error.is_some() {
        return Ok(out);
    }
    match ex.spec {
        Ok(Some(s)) => {
            let steps = s
                .verify_steps
                .map_or_else(|| "unknown".to_string(), |n| n.to_string());
            out.acceptance = Some(format!(
                "{}: {} of {} drafted tokens accepted over {steps} verify steps",
                s.source.map_or("unknown", |s| s.as_str()),
                s.accepted_draft_tokens,
                s.proposed_draft_tokens
            ));
        }
        Ok(None) => {}
        Err(malformed) => out.dropped = Some(malformed.to_string()),
    }
    match ex.tokens_per_iteration {
        Ok(Some(v)) if out.acceptance.is_none() => {
            out.acceptance = Some(format!(
                "tensorrt_llm: avg_decoded_tokens_per_iter {v} (tokens per iteration)"
            ));
        }
        Err(malformed) => {
            out.dropped.get_or_insert(malformed.to_string());
        }
        _ => {}
    }
    if out.acceptance.is_none() && engine == Engine::LlamaCpp {
        out.server_speculates = llama_slots_speculate(target).await;
    }
    Ok(out)
}

/// Whether llama-server says a slot speculates (`GET /slots`, on by
/// default: `[{"id": 0, "speculative": true, ...}]`); `None` when it does
/// not answer so.
async fn llama_slots_speculate(target: &Target) -> Option<bool> {
    let client = speedbench_http::new_client(&speedbench_http::ClientOptions {
        max_idle_per_host: 0,
        extra_roots_pem: target.extra_roots_pem.clone(),
        local_addrs: target.local_addrs.clone(),
        ..Default::default()
    })
    .ok()?;
    let headers = request_headers(target.api_key.as_ref(), &target.headers).ok()?;
    let url = target.base_url.join("/slots");
    let cap = PROBE_MAX_BODY.min(target.max_response_bytes);
    let resp = get_capped(&client, &url, &headers, Duration::from_secs(5), cap)
        .await
        .ok()?;
    if resp.status != 200 {
        return None;
    }
    let slots: Value = serde_json::from_slice(&resp.body).ok()?;
    let flags: Vec<bool> = slots
        .as_array()?
        .iter()
        .filter_map(|s| s.get("speculative").and_then(Value::as_bool))
        .collect();
    (!flags.is_empty()).then(|| flags.contains(&true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for e in Engine::ALL {
            assert_eq!(e.as_str().parse::<Engine>().unwrap(), e);
        }
        assert_eq!("TensorRT-LLM".parse::<Engine>().unwrap(), Engine::TrtLlm);
        assert_eq!("llama.cpp".parse::<Engine>().unwrap(), Engine::LlamaCpp);
        let err = "tgi".parse::<Engine>().unwrap_err();
        assert!(err.contains("vllm, sglang"), "{err}");
    }

    #[test]
    fn only_sglang_needs_a_request_field() {
        assert_eq!(
            Engine::Sglang.request_fields()["return_spec_tokens_details"],
            Value::Bool(true)
        );
        for e in Engine::ALL.into_iter().filter(|e| *e != Engine::Sglang) {
            assert!(e.request_fields().is_empty(), "{e}");
        }
        assert_eq!(
            Engine::TrtLlm.metrics_paths(),
            ["/prometheus/metrics", "/metrics"]
        );
    }

    #[test]
    fn metric_names_and_owners_name_engines() {
        assert_eq!(
            engine_of_metrics("# HELP x\nvllm:num_requests_running 0\n"),
            Some(Engine::Vllm)
        );
        assert_eq!(engine_of_metrics(r#"[{"iter": 1}]"#), Some(Engine::TrtLlm));
        assert_eq!(
            engine_of_metrics("sglang:spec_accept_length 2\n"),
            Some(Engine::Sglang)
        );
        assert_eq!(engine_of_metrics("process_cpu_seconds_total 3\n"), None);
        assert_eq!(engine_of_owner("vllm"), Some(Engine::Vllm));
        assert_eq!(engine_of_owner("llamacpp"), Some(Engine::LlamaCpp));
        assert_eq!(engine_of_owner("openai"), None);
    }
}
