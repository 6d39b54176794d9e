//! The shared request-record schema of speedbench.
mod record;
pub use record::{ErrorKind, RequestRecord, ServerTimings, SpecDecodeStats, SpecSource};
