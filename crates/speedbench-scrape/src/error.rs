//! The crate's error type.

use std::path::PathBuf;

/// What can fail in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScrapeError {
    /// A Prometheus exposition line cannot be parsed.
    #[error("Prometheus exposition line {line}: {message}")]
    Exposition {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// An export file cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An export file is not a server-metrics export (neither
    /// speedbench's nor AIPerf's layout).
    #[error("{path}:{line}: not a server-metrics export: {source}")]
    Export {
        /// The file.
        path: PathBuf,
        /// The 1-based line the JSON error is on.
        line: usize,
        /// The JSON error, naming the field.
        #[source]
        source: serde_json::Error,
    },
}
