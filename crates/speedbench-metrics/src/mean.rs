//! Arithmetic means, of a sequence and per group of measured records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::measured::is_measured;

/// The arithmetic mean of `values`, summed in order; `None` when empty.
///
/// Every sample weighs the same. The values are taken as given (no
/// filtering): callers that may hold NaN filter first.
///
/// ```
/// assert_eq!(speedbench_metrics::mean([1.0, 2.0, 6.0]), Some(3.0));
/// assert_eq!(speedbench_metrics::mean([]), None);
/// ```
pub fn mean(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values
        .into_iter()
        .fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// The mean of one group's values ([`mean_by`]).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct GroupMean {
    /// The mean; `None` when no record of the group had a value.
    pub mean: Option<f64>,
    /// Records whose value went into the mean.
    pub count: u64,
}

/// Per group, the unweighted mean of `value` over the measured records
/// ([`is_measured`]) whose `key` is `Some`.
///
/// Non-finite values and `None` are skipped, but a measured record with a
/// key makes its group exist even without a value (then
/// [`GroupMean::mean`] is `None`). Groups come out sorted by key.
///
/// The acceptance matrix's latency cells are
/// `mean_by(records, category, |r| Some(r.request_latency_ms()))`.
pub fn mean_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
    value: impl Fn(&RequestRecord) -> Option<f64>,
) -> BTreeMap<String, GroupMean> {
    let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for r in records.iter().filter(|r| is_measured(r)) {
        let Some(k) = key(r) else { continue };
        let entry = sums.entry(k).or_default();
        if let Some(v) = value(r).filter(|v| v.is_finite()) {
            entry.0 += v;
            entry.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(k, (sum, n))| {
            let group = GroupMean {
                mean: (n > 0).then(|| sum / n as f64),
                count: n,
            };
            (k, group)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    fn rec(category: Option<&str>, e2e_ms: u64) -> RequestRecord {
        RequestRecord {
            category: category.map(String::from),
            e2e_latency_ns: e2e_ms * 1_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn mean_of_a_sequence() {
        // (0.5 + 1.5 + 4) / 3 = 2.
        assert_eq!(mean([0.5, 1.5, 4.0]), Some(2.0));
        assert_eq!(mean(std::iter::empty()), None);
        assert_eq!(mean([7.25]), Some(7.25));
    }

    #[test]
    fn means_per_group_skip_unmeasured_and_missing_values() {
        let mut warm = rec(Some("qa"), 9000);
        warm.warmup = true;
        let mut failed = rec(Some("qa"), 9000);
        failed.error_kind = Some(ErrorKind::Timeout);
        let records = vec![
            rec(Some("qa"), 1000),
            rec(Some("qa"), 2000),
            rec(Some("math"), 500),
            rec(Some("rag"), 0),
            rec(None, 7000),
            warm,
            failed,
        ];
        // The value: latency in s, except "rag" has none and 500 ms is NaN.
        let by = mean_by(
            &records,
            |r| r.category.clone(),
            |r| match r.e2e_latency_ns {
                0 => None,
                500_000_000 => Some(f64::NAN),
                ns => Some(ns as f64 / 1e9),
            },
        );
        assert_eq!(by.keys().collect::<Vec<_>>(), ["math", "qa", "rag"]);
        // qa: (1 + 2) / 2 = 1.5 s over 2 records; warmup and timeout left out.
        assert_eq!(
            by["qa"],
            GroupMean {
                mean: Some(1.5),
                count: 2
            }
        );
        // math and rag exist without a value.
        assert_eq!(by["math"], GroupMean::default());
        assert_eq!(by["rag"], GroupMean::default());
    }
}
