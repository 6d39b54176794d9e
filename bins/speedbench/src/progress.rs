//! Progress on stderr: an indicatif bar on a terminal, a periodic plain line
//! otherwise (CI logs).

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use speedbench_client::Progress;
use speedbench_run::text::{progress_line, rate_and_errors};

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
                let line = progress_line(&progress, start.elapsed());
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

/// Ends the progress display (the final line is the run end's).
pub(crate) fn finish(display: Display) {
    display.task.abort();
    if let Some(bar) = display.bar {
        bar.finish_and_clear();
    }
}
