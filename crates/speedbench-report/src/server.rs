//! Acceptance from a server-metrics export (`server_metrics_export.json`).
//!
//! The export follows AIPerf's schema: `metrics[name] = {type, series:
//! [{labels, stats}]}`, where a counter series' `stats.total` is its delta
//! over the profiling window and a gauge series' `stats.avg` is the mean of
//! its samples. Names are compared without a `_total` suffix, so exports
//! naming counters either way read the same.

use serde_json::Value;

/// `server_metrics_export.json`.
pub const SERVER_METRICS_JSON: &str = "server_metrics_export.json";

/// How a server-derived number was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighting {
    /// Token-weighted: counter deltas divided once (comparable with records).
    TokenWeighted,
    /// The unweighted mean of gauge samples over time: an idle interval counts
    /// as much as a busy one, so it must not be compared with token-weighted cells.
    TimeAveragedGauge,
}

/// Gauges that carry acceptance length directly, in the order AIPerf checks them.
const LENGTH_GAUGES: [&str; 4] = [
    "sglang:spec_accept_length",
    "vllm:spec_decode_mean_accepted_length",
    "trtllm:spec_accept_length",
    "trtllm_spec_decode_acceptance_length",
];
/// Gauges that carry the acceptance rate directly.
const RATE_GAUGES: [&str; 3] = [
    "sglang:spec_accept_rate",
    "vllm:spec_decode_draft_acceptance_rate",
    "trtllm:spec_accept_rate",
];
/// How an engine's verify steps are counted on `/metrics`.
#[derive(Clone, Copy)]
enum Steps {
    /// A counter of verify steps: vLLM drafts on every step, so its
    /// `num_drafts` counts them all.
    Counter(&'static str),
    /// Predicted tokens minus accepted drafts: llama.cpp drafts only on some
    /// steps (its `num_drafts` counts those), and every target pass emits
    /// one token plus the drafts it accepted, as per request
    /// (`predicted_n - draft_n_accepted`).
    PredictedMinusAccepted(&'static str),
}

/// Counter families: (accepted tokens, draft tokens, verify steps).
///
/// A real server exposes one family. llama.cpp's comes first because it
/// counts every target pass: where both are present (the simulator's
/// llama.cpp flavour also serves vLLM's names), vLLM's `num_drafts` counts
/// only the steps that drafted.
const COUNTER_FAMILIES: [(&str, &str, Option<Steps>); 3] = [
    (
        "llamacpp:spec_decode_num_accepted_tokens",
        "llamacpp:spec_decode_num_draft_tokens",
        Some(Steps::PredictedMinusAccepted("llamacpp:tokens_predicted")),
    ),
    (
        "vllm:spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_draft_tokens",
        Some(Steps::Counter("vllm:spec_decode_num_drafts")),
    ),
    (
        "trtllm_spec_decode_num_accepted_tokens",
        "trtllm_spec_decode_num_draft_tokens",
        None,
    ),
];

fn base_name(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

fn metric<'a>(export: &'a Value, name: &str) -> Option<&'a Value> {
    let metrics = export.get("metrics")?.as_object()?;
    metrics
        .iter()
        .find(|(k, _)| base_name(k) == base_name(name))
        .map(|(_, v)| v)
}

fn series_stats<'a>(m: &'a Value, stat: &'a str) -> impl Iterator<Item = f64> + 'a {
    m.get("series")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(move |s| s.pointer(&format!("/stats/{stat}")).and_then(Value::as_f64))
        .filter(|v| v.is_finite())
}

/// A counter's delta summed over every series (engines, ranks, endpoints):
/// AIPerf reads only the first series, which undercounts data-parallel servers.
fn counter_total(export: &Value, name: &str) -> Option<f64> {
    let m = metric(export, name)?;
    let mut values = series_stats(m, "total").peekable();
    values.peek()?;
    Some(values.sum())
}

/// A gauge's average: the mean of its series' sample means.
fn gauge_avg(export: &Value, name: &str) -> Option<f64> {
    let m = metric(export, name)?;
    let values: Vec<f64> = series_stats(m, "avg").collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Acceptance length from the export: gauges first (as AIPerf), then
/// counters (`1 + Δaccepted / Δsteps`, where steps count the target verify
/// passes that drafted nothing too: for llama.cpp `Δtokens_predicted -
/// Δaccepted`, not its `num_drafts`, so the figure is the one its
/// per-request records give), then any gauge whose name mentions spec,
/// accept and length.
pub fn accept_length(export: &Value) -> Option<(f64, Weighting)> {
    if let Some(v) = LENGTH_GAUGES.iter().find_map(|g| gauge_avg(export, g)) {
        return Some((v, Weighting::TimeAveragedGauge));
    }
    for (accepted, _, steps) in COUNTER_FAMILIES {
        let Some(a) = counter_total(export, accepted) else {
            continue;
        };
        let s = match steps {
            Some(Steps::Counter(name)) => counter_total(export, name),
            Some(Steps::PredictedMinusAccepted(name)) => counter_total(export, name)
                .filter(|p| *p >= a)
                .map(|p| p - a),
            None => None,
        };
        let Some(s) = s else {
            continue;
        };
        if s > 0.0 {
            return Some((1.0 + a / s, Weighting::TokenWeighted));
        }
    }
    let names = export.get("metrics")?.as_object()?;
    names
        .keys()
        .filter(|k| {
            let l = k.to_ascii_lowercase();
            l.contains("spec") && l.contains("accept") && l.contains("length")
        })
        .find_map(|k| gauge_avg(export, k))
        .map(|v| (v, Weighting::TimeAveragedGauge))
}

/// Acceptance rate (a fraction) from the export: gauges first, then
/// counters (`Δaccepted / Δdraft tokens`), TensorRT-LLM's included.
pub fn accept_rate(export: &Value) -> Option<(f64, Weighting)> {
    if let Some(v) = RATE_GAUGES.iter().find_map(|g| gauge_avg(export, g)) {
        return Some((v, Weighting::TimeAveragedGauge));
    }
    COUNTER_FAMILIES.iter().find_map(|(accepted, drafted, _)| {
        let (a, d) = (
            counter_total(export, accepted)?,
            counter_total(export, drafted)?,
        );
        (d > 0.0).then(|| (a / d, Weighting::TokenWeighted))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn counter(total: f64) -> Value {
        json!({"type": "counter", "series": [{"labels": {}, "stats": {"total": total}}]})
    }
    fn gauge(avg: f64) -> Value {
        json!({"type": "gauge", "series": [{"labels": {}, "stats": {"avg": avg}}]})
    }

    #[test]
    fn vllm_counters_are_token_weighted() {
        // The AIPerf run3 export: 241 accepted over 143 drafts, 429 draft tokens.
        let e = json!({"metrics": {
            "vllm:spec_decode_num_accepted_tokens": counter(241.0),
            "vllm:spec_decode_num_draft_tokens": counter(429.0),
            "vllm:spec_decode_num_drafts": counter(143.0)}});
        let (al, w) = accept_length(&e).unwrap();
        // 1 + 241 / 143 = 2.685314...
        assert!((al - (1.0 + 241.0 / 143.0)).abs() < 1e-12);
        assert_eq!(w, Weighting::TokenWeighted);
        // 241 / 429 = 0.561771...
        assert!((accept_rate(&e).unwrap().0 - 241.0 / 429.0).abs() < 1e-12);
    }

    #[test]
    fn counters_sum_across_series_and_accept_total_suffixes() {
        let e = json!({"metrics": {
            "llamacpp:spec_decode_num_accepted_tokens_total": {"series": [
                {"stats": {"total": 100.0}}, {"stats": {"total": 50.0}}]},
            "llamacpp:tokens_predicted_total": {"series": [
                {"stats": {"total": 160.0}}, {"stats": {"total": 90.0}}]},
            "llamacpp:spec_decode_num_drafts_total": {"series": [
                {"stats": {"total": 6.0}}, {"stats": {"total": 4.0}}]}}});
        // steps = (160 + 90) - (100 + 50) = 100: 1 + 150 / 100 = 2.5
        assert_eq!(accept_length(&e), Some((2.5, Weighting::TokenWeighted)));
        assert_eq!(accept_rate(&e), None);
    }

    #[test]
    fn llamacpp_length_counts_the_steps_that_drafted_nothing() {
        // ngram-mod on llama-server: 294 accepted over 11 drafts, but 357
        // tokens predicted, so 63 target passes: 1 + 294 / 63 =
        // 5.666666666666667, not 1 + 294 / 11 = 27.73 per drafting step.
        let e = json!({"metrics": {
            "llamacpp:spec_decode_num_accepted_tokens": counter(294.0),
            "llamacpp:spec_decode_num_draft_tokens": counter(300.0),
            "llamacpp:spec_decode_num_drafts": counter(11.0),
            "llamacpp:tokens_predicted": counter(357.0)}});
        assert_eq!(
            accept_length(&e),
            Some((1.0 + 294.0 / 63.0, Weighting::TokenWeighted))
        );
        // No predicted-tokens counter: the steps are unknown, so no length
        // (the per-draft figure is a different quantity).
        let e = json!({"metrics": {
            "llamacpp:spec_decode_num_accepted_tokens": counter(294.0),
            "llamacpp:spec_decode_num_drafts": counter(11.0)}});
        assert_eq!(accept_length(&e), None);
    }

    #[test]
    fn gauges_win_and_are_marked_time_averaged() {
        let e = json!({"metrics": {"sglang:spec_accept_length": gauge(3.0),
            "vllm:spec_decode_num_accepted_tokens": counter(100.0), "vllm:spec_decode_num_drafts": counter(100.0),
            "sglang:spec_accept_rate": gauge(0.75)}});
        assert_eq!(accept_length(&e), Some((3.0, Weighting::TimeAveragedGauge)));
        assert_eq!(accept_rate(&e), Some((0.75, Weighting::TimeAveragedGauge)));
    }

    #[test]
    fn trtllm_names_and_fuzzy_fallback() {
        let e = json!({"metrics": {"trtllm_spec_decode_acceptance_length": gauge(2.2),
            "trtllm_spec_decode_num_accepted_tokens": counter(30.0),
            "trtllm_spec_decode_num_draft_tokens": counter(40.0)}});
        assert_eq!(accept_length(&e), Some((2.2, Weighting::TimeAveragedGauge)));
        // AIPerf finds no TRT-LLM rate; the counters give 30 / 40.
        assert_eq!(accept_rate(&e), Some((0.75, Weighting::TokenWeighted)));
        let fuzzy = json!({"metrics": {"custom_engine_spec_accept_length": gauge(1.8),
            "request_acceptance_total_length": gauge(99.0)}});
        assert_eq!(
            accept_length(&fuzzy),
            Some((1.8, Weighting::TimeAveragedGauge))
        );
        let zero = json!({"metrics": {"vllm:spec_decode_num_accepted_tokens": counter(0.0),
            "vllm:spec_decode_num_drafts": counter(0.0)}});
        assert_eq!(accept_length(&zero), None);
        assert_eq!(accept_length(&json!({})), None);
    }
}
