//! Box-plot statistics (p10, p50, p90, min, max) per group.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::measured::is_measured;
use crate::summary::percentile_sorted;

/// The five numbers of a box plot over `f64` samples, percentiles
/// numpy-linear ([`percentile_sorted`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BoxStats {
    /// Number of (finite) samples.
    pub count: usize,
    /// Smallest sample.
    pub min: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 50th percentile, the median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Largest sample.
    pub max: f64,
}

impl BoxStats {
    /// The box of `samples`; non-finite samples skipped; `None` when none
    /// is left. The input order does not matter.
    ///
    /// ```
    /// // [1, 2, 3, 4, 5]: p10 at rank 0.4 -> 1.4, p90 at rank 3.6 -> 4.6.
    /// let b = speedbench_metrics::BoxStats::of(&[5.0, 1.0, 4.0, 2.0, 3.0]).unwrap();
    /// assert_eq!((b.min, b.p50, b.max), (1.0, 3.0, 5.0));
    /// assert!((b.p10 - 1.4).abs() < 1e-12 && (b.p90 - 4.6).abs() < 1e-12);
    /// ```
    pub fn of(samples: &[f64]) -> Option<BoxStats> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(BoxStats {
            count: sorted.len(),
            min: sorted[0],
            p10: percentile_sorted(&sorted, 10.0),
            p50: percentile_sorted(&sorted, 50.0),
            p90: percentile_sorted(&sorted, 90.0),
            max: sorted[sorted.len() - 1],
        })
    }
}

/// Per group, the [`BoxStats`] of `value` over the measured records
/// ([`crate::is_measured`]) whose `key` is `Some`; groups without a finite
/// value are left out. Sorted by key.
///
/// The HTML report's latency charts are
/// `box_stats_by(records, category, |r| Some(r.request_latency_ms()))`.
pub fn box_stats_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
    value: impl Fn(&RequestRecord) -> Option<f64>,
) -> BTreeMap<String, BoxStats> {
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in records.iter().filter(|r| is_measured(r)) {
        if let (Some(k), Some(v)) = (key(r), value(r)) {
            samples.entry(k).or_default().push(v);
        }
    }
    samples
        .into_iter()
        .filter_map(|(k, v)| Some((k, BoxStats::of(&v)?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    #[test]
    fn box_of_ten_samples_by_hand() {
        // 10, 20, ..., 100 (n = 10): p10 rank 0.9 -> 10 + 0.9 * 10 = 19;
        // p50 rank 4.5 -> 55; p90 rank 8.1 -> 90 + 0.1 * 10 = 91.
        let samples: Vec<f64> = (1..=10).rev().map(|i| i as f64 * 10.0).collect();
        let b = BoxStats::of(&samples).unwrap();
        assert_eq!((b.count, b.min, b.max), (10, 10.0, 100.0));
        assert!((b.p10 - 19.0).abs() < 1e-9, "{b:?}");
        assert!((b.p50 - 55.0).abs() < 1e-9, "{b:?}");
        assert!((b.p90 - 91.0).abs() < 1e-9, "{b:?}");
        assert_eq!(BoxStats::of(&[f64::NAN]), None);
        assert_eq!(BoxStats::of(&[]), None);
    }

    #[test]
    fn groups_of_measured_records() {
        let rec = |category: &str, ms: u64| RequestRecord {
            category: Some(category.into()),
            e2e_latency_ns: ms * 1_000_000,
            ..Default::default()
        };
        let mut failed = rec("qa", 9000);
        failed.error_kind = Some(ErrorKind::Connection);
        let records = [rec("qa", 100), rec("qa", 300), rec("math", 50), failed];
        let by = box_stats_by(
            &records,
            |r| r.category.clone(),
            |r| Some(r.e2e_latency_ns as f64 / 1e6),
        );
        assert_eq!(by.keys().collect::<Vec<_>>(), ["math", "qa"]);
        // qa [100, 300]: p10 = 100 + 0.1 * 200 = 120, p50 200, p90 280.
        let qa = by["qa"];
        assert_eq!((qa.count, qa.min, qa.max), (2, 100.0, 300.0));
        assert!((qa.p10 - 120.0).abs() < 1e-9 && (qa.p90 - 280.0).abs() < 1e-9);
        assert_eq!(qa.p50, 200.0);
    }
}
