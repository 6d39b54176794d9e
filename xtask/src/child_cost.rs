//! What a benchmarked process cost, as the kernel accounts it: user and
//! system CPU time and peak RSS from `wait4` (microseconds, not `/proc`'s
//! 10 ms ticks), and wall time from spawn to exit. Shared by `bench
//! startup` and the Rust peer section of `bench client`, which measure
//! speedbench and its peers as whole processes the same way.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// One finished child: CPU (user, system) and wall milliseconds, peak RSS.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildCost {
    pub(crate) user_ms: f64,
    pub(crate) system_ms: f64,
    pub(crate) wall_ms: f64,
    pub(crate) max_rss_mib: f64,
}

impl ChildCost {
    /// User + system CPU milliseconds.
    pub(crate) fn cpu_ms(&self) -> f64 {
        self.user_ms + self.system_ms
    }
}

/// Runs `cmd` to its end, its stdout discarded and its stderr written to
/// `stderr_log` (a file, never a pipe: a long run's stderr would fill a
/// pipe nobody reads and stall the child); its CPU and peak RSS by `wait4`,
/// its wall time. A failed exit is an error holding stderr's last lines.
pub(crate) fn measure(
    mut cmd: Command,
    what: &str,
    stderr_log: &Path,
) -> Result<ChildCost, String> {
    let log = std::fs::File::create(stderr_log)
        .map_err(|e| format!("{what}: {}: {e}", stderr_log.display()))?;
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; the pointers are to
    // live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    if waited != pid {
        return Err(format!(
            "{what}: wait4 failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let err = std::fs::read_to_string(stderr_log).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "{what} failed (wait status {status}): {} (all of it in {})",
            tail.join(" | "),
            stderr_log.display()
        ));
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    Ok(ChildCost {
        user_ms: ms(usage.ru_utime),
        system_ms: ms(usage.ru_stime),
        wall_ms,
        max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

/// The median of `field` over `values` (the mean of the middle two for an
/// even count; NaN for none).
pub(crate) fn median<T>(values: &[T], field: impl Fn(&T) -> f64) -> f64 {
    let mut v: Vec<f64> = values.iter().map(field).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0], |x| *x), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0], |x| *x), 2.5);
        assert!(median(&[] as &[f64], |x| *x).is_nan());
    }

    #[test]
    fn a_child_is_measured_by_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("stderr");
        // `sh` burning a little CPU: measured above 0, its exit checked.
        let mut busy = Command::new("sh");
        busy.args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
        let cost = measure(busy, "sh", &log).unwrap();
        assert!(
            cost.cpu_ms() > 0.0 && cost.wall_ms >= cost.cpu_ms() * 0.5,
            "{cost:?}"
        );
        assert!(cost.user_ms > 0.0 && cost.max_rss_mib > 0.0, "{cost:?}");
        let mut failing = Command::new("sh");
        failing.args(["-c", "echo nope >&2; exit 3"]);
        let err = measure(failing, "sh", &log).unwrap_err();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn a_chatty_child_does_not_stall() {
        // 1 MiB on stderr: more than a pipe holds; the file takes it all.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("stderr");
        let mut chatty = Command::new("sh");
        chatty.args(["-c", "head -c 1048576 /dev/zero >&2"]);
        measure(chatty, "sh", &log).unwrap();
        assert_eq!(std::fs::metadata(&log).unwrap().len(), 1_048_576);
    }
}
