//! The one error type of this crate. A leaf module: it names the other
//! crates' errors and nothing of this crate, so every module can use it
//! without an import circle.

use crate::store_types::StoreError;
use speedbench_client::ClientError;
use speedbench_dataset::DatasetError;
use speedbench_record::RecordError;
use speedbench_report::ReportError;
use speedbench_runs::RunsError;

/// Why a run specification was refused or its run could not go on.
///
/// Each variant says what was being done (`context`): for a refused
/// field, the field in the vocabulary of `speedbench profile`'s flags and
/// sweep files (`--timeout`), which is the spec's own (see
/// [`RunSpec`](crate::RunSpec)). Secrets never appear: the errors only
/// quote what a run's artifacts may hold.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// A field of the specification holds a value no run can use.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as its flag (`--timeout`), or the place in a file
        /// (`sweep.toml:12`).
        field: String,
        /// What is wrong with it, and what would be right.
        message: String,
    },
    /// The client refused the request options or the run failed to run.
    #[error("{context}: {source}")]
    Client {
        /// What was being done, with the field that fixes it where one does.
        context: String,
        /// The client's error.
        #[source]
        source: ClientError,
    },
    /// The dataset could not be loaded or narrowed.
    #[error("{context}: {source}{}", hint.as_ref().map_or(String::new(), |h| format!("\n  hint: {h}")))]
    Dataset {
        /// What was being done.
        context: String,
        /// The dataset crate's error (boxed: it is large, and rare).
        #[source]
        source: Box<DatasetError>,
        /// What to do about it, where there is something to do.
        hint: Option<String>,
    },
    /// A run directory or records file.
    #[error("{context}: {source}")]
    Record {
        /// What was being done.
        context: String,
        /// The record crate's error.
        #[source]
        source: RecordError,
    },
    /// speed_bench.py's `--output` JSON.
    #[error("{context}: {source}")]
    Report {
        /// What was being done.
        context: String,
        /// The report crate's error.
        #[source]
        source: ReportError,
    },
    /// Run directories being found, loaded, merged or labelled for a
    /// report.
    #[error("{context}: {source}")]
    Runs {
        /// What was being done.
        context: String,
        /// The runs crate's error.
        #[source]
        source: RunsError,
    },
    /// A report with nothing to show, or without some of the runs it was
    /// given; the message names them.
    #[error("{context}: {message}")]
    Unreported {
        /// What was being done.
        context: String,
        /// What is missing, and why.
        message: String,
    },
    /// An object store (a store URL as the run directory).
    #[error("{context}: {source}")]
    Store {
        /// What was being done.
        context: String,
        /// The store crate's error.
        #[source]
        source: StoreError,
    },
    /// The run ran and failed: no request succeeded, too many failed, or
    /// a file could not be written; the reason says which.
    #[error("the run failed: {reason}")]
    Failed {
        /// Why, as `run.json` records it.
        reason: String,
    },
    /// A sweep (or any list of runs) some of whose runs were refused, each
    /// named with why; nothing was sent.
    #[error("{what}: {} of {total} variations refused; nothing was sent:\n  {}", refusals.len().min(*total), refusals.join("\n  "))]
    Refused {
        /// What was refused (`sweep ladder.toml`).
        what: String,
        /// How many runs it holds.
        total: usize,
        /// One line per refusal, naming the run.
        refusals: Vec<String>,
    },
    /// The run was stopped (Ctrl-C, SIGTERM) before its first request.
    #[error("stopped while {during}: no request of the run was sent")]
    Stopped {
        /// What was under way (`finding the engine`, `sending the preflight`).
        during: String,
    },
    /// A local file or directory.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
}

impl RunError {
    /// A report missing something (see [`RunError::Unreported`]).
    pub fn unreported(context: impl Into<String>, message: impl Into<String>) -> RunError {
        RunError::Unreported {
            context: context.into(),
            message: message.into(),
        }
    }

    /// A refused field.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> RunError {
        RunError::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}
