//! Finding run directories and loading them.

use std::path::{Path, PathBuf};

use serde_json::Value;
use speedbench_metrics::{RecordsDigest, RunMetrics};
use speedbench_record::{
    PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RecordError, RequestRecord, RunManifest,
    SERVER_METRICS_FILE_NAME, SUMMARY_FILE_NAME, read_records_file_with, visit_records,
};
use speedbench_scrape::ServerMetricsExport;

use crate::run_data::{RunData, RunFormat, SummaryFigures, read_json};
use crate::status::{aiperf_status, speedbench_status};
use crate::{RunsError, aiperf, speed_bench_py};
use speedbench_record::RunStatus;

fn is_run_dir(dir: &Path) -> bool {
    dir.join(RECORDS_FILE_NAME).is_file()
        || dir.join(PARTIAL_RECORDS_FILE_NAME).is_file()
        || dir.join(aiperf::PROFILE_JSON).is_file()
        || is_summary_only_run(dir)
}

/// A speedbench run without a records file but with `run.json` and
/// `summary.json`: what `--export-level summary` leaves.
pub(crate) fn is_summary_only_run(dir: &Path) -> bool {
    !dir.join(RECORDS_FILE_NAME).is_file()
        && !dir.join(PARTIAL_RECORDS_FILE_NAME).is_file()
        && dir.join(RunManifest::FILE_NAME).is_file()
        && dir.join(SUMMARY_FILE_NAME).is_file()
}

/// The directory of a repeated run's runs under its own
/// (`profile_runs/run_0001`, ... as AIPerf lays out `--num-profile-runs`).
pub const REPEATED_RUNS_DIR: &str = "profile_runs";

/// Runs among `paths`: each path that is a run directory or a `.json`
/// file, else its immediate children that are run directories or
/// speed_bench.py files (in name order), and the runs of a repeated run
/// (its [`REPEATED_RUNS_DIR`]). Errors when a path is missing, is
/// a file other than `.json`, or nothing is found.
///
/// A path is a run directory when it holds `records.parquet`,
/// `records.parquet.partial`, `run.json` with `summary.json` (a run
/// profiled at `--export-level summary`), or AIPerf's
/// `profile_export_aiperf.json`. A
/// `.json` file given itself is taken as a speed_bench.py `--output` file
/// (loading it says what is wrong if it is not one). Among a directory's
/// children, a `.json` file is taken only when it is recognisably that
/// layout (a top-level object with both `summary` and `results`); other
/// JSON files there are not runs and are passed over.
pub fn find_run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, RunsError> {
    let mut dirs = Vec::new();
    for path in paths {
        if !path.exists() {
            return Err(RunsError::Missing(path.clone()));
        }
        if path.is_file() && speed_bench_py::has_json_extension(path) {
            dirs.push(path.clone());
            continue;
        }
        if !path.is_dir() {
            return Err(RunsError::NotADirectory(path.clone()));
        }
        if is_run_dir(path) {
            dirs.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| RunsError::Io {
            path: path.clone(),
            source,
        })?;
        let mut children: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_run_dir(p) || speed_bench_py::looks_like_speed_bench_py(p))
            .collect();
        // Repeated runs (`--num-profile-runs`) sit one level further down.
        if let Ok(repeated) = std::fs::read_dir(path.join(REPEATED_RUNS_DIR)) {
            children.extend(
                repeated
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| is_run_dir(p)),
            );
        }
        children.sort();
        dirs.extend(children);
    }
    if dirs.is_empty() {
        return Err(RunsError::NoRuns {
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(dirs)
}

/// The records of a killed run whose partial file has no footer (`e`):
/// from its crash journal when it has one, with a warning saying so, and
/// how many were recovered; else a warning that none can be read.
fn from_crash_journal(
    dir: &Path,
    records_path: &Path,
    e: &speedbench_record::RecordError,
    warnings: &mut Vec<String>,
) -> (Option<ReadRecords>, Option<usize>) {
    match read_crash_journal(dir) {
        Ok(Some(journal)) => {
            warnings.push(format!(
                "{}: no Parquet footer (the run's process was killed); {} records read \
                 from its crash journal{} (`speedbench recover {}` turns them into {RECORDS_FILE_NAME})",
                records_path.display(),
                journal.records.len(),
                if journal.torn { ", up to a batch torn by the kill" } else { "" },
                dir.display()
            ));
            let n = journal.records.len();
            (Some(ReadRecords::of(None, journal.records)), Some(n))
        }
        journal => {
            let journal = match journal {
                Err(j) => format!("; its crash journal cannot be read either: {j}"),
                Ok(_) => String::new(),
            };
            warnings.push(format!(
                "{}: no readable records ({e}); the run's process stopped before closing the file{journal}",
                records_path.display()
            ));
            (None, None)
        }
    }
}

/// The records of a run directory's crash journal, when it has one.
pub(crate) fn read_crash_journal(
    dir: &Path,
) -> Result<Option<speedbench_record::JournalRecords>, speedbench_record::RecordError> {
    let path = dir.join(speedbench_record::JOURNAL_FILE_NAME);
    if !path.is_file() {
        return Ok(None);
    }
    speedbench_record::read_journal(&path).map(Some)
}

fn optional_json(path: &Path) -> Result<Option<Value>, RunsError> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

/// Loads one run directory of either format, or a speed_bench.py
/// `--output` file, every record column included.
pub fn load_run(dir: &Path) -> Result<RunData, RunsError> {
    load_run_with(dir, RecordsRead::All)
}

/// How much of a run's records [`load_run_with`] reads and keeps (column
/// names from [`speedbench_record::columns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordsRead<'a> {
    /// Every record, every column.
    All,
    /// Every record, decoding only these columns: the other fields keep
    /// their defaults, so a million-row matrix skips the output text and
    /// latency lists it never reads.
    Columns(&'a [&'a str]),
    /// No record kept: the file is read once with these columns and folded
    /// into [`RunData::digest`], all a report's acceptance matrix needs
    /// (a million records would take about 650 MB).
    Digest(&'a [&'a str]),
}

/// Loads one run directory, reading its records as `read` says. A `.json`
/// file is read as a speed_bench.py `--output` file
/// ([`RunFormat::SpeedBenchPy`]; an error names the file and the field at
/// fault).
pub fn load_run_with(dir: &Path, read: RecordsRead<'_>) -> Result<RunData, RunsError> {
    if !dir.exists() {
        return Err(RunsError::Missing(dir.to_path_buf()));
    }
    if dir.is_file() && speed_bench_py::has_json_extension(dir) {
        return speed_bench_py::load(dir);
    }
    if !dir.is_dir() {
        return Err(RunsError::NotADirectory(dir.to_path_buf()));
    }
    if !is_run_dir(dir) {
        return Err(RunsError::NotARunDir(dir.to_path_buf()));
    }
    // An unreadable server export costs the run its scrape figures only:
    // its records and summary are still reported, with the file named.
    let (server, server_warning) = read_server_export(dir);
    let mut warnings: Vec<String> = server_warning.into_iter().collect();
    let is_speedbench = dir.join(RECORDS_FILE_NAME).is_file()
        || dir.join(PARTIAL_RECORDS_FILE_NAME).is_file()
        || is_summary_only_run(dir);
    let mut run = if is_speedbench {
        load_speedbench_run(dir, read, &mut warnings)?
    } else {
        load_aiperf_run(dir, &mut warnings)?
    };
    run.server = server;
    run.warnings = warnings;
    Ok(run)
}

/// `server_metrics_export.json`, when there is one and it reads; the
/// warning when it does not.
fn read_server_export(dir: &Path) -> (Option<ServerMetricsExport>, Option<String>) {
    let path = dir.join(SERVER_METRICS_FILE_NAME);
    if !path.is_file() {
        return (None, None);
    }
    match ServerMetricsExport::read(&path) {
        Ok(export) => (Some(export), None),
        Err(e) => (
            None,
            Some(format!(
                "{e}; the run is reported without its server metrics"
            )),
        ),
    }
}

/// A records file as [`load_run_with`] read it.
struct ReadRecords {
    /// The manifest in the file's footer.
    manifest: Option<RunManifest>,
    /// The records, unless only their digest was asked for.
    records: Option<Vec<RequestRecord>>,
    /// Their digest, when they were not kept.
    digest: Option<RecordsDigest>,
    /// The first record's model and dataset, for a run without a manifest.
    first: Option<(String, String)>,
}

impl ReadRecords {
    fn read(path: &Path, read: RecordsRead<'_>) -> Result<ReadRecords, RecordError> {
        let columns = match read {
            RecordsRead::All => None,
            RecordsRead::Columns(columns) => Some(columns),
            RecordsRead::Digest(columns) => {
                let mut digest = RecordsDigest::default();
                let mut first = None;
                let visited = visit_records(path, Some(columns), |r| {
                    if first.is_none() {
                        first = Some((r.model.clone(), r.dataset.clone()));
                    }
                    digest.add(r);
                })?;
                return Ok(ReadRecords {
                    manifest: visited.manifest,
                    records: None,
                    digest: Some(digest),
                    first,
                });
            }
        };
        let file = read_records_file_with(path, columns)?;
        Ok(ReadRecords::of(file.manifest, file.records))
    }

    /// Records held (their digest is folded from them when asked for).
    fn of(manifest: Option<RunManifest>, records: Vec<RequestRecord>) -> ReadRecords {
        ReadRecords {
            manifest,
            digest: None,
            first: records
                .first()
                .map(|r| (r.model.clone(), r.dataset.clone())),
            records: Some(records),
        }
    }
}

/// A speedbench run directory: its records (or, killed mid-write, its
/// crash journal), `run.json`, `summary.json`, and how it ended.
fn load_speedbench_run(
    dir: &Path,
    read: RecordsRead<'_>,
    warnings: &mut Vec<String>,
) -> Result<RunData, RunsError> {
    let closed = dir.join(RECORDS_FILE_NAME);
    let partial = dir.join(PARTIAL_RECORDS_FILE_NAME);
    let summary_only = is_summary_only_run(dir);
    let only_partial = !closed.is_file() && !summary_only;
    let records_path = if only_partial { &partial } else { &closed };
    let loaded = (!summary_only).then(|| ReadRecords::read(records_path, read));
    let (file, recovered) = match loaded.transpose() {
        Ok(file) => (file, None),
        // A run killed mid-write leaves a file without its Parquet
        // footer; its crash journal holds every record it flushed.
        Err(e) if only_partial => from_crash_journal(dir, records_path, &e, warnings),
        Err(e) => return Err(e.into()),
    };
    let run_json = read_manifest(&dir.join(RunManifest::FILE_NAME))?;
    let (summary, summary_outcome) = read_summary(dir)?;
    let (footer, records, digest, first) = match file {
        Some(f) => (f.manifest, f.records, f.digest, f.first),
        None => (None, None, None, None),
    };
    // run.json is rewritten as the run goes; the footer copy is written
    // once, at close. The newest word wins.
    let manifest = run_json.or(footer);
    if summary_only {
        warnings.push(summary_only_warning(dir, manifest.as_ref()));
    }
    let recorded = manifest.as_ref().map(|m| m.status).or(summary_outcome);
    let judged = speedbench_status(
        dir,
        recorded,
        only_partial,
        records.is_some() || digest.is_some(),
    );
    let (status, status_reason) = with_recovery(judged, recovered);
    let (model, dataset) = model_and_dataset(dir, manifest.as_ref(), first);
    Ok(RunData {
        dir: dir.to_path_buf(),
        format: RunFormat::Speedbench,
        label: crate::model_name::display_model(&model),
        model,
        status,
        status_reason,
        speed_bench: true,
        dataset,
        run_group: None,
        manifest,
        records,
        digest,
        summary,
        server: None,
        speed_bench_py: None,
        warnings: Vec::new(),
    })
}

/// A killed run whose journal kept its records was interrupted: its
/// finished requests are all there (`recovered` of them).
fn with_recovery(
    (status, reason): (RunStatus, Option<String>),
    recovered: Option<usize>,
) -> (RunStatus, Option<String>) {
    match recovered {
        Some(n) if status != RunStatus::Running => (
            RunStatus::Interrupted,
            Some(format!(
                "the run's process was killed; its {n} flushed records were read from its crash journal"
            )),
        ),
        _ => (status, reason),
    }
}

/// The run's model and dataset: the manifest's, else its first record's;
/// a model named by neither is the directory's name.
fn model_and_dataset(
    dir: &Path,
    manifest: Option<&RunManifest>,
    first: Option<(String, String)>,
) -> (String, String) {
    let model = manifest
        .map(|m| m.model.clone())
        .filter(|m| !m.is_empty())
        .or_else(|| first.as_ref().map(|(model, _)| model.clone()))
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| dir_name(dir));
    let dataset = manifest
        .map(|m| m.dataset.clone())
        .filter(|d| !d.is_empty())
        .or_else(|| first.map(|(_, dataset)| dataset))
        .unwrap_or_default();
    (model, dataset)
}

/// `summary.json`'s figures and the outcome it records, when there is one.
fn read_summary(dir: &Path) -> Result<(Option<SummaryFigures>, Option<RunStatus>), RunsError> {
    let Some(v) = optional_json(&dir.join(SUMMARY_FILE_NAME))? else {
        return Ok((None, None));
    };
    let outcome = v
        .get("outcome")
        .and_then(Value::as_str)
        .and_then(|o| o.parse().ok());
    let metrics: RunMetrics = serde_json::from_value(v).map_err(|e| RunsError::Artifact {
        path: dir.join(SUMMARY_FILE_NAME),
        line: None,
        message: format!("not a speedbench run summary: {e}"),
    })?;
    let summary = SummaryFigures {
        accept_length: metrics.spec_decode.token_weighted_acceptance_length(),
        accept_rate: metrics
            .spec_decode
            .overall_draft_acceptance_rate_pct()
            .map(|p| p / 100.0),
        output_token_throughput: metrics.output_token_throughput,
    };
    Ok((Some(summary), outcome))
}

/// An AIPerf artifact directory: `profile_export_aiperf.json` and, when
/// there, its per-request `profile_export.jsonl`.
fn load_aiperf_run(dir: &Path, warnings: &mut Vec<String>) -> Result<RunData, RunsError> {
    let profile_path = dir.join(aiperf::PROFILE_JSON);
    let profile = read_json(&profile_path)?;
    let label = aiperf::model(&profile).unwrap_or_else(|| "unknown".into());
    let dataset = aiperf::dataset(&profile).unwrap_or_default();
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
    let summary = SummaryFigures {
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
        run_group: None,
        label: crate::model_name::display_model(&label),
        model: label,
        status,
        status_reason,
        speed_bench,
        dataset,
        manifest: None,
        digest: None,
        records,
        summary: Some(summary),
        server: None,
        speed_bench_py: None,
        warnings: Vec::new(),
    })
}

/// What a run without records offers, and why it has none.
fn summary_only_warning(dir: &Path, manifest: Option<&RunManifest>) -> String {
    let level = manifest
        .and_then(|m| m.config.get("export_level"))
        .and_then(Value::as_str);
    let why = match level {
        Some("summary") => "it was profiled with --export-level summary".to_string(),
        _ => format!("{RECORDS_FILE_NAME} is missing"),
    };
    format!(
        "{}: no per-request records ({why}): its figures are the run-level ones of \
         {SUMMARY_FILE_NAME} and the server scrape (one column for the whole run, no \
         per-category split, latency or decode speed)",
        dir.display()
    )
}

/// The last component of `dir` (the whole path when it has none).
pub(crate) fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| dir.display().to_string())
}

/// `run.json`, when present.
fn read_manifest(path: &Path) -> Result<Option<RunManifest>, RunsError> {
    let Some(value) = optional_json(path)? else {
        return Ok(None);
    };
    serde_json::from_value(value)
        .map(Some)
        .map_err(|e| RunsError::Artifact {
            path: path.to_path_buf(),
            line: None,
            message: format!("not a speedbench run manifest: {e}"),
        })
}

#[cfg(test)]
mod summary_only_tests {
    use super::*;

    /// `parent/name` holding the run.json of a `--export-level summary`
    /// run, and the summary.json text to put beside it (not yet written).
    fn summary_level_run(parent: &Path, name: &str) -> (PathBuf, Value) {
        let dir = parent.join(name);
        std::fs::create_dir(&dir).unwrap();
        let manifest = RunManifest {
            model: "m".into(),
            dataset: "speed_bench_coding".into(),
            status: speedbench_record::RunStatus::Completed,
            config: serde_json::json!({"export_level": "summary"}),
            ..Default::default()
        };
        std::fs::write(
            dir.join(RunManifest::FILE_NAME),
            serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
        let mut summary = serde_json::to_value(RunMetrics::from_records(&[])).unwrap();
        summary["outcome"] = "completed".into();
        (dir, summary)
    }

    #[test]
    fn a_run_with_summary_and_manifest_but_no_records_is_a_run() {
        let parent = tempfile::tempdir().unwrap();
        let (dir, summary) = summary_level_run(parent.path(), "summary-level");
        // A summary alone is not a run: run.json is what says one ran here.
        std::fs::write(parent.path().join(SUMMARY_FILE_NAME), summary.to_string()).unwrap();
        assert!(!is_run_dir(parent.path()));
        std::fs::write(dir.join(SUMMARY_FILE_NAME), summary.to_string()).unwrap();
        assert_eq!(
            find_run_dirs(&[parent.path().to_path_buf()]).unwrap(),
            std::slice::from_ref(&dir)
        );
        let run = load_run(&dir).unwrap();
        assert_eq!(
            (run.format, run.status),
            (RunFormat::Speedbench, RunStatus::Completed)
        );
        assert!(run.records.is_none() && run.summary.is_some());
        assert_eq!(run.label, "m");
        assert_eq!(run.warnings.len(), 1, "{:?}", run.warnings);
        assert!(
            run.warnings[0]
                .contains("no per-request records (it was profiled with --export-level summary)"),
            "{:?}",
            run.warnings
        );
    }

    #[test]
    fn an_unreadable_server_export_costs_only_the_scrape() {
        let parent = tempfile::tempdir().unwrap();
        let (dir, summary) = summary_level_run(parent.path(), "run");
        std::fs::write(dir.join(SUMMARY_FILE_NAME), summary.to_string()).unwrap();
        std::fs::write(dir.join(SERVER_METRICS_FILE_NAME), "{\"metrics\": 7}").unwrap();
        let run = load_run(&dir).unwrap();
        assert!(run.summary.is_some() && run.server.is_none());
        assert!(
            run.warnings
                .iter()
                .any(|w| w.contains(SERVER_METRICS_FILE_NAME)
                    && w.contains("reported without its server metrics")),
            "{:?}",
            run.warnings
        );
    }
}
