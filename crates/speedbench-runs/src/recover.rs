//! Turning a killed run's crash journal into a run like any other.

use std::path::{Path, PathBuf};

use speedbench_metrics::RunMetrics;
use speedbench_record::{
    JOURNAL_FILE_NAME, PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RecordWriter, RunManifest,
    RunStatus, SUMMARY_FILE_NAME, read_journal, run_is_live,
};

use crate::RunsError;

/// What [`recover`] made of a killed run.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The records file written.
    pub records_path: PathBuf,
    /// Records recovered: every one the run had flushed.
    pub records: usize,
    /// The journal ended inside a batch (torn by the kill); that batch's
    /// records were never complete on disk.
    pub torn: bool,
}

/// Recovers the run in `dir` whose process was killed (SIGKILL, the
/// out-of-memory killer, an abort) before it closed its records file: the
/// records of its crash journal become `records.parquet`, `run.json` and
/// `summary.json` say `interrupted`, and the footer-less partial file and
/// the journal go. Refused for a run still in progress, one that already
/// has its records file, and one without a journal.
pub fn recover(dir: &Path) -> Result<Recovered, RunsError> {
    let refuse = |message: &str| RunsError::Artifact {
        path: dir.to_path_buf(),
        line: None,
        message: message.to_string(),
    };
    if run_is_live(dir) {
        return Err(refuse("a process still holds this run: it is not dead"));
    }
    let records_path = dir.join(RECORDS_FILE_NAME);
    if records_path.exists() {
        return Err(refuse(
            "the run already has its records file: nothing to recover",
        ));
    }
    let journal_path = dir.join(JOURNAL_FILE_NAME);
    if !journal_path.is_file() {
        return Err(refuse(&format!(
            "no crash journal ({JOURNAL_FILE_NAME}): the run was written by a speedbench without one, or never flushed a record"
        )));
    }
    let journal = read_journal(&journal_path)?;
    let manifest_path = dir.join(RunManifest::FILE_NAME);
    let mut manifest: RunManifest = match crate::run_data::read_json(&manifest_path) {
        Ok(v) => serde_json::from_value(v).map_err(|e| RunsError::Artifact {
            path: manifest_path.clone(),
            line: None,
            message: format!("not a speedbench run manifest: {e}"),
        })?,
        Err(_) => RunManifest::default(),
    };
    manifest.outcome = RunStatus::Interrupted;
    manifest.record_count = journal.records.len() as u64;
    // Written aside and renamed: a recovery cut short leaves no half file
    // under the records' name.
    let writing = dir.join(format!("{RECORDS_FILE_NAME}.recovering"));
    let mut writer = RecordWriter::create_with_columns(&writing, &journal.custom_columns)?;
    for r in &journal.records {
        writer.append(r)?;
    }
    writer.close(&manifest)?;
    let io = |path: &Path, source| RunsError::Io {
        path: path.to_path_buf(),
        source,
    };
    std::fs::rename(&writing, &records_path).map_err(|e| io(&records_path, e))?;
    let mut summary = serde_json::to_value(RunMetrics::from_records(&journal.records))
        .map_err(|e| refuse(&e.to_string()))?;
    summary["outcome"] = RunStatus::Interrupted.as_str().into();
    let summary_path = dir.join(SUMMARY_FILE_NAME);
    std::fs::write(&summary_path, summary.to_string()).map_err(|e| io(&summary_path, e))?;
    let manifest_json = serde_json::to_vec_pretty(&manifest).map_err(|e| refuse(&e.to_string()))?;
    std::fs::write(&manifest_path, manifest_json).map_err(|e| io(&manifest_path, e))?;
    for leftover in [dir.join(PARTIAL_RECORDS_FILE_NAME), journal_path] {
        match std::fs::remove_file(&leftover) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&leftover, e)),
        }
    }
    Ok(Recovered {
        records_path,
        records: journal.records.len(),
        torn: journal.torn,
    })
}
