//! Baseline against speculative: speedups, a lossless check, and bootstrap
//! confidence intervals, per category.
//!
//! The speedups follow llama.cpp's `speed_bench_compare.py`:
//! `decode_speedup = spec mean decode tokens/s / base mean decode tokens/s`
//! and `latency_speedup = base mean latency / spec mean latency`. What the
//! peers lack is added here: on greedy runs over the same prompts, the
//! share of outputs that are byte-identical between the two runs (a
//! lossless check of the speculative path) with where they first diverge,
//! and percentile-bootstrap confidence intervals on acceptance length and
//! both speedups.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use speedbench_metrics::{AcceptanceTotals, RequestMetricsExt, percentile_sorted};
use speedbench_record::RequestRecord;

use crate::ReportError;
use crate::format::thousands;
use crate::matrix::category_key;

/// Settings of a comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompareOptions {
    /// Bootstrap resamples per interval; 0 turns intervals off.
    pub bootstrap_samples: usize,
    /// Confidence level of the intervals, e.g. 0.95.
    pub confidence: f64,
    /// Seed of the resampling, so intervals are reproducible.
    pub seed: u64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            bootstrap_samples: 1000,
            confidence: 0.95,
            seed: 0,
        }
    }
}

/// Which decode speed a category's speedup uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodeSource {
    /// The server's own figure (llama.cpp `predicted_per_second`), present on
    /// every request of both runs.
    Server,
    /// The client's `(completion_tokens - 1) / (e2e - ttft)` (needs streaming).
    Client,
}

/// A confidence interval `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
}

/// Where a speculative output first differs from its baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// Conversation (row) identifier.
    pub conversation_id: String,
    /// Turn index.
    pub turn_index: u32,
    /// Byte offset of the first difference (the shorter length when one is a prefix).
    pub byte_offset: usize,
    /// Up to 40 characters of the baseline from the divergence.
    pub baseline_excerpt: String,
    /// Up to 40 characters of the speculative output from the divergence.
    pub speculative_excerpt: String,
}

/// One row of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryComparison {
    /// Category, or `overall` for the pooled row.
    pub category: String,
    /// Successful measured requests in the baseline.
    pub base_requests: u64,
    /// Successful measured requests in the speculative run.
    pub spec_requests: u64,
    /// Which decode speed the speedup uses.
    pub decode_source: Option<DecodeSource>,
    /// Baseline mean decode tokens/s.
    pub base_decode_tps: Option<f64>,
    /// Speculative mean decode tokens/s.
    pub spec_decode_tps: Option<f64>,
    /// `spec_decode_tps / base_decode_tps`.
    pub decode_speedup: Option<f64>,
    /// Bootstrap interval of the decode speedup.
    pub decode_speedup_ci: Option<Interval>,
    /// Baseline mean end-to-end latency, seconds.
    pub base_latency_s: Option<f64>,
    /// Speculative mean end-to-end latency, seconds.
    pub spec_latency_s: Option<f64>,
    /// `base_latency_s / spec_latency_s`.
    pub latency_speedup: Option<f64>,
    /// Bootstrap interval of the latency speedup.
    pub latency_speedup_ci: Option<Interval>,
    /// Speculative run's `Σaccepted / Σproposed`.
    pub accept_rate: Option<f64>,
    /// Speculative run's token-weighted acceptance length.
    pub accept_length: Option<f64>,
    /// Bootstrap interval of the acceptance length.
    pub accept_length_ci: Option<Interval>,
    /// Requests present and successful in both runs (same row and turn).
    pub paired: u64,
    /// Paired requests whose outputs are byte-identical.
    pub identical: u64,
}

impl CategoryComparison {
    /// Share of paired outputs that are byte-identical, when any are paired.
    pub fn identical_share(&self) -> Option<f64> {
        (self.paired > 0).then(|| self.identical as f64 / self.paired as f64)
    }
}

/// A whole comparison: one row per category plus a pooled `overall` row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Rows, categories first (in the matrix column order), `overall` last.
    pub rows: Vec<CategoryComparison>,
    /// The first diverging outputs (at most 20), for inspection.
    pub divergences: Vec<Divergence>,
    /// Total diverging pairs.
    pub diverging: u64,
    /// Confidence level of the intervals.
    pub confidence: f64,
}

/// The category key used for grouping, `overall` for the pooled row.
pub const OVERALL: &str = "overall";

fn measured(records: &[RequestRecord]) -> Vec<&RequestRecord> {
    records
        .iter()
        .filter(|r| !r.warmup && r.is_success())
        .collect()
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0u64), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

/// SplitMix64: a small seeded generator, reproducible on every platform.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        ((self.next() as u128 * n as u128) >> 64) as usize
    }
}

/// Percentile-bootstrap interval of `stat` over resamples of `a` and `b`
/// (each resampled with replacement, independently).
fn bootstrap<T: Copy>(
    a: &[T],
    b: &[T],
    options: &CompareOptions,
    rng: &mut SplitMix64,
    stat: impl Fn(&[T], &[T]) -> Option<f64>,
) -> Option<Interval> {
    if options.bootstrap_samples == 0 || a.is_empty() {
        return None;
    }
    let mut ra = Vec::with_capacity(a.len());
    let mut rb = Vec::with_capacity(b.len());
    let mut values = Vec::with_capacity(options.bootstrap_samples);
    for _ in 0..options.bootstrap_samples {
        ra.clear();
        rb.clear();
        ra.extend((0..a.len()).map(|_| a[rng.below(a.len())]));
        rb.extend((0..b.len()).map(|_| b[rng.below(b.len())]));
        if let Some(v) = stat(&ra, &rb).filter(|v| v.is_finite()) {
            values.push(v);
        }
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - options.confidence) / 2.0;
    Some(Interval {
        low: percentile_sorted(&values, tail * 100.0),
        high: percentile_sorted(&values, (1.0 - tail) * 100.0),
    })
}

fn mean_ratio(num: &[f64], den: &[f64]) -> Option<f64> {
    ratio(mean(num.iter().copied()), mean(den.iter().copied()))
}

fn accept_length_of(spec: &[(u64, u64)], _: &[(u64, u64)]) -> Option<f64> {
    let (acc, steps) = spec.iter().fold((0, 0), |(a, s), &(x, y)| (a + x, s + y));
    (steps > 0).then(|| 1.0 + acc as f64 / steps as f64)
}

fn first_difference(a: &str, b: &str) -> Option<usize> {
    if a == b {
        return None;
    }
    Some(
        a.bytes()
            .zip(b.bytes())
            .position(|(x, y)| x != y)
            .unwrap_or(a.len().min(b.len())),
    )
}

fn excerpt(s: &str, byte: usize) -> String {
    let start = (0..=byte.min(s.len()))
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    s[start..].chars().take(40).collect()
}

fn compare_group(
    category: &str,
    base: &[&RequestRecord],
    spec: &[&RequestRecord],
    options: &CompareOptions,
    rng: &mut SplitMix64,
) -> CategoryComparison {
    let server_everywhere =
        |rs: &[&RequestRecord]| rs.iter().all(|r| r.decode_tokens_per_second().is_some());
    let decode_source = if !base.is_empty() && server_everywhere(base) && server_everywhere(spec) {
        Some(DecodeSource::Server)
    } else {
        Some(DecodeSource::Client)
    };
    let decode = |r: &&RequestRecord| match decode_source {
        Some(DecodeSource::Server) => r.decode_tokens_per_second(),
        _ => r.output_token_throughput_per_user(),
    };
    let base_tps: Vec<f64> = base.iter().filter_map(decode).collect();
    let spec_tps: Vec<f64> = spec.iter().filter_map(decode).collect();
    let base_lat: Vec<f64> = base.iter().map(|r| r.e2e_latency_ns as f64 / 1e9).collect();
    let spec_lat: Vec<f64> = spec.iter().map(|r| r.e2e_latency_ns as f64 / 1e9).collect();
    let mut totals = AcceptanceTotals::default();
    let mut acc_steps = Vec::new();
    for r in spec {
        if let Some(s) = &r.spec {
            totals.add(s);
            if let Some(steps) = s.verify_steps {
                acc_steps.push((s.accepted_draft_tokens, steps));
            }
        }
    }
    let decode_speedup = mean_ratio(&spec_tps, &base_tps);
    let base_latency_s = mean(base_lat.iter().copied());
    let spec_latency_s = mean(spec_lat.iter().copied());
    CategoryComparison {
        category: category.to_string(),
        base_requests: base.len() as u64,
        spec_requests: spec.len() as u64,
        decode_source: decode_source.filter(|_| decode_speedup.is_some()),
        base_decode_tps: mean(base_tps.iter().copied()),
        spec_decode_tps: mean(spec_tps.iter().copied()),
        decode_speedup,
        decode_speedup_ci: decode_speedup
            .and_then(|_| bootstrap(&spec_tps, &base_tps, options, rng, mean_ratio)),
        base_latency_s,
        spec_latency_s,
        latency_speedup: ratio(base_latency_s, spec_latency_s),
        latency_speedup_ci: bootstrap(&base_lat, &spec_lat, options, rng, mean_ratio),
        accept_rate: totals.accept_rate(),
        accept_length: totals.accept_length(),
        accept_length_ci: bootstrap(&acc_steps, &[], options, rng, accept_length_of),
        paired: 0,
        identical: 0,
    }
}

fn by_category<'a>(records: &[&'a RequestRecord]) -> BTreeMap<String, Vec<&'a RequestRecord>> {
    let mut map: BTreeMap<String, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        if let Some(k) = category_key(r) {
            map.entry(k).or_default().push(*r);
        }
    }
    map
}

/// Compares a baseline run's records with a speculative run's.
///
/// Warmup and failed requests are left out. Categories present in only one
/// run get no row. Errors when the runs share no category.
pub fn compare(
    baseline: &[RequestRecord],
    speculative: &[RequestRecord],
    options: &CompareOptions,
) -> Result<Comparison, ReportError> {
    let base = measured(baseline);
    let spec = measured(speculative);
    let (base_groups, spec_groups) = (by_category(&base), by_category(&spec));
    let shared: BTreeSet<&str> = base_groups
        .keys()
        .filter(|k| spec_groups.contains_key(*k))
        .map(String::as_str)
        .collect();
    if shared.is_empty() {
        return Err(ReportError::Compare(format!(
            "the runs share no category (baseline: {:?}; speculative: {:?}); use the same dataset and categories for both",
            base_groups.keys().collect::<Vec<_>>(),
            spec_groups.keys().collect::<Vec<_>>()
        )));
    }
    let mut rng = SplitMix64(options.seed);
    let mut rows: Vec<CategoryComparison> = crate::matrix::column_order(&shared)
        .iter()
        .map(|c| compare_group(c, &base_groups[c], &spec_groups[c], options, &mut rng))
        .collect();
    let base_all: Vec<&RequestRecord> = shared
        .iter()
        .flat_map(|c| base_groups[*c].iter().copied())
        .collect();
    let spec_all: Vec<&RequestRecord> = shared
        .iter()
        .flat_map(|c| spec_groups[*c].iter().copied())
        .collect();
    rows.push(compare_group(
        OVERALL, &base_all, &spec_all, options, &mut rng,
    ));

    // The lossless check: the same row and turn in both runs, byte for byte.
    let base_by_key: HashMap<(&str, u32), &RequestRecord> = base_all
        .iter()
        .map(|r| ((r.conversation_id.as_str(), r.turn_index), *r))
        .collect();
    let mut divergences = Vec::new();
    let mut diverging = 0;
    let mut seen = BTreeSet::new();
    for r in &spec_all {
        let key = (r.conversation_id.as_str(), r.turn_index);
        let Some(b) = base_by_key.get(&key) else {
            continue;
        };
        if !seen.insert(key) {
            continue;
        }
        let category = category_key(r).unwrap_or_default();
        let diff = first_difference(&b.output_text, &r.output_text);
        for row in rows
            .iter_mut()
            .filter(|row| row.category == category || row.category == OVERALL)
        {
            row.paired += 1;
            row.identical += u64::from(diff.is_none());
        }
        if let Some(offset) = diff {
            diverging += 1;
            if divergences.len() < 20 {
                divergences.push(Divergence {
                    conversation_id: r.conversation_id.clone(),
                    turn_index: r.turn_index,
                    byte_offset: offset,
                    baseline_excerpt: excerpt(&b.output_text, offset),
                    speculative_excerpt: excerpt(&r.output_text, offset),
                });
            }
        }
    }
    Ok(Comparison {
        rows,
        divergences,
        diverging,
        confidence: options.confidence,
    })
}

fn opt(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "n/a".to_string(), thousands)
}

fn with_ci(v: Option<f64>, ci: Option<Interval>, suffix: &str) -> String {
    match (v, ci) {
        (Some(v), Some(ci)) => format!("{v:.2}{suffix} [{:.2}, {:.2}]", ci.low, ci.high),
        (Some(v), None) => format!("{v:.2}{suffix}"),
        _ => "n/a".into(),
    }
}

impl Comparison {
    /// The console table (llama.cpp's columns plus intervals and the lossless check).
    pub fn to_console(&self) -> String {
        let header = [
            "category",
            "base_decode_t/s",
            "spec_decode_t/s",
            "decode_speedup",
            "base_latency",
            "spec_latency",
            "latency_speedup",
            "accept_rate",
            "accept_length",
            "identical",
        ];
        let rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                vec![
                    r.category.clone(),
                    opt(r.base_decode_tps),
                    opt(r.spec_decode_tps),
                    with_ci(r.decode_speedup, r.decode_speedup_ci, "x"),
                    r.base_latency_s
                        .map_or("n/a".into(), |v| format!("{v:.3}s")),
                    r.spec_latency_s
                        .map_or("n/a".into(), |v| format!("{v:.3}s")),
                    with_ci(r.latency_speedup, r.latency_speedup_ci, "x"),
                    r.accept_rate.map_or("n/a".into(), |v| format!("{v:.4}")),
                    with_ci(r.accept_length, r.accept_length_ci, ""),
                    match r.identical_share() {
                        Some(s) => format!("{}/{} ({:.0}%)", r.identical, r.paired, s * 100.0),
                        None => "n/a".into(),
                    },
                ]
            })
            .collect();
        let mut out = crate::table::titled_table(
            &format!(
                "Baseline vs speculative ({:.0}% bootstrap intervals in brackets)",
                self.confidence * 100.0
            ),
            &header,
            &rows,
            crate::table::FirstColumn::Left,
        );
        let overall = self.rows.last();
        if let Some(o) = overall.filter(|o| o.paired > 0) {
            out.push_str(&format!(
                "Lossless check: {} of {} paired outputs are byte-identical; {} diverge \
                 (meaningful for greedy decoding over the same prompts).\n",
                o.identical, o.paired, self.diverging
            ));
        }
        for d in self.divergences.iter().take(5) {
            out.push_str(&format!(
                "  {} turn {}: first difference at byte {}: base {:?} vs spec {:?}\n",
                d.conversation_id,
                d.turn_index,
                d.byte_offset,
                d.baseline_excerpt,
                d.speculative_excerpt
            ));
        }
        out
    }

    /// The comparison as JSON, at full precision.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ServerTimings, SpecDecodeStats};

    fn rec(
        id: &str,
        category: &str,
        tps: f64,
        e2e_s: f64,
        text: &str,
        spec: Option<(u64, u64, u64)>,
    ) -> RequestRecord {
        RequestRecord {
            conversation_id: id.into(),
            category: Some(category.into()),
            e2e_latency_ns: (e2e_s * 1e9) as u64,
            output_text: text.into(),
            server_timings: Some(ServerTimings {
                predicted_per_second: Some(tps),
                ..Default::default()
            }),
            spec: spec.map(|(acc, prop, steps)| SpecDecodeStats {
                accepted_draft_tokens: acc,
                proposed_draft_tokens: prop,
                verify_steps: Some(steps),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn no_ci() -> CompareOptions {
        CompareOptions {
            bootstrap_samples: 0,
            ..Default::default()
        }
    }

    #[test]
    fn speedups_and_lossless_share_by_hand() {
        let base = vec![
            rec("a", "coding", 50.0, 2.0, "x y z", None),
            rec("b", "coding", 70.0, 4.0, "p q", None),
            rec("c", "math", 60.0, 1.0, "m", None),
        ];
        let spec = vec![
            rec("a", "coding", 120.0, 1.0, "x y z", Some((30, 40, 10))),
            rec("b", "coding", 120.0, 1.0, "p r", Some((10, 40, 10))),
            rec("c", "math", 90.0, 0.5, "m", Some((5, 10, 5))),
        ];
        let c = compare(&base, &spec, &no_ci()).unwrap();
        let coding = &c.rows[0];
        // decode: spec mean 120 / base mean (50+70)/2 = 60 -> 2.00x
        assert_eq!(coding.decode_speedup, Some(2.0));
        assert_eq!(coding.decode_source, Some(DecodeSource::Server));
        // latency: base mean (2+4)/2 = 3 s over spec mean 1 s -> 3.00x
        assert_eq!(coding.latency_speedup, Some(3.0));
        // acceptance: (30+10)/(40+40) = 0.5; AL 1 + 40/20 = 3.0
        assert_eq!(
            (coding.accept_rate, coding.accept_length),
            (Some(0.5), Some(3.0))
        );
        // "p q" vs "p r": differ at byte 2; "x y z" identical -> 1 of 2.
        assert_eq!((coding.paired, coding.identical), (2, 1));
        assert_eq!(c.divergences[0].byte_offset, 2);
        assert_eq!(
            (
                c.divergences[0].baseline_excerpt.as_str(),
                c.divergences[0].speculative_excerpt.as_str()
            ),
            ("q", "r")
        );
        let overall = c.rows.last().unwrap();
        assert_eq!(overall.category, OVERALL);
        // pooled decode: spec (120+120+90)/3 = 110 over base (50+70+60)/3 = 60
        assert!((overall.decode_speedup.unwrap() - 110.0 / 60.0).abs() < 1e-12);
        assert_eq!((overall.paired, overall.identical, c.diverging), (3, 2, 1));
        let console = c.to_console();
        assert!(console.contains("2.00x"), "{console}");
        assert!(
            console.contains("Lossless check: 2 of 3 paired outputs are byte-identical; 1 diverge"),
            "{console}"
        );
    }

    #[test]
    fn client_decode_speed_when_a_side_lacks_server_timings() {
        let mut base = vec![rec("a", "qa", 10.0, 2.0, "t", None)];
        base[0].server_timings = None;
        base[0].ttft_ns = Some(1_000_000_000);
        base[0].completion_tokens = Some(11);
        let mut spec = vec![rec("a", "qa", 99.0, 1.5, "t", None)];
        spec[0].ttft_ns = Some(1_000_000_000);
        spec[0].completion_tokens = Some(11);
        let c = compare(&base, &spec, &no_ci()).unwrap();
        // client decode: base (11-1)/(2.0-1.0) = 10, spec (11-1)/(1.5-1.0) = 20 -> 2x
        assert_eq!(c.rows[0].decode_source, Some(DecodeSource::Client));
        assert_eq!(c.rows[0].decode_speedup, Some(2.0));
    }

    #[test]
    fn bootstrap_intervals_bracket_the_estimate_and_are_reproducible() {
        let base: Vec<_> = (0..40)
            .map(|i| rec(&i.to_string(), "qa", 50.0 + (i % 7) as f64, 2.0, "t", None))
            .collect();
        let spec: Vec<_> = (0..40)
            .map(|i| {
                rec(
                    &i.to_string(),
                    "qa",
                    100.0 + (i % 11) as f64,
                    1.0,
                    "t",
                    Some((i % 5, 8, 4)),
                )
            })
            .collect();
        let opts = CompareOptions {
            bootstrap_samples: 400,
            confidence: 0.9,
            seed: 7,
        };
        let a = compare(&base, &spec, &opts).unwrap();
        let b = compare(&base, &spec, &opts).unwrap();
        assert_eq!(a, b, "same seed, same intervals");
        let row = &a.rows[0];
        let ci = row.decode_speedup_ci.unwrap();
        assert!(
            ci.low <= row.decode_speedup.unwrap() && row.decode_speedup.unwrap() <= ci.high,
            "{ci:?}"
        );
        let al = row.accept_length_ci.unwrap();
        assert!(al.low <= row.accept_length.unwrap() && row.accept_length.unwrap() <= al.high);
        assert!(al.high - al.low > 0.0);
        // Every latency is exactly 2 s vs 1 s: no spread, a point interval at 2.
        assert_eq!(
            row.latency_speedup_ci,
            Some(Interval {
                low: 2.0,
                high: 2.0
            })
        );
    }

    #[test]
    fn runs_without_shared_categories_are_refused() {
        let base = vec![rec("a", "qa", 1.0, 1.0, "", None)];
        let spec = vec![rec("a", "rag", 1.0, 1.0, "", None)];
        let err = compare(&base, &spec, &no_ci()).unwrap_err().to_string();
        assert!(err.contains("share no category"), "{err}");
    }

    #[test]
    fn quantile_matches_numpy_linear() {
        // numpy.quantile([1, 2, 3, 4], 0.9) = 3.7
        assert!((percentile_sorted(&[1.0, 2.0, 3.0, 4.0], 90.0) - 3.7).abs() < 1e-12);
        assert_eq!(first_difference("abc", "abd"), Some(2));
        assert_eq!(first_difference("ab", "abc"), Some(2));
        assert_eq!(first_difference("é", "é"), None);
    }
}
