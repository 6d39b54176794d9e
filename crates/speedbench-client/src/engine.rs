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

use crate::detect::{Answer, Prober};
use crate::error::ClientError;
use crate::exchange::HttpClient;
use crate::target::Target;

pub use crate::detect::{EngineGuess, PROBE_BUDGET, PROBE_MAX_BODY, detect_engine};
pub use crate::engine_kind::Engine;

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
    /// came back; `None` when it says nothing.
    pub server_speculation: Option<ServerSpeculation>,
}

/// Whether a server says it speculates, and where it says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpeculation {
    /// It speculates.
    pub speculates: bool,
    /// What showed it: llama-server's `GET /slots` (`"speculative"` on a
    /// slot), vLLM's `GET /metrics` (its `vllm:spec_decode_*` families
    /// exist only when it speculates).
    pub evidence: String,
}

impl Preflight {
    /// True when the response carried usable per-request acceptance.
    pub fn has_acceptance(&self) -> bool {
        self.acceptance.is_some()
    }

    /// When the request succeeded without per-request acceptance: why,
    /// and what to change ([`Engine::missing_acceptance_advice`]). Where
    /// the server says it speculates, that it drafted nothing for the
    /// preflight's prompt (an n-gram drafter needs repetition), with no
    /// advice to change anything; where it says it does not, that this is
    /// right for a baseline, and what turns speculation on otherwise.
    pub fn advice(&self) -> Option<String> {
        if self.error.is_some() || self.acceptance.is_some() {
            return None;
        }
        let advice = self.engine.missing_acceptance_advice();
        Some(match &self.server_speculation {
            // llama-server sends draft fields only when it drafted.
            Some(s) if s.speculates && self.engine == Engine::LlamaCpp => format!(
                "the server says it speculates ({}); it drafted nothing for the preflight's \
                 short prompt, as an n-gram drafter does where the context does not repeat \
                 itself, so nothing needs changing",
                s.evidence
            ),
            // vLLM sends its payload even for a request that drafted nothing.
            Some(s) if s.speculates => format!(
                "the server speculates ({}) but sent no per-request acceptance: {advice}",
                s.evidence
            ),
            Some(s) => format!(
                "the server does not speculate ({}): right for a baseline run; to measure \
                 speculation, {advice}",
                s.evidence
            ),
            None => advice.to_string(),
        })
    }
}

/// The request a preflight sends: one short user turn and at most 32
/// output tokens, so speculation has steps to show.
const PREFLIGHT_PROMPT: &str = "Count from 1 to 20, separated by commas.";
const PREFLIGHT_MAX_TOKENS: u32 = 32;

/// The longest the preflight waits for its answer (or the target's own
/// timeout, if shorter): a 32-token answer that takes longer is a server
/// that is stalled or queued, and the run should not wait its whole
/// request timeout (600 s by default) before it starts.
pub const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends one small request to `target` as the run would (the engine's
/// request fields included, when set on the target) and reports whether
/// per-request acceptance came back. The request is not recorded; run it
/// before the server scrape's first sample so its tokens stay out of the
/// run's counters.
pub async fn preflight(target: &Target, engine: Engine) -> Result<Preflight, ClientError> {
    let mut probe = target.clone();
    probe.max_tokens = Some(PREFLIGHT_MAX_TOKENS);
    // A 32-token answer: anything near the cap is not one, and it does not
    // take a request's whole timeout.
    probe.max_response_bytes = probe.max_response_bytes.min(PROBE_MAX_BODY);
    probe.timeout = probe.timeout.min(PREFLIGHT_TIMEOUT);
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
        server_speculation: None,
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
    if out.acceptance.is_none() {
        out.server_speculation = server_speculation(target, engine).await;
    }
    Ok(out)
}

/// Reads whether a server speculates from one endpoint's body.
type SpeculationReader = fn(&[u8]) -> Option<bool>;

/// What the server says of its speculation: llama-server's `GET /slots`,
/// vLLM's `GET /metrics`; `None` for other engines, or when it does not
/// answer so.
async fn server_speculation(target: &Target, engine: Engine) -> Option<ServerSpeculation> {
    let (path, read): (&str, SpeculationReader) = match engine {
        Engine::LlamaCpp => ("/slots", slots_speculate),
        Engine::Vllm => ("/metrics", vllm_metrics_speculate),
        _ => return None,
    };
    let prober = Prober::new(target, 0).ok()?;
    let Answer::Body(body) = prober.ask(target, path).await else {
        return None;
    };
    let speculates = read(body.as_bytes())?;
    let evidence = match (engine, speculates) {
        (Engine::LlamaCpp, s) => format!("GET /slots: \"speculative\": {s}"),
        (_, true) => "GET /metrics: vllm:spec_decode_num_drafts".to_string(),
        (_, false) => "GET /metrics: no vllm:spec_decode_ metrics".to_string(),
    };
    Some(ServerSpeculation {
        speculates,
        evidence,
    })
}

/// llama-server's `/slots` (`[{"id": 0, "speculative": true, ...}]`): any
/// slot speculating.
fn slots_speculate(body: &[u8]) -> Option<bool> {
    let slots: Value = serde_json::from_slice(body).ok()?;
    let flags: Vec<bool> = slots
        .as_array()?
        .iter()
        .filter_map(|s| s.get("speculative").and_then(Value::as_bool))
        .collect();
    (!flags.is_empty()).then(|| flags.contains(&true))
}

/// vLLM's `/metrics`: its `vllm:` families, and among them the
/// spec-decode counters exactly when it speculates; `None` without any
/// `vllm:` metric (not vLLM's exposition).
fn vllm_metrics_speculate(body: &[u8]) -> Option<bool> {
    let text = std::str::from_utf8(body).ok()?;
    let vllm = text.lines().any(|l| l.starts_with("vllm:"));
    vllm.then(|| {
        text.lines()
            .any(|l| l.starts_with("vllm:spec_decode_num_drafts"))
    })
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
}
