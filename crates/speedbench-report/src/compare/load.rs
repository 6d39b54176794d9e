//! One side of a comparison read from disk: a run directory (speedbench's
//! or AIPerf's) or a speed_bench.py `--output` JSON file.

use std::path::{Path, PathBuf};

use speedbench_metrics::SpeedBenchPyOutput;
use speedbench_record::{
    PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RequestRecord, RunManifest, SUMMARY_FILE_NAME,
};
use speedbench_runs::{
    AIPERF_PROFILE_FILE_NAME, AIPERF_RECORDS_FILE_NAME, RunFormat, RunStatus, RunsError,
};

use crate::ReportError;

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
    /// For a side of repeated runs (`--num-profile-runs`), each run's
    /// records as a range of [`CompareRun::records`], in order; empty for
    /// one run.
    pub repetitions: Vec<std::ops::Range<usize>>,
}

impl CompareRun {
    /// Why this run holds fewer requests than it planned, when it does:
    /// interrupted, failed, killed (`running` with nobody holding its lock),
    /// or still running.
    pub fn incomplete(&self) -> Option<String> {
        let m = self.manifest.as_ref()?;
        // Manifests written before outcomes were recorded read as completed.
        match m.status {
            RunStatus::Completed => None,
            RunStatus::Interrupted => Some("was interrupted before it finished".to_string()),
            RunStatus::Failed => Some("failed (run.json outcome `failed`)".to_string()),
            RunStatus::Running if self.live => Some("is still running".to_string()),
            RunStatus::Running | RunStatus::Died => Some(
                "was killed before it finished (run.json says `running`, and no process \
                 holds its lock)"
                    .to_string(),
            ),
            RunStatus::Unfinished => Some(format!("ended with outcome {:?}", m.status.as_str())),
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
/// [`CompareRun::speed_bench_py`] set. A repeated run's directory
/// (`aggregate.json`) gives the records of its completed runs pooled, each
/// run's range in [`CompareRun::repetitions`].
pub fn load_compare_run(dir: &Path, role: &str) -> Result<CompareRun, ReportError> {
    if let Some(runs) = speedbench_runs::RepeatedRuns::read(dir)? {
        return load_repeated(dir, role, &runs);
    }
    if !dir.exists() {
        return Err(ReportError::Compare(format!(
            "the {role} run directory {} does not exist",
            dir.display()
        )));
    }
    if dir.is_file() {
        return load_speed_bench_py_file(dir, role);
    }
    if !dir.is_dir() {
        return Err(RunsError::NotADirectory(dir.to_path_buf()).into());
    }
    let records_path = [RECORDS_FILE_NAME, PARTIAL_RECORDS_FILE_NAME]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.is_file());
    if records_path.is_none() {
        refuse_without_records(dir, role)?;
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
        repetitions: Vec::new(),
    })
}

/// A speed_bench.py `--output` JSON file as one side.
fn load_speed_bench_py_file(path: &Path, role: &str) -> Result<CompareRun, ReportError> {
    let is_json = path
        .extension()
        .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case("json"));
    if !is_json {
        return Err(ReportError::Compare(format!(
            "the {role} path {} is a file but not a .json file: give a run directory, or \
             a speed_bench.py --output .json file",
            path.display()
        )));
    }
    let run = speedbench_runs::load_run(path)?;
    debug_assert_eq!(run.format, RunFormat::SpeedBenchPy);
    Ok(CompareRun {
        dir: path.to_path_buf(),
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
        repetitions: Vec::new(),
    })
}

/// A directory without a records file: a speedbench run that kept only
/// its summary (said with why, from its export level), or no run at all.
/// An AIPerf run passes (its records are its own file).
fn refuse_without_records(dir: &Path, role: &str) -> Result<(), ReportError> {
    if dir.join(RunManifest::FILE_NAME).is_file() && dir.join(SUMMARY_FILE_NAME).is_file() {
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
    if !dir.join(AIPERF_PROFILE_FILE_NAME).is_file() {
        return Err(ReportError::Compare(format!(
            "the {role} run directory {}: it holds no run ({RECORDS_FILE_NAME} of speedbench, \
             or {AIPERF_PROFILE_FILE_NAME} of AIPerf)",
            dir.display(),
        )));
    }
    Ok(())
}

/// The completed runs of a repeated run, pooled.
fn load_repeated(
    dir: &Path,
    role: &str,
    runs: &speedbench_runs::RepeatedRuns,
) -> Result<CompareRun, ReportError> {
    let mut pooled: Option<CompareRun> = None;
    let mut repetitions = Vec::new();
    for run_dir in runs.kept_dirs(dir) {
        let run = load_compare_run(&run_dir, role)?;
        let all = pooled.get_or_insert_with(|| CompareRun {
            dir: dir.to_path_buf(),
            records: Vec::new(),
            ..run.clone()
        });
        let start = all.records.len();
        all.records.extend(run.records);
        repetitions.push(start..all.records.len());
    }
    let mut side = pooled.ok_or_else(|| {
        ReportError::Compare(format!(
            "the {role} {} is a repeated run none of whose runs completed",
            dir.display()
        ))
    })?;
    side.repetitions = repetitions;
    Ok(side)
}

/// The GPU figures a run directory's `summary.json` holds
/// (`--gpu-telemetry`); `None` without them.
pub fn run_gpu_telemetry(dir: &Path) -> Option<speedbench_scrape::GpuTelemetry> {
    summary_field(dir, "gpu_telemetry")
}

/// One field of a run directory's `summary.json`, typed; `None` when the
/// file, the field or its shape is missing.
pub fn summary_field<T: serde::de::DeserializeOwned>(dir: &Path, key: &str) -> Option<T> {
    let text = std::fs::read(dir.join(speedbench_record::SUMMARY_FILE_NAME)).ok()?;
    let summary: serde_json::Value = serde_json::from_slice(&text).ok()?;
    serde_json::from_value(summary.get(key)?.clone()).ok()
}
