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

/// The hidden `cargo xtask` subcommand that runs a measured command for
/// [`measure`] and reports its cost on stdout ([`helper_main`]).
pub(crate) const HELPER: &str = "__measure-child";

/// Runs `cmd` to its end, its stdout discarded and its stderr written to
/// `stderr_log` (its directory made if missing; a file, never a pipe: a long run's stderr would fill a
/// pipe nobody reads and stall the child); its CPU and peak RSS by `wait4`,
/// its wall time. A failed exit is an error holding stderr's last lines.
///
/// The command is started by a small helper process (this binary, freshly
/// started, [`HELPER`]), not by this one: Linux carries the peak RSS of the
/// address space a process leaves at `exec` into its own `ru_maxrss`, and a
/// child spawned from this process (vfork) leaves this process's. After the
/// bench's memory sections this process holds hundreds of MiB, and every
/// child's peak read the same. The helper holds a few MiB, less than any
/// measured tool.
pub(crate) fn measure(cmd: Command, what: &str, stderr_log: &Path) -> Result<ChildCost, String> {
    let exe = std::env::current_exe().map_err(|e| format!("{what}: {e}"))?;
    let mut helper = Command::new(exe);
    helper
        .arg(HELPER)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(v) => helper.env(key, v),
            None => helper.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        helper.current_dir(dir);
    }
    // The log's directory is the run's output directory: made here, once
    // for every caller.
    let log = (stderr_log.parent().map_or(Ok(()), std::fs::create_dir_all))
        .and_then(|()| std::fs::File::create(stderr_log))
        .map_err(|e| format!("{what}: {}: {e}", stderr_log.display()))?;
    let out = helper
        .stdout(Stdio::piped())
        .stderr(log)
        .output()
        .map_err(|e| format!("{what}: starting the measuring helper: {e}"))?;
    let report = String::from_utf8_lossy(&out.stdout);
    let (status, cost) = parse_report(&report).ok_or_else(|| {
        format!(
            "{what}: the measuring helper reported {report:?} ({})",
            out.status
        )
    })?;
    if status != 0 {
        let err = std::fs::read_to_string(stderr_log).unwrap_or_default();
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "{what} failed (wait status {status}): {} (all of it in {})",
            tail.join(" | "),
            stderr_log.display()
        ));
    }
    Ok(cost)
}

/// `cargo xtask __measure-child PROGRAM ARGS...`: runs the program (stdout
/// discarded, stderr inherited), waits for it with `wait4` and prints one
/// line for [`measure`]: wait status, user and system microseconds, peak
/// RSS in KiB, wall microseconds.
pub(crate) fn helper_main(args: &[String]) -> Result<(), String> {
    let (program, rest) = args
        .split_first()
        .ok_or("__measure-child needs a program")?;
    let mut cmd = Command::new(program);
    cmd.args(rest);
    let (status, cost) = measure_direct(cmd)?;
    println!("{}", format_report(status, &cost));
    Ok(())
}

/// Runs `cmd` from this process: its wait status and cost.
fn measure_direct(mut cmd: Command) -> Result<(i32, ChildCost), String> {
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child, not yet waited for; the pointers are to
    // live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall_ms = started.elapsed().as_secs_f64() * 1e3;
    if waited != pid {
        return Err(format!("wait4 failed: {}", std::io::Error::last_os_error()));
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    let cost = ChildCost {
        user_ms: ms(usage.ru_utime),
        system_ms: ms(usage.ru_stime),
        wall_ms,
        max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    };
    Ok((status, cost))
}

/// The helper's line: whole numbers, so nothing is lost in the round trip
/// but what the kernel does not count.
fn format_report(status: i32, c: &ChildCost) -> String {
    let us = |ms: f64| (ms * 1e3).round() as u64;
    format!(
        "{status} {} {} {} {}",
        us(c.user_ms),
        us(c.system_ms),
        (c.max_rss_mib * 1024.0).round() as u64,
        us(c.wall_ms)
    )
}

fn parse_report(line: &str) -> Option<(i32, ChildCost)> {
    let mut f = line.split_whitespace();
    let status = f.next()?.parse().ok()?;
    let mut next = || f.next()?.parse::<u64>().ok();
    let (user, system, rss_kib, wall) = (next()?, next()?, next()?, next()?);
    Some((
        status,
        ChildCost {
            user_ms: user as f64 / 1e3,
            system_ms: system as f64 / 1e3,
            wall_ms: wall as f64 / 1e3,
            max_rss_mib: rss_kib as f64 / 1024.0,
        },
    ))
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
        // `sh` burning a little CPU: measured above 0, its exit status kept.
        let mut busy = Command::new("sh");
        busy.args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
        let (status, cost) = measure_direct(busy).unwrap();
        assert_eq!(status, 0);
        assert!(
            cost.cpu_ms() > 0.0 && cost.wall_ms >= cost.cpu_ms() * 0.5,
            "{cost:?}"
        );
        assert!(cost.user_ms > 0.0 && cost.max_rss_mib > 0.0, "{cost:?}");
        let mut failing = Command::new("sh");
        failing.args(["-c", "exit 3"]);
        let (status, _) = measure_direct(failing).unwrap();
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 3);
    }

    #[test]
    fn the_helpers_report_round_trips() {
        let cost = ChildCost {
            user_ms: 12.345,
            system_ms: 0.5,
            wall_ms: 100.001,
            max_rss_mib: 19.5,
        };
        let (status, back) = parse_report(&format_report(256, &cost)).unwrap();
        assert_eq!(status, 256);
        assert_eq!(format!("{back:?}"), format!("{cost:?}"));
        assert!(parse_report("0 1 2").is_none());
        assert!(parse_report("").is_none());
    }
}
