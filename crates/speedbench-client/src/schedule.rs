//! Arrival schedules for request-rate (open-loop) load.
//!
//! An [`ArrivalSchedule`] yields the offsets, from the start of a phase, at
//! which conversations start. Offsets are absolute (the scheduler sleeps
//! until `start + offset`), so a late wake-up never shifts later arrivals.
//! Poisson gaps come from a seeded SplitMix64 generator, so the same seed
//! gives the same schedule on every machine.

use speedbench_metrics::{SplitMix64, percentile_sorted};
use std::time::Duration;

use crate::pacing::{RateCurve, RequestRamp};
use crate::shard::Shard;

/// How arrivals are spaced at a given mean rate.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Arrival {
    /// Exponential gaps (a Poisson process), as AIPerf and `vllm bench serve`
    /// default to.
    #[default]
    Poisson,
    /// Equal gaps of `1 / rate`.
    Constant,
    /// Gamma-distributed gaps of shape `smoothness` (AIPerf's
    /// `--arrival-smoothness`, vLLM's `--burstiness`): 1 is Poisson, below
    /// 1 burstier (gaps' coefficient of variation `1/√smoothness`), above
    /// 1 more regular. Finite and above 0 (the caller checks).
    Gamma {
        /// The gamma distribution's shape.
        smoothness: f64,
    },
}

impl Arrival {
    /// The arrival shape's short name: `poisson`, `constant` or `gamma`.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::Poisson => "poisson",
            Arrival::Constant => "constant",
            Arrival::Gamma { .. } => "gamma",
        }
    }

    /// A gap of mean 1 drawn from `rng`: the time-rescaled spacing.
    fn unit_gap(self, rng: &mut SplitMix64) -> f64 {
        match self {
            Arrival::Constant => 1.0,
            // 1 - u lies in (0, 1], so the logarithm is finite.
            Arrival::Poisson => -(1.0 - rng.next_f64()).ln(),
            Arrival::Gamma { smoothness } => gamma(rng, smoothness) / smoothness,
        }
    }
}

impl std::str::FromStr for Arrival {
    type Err = String;

    /// `poisson`, `constant` or `gamma` (smoothness 1 until set).
    fn from_str(s: &str) -> Result<Arrival, String> {
        [
            Arrival::Poisson,
            Arrival::Constant,
            Arrival::Gamma { smoothness: 1.0 },
        ]
        .into_iter()
        .find(|a| a.name() == s)
        .ok_or_else(|| format!("unknown arrival {s:?} (expected poisson, constant or gamma)"))
    }
}

/// A draw from Gamma(`shape`, 1) by Marsaglia and Tsang's method (shape
/// below 1 boosted by `U^(1/shape)`). Written here rather than taken from
/// `rand_distr`, which does not promise the same values across versions:
/// a schedule must be the same from the same seed on every machine and
/// every build.
fn gamma(rng: &mut SplitMix64, shape: f64) -> f64 {
    if shape < 1.0 {
        let boost = (1.0 - rng.next_f64()).powf(1.0 / shape);
        return gamma(rng, shape + 1.0) * boost;
    }
    let d = shape - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = standard_normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = 1.0 - rng.next_f64();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

/// One standard normal draw (Box–Muller, one of the pair used).
pub(crate) fn standard_normal(rng: &mut SplitMix64) -> f64 {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// How the rate moves through a schedule.
#[derive(Debug, Clone)]
enum Pace {
    /// A rate over time; arrival `i` where the curve expects the sum of
    /// the first `i` unit gaps.
    Curve(RateCurve),
    /// vLLM's ramp over `total` requests: gap `i` at request `i`'s rate.
    PerRequest(RequestRamp, u64),
    /// A trace's own times, in order; the schedule ends after the last.
    Fixed(std::sync::Arc<[Duration]>),
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
    pace: Pace,
    arrival: Arrival,
    rng: SplitMix64,
    index: u64,
    /// The sum of the unit gaps drawn so far (the curve's expected count).
    units: f64,
    offset_s: f64,
    /// Keep only the arrivals of this shard (see [`ArrivalSchedule::with_shard`]).
    shard: Option<Shard>,
}

impl ArrivalSchedule {
    /// A schedule of `rate` arrivals per second (finite and positive; the
    /// caller checks), spaced by `arrival`, drawing from `seed`.
    pub fn new(rate: f64, arrival: Arrival, seed: u64) -> ArrivalSchedule {
        ArrivalSchedule::following(RateCurve::constant(rate), arrival, seed)
    }

    /// A schedule whose rate follows `curve` (a ramp, a series), spaced by
    /// `arrival`, drawing from `seed`.
    ///
    /// ```
    /// use speedbench_client::{Arrival, ArrivalSchedule, RateCurve};
    /// // Constant spacing up a ramp from 0.25/s to 10/s over 4 s: the
    /// // arrivals crowd together as the rate rises.
    /// let ramp: Vec<f64> = ArrivalSchedule::following(RateCurve::ramped(10.0, 4.0), Arrival::Constant, 0)
    ///     .take(4)
    ///     .map(|d| d.as_secs_f64())
    ///     .collect();
    /// assert_eq!(ramp[0], 0.0);
    /// assert!(ramp[1] - ramp[0] > ramp[2] - ramp[1] && ramp[2] - ramp[1] > ramp[3] - ramp[2]);
    /// ```
    pub fn following(curve: RateCurve, arrival: Arrival, seed: u64) -> ArrivalSchedule {
        ArrivalSchedule {
            pace: Pace::Curve(curve),
            arrival,
            rng: SplitMix64::new(seed),
            index: 0,
            units: 0.0,
            offset_s: 0.0,
            shard: None,
        }
    }

    /// vLLM's ramp over `total` requests: each gap drawn at the rate of the
    /// request it leads to (see [`RequestRamp`]).
    pub fn ramping_over_requests(
        ramp: RequestRamp,
        total: u64,
        arrival: Arrival,
        seed: u64,
    ) -> ArrivalSchedule {
        ArrivalSchedule {
            pace: Pace::PerRequest(ramp, total),
            ..ArrivalSchedule::new(1.0, arrival, seed)
        }
    }

    /// A trace's send times, in order (a fixed schedule): arrival `i` at
    /// `times[i]`, and no arrival after the last.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_client::{ArrivalSchedule};
    /// let ms = Duration::from_millis;
    /// let got: Vec<_> = ArrivalSchedule::at_times(vec![ms(0), ms(5), ms(40)]).collect();
    /// assert_eq!(got, [ms(0), ms(5), ms(40)]);
    /// ```
    pub fn at_times(times: Vec<Duration>) -> ArrivalSchedule {
        ArrivalSchedule {
            pace: Pace::Fixed(times.into()),
            ..ArrivalSchedule::new(1.0, Arrival::Constant, 0)
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

    /// The next arrival of the whole schedule, with its index; `None` after
    /// a fixed schedule's last.
    fn draw(&mut self) -> Option<(u64, Duration)> {
        let i = self.index;
        self.index += 1;
        if let Pace::Fixed(times) = &self.pace {
            return times.get(i as usize).map(|t| (i, *t));
        }
        if i > 0 {
            let gap = self.arrival.unit_gap(&mut self.rng);
            match &self.pace {
                Pace::Curve(curve) => {
                    // A running sum of whole gaps: exact for constant
                    // spacing, so offset i is i / rate with no drift.
                    self.units += gap;
                    self.offset_s = curve.time_of(self.units);
                }
                Pace::PerRequest(ramp, total) => {
                    self.offset_s += gap / ramp.rate_of(i, *total);
                }
                Pace::Fixed(_) => {}
            }
        }
        Some((i, Duration::from_secs_f64(self.offset_s)))
    }
}

impl Iterator for ArrivalSchedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        loop {
            let (i, offset) = self.draw()?;
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// Mean and coefficient of variation of the gaps of `n` arrivals.
    fn gap_moments(schedule: ArrivalSchedule, n: usize) -> (f64, f64) {
        let s: Vec<f64> = schedule.take(n).map(|d| d.as_secs_f64()).collect();
        let gaps: Vec<f64> = s.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn gamma_gaps_keep_the_rate_and_spread_by_smoothness() {
        // Gamma(k) gaps of mean 1/rate have a coefficient of variation of
        // 1/sqrt(k): 2 at k = 0.25 (bursty), 1 at k = 1 (Poisson), 0.5 at 4.
        for (smoothness, cv) in [(0.25, 2.0), (1.0, 1.0), (4.0, 0.5)] {
            let schedule = ArrivalSchedule::new(20.0, Arrival::Gamma { smoothness }, 5);
            let (mean, got) = gap_moments(schedule, 40_000);
            assert!(
                (mean * 20.0 - 1.0).abs() < 0.04,
                "k={smoothness}: mean {mean}"
            );
            assert!(
                (got / cv - 1.0).abs() < 0.05,
                "k={smoothness}: cv {got} vs {cv}"
            );
        }
    }

    #[test]
    fn arrivals_follow_a_ramp_in_every_window() {
        // 0 -> 40/s over 10 s, Poisson: each second's count is near the
        // curve's integral over that second (40 × (2s+1)/20).
        let curve = RateCurve::new(vec![
            crate::RatePoint {
                time_s: 0.0,
                rate: 0.0,
            },
            crate::RatePoint {
                time_s: 10.0,
                rate: 40.0,
            },
        ])
        .unwrap();
        let mut per_second = [0u32; 10];
        let mut total = 0;
        for seed in 0..40 {
            for at in ArrivalSchedule::following(curve.clone(), Arrival::Poisson, seed)
                .skip(1)
                .map(|d| d.as_secs_f64())
                .take_while(|t| *t < 10.0)
            {
                per_second[at as usize] += 1;
                total += 1;
            }
        }
        for (second, n) in per_second.iter().enumerate() {
            let expected = 40.0 * curve.expected_arrivals(second as f64 + 1.0)
                - 40.0 * curve.expected_arrivals(second as f64);
            let sd = expected.sqrt();
            assert!(
                (f64::from(*n) - expected).abs() < 4.0 * sd,
                "second {second}: {n} vs {expected}"
            );
        }
        assert!((f64::from(total) - 40.0 * 200.0).abs() < 4.0 * (8000f64).sqrt());
    }

    #[test]
    fn a_vllm_ramp_spaces_each_request_at_its_own_rate() {
        let ramp = RequestRamp {
            shape: crate::RampShape::Linear,
            start_rps: 1.0,
            end_rps: 4.0,
        };
        let s: Vec<f64> = ArrivalSchedule::ramping_over_requests(ramp, 4, Arrival::Constant, 0)
            .take(4)
            .map(|d| d.as_secs_f64())
            .collect();
        // Requests 1, 2, 3 at 2/s, 3/s and 4/s.
        let want = [0.0, 0.5, 0.5 + 1.0 / 3.0, 0.5 + 1.0 / 3.0 + 0.25];
        for (got, want) in s.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{s:?}");
        }
    }
}
