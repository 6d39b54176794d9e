//! Reading AIPerf artifact directories.
//!
//! AIPerf writes `profile_export_aiperf.json` (run-level statistics and the
//! input configuration), `profile_export.jsonl` (one record per request, at
//! the default export level) and `server_metrics_export.json` (the
//! Prometheus scrape). Per-request records are converted to
//! [`RequestRecord`]s so that one code path computes every matrix.

use std::path::Path;

use serde_json::Value;
use speedbench_record::{ErrorKind, HttpPhases, RequestRecord, SpecDecodeStats, SpecSource};

use crate::RunsError;

/// AIPerf's run-level statistics file, `profile_export_aiperf.json`.
pub const PROFILE_JSON: &str = "profile_export_aiperf.json";
/// AIPerf's per-request records file, `profile_export.jsonl`.
pub const PROFILE_JSONL: &str = "profile_export.jsonl";

/// The model AIPerf profiled: `input_config.models.items[*].name`, or the
/// older `input_config.endpoint.model_names[0]`.
pub(crate) fn model(profile: &Value) -> Option<String> {
    let items = profile
        .pointer("/input_config/models/items")
        .and_then(Value::as_array);
    items
        .into_iter()
        .flatten()
        .filter_map(|i| i.get("name").and_then(Value::as_str))
        .find(|n| !n.is_empty())
        .or_else(|| {
            profile
                .pointer("/input_config/endpoint/model_names/0")
                .and_then(Value::as_str)
        })
        .map(str::to_string)
}

/// The dataset name: the first `input_config.datasets[*]` `format` or
/// `dataset` (or the older `input_config.input.public_dataset`).
pub(crate) fn dataset(profile: &Value) -> Option<String> {
    let datasets = profile
        .pointer("/input_config/datasets")
        .and_then(Value::as_array);
    datasets
        .into_iter()
        .flatten()
        .filter_map(|d| {
            d.get("format")
                .and_then(Value::as_str)
                .or_else(|| d.get("dataset").and_then(Value::as_str))
        })
        .find(|n| !n.is_empty())
        .or_else(|| {
            profile
                .pointer("/input_config/input/public_dataset")
                .and_then(Value::as_str)
        })
        .map(str::to_string)
}

/// True when `dataset` is a SPEED-Bench or literature (`spec_al_*`) dataset,
/// the only runs AIPerf's `speed-bench-report` can place in a column.
pub(crate) fn is_speed_bench_dataset(dataset: &str) -> bool {
    ["speed_bench_", "spec_al_"]
        .iter()
        .any(|p| dataset.starts_with(p) && dataset.len() > p.len())
}

/// A run-level statistic's `avg` (e.g. `output_token_throughput`).
pub(crate) fn stat_avg(profile: &Value, tag: &str) -> Option<f64> {
    profile
        .get(tag)
        .and_then(|m| m.get("avg"))
        .and_then(Value::as_f64)
        .filter(|v| v.is_finite())
}

fn metric_value<'a>(metrics: &'a Value, tag: &str) -> Option<&'a Value> {
    metrics.get(tag).and_then(|m| m.get("value"))
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * 1e6).round().max(0.0) as u64
}

/// Dense histogram from AIPerf's sparse `{"j": count}` record field.
fn dense_histogram(v: Option<&Value>) -> Vec<u64> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut dense = Vec::new();
    for (k, count) in map {
        let (Ok(j), Some(n)) = (k.parse::<usize>(), count.as_u64()) else {
            continue;
        };
        if dense.len() <= j {
            dense.resize(j + 1, 0);
        }
        dense[j] = n;
    }
    dense
}

fn spec_from(record: &Value) -> Option<SpecDecodeStats> {
    if let Some(acc) = record
        .get("spec_decode_acceptance")
        .filter(|v| v.is_object())
    {
        let u = |k: &str| acc.get(k).and_then(Value::as_u64);
        return Some(SpecDecodeStats {
            source: acc
                .get("engine")
                .and_then(Value::as_str)
                .and_then(SpecSource::parse),
            accepted_draft_tokens: u("num_accepted_draft_tokens")?,
            proposed_draft_tokens: u("num_draft_tokens")?,
            verify_steps: u("num_spec_steps"),
            num_spec_tokens: u("num_spec_tokens").and_then(|k| u32::try_from(k).ok()),
            acceptance_histogram: dense_histogram(acc.get("acceptance_histogram")),
            per_step_accepted: None,
            per_step_drafted: None,
        });
    }
    // Older exports carry only the per-request metric values.
    let metrics = record.get("metrics")?;
    let u = |k: &str| {
        metric_value(metrics, k)
            .and_then(Value::as_f64)
            .map(|v| v as u64)
    };
    Some(SpecDecodeStats {
        source: None,
        accepted_draft_tokens: u("spec_decode_accepted_draft_tokens")?,
        proposed_draft_tokens: u("spec_decode_draft_tokens")?,
        verify_steps: u("spec_decode_steps"),
        ..Default::default()
    })
}

/// Converts one `profile_export.jsonl` record; `None` for non-objects.
pub(crate) fn record_from_line(
    v: &Value,
    model: &str,
    dataset: &str,
    index: u64,
) -> Option<RequestRecord> {
    let meta = v.get("metadata")?;
    let metrics = v.get("metrics").cloned().unwrap_or(Value::Null);
    let f = |k: &str| metric_value(&metrics, k).and_then(Value::as_f64);
    let text = |k: &str| meta.get(k).and_then(Value::as_str).map(str::to_string);
    let warmup = ["benchmark_phase", "phase_kind"]
        .iter()
        .any(|k| meta.get(*k).and_then(Value::as_str) == Some("warmup"));
    let (error_kind, error_message, http_status) = error_of(v, meta);
    let (start, end) = request_times(meta);
    let inter_chunk = metric_value(&metrics, "inter_chunk_latency")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_f64).map(ms_to_ns).collect())
        .unwrap_or_default();
    let completion = f("output_sequence_length")
        .or_else(|| f("usage_completion_tokens"))
        .or_else(|| f("output_token_count"));
    Some(RequestRecord {
        run_id: String::new(),
        request_index: index,
        conversation_id: text("conversation_id").unwrap_or_default(),
        turn_index: meta.get("turn_index").and_then(Value::as_u64).unwrap_or(0) as u32,
        dataset: dataset.to_string(),
        category: text("source_kind").filter(|c| !c.is_empty()),
        model: model.to_string(),
        warmup,
        start_unix_ns: start,
        end_unix_ns: end,
        ttft_ns: f("time_to_first_token").map(ms_to_ns),
        inter_chunk_latencies_ns: inter_chunk,
        e2e_latency_ns: f("request_latency").map(ms_to_ns).unwrap_or(0),
        prompt_tokens: f("input_sequence_length").map(|v| v as u64),
        completion_tokens: completion.map(|v| v as u64),
        output_chunks: 0,
        finish_reason: None,
        http_status,
        error_kind,
        error_message,
        output_text: String::new(),
        spec: spec_from(v),
        server_timings: None,
        // AIPerf's export carries no prompt text to hash.
        prompt_sha256: None,
        spec_dropped: None,
        tokens_per_iteration: None,
        // AIPerf records no re-send.
        resends: 0,
        server_index: None,
        http_phases: http_phases(&metrics),
        custom: Default::default(),
    })
}

/// A record's HTTP phases from AIPerf's `http_req_*` metrics (ms, KB of
/// 1,024 bytes, counts); `None` without `http_req_connection_reused`, which
/// AIPerf records for every request its aiohttp client traced.
fn http_phases(metrics: &Value) -> Option<HttpPhases> {
    let value = |tag: &str| metric_value(metrics, tag).and_then(Value::as_f64);
    let reused = value("http_req_connection_reused")?;
    let ns = |tag: &str| value(tag).map_or(0, ms_to_ns);
    let bytes = |tag: &str| value(tag).map_or(0, |kb| (kb * 1024.0).round().max(0.0) as u64);
    let count = |tag: &str| value(tag).map_or(0, |n| n.round().max(0.0) as u64);
    Some(HttpPhases {
        blocked_ns: ns("http_req_blocked"),
        dns_lookup_ns: ns("http_req_dns_lookup"),
        connecting_ns: ns("http_req_connecting"),
        sending_ns: ns("http_req_sending"),
        waiting_ns: ns("http_req_waiting"),
        receiving_ns: ns("http_req_receiving"),
        connection_reused: reused > 0.0,
        bytes_sent: bytes("http_req_data_sent"),
        bytes_received: bytes("http_req_data_received"),
        chunks_sent: count("http_req_chunks_sent"),
        chunks_received: count("http_req_chunks_received"),
    })
}

/// A line's request start and end, Unix nanoseconds (the end is the start
/// when missing).
fn request_times(meta: &Value) -> (i64, i64) {
    let start = meta
        .get("request_start_ns")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let end = meta
        .get("request_end_ns")
        .and_then(Value::as_i64)
        .unwrap_or(start);
    (start, end)
}

/// A line's error as a record's: its kind (cancelled, an HTTP status, a
/// server error), message and status code; all `None` for a success.
fn error_of(v: &Value, meta: &Value) -> (Option<ErrorKind>, Option<String>, Option<u16>) {
    let Some(e) = v.get("error").filter(|e| !e.is_null()) else {
        return (None, None, None);
    };
    let code = e
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok());
    let kind = if meta.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        // AIPerf's own cancellations (`--request-cancellation-rate`) are
        // typed; a stop's are not.
        if e.get("type").and_then(Value::as_str) == Some("RequestCancellationError") {
            ErrorKind::ClientCancelled
        } else {
            ErrorKind::Cancelled
        }
    } else if code.is_some_and(|c| c >= 400) {
        ErrorKind::HttpStatus
    } else {
        ErrorKind::ServerError
    };
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string());
    (Some(kind), Some(message), code)
}

/// Reads `profile_export.jsonl`. Blank and unparseable lines are skipped
/// (a truncated last line is normal after an interrupted run) and counted.
pub(crate) fn read_records(
    path: &Path,
    model: &str,
    dataset: &str,
) -> Result<(Vec<RequestRecord>, usize), RunsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RunsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut records = Vec::new();
    let mut skipped = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| record_from_line(&v, model, dataset, records.len() as u64))
        {
            Some(r) => records.push(r),
            None => skipped += 1,
        }
    }
    Ok((records, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn model_and_dataset_from_both_config_shapes() {
        let new = json!({"input_config": {"models": {"items": [{"name": ""}, {"name": "m1"}]},
            "datasets": [{"name": "main", "type": "file", "format": "speed_bench_coding"}]}});
        assert_eq!(model(&new).as_deref(), Some("m1"));
        assert_eq!(dataset(&new).as_deref(), Some("speed_bench_coding"));
        let public =
            json!({"input_config": {"datasets": [{"type": "public", "dataset": "spec_al_gsm8k"}]}});
        assert_eq!(dataset(&public).as_deref(), Some("spec_al_gsm8k"));
        let old = json!({"input_config": {"endpoint": {"model_names": ["m0"]},
            "input": {"public_dataset": "speed_bench_qa"}}});
        assert_eq!(
            (model(&old).as_deref(), dataset(&old).as_deref()),
            (Some("m0"), Some("speed_bench_qa"))
        );
        assert_eq!(model(&json!({})), None);
    }

    #[test]
    fn a_record_line_with_the_acceptance_struct() {
        let line = json!({
            "metadata": {"conversation_id": "c1", "turn_index": 1, "benchmark_phase": "profiling",
                "source_kind": "coding", "request_start_ns": 100, "request_end_ns": 900},
            "metrics": {"time_to_first_token": {"value": 19.5, "unit": "ms"},
                "request_latency": {"value": 82.25, "unit": "ms"},
                "output_sequence_length": {"value": 48, "unit": "tokens"},
                "inter_chunk_latency": {"value": [1.5, 2.0], "unit": "ms"}},
            "spec_decode_acceptance": {"engine": "vllm", "acceptance_histogram": {"0": 3, "3": 8},
                "num_accepted_draft_tokens": 24, "num_draft_tokens": 33, "num_spec_steps": 11, "num_spec_tokens": 3}
        });
        let r = record_from_line(&line, "m", "speed_bench_qualitative", 7).unwrap();
        assert_eq!(
            (r.category.as_deref(), r.turn_index, r.warmup),
            (Some("coding"), 1, false)
        );
        assert_eq!(
            (r.ttft_ns, r.e2e_latency_ns),
            (Some(19_500_000), 82_250_000)
        );
        assert_eq!(r.inter_chunk_latencies_ns, vec![1_500_000, 2_000_000]);
        assert_eq!(r.completion_tokens, Some(48));
        let s = r.spec.unwrap();
        assert_eq!(s.acceptance_histogram, vec![3, 0, 0, 8]);
        assert_eq!(
            (
                s.accepted_draft_tokens,
                s.proposed_draft_tokens,
                s.verify_steps
            ),
            (24, 33, Some(11))
        );
        assert_eq!(s.source, Some(SpecSource::Vllm));
    }

    #[test]
    fn warmup_errors_and_metric_only_spec_values() {
        let line = json!({
            "metadata": {"phase_kind": "warmup"},
            "metrics": {"spec_decode_accepted_draft_tokens": {"value": 31}, "spec_decode_draft_tokens": {"value": 51},
                "spec_decode_steps": {"value": 17}},
            "error": {"code": 503, "message": "overloaded"}
        });
        let r = record_from_line(&line, "m", "d", 0).unwrap();
        assert!(r.warmup);
        assert_eq!(
            (r.error_kind, r.http_status),
            (Some(ErrorKind::HttpStatus), Some(503))
        );
        assert_eq!(r.spec.unwrap().verify_steps, Some(17));
        assert!(record_from_line(&json!([1, 2]), "m", "d", 0).is_none());
    }
}
