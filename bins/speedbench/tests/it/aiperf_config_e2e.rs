//! End-to-end: AIPerf 0.13.0's own SPEED-Bench template
//! (`aiperf config init --template speed_bench_sweep`, unchanged in
//! fixtures/aiperf/configs) run by `speedbench profile --config` against the
//! simulator: the runs AIPerf's `config expand` lists, in its directories,
//! each with its dataset, category, phases, load and request body; every
//! record keeps the invariants; a report over the sweep's parent is
//! AIPerf's one-row matrix.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{Value, json};
use speedbench_sim::SimConfig;

fn configs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/configs")
}

/// AIPerf's own expansion of a template (`aiperf config expand --full`).
fn aiperf_expansion(template: &str) -> Value {
    let path = configs().join(format!("{template}.expand.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The phase named `name` of an AIPerf variation.
fn phase<'a>(variation: &'a Value, name: &str) -> &'a Value {
    variation["benchmark"]["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_speed_bench_sweep_template_runs_unchanged_and_reports_one_row() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    // The template reads datasets/speed-bench/qualitative.jsonl relative to
    // the working directory, as AIPerf does.
    let data = dir.path().join("datasets/speed-bench");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(fixture(), data.join("qualitative.jsonl")).unwrap();
    let template = configs().join("speed_bench_sweep.yaml");
    let url = server.url();
    let out = bin()
        .current_dir(dir.path())
        // The template's ${INFERENCE_URL:...} and ${SERVER_METRICS_URL:...}.
        .env("INFERENCE_URL", format!("{url}/v1/chat/completions"))
        .env("SERVER_METRICS_URL", format!("{url}/metrics"))
        .env_remove("MODEL_NAME")
        .args(["profile", "--config", template.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let expansion = aiperf_expansion("speed_bench_sweep");
    let variations = expansion["variations"].as_array().unwrap();
    assert_eq!(variations.len(), 11);
    let parent = dir.path().join("artifacts/speed_bench_sweep");
    let mut requests = 0;
    for v in variations {
        let b = &v["benchmark"];
        // AIPerf's directory for this variation, and what it would run.
        let run_dir = parent.join(v["dir_name"].as_str().unwrap());
        let config = &run_json(&run_dir)["config"];
        let format = b["datasets"][0]["format"].as_str().unwrap();
        let category = format.strip_prefix("speed_bench_").unwrap();
        assert_eq!(config["categories"], json!([category]), "{run_dir:?}");
        assert!(
            config["input_file"]
                .as_str()
                .unwrap()
                .ends_with(b["datasets"][0]["path"].as_str().unwrap())
        );
        assert_eq!(config["model"], b["models"]["items"][0]["name"]);
        assert_eq!(config["extra_inputs"], b["endpoint"]["extra"]);
        assert_eq!(config["timeout_s"], b["endpoint"]["timeout"]);
        assert_eq!(config["streaming"], b["endpoint"]["streaming"]);
        let (warmup, profiling) = (phase(v, "warmup"), phase(v, "profiling"));
        assert_eq!(config["warmup_request_count"], warmup["requests"]);
        assert_eq!(config["warmup_concurrency"], warmup["concurrency"]);
        assert_eq!(config["request_count"], profiling["requests"]);
        assert_eq!(config["concurrency"], profiling["concurrency"]);
        // AIPerf gives variation i the seed `randomSeed + i`.
        let seed = expansion_seed(&template) + v["index"].as_u64().unwrap();
        assert_eq!(config["client"]["random_seed"], json!(seed));
        let metrics_urls = &config["client"]["server_metrics"];
        assert_eq!(metrics_urls, &json!([format!("{url}/metrics")]), "{config}");
        // Every record of the run: the warmup and the 80 profiled requests
        // of this category, each keeping the invariants.
        let file = read_run(&run_dir).unwrap();
        let warm = file.records.iter().filter(|r| r.warmup).count();
        assert_eq!((warm, file.records.len() - warm), (50, 80), "{run_dir:?}");
        assert!(file.records.iter().all(|r| r.is_success()));
        assert!(
            file.records
                .iter()
                .all(|r| r.conversation_id.starts_with(category)),
            "{run_dir:?}"
        );
        requests += file.records.len() as u64;
    }
    assert_eq!(server.ground_truth().requests, requests);
    server.shutdown().await;
    // The sweep's report, and one over the parent afterwards: one row of
    // eleven categories, as `aiperf speed-bench-report` gives.
    assert!(
        stdout.contains("=== report over 11 run(s) of the sweep ==="),
        "{stdout}"
    );
    let report = report_json(&parent, "accept_length", "records").await;
    let rows = report["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{report}"));
    assert_eq!(rows.len(), 1, "{report}");
    let categories: Vec<&str> = variations
        .iter()
        .map(|v| &v["benchmark"]["datasets"][0]["format"].as_str().unwrap()[12..])
        .collect();
    assert_eq!(report["columns"], json!(categories), "{report}");
    let cells = rows[0]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 11);
    assert!(
        cells.iter().all(|c| c.as_f64().is_some_and(|x| x >= 1.0)),
        "{report}"
    );
}

/// The template's `randomSeed`.
fn expansion_seed(template: &Path) -> u64 {
    let text = std::fs::read_to_string(template).unwrap();
    let line = text.lines().find(|l| l.starts_with("randomSeed:")).unwrap();
    line["randomSeed:".len()..].trim().parse::<u64>().unwrap()
}

/// AIPerf's `goodput_slo` template as a SPEED-Bench user adapts it (its
/// synthetic dataset swapped for the SPEED-Bench file, its SLOs and time
/// slices taken out): a closed-loop warmup at its own concurrency, then a
/// Poisson phase at a rate with a concurrency cap and a duration (here cut
/// to 2 s from the command line, which wins over the file), run into the
/// template's `artifacts.dir` itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapted_general_template_runs_its_phases_against_the_simulator() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("qualitative.jsonl")).unwrap();
    let original = std::fs::read_to_string(configs().join("goodput_slo.yaml")).unwrap();
    let mut adapted = Vec::new();
    let mut skipping = false;
    for line in original.lines() {
        let starts = |p: &str| line.trim_start().starts_with(p);
        if line.starts_with("  dataset:") || line.starts_with("  slos:") {
            skipping = true;
            if line.starts_with("  dataset:") {
                adapted.push("  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_qualitative".to_string());
            }
            continue;
        }
        if skipping && (line.starts_with("    ") || line.trim().is_empty()) {
            continue;
        }
        skipping = false;
        if !starts("sliceDuration") {
            adapted.push(line.to_string());
        }
    }
    let config = dir.path().join("goodput_slo.yaml");
    std::fs::write(&config, adapted.join("\n") + "\n").unwrap();
    let out = bin()
        .current_dir(dir.path())
        .args([
            "profile",
            "--config",
            config.to_str().unwrap(),
            "--url",
            &server.url(),
            "--benchmark-duration",
            "2",
            "--server-metrics-shutdown-delay",
            "0",
        ])
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let run_dir = dir.path().join("artifacts/goodput_slo");
    let config = &run_json(&run_dir)["config"];
    assert_eq!(config["warmup_request_count"], 100);
    assert_eq!(config["warmup_concurrency"], 16);
    let client = &config["client"];
    assert_eq!(client["request_rate"], 30.0, "{config}");
    assert_eq!(client["arrival"], "poisson");
    assert_eq!(client["max_concurrency"], 100);
    assert_eq!(client["benchmark_duration_s"], 2.0);
    assert_eq!(client["benchmark_grace_period_s"], 60.0);
    let file = read_run(&run_dir).unwrap();
    let warm = file.records.iter().filter(|r| r.warmup).count();
    assert_eq!(warm, 100);
    assert!(file.records.len() > warm, "the Poisson phase sent requests");
    assert_eq!(server.ground_truth().requests, file.records.len() as u64);
    server.shutdown().await;
}

/// A config naming `${VAR}` in a field of the wrong type is refused naming
/// the variable, never its value (it may be a secret); a YAML tag is
/// refused, on a collection too (`!!python/...` read as its items before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_values_are_named_not_shown_and_tags_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = |model: &str, concurrency: &str| {
        format!(
            "schemaVersion: \"2.0\"\nbenchmark:\n  model: {model}\n  endpoint:\n    url: \
             http://127.0.0.1:9\n  datasets:\n    - name: main\n      type: file\n      path: \
             {}\n  phases:\n    - name: profiling\n      type: concurrency\n      concurrency: \
             {concurrency}\n      requests: 1\n",
            fixture().display()
        )
    };
    let secret = "sk-notanumber-SECRET987";
    let file = dir.path().join("env.yaml");
    std::fs::write(&file, config("m", "${CONC}")).unwrap();
    let out = bin()
        .args(["profile", "--config", file.to_str().unwrap(), "--dry-run"])
        .env("CONC", secret)
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("invalid value '${CONC}' for '--concurrency'"),
        "{err}"
    );
    assert!(
        !err.contains("SECRET987") && !String::from_utf8_lossy(&out.stdout).contains("SECRET987"),
        "{err}"
    );

    let tagged = dir.path().join("tag.yaml");
    std::fs::write(
        &tagged,
        config("!!python/object/apply:os.system [\"echo hi\"]", "1"),
    )
    .unwrap();
    let out = run(&["profile", "--config", tagged.to_str().unwrap(), "--dry-run"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tag.yaml:3: the YAML tag `!!python/object/apply:os.system` is not read"),
        "{err}"
    );
}

/// `yaml` (a config over `qualitative.jsonl`, the mini fixture) run by
/// `profile --config` in a fresh directory against a fresh simulator; the
/// simulator, the directory and the run's stdout, once it succeeded.
async fn run_config_over_the_fixture(
    yaml: &str,
) -> (speedbench_sim::SimServer, tempfile::TempDir, String) {
    run_config_over_the_fixture_with(yaml, &[]).await
}

/// [`run_config_over_the_fixture`] with `extra` flags beside `--config`.
async fn run_config_over_the_fixture_with(
    yaml: &str,
    extra: &[&str],
) -> (speedbench_sim::SimServer, tempfile::TempDir, String) {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("qualitative.jsonl")).unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, yaml).unwrap();
    let url = server.url();
    let out = bin()
        .current_dir(dir.path())
        .args([
            "profile",
            "--config",
            config.to_str().unwrap(),
            "--url",
            &url,
        ])
        .args(["--server-metrics-shutdown-delay", "0"])
        .args(extra)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        server,
        dir,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A config of one run with `multiRun.numRuns: 2` runs it twice, as
/// `profile --num-profile-runs 2` does: two run directories, the figures
/// across them, and the simulator served every request of both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_run_repeats_the_run_of_a_config() {
    let (server, dir, _) = run_config_over_the_fixture(
        "schemaVersion: \"2.0\"\nmultiRun:\n  numRuns: 2\n  cooldownSeconds: 0\nbenchmark:\n  model: m\n  endpoint:\n    url: http://127.0.0.1:9\n  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_qualitative\n  phases:\n    type: concurrency\n    concurrency: 2\n    requests: 6\n  artifacts:\n    dir: ./artifacts/trials\n",
    )
    .await;
    let parent = dir.path().join("artifacts/trials");
    for run in ["run_0001", "run_0002"] {
        let records = read_run(&parent.join("profile_runs").join(run))
            .unwrap()
            .records;
        assert_eq!(records.len(), 6, "{run}");
        assert!(
            records
                .iter()
                .all(|r| r.is_success() && r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns))
        );
    }
    assert!(parent.join("aggregate.json").is_file());
    assert_eq!(server.ground_truth().requests, 12);
}

/// `--num-profile-runs 2` on the command line beside a config without
/// `multiRun` repeats its run as `multiRun` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn num_profile_runs_beside_a_config_repeats_its_run() {
    let (server, dir, _) = run_config_over_the_fixture_with(
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: m\n  endpoint:\n    url: http://127.0.0.1:9\n  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_qualitative\n  phases:\n    type: concurrency\n    concurrency: 2\n    requests: 5\n  artifacts:\n    dir: ./artifacts/again\n",
        &["--num-profile-runs", "2", "--profile-run-cooldown-seconds", "0"],
    )
    .await;
    let parent = dir.path().join("artifacts/again");
    for run in ["run_0001", "run_0002"] {
        let records = read_run(&parent.join("profile_runs").join(run))
            .unwrap()
            .records;
        assert_eq!(records.len(), 5, "{run}");
        assert!(records.iter().all(|r| r.is_success()));
    }
    assert!(parent.join("aggregate.json").is_file());
    assert_eq!(server.ground_truth().requests, 10);
}

/// A config with a sweep of two runs and `multiRun.numRuns: 2` runs the
/// sweep twice, trials outer (AIPerf's `repeated` order): four run
/// directories under `profile_runs/trial_000N/`, only the first trial
/// warming up (`disableWarmupAfterFirst`), each run's figures across its
/// two trials in `aggregate/<run>/`, and the simulator served every
/// request of every trial, in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_run_beside_a_sweep_runs_the_sweep_in_trials() {
    let (server, dir, stdout) = run_config_over_the_fixture(
        "schemaVersion: \"2.0\"\nmultiRun:\n  numRuns: 2\n  cooldownSeconds: 0\n  disableWarmupAfterFirst: true\nsweep:\n  type: grid\n  parameters:\n    concurrency: [1, 2]\nbenchmark:\n  model: m\n  endpoint:\n    url: http://127.0.0.1:9\n  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_qualitative\n  phases:\n    - name: warmup\n      type: concurrency\n      requests: 2\n      concurrency: 1\n      excludeFromResults: true\n    - name: profiling\n      type: concurrency\n      concurrency: 1\n      requests: 4\n  artifacts:\n    dir: ./artifacts/trials\n",
    )
    .await;
    let parent = dir.path().join("artifacts/trials");
    let mut starts = Vec::new();
    for (trial, warmups) in [("trial_0001", 2), ("trial_0002", 0)] {
        for run in ["concurrency_1", "concurrency_2"] {
            let path = parent.join("profile_runs").join(trial).join(run);
            let records = read_run(&path).unwrap().records;
            let warm = records.iter().filter(|r| r.warmup).count();
            assert_eq!(
                (records.len(), warm),
                (4 + warmups, warmups),
                "{trial}/{run}"
            );
            assert!(
                records
                    .iter()
                    .all(|r| r.is_success() && r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns))
            );
            starts.push(records.iter().map(|r| r.start_unix_ns).min().unwrap());
        }
    }
    assert!(
        starts.windows(2).all(|w| w[0] < w[1]),
        "trials outer: {starts:?}"
    );
    for run in ["concurrency_1", "concurrency_2"] {
        let path = parent.join("aggregate").join(run).join("aggregate.json");
        let aggregate: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(aggregate["num_runs"], 2, "{aggregate}");
        assert_eq!(aggregate["num_successful_runs"], 2, "{aggregate}");
        assert!(
            stdout.contains(&format!(
                "figures of 2 of 2 trials in ./artifacts/trials/aggregate/{run}/aggregate.json"
            )),
            "{stdout}"
        );
    }
    assert_eq!(server.ground_truth().requests, 2 * 2 + 4 * 4);
}

/// A scenario sweep runs each scenario's fields over the config's, each
/// into a directory named after it: one scenario keeps the base's request
/// count and changes the concurrency, the other changes the count; the
/// simulator served exactly their sum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scenario_sweep_runs_each_scenario_over_the_config() {
    let (server, dir, _) = run_config_over_the_fixture(
        "schemaVersion: \"2.0\"\nsweep:\n  type: scenarios\n  runs:\n    - name: wide\n      benchmark:\n        phases:\n          - name: profiling\n            concurrency: 3\n    - name: long\n      benchmark:\n        phases:\n          - name: profiling\n            requests: 7\nbenchmark:\n  model: m\n  endpoint:\n    url: http://127.0.0.1:9\n  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_qualitative\n  phases:\n    - name: profiling\n      type: concurrency\n      concurrency: 1\n      requests: 4\n  artifacts:\n    dir: ./artifacts/scenarios\n",
    )
    .await;
    let parent = dir.path().join("artifacts/scenarios");
    for (run, requests, concurrency) in [("wide", 4, 3), ("long", 7, 1)] {
        let records = read_run(&parent.join(run)).unwrap().records;
        assert_eq!(records.len(), requests, "{run}");
        assert!(
            records
                .iter()
                .all(|r| r.is_success() && r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns))
        );
        let run_json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(parent.join(run).join("run.json")).unwrap())
                .unwrap();
        let text = run_json.to_string();
        assert!(
            text.contains(&format!("\"concurrency\":{concurrency}")),
            "{run}: {text}"
        );
    }
    assert_eq!(server.ground_truth().requests, 4 + 7);
}

/// A fast simulator (1 ms to the first token, no step time) and AIPerf's
/// template `name` run unchanged by `profile --config` in `dir` with
/// `env` set and `extra` flags (`{url}` in either is the simulator's):
/// the simulator, once the run succeeded.
pub(crate) async fn run_template(
    name: &str,
    dir: &Path,
    env: &[(&str, String)],
    extra: &[&str],
) -> speedbench_sim::SimServer {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let template = configs().join(format!("{name}.yaml"));
    let url = server.url();
    let mut cmd = bin();
    cmd.current_dir(dir).env_remove("MODEL_NAME");
    for (k, v) in env {
        cmd.env(k, v.replace("{url}", &url));
    }
    let out = cmd
        .args([
            "profile",
            "--config",
            template.to_str().unwrap(),
            "--no-server-metrics",
        ])
        .args(extra.iter().map(|a| a.replace("{url}", &url)))
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    server
}

/// AIPerf's `minimal` template, unchanged (synthetic prompts of 512 tokens
/// asking for 128, 100 of them at concurrency 8), against the simulator
/// named by `--url`: every prompt the simulator read is 512 of its tokens,
/// every answer 128, and the run says how its prompts were counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_minimal_template_runs_its_synthetic_prompts_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let server = run_template("minimal", dir.path(), &[], &["--url", "{url}"]).await;
    let run_dir = dir.path().join("artifacts/minimal");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 100);
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), 100);
    for t in &truth.requests_log {
        assert_eq!((t.prompt_tokens, t.completion_tokens), (512, 128));
        assert_eq!(t.conversation.split_whitespace().count(), 512);
    }
    let config = &run_json(&run_dir)["config"];
    assert_eq!(config["synthetic"]["entries"], 100);
    assert_eq!(
        config["synthetic"]["tokens_counted_by"],
        "the server's /tokenize"
    );
    assert_eq!(config["concurrency"], 8);
}

/// AIPerf's `fixed_schedule` template, unchanged, over a `mooncake_trace`
/// of rows given by length (its `./data/precise_schedule.jsonl`), against
/// the simulator: every row sent once at its time from the first (its
/// `autoOffset`), under its concurrency ceiling, each prompt built to its
/// `input_length` and asking for its `output_length`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_fixed_schedule_template_replays_a_trace_given_by_length() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let rows = [(5_000, 24, 3), (5_150, 40, 2), (5_300, 12, 4)];
    let trace: String = rows
        .iter()
        .map(|(t, len, out)| {
            format!(
                "{{\"timestamp\": {t}, \"input_length\": {len}, \"output_length\": {out}, \"hash_ids\": [1]}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("data/precise_schedule.jsonl"), trace).unwrap();
    let server = run_template("fixed_schedule", dir.path(), &[], &["--url", "{url}"]).await;
    let truth = server.ground_truth();
    let lengths: Vec<u32> = truth.requests_log.iter().map(|t| t.prompt_tokens).collect();
    assert_eq!(lengths, [24, 40, 12], "in time order, each its length");
    for (t, (_, _, out)) in truth.requests_log.iter().zip(rows) {
        assert!(t.completion_tokens <= out);
    }
    let at: Vec<f64> = (truth.arrivals.iter())
        .map(|a| (a.at_unix_ns - truth.arrivals[0].at_unix_ns) as f64 / 1e9)
        .collect();
    for (got, want) in at.iter().zip([0.0, 0.15, 0.3]) {
        assert!((got - want).abs() < 0.03, "{at:?}");
    }
    let run_dir = dir.path().join("artifacts/fixed_schedule");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 3);
    let config = &run_json(&run_dir)["config"];
    assert_eq!(config["client"]["max_concurrency"], 100, "{config}");
    // What built the rows' prompts is recorded with them.
    let built = &config["trace_prompts"];
    assert_eq!(built["rows"], 3, "{config}");
    let by = built["tokens_counted_by"].as_str().unwrap_or_default();
    assert!(
        by.starts_with("the server's /tokenize at http://127.0.0.1:"),
        "{config}"
    );
}

/// AIPerf's `inline_dataset` template, unchanged (five `single_turn` rows
/// written in the config, one with its `output_length`), against the
/// simulator its `${INFERENCE_URL}` names: 50 requests over the five rows,
/// ten each, the one with an output length cut at it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_inline_dataset_template_sends_its_own_rows() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("INFERENCE_URL", "{url}/v1/chat/completions".to_string())];
    let server = run_template("inline_dataset", dir.path(), &env, &[]).await;
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), 50);
    let mut per_prompt: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in &truth.requests_log {
        *per_prompt.entry(t.conversation.as_str()).or_default() += 1;
        if t.conversation == "Explain GANs in two sentences." {
            assert!(t.completion_tokens <= 200);
        }
    }
    assert_eq!(per_prompt.len(), 5, "{per_prompt:?}");
    assert!(per_prompt.values().all(|&n| n == 10), "{per_prompt:?}");
    let records = read_run(&dir.path().join("artifacts/inline_dataset"))
        .unwrap()
        .records;
    assert_eq!(records.len(), 50);
    assert!(records.iter().all(|r| r.dataset == "inline"));
}

/// AIPerf's `request_cancellation` template, its file unchanged, sized down
/// on the command line (the simulator's URL, 100 prompts, 8 warmup and 60
/// profiled requests at 100/s): the requests its seeded 10 % picked are
/// cancelled after its 0.5 s (the simulator abandoned exactly as many),
/// and its `formats: [json, csv]` gives `server_metrics_export.csv` beside
/// the JSON, a row for every series of the JSON export with its numbers;
/// the template's own `localhost:8000` scrape URL, dead here, is counted as
/// failing and has no row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_request_cancellation_template_cancels_and_writes_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    // About 0.8 s per answer of ~512 tokens: the 0.5 s cancellation lands.
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(5.0))
    .await;
    let url = server.url();
    let flags = [
        "--url",
        &url,
        "--num-dataset-entries",
        "100",
        "--warmup-request-count",
        "8",
        "--request-count",
        "60",
        "--request-rate",
        "100",
    ];
    let out = template_run(dir.path(), "request_cancellation", &[], &flags).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_dir = dir.path().join("artifacts/request_cancellation");
    let all = read_run(&run_dir).unwrap().records;
    assert_eq!(all.iter().filter(|r| r.warmup).count(), 8);
    let records: Vec<_> = all.into_iter().filter(|r| !r.warmup).collect();
    assert_eq!(records.len(), 60);
    let cancelled = records
        .iter()
        .filter(|r| r.error_kind == Some(speedbench_record::ErrorKind::ClientCancelled))
        .count();
    assert!(cancelled > 0, "the seeded 10 % picked none of 60");
    assert_eq!(server.ground_truth().abandoned.len(), cancelled);
    for r in records.iter().filter(|r| r.is_success()) {
        assert!(r.ttft_ns.is_some_and(|t| t <= r.e2e_latency_ns));
    }
    let export = speedbench_client::scrape::ServerMetricsExport::read(
        &run_dir.join("server_metrics_export.json"),
    )
    .unwrap();
    let dead = "http://localhost:8000/metrics";
    assert!(export.summary.endpoint_info[dead].failed_fetches > 0);
    let csv = std::fs::read_to_string(run_dir.join("server_metrics_export.csv")).unwrap();
    check_csv_holds_the_export(&csv, &export);
}

/// Every series of `export` has its row in `csv` (the endpoint as AIPerf
/// shows it, the type, the name), counters with their total and rate and
/// gauges with their mean, to four decimals; no row names another endpoint.
fn check_csv_holds_the_export(csv: &str, export: &speedbench_client::scrape::ServerMetricsExport) {
    use speedbench_client::scrape::SeriesStats;
    let rows: Vec<Vec<&str>> = csv
        .split("\r\n")
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split(',').collect())
        .collect();
    let mut matched = 0;
    for (name, family) in &export.metrics {
        for series in &family.series {
            let endpoint = series
                .endpoint_url
                .trim_start_matches("http://")
                .trim_end_matches("/metrics");
            let candidates: Vec<&Vec<&str>> = rows
                .iter()
                .filter(|r| r.len() > 4 && r[0] == endpoint && r[2] == name.as_str())
                .collect();
            assert!(!candidates.is_empty(), "no row for {name}");
            let want = match &series.stats {
                Some(SeriesStats::Counter(c)) => vec![format!("{:.4}", c.total)],
                Some(SeriesStats::Gauge(_)) if name.ends_with("_info") => Vec::new(),
                Some(SeriesStats::Gauge(g)) => vec![format!("{:.4}", g.avg)],
                _ => Vec::new(),
            };
            if let Some(first) = want.first() {
                assert!(
                    candidates.iter().any(|r| r[4] == first),
                    "{name}: {first} in none of {candidates:?}"
                );
            }
            matched += 1;
        }
    }
    assert!(matched > 5, "{matched} series");
    for r in rows.iter().filter(|r| r.len() > 4 && r[0] != "Endpoint") {
        assert!(!r[0].starts_with("localhost:8000"), "{r:?}");
    }
}

/// AIPerf's `multi_turn_conversation` template, its file unchanged, sized
/// down on the command line (the simulator's URL, 12 entries, 2 warmup and
/// 8 measured conversations, 20 ms of think time): synthetic conversations
/// of their drawn turns, every turn carrying the conversation so far and
/// asking for its own drawn output length, which the simulator gave
/// exactly; each conversation on a connection of its own
/// (`sticky-user-sessions`), every turn of it there and nothing else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_multi_turn_conversation_template_keeps_each_conversation_on_its_connection() {
    use speedbench_client::synthetic::{SyntheticPrompts, TokenLength, TurnCount, WordCodec};
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let url = server.url();
    let flags = [
        "--url",
        &url,
        "--num-dataset-entries",
        "12",
        "--num-warmup-sessions",
        "2",
        "--num-conversations",
        "8",
        "--session-turn-delay-mean",
        "20",
        "--session-turn-delay-stddev",
        "5",
        "--no-preflight",
        "--no-server-metrics",
    ];
    let out = template_run(dir.path(), "multi_turn_conversation", &[], &flags).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same draws (the template's seed 42) with the simulator's
    // tokenizer, words: each entry's turns and output lengths.
    let expected = SyntheticPrompts::new(12, TokenLength::normal(200, 50.0))
        .with_output(TokenLength::normal(300, 75.0))
        .with_turns(TurnCount {
            mean: 5,
            stddev: 2.0,
        })
        .with_seed(42);
    let expected = expected.build(&WordCodec::default()).await.unwrap().dataset;
    let records = read_run(&dir.path().join("artifacts/multi_turn"))
        .unwrap()
        .records;
    // Warmup: rows 0 and 1; measured: rows 0 to 7, every turn of each.
    let turns_of = |rows: std::ops::Range<usize>| -> usize {
        expected.conversations[rows]
            .iter()
            .map(|c| c.turns.len())
            .sum()
    };
    assert_eq!(records.iter().filter(|r| r.warmup).count(), turns_of(0..2));
    assert_eq!(records.iter().filter(|r| !r.warmup).count(), turns_of(0..8));
    assert!(
        records.iter().all(|r| r.is_success()),
        "every turn answered"
    );
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), records.len());
    // By connection: one conversation's turns, 1..n in order, each its
    // drawn output length; ten conversations, ten connections.
    let mut by_connection: std::collections::BTreeMap<u64, Vec<_>> = Default::default();
    for t in &truth.requests_log {
        assert!(t.connection > 0);
        by_connection.entry(t.connection).or_default().push(t);
    }
    assert_eq!(by_connection.len(), 10, "one connection per conversation");
    for requests in by_connection.values() {
        let row = expected
            .conversations
            .iter()
            .find(|c| c.turns[0] == requests[0].conversation)
            .expect("a conversation of the dataset");
        let turns: Vec<u32> = requests.iter().map(|t| t.turns).collect();
        let want: Vec<u32> = (1..=row.turns.len() as u32).collect();
        assert_eq!(
            turns, want,
            "{}: its turns in order on one connection",
            row.id
        );
        let outputs: Vec<Option<u32>> =
            requests.iter().map(|t| Some(t.completion_tokens)).collect();
        let drawn: Vec<Option<u32>> = (0..row.turns.len())
            .map(|t| row.output_tokens_of_turn(t))
            .collect();
        assert_eq!(outputs, drawn, "{}", row.id);
    }
    assert!(
        expected.conversations[..8]
            .iter()
            .any(|c| c.turns.len() > 1)
    );
}

/// AIPerf's `jinja2_variables` template, unchanged: `--dry-run` checks its
/// rendered run and its `multiRun` of three and sends nothing (the server
/// it names is the simulator, which sees no request, not even /tokenize).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_of_a_repeated_config_sends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let env = [(
        "INFERENCE_URL",
        format!("{}/v1/chat/completions", server.url()),
    )];
    let out = template_run(dir.path(), "jinja2_variables", &env, &["--dry-run"]).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("--num-dataset-entries=160"), "{stdout}");
    assert!(stdout.contains("--max-concurrency=64"), "{stdout}");
    assert!(
        stdout.contains("the run repeats 3 times (multiRun or --num-profile-runs)"),
        "{stdout}"
    );
    assert!(stdout.contains("nothing was sent (--dry-run)"), "{stdout}");
    let truth = server.ground_truth();
    assert_eq!((truth.requests, truth.arrivals.len()), (0, 0));
    assert!(!dir.path().join("artifacts").exists());
}

/// AIPerf's `user_files` template, its file unchanged, sized down on the
/// command line, against the simulator its `${INFERENCE_URL}` names: its
/// three files are in the run directory, each rendered with the template's
/// variables (`total_concurrency` = 32 × 4 through another variable) and
/// the run's own names (model, endpoint, job name, directory, epoch).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_user_files_template_writes_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let env = [
        ("MODEL_NAME", "sim-model".to_string()),
        (
            "INFERENCE_URL",
            format!("{}/v1/chat/completions", server.url()),
        ),
    ];
    let flags = [
        "--num-dataset-entries",
        "4",
        "--warmup-request-count",
        "2",
        "--request-count",
        "4",
        "--concurrency",
        "2",
        "--no-server-metrics",
    ];
    let out = template_run(dir.path(), "user_files", &env, &flags).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run_dir = dir.path().join("artifacts/user_files_demo");
    let config: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("input_config.json")).unwrap()).unwrap();
    assert_eq!(config["scenario"], "dense-agg");
    assert_eq!(config["total_concurrency"], 128);
    assert_eq!(
        (config["isl"].clone(), config["gpu_count"].clone()),
        (json!(1024), json!(4))
    );
    assert_eq!(config["model"], "sim-model");
    assert_eq!(config["endpoint"], server.url());
    assert_eq!(config["run"]["job_name"], "user_files_demo");
    assert_eq!(config["run"]["namespace"], "");
    let epoch = config["run"]["epoch"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now - epoch < 120, "{epoch}");
    let meta = std::fs::read_to_string(run_dir.join("meta/run.yaml")).unwrap();
    assert!(
        meta.starts_with(&format!(
            "artifact_dir: {}",
            run_dir.canonicalize().unwrap().display()
        )) || meta.contains("artifact_dir: "),
        "{meta}"
    );
    assert!(
        meta.contains(&format!("run_id: user_files_demo-{epoch}\n")),
        "{meta}"
    );
    assert!(
        meta.contains("tags:\n- dense-agg\n- isl=1024\n- osl=1024\n"),
        "{meta}"
    );
    let readme = std::fs::read_to_string(run_dir.join("README.md")).unwrap();
    assert!(
        readme.contains("- Concurrency: 128 (32/GPU x 4 GPUs)\n"),
        "{readme}"
    );
    assert!(
        readme.contains(&format!("- Started: epoch {epoch}")),
        "{readme}"
    );
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.iter().filter(|r| !r.warmup).count(), 4);
}

/// `profile --config` of AIPerf's template `name`, unchanged, in `dir` with
/// `env` set (`MODEL_NAME` unset unless given) and `flags` after it.
async fn template_run(
    dir: &Path,
    name: &str,
    env: &[(&str, String)],
    flags: &[&str],
) -> std::process::Output {
    let template = configs().join(format!("{name}.yaml"));
    let mut cmd = bin();
    cmd.current_dir(dir).env_remove("MODEL_NAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.args(["profile", "--config", template.to_str().unwrap()])
        .args(flags)
        .output()
        .await
        .unwrap()
}

/// AIPerf's `kv_cache_test` template, its file unchanged, sized down on
/// the command line (the simulator's URL and `/metrics`, 24 entries, a
/// 0.6 s warmup of 3 users at 6 requests/s, 2.5 s measured in 1 s slices
/// with 6 users at 12 requests/s: a gap of 0.5 s between a user's turns): every conversation's first
/// prompt opens with one of the pool's 512-token prefixes (several
/// conversations sharing each) and counts 512 more tokens than its own
/// text; each conversation's later turns reach the simulator a gap apart
/// (the template's turn delay of 1.5 s is replaced by the gap, as AIPerf
/// does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_kv_cache_test_template_paces_users_over_shared_prefixes() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let url = server.url();
    let metrics = format!("{url}/metrics");
    let flags = [
        "--url",
        &url,
        "--num-dataset-entries",
        "24",
        "--warmup-duration",
        "0.6",
        "--warmup-num-users",
        "3",
        "--warmup-user-centric-rate",
        "6",
        "--benchmark-duration",
        "2.5",
        "--slice-duration",
        "1",
        "--benchmark-grace-period",
        "5",
        "--num-users",
        "6",
        "--user-centric-rate",
        "12",
        "--no-preflight",
        "--server-metrics",
        &metrics,
    ];
    let out = template_run(dir.path(), "kv_cache_test", &[], &flags).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("10 shared prefixes of 512 tokens"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    // The first prompt of each conversation, as the simulator read it.
    let mut prefixes = std::collections::BTreeMap::<String, usize>::new();
    let mut firsts = std::collections::BTreeSet::new();
    for t in &truth.requests_log {
        let words: Vec<&str> = t.conversation.split_whitespace().collect();
        assert!(words.len() > 512, "{} words", words.len());
        *prefixes.entry(words[..512].join(" ")).or_default() += 1;
        firsts.insert(t.conversation.clone());
    }
    assert!(
        prefixes.len() <= 10 && prefixes.len() > 1,
        "{} prefixes",
        prefixes.len()
    );
    assert!(
        firsts.len() > prefixes.len(),
        "conversations share prefixes"
    );
    // Each conversation's turns in the measured phase a gap apart (the
    // warmup's users hold the same rows: their arrivals come before the
    // measured phase's first send).
    let records = read_run(&dir.path().join("artifacts/kv_cache_test"))
        .unwrap()
        .records;
    let measured_from = (records.iter().filter(|r| !r.warmup))
        .map(|r| r.start_unix_ns as u64)
        .min()
        .unwrap();
    let mut at = std::collections::BTreeMap::<String, Vec<u64>>::new();
    for a in truth
        .arrivals
        .iter()
        .filter(|a| a.at_unix_ns >= measured_from)
    {
        at.entry(a.conversation.clone())
            .or_default()
            .push(a.at_unix_ns);
    }
    let mut gaps = 0;
    for times in at.values_mut() {
        times.sort_unstable();
        for w in times.windows(2) {
            let s = (w[1] - w[0]) as f64 / 1e9;
            assert!((0.45..0.75).contains(&s), "turns {s:.3} s apart");
            gaps += 1;
        }
    }
    assert!(gaps >= 6, "{gaps} later turns");
    assert!(records.iter().any(|r| r.warmup) && records.iter().any(|r| !r.warmup));
    // Each first turn counted 512 + its own words.
    for r in records
        .iter()
        .filter(|r| r.turn_index == 0 && r.is_success())
    {
        assert!(
            r.prompt_tokens.is_some_and(|n| n > 512),
            "{:?}",
            r.prompt_tokens
        );
    }
}

/// AIPerf's `trace_replay` template, unchanged, over a `mooncake_trace` of
/// rows given by length (its `./data/production_trace.jsonl`), against
/// the simulator and its `/metrics`: replayed at twice the trace's speed
/// (its `speedupRatio: 2`), the row over its `maxIsl` of 8192 never sent;
/// the scrape's raw samples written as AIPerf's Parquet, whose last
/// prompt-token counter increase is the simulator's own count and the
/// records' sum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_trace_replay_template_replays_faster_and_writes_the_raw_samples() {
    use arrow_array::{Array, Float64Array, StringArray};
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("data")).unwrap();
    let rows = [
        (1_000, 24, 3),
        (1_300, 9_000, 2),
        (1_400, 40, 2),
        (1_800, 12, 4),
    ];
    let trace: String = rows
        .iter()
        .map(|(t, len, out)| {
            format!(
                "{{\"timestamp\": {t}, \"input_length\": {len}, \"output_length\": {out}, \"hash_ids\": [1]}}\n"
            )
        })
        .collect();
    std::fs::write(dir.path().join("data/production_trace.jsonl"), trace).unwrap();
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let url = server.url();
    let metrics = format!("{url}/metrics");
    let flags = [
        "--url",
        &url,
        "--server-metrics",
        &metrics,
        "--isl-block-size",
        "8",
    ];
    let out = template_run(dir.path(), "trace_replay", &[], &flags).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("1 row with an input_length over --synthesis-max-isl 8192 is not sent"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    let lengths: Vec<u32> = truth.requests_log.iter().map(|t| t.prompt_tokens).collect();
    assert_eq!(
        lengths,
        [24, 40, 12],
        "in time order, the long row left out"
    );
    let at: Vec<f64> = (truth.arrivals.iter())
        .map(|a| (a.at_unix_ns - truth.arrivals[0].at_unix_ns) as f64 / 1e9)
        .collect();
    for (got, want) in at.iter().zip([0.0, 0.2, 0.4]) {
        assert!((got - want).abs() < 0.03, "{at:?}");
    }
    let run_dir = dir.path().join("artifacts/trace_replay");
    let records = read_run(&run_dir).unwrap().records;
    let prompt_sum: u64 = records.iter().filter_map(|r| r.prompt_tokens).sum();
    assert_eq!(prompt_sum, truth.prompt_tokens);
    let file = std::fs::File::open(run_dir.join("server_metrics_export.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut last_prompt_tokens = None;
    for batch in reader.map(Result::unwrap) {
        let col = |n: &str| batch.column_by_name(n).unwrap().clone();
        let names = col("metric_name");
        let names = names.as_any().downcast_ref::<StringArray>().unwrap();
        let values = col("value");
        let values = values.as_any().downcast_ref::<Float64Array>().unwrap();
        for i in 0..batch.num_rows() {
            if names.value(i) == "vllm:prompt_tokens" && values.is_valid(i) {
                last_prompt_tokens = Some(values.value(i));
            }
        }
    }
    assert_eq!(last_prompt_tokens, Some(prompt_sum as f64));
}

/// AIPerf's `sweep_with_plot` template, its file unchanged, sized down on
/// the command line (4 requests after 1 of warmup, 2 trials without a
/// cooldown, for the 9 concurrencies of its grid): its two sweep plots are
/// written, each point the mean over its two trials of the figures in the
/// trials' own `summary.json`, labelled by its concurrency, the Pareto
/// frontier the points no point of lower latency beats on throughput; what
/// is not drawn is said; the simulator served every request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_sweep_with_plot_template_draws_its_sweep_plots() {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = server.url();
    let flags = [
        "--url",
        &url,
        "--no-server-metrics",
        "--request-count",
        "4",
        "--warmup-request-count",
        "1",
        "--num-dataset-entries",
        "8",
        "--num-profile-runs",
        "2",
        "--profile-run-cooldown-seconds",
        "0",
    ];
    let out = template_run(dir.path(), "sweep_with_plot", &[], &flags).await;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    let parent = dir.path().join("artifacts/sweep_with_plot");
    let levels = [1, 2, 4, 8, 16, 32, 64, 128, 256];
    for (trial, warmups) in [("trial_0001", 1), ("trial_0002", 0)] {
        for level in levels {
            let run = parent
                .join("profile_runs")
                .join(trial)
                .join(format!("concurrency_{level}"));
            let records = read_run(&run).unwrap().records;
            assert_eq!(records.len(), 4 + warmups, "{}", run.display());
            assert!(
                records
                    .iter()
                    .all(|r| r.is_success() && r.ttft_ns.is_some_and(|t| t <= r.e2e_latency_ns))
            );
        }
    }
    // Each concurrency's figures in its two trials, from their summaries.
    let figure = |level: u32, read: fn(&Value) -> f64| -> f64 {
        let trials: Vec<f64> = ["trial_0001", "trial_0002"]
            .iter()
            .map(|t| {
                let path = parent
                    .join("profile_runs")
                    .join(t)
                    .join(format!("concurrency_{level}"))
                    .join("summary.json");
                let summary: Value =
                    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                read(&summary)
            })
            .collect();
        (trials[0] + trials[1]) / 2.0
    };
    type Figure = fn(&Value) -> f64;
    let cases: [(&str, Figure, Figure); 2] = [
        (
            "pareto_throughput_vs_latency",
            |s| s["request_latency_ms"]["avg"].as_f64().unwrap(),
            |s| s["output_token_throughput"].as_f64().unwrap(),
        ),
        (
            "ttft_vs_throughput",
            |s| s["ttft_ms"]["avg"].as_f64().unwrap(),
            |s| s["request_throughput"].as_f64().unwrap(),
        ),
    ];
    for (name, x, y) in cases {
        let path = parent.join("plots").join(format!("{name}.svg"));
        assert!(
            stdout.contains(&format!(
                "plot: ./artifacts/sweep_with_plot/plots/{name}.svg"
            )),
            "{stdout}"
        );
        let svg = std::fs::read_to_string(&path).unwrap();
        let points = svg_points(&svg);
        let labels: Vec<String> = levels.iter().map(|l| format!("concurrency={l}")).collect();
        assert_eq!(
            points.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),
            labels,
            "{name}"
        );
        for (level, (label, px, py, _)) in levels.iter().zip(&points) {
            assert_eq!(
                (*px, *py),
                (figure(*level, x), figure(*level, y)),
                "{name} {label}"
            );
        }
        if name.starts_with("pareto") {
            // Lower latency and higher throughput are better: a point is
            // on the frontier when no point of lower latency has a higher
            // throughput.
            for (label, px, py, on) in &points {
                let beaten = points.iter().any(|(_, qx, qy, _)| qx < px && qy > py);
                assert_eq!(*on, !beaten, "{label}: {points:?}");
            }
            assert!(points.iter().any(|p| p.3));
        }
    }
    assert!(
        stderr.contains("note: plot.visualization.single_run_defaults (ttft_over_time, timeslices_ttft, timeslices_itl)"),
        "{stderr}"
    );
    // 9 runs of 4 requests in each of 2 trials, and a warmup request
    // before each run of the first.
    assert_eq!(server.ground_truth().requests, 9 * 4 * 2 + 9);
}

/// The circles of a sweep plot: (label, x, y, on the frontier).
fn svg_points(svg: &str) -> Vec<(String, f64, f64, bool)> {
    let attr = |c: &str, name: &str| {
        let at = c.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        c[at..at + c[at..].find('"').unwrap()].to_string()
    };
    svg.split("<circle ")
        .skip(1)
        .map(|c| {
            (
                attr(c, "data-label"),
                attr(c, "data-x").parse().unwrap(),
                attr(c, "data-y").parse().unwrap(),
                attr(c, "data-frontier") == "true",
            )
        })
        .collect()
}
