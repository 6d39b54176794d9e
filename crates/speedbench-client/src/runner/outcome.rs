//! How a run ended and what it left.

use std::path::PathBuf;

use speedbench_metrics::RunMetrics;
use speedbench_record::outcome;

use crate::schedule::ScheduleStats;

/// How a run ended, as `run.json` and `summary.json` record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// Every planned request was sent and enough of them succeeded.
    Completed,
    /// Stopped by [`StopHandle::stop`](crate::StopHandle::stop) before the planned work was done.
    Interrupted,
    /// No request succeeded, too many failed, or a file could not be
    /// written; the reason says which (and names the file).
    Failed(String),
}

impl RunStatus {
    /// The `outcome` string stored in `run.json` ([`speedbench_record::outcome`]).
    pub fn as_outcome(&self) -> &'static str {
        match self {
            RunStatus::Completed => outcome::COMPLETED,
            RunStatus::Interrupted => outcome::INTERRUPTED,
            RunStatus::Failed(_) => outcome::FAILED,
        }
    }
}

/// The profiled requests of a run, warmup excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestTally {
    /// Requests sent and finished (successful or not).
    pub sent: u64,
    /// Of those, requests that failed.
    pub failed: u64,
    /// Turns never sent because an earlier turn of their conversation
    /// failed (recorded with [`speedbench_record::ErrorKind::Skipped`]).
    pub skipped: u64,
}

impl RequestTally {
    /// Requests that succeeded.
    pub fn succeeded(&self) -> u64 {
        self.sent - self.failed
    }
}

/// The `summary.json` a run leaves: its statistics and how it ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSummary {
    /// `run.json`'s outcome: `completed`, `interrupted` or `failed`.
    pub outcome: String,
    /// Every run-level statistic, computed from the records file.
    #[serde(flatten)]
    pub metrics: RunMetrics,
}

/// What a finished (or interrupted) run left behind.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The records file (gone when [`RunOutcome::records_removed`]).
    pub records_path: PathBuf,
    /// The manifest file beside it.
    pub manifest_path: PathBuf,
    /// `summary.json`, when the records could be read back and it written.
    pub summary_path: Option<PathBuf>,
    /// Records written, warmup and skipped turns included.
    pub record_count: u64,
    /// Finished requests whose records could not be saved (a write failed).
    pub unsaved: u64,
    /// How the run ended.
    pub status: RunStatus,
    /// The profiled requests.
    pub requests: RequestTally,
    /// Every file that could not be written, first failure first; each
    /// message names its file.
    pub write_errors: Vec<String>,
    /// Request-rate mode: how late the profiling phase's arrivals started.
    pub schedule: Option<ScheduleStats>,
    /// The server-metrics export, when scraping was enabled.
    pub server_metrics_path: Option<PathBuf>,
    /// The export level the run was made at.
    pub export_level: crate::ExportLevel,
    /// True when the records file was removed after `summary.json` was
    /// written ([`crate::ExportLevel::Summary`]); a run whose summary could
    /// not be written keeps its records whatever the level.
    pub records_removed: bool,
    /// `raw_responses.jsonl`, at [`crate::ExportLevel::Raw`].
    pub raw_responses_path: Option<PathBuf>,
    /// With a [`crate::StartBarrier`]: when the measured phase was planned
    /// to start and when it did (also in `run.json`).
    pub start: Option<speedbench_record::MeasuredStart>,
}

/// How the run ended, from what it measured and what it could write.
pub(crate) fn judge(
    interrupted: bool,
    requests: &RequestTally,
    max_error_rate: Option<f64>,
    write_errors: &[String],
) -> RunStatus {
    if let Some(first) = write_errors.first() {
        return RunStatus::Failed(first.clone());
    }
    if interrupted {
        return RunStatus::Interrupted;
    }
    let (sent, failed) = (requests.sent, requests.failed);
    if sent == 0 {
        return RunStatus::Failed("no request was sent".into());
    }
    if failed == sent {
        return RunStatus::Failed(format!("no request succeeded ({failed} of {sent} failed)"));
    }
    let rate = failed as f64 / sent as f64;
    match max_error_rate {
        Some(max) if rate > max => RunStatus::Failed(format!(
            "{failed} of {sent} requests failed ({:.1}%), more than the {:.1}% allowed",
            rate * 100.0,
            max * 100.0
        )),
        _ => RunStatus::Completed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(sent: u64, failed: u64) -> RequestTally {
        RequestTally {
            sent,
            failed,
            skipped: 0,
        }
    }

    #[test]
    fn the_status_follows_failures_interruptions_and_write_errors() {
        assert_eq!(judge(false, &tally(8, 2), None, &[]), RunStatus::Completed);
        assert_eq!(
            judge(false, &tally(8, 8), None, &[]),
            RunStatus::Failed("no request succeeded (8 of 8 failed)".into())
        );
        assert_eq!(
            judge(false, &tally(0, 0), None, &[]),
            RunStatus::Failed("no request was sent".into())
        );
        assert_eq!(
            judge(false, &tally(8, 2), Some(0.2), &[]),
            RunStatus::Failed("2 of 8 requests failed (25.0%), more than the 20.0% allowed".into())
        );
        assert_eq!(
            judge(false, &tally(8, 2), Some(0.25), &[]),
            RunStatus::Completed
        );
        // Interrupted before anything finished is an interruption, not a failure.
        assert_eq!(judge(true, &tally(0, 0), None, &[]), RunStatus::Interrupted);
        // A file that could not be written fails the run whatever else happened.
        assert_eq!(
            judge(true, &tally(8, 0), None, &["disk full".into()]),
            RunStatus::Failed("disk full".into())
        );
        assert_eq!(RunStatus::Interrupted.as_outcome(), "interrupted");
    }
}
