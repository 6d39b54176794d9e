//! `cargo xtask bench startup [--runs N] [--no-aiperf] [--no-build]`: what a run of one
//! request costs from process start to exit (issue #39 point 5: keep it
//! near the ~11.5 ms of CPU it was while features are added).
//!
//! The release `speedbench` binary runs `profile` of one streamed request
//! against the simulator (in another process) N times; each run's user and
//! system CPU time and peak RSS come from the kernel's `wait4` accounting
//! of that child (microseconds, not `/proc`'s 10 ms ticks), and its wall
//! time from start to exit. AIPerf's one-request `aiperf profile` is the
//! peer measured in the same run (where `target/bench-venv` has it or pip
//! can install it); vLLM's Rust client `vllm-bench` is not built here (no
//! source or tokenizer offline), which the output says.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::bench::{SimProcess, aiperf_profile};

/// Runs of each tool by default.
const DEFAULT_RUNS: usize = 20;

/// One finished child: CPU (user + system) and wall milliseconds, peak RSS.
#[derive(Debug, Clone, Copy)]
struct ChildCost {
    cpu_ms: f64,
    wall_ms: f64,
    max_rss_mib: f64,
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let mut runs = DEFAULT_RUNS;
    let mut aiperf = true;
    let mut build = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => {
                runs = (it.next().ok_or("--runs needs a number")?)
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
            }
            "--no-aiperf" => aiperf = false,
            "--no-build" => build = false,
            other => return Err(format!("bench startup: unknown argument {other}")),
        }
    }
    let bin = match build {
        true => build_release(root)?,
        false => root.join("target/release/speedbench"),
    };
    let sim = SimProcess::start(0.0)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let rows = dir.path().join("one.jsonl");
    std::fs::write(
        &rows,
        "{\"question_id\": \"q\", \"turns\": [\"Say hi.\"]}\n",
    )
    .map_err(|e| e.to_string())?;
    // One run first, unmeasured: the page cache holds the binary after it.
    speedbench_once(&bin, &sim.url, &rows, &dir.path().join("warm"))?;
    let ours: Vec<ChildCost> = (0..runs)
        .map(|i| speedbench_once(&bin, &sim.url, &rows, &dir.path().join(format!("run{i}"))))
        .collect::<Result<_, _>>()?;
    println!(
        "start-up: one streamed request, process start to exit, {runs} runs each, {} cores:",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    print_costs("speedbench", &ours);
    let peer = if aiperf {
        aiperf_costs(root, &sim.url, runs.min(5), dir.path())
    } else {
        Err("--no-aiperf".into())
    };
    match peer {
        Ok(theirs) => {
            print_costs("AIPerf 0.13.0", &theirs);
            println!(
                "  speedbench's CPU per one-request run is {:.3}x AIPerf's (median over median)",
                median(&ours, |c| c.cpu_ms) / median(&theirs, |c| c.cpu_ms)
            );
        }
        Err(why) => println!("  AIPerf not measured: {why}"),
    }
    println!(
        "  vllm-bench not measured: its source and a tokenizer are not at hand offline \
         (issue #39's figure for it: ~24 ms of CPU)"
    );
    Ok(())
}

/// `target/release/speedbench`, built now.
fn build_release(root: &Path) -> Result<PathBuf, String> {
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(root)
        .args(["build", "--release", "-q", "-p", "speedbench-cli"])
        .status()
        .map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("cargo build --release failed ({status})"));
    }
    Ok(root.join("target/release/speedbench"))
}

/// One `speedbench profile` of the single row, as a user types it.
fn speedbench_once(bin: &Path, url: &str, rows: &Path, out: &Path) -> Result<ChildCost, String> {
    let mut cmd = Command::new(bin);
    cmd.args(["profile", "--url", url, "--model", "m", "--engine", "vllm"])
        .arg("--input-file")
        .arg(rows)
        .args([
            "--streaming",
            "--no-preflight",
            "--no-server-metrics",
            "--ui-type",
            "none",
        ])
        .arg("--output-artifact-dir")
        .arg(out);
    measure(cmd, "speedbench")
}

/// AIPerf's one-request profile against the same simulator, `runs` times.
fn aiperf_costs(root: &Path, url: &str, runs: usize, dir: &Path) -> Result<Vec<ChildCost>, String> {
    (0..runs)
        .map(|i| {
            let mut cmd = aiperf_profile(root, url, 1, &dir.join(format!("aiperf{i}")))?;
            cmd.args(["--request-count", "1"]);
            measure(cmd, "aiperf")
        })
        .collect()
}

/// Runs `cmd` to its end; its CPU and peak RSS by `wait4`, its wall time.
fn measure(mut cmd: Command, what: &str) -> Result<ChildCost, String> {
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
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
        let mut err = String::new();
        if let Some(mut e) = child.stderr {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        let tail: Vec<&str> = err.lines().rev().take(3).collect();
        return Err(format!(
            "{what} failed (wait status {status}): {}",
            tail.join(" | ")
        ));
    }
    let ms = |t: libc::timeval| t.tv_sec as f64 * 1e3 + t.tv_usec as f64 / 1e3;
    Ok(ChildCost {
        cpu_ms: ms(usage.ru_utime) + ms(usage.ru_stime),
        wall_ms,
        max_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

fn median(costs: &[ChildCost], field: impl Fn(&ChildCost) -> f64) -> f64 {
    let mut v: Vec<f64> = costs.iter().map(field).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn print_costs(name: &str, costs: &[ChildCost]) {
    let range = |f: &dyn Fn(&ChildCost) -> f64| {
        let lo = costs.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = costs.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        (lo, median(costs, f), hi)
    };
    let (cpu_lo, cpu, cpu_hi) = range(&|c| c.cpu_ms);
    let (_, wall, _) = range(&|c| c.wall_ms);
    let (_, rss, rss_hi) = range(&|c| c.max_rss_mib);
    println!(
        "  {name:<14} CPU {cpu:7.2} ms median (min {cpu_lo:.2}, max {cpu_hi:.2}), wall {wall:7.1} ms, \
         peak RSS {rss:.1} MiB (max {rss_hi:.1}) over {} runs",
        costs.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        let c = |cpu_ms| ChildCost {
            cpu_ms,
            wall_ms: 0.0,
            max_rss_mib: 0.0,
        };
        assert_eq!(median(&[c(3.0), c(1.0), c(2.0)], |x| x.cpu_ms), 2.0);
        assert_eq!(median(&[c(4.0), c(1.0), c(2.0), c(3.0)], |x| x.cpu_ms), 2.5);
    }

    #[test]
    fn a_child_is_measured_by_the_kernel() {
        // `sh` burning a little CPU: measured above 0, its exit checked.
        let mut busy = Command::new("sh");
        busy.args(["-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"]);
        let cost = measure(busy, "sh").unwrap();
        assert!(
            cost.cpu_ms > 0.0 && cost.wall_ms >= cost.cpu_ms * 0.5,
            "{cost:?}"
        );
        assert!(cost.max_rss_mib > 0.0);
        let mut failing = Command::new("sh");
        failing.args(["-c", "echo nope >&2; exit 3"]);
        assert!(measure(failing, "sh").unwrap_err().contains("nope"));
    }
}
