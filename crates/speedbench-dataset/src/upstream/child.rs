//! Running the Python child: its environment, and its output relayed line
//! by line (redacted) with the tail kept for errors.

use std::collections::VecDeque;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::hub::HubConfig;

use super::MISSING_MARKER;
use super::redact::Redactor;

/// Lines of the child's stderr quoted when it fails.
const TAIL_LINES: usize = 20;
/// Longest line kept from the child (a longer one is cut).
const MAX_LINE: usize = 8 * 1024;
/// Progress-bar updates (`\r`-terminated) relayed at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What a child process left behind.
pub(super) struct ChildOutput {
    pub(super) status: ExitStatus,
    /// The last [`TAIL_LINES`] lines of stderr, redacted.
    pub(super) tail: Vec<String>,
    /// The first line of stdout, redacted.
    pub(super) first_stdout: Option<String>,
    /// The module named by the driver's missing-package marker.
    pub(super) missing: Option<String>,
}

/// Reads `reader` to its end, relaying each line (split at `\n` or `\r`,
/// redacted) as an `info` log and keeping the last [`TAIL_LINES`].
/// Progress-bar updates (`\r`-terminated) are relayed at most every
/// [`PROGRESS_EVERY`] and replace each other in the tail.
pub(super) async fn relay<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: &'static str,
    redactor: &Redactor,
) -> (VecDeque<String>, Option<String>, Option<String>) {
    let mut tail: VecDeque<(String, bool)> = VecDeque::new();
    let mut first = None;
    let mut missing = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_progress: Option<Instant> = None;
    let mut emit = |segment: &[u8], progress: bool| {
        let raw = String::from_utf8_lossy(segment);
        let raw = raw.trim_end();
        if raw.trim().is_empty() {
            return;
        }
        if let Some(m) = raw.strip_prefix(MISSING_MARKER) {
            missing = Some(m.to_string());
        }
        let line = redactor.redact(raw);
        if first.is_none() {
            first = Some(line.clone());
        }
        // A progress update is overwritten on a terminal by whatever follows.
        if tail.back().is_some_and(|(_, p)| *p) {
            tail.pop_back();
        }
        if progress {
            if last_progress.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                last_progress = Some(Instant::now());
                tracing::info!("prepare step {stream}: {line}");
            }
        } else {
            tracing::info!("prepare step {stream}: {line}");
        }
        tail.push_back((line, progress));
        while tail.len() > TAIL_LINES {
            tail.pop_front();
        }
    };
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' || b == b'\r' {
                emit(&pending, b == b'\r');
                pending.clear();
            } else if pending.len() < MAX_LINE {
                pending.push(b);
            }
        }
    }
    emit(&pending, false);
    (tail.into_iter().map(|(l, _)| l).collect(), first, missing)
}

/// Runs `cmd` to completion, relaying its output.
pub(super) async fn run_child(
    mut cmd: tokio::process::Command,
    redactor: &Redactor,
) -> std::io::Result<ChildOutput> {
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let ((_, first_stdout, _), (tail, _, missing), status) = tokio::join!(
        relay(stdout, "stdout", redactor),
        relay(stderr, "stderr", redactor),
        child.wait()
    );
    Ok(ChildOutput {
        status: status?,
        tail: tail.into_iter().collect(),
        first_stdout,
        missing,
    })
}

/// The interpreter with the Hub settings in its environment.
pub(super) fn python_command(python: &Path, hub: &HubConfig) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(python);
    cmd.env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HOME", &hub.home)
        .env("HF_HUB_CACHE", &hub.cache_dir)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if hub.offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    }
    // The environment, never the command line: /proc/PID/cmdline is public.
    if let Some(token) = &hub.token {
        cmd.env("HF_TOKEN", token.expose());
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn relayed_child_output_is_redacted_and_its_tail_kept() {
        let (logs, _guard) = capture_logs();
        let r = Redactor::new(["hf_relay_tokenSECRET42".to_string()]);
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(
            "Map:  10%|#  | 1/10\rMap:  50%|#####  | 5/10\rMap: 100%|##########| 10/10\n",
        );
        text.push_str("Traceback: token hf_relay_tokenSECRET42 was refused\n");
        text.push_str(&format!(
            "{MISSING_MARKER}tiktoken (No module named 'tiktoken')"
        ));
        let (tail, first, missing) = relay(text.as_bytes(), "stderr", &r).await;
        assert_eq!(first.as_deref(), Some("line 0"));
        assert_eq!(
            missing.as_deref(),
            Some("tiktoken (No module named 'tiktoken')")
        );
        assert_eq!(tail.len(), TAIL_LINES);
        let tail: Vec<String> = tail.into_iter().collect();
        assert!(tail.contains(&"Traceback: token <redacted> was refused".to_string()));
        // Progress updates replace each other in the tail.
        assert_eq!(tail.iter().filter(|l| l.starts_with("Map:")).count(), 1);
        assert!(!tail.join("\n").contains("SECRET42"));
        let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
        assert!(
            logs.contains("prepare step stderr: Traceback: token <redacted>"),
            "{logs}"
        );
        assert!(!logs.contains("SECRET42"), "{logs}");
    }

    type Captured = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

    fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
        #[derive(Clone)]
        struct W(Captured);
        impl std::io::Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Captured::default();
        let w = W(buf.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .finish();
        (buf, tracing::subscriber::set_default(subscriber))
    }
}
