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
//!
//! Before comparing, [`load_compare_run`] reads each side's directory and
//! [`check_runs_match`] checks that the two runs measured the same thing:
//! the same dataset, requests, categories, prompts (each record's
//! `prompt_sha256`, and the first turns' `prompt_tokens` for files written
//! before the hash), `--osl` and sampling fields.
//!
//! Either side may instead be a llama.cpp `speed_bench.py` `--output` JSON
//! file (written by speed_bench.py or by `speedbench profile --output`).
//! Such a file has no per-request records, so a comparison with one is
//! speed_bench_compare.py's: [`compare_speed_bench_py`] over both sides'
//! speed_bench.py summary rows (a run directory's computed from its
//! records, as `report --format speed-bench-py` does), checked by
//! [`check_speed_bench_py_match`].

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use speedbench_metrics::{
    Bootstrap, OVERALL, RequestMetricsExt, Speedups, SplitMix64, is_measured, run_speculates,
};
use speedbench_record::RequestRecord;

use crate::ReportError;
use crate::format::thousands;
use crate::matrix::category_key;

mod check;
mod load;
mod render;
mod speed_bench_py;

pub use check::{RunCheck, SAMPLING_FIELDS, check_runs_match};
pub use load::{CompareRun, load_compare_run, run_gpu_telemetry, summary_field};
pub(crate) use render::{COMPARE_COLUMNS, CompareColumn, DECODE_SOURCE_COLUMN, decode_source_text};
pub use speed_bench_py::{
    SpeedBenchPyComparison, check_speed_bench_py_match, compare_speed_bench_py,
};

/// The most bootstrap resamples one interval may take.
///
/// Each resample draws every request of a category once, so the cost grows
/// as resamples × requests: a million resamples of a 1,000-request run is
/// about 10^10 draws (minutes), and percentile intervals stop moving long
/// before (10,000 is plenty). Beyond this cap, a typo like
/// `--bootstrap 10000000000` would only exhaust memory.
pub const MAX_BOOTSTRAP_SAMPLES: usize = 1_000_000;

/// What the byte-identical share can and cannot say, printed with it.
pub const BYTE_IDENTICAL_NOTE: &str = "Byte-identical outputs are expected only for greedy \
decoding (temperature 0) over the same prompts, and even then some engines are not bit-exact \
under speculation (llama.cpp's batched CPU verification, for one, can pick a different token \
where two are nearly tied), so a share below 100% alone does not show that speculation changed \
the output distribution.";

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
    /// The numbers, computed by [`Speedups::of`] (flattened into the JSON).
    #[serde(flatten)]
    pub speedups: Speedups,
    /// Requests present and successful in both runs (same row and turn).
    pub paired: u64,
    /// Paired requests whose outputs are byte-identical.
    pub identical: u64,
    /// With repeated runs on both sides: the baseline's mean request
    /// latency over the speculative's, run by run, with its interval
    /// across runs ([`Comparison::add_latency_across_runs`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_across_runs: Option<speedbench_metrics::RatioInterval>,
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
    /// Later turns of conversations whose earlier turn already differed:
    /// their prompts carry each run's own earlier reply, so they are not
    /// paired (neither identical nor a divergence of their own).
    pub after_divergence: u64,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// What the byte-identical share means ([`BYTE_IDENTICAL_NOTE`]).
    pub byte_identical_note: String,
    /// Goodput of both runs against the same SLOs; [`compare`] leaves it
    /// `None` (it takes no SLOs): set it with
    /// [`GoodputComparison::of`](speedbench_metrics::GoodputComparison::of).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub goodput: Option<speedbench_metrics::GoodputComparison>,
    /// With repeated runs on both sides, the ratios of their per-run
    /// figures and intervals across runs; [`compare`] leaves it `None`
    /// (set it with [`AcrossRuns::of`](speedbench_metrics::AcrossRuns::of)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub across_runs: Option<speedbench_metrics::AcrossRuns>,
    /// Energy per output token of both sides, where both scraped their
    /// GPUs (`--gpu-telemetry`); [`compare`] leaves it `None`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub energy: Option<speedbench_scrape::EnergyComparison>,
}

fn measured(records: &[RequestRecord]) -> Vec<&RequestRecord> {
    records.iter().filter(|r| is_measured(r)).collect()
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

/// One row's numbers from [`Speedups`]; the lossless check fills
/// `paired` and `identical` later.
fn compare_group(
    category: &str,
    base: &[&RequestRecord],
    spec: &[&RequestRecord],
    speculates: bool,
    options: &CompareOptions,
    rng: &mut SplitMix64,
) -> CategoryComparison {
    let bootstrap = Bootstrap {
        resamples: options.bootstrap_samples,
        confidence: options.confidence,
    };
    CategoryComparison {
        category: category.to_string(),
        speedups: Speedups::of(base, spec, speculates, bootstrap, rng),
        paired: 0,
        identical: 0,
        latency_across_runs: None,
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

/// A request's place in its run: row id, turn, and which occurrence of that
/// `(id, turn)` it is in dispatch order (a row runs more than once with
/// `--num-conversations` above the row count).
pub(super) type RequestKey<'a> = (&'a str, u32, usize);

/// The run's measured requests by [`RequestKey`], occurrences counted over
/// every measured request (failed ones too, so one failure does not shift
/// the pairing of the rest).
/// A run's measured records by request (id, turn, occurrence).
pub(super) type Keyed<'a> = BTreeMap<RequestKey<'a>, &'a RequestRecord>;

pub(super) fn keyed(records: &[RequestRecord]) -> BTreeMap<RequestKey<'_>, &RequestRecord> {
    let mut ordered: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    ordered.sort_by_key(|r| r.request_index);
    let mut seen: HashMap<(&str, u32), usize> = HashMap::new();
    ordered
        .into_iter()
        .map(|r| {
            let n = seen
                .entry((r.conversation_id.as_str(), r.turn_index))
                .or_default();
            *n += 1;
            ((r.conversation_id.as_str(), r.turn_index, *n - 1), r)
        })
        .collect()
}

/// Compares a baseline run's records with a speculative run's.
///
/// Warmup and failed requests are left out. Categories present in only one
/// run get no row. Outputs are paired by row id, turn and occurrence.
/// Errors when the runs share no category, or when more than
/// [`MAX_BOOTSTRAP_SAMPLES`] resamples are asked for.
pub fn compare(
    baseline: &[RequestRecord],
    speculative: &[RequestRecord],
    options: &CompareOptions,
) -> Result<Comparison, ReportError> {
    if options.bootstrap_samples > MAX_BOOTSTRAP_SAMPLES {
        return Err(ReportError::Compare(format!(
            "{} bootstrap resamples asked for; at most {} are allowed",
            options.bootstrap_samples,
            thousands(MAX_BOOTSTRAP_SAMPLES as f64)
        )));
    }
    let base = measured_side("baseline", baseline)?;
    let spec = measured_side("speculative", speculative)?;
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
    let mut rng = SplitMix64::new(options.seed);
    // As the acceptance matrix decides it, over the whole speculative run.
    let speculates = run_speculates(speculative);
    let mut rows: Vec<CategoryComparison> = crate::matrix::column_order(&shared)
        .iter()
        .map(|c| {
            compare_group(
                c,
                &base_groups[c],
                &spec_groups[c],
                speculates,
                options,
                &mut rng,
            )
        })
        .collect();
    let base_all = in_categories(&base_groups, &shared);
    let spec_all = in_categories(&spec_groups, &shared);
    rows.push(compare_group(
        OVERALL, &base_all, &spec_all, speculates, options, &mut rng,
    ));

    let lossless = lossless_check(baseline, speculative, &shared, &mut rows);
    Ok(Comparison::of_rows(rows, lossless, options.confidence))
}

impl Comparison {
    /// With at least two runs a side (`baseline` and `speculative`, each
    /// run's records): each row's latency speedup across runs, from the
    /// mean request latency of the row's measured requests in each run
    /// ([`RatioInterval`](speedbench_metrics::RatioInterval) at the
    /// comparison's confidence). Rows keep `None` otherwise.
    pub fn add_latency_across_runs(
        &mut self,
        baseline: &[&[RequestRecord]],
        speculative: &[&[RequestRecord]],
    ) {
        if baseline.len() < 2 || speculative.len() < 2 {
            return;
        }
        let categories: BTreeSet<String> = (self.rows.iter())
            .map(|r| r.category.clone())
            .filter(|c| c != OVERALL)
            .collect();
        let mean_latency = |run: &[RequestRecord], row: &str| {
            let ms: Vec<f64> = measured(run)
                .into_iter()
                .filter(|r| {
                    let key = category_key(r);
                    key.is_some_and(|k| {
                        if row == OVERALL {
                            categories.contains(&k)
                        } else {
                            k == row
                        }
                    })
                })
                .map(|r| r.request_latency_ms())
                .collect();
            speedbench_metrics::mean(ms.iter().copied())
        };
        let per_run = |runs: &[&[RequestRecord]], row: &str| -> Vec<f64> {
            runs.iter()
                .filter_map(|run| mean_latency(run, row))
                .collect()
        };
        let confidence = self.confidence;
        for row in &mut self.rows {
            let (b, s) = (
                per_run(baseline, &row.category),
                per_run(speculative, &row.category),
            );
            row.latency_across_runs = speedbench_metrics::RatioInterval::of(&b, &s, confidence);
        }
    }

    /// The per-request comparison of `rows` and the lossless check; the
    /// run-level figures (goodput, across runs, energy) left to the caller.
    fn of_rows(rows: Vec<CategoryComparison>, lossless: Lossless, confidence: f64) -> Comparison {
        Comparison {
            rows,
            divergences: lossless.divergences,
            diverging: lossless.diverging,
            after_divergence: lossless.after_divergence,
            confidence,
            byte_identical_note: BYTE_IDENTICAL_NOTE.to_string(),
            goodput: None,
            across_runs: None,
            energy: None,
        }
    }
}

/// The records of `categories`, category by category.
fn in_categories<'a>(
    groups: &BTreeMap<String, Vec<&'a RequestRecord>>,
    categories: &BTreeSet<&str>,
) -> Vec<&'a RequestRecord> {
    categories
        .iter()
        .flat_map(|c| groups[*c].iter().copied())
        .collect()
}

/// A side's measured records; a side without a successful one cannot be
/// compared.
fn measured_side<'a>(
    side: &str,
    records: &'a [RequestRecord],
) -> Result<Vec<&'a RequestRecord>, ReportError> {
    let kept = measured(records);
    if kept.is_empty() {
        return Err(ReportError::Compare(no_success(side, records)));
    }
    Ok(kept)
}

/// What the lossless check found beyond the rows' counts.
struct Lossless {
    divergences: Vec<Divergence>,
    diverging: u64,
    after_divergence: u64,
}

/// The lossless check: the same row, turn and occurrence in both runs,
/// byte for byte, counted into each row (its category's and Overall);
/// the first differences (at most 20) and how many differ. A turn after a
/// difference in the same conversation is not paired: its history (each
/// run's own earlier reply) already differs, so it would count that one
/// difference again.
fn lossless_check(
    baseline: &[RequestRecord],
    speculative: &[RequestRecord],
    shared: &BTreeSet<&str>,
    rows: &mut [CategoryComparison],
) -> Lossless {
    let shared_key = |r: &RequestRecord| {
        is_measured(r)
            && category_key(r)
                .as_deref()
                .is_some_and(|c| shared.contains(c))
    };
    let base_by_key = keyed(baseline);
    let mut divergences = Vec::new();
    let mut diverging = 0;
    let mut after_divergence = 0;
    // (conversation, occurrence) whose turns so far differed; keys come
    // in turn order within a conversation.
    let mut diverged: BTreeSet<(&str, usize)> = BTreeSet::new();
    for (key, r) in keyed(speculative) {
        let Some(b) = base_by_key.get(&key) else {
            continue;
        };
        if !shared_key(r) || !shared_key(b) {
            continue;
        }
        let (conversation, _, occurrence) = key;
        if diverged.contains(&(conversation, occurrence)) {
            after_divergence += 1;
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
            diverged.insert((conversation, occurrence));
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
    Lossless {
        divergences,
        diverging,
        after_divergence,
    }
}

/// Why a side with no successful request cannot be compared, with its
/// counts (the runs sharing no category is not the reason).
fn no_success(side: &str, records: &[RequestRecord]) -> String {
    let warmup = records.iter().filter(|r| r.warmup).count();
    let failed = records
        .iter()
        .filter(|r| !r.warmup && !r.is_success())
        .count();
    format!(
        "the {side} run has no successful request ({} records: {failed} failed, {warmup} \
         warmup); nothing of it can be compared (rerun it, or see its errors with \
         `speedbench report`)",
        records.len()
    )
}

#[cfg(test)]
mod tests {
    use super::render::with_ci;
    use super::*;
    use speedbench_metrics::DecodeSource;
    use speedbench_metrics::Interval;
    use speedbench_metrics::percentile_sorted;
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
    fn a_turn_after_a_difference_is_not_a_difference_of_its_own() {
        // Conversation "a": turn 0 differs, so turns 1 and 2 carry each
        // run's own reply as history; "b" differs only at its turn 1.
        let turn = |id: &str, t: u32, text: &str, spec: bool| {
            let mut r = rec(id, "mtbench", 50.0, 1.0, text, spec.then_some((1, 2, 1)));
            r.turn_index = t;
            r.request_index = u64::from(t) * 10 + u64::from(id == "b");
            r
        };
        let base = vec![
            turn("a", 0, "one", false),
            turn("a", 1, "two", false),
            turn("a", 2, "six", false),
            turn("b", 0, "same", false),
            turn("b", 1, "old", false),
        ];
        let spec = vec![
            turn("a", 0, "uno", true),
            turn("a", 1, "two", true),
            turn("a", 2, "seis", true),
            turn("b", 0, "same", true),
            turn("b", 1, "new", true),
        ];
        let c = compare(&base, &spec, &no_ci()).unwrap();
        let overall = c.rows.last().unwrap();
        // Paired: a/0 (differs), b/0 (identical), b/1 (differs); a/1 and
        // a/2 are after a's difference: neither identical nor counted again.
        assert_eq!((overall.paired, overall.identical, c.diverging), (3, 1, 2));
        assert_eq!(c.after_divergence, 2);
        let firsts: Vec<(&str, u32)> = c
            .divergences
            .iter()
            .map(|d| (d.conversation_id.as_str(), d.turn_index))
            .collect();
        assert_eq!(firsts, [("a", 0), ("b", 1)]);
        assert!(
            c.to_console()
                .contains("2 differ; 2 later turn(s) not compared: an earlier turn"),
            "{}",
            c.to_console()
        );
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
        assert_eq!(coding.speedups.decode_speedup, Some(2.0));
        assert_eq!(coding.speedups.decode_source, Some(DecodeSource::Server));
        // latency: base mean (2+4)/2 = 3 s over spec mean 1 s -> 3.00x
        assert_eq!(coding.speedups.latency_speedup, Some(3.0));
        // acceptance: (30+10)/(40+40) = 0.5; AL 1 + 40/20 = 3.0
        assert_eq!(
            (coding.speedups.accept_rate, coding.speedups.accept_length),
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
        assert!((overall.speedups.decode_speedup.unwrap() - 110.0 / 60.0).abs() < 1e-12);
        assert_eq!((overall.paired, overall.identical, c.diverging), (3, 2, 1));
        let console = c.to_console();
        assert!(console.contains("2.00x"), "{console}");
        assert!(
            console.contains("Byte-identical outputs: 2 of 3 paired requests (66.7%); 1 differ."),
            "{console}"
        );
        assert!(
            console.contains("not bit-exact under speculation"),
            "{console}"
        );
        assert!(!console.contains("meaningful"), "{console}");
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
        assert_eq!(c.rows[0].speedups.decode_source, Some(DecodeSource::Client));
        assert_eq!(c.rows[0].speedups.decode_speedup, Some(2.0));
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
        let ci = row.speedups.decode_speedup_ci.unwrap();
        assert!(
            ci.low <= row.speedups.decode_speedup.unwrap()
                && row.speedups.decode_speedup.unwrap() <= ci.high,
            "{ci:?}"
        );
        let al = row.speedups.accept_length_ci.unwrap();
        assert!(
            al.low <= row.speedups.accept_length.unwrap()
                && row.speedups.accept_length.unwrap() <= al.high
        );
        assert!(al.high - al.low > 0.0);
        // Every latency is exactly 2 s vs 1 s: no spread, a point interval at 2.
        assert_eq!(
            row.speedups.latency_speedup_ci,
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
    fn a_side_without_a_success_is_named_not_called_disjoint() {
        let base = vec![rec("a", "qa", 1.0, 1.0, "", None)];
        let mut failed = rec("a", "qa", 1.0, 1.0, "", None);
        failed.error_kind = Some(speedbench_record::ErrorKind::HttpStatus);
        let mut warm = rec("b", "qa", 1.0, 1.0, "", None);
        warm.warmup = true;
        let err = compare(&base, &[failed, warm], &no_ci())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "the speculative run has no successful request (2 records: 1 failed, 1 warmup)"
            ),
            "{err}"
        );
        assert!(!err.contains("share no category"), "{err}");
    }

    #[test]
    fn a_ratio_over_a_timers_resolution_prints_short() {
        assert_eq!(
            with_ci(
                Some(5.25e300),
                Some(Interval {
                    low: 0.29,
                    high: 9.7e299
                }),
                "x"
            ),
            "5.25e300x [0.29, 9.70e299]"
        );
        assert_eq!(with_ci(Some(327.194), None, "x"), "327.19x");
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
