//! Turning a killed run's crash journal into a run like any other.

use std::path::{Path, PathBuf};

use speedbench_metrics::RunMetrics;
use speedbench_record::{
    JOURNAL_FILE_NAME, JOURNAL_SUMS_FILE_NAME, JournalRecords, PARTIAL_RECORDS_FILE_NAME,
    RECORDS_FILE_NAME, RecordWriter, RequestRecord, RunManifest, RunStatus, SUMMARY_FILE_NAME,
    columns, read_journal, run_is_live, visit_records,
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
    /// What the user must know of what was recovered: a batch that failed
    /// its checksum (it and the rest left out), a manifest rebuilt from the
    /// records, records read without a checksum. Empty when nothing was
    /// doubtful.
    pub warnings: Vec<String>,
    /// The outcome the run is marked with: interrupted (killed), or failed
    /// (its records file had failed a write).
    pub status: RunStatus,
}

/// Recovers the run in `dir` whose process was killed (SIGKILL, the
/// out-of-memory killer, an abort) before it closed its records file: the
/// records of its crash journal become `records.parquet`, `run.json` and
/// `summary.json` say `interrupted`, and the footer-less partial file and
/// the journal go.
///
/// Also recovers a run whose records file was closed after a failed write
/// (a full disk) with fewer records than its journal kept (the row group
/// in progress): the journal's records replace the file's, and the run
/// stays `failed`. Refused for a run still in progress, one whose records
/// file holds every record, and one without a journal.
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
    let journal_path = dir.join(JOURNAL_FILE_NAME);
    let has_records = records_path.exists();
    if has_records && !journal_path.is_file() {
        return Err(refuse(
            "the run already has its records file: nothing to recover",
        ));
    }
    if !journal_path.is_file() {
        return Err(refuse(&format!(
            "no crash journal ({JOURNAL_FILE_NAME}): the run was written by a speedbench without one, or never flushed a record"
        )));
    }
    let journal = read_journal(&journal_path)?;
    if has_records {
        let held = visit_records(&records_path, Some(&[columns::RUN_ID]), |_| {})?.records;
        if journal.records.len() <= held {
            return Err(refuse(&format!(
                "the run already has its records file, with {held} records, and its crash journal holds {}: nothing to recover",
                journal.records.len()
            )));
        }
    }
    let mut warnings = journal_warnings(&journal_path, &journal);
    let manifest_path = dir.join(RunManifest::FILE_NAME);
    let mut manifest = journal_manifest(&manifest_path, &journal.records, &mut warnings)
        .map_err(|message| refuse(&message))?;
    // A run whose write failed stays failed: it did not end as asked.
    manifest.status = if has_records {
        RunStatus::Failed
    } else {
        RunStatus::Interrupted
    };
    manifest.record_count = journal.records.len() as u64;
    write_recovered(dir, &manifest, &journal)?;
    let sums = dir.join(JOURNAL_SUMS_FILE_NAME);
    for leftover in [dir.join(PARTIAL_RECORDS_FILE_NAME), journal_path, sums] {
        match std::fs::remove_file(&leftover) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_error(&leftover, e)),
        }
    }
    Ok(Recovered {
        records_path,
        records: journal.records.len(),
        torn: journal.torn,
        warnings,
        status: manifest.status,
    })
}

fn io_error(path: &Path, source: std::io::Error) -> RunsError {
    RunsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The run's manifest: its `run.json`, refused when the journal holds
/// another run's records; rebuilt from the records, said in `warnings`,
/// when `run.json` cannot be read.
fn journal_manifest(
    manifest_path: &Path,
    records: &[RequestRecord],
    warnings: &mut Vec<String>,
) -> Result<RunManifest, String> {
    let read = crate::run_data::read_json(manifest_path).and_then(|v| {
        serde_json::from_value::<RunManifest>(v).map_err(|e| RunsError::Artifact {
            // Named by the run's directory, as every refusal of recover is.
            path: manifest_path
                .parent()
                .unwrap_or(manifest_path)
                .to_path_buf(),
            line: None,
            message: e.to_string(),
        })
    });
    match read {
        Ok(manifest) => match other_run(records, &manifest.run_id) {
            Some(other) => Err(format!(
                "the crash journal holds the records of run {other:?}, but run.json is run \
                 {:?}'s: not mixing two runs",
                manifest.run_id
            )),
            None => Ok(manifest),
        },
        Err(e) => {
            let manifest = manifest_from_records(records);
            warnings.push(format!(
                "run.json could not be read ({e}): rebuilt from the records (run {:?}, model \
                 {:?}, dataset {:?}); the run's configuration is lost",
                manifest.run_id, manifest.model, manifest.dataset
            ));
            Ok(manifest)
        }
    }
}

/// The recovered run's files: `records.parquet` (written aside and
/// renamed: a recovery cut short leaves no half file under the records'
/// name), `summary.json` and `run.json`, with the manifest's outcome.
fn write_recovered(
    dir: &Path,
    manifest: &RunManifest,
    journal: &JournalRecords,
) -> Result<(), RunsError> {
    let refuse = |message: String| RunsError::Artifact {
        path: dir.to_path_buf(),
        line: None,
        message,
    };
    let records_path = dir.join(RECORDS_FILE_NAME);
    let writing = dir.join(format!("{RECORDS_FILE_NAME}.recovering"));
    let mut writer = RecordWriter::create_with_columns(&writing, &journal.custom_columns)?;
    for r in &journal.records {
        writer.append(r)?;
    }
    writer.close(manifest)?;
    std::fs::rename(&writing, &records_path).map_err(|e| io_error(&records_path, e))?;
    let mut summary = serde_json::to_value(RunMetrics::from_records(&journal.records))
        .map_err(|e| refuse(e.to_string()))?;
    summary["outcome"] = manifest.status.as_str().into();
    let summary_path = dir.join(SUMMARY_FILE_NAME);
    std::fs::write(&summary_path, summary.to_string()).map_err(|e| io_error(&summary_path, e))?;
    let manifest_path = dir.join(RunManifest::FILE_NAME);
    let manifest_json = serde_json::to_vec_pretty(manifest).map_err(|e| refuse(e.to_string()))?;
    std::fs::write(&manifest_path, manifest_json).map_err(|e| io_error(&manifest_path, e))
}

/// What is doubtful in what the journal gave.
fn journal_warnings(path: &Path, journal: &JournalRecords) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(batch) = journal.corrupt_batch {
        out.push(format!(
            "{}: batch {batch} does not match the checksum written with it (the file changed \
             on disk): it and every batch after it are left out; {} records before it are \
             recovered",
            path.display(),
            journal.records.len()
        ));
    }
    if !journal.checked {
        out.push(format!(
            "{}: no checksums ({JOURNAL_SUMS_FILE_NAME} is missing): the records are read unchecked",
            path.display()
        ));
    } else if journal.unchecked_records > 0 {
        out.push(format!(
            "{}: the last {} records were flushed without their checksum (the process died \
             between the two): read unchecked",
            path.display(),
            journal.unchecked_records
        ));
    }
    out
}

/// A run id of the records that is not `run_id`, if any.
fn other_run<'a>(records: &'a [RequestRecord], run_id: &str) -> Option<&'a str> {
    records
        .iter()
        .map(|r| r.run_id.as_str())
        .find(|id| *id != run_id)
}

/// A manifest made of what the records say: their run id, model and
/// dataset (every record carries them).
fn manifest_from_records(records: &[RequestRecord]) -> RunManifest {
    let first = records.first();
    RunManifest {
        run_id: first.map(|r| r.run_id.clone()).unwrap_or_default(),
        model: first.map(|r| r.model.clone()).unwrap_or_default(),
        dataset: first.map(|r| r.dataset.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{RecordError, read_records};

    fn record(i: u64) -> RequestRecord {
        RequestRecord {
            run_id: "r".into(),
            model: "m".into(),
            request_index: i,
            e2e_latency_ns: 1_000 + i,
            ..Default::default()
        }
    }

    fn write_manifest(dir: &Path) {
        let manifest = RunManifest {
            run_id: "r".into(),
            model: "m".into(),
            status: RunStatus::Failed,
            ..Default::default()
        };
        let json = serde_json::to_vec(&manifest).unwrap();
        std::fs::write(dir.join(RunManifest::FILE_NAME), json).unwrap();
    }

    /// A write failed while the row group in progress held flushed records:
    /// the file was closed with fewer than the journal, and `recover`
    /// makes the journal's the run's records; the run stays failed.
    #[test]
    fn a_records_file_closed_short_of_its_journal_takes_the_journals_records() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path());
        let mut w = RecordWriter::create(dir.path().join(RECORDS_FILE_NAME))
            .unwrap()
            .with_journal(dir.path().join(JOURNAL_FILE_NAME))
            .unwrap();
        for batch in [0..3, 3..5] {
            for i in batch {
                w.append(&record(i)).unwrap();
            }
            w.flush().unwrap();
        }
        let failed = RecordError::Metadata {
            path: dir.path().join(RECORDS_FILE_NAME),
            message: "disk full".into(),
        };
        let closed = w.close_after_error(&RunManifest::default(), failed);
        assert_eq!((closed.rows, closed.journal_rows), (0, Some(5)));

        let recovered = recover(dir.path()).unwrap();
        assert_eq!(
            (recovered.records, recovered.status),
            (5, RunStatus::Failed)
        );
        let records = read_records(dir.path().join(RECORDS_FILE_NAME)).unwrap();
        assert_eq!(records, (0..5).map(record).collect::<Vec<_>>());
        assert!(!dir.path().join(JOURNAL_FILE_NAME).exists());
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join(SUMMARY_FILE_NAME)).unwrap())
                .unwrap();
        assert_eq!(summary["outcome"], "failed");
        // Done once: the journal is gone.
        let again = recover(dir.path()).unwrap_err().to_string();
        assert!(again.contains("nothing to recover"), "{again}");
    }

    /// A records file that holds every record its journal does is not
    /// replaced.
    #[test]
    fn a_records_file_as_full_as_its_journal_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        write_manifest(dir.path());
        let mut w = RecordWriter::create(dir.path().join("elsewhere.parquet"))
            .unwrap()
            .with_journal(dir.path().join(JOURNAL_FILE_NAME))
            .unwrap();
        w.append(&record(0)).unwrap();
        w.flush().unwrap();
        // As a kill would leave it: no close.
        std::mem::forget(w);
        let mut file = RecordWriter::create(dir.path().join(RECORDS_FILE_NAME)).unwrap();
        file.append(&record(0)).unwrap();
        file.close(&RunManifest::default()).unwrap();
        let refused = recover(dir.path()).unwrap_err().to_string();
        assert!(
            refused.contains("with 1 records, and its crash journal holds 1: nothing to recover"),
            "{refused}"
        );
        assert!(dir.path().join(JOURNAL_FILE_NAME).exists());
    }
}
