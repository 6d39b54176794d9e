//! Run directories: finding them, loading them, and choosing a source.
//!
//! A run directory is either speedbench's (`records.parquet`, with
//! `summary.json` and `server_metrics_export.json` beside it when present)
//! or AIPerf's (`profile_export_aiperf.json`, `profile_export.jsonl`,
//! `server_metrics_export.json`). Acceptance comes from the best source a
//! run offers, in AIPerf's order: per-request records, then the run summary,
//! then the server scrape.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::Value;
use speedbench_metrics::RunMetrics;
use speedbench_record::{
    ErrorKind, PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RequestRecord, RunManifest,
    SERVER_METRICS_FILE_NAME, SUMMARY_FILE_NAME, outcome, read_records_file_with, run_is_live,
};
use speedbench_scrape::ServerMetricsExport;

use crate::matrix::{
    AcceptanceMatrix, Cell, MatrixMetric, RowRun, RunCells, records_cells, strip_dataset_prefix,
};
use crate::server::{self, Weighting};
use crate::{ReportError, aiperf};

/// Which source a matrix's cells come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceChoice {
    /// The best each run offers: records, then summary, then server.
    Auto,
    /// Per-request records only (the only source that splits a mixed run).
    Records,
    /// The run-level summary only (one column per run).
    Summary,
    /// The server-metrics scrape only (one column per run).
    Server,
}

impl FromStr for SourceChoice {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(SourceChoice::Auto),
            "records" => Ok(SourceChoice::Records),
            "summary" => Ok(SourceChoice::Summary),
            "server" => Ok(SourceChoice::Server),
            _ => Err(ReportError::UnknownSource(s.to_string())),
        }
    }
}

impl fmt::Display for SourceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SourceChoice::Auto => {
                "any source (per-request records, then the run summary, then the server scrape)"
            }
            SourceChoice::Records => "the per-request records",
            SourceChoice::Summary => "the run summary",
            SourceChoice::Server => "the server-metrics scrape",
        })
    }
}

/// The source a run's cells actually came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedSource {
    /// Per-request records.
    Records,
    /// The run summary.
    Summary,
    /// The server scrape, with how its number is weighted.
    Server(Weighting),
    /// Nothing usable.
    None,
}

impl fmt::Display for ResolvedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolvedSource::Records => f.write_str("records"),
            ResolvedSource::Summary => f.write_str("summary"),
            ResolvedSource::Server(weighting) => write!(f, "server ({weighting})"),
            ResolvedSource::None => f.write_str("no source"),
        }
    }
}

/// Which tool wrote a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFormat {
    /// speedbench (`records.parquet`).
    Speedbench,
    /// AIPerf (`profile_export_aiperf.json`).
    Aiperf,
}

/// Run-level numbers from a run's summary file.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunSummary {
    /// Token-weighted acceptance length.
    pub accept_length: Option<f64>,
    /// Overall draft acceptance rate, as a fraction.
    pub accept_rate: Option<f64>,
    /// Output-token throughput, tokens/s.
    pub output_token_throughput: Option<f64>,
}

/// How a run ended, as far as its directory tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Every planned request was sent (`run.json` says `completed`; also
    /// assumed for files written before the outcome was recorded).
    Completed,
    /// A process still holds the run's lock: the run is in progress.
    Running,
    /// Stopped by a signal before the planned work was done (speedbench's
    /// `interrupted`, AIPerf's `was_cancelled`).
    Interrupted,
    /// The run itself failed (no request succeeded, the error rate passed
    /// its limit, or a file could not be written).
    Failed,
    /// `run.json` says `running` but no process holds the run's lock: the
    /// process died (SIGKILL, out of memory, a full disk).
    Died,
    /// The records were never closed and renamed (only
    /// `records.parquet.partial` exists), or AIPerf says the run is not
    /// complete.
    Unfinished,
}

impl RunStatus {
    /// The name printed in the `Status` column and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
            RunStatus::Died => "died",
            RunStatus::Unfinished => "unfinished",
        }
    }

    /// True only for [`RunStatus::Completed`].
    pub fn is_complete(self) -> bool {
        self == RunStatus::Completed
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Request counts of a run's measured (non-warmup) records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunCounts {
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests that were sent and failed.
    pub failed: u64,
    /// Turns never sent because an earlier turn of their conversation failed.
    pub skipped: u64,
}

impl RunCounts {
    /// Counts the non-warmup records.
    pub fn of(records: &[RequestRecord]) -> RunCounts {
        let mut counts = RunCounts::default();
        for r in records.iter().filter(|r| !r.warmup) {
            match r.error_kind {
                None => counts.succeeded += 1,
                Some(ErrorKind::Skipped) => counts.skipped += 1,
                Some(_) => counts.failed += 1,
            }
        }
        counts
    }
}

/// Everything a report can use from one run directory.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The directory.
    pub dir: PathBuf,
    /// Who wrote it.
    pub format: RunFormat,
    /// Row label: the model when loaded; [`assign_labels`] makes it unique
    /// across the runs of one report.
    pub label: String,
    /// The model the run measured (`label` before any disambiguation).
    pub model: String,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run counts as incomplete, in words (`None` when complete).
    pub status_reason: Option<String>,
    /// True when the run is a SPEED-Bench (or `spec_al_*`) run whose
    /// columns are categories. False for an AIPerf run of another dataset
    /// (`single_turn`, synthetic): its row is kept, out of `Overall`.
    pub speed_bench: bool,
    /// Dataset name (e.g. `speed_bench_coding`, or an input file stem).
    pub dataset: String,
    /// Per-request records, when the run has them.
    pub records: Option<Vec<RequestRecord>>,
    /// Run-level summary, when the run has one.
    pub summary: Option<RunSummary>,
    /// The server-metrics export, when the run has one (speedbench's or
    /// AIPerf's layout, read typed).
    pub server: Option<ServerMetricsExport>,
    /// Things worth telling the user (skipped lines and the like).
    pub warnings: Vec<String>,
}

fn is_run_dir(dir: &Path) -> bool {
    dir.join(RECORDS_FILE_NAME).is_file()
        || dir.join(PARTIAL_RECORDS_FILE_NAME).is_file()
        || dir.join(aiperf::PROFILE_JSON).is_file()
}

/// Run directories among `paths`: each path that is one, else its immediate
/// children that are (in name order). Errors when a path is not a directory
/// or nothing is found.
pub fn find_run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReportError> {
    let mut dirs = Vec::new();
    for path in paths {
        if !path.is_dir() {
            return Err(ReportError::NotADirectory(path.clone()));
        }
        if is_run_dir(path) {
            dirs.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        let mut children: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_run_dir(p))
            .collect();
        children.sort();
        dirs.extend(children);
    }
    if dirs.is_empty() {
        return Err(ReportError::NoRuns {
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(dirs)
}

fn read_json(path: &Path) -> Result<Value, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ReportError::Artifact {
        path: path.to_path_buf(),
        line: Some(e.line()),
        message: format!("not valid JSON: {e}"),
    })
}

fn optional_json(path: &Path) -> Result<Option<Value>, ReportError> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

/// Loads one run directory of either format, every record column included.
pub fn load_run(dir: &Path) -> Result<RunData, ReportError> {
    load_run_for(dir, None)
}

/// Record columns a matrix of `metric` reads: the grouping keys (category,
/// dataset, warmup, error kind, model) and the values it needs.
fn columns_for(metric: MatrixMetric) -> &'static [&'static str] {
    use speedbench_record::columns::*;
    const ACCEPTANCE: [&str; 10] = [
        CATEGORY,
        DATASET,
        WARMUP,
        ERROR_KIND,
        MODEL,
        SPEC_SOURCE,
        SPEC_ACCEPTED_DRAFT_TOKENS,
        SPEC_PROPOSED_DRAFT_TOKENS,
        SPEC_VERIFY_STEPS,
        // llama.cpp requests that drafted nothing count their target passes.
        TIMINGS_PREDICTED_N,
    ];
    const LATENCY: [&str; 6] = [CATEGORY, DATASET, WARMUP, ERROR_KIND, MODEL, E2E_LATENCY_NS];
    const DECODE: [&str; 9] = [
        CATEGORY,
        DATASET,
        WARMUP,
        ERROR_KIND,
        MODEL,
        E2E_LATENCY_NS,
        TTFT_NS,
        COMPLETION_TOKENS,
        TIMINGS_PREDICTED_PER_SECOND,
    ];
    const THROUGHPUT: [&str; 8] = [
        CATEGORY,
        DATASET,
        WARMUP,
        ERROR_KIND,
        MODEL,
        START_TIME,
        END_TIME,
        COMPLETION_TOKENS,
    ];
    match metric {
        MatrixMetric::AcceptLength | MatrixMetric::AcceptRate => &ACCEPTANCE,
        MatrixMetric::Latency => &LATENCY,
        MatrixMetric::DecodeTps => &DECODE,
        MatrixMetric::Throughput => &THROUGHPUT,
    }
}

/// Loads one run directory, decoding only the record columns `metric`
/// needs (all of them for `None`): a million-row matrix then skips the
/// output text and latency lists it never reads.
pub fn load_run_for(dir: &Path, metric: Option<MatrixMetric>) -> Result<RunData, ReportError> {
    if !dir.is_dir() {
        return Err(ReportError::NotADirectory(dir.to_path_buf()));
    }
    if !is_run_dir(dir) {
        return Err(ReportError::NotARunDir(dir.to_path_buf()));
    }
    let server_path = dir.join(SERVER_METRICS_FILE_NAME);
    let server = if server_path.is_file() {
        Some(ServerMetricsExport::read(&server_path)?)
    } else {
        None
    };
    let closed = dir.join(RECORDS_FILE_NAME);
    let partial = dir.join(PARTIAL_RECORDS_FILE_NAME);
    if closed.is_file() || partial.is_file() {
        let only_partial = !closed.is_file();
        let records_path = if only_partial { &partial } else { &closed };
        let mut warnings = Vec::new();
        let file = match read_records_file_with(records_path, metric.map(columns_for)) {
            Ok(file) => Some(file),
            // A run killed mid-write leaves a file without its Parquet
            // footer: the run is still shown, with no readable records.
            Err(e) if only_partial => {
                warnings.push(format!(
                    "{}: no readable records ({e}); the run's process stopped before closing the file",
                    records_path.display()
                ));
                None
            }
            Err(e) => return Err(e.into()),
        };
        let run_json = read_manifest(&dir.join(RunManifest::FILE_NAME))?;
        let summary_value = optional_json(&dir.join(SUMMARY_FILE_NAME))?;
        let summary_outcome = summary_value
            .as_ref()
            .and_then(|v| v.get("outcome"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let summary = match summary_value {
            None => None,
            Some(v) => {
                let metrics: RunMetrics =
                    serde_json::from_value(v).map_err(|e| ReportError::Artifact {
                        path: dir.join(SUMMARY_FILE_NAME),
                        line: None,
                        message: format!("not a speedbench run summary: {e}"),
                    })?;
                Some(RunSummary {
                    accept_length: metrics.spec_decode.token_weighted_acceptance_length(),
                    accept_rate: metrics
                        .spec_decode
                        .overall_draft_acceptance_rate_pct()
                        .map(|p| p / 100.0),
                    output_token_throughput: metrics.output_token_throughput,
                })
            }
        };
        let (footer, records) = match file {
            Some(f) => (f.manifest, Some(f.records)),
            None => (None, None),
        };
        // run.json is rewritten as the run goes; the footer copy is written
        // once, at close. The newest word wins.
        let manifest = run_json.or(footer).unwrap_or_default();
        let recorded = Some(manifest.outcome.clone())
            .filter(|o| !o.is_empty())
            .or(summary_outcome);
        let (status, status_reason) =
            speedbench_status(dir, recorded.as_deref(), only_partial, records.is_some());
        let first = records.as_ref().and_then(|r| r.first());
        let model = Some(manifest.model)
            .filter(|m| !m.is_empty())
            .or_else(|| first.map(|r| r.model.clone()))
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| dir_name(dir));
        let dataset = Some(manifest.dataset)
            .filter(|d| !d.is_empty())
            .or_else(|| first.map(|r| r.dataset.clone()))
            .unwrap_or_default();
        return Ok(RunData {
            dir: dir.to_path_buf(),
            format: RunFormat::Speedbench,
            label: model.clone(),
            model,
            status,
            status_reason,
            speed_bench: true,
            dataset,
            records,
            summary,
            server,
            warnings,
        });
    }
    let profile_path = dir.join(aiperf::PROFILE_JSON);
    let profile = read_json(&profile_path)?;
    let label = aiperf::model(&profile).unwrap_or_else(|| "unknown".into());
    let dataset = aiperf::dataset(&profile).unwrap_or_default();
    let mut warnings = Vec::new();
    let records_path = dir.join(aiperf::PROFILE_JSONL);
    let records = if records_path.is_file() {
        let (records, skipped) = aiperf::read_records(&records_path, &label, &dataset)?;
        if skipped > 0 {
            warnings.push(format!(
                "{}: skipped {skipped} unreadable line(s)",
                records_path.display()
            ));
        }
        Some(records)
    } else {
        None
    };
    let summary = RunSummary {
        accept_length: aiperf::stat_avg(&profile, "spec_decode_token_weighted_acceptance_length"),
        accept_rate: aiperf::stat_avg(&profile, "spec_decode_overall_draft_acceptance_rate")
            .map(|p| p / 100.0),
        output_token_throughput: aiperf::stat_avg(&profile, "output_token_throughput"),
    };
    let (status, status_reason) = aiperf_status(&profile);
    let speed_bench = aiperf::is_speed_bench_dataset(&dataset);
    Ok(RunData {
        dir: dir.to_path_buf(),
        format: RunFormat::Aiperf,
        label: label.clone(),
        model: label,
        status,
        status_reason,
        speed_bench,
        dataset,
        records,
        summary: Some(summary),
        server,
        warnings,
    })
}

/// The last component of `dir` (the whole path when it has none).
fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// `run.json`, when present.
fn read_manifest(path: &Path) -> Result<Option<RunManifest>, ReportError> {
    let Some(value) = optional_json(path)? else {
        return Ok(None);
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| ReportError::Artifact {
            path: path.to_path_buf(),
            line: None,
            message: format!("not a speedbench run manifest: {e}"),
        })
}

/// A speedbench run's status from its recorded outcome, whether a process
/// still holds its lock, and whether its records were closed.
fn speedbench_status(
    dir: &Path,
    recorded: Option<&str>,
    only_partial: bool,
    readable: bool,
) -> (RunStatus, Option<String>) {
    let status = match recorded {
        Some(outcome::RUNNING) if run_is_live(dir) => RunStatus::Running,
        Some(outcome::RUNNING) => RunStatus::Died,
        Some(outcome::INTERRUPTED) => RunStatus::Interrupted,
        Some(outcome::FAILED) => RunStatus::Failed,
        _ if only_partial => RunStatus::Unfinished,
        _ => RunStatus::Completed,
    };
    let mut reason = match status {
        RunStatus::Completed => None,
        RunStatus::Running => Some("still running (a process holds its lock)".to_string()),
        RunStatus::Interrupted => Some("interrupted before every planned request was sent".into()),
        RunStatus::Failed => Some(format!(
            "the run failed ({} says failed)",
            RunManifest::FILE_NAME
        )),
        RunStatus::Died => Some(format!(
            "{} says running but no process holds the run's lock: the process died \
             (killed, out of memory or out of disk)",
            RunManifest::FILE_NAME
        )),
        RunStatus::Unfinished => Some("its records were never closed".into()),
    };
    if only_partial {
        let what = if readable {
            format!("only {PARTIAL_RECORDS_FILE_NAME} (records of the requests that finished)")
        } else {
            format!("only an unreadable {PARTIAL_RECORDS_FILE_NAME}")
        };
        reason = Some(match reason {
            Some(r) => format!("{r}; {what}"),
            None => what,
        });
    }
    (status, reason)
}

/// An AIPerf run's status from `was_cancelled` / `is_complete`.
fn aiperf_status(profile: &Value) -> (RunStatus, Option<String>) {
    if profile.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        return (
            RunStatus::Interrupted,
            Some(format!("{} says was_cancelled: true", aiperf::PROFILE_JSON)),
        );
    }
    if profile.get("is_complete").and_then(Value::as_bool) == Some(false) {
        return (
            RunStatus::Unfinished,
            Some(format!("{} says is_complete: false", aiperf::PROFILE_JSON)),
        );
    }
    (RunStatus::Completed, None)
}

/// Makes the runs' labels unique: `overrides` (`(dir, name)` pairs, from
/// `--label DIR=NAME`) first, then the model name, and where two runs'
/// labels collide, the model followed by the run directory's name
/// (`model (dir)`), or its whole path if the names collide too.
///
/// An override naming a directory that is not one of the runs, or two runs
/// given the same name, is an error. A directory matches when it is the
/// same directory (after resolving `..` and links) or when `dir` is just
/// its last component.
pub fn assign_labels(
    runs: &mut [RunData],
    overrides: &[(PathBuf, String)],
) -> Result<(), ReportError> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut fixed: Vec<Option<String>> = vec![None; runs.len()];
    for (dir, name) in overrides {
        let wanted = canonical(dir);
        let matches: Vec<usize> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                canonical(&r.dir) == wanted
                    || (dir.components().count() == 1 && r.dir.file_name() == Some(dir.as_os_str()))
            })
            .map(|(i, _)| i)
            .collect();
        match matches.as_slice() {
            [] => {
                return Err(ReportError::Label(format!(
                    "label {}={name}: {} is not one of the run directories ({})",
                    dir.display(),
                    dir.display(),
                    runs.iter()
                        .map(|r| r.dir.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            [i] => fixed[*i] = Some(name.clone()),
            _ => {
                return Err(ReportError::Label(format!(
                    "label {}={name}: {} names {} run directories; give its path",
                    dir.display(),
                    dir.display(),
                    matches.len()
                )));
            }
        }
    }
    let base: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .map(|(r, f)| f.clone().unwrap_or_else(|| r.model.clone()))
        .collect();
    let count = |labels: &[String], l: &str| labels.iter().filter(|x| x.as_str() == l).count();
    let with_name: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .zip(&base)
        .map(|((r, f), b)| match f {
            Some(name) => name.clone(),
            None if count(&base, b) > 1 => format!("{} ({})", r.model, dir_name(&r.dir)),
            None => b.clone(),
        })
        .collect();
    let labels: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .zip(&with_name)
        .map(|((r, f), l)| match f {
            None if count(&with_name, l) > 1 => format!("{} ({})", r.model, r.dir.display()),
            _ => l.clone(),
        })
        .collect();
    for (i, l) in labels.iter().enumerate() {
        if let Some(j) = labels[..i].iter().position(|x| x == l) {
            return Err(ReportError::Label(format!(
                "{} and {} would both be labelled {l:?}; give one of them another label",
                runs[j].dir.display(),
                runs[i].dir.display()
            )));
        }
    }
    for (run, label) in runs.iter_mut().zip(labels) {
        run.label = label;
    }
    Ok(())
}

impl RunData {
    /// The run's single column key for run-level sources: its only record
    /// category, else its dataset name without a `speed_bench_` /
    /// `spec_al_` prefix.
    pub fn run_column(&self) -> Option<String> {
        let from_records = self.records.as_ref().and_then(|records| {
            let mut cats = records
                .iter()
                .filter(|r| !r.warmup)
                .filter_map(|r| r.category.as_deref())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter();
            match (cats.next(), cats.next()) {
                (Some(only), None) => Some(only.to_string()),
                _ => None,
            }
        });
        from_records.or_else(|| {
            let name = strip_dataset_prefix(&self.dataset);
            (!name.is_empty()).then(|| name.to_string())
        })
    }

    /// Measured requests by result, when the run has per-request records.
    pub fn counts(&self) -> Option<RunCounts> {
        self.records.as_deref().map(RunCounts::of)
    }

    /// Number of distinct categories among the run's measured records.
    pub fn category_count(&self) -> usize {
        self.records.as_ref().map_or(0, |records| {
            records
                .iter()
                .filter(|r| !r.warmup)
                .filter_map(|r| r.category.as_deref())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        })
    }

    fn single(&self, value: Option<f64>, time_averaged: bool) -> RunCells {
        match (self.run_column(), value) {
            (Some(column), Some(v)) => RunCells::from([(
                column,
                Cell {
                    value: Some(v),
                    requests: 0,
                    time_averaged,
                },
            )]),
            _ => RunCells::new(),
        }
    }

    /// The run's cells for `metric` from `choice`, and the source used.
    ///
    /// `Auto` tries records, then summary, then server, taking the first
    /// that yields a value. Throughput, decode speed and latency come from
    /// records (or, for throughput, the summary): the server scrape has
    /// no per-run figure for them here.
    pub fn cells(&self, metric: MatrixMetric, choice: SourceChoice) -> (RunCells, ResolvedSource) {
        let order: &[SourceChoice] = match choice {
            // AIPerf's own figure (output_token_throughput, over its
            // benchmark duration) first, so the report prints the number
            // AIPerf printed.
            SourceChoice::Auto
                if self.format == RunFormat::Aiperf && metric == MatrixMetric::Throughput =>
            {
                &[SourceChoice::Summary, SourceChoice::Records]
            }
            SourceChoice::Auto => &[
                SourceChoice::Records,
                SourceChoice::Summary,
                SourceChoice::Server,
            ],
            SourceChoice::Records => &[SourceChoice::Records],
            SourceChoice::Summary => &[SourceChoice::Summary],
            SourceChoice::Server => &[SourceChoice::Server],
        };
        for source in order {
            let (cells, resolved) = match source {
                SourceChoice::Records => match &self.records {
                    Some(records) => (records_cells(metric, records), ResolvedSource::Records),
                    None => continue,
                },
                SourceChoice::Summary => {
                    let Some(summary) = &self.summary else {
                        continue;
                    };
                    let value = match metric {
                        MatrixMetric::AcceptLength => summary.accept_length,
                        MatrixMetric::AcceptRate => summary.accept_rate,
                        MatrixMetric::Throughput => summary.output_token_throughput,
                        MatrixMetric::DecodeTps | MatrixMetric::Latency => None,
                    };
                    (self.single(value, false), ResolvedSource::Summary)
                }
                SourceChoice::Server => {
                    let Some(export) = &self.server else { continue };
                    match server::figure(export, metric) {
                        Some((v, w)) => (
                            self.single(Some(v), w == Weighting::TimeAveragedGauge),
                            ResolvedSource::Server(w),
                        ),
                        None => continue,
                    }
                }
                SourceChoice::Auto => continue,
            };
            if cells.values().any(|c| c.value.is_some()) {
                return (cells, resolved);
            }
        }
        (RunCells::new(), ResolvedSource::None)
    }
}

/// One report's matrix over loaded runs, and each run's resolved source
/// (in the order of `runs`).
///
/// One row per run, labelled by [`RunData::label`] (make labels unique
/// with [`assign_labels`] first); each row carries its run's directory,
/// status and request counts. A run that is not a SPEED-Bench run (an
/// AIPerf run of another dataset) keeps its row and cells but gets no
/// `Overall`, with the reason in [`RowRun::overall_excluded`].
pub fn build_matrix(
    metric: MatrixMetric,
    choice: SourceChoice,
    runs: &[RunData],
) -> (AcceptanceMatrix, Vec<ResolvedSource>) {
    let mut sources = Vec::with_capacity(runs.len());
    let mut rows = Vec::with_capacity(runs.len());
    for run in runs {
        let (cells, source) = run.cells(metric, choice);
        sources.push(source);
        rows.push((run.label.clone(), cells));
    }
    let mut matrix = AcceptanceMatrix::from_cells(metric, rows);
    for row in &mut matrix.rows {
        let Some(run) = runs.iter().find(|r| r.label == row.label) else {
            continue;
        };
        let overall_excluded = (!run.speed_bench).then(|| {
            format!(
                "{} is an AIPerf run of {}, not a SPEED-Bench dataset, so its column is not a \
                 SPEED-Bench category and is not averaged (AIPerf's speed-bench-report skips such runs)",
                run.dir.display(),
                if run.dataset.is_empty() {
                    "an unnamed (synthetic) dataset".to_string()
                } else {
                    format!("dataset {:?}", run.dataset)
                }
            )
        });
        if overall_excluded.is_some() {
            row.overall = None;
        }
        row.run = Some(RowRun {
            dir: run.dir.clone(),
            status: run.status,
            status_reason: run.status_reason.clone(),
            counts: run.counts(),
            overall_excluded,
        });
    }
    (matrix, sources)
}
