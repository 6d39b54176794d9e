//! Progress on stderr: an indicatif bar on a terminal, a periodic plain line
//! otherwise (CI logs).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use speedbench_client::Progress;

/// A running progress display; end it with [`finish`].
pub(crate) struct Display {
    task: tokio::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
}

/// Shows progress until [`finish`].
///
/// On a terminal: a bar with done/total, request rate and failures, redrawn
/// four times a second (a spinner when the total is unknown, e.g. with
/// `--benchmark-duration`). Otherwise a plain line every 5 s, so logs stay
/// short.
pub(crate) fn spawn(progress: Arc<Progress>) -> Display {
    let start = Instant::now();
    if !std::io::stderr().is_terminal() {
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(5)).await;
                let line = line(&progress, start.elapsed());
                let _ = writeln!(std::io::stderr().lock(), "{line}");
            }
        });
        return Display { task, bar: None };
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
    let template = "profiling {bar:32} {pos}/{len} requests, {msg} [{elapsed}]";
    // The template is a constant; a bad one would only lose the bar's layout.
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    let shown = bar.clone();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            update(&shown, &progress, start.elapsed());
        }
    });
    Display {
        task,
        bar: Some(bar),
    }
}

fn update(bar: &ProgressBar, p: &Progress, elapsed: Duration) {
    let planned = p.planned();
    if planned > 0 {
        bar.set_length(planned);
    } else {
        bar.unset_length();
    }
    bar.set_position(p.done());
    bar.set_message(rate_and_errors(p, elapsed));
}

/// What the display says while the run waits for its shared start.
const WAITING: &str = "waiting for the start (--start-at or --start-after-barrier)";

fn rate_and_errors(p: &Progress, elapsed: Duration) -> String {
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

/// Ends the progress display (the final line comes from [`final_line`]).
pub(crate) fn finish(display: Display) {
    display.task.abort();
    if let Some(bar) = display.bar {
        bar.finish_and_clear();
    }
}

/// The line that closes a run's progress: its counts, and the request
/// throughput the summary table prints (successful requests over the
/// benchmark window), so the two never disagree.
pub(crate) fn final_line(p: &Progress, request_throughput: Option<f64>) -> String {
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

fn line(p: &Progress, elapsed: Duration) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_line_shows_the_tables_throughput() {
        let p = Progress::default();
        assert_eq!(
            final_line(&p, Some(65.8)),
            "profiled: 0/? requests, 65.80 req/s (request throughput), 0 failed"
        );
        assert_eq!(
            final_line(&p, None),
            "profiled: 0/? requests, ? req/s (request throughput), 0 failed"
        );
    }

    #[test]
    fn a_run_waiting_for_its_start_says_so() {
        let p = Progress::default();
        p.set_waiting_for_start(true);
        assert_eq!(
            line(&p, Duration::from_secs(7)),
            "profiling: 0/? requests, waiting for the start (--start-at or \
             --start-after-barrier), 7s"
        );
    }

    #[test]
    fn the_plain_line_shows_done_total_rate_and_failures() {
        let p = Progress::default();
        let l = line(&p, Duration::from_secs(2));
        assert_eq!(l, "profiling: 0/? requests, 0.0 req/s, 0 failed, 2s");
    }
}
