//! Run-level speculative-decoding statistics (AIPerf's "Spec Decode" section).

use serde::{Deserialize, Serialize};
use speedbench_record::{RequestRecord, SpecSource};

use crate::acceptance::{AcceptanceTotals, RequestAcceptance, request_acceptance, run_speculates};
use crate::measured::is_measured;
use crate::passes::{PassFold, run_passes};
use crate::request::RequestMetricsExt;
use crate::summary::Summary;
use crate::summary_passes::{SummaryPasses, end_passes};

/// Speculative-decoding statistics over the measured (non-warmup,
/// successful) requests of a run, following AIPerf's per-request
/// spec-decode metrics.
///
/// Per-request distributions weigh every request equally; the token-weighted
/// ratios ([`Self::token_weighted_acceptance_length`],
/// [`Self::overall_draft_acceptance_rate_pct`]) weigh every verify step /
/// draft token equally. The two agree only when step counts are similar.
///
/// In a run where some request drafted, a llama.cpp request that drafted
/// nothing (its `timings` carry no draft fields) counts as `predicted_n`
/// steps with nothing accepted: acceptance length 1 in the per-request
/// distributions, and its steps in the token-weighted totals (see
/// [`AcceptanceTotals`]), so every source measures the same quantity.
///
/// A zero-step request (spec stats present, `verify_steps == Some(0)`: it
/// drafted nothing, as an n-gram drafter whose context never matched) is
/// counted in [`Self::zero_step_requests`] and in `totals` (where it adds
/// nothing). vLLM reports its own per-request figures for it
/// (`mean_acceptance_length` 1.0, `draft_acceptance_rate` 0.0) and AIPerf
/// 0.13.0's vLLM adapter keeps them, so a vLLM zero-step request is in the
/// per-request distributions at acceptance length 1, draft acceptance rate
/// 0 % and 0 steps (not in accepted-per-verified, which is 0/0), counted in
/// [`Self::zero_step_in_distributions`]; from any other engine it
/// contributes no per-request value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeMetrics {
    /// Per-request acceptance length `1 + accepted / steps` (ratio);
    /// requests with known, non-zero steps.
    pub acceptance_length: Option<Summary>,
    /// Per-request draft acceptance rate `accepted / proposed * 100` (%);
    /// requests with `proposed > 0`.
    pub draft_acceptance_rate_pct: Option<Summary>,
    /// Per-request `(accepted + steps) / (proposed + steps)` (ratio);
    /// requests with known, non-zero steps.
    pub accepted_per_verified: Option<Summary>,
    /// Per-request verify steps (count); requests with known, non-zero steps.
    pub spec_decode_steps: Option<Summary>,
    /// Summed counters over every measured request with spec stats
    /// (`totals.requests` is the number of such requests).
    pub totals: AcceptanceTotals,
    /// Measured requests whose spec stats report zero verify steps.
    pub zero_step_requests: u64,
    /// Of [`Self::zero_step_requests`], those in the per-request
    /// distributions (vLLM's, at its own figures: acceptance length 1,
    /// draft acceptance rate 0 %, 0 steps).
    #[serde(default)]
    pub zero_step_in_distributions: u64,
    /// Measured requests without spec stats, those counted as having
    /// drafted nothing (`totals.undrafted_requests`) excepted.
    pub requests_without_spec: u64,
    /// The pooled accepted-drafts-per-step histogram.
    pub histogram: PooledHistogram,
    /// vLLM's requests counted per target forward pass ([`PerPass`]).
    #[serde(default)]
    pub per_pass: PerPass,
}

/// Tokens per target forward pass, for an engine whose own step count
/// leaves out the passes that drafted nothing (vLLM with n-gram drafting
/// counts only the steps that drafted: its acceptance length is per
/// drafting step). Every pass, the prefill's included, emits one token plus
/// the drafts it accepted, so a request's passes are `completion_tokens -
/// accepted`, as llama.cpp's steps are counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerPass {
    /// Requests counted (vLLM's, with completion tokens).
    pub requests: u64,
    /// Their completion tokens.
    pub tokens: u64,
    /// Their accepted drafts.
    pub accepted: u64,
    /// Their steps as the engine counts them.
    pub engine_steps: u64,
}

/// [`SpecDecodeMetrics`] folded over records read in passes: the counts
/// in the first pass, the per-request distributions in every pass.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpecFold {
    /// Whether the run speculates ([`run_speculates`]), known before the
    /// first pass.
    speculates: bool,
    totals: AcceptanceTotals,
    histogram: PooledHistogram,
    zero_step_requests: u64,
    zero_step_in_distributions: u64,
    requests_without_spec: u64,
    per_pass: PerPass,
    /// Acceptance length, draft acceptance rate (%), accepted per
    /// verified, steps.
    values: [SummaryPasses; 4],
}

impl SpecFold {
    pub(crate) fn new(speculates: bool) -> SpecFold {
        SpecFold {
            speculates,
            ..Default::default()
        }
    }

    /// The per-request values of `r`, where it has them.
    fn request_values(&mut self, first: bool, r: &RequestRecord) -> Option<[Option<f64>; 4]> {
        if !is_measured(r) {
            return None;
        }
        self.count(first, r)
    }

    /// Counts `r` when `first` (the first pass); its per-request values.
    fn count(&mut self, first: bool, r: &RequestRecord) -> Option<[Option<f64>; 4]> {
        let spec = match request_acceptance(r, self.speculates) {
            RequestAcceptance::Spec(spec) => spec,
            // Drafted nothing in a speculating run: one token per target
            // pass, acceptance length 1 (see AcceptanceTotals).
            RequestAcceptance::Undrafted(n) => {
                if first {
                    self.totals.add_undrafted(n);
                }
                return Some([Some(1.0), None, Some(1.0), Some(n as f64)]);
            }
            // The engine's tokens per iteration: its own per-request figure
            // is the acceptance-length value.
            RequestAcceptance::Iterations { tokens, iterations } => {
                if first {
                    self.totals.add_iterations(tokens, iterations);
                }
                return Some([r.tokens_per_iteration, None, None, Some(iterations as f64)]);
            }
            RequestAcceptance::Dropped(_) => {
                self.totals.dropped_requests += u64::from(first);
                return None;
            }
            RequestAcceptance::Missing => {
                self.requests_without_spec += u64::from(first);
                return None;
            }
        };
        let vllm = spec.source == Some(SpecSource::Vllm);
        let zero_step = spec.verify_steps == Some(0);
        if first {
            self.totals.add(spec);
            self.histogram.add(&spec.acceptance_histogram);
            if vllm {
                self.per_pass.add(r.completion_tokens, spec);
            }
            self.zero_step_requests += u64::from(zero_step);
            self.zero_step_in_distributions += u64::from(zero_step && vllm);
        }
        match zero_step {
            // A request that took no verify step: vLLM's own figures for a
            // request that drafted nothing (AL 1, rate 0, 0 steps); no value
            // from other engines.
            true => vllm.then_some([Some(1.0), Some(0.0), None, Some(0.0)]),
            false => Some([
                r.acceptance_length(),
                r.draft_acceptance_rate_pct(),
                r.accepted_per_verified(),
                spec.verify_steps.map(|s| s as f64),
            ]),
        }
    }
}

impl PassFold for SpecFold {
    fn add(&mut self, pass: u32, r: &RequestRecord) {
        let values = self.request_values(pass == 0, r);
        for (summary, value) in self.values.iter_mut().zip(values.into_iter().flatten()) {
            value.into_iter().for_each(|v| summary.add(v));
        }
    }

    fn end_pass(&mut self) -> bool {
        end_passes(&mut self.values)
    }
}

impl SpecFold {
    pub(crate) fn finish(self) -> SpecDecodeMetrics {
        let [acceptance_length, rate_pct, accepted_per_verified, steps] =
            self.values.map(|s| s.finish());
        SpecDecodeMetrics {
            acceptance_length,
            draft_acceptance_rate_pct: rate_pct,
            accepted_per_verified,
            spec_decode_steps: steps,
            totals: self.totals,
            zero_step_requests: self.zero_step_requests,
            zero_step_in_distributions: self.zero_step_in_distributions,
            requests_without_spec: self.requests_without_spec,
            histogram: self.histogram,
            per_pass: self.per_pass,
        }
    }
}

impl PerPass {
    /// Counts a vLLM request that reported its completion tokens and steps.
    fn add(&mut self, completion_tokens: Option<u64>, spec: &speedbench_record::SpecDecodeStats) {
        if let (Some(tokens), Some(steps)) = (completion_tokens, spec.verify_steps) {
            self.requests += 1;
            self.tokens += tokens;
            self.accepted += spec.accepted_draft_tokens;
            self.engine_steps += steps;
        }
    }

    /// Target forward passes: `tokens - accepted`.
    pub fn passes(&self) -> u64 {
        self.tokens.saturating_sub(self.accepted)
    }

    /// Tokens per target pass, `tokens / passes`; `None` without a pass.
    pub fn length(&self) -> Option<f64> {
        (self.passes() > 0).then(|| self.tokens as f64 / self.passes() as f64)
    }

    /// Decode passes the engine's steps leave out: passes less one
    /// prefill pass per request less the engine's steps (0 when every
    /// decode pass drafted).
    pub fn passes_left_out(&self) -> u64 {
        self.passes()
            .saturating_sub(self.requests)
            .saturating_sub(self.engine_steps)
    }
}

impl SpecDecodeMetrics {
    /// Computes the statistics, skipping warmup and failed records.
    pub fn from_records(records: &[RequestRecord]) -> SpecDecodeMetrics {
        let mut fold = SpecFold::new(run_speculates(records));
        let Ok(()) = run_passes(records, &mut fold, &mut |_| {});
        fold.finish()
    }

    /// Token-weighted acceptance length `1 + Σaccepted / Σsteps` (over the
    /// requests that reported steps); `None` when Σsteps is 0.
    pub fn token_weighted_acceptance_length(&self) -> Option<f64> {
        self.totals.accept_length()
    }

    /// Overall draft acceptance rate `Σaccepted / Σproposed * 100` (%);
    /// `None` when nothing was proposed.
    pub fn overall_draft_acceptance_rate_pct(&self) -> Option<f64> {
        self.totals.accept_rate().map(|r| r * 100.0)
    }
}

/// Sum of the dense per-request acceptance histograms: `counts[j]` is the
/// number of verify steps, over all contributing requests, that accepted
/// exactly `j` drafts.
///
/// Only requests that reported a histogram contribute (`requests` counts
/// them). llama.cpp reports none, so its requests count towards
/// [`SpecDecodeMetrics::totals`] but not here, and
/// [`Self::total_steps`] can be smaller than `totals.steps`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PooledHistogram {
    /// Steps per accepted-draft count `j` (index `j`).
    pub counts: Vec<u64>,
    /// Requests whose (non-empty) histogram was added.
    pub requests: u64,
}

impl PooledHistogram {
    /// Adds one request's dense histogram; an empty one is ignored.
    pub fn add(&mut self, histogram: &[u64]) {
        if histogram.is_empty() {
            return;
        }
        if self.counts.len() < histogram.len() {
            self.counts.resize(histogram.len(), 0);
        }
        for (total, &count) in self.counts.iter_mut().zip(histogram) {
            *total += count;
        }
        self.requests += 1;
    }

    /// Adds another pooled histogram to this one.
    pub fn merge(&mut self, other: &PooledHistogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (total, &count) in self.counts.iter_mut().zip(&other.counts) {
            *total += count;
        }
        self.requests += other.requests;
    }

    /// Σ counts: the verify steps the histogram covers.
    pub fn total_steps(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Percentage of covered steps in each bucket `j` (AIPerf's "Accepted
    /// drafts per step (% of steps)"); empty when no step is covered.
    pub fn percentages(&self) -> Vec<f64> {
        let total = self.total_steps();
        if total == 0 {
            return Vec::new();
        }
        self.counts
            .iter()
            .map(|&c| c as f64 / total as f64 * 100.0)
            .collect()
    }

    /// Where acceptance falls off along the draft: entry `i` is the share
    /// (a fraction) of covered steps that accepted at least `i + 1` drafts,
    /// for `i` in `0..k` (`k` = buckets - 1). A draft token at position
    /// `i` is accepted exactly when at least `i + 1` were, so this is
    /// vLLM's per-position acceptance rate (accepted at position `i` /
    /// drafts). Empty when no step is covered.
    pub fn position_acceptance(&self) -> Vec<f64> {
        let total = self.total_steps();
        if total == 0 {
            return Vec::new();
        }
        (1..self.counts.len())
            .map(|i| self.counts[i..].iter().sum::<u64>() as f64 / total as f64)
            .collect()
    }

    /// The acceptance length each smaller draft budget `k' = 1..=k` would
    /// have given on the same steps: `1 + Σ_j counts[j]·min(j, k') /
    /// Σ counts` (entry `k' - 1`; the last equals the steps' own acceptance
    /// length). An upper bound: it assumes the first `k'` drafts would
    /// have been the same and accepted the same way, and ignores that a
    /// shorter draft is cheaper. Empty when no step is covered.
    pub fn length_at_budgets(&self) -> Vec<f64> {
        length_at_budgets(&self.position_acceptance())
    }
}

/// The acceptance length each draft budget `k' = 1..=k` would have given,
/// from the acceptance by draft position (`at_least[i]`: the share of steps
/// accepting at least `i + 1` drafts, from a histogram or from an engine's
/// per-position counters): `1 + Σ_{i < k'} at_least[i]`, since the drafts a
/// step accepts under budget `k'` are `min(j, k')`, whose mean is that sum.
/// An upper bound (see [`PooledHistogram::length_at_budgets`]).
pub fn length_at_budgets(at_least: &[f64]) -> Vec<f64> {
    at_least
        .iter()
        .scan(1.0, |length, share| {
            *length += share;
            Some(*length)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::histograms_by;
    use speedbench_record::{ErrorKind, SpecDecodeStats, SpecSource};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn vllm(accepted: u64, proposed: u64, steps: u64, hist: &[u64]) -> RequestRecord {
        RequestRecord {
            spec: Some(SpecDecodeStats {
                source: Some(SpecSource::Vllm),
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: Some(steps),
                num_spec_tokens: Some(3),
                acceptance_histogram: hist.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// llama.cpp: steps = predicted_n - draft_n_accepted, no histogram.
    fn llamacpp(accepted: u64, drafted: u64, predicted: u64) -> RequestRecord {
        RequestRecord {
            spec: Some(SpecDecodeStats {
                source: Some(SpecSource::LlamaCpp),
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: drafted,
                verify_steps: Some(predicted - accepted),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn two_vllm_requests() {
        // A: acc 10, steps 43, prop 129, hist [39, 1, 0, 3]
        // B: acc 4,  steps 4,  prop 12,  hist [2, 1, 0, 1]
        // per-request AL: 1 + 10/43 = 1.2325581395, 1 + 4/4 = 2.0 -> mean 1.6162790698
        // token-weighted AL: 1 + 14/47 = 1.2978723404
        // per-request rate %: 7.7519379845, 33.3333333333 -> mean 20.5426356589
        // overall rate %: 14/141*100 = 9.9290780142
        // accepted/verified: 53/172 = 0.3081395349, 8/16 = 0.5 -> mean 0.4040697674
        // steps: [43, 4] -> mean 23.5
        // pooled histogram [41, 2, 0, 4], 47 steps: 87.2340425532 %, 4.2553191489 %, 0 %, 8.5106382979 %
        let m = SpecDecodeMetrics::from_records(&[
            vllm(10, 129, 43, &[39, 1, 0, 3]),
            vllm(4, 12, 4, &[2, 1, 0, 1]),
        ]);
        let al = m.acceptance_length.unwrap();
        assert_eq!(al.count, 2);
        assert!(close(al.avg, (1.0 + 10.0 / 43.0 + 2.0) / 2.0));
        assert!(close(al.min, 1.0 + 10.0 / 43.0));
        assert!(close(al.max, 2.0));
        assert!(close(
            m.token_weighted_acceptance_length().unwrap(),
            1.0 + 14.0 / 47.0
        ));
        let rate = m.draft_acceptance_rate_pct.unwrap();
        assert!(close(rate.avg, (1000.0 / 129.0 + 400.0 / 12.0) / 2.0));
        assert!(close(
            m.overall_draft_acceptance_rate_pct().unwrap(),
            1400.0 / 141.0
        ));
        let apv = m.accepted_per_verified.unwrap();
        assert!(close(apv.avg, (53.0 / 172.0 + 0.5) / 2.0));
        assert!(close(m.spec_decode_steps.unwrap().avg, 23.5));
        assert_eq!(m.totals.requests, 2);
        assert_eq!(m.histogram.counts, vec![41, 2, 0, 4]);
        assert_eq!(m.histogram.requests, 2);
        assert_eq!(m.histogram.total_steps(), 47);
        let pct = m.histogram.percentages();
        assert!(close(pct[0], 4100.0 / 47.0));
        assert!(close(pct[1], 200.0 / 47.0));
        assert_eq!(pct[2], 0.0);
        assert!(close(pct[3], 400.0 / 47.0));
    }

    #[test]
    fn acceptance_by_position_and_by_smaller_budget_by_hand() {
        // k = 3, 10 steps: 4 accepted 0, 3 accepted 1, 1 accepted 2, 2 accepted 3.
        let h = PooledHistogram {
            counts: vec![4, 3, 1, 2],
            requests: 1,
        };
        // At least 1: 6/10; at least 2: 3/10; at least 3: 2/10.
        assert_eq!(h.position_acceptance(), [0.6, 0.3, 0.2]);
        // k'=1: 1 + (3+1+2)/10 = 1.6; k'=2: 1 + (3 + 2 + 4)/10 = 1.9;
        // k'=3: 1 + (3 + 2 + 6)/10 = 2.1, the steps' own length.
        let l = h.length_at_budgets();
        assert_eq!(l.len(), 3);
        assert!(
            close(l[0], 1.6) && close(l[1], 1.9) && close(l[2], 2.1),
            "{l:?}"
        );
        assert!(PooledHistogram::default().position_acceptance().is_empty());
        assert!(PooledHistogram::default().length_at_budgets().is_empty());
    }

    #[test]
    fn histograms_by_category_pool_only_measured_requests() {
        let mut a = vllm(4, 9, 3, &[1, 1, 0, 1]);
        a.category = Some("qa".into());
        let mut b = vllm(1, 3, 1, &[0, 1, 0, 0]);
        b.category = Some("qa".into());
        let mut warm = b.clone();
        warm.warmup = true;
        let by = histograms_by(&[a, b, warm], |r| r.category.clone());
        assert_eq!(by["qa"].counts, [1, 2, 0, 1]);
        assert_eq!(by["qa"].requests, 2);
    }

    #[test]
    fn vllm_zero_step_requests_count_at_the_engines_own_figures() {
        // As AIPerf 0.13.0's vLLM adapter: the zero-step request is in the
        // per-request distributions at vLLM's mean_acceptance_length 1.0,
        // draft_acceptance_rate 0.0 and 0 steps.
        let m = SpecDecodeMetrics::from_records(&[
            vllm(10, 129, 43, &[39, 1, 0, 3]),
            vllm(0, 0, 0, &[0, 0, 0, 0]),
        ]);
        assert_eq!(m.zero_step_requests, 1);
        assert_eq!(m.zero_step_in_distributions, 1);
        assert_eq!(m.totals.requests, 2);
        // AL: (1 + 10/43 + 1) / 2; rate: (10/129 * 100 + 0) / 2; steps (43 + 0) / 2.
        let al = m.acceptance_length.unwrap();
        assert_eq!(al.count, 2);
        assert!(close(al.avg, (1.0 + 10.0 / 43.0 + 1.0) / 2.0));
        let rate = m.draft_acceptance_rate_pct.unwrap();
        assert_eq!(rate.count, 2);
        assert!(close(rate.avg, (1000.0 / 129.0) / 2.0));
        assert!(close(m.spec_decode_steps.unwrap().avg, 21.5));
        // Accepted per verified is 0/0 for it: only the other request.
        assert_eq!(m.accepted_per_verified.unwrap().count, 1);
        // The token-weighted figure is untouched: 1 + 10/43.
        assert!(close(
            m.token_weighted_acceptance_length().unwrap(),
            1.0 + 10.0 / 43.0
        ));
        assert_eq!(m.histogram.requests, 2);
        assert_eq!(m.histogram.total_steps(), 43);
    }

    #[test]
    fn vllm_requests_are_also_counted_per_target_pass() {
        // 40 tokens, 20 accepted over 5 drafting steps: 20 passes, of which
        // 1 prefill and 5 drafted, so 14 decode passes drafted nothing.
        // 1 + 20/5 = 5 per drafting step, 40/20 = 2 per pass.
        let mut a = vllm(20, 20, 5, &[0, 0, 0, 5]);
        a.completion_tokens = Some(40);
        // A zero-step request of 10 tokens: 10 passes, none drafted.
        let mut b = vllm(0, 0, 0, &[0, 0, 0, 0]);
        b.completion_tokens = Some(10);
        let m = SpecDecodeMetrics::from_records(&[a, b]);
        let p = m.per_pass;
        assert_eq!(
            (p.requests, p.tokens, p.accepted, p.engine_steps),
            (2, 50, 20, 5)
        );
        assert_eq!(p.passes(), 30);
        assert!(close(p.length().unwrap(), 50.0 / 30.0));
        // 30 passes - 2 prefills - 5 drafting steps.
        assert_eq!(p.passes_left_out(), 23);
        assert!(close(
            m.token_weighted_acceptance_length().unwrap(),
            1.0 + 20.0 / 5.0
        ));
    }

    #[test]
    fn zero_step_requests_of_other_engines_give_no_per_request_value() {
        let mut zero = vllm(0, 0, 0, &[0, 0, 0, 0]);
        zero.spec.as_mut().unwrap().source = Some(SpecSource::Sglang);
        let m = SpecDecodeMetrics::from_records(&[vllm(10, 129, 43, &[39, 1, 0, 3]), zero]);
        assert_eq!(m.zero_step_requests, 1);
        assert_eq!(m.zero_step_in_distributions, 0);
        let al = m.acceptance_length.unwrap();
        assert_eq!(al.count, 1);
        assert!(close(al.avg, 1.0 + 10.0 / 43.0));
        assert_eq!(m.spec_decode_steps.unwrap().count, 1);
    }

    #[test]
    fn llamacpp_records_without_histogram_count_in_totals() {
        // llama.cpp A: draft_n 20, accepted 12, predicted 40 -> steps 28
        // llama.cpp B: draft_n 10, accepted 5,  predicted 25 -> steps 20
        // plus vLLM acc 4 steps 4 prop 12 hist [2, 1, 0, 1].
        // token-weighted AL = 1 + (12+5+4)/(28+20+4) = 1 + 21/52 = 1.4038461538
        // overall rate = 21/42*100 = 50 %
        // per-request AL: 1+12/28 = 1.4285714286, 1+5/20 = 1.25, 2.0
        // pooled histogram only covers the vLLM request: [2, 1, 0, 1], 4 steps.
        let m = SpecDecodeMetrics::from_records(&[
            llamacpp(12, 20, 40),
            llamacpp(5, 10, 25),
            vllm(4, 12, 4, &[2, 1, 0, 1]),
        ]);
        assert_eq!(m.totals.steps, 52);
        assert!(close(
            m.token_weighted_acceptance_length().unwrap(),
            1.0 + 21.0 / 52.0
        ));
        assert!(close(m.overall_draft_acceptance_rate_pct().unwrap(), 50.0));
        let al = m.acceptance_length.unwrap();
        assert_eq!(al.count, 3);
        assert!(close(al.avg, (1.0 + 12.0 / 28.0 + 1.25 + 2.0) / 3.0));
        assert_eq!(m.histogram.requests, 1);
        assert_eq!(m.histogram.counts, vec![2, 1, 0, 1]);
        assert_eq!(m.histogram.total_steps(), 4);
    }

    #[test]
    fn llamacpp_requests_that_drafted_nothing_are_steps_with_nothing_accepted() {
        // A drafted: predicted 40, accepted 12 -> 28 steps; B drafted nothing
        // over 30 tokens (no draft fields) -> 30 steps.
        // token-weighted AL = 1 + 12 / 58 = 1.206896551724138
        // per-request AL: 1 + 12/28 = 1.4285714286 and 1 -> mean 1.2142857143
        // rate only over drafted tokens: 12 / 20 = 60 %; steps mean (28+30)/2 = 29.
        let undrafted = RequestRecord {
            server_timings: Some(speedbench_record::ServerTimings {
                predicted_n: Some(30),
                ..Default::default()
            }),
            ..Default::default()
        };
        let m = SpecDecodeMetrics::from_records(&[llamacpp(12, 20, 40), undrafted.clone()]);
        assert_eq!(
            (
                m.totals.steps,
                m.totals.requests,
                m.totals.undrafted_requests
            ),
            (58, 2, 1)
        );
        assert_eq!(m.requests_without_spec, 0);
        assert!(close(
            m.token_weighted_acceptance_length().unwrap(),
            1.0 + 12.0 / 58.0
        ));
        let al = m.acceptance_length.unwrap();
        assert_eq!(al.count, 2);
        assert!(close(al.avg, (1.0 + 12.0 / 28.0 + 1.0) / 2.0));
        assert!(close(m.overall_draft_acceptance_rate_pct().unwrap(), 60.0));
        assert_eq!(m.draft_acceptance_rate_pct.unwrap().count, 1);
        assert!(close(m.spec_decode_steps.unwrap().avg, 29.0));
        // Alone (a baseline llama-server run): no spec figures at all.
        let base = SpecDecodeMetrics::from_records(&[undrafted]);
        assert_eq!(base.totals.requests, 0);
        assert_eq!(base.requests_without_spec, 1);
        assert_eq!(base.token_weighted_acceptance_length(), None);
    }

    #[test]
    fn excludes_warmup_and_failed_and_counts_plain() {
        let mut warm = vllm(9, 9, 1, &[0, 0, 0, 1]);
        warm.warmup = true;
        let mut failed = vllm(9, 9, 1, &[0, 0, 0, 1]);
        failed.error_kind = Some(ErrorKind::ServerError);
        let m = SpecDecodeMetrics::from_records(&[
            warm,
            failed,
            RequestRecord::default(),
            vllm(4, 12, 4, &[2, 1, 0, 1]),
        ]);
        assert_eq!(m.totals.requests, 1);
        assert_eq!(m.requests_without_spec, 1);
        // Only the 4/12/4 request: AL 2.0, rate 33.3 %.
        assert!(close(m.token_weighted_acceptance_length().unwrap(), 2.0));
        assert_eq!(m.histogram.counts, vec![2, 1, 0, 1]);
    }

    #[test]
    fn empty_run_has_no_spec_values() {
        let m = SpecDecodeMetrics::from_records(&[]);
        assert_eq!(m.acceptance_length, None);
        assert_eq!(m.token_weighted_acceptance_length(), None);
        assert_eq!(m.overall_draft_acceptance_rate_pct(), None);
        assert!(m.histogram.percentages().is_empty());
    }

    #[test]
    fn histograms_of_different_lengths_pool() {
        // [1, 2] + [0, 0, 3] = [1, 2, 3]; 6 steps -> 16.67 %, 33.33 %, 50 %.
        let mut h = PooledHistogram::default();
        h.add(&[1, 2]);
        h.add(&[]);
        h.add(&[0, 0, 3]);
        assert_eq!(h.counts, vec![1, 2, 3]);
        assert_eq!(h.requests, 2);
        let pct = h.percentages();
        assert!(close(pct[0], 100.0 / 6.0));
        assert!(close(pct[2], 50.0));
    }
}
