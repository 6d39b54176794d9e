//! `cargo xtask bench startup [--runs N] [--no-aiperf] [--no-build]
//! [--peer-vllm-bench PATH]`: what a run of one
//! request costs from process start to exit (issue #39 point 5: keep it
//! near the ~11.5 ms of CPU it was while features are added).
//!
//! The release `speedbench` binary runs `profile` of one streamed request
//! against the simulator (in another process) N times; each run's user and
//! system CPU time and peak RSS come from the kernel's `wait4` accounting
//! of that child (microseconds, not `/proc`'s 10 ms ticks), and its wall
//! time from start to exit. AIPerf's one-request `aiperf profile` is the
//! peer measured in the same run (where `target/bench-venv` has it or pip
//! can install it), and vLLM's Rust client `vllm-bench` where
//! `--peer-vllm-bench` names a binary (the same one-request run from its
//! custom JSONL, measured the same way and as many times, alternating with
//! speedbench's runs); the output says which peers were not measured.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench::{SimProcess, aiperf_profile};
use crate::bench_peer::VllmBench;
use crate::child_cost::{ChildCost, measure, median};

/// Runs of each tool by default.
const DEFAULT_RUNS: usize = 20;

/// Parsed options.
struct Options {
    runs: usize,
    aiperf: bool,
    build: bool,
    vllm_bench: Option<VllmBench>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        runs: DEFAULT_RUNS,
        aiperf: true,
        build: true,
        vllm_bench: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => {
                o.runs = (it.next().ok_or("--runs needs a number")?)
                    .parse()
                    .map_err(|e| format!("--runs: {e}"))?;
            }
            "--no-aiperf" => o.aiperf = false,
            "--no-build" => o.build = false,
            "--peer-vllm-bench" => {
                let path = it.next().ok_or("--peer-vllm-bench needs a path")?;
                o.vllm_bench = Some(VllmBench::new(Path::new(path))?);
            }
            other => return Err(format!("bench startup: unknown argument {other}")),
        }
    }
    Ok(o)
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    let bin = match o.build {
        true => build_release(root)?,
        false => root.join("target/release/speedbench"),
    };
    let sim = SimProcess::start(0.0)?;
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let (ours, rust_peer) = rust_runs(&o, &bin, &sim.url, dir.path())?;
    println!(
        "start-up: one streamed request, process start to exit, {} runs each, {} cores:",
        o.runs,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    print_costs("speedbench", &ours);
    let peer = if o.aiperf {
        aiperf_costs(root, &sim.url, o.runs.min(5), dir.path())
    } else {
        Err("--no-aiperf".into())
    };
    let ratio =
        |theirs: &[ChildCost]| median(&ours, ChildCost::cpu_ms) / median(theirs, ChildCost::cpu_ms);
    match peer {
        Ok(theirs) => {
            print_costs("AIPerf 0.13.0", &theirs);
            println!(
                "  speedbench's CPU per one-request run is {:.3}x AIPerf's (median over median)",
                ratio(&theirs)
            );
        }
        Err(why) => println!("  AIPerf not measured: {why}"),
    }
    match rust_peer {
        Some(theirs) => {
            print_costs("vllm-bench", &theirs);
            println!(
                "  speedbench's CPU per one-request run is {:.3}x vllm-bench's (median over median)",
                ratio(&theirs)
            );
        }
        None => println!(
            "  vllm-bench not measured: no --peer-vllm-bench PATH (docs/benchmarks.md says how to build it)"
        ),
    }
    Ok(())
}

/// speedbench's one-request runs and, with `--peer-vllm-bench`,
/// vllm-bench's, alternating (each tool's first run unmeasured: the page
/// cache holds its binary after it).
fn rust_runs(
    o: &Options,
    bin: &Path,
    url: &str,
    dir: &Path,
) -> Result<(Vec<ChildCost>, Option<Vec<ChildCost>>), String> {
    let rows = dir.join("one.jsonl");
    std::fs::write(
        &rows,
        "{\"question_id\": \"q\", \"turns\": [\"Say hi.\"]}\n",
    )
    .map_err(|e| e.to_string())?;
    let custom = dir.join("one-custom.jsonl");
    std::fs::write(&custom, "{\"prompt\": \"Say hi.\"}\n").map_err(|e| e.to_string())?;
    let ours = |i: usize| speedbench_once(bin, url, &rows, &dir.join(format!("run{i}")));
    let theirs =
        |v: &VllmBench, i: usize| v.run_once(url, &custom, &dir.join(format!("vllm-bench{i}")));
    ours(o.runs)?;
    if let Some(v) = &o.vllm_bench {
        theirs(v, o.runs)?;
    }
    let (mut mine, mut peer) = (Vec::new(), Vec::new());
    for i in 0..o.runs {
        mine.push(ours(i)?);
        if let Some(v) = &o.vllm_bench {
            peer.push(theirs(v, i)?);
        }
    }
    Ok((mine, o.vllm_bench.as_ref().map(|_| peer)))
}

/// `target/release/speedbench`, built now.
pub(crate) fn build_release(root: &Path) -> Result<PathBuf, String> {
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

/// One `speedbench profile` of the single row, as a user types it
/// (without `/metrics`, as this figure has been measured from the first).
fn speedbench_once(bin: &Path, url: &str, rows: &Path, out: &Path) -> Result<ChildCost, String> {
    let mut cmd = crate::bench_peer::speedbench_command(bin, url, rows, (1, 1), out);
    cmd.arg("--no-server-metrics");
    measure(cmd, "speedbench", &out.join("stderr.log"))
}

/// AIPerf's one-request profile against the same simulator, `runs` times.
fn aiperf_costs(root: &Path, url: &str, runs: usize, dir: &Path) -> Result<Vec<ChildCost>, String> {
    (0..runs)
        .map(|i| {
            let mut cmd = aiperf_profile(root, url, 1, &dir.join(format!("aiperf{i}")))?;
            cmd.args(["--request-count", "1"]);
            measure(cmd, "aiperf", &dir.join(format!("aiperf{i}.stderr.log")))
        })
        .collect()
}

fn print_costs(name: &str, costs: &[ChildCost]) {
    let range = |f: &dyn Fn(&ChildCost) -> f64| {
        let lo = costs.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = costs.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        (lo, median(costs, f), hi)
    };
    let (cpu_lo, cpu, cpu_hi) = range(&|c| c.cpu_ms());
    let (_, wall, _) = range(&|c| c.wall_ms);
    let (_, rss, rss_hi) = range(&|c| c.max_rss_mib);
    println!(
        "  {name:<14} CPU {cpu:7.2} ms median (min {cpu_lo:.2}, max {cpu_hi:.2}), wall {wall:7.1} ms, \
         peak RSS {rss:.1} MiB (max {rss_hi:.1}) over {} runs",
        costs.len()
    );
}
