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
//! 1024), `--ttft-ms MS` (the simulator's time to first token, default 0;
//! with enough of it every request is in flight at once), `--local-addrs N`
//! (spread the client's connections over 127.0.0.2 .. 127.0.0.(N+1) with
//! `--local-addr`; by default one address per 16,000 connections when the
//! concurrency exceeds that, so ephemeral ports suffice), `--no-build` (use
//! the existing release binary).
//!
//! `--case 100k` is the high-concurrency case: 100,000 streams at once
//! (`--requests 100000 --concurrency 100000 --ttft-ms 5000`), reporting
//! peak RSS, memory per in-flight request and failures. The client and
//! the simulator each need one file descriptor per connection: the bench
//! refuses up front, naming the limit, when the hard open-file limit of
//! this process (which both children inherit) is too low.
//!
//! Memory per in-flight request (printed when every request is in flight
//! at once: no more requests than the concurrency, and a TTFT) is the
//! client's peak RSS minus the peak RSS of a one-request run of the same
//! command, divided by the number of requests.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Parsed options.
struct Options {
    requests: u64,
    concurrency: u64,
    ttft_ms: u64,
    local_addrs: Option<u64>,
    build: bool,
}

/// Connections per source address when the count is chosen automatically
/// (the default ephemeral port range, 32768-60999, holds 28,232).
const CONNECTIONS_PER_ADDR: u64 = 16_000;

/// Open files each process needs beyond one per connection.
const FD_SLACK: u64 = 512;

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        requests: 10_000,
        concurrency: 1_024,
        ttft_ms: 0,
        local_addrs: None,
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
            "--ttft-ms" => {
                o.ttft_ms = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .ok_or("--ttft-ms needs a whole number of milliseconds")?
            }
            "--local-addrs" => {
                let n: u64 = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&n| n <= 250)
                    .ok_or("--local-addrs needs a count from 0 to 250")?;
                o.local_addrs = Some(n);
            }
            "--case" => match it.next().map(String::as_str) {
                Some("100k") => {
                    o.requests = 100_000;
                    o.concurrency = 100_000;
                    o.ttft_ms = 5_000;
                }
                other => return Err(format!("--case: unknown case {other:?} (known: 100k)")),
            },
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

/// The source addresses for `--local-addr`: 127.0.0.2 onwards.
fn local_addrs(o: &Options) -> Vec<String> {
    let n = o
        .local_addrs
        .unwrap_or(if o.concurrency > CONNECTIONS_PER_ADDR {
            o.concurrency.div_ceil(CONNECTIONS_PER_ADDR)
        } else {
            0
        });
    (0..n).map(|i| format!("127.0.0.{}", i + 2)).collect()
}

/// The profile command, with `requests` requests at `concurrency`.
fn profile_command(
    bin: &Path,
    url: &str,
    fixture: &Path,
    addrs: &[String],
    (requests, concurrency): (u64, u64),
    out_dir: &Path,
) -> Command {
    let mut cmd = Command::new(bin);
    cmd.args([
        "profile",
        "--url",
        url,
        "-m",
        "speedbench-sim",
        "--streaming",
    ])
    .args(["--input-file", &fixture.to_string_lossy()])
    .args(["--request-count", &requests.to_string()])
    .args(["--concurrency", &concurrency.to_string()])
    // Scrape /metrics as usual, but do not wait after the run.
    .args(["--server-metrics-shutdown-delay", "0"])
    .args(["--output-artifact-dir", &out_dir.to_string_lossy()])
    // Nothing times out while every stream waits for its first token.
    .args(["--timeout", "1200"])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if !addrs.is_empty() {
        cmd.args(["--local-addr", &addrs.join(",")]);
    }
    cmd
}

/// Runs `cmd` to its end, sampling it (and `sim_pid`) every 5 ms; returns
/// the exit status, its stderr and the peaks.
fn watch(
    mut cmd: Command,
    sim_pid: u32,
    server: &mut Peaks,
) -> Result<(std::process::ExitStatus, String, Peaks), String> {
    let mut profile = KillOnDrop(
        cmd.spawn()
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
    let pid = profile.0.id();
    let mut client = Peaks::default();
    let status = loop {
        client.sample(pid);
        server.sample(sim_pid);
        match profile.0.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("waiting for the profile: {e}")),
        }
    };
    Ok((status, stderr_reader.join().unwrap_or_default(), client))
}

/// Runs the benchmark.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let o = parse(args)?;
    // Both children inherit this process's limits and raise their soft
    // limit to the hard one; a hard limit too low cannot be helped here.
    let fd_limit = speedbench::process::raise_open_files(u64::MAX);
    if let Some(limit) = fd_limit
        && limit < o.concurrency + FD_SLACK
    {
        return Err(format!(
            "bench load: concurrency {} needs about {} open files in the client and in the simulator, \
             but the hard open-file limit (RLIMIT_NOFILE) here is {limit}, and raising it needs a \
             privilege this process lacks (ulimit -Hn); the highest concurrency this machine allows is about {}",
            o.concurrency,
            o.concurrency + FD_SLACK,
            limit.saturating_sub(FD_SLACK)
        ));
    }
    let addrs = local_addrs(&o);
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
            .args(["sim", "--port", "0", "--step-ms", "0"])
            .args(["--ttft-ms", &o.ttft_ms.to_string()])
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
    let sim_pid = sim.0.id();
    let mut server = Peaks::default();
    // The same command with one request: the process's own peak, without load.
    let (status, stderr_text, base) = watch(
        profile_command(&bin, &url, &fixture, &addrs, (1, 1), &out_dir.join("base")),
        sim_pid,
        &mut Peaks::default(),
    )?;
    if !status.success() {
        return Err(format!(
            "the one-request run failed ({status}):\n{stderr_text}"
        ));
    }
    let started = Instant::now();
    let (status, stderr_text, client) = watch(
        profile_command(
            &bin,
            &url,
            &fixture,
            &addrs,
            (o.requests, o.concurrency),
            &out_dir,
        ),
        sim_pid,
        &mut server,
    )?;
    let wall = started.elapsed();
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
        "bench load: {} requests, concurrency {}, streaming, simulator TTFT {} ms, no step delay, {}",
        o.requests,
        o.concurrency,
        o.ttft_ms,
        if addrs.is_empty() {
            "one source address".to_string()
        } else {
            format!("source addresses {}..{}", addrs[0], addrs[addrs.len() - 1])
        }
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
    // Per in-flight request only when every request is in flight at once
    // (otherwise the peak also holds the records of finished requests).
    if o.requests <= o.concurrency && o.ttft_ms > 0 {
        println!(
            "  client per request   {:.1} KiB (peak RSS {:.1} MiB - one-request peak {:.1} MiB, / {})",
            client.rss_kib.saturating_sub(base.rss_kib) as f64 / o.requests as f64,
            client.rss_kib as f64 / 1024.0,
            base.rss_kib as f64 / 1024.0,
            o.requests
        );
    }
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
