//! Length distributions beyond the normal: AIPerf 0.13.0's
//! (`aiperf/config/distributions.py`) log-normal by mean and median,
//! weighted mixtures (`peaks`), weighted values (`points`), each clamped
//! into `[min, max]` when given, read from the same JSON/YAML forms.

use std::fmt;

use serde_json::Value;
use speedbench_metrics::SplitMix64;

use super::{TokenLength, normal_count};
use crate::schedule::standard_normal;

/// How a prompt's (or an answer's) length is drawn, in tokens: each draw
/// rounded to a whole number, at least 1.
#[derive(Debug, Clone, PartialEq)]
pub enum LengthDistribution {
    /// Normal around a mean ([`TokenLength`]).
    Normal(TokenLength),
    /// Log-normal with this mean and median (right-skewed): `exp(μ + σz)`
    /// with `μ = ln(median)`, `σ = √(2 ln(mean/median))`; a median equal
    /// to the mean is the mean every time.
    LogNormal {
        /// The mean.
        mean: f64,
        /// The median, at most the mean.
        median: f64,
    },
    /// A weighted mixture: each draw picks a peak by weight, then draws
    /// from it.
    Peaks(Vec<(f64, LengthDistribution)>),
    /// Weighted values: each draw is one of them, by weight.
    Points(Vec<(f64, f64)>),
    /// Another distribution clamped into `[min, max]`.
    Bounded {
        /// The distribution clamped.
        inner: Box<LengthDistribution>,
        /// The smallest draw, if any.
        min: Option<f64>,
        /// The largest draw, if any.
        max: Option<f64>,
    },
}

impl From<TokenLength> for LengthDistribution {
    fn from(length: TokenLength) -> LengthDistribution {
        LengthDistribution::Normal(length)
    }
}

impl LengthDistribution {
    /// Reads AIPerf's forms, by the keys present (its discriminator): a
    /// number (fixed); `peaks` (each entry a distribution with an optional
    /// `weight`, default 1); `points` (`{value, weight}`); `median` (with
    /// `mean`: log-normal); `mean` with or without `stddev` (normal);
    /// `value` (fixed); any of them with `min`/`max`.
    ///
    /// ```
    /// use speedbench_client::synthetic::LengthDistribution;
    ///
    /// let text = r#"{"peaks": [{"mean": 256, "median": 214, "weight": 70},
    ///                         {"mean": 2048, "median": 1891, "weight": 30}]}"#;
    /// let d = LengthDistribution::from_json(&serde_json::from_str(text).unwrap()).unwrap();
    /// assert_eq!(d.to_string(), "peaks(lognormal(mean 256, median 214) × 70, lognormal(mean 2048, median 1891) × 30)");
    /// assert!((d.expected_value() - (0.7 * 256.0 + 0.3 * 2048.0)).abs() < 1e-9);
    /// ```
    pub fn from_json(value: &Value) -> Result<LengthDistribution, String> {
        let dist = match value {
            Value::Number(n) => {
                let v = n.as_f64().ok_or("not a number")?;
                LengthDistribution::Normal(TokenLength::fixed(whole(v)?))
            }
            Value::Object(map) => {
                let inner = distribution_of(map)?;
                let bound = |k: &str| map.get(k).map(|v| number(v, k)).transpose();
                match (bound("min")?, bound("max")?) {
                    (None, None) => inner,
                    (min, max) => LengthDistribution::Bounded {
                        inner: Box::new(inner),
                        min,
                        max,
                    },
                }
            }
            other => return Err(format!("a number or a mapping, not {other}")),
        };
        dist.check()?;
        Ok(dist)
    }

    /// The checks [`from_json`](Self::from_json) makes: positive finite
    /// means, a median not above its mean, two or more peaks, at least one
    /// point, weights not below 0 with a positive total, `min <= max`.
    pub fn check(&self) -> Result<(), String> {
        match self {
            LengthDistribution::Normal(t) => {
                if t.mean == 0 || !t.stddev.is_finite() || t.stddev < 0.0 {
                    return Err(format!(
                        "a normal length needs a mean of at least 1 and a finite standard \
                         deviation not below 0 (got mean {}, stddev {})",
                        t.mean, t.stddev
                    ));
                }
            }
            LengthDistribution::LogNormal { mean, median } => {
                if !(mean.is_finite() && median.is_finite() && *median > 0.0 && median <= mean) {
                    return Err(format!(
                        "a log-normal length needs 0 < median <= mean (got mean {mean}, median \
                         {median})"
                    ));
                }
            }
            LengthDistribution::Peaks(peaks) => {
                if peaks.len() < 2 {
                    return Err("`peaks` needs two or more entries".into());
                }
                weights(peaks.iter().map(|(w, _)| *w), "peaks")?;
                peaks.iter().try_for_each(|(_, d)| d.check())?;
            }
            LengthDistribution::Points(points) => {
                if points.is_empty() {
                    return Err("`points` needs at least one entry".into());
                }
                weights(points.iter().map(|(_, w)| *w), "points")?;
                if let Some((v, _)) = points.iter().find(|(v, _)| !(v.is_finite() && *v >= 0.0)) {
                    return Err(format!("a point's value must be a length, not {v}"));
                }
            }
            LengthDistribution::Bounded { inner, min, max } => {
                inner.check()?;
                if let (Some(lo), Some(hi)) = (min, max)
                    && lo > hi
                {
                    return Err(format!("min {lo} is above max {hi}"));
                }
            }
        }
        Ok(())
    }

    /// One draw: rounded, at least 1.
    pub(super) fn draw(&self, rng: &mut SplitMix64) -> u32 {
        match self {
            LengthDistribution::Normal(t) => normal_count(t.mean, t.stddev, rng),
            other => {
                let x = other.raw(rng);
                // `as` saturates: a draw past u32::MAX is u32::MAX.
                (x.round().max(1.0)) as u32
            }
        }
    }

    /// One unrounded draw.
    fn raw(&self, rng: &mut SplitMix64) -> f64 {
        match self {
            LengthDistribution::Normal(t) => f64::from(normal_count(t.mean, t.stddev, rng)),
            LengthDistribution::LogNormal { mean, median } => {
                if median >= mean {
                    return *mean;
                }
                let sigma = (2.0 * (mean / median).ln()).sqrt();
                (median.ln() + sigma * standard_normal(rng)).exp()
            }
            LengthDistribution::Peaks(peaks) => pick(peaks, |(w, _)| *w, rng).1.raw(rng),
            LengthDistribution::Points(points) => pick(points, |(_, w)| *w, rng).0,
            LengthDistribution::Bounded { inner, min, max } => {
                let x = inner.raw(rng);
                let x = min.map_or(x, |lo| x.max(lo));
                max.map_or(x, |hi| x.min(hi))
            }
        }
    }

    /// The mean of the unclamped draws (AIPerf's `expected_value`).
    pub fn expected_value(&self) -> f64 {
        match self {
            LengthDistribution::Normal(t) => f64::from(t.mean),
            LengthDistribution::LogNormal { mean, .. } => *mean,
            LengthDistribution::Peaks(peaks) => {
                let total: f64 = peaks.iter().map(|(w, _)| w).sum();
                peaks
                    .iter()
                    .map(|(w, d)| w / total * d.expected_value())
                    .sum()
            }
            LengthDistribution::Points(points) => {
                let total: f64 = points.iter().map(|(_, w)| w).sum();
                points.iter().map(|(v, w)| w / total * v).sum()
            }
            LengthDistribution::Bounded { inner, .. } => inner.expected_value(),
        }
    }
}

impl fmt::Display for LengthDistribution {
    /// `normal(mean 512, stddev 50)`, `lognormal(mean 256, median 214)`,
    /// `peaks(... × 70, ... × 30)`, `points(128 × 40, ...)`, `... in [1, 8192]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LengthDistribution::Normal(t) if t.stddev == 0.0 => write!(f, "{}", t.mean),
            LengthDistribution::Normal(t) => {
                write!(f, "normal(mean {}, stddev {})", t.mean, t.stddev)
            }
            LengthDistribution::LogNormal { mean, median } => {
                write!(f, "lognormal(mean {mean}, median {median})")
            }
            LengthDistribution::Peaks(peaks) => {
                let parts: Vec<String> = peaks.iter().map(|(w, d)| format!("{d} × {w}")).collect();
                write!(f, "peaks({})", parts.join(", "))
            }
            LengthDistribution::Points(points) => {
                let parts: Vec<String> = points.iter().map(|(v, w)| format!("{v} × {w}")).collect();
                write!(f, "points({})", parts.join(", "))
            }
            LengthDistribution::Bounded { inner, min, max } => {
                let show = |b: &Option<f64>| b.map_or("-".to_string(), |v| v.to_string());
                write!(f, "{inner} in [{}, {}]", show(min), show(max))
            }
        }
    }
}

/// The distribution a mapping's keys name (AIPerf's discriminator order).
fn distribution_of(map: &serde_json::Map<String, Value>) -> Result<LengthDistribution, String> {
    let get = |k: &str| map.get(k).map(|v| number(v, k)).transpose();
    let known = [
        "mean", "stddev", "median", "value", "peaks", "points", "min", "max", "weight", "type",
    ];
    if let Some(k) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(format!("`{k}` is not a field of a length distribution"));
    }
    if let Some(peaks) = map.get("peaks") {
        let Value::Array(items) = peaks else {
            return Err("`peaks`: a list of distributions".into());
        };
        let peaks = items
            .iter()
            .map(|item| {
                let weight = item
                    .get("weight")
                    .map(|w| number(w, "weight"))
                    .transpose()?;
                Ok((weight.unwrap_or(1.0), LengthDistribution::from_json(item)?))
            })
            .collect::<Result<_, String>>()?;
        return Ok(LengthDistribution::Peaks(peaks));
    }
    if let Some(points) = map.get("points") {
        let Value::Array(items) = points else {
            return Err("`points`: a list of `{value, weight}`".into());
        };
        let points = items
            .iter()
            .map(|item| {
                let value = item.get("value").ok_or("a point needs `value`")?;
                let weight = item
                    .get("weight")
                    .map(|w| number(w, "weight"))
                    .transpose()?;
                Ok((number(value, "value")?, weight.unwrap_or(1.0)))
            })
            .collect::<Result<_, String>>()?;
        return Ok(LengthDistribution::Points(points));
    }
    match (get("mean")?, get("median")?, get("stddev")?, get("value")?) {
        (Some(mean), Some(median), _, _) => Ok(LengthDistribution::LogNormal { mean, median }),
        (None, Some(_), _, _) => Err("a log-normal length needs `mean` beside `median`".into()),
        (Some(mean), None, stddev, _) => Ok(LengthDistribution::Normal(TokenLength::normal(
            whole(mean)?,
            stddev.unwrap_or(0.0),
        ))),
        (None, None, _, Some(value)) => Ok(LengthDistribution::Normal(TokenLength::fixed(whole(
            value,
        )?))),
        _ => Err(
            "a length is a number, `{mean, stddev}`, `{mean, median}`, `{peaks: [...]}` or \
             `{points: [...]}`"
                .into(),
        ),
    }
}

fn number(value: &Value, key: &str) -> Result<f64, String> {
    value
        .as_f64()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{key}` must be a number, not {value}"))
}

/// A mean or fixed length in whole tokens.
fn whole(v: f64) -> Result<u32, String> {
    if v.is_finite() && v >= 0.0 && v <= f64::from(u32::MAX) {
        Ok(v.round() as u32)
    } else {
        Err(format!("{v} is not a length in tokens"))
    }
}

fn weights(ws: impl Iterator<Item = f64>, what: &str) -> Result<(), String> {
    let mut total = 0.0;
    for w in ws {
        if !(w.is_finite() && w >= 0.0) {
            return Err(format!("`{what}`: a weight must be 0 or more, not {w}"));
        }
        total += w;
    }
    if total > 0.0 {
        Ok(())
    } else {
        Err(format!("`{what}`: the weights add up to 0"))
    }
}

/// An entry of `items` chosen with probability proportional to its weight.
fn pick<'a, T>(items: &'a [T], weight: impl Fn(&T) -> f64, rng: &mut SplitMix64) -> &'a T {
    let total: f64 = items.iter().map(&weight).sum();
    let r = rng.next_f64() * total;
    let mut cumulative = 0.0;
    for item in items {
        cumulative += weight(item);
        if r < cumulative {
            return item;
        }
    }
    &items[items.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<LengthDistribution, String> {
        LengthDistribution::from_json(&serde_json::from_str(text).unwrap())
    }

    fn draws(d: &LengthDistribution, n: usize) -> Vec<f64> {
        let mut rng = SplitMix64::new(5);
        (0..n).map(|_| f64::from(d.draw(&mut rng))).collect()
    }

    #[test]
    fn aiperfs_forms_read_by_their_keys() {
        assert_eq!(parsed("512").unwrap(), TokenLength::fixed(512).into());
        assert_eq!(
            parsed(r#"{"value": 64}"#).unwrap(),
            TokenLength::fixed(64).into()
        );
        assert_eq!(
            parsed(r#"{"mean": 64}"#).unwrap(),
            TokenLength::fixed(64).into()
        );
        assert_eq!(
            parsed(r#"{"mean": 64, "stddev": 8}"#).unwrap(),
            TokenLength::normal(64, 8.0).into()
        );
        assert_eq!(
            parsed(r#"{"mean": 256, "median": 214}"#).unwrap(),
            LengthDistribution::LogNormal {
                mean: 256.0,
                median: 214.0
            }
        );
        let bounded = parsed(r#"{"mean": 256, "median": 200, "max": 300}"#).unwrap();
        assert!(matches!(
            bounded,
            LengthDistribution::Bounded {
                min: None,
                max: Some(300.0),
                ..
            }
        ));
        for bad in [
            r#"{"mean": 100, "median": 200}"#,
            r#"{"peaks": [{"mean": 10}]}"#,
            r#"{"points": []}"#,
            r#"{"points": [{"value": 3, "weight": 0}]}"#,
            r#"{"mean": 10, "min": 9, "max": 2}"#,
            r#"{"mean": 10, "spread": 2}"#,
            r#"{"median": 10}"#,
            r#""long""#,
        ] {
            assert!(parsed(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_log_normal_has_its_mean_and_median() {
        let d = parsed(r#"{"mean": 400, "median": 300}"#).unwrap();
        let mut x = draws(&d, 20_000);
        let mean = x.iter().sum::<f64>() / x.len() as f64;
        x.sort_by(f64::total_cmp);
        let median = x[x.len() / 2];
        assert!((mean - 400.0).abs() < 10.0, "mean {mean}");
        assert!((median - 300.0).abs() < 6.0, "median {median}");
        // A median equal to the mean: the mean every time.
        let flat = parsed(r#"{"mean": 64, "median": 64}"#).unwrap();
        assert!(draws(&flat, 50).iter().all(|&v| v == 64.0));
    }

    #[test]
    fn peaks_and_points_are_drawn_by_weight_and_bounds_clamp() {
        let d = parsed(r#"{"peaks": [{"mean": 100, "weight": 70}, {"mean": 1000, "weight": 30}]}"#)
            .unwrap();
        let x = draws(&d, 10_000);
        let low = x.iter().filter(|&&v| v == 100.0).count() as f64 / 1e4;
        assert!((low - 0.7).abs() < 0.02, "{low}");
        assert!(x.iter().all(|&v| v == 100.0 || v == 1000.0));
        let p = parsed(r#"{"points": [{"value": 8, "weight": 1}, {"value": 16, "weight": 3}]}"#)
            .unwrap();
        let x = draws(&p, 8_000);
        let eights = x.iter().filter(|&&v| v == 8.0).count() as f64 / 8e3;
        assert!((eights - 0.25).abs() < 0.02, "{eights}");
        assert_eq!(p.expected_value(), 14.0);
        let b = parsed(r#"{"mean": 100, "stddev": 80, "min": 50, "max": 120}"#).unwrap();
        let x = draws(&b, 2_000);
        assert!(x.iter().all(|&v| (50.0..=120.0).contains(&v)), "{x:?}");
        assert!(x.contains(&50.0) && x.contains(&120.0));
    }
}
