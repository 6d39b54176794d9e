//! TensorRT-LLM's `GET /metrics`: JSON iteration statistics, not Prometheus
//! text, folded into running counters so that the window's delta is the
//! same token-weighted figure a counter gives.
//!
//! `trtllm-serve` answers `/metrics` with a JSON list, one object per engine
//! iteration; while speculating each carries `specDecodingStats` with
//! `numDraftTokens`, `numAcceptedTokens` and `numRequestsWithDraftTokens`
//! (each of those requests ran one verify step in that iteration). The
//! server drains its queue on each read, and some versions keep it; either
//! way an iteration is counted once, by its `iter` number.

use serde_json::Value;

use crate::error::ScrapeError;
use crate::parse::{Exposition, parse_exposition};

/// Counter of verify steps: Σ `numRequestsWithDraftTokens`.
pub const ITER_DRAFTS: &str = "trtllm_iter_spec_decode_num_drafts";
/// Counter of proposed draft tokens: Σ `numDraftTokens`.
pub const ITER_DRAFT_TOKENS: &str = "trtllm_iter_spec_decode_num_draft_tokens";
/// Counter of accepted draft tokens: Σ `numAcceptedTokens`.
pub const ITER_ACCEPTED: &str = "trtllm_iter_spec_decode_num_accepted_tokens";
/// Counter of iterations seen.
pub const ITER_ITERATIONS: &str = "trtllm_iter_iterations";

/// True when an endpoint's body is a JSON list (TensorRT-LLM's iteration
/// statistics) rather than Prometheus text, which never starts with `[`.
pub fn is_iteration_stats(body: &str) -> bool {
    body.trim_start().starts_with('[')
}

/// The running totals of one endpoint's iteration statistics.
///
/// ```
/// use speedbench_scrape::IterationStatsTotals;
/// let mut totals = IterationStatsTotals::default();
/// let body = r#"[{"iter": 1, "specDecodingStats": {"numDraftTokens": 6,
///     "numAcceptedTokens": 4, "numRequestsWithDraftTokens": 2, "acceptanceLength": 3.0}}]"#;
/// let exposition = totals.absorb(body)?;
/// assert_eq!(exposition.counters().len(), 4);
/// // Read again (a server that keeps its queue): not counted twice.
/// totals.absorb(body)?;
/// assert_eq!(totals.accepted_tokens(), 4.0);
/// # Ok::<(), speedbench_scrape::ScrapeError>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct IterationStatsTotals {
    last_iter: Option<u64>,
    iterations: f64,
    drafts: f64,
    draft_tokens: f64,
    accepted: f64,
}

fn bad(message: String) -> ScrapeError {
    ScrapeError::Exposition { line: 1, message }
}

fn count(stats: &Value, name: &str, at: usize) -> Result<f64, ScrapeError> {
    match stats.get(name) {
        None | Some(Value::Null) => Ok(0.0),
        Some(v) => v
            .as_f64()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| {
                bad(format!(
                    "iteration stats entry {at}: `{name}` is not a count"
                ))
            }),
    }
}

impl IterationStatsTotals {
    /// Adds the iterations of one fetch not counted before and returns the
    /// running totals as a Prometheus exposition of four counters
    /// ([`ITER_DRAFTS`], [`ITER_DRAFT_TOKENS`], [`ITER_ACCEPTED`],
    /// [`ITER_ITERATIONS`]).
    pub fn absorb(&mut self, body: &str) -> Result<Exposition, ScrapeError> {
        let list: Vec<Value> = serde_json::from_str(body)
            .map_err(|e| bad(format!("iteration statistics are not a JSON list: {e}")))?;
        let mut newest = self.last_iter;
        for (at, entry) in list.iter().enumerate() {
            let iter = entry.get("iter").and_then(Value::as_u64);
            if let (Some(i), Some(last)) = (iter, self.last_iter)
                && i <= last
            {
                continue;
            }
            newest = newest.max(iter);
            self.iterations += 1.0;
            if let Some(spec) = entry.get("specDecodingStats").filter(|s| s.is_object()) {
                self.drafts += count(spec, "numRequestsWithDraftTokens", at)?;
                self.draft_tokens += count(spec, "numDraftTokens", at)?;
                self.accepted += count(spec, "numAcceptedTokens", at)?;
            }
        }
        self.last_iter = newest;
        let mut text = String::new();
        for (name, value) in [
            (ITER_DRAFTS, self.drafts),
            (ITER_DRAFT_TOKENS, self.draft_tokens),
            (ITER_ACCEPTED, self.accepted),
            (ITER_ITERATIONS, self.iterations),
        ] {
            text.push_str(&format!("# TYPE {name} counter\n{name}_total {value}\n"));
        }
        parse_exposition(&text)
    }

    /// Accepted draft tokens counted so far.
    pub fn accepted_tokens(&self) -> f64 {
        self.accepted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(e: &Exposition, name: &str) -> f64 {
        let key = format!("{name}_total{{}}");
        e.counters().into_iter().find(|(k, _)| *k == key).unwrap().1
    }

    #[test]
    fn the_documented_example_without_speculation_counts_one_iteration() {
        // trtllm-serve docs' "Example Output" of GET /metrics.
        let body = r#"[{"gpuMemUsage": 56401920000, "inflightBatchingStats": {}, "iter": 1,
            "iterLatencyMS": 16.5, "kvCacheStats": {}, "newActiveRequestsQueueLatencyMS": 0.0007}]"#;
        let mut t = IterationStatsTotals::default();
        let e = t.absorb(body).unwrap();
        assert_eq!(total(&e, ITER_ITERATIONS), 1.0);
        assert_eq!(total(&e, ITER_DRAFTS), 0.0);
    }

    #[test]
    fn drained_and_kept_queues_count_each_iteration_once() {
        let mut t = IterationStatsTotals::default();
        let a = r#"[{"iter": 1, "specDecodingStats": {"numDraftTokens": 9, "numAcceptedTokens": 5, "numRequestsWithDraftTokens": 3}},
                   {"iter": 2, "specDecodingStats": {"numDraftTokens": 6, "numAcceptedTokens": 6, "numRequestsWithDraftTokens": 2}}]"#;
        t.absorb(a).unwrap();
        // A kept queue repeats iteration 2; a drained one would not.
        let b = r#"[{"iter": 2, "specDecodingStats": {"numDraftTokens": 6, "numAcceptedTokens": 6, "numRequestsWithDraftTokens": 2}},
                   {"iter": 3, "specDecodingStats": {"numDraftTokens": 3, "numAcceptedTokens": 1, "numRequestsWithDraftTokens": 1}}]"#;
        let e = t.absorb(b).unwrap();
        assert_eq!(total(&e, ITER_ACCEPTED), 12.0);
        assert_eq!(total(&e, ITER_DRAFT_TOKENS), 18.0);
        assert_eq!(total(&e, ITER_DRAFTS), 6.0);
        assert!(t.absorb("{}").is_err());
        assert!(
            t.absorb(r#"[{"iter": 9, "specDecodingStats": {"numDraftTokens": -1}}]"#)
                .is_err()
        );
    }
}
