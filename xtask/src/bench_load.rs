//! `cargo xtask bench load`: the load generator at scale against the
//! simulated server, watching the client process from outside.
//!
//! Builds the release binary, starts `speedbench sim` (zero delays) and
//! `speedbench profile` (streaming) as separate processes, samples the
//! profile process's `/proc/<pid>/fd` count and `VmHWM` (peak resident set,
//! kept by the kernel) every 5 ms, and prints wall time, request rate, peak
//! RSS, peak open file descriptors and failed requests (from the run's
//! `summary.json`).
//!
//! Options: `--requests N` (default 10000), `--concurrency C` (default
//! 1024), `--no-build` (use the existing release binary).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Parsed options.
struct Options {
    requests: u64,
    concurrency: u64,
    build: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        requests: 10_000,
        concurrency: 1_024,
        build: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&v| v > 0)
                .ok_or_else(|| format!("{name} needs a positive integer"))
        };
        match a.as_str() {
            "--requests" => o.requests = num("--requests")?,
            "--concurrency" => o.concurrency = num("--concurrency")?,
            "--no-build" => o.build = false,
            other => return Err(format!("bench load: unknown option {other:?}")),
        }
    }
    Ok(o)
}

/// Peak resident set (`VmHWM`) of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Open file descriptors of a live process.
fn fd_count(pid: u32) -> Option<u64> {
    Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
}

/// Peaks observed while sampling one process.
#[derive(Default)]
struct Peaks {
    rss_kib: u64,
    fds: u64,
}

impl Peaks {
    fn sample(&mut self, pid: u32) {
        if let Some(r) = peak_rss_kib(pid) {
            self.rss_kib = self.rss_kib.max(r);
        }
        if let Some(f) = fd_count(pid) {
            self.fds = self.fds.max(f);
        }
    }
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the benchmark.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    if o.build {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--release", "-p", "speedbench-cli"])
            .current_dir(root)
            .status()
            .map_err(|e| format!("cargo build: {e}"))?;
        if !status.success() {
            return Err("cargo build --release -p speedbench-cli failed".into());
        }
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let bin = target.join("release").join("speedbench");
    if !bin.is_file() {
        return Err(format!("{} not found (build it first)", bin.display()));
    }

    let mut sim = KillOnDrop(
        Command::new(&bin)
            .args(["sim", "--port", "0", "--ttft-ms", "0", "--step-ms", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting the simulator: {e}"))?,
    );
    let mut url = String::new();
    BufReader::new(sim.0.stdout.take().ok_or("no simulator stdout")?)
        .read_line(&mut url)
        .map_err(|e| format!("reading the simulator URL: {e}"))?;
    let url = url.trim().to_owned();
    if url.is_empty() {
        return Err("the simulator printed no URL".into());
    }

    let out_dir =
        std::env::temp_dir().join(format!("speedbench-bench-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let fixture = root.join("fixtures").join("speed_bench_mini.jsonl");
    let (requests, concurrency) = (o.requests.to_string(), o.concurrency.to_string());
    let started = Instant::now();
    let mut profile = KillOnDrop(
        Command::new(&bin)
            .args([
                "profile",
                "--url",
                &url,
                "-m",
                "speedbench-sim",
                "--streaming",
            ])
            .args(["--input-file", &fixture.to_string_lossy()])
            .args(["--request-count", &requests, "--concurrency", &concurrency])
            // Scrape /metrics as usual, but do not wait after the run.
            .args(["--server-metrics-shutdown-delay", "0"])
            .args(["--output-artifact-dir", &out_dir.to_string_lossy()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the profile: {e}"))?,
    );
    let stderr = profile.0.stderr.take();
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut s) = stderr {
            let _ = std::io::Read::read_to_string(&mut s, &mut text);
        }
        text
    });
    let (pid, sim_pid) = (profile.0.id(), sim.0.id());
    let (mut client, mut server) = (Peaks::default(), Peaks::default());
    let status = loop {
        client.sample(pid);
        server.sample(sim_pid);
        match profile.0.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for the profile: {e}")),
        }
    };
    let wall = started.elapsed();
    let stderr_text = stderr_reader.join().unwrap_or_default();
    if !status.success() {
        return Err(format!("the profile failed ({status}):\n{stderr_text}"));
    }
    let summary: serde_json::Value = std::fs::read(out_dir.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("the run left no readable summary.json")?;
    let counts = &summary["counts"];
    let failed = counts["failed"].as_u64().unwrap_or(u64::MAX);
    let succeeded = counts["succeeded"].as_u64().unwrap_or(0);
    let _ = std::fs::remove_dir_all(&out_dir);

    let secs = wall.as_secs_f64();
    println!(
        "bench load: {} requests, concurrency {}, streaming, zero-delay simulator",
        o.requests, o.concurrency
    );
    println!("  wall time            {secs:.2} s (process start to exit, release build)");
    println!(
        "  request rate         {:.0} req/s",
        o.requests as f64 / secs
    );
    if let Some(t) = summary["request_throughput"].as_f64() {
        println!("  measured throughput  {t:.0} req/s (the run's own summary)");
    }
    println!("  succeeded / failed   {succeeded} / {failed}");
    println!(
        "  client peak RSS      {:.1} MiB",
        client.rss_kib as f64 / 1024.0
    );
    println!("  client peak fds      {}", client.fds);
    println!(
        "  server peak RSS      {:.1} MiB",
        server.rss_kib as f64 / 1024.0
    );
    println!("  server peak fds      {}", server.fds);
    if failed != 0 || succeeded != o.requests {
        return Err(format!(
            "{failed} requests failed, {succeeded} of {} succeeded",
            o.requests
        ));
    }
    Ok(())
}
