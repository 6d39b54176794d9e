//! Acceptance from a server-metrics export: the one precedence between
//! gauges and counters that every reader (the client's end-of-run line,
//! `speedbench report --source server`) uses.
//!
//! **Precedence (AIPerf `speed-bench-report`'s):**
//!
//! 1. *Acceptance-length gauges*, in AIPerf's order:
//!    `sglang:spec_accept_length`, `vllm:spec_decode_mean_accepted_length`,
//!    `trtllm:spec_accept_length`, then TensorRT-LLM's real
//!    `trtllm_spec_decode_acceptance_length` (which AIPerf reaches through
//!    its name-matching fallback). The value is the mean of the series'
//!    in-window sample means: time-averaged, not token-weighted.
//! 2. *Counters*: `1 + Δaccepted / Δsteps`, token-weighted, from the first
//!    engine family with both, in the order llama.cpp, vLLM, TensorRT-LLM.
//!    Steps count every target verify pass: vLLM drafts on every step, so
//!    its `num_drafts`; llama.cpp drafts only on some, so
//!    `Δtokens_predicted - Δaccepted` (llama.cpp comes first because, where
//!    both are exposed, vLLM-named drafts count only the drafting steps).
//! 3. *Any other gauge* whose name holds `spec`, `accept` and `length`.
//!
//! Acceptance rate: the rate gauges (`sglang:spec_accept_rate`,
//! `vllm:spec_decode_draft_acceptance_rate`, `trtllm:spec_accept_rate`),
//! then counters `Δaccepted / Δdraft_tokens` (TensorRT-LLM's included,
//! which AIPerf misses).
//!
//! Unlike AIPerf, which reads `series[0]` only, counter deltas are summed
//! over every series (engines, ranks, endpoints), and names match with or
//! without a `_total` suffix.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::export::{MetricExport, SeriesStats, ServerMetricsExport};

/// How a server-derived number was computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weighting {
    /// Token-weighted: counter deltas divided once (comparable with
    /// per-request records).
    TokenWeighted,
    /// The unweighted mean of gauge samples over time: an idle interval
    /// counts as much as a busy one, so it must not be compared with
    /// token-weighted figures.
    TimeAveragedGauge,
}

impl fmt::Display for Weighting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Weighting::TokenWeighted => "counters, token-weighted",
            Weighting::TimeAveragedGauge => "gauges, time-averaged, not token-weighted",
        })
    }
}

/// One acceptance figure and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Acceptance {
    /// The figure: tokens per verify step for a length, a fraction for a
    /// rate.
    pub value: f64,
    /// Counters or gauges.
    pub weighting: Weighting,
    /// The metric read: the gauge, or the accepted-tokens counter.
    pub metric: String,
}

/// Acceptance derived from one engine's server metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeSummary {
    /// `llamacpp`, `vllm`, `trtllm` (Prometheus), `trtllm_iter`
    /// (TensorRT-LLM's JSON iteration statistics) or `sglang`.
    pub engine: String,
    /// Steps that drafted (`…num_drafts`), when the engine counts them.
    pub drafts: Option<f64>,
    /// Target verify steps, counting those that drafted nothing: the
    /// denominator of a counter-derived acceptance length. vLLM and
    /// TensorRT-LLM draft on every step, so it is `drafts`; llama.cpp
    /// drafts only when its drafter has a candidate, so it is
    /// `Δtokens_predicted - Δaccepted` (every pass emits one token plus the
    /// drafts it accepted), as its per-request `predicted_n -
    /// draft_n_accepted`.
    pub steps: Option<f64>,
    /// Proposed draft tokens.
    pub draft_tokens: Option<f64>,
    /// Accepted draft tokens.
    pub accepted_tokens: Option<f64>,
    /// Mean tokens per verify step, bonus token included: the engine's
    /// gauge, else its counters (the module's precedence, within one
    /// engine).
    pub acceptance_length: Option<Acceptance>,
    /// Accepted / proposed draft tokens, a fraction: the engine's gauge,
    /// else its counters.
    pub acceptance_rate: Option<Acceptance>,
    /// Acceptance per draft position: accepted at position i over
    /// [`Self::steps`], the acceptance length's own denominator (so that
    /// `1 + Σ per_position` is the counter-derived acceptance length). For
    /// vLLM and TensorRT-LLM the steps are their drafts (what `vllm bench
    /// serve` divides by); for llama.cpp they are its target passes, not
    /// the drafting steps alone. Over drafts when the steps are unknown.
    pub per_position: Vec<f64>,
}

impl SpecDecodeSummary {
    /// The acceptance length as the engine's own log gives it, per
    /// drafting step: `1 + accepted / drafts` (llama-server's; speedbench's
    /// [`acceptance_length`](SpecDecodeSummary::acceptance_length) counts
    /// every target pass, docs/engines.md). `None` without both counters
    /// or without a draft.
    ///
    /// ```
    /// # use speedbench_scrape::SpecDecodeSummary;
    /// let s = SpecDecodeSummary {
    ///     engine: "llamacpp".into(), drafts: Some(4.0), steps: Some(10.0),
    ///     draft_tokens: Some(16.0), accepted_tokens: Some(6.0),
    ///     acceptance_length: None, acceptance_rate: None, per_position: vec![],
    /// };
    /// assert_eq!(s.per_drafting_step_length(), Some(2.5));
    /// ```
    pub fn per_drafting_step_length(&self) -> Option<f64> {
        match (self.accepted_tokens, self.drafts) {
            (Some(accepted), Some(drafts)) if drafts > 0.0 => Some(1.0 + accepted / drafts),
            _ => None,
        }
    }
}

/// How an engine's verify steps are counted on `/metrics`.
#[derive(Clone, Copy)]
enum Steps {
    /// Its `num_drafts` counter: the engine drafts on every step.
    Drafts,
    /// Predicted tokens minus accepted drafts (llama.cpp).
    PredictedMinusAccepted(&'static str),
}

/// An engine's counter names.
struct Counters {
    accepted: &'static str,
    draft_tokens: &'static str,
    drafts: &'static str,
    per_position: &'static str,
    steps: Steps,
}

/// An engine's acceptance metrics.
struct Engine {
    name: &'static str,
    counters: Option<Counters>,
    length_gauges: &'static [&'static str],
    rate_gauges: &'static [&'static str],
}

/// Engines in counter precedence order.
const ENGINES: [Engine; 5] = [
    Engine {
        name: "llamacpp",
        counters: Some(Counters {
            accepted: "llamacpp:spec_decode_num_accepted_tokens",
            draft_tokens: "llamacpp:spec_decode_num_draft_tokens",
            drafts: "llamacpp:spec_decode_num_drafts",
            per_position: "llamacpp:spec_decode_num_accepted_tokens_per_pos",
            steps: Steps::PredictedMinusAccepted("llamacpp:tokens_predicted"),
        }),
        length_gauges: &[],
        rate_gauges: &[],
    },
    Engine {
        name: "vllm",
        counters: Some(Counters {
            accepted: "vllm:spec_decode_num_accepted_tokens",
            draft_tokens: "vllm:spec_decode_num_draft_tokens",
            drafts: "vllm:spec_decode_num_drafts",
            per_position: "vllm:spec_decode_num_accepted_tokens_per_pos",
            steps: Steps::Drafts,
        }),
        length_gauges: &["vllm:spec_decode_mean_accepted_length"],
        rate_gauges: &["vllm:spec_decode_draft_acceptance_rate"],
    },
    Engine {
        name: "trtllm",
        counters: Some(Counters {
            accepted: "trtllm_spec_decode_num_accepted_tokens",
            draft_tokens: "trtllm_spec_decode_num_draft_tokens",
            drafts: "trtllm_spec_decode_num_drafts",
            per_position: "trtllm_spec_decode_num_accepted_tokens_per_pos",
            steps: Steps::Drafts,
        }),
        length_gauges: &[
            "trtllm:spec_accept_length",
            "trtllm_spec_decode_acceptance_length",
        ],
        rate_gauges: &["trtllm:spec_accept_rate"],
    },
    // TensorRT-LLM's JSON iteration statistics (`GET /metrics`), folded
    // into counters by `IterationStatsTotals`: a verify step per request
    // with draft tokens per iteration, as TensorRT-LLM's own tests count.
    Engine {
        name: "trtllm_iter",
        counters: Some(Counters {
            accepted: crate::iteration_stats::ITER_ACCEPTED,
            draft_tokens: crate::iteration_stats::ITER_DRAFT_TOKENS,
            drafts: crate::iteration_stats::ITER_DRAFTS,
            per_position: "trtllm_iter_spec_decode_num_accepted_tokens_per_pos",
            steps: Steps::Drafts,
        }),
        length_gauges: &[],
        rate_gauges: &[],
    },
    Engine {
        name: "sglang",
        counters: None,
        length_gauges: &["sglang:spec_accept_length"],
        rate_gauges: &["sglang:spec_accept_rate"],
    },
];

/// Acceptance-length gauges, in the order AIPerf checks them.
pub const LENGTH_GAUGES: [&str; 4] = [
    "sglang:spec_accept_length",
    "vllm:spec_decode_mean_accepted_length",
    "trtllm:spec_accept_length",
    "trtllm_spec_decode_acceptance_length",
];

/// Acceptance-rate gauges, in the order AIPerf checks them.
pub const RATE_GAUGES: [&str; 3] = [
    "sglang:spec_accept_rate",
    "vllm:spec_decode_draft_acceptance_rate",
    "trtllm:spec_accept_rate",
];

impl ServerMetricsExport {
    /// The family `name`, written with or without a `_total` suffix.
    pub fn family(&self, name: &str) -> Option<&MetricExport> {
        let base = name.strip_suffix("_total").unwrap_or(name);
        self.metrics
            .get(base)
            .or_else(|| self.metrics.get(&format!("{base}_total")))
    }

    /// A counter's delta over the profiling window, summed over every
    /// series (engines, ranks, endpoints): the family's `aggregate` when it
    /// has one (speedbench's exports), else the sum of its series' totals
    /// (AIPerf's). `None` when the family is absent or has no counter
    /// statistics.
    pub fn counter_total(&self, name: &str) -> Option<f64> {
        let m = self.family(name)?;
        if let Some(a) = &m.aggregate {
            return Some(a.total).filter(|t| t.is_finite());
        }
        let mut totals = m
            .series
            .iter()
            .filter_map(|s| match &s.stats {
                Some(SeriesStats::Counter(c)) if c.total.is_finite() => Some(c.total),
                _ => None,
            })
            .peekable();
        totals.peek()?;
        Some(totals.sum())
    }

    /// A gauge's average: the mean of its series' in-window sample means.
    ///
    /// Where the engine publishes one series per engine type (SGLang's
    /// `engine_type="draft"` beside `"unified"`), only the unified or target
    /// series count: the draft model's own series is not the engine's figure.
    pub fn gauge_avg(&self, name: &str) -> Option<f64> {
        let m = self.family(name)?;
        let engine_series = |s: &&crate::export::SeriesExport| {
            matches!(
                s.labels.get("engine_type").map(String::as_str),
                Some("unified" | "target")
            )
        };
        let only_engine = m.series.iter().any(|s| engine_series(&s));
        let avgs: Vec<f64> = m
            .series
            .iter()
            .filter(|s| !only_engine || engine_series(s))
            .filter_map(|s| match &s.stats {
                Some(SeriesStats::Gauge(g)) if g.avg.is_finite() => Some(g.avg),
                _ => None,
            })
            .collect();
        (!avgs.is_empty()).then(|| avgs.iter().sum::<f64>() / avgs.len() as f64)
    }

    /// A per-position counter's delta per `position` label, summed over
    /// the other labels.
    fn by_position(&self, name: &str) -> BTreeMap<String, f64> {
        let Some(m) = self.family(name) else {
            return BTreeMap::new();
        };
        if let Some(a) = &m.aggregate {
            return a.by_position.clone();
        }
        let mut out = BTreeMap::new();
        for s in &m.series {
            if let (Some(SeriesStats::Counter(c)), Some(pos)) = (&s.stats, s.labels.get("position"))
            {
                *out.entry(pos.clone()).or_insert(0.0) += c.total;
            }
        }
        out
    }

    fn gauge(&self, name: &str) -> Option<Acceptance> {
        self.gauge_avg(name).map(|value| Acceptance {
            value,
            weighting: Weighting::TimeAveragedGauge,
            metric: name.to_string(),
        })
    }

    fn steps(&self, c: &Counters) -> Option<f64> {
        match c.steps {
            Steps::Drafts => self.counter_total(c.drafts),
            Steps::PredictedMinusAccepted(predicted) => {
                let a = self.counter_total(c.accepted)?;
                self.counter_total(predicted)
                    .filter(|p| *p >= a)
                    .map(|p| p - a)
            }
        }
    }

    fn counter_length(&self, engine: &Engine) -> Option<Acceptance> {
        let c = engine.counters.as_ref()?;
        let accepted = self.counter_total(c.accepted)?;
        let steps = self.steps(c).filter(|s| *s > 0.0)?;
        Some(Acceptance {
            value: 1.0 + accepted / steps,
            weighting: Weighting::TokenWeighted,
            metric: c.accepted.to_string(),
        })
    }

    fn counter_rate(&self, engine: &Engine) -> Option<Acceptance> {
        let c = engine.counters.as_ref()?;
        let accepted = self.counter_total(c.accepted)?;
        let drafted = self.counter_total(c.draft_tokens).filter(|d| *d > 0.0)?;
        Some(Acceptance {
            value: accepted / drafted,
            weighting: Weighting::TokenWeighted,
            metric: c.accepted.to_string(),
        })
    }

    /// The run's acceptance length, by the module's precedence: the
    /// acceptance-length gauges, then counters, then any gauge named like
    /// one (`spec`, `accept` and `length` in its name).
    ///
    /// ```
    /// use speedbench_scrape::{ServerMetricsExport, Weighting};
    /// let json = r#"{"metrics":{
    ///   "vllm:spec_decode_num_drafts":{"type":"counter","series":[{"stats":{"total":143.0}}]},
    ///   "vllm:spec_decode_num_accepted_tokens":{"type":"counter","series":[{"stats":{"total":241.0}}]}}}"#;
    /// let export = ServerMetricsExport::from_json(json)?;
    /// let al = export.acceptance_length().unwrap();
    /// assert_eq!((al.value, al.weighting), (1.0 + 241.0 / 143.0, Weighting::TokenWeighted));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn acceptance_length(&self) -> Option<Acceptance> {
        LENGTH_GAUGES
            .iter()
            .find_map(|g| self.gauge(g))
            .or_else(|| ENGINES.iter().find_map(|e| self.counter_length(e)))
            .or_else(|| {
                self.metrics
                    .keys()
                    .filter(|k| {
                        let l = k.to_ascii_lowercase();
                        l.contains("spec") && l.contains("accept") && l.contains("length")
                    })
                    .find_map(|k| self.gauge(k))
            })
    }

    /// The run's acceptance rate (a fraction): the rate gauges, then
    /// counters (`Δaccepted / Δdraft_tokens`, only when draft tokens were
    /// counted).
    pub fn acceptance_rate(&self) -> Option<Acceptance> {
        RATE_GAUGES
            .iter()
            .find_map(|g| self.gauge(g))
            .or_else(|| ENGINES.iter().find_map(|e| self.counter_rate(e)))
    }

    /// Acceptance per engine found in the export (llama.cpp, vLLM,
    /// TensorRT-LLM, SGLang, in that order), each by the module's
    /// precedence restricted to that engine's metrics: its gauge, else
    /// `1 + Δaccepted / Δsteps` and `Δaccepted / Δdraft_tokens` as `vllm
    /// bench serve` computes them.
    ///
    /// ```
    /// use speedbench_scrape::ServerMetricsExport;
    /// let json = r#"{"schema_version":"1.0","tool":"t","metrics":{
    ///   "vllm:spec_decode_num_drafts":{"type":"counter","series":[],"aggregate":{"total":10.0,"rate":null}},
    ///   "vllm:spec_decode_num_draft_tokens":{"type":"counter","series":[],"aggregate":{"total":40.0,"rate":null}},
    ///   "vllm:spec_decode_num_accepted_tokens":{"type":"counter","series":[],"aggregate":{"total":25.0,"rate":null}}}}"#;
    /// let export = ServerMetricsExport::from_json(json)?;
    /// let s = &export.spec_decode()[0];
    /// assert_eq!(s.engine, "vllm");
    /// assert_eq!(s.acceptance_length.as_ref().map(|a| a.value), Some(3.5));
    /// assert_eq!(s.acceptance_rate.as_ref().map(|a| a.value), Some(0.625));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn spec_decode(&self) -> Vec<SpecDecodeSummary> {
        let mut out = Vec::new();
        for engine in &ENGINES {
            let length = engine
                .length_gauges
                .iter()
                .find_map(|g| self.gauge(g))
                .or_else(|| self.counter_length(engine));
            let rate = engine
                .rate_gauges
                .iter()
                .find_map(|g| self.gauge(g))
                .or_else(|| self.counter_rate(engine));
            let counted = engine.counters.as_ref().map(|c| {
                (
                    c,
                    self.counter_total(c.drafts),
                    self.counter_total(c.draft_tokens),
                    self.counter_total(c.accepted),
                )
            });
            let has_counters = counted
                .as_ref()
                .is_some_and(|(_, _, d, a)| d.is_some() || a.is_some());
            if !has_counters && length.is_none() && rate.is_none() {
                continue;
            }
            let mut summary = SpecDecodeSummary {
                engine: engine.name.into(),
                drafts: None,
                steps: None,
                draft_tokens: None,
                accepted_tokens: None,
                acceptance_length: length,
                acceptance_rate: rate,
                per_position: Vec::new(),
            };
            if let Some((c, drafts, draft_tokens, accepted)) = counted {
                summary.drafts = drafts;
                summary.steps = self.steps(c);
                summary.draft_tokens = draft_tokens;
                summary.accepted_tokens = accepted;
                // One denominator for the row: the length's steps.
                if let Some(d) = summary.steps.or(drafts).filter(|d| *d > 0.0) {
                    let mut by: Vec<(u64, f64)> = self
                        .by_position(c.per_position)
                        .iter()
                        .filter_map(|(k, v)| Some((k.parse().ok()?, *v / d)))
                        .collect();
                    by.sort_by_key(|(k, _)| *k);
                    summary.per_position = by.into_iter().map(|(_, v)| v).collect();
                }
            }
            out.push(summary);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn counter(total: f64) -> Value {
        json!({"type": "counter", "series": [{"labels": {}, "stats": {"total": total}}]})
    }
    fn gauge(avg: f64) -> Value {
        json!({"type": "gauge", "series": [{"labels": {}, "stats": {
            "avg": avg, "min": avg, "max": avg, "std": 0.0, "p1": avg, "p5": avg, "p10": avg,
            "p25": avg, "p50": avg, "p75": avg, "p90": avg, "p95": avg, "p99": avg}}]})
    }
    fn export(metrics: Value) -> ServerMetricsExport {
        ServerMetricsExport::from_json(&json!({ "metrics": metrics }).to_string()).unwrap()
    }
    fn length(e: &ServerMetricsExport) -> Option<(f64, Weighting)> {
        e.acceptance_length().map(|a| (a.value, a.weighting))
    }
    fn rate(e: &ServerMetricsExport) -> Option<(f64, Weighting)> {
        e.acceptance_rate().map(|a| (a.value, a.weighting))
    }

    #[test]
    fn aiperfs_hand_written_exports_read() {
        // AIPerf's own report tests: no `type`, a gauge's `avg` alone (2.5
        // expected), and a histogram series that saw nothing: `{"count": 0}`.
        let text = r#"{"metrics": {
            "sglang:spec_accept_length": {"series": [{"stats": {"avg": 2.5}}]},
            "http_request_duration_seconds": {"type": "histogram",
                "series": [{"labels": {"handler": "/v1/models"}, "stats": {"count": 0}}]}}}"#;
        let e = ServerMetricsExport::from_json(text).unwrap();
        assert_eq!(e.acceptance_length().unwrap().value, 2.5);
        let empty = &e.metrics["http_request_duration_seconds"].series[0];
        match &empty.stats {
            Some(SeriesStats::Gauge(g)) => assert!(g.count == 0 && g.avg.is_nan()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn vllm_counters_are_token_weighted() {
        // The AIPerf run3 export: 241 accepted over 143 drafts, 429 draft tokens.
        let e = export(json!({
            "vllm:spec_decode_num_accepted_tokens": counter(241.0),
            "vllm:spec_decode_num_draft_tokens": counter(429.0),
            "vllm:spec_decode_num_drafts": counter(143.0)}));
        // 1 + 241 / 143 = 2.685314...
        assert_eq!(
            length(&e),
            Some((1.0 + 241.0 / 143.0, Weighting::TokenWeighted))
        );
        // 241 / 429 = 0.561771...
        assert_eq!(rate(&e), Some((241.0 / 429.0, Weighting::TokenWeighted)));
    }

    #[test]
    fn counters_sum_across_series_and_accept_total_suffixes() {
        let two = |a: f64, b: f64| json!({"type": "counter", "series": [{"stats": {"total": a}}, {"stats": {"total": b}}]});
        let e = export(json!({
            "llamacpp:spec_decode_num_accepted_tokens_total": two(100.0, 50.0),
            "llamacpp:tokens_predicted_total": two(160.0, 90.0),
            "llamacpp:spec_decode_num_drafts_total": two(6.0, 4.0)}));
        // steps = (160 + 90) - (100 + 50) = 100: 1 + 150 / 100 = 2.5
        assert_eq!(length(&e), Some((2.5, Weighting::TokenWeighted)));
        assert_eq!(rate(&e), None);
    }

    #[test]
    fn llamacpp_length_counts_the_steps_that_drafted_nothing() {
        // ngram-mod on llama-server: 294 accepted over 12 drafts, but 357
        // tokens predicted, so 63 target passes: 1 + 294 / 63 =
        // 5.666666666666667, not 1 + 294 / 12 = 25.5 per drafting step;
        // rate 294 / 300 = 0.98.
        let e = export(json!({
            "llamacpp:spec_decode_num_accepted_tokens": counter(294.0),
            "llamacpp:spec_decode_num_draft_tokens": counter(300.0),
            "llamacpp:spec_decode_num_drafts": counter(12.0),
            "llamacpp:tokens_predicted": counter(357.0)}));
        assert_eq!(
            length(&e),
            Some((1.0 + 294.0 / 63.0, Weighting::TokenWeighted))
        );
        let s = &e.spec_decode()[0];
        assert_eq!((s.drafts, s.steps), (Some(12.0), Some(63.0)));
        assert_eq!(s.acceptance_rate.as_ref().map(|a| a.value), Some(0.98));
        // By position, over the target passes: 30 accepted (12, 10 and 8
        // at positions 1-3) in 12 drafting steps, 93 tokens predicted, so
        // 63 passes; 1 + Σ per position = 1 + 30/63, the length.
        let e = export(json!({
            "llamacpp:spec_decode_num_accepted_tokens": counter(30.0),
            "llamacpp:spec_decode_num_draft_tokens": counter(36.0),
            "llamacpp:spec_decode_num_drafts": counter(12.0),
            "llamacpp:tokens_predicted": counter(93.0),
            "llamacpp:spec_decode_num_accepted_tokens_per_pos": {"type": "counter", "series": [
                {"labels": {"position": "0"}, "stats": {"total": 12.0}},
                {"labels": {"position": "1"}, "stats": {"total": 10.0}},
                {"labels": {"position": "2"}, "stats": {"total": 8.0}}]}}));
        let s = &e.spec_decode()[0];
        assert_eq!(s.per_position, vec![12.0 / 63.0, 10.0 / 63.0, 8.0 / 63.0]);
        let full = 1.0 + s.per_position.iter().sum::<f64>();
        assert!((full - s.acceptance_length.as_ref().unwrap().value).abs() < 1e-12);
        // No predicted-tokens counter: the steps are unknown, so no length
        // (the per-draft figure is a different quantity).
        let e = export(json!({
            "llamacpp:spec_decode_num_accepted_tokens": counter(294.0),
            "llamacpp:spec_decode_num_drafts": counter(11.0)}));
        assert_eq!(length(&e), None);
        assert_eq!(e.spec_decode()[0].acceptance_length, None);
    }

    /// The one precedence, tested once: an export holding an acceptance
    /// gauge and counters gives the gauge (AIPerf's order), for the run and
    /// for its engine alike.
    #[test]
    fn gauges_win_over_counters_for_the_run_and_its_engine() {
        let e = export(json!({
            "sglang:spec_accept_length": gauge(3.0),
            "sglang:spec_accept_rate": gauge(0.75),
            "vllm:spec_decode_mean_accepted_length": gauge(2.5),
            "vllm:spec_decode_num_accepted_tokens": counter(100.0),
            "vllm:spec_decode_num_draft_tokens": counter(400.0),
            "vllm:spec_decode_num_drafts": counter(100.0)}));
        assert_eq!(length(&e), Some((3.0, Weighting::TimeAveragedGauge)));
        assert_eq!(
            e.acceptance_length().unwrap().metric,
            "sglang:spec_accept_length"
        );
        assert_eq!(rate(&e), Some((0.75, Weighting::TimeAveragedGauge)));
        let by: BTreeMap<String, SpecDecodeSummary> = e
            .spec_decode()
            .into_iter()
            .map(|s| (s.engine.clone(), s))
            .collect();
        let vllm = &by["vllm"];
        let vllm_length = vllm.acceptance_length.as_ref().unwrap();
        assert_eq!(
            (vllm_length.value, vllm_length.weighting),
            (2.5, Weighting::TimeAveragedGauge)
        );
        // vLLM has no rate gauge here: its counters give 100 / 400.
        let vllm_rate = vllm.acceptance_rate.as_ref().unwrap();
        assert_eq!(
            (vllm_rate.value, vllm_rate.weighting),
            (0.25, Weighting::TokenWeighted)
        );
        assert_eq!(
            by["sglang"].acceptance_length.as_ref().map(|a| a.value),
            Some(3.0)
        );
    }

    #[test]
    fn trtllm_names_and_the_name_matching_fallback() {
        let e = export(json!({"trtllm_spec_decode_acceptance_length": gauge(2.2),
            "trtllm_spec_decode_num_accepted_tokens": counter(30.0),
            "trtllm_spec_decode_num_draft_tokens": counter(40.0)}));
        assert_eq!(length(&e), Some((2.2, Weighting::TimeAveragedGauge)));
        // AIPerf finds no TRT-LLM rate; the counters give 30 / 40.
        assert_eq!(rate(&e), Some((0.75, Weighting::TokenWeighted)));
        let fuzzy = export(json!({"custom_engine_spec_accept_length": gauge(1.8),
            "request_acceptance_total_length": gauge(99.0)}));
        assert_eq!(length(&fuzzy), Some((1.8, Weighting::TimeAveragedGauge)));
        // Counters come before the fallback.
        let both = export(json!({"custom_engine_spec_accept_length": gauge(1.8),
            "vllm:spec_decode_num_accepted_tokens": counter(300.0),
            "vllm:spec_decode_num_drafts": counter(200.0)}));
        assert_eq!(length(&both), Some((2.5, Weighting::TokenWeighted)));
        let zero = export(json!({"vllm:spec_decode_num_accepted_tokens": counter(0.0),
            "vllm:spec_decode_num_drafts": counter(0.0),
            "vllm:spec_decode_num_draft_tokens": counter(0.0)}));
        assert_eq!((length(&zero), rate(&zero)), (None, None));
        assert_eq!(length(&export(json!({}))), None);
        assert!(export(json!({})).spec_decode().is_empty());
    }

    #[test]
    fn per_position_acceptance_reads_aiperf_series_too() {
        let per_pos = json!({"type": "counter", "series": [
            {"labels": {"position": "1"}, "stats": {"total": 4.0}},
            {"labels": {"position": "0"}, "stats": {"total": 8.0}},
            {"labels": {"position": "0", "engine": "1"}, "stats": {"total": 2.0}}]});
        let e = export(json!({
            "vllm:spec_decode_num_accepted_tokens_per_pos": per_pos,
            "vllm:spec_decode_num_accepted_tokens": counter(14.0),
            "vllm:spec_decode_num_drafts": counter(10.0)}));
        assert_eq!(e.spec_decode()[0].per_position, vec![1.0, 0.4]);
    }
}
