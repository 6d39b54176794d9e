//! End-to-end: goodput against SLOs, the steady state and time slices
//! through the real binary against the simulator, each figure computed
//! again here from the records the run wrote; and the bad input refused
//! before the first request.

use crate::common;

use common::*;
use speedbench_metrics::RequestMetricsExt;
use speedbench_record::RequestRecord;
use speedbench_sim::SimConfig;

/// Runs a streamed profile of 48 requests at concurrency 4 with `extra`.
async fn profile(
    server: &speedbench_sim::SimServer,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["--request-count", "48"];
    args.extend_from_slice(extra);
    profile_rows(server, out, &args).await
}

/// Runs a streamed profile of every turn of every row at concurrency 4
/// with `extra`.
async fn profile_rows(
    server: &speedbench_sim::SimServer,
    out: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let fixture = fixture();
    let url = server.url();
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "-m",
        "speedbench-sim",
        "--streaming",
        "--input-file",
        fixture.to_str().unwrap(),
        "--concurrency",
        "4",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args).await
}

fn summary(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// The TTFT and request-latency thresholds: the medians of this run, so
/// about half the requests meet each and the count is no accident.
fn medians(records: &[RequestRecord]) -> (f64, f64) {
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (
        median(records.iter().filter_map(|r| r.ttft_ms()).collect()),
        median(records.iter().map(|r| r.request_latency_ms()).collect()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn goodput_counts_every_record_against_every_slo() {
    let config = SimConfig::speed_bench_demo()
        .with_typical_delays()
        .with_ttft_ms(4.0)
        .with_step_ms(1.0)
        .with_output_tokens(4, 24);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    // A first run to learn the medians, a second held to them.
    let first = profile(&server, &dir.path().join("a"), &[]).await;
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let (ttft, e2e) = medians(&read_run(&dir.path().join("a")).unwrap().records);
    let slos = format!("time_to_first_token:{ttft} e2el:{e2e}");
    let out = dir.path().join("b");
    let second = profile(
        &server,
        &out,
        &[
            "--goodput",
            &slos,
            "--goodput",
            "output_token_throughput_per_user:1",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );

    let records = read_run(&out).unwrap().records;
    assert_record_invariants(&records, Some(true));
    // By hand, over every record: succeeded, TTFT and e2e within, per-user
    // throughput at least 1 token/s.
    let good = |r: &&&RequestRecord| {
        r.is_success()
            && r.ttft_ms().is_some_and(|v| v <= ttft)
            && r.request_latency_ms() <= e2e
            && r.output_token_throughput_per_user()
                .is_some_and(|v| v >= 1.0)
    };
    let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let good_count = measured.iter().filter(good).count() as u64;
    let start = measured.iter().map(|r| r.start_unix_ns).min().unwrap();
    let end = measured.iter().map(|r| r.end_unix_ns).max().unwrap();
    let duration_s = (end - start) as f64 / 1e9;
    assert!(
        good_count > 0 && good_count < 48,
        "{good_count}: thresholds at the medians"
    );

    let g = &summary(&out)["goodput"];
    assert_eq!(g["good_requests"], good_count);
    assert_eq!(g["attempted"], 48);
    let fraction = g["good_request_fraction"].as_f64().unwrap();
    assert!((fraction - good_count as f64 / 48.0).abs() < 1e-12);
    let goodput = g["goodput"].as_f64().unwrap();
    assert!(
        (goodput - good_count as f64 / duration_s).abs() < 1e-9 * goodput.max(1.0),
        "{goodput}"
    );
    let ttft_met = measured
        .iter()
        .filter(|r| r.ttft_ms().is_some_and(|v| v <= ttft))
        .count();
    assert_eq!(g["slos"][0]["metric"], "time_to_first_token");
    assert_eq!(g["slos"][0]["met"], ttft_met as u64);
    assert_eq!(g["slos"][1]["metric"], "request_latency", "vLLM's e2el");
    assert_eq!(g["slos"][2]["metric"], "output_token_throughput_per_user");

    // The console: the Goodput row and the line of SLOs.
    assert!(stdout.contains("Goodput (requests/sec)"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "Goodput: {good_count} of 48 requests sent met every SLO"
        )),
        "{stdout}"
    );
    // `report` of the run repeats its goodput line.
    let report = run(&["report", out.to_str().unwrap()]).await;
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains(&format!(
            "goodput {:.2} requests/s; Goodput: {good_count} of 48",
            goodput
        )),
        "{text}"
    );
    // A slice longer than the run is one partial slice, said.
    let long = profile(&server, &dir.path().join("c"), &["--slice-duration", "100"]).await;
    assert!(long.status.success());
    assert!(
        String::from_utf8_lossy(&long.stderr).contains("--slice-duration is longer than the run")
    );
    // run.json keeps the SLOs, for a report of the run.
    let manifest = read_run(&out).unwrap().manifest.unwrap();
    let figures = speedbench_metrics::FigureOptions::of_run(&manifest);
    assert_eq!(figures.slos.0.len(), 3);
    assert_eq!(figures.steady_state.unwrap().concurrency, 4);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_and_slices_match_the_records() {
    let config = SimConfig::speed_bench_demo()
        .with_typical_delays()
        .with_ttft_ms(5.0)
        .with_step_ms(2.0)
        .with_output_tokens(8, 24);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let done = profile(
        &server,
        &out,
        &[
            "--slice-duration",
            "0.1",
            "--steady-state-min-window",
            "0.05",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    server.shutdown().await;
    let records = read_run(&out).unwrap().records;
    assert_record_invariants(&records, Some(true));
    let s = summary(&out);

    // Slices: every request started in exactly one; every success ended
    // in exactly one (the throughputs times the slices' lengths).
    let slices = s["time_slices"].as_array().unwrap();
    let started: u64 = slices.iter().map(|x| x["requests"].as_u64().unwrap()).sum();
    assert_eq!(started, 48);
    let ended: f64 = slices
        .iter()
        .map(|x| {
            let length = x["end_s"].as_f64().unwrap() - x["start_s"].as_f64().unwrap();
            x["request_throughput"].as_f64().unwrap_or(0.0) * length
        })
        .sum();
    assert!((ended - 48.0).abs() < 1e-6, "{ended}");
    for (i, x) in slices.iter().enumerate() {
        assert_eq!(x["index"], i);
        assert_eq!(
            x["complete"],
            i + 1 < slices.len(),
            "only the last slice is partial"
        );
    }
    assert!(
        stdout.contains("speedbench | Time Slices (0.1 s each)"),
        "{stdout}"
    );

    // The steady state: at most 4 in flight; its bounds are two of the
    // records' own instants, and 4 were in flight just after the first.
    let st = &s["steady_state"];
    assert_eq!(st["level"], 4);
    let w = &st["window"];
    let origin = records.iter().map(|r| r.start_unix_ns).min().unwrap();
    let at = |t: f64| origin + (t * 1e9).round() as i64;
    let (from, to) = (
        at(w["start_s"].as_f64().unwrap()),
        at(w["end_s"].as_f64().unwrap()),
    );
    let in_flight = |t: i64| {
        records
            .iter()
            .filter(|r| r.start_unix_ns <= t && r.end_unix_ns > t)
            .count()
    };
    assert_eq!(in_flight(from), 4, "the window opens with 4 in flight");
    assert!(in_flight(to) < 4, "and closes as they fall below 4");
    for r in records.iter().filter(|r| r.start_unix_ns < from) {
        assert!(
            in_flight(r.start_unix_ns) < 4,
            "before it opened, fewer than 4 were in flight"
        );
    }
    let inside = records
        .iter()
        .filter(|r| r.start_unix_ns >= from && r.start_unix_ns < to)
        .count() as u64;
    assert_eq!(w["requests"], inside);
    assert!(
        stdout.contains("speedbench | Steady State (4 or more of 4 in flight"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_figures_are_refused_before_the_first_request() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    let url = server.url();
    let base = [
        "profile",
        "--url",
        &url,
        "-m",
        "speedbench-sim",
        "--input-file",
        fixture.to_str().unwrap(),
        "--output-artifact-dir",
    ];
    let out = dir.path().join("run");
    for (extra, says) in [
        (
            vec!["--goodput", "ttft:200"],
            "`time_to_first_token` needs streamed responses",
        ),
        (vec!["--goodput", "goodness:3"], "unknown metric `goodness`"),
        (
            vec!["--streaming", "--goodput", "ttft:1 ttft:2"],
            "given twice",
        ),
        (
            vec!["--slice-duration", "10", "--benchmark-duration", "5"],
            "longer than the run's --benchmark-duration",
        ),
        (vec!["--slice-duration", "0"], "above 0"),
        (vec!["--steady-state-threshold", "1.5"], "at most 1"),
    ] {
        let mut args: Vec<&str> = base.to_vec();
        args.push(out.to_str().unwrap());
        args.extend(extra.iter().copied());
        let done = run(&args).await;
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(!done.status.success(), "{extra:?}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!out.exists(), "{extra:?}: nothing was run");
    }
    assert_eq!(server.ground_truth().requests, 0, "no request was sent");
    server.shutdown().await;
}

/// The simulator with the demo's speculation, and the same server
/// without it (every step one token): `(baseline, speculative)`.
fn with_and_without_speculation(step_ms: f64, tokens: (u32, u32)) -> (SimConfig, SimConfig) {
    let demo = SimConfig::speed_bench_demo()
        .with_ttft_ms(2.0)
        .with_step_ms(step_ms)
        .with_output_tokens(tokens.0, tokens.1);
    let mut baseline = demo.clone();
    baseline.default_spec = speedbench_sim::AcceptanceProfile::baseline();
    baseline.categories.clear();
    (baseline, demo)
}

/// Profiles every turn of every row into `out` against a simulator of its
/// own, with `extra` and, given `mj_per_token`, a DCGM stand-in.
async fn profile_side(
    config: SimConfig,
    out: &std::path::Path,
    extra: &[&str],
    mj_per_token: Option<u64>,
) {
    let server = std::sync::Arc::new(sim(config).await);
    let dcgm = mj_per_token.map(|mj| format!("{}/metrics", dcgm_exporter(server.clone(), mj)));
    let mut args = extra.to_vec();
    if let Some(url) = &dcgm {
        args.extend(["--gpu-telemetry", url]);
    }
    let done = profile_rows(&server, out, &args).await;
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    // Shut down unless a stand-in still reads its totals.
    if let Ok(server) = std::sync::Arc::try_unwrap(server) {
        server.shutdown().await;
    }
}

/// `speedbench compare` of `base` against `spec`, no bootstrap, `extra`.
async fn compare(
    base: &std::path::Path,
    spec: &std::path::Path,
    extra: &[&str],
) -> std::process::Output {
    let out = compare_dirs(base, spec, extra).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Goodput by hand: good requests (succeeded, e2e at most `e2e_ms`) over
/// the span from the first start to the last end; the good count too.
fn goodput_by_hand(records: &[RequestRecord], e2e_ms: f64) -> (u64, f64) {
    let sent: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    let good = sent
        .iter()
        .filter(|r| r.is_success() && r.request_latency_ms() <= e2e_ms)
        .count() as u64;
    let start = sent.iter().map(|r| r.start_unix_ns).min().unwrap();
    let end = sent.iter().map(|r| r.end_unix_ns).max().unwrap();
    (good, good as f64 / ((end - start) as f64 / 1e9))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_holds_both_runs_to_the_slos_they_were_made_with() {
    let (baseline, demo) = with_and_without_speculation(2.0, (8, 24));
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    // 30 ms: most speculative requests meet it, fewer baseline ones.
    let extra = [
        "--request-count",
        "48",
        "--goodput",
        "e2el:30",
        "--extra-inputs",
        "temperature:0",
    ];
    profile_side(baseline, &base, &extra, None).await;
    profile_side(demo, &spec, &extra, None).await;
    // 48 requests of a multi-turn set at concurrency 4: the two runs need
    // not send the same turns.
    let out = compare(&base, &spec, &["--force", "--format", "json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = &json["goodput"];
    let (base_records, spec_records) = (
        read_run(&base).unwrap().records,
        read_run(&spec).unwrap().records,
    );
    let (base_good, base_rate) = goodput_by_hand(&base_records, 30.0);
    let (spec_good, spec_rate) = goodput_by_hand(&spec_records, 30.0);
    assert_eq!(g["baseline"]["good_requests"], base_good);
    assert_eq!(g["speculative"]["good_requests"], spec_good);
    let close = |v: &serde_json::Value, want: f64| {
        (v.as_f64().unwrap() - want).abs() <= 1e-9 * want.max(1.0)
    };
    assert!(close(&g["baseline"]["goodput"], base_rate), "{g}");
    assert!(close(&g["speculative"]["goodput"], spec_rate), "{g}");
    if base_good > 0 {
        assert!(close(&g["goodput_ratio"], spec_rate / base_rate), "{g}");
    }

    // --goodput on compare replaces the runs' SLOs; the console says it.
    let out = compare(
        &base,
        &spec,
        &["--force", "--goodput", "request_latency:1000000"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Goodput against SLOs request_latency:1000000: baseline")
            && stdout.contains("(48 of 48 sent good)"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_runs_give_each_figure_its_spread_across_runs() {
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(2.0)
        .with_step_ms(1.0)
        .with_output_tokens(4, 16);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("three");
    let done = profile_rows(
        &server,
        &out,
        &[
            "--num-profile-runs",
            "3",
            "--confidence-level",
            "0.9",
            "--warmup-request-count",
            "4",
            "--profile-run-cooldown-seconds",
            "0.2",
        ],
    )
    .await;
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let served = server.ground_truth().requests;
    server.shutdown().await;
    // Every turn of the 33 rows a run, the warmup in the first only.
    let turns = speedbench_dataset::Dataset::from_jsonl_file(fixture())
        .unwrap()
        .conversations
        .iter()
        .map(|c| c.turns.len() as u64)
        .sum::<u64>();
    assert_eq!(served, 3 * turns + 4);

    let mut throughputs = Vec::new();
    let mut prompts = Vec::new();
    for k in 1..=3 {
        let run = out.join(format!("profile_runs/run_{k:04}"));
        let records = read_run(&run).unwrap().records;
        assert_record_invariants(&records, Some(true));
        assert_eq!(
            records.iter().filter(|r| r.warmup).count(),
            if k == 1 { 4 } else { 0 }
        );
        let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
        assert_eq!(measured.len() as u64, turns);
        let start = measured.iter().map(|r| r.start_unix_ns).min().unwrap();
        let end = measured.iter().map(|r| r.end_unix_ns).max().unwrap();
        throughputs.push(turns as f64 / ((end - start) as f64 / 1e9));
        let mut sent: Vec<(String, u32)> = measured
            .iter()
            .map(|r| (r.conversation_id.clone(), r.turn_index))
            .collect();
        sent.sort();
        prompts.push(sent);
    }
    assert!(
        prompts.windows(2).all(|w| w[0] == w[1]),
        "the same requests every run"
    );
    // Mean, sample std, CV and the t interval (t(0.95, 2) = 2.919986) by hand.
    let n = 3.0;
    let mean = throughputs.iter().sum::<f64>() / n;
    let std = (throughputs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let half = 2.919_985_580 * std / n.sqrt();
    let aggregate: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("aggregate.json")).unwrap()).unwrap();
    assert_eq!(aggregate["num_runs"], 3);
    assert_eq!(aggregate["num_successful_runs"], 3);
    assert_eq!(aggregate["confidence_level"], 0.9);
    let figure = aggregate["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "request_throughput_avg")
        .unwrap();
    let close = |key: &str, want: f64| {
        let got = figure[key].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-6 * want.abs().max(1.0),
            "{key}: {got} vs {want}"
        );
    };
    close("mean", mean);
    close("std", std);
    close("cv", std / mean);
    close("ci_low", mean - half);
    close("ci_high", mean + half);
    assert!(
        stdout.contains("speedbench | Across 3 runs (90% Student's t intervals of the mean)"),
        "{stdout}"
    );
    assert!(stdout.contains("figures of 3 of 3 runs in"), "{stdout}");

    // `report` of the parent: a matrix row per run, then the spread.
    let report = run(&["report", out.to_str().unwrap()]).await;
    let (text, err) = (
        String::from_utf8_lossy(&report.stdout),
        String::from_utf8_lossy(&report.stderr),
    );
    assert!(report.status.success(), "{err}");
    assert!(err.contains("Found 3 run directories."), "{err}");
    assert!(
        text.contains("speedbench | Across 3 runs (90% Student's t intervals of the mean)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_repetitions_are_refused_before_the_first_request() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    for (extra, says) in [
        (vec!["--num-profile-runs", "0"], "from 1 to 10"),
        (vec!["--num-profile-runs", "11"], "from 1 to 10"),
        (
            vec!["--num-profile-runs", "2", "--confidence-level", "1"],
            "strictly between 0 and 1",
        ),
        (
            vec!["--num-profile-runs", "2", "--output", "py.json"],
            "every run would write the one speed_bench.py file",
        ),
    ] {
        let done = profile(&server, &out, &extra).await;
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(!done.status.success(), "{extra:?}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
        assert!(!out.exists(), "{extra:?}: nothing was run");
    }
    // A run of a sweep file does not repeat itself: refused, not ignored
    // (the sweep's trials come from the command line or `multiRun`).
    let sweep = dir.path().join("sweep.toml");
    let text = format!(
        "[profile]\nnum_profile_runs = 2\ninput_file = {:?}\n[[variation]]\nconcurrency = 1\n",
        fixture().display().to_string()
    );
    std::fs::write(&sweep, text).unwrap();
    let url = server.url();
    let done = run(&[
        "profile",
        "--config",
        sweep.to_str().unwrap(),
        "--url",
        &url,
        "--output-artifact-dir",
        out.to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(!done.status.success());
    assert!(
        stderr.contains("a sweep file's runs repeat as trials of the whole sweep"),
        "{stderr}"
    );
    assert_eq!(server.ground_truth().requests, 0, "no request was sent");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_of_repeated_runs_gives_intervals_across_runs() {
    let (baseline, demo) = with_and_without_speculation(1.0, (4, 16));
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    let extra = ["--num-profile-runs", "3", "--extra-inputs", "temperature:0"];
    profile_side(baseline, &base, &extra, None).await;
    profile_side(demo, &spec, &extra, None).await;
    let out = compare(&base, &spec, &["--format", "json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // Every run of both sides pooled: 3 × every turn, each paired with its
    // occurrence on the other side.
    let overall = json["rows"].as_array().unwrap().last().unwrap().clone();
    let per_run = |parent: &std::path::Path| -> Vec<f64> {
        (1..=3)
            .map(|k| {
                let records = read_run(&parent.join(format!("profile_runs/run_{k:04}")))
                    .unwrap()
                    .records;
                let ok: Vec<f64> = records
                    .iter()
                    .filter(|r| !r.warmup && r.is_success())
                    .map(|r| r.request_latency_ms())
                    .collect();
                ok.iter().sum::<f64>() / ok.len() as f64
            })
            .collect()
    };
    let (b, s) = (per_run(&base), per_run(&spec));
    assert_eq!(overall["paired"].as_u64().unwrap() as usize % 3, 0);
    // The ratio of geometric means, by hand.
    let geo = |v: &[f64]| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp();
    let want = geo(&b) / geo(&s);
    let a = &json["across_runs"];
    assert_eq!(
        (a["baseline_runs"].as_u64(), a["speculative_runs"].as_u64()),
        (Some(3), Some(3))
    );
    let l = &a["latency_speedup"];
    let got = l["ratio"].as_f64().unwrap();
    assert!((got - want).abs() <= 1e-9 * want, "{got} vs {want}");
    assert!(l["low"].as_f64().unwrap() <= got && got <= l["high"].as_f64().unwrap());
    assert!(want > 1.2, "speculation pays on the simulator: {want}");
    let console = compare(&base, &spec, &[]).await;
    let text = String::from_utf8_lossy(&console.stdout);
    let line = format!(
        "Across runs (3 baseline, 3 speculative; 95% intervals across runs, Welch t on the log ratio): latency speedup {want:.2}x ["
    );
    assert!(text.contains(&line), "{text}");
    assert!(String::from_utf8_lossy(&console.stderr).contains("3 repeated runs pooled"));
}

/// The genuine A100 sample of NVIDIA's DCGM guide (fixtures/dcgm) with its
/// energy counter set to `energy_mj`: the loopback stand-in of the
/// exporter changes that value and nothing else.
fn a100_at(energy_mj: u64) -> String {
    let sample = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/dcgm/a100-dcgm-exporter.prom"),
    )
    .unwrap();
    sample
        .lines()
        .map(
            |l| match l.strip_prefix("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{") {
                Some(_) => format!("{} {energy_mj}\n", l.rsplit_once(' ').unwrap().0),
                None => format!("{l}\n"),
            },
        )
        .collect()
}

/// A DCGM exporter stand-in whose GPU spends exactly `mj_per_token` mJ
/// per output token the simulator has produced.
fn dcgm_exporter(server: std::sync::Arc<speedbench_sim::SimServer>, mj_per_token: u64) -> String {
    use std::io::Write;
    serve_connections(move |mut stream| {
        let mut buf = Vec::new();
        while read_request(&mut stream, &mut buf).is_some() {
            let tokens = server.ground_truth().completion_tokens;
            let body = a100_at(319_159_391 + tokens * mj_per_token);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            if stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(body.as_bytes()))
                .is_err()
            {
                return;
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gpu_telemetry_gives_the_energy_per_output_token_the_exporter_counted() {
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(2.0)
        .with_step_ms(1.0)
        .with_output_tokens(4, 16);
    let server = std::sync::Arc::new(sim(config).await);
    let dcgm = format!("{}/metrics", dcgm_exporter(server.clone(), 1000));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let done = profile(
        &server,
        &out,
        &["--gpu-telemetry", &dcgm, "--warmup-request-count", "6"],
    )
    .await;
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let records = read_run(&out).unwrap().records;
    assert_record_invariants(&records, Some(true));
    let measured_tokens: u64 = records
        .iter()
        .filter(|r| !r.warmup && r.is_success())
        .filter_map(|r| r.completion_tokens)
        .sum();
    let warmup_tokens: u64 = records
        .iter()
        .filter(|r| r.warmup)
        .filter_map(|r| r.completion_tokens)
        .sum();
    assert!(warmup_tokens > 0, "the warmup's energy must stay out");
    // The GPU spent 1 J per token it served in the window: the measured
    // requests' tokens, not the warmup's.
    let g = &summary(&out)["gpu_telemetry"];
    assert_eq!(g["output_tokens"], measured_tokens);
    assert_eq!(g["energy_j"].as_f64(), Some(measured_tokens as f64));
    assert_eq!(g["energy_per_output_token_j"].as_f64(), Some(1.0));
    let gpu = &g["gpus"][0];
    assert_eq!(gpu["uuid"], "GPU-34319582-d595-d1c7-d1d2-179bcfa61660");
    assert_eq!(gpu["power_w"]["avg"].as_f64(), Some(409.692));
    assert_eq!(gpu["memory_used_mib"]["max"].as_f64(), Some(4845.0));
    assert_eq!(
        g["gpus"].as_array().unwrap().len(),
        1,
        "the MIG instance is not another GPU"
    );
    assert!(out.join("gpu_telemetry_export.json").is_file());
    assert!(
        stdout.contains("speedbench | GPU Telemetry (DCGM)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "over {measured_tokens} output tokens: 1.0000 J per output token"
        )),
        "{stdout}"
    );

    // Anything but a DCGM exporter is refused before the first request.
    let before = server.ground_truth().requests;
    let not_dcgm = format!("{}/metrics", server.url());
    let refused = profile(
        &server,
        &dir.path().join("no"),
        &["--gpu-telemetry", &not_dcgm],
    )
    .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("--gpu-telemetry") && stderr.contains("without a DCGM_FI_* metric"),
        "{stderr}"
    );
    assert_eq!(server.ground_truth().requests, before, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_shows_energy_per_token_with_and_without_speculation() {
    let (baseline, demo) = with_and_without_speculation(1.0, (4, 16));
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    // The baseline's GPU spends 2 J a token, the speculative one's 0.5 J.
    let extra = ["--extra-inputs", "temperature:0"];
    profile_side(baseline, &base, &extra, Some(2000)).await;
    profile_side(demo, &spec, &extra, Some(500)).await;
    let out = compare(&base, &spec, &["--format", "json"]).await;
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let e = &json["energy"];
    let tokens = |d: &std::path::Path| -> u64 {
        read_run(d)
            .unwrap()
            .records
            .iter()
            .filter(|r| !r.warmup && r.is_success())
            .filter_map(|r| r.completion_tokens)
            .sum()
    };
    assert_eq!(e["baseline"]["output_tokens"], tokens(&base));
    assert_eq!(
        e["baseline"]["energy_j"].as_f64(),
        Some(2.0 * tokens(&base) as f64)
    );
    assert_eq!(
        e["baseline"]["energy_per_output_token_j"].as_f64(),
        Some(2.0)
    );
    assert_eq!(
        e["speculative"]["energy_per_output_token_j"].as_f64(),
        Some(0.5)
    );
    assert_eq!(e["energy_per_token_ratio"].as_f64(), Some(0.25));
}
