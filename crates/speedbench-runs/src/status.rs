//! How a run ended, as far as its directory tells.

use std::fmt;
use std::path::Path;

use serde_json::Value;
use speedbench_record::{PARTIAL_RECORDS_FILE_NAME, RunManifest, outcome, run_is_live};

use crate::aiperf;

/// How a run ended, as far as its directory tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunStatus {
    /// Every planned request was sent (`run.json` says `completed`; also
    /// assumed for files written before the outcome was recorded).
    Completed,
    /// A process still holds the run's lock: the run is in progress.
    Running,
    /// Stopped by a signal before the planned work was done (speedbench's
    /// `interrupted`, AIPerf's `was_cancelled`).
    Interrupted,
    /// The run itself failed (no request succeeded, the error rate passed
    /// its limit, or a file could not be written).
    Failed,
    /// `run.json` says `running` but no process holds the run's lock: the
    /// process died (SIGKILL, out of memory, a full disk).
    Died,
    /// The records were never closed and renamed (only
    /// `records.parquet.partial` exists), or AIPerf says the run is not
    /// complete.
    Unfinished,
}

impl RunStatus {
    /// The name printed in the `Status` column and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
            RunStatus::Died => "died",
            RunStatus::Unfinished => "unfinished",
        }
    }

    /// True only for [`RunStatus::Completed`].
    pub fn is_complete(self) -> bool {
        self == RunStatus::Completed
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A speedbench run's status from its recorded outcome, whether a process
/// still holds its lock, and whether its records were closed.
pub(crate) fn speedbench_status(
    dir: &Path,
    recorded: Option<&str>,
    only_partial: bool,
    readable: bool,
) -> (RunStatus, Option<String>) {
    let status = match recorded {
        Some(outcome::RUNNING) if run_is_live(dir) => RunStatus::Running,
        Some(outcome::RUNNING) => RunStatus::Died,
        Some(outcome::INTERRUPTED) => RunStatus::Interrupted,
        Some(outcome::FAILED) => RunStatus::Failed,
        _ if only_partial => RunStatus::Unfinished,
        _ => RunStatus::Completed,
    };
    let mut reason = match status {
        RunStatus::Completed => None,
        RunStatus::Running => Some("still running (a process holds its lock)".to_string()),
        RunStatus::Interrupted => Some("interrupted before every planned request was sent".into()),
        RunStatus::Failed => Some(format!(
            "the run failed ({} says failed)",
            RunManifest::FILE_NAME
        )),
        RunStatus::Died => Some(format!(
            "{} says running but no process holds the run's lock: the process died \
             (killed, out of memory or out of disk)",
            RunManifest::FILE_NAME
        )),
        RunStatus::Unfinished => Some("its records were never closed".into()),
    };
    if only_partial {
        let what = if readable {
            format!("only {PARTIAL_RECORDS_FILE_NAME} (records of the requests that finished)")
        } else {
            format!("only an unreadable {PARTIAL_RECORDS_FILE_NAME}")
        };
        reason = Some(match reason {
            Some(r) => format!("{r}; {what}"),
            None => what,
        });
    }
    (status, reason)
}

/// An AIPerf run's status from `was_cancelled` / `is_complete`.
pub(crate) fn aiperf_status(profile: &Value) -> (RunStatus, Option<String>) {
    if profile.get("was_cancelled").and_then(Value::as_bool) == Some(true) {
        return (
            RunStatus::Interrupted,
            Some(format!("{} says was_cancelled: true", aiperf::PROFILE_JSON)),
        );
    }
    if profile.get("is_complete").and_then(Value::as_bool) == Some(false) {
        return (
            RunStatus::Unfinished,
            Some(format!("{} says is_complete: false", aiperf::PROFILE_JSON)),
        );
    }
    (RunStatus::Completed, None)
}
