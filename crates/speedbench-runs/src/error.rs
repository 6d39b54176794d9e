//! The crate's error type.

use std::path::PathBuf;

/// What can fail while finding or loading runs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunsError {
    /// A path given as a run directory is not a directory.
    #[error("{0}: not a directory")]
    NotADirectory(PathBuf),
    /// A run directory that does not exist.
    #[error("{0}: no such directory")]
    Missing(PathBuf),
    /// A directory holds none of the files of a run.
    #[error(
        "{0}: not a run directory (it holds neither {records}, {partial} nor {profile})",
        records = speedbench_record::RECORDS_FILE_NAME,
        partial = speedbench_record::PARTIAL_RECORDS_FILE_NAME,
        profile = crate::AIPERF_PROFILE_FILE_NAME
    )]
    NotARunDir(PathBuf),
    /// A label override names no run, or two runs would share a label.
    #[error("{0}")]
    Label(String),
    /// No run directory was found under the given paths.
    #[error(
        "no run directories under {paths}: a run directory holds {records} (speedbench) or {profile} (AIPerf)",
        records = speedbench_record::RECORDS_FILE_NAME,
        profile = crate::AIPERF_PROFILE_FILE_NAME
    )]
    NoRuns {
        /// The paths searched, joined for display.
        paths: String,
    },
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON artifact is malformed.
    #[error("{path}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Artifact {
        /// The file.
        path: PathBuf,
        /// 1-based line, for JSON Lines files.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },
    /// The shards of one sharded run do not fit together (two claim one
    /// index, or they disagree on the shard count, model or dataset).
    #[error("{0}")]
    Shards(String),
    /// A records file is unreadable.
    #[error(transparent)]
    Record(#[from] speedbench_record::RecordError),
    /// A server-metrics export is unreadable or not an export.
    #[error(transparent)]
    Scrape(#[from] speedbench_scrape::ScrapeError),
}
