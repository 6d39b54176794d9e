//! The Rust peer, side by side (issue #39 points 1 and 2): `cargo xtask
//! bench client --peer-vllm-bench PATH` runs vLLM's Rust benchmark client
//! `vllm-bench` and the release `speedbench` binary as whole processes,
//! the same way, against the same simulator (its own process, zero delay,
//! [`OUTPUT_TOKENS`] streamed tokens per answer), on the same prompts, over
//! streamed chat completions, at c = 1, 64 and 1024.
//!
//! Each level runs `rounds` times per tool, the two Rust clients
//! alternating (which goes first swaps every round), so both see the same
//! noise on a busy machine. Per run: CPU (user and system) and peak RSS
//! from the kernel's `wait4` accounting of the child, start-up included;
//! the request rate each tool reports for its own run (speedbench's
//! `summary.json`, vllm-bench's result JSON); failures from the same files.
//! The medians are printed with the ratios the issue sets goals for: CPU
//! per request at most 40 % of vllm-bench's, the rate ahead at every level,
//! and user-space CPU no more than the kernel's (system) time.
//!
//! Both tools do what a user gets by default beside the load: speedbench
//! writes its Parquet records and `summary.json`; vllm-bench writes its
//! result JSON with per-request details (`--save-result --save-detailed`,
//! its nearest equal of the records), tokenizing the prompts with its
//! built-in GPT-2 encoding (`--tokenizer gpt2`, no download). Both read
//! the server's `/metrics` (vllm-bench before and after its run for the
//! speculative-decoding counters, speedbench through its run); neither
//! checks readiness first.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench::{LEVELS, OUTPUT_TOKENS, SimProcess};
use crate::child_cost::{ChildCost, measure, median};

/// Prompts in the shared dataset: distinct rows, cycled by both tools.
const PROMPTS: usize = 256;

/// The goal for speedbench's CPU per request over vllm-bench's.
const CPU_RATIO_GOAL: f64 = 0.40;

/// One tool's run: what the kernel accounted and what the tool reported.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PeerRun {
    pub(crate) cost: ChildCost,
    /// Requests the tool reports as completed.
    pub(crate) completed: u64,
    pub(crate) failed: u64,
    /// Requests per second, as the tool computes it for its own run.
    pub(crate) rate: f64,
}

impl PeerRun {
    /// `ms` of the run's CPU as microseconds per request sent (failed ones
    /// included).
    fn per_request_us(&self, ms: f64) -> f64 {
        ms * 1e3 / (self.completed + self.failed).max(1) as f64
    }

    /// CPU microseconds per request sent (user + system, start-up included).
    fn cpu_us_per_request(&self) -> f64 {
        self.per_request_us(self.cost.cpu_ms())
    }
}

/// A vllm-bench binary the user built (docs/benchmarks.md says how).
pub(crate) struct VllmBench {
    bin: PathBuf,
}

impl VllmBench {
    /// Checks that `bin` is a file before any level runs.
    pub(crate) fn new(bin: &Path) -> Result<VllmBench, String> {
        if !bin.is_file() {
            return Err(format!(
                "--peer-vllm-bench {}: no such file (docs/benchmarks.md says how to build vllm-bench)",
                bin.display()
            ));
        }
        Ok(VllmBench {
            bin: bin.to_path_buf(),
        })
    }

    /// `requests` streamed chat completions at `concurrency` from the
    /// custom JSONL at `prompts`, results into `out`.
    fn command(
        &self,
        url: &str,
        prompts: &Path,
        (requests, concurrency): (u64, usize),
        out: &Path,
    ) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--backend", "openai-chat", "--base-url", url])
            .args(["--endpoint", "/v1/chat/completions"])
            .args(["--model", "speedbench-sim", "--tokenizer", "gpt2"])
            .args(["--dataset-name", "custom", "--dataset-path"])
            .arg(prompts)
            .args(["--custom-output-len", &OUTPUT_TOKENS.to_string()])
            .args(["--num-prompts", &requests.to_string()])
            .args(["--max-concurrency", &concurrency.to_string()])
            .args(["--num-warmups", "0", "--disable-tqdm"])
            .args(["--save-result", "--save-detailed", "--result-dir"])
            .arg(out)
            .args(["--result-filename", "result.json"]);
        cmd
    }

    /// One request from the one-row JSONL at `prompt`: what it costs from
    /// start to exit.
    pub(crate) fn run_once(
        &self,
        url: &str,
        prompt: &Path,
        out: &Path,
    ) -> Result<ChildCost, String> {
        Ok(self.run(url, prompt, (1, 1), out)?.cost)
    }

    /// One measured run.
    fn run(
        &self,
        url: &str,
        prompts: &Path,
        load: (u64, usize),
        out: &Path,
    ) -> Result<PeerRun, String> {
        let cost = measure(
            self.command(url, prompts, load, out),
            "vllm-bench",
            &out.join("stderr.log"),
        )?;
        let path = out.join("result.json");
        let (completed, failed, rate) = vllm_bench_figures(&read_json(&path)?)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(PeerRun {
            cost,
            completed,
            failed,
            rate,
        })
    }
}

/// `speedbench profile` of `requests` streamed chat completions at
/// `concurrency` from the rows at `rows`, artifacts into `out`; the caller
/// says whether `/metrics` is scraped.
pub(crate) fn speedbench_command(
    bin: &Path,
    url: &str,
    rows: &Path,
    (requests, concurrency): (u64, usize),
    out: &Path,
) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args([
        "profile",
        "--url",
        url,
        "--model",
        "speedbench-sim",
        "--engine",
        "vllm",
    ])
    .arg("--input-file")
    .arg(rows)
    .args(["--request-count", &requests.to_string()])
    .args(["--concurrency", &concurrency.to_string()])
    .args(["--osl", &OUTPUT_TOKENS.to_string()])
    .args(["--streaming", "--no-preflight", "--ui-type", "none"])
    .arg("--output-artifact-dir")
    .arg(out);
    cmd
}

/// One measured speedbench run.
pub(crate) fn speedbench_run(
    bin: &Path,
    url: &str,
    rows: &Path,
    load: (u64, usize),
    out: &Path,
) -> Result<PeerRun, String> {
    let mut cmd = speedbench_command(bin, url, rows, load, out);
    // /metrics scraped as by default (vllm-bench reads it before and after
    // its run too), without waiting after the run.
    cmd.args(["--server-metrics-shutdown-delay", "0"]);
    let cost = measure(cmd, "speedbench", &out.join("stderr.log"))?;
    let path = out.join("summary.json");
    let (completed, failed, rate) =
        speedbench_figures(&read_json(&path)?).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(PeerRun {
        cost,
        completed,
        failed,
        rate,
    })
}

/// `(completed, failed, requests per second)` from vllm-bench's result
/// JSON (`--save-result`).
fn vllm_bench_figures(v: &serde_json::Value) -> Result<(u64, u64, f64), String> {
    let number = |key: &str| v[key].as_f64().ok_or_else(|| format!("no number `{key}`"));
    Ok((
        number("completed")? as u64,
        number("failed")? as u64,
        number("request_throughput")?,
    ))
}

/// `(succeeded, failed, requests per second)` from speedbench's
/// `summary.json`.
fn speedbench_figures(v: &serde_json::Value) -> Result<(u64, u64, f64), String> {
    let count = |p: &str| {
        v.pointer(p)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| format!("no count {p}"))
    };
    let rate = v
        .pointer("/request_throughput")
        .and_then(serde_json::Value::as_f64)
        .ok_or("no request_throughput")?;
    Ok((count("/counts/succeeded")?, count("/counts/failed")?, rate))
}

fn read_json(path: &Path) -> Result<serde_json::Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// The same prompts in each tool's format: speedbench's rows (`turns`) and
/// vllm-bench's custom JSONL (`prompt`).
pub(crate) fn write_prompts(dir: &Path) -> Result<(PathBuf, PathBuf), String> {
    let mut rows = String::new();
    let mut custom = String::new();
    for i in 0..PROMPTS {
        let prompt = format!("[bench {i}] Write a short answer about item {i}.");
        rows.push_str(
            &serde_json::json!({"question_id": format!("r{i}"), "turns": [prompt]}).to_string(),
        );
        rows.push('\n');
        custom.push_str(&serde_json::json!({"prompt": prompt}).to_string());
        custom.push('\n');
    }
    let (a, b) = (dir.join("rows.jsonl"), dir.join("custom.jsonl"));
    std::fs::write(&a, rows).map_err(|e| format!("{}: {e}", a.display()))?;
    std::fs::write(&b, custom).map_err(|e| format!("{}: {e}", b.display()))?;
    Ok((a, b))
}

/// What the section needs: the two binaries, the load and the rounds.
pub(crate) struct PeerBench<'a> {
    pub(crate) speedbench: &'a Path,
    pub(crate) vllm_bench: &'a VllmBench,
    pub(crate) requests: u64,
    pub(crate) rounds: usize,
}

/// Prints the section: per level the medians of each tool and the ratios.
pub(crate) fn peer_section(bench: &PeerBench<'_>, out: &Path) -> Result<(), String> {
    let sim = SimProcess::start(0.0)?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let (rows, custom) = write_prompts(out)?;
    println!();
    println!(
        "the Rust peer: speedbench vs vllm-bench ({}), both as processes against the simulator in its own process (zero delay, {OUTPUT_TOKENS} streamed tokens, chat completions, {PROMPTS} prompts), {} requests per run, {} rounds per level alternating which goes first; CPU (user + system, start-up included) and peak RSS by wait4, rates as each tool reports its own run; medians; {} cores on this machine:",
        bench.vllm_bench.bin.display(),
        bench.requests,
        bench.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:>11} {:>9} {:>9} {:>6} {:>15} {:>15} {:>9} {:>7} {:>9} {:>9} {:>7}",
        "concurrency",
        "sb req/s",
        "vb req/s",
        "rate",
        "sb µs/req u+s",
        "vb µs/req u+s",
        "CPU",
        "goal",
        "sb MiB",
        "vb MiB",
        "failed"
    );
    for c in LEVELS {
        let (ours, theirs) = level_runs(bench, &sim.url, (&rows, &custom), c, out)?;
        print_level(c, &ours, &theirs);
    }
    println!(
        "  rate = speedbench's / vllm-bench's (goal: above 1 at every level); CPU = speedbench's CPU per request / vllm-bench's (goal: at most {CPU_RATIO_GOAL:.2}); µs/req u+s = user + system; failed = speedbench's + vllm-bench's failed requests over every round"
    );
    Ok(())
}

/// Both tools' runs at one level, alternating.
fn level_runs(
    bench: &PeerBench<'_>,
    url: &str,
    (rows, custom): (&Path, &Path),
    c: usize,
    out: &Path,
) -> Result<(Vec<PeerRun>, Vec<PeerRun>), String> {
    let load = (bench.requests, c);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..bench.rounds {
        let dir = |tool: &str| out.join(format!("c{c}-{round}-{tool}"));
        let sb = || speedbench_run(bench.speedbench, url, rows, load, &dir("speedbench"));
        let vb = || bench.vllm_bench.run(url, custom, load, &dir("vllm-bench"));
        if round % 2 == 0 {
            ours.push(sb()?);
            theirs.push(vb()?);
        } else {
            theirs.push(vb()?);
            ours.push(sb()?);
        }
    }
    Ok((ours, theirs))
}

fn print_level(c: usize, ours: &[PeerRun], theirs: &[PeerRun]) {
    let rate = |runs: &[PeerRun]| median(runs, |r| r.rate);
    let cpu = |runs: &[PeerRun]| median(runs, PeerRun::cpu_us_per_request);
    let split = |runs: &[PeerRun]| {
        let user = median(runs, |r| r.per_request_us(r.cost.user_ms));
        let system = median(runs, |r| r.per_request_us(r.cost.system_ms));
        format!("{user:.1}+{system:.1}")
    };
    let rss = |runs: &[PeerRun]| median(runs, |r| r.cost.max_rss_mib);
    let failed = |runs: &[PeerRun]| runs.iter().map(|r| r.failed).sum::<u64>();
    let cpu_ratio = cpu(ours) / cpu(theirs);
    println!(
        "{c:>11} {:>9.0} {:>9.0} {:>5.2}x {:>15} {:>15} {:>8.2}x {:>7} {:>9.1} {:>9.1} {:>7}",
        rate(ours),
        rate(theirs),
        rate(ours) / rate(theirs),
        split(ours),
        split(theirs),
        cpu_ratio,
        if cpu_ratio <= CPU_RATIO_GOAL {
            "met"
        } else {
            "not met"
        },
        rss(ours),
        rss(theirs),
        format!("{}+{}", failed(ours), failed(theirs)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tool_s_own_counts_and_rate_are_read() {
        // The keys of a real vllm-bench 0.1.0 result (f313182) against the
        // simulator, trimmed.
        let vb = serde_json::json!({"completed": 50, "failed": 2, "request_throughput": 3754.64, "duration": 0.0133});
        assert_eq!(vllm_bench_figures(&vb).unwrap(), (50, 2, 3754.64));
        assert!(
            vllm_bench_figures(&serde_json::json!({"completed": 50}))
                .unwrap_err()
                .contains("failed")
        );
        let sb = serde_json::json!({"outcome": "completed", "counts": {"total": 52, "succeeded": 50, "failed": 2}, "request_throughput": 1000.5});
        assert_eq!(speedbench_figures(&sb).unwrap(), (50, 2, 1000.5));
        assert!(speedbench_figures(&serde_json::json!({"counts": {}})).is_err());
    }

    #[test]
    fn cpu_per_request_counts_failed_requests_too() {
        let run = PeerRun {
            cost: ChildCost {
                user_ms: 30.0,
                system_ms: 10.0,
                wall_ms: 100.0,
                max_rss_mib: 10.0,
            },
            completed: 900,
            failed: 100,
            rate: 0.0,
        };
        // 40 ms over 1,000 requests sent.
        assert!((run.cpu_us_per_request() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn both_tools_get_the_same_prompts() {
        let dir = tempfile::tempdir().unwrap();
        let (rows, custom) = write_prompts(dir.path()).unwrap();
        let read = |p: &Path| -> Vec<serde_json::Value> {
            std::fs::read_to_string(p)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let (rows, custom) = (read(&rows), read(&custom));
        assert_eq!(rows.len(), PROMPTS);
        for (r, c) in rows.iter().zip(&custom) {
            assert_eq!(r["turns"][0], c["prompt"]);
        }
    }
}
