//! The run directory: the names of the files a run leaves, and the lock a
//! running profile holds on its directory.
//!
//! A run writes its records to [`PARTIAL_RECORDS_FILE_NAME`] and renames the
//! closed file to [`crate::RECORDS_FILE_NAME`] when it ends (normally, after
//! Ctrl-C, or after a write error), so a `records.parquet` is always a closed,
//! readable file. While the run lives, its process holds an exclusive OS lock
//! on [`LOCK_FILE_NAME`]: a second run into the same directory is refused,
//! and a reader can tell a run still in progress from one whose process died
//! (its `run.json` says `running`, yet nobody holds the lock).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

use crate::{RECORDS_FILE_NAME, RecordError, RunManifest};

/// The records file while the run is writing it (no Parquet footer yet).
pub const PARTIAL_RECORDS_FILE_NAME: &str = "records.parquet.partial";
/// The run statistics written when a run ends (`speedbench_metrics::RunMetrics`).
pub const SUMMARY_FILE_NAME: &str = "summary.json";
/// The server-metrics scrape export.
pub const SERVER_METRICS_FILE_NAME: &str = "server_metrics_export.json";
/// The server-metrics scrape export in AIPerf's CSV layout (written with
/// `--server-metrics-formats csv`).
pub const SERVER_METRICS_CSV_FILE_NAME: &str = "server_metrics_export.csv";
/// The server-metrics scrape's raw samples in AIPerf's Parquet layout
/// (written with `--server-metrics-formats parquet`).
pub const SERVER_METRICS_PARQUET_FILE_NAME: &str = "server_metrics_export.parquet";
/// The DCGM exporters' scrape (`--gpu-telemetry`), in the layout of
/// [`SERVER_METRICS_FILE_NAME`].
pub const GPU_TELEMETRY_FILE_NAME: &str = "gpu_telemetry_export.json";
/// The raw response bodies of a run profiled at `--export-level raw`: one
/// JSON object per line, keyed by `request_index` (join it with
/// [`crate::RECORDS_FILE_NAME`]); AIPerf calls its counterpart
/// `profile_export_raw.jsonl`.
pub const RAW_RESPONSES_FILE_NAME: &str = "raw_responses.jsonl";
/// Each request's HTTP trace, one JSON object per line, with
/// `--export-http-trace`.
pub const HTTP_TRACE_FILE_NAME: &str = "http_trace.jsonl";
/// The lock file a running profile holds exclusively.
pub const LOCK_FILE_NAME: &str = ".speedbench.lock";

/// Every file a finished or dead run leaves behind, in the order a reader
/// looks for them.
pub const RUN_FILE_NAMES: [&str; 12] = [
    RECORDS_FILE_NAME,
    PARTIAL_RECORDS_FILE_NAME,
    crate::io::JOURNAL_FILE_NAME,
    crate::io::JOURNAL_SUMS_FILE_NAME,
    RunManifest::FILE_NAME,
    SUMMARY_FILE_NAME,
    SERVER_METRICS_FILE_NAME,
    SERVER_METRICS_CSV_FILE_NAME,
    SERVER_METRICS_PARQUET_FILE_NAME,
    GPU_TELEMETRY_FILE_NAME,
    RAW_RESPONSES_FILE_NAME,
    HTTP_TRACE_FILE_NAME,
];

/// The exclusive lock on a run directory, held for the run's life.
///
/// Dropping it removes the lock file and then releases the lock, so a
/// finished run leaves no `.speedbench.lock` behind. That is safe because
/// taking the lock checks that the file locked is still the one the path
/// names: a process that locked a file another had just removed sees
/// another (or no) file under the name, and takes the lock again.
#[derive(Debug)]
pub struct RunDirLock {
    dir: PathBuf,
    _file: File,
}

impl RunDirLock {
    /// Creates `dir` if needed, locks it, and checks that it holds no run.
    ///
    /// With `overwrite`, the files of a previous run are removed once the
    /// lock is held; without it, a directory holding any of
    /// [`RUN_FILE_NAMES`] is refused with [`RecordError::RunDirOccupied`].
    /// A directory another live run holds is refused with
    /// [`RecordError::RunDirBusy`], whatever `overwrite` says.
    ///
    /// ```
    /// use speedbench_record::{RecordError, RunDirLock};
    /// let dir = tempfile::tempdir()?;
    /// let lock = RunDirLock::acquire(dir.path(), false)?;
    /// assert!(speedbench_record::run_is_live(dir.path()));
    /// // A second run into the same directory is refused while the first lives.
    /// assert!(matches!(RunDirLock::acquire(dir.path(), true), Err(RecordError::RunDirBusy { .. })));
    /// drop(lock);
    /// assert!(!speedbench_record::run_is_live(dir.path()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(dir: &Path, overwrite: bool) -> Result<RunDirLock, RecordError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RecordError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock_path = dir.join(LOCK_FILE_NAME);
        let file = lock_file(dir, &lock_path)?;
        for name in RUN_FILE_NAMES {
            let path = dir.join(name);
            if !path.exists() {
                continue;
            }
            if !overwrite {
                return Err(RecordError::RunDirOccupied {
                    dir: dir.to_path_buf(),
                    found: name.to_string(),
                });
            }
            std::fs::remove_file(&path).map_err(io(&path))?;
        }
        Ok(RunDirLock {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunDirLock {
    fn drop(&mut self) {
        // Removed while still locked; the lock goes with the handle after.
        let _ = std::fs::remove_file(self.dir.join(LOCK_FILE_NAME));
    }
}

/// Opens (or creates) the lock file and locks it, again if another process
/// removed the file it locked in the meantime (see [`RunDirLock`]).
fn lock_file(dir: &Path, lock_path: &Path) -> Result<File, RecordError> {
    let io = |source| RecordError::Io {
        path: lock_path.to_path_buf(),
        source,
    };
    loop {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(lock_path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(RecordError::RunDirBusy {
                    dir: dir.to_path_buf(),
                    lock: lock_path.to_path_buf(),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        if still_named(&file, lock_path) {
            return Ok(file);
        }
    }
}

/// Whether `path` still names the file `file` is open on.
#[cfg(unix)]
fn still_named(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

/// Elsewhere a file cannot be removed while it is open: it is still named.
#[cfg(not(unix))]
fn still_named(_file: &File, _path: &Path) -> bool {
    true
}

/// True while a process holds `dir`'s run lock (a run is writing there).
///
/// A `run.json` that says `running` in a directory where this is false
/// belongs to a run whose process died without closing it.
pub fn run_is_live(dir: &Path) -> bool {
    let Ok(file) = File::open(dir.join(LOCK_FILE_NAME)) else {
        return false;
    };
    match file.try_lock_shared() {
        Ok(()) => false,
        Err(TryLockError::WouldBlock) => true,
        Err(TryLockError::Error(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_run_leaves_no_lock_file_and_a_removed_one_is_not_held() {
        let dir = tempfile::tempdir().unwrap();
        let lock = RunDirLock::acquire(dir.path(), false).unwrap();
        let path = dir.path().join(LOCK_FILE_NAME);
        assert!(path.is_file() && run_is_live(dir.path()));
        drop(lock);
        assert!(!path.exists(), "the lock file goes with the lock");
        assert!(!run_is_live(dir.path()));
        // A handle on a file the name no longer points at is not the lock.
        let old = File::create(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "").unwrap();
        #[cfg(unix)]
        assert!(!still_named(&old, &path));
        let again = RunDirLock::acquire(dir.path(), false).unwrap();
        assert!(still_named(&again._file, &path));
    }

    #[test]
    fn a_directory_with_a_run_is_refused_unless_overwriting() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(RunManifest::FILE_NAME), "{}").unwrap();
        std::fs::write(dir.path().join(SUMMARY_FILE_NAME), "{}").unwrap();
        let err = RunDirLock::acquire(dir.path(), false).unwrap_err();
        assert!(
            err.to_string()
                .contains("already holds a run (run.json exists)")
        );
        assert!(
            dir.path().join(SUMMARY_FILE_NAME).exists(),
            "nothing removed"
        );
        let lock = RunDirLock::acquire(dir.path(), true).unwrap();
        assert!(!dir.path().join(RunManifest::FILE_NAME).exists());
        assert!(!dir.path().join(SUMMARY_FILE_NAME).exists());
        assert_eq!(lock.dir(), dir.path());
    }

    #[test]
    fn other_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let _lock = RunDirLock::acquire(dir.path(), false).unwrap();
        assert!(dir.path().join("notes.txt").exists());
    }
}
