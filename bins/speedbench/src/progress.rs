//! The progress line on stderr.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use speedbench_client::Progress;

/// Prints progress until the returned handle is dropped or aborted.
///
/// On a terminal the line redraws in place every 250 ms; otherwise (CI logs)
/// a line is printed every 5 s so logs stay short.
pub fn spawn(progress: Arc<Progress>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let tty = std::io::stderr().is_terminal();
        let period = if tty {
            Duration::from_millis(250)
        } else {
            Duration::from_secs(5)
        };
        let start = Instant::now();
        loop {
            tokio::time::sleep(period).await;
            let line = line(&progress, start.elapsed());
            let mut err = std::io::stderr().lock();
            let _ = if tty {
                write!(err, "\r\x1b[2K{line}")
            } else {
                writeln!(err, "{line}")
            };
        }
    })
}

/// Ends the progress display, leaving the cursor on a fresh line.
pub fn finish(handle: tokio::task::JoinHandle<()>, progress: &Progress, elapsed: Duration) {
    handle.abort();
    let tty = std::io::stderr().is_terminal();
    let mut err = std::io::stderr().lock();
    let _ = if tty {
        writeln!(err, "\r\x1b[2K{}", line(progress, elapsed))
    } else {
        writeln!(err, "{}", line(progress, elapsed))
    };
}

fn line(p: &Progress, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let warm = if p.warmup_done() > 0 {
        format!(" (+{} warmup)", p.warmup_done())
    } else {
        String::new()
    };
    format!(
        "profiling: {}/{} requests{warm}, {} failed, {:.1} req/s, {:.0}s",
        p.done(),
        p.planned(),
        p.failed(),
        (p.done() + p.warmup_done()) as f64 / secs,
        secs
    )
}
