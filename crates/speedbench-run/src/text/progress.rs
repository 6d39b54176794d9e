//! What a run says while it goes: its progress line, rate and errors.

use std::time::Duration;

use speedbench_client::Progress;

/// What the display says while the run waits for its shared start.
const WAITING: &str = "waiting for the start (--start-at or --start-after-barrier)";

/// A run's rate and failures while it runs (or that it waits for its
/// start): the message beside a progress bar.
pub fn rate_and_errors(p: &Progress, elapsed: Duration) -> String {
    if p.waiting_for_start() {
        return WAITING.to_string();
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    let warm = if p.warmup_done() > 0 {
        format!(" (+{} warmup)", p.warmup_done())
    } else {
        String::new()
    };
    let skipped = match p.skipped() {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    format!(
        "{:.1} req/s, {} failed{skipped}{warm}",
        (p.done() + p.warmup_done()) as f64 / secs,
        p.failed()
    )
}

/// The line that closes a run's progress: its counts, and the request
/// throughput the summary table prints (successful requests over the
/// benchmark window), so the two never disagree.
pub fn final_line(p: &Progress, request_throughput: Option<f64>) -> String {
    let total = match p.planned() {
        0 => "?".to_string(),
        n => n.to_string(),
    };
    let rate = request_throughput.map_or("? req/s".to_string(), |r| format!("{r:.2} req/s"));
    let skipped = match p.skipped() {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    let warm = match p.warmup_done() {
        0 => String::new(),
        n => format!(" (+{n} warmup)"),
    };
    format!(
        "profiled: {}/{total} requests, {rate} (request throughput), {} failed{skipped}{warm}",
        p.done(),
        p.failed()
    )
}

/// A run's progress in one line, for a log: done of planned, rate,
/// failures, time.
pub fn progress_line(p: &Progress, elapsed: Duration) -> String {
    let total = match p.planned() {
        0 => "?".to_string(),
        n => n.to_string(),
    };
    format!(
        "profiling: {}/{total} requests, {}, {:.0}s",
        p.done(),
        rate_and_errors(p, elapsed),
        elapsed.as_secs_f64()
    )
}
