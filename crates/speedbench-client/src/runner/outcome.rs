//! How a run ended and what it left.

use std::path::PathBuf;

use speedbench_metrics::{RecordsDigest, RunMetrics};
use speedbench_record::{RunManifest, RunStatus};

use crate::schedule::ScheduleStats;

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
    /// How the run ended: `completed`, `interrupted` or `failed` (the
    /// `outcome` key of `summary.json`, as of `run.json`).
    #[serde(rename = "outcome")]
    pub status: RunStatus,
    /// Every run-level statistic, computed from the records file.
    #[serde(flatten)]
    pub metrics: RunMetrics,
    /// GPU power, utilisation, memory and energy per output token, from
    /// the DCGM exporters scraped (`--gpu-telemetry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_telemetry: Option<speedbench_scrape::GpuTelemetry>,
    /// How late the arrival schedule's sends were (a request rate, a
    /// ramp, a series or a trace; none for a closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<crate::ScheduleStats>,
}

/// What the run read of its records file to write `summary.json`: the
/// statistics and what the console's tables need, folded as the file was
/// read in passes ([`crate::RecordsFilePasses`]); the records themselves
/// are not held (a caller that wants them reads
/// [`RunOutcome::records_path`]), so a run's memory does not grow with its
/// length.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadBack {
    /// The manifest in the file's footer.
    pub manifest: Option<RunManifest>,
    /// The statistics `summary.json` holds.
    pub metrics: RunMetrics,
    /// Counts, categories and acceptance per matrix column (the
    /// per-category matrices).
    pub digest: RecordsDigest,
    /// Whether a non-warmup record carries llama.cpp's `timings` (then
    /// speed_bench.py's tables apply, and read the records again).
    pub llamacpp_timings: bool,
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
    /// The records as read back for `summary.json`; `None` when they could
    /// not be read, or were removed ([`RunOutcome::records_removed`]).
    pub read_back: Option<ReadBack>,
    /// Records written, warmup and skipped turns included.
    pub record_count: u64,
    /// Finished requests whose records could not be saved (a write failed).
    pub unsaved: u64,
    /// How the run ended: completed, interrupted or failed.
    pub status: RunStatus,
    /// Why it failed (no request succeeded, too many failed, or a file
    /// could not be written, naming the file); `None` unless
    /// [`RunStatus::Failed`].
    pub failure: Option<String>,
    /// The profiled requests.
    pub requests: RequestTally,
    /// Every file that could not be written, first failure first; each
    /// message names its file.
    pub write_errors: Vec<String>,
    /// Request-rate mode: how late the profiling phase's arrivals started.
    pub schedule: Option<ScheduleStats>,
    /// The server-metrics export, when scraping was enabled.
    pub server_metrics_path: Option<PathBuf>,
    /// The DCGM exporters' scrape (`gpu_telemetry_export.json`), when
    /// GPU telemetry was asked for.
    pub gpu_telemetry_path: Option<PathBuf>,
    /// The GPU figures `summary.json` holds.
    pub gpu_telemetry: Option<speedbench_scrape::GpuTelemetry>,
    /// The export level the run was made at.
    pub export_level: crate::ExportLevel,
    /// True when the records file was removed after `summary.json` was
    /// written ([`crate::ExportLevel::Summary`]); a run whose summary could
    /// not be written keeps its records whatever the level.
    pub records_removed: bool,
    /// `raw_responses.jsonl`, at [`crate::ExportLevel::Raw`].
    pub raw_responses_path: Option<PathBuf>,
    /// `http_trace.jsonl`, with [`crate::ProfileRun::with_http_trace`].
    pub http_trace_path: Option<PathBuf>,
    /// With a [`crate::StartBarrier`]: when the measured phase was planned
    /// to start and when it did (also in `run.json`).
    pub start: Option<speedbench_record::MeasuredStart>,
}

/// How a run ended, and why when it failed.
pub(crate) type Verdict = (RunStatus, Option<String>);

/// How the run ended, from what it measured and what it could write.
pub(crate) fn judge(
    interrupted: bool,
    requests: &RequestTally,
    max_error_rate: Option<f64>,
    write_errors: &[String],
) -> Verdict {
    let failed_because = |why: String| (RunStatus::Failed, Some(why));
    if let Some(first) = write_errors.first() {
        return failed_because(first.clone());
    }
    if interrupted {
        return (RunStatus::Interrupted, None);
    }
    let (sent, failed) = (requests.sent, requests.failed);
    if sent == 0 {
        return failed_because("no request was sent".into());
    }
    if failed == sent {
        return failed_because(format!("no request succeeded ({failed} of {sent} failed)"));
    }
    let rate = failed as f64 / sent as f64;
    match max_error_rate {
        Some(max) if rate > max => failed_because(format!(
            "{failed} of {sent} requests failed ({:.1}%), more than the {:.1}% allowed",
            rate * 100.0,
            max * 100.0
        )),
        _ => (RunStatus::Completed, None),
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
        let failed = |why: &str| (RunStatus::Failed, Some(why.to_string()));
        let completed = (RunStatus::Completed, None);
        assert_eq!(judge(false, &tally(8, 2), None, &[]), completed);
        assert_eq!(
            judge(false, &tally(8, 8), None, &[]),
            failed("no request succeeded (8 of 8 failed)")
        );
        assert_eq!(
            judge(false, &tally(0, 0), None, &[]),
            failed("no request was sent")
        );
        assert_eq!(
            judge(false, &tally(8, 2), Some(0.2), &[]),
            failed("2 of 8 requests failed (25.0%), more than the 20.0% allowed")
        );
        assert_eq!(judge(false, &tally(8, 2), Some(0.25), &[]), completed);
        // Interrupted before anything finished is an interruption, not a failure.
        assert_eq!(
            judge(true, &tally(0, 0), None, &[]),
            (RunStatus::Interrupted, None)
        );
        // A file that could not be written fails the run whatever else happened.
        assert_eq!(
            judge(true, &tally(8, 0), None, &["disk full".into()]),
            failed("disk full")
        );
    }
}
