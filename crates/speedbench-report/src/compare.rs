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
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use speedbench_metrics::{
    Bootstrap, Interval, OVERALL, SpeedBenchPyComparisonRow, SpeedBenchPyOutput, SpeedBenchPyRow,
    SpeedBenchPySample, Speedups, SplitMix64, is_measured, run_speculates, speed_bench_py_compare,
    speed_bench_py_rows,
};
use speedbench_record::{
    PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RequestRecord, RunManifest, SUMMARY_FILE_NAME,
};
use speedbench_runs::{
    AIPERF_PROFILE_FILE_NAME, AIPERF_RECORDS_FILE_NAME, RunFormat, RunStatus, RunsError,
};

use crate::ReportError;
use crate::format::{fixed, thousands};
use crate::matrix::{category_key, markdown_line, push_csv_line};

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
type RequestKey<'a> = (&'a str, u32, usize);

/// The run's measured requests by [`RequestKey`], occurrences counted over
/// every measured request (failed ones too, so one failure does not shift
/// the pairing of the rest).
/// A run's measured records by request (id, turn, occurrence).
type Keyed<'a> = BTreeMap<RequestKey<'a>, &'a RequestRecord>;

fn keyed(records: &[RequestRecord]) -> BTreeMap<RequestKey<'_>, &RequestRecord> {
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
    let base = measured(baseline);
    let spec = measured(speculative);
    for (side, records, kept) in [
        ("baseline", baseline, &base),
        ("speculative", speculative, &spec),
    ] {
        if kept.is_empty() {
            return Err(ReportError::Compare(no_success(side, records)));
        }
    }
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
    let base_all: Vec<&RequestRecord> = shared
        .iter()
        .flat_map(|c| base_groups[*c].iter().copied())
        .collect();
    let spec_all: Vec<&RequestRecord> = shared
        .iter()
        .flat_map(|c| spec_groups[*c].iter().copied())
        .collect();
    rows.push(compare_group(
        OVERALL, &base_all, &spec_all, speculates, options, &mut rng,
    ));

    let lossless = lossless_check(baseline, speculative, &shared, &mut rows);
    Ok(Comparison {
        rows,
        divergences: lossless.divergences,
        diverging: lossless.diverging,
        after_divergence: lossless.after_divergence,
        confidence: options.confidence,
        byte_identical_note: BYTE_IDENTICAL_NOTE.to_string(),
    })
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

/// One side of a comparison, read from its run directory or its
/// speed_bench.py file.
#[derive(Debug, Clone)]
pub struct CompareRun {
    /// The run directory, or the speed_bench.py `--output` file.
    pub dir: PathBuf,
    /// Every record of the run (none for a speed_bench.py file).
    pub records: Vec<RequestRecord>,
    /// The run's manifest (`run.json`, else the records file's footer);
    /// `None` for AIPerf directories.
    pub manifest: Option<RunManifest>,
    /// True while a process holds the directory's run lock.
    pub live: bool,
    /// The model the run measured, in full (a GGUF path stays a path);
    /// empty when a speed_bench.py file names none (`config.model` null).
    pub model: String,
    /// The file's content when this side is a speed_bench.py `--output`
    /// file; `None` for a run directory.
    pub speed_bench_py: Option<SpeedBenchPyOutput>,
}

impl CompareRun {
    /// Why this run holds fewer requests than it planned, when it does:
    /// interrupted, failed, killed (`running` with nobody holding its lock),
    /// or still running.
    pub fn incomplete(&self) -> Option<String> {
        let m = self.manifest.as_ref()?;
        // Manifests written before outcomes were recorded read as completed.
        match m.outcome {
            RunStatus::Completed => None,
            RunStatus::Interrupted => Some("was interrupted before it finished".to_string()),
            RunStatus::Failed => Some("failed (run.json outcome `failed`)".to_string()),
            RunStatus::Running if self.live => Some("is still running".to_string()),
            RunStatus::Running | RunStatus::Died => Some(
                "was killed before it finished (run.json says `running`, and no process \
                 holds its lock)"
                    .to_string(),
            ),
            RunStatus::Unfinished => Some(format!("ended with outcome {:?}", m.outcome.as_str())),
        }
    }
}

/// Loads one side of a comparison from `dir`; `role` (`baseline`,
/// `speculative`) names it in errors.
///
/// A missing directory, a path that is not a directory, a directory with
/// no run, a run whose records file was never closed, and a run without
/// per-request records are errors naming the directory.
///
/// A `.json` file is read as a speed_bench.py `--output` file (its errors
/// name the file and the field); it gives a side with no records and
/// [`CompareRun::speed_bench_py`] set.
pub fn load_compare_run(dir: &Path, role: &str) -> Result<CompareRun, ReportError> {
    if !dir.exists() {
        return Err(ReportError::Compare(format!(
            "the {role} run directory {} does not exist",
            dir.display()
        )));
    }
    if dir.is_file() {
        let is_json = dir
            .extension()
            .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case("json"));
        if !is_json {
            return Err(ReportError::Compare(format!(
                "the {role} path {} is a file but not a .json file: give a run directory, or \
                 a speed_bench.py --output .json file",
                dir.display()
            )));
        }
        let run = speedbench_runs::load_run(dir)?;
        debug_assert_eq!(run.format, RunFormat::SpeedBenchPy);
        return Ok(CompareRun {
            dir: dir.to_path_buf(),
            records: Vec::new(),
            manifest: None,
            live: false,
            // Its `config.model`; speed_bench.py's `--model` is optional.
            model: run
                .speed_bench_py
                .as_ref()
                .and_then(|f| f.config.model.clone())
                .unwrap_or_default(),
            speed_bench_py: run.speed_bench_py,
        });
    }
    if !dir.is_dir() {
        return Err(RunsError::NotADirectory(dir.to_path_buf()).into());
    }
    let records_path = [RECORDS_FILE_NAME, PARTIAL_RECORDS_FILE_NAME]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file());
    if records_path.is_none()
        && dir.join(RunManifest::FILE_NAME).is_file()
        && dir.join(SUMMARY_FILE_NAME).is_file()
    {
        // What run.json says it was profiled at: only a summary-level run
        // is missing its records on purpose.
        let level = std::fs::read_to_string(dir.join(RunManifest::FILE_NAME))
            .ok()
            .and_then(|t| serde_json::from_str::<RunManifest>(&t).ok())
            .and_then(|m| m.config.get("export_level")?.as_str().map(str::to_string));
        let why = match level.as_deref() {
            Some("summary") => "it was profiled with --export-level summary".to_string(),
            Some(level) => format!(
                "it was profiled with --export-level {level}, so the file was lost or removed \
                 after the run"
            ),
            None => "run.json does not say its export level".to_string(),
        };
        return Err(ReportError::Compare(format!(
            "the {role} run {} has only {SUMMARY_FILE_NAME}, no {RECORDS_FILE_NAME} ({why}): a \
             comparison pairs the two runs' requests, so both need their per-request records; \
             profile it again with --export-level records (the default), or compare the \
             run-level figures with `speedbench report`",
            dir.display()
        )));
    }
    if records_path.is_none() && !dir.join(AIPERF_PROFILE_FILE_NAME).is_file() {
        return Err(ReportError::Compare(format!(
            "the {role} run directory {}: it holds no run ({RECORDS_FILE_NAME} of speedbench, \
             or {AIPERF_PROFILE_FILE_NAME} of AIPerf)",
            dir.display(),
        )));
    }
    let run = speedbench_runs::load_run(dir)?;
    let records = run.records.ok_or_else(|| {
        ReportError::Compare(match &records_path {
            Some(path) => format!(
                "the {role} run {} holds only {} without a Parquet footer: its process was \
                 killed before closing the file, so no record can be read",
                dir.display(),
                path.display()
            ),
            None => format!(
                "the {role} run {} has no per-request records (AIPerf runs need \
                 {AIPERF_RECORDS_FILE_NAME})",
                dir.display(),
            ),
        })
    })?;
    Ok(CompareRun {
        dir: dir.to_path_buf(),
        records,
        manifest: run.manifest,
        live: run.status == RunStatus::Running,
        model: run.model,
        speed_bench_py: None,
    })
}

/// What [`check_runs_match`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunCheck {
    /// Differences that make the comparison meaningless (different
    /// datasets, requests, categories, prompts, `--osl` or sampling), most
    /// important first. `speedbench compare` refuses them unless `--force`.
    pub mismatches: Vec<String>,
    /// Things to know that do not stop the comparison: an incomplete run,
    /// settings that differ but do not change the prompts or sampling.
    pub warnings: Vec<String>,
}

/// Request fields (`--extra-inputs`) that change what the model samples;
/// both runs must agree on every one of them.
pub const SAMPLING_FIELDS: [&str; 20] = [
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "min_tokens",
    "ignore_eos",
    "stop",
    "stop_token_ids",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "repeat_penalty",
    "logit_bias",
    "n_predict",
    "response_format",
];

fn shown(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "not set".to_string(),
        Some(v) => v.to_string(),
    }
}

fn request_counts<'a>(
    keyed: &BTreeMap<RequestKey<'a>, &RequestRecord>,
) -> BTreeMap<(&'a str, u32), usize> {
    let mut counts = BTreeMap::new();
    for &(id, turn, _) in keyed.keys() {
        *counts.entry((id, turn)).or_default() += 1;
    }
    counts
}

/// Checks that a baseline and a speculative run measured the same thing.
///
/// From the manifests (when both runs have one): the dataset, endpoint
/// type, `--osl` and every [`SAMPLING_FIELDS`] entry of `--extra-inputs`.
/// From the records: the same categories, the same `(question_id, turn)`
/// requests as often, each row in the same category, the same prompt hash
/// (`prompt_sha256`: what the dataset gave each turn) on every request both
/// runs recorded it for, and the same `prompt_tokens` on every first turn
/// both runs answered (the check older files without hashes still get). A
/// run that did not complete only warns about requests it lacks.
pub fn check_runs_match(base: &CompareRun, spec: &CompareRun) -> RunCheck {
    let mut check = RunCheck::default();
    let mut incomplete = false;
    for (role, run) in [("baseline", base), ("speculative", spec)] {
        if let Some(why) = run.incomplete() {
            incomplete = true;
            check.warnings.push(format!(
                "the {role} run {} {why}: it holds {} record(s); only requests both runs \
                 answered are compared",
                run.dir.display(),
                run.records.iter().filter(|r| !r.warmup).count()
            ));
        }
    }
    if drafted(&base.records) == Some(true) && drafted(&spec.records) == Some(false) {
        check.mismatches.push(format!(
            "roles: the baseline run {} speculates (its requests drafted) and the speculative \
             run {} does not; were --baseline and --speculative swapped?",
            base.dir.display(),
            spec.dir.display()
        ));
    }
    if let (Some(b), Some(s)) = (&base.manifest, &spec.manifest) {
        check_manifests(b, s, &mut check);
    }
    check_categories(base, spec, incomplete, &mut check);
    let (bk, sk) = (keyed(&base.records), keyed(&spec.records));
    check_request_counts(&bk, &sk, incomplete, &mut check);
    check_prompts(&bk, &sk, &mut check);
    check
}

/// Whether a run's answered requests drafted tokens; `None` when none was
/// answered (a run that failed whole says nothing of its server).
fn drafted(records: &[RequestRecord]) -> Option<bool> {
    let mut measured = records.iter().filter(|r| is_measured(r)).peekable();
    measured.peek()?;
    Some(measured.any(|r| r.spec.as_ref().is_some_and(|s| s.proposed_draft_tokens > 0)))
}

/// What the two runs' manifests say they sent: the dataset, the request
/// options, the sampling fields, streaming and the model.
fn check_manifests(b: &RunManifest, s: &RunManifest, check: &mut RunCheck) {
    if b.dataset != s.dataset {
        check.mismatches.push(format!(
            "dataset: baseline {:?}, speculative {:?}",
            b.dataset, s.dataset
        ));
    }
    let (bc, sc) = (&b.config, &s.config);
    let field = |c: &Value, k: &str| c.get(k).cloned().filter(|v| !v.is_null());
    for (key, what) in [
        ("endpoint_type", "endpoint_type"),
        ("osl", "osl (max_tokens)"),
    ] {
        let (x, y) = (field(bc, key), field(sc, key));
        if x != y {
            check.mismatches.push(format!(
                "{what}: baseline {}, speculative {}",
                shown(x.as_ref()),
                shown(y.as_ref())
            ));
        }
    }
    let extra = |c: &Value| c.get("extra_inputs").and_then(Value::as_object).cloned();
    let (be, se) = (extra(bc).unwrap_or_default(), extra(sc).unwrap_or_default());
    check_extra_inputs(&be, &se, check);
    if be.get("temperature").and_then(Value::as_f64) != Some(0.0) {
        check.warnings.push(format!(
            "the baseline does not pin temperature 0 (an extra input temperature of 0; \
             it sent {}): outputs are sampled, so byte-identical outputs are not expected",
            shown(be.get("temperature"))
        ));
    }
    if field(bc, "streaming") != field(sc, "streaming") {
        check.warnings.push(format!(
            "streaming: baseline {}, speculative {} (client decode speeds need streaming)",
            shown(bc.get("streaming")),
            shown(sc.get("streaming"))
        ));
    }
    if b.model != s.model {
        check.warnings.push(format!(
            "models: baseline {:?}, speculative {:?}",
            b.model, s.model
        ));
    }
    check_load_and_preflight(bc, sc, check);
}

/// The load each run put on its server, and whether each sent a preflight:
/// speedups between different loads, or between a primed and an unprimed
/// server, are not the speculation's.
fn check_load_and_preflight(bc: &Value, sc: &Value, check: &mut RunCheck) {
    for (pointer, what) in [
        ("/concurrency", "concurrency"),
        ("/client/request_rate", "request rate"),
        ("/client/max_concurrency", "max concurrency"),
    ] {
        let value = |c: &Value| c.pointer(pointer).cloned().filter(|v| !v.is_null());
        let (x, y) = (value(bc), value(sc));
        if x != y {
            check.warnings.push(format!(
                "{what}: baseline {}, speculative {}: latency and throughput depend on the load,                  so the speedups compare different loads as well as speculation",
                shown(x.as_ref()),
                shown(y.as_ref())
            ));
        }
    }
    let preflight = |c: &Value| c.pointer("/client/no_preflight").and_then(Value::as_bool);
    if let (Some(x), Some(y)) = (preflight(bc), preflight(sc))
        && x != y
    {
        let (with, without) = if x {
            ("speculative", "baseline")
        } else {
            ("baseline", "speculative")
        };
        check.warnings.push(format!(
            "preflight: the {with} run sent one and the {without} run did not (--no-preflight):              a preflight is a real request that primes the server's prompt cache and feeds an              n-gram drafter; give both runs --no-preflight, or neither"
        ));
    }
}

/// A category in one run only: a mismatch, or a warning when a run is
/// incomplete (it may not have reached it).
fn check_categories(base: &CompareRun, spec: &CompareRun, incomplete: bool, check: &mut RunCheck) {
    let categories = |run: &CompareRun| -> BTreeSet<String> {
        run.records
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(category_key)
            .collect()
    };
    let (bcat, scat) = (categories(base), categories(spec));
    for (cat, only_in) in bcat
        .difference(&scat)
        .map(|c| (c, "baseline"))
        .chain(scat.difference(&bcat).map(|c| (c, "speculative")))
    {
        let line = format!("category {cat:?} is only in the {only_in} run");
        if incomplete {
            check.warnings.push(line);
        } else {
            check.mismatches.push(line);
        }
    }
}

/// The same (question_id, turn) pairs, as often, in both complete runs.
fn check_request_counts<'a>(
    bk: &Keyed<'a>,
    sk: &Keyed<'a>,
    incomplete: bool,
    check: &mut RunCheck,
) {
    let (bn, sn) = (request_counts(bk), request_counts(sk));
    let all: BTreeSet<&(&str, u32)> = bn.keys().chain(sn.keys()).collect();
    let mut request_lines = Vec::new();
    for key in all {
        let (x, y) = (
            bn.get(key).copied().unwrap_or(0),
            sn.get(key).copied().unwrap_or(0),
        );
        if x != y {
            request_lines.push(format!(
                "request {:?} turn {}: {x} in the baseline, {y} in the speculative run",
                key.0, key.1
            ));
        }
    }
    if request_lines.is_empty() || incomplete {
        return;
    }
    let n = request_lines.len();
    let mut line = format!(
        "the runs sent different requests ({n} (question_id, turn) pair(s) differ); first: {}",
        request_lines[0]
    );
    if n > 1 {
        line.push_str(&format!("; next: {}", request_lines[1]));
    }
    check.mismatches.push(line);
}

/// The same request in both runs asked the same thing: its category, the
/// dataset's text (hash), and its first turn's prompt length.
fn check_prompts<'a>(bk: &Keyed<'a>, sk: &Keyed<'a>, check: &mut RunCheck) {
    let category = |r: &RequestRecord| {
        shown(
            r.category
                .as_ref()
                .map(|c| Value::String(c.clone()))
                .as_ref(),
        )
    };
    let mut category_lines = Vec::new();
    let mut prompt_lines = Vec::new();
    let mut hash_lines = Vec::new();
    for (key, s) in sk {
        let Some(b) = bk.get(key) else { continue };
        if b.category != s.category && category_lines.is_empty() {
            category_lines.push(format!(
                "request {:?} is in category {} in the baseline, {} in the speculative run: \
                 not the same dataset",
                key.0,
                category(b),
                category(s)
            ));
        }
        if let (Some(x), Some(y)) = (&b.prompt_sha256, &s.prompt_sha256)
            && x != y
        {
            hash_lines.push(format!(
                "request {:?} turn {}: the dataset gave it other text in the baseline (sha256 {}…) \
                 than in the speculative run ({}…)",
                key.0,
                key.1,
                &x[..x.len().min(12)],
                &y[..y.len().min(12)]
            ));
        }
        if key.1 == 0
            && let (Some(x), Some(y)) = (b.prompt_tokens, s.prompt_tokens)
            && x != y
        {
            prompt_lines.push(format!(
                "request {:?} turn 0: a prompt of {x} tokens in the baseline, {y} in the \
                 speculative run",
                key.0
            ));
        }
    }
    check.mismatches.extend(category_lines);
    if let Some(first) = hash_lines.first() {
        check.mismatches.push(format!(
            "not the same prompts ({} request(s) differ); first: {first}",
            hash_lines.len()
        ));
    }
    if let Some(first) = prompt_lines.first() {
        check.mismatches.push(format!(
            "not the same prompts ({} first turn(s) differ in prompt length); first: {first}",
            prompt_lines.len()
        ));
    }
}

/// The two runs' `--extra-inputs`: a differing [`SAMPLING_FIELDS`] entry is
/// a mismatch, any other differing field a warning.
fn check_extra_inputs(
    be: &serde_json::Map<String, Value>,
    se: &serde_json::Map<String, Value>,
    check: &mut RunCheck,
) {
    let keys: BTreeSet<&String> = be.keys().chain(se.keys()).collect();
    for key in keys {
        let (x, y) = (be.get(key), se.get(key));
        if x == y {
            continue;
        }
        let line = format!(
            "extra input {key}: baseline {}, speculative {}",
            shown(x),
            shown(y)
        );
        if SAMPLING_FIELDS.contains(&key.as_str()) {
            check.mismatches.push(format!("sampling field {line}"));
        } else {
            check
                .warnings
                .push(format!("{line} (not a sampling field)"));
        }
    }
}

impl CompareRun {
    /// True when this side is a speed_bench.py `--output` file.
    pub fn is_speed_bench_py_file(&self) -> bool {
        self.speed_bench_py.is_some()
    }

    /// This side's speed_bench.py summary rows: a file's as written, a run
    /// directory's computed from its records
    /// ([`speedbench_metrics::speed_bench_py_rows`], as `report --format
    /// speed-bench-py` prints them).
    pub fn speed_bench_py_rows(&self) -> Vec<SpeedBenchPyRow> {
        match &self.speed_bench_py {
            Some(file) => file.summary.clone(),
            None => speed_bench_py_rows(&self.records),
        }
    }

    /// This side's samples (`results` of a file; joined from the records
    /// of a run directory).
    fn speed_bench_py_samples(&self) -> Vec<SpeedBenchPySample> {
        match &self.speed_bench_py {
            Some(file) => file.results.clone(),
            None => SpeedBenchPySample::from_records_in_dispatch_order(&self.records),
        }
    }

    /// What the side says it ran: its dataset (a file's `bench`) without a
    /// `speed_bench_` prefix, `--osl`, `--limit` and `--extra-inputs`.
    fn speed_bench_py_settings(&self) -> Settings {
        let strip = |d: &str| d.strip_prefix("speed_bench_").unwrap_or(d).to_string();
        match (&self.speed_bench_py, &self.manifest) {
            (Some(file), _) => Settings {
                dataset: file.config.bench.as_deref().map(strip),
                osl: Some(file.config.osl),
                limit: file.config.limit,
                extra_inputs: Some(file.config.extra_inputs.clone()),
            },
            (None, Some(m)) => Settings {
                dataset: (!m.dataset.is_empty()).then(|| strip(&m.dataset)),
                osl: Some(m.config.get("osl").and_then(Value::as_u64)),
                limit: m.limit_per_category(),
                extra_inputs: m
                    .config
                    .get("extra_inputs")
                    .and_then(Value::as_object)
                    .cloned(),
            },
            (None, None) => Settings::default(),
        }
    }

    fn describe(&self) -> &'static str {
        if self.is_speed_bench_py_file() {
            "speed_bench.py file"
        } else {
            "run"
        }
    }
}

/// What one side of a speed_bench.py comparison says it ran; `None` where
/// it does not say.
#[derive(Debug, Default)]
struct Settings {
    dataset: Option<String>,
    /// `Some(None)`: known to have sent no cap.
    osl: Option<Option<u64>>,
    limit: Option<u64>,
    extra_inputs: Option<serde_json::Map<String, Value>>,
}

/// Checks that two sides of a speed_bench.py comparison (either one a
/// speed_bench.py file, either one a run directory) ran the same thing.
///
/// Mismatches: a different dataset (a file's `bench` against a run's
/// dataset, `speed_bench_` prefix aside), `osl`, `limit` (when both
/// sides record it), a differing [`SAMPLING_FIELDS`] entry of
/// `extra_inputs`, a category only one side has, and different samples
/// (each category's sample ids, as often). A run directory that did not
/// complete turns the category and sample differences into warnings. A
/// differing model, a differing non-sampling extra input, and settings
/// only one side records are warnings.
pub fn check_speed_bench_py_match(base: &CompareRun, spec: &CompareRun) -> RunCheck {
    let mut check = RunCheck::default();
    let mut incomplete = false;
    for (role, run) in [("baseline", base), ("speculative", spec)] {
        if let Some(why) = run.incomplete() {
            incomplete = true;
            check.warnings.push(format!(
                "the {role} run {} {why}: only the samples it finished are summarized",
                run.dir.display()
            ));
        }
    }
    let (bs, ss) = (
        base.speed_bench_py_settings(),
        spec.speed_bench_py_settings(),
    );
    if let (Some(x), Some(y)) = (&bs.dataset, &ss.dataset)
        && x != y
    {
        check.mismatches.push(format!(
            "dataset (bench): baseline {x:?}, speculative {y:?}"
        ));
    }
    if let (Some(x), Some(y)) = (bs.osl, ss.osl)
        && x != y
    {
        let show = |v: Option<u64>| v.map_or("not set".to_string(), |v| v.to_string());
        check.mismatches.push(format!(
            "osl (max_tokens): baseline {}, speculative {}",
            show(x),
            show(y)
        ));
    }
    match (bs.limit, ss.limit) {
        (Some(x), Some(y)) if x != y => check.mismatches.push(format!(
            "limit (samples per category): baseline {x}, speculative {y}"
        )),
        _ => {}
    }
    if let (Some(be), Some(se)) = (&bs.extra_inputs, &ss.extra_inputs) {
        check_extra_inputs(be, se, &mut check);
    }
    if !base.model.is_empty() && !spec.model.is_empty() && base.model != spec.model {
        check.warnings.push(format!(
            "models: baseline {:?}, speculative {:?}",
            base.model, spec.model
        ));
    }
    let differences = speed_bench_py_differences(base, spec);
    if incomplete {
        check.warnings.extend(differences);
    } else {
        check.mismatches.extend(differences);
    }
    check
}

/// Where two speed_bench.py sides ran different categories or samples.
fn speed_bench_py_differences(base: &CompareRun, spec: &CompareRun) -> Vec<String> {
    let categories = |rows: Vec<SpeedBenchPyRow>| -> BTreeSet<String> {
        rows.into_iter()
            .map(|r| r.category)
            .filter(|c| c != OVERALL)
            .collect()
    };
    let (bcat, scat) = (
        categories(base.speed_bench_py_rows()),
        categories(spec.speed_bench_py_rows()),
    );
    let mut differences = Vec::new();
    for (cat, only_in) in bcat
        .difference(&scat)
        .map(|c| (c, "baseline"))
        .chain(scat.difference(&bcat).map(|c| (c, "speculative")))
    {
        differences.push(format!(
            "category {cat:?} is only in the {only_in} {} (speed_bench_compare.py skips it)",
            if only_in == "baseline" {
                base.describe()
            } else {
                spec.describe()
            }
        ));
    }
    let ids = |samples: Vec<SpeedBenchPySample>| -> BTreeMap<(String, String), usize> {
        let mut counts = BTreeMap::new();
        for s in samples {
            *counts
                .entry((s.category.unwrap_or_default(), s.id))
                .or_default() += 1;
        }
        counts
    };
    let (bi, si) = (
        ids(base.speed_bench_py_samples()),
        ids(spec.speed_bench_py_samples()),
    );
    let keys: BTreeSet<&(String, String)> = bi.keys().chain(si.keys()).collect();
    let sample_lines: Vec<String> = keys
        .into_iter()
        .filter_map(|key| {
            let (x, y) = (
                bi.get(key).copied().unwrap_or(0),
                si.get(key).copied().unwrap_or(0),
            );
            (x != y).then(|| {
                format!(
                    "sample {:?} (category {:?}): {x} in the baseline, {y} in the speculative side",
                    key.1, key.0
                )
            })
        })
        .collect();
    if let Some(first) = sample_lines.first() {
        differences.push(format!(
            "the sides ran different samples ({} sample id(s) differ); first: {first}",
            sample_lines.len()
        ));
    }
    differences
}

/// speed_bench_compare.py's comparison of a baseline and a speculative
/// side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedBenchPyComparison {
    /// The baseline's path (run directory or speed_bench.py file).
    pub baseline: PathBuf,
    /// The speculative side's path.
    pub speculative: PathBuf,
    /// The baseline's model, in full; `None` when its file names none.
    pub baseline_model: Option<String>,
    /// The speculative side's model, in full; `None` likewise.
    pub speculative_model: Option<String>,
    /// [`speed_bench_py_compare`]'s rows: the speculative side's categories
    /// in its order that the baseline has too, `overall` last.
    pub rows: Vec<SpeedBenchPyComparisonRow>,
}

/// speed_bench_compare.py over two sides, each a speed_bench.py file or a
/// run directory (whose summary rows come from its records, see
/// [`CompareRun::speed_bench_py_rows`]): one code path for both.
pub fn compare_speed_bench_py(base: &CompareRun, spec: &CompareRun) -> SpeedBenchPyComparison {
    SpeedBenchPyComparison {
        baseline: base.dir.clone(),
        speculative: spec.dir.clone(),
        baseline_model: (!base.model.is_empty()).then(|| base.model.clone()),
        speculative_model: (!spec.model.is_empty()).then(|| spec.model.clone()),
        rows: speed_bench_py_compare(&base.speed_bench_py_rows(), &spec.speed_bench_py_rows()),
    }
}

impl SpeedBenchPyComparison {
    /// What speed_bench_compare.py prints: `Comparison: baseline=PATH
    /// speculative=PATH`, then its table
    /// ([`crate::render_speed_bench_py_comparison`]).
    pub fn to_console(&self) -> String {
        format!(
            "Comparison: baseline={} speculative={}\n{}",
            self.baseline.display(),
            self.speculative.display(),
            crate::render_speed_bench_py_comparison(&self.rows)
        )
    }

    /// The comparison as JSON, at full precision (`null` for n/a).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// One numeric column of [`Comparison::to_csv`] (and of the HTML page's
/// table, which shows the same text).
#[derive(Clone, Copy)]
pub(crate) struct CompareColumn {
    /// The CSV header.
    pub(crate) name: &'static str,
    /// Decimals printed.
    pub(crate) decimals: usize,
    /// The row's value.
    pub(crate) value: fn(&CategoryComparison) -> Option<f64>,
}

impl CompareColumn {
    /// The row's cell text: the value at this column's decimals, empty
    /// when missing or not finite.
    pub(crate) fn text(&self, row: &CategoryComparison) -> String {
        (self.value)(row)
            .filter(|v| v.is_finite())
            .map_or_else(String::new, |v| format!("{v:.*}", self.decimals))
    }
}

macro_rules! column {
    ($name:literal, $decimals:literal, |$r:ident| $value:expr) => {
        CompareColumn {
            name: $name,
            decimals: $decimals,
            value: |$r: &CategoryComparison| $value,
        }
    };
}

/// The CSV's numeric columns after `category`, in order; `decode_source`
/// (text) follows them.
pub(crate) const COMPARE_COLUMNS: [CompareColumn; 19] = [
    column!("base_requests", 0, |r| Some(
        r.speedups.base_requests as f64
    )),
    column!("spec_requests", 0, |r| Some(
        r.speedups.spec_requests as f64
    )),
    column!("base_decode_tps", 2, |r| r.speedups.base_decode_tps),
    column!("spec_decode_tps", 2, |r| r.speedups.spec_decode_tps),
    column!("decode_speedup", 2, |r| r.speedups.decode_speedup),
    column!("decode_speedup_low", 2, |r| r
        .speedups
        .decode_speedup_ci
        .map(|c| c.low)),
    column!("decode_speedup_high", 2, |r| r
        .speedups
        .decode_speedup_ci
        .map(|c| c.high)),
    column!("base_latency_s", 3, |r| r.speedups.base_latency_s),
    column!("spec_latency_s", 3, |r| r.speedups.spec_latency_s),
    column!("latency_speedup", 2, |r| r.speedups.latency_speedup),
    column!("latency_speedup_low", 2, |r| r
        .speedups
        .latency_speedup_ci
        .map(|c| c.low)),
    column!("latency_speedup_high", 2, |r| r
        .speedups
        .latency_speedup_ci
        .map(|c| c.high)),
    column!("accept_rate", 4, |r| r.speedups.accept_rate),
    column!("accept_length", 2, |r| r.speedups.accept_length),
    column!("accept_length_low", 2, |r| r
        .speedups
        .accept_length_ci
        .map(|c| c.low)),
    column!("accept_length_high", 2, |r| r
        .speedups
        .accept_length_ci
        .map(|c| c.high)),
    column!("paired", 0, |r| Some(r.paired as f64)),
    column!("identical", 0, |r| Some(r.identical as f64)),
    column!("identical_share", 4, |r| r.identical_share()),
];

/// The CSV's last column: which decode speed the speedup used.
pub(crate) const DECODE_SOURCE_COLUMN: &str = "decode_source";

/// A row's `decode_source` cell (`server`, `client`, or empty).
pub(crate) fn decode_source_text(row: &CategoryComparison) -> String {
    row.speedups
        .decode_source
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
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

fn opt(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "n/a".to_string(), thousands)
}

fn with_ci(v: Option<f64>, ci: Option<Interval>, suffix: &str) -> String {
    match (v, ci) {
        (Some(v), Some(ci)) => format!(
            "{}{suffix} [{}, {}]",
            fixed(v, 2),
            fixed(ci.low, 2),
            fixed(ci.high, 2)
        ),
        (Some(v), None) => format!("{}{suffix}", fixed(v, 2)),
        _ => "n/a".into(),
    }
}

/// The console and Markdown columns.
const TEXT_HEADER: [&str; 10] = [
    "category",
    "base_decode_t/s",
    "spec_decode_t/s",
    "decode_speedup",
    "base_latency",
    "spec_latency",
    "latency_speedup",
    "accept_rate",
    "accept_length",
    "byte_identical",
];

impl Comparison {
    /// The console and Markdown rows: llama.cpp's columns, each interval
    /// in brackets after its value, `n/a` for missing.
    fn text_rows(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| {
                vec![
                    r.category.clone(),
                    opt(r.speedups.base_decode_tps),
                    opt(r.speedups.spec_decode_tps),
                    with_ci(r.speedups.decode_speedup, r.speedups.decode_speedup_ci, "x"),
                    r.speedups
                        .base_latency_s
                        .map_or("n/a".into(), |v| format!("{}s", fixed(v, 3))),
                    r.speedups
                        .spec_latency_s
                        .map_or("n/a".into(), |v| format!("{}s", fixed(v, 3))),
                    with_ci(
                        r.speedups.latency_speedup,
                        r.speedups.latency_speedup_ci,
                        "x",
                    ),
                    r.speedups.accept_rate.map_or("n/a".into(), |v| fixed(v, 4)),
                    with_ci(r.speedups.accept_length, r.speedups.accept_length_ci, ""),
                    match r.identical_share() {
                        Some(s) => format!("{}/{} ({:.0}%)", r.identical, r.paired, s * 100.0),
                        None => "n/a".into(),
                    },
                ]
            })
            .collect()
    }

    /// The console table (llama.cpp's columns plus intervals and the lossless check).
    pub fn to_console(&self) -> String {
        let header = TEXT_HEADER;
        let rows = self.text_rows();
        let mut out = crate::table::titled_table(
            &format!(
                "Baseline vs speculative, means per request ({:.0}% bootstrap intervals in \
                 brackets)",
                self.confidence * 100.0
            ),
            &header,
            &rows,
            crate::table::FirstColumn::Left,
        );
        let overall = self.rows.last();
        if let Some(o) = overall.filter(|o| o.paired > 0) {
            out.push_str(&format!(
                "Byte-identical outputs: {} of {} paired requests ({:.1}%); {} differ{}.\n\
                 Note: {}\n",
                o.identical,
                o.paired,
                o.identical_share().unwrap_or(0.0) * 100.0,
                self.diverging,
                self.after_divergence_note(),
                self.byte_identical_note
            ));
        }
        if !self.divergences.is_empty() {
            out.push_str("First differences (baseline vs speculative):\n");
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

    /// `; N later turns not compared (...)` when a conversation diverged
    /// before its last turn, else nothing.
    fn after_divergence_note(&self) -> String {
        match self.after_divergence {
            0 => String::new(),
            n => format!(
                "; {n} later turn(s) not compared: an earlier turn of their conversation already \
                 differed, so their history (each run's own reply) differs too"
            ),
        }
    }

    /// The comparison as JSON, at full precision.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// One CSV row per category (`overall` last): `category`, the numeric
    /// columns `base_requests, spec_requests, base_decode_tps,
    /// spec_decode_tps, decode_speedup, decode_speedup_low,
    /// decode_speedup_high, base_latency_s, spec_latency_s,
    /// latency_speedup, latency_speedup_low, latency_speedup_high,
    /// accept_rate, accept_length, accept_length_low, accept_length_high,
    /// paired, identical, identical_share`, then `decode_source`. CRLF line
    /// ends like the report's CSV; tokens/s, speedups and acceptance
    /// lengths with 2 decimals, latencies (s) with 3, the two shares
    /// (fractions) with 4; an empty field where a value is missing (no
    /// interval without `--bootstrap`, no acceptance without speculation).
    ///
    /// ```
    /// use speedbench_record::{RequestRecord, ServerTimings};
    /// use speedbench_report::{CompareOptions, compare};
    /// let request = |tps: f64, seconds: f64| RequestRecord {
    ///     conversation_id: "q1".into(),
    ///     category: Some("math".into()),
    ///     e2e_latency_ns: (seconds * 1e9) as u64,
    ///     output_text: "4".into(),
    ///     server_timings: Some(ServerTimings {
    ///         predicted_per_second: Some(tps),
    ///         ..Default::default()
    ///     }),
    ///     ..Default::default()
    /// };
    /// let options = CompareOptions { bootstrap_samples: 0, ..Default::default() };
    /// let c = compare(&[request(50.0, 2.0)], &[request(100.0, 0.5)], &options)?;
    /// let csv = c.to_csv();
    /// let mut lines = csv.lines();
    /// assert!(lines.next().unwrap().starts_with("category,base_requests,spec_requests,base_decode_tps"));
    /// // 100 / 50 = 2x decode, 2 s / 0.5 s = 4x latency; one identical pair.
    /// assert_eq!(
    ///     lines.next(),
    ///     Some("math,1,1,50.00,100.00,2.00,,,2.000,0.500,4.00,,,,,,,1,1,1.0000,server")
    /// );
    /// # Ok::<(), speedbench_report::ReportError>(())
    /// ```
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let header = std::iter::once("category")
            .chain(COMPARE_COLUMNS.iter().map(|c| c.name))
            .chain(std::iter::once(DECODE_SOURCE_COLUMN))
            .map(str::to_string);
        push_csv_line(&mut out, header);
        for row in &self.rows {
            let fields = std::iter::once(row.category.clone())
                .chain(COMPARE_COLUMNS.iter().map(|c| c.text(row)))
                .chain(std::iter::once(decode_source_text(row)));
            push_csv_line(&mut out, fields);
        }
        out
    }

    /// A Markdown table with the console's columns (intervals in brackets),
    /// then the byte-identical summary and its note, and the first
    /// differences.
    pub fn to_markdown(&self) -> String {
        let mut out = markdown_line(TEXT_HEADER.iter().map(|h| h.to_string()));
        let rule = std::iter::once("---".to_string()).chain(std::iter::repeat_n(
            "---:".to_string(),
            TEXT_HEADER.len() - 1,
        ));
        out.push_str(&markdown_line(rule));
        for row in self.text_rows() {
            out.push_str(&markdown_line(row));
        }
        out.push_str(&format!(
            "\n{:.0}% percentile-bootstrap intervals in brackets.\n",
            self.confidence * 100.0
        ));
        if let Some(o) = self.rows.last().filter(|o| o.paired > 0) {
            out.push_str(&format!(
                "\nByte-identical outputs: {} of {} paired requests ({:.1}%); {} differ{}.\n\n{}\n",
                o.identical,
                o.paired,
                o.identical_share().unwrap_or(0.0) * 100.0,
                self.diverging,
                self.after_divergence_note(),
                self.byte_identical_note
            ));
        }
        if !self.divergences.is_empty() {
            out.push_str("\nFirst differences (baseline vs speculative):\n\n");
        }
        for d in self.divergences.iter().take(5) {
            out.push_str(&format!(
                "- `{}` turn {}: first difference at byte {}: base {:?} vs spec {:?}\n",
                d.conversation_id.replace('`', "'"),
                d.turn_index,
                d.byte_offset,
                d.baseline_excerpt,
                d.speculative_excerpt
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_metrics::DecodeSource;
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
