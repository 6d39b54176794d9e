//! Token-weighted acceptance totals, how a record counts, and the matrix's `Overall`.

use serde::{Deserialize, Serialize};
use speedbench_record::{RequestRecord, SpecDecodeStats};

use crate::mean::mean;
use crate::measured::is_measured;

/// Summed speculative-decoding counters of a group of requests.
///
/// Both ratios are token-weighted, as in AIPerf's `speed-bench-report` and
/// its console's Token-Weighted Acceptance Length / Overall Draft Acceptance
/// Rate: numerators and denominators are summed over the group and divided
/// once, so every verify step (or draft token) weighs the same.
///
/// Records whose `verify_steps` is `None` add to `accepted` and `proposed`
/// (so to [`Self::accept_rate`]) but not to `accepted_with_steps` or `steps`,
/// so they cannot inflate [`Self::accept_length`] with accepted tokens whose
/// steps are unknown.
///
/// Acceptance length is tokens per target verify step, counting the steps
/// that drafted nothing: llama.cpp drafts only when its drafter has a
/// candidate, and sends no draft fields for a request that never drafted.
/// In a run where some request reported drafts, such a request (llama.cpp
/// `timings` with `predicted_n` and no `draft_n`) adds its `predicted_n`
/// target passes as steps with nothing drafted or accepted
/// ([`Self::add_undrafted`]), so a category's cell covers all of its
/// requests, not only those that drafted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AcceptanceTotals {
    /// Σ accepted draft tokens over every request with spec stats.
    pub accepted: u64,
    /// Σ proposed draft tokens over every request with spec stats.
    pub proposed: u64,
    /// Σ verify steps over the requests that reported them.
    pub steps: u64,
    /// Σ accepted draft tokens over the requests that reported verify steps.
    pub accepted_with_steps: u64,
    /// Requests with spec stats added.
    pub requests: u64,
    /// Of `requests`, those that reported verify steps (0 included).
    pub requests_with_steps: u64,
    /// Of `requests`, those that drafted nothing (no draft fields on a
    /// llama.cpp response in a speculating run), counted as
    /// `predicted_n` steps with 0 drafted and 0 accepted.
    #[serde(default)]
    pub undrafted_requests: u64,
    /// Measured requests of the group with no acceptance data at all (no
    /// spec stats and nothing that shows they drafted nothing): not in
    /// any ratio.
    #[serde(default)]
    pub requests_without_stats: u64,
    /// Measured requests whose acceptance payload could not be right
    /// (zero verify steps with drafts, negative derived steps, a missing
    /// count: see [`RequestAcceptance::Dropped`]): counted, in no ratio.
    #[serde(default)]
    pub dropped_requests: u64,
    /// Of `requests`, those whose steps are the engine's iterations,
    /// derived from its tokens-per-iteration figure (TensorRT-LLM's
    /// `avg_decoded_tokens_per_iter`): acceptance length only when every
    /// iteration verified a draft.
    #[serde(default)]
    pub iteration_requests: u64,
}

impl AcceptanceTotals {
    /// Adds one request's spec stats.
    pub fn add(&mut self, spec: &SpecDecodeStats) {
        self.accepted += spec.accepted_draft_tokens;
        self.proposed += spec.proposed_draft_tokens;
        self.requests += 1;
        if let Some(steps) = spec.verify_steps {
            self.steps += steps;
            self.accepted_with_steps += spec.accepted_draft_tokens;
            self.requests_with_steps += 1;
        }
    }

    /// Adds a request that drafted nothing over `steps` target passes
    /// (llama.cpp: its `predicted_n`, one token per pass).
    pub fn add_undrafted(&mut self, steps: u64) {
        self.steps += steps;
        self.requests += 1;
        self.requests_with_steps += 1;
        self.undrafted_requests += 1;
    }

    /// Adds a request whose engine reported `tokens` decoded over
    /// `iterations` (TensorRT-LLM's tokens per iteration): the extra tokens
    /// count as accepted, over `iterations` steps. Nothing is added to the
    /// drafted or accepted totals of [`Self::accept_rate`]: the engine does
    /// not say what it drafted.
    pub fn add_iterations(&mut self, tokens: u64, iterations: u64) {
        self.steps += iterations;
        self.accepted_with_steps += tokens.saturating_sub(iterations);
        self.requests += 1;
        self.requests_with_steps += 1;
        self.iteration_requests += 1;
    }

    /// Adds one measured record as [`request_acceptance`] reads it: its spec
    /// stats, its iterations, or its target passes when it drafted nothing
    /// in a run that `speculates` (see [`run_speculates`]); a dropped
    /// payload counts in [`Self::dropped_requests`], nothing at all in
    /// [`Self::requests_without_stats`].
    pub fn add_record(&mut self, r: &RequestRecord, speculates: bool) {
        self.add_acceptance(request_acceptance(r, speculates));
    }

    /// Adds one measured request as `acceptance` says it counts.
    pub fn add_acceptance(&mut self, acceptance: RequestAcceptance<'_>) {
        match acceptance {
            RequestAcceptance::Spec(spec) => self.add(spec),
            RequestAcceptance::Iterations { tokens, iterations } => {
                self.add_iterations(tokens, iterations)
            }
            RequestAcceptance::Undrafted(steps) => self.add_undrafted(steps),
            RequestAcceptance::Dropped(_) => self.dropped_requests += 1,
            RequestAcceptance::Missing => self.requests_without_stats += 1,
        }
    }

    /// Adds another group's totals to these (the two groups pooled).
    pub fn merge(&mut self, other: &AcceptanceTotals) {
        // Destructured so that a new field cannot be forgotten here.
        let AcceptanceTotals {
            accepted,
            proposed,
            steps,
            accepted_with_steps,
            requests,
            requests_with_steps,
            undrafted_requests,
            requests_without_stats,
            dropped_requests,
            iteration_requests,
        } = *other;
        self.accepted += accepted;
        self.proposed += proposed;
        self.steps += steps;
        self.accepted_with_steps += accepted_with_steps;
        self.requests += requests;
        self.requests_with_steps += requests_with_steps;
        self.undrafted_requests += undrafted_requests;
        self.requests_without_stats += requests_without_stats;
        self.dropped_requests += dropped_requests;
        self.iteration_requests += iteration_requests;
    }

    /// Token-weighted acceptance length `1 + accepted_with_steps / steps`;
    /// `None` when no verify step was counted.
    pub fn accept_length(&self) -> Option<f64> {
        (self.steps > 0).then(|| 1.0 + self.accepted_with_steps as f64 / self.steps as f64)
    }

    /// Token-weighted acceptance rate `accepted / proposed` as a FRACTION in
    /// `0..=1` (as the report uses); `None` when nothing was proposed.
    pub fn accept_rate(&self) -> Option<f64> {
        (self.proposed > 0).then(|| self.accepted as f64 / self.proposed as f64)
    }
}

/// What one record tells about acceptance: the one place that decides how
/// a record counts, for the totals and for the per-request distributions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RequestAcceptance<'a> {
    /// Per-request speculative-decoding counters.
    Spec(&'a SpecDecodeStats),
    /// `tokens` decoded over `iterations` engine iterations, from the
    /// engine's tokens-per-iteration figure (TensorRT-LLM).
    Iterations {
        /// Completion tokens of the request.
        tokens: u64,
        /// `tokens / tokens_per_iteration`, rounded.
        iterations: u64,
    },
    /// Drafted nothing over this many target passes (llama.cpp `timings`
    /// without draft fields, in a run that speculates).
    Undrafted(u64),
    /// The server's payload could not be right and is left out of every
    /// ratio; the reason (also in the record's `spec_dropped`).
    Dropped(&'a str),
    /// No acceptance data at all.
    Missing,
}

/// Why a payload with zero verify steps cannot be counted: accepted or
/// drafted tokens over no step would inflate the token-weighted acceptance
/// length (AIPerf drops such payloads too). `None` for a usable payload.
pub fn zero_step_defect(spec: &SpecDecodeStats) -> Option<&'static str> {
    (spec.verify_steps == Some(0)
        && (spec.accepted_draft_tokens > 0 || spec.proposed_draft_tokens > 0))
        .then_some("zero verify steps with drafted or accepted tokens")
}

/// How `r` counts towards acceptance (see [`RequestAcceptance`]);
/// `speculates` is [`run_speculates`] of its run.
pub fn request_acceptance(r: &RequestRecord, speculates: bool) -> RequestAcceptance<'_> {
    if let Some(why) = &r.spec_dropped {
        return RequestAcceptance::Dropped(why);
    }
    if let Some(spec) = &r.spec {
        return match zero_step_defect(spec) {
            Some(why) => RequestAcceptance::Dropped(why),
            None => RequestAcceptance::Spec(spec),
        };
    }
    if let Some(per_iter) = r.tokens_per_iteration {
        return match iterations_of(r.completion_tokens, per_iter) {
            Some((tokens, iterations)) => RequestAcceptance::Iterations { tokens, iterations },
            None => RequestAcceptance::Dropped(
                "tokens per iteration below 1, not finite, or without completion tokens",
            ),
        };
    }
    match undrafted_steps(r) {
        Some(steps) if speculates => RequestAcceptance::Undrafted(steps),
        _ => RequestAcceptance::Missing,
    }
}

/// `(tokens, iterations)` from completion tokens and the engine's tokens per
/// iteration: `iterations = round(tokens / per_iteration)`, at least 1 and at
/// most `tokens`. `None` when there are no tokens or the figure is below 1
/// or not finite (no iteration decodes less than one token).
pub fn iterations_of(completion_tokens: Option<u64>, per_iteration: f64) -> Option<(u64, u64)> {
    let tokens = completion_tokens.filter(|&n| n > 0)?;
    if !per_iteration.is_finite() || per_iteration < 1.0 {
        return None;
    }
    let iterations = (tokens as f64 / per_iteration)
        .round()
        .clamp(1.0, tokens as f64) as u64;
    Some((tokens, iterations))
}

/// The target passes of a request that drafted nothing: llama.cpp's
/// `predicted_n` when its response had `timings` but no spec stats.
pub(crate) fn undrafted_steps(r: &RequestRecord) -> Option<u64> {
    if r.spec.is_some() {
        return None;
    }
    r.server_timings
        .as_ref()
        .and_then(|t| t.predicted_n)
        .filter(|&n| n > 0)
}

/// True when some measured record of the run has spec stats: the server
/// speculates, so a llama.cpp response without draft fields is a request
/// that drafted nothing, not a server without speculation.
pub fn run_speculates(records: &[RequestRecord]) -> bool {
    records.iter().any(|r| is_measured(r) && r.spec.is_some())
}

/// The figure behind a group's acceptance length when some of its steps are
/// engine iterations rather than verify steps (see
/// [`AcceptanceTotals::iteration_requests`]): a label for reports.
pub const ITERATION_LABEL: &str = "tokens per iteration (TensorRT-LLM avg_decoded_tokens_per_iter): \
acceptance length only when every iteration verified a draft";

/// The `Overall` cell of a matrix row: the unweighted mean of the present
/// cells (a macro-average, every category weighing the same, as AIPerf's
/// report and the SPEED-Bench paper do).
///
/// Missing and non-finite cells are skipped; `None` when no cell remains.
pub fn macro_average(cells: &[Option<f64>]) -> Option<f64> {
    mean(cells.iter().flatten().copied().filter(|v| v.is_finite()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::acceptance_by;
    use speedbench_record::ErrorKind;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn rec(category: &str, accepted: u64, proposed: u64, steps: Option<u64>) -> RequestRecord {
        RequestRecord {
            category: Some(category.to_string()),
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: steps,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn totals_are_token_weighted() {
        // acc 10 steps 43 prop 129 + acc 4 steps 4 prop 12:
        // AL = 1 + 14/47 = 1.297872340425532; rate = 14/141 = 0.09929078014184398.
        let mut t = AcceptanceTotals::default();
        t.add(rec("a", 10, 129, Some(43)).spec.as_ref().unwrap());
        t.add(rec("a", 4, 12, Some(4)).spec.as_ref().unwrap());
        assert_eq!(
            (t.accepted, t.proposed, t.steps, t.requests),
            (14, 141, 47, 2)
        );
        assert!(close(t.accept_length().unwrap(), 1.0 + 14.0 / 47.0));
        assert!(close(t.accept_rate().unwrap(), 14.0 / 141.0));
    }

    #[test]
    fn unknown_steps_do_not_distort_accept_length() {
        // acc 10 steps 43 prop 129 + acc 5 steps None prop 6:
        // AL uses only the steps-bearing record: 1 + 10/43 = 1.2325581395348837
        //   (naively 1 + 15/43 = 1.3488 would be wrong).
        // rate uses both: 15/135 = 0.1111111111111111.
        let mut t = AcceptanceTotals::default();
        t.add(rec("a", 10, 129, Some(43)).spec.as_ref().unwrap());
        t.add(rec("a", 5, 6, None).spec.as_ref().unwrap());
        assert_eq!((t.requests, t.requests_with_steps), (2, 1));
        assert!(close(t.accept_length().unwrap(), 1.0 + 10.0 / 43.0));
        assert!(close(t.accept_rate().unwrap(), 15.0 / 135.0));
    }

    #[test]
    fn a_zero_step_payload_with_drafts_is_dropped_not_counted() {
        // The case: a category at 1 + 7/3 = 3.33 gains a llama.cpp
        // record with 8 accepted over 0 steps; counted, it would read
        // 1 + 15/3 = 6.0. Dropped, the cell stays 3.33 and the count shows.
        let good = rec("math", 7, 9, Some(3));
        let zero = rec("math", 8, 8, Some(0));
        let mut dropped_in_file = rec("math", 0, 0, None);
        dropped_in_file.spec = None;
        dropped_in_file.spec_dropped = Some("negative verify steps".into());
        let by = acceptance_by(&[good, zero, dropped_in_file], |r| r.category.clone());
        let m = by["math"];
        assert!(close(m.accept_length().unwrap(), 1.0 + 7.0 / 3.0));
        assert!(close(m.accept_rate().unwrap(), 7.0 / 9.0));
        assert_eq!((m.requests, m.dropped_requests), (1, 2));
    }

    #[test]
    fn tokens_per_iteration_counts_iterations_and_no_drafts() {
        // 112 tokens at 3.5 per iteration = 32 iterations; 30 tokens at 1.5
        // = 20. Σtokens / Σiterations = 142 / 52; no acceptance rate.
        let trt = |tokens: u64, per_iter: f64| RequestRecord {
            category: Some("qa".into()),
            completion_tokens: Some(tokens),
            tokens_per_iteration: Some(per_iter),
            ..Default::default()
        };
        let by = acceptance_by(&[trt(112, 3.5), trt(30, 1.5)], |r| r.category.clone());
        let qa = by["qa"];
        assert_eq!((qa.steps, qa.iteration_requests), (52, 2));
        assert!(close(qa.accept_length().unwrap(), 142.0 / 52.0));
        assert_eq!(qa.accept_rate(), None);
        assert_eq!(iterations_of(Some(10), 0.5), None);
        assert_eq!(iterations_of(None, 2.0), None);
        assert_eq!(iterations_of(Some(7), f64::NAN), None);
        // Rounded, at least one iteration and never more than the tokens.
        assert_eq!(iterations_of(Some(10), 3.0), Some((10, 3)));
        assert_eq!(iterations_of(Some(1), 9.0), Some((1, 1)));
        let bad = trt(10, 0.5);
        assert!(matches!(
            request_acceptance(&bad, false),
            RequestAcceptance::Dropped(_)
        ));
    }

    #[test]
    fn empty_totals_have_no_ratios() {
        let t = AcceptanceTotals::default();
        assert_eq!(t.accept_length(), None);
        assert_eq!(t.accept_rate(), None);
        // A zero-step request: counted, but still no ratio.
        let mut z = AcceptanceTotals::default();
        z.add(rec("a", 0, 0, Some(0)).spec.as_ref().unwrap());
        assert_eq!((z.requests, z.requests_with_steps), (1, 1));
        assert_eq!(z.accept_length(), None);
        assert_eq!(z.accept_rate(), None);
    }

    #[test]
    fn grouping_by_category_excludes_warmup_errors_and_plain_records() {
        let mut warm = rec("coding", 100, 100, Some(1));
        warm.warmup = true;
        let mut failed = rec("math", 100, 100, Some(1));
        failed.error_kind = Some(ErrorKind::Timeout);
        let plain = RequestRecord {
            category: Some("math".into()),
            ..Default::default()
        };
        let records = vec![
            rec("coding", 10, 129, Some(43)),
            rec("coding", 4, 12, Some(4)),
            rec("math", 6, 8, Some(2)),
            warm,
            failed,
            plain,
            RequestRecord {
                category: None,
                ..rec("x", 1, 1, Some(1))
            },
        ];
        let by = acceptance_by(&records, |r| r.category.clone());
        assert_eq!(by.keys().collect::<Vec<_>>(), ["coding", "math"]);
        // coding: 1 + 14/47 = 1.297872...; rate 14/141.
        let coding = by["coding"];
        assert_eq!(coding.requests, 2);
        assert!(close(coding.accept_length().unwrap(), 1.0 + 14.0 / 47.0));
        // math: only the 6/8/2 record: AL = 1 + 6/2 = 4; rate 6/8 = 0.75.
        let math = by["math"];
        assert_eq!((math.requests, math.requests_without_stats), (1, 1));
        assert!(close(math.accept_length().unwrap(), 4.0));
        assert!(close(math.accept_rate().unwrap(), 0.75));
        // Overall = macro-average of the two cells: (1.297872... + 4) / 2.
        let overall = macro_average(&[coding.accept_length(), math.accept_length()]).unwrap();
        assert!(close(overall, (1.0 + 14.0 / 47.0 + 4.0) / 2.0));
    }

    fn llama(category: &str, predicted: u64, drafts: Option<(u64, u64)>) -> RequestRecord {
        RequestRecord {
            category: Some(category.to_string()),
            server_timings: Some(speedbench_record::ServerTimings {
                predicted_n: Some(predicted),
                ..Default::default()
            }),
            spec: drafts.map(|(accepted, proposed)| SpecDecodeStats {
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: Some(predicted - accepted),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn requests_that_drafted_nothing_count_their_target_passes() {
        // translation: 64 tokens, 30 of them accepted drafts (34 steps), and
        // a 64-token request that drafted nothing (64 steps):
        //   AL = 1 + 30 / (34 + 64) = 1.3061224489795917 (1 + 30/34 = 1.88
        //   over the drafting request alone); rate 30 / 40 = 0.75.
        // qa: one 20-token request, nothing drafted: AL 1 + 0/20 = 1.
        let records = vec![
            llama("translation", 64, Some((30, 40))),
            llama("translation", 64, None),
            llama("qa", 20, None),
        ];
        assert!(run_speculates(&records));
        let by = acceptance_by(&records, |r| r.category.clone());
        assert_eq!(by.keys().collect::<Vec<_>>(), ["qa", "translation"]);
        let t = by["translation"];
        assert_eq!(
            (t.requests, t.undrafted_requests, t.steps, t.accepted),
            (2, 1, 98, 30)
        );
        assert!(close(t.accept_length().unwrap(), 1.0 + 30.0 / 98.0));
        assert!(close(t.accept_rate().unwrap(), 0.75));
        let qa = by["qa"];
        assert_eq!((qa.requests, qa.undrafted_requests, qa.steps), (1, 1, 20));
        assert_eq!(qa.accept_length(), Some(1.0));
        assert_eq!(qa.accept_rate(), None);

        // A baseline run (no request drafted): the groups exist, no ratios.
        let base = vec![llama("qa", 20, None), llama("math", 9, None)];
        assert!(!run_speculates(&base));
        let by = acceptance_by(&base, |r| r.category.clone());
        assert_eq!(by.keys().collect::<Vec<_>>(), ["math", "qa"]);
        assert_eq!(by["qa"].accept_length(), None);
        assert_eq!((by["qa"].requests, by["qa"].requests_without_stats), (0, 1));
    }

    #[test]
    fn macro_average_skips_missing_cells() {
        // (2.0 + 4.0) / 2 = 3.0: None and NaN cells are not zeros.
        assert_eq!(
            macro_average(&[Some(2.0), None, Some(4.0), Some(f64::NAN)]),
            Some(3.0)
        );
        assert_eq!(macro_average(&[None, None]), None);
        assert_eq!(macro_average(&[]), None);
    }
}
