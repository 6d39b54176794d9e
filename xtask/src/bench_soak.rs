//! `cargo xtask bench soak [--requests 10000,1000000] [--concurrency 64]
//! [--no-build]`: whether a run's memory grows with its length (issue #38
//! point 8: a 1,000,000-request run at c=64 should peak within 10 % of a
//! 10,000-request run).
//!
//! The release `speedbench profile` runs each request count in turn at the
//! same concurrency against the simulator in its own process (zero delay,
//! streamed answers, the Rust peer section's prompts, `/metrics` scraped as
//! by default), each a process of its own measured by the kernel's `wait4`
//! through the helper process (module `child_cost`): its peak RSS, CPU and
//! wall time, and the request rate from its `summary.json`. The peak of
//! each longer run is printed as a ratio of the first's, against the 1.10
//! the issue sets.

use std::path::Path;

use crate::bench::SimProcess;
use crate::bench_peer::{PeerRun, speedbench_run, write_prompts};

/// The bound on the longest run's peak over the shortest's.
const GROWTH_LIMIT: f64 = 1.10;

/// Parsed options.
#[derive(Debug)]
struct Options {
    requests: Vec<u64>,
    concurrency: usize,
    build: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        requests: vec![10_000, 1_000_000],
        concurrency: 64,
        build: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--requests" => {
                let list = it
                    .next()
                    .ok_or("--requests needs counts, e.g. 10000,1000000")?;
                o.requests = (list.split(','))
                    .map(|n| n.trim().parse().ok().filter(|&n: &u64| n > 0))
                    .collect::<Option<_>>()
                    .ok_or_else(|| format!("--requests {list}: positive whole numbers"))?;
            }
            "--concurrency" => {
                o.concurrency = (it.next())
                    .and_then(|v| v.parse().ok())
                    .filter(|&c| c > 0)
                    .ok_or("--concurrency needs a positive number")?;
            }
            "--no-build" => o.build = false,
            other => return Err(format!("bench soak: unknown argument {other}")),
        }
    }
    if o.requests.len() < 2 {
        return Err("--requests needs two counts or more: the first is the baseline".into());
    }
    Ok(o)
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let bin = match o.build {
        true => crate::bench_startup::build_release(root)?,
        false => root.join("target/release/speedbench"),
    };
    let sim = SimProcess::start(0.0)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (rows, _) = write_prompts(dir.path())?;
    println!(
        "soak memory: `speedbench profile` at c={} against the simulator in its own process (zero delay, streamed), each count its own process; peak RSS by wait4, {} cores:",
        o.concurrency,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:>10} {:>8} {:>10} {:>10} {:>10} {:>8} {:>8}",
        "requests", "failed", "req/s", "wall s", "peak MiB", "ratio", "goal"
    );
    let mut baseline = None;
    for &n in &o.requests {
        let out = dir.path().join(format!("run-{n}"));
        let run = speedbench_run(&bin, &sim.url, &rows, (n, o.concurrency), &out)?;
        let base = *baseline.get_or_insert(run.cost.max_rss_mib);
        println!("{}", row(n, &run, base));
        // Each run's records go with it: a million of them is ~30 MB.
        let _ = std::fs::remove_dir_all(&out);
    }
    Ok(())
}

/// One count's line: its figures, its peak over the baseline's and whether
/// that is within [`GROWTH_LIMIT`].
fn row(requests: u64, run: &PeerRun, baseline_mib: f64) -> String {
    let ratio = run.cost.max_rss_mib / baseline_mib;
    let goal = if ratio <= GROWTH_LIMIT {
        "met"
    } else {
        "not met"
    };
    format!(
        "{requests:>10} {:>8} {:>10.0} {:>10.1} {:>10.1} {ratio:>7.2}x {goal:>8}",
        run.failed,
        run.rate,
        run.cost.wall_ms / 1e3,
        run.cost.max_rss_mib,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::child_cost::ChildCost;

    #[test]
    fn counts_parse_and_a_lone_count_is_refused() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let o = parse(&args(&["--requests", "100, 2000", "--concurrency", "8"])).unwrap();
        assert_eq!((o.requests, o.concurrency), (vec![100, 2000], 8));
        assert!(
            parse(&args(&["--requests", "100"]))
                .unwrap_err()
                .contains("two counts")
        );
        assert!(parse(&args(&["--requests", "100,0"])).is_err());
    }

    #[test]
    fn the_ratio_is_the_peak_over_the_baselines() {
        let run = |mib| PeerRun {
            cost: ChildCost {
                user_ms: 0.0,
                system_ms: 0.0,
                wall_ms: 2_000.0,
                max_rss_mib: mib,
            },
            completed: 10,
            failed: 0,
            rate: 5.0,
        };
        // 44 / 40 = 1.10: at the limit is met; 48 / 40 = 1.20 is not.
        assert!(row(10, &run(44.0), 40.0).contains(" 1.10x      met"));
        assert!(row(10, &run(48.0), 40.0).contains(" 1.20x  not met"));
    }
}
