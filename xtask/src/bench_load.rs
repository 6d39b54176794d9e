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
    /// Client and simulator processes (`--processes`); by default as many
    /// as the hard open-file limit needs.
    processes: Option<u64>,
    build: bool,
}

/// Connections per source address when the count is chosen automatically
/// (the default ephemeral port range, 32768-60999, holds 28,232).
const CONNECTIONS_PER_ADDR: u64 = 16_000;

/// Open files each process needs beyond one per connection.
const FD_SLACK: u64 = 512;

/// How much more than an equal share of the connections one simulator
/// process may get: the kernel spreads connections over the processes
/// sharing a port by a hash, not evenly.
const SPREAD_MARGIN: f64 = 1.15;

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        requests: 10_000,
        concurrency: 1_024,
        ttft_ms: 0,
        local_addrs: None,
        processes: None,
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
                    // Long enough for 100,000 connections to open and
                    // send on 2 cores (about 45 s) before the first stream
                    // ends.
                    o.ttft_ms = 120_000;
                }
                other => return Err(format!("--case: unknown case {other:?} (known: 100k)")),
            },
            "--processes" => o.processes = Some(num("--processes")?),
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

/// The source addresses for `--local-addr`: 127.0.0.2 onwards; with
/// several client processes at least one each (they then share no
/// ephemeral port range).
fn local_addrs(o: &Options, processes: u64) -> Vec<String> {
    let n = o
        .local_addrs
        .unwrap_or(if o.concurrency > CONNECTIONS_PER_ADDR {
            o.concurrency.div_ceil(CONNECTIONS_PER_ADDR)
        } else {
            0
        });
    let n = if processes > 1 { n.max(processes) } else { n };
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
    // One process holds at most the hard open-file limit: past it the load
    // is split over client shards and simulator processes sharing one port.
    let processes = match (o.processes, fd_limit) {
        (Some(p), _) => p,
        (None, Some(limit)) if limit < o.concurrency + FD_SLACK => {
            let per_process = limit.saturating_sub(FD_SLACK) as f64 / SPREAD_MARGIN;
            (o.concurrency as f64 / per_process).ceil() as u64
        }
        (None, _) => 1,
    };
    if let Some(limit) = fd_limit {
        let per_process = (o.concurrency.div_ceil(processes) as f64 * SPREAD_MARGIN) as u64;
        if per_process + FD_SLACK > limit {
            return Err(format!(
                "bench load: {processes} processes would each hold about {per_process} connections, \
                 more than the hard open-file limit (RLIMIT_NOFILE) {limit} allows; give more --processes"
            ));
        }
    }
    let addrs = local_addrs(&o, processes);
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

    let out_dir =
        std::env::temp_dir().join(format!("speedbench-bench-load-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    // Single-turn rows: a multi-turn conversation holds one worker for its
    // turns in turn, and every request must be able to be in flight at once.
    let fixture = single_turn_rows(
        &root.join("fixtures").join("speed_bench_mini.jsonl"),
        &out_dir,
    )?;
    if processes > 1 {
        return run_sharded(&o, &bin, processes, &addrs, &out_dir, &fixture);
    }
    let (sim, url) = start_sim(&bin, 0, o.ttft_ms, false)?;
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
    let summary = read_summary(&out_dir).ok_or("the run left no readable summary.json")?;
    let (succeeded, failed) = counts(&summary);
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

/// Starts `speedbench sim` (with SO_REUSEPORT when `reuse_port`) on
/// `port` (0: a free one) with no step delay; returns the process and its
/// URL.
fn start_sim(
    bin: &Path,
    port: u16,
    ttft_ms: u64,
    reuse_port: bool,
) -> Result<(KillOnDrop, String), String> {
    let mut cmd = Command::new(bin);
    cmd.args(["sim", "--step-ms", "0"]);
    if reuse_port {
        cmd.arg("--reuse-port");
    }
    let mut sim = KillOnDrop(
        cmd.args(["--port", &port.to_string()])
            .args(["--ttft-ms", &ttft_ms.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting a simulator: {e}"))?,
    );
    let mut url = String::new();
    BufReader::new(sim.0.stdout.take().ok_or("no simulator stdout")?)
        .read_line(&mut url)
        .map_err(|e| format!("reading the simulator URL: {e}"))?;
    let url = url.trim().to_owned();
    if url.is_empty() {
        return Err("the simulator printed no URL".into());
    }
    Ok((sim, url))
}

/// The load over `processes` client shards (`profile --shard I/N`, one
/// shared `--start-at`) against as many simulator processes sharing one
/// port, each process within the open-file limit; the shards' records
/// merge into one run in `speedbench report`, which the bench checks.
fn run_sharded(
    o: &Options,
    bin: &Path,
    processes: u64,
    addrs: &[String],
    out_dir: &Path,
    fixture: &Path,
) -> Result<(), String> {
    // A connect burst larger than the accept queue is dropped and retried
    // after 1, 3, 7 s: the streams then open over many seconds and are not
    // all in flight at once.
    let somaxconn: u64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let per_sim = o.concurrency.div_ceil(processes);
    if somaxconn != 0 && somaxconn < per_sim {
        eprintln!(
            "note: net.core.somaxconn is {somaxconn}, below the {per_sim} connections each simulator \
             accepts in one burst; connects beyond the accept queue are retried by the kernel after \
             seconds (as root: sysctl -w net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535)"
        );
    }
    let (first, url) = start_sim(bin, 0, o.ttft_ms, true)?;
    let port: u16 = url
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .ok_or_else(|| format!("no port in the simulator URL {url}"))?;
    let mut sims = vec![first];
    for _ in 1..processes {
        sims.push(start_sim(bin, port, o.ttft_ms, true)?.0);
    }
    let sim_pids: Vec<u32> = sims.iter().map(|s| s.0.id()).collect();

    // One process's own peak without load, as in the one-process bench.
    let (status, stderr_text, base) = watch(
        profile_command(
            bin,
            &url,
            fixture,
            &addrs[..1],
            (1, 1),
            &out_dir.join("base"),
        ),
        sim_pids[0],
        &mut Peaks::default(),
    )?;
    if !status.success() {
        return Err(format!(
            "the one-request run failed ({status}):\n{stderr_text}"
        ));
    }
    let _ = std::fs::remove_dir_all(out_dir.join("base"));

    // Every shard holds its measured phase until one instant, after all of
    // them have started.
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_secs_f64()
        + 2.0
        + 0.2 * processes as f64;
    let run_dir = out_dir.join("run");
    let mut clients = Vec::new();
    for i in 0..processes {
        let mine: Vec<String> = addrs
            .iter()
            .skip(i as usize)
            .step_by(processes as usize)
            .cloned()
            .collect();
        let mut cmd = profile_command(
            bin,
            &url,
            fixture,
            &mine,
            (o.requests, o.concurrency),
            &run_dir.join(format!("shard{i}")),
        );
        cmd.args(["--shard", &format!("{i}/{processes}")])
            .args(["--run-id", "bench-load"])
            .args(["--start-at", &format!("{start_at:.3}")]);
        clients.push(KillOnDrop(
            cmd.spawn()
                .map_err(|e| format!("starting shard {i}: {e}"))?,
        ));
    }
    let mut stderr_readers = Vec::new();
    for c in &mut clients {
        let stderr = c.0.stderr.take();
        stderr_readers.push(std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut s) = stderr {
                let _ = std::io::Read::read_to_string(&mut s, &mut text);
            }
            text
        }));
    }
    let mut client_peaks: Vec<Peaks> = clients.iter().map(|_| Peaks::default()).collect();
    let mut sim_peaks: Vec<Peaks> = sims.iter().map(|_| Peaks::default()).collect();
    let mut statuses = vec![None; clients.len()];
    let started = Instant::now();
    while statuses.iter().any(Option::is_none) {
        for (i, c) in clients.iter_mut().enumerate() {
            if statuses[i].is_some() {
                continue;
            }
            client_peaks[i].sample(c.0.id());
            match c.0.try_wait() {
                Ok(Some(status)) => statuses[i] = Some(status),
                Ok(None) => {}
                Err(e) => return Err(format!("waiting for shard {i}: {e}")),
            }
        }
        for (peaks, pid) in sim_peaks.iter_mut().zip(&sim_pids) {
            peaks.sample(*pid);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let wall = started.elapsed();
    let texts: Vec<String> = stderr_readers
        .into_iter()
        .map(|r| r.join().unwrap_or_default())
        .collect();
    for (i, status) in statuses.iter().enumerate() {
        if !status.is_some_and(|s| s.success()) {
            return Err(format!("shard {i} failed ({status:?}):\n{}", texts[i]));
        }
    }

    // Counts, and whether every request was in flight at once: the last
    // request started before the first one ended.
    let (mut succeeded, mut failed) = (0u64, 0u64);
    let (mut last_start, mut first_end) = (i64::MIN, i64::MAX);
    // Every start (+1) and end (-1): the most requests in flight at once.
    let mut events: Vec<(i64, i32)> = Vec::new();
    for i in 0..processes {
        let dir = run_dir.join(format!("shard{i}"));
        let (ok, bad) = counts(
            &read_summary(&dir)
                .ok_or_else(|| format!("shard {i} left no readable summary.json"))?,
        );
        succeeded += ok;
        failed += bad;
        let records = speedbench_record::read_records_file(dir.join("records.parquet"))
            .map_err(|e| format!("shard {i}: {e}"))?
            .records;
        for r in &records {
            last_start = last_start.max(r.start_unix_ns);
            first_end = first_end.min(r.end_unix_ns);
            events.push((r.start_unix_ns, 1));
            events.push((r.end_unix_ns, -1));
        }
    }
    // Ends sort before starts at one instant: a request is not counted
    // with the one that replaced it.
    events.sort_unstable();
    let mut in_flight = 0i64;
    let mut peak_in_flight = 0i64;
    for (_, step) in &events {
        in_flight += i64::from(*step);
        peak_in_flight = peak_in_flight.max(in_flight);
    }
    // The shards as one run, as a user would see them.
    let report = Command::new(bin)
        .args(["report", &run_dir.to_string_lossy(), "--format", "json"])
        .output()
        .map_err(|e| format!("speedbench report: {e}"))?;
    let merged: serde_json::Value = serde_json::from_slice(&report.stdout).map_err(|e| {
        format!(
            "speedbench report printed no JSON ({e}): {}",
            String::from_utf8_lossy(&report.stderr)
        )
    })?;
    let row = &merged["rows"][0];
    let _ = std::fs::remove_dir_all(out_dir);

    let secs = wall.as_secs_f64();
    println!(
        "bench load: {} requests, concurrency {}, streaming, simulator TTFT {} ms, no step delay, \
         {processes} client shards (profile --shard I/{processes}, one --start-at) against \
         {processes} simulator processes sharing port {port} (SO_REUSEPORT), source addresses {}..{}",
        o.requests,
        o.concurrency,
        o.ttft_ms,
        addrs[0],
        addrs[addrs.len() - 1]
    );
    println!("  wall time            {secs:.2} s (shards' start to the last exit, release build)");
    println!("  succeeded / failed   {succeeded} / {failed}");
    println!(
        "  peak in flight       {peak_in_flight} requests at once (from the records' start and end times)"
    );
    println!(
        "  all in flight at once {} (last request sent {:.2} s {} the first one ended)",
        if last_start < first_end { "yes" } else { "no" },
        ((first_end - last_start) as f64 / 1e9).abs(),
        if last_start < first_end {
            "before"
        } else {
            "after"
        }
    );
    println!(
        "  merged by report     one run of {} shards: {} succeeded, complete: {}",
        row["shards"]["merged"].as_array().map_or(0, Vec::len),
        row["succeeded"],
        row["complete"]
    );
    let total_peak: u64 = client_peaks.iter().map(|p| p.rss_kib).sum();
    let total_growth: u64 = client_peaks
        .iter()
        .map(|p| p.rss_kib.saturating_sub(base.rss_kib))
        .sum();
    for (i, p) in client_peaks.iter().enumerate() {
        println!(
            "  client shard {i}       peak RSS {:.1} MiB, peak fds {}",
            p.rss_kib as f64 / 1024.0,
            p.fds
        );
    }
    println!(
        "  clients peak RSS     {:.1} MiB in all",
        total_peak as f64 / 1024.0
    );
    if o.requests <= o.concurrency && o.ttft_ms > 0 {
        println!(
            "  client per request   {:.1} KiB (each shard's peak RSS - a one-request run's {:.1} MiB, summed, / {})",
            total_growth as f64 / o.requests as f64,
            base.rss_kib as f64 / 1024.0,
            o.requests
        );
    }
    for (i, p) in sim_peaks.iter().enumerate() {
        println!(
            "  simulator {i}          peak RSS {:.1} MiB, peak fds {}",
            p.rss_kib as f64 / 1024.0,
            p.fds
        );
    }
    if failed != 0 || succeeded != o.requests {
        return Err(format!(
            "{failed} requests failed, {succeeded} of {} succeeded",
            o.requests
        ));
    }
    if row["succeeded"].as_u64() != Some(o.requests) {
        return Err(format!(
            "the merged report does not hold every request: {row}"
        ));
    }
    Ok(())
}

/// The `summary.json` of the run in `dir`, if readable.
fn read_summary(dir: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).ok()?).ok()
}

/// `(succeeded, failed)` of a run's summary; a missing failure count reads
/// as a large one, never as none.
fn counts(summary: &serde_json::Value) -> (u64, u64) {
    let counts = &summary["counts"];
    (
        counts["succeeded"].as_u64().unwrap_or(0),
        counts["failed"].as_u64().unwrap_or(u32::MAX.into()),
    )
}

/// A copy of the rows of `fixture` with only their first turn, in `dir`.
fn single_turn_rows(fixture: &Path, dir: &Path) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(fixture)
        .map_err(|e| format!("reading {}: {e}", fixture.display()))?;
    let mut out = String::new();
    for (n, line) in text.lines().enumerate() {
        let mut row: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{}:{}: {e}", fixture.display(), n + 1))?;
        if let Some(messages) = row.get_mut("messages").and_then(|m| m.as_array_mut()) {
            messages.truncate(1);
        }
        row["multiturn"] = false.into();
        out.push_str(&row.to_string());
        out.push('\n');
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("single_turn.jsonl");
    std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}
