//! Distribution summaries over `f64` samples.

use serde::{Deserialize, Serialize};

/// Distribution statistics of one metric, as AIPerf's console columns show
/// them (`avg | min | max | p99 | p90 | p50 | std`).
///
/// Method, chosen to match numpy's defaults (which AIPerf uses):
///
/// - percentiles use linear interpolation between closest ranks (numpy's
///   default `method="linear"`): for the sorted samples `x[0..n]` and a
///   percentile `p`, the rank is `h = p / 100 * (n - 1)` and the value is
///   `x[floor(h)] + (h - floor(h)) * (x[floor(h) + 1] - x[floor(h)])`;
/// - `std` is the population standard deviation (`ddof = 0`, numpy's
///   default): `sqrt(Σ(x - avg)² / n)`;
/// - `avg` is the arithmetic mean, every sample weighted equally;
/// - sums run in the order the samples are given; percentiles, `min` and
///   `max` are those of the sorted samples, found in a bounded amount of
///   memory however many there are ([`crate::SummaryPasses`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples summarized (finite samples only).
    pub count: usize,
    /// Arithmetic mean.
    pub avg: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// 99th percentile (linear interpolation).
    pub p99: f64,
    /// 90th percentile (linear interpolation).
    pub p90: f64,
    /// 50th percentile, the median (linear interpolation).
    pub p50: f64,
    /// Population standard deviation (`ddof = 0`).
    pub std: f64,
}

/// numpy's `percentile(sorted, p, method="linear")`: `p` in percent, over
/// non-empty samples sorted ascending. Every percentile speedbench prints
/// comes from here.
///
/// ```
/// // numpy.percentile([1, 2, 3, 4], 90) = 3.7
/// assert!((speedbench_metrics::percentile_sorted(&[1.0, 2.0, 3.0, 4.0], 90.0) - 3.7).abs() < 1e-12);
/// ```
pub fn percentile_sorted(sorted: &[f64], p: f64) -> f64 {
    let rank = p / 100.0 * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = rank - lo as f64;
    sorted[lo] + frac * (sorted[hi] - sorted[lo])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn empty_and_non_finite_give_none() {
        assert_eq!(Summary::of(&[]), None);
        assert_eq!(Summary::of(&[f64::NAN, f64::INFINITY]), None);
    }

    #[test]
    fn single_sample() {
        // n = 1: every percentile is the sample itself; std = 0.
        let s = Summary::of(&[7.5]).unwrap();
        assert_eq!(s.count, 1);
        assert_eq!((s.avg, s.min, s.max), (7.5, 7.5, 7.5));
        assert_eq!((s.p99, s.p90, s.p50, s.std), (7.5, 7.5, 7.5, 0.0));
    }

    #[test]
    fn one_to_four_matches_numpy() {
        // x = [1, 2, 3, 4] (given unsorted), n = 4.
        // avg = 10 / 4 = 2.5.
        // p90: h = 0.9 * 3 = 2.7 -> 3 + 0.7 * (4 - 3) = 3.7  (np.percentile -> 3.7)
        // p99: h = 0.99 * 3 = 2.97 -> 3 + 0.97 = 3.97
        // p50: h = 1.5 -> 2 + 0.5 * (3 - 2) = 2.5
        // std (ddof=0): deviations ±1.5, ±0.5 -> (2.25+0.25+0.25+2.25)/4 = 1.25,
        //   sqrt(1.25) = 1.118033988749895  (np.std -> 1.118033988749895)
        let s = Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!(s.count, 4);
        assert!(close(s.avg, 2.5));
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert!(close(s.p90, 3.7));
        assert!(close(s.p99, 3.97));
        assert!(close(s.p50, 2.5));
        assert!(close(s.std, 1.25f64.sqrt()));
    }

    #[test]
    fn odd_count_median_and_std() {
        // x = [2, 4, 4, 4, 5, 5, 7, 9]: the textbook population-std example.
        // avg = 40 / 8 = 5; Σ(x-5)² = 9+1+1+1+0+0+4+16 = 32; 32/8 = 4; std = 2.
        // p50: h = 0.5 * 7 = 3.5 -> 4 + 0.5 * (5 - 4) = 4.5
        // p90: h = 6.3 -> 7 + 0.3 * (9 - 7) = 7.6
        let s = Summary::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]).unwrap();
        assert!(close(s.avg, 5.0));
        assert!(close(s.std, 2.0));
        assert!(close(s.p50, 4.5));
        assert!(close(s.p90, 7.6));
    }

    #[test]
    fn nan_is_skipped() {
        // [1, NaN, 3] -> finite [1, 3]: count 2, avg 2, p50 = 2.
        let s = Summary::of(&[1.0, f64::NAN, 3.0]).unwrap();
        assert_eq!(s.count, 2);
        assert!(close(s.avg, 2.0));
        assert!(close(s.p50, 2.0));
    }
}
