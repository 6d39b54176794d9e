//! The CPU section of `cargo xtask bench client`: client CPU time per
//! request, the figure that does not depend on how many cores the machine
//! has. For speedbench, the user + system time of this process while it
//! drives the load (the simulator runs in a child process, so none of its
//! time is counted); for AIPerf, the user + system time of every process
//! `aiperf profile` starts (the waited-for descendants' times, which the
//! kernel adds up through each parent that waits). Each level runs for
//! [`STEADY_SECONDS`] of load, so that connection set-up does not dominate,
//! and prints the concurrency it achieved beside the one asked for.

use std::path::Path;
use std::time::Duration;

use speedbench_client::{BaseUrl, Load, ProfileRun, Progress, StopHandle, Target, run_profile};

use crate::bench::{LEVELS, SimProcess, achieved_concurrency, aiperf_profile, dataset, in_flight};

/// Seconds of load at each level.
pub(crate) const STEADY_SECONDS: u64 = 10;

/// CPU seconds (user + system) of this process and of its waited-for
/// descendants, from `/proc/self/stat` (in USER_HZ, 100 per second on
/// Linux: 10 ms resolution, 0.1 % of a 10 s run).
fn cpu_seconds() -> Result<(f64, f64), String> {
    let stat =
        std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("no ) in /proc/self/stat")?;
    let f: Vec<f64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    let [utime, stime, cutime, cstime] = f[..] else {
        return Err("short /proc/self/stat".into());
    };
    Ok(((utime + stime) / 100.0, (cutime + cstime) / 100.0))
}

/// One tool at one level: requests done, CPU seconds, achieved concurrency.
struct Cost {
    /// Requests sent, warmup included (they cost CPU too).
    requests: u64,
    cpu_s: f64,
    /// Measured requests per second of the measured window.
    rate: f64,
    achieved: f64,
}

impl Cost {
    fn per_request_us(&self) -> f64 {
        self.cpu_s / self.requests.max(1) as f64 * 1e6
    }
}

/// speedbench for [`STEADY_SECONDS`] at `concurrency`.
async fn speedbench_cost(url: &str, concurrency: usize, dir: &Path) -> Result<Cost, String> {
    let target = Target::new(
        BaseUrl::parse(url).map_err(|e| e.to_string())?,
        "speedbench-sim",
    );
    let load = Load::closed_loop(concurrency)
        .with_benchmark_duration(Duration::from_secs(STEADY_SECONDS))
        .with_warmup_requests(concurrency as u64 * 4);
    let run = ProfileRun::new(dataset(256), target, dir)
        .with_load(load)
        .with_run_id(format!("cpu-c{concurrency}"));
    let (before, _) = cpu_seconds()?;
    let outcome = run_profile(
        run,
        StopHandle::new(),
        std::sync::Arc::new(Progress::default()),
    )
    .await
    .map_err(|e| e.to_string())?;
    let (after, _) = cpu_seconds()?;
    let records = speedbench_record::read_records_file(&outcome.records_path)
        .map_err(|e| format!("the records could not be read back: {e}"))?
        .records;
    let measured: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
    let (achieved, span_s) = in_flight(measured.iter().copied());
    Ok(Cost {
        requests: records.len() as u64,
        cpu_s: after - before,
        rate: measured.len() as f64 / span_s.max(1e-9),
        achieved,
    })
}

/// AIPerf for [`STEADY_SECONDS`] at `concurrency`; every process it starts
/// is counted, its start-up included.
fn aiperf_cost(root: &Path, url: &str, concurrency: usize) -> Result<Cost, String> {
    let dir = root.join(format!("target/bench-client/aiperf-cpu-c{concurrency}"));
    let mut cmd = aiperf_profile(root, url, concurrency, &dir)?;
    cmd.args(["--benchmark-duration", &STEADY_SECONDS.to_string()]);
    let (_, before) = cpu_seconds()?;
    let out = cmd.output().map_err(|e| e.to_string())?;
    let (_, after) = cpu_seconds()?;
    let json = dir.join("profile_export_aiperf.json");
    let text = std::fs::read_to_string(&json).map_err(|_| {
        let err = String::from_utf8_lossy(&out.stderr);
        format!(
            "no {} ({})",
            json.display(),
            err.lines().last().unwrap_or("")
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let number = |p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_f64)
            .ok_or(format!("no {p}"))
    };
    Ok(Cost {
        requests: number("/request_count/avg")? as u64,
        cpu_s: after - before,
        rate: number("/request_throughput/avg")?,
        achieved: achieved_concurrency(
            number("/request_latency/sum")? / 1e3,
            number("/benchmark_duration/avg")?,
        ),
    })
}

/// Prints the section: per level, each tool's CPU per request and the
/// ratio, with the concurrency each achieved.
pub(crate) async fn cpu_section(root: &Path, out: &Path, aiperf: bool) -> Result<(), String> {
    let sim = SimProcess::start(0.0)?;
    println!();
    println!(
        "client CPU time per request (user + system; speedbench: this process, the simulator in another; AIPerf: every process it starts, start-up included), {STEADY_SECONDS} s of load per level, {} cores on this machine:",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>11} {:>9} {:>9} {:>10} {:>12} {:>9} {:>9} {:>10} {:>12} {:>7}",
        "concurrency",
        "sb reqs",
        "achieved",
        "sb req/s",
        "sb CPU µs/req",
        "ai reqs",
        "achieved",
        "ai req/s",
        "ai CPU µs/req",
        "ratio"
    );
    for c in LEVELS {
        let sb = speedbench_cost(&sim.url, c, &out.join(format!("cpu-c{c}"))).await?;
        let ai = if aiperf {
            aiperf_cost(root, &sim.url, c)
                .map_err(|e| eprintln!("aiperf at concurrency {c}: {e}"))
                .ok()
        } else {
            None
        };
        let dash = || "-".to_string();
        println!(
            "{c:>11} {:>9} {:>9.1} {:>10.0} {:>12.1} {:>9} {:>9} {:>10} {:>12} {:>7}",
            sb.requests,
            sb.achieved,
            sb.rate,
            sb.per_request_us(),
            ai.as_ref().map_or_else(dash, |a| a.requests.to_string()),
            ai.as_ref()
                .map_or_else(dash, |a| format!("{:.1}", a.achieved)),
            ai.as_ref().map_or_else(dash, |a| format!("{:.0}", a.rate)),
            ai.as_ref()
                .map_or_else(dash, |a| format!("{:.1}", a.per_request_us())),
            ai.as_ref().map_or_else(dash, |a| format!(
                "{:.1}x",
                a.per_request_us() / sb.per_request_us()
            )),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_spent_some_cpu_and_its_children_none_yet() {
        let (own, children) = cpu_seconds().unwrap();
        assert!(own >= 0.0 && children >= 0.0);
        // Spin a little: the figure only grows.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(cpu_seconds().unwrap().0 >= own);
    }
}
