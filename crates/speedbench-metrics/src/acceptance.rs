//! Token-weighted acceptance totals, grouping, and the matrix's `Overall`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use speedbench_record::{RequestRecord, SpecDecodeStats};

/// True for records every statistic uses: not warmup and not failed.
pub(crate) fn is_measured(r: &RequestRecord) -> bool {
    !r.warmup && r.error_kind.is_none()
}

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

/// Sums [`AcceptanceTotals`] per group, e.g. per category for one column of
/// the acceptance matrix: `acceptance_by(&records, |r| r.category.clone())`.
///
/// Skips warmup records, failed records (`error_kind` set), records without
/// spec stats, and records whose `key` is `None`. Groups come out sorted by
/// key.
pub fn acceptance_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
) -> BTreeMap<String, AcceptanceTotals> {
    let mut groups: BTreeMap<String, AcceptanceTotals> = BTreeMap::new();
    for r in records.iter().filter(|r| is_measured(r)) {
        let Some(spec) = &r.spec else { continue };
        let Some(k) = key(r) else { continue };
        groups.entry(k).or_default().add(spec);
    }
    groups
}

/// The `Overall` cell of a matrix row: the unweighted mean of the present
/// cells (a macro-average, every category weighing the same, as AIPerf's
/// report and the SPEED-Bench paper do).
///
/// Missing and non-finite cells are skipped; `None` when no cell remains.
pub fn macro_average(cells: &[Option<f64>]) -> Option<f64> {
    let present: Vec<f64> = cells
        .iter()
        .flatten()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    (!present.is_empty()).then(|| present.iter().sum::<f64>() / present.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(math.requests, 1);
        assert!(close(math.accept_length().unwrap(), 4.0));
        assert!(close(math.accept_rate().unwrap(), 0.75));
        // Overall = macro-average of the two cells: (1.297872... + 4) / 2.
        let overall = macro_average(&[coding.accept_length(), math.accept_length()]).unwrap();
        assert!(close(overall, (1.0 + 14.0 / 47.0 + 4.0) / 2.0));
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
