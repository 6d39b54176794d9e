//! Request rates that change during a run: ramps, step and piecewise-linear
//! series (AIPerf's `--request-rate-ramp-duration` and
//! `--request-rate-series`), and vLLM's ramp over the requests
//! (`--ramp-up-strategy`).
//!
//! A [`RateCurve`] is a rate as a function of time since the phase began:
//! linear between its points, held after the last. Arrivals follow it by
//! time rescaling: the schedule draws gaps of mean 1 (exponential, gamma or
//! exactly 1) and places arrival `i` where the curve's expected count of
//! arrivals, `Λ(t) = ∫₀ᵗ rate`, reaches the sum of the first `i` gaps. At a
//! constant rate that is the plain process; where the rate changes, the
//! count of arrivals in any window is what the curve says on average,
//! however short the window (no update interval to round to).

use crate::error::ClientError;

/// One point of a [`RateCurve`]: the rate at a time since the phase began.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatePoint {
    /// Seconds since the phase began.
    pub time_s: f64,
    /// Requests (conversation starts) per second at that time.
    pub rate: f64,
}

/// A request rate over time: linear between points, the last held.
///
/// ```
/// use speedbench_client::{RateCurve, RatePoint};
/// // 2/s for the first 10 s, then 10/s (a step), held.
/// let curve = RateCurve::new(vec![
///     RatePoint { time_s: 0.0, rate: 2.0 },
///     RatePoint { time_s: 10.0, rate: 2.0 },
///     RatePoint { time_s: 10.0, rate: 10.0 },
/// ])?;
/// assert_eq!(curve.expected_arrivals(10.0), 20.0);
/// assert_eq!(curve.expected_arrivals(12.0), 40.0);
/// assert_eq!(curve.time_of(40.0), 12.0);
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct RateCurve {
    points: Vec<RatePoint>,
}

impl RateCurve {
    /// A curve through `points`: times from 0, in order (two points at one
    /// time make a step), every time and rate finite, rates at least 0 and
    /// the last positive (a rate held at 0 would end the arrivals).
    pub fn new(points: Vec<RatePoint>) -> Result<RateCurve, ClientError> {
        let bad = |m: String| Err(ClientError::InvalidLoad(m));
        let Some(last) = points.last() else {
            return bad("a request-rate curve needs at least one point".into());
        };
        for (i, p) in points.iter().enumerate() {
            if !(p.time_s.is_finite() && p.time_s >= 0.0) {
                return bad(format!(
                    "rate point {i}: its time must be 0 or more seconds"
                ));
            }
            if !(p.rate.is_finite() && p.rate >= 0.0) {
                return bad(format!(
                    "rate point {i}: its rate must be 0 or more per second"
                ));
            }
            if i > 0 && p.time_s < points[i - 1].time_s {
                return bad(format!(
                    "rate point {i}: its time {} s is before the point before it ({} s): times must not go backwards",
                    p.time_s,
                    points[i - 1].time_s
                ));
            }
        }
        if last.rate <= 0.0 {
            return bad(
                "the last rate point's rate must be above 0 (it is held to the end)".into(),
            );
        }
        Ok(RateCurve { points })
    }

    /// `rate` per second from the start.
    pub fn constant(rate: f64) -> RateCurve {
        RateCurve {
            points: vec![RatePoint { time_s: 0.0, rate }],
        }
    }

    /// AIPerf's `--request-rate-ramp-duration`: from `target × step / ramp`
    /// (one step's share of the target, so a target below 1/s still rises)
    /// linearly to `target` at `ramp` seconds, then held. AIPerf moves the
    /// rate every 0.1 s; the curve moves it continuously, which is what
    /// those steps approach.
    pub fn ramped(target: f64, ramp_s: f64) -> RateCurve {
        let start = target * (AIPERF_RAMP_STEP_S / ramp_s).min(1.0);
        RateCurve {
            points: vec![
                RatePoint {
                    time_s: 0.0,
                    rate: start,
                },
                RatePoint {
                    time_s: ramp_s,
                    rate: target,
                },
            ],
        }
    }

    /// This curve up to `at` seconds, then `series` with its times counted
    /// from `at` (AIPerf's series starts when the ramp ends); the series
    /// holds its first rate until its first point.
    pub fn then(self, at: f64, series: &RateCurve) -> RateCurve {
        let rate_then = self.rate_at(at);
        let mut points: Vec<RatePoint> =
            self.points.into_iter().filter(|p| p.time_s < at).collect();
        if !points.is_empty() {
            points.push(RatePoint {
                time_s: at,
                rate: rate_then,
            });
        }
        points.push(RatePoint {
            time_s: at,
            rate: series.points[0].rate,
        });
        points.extend(series.points.iter().map(|p| RatePoint {
            time_s: at + p.time_s,
            rate: p.rate,
        }));
        RateCurve { points }
    }

    /// The points, in order.
    pub fn points(&self) -> &[RatePoint] {
        &self.points
    }

    /// The rate at `t` seconds (after a step, the rate after it).
    pub fn rate_at(&self, t: f64) -> f64 {
        let after = self.points.partition_point(|p| p.time_s <= t);
        match after {
            0 => self.points[0].rate,
            n if n == self.points.len() => self.points[n - 1].rate,
            n => {
                let (a, b) = (self.points[n - 1], self.points[n]);
                a.rate + (b.rate - a.rate) * (t - a.time_s) / (b.time_s - a.time_s)
            }
        }
    }

    /// `Λ(t)`: the arrivals the curve expects from 0 to `t` seconds (the
    /// first point's rate holds from 0 if it starts later).
    pub fn expected_arrivals(&self, t: f64) -> f64 {
        let mut total = 0.0;
        for (from, to, a, slope) in self.segments() {
            if t <= from {
                break;
            }
            let tau = t.min(to) - from;
            total += a * tau + 0.5 * slope * tau * tau;
        }
        total
    }

    /// `Λ⁻¹(n)`: the time by which the curve expects `n` arrivals.
    pub fn time_of(&self, n: f64) -> f64 {
        let mut left = n;
        for (from, to, a, slope) in self.segments() {
            let tau_max = to - from;
            let area = a * tau_max + 0.5 * slope * tau_max * tau_max;
            if left <= area || to.is_infinite() {
                // a·τ + s·τ²/2 = left, solved without cancellation:
                // τ = 2·left / (a + √(a² + 2·s·left)).
                let root = (a * a + 2.0 * slope * left).max(0.0).sqrt();
                let tau = if a + root > 0.0 {
                    2.0 * left / (a + root)
                } else {
                    0.0
                };
                return from + tau.min(tau_max);
            }
            left -= area;
        }
        unreachable!("the last segment is open-ended")
    }

    /// `(from, to, rate at from, slope)` of each piece, the last open-ended.
    fn segments(&self) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
        let first = self.points[0];
        let lead = (first.time_s > 0.0).then_some((0.0, first.time_s, first.rate, 0.0));
        let pieces = self.points.windows(2).filter_map(|w| {
            let (a, b) = (w[0], w[1]);
            let h = b.time_s - a.time_s;
            (h > 0.0).then(|| (a.time_s, b.time_s, a.rate, (b.rate - a.rate) / h))
        });
        let last = self.points[self.points.len() - 1];
        let tail = std::iter::once((last.time_s, f64::INFINITY, last.rate, 0.0));
        lead.into_iter().chain(pieces).chain(tail)
    }
}

/// AIPerf's `RATE_RAMP_UPDATE_INTERVAL` (0.1 s): its ramp starts at this
/// share of a second of the target rate per second of ramp.
const AIPERF_RAMP_STEP_S: f64 = 0.1;

/// How vLLM's ramp moves between its start and end rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RampShape {
    /// `start + (end − start) × progress`.
    Linear,
    /// `start × (end / start)^progress`.
    Exponential,
}

impl RampShape {
    /// `linear` or `exponential`, as vLLM names them.
    pub fn name(self) -> &'static str {
        match self {
            RampShape::Linear => "linear",
            RampShape::Exponential => "exponential",
        }
    }
}

impl std::str::FromStr for RampShape {
    type Err = String;

    /// `linear` or `exponential`.
    fn from_str(s: &str) -> Result<RampShape, String> {
        [RampShape::Linear, RampShape::Exponential]
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                format!("unknown ramp-up strategy {s:?} (expected linear or exponential)")
            })
    }
}

/// vLLM's `--ramp-up-strategy` with `--ramp-up-start-rps` and
/// `--ramp-up-end-rps`: the rate moves over the *requests*, not time:
/// request `i` of `n` is spaced at the rate of progress `i / (n − 1)`.
///
/// ```
/// use speedbench_client::{RampShape, RequestRamp};
/// let ramp = RequestRamp { shape: RampShape::Exponential, start_rps: 1.0, end_rps: 16.0 };
/// assert_eq!(ramp.rate_of(0, 5), 1.0);
/// assert_eq!(ramp.rate_of(2, 5), 4.0);
/// assert_eq!(ramp.rate_of(4, 5), 16.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRamp {
    /// Linear or exponential.
    pub shape: RampShape,
    /// The first request's rate (above 0 for an exponential ramp).
    pub start_rps: f64,
    /// The last request's rate (at least the start).
    pub end_rps: f64,
}

impl RequestRamp {
    /// The rate request `index` of `total` is spaced at.
    pub fn rate_of(&self, index: u64, total: u64) -> f64 {
        let progress = index as f64 / total.saturating_sub(1).max(1) as f64;
        match self.shape {
            RampShape::Linear => self.start_rps + (self.end_rps - self.start_rps) * progress,
            RampShape::Exponential => {
                self.start_rps * (self.end_rps / self.start_rps).powf(progress)
            }
        }
    }

    /// Checks the rates as vLLM does.
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidLoad(m.into()));
        if !(self.start_rps.is_finite() && self.end_rps.is_finite())
            || self.start_rps < 0.0
            || self.end_rps <= 0.0
        {
            return bad(
                "the ramp-up rates must be finite, the start 0 or more and the end above 0",
            );
        }
        if self.start_rps > self.end_rps {
            return bad("the ramp-up start rate must not be above its end rate");
        }
        if self.shape == RampShape::Exponential && self.start_rps == 0.0 {
            return bad("an exponential ramp-up cannot start at 0 requests per second");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(f64, f64)]) -> RateCurve {
        RateCurve::new(
            points
                .iter()
                .map(|&(time_s, rate)| RatePoint { time_s, rate })
                .collect(),
        )
        .unwrap()
    }

    #[test]
    fn a_linear_ramp_integrates_to_a_triangle_and_inverts() {
        // 0 -> 10/s over 10 s: 50 arrivals expected by 10 s, then 10/s.
        let c = curve(&[(0.0, 0.0), (10.0, 10.0)]);
        assert_eq!(c.expected_arrivals(10.0), 50.0);
        assert_eq!(c.expected_arrivals(5.0), 12.5);
        assert_eq!(c.expected_arrivals(12.0), 70.0);
        for n in [0.0, 0.5, 12.5, 49.0, 50.0, 70.0, 1e4] {
            let t = c.time_of(n);
            assert!(
                (c.expected_arrivals(t) - n).abs() < 1e-9 * n.max(1.0),
                "{n} {t}"
            );
        }
        assert_eq!(c.time_of(12.5), 5.0);
        assert_eq!(c.rate_at(2.5), 2.5);
        assert_eq!(c.rate_at(100.0), 10.0);
    }

    #[test]
    fn a_falling_rate_and_a_late_first_point_invert_too() {
        let c = curve(&[(2.0, 8.0), (6.0, 2.0), (6.0, 4.0)]);
        // 8/s held for 2 s (16), a trapezoid of 20, then 4/s.
        assert_eq!(c.expected_arrivals(2.0), 16.0);
        assert_eq!(c.expected_arrivals(6.0), 36.0);
        assert_eq!(c.expected_arrivals(7.0), 40.0);
        for n in [1.0, 16.0, 20.0, 35.9, 36.0, 40.0] {
            let t = c.time_of(n);
            assert!((c.expected_arrivals(t) - n).abs() < 1e-9 * n, "{n} {t}");
        }
        assert_eq!(c.rate_at(6.0), 4.0, "after the step");
    }

    #[test]
    fn aiperf_ramp_then_series() {
        // Target 2/s over 4 s: from 2 × 0.1 / 4 = 0.05/s.
        let ramp = RateCurve::ramped(2.0, 4.0);
        assert_eq!(ramp.points()[0].rate, 0.05);
        let series = curve(&[(1.0, 6.0), (3.0, 10.0)]);
        let c = ramp.then(4.0, &series);
        assert_eq!(c.rate_at(4.0), 6.0, "the series' first rate from its start");
        assert_eq!(c.rate_at(5.0), 6.0);
        assert_eq!(c.rate_at(6.0), 8.0);
        assert_eq!(c.rate_at(60.0), 10.0);
        assert!((c.rate_at(2.0) - 1.025).abs() < 1e-12);
    }

    #[test]
    fn bad_curves_and_ramps_are_refused() {
        let points = |v: &[(f64, f64)]| {
            RateCurve::new(
                v.iter()
                    .map(|&(time_s, rate)| RatePoint { time_s, rate })
                    .collect(),
            )
            .unwrap_err()
            .to_string()
        };
        assert!(points(&[]).contains("at least one point"));
        assert!(points(&[(0.0, 1.0), (2.0, 1.0), (1.0, 1.0)]).contains("go backwards"));
        assert!(points(&[(0.0, -1.0)]).contains("rate point 0"));
        assert!(points(&[(0.0, 1.0), (1.0, 0.0)]).contains("last rate point"));
        assert!(points(&[(f64::NAN, 1.0)]).contains("rate point 0"));
        let ramp = |shape, start_rps, end_rps| {
            RequestRamp {
                shape,
                start_rps,
                end_rps,
            }
            .validate()
        };
        assert!(ramp(RampShape::Exponential, 0.0, 4.0).is_err());
        assert!(ramp(RampShape::Linear, 5.0, 4.0).is_err());
        assert!(ramp(RampShape::Linear, 0.0, 4.0).is_ok());
        assert_eq!(
            RequestRamp {
                shape: RampShape::Linear,
                start_rps: 1.0,
                end_rps: 3.0
            }
            .rate_of(1, 3),
            2.0
        );
    }
}
