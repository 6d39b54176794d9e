//! How a run ended, as far as its directory tells.

use std::path::Path;

use serde_json::Value;
use speedbench_record::{PARTIAL_RECORDS_FILE_NAME, RunManifest, RunStatus, run_is_live};

use crate::aiperf;

/// A speedbench run's status from its recorded outcome, whether a process
/// still holds its lock, and whether its records were closed.
pub(crate) fn speedbench_status(
    dir: &Path,
    recorded: Option<RunStatus>,
    only_partial: bool,
    readable: bool,
) -> (RunStatus, Option<String>) {
    let status = match recorded {
        Some(RunStatus::Running) if run_is_live(dir) => RunStatus::Running,
        Some(RunStatus::Running) => RunStatus::Died,
        Some(s @ (RunStatus::Interrupted | RunStatus::Failed | RunStatus::Died)) => s,
        Some(RunStatus::Unfinished) => RunStatus::Unfinished,
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
