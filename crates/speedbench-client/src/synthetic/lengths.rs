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
    fn pairs_are_drawn_together_by_their_percentages() {
        let d = SequenceDistribution::parse("100,10:20;400|40,50:80").unwrap();
        let mut rng = SplitMix64::new(9);
        let draws: Vec<(u32, u32)> = (0..10_000).map(|_| d.draw(&mut rng)).collect();
        let short: Vec<_> = draws.iter().filter(|(_, o)| *o == 10).collect();
        assert!(
            short.iter().all(|(i, _)| *i == 100),
            "a short output has its short input"
        );
        assert!(
            (short.len() as f64 / 1e4 - 0.2).abs() < 0.02,
            "{}",
            short.len()
        );
        let long: Vec<f64> = (draws.iter())
            .filter(|(_, o)| *o == 50)
            .map(|(i, _)| f64::from(*i))
            .collect();
        let mean = long.iter().sum::<f64>() / long.len() as f64;
        let sd = (long.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / long.len() as f64).sqrt();
        assert!(
            (mean - 400.0).abs() < 3.0 && (sd - 40.0).abs() < 3.0,
            "{mean} {sd}"
        );
        // AIPerf's YAML form of a side, and its display.
        let yaml = r#"{"pairs": [{"isl": {"mean": 400, "stddev": 40}, "osl": {"value": 50}, "probability": 80},
                                {"isl": 100, "osl": 10, "prob": 20}]}"#;
        let y = SequenceDistribution::parse(yaml).unwrap();
        assert_eq!(y.to_string(), "400|40,50:80;100,10:20");
        for bad in [
            "100,10:20",
            "100:20",
            "a,b:100",
            "[(100,10):50,(200,20):40]",
            r#"{"pairs": []}"#,
        ] {
            assert!(SequenceDistribution::parse(bad).is_err(), "{bad}");
        }
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

/// Input and output lengths drawn together (AIPerf's
/// `--sequence-distribution`): each draw picks a pair by its probability,
/// then each length normal around the pair's (when it has a deviation).
#[derive(Debug, Clone, PartialEq)]
pub struct SequenceDistribution {
    /// The pairs: (probability in percent, input length, output length).
    pub pairs: Vec<(f64, TokenLength, TokenLength)>,
}

impl SequenceDistribution {
    /// Reads AIPerf's three forms: `"256,128:40;512|20,256|10:60"`
    /// (`isl[|stddev],osl[|stddev]:percent`, `;` between pairs),
    /// `"[(256,128):40,(512,256):60]"`, and JSON `{"pairs": [{"isl": 256,
    /// "isl_stddev": 10, "osl": 128, "osl_stddev": 5, "prob": 40}, ...]}`.
    /// The percentages add up to 100.
    ///
    /// ```
    /// use speedbench_client::synthetic::SequenceDistribution;
    ///
    /// let a = SequenceDistribution::parse("256,128:40;512|20,256|10:60").unwrap();
    /// let b = SequenceDistribution::parse("[(256,128):40,(512|20,256|10):60]").unwrap();
    /// let c = SequenceDistribution::parse(r#"{"pairs": [{"isl": 256, "osl": 128, "prob": 40},
    ///     {"isl": 512, "isl_stddev": 20, "osl": 256, "osl_stddev": 10, "prob": 60}]}"#).unwrap();
    /// assert!(a == b && b == c);
    /// assert!(SequenceDistribution::parse("256,128:40;512,256:50").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<SequenceDistribution, String> {
        let text = text.trim();
        let pairs = if text.starts_with('{') {
            json_pairs(text)?
        } else {
            let body = text.trim_start_matches('[').trim_end_matches(']');
            let items: Vec<&str> = if text.starts_with('[') {
                body.split(",(").collect()
            } else {
                body.split(';').collect()
            };
            items
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .map(|p| text_pair(&p.replace(['(', ')'], "")))
                .collect::<Result<_, _>>()?
        };
        let dist = SequenceDistribution { pairs };
        dist.check()?;
        Ok(dist)
    }

    fn check(&self) -> Result<(), String> {
        if self.pairs.is_empty() {
            return Err("a sequence distribution needs at least one pair".into());
        }
        let total: f64 = self.pairs.iter().map(|p| p.0).sum();
        if let Some(p) = self.pairs.iter().find(|p| !(p.0.is_finite() && p.0 >= 0.0)) {
            return Err(format!("a probability must be a percentage, not {}", p.0));
        }
        if (total - 100.0).abs() > 1e-6 {
            return Err(format!(
                "the probabilities add up to {total}, not 100 (percentages)"
            ));
        }
        for (_, input, output) in &self.pairs {
            LengthDistribution::Normal(*input).check()?;
            LengthDistribution::Normal(*output).check()?;
        }
        Ok(())
    }

    /// One (input, output) draw.
    pub(super) fn draw(&self, rng: &mut SplitMix64) -> (u32, u32) {
        let (_, input, output) = pick(&self.pairs, |p| p.0, rng);
        (
            normal_count(input.mean, input.stddev, rng),
            normal_count(output.mean, output.stddev, rng),
        )
    }
}

impl fmt::Display for SequenceDistribution {
    /// `256,128:40;512|20,256|10:60`, AIPerf's own form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |t: &TokenLength| match t.stddev {
            s if s > 0.0 => format!("{}|{s}", t.mean),
            _ => t.mean.to_string(),
        };
        let parts: Vec<String> = (self.pairs.iter())
            .map(|(p, i, o)| format!("{},{}:{p}", side(i), side(o)))
            .collect();
        write!(f, "{}", parts.join(";"))
    }
}

/// `isl[|stddev],osl[|stddev]:percent`.
fn text_pair(text: &str) -> Result<(f64, TokenLength, TokenLength), String> {
    let bad = || {
        format!(
            "`{}`: a pair is isl[|stddev],osl[|stddev]:percent",
            text.trim()
        )
    };
    let (lengths, prob) = text.rsplit_once(':').ok_or_else(bad)?;
    let (isl, osl) = lengths.split_once(',').ok_or_else(bad)?;
    let side = |s: &str| -> Result<TokenLength, String> {
        let (mean, stddev) = s.split_once('|').unwrap_or((s, "0"));
        let mean = mean.trim().parse::<f64>().map_err(|_| bad())?;
        Ok(TokenLength::normal(
            whole(mean)?,
            stddev.trim().parse().map_err(|_| bad())?,
        ))
    };
    Ok((
        prob.trim().parse().map_err(|_| bad())?,
        side(isl)?,
        side(osl)?,
    ))
}

/// `{"pairs": [{"isl", "isl_stddev", "osl", "osl_stddev", "prob"}, ...]}`
/// (`probability` too, as AIPerf's YAML writes it).
fn json_pairs(text: &str) -> Result<Vec<(f64, TokenLength, TokenLength)>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let items = v
        .get("pairs")
        .and_then(Value::as_array)
        .ok_or("JSON needs `pairs`: a list")?;
    items
        .iter()
        .map(|p| {
            let n = |k: &str| p.get(k).map(|v| number(v, k)).transpose();
            let prob = match n("prob")? {
                Some(p) => p,
                None => n("probability")?.ok_or("a pair needs `prob`")?,
            };
            Ok((prob, pair_side(p, "isl")?, pair_side(p, "osl")?))
        })
        .collect()
}

/// A pair's `isl` or `osl`: a number (with `isl_stddev`/`osl_stddev`
/// beside it), or `{value}` / `{mean, stddev}` as AIPerf's YAML and its
/// expansion write it.
fn pair_side(pair: &Value, key: &str) -> Result<TokenLength, String> {
    let given = pair
        .get(key)
        .ok_or_else(|| format!("a pair needs `{key}`"))?;
    let beside = pair.get(format!("{key}_stddev"));
    let (mean, stddev) = match given {
        Value::Object(o) => {
            let mean = (o.get("value").or(o.get("mean")))
                .ok_or_else(|| format!("`{key}` needs `value` or `mean`"))?;
            (mean, o.get("stddev").or(beside))
        }
        v => (v, beside),
    };
    let stddev = stddev.map(|v| number(v, "stddev")).transpose()?;
    Ok(TokenLength::normal(
        whole(number(mean, key)?)?,
        stddev.unwrap_or(0.0),
    ))
}
