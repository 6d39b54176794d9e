//! What a run says of itself, built from its spec at validation: `run.json`'s
//! `config` (what was asked for, nothing secret: header names, no key) and
//! speed_bench.py's `config` for `--output`. The served model, the engine
//! and the dataset's name are filled in by [`RunDescription`]'s methods
//! once known.

use serde_json::json;
use speedbench_client::Target;
use speedbench_metrics::SpeedBenchPyConfig;
use speedbench_record::{RunManifest, redact_url};

use crate::spec::{DatasetSource, RunSpec};
use crate::valid_run::RunDescription;

/// The description of a run of `spec` against `target` (checked).
pub(crate) fn describe(spec: &RunSpec, target: &Target) -> RunDescription {
    RunDescription {
        config: run_config(spec, target),
        speed_bench_py: speed_bench_py_config(spec, target),
    }
}

/// `run.json`'s `config`, less `model` and `engine`.
fn run_config(spec: &RunSpec, target: &Target) -> serde_json::Value {
    let (t, d, l) = (&spec.target, &spec.dataset, &spec.load);
    let input_file = match &d.source {
        Some(DatasetSource::InputFile(p)) => Some(p.display().to_string()),
        _ => None,
    };
    let bench = match &d.source {
        Some(DatasetSource::Bench(b)) => Some(b.clone()),
        _ => None,
    };
    let synthetic = (d.source == Some(DatasetSource::Synthetic)).then(|| synthetic_config(spec));
    let mut config = json!({
        "url": target.base_url.to_string(),
        "endpoint_type": t.endpoint_type.name(),
        "streaming": t.streaming,
        "input_file": input_file,
        "public_dataset": d.public_name().ok().flatten(),
        "bench": bench,
        "categories": d.category,
        RunManifest::LIMIT_PER_CATEGORY_KEY: d.limit,
        "concurrency": l.concurrency,
        "request_count": l.request_count,
        "num_conversations": l.num_conversations,
        "warmup_request_count": l.warmup_request_count,
        "warmup_concurrency": l.warmup_concurrency,
        "warmup_duration_s": l.warmup_duration_s,
        "warmup_sessions": l.warmup_sessions,
        "warmup_grace_period_s": l.warmup_grace_period_s,
        "osl": spec.sampling.osl,
        "force_min_tokens": spec.sampling.force_min_tokens,
        "extra_inputs": target.shown_extra_body(),
        "timeout_s": t.timeout_s,
        "header_names": target.headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "api_key_set": target.api_key.is_some(),
        "client": client_config(spec),
    });
    if let Some(synthetic) = synthetic {
        config["synthetic"] = synthetic;
    }
    if d.synthesis != crate::spec::SynthesisSpec::default() {
        config["synthesis"] = json!(d.synthesis);
    }
    if !target.more_urls.is_empty() {
        let urls: Vec<String> = target.urls().map(|u| redact_url(&u.to_string())).collect();
        config["urls"] = json!(urls);
        config["url_strategy"] = json!(spec.target.url_strategy);
    }
    if let Some(choice) = &target.models {
        config["models"] = json!(choice.names());
        config["model_selection_strategy"] = json!(choice.strategy().name());
    }
    config
}

/// `run.json`'s `config.client`: the connection, load-shape and scrape
/// options.
fn client_config(spec: &RunSpec) -> serde_json::Value {
    let mut config = connection_and_load(spec);
    // Beside the rest: one `json!` expands no more fields.
    config["dataset_sampling_strategy"] = json!(spec.load.dataset_sampling.name());
    config
}

/// `config.client` less the dataset sampling.
fn connection_and_load(spec: &RunSpec) -> serde_json::Value {
    let (t, l, s) = (&spec.target, &spec.load, &spec.scrape);
    json!({
        "ca_cert": t.ca_cert.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "local_addr": t.local_addr.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "http_client": t.http_client.name(),
        "connection_reuse": t.connection_reuse.name(),
        "request_rate": l.request_rate,
        "arrival": l.arrival.name(),
        "arrival_smoothness": l.arrival_smoothness,
        "request_rate_ramp_duration_s": l.request_rate_ramp_duration_s,
        "request_rate_series": l.request_rate_series.as_ref().map(|p| p.display().to_string()),
        "ramp_up_strategy": l.ramp_up_strategy.map(|r| r.name()),
        "ramp_up_start_rps": l.ramp_up_start_rps,
        "ramp_up_end_rps": l.ramp_up_end_rps,
        "concurrency_ramp_duration_s": l.concurrency_ramp_duration_s,
        "warmup_concurrency_ramp_duration_s": l.warmup_concurrency_ramp_duration_s,
        "prefill_concurrency": l.prefill_concurrency,
        "prefill_concurrency_ramp_duration_s": l.prefill_concurrency_ramp_duration_s,
        "warmup_prefill_concurrency": l.warmup_prefill_concurrency,
        "warmup_prefill_concurrency_ramp_duration_s": l.warmup_prefill_concurrency_ramp_duration_s,
        "request_cancellation_rate": l.request_cancellation_rate,
        "request_cancellation_delay_s": l.request_cancellation_delay_s,
        "session_turn_delay_mean_ms": l.session_turn_delay_mean_ms,
        "session_turn_delay_stddev_ms": l.session_turn_delay_stddev_ms,
        "session_delay_ratio": l.session_delay_ratio,
        "fixed_schedule": l.fixed_schedule,
        "fixed_schedule_auto_offset": l.fixed_schedule_auto_offset,
        "fixed_schedule_start_offset_ms": l.fixed_schedule_start_offset_ms,
        "fixed_schedule_end_offset_ms": l.fixed_schedule_end_offset_ms,
        "user_centric_rate": l.user_centric_rate,
        "num_users": l.num_users,
        "warmup_user_centric_rate": l.warmup_user_centric_rate,
        "warmup_num_users": l.warmup_num_users,
        "random_seed": l.random_seed,
        "max_concurrency": l.max_concurrency,
        "benchmark_duration_s": l.benchmark_duration_s,
        "benchmark_grace_period_s": l.benchmark_grace_period_s,
        "server_metrics": s.server_metrics,
        "gpu_telemetry": s.gpu_telemetry.iter().map(|u| speedbench_record::redact_url(u)).collect::<Vec<_>>(),
        "no_server_metrics": !s.enabled,
        "engine": t.engine.name(),
        "no_preflight": !t.preflight,
        "max_response_bytes": t.max_response_bytes,
    })
}

/// speed_bench.py's `config` for `--output`: its options, as this run set
/// them, less the model (and `bench` unless `--bench` named one: the
/// dataset's name then).
fn speed_bench_py_config(spec: &RunSpec, target: &Target) -> SpeedBenchPyConfig {
    let asked: Vec<&str> = spec.dataset.category.iter().map(|c| c.trim()).collect();
    let category = if asked.is_empty() || asked == ["all"] {
        "all".to_string()
    } else {
        asked.join(",")
    };
    let bench = match &spec.dataset.source {
        Some(DatasetSource::Bench(b)) => Some(b.clone()),
        _ => None,
    };
    SpeedBenchPyConfig {
        url: spec.target.url.clone(),
        model: None,
        bench,
        category,
        osl: spec.sampling.osl.map(u64::from),
        concurrency: spec.load.concurrency as u64,
        extra_inputs: target.shown_extra_body(),
        limit: spec.dataset.limit.map(|n| n.get() as u64),
        timeout: Some(spec.target.timeout_s),
        streaming: Some(spec.target.streaming),
    }
}

/// A flag's JSON text as JSON (checked before a run; as text otherwise).
fn as_json(text: Option<&str>) -> serde_json::Value {
    text.map_or(serde_json::Value::Null, |t| {
        serde_json::from_str(t).unwrap_or_else(|_| t.into())
    })
}

/// `config.synthetic`: what the synthetic prompts were asked to be.
fn synthetic_config(spec: &RunSpec) -> serde_json::Value {
    let d = &spec.dataset;
    json!({
        "isl": d.synthetic.isl,
        "isl_stddev": d.synthetic.isl_stddev,
        "osl": spec.sampling.osl,
        "osl_stddev": d.synthetic.osl_stddev,
        "isl_distribution": as_json(d.synthetic.isl_distribution.as_deref()),
        "osl_distribution": as_json(d.synthetic.osl_distribution.as_deref()),
        "sequence_distribution": d.synthetic.sequence_distribution,
        "entries": d.synthetic.entries,
        "turns_mean": d.synthetic.turn_mean,
        "turns_stddev": d.synthetic.turn_stddev,
        "prefix_prompts": d.synthetic.prefix_prompts,
        "prefix_prompt_length": d.synthetic.prefix_length,
        "tokens_counted_by": match &d.synthetic.tokenizer {
            Some(path) => format!("the local tokenizer.json of --tokenizer {}", path.display()),
            None => "the server's /tokenize".into(),
        },
    })
}
