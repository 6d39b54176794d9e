//! What one speculative run at draft budget `K` predicts for every smaller
//! budget `k`, with the baseline's time per target pass (docs/tune.md):
//!
//! - tokens per pass at `k`: `T_k = 1 + Σ_j h_j·min(j, k) / P`, where `h_j`
//!   counts the run's verify steps that accepted `j` drafts and `P` its
//!   passes after the first token: a step that accepted `j` of `K` drafts
//!   would have accepted `min(j, k)` of `k`, assuming the first `k` drafts
//!   of a budget-`K` drafter are what a budget-`k` drafter proposes, and
//!   are accepted the same way (true of draft models and n-gram drafters).
//!   Passes that drafted nothing stay one token at every budget;
//! - time per pass at `k`: `t_k = t_0 + (t_K - t_0)·k/K`, the baseline's
//!   pass plus the run's extra cost (drafting, and verifying the drafts)
//!   shared equally among its `K` drafts;
//! - decode speedup at `k`: `T_k·t_0 / t_k` (tokens per millisecond
//!   against the baseline's one token per `t_0`).
//!
//! At `k = K` this is the run's own measured decode speedup
//! ([`decode_speedup`]) wherever its histograms count its accepted drafts;
//! the error at smaller `k` is the model's.

use serde::Serialize;
use speedbench_record::RequestRecord;

use crate::is_measured;

/// The prediction for one draft budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetPrediction {
    /// The draft budget `k`.
    pub k: u32,
    /// Predicted tokens per verify step `T_k`.
    pub acceptance_length: f64,
    /// Predicted time per pass `t_k`, milliseconds.
    pub pass_ms: f64,
    /// Predicted decode speedup against the baseline.
    pub decode_speedup: f64,
}

/// A run's decode window and target passes, summed over its measured,
/// streamed requests with at least two tokens: `(Σ (e2e - ttft) in ms,
/// Σ passes after the first token, Σ tokens after the first)`, where a
/// request's passes are its tokens after the first less the drafts it
/// accepted. `None` without such a request.
fn decode_totals(records: &[&RequestRecord]) -> Option<(f64, u64, u64)> {
    let mut window_ms = 0.0;
    let (mut passes, mut tokens) = (0u64, 0u64);
    for r in records.iter().filter(|r| is_measured(r)) {
        let (Some(ttft), Some(n)) = (r.ttft_ns, r.completion_tokens) else {
            continue;
        };
        if n < 2 || r.e2e_latency_ns <= ttft {
            continue;
        }
        let accepted = r.spec.as_ref().map_or(0, |s| s.accepted_draft_tokens);
        window_ms += (r.e2e_latency_ns - ttft) as f64 / 1e6;
        passes += (n - 1).saturating_sub(accepted).max(1);
        tokens += n - 1;
    }
    (passes > 0).then_some((window_ms, passes, tokens))
}

/// Milliseconds per target pass after the first token: `Σ (e2e - ttft) /
/// Σ passes` over the measured, streamed requests.
pub fn pass_time_ms(records: &[&RequestRecord]) -> Option<f64> {
    decode_totals(records).map(|(ms, passes, _)| ms / passes as f64)
}

/// The decode speedup of `spec` over `base` as the prediction measures it:
/// the ratio of their decode rates, `Σ tokens after the first / Σ (e2e -
/// ttft)`, each over its run's measured, streamed requests.
pub fn decode_speedup(base: &[&RequestRecord], spec: &[&RequestRecord]) -> Option<f64> {
    let rate = |r: &[&RequestRecord]| decode_totals(r).map(|(ms, _, tokens)| tokens as f64 / ms);
    Some(rate(spec)? / rate(base)?)
}

/// What a speculative run and its baseline measured, for
/// [`predict_budgets`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredPasses {
    /// The baseline's milliseconds per pass ([`pass_time_ms`]).
    pub base_pass_ms: f64,
    /// The speculative run's milliseconds per pass.
    pub spec_pass_ms: f64,
    /// The speculative run's passes after the first token.
    pub spec_passes: u64,
}

impl MeasuredPasses {
    /// The figures of `base` and `spec` (each a run's records; measured,
    /// streamed ones count), when both have some.
    pub fn of(base: &[&RequestRecord], spec: &[&RequestRecord]) -> Option<MeasuredPasses> {
        let (_, spec_passes, _) = decode_totals(spec)?;
        Some(MeasuredPasses {
            base_pass_ms: pass_time_ms(base)?,
            spec_pass_ms: pass_time_ms(spec)?,
            spec_passes,
        })
    }
}

/// The predictions for `k = 1..=K` from the run's pooled acceptance
/// histogram (`histogram[j]`: its steps that accepted `j` drafts; `K` is
/// its last index) and what it and the baseline measured. Empty without
/// a draft bucket or with a figure that is not positive.
pub fn predict_budgets(histogram: &[u64], measured: MeasuredPasses) -> Vec<BudgetPrediction> {
    let MeasuredPasses {
        base_pass_ms,
        spec_pass_ms,
        spec_passes,
    } = measured;
    let budget = histogram.len().saturating_sub(1);
    if budget == 0 || spec_passes == 0 || !(base_pass_ms > 0.0 && spec_pass_ms > 0.0) {
        return Vec::new();
    }
    let extra_per_draft = (spec_pass_ms - base_pass_ms) / budget as f64;
    (1..=budget)
        .map(|k| {
            let accepted: u64 = histogram
                .iter()
                .enumerate()
                .map(|(j, &count)| count * j.min(k) as u64)
                .sum();
            let length = 1.0 + accepted as f64 / spec_passes as f64;
            let pass_ms = base_pass_ms + extra_per_draft * k as f64;
            BudgetPrediction {
                k: k as u32,
                acceptance_length: length,
                pass_ms,
                decode_speedup: length * base_pass_ms / pass_ms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::SpecDecodeStats;

    fn record(ttft_ms: u64, e2e_ms: u64, tokens: u64, accepted: u64) -> RequestRecord {
        RequestRecord {
            ttft_ns: Some(ttft_ms * 1_000_000),
            e2e_latency_ns: e2e_ms * 1_000_000,
            completion_tokens: Some(tokens),
            http_status: Some(200),
            spec: (accepted > 0).then(|| SpecDecodeStats {
                accepted_draft_tokens: accepted,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_prediction_is_worked_out_by_hand() {
        // Baseline: 2 requests of 11 tokens, 10 passes in 50 ms each: 5 ms a pass.
        let base = [record(20, 70, 11, 0), record(30, 80, 11, 0)];
        // Speculative, K = 2: 21 tokens, 12 of them drafts, so 8 passes
        // after the first token in 64 ms: 8 ms a pass.
        let spec = [record(10, 74, 21, 12)];
        let b: Vec<&RequestRecord> = base.iter().collect();
        let s: Vec<&RequestRecord> = spec.iter().collect();
        assert_eq!(pass_time_ms(&b), Some(5.0));
        assert_eq!(pass_time_ms(&s), Some(8.0));
        let measured = MeasuredPasses::of(&b, &s).unwrap();
        assert_eq!(
            measured,
            MeasuredPasses {
                base_pass_ms: 5.0,
                spec_pass_ms: 8.0,
                spec_passes: 8,
            }
        );
        // Steps accepting 0, 1 and 2 drafts: 1, 2 and 5 (12 accepted, as
        // the record says).
        let p = predict_budgets(&[1, 2, 5], measured);
        // k = 1: T = 1 + (2·1 + 5·1)/8, t = 5 + 3/2·1 = 6.5.
        assert_eq!(p[0].k, 1);
        assert!((p[0].acceptance_length - 1.875).abs() < 1e-12);
        assert!((p[0].pass_ms - 6.5).abs() < 1e-12);
        assert!((p[0].decode_speedup - 1.875 * 5.0 / 6.5).abs() < 1e-12);
        // k = K: T = 1 + 12/8 = 2.5, t = 8: the run's own measured
        // speedup, 20 tokens in 64 ms against 20 in 100 ms.
        let own = decode_speedup(&b, &s).unwrap();
        assert!((own - (20.0 / 64.0) / (20.0 / 100.0)).abs() < 1e-12);
        assert!((p[1].decode_speedup - own).abs() < 1e-12);
        assert!(predict_budgets(&[7], measured).is_empty());
        let no_time = MeasuredPasses {
            base_pass_ms: 0.0,
            ..measured
        };
        assert!(predict_budgets(&[1, 1], no_time).is_empty());
    }
}
