//! Arrival schedules for request-rate (open-loop) load.
//!
//! An [`ArrivalSchedule`] yields the offsets, from the start of a phase, at
//! which conversations start. Offsets are absolute (the scheduler sleeps
//! until `start + offset`), so a late wake-up never shifts later arrivals.
//! Poisson gaps come from a seeded SplitMix64 generator, so the same seed
//! gives the same schedule on every machine.

use speedbench_metrics::{SplitMix64, percentile_sorted};
use std::time::Duration;

use crate::shard::Shard;

/// How arrivals are spaced at a given mean rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Arrival {
    /// Exponential gaps (a Poisson process), as AIPerf and `vllm bench serve`
    /// default to.
    #[default]
    Poisson,
    /// Equal gaps of `1 / rate`.
    Constant,
}

impl Arrival {
    /// The arrival shape's short name: `poisson` or `constant`.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Poisson => "poisson",
            Arrival::Constant => "constant",
        }
    }
}

impl std::str::FromStr for Arrival {
    type Err = String;

    /// `poisson` or `constant`.
    fn from_str(s: &str) -> Result<Arrival, String> {
        [Arrival::Poisson, Arrival::Constant]
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| format!("unknown arrival {s:?} (expected poisson or constant)"))
    }
}

/// The start offsets of successive arrivals; the first is at zero.
///
/// ```
/// use std::time::Duration;
/// use speedbench_client::{Arrival, ArrivalSchedule};
///
/// let constant: Vec<Duration> = ArrivalSchedule::new(4.0, Arrival::Constant, 0).take(3).collect();
/// assert_eq!(constant, [Duration::ZERO, Duration::from_millis(250), Duration::from_millis(500)]);
///
/// // Poisson arrivals are random but reproducible from the seed.
/// let a: Vec<_> = ArrivalSchedule::new(100.0, Arrival::Poisson, 7).take(5).collect();
/// let b: Vec<_> = ArrivalSchedule::new(100.0, Arrival::Poisson, 7).take(5).collect();
/// assert_eq!(a, b);
/// ```
#[derive(Debug, Clone)]
pub struct ArrivalSchedule {
    rate: f64,
    arrival: Arrival,
    rng: SplitMix64,
    index: u64,
    offset_s: f64,
    /// Keep only the arrivals of this shard (see [`ArrivalSchedule::with_shard`]).
    shard: Option<Shard>,
}

impl ArrivalSchedule {
    /// A schedule of `rate` arrivals per second (finite and positive; the
    /// caller checks), spaced by `arrival`, drawing from `seed`.
    pub fn new(rate: f64, arrival: Arrival, seed: u64) -> ArrivalSchedule {
        ArrivalSchedule {
            rate,
            arrival,
            rng: SplitMix64::new(seed),
            index: 0,
            offset_s: 0.0,
            shard: None,
        }
    }

    /// Keeps only the arrivals of `shard`: those whose index `j` (from 0)
    /// has `j mod N == I`. Every shard draws the whole schedule, so the
    /// union of the N shards' arrivals is the unsharded schedule, offset
    /// for offset; each shard keeps every N-th arrival (a mean rate of
    /// `rate / N`).
    ///
    /// ```
    /// use speedbench_client::{Arrival, ArrivalSchedule, Shard};
    /// let whole: Vec<_> = ArrivalSchedule::new(50.0, Arrival::Poisson, 3).take(6).collect();
    /// let second: Vec<_> = ArrivalSchedule::new(50.0, Arrival::Poisson, 3)
    ///     .with_shard(Shard::new(1, 3)?)
    ///     .take(2)
    ///     .collect();
    /// assert_eq!(second, [whole[1], whole[4]]);
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn with_shard(mut self, shard: Shard) -> ArrivalSchedule {
        self.shard = Some(shard);
        self
    }

    /// The next arrival of the whole schedule, with its index.
    fn draw(&mut self) -> (u64, Duration) {
        let i = self.index;
        self.index += 1;
        let offset = match self.arrival {
            // i / rate, not a running sum, so rounding never accumulates.
            Arrival::Constant => i as f64 / self.rate,
            Arrival::Poisson => {
                if i > 0 {
                    // 1 - u lies in (0, 1], so the logarithm is finite.
                    let u = self.rng.next_f64();
                    self.offset_s += -(1.0 - u).ln() / self.rate;
                }
                self.offset_s
            }
        };
        (i, Duration::from_secs_f64(offset))
    }
}

impl Iterator for ArrivalSchedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        loop {
            let (i, offset) = self.draw();
            if self.shard.is_none_or(|s| s.owns(i)) {
                return Some(offset);
            }
        }
    }
}

/// How far behind its schedule the request-rate dispatcher ran.
///
/// Lateness is the time from an arrival's scheduled start to the moment its
/// first request was handed to the HTTP client, including any wait for a
/// free slot under [`Load::max_concurrency`](crate::Load::max_concurrency) (vLLM's client queue time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleStats {
    /// Conversations started on the schedule.
    pub arrivals: u64,
    /// Median lateness, nanoseconds.
    pub lateness_p50_ns: u64,
    /// 99th-percentile lateness, nanoseconds.
    pub lateness_p99_ns: u64,
    /// Largest lateness, nanoseconds.
    pub lateness_max_ns: u64,
}

impl ScheduleStats {
    /// Percentiles of the lateness of each arrival, nanoseconds (the one
    /// percentile formula of `speedbench_metrics`, rounded to whole ns).
    pub(crate) fn from_lateness(ns: Vec<u64>) -> Option<ScheduleStats> {
        let mut sorted: Vec<f64> = ns.iter().map(|&n| n as f64).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let at = |p: f64| percentile_sorted(&sorted, p).round() as u64;
        Some(ScheduleStats {
            arrivals: sorted.len() as u64,
            lateness_p50_ns: at(50.0),
            lateness_p99_ns: at(99.0),
            lateness_max_ns: sorted[sorted.len() - 1] as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lateness_percentiles() {
        assert_eq!(ScheduleStats::from_lateness(vec![]), None);
        let s = ScheduleStats::from_lateness((1..=100).rev().collect()).unwrap();
        assert_eq!(
            (
                s.arrivals,
                s.lateness_p50_ns,
                s.lateness_p99_ns,
                s.lateness_max_ns
            ),
            (100, 51, 99, 100)
        );
    }

    #[test]
    fn constant_offsets_are_exact_multiples() {
        let s: Vec<_> = ArrivalSchedule::new(3.0, Arrival::Constant, 9)
            .take(1000)
            .collect();
        assert_eq!(s[0], Duration::ZERO);
        assert_eq!(s[999], Duration::from_secs_f64(333.0));
    }

    #[test]
    fn poisson_is_seeded_increasing_and_has_the_right_mean() {
        let rate = 50.0;
        let n = 20_000;
        let s: Vec<_> = ArrivalSchedule::new(rate, Arrival::Poisson, 42)
            .take(n)
            .collect();
        assert!(s.windows(2).all(|w| w[0] <= w[1]));
        let mean_gap = s[n - 1].as_secs_f64() / (n - 1) as f64;
        // The mean of 20k exponential gaps has a relative sd of 0.7%.
        assert!(
            (mean_gap * rate - 1.0).abs() < 0.03,
            "mean gap {mean_gap} vs {}",
            1.0 / rate
        );
        // Exponential gaps: about 1 - 1/e of them are shorter than the mean.
        let short = s
            .windows(2)
            .filter(|w| (w[1] - w[0]).as_secs_f64() < 1.0 / rate)
            .count() as f64
            / (n - 1) as f64;
        assert!((short - 0.632).abs() < 0.02, "{short}");
        let other: Vec<_> = ArrivalSchedule::new(rate, Arrival::Poisson, 43)
            .take(n)
            .collect();
        assert_ne!(s, other);
    }
}
