//! Run-to-run variance: the headline figures of repeated runs of the same
//! workload (`--num-profile-runs`), each with its mean, standard deviation,
//! coefficient of variation and a Student's t confidence interval across
//! the runs, as AIPerf's confidence aggregation computes them.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use speedbench_record::RequestRecord;

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

/// A ratio of two figures measured over repeated runs on each side, with
/// its interval across the runs.
///
/// On the log scale: with `a` the logs of the numerator's runs and `b`
/// the denominator's, `d = mean(a) - mean(b)`, `se = √(s²(a)/n + s²(b)/m)`
/// (sample variances), Welch–Satterthwaite degrees of freedom, and the
/// interval `exp(d ± t·se)`; the ratio is `exp(d)`, the ratio of the two
/// sides' geometric means. A ratio of means over runs that vary 8 % from
/// run to run gets an interval about that wide: a 1.1x that is noise shows
/// an interval that reaches 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioInterval {
    /// `exp(mean ln num - mean ln den)`.
    pub ratio: f64,
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Welch–Satterthwaite degrees of freedom (`None` when neither side
    /// varied: the interval is the ratio).
    pub df: Option<f64>,
}

impl RatioInterval {
    /// The ratio of `num`'s runs to `den`'s at `confidence`; `None` unless
    /// each side has at least two runs, every value positive and finite.
    pub fn of(num: &[f64], den: &[f64], confidence: f64) -> Option<RatioInterval> {
        let logs = |v: &[f64]| -> Option<Vec<f64>> {
            (v.len() >= 2 && v.iter().all(|x| x.is_finite() && *x > 0.0))
                .then(|| v.iter().map(|x| x.ln()).collect())
        };
        let (a, b) = (logs(num)?, logs(den)?);
        let moments = |v: &[f64]| {
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
            (n, mean, var / n)
        };
        let ((n, ma, va), (m, mb, vb)) = (moments(&a), moments(&b));
        let d = ma - mb;
        let se2 = va + vb;
        if se2 == 0.0 {
            let r = d.exp();
            return Some(RatioInterval {
                ratio: r,
                low: r,
                high: r,
                df: None,
            });
        }
        let df = se2.powi(2) / (va.powi(2) / (n - 1.0) + vb.powi(2) / (m - 1.0));
        let half = t_quantile(confidence, df)? * se2.sqrt();
        Some(RatioInterval {
            ratio: d.exp(),
            low: (d - half).exp(),
            high: (d + half).exp(),
            df: Some(df),
        })
    }
}

/// A baseline against a speculative configuration, each run several
/// times over the same prompts: the ratios of their per-run figures with
/// intervals across the runs ([`RatioInterval`]), the run-to-run variation
/// a bootstrap over one run's requests cannot see.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AcrossRuns {
    /// The baseline's runs.
    pub baseline_runs: usize,
    /// The speculative configuration's runs.
    pub speculative_runs: usize,
    /// The intervals' confidence level.
    pub confidence: f64,
    /// Baseline mean request latency over speculative's, run by run.
    pub latency_speedup: Option<RatioInterval>,
    /// Speculative output token throughput over baseline's.
    pub output_token_throughput_ratio: Option<RatioInterval>,
    /// Speculative goodput over baseline's, against the SLOs given.
    pub goodput_ratio: Option<RatioInterval>,
}

impl AcrossRuns {
    /// The ratios over `baseline`'s and `speculative`'s runs (each run's
    /// records); `None` unless each side has at least two runs.
    pub fn of(
        baseline: &[&[RequestRecord]],
        speculative: &[&[RequestRecord]],
        slos: &crate::Slos,
        confidence: f64,
    ) -> Option<AcrossRuns> {
        if baseline.len() < 2 || speculative.len() < 2 {
            return None;
        }
        let per_run = |runs: &[&[RequestRecord]], f: &dyn Fn(&[RequestRecord]) -> Option<f64>| {
            runs.iter().map(|r| f(r)).collect::<Option<Vec<f64>>>()
        };
        let latency = |r: &[RequestRecord]| {
            RunMetrics::from_records(r)
                .request_latency_ms
                .map(|s| s.avg)
        };
        let throughput = |r: &[RequestRecord]| RunMetrics::from_records(r).output_token_throughput;
        let goodput = |r: &[RequestRecord]| crate::Goodput::of(r, slos)?.goodput;
        let ratio = |num: Option<Vec<f64>>, den: Option<Vec<f64>>| {
            RatioInterval::of(&num?, &den?, confidence)
        };
        Some(AcrossRuns {
            baseline_runs: baseline.len(),
            speculative_runs: speculative.len(),
            confidence,
            latency_speedup: ratio(per_run(baseline, &latency), per_run(speculative, &latency)),
            output_token_throughput_ratio: ratio(
                per_run(speculative, &throughput),
                per_run(baseline, &throughput),
            ),
            goodput_ratio: ratio(per_run(speculative, &goodput), per_run(baseline, &goodput)),
        })
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
    fn ratio_interval_by_hand() {
        // num: e^1, e^1.2 (logs 1, 1.2); den: e^0.5, e^0.7, e^0.6.
        // d = 1.1 - 0.6 = 0.5; va = 0.02/2 = 0.01, vb = 0.01/3;
        // df = (0.01 + 0.01/3)² / (0.01²/1 + (0.01/3)²/2) = 1.684...
        let e = f64::exp;
        let r = RatioInterval::of(&[e(1.0), e(1.2)], &[e(0.5), e(0.7), e(0.6)], 0.95).unwrap();
        assert!((r.ratio - e(0.5)).abs() < 1e-12);
        let (va, vb) = (0.01f64, 0.01f64 / 3.0);
        let df = (va + vb).powi(2) / (va.powi(2) + vb.powi(2) / 2.0);
        assert!((r.df.unwrap() - df).abs() < 1e-9);
        let half = t_quantile(0.95, df).unwrap() * (va + vb).sqrt();
        assert!((r.low - e(0.5 - half)).abs() < 1e-9 && (r.high - e(0.5 + half)).abs() < 1e-9);
        assert!(
            r.low < 1.0,
            "two noisy runs a side: the interval reaches below 1"
        );

        let flat = RatioInterval::of(&[2.0, 2.0], &[1.0, 1.0], 0.95).unwrap();
        assert_eq!(
            (flat.ratio, flat.low, flat.high, flat.df),
            (2.0, 2.0, 2.0, None)
        );
        assert!(
            RatioInterval::of(&[2.0], &[1.0, 1.0], 0.95).is_none(),
            "one run"
        );
        assert!(RatioInterval::of(&[2.0, 0.0], &[1.0, 1.0], 0.95).is_none());
    }

    #[test]
    fn across_runs_divides_each_sides_per_run_figures() {
        // One request a run: latency 100/110 ms against 50/55 ms, 10
        // tokens each, so the throughputs are 100/90.9 and 200/181.8
        // tokens/s: both ratios exactly 2 (the logs differ by ln 2).
        let run = |ms: u64| {
            vec![RequestRecord {
                e2e_latency_ns: ms * 1_000_000,
                end_unix_ns: (ms * 1_000_000) as i64,
                completion_tokens: Some(10),
                ..Default::default()
            }]
        };
        let (b1, b2, s1, s2) = (run(100), run(110), run(50), run(55));
        let slos: crate::Slos = "request_latency:1000".parse().unwrap();
        let a = AcrossRuns::of(&[&b1, &b2], &[&s1, &s2], &slos, 0.95).unwrap();
        let near = |r: Option<RatioInterval>| (r.unwrap().ratio - 2.0).abs() < 1e-12;
        assert!(near(a.latency_speedup) && near(a.output_token_throughput_ratio));
        assert!(
            near(a.goodput_ratio),
            "1 good request per run: goodput 1/duration"
        );
        let l = a.latency_speedup.unwrap();
        assert!(l.low < 2.0 && l.high > 2.0);
        assert!(AcrossRuns::of(&[&b1], &[&s1, &s2], &slos, 0.95).is_none());
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
