//! The crate's error type.

/// What can fail in this crate.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReportError {
    /// A matrix metric name other than `accept_length` or `accept_rate`.
    #[error("unknown matrix metric {0:?} (expected accept_length or accept_rate)")]
    UnknownMetric(String),
}
