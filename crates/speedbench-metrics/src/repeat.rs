//! Run-to-run variance: the headline figures of repeated runs of the same
//! workload (`--num-profile-runs`), each with its mean, standard deviation,
//! coefficient of variation and a Student's t confidence interval across
//! the runs, as AIPerf's confidence aggregation computes them.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::run::RunMetrics;
use crate::summary::Summary;

/// One figure over repeated runs.
///
/// With `n` values `x`: `mean = Σx / n`; `std` the sample standard
/// deviation (`ddof = 1`); `cv = std / mean`; `se = std / √n`; the interval
/// `mean ± t · se` with `t` the two-sided Student's t quantile at the
/// confidence level with `n - 1` degrees of freedom. One run gives
/// `std = 0` and an interval collapsed to the mean, without a `t`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Runs that had the figure.
    pub runs: usize,
    /// Mean over the runs.
    pub mean: f64,
    /// Sample standard deviation (`ddof = 1`).
    pub std: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Coefficient of variation `std / mean`; `None` when the mean is 0.
    pub cv: Option<f64>,
    /// Standard error `std / √n`.
    pub se: f64,
    /// Lower bound of the interval.
    pub ci_low: f64,
    /// Upper bound of the interval.
    pub ci_high: f64,
    /// The t quantile used; `None` for one run.
    pub t_critical: Option<f64>,
}

impl Spread {
    /// The spread of `values` at `confidence` (strictly between 0 and 1);
    /// non-finite values are left out; `None` without a finite value.
    pub fn of(values: &[f64], confidence: f64) -> Option<Spread> {
        let x: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        let n = x.len();
        let mean = crate::mean::mean(x.iter().copied())?;
        let (min, max) = x
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        if n == 1 {
            return Some(Spread {
                runs: 1,
                mean,
                std: 0.0,
                min,
                max,
                cv: (mean != 0.0).then_some(0.0),
                se: 0.0,
                ci_low: mean,
                ci_high: mean,
                t_critical: None,
            });
        }
        let std = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
        let se = std / (n as f64).sqrt();
        let t = t_quantile(confidence, (n - 1) as f64)?;
        Some(Spread {
            runs: n,
            mean,
            std,
            min,
            max,
            cv: (mean != 0.0).then(|| std / mean),
            se,
            ci_low: mean - t * se,
            ci_high: mean + t * se,
            t_critical: Some(t),
        })
    }
}

/// The two-sided Student's t quantile: `t` with `P(|T| ≤ t) = confidence`
/// for `df` degrees of freedom (`scipy.stats.t.ppf(1 - α/2, df)`).
pub fn t_quantile(confidence: f64, df: f64) -> Option<f64> {
    if !(confidence > 0.0 && confidence < 1.0) {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0))
}

/// One headline figure of repeated runs, under AIPerf's flattened name
/// (`time_to_first_token_avg`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedFigure {
    /// The figure's name.
    pub name: String,
    /// Its unit.
    pub unit: String,
    /// Its spread over the runs.
    #[serde(flatten)]
    pub spread: Spread,
}

/// The headline figures of repeated runs of one workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedMetrics {
    /// The intervals' confidence level.
    pub confidence_level: f64,
    /// Runs that left figures.
    pub runs: usize,
    /// Each figure some run had, in a fixed order.
    pub figures: Vec<RepeatedFigure>,
}

/// How a headline figure is read from one run.
type Pick = fn(&RunMetrics) -> Option<f64>;

/// The headline figures: the run-level rates, latency distributions' avg,
/// p50 and p99, acceptance, goodput.
fn headline() -> Vec<(&'static str, &'static str, Pick)> {
    fn avg(s: &Option<Summary>) -> Option<f64> {
        s.map(|s| s.avg)
    }
    fn p50(s: &Option<Summary>) -> Option<f64> {
        s.map(|s| s.p50)
    }
    fn p99(s: &Option<Summary>) -> Option<f64> {
        s.map(|s| s.p99)
    }
    vec![
        ("request_throughput_avg", "requests/sec", |m| {
            m.request_throughput
        }),
        ("output_token_throughput_avg", "tokens/sec", |m| {
            m.output_token_throughput
        }),
        ("time_to_first_token_avg", "ms", |m| avg(&m.ttft_ms)),
        ("time_to_first_token_p50", "ms", |m| p50(&m.ttft_ms)),
        ("time_to_first_token_p99", "ms", |m| p99(&m.ttft_ms)),
        ("inter_token_latency_avg", "ms", |m| {
            avg(&m.inter_token_latency_ms)
        }),
        ("inter_token_latency_p50", "ms", |m| {
            p50(&m.inter_token_latency_ms)
        }),
        ("inter_token_latency_p99", "ms", |m| {
            p99(&m.inter_token_latency_ms)
        }),
        ("request_latency_avg", "ms", |m| avg(&m.request_latency_ms)),
        ("request_latency_p50", "ms", |m| p50(&m.request_latency_ms)),
        ("request_latency_p99", "ms", |m| p99(&m.request_latency_ms)),
        (
            "output_token_throughput_per_user_avg",
            "tokens/sec/user",
            |m| avg(&m.output_token_throughput_per_user),
        ),
        ("acceptance_length", "tokens/step", |m| {
            m.spec_decode.token_weighted_acceptance_length()
        }),
        ("draft_acceptance_rate", "%", |m| {
            m.spec_decode.overall_draft_acceptance_rate_pct()
        }),
        ("goodput", "requests/sec", |m| {
            m.goodput.as_ref().and_then(|g| g.goodput)
        }),
        ("good_request_fraction", "ratio", |m| {
            m.goodput.as_ref().and_then(|g| g.good_request_fraction)
        }),
    ]
}

impl RepeatedMetrics {
    /// The spread of every headline figure over `runs` (each run's
    /// figures as [`RunMetrics`] gives them); a figure no run had is left
    /// out.
    pub fn of(runs: &[&RunMetrics], confidence_level: f64) -> RepeatedMetrics {
        let figures = headline()
            .into_iter()
            .filter_map(|(name, unit, pick)| {
                let values: Vec<f64> = runs.iter().filter_map(|m| pick(m)).collect();
                Some(RepeatedFigure {
                    name: name.to_string(),
                    unit: unit.to_string(),
                    spread: Spread::of(&values, confidence_level)?,
                })
            })
            .collect();
        RepeatedMetrics {
            confidence_level,
            runs: runs.len(),
            figures,
        }
    }

    /// The figure named `name`.
    pub fn figure(&self, name: &str) -> Option<&Spread> {
        self.figures
            .iter()
            .find(|f| f.name == name)
            .map(|f| &f.spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_quantiles_match_the_tables() {
        // Two-sided 95 % (scipy.stats.t.ppf(0.975, df)) and 90 %.
        for (confidence, df, want) in [
            (0.95, 1.0, 12.706_204_736),
            (0.95, 2.0, 4.302_652_730),
            (0.95, 4.0, 2.776_445_105),
            (0.95, 9.0, 2.262_157_163),
            (0.90, 4.0, 2.131_846_786),
            (0.99, 9.0, 3.249_835_542),
        ] {
            let t = t_quantile(confidence, df).unwrap();
            assert!((t - want).abs() < 1e-6, "{confidence} {df}: {t}");
        }
        assert!(t_quantile(1.0, 3.0).is_none());
    }

    #[test]
    fn spread_by_hand() {
        // 10, 12, 14: mean 12, std sqrt(((-2)² + 0 + 2²) / 2) = 2,
        // se 2/√3, t(0.975, 2) = 4.302652730.
        let s = Spread::of(&[10.0, 12.0, 14.0, f64::NAN], 0.95).unwrap();
        assert_eq!(
            (s.runs, s.mean, s.std, s.min, s.max),
            (3, 12.0, 2.0, 10.0, 14.0)
        );
        assert_eq!(s.cv, Some(2.0 / 12.0));
        let se = 2.0 / 3f64.sqrt();
        assert!((s.se - se).abs() < 1e-12);
        assert!((s.ci_low - (12.0 - 4.302_652_730 * se)).abs() < 1e-6);
        assert!((s.ci_high - (12.0 + 4.302_652_730 * se)).abs() < 1e-6);

        let one = Spread::of(&[5.0], 0.95).unwrap();
        assert_eq!(
            (one.std, one.ci_low, one.ci_high, one.t_critical),
            (0.0, 5.0, 5.0, None)
        );
        assert!(Spread::of(&[], 0.95).is_none());
        assert_eq!(Spread::of(&[0.0, 0.0], 0.95).unwrap().cv, None);
    }

    #[test]
    fn repeated_metrics_take_each_runs_figures() {
        let run = |throughput: f64| RunMetrics {
            request_throughput: Some(throughput),
            ..RunMetrics::from_records(&[])
        };
        let (a, b) = (run(4.0), run(6.0));
        let r = RepeatedMetrics::of(&[&a, &b], 0.95);
        assert_eq!(r.runs, 2);
        let s = r.figure("request_throughput_avg").unwrap();
        assert_eq!((s.mean, s.runs), (5.0, 2));
        assert!(
            r.figure("time_to_first_token_avg").is_none(),
            "no run had it"
        );
    }
}
