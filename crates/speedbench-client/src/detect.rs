//! Finding the engine behind a server from what it answers: every probe at
//! once, under one short budget, each answer read no further than a cap,
//! and the evidence saying what answered, what timed out and where the
//! answers disagree.

use std::time::Duration;

use serde_json::Value;
use speedbench_http::{HttpClient as ControlClient, HttpError, get_capped};

use crate::engine_kind::Engine;
use crate::error::ClientError;
use crate::target::{Target, request_headers};
use crate::tls_roots::with_roots;

/// The engine [`detect_engine`] found, and what showed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineGuess {
    /// The engine.
    pub engine: Engine,
    /// What showed it, e.g. `GET /v1/models owned_by "vllm"`; where other
    /// probes named other engines, they follow.
    pub evidence: String,
}

/// The most of a body an engine probe, the model list or a health check
/// reads (never more than the target's `max_response_bytes`): their answers
/// are small, and a server answering gigabytes must not take the client's
/// memory before a run starts.
pub const PROBE_MAX_BODY: usize = 4 * 1024 * 1024;

/// How long the engine probes may take, all of them together: they are
/// sent at once, so a server that never answers costs this, not this per
/// endpoint.
pub const PROBE_BUDGET: Duration = Duration::from_secs(5);

/// The endpoints asked, in the order their evidence counts.
pub const PROBE_PATHS: [&str; 6] = [
    "/v1/models",
    "/get_server_info",
    "/props",
    "/prometheus/metrics",
    "/metrics",
    "/v1/metrics",
];

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

/// The engine whose metric names a Prometheus text holds.
fn engine_of_metric_names(body: &str) -> Option<Engine> {
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

/// How one probe went.
#[derive(Debug)]
pub(crate) enum Answer {
    /// 200, with this body.
    Body(String),
    /// Answered, not with 200 (or not read: refused, reset).
    Nothing,
    /// No answer within [`PROBE_BUDGET`].
    TimedOut,
    /// The answer passed the cap; not read further.
    TooLarge(usize),
}

/// What one answer shows: the engine and the words for it.
fn evidence_of(path: &str, answer: &Answer) -> Option<(Engine, String)> {
    let Answer::Body(body) = answer else {
        return None;
    };
    let json = || serde_json::from_str::<Value>(body).ok();
    match path {
        "/v1/models" => {
            let models = json()?;
            let owner = models.pointer("/data/0/owned_by").and_then(Value::as_str)?;
            let engine = engine_of_owner(owner)?;
            Some((engine, format!("GET /v1/models: owned_by {owner:?}")))
        }
        "/get_server_info" => json()
            .filter(Value::is_object)
            .map(|_| (Engine::Sglang, "GET /get_server_info answered".into())),
        "/props" => json()
            .filter(|p| {
                p.get("default_generation_settings").is_some() || p.get("total_slots").is_some()
            })
            .map(|_| (Engine::LlamaCpp, "GET /props answered".into())),
        "/prometheus/metrics" => body.lines().any(|l| l.starts_with("trtllm_")).then(|| {
            (
                Engine::TrtLlm,
                "GET /prometheus/metrics: trtllm_ metrics".into(),
            )
        }),
        "/metrics" if body.trim_start().starts_with('[') => Some((
            Engine::TrtLlm,
            "GET /metrics: JSON iteration statistics (TensorRT-LLM's)".into(),
        )),
        "/metrics" => {
            engine_of_metric_names(body).map(|e| (e, format!("GET /metrics: {e} metric names")))
        }
        "/v1/metrics" => Some((Engine::Nim, "GET /v1/metrics answered".into())),
        _ => None,
    }
}

/// The client a target's probes go out on: from the run's source
/// addresses and with its CA roots and credentials, as its requests are.
pub(crate) struct Prober {
    client: ControlClient,
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
}

impl Prober {
    /// A prober keeping up to `idle` connections for reuse.
    pub(crate) fn new(target: &Target, idle: usize) -> Result<Prober, ClientError> {
        let options = speedbench_http::ClientOptions {
            max_idle_per_host: idle,
            local_addrs: target.local_addrs.clone(),
            ..Default::default()
        };
        let tls = target.base_url.is_https();
        let options = with_roots(options, &target.extra_roots_pem, tls);
        let client =
            speedbench_http::new_client(&options).map_err(|e| ClientError::Tls(e.to_string()))?;
        let headers = request_headers(target.api_key.as_ref(), &target.headers)?;
        Ok(Prober { client, headers })
    }

    /// Asks one endpoint of `target`, within [`PROBE_BUDGET`] and the cap.
    pub(crate) async fn ask(&self, target: &Target, path: &str) -> Answer {
        let url = target.base_url.join(path);
        let cap = PROBE_MAX_BODY.min(target.max_response_bytes);
        match get_capped(&self.client, &url, &self.headers, PROBE_BUDGET, cap).await {
            Ok(resp) if resp.status == 200 => {
                Answer::Body(String::from_utf8_lossy(&resp.body).into_owned())
            }
            Ok(_) => Answer::Nothing,
            Err(HttpError::Timeout { .. }) => Answer::TimedOut,
            Err(HttpError::BodyTooLarge { limit, .. }) => Answer::TooLarge(limit),
            Err(_) => Answer::Nothing,
        }
    }
}

/// Finds the engine behind `target`'s server from what it answers. Every
/// endpoint of [`PROBE_PATHS`] is asked at once, all within
/// [`PROBE_BUDGET`], and their evidence counts in this order: `owned_by` of
/// `GET /v1/models`; SGLang's `GET /get_server_info`; llama.cpp's `GET
/// /props`; TensorRT-LLM's `GET /prometheus/metrics`; the metric names of
/// `GET /metrics` (or TensorRT-LLM's JSON iteration statistics there);
/// NIM's `GET /v1/metrics`. A server that shows none of them is
/// [`Engine::OpenAi`], and the evidence names the probes that timed out.
/// Where probes name different engines, the evidence says so. Never fails
/// on a probe: a probe that errors showed nothing.
pub async fn detect_engine(target: &Target) -> Result<EngineGuess, ClientError> {
    let prober = Prober::new(target, PROBE_PATHS.len())?;
    let [a, b, c, d, e, f] = PROBE_PATHS;
    let ask = |path| prober.ask(target, path);
    let (a, b, c, d, e, f) = tokio::join!(ask(a), ask(b), ask(c), ask(d), ask(e), ask(f));
    let answers: Vec<(&str, Answer)> = PROBE_PATHS.into_iter().zip([a, b, c, d, e, f]).collect();
    for (path, answer) in &answers {
        if let Answer::TooLarge(limit) = answer {
            tracing::warn!(
                "GET {path}: the answer passed the probe's cap of {limit} bytes; not read as evidence of the engine"
            );
        }
    }
    Ok(guess(&answers))
}

/// The engine the answers show first, the other engines they show, and the
/// probes that timed out.
fn guess(answers: &[(&str, Answer)]) -> EngineGuess {
    let found: Vec<(Engine, String)> = answers
        .iter()
        .filter_map(|(path, answer)| evidence_of(path, answer))
        .collect();
    let timed_out: Vec<String> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Answer::TimedOut))
        .map(|(path, _)| format!("GET {path}"))
        .collect();
    let Some((engine, evidence)) = found.first().cloned() else {
        let mut evidence = "no engine-specific endpoint or name answered".to_string();
        if !timed_out.is_empty() {
            evidence.push_str(&format!(
                " ({} timed out after {} s)",
                timed_out.join(", "),
                PROBE_BUDGET.as_secs()
            ));
        }
        return EngineGuess {
            engine: Engine::OpenAi,
            evidence,
        };
    };
    let others: Vec<String> = found
        .iter()
        .filter(|(e, _)| *e != engine)
        .map(|(e, why)| format!("{why} ({e})"))
        .collect();
    let evidence = match others.is_empty() {
        true => evidence,
        false => format!(
            "{evidence}; the probes disagree, taken in order: also {}",
            others.join(", ")
        ),
    };
    EngineGuess { engine, evidence }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_names_and_owners_name_engines() {
        let metrics = |body: &str| evidence_of("/metrics", &Answer::Body(body.into()));
        assert_eq!(
            metrics("# HELP x\nvllm:num_requests_running 0\n").map(|e| e.0),
            Some(Engine::Vllm)
        );
        // TensorRT-LLM's JSON iteration statistics are not metric names.
        assert_eq!(
            metrics(r#"[{"iter": 1}]"#),
            Some((
                Engine::TrtLlm,
                "GET /metrics: JSON iteration statistics (TensorRT-LLM's)".into()
            ))
        );
        assert_eq!(
            metrics("sglang:spec_accept_length 2\n").map(|e| e.0),
            Some(Engine::Sglang)
        );
        assert_eq!(metrics("process_cpu_seconds_total 3\n"), None);
        assert_eq!(engine_of_owner("vllm"), Some(Engine::Vllm));
        assert_eq!(engine_of_owner("llamacpp"), Some(Engine::LlamaCpp));
        assert_eq!(engine_of_owner("openai"), None);
    }

    #[test]
    fn disagreeing_probes_are_said_and_timeouts_named() {
        let body = |s: &str| Answer::Body(s.into());
        let answers = [
            ("/v1/models", body(r#"{"data": [{"owned_by": "vllm"}]}"#)),
            ("/get_server_info", body("{}")),
            ("/props", body(r#"{"total_slots": 1}"#)),
            ("/prometheus/metrics", Answer::Nothing),
            ("/metrics", body("vllm:num_requests_running 0\n")),
            ("/v1/metrics", Answer::TimedOut),
        ];
        let g = guess(&answers);
        assert_eq!(g.engine, Engine::Vllm);
        assert_eq!(
            g.evidence,
            "GET /v1/models: owned_by \"vllm\"; the probes disagree, taken in order: also \
             GET /get_server_info answered (sglang), GET /props answered (llamacpp)"
        );
        let silent = [
            ("/v1/models", Answer::TimedOut),
            ("/props", Answer::TimedOut),
            ("/metrics", Answer::Nothing),
        ];
        assert_eq!(
            guess(&silent).evidence,
            "no engine-specific endpoint or name answered (GET /v1/models, GET /props timed \
             out after 5 s)"
        );
        assert_eq!(guess(&silent).engine, Engine::OpenAi);
    }
}
