//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can stop a run before or while it starts.
///
/// A failing *request* is not an error of this type: it becomes a record
/// with an [`speedbench_record::ErrorKind`], and the run goes on.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server URL cannot be used.
    #[error("invalid server URL {url:?}: {message}")]
    InvalidUrl {
        /// The URL, with credentials removed.
        url: String,
        /// Why it cannot be used.
        message: String,
    },
    /// An `--extra-inputs` item cannot be parsed.
    #[error("invalid extra input {input:?}: {message}")]
    InvalidExtraInput {
        /// The offending item.
        input: String,
        /// Why it cannot be parsed.
        message: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("invalid header {name:?}: {message}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// Why it is invalid.
        message: String,
    },
    /// Two options contradict each other (e.g. `-H Authorization` with an
    /// API key, or a URL naming another endpoint than the API in use).
    #[error("conflicting options: {0}")]
    Conflict(String),
    /// The load configuration is inconsistent.
    #[error("invalid load configuration: {0}")]
    InvalidLoad(String),
    /// The dataset has nothing to send.
    #[error("dataset {0} has no conversations to send")]
    EmptyDataset(String),
    /// The artifact directory cannot be created or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A pre-run question to the server (health, model list) failed.
    #[error("{url}: {message}")]
    Discovery {
        /// The URL asked.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The TLS setup failed (e.g. an unreadable `SSL_CERT_FILE`).
    #[error("TLS setup: {0}")]
    Tls(String),
    /// A Prometheus exposition line cannot be parsed.
    #[error("Prometheus exposition line {line}: {message}")]
    Prometheus {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// The records file failed.
    #[error(transparent)]
    Record(#[from] speedbench_record::RecordError),
}
