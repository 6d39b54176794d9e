//! The crate's error type.

/// What can fail in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// A matrix metric name that is not one of [`crate::MatrixMetric`]'s.
    #[error(
        "unknown matrix metric {0:?} (expected accept_length, accept_rate, throughput, decode_tps or latency)"
    )]
    UnknownMetric(String),
    /// A source name that is not one of [`crate::SourceChoice`]'s.
    #[error("unknown source {0:?} (expected auto, records, summary or server)")]
    UnknownSource(String),
    /// A run directory could not be found or read.
    #[error(transparent)]
    Runs(#[from] speedbench_runs::RunsError),
    /// A records file is unreadable.
    #[error(transparent)]
    Record(#[from] speedbench_record::RecordError),
    /// A server-metrics export is unreadable or not an export.
    #[error(transparent)]
    Scrape(#[from] speedbench_scrape::ScrapeError),
    /// Two runs cannot be compared.
    #[error("cannot compare: {0}")]
    Compare(String),
    /// A file the crate writes (speed_bench.py's JSON) could not be
    /// written, or already exists and may not be replaced.
    #[error("{path}: {source}")]
    Write {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error (kind `AlreadyExists` for a refused replacement).
        #[source]
        source: std::io::Error,
    },
}
