//! `speedbench tune` end to end, against the simulator started by the tune
//! itself from a command template: the recommendation equals the optimum
//! of the simulator's cost model (computed here by hand), every server is
//! started and stopped, a server that fails or dies is reported and the
//! tune goes on, Ctrl-C during a restart stops the server and the same
//! command resumes, and bad input is refused before any server starts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use speedbench_record::{RequestRecord, TuneManifest};

use crate::common::{bin, read_run, run};

/// The simulator's model: a step costs 2 ms, 0.4 ms per drafted token and
/// 0.25 ms per token the batch verifies; 48 tokens per answer; `math`
/// accepts each draft with probability 0.8, `writing` 0.3 (never all k:
/// `p_full` 0, so more drafts stop paying).
const SIM_CONFIG: &str = r#"{"ttft_ms": 2, "step_ms": 2, "draft_ms_per_token": 0.4,
 "verify_ms_per_token": 0.25, "output_tokens_min": 48, "output_tokens_max": 48,
 "default_spec": {"num_spec_tokens": 4, "p_full": 0.0, "p_token": 0.8},
 "categories": {"math": {"num_spec_tokens": 4, "p_full": 0.0, "p_token": 0.8},
                "writing": {"num_spec_tokens": 4, "p_full": 0.0, "p_token": 0.3}}}"#;

/// Rows of `math` and `writing`, the simulator's category markers first.
fn write_inputs(dir: &Path, rows_per_category: usize) -> (PathBuf, PathBuf) {
    let config = dir.join("sim.json");
    std::fs::write(&config, SIM_CONFIG).unwrap();
    let rows = dir.join("rows.jsonl");
    let mut text = String::new();
    for category in ["math", "writing"] {
        for i in 0..rows_per_category {
            let row = serde_json::json!({
                "question_id": format!("{category}-{i}"),
                "category": category,
                "messages": [{"role": "user", "content": format!("[{category} {i}] question {i}")}],
            });
            text.push_str(&format!("{row}\n"));
        }
    }
    std::fs::write(&rows, text).unwrap();
    (config, rows)
}

/// The server command: the simulator with `{k}` drafts a step, after
/// `prelude` (shell, for the failure tests).
fn server_cmd(config: &Path, prelude: &str) -> String {
    format!(
        "{prelude}exec {} sim --port {{port}} --config {} --num-spec-tokens {{k}}",
        env!("CARGO_BIN_EXE_speedbench"),
        config.display()
    )
}

/// Tokens per step of the model: `1 + Σ_{i=1}^{k-1} p^i` (`p_full` 0).
fn tokens_per_step(k: u32, p: f64) -> f64 {
    1.0 + (1..k).map(|i| p.powi(i as i32)).sum::<f64>()
}

/// The step time of the model at `k` with `c` requests in flight.
fn step_ms(k: u32, c: u32) -> f64 {
    2.0 + 0.4 * f64::from(k) + 0.25 * f64::from(c) * (1.0 + f64::from(k))
}

/// The best k of `ks` (0 the baseline) at acceptance `p` and load `c`, by
/// tokens per millisecond, and how far it is ahead of the runner-up.
fn optimum(ks: &[u32], p: f64, c: u32) -> (u32, f64) {
    let mut rates: Vec<(u32, f64)> = ks
        .iter()
        .map(|&k| (k, tokens_per_step(k, p) / step_ms(k, c)))
        .collect();
    rates.sort_by(|a, b| b.1.total_cmp(&a.1));
    (rates[0].0, rates[0].1 / rates[1].1)
}

fn tune_args<'a>(rows: &'a str, dir: &'a str, cmd: &'a str, ks: &'a str) -> Vec<&'a str> {
    vec![
        "tune",
        "--input-file",
        rows,
        "--server-cmd",
        cmd,
        "--param",
        ks,
        "--baseline",
        "k=0",
        "--output-artifact-dir",
        dir,
        "--ready-timeout",
        "20",
        "--stop-grace",
        "3",
    ]
}

pub(crate) fn manifest(dir: &Path) -> TuneManifest {
    TuneManifest::read(dir)
        .unwrap()
        .expect("tune.json is written")
}

/// No process of the tune's servers is left: none whose command line
/// holds the tune's port.
pub(crate) fn assert_no_server_left(port: &str) {
    let needle = format!("--port {port} ");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        assert!(
            !cmdline.contains(&needle) || cmdline.contains(" tune "),
            "a server outlived its tune: {cmdline}"
        );
    }
    let addr = format!("127.0.0.1:{port}");
    assert!(
        std::net::TcpListener::bind(&addr).is_ok(),
        "{addr} is still taken"
    );
}

/// The port every server got, from `tune.json`'s URLs.
pub(crate) fn port_of(m: &TuneManifest) -> String {
    let url = &m.configurations[0].url;
    url.rsplit(':')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_string()
}

/// Every record of a configuration's runs, each run's invariants checked.
pub(crate) fn records_of(dir: &Path, m: &TuneManifest, name: &str) -> Vec<RequestRecord> {
    let c = m.configurations.iter().find(|c| c.name == name).unwrap();
    c.runs
        .iter()
        .flat_map(|r| run_dirs(&dir.join(&r.dir)))
        .flat_map(|d| read_run(&d).unwrap().records)
        .collect()
}

/// A level's run directory, or its repeated runs' (`profile_runs/run_000K`).
fn run_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join("profile_runs")) else {
        return vec![dir.to_path_buf()];
    };
    let mut runs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    runs.sort();
    runs
}

/// The simulator's own totals, printed to its log when SIGTERM stops it:
/// (requests, verify steps, accepted, drafted).
fn served_totals(log: &Path) -> (u64, u64, u64, u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let line = text
        .lines()
        .find(|l| l.starts_with("served "))
        .unwrap_or_else(|| panic!("no totals in {}:\n{text}", log.display()));
    let n: Vec<u64> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    (n[0], n[1], n[2], n[3])
}

pub(crate) fn report_json(dir: &Path) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_speedbench"))
        .args(["report", "--format", "json"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `{"verdict": "configuration", "name": "k=4"}` as the k it names (0 for
/// the baseline).
fn chosen_k(choice: &Value) -> Option<u32> {
    match choice["verdict"].as_str()? {
        "baseline" => Some(0),
        "configuration" => choice["name"].as_str()?.strip_prefix("k=")?.parse().ok(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recommendation_is_the_simulators_optimum_per_category_and_load() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, rows) = write_inputs(tmp.path(), 12);
    let dir = tmp.path().join("tune");
    let cmd = server_cmd(&config, "");
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = tune_args(rows_s, dir_s, &cmd, "k=1,4,12");
    // An SLO every request meets: goodput is then each run's request
    // throughput, worked out again below from its records.
    args.extend([
        "--concurrency",
        "1,16",
        "--goodput",
        "request_latency:600000",
    ]);
    let out = run(&args).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Each configuration's two load levels, counted as such.
    for level in ["sweep run 1 of 2: ", "sweep run 2 of 2: "] {
        assert_eq!(stderr.matches(level).count(), 4, "{level}: {stderr}");
    }
    let m = manifest(&dir);
    assert_eq!(m.temperature.as_deref(), Some("0"));
    // Warmup as large as the largest batch, before every run, unmeasured.
    assert_eq!(m.warmup_requests, 16);
    assert_no_server_left(&port_of(&m));
    for c in &m.configurations {
        assert!(c.problem.is_none(), "{}: {:?}", c.name, c.problem);
        assert!(
            c.runs.iter().all(|r| r.status == "completed"),
            "{:?}",
            c.runs
        );
        // The server's own totals equal the records of its runs.
        let records = records_of(&dir, &m, &c.name);
        let log = dir.join(c.server_log.as_ref().expect("a started server has a log"));
        let spec = |f: fn(&speedbench_record::SpecDecodeStats) -> u64| -> u64 {
            records.iter().filter_map(|r| r.spec.as_ref()).map(f).sum()
        };
        assert_eq!(
            served_totals(&log),
            (
                records.len() as u64,
                spec(|s| s.verify_steps.unwrap_or(0)),
                spec(|s| s.accepted_draft_tokens),
                spec(|s| s.proposed_draft_tokens),
            ),
            "{}",
            c.name
        );
    }
    let report = report_json(&dir);
    assert_goodput_per_level(&dir, &m, &report);
    assert_energy_per_level(&dir, &m);
    let ks = [0, 1, 4, 12];
    for (category, p) in [("math", 0.8), ("writing", 0.3)] {
        let answer = report["categories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["category"] == category)
            .unwrap();
        for (i, c) in [1, 16].into_iter().enumerate() {
            let (best, lead) = optimum(&ks, p, c);
            // The model leaves no close call to chance.
            assert!(
                lead > 1.08,
                "{category} at c={c}: the runner-up is {lead:.3}x behind"
            );
            assert_eq!(
                chosen_k(&answer["by_load"][i]["choice"]),
                Some(best),
                "{category} at concurrency {c}: {}",
                answer["by_load"][i]
            );
        }
        if let Some(name) = answer["choice"]["name"].as_str() {
            let params = &answer["recommended"];
            assert_eq!(format!("k={}", params["k"].as_str().unwrap()), name);
        } else {
            assert!(answer["recommended"].is_null());
        }
    }
    // The lossless check ran: the simulator's text does not depend on k.
    for c in report["configurations"].as_array().unwrap() {
        let overall = c["pooled"]["rows"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(overall["paired"], overall["identical"], "{}", c["name"]);
        assert!(overall["paired"].as_u64().unwrap() > 0);
    }
    let html = tmp.path().join("tune.html");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_speedbench"))
        .args(["report", "--format", "html", "--html-output"])
        .arg(&html)
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("class=\"tune-chart\"").count(),
        3,
        "math, writing, overall"
    );
    assert_eq!(page.matches("<polyline class=\"line\"").count(), 9);
    let console = std::process::Command::new(env!("CARGO_BIN_EXE_speedbench"))
        .arg("report")
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&console.stdout);
    assert!(
        text.contains(
            "Goodput against SLOs request_latency:600000: requests/s (good share of those sent)"
        ) && text.contains("(100%)"),
        "{text}"
    );
}

/// Each level's goodput in the report, both sides, equals its run's
/// successes over its span (every request meets the SLO).
fn assert_goodput_per_level(dir: &Path, m: &speedbench_record::TuneManifest, report: &Value) {
    assert_eq!(report["slos"][0]["metric"], "request_latency");
    let by_hand = |run_dir: &str| {
        let records = read_run(&dir.join(run_dir)).unwrap().records;
        let sent: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
        let start = sent.iter().map(|r| r.start_unix_ns).min().unwrap();
        let end = sent.iter().map(|r| r.end_unix_ns).max().unwrap();
        let ok = sent.iter().filter(|r| r.is_success()).count() as f64;
        ok / ((end - start) as f64 / 1e9)
    };
    let baseline = m.configurations.iter().find(|c| c.baseline).unwrap();
    for c in report["configurations"].as_array().unwrap() {
        let tuned = m
            .configurations
            .iter()
            .find(|t| t.name == c["name"])
            .unwrap();
        for (i, level) in c["levels"].as_array().unwrap().iter().enumerate() {
            let g = &level["comparison"]["goodput"];
            for (side, run) in [
                ("baseline", &baseline.runs[i]),
                ("speculative", &tuned.runs[i]),
            ] {
                let got = g[side]["goodput"].as_f64().unwrap();
                let want = by_hand(&run.dir);
                assert!(
                    (got - want).abs() <= 1e-9 * want,
                    "{} {side}: {got} vs {want}",
                    c["name"]
                );
                assert_eq!(g[side]["good_requests"], g[side]["attempted"]);
            }
        }
    }
}

/// Each run's `summary.json` given GPU figures as `--gpu-telemetry`
/// leaves them (run k of a configuration: 100·(k+1) J over 50 tokens,
/// the baseline's 4 J a token): the report's energy per level and its
/// ratio are those, worked out here.
fn assert_energy_per_level(dir: &Path, m: &speedbench_record::TuneManifest) {
    for (c_index, c) in m.configurations.iter().enumerate() {
        for (k, run) in c.runs.iter().enumerate() {
            let path = dir.join(&run.dir).join("summary.json");
            let mut summary: Value =
                serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let energy = if c.baseline {
                200.0
            } else {
                100.0 * (k + 1 + c_index) as f64
            };
            summary["gpu_telemetry"] = serde_json::json!({
                "gpus": [], "energy_j": energy, "gpus_without_energy": 0,
                "output_tokens": 50, "energy_per_output_token_j": energy / 50.0,
            });
            std::fs::write(&path, serde_json::to_vec(&summary).unwrap()).unwrap();
        }
    }
    let report = report_json(dir);
    for (c_index, c) in m.configurations.iter().filter(|c| !c.baseline).enumerate() {
        let c_index = c_index + 1;
        let tuned = report["configurations"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == c.name.as_str())
            .unwrap();
        for (k, level) in tuned["levels"].as_array().unwrap().iter().enumerate() {
            let e = &level["comparison"]["energy"];
            let per_token = 100.0 * (k + 1 + c_index) as f64 / 50.0;
            assert_eq!(
                e["baseline"]["energy_per_output_token_j"].as_f64(),
                Some(4.0)
            );
            assert_eq!(
                e["speculative"]["energy_per_output_token_j"].as_f64(),
                Some(per_token)
            );
            assert_eq!(
                e["energy_per_token_ratio"].as_f64(),
                Some(per_token / 4.0),
                "{}",
                c.name
            );
        }
    }
    let console = std::process::Command::new(env!("CARGO_BIN_EXE_speedbench"))
        .arg("report")
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&console.stdout);
    assert!(
        text.contains("Energy per output token (J, DCGM)") && text.contains("4.0000"),
        "{text}"
    );
}

/// The tune's stdout and stderr.
fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_that_fail_to_start_hang_or_die_are_reported_and_the_tune_goes_on() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, rows) = write_inputs(tmp.path(), 6);
    let dir = tmp.path().join("tune");
    // k=9 exits at once, k=5 never answers, k=7 is killed a moment into
    // its first run (slow steps keep that run going), k=2 serves.
    let prelude = "if [ {k} = 9 ]; then echo no GPU left for k={k} >&2; exit 3; fi; \
                   if [ {k} = 5 ]; then exec sleep 60; fi; \
                   if [ {k} = 7 ] && mkdir MARKER 2>/dev/null; then (sleep 1.5; kill -9 $$) & fi; ";
    let marker = tmp.path().join("k7-died-once");
    let prelude = prelude.replace("MARKER", marker.to_str().unwrap());
    let cmd = server_cmd(&config, &prelude).replace(
        "--num-spec-tokens {k}",
        "--num-spec-tokens {k} --step-ms 20",
    );
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = tune_args(rows_s, dir_s, &cmd, "k=9,5,7,2");
    let at = args.iter().position(|a| *a == "--ready-timeout").unwrap();
    args[at + 1] = "2";
    let out = run(&args).await;
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success(), "{stdout}");
    let m = manifest(&dir);
    assert_no_server_left(&port_of(&m));
    let by_name: BTreeMap<&str, _> = m
        .configurations
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    let problem = |name: &str| by_name[name].problem.clone().unwrap_or_default();
    for (name, words) in [
        ("k=9", "exited before it was ready"),
        ("k=9", "| no GPU left for k=9"),
        ("k=5", "not ready after 2 s"),
        ("k=7", "exited during the run"),
    ] {
        assert!(problem(name).contains(words), "{name}: {}", problem(name));
    }
    assert_eq!(by_name["k=7"].runs[0].status, "failed");
    assert!(by_name["k=2"].problem.is_none());
    assert_eq!(by_name["k=2"].runs[0].status, "completed");
    assert_eq!(by_name["baseline"].runs[0].status, "completed");
    assert!(stderr.contains("run(s) did not complete"), "{stderr}");
    // The answer is still given, over what completed, with the failures named.
    assert!(stdout.contains("the tune's answer"), "{stdout}");
    assert!(stdout.contains("note: k=9: its server failed"), "{stdout}");
    // The same command again: what completed is kept; k=7's run, though
    // its records say completed, came from a dying server and runs again
    // (its server lives this time: the marker file says it died once).
    let again = run(&args).await;
    let (_, stderr) = texts(&again);
    assert!(!again.status.success(), "k=9 and k=5 fail again");
    let m = manifest(&dir);
    let by_name: BTreeMap<&str, _> = m
        .configurations
        .iter()
        .map(|c| (c.name.as_str(), c))
        .collect();
    assert_eq!(by_name["k=7"].runs[0].status, "completed", "{stderr}");
    assert!(by_name["k=7"].problem.is_none());
    for kept in ["baseline", "k=2"] {
        let dir = by_name[kept].runs[0].dir.as_str();
        assert!(
            stderr.contains(&format!("{dir} (complete on disk")),
            "{kept}: {stderr}"
        );
    }
    assert_no_server_left(&port_of(&m));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_restart_stops_the_server_and_the_same_command_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, rows) = write_inputs(tmp.path(), 4);
    let dir = tmp.path().join("tune");
    let cmd = server_cmd(&config, "if [ {k} = 2 ]; then sleep 4; fi; ");
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let args = tune_args(rows_s, dir_s, &cmd, "k=2");
    let mut child = bin()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the k=2 server is starting (its command sleeps first).
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("starting the server of k=2") {
            break;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // SAFETY: signals the child we spawned.
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) };
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let status = child.wait().await.unwrap();
    drain.await.unwrap();
    assert_eq!(status.code(), Some(130));
    let m = manifest(&dir);
    assert_no_server_left(&port_of(&m));
    assert_eq!(m.configurations[0].runs[0].status, "completed");
    assert_eq!(
        m.configurations[1].runs[0].status, "not started",
        "{:?}",
        m.configurations[1]
    );
    assert!(m.configurations[1].problem.is_none());
    // The same command again: the baseline's run is kept, k=2's is run.
    let again = run(&args).await;
    let (_, stderr) = texts(&again);
    assert!(again.status.success(), "{stderr}");
    assert!(
        stderr.contains("complete on disk from an earlier try"),
        "{stderr}"
    );
    let m = manifest(&dir);
    assert!(
        m.configurations
            .iter()
            .all(|c| c.runs[0].status == "completed")
    );
    assert_no_server_left(&port_of(&m));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_any_server_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, rows) = write_inputs(tmp.path(), 2);
    let dir = tmp.path().join("tune");
    let good = server_cmd(&config, "");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port().to_string();
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            tune_args(rows_s, dir_s, "sim --num-spec-tokens {k}", "k=2"),
            "no {port}",
        ),
        (tune_args(rows_s, dir_s, &good, "k="), "empty value"),
        (
            [
                tune_args(rows_s, dir_s, &good, "k=2"),
                vec!["--param", "k=4"],
            ]
            .concat(),
            "named twice",
        ),
        (
            [
                tune_args(rows_s, dir_s, &good, "k=2"),
                vec!["--port", &taken_port],
            ]
            .concat(),
            "is taken",
        ),
        (
            [
                tune_args(rows_s, dir_s, &good, "k=2"),
                vec!["--concurrency", "1,1"],
            ]
            .concat(),
            "given twice",
        ),
    ];
    // A run where the tune would put one, with no tune.json: kept.
    let foreign = dir.join("baseline/1-concurrency-1");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("records.parquet"), b"someone's").unwrap();
    let out = run(&tune_args(rows_s, dir_s, &good, "k=2")).await;
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no tune.json says it is this tune's"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(foreign.join("records.parquet")).unwrap(),
        b"someone's"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    for (args, words) in cases {
        let out = run(&args).await;
        let (_, stderr) = texts(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(words), "{args:?}: {stderr}");
        assert!(!dir.exists(), "{args:?} started something");
    }
    // A baseline that speculates is seen from its first run's answers, and
    // nothing more starts.
    let baseline_cmd = format!(
        "{} sim --port {{port}} --config {}",
        env!("CARGO_BIN_EXE_speedbench"),
        config.display()
    );
    let mut args = tune_args(rows_s, dir_s, &good, "k=2");
    args.retain(|a| *a != "--baseline" && *a != "k=0");
    args.extend(["--baseline-cmd", &baseline_cmd]);
    let out = run(&args).await;
    let (_, stderr) = texts(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("the baseline speculates"), "{stderr}");
    let m = manifest(&dir);
    assert_eq!(m.configurations[1].runs[0].status, "not started");
    assert_no_server_left(&port_of(&m));
    drop(taken);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_run_predicts_the_smaller_budgets_that_the_tune_measures() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, rows) = write_inputs(tmp.path(), 12);
    // A chain drafter (its first k' drafts alike at every budget) and the
    // same step costs: the model's assumptions hold.
    let config = tmp.path().join("chain.json");
    std::fs::write(
        &config,
        r#"{"ttft_ms": 2, "step_ms": 2, "draft_ms_per_token": 0.4, "verify_ms_per_token": 0.25,
            "output_tokens_min": 48, "output_tokens_max": 48,
            "default_spec": {"num_spec_tokens": 4, "p_token": 0.75, "chain": true}}"#,
    )
    .unwrap();
    let dir = tmp.path().join("tune");
    let cmd = server_cmd(&config, "");
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = tune_args(rows_s, dir_s, &cmd, "k=1,2,8");
    args.push("--streaming");
    let out = run(&args).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (stdout, _) = texts(&out);
    assert!(
        stdout.contains("Predicted from k=8 alone at concurrency=1"),
        "{stdout}"
    );
    let report = report_json(&dir);
    let from_k8 = report["predictions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["configuration"] == "k=8" && p["category"] == "overall")
        .expect("k=8's run predicts");
    assert_eq!(from_k8["budget"], 8);
    let budgets = from_k8["budgets"].as_array().unwrap();
    assert_eq!(budgets.len(), 8);
    // At its own budget the prediction is the run's measured decode
    // speedup: Σ tokens after the first over Σ (e2e - ttft), against the
    // baseline's, from the records by hand.
    let m = manifest(&dir);
    let rate = |name: &str| {
        let records = records_of(&dir, &m, name);
        let measured = records.iter().filter(|r| !r.warmup);
        let (tokens, ns) = measured.fold((0u64, 0u64), |(t, n), r| {
            (
                t + r.completion_tokens.unwrap() - 1,
                n + r.e2e_latency_ns - r.ttft_ns.unwrap(),
            )
        });
        tokens as f64 / ns as f64
    };
    let own = rate("k=8") / rate("baseline");
    assert!((budgets[7]["decode_speedup"].as_f64().unwrap() - own).abs() < 1e-9);
    assert!((budgets[7]["measured"].as_f64().unwrap() - own).abs() < 1e-9);
    // The smaller budgets the tune ran: predicted within 10% of measured.
    for (k, name) in [(1, "k=1"), (2, "k=2")] {
        let b = &budgets[k - 1];
        assert_eq!(b["measured_by"], name);
        let error = b["error"].as_f64().unwrap();
        assert!(
            error.abs() < 0.10,
            "k={k}: predicted {} vs measured {}",
            b["decode_speedup"],
            b["measured"]
        );
    }
    assert!(budgets[3]["measured"].is_null(), "k=4 was not run");
}

/// What every tune of a real engine must show (`.ci/llama-server-e2e.sh`,
/// `.ci/vllm-e2e.sh`): every configuration's server started (its log kept)
/// and stopped (no process left, its port free), every run complete, the
/// lossless check run, and the printed speedups and recommendation as the
/// records and the decision rule give them, worked out here.
pub(crate) fn check_real_tune(dir: &Path) {
    let m = manifest(dir);
    assert_no_server_left(&port_of(&m));
    for c in &m.configurations {
        assert!(c.problem.is_none(), "{}: {:?}", c.name, c.problem);
        assert!(
            c.runs.iter().all(|r| r.status == "completed"),
            "{:?}",
            c.runs
        );
        let log = dir.join(c.server_log.as_ref().expect("a started server has a log"));
        assert!(
            std::fs::metadata(&log).unwrap().len() > 0,
            "{} is empty",
            log.display()
        );
    }
    let report = report_json(dir);
    let measured = |name: &str| -> Vec<RequestRecord> {
        records_of(dir, &m, name)
            .into_iter()
            .filter(|r| !r.warmup && r.error_kind.is_none())
            .collect()
    };
    let mean_e2e = |rs: &[RequestRecord]| {
        rs.iter()
            .map(|r| r.e2e_latency_ns as f64 / 1e9)
            .sum::<f64>()
            / rs.len() as f64
    };
    let base = measured("baseline");
    let mut candidates = Vec::new();
    for c in report["configurations"].as_array().unwrap() {
        let name = c["name"].as_str().unwrap();
        let overall = c["pooled"]["rows"].as_array().unwrap().last().unwrap();
        assert_eq!(overall["category"], "overall");
        assert!(
            overall["paired"].as_u64().unwrap() > 0,
            "{name}: no lossless check"
        );
        // The latency speedup: the baseline's mean end-to-end latency over
        // this configuration's, every load level pooled.
        let by_hand = mean_e2e(&base) / mean_e2e(&measured(name));
        let printed = overall["latency_speedup"].as_f64().unwrap();
        assert!(
            (printed / by_hand - 1.0).abs() < 1e-9,
            "{name}: {printed} vs {by_hand}"
        );
        let ci = &overall["latency_speedup_ci"];
        candidates.push((
            name.to_string(),
            printed,
            ci["low"].as_f64().unwrap(),
            ci["high"].as_f64().unwrap(),
        ));
    }
    // The decision rule: pay when the interval is above 1; the best paying
    // one alone when its interval is above every other paying one's.
    let mut paying: Vec<&(String, f64, f64, f64)> =
        candidates.iter().filter(|c| c.2 > 1.0).collect();
    paying.sort_by(|a, b| b.1.total_cmp(&a.1));
    let expected = match paying.first() {
        None => serde_json::json!({"verdict": "baseline"}),
        Some(best) => {
            let mut tied: Vec<String> = vec![best.0.clone()];
            tied.extend(
                paying[1..]
                    .iter()
                    .filter(|c| c.3 >= best.2)
                    .map(|c| c.0.clone()),
            );
            if tied.len() == 1 {
                serde_json::json!({"verdict": "configuration", "name": best.0})
            } else {
                serde_json::json!({"verdict": "no_significant_difference", "among": tied})
            }
        }
    };
    let overall = report["categories"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["category"] == "overall")
        .unwrap();
    assert_eq!(overall["choice"], expected, "{overall}");
    eprintln!("tune {}: overall {}", dir.display(), overall["choice"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_someone_else_runs_are_tuned_by_url_with_their_cache_emptied() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, rows) = write_inputs(tmp.path(), 3);
    let config = speedbench_sim::SimConfig::from_json_file(&tmp.path().join("sim.json")).unwrap();
    let base = crate::common::sim(config.clone().with_num_spec_tokens(0)).await;
    let spec = crate::common::sim(config.with_num_spec_tokens(4)).await;
    let dir = tmp.path().join("tune");
    let config_url = format!("k4={}", spec.url());
    // The tune from a YAML file; the directory from the command line.
    let file = tmp.path().join("tune.yaml");
    let yaml = format!(
        "baseline_url: {}\nconfig_url: {{k4: \"{}\"}}\nconcurrency: [1, 2]\n\
         profile:\n  input_file: {}\n  warmup_request_count: 0\n",
        base.url(),
        spec.url(),
        rows.display()
    );
    std::fs::write(&file, yaml).unwrap();
    let (file_s, dir_s) = (file.to_str().unwrap(), dir.to_str().unwrap());
    let plan = run(&[
        "tune",
        "--config",
        file_s,
        "--output-artifact-dir",
        dir_s,
        "--dry-run",
    ])
    .await;
    let (stdout, _) = texts(&plan);
    assert!(plan.status.success(), "{stdout}");
    assert!(
        stdout.contains("nothing was started (--dry-run)") && stdout.contains("k4"),
        "{stdout}"
    );
    assert!(!dir.exists(), "a dry run writes nothing");
    let out = run(&["tune", "--config", file_s, "--output-artifact-dir", dir_s]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = manifest(&dir);
    assert_eq!(m.configurations.len(), 2);
    assert_eq!(m.warmup_requests, 0, "the file's profile says so");
    for c in &m.configurations {
        assert_eq!(
            (c.command.as_deref(), c.server_log.as_deref()),
            (None, None)
        );
        for r in &c.runs {
            assert_eq!(r.status, "completed");
            // Someone else's server is never fresh: emptied before every run.
            assert_eq!(
                r.cache.as_deref(),
                Some("emptied (POST /reset_prefix_cache)")
            );
        }
    }
    // The servers answered every request the runs recorded (and no more).
    for (server, name) in [(&base, "baseline"), (&spec, "k4")] {
        let records = records_of(&dir, &m, name);
        assert_eq!(
            server.ground_truth().requests,
            records.len() as u64,
            "{name}"
        );
    }
    let markdown = std::process::Command::new(env!("CARGO_BIN_EXE_speedbench"))
        .args(["report", "--format", "markdown"])
        .arg(&dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&markdown.stdout);
    assert!(markdown.status.success());
    for heading in [
        "# Tune:",
        "\n## math\n",
        "\n## writing\n",
        "\n## overall\n",
        "\n## Recommended\n",
    ] {
        assert!(text.contains(heading), "{heading:?} in:\n{text}");
    }
    assert!(text.contains("| k4 | lat "), "{text}");
    // A URL tune takes no --param.
    let refused = run(&[
        "tune",
        "--input-file",
        rows.to_str().unwrap(),
        "--baseline-url",
        &base.url(),
        "--config-url",
        &config_url,
        "--param",
        "k=1",
        "--output-artifact-dir",
        tmp.path().join("other").to_str().unwrap(),
    ])
    .await;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("take no --param"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_levels_choose_with_intervals_across_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let (config, rows) = write_inputs(tmp.path(), 4);
    let dir = tmp.path().join("tune");
    let cmd = server_cmd(&config, "");
    let (rows_s, dir_s) = (rows.to_str().unwrap(), dir.to_str().unwrap());
    let mut args = tune_args(rows_s, dir_s, &cmd, "k=4");
    args.extend(["--concurrency", "1,4", "--num-profile-runs", "3"]);
    let out = run(&args).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = manifest(&dir);
    assert_no_server_left(&port_of(&m));
    // Every level of both configurations: three runs and their aggregate.
    let latencies = |run: &Path| -> Vec<f64> {
        let records = read_run(run).unwrap().records;
        records
            .iter()
            .filter(|r| !r.warmup && r.is_success())
            .map(|r| r.e2e_latency_ns as f64 / 1e6)
            .collect()
    };
    let mean = |ms: &[f64]| ms.iter().sum::<f64>() / ms.len() as f64;
    // Per configuration, level and run: the run's latencies.
    let mut per_level: Vec<Vec<Vec<Vec<f64>>>> = Vec::new();
    for c in &m.configurations {
        assert!(
            c.runs.iter().all(|r| r.status == "completed"),
            "{:?}",
            c.runs
        );
        let mut levels = Vec::new();
        for r in &c.runs {
            let runs = run_dirs(&dir.join(&r.dir));
            assert_eq!(runs.len(), 3, "{}", r.dir);
            let agg: Value = serde_json::from_slice(
                &std::fs::read(dir.join(&r.dir).join("aggregate.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(agg["num_successful_runs"], 3);
            levels.push(runs.iter().map(|d| latencies(d)).collect());
        }
        per_level.push(levels);
        // The server's own totals equal the records of every repeated run.
        let records = records_of(&dir, &m, &c.name);
        let log = dir.join(c.server_log.as_ref().unwrap());
        assert_eq!(served_totals(&log).0, records.len() as u64, "{}", c.name);
    }
    // The latency speedup across runs: the ratio of the two sides'
    // geometric means of their runs' mean latencies, worked out here.
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    let report = report_json(&dir);
    let levels = report["configurations"][0]["levels"].as_array().unwrap();
    for (i, level) in levels.iter().enumerate() {
        let overall = level["comparison"]["rows"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        let across = &overall["latency_across_runs"];
        let means = |c: usize| {
            per_level[c][i]
                .iter()
                .map(|ms| mean(ms))
                .collect::<Vec<_>>()
        };
        let want = geo(&means(0)) / geo(&means(1));
        let got = across["ratio"].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want,
            "level {i}: {got} vs {want}"
        );
        let (low, high) = (
            across["low"].as_f64().unwrap(),
            across["high"].as_f64().unwrap(),
        );
        assert!(low <= got && got <= high);
        // The choice at this level rests on that interval.
        let answer = report["categories"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["category"] == "overall")
            .unwrap();
        let choice = &answer["by_load"][i]["choice"];
        let pays = low > 1.0;
        assert_eq!(
            choice["verdict"] == "configuration",
            pays,
            "level {i}: [{low}, {high}] {choice}"
        );
    }
}
