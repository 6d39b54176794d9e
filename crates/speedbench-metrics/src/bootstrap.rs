//! Percentile-bootstrap confidence intervals.

use serde::{Deserialize, Serialize};

use crate::rng::SplitMix64;
use crate::summary::percentile_sorted;

/// A confidence interval `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// How many resamples a bootstrap takes and at which confidence level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bootstrap {
    /// Resamples; 0 gives no interval.
    pub resamples: usize,
    /// Confidence level in `(0, 1)`, e.g. 0.95.
    pub confidence: f64,
}

/// Percentile-bootstrap interval of `stat` over two samples.
///
/// Each of `bootstrap.resamples` rounds draws `a.len()` items from `a` and
/// `b.len()` items from `b`, with replacement and independently (index
/// `rng.below(len)`, `a` first, then `b`), and evaluates `stat` on the two
/// resamples; `None` and non-finite results are dropped. The interval is
/// the numpy-linear percentiles ([`percentile_sorted`]) at
/// `(1 - confidence) / 2` and `1 - (1 - confidence) / 2` of the kept
/// values. A statistic of one sample passes `&[]` as `b`.
///
/// `None` when there are no resamples, `a` is empty, or no round gave a
/// finite value. The same `rng` state gives the same interval.
///
/// ```
/// use speedbench_metrics::{Bootstrap, SplitMix64, bootstrap_interval, mean};
///
/// let a = [1.0, 2.0, 3.0, 4.0];
/// let b = [2.0; 4];
/// let ratio = |x: &[f64], y: &[f64]| Some(mean(x.iter().copied())? / mean(y.iter().copied())?);
/// let settings = Bootstrap { resamples: 200, confidence: 0.9 };
/// let ci = bootstrap_interval(&a, &b, settings, &mut SplitMix64::new(1), ratio).unwrap();
/// assert!(ci.low <= 1.25 && 1.25 <= ci.high);
/// ```
pub fn bootstrap_interval<T: Copy>(
    a: &[T],
    b: &[T],
    bootstrap: Bootstrap,
    rng: &mut SplitMix64,
    stat: impl Fn(&[T], &[T]) -> Option<f64>,
) -> Option<Interval> {
    if bootstrap.resamples == 0 || a.is_empty() {
        return None;
    }
    let mut ra = Vec::with_capacity(a.len());
    let mut rb = Vec::with_capacity(b.len());
    let mut values = Vec::with_capacity(bootstrap.resamples);
    for _ in 0..bootstrap.resamples {
        ra.clear();
        rb.clear();
        ra.extend((0..a.len()).map(|_| a[rng.below(a.len() as u64) as usize]));
        rb.extend((0..b.len()).map(|_| b[rng.below(b.len() as u64) as usize]));
        if let Some(v) = stat(&ra, &rb).filter(|v| v.is_finite()) {
            values.push(v);
        }
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - bootstrap.confidence) / 2.0;
    Some(Interval {
        low: percentile_sorted(&values, tail * 100.0),
        high: percentile_sorted(&values, (1.0 - tail) * 100.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_of_a(a: &[f64], _: &[f64]) -> Option<f64> {
        crate::mean(a.iter().copied())
    }

    #[test]
    fn interval_by_hand() {
        // Seed 0, a = [10, 20], 4 rounds of 2 draws, stat = resample mean.
        // below(2) is the top bit of each output; seed 0 gives 0xE220..,
        // 0x6E78.., 0x06C4.., 0xF88B.., 0x1B39.., 0x53CB.., 0x2C82.., 0xC584..
        // -> indexes 1 0 | 0 1 | 0 0 | 0 1 -> means 15, 15, 10, 15.
        // Sorted [10, 15, 15, 15]; confidence 0.5 -> percentiles 25 and 75:
        // rank 0.75 -> 10 + 0.75 * 5 = 13.75; rank 2.25 -> 15.
        let settings = Bootstrap {
            resamples: 4,
            confidence: 0.5,
        };
        let ci = bootstrap_interval(
            &[10.0, 20.0],
            &[],
            settings,
            &mut SplitMix64::new(0),
            mean_of_a,
        );
        assert_eq!(
            ci,
            Some(Interval {
                low: 13.75,
                high: 15.0
            })
        );
    }

    #[test]
    fn b_is_drawn_after_a_each_round() {
        // a = [1, 2], b = [100, 200], one round, stat = a[0] + b[0]:
        // outputs 0xE220.. (a: index 1 -> 2), 0x6E78.. (a), 0x06C4.. (b:
        // index 0 -> 100), 0xF88B.. (b) -> 102.
        let settings = Bootstrap {
            resamples: 1,
            confidence: 0.9,
        };
        let sum = |a: &[f64], b: &[f64]| Some(a[0] + b[0]);
        let ci = bootstrap_interval(
            &[1.0, 2.0],
            &[100.0, 200.0],
            settings,
            &mut SplitMix64::new(0),
            sum,
        );
        assert_eq!(
            ci,
            Some(Interval {
                low: 102.0,
                high: 102.0
            })
        );
    }

    #[test]
    fn a_constant_sample_gives_a_point_interval() {
        // Every resample of [3, 3, 3] has mean 3.
        let settings = Bootstrap {
            resamples: 50,
            confidence: 0.95,
        };
        let ci = bootstrap_interval(&[3.0; 3], &[], settings, &mut SplitMix64::new(9), mean_of_a);
        assert_eq!(
            ci,
            Some(Interval {
                low: 3.0,
                high: 3.0
            })
        );
    }

    #[test]
    fn no_interval_without_resamples_data_or_finite_values() {
        let some = |_: &[f64], _: &[f64]| Some(1.0);
        let none = |_: &[f64], _: &[f64]| Some(f64::NAN);
        let mut rng = SplitMix64::new(0);
        let on = Bootstrap {
            resamples: 10,
            confidence: 0.9,
        };
        let off = Bootstrap { resamples: 0, ..on };
        assert_eq!(bootstrap_interval(&[1.0], &[], off, &mut rng, some), None);
        assert_eq!(
            bootstrap_interval::<f64>(&[], &[1.0], on, &mut rng, some),
            None
        );
        assert_eq!(bootstrap_interval(&[1.0], &[], on, &mut rng, none), None);
    }

    #[test]
    fn same_seed_same_interval() {
        let a: Vec<f64> = (0..30).map(|i| (i % 7) as f64).collect();
        let settings = Bootstrap {
            resamples: 100,
            confidence: 0.9,
        };
        let x = bootstrap_interval(&a, &[], settings, &mut SplitMix64::new(5), mean_of_a);
        let y = bootstrap_interval(&a, &[], settings, &mut SplitMix64::new(5), mean_of_a);
        assert_eq!(x, y);
        let ci = x.unwrap();
        assert!(ci.low < ci.high, "{ci:?}");
    }
}
