//! AIPerf 0.13.0's config templates (fixtures/aiperf/configs, made by
//! `aiperf config init`) read by [`Sweep`]: the SPEED-Bench sweep gives
//! the runs AIPerf's own `config expand` lists, each the same spec as the
//! equivalent `speedbench profile` flags; every general template is refused
//! at the first field speedbench has no counterpart for, by name and line,
//! and runs once a SPEED-Bench user has adapted those fields.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use speedbench_run::RunSpec;
use speedbench_run::sweep::Sweep;

fn configs() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/configs")
}

fn template(name: &str) -> String {
    std::fs::read_to_string(configs().join(format!("{name}.yaml"))).unwrap()
}

/// AIPerf's own `config expand --full` of template `name`.
fn aiperf_expansion(name: &str) -> Value {
    let path = configs().join(format!("{name}.expand.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The phase named `name` of AIPerf's expansion's first variation.
fn aiperf_phase(aiperf: &Value, name: &str) -> Value {
    let phases = aiperf["variations"][0]["benchmark"]["phases"]
        .as_array()
        .unwrap();
    phases.iter().find(|p| p["name"] == name).unwrap().clone()
}

fn expand(name: &str, text: &str, cli: &[&str]) -> Result<Sweep, String> {
    let given: BTreeSet<String> = cli.iter().map(|s| s.to_string()).collect();
    let mut base = RunSpec::default();
    for flag in cli {
        base = base.with(flag, "http://127.0.0.1:9").unwrap();
    }
    Sweep::parse(Path::new(&format!("{name}.yaml")), text, &base, &given).map_err(|e| e.to_string())
}

/// The line (from 1) of the first line of `text` that contains `needle`
/// after the line holding `after`.
fn line_of(text: &str, after: &str, needle: &str) -> usize {
    let start = text.lines().position(|l| l.contains(after)).unwrap();
    start
        + 1
        + text
            .lines()
            .skip(start)
            .position(|l| l.contains(needle))
            .unwrap()
}

#[test]
fn the_speed_bench_sweep_is_the_runs_aiperf_expands_with_the_equivalent_flags() {
    let text = template("speed_bench_sweep");
    let sweep = expand("speed_bench_sweep", &text, &[]).unwrap();
    let aiperf: Value = serde_json::from_slice(
        &std::fs::read(configs().join("speed_bench_sweep.expand.json")).unwrap(),
    )
    .unwrap();
    let variations = aiperf["variations"].as_array().unwrap();
    assert_eq!(sweep.runs().len(), variations.len());
    assert_eq!(sweep.parent(), Path::new("./artifacts/speed_bench_sweep"));
    for (i, (run, v)) in sweep.runs().iter().zip(variations).enumerate() {
        assert_eq!(run.dir_name, v["dir_name"].as_str().unwrap());
        assert_eq!(run.description, v["label"].as_str().unwrap());
        assert_eq!(run.dir, sweep.parent().join(&run.dir_name));
        let category = &v["benchmark"]["datasets"][0]["format"].as_str().unwrap()[12..];
        // The same run written as speedbench flags, by hand from the
        // template's fields.
        let mut flags = RunSpec::default();
        for (flag, value) in [
            ("model", "meta-llama/Llama-3.1-8B-Instruct"),
            ("url", "http://localhost:8000"),
            ("endpoint-type", "chat"),
            ("streaming", "true"),
            ("timeout", "600"),
            // endpoint.extra as one JSON object (its keys in JSON's order).
            (
                "extra-inputs",
                r#"{"max_completion_tokens":4096,"temperature":0}"#,
            ),
            ("input-file", "datasets/speed-bench/qualitative.jsonl"),
            ("category", category),
            ("warmup-request-count", "50"),
            ("warmup-concurrency", "8"),
            ("request-count", "80"),
            ("concurrency", "16"),
            ("server-metrics", "http://localhost:8000/metrics"),
            // Each variation's seed is `randomSeed + its index` unless the
            // sweep says `sameSeed: true` (AIPerf 0.13.0's
            // `_apply_sweep_seed_derivation`; its expansion does not show
            // seeds).
            ("random-seed", &(42 + i).to_string()),
        ] {
            flags = flags.with(flag, value).unwrap();
        }
        flags.outputs.output_artifact_dir = Some(run.dir.clone());
        assert_eq!(run.spec().unwrap(), &flags, "{}", run.dir_name);
    }
}

#[test]
fn the_command_line_replaces_a_field_but_not_a_swept_one() {
    let text = template("speed_bench_sweep");
    let sweep = expand("speed_bench_sweep", &text, &["url"]).unwrap();
    assert!(
        sweep
            .runs()
            .iter()
            .all(|r| r.spec().unwrap().target.url == "http://127.0.0.1:9")
    );
    let swept = text
        .replace("datasets.main.format:", "endpoint.url:")
        .replace("      - speed_bench_", "      - http://h/");
    let swept = swept.replace(
        "format: speed_bench_coding  # overridden by sweep",
        "format: speed_bench_coding",
    );
    let err = expand("s", &swept, &["url"]).unwrap_err();
    assert!(
        err.contains("--url on the command line would replace what the sweep varies"),
        "{err}"
    );
}

/// `sweep_distributions` as shipped: its grid of three ISLs by three rates
/// (nine runs, the ISL swept through `datasets.default.prompts.isl`, the
/// one dataset) in three trials of `multiRun`, trials outer, 15 s of
/// cooldown between trials, warmup in the first only. AIPerf 0.13.0 cannot
/// expand this template itself (its fixture holds the error), so the
/// figures here are the template's own values.
#[test]
fn sweep_distributions_runs_its_grid_in_three_trials() {
    let sweep = expand("sweep_distributions", &template("sweep_distributions"), &[]).unwrap();
    let trials = sweep.trials().unwrap().clone();
    assert_eq!(trials.num_profile_runs, 3);
    assert_eq!((trials.cooldown_s, trials.confidence_level), (15.0, 0.95));
    assert!(!trials.warmup_every_run);
    let grid: Vec<(u32, f64)> = (sweep.runs().iter())
        .map(|r| {
            let spec = r.spec().unwrap();
            (
                spec.dataset.synthetic.isl.unwrap(),
                spec.load.request_rate.unwrap(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for isl in [128, 512, 2048] {
        for rate in [10.0, 30.0, 50.0] {
            want.push((isl, rate));
        }
    }
    assert_eq!(grid, want);
    let trials = sweep.in_trials(&trials).unwrap();
    let runs = trials.runs();
    assert_eq!(runs.len(), 27);
    for (i, run) in runs.iter().enumerate() {
        let (trial, v) = (i / 9 + 1, i % 9);
        let spec = run.spec().unwrap();
        assert_eq!(run.index, i + 1);
        assert_eq!(
            (
                spec.dataset.synthetic.isl.unwrap(),
                spec.load.request_rate.unwrap()
            ),
            want[v]
        );
        assert!(
            run.dir
                .ends_with(format!("profile_runs/trial_{trial:04}/{}", run.dir_name)),
            "{}",
            run.dir.display()
        );
        let warmup = if trial == 1 { 50 } else { 0 };
        assert_eq!(
            spec.load.warmup_request_count, warmup,
            "{}",
            run.description
        );
    }
}

/// The templates of synthetic prompts that expand as shipped: their
/// lengths as `--isl/--isl-stddev/--osl/--osl-stddev`, their entries as
/// `--num-dataset-entries` (AIPerf's `isl: 512` and `isl: {mean, stddev}`,
/// under `prompts` or beside it).
#[test]
fn synthetic_templates_expand_as_shipped() {
    let cases = [
        ("minimal", (512, 0.0), (128, 0.0), 100),
        ("latency_test", (256, 50.0), (128, 25.0), 3000),
        ("goodput_slo", (512, 100.0), (256, 50.0), 5000),
        ("warmup_profiling", (550, 50.0), (150, 25.0), 5000),
    ];
    for (name, isl, osl, entries) in cases {
        let sweep = expand(name, &template(name), &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let spec = sweep.runs()[0].spec().unwrap();
        let d = &spec.dataset;
        assert_eq!(
            d.source,
            Some(speedbench_run::DatasetSource::Synthetic),
            "{name}"
        );
        assert_eq!(
            (d.synthetic.isl, d.synthetic.isl_stddev),
            (Some(isl.0), isl.1),
            "{name}"
        );
        assert_eq!(
            (spec.sampling.osl, d.synthetic.osl_stddev),
            (Some(osl.0), osl.1),
            "{name}"
        );
        assert_eq!(d.synthetic.entries, entries, "{name}");
    }
    // A log-normal length is `--isl-distribution`; an unknown field of a
    // length is refused by name and line.
    let text = template("minimal").replace("isl: 512", "isl: {mean: 512, median: 400}");
    let sweep = expand("minimal", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        spec.dataset.synthetic.isl_distribution.as_deref(),
        Some(r#"{"mean":512,"median":400}"#)
    );
    let text = template("minimal").replace("isl: 512", "isl: {mean: 512, spread: 400}");
    let err = expand("minimal", &text, &[]).unwrap_err();
    assert!(err.contains("`datasets[0].prompts.isl.spread`"), "{err}");
}

/// AIPerf's `http_trace_metrics` template, as shipped: its trace table
/// (`showTraceTiming`) and trace export (`trace`), its Poisson load and
/// slices as AIPerf's own expansion gives them. Every general template now
/// runs: none is refused.
#[test]
fn http_trace_metrics_expands_as_shipped() {
    let name = "http_trace_metrics";
    let aiperf = aiperf_expansion(name);
    let artifacts = &aiperf["variations"][0]["benchmark"]["artifacts"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        Some(spec.figures.show_trace_timing),
        artifacts["show_trace_timing"].as_bool()
    );
    assert_eq!(
        Some(spec.outputs.export_http_trace),
        artifacts["trace"].as_bool()
    );
    assert!(spec.figures.show_trace_timing && spec.outputs.export_http_trace);
    assert_eq!(
        spec.figures.slice_duration_s,
        artifacts["slice_duration"].as_f64()
    );
    let profiling = aiperf_phase(&aiperf, "profiling");
    assert_eq!(spec.load.request_rate, profiling["rate"].as_f64());
    assert_eq!(
        spec.load.max_concurrency.map(|c| c as u64),
        profiling["concurrency"].as_u64()
    );
    assert_eq!(spec.load.request_count, profiling["requests"].as_u64());
    assert_eq!(spec.dataset.synthetic.isl, Some(256));
    // `trace: false` and a value that is no switch.
    let off = template(name).replace("trace: true  ", "trace: false  ");
    let spec = expand(name, &off, &[]).unwrap().runs()[0]
        .spec()
        .unwrap()
        .clone();
    assert!(!spec.outputs.export_http_trace && spec.figures.show_trace_timing);
    let bad = template(name).replace("showTraceTiming: true", "showTraceTiming: sometimes");
    let err = expand(name, &bad, &[]).unwrap_err();
    assert!(err.contains("show-trace-timing"), "{err}");
}

/// A synthetic dataset block replaced by the SPEED-Bench file, as a user
/// adapting a template does.
fn with_speed_bench_file(text: &str) -> String {
    let mut out = Vec::new();
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with("  dataset:") {
            skipping = true;
            out.push("  dataset:\n    type: file\n    path: qualitative.jsonl\n    format: speed_bench_coding");
            continue;
        }
        if skipping
            && (line.starts_with("    ")
                || line.trim().is_empty()
                || line.trim_start().starts_with('#'))
        {
            continue;
        }
        skipping = false;
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// Lines holding `needle` taken out.
fn without(text: &str, needle: &str) -> String {
    text.lines()
        .filter(|l| !l.contains(needle))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn adapted_templates_refuse_each_remaining_field_then_run_what_they_say() {
    // latency_test: the dataset swapped, it runs with its time slices.
    let text = with_speed_bench_file(&template("latency_test"));
    let sweep = expand("latency_test", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert!(spec.figures.slice_duration_s.is_some());
    assert_eq!(spec.load.request_rate, Some(20.0));
    assert_eq!(spec.load.max_concurrency, Some(100));
    assert_eq!(spec.load.benchmark_duration_s, Some(120.0));
    assert_eq!(spec.load.benchmark_grace_period_s, 60.0);
    assert_eq!(spec.dataset.category, ["coding"]);
    // One run without a sweep goes into artifacts.dir itself, as AIPerf's.
    assert_eq!(sweep.runs()[0].dir, Path::new("./artifacts/latency_test"));

    // warmup_profiling runs: gamma arrivals with their smoothness, the
    // rate ramp, the slices in "60s".
    let text = with_speed_bench_file(&template("warmup_profiling"));
    let sweep = expand("warmup_profiling", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        spec.load.arrival,
        speedbench_client::Arrival::Gamma { smoothness: 1.0 }
    );
    assert_eq!(spec.load.arrival_smoothness, Some(1.5));
    assert_eq!(spec.load.request_rate, Some(50.0));
    assert_eq!(spec.load.max_concurrency, Some(64));
    assert_eq!(spec.load.request_rate_ramp_duration_s, Some(30.0));
    assert_eq!(spec.load.benchmark_duration_s, Some(300.0));
    assert_eq!(spec.figures.slice_duration_s, Some(60.0));

    // goodput_slo runs unchanged: its SLOs are --goodput, its slices
    // --slice-duration.
    let text = with_speed_bench_file(&template("goodput_slo"));
    let sweep = expand("goodput_slo", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        spec.target.url, "http://localhost:8000",
        "url + path, the path speedbench's own"
    );
    assert_eq!(
        (spec.load.warmup_request_count, spec.load.warmup_concurrency),
        (100, Some(16))
    );
    assert_eq!(spec.load.request_rate, Some(30.0));
    assert_eq!(
        spec.figures.goodput.to_string(),
        "request_latency:5000 time_to_first_token:500 inter_token_latency:50 \
         output_token_throughput_per_user:20"
    );
    assert_eq!(spec.figures.slice_duration_s, Some(30.0));

    // multi_turn_conversation with a SPEED-Bench file: sessions per phase,
    // a warmup of sessions.
    let text = with_speed_bench_file(&without(
        &template("multi_turn_conversation"),
        "connectionReuse",
    ));
    let sweep = expand("multi_turn_conversation", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        (spec.load.warmup_sessions, spec.load.num_conversations),
        (Some(10), Some(100))
    );
}

/// `multi_turn_conversation` expands as shipped: synthetic conversations
/// of 5 ± 2 turns with 2 ± 0.5 s of think time, each on its own
/// connection (`sticky-user-sessions`), a warmup of 10 conversations.
#[test]
fn multi_turn_conversation_expands_as_shipped() {
    let name = "multi_turn_conversation";
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let s = &spec.dataset.synthetic;
    assert_eq!((s.isl, s.isl_stddev, s.entries), (Some(200), 50.0, 500));
    assert_eq!((s.turn_mean, s.turn_stddev), (5, 2.0));
    assert_eq!((spec.sampling.osl, s.osl_stddev), (Some(300), 75.0));
    let l = &spec.load;
    assert_eq!(
        (
            l.session_turn_delay_mean_ms,
            l.session_turn_delay_stddev_ms,
            l.session_delay_ratio
        ),
        (2000.0, 500.0, 1.0)
    );
    assert_eq!(
        (l.warmup_sessions, l.warmup_concurrency),
        (Some(10), Some(4))
    );
    assert_eq!((l.num_conversations, l.concurrency), (Some(100), 20));
    assert_eq!(
        spec.target.connection_reuse,
        speedbench_client::ConnectionReuse::StickyUserSessions
    );
    assert!(spec.validate().is_ok());
    // Turns of a file dataset are the file's: refused with it.
    let text = template(name).replace(
        "type: synthetic",
        "type: file
    path: rows.jsonl",
    );
    assert!(expand(name, &text, &[]).is_err());
}

#[test]
fn variables_and_schema_are_checked_where_written() {
    let err = expand(
        "v",
        "schemaVersion: \"2.0\"\nbenchmark:\n  model: ${NO_SUCH_SPEEDBENCH_VAR}\n",
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains("v.yaml:3") && err.contains("NO_SUCH_SPEEDBENCH_VAR is not set"),
        "{err}"
    );
    let err = expand("v", "schemaVersion: \"1.0\"\nbenchmark: {}\n", &[]).unwrap_err();
    assert!(err.contains("v.yaml:1") && err.contains("\"2.0\""), "{err}");
}

#[test]
fn a_yaml_sweep_file_is_the_toml_one() {
    let toml = "[profile]\nmodel = \"m\"\nstreaming = true\n[matrix]\nconcurrency = [1, 4]\n\
                [[variation]]\nname = \"a\"\ncategory = [\"coding\", \"math\"]\n[[variation]]\nrequest_rate = 2.5\n";
    let yaml = "profile:\n  model: m\n  streaming: true\nmatrix:\n  concurrency: [1, 4]\n\
                variation:\n  - name: a\n    category: [coding, math]\n  - request_rate: 2.5\n";
    let base = RunSpec::default();
    let none = BTreeSet::new();
    let from_toml = Sweep::parse(Path::new("s.toml"), toml, &base, &none).unwrap();
    let from_yaml = Sweep::parse(Path::new("s.yaml"), yaml, &base, &none).unwrap();
    let names = |s: &Sweep| {
        s.runs()
            .iter()
            .map(|r| (r.dir_name.clone(), r.spec().cloned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&from_toml), names(&from_yaml));
    assert_eq!(from_yaml.runs().len(), 4);
    let err = Sweep::parse(
        Path::new("s.yaml"),
        "profile:\n  concurrency: 1\n  colour: red\n",
        &base,
        &none,
    )
    .unwrap_err();
    assert!(err.to_string().contains("s.yaml:3"), "{err}");
}

#[test]
fn gpu_telemetry_in_each_of_aiperfs_forms_is_gpu_telemetry() {
    let base = with_speed_bench_file(&template("minimal"));
    let with = |block: &str| format!("{base}  gpu_telemetry:{block}\n");
    let urls = |text: &str| -> Result<Vec<String>, String> {
        let sweep = expand("minimal", text, &[])?;
        Ok(sweep.runs()[0].spec().unwrap().scrape.gpu_telemetry.clone())
    };
    let one = "http://gpu-1:9400/metrics";
    assert_eq!(urls(&with(&format!(" {one}"))).unwrap(), [one]);
    assert_eq!(urls(&with(&format!("\n    url: {one}"))).unwrap(), [one]);
    assert_eq!(
        urls(&with(&format!(
            "\n    urls:\n      - {one}\n      - http://gpu-2:9400/metrics\n    collector: dcgm"
        )))
        .unwrap(),
        [one, "http://gpu-2:9400/metrics"]
    );
    assert!(
        urls(&with(&format!(
            "\n    enabled: false\n    urls:\n      - {one}"
        )))
        .unwrap()
        .is_empty()
    );
    let err = urls(&with("\n    collector: pynvml")).unwrap_err();
    assert!(
        err.contains("`gpu_telemetry.collector`") && err.contains("no local pynvml"),
        "{err}"
    );
}

/// `minimal` adapted to SPEED-Bench, its phase replaced by `phase`.
fn minimal_with_phase(phase: &str) -> String {
    let base = with_speed_bench_file(&template("minimal"));
    let cut = base.find("\n  phases:").unwrap() + 1;
    format!("{}  phases:\n{phase}", &base[..cut])
}

#[test]
fn gamma_phases_ramps_series_and_cancellation_run_unchanged() {
    let text = minimal_with_phase(
        "    type: gamma\n    rate: 20\n    smoothness: 0.5\n    concurrency: 8\n    requests: 100\n    rate_ramp: 10s\n    concurrency_ramp:\n      duration: 5\n      strategy: linear\n    cancellation:\n      rate: 10\n      delay: 0.5\n",
    );
    let sweep = expand("minimal", &text, &[]).unwrap();
    let load = sweep.runs()[0].spec().unwrap().load.clone();
    // The same run written as flags.
    let mut flags = RunSpec::default();
    for (flag, value) in [
        ("request-rate", "20"),
        ("arrival", "gamma"),
        ("arrival-smoothness", "0.5"),
        ("max-concurrency", "8"),
        ("request-count", "100"),
        ("request-rate-ramp-duration", "10"),
        ("concurrency-ramp-duration", "5"),
        ("request-cancellation-rate", "10"),
        ("request-cancellation-delay", "0.5"),
    ] {
        flags = flags.with(flag, value).unwrap();
    }
    assert_eq!(load, flags.load);

    // A series inline, without a rate: the points travel as JSON.
    let text = minimal_with_phase(
        "    type: constant\n    requests: 10\n    rate_series:\n      - time_s: 0\n        qps: 2\n      - time_s: 5\n        qps: 8\n",
    );
    let sweep = expand("minimal", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let series = spec.load.request_rate_series.clone().unwrap();
    assert_eq!(
        series.to_str().unwrap(),
        r#"[{"time_s": 0, "qps": 2}, {"time_s": 5, "qps": 8}]"#
    );

    // A ramp strategy speedbench does not follow is refused by name and line.
    let text = minimal_with_phase(
        "    type: poisson\n    rate: 4\n    requests: 10\n    rate_ramp:\n      duration: 5\n      strategy: exponential\n",
    );
    let err = expand("minimal", &text, &[]).unwrap_err();
    assert!(
        err.contains("`strategy: exponential`") && err.contains("minimal.yaml:"),
        "{err}"
    );
}

#[test]
fn a_refused_config_names_every_field_it_cannot_honour_at_once() {
    // kv_cache_test with a shared system prompt in place of the prefix
    // pool and a seamless warmup: neither is run.
    let text = template("kv_cache_test")
        .replace("poolSize: 10", "sharedSystemLength: 100")
        .replace(
            "      rate: 1.0\n",
            "      rate: 1.0\n      seamless: true\n",
        );
    let err = expand("kv_cache_test", &text, &[]).unwrap_err();
    // Two fields in two blocks, each with its line and what to do.
    assert!(err.contains("2 fields speedbench cannot honour"), "{err}");
    for needle in [
        "`datasets[0].prefix_prompts.shared_system_length`",
        "`phases.warmup.seamless`",
    ] {
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert_eq!(err.matches("kv_cache_test.yaml:").count(), 3, "{err}");
    // Two unknown keys of one mapping are named together.
    let text = minimal_with_phase(
        "    type: concurrency\n    concurrency: 4\n    requests: 8\n    users: 3\n    seamless: true\n",
    );
    let err = expand("minimal", &text, &[]).unwrap_err();
    assert!(
        err.contains("`phases.profiling.users` (line")
            && err.contains("`phases.profiling.seamless` (line"),
        "{err}"
    );
}

#[test]
fn multi_run_repeats_a_config_of_one_run_and_is_refused_beside_a_sweep() {
    let phase = "    type: concurrency\n    concurrency: 2\n    requests: 8\n";
    let with = |block: &str| format!("{}{block}", minimal_with_phase(phase));
    let sweep = expand(
        "minimal",
        &with("multiRun:\n  numRuns: 3\n  cooldownSeconds: 2.5\n  confidenceLevel: 0.9\n  disableWarmupAfterFirst: false\n  setConsistentSeed: true\n"),
        &[],
    )
    .unwrap();
    let trials = sweep.trials().expect("three trials");
    assert_eq!(
        (
            trials.num_profile_runs,
            trials.cooldown_s,
            trials.confidence_level,
            trials.warmup_every_run
        ),
        (3, 2.5, 0.9, true)
    );
    // The run itself is a plain one; one trial is no repetition.
    assert_eq!(sweep.runs()[0].spec().unwrap().repeat.num_profile_runs, 1);
    let one = expand("minimal", &with("multiRun:\n  numRuns: 1\n"), &[]).unwrap();
    assert!(one.trials().is_none());
    // A seed that changes between runs is not what repeated runs do.
    let err = expand(
        "minimal",
        &with("multiRun:\n  numRuns: 2\n  setConsistentSeed: false\n"),
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains("`multi_run.set_consistent_seed: false`"),
        "{err}"
    );
    let err = expand("minimal", &with("multiRun:\n  numRuns: 11\n"), &[]).unwrap_err();
    assert!(err.contains("1 to 10"), "{err}");
    // Beside a sweep: the sweep's runs, in as many trials.
    let text = with(
        "multiRun:\n  numRuns: 2\nsweep:\n  type: grid\n  parameters:\n    concurrency: [1, 2]\n",
    );
    let sweep = expand("minimal", &text, &[]).unwrap();
    assert_eq!(sweep.runs().len(), 2);
    assert_eq!(sweep.trials().unwrap().num_profile_runs, 2);
}

/// `models` with several items share out the rows (`--model a,b`) by their
/// `strategy`; a weighted strategy is refused at its line.
#[test]
fn several_models_share_out_the_rows() {
    let with_models = |strategy: &str| {
        template("minimal").replace(
            "  model: meta-llama/Llama-3.1-8B-Instruct\n",
            &format!("  models:\n    strategy: {strategy}\n    items:\n      - name: base\n      - name: lora-a\n"),
        )
    };
    let sweep = expand("minimal", &with_models("random"), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(spec.target.model.as_deref(), Some("base,lora-a"));
    assert_eq!(spec.target.model_selection_strategy, "random");
    let err = expand("minimal", &with_models("weighted"), &[]).unwrap_err();
    assert!(err.contains("`models.strategy: weighted`"), "{err}");
}

/// `endpoint.urls` with several servers is `--url a,b` (conversations
/// shared out round robin, AIPerf's `urlStrategy`), each server's endpoint
/// path taken off.
#[test]
fn several_urls_share_out_the_conversations() {
    let text = template("minimal").replace(
        "    url: http://localhost:8000",
        "    urls:\n      - http://a:8000/v1/chat/completions\n      - http://b:9000/v1/chat/completions\n    urlStrategy: round_robin",
    );
    let sweep = expand("minimal", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(spec.target.url, "http://a:8000,http://b:9000");
    assert!(spec.validate().is_ok());
}

/// `server_metrics.formats: [json, csv]` is `--server-metrics-formats
/// json,csv`: `request_cancellation` and `multi_url_load_balancing` expand
/// as shipped (their scrape URLs beside the servers' own); AIPerf's
/// `parquet` is read too, and an unknown format refused by field and line.
#[test]
fn server_metrics_formats_expand_as_shipped_and_an_unknown_one_is_refused() {
    for name in ["request_cancellation", "multi_url_load_balancing"] {
        let sweep = expand(name, &template(name), &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let spec = sweep.runs()[0].spec().unwrap();
        assert!(spec.scrape.csv, "{name}");
        assert!(spec.scrape.enabled, "{name}");
        assert!(!spec.scrape.server_metrics.is_empty(), "{name}");
        assert!(spec.validate().is_ok(), "{name}");
    }
    let sweep = expand(
        "request_cancellation",
        &template("request_cancellation"),
        &[],
    )
    .unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(spec.load.request_cancellation_rate, Some(10.0));
    let text = template("request_cancellation")
        .replace("formats: [json, csv]", "formats: [json, csv, parquet]");
    let sweep = expand("request_cancellation", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert!(spec.scrape.csv && spec.scrape.parquet);
    // A format of no one's is refused by field and line.
    let text =
        template("request_cancellation").replace("formats: [json, csv]", "formats: [json, xlsx]");
    let err = expand("request_cancellation", &text, &[]).unwrap_err();
    let line = line_of(&text, "serverMetrics", "formats:");
    assert!(
        err.contains(&format!(
            "request_cancellation.yaml:{line}: `server_metrics.formats`"
        )),
        "{err}"
    );
    // Only JSON: no CSV.
    let text = template("request_cancellation").replace("formats: [json, csv]", "formats: [json]");
    let sweep = expand("request_cancellation", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert!(!spec.scrape.csv);
}

/// `time_based_soak` expands as shipped: its warmup by time is
/// `--warmup-duration` (AIPerf's expansion says 60 s at 16), its soak an
/// hour at 32 with two minutes' grace, five-minute slices, the scrape in
/// JSON and CSV. A warmup `gracePeriod` is `--warmup-grace-period`; one
/// without a duration is refused by name.
#[test]
fn time_based_soak_expands_as_shipped() {
    let sweep = expand("time_based_soak", &template("time_based_soak"), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let l = &spec.load;
    assert_eq!(
        (
            l.warmup_duration_s,
            l.warmup_concurrency,
            l.warmup_request_count
        ),
        (Some(60.0), Some(16), 0)
    );
    assert_eq!((l.benchmark_duration_s, l.concurrency), (Some(3600.0), 32));
    assert_eq!(l.benchmark_grace_period_s, 120.0);
    assert_eq!(spec.figures.slice_duration_s, Some(300.0));
    assert!(spec.scrape.csv);
    assert!(spec.validate().is_ok());
    let text = template("time_based_soak").replace(
        "    duration: 60s",
        "    duration: 60s\n    gracePeriod: 5s",
    );
    let sweep = expand("time_based_soak", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(spec.load.warmup_grace_period_s, Some(5.0));
    let text = template("time_based_soak")
        .replace("    duration: 60s", "    requests: 10\n    gracePeriod: 5s");
    let sweep = expand("time_based_soak", &text, &[]).unwrap();
    let err = sweep.runs()[0]
        .spec()
        .unwrap()
        .validate()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--warmup-grace-period") && err.contains("--warmup-duration"),
        "{err}"
    );
}

/// `jinja2_variables` expands as shipped, its `{{ expressions }}` over its
/// `variables` giving the numbers AIPerf's own `config expand` gives
/// (jinja2_variables.expand.json), and its `multiRun` of three trials.
#[test]
fn jinja2_variables_render_to_aiperfs_own_numbers() {
    let name = "jinja2_variables";
    let aiperf = aiperf_expansion(name);
    let b = &aiperf["variations"][0]["benchmark"];
    let phase = |n: &str| aiperf_phase(&aiperf, n);
    let (warmup, profiling) = (phase("warmup"), phase("profiling"));
    let sweep = expand(name, &template(name), &[]).unwrap();
    assert_eq!(sweep.trials().map(|t| t.num_profile_runs), Some(3));
    let spec = sweep.runs()[0].spec().unwrap();
    let (d, l) = (&spec.dataset.synthetic, &spec.load);
    let prompts = &b["datasets"][0]["prompts"];
    assert_eq!(Some(d.entries as u64), b["datasets"][0]["entries"].as_u64());
    assert_eq!(d.isl.map(f64::from), prompts["isl"]["mean"].as_f64());
    assert_eq!(Some(d.isl_stddev), prompts["isl"]["stddev"].as_f64());
    assert_eq!(
        spec.sampling.osl.map(f64::from),
        prompts["osl"]["mean"].as_f64()
    );
    assert_eq!(Some(d.osl_stddev), prompts["osl"]["stddev"].as_f64());
    assert_eq!(Some(l.warmup_request_count), warmup["requests"].as_u64());
    assert_eq!(
        l.warmup_concurrency.map(|c| c as u64),
        warmup["concurrency"].as_u64()
    );
    assert_eq!(l.request_rate, profiling["rate"].as_f64());
    assert_eq!(l.benchmark_duration_s, profiling["duration"].as_f64());
    assert_eq!(
        l.max_concurrency.map(|c| c as u64),
        profiling["concurrency"].as_u64()
    );
    assert_eq!(
        l.request_rate_ramp_duration_s,
        profiling["rate_ramp"]["duration"].as_f64()
    );
    assert!(spec.validate().is_ok());
}

/// `env_var_production` expands as shipped: its bimodal prompt lengths
/// (`peaks` of log-normals) and log-normal outputs are the distributions
/// AIPerf's own `config expand` reads (peaks' weights and each peak's mean
/// and median), its `multiRun` of three, SLOs and CSV scrape.
#[test]
fn env_var_production_keeps_its_length_distributions() {
    use speedbench_client::synthetic::LengthDistribution;
    let name = "env_var_production";
    let aiperf = aiperf_expansion(name);
    let prompts = &aiperf["variations"][0]["benchmark"]["datasets"][0]["prompts"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    assert_eq!(sweep.trials().map(|t| t.num_profile_runs), Some(3));
    let spec = sweep.runs()[0].spec().unwrap();
    let read = |text: &Option<String>| {
        LengthDistribution::from_json(&serde_json::from_str(text.as_deref().unwrap()).unwrap())
            .unwrap()
    };
    let LengthDistribution::Peaks(peaks) = read(&spec.dataset.synthetic.isl_distribution) else {
        panic!("not peaks");
    };
    let theirs = prompts["isl"]["peaks"].as_array().unwrap();
    assert_eq!(peaks.len(), theirs.len());
    for ((weight, dist), t) in peaks.iter().zip(theirs) {
        assert_eq!(Some(*weight), t["weight"].as_f64());
        let want = LengthDistribution::LogNormal {
            mean: t["distribution"]["mean"].as_f64().unwrap(),
            median: t["distribution"]["median"].as_f64().unwrap(),
        };
        assert_eq!(dist, &want);
    }
    assert_eq!(
        read(&spec.dataset.synthetic.osl_distribution),
        LengthDistribution::LogNormal {
            mean: prompts["osl"]["mean"].as_f64().unwrap(),
            median: prompts["osl"]["median"].as_f64().unwrap(),
        }
    );
    assert!(spec.scrape.csv);
    assert_eq!(spec.figures.goodput.to_string().split(' ').count(), 4);
    assert!(spec.validate().is_ok());
}

/// `long_context` expands as shipped: its sequence distribution is AIPerf's
/// own expansion's pairs (each input and output length and percentage),
/// its prefill limits the phases' (`prefillConcurrency`, `prefillRamp`).
#[test]
fn long_context_keeps_its_pairs_and_prefill_limits() {
    use speedbench_client::synthetic::SequenceDistribution;
    let name = "long_context";
    let aiperf = aiperf_expansion(name);
    let b = &aiperf["variations"][0]["benchmark"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let text = spec
        .dataset
        .synthetic
        .sequence_distribution
        .as_deref()
        .unwrap();
    let ours = SequenceDistribution::parse(text).unwrap();
    let theirs = b["datasets"][0]["prompts"]["sequence_distribution"]
        .as_array()
        .unwrap();
    assert_eq!(ours.pairs.len(), theirs.len());
    for ((prob, input, output), t) in ours.pairs.iter().zip(theirs) {
        assert_eq!(Some(*prob), t["probability"].as_f64());
        assert_eq!(Some(f64::from(input.mean)), t["isl"]["value"].as_f64());
        assert_eq!(Some(f64::from(output.mean)), t["osl"]["value"].as_f64());
    }
    // AIPerf's expansion, read back, is the same distribution.
    let expanded = serde_json::json!({ "pairs": theirs }).to_string();
    assert_eq!(SequenceDistribution::parse(&expanded).unwrap(), ours);
    let phase = |n: &str| aiperf_phase(&aiperf, n);
    let l = &spec.load;
    assert_eq!(
        l.prefill_concurrency.map(|p| p as u64),
        phase("profiling")["prefill_concurrency"].as_u64()
    );
    assert_eq!(
        l.prefill_concurrency_ramp_duration_s,
        phase("profiling")["prefill_ramp"]["duration"].as_f64()
    );
    assert_eq!(
        l.warmup_prefill_concurrency.map(|p| p as u64),
        phase("warmup")["prefill_concurrency"].as_u64()
    );
    assert!(spec.validate().is_ok());
}

/// `ramping` expands as shipped, each ramp AIPerf's expansion's: the
/// warmup's own concurrency ramp, the measured phase's concurrency and rate
/// ramps, and its prefill ramp without a prefill limit (which ramps
/// nothing: the run says so).
#[test]
fn ramping_keeps_every_ramp() {
    let name = "ramping";
    let aiperf = aiperf_expansion(name);
    let phases = aiperf["variations"][0]["benchmark"]["phases"]
        .as_array()
        .unwrap()
        .clone();
    let phase = |n: &str| phases.iter().find(|p| p["name"] == n).unwrap().clone();
    let ramp = |p: &Value, k: &str| p[k]["duration"].as_f64();
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let l = &spec.load;
    assert_eq!(
        l.warmup_concurrency_ramp_duration_s,
        ramp(&phase("warmup"), "concurrency_ramp")
    );
    let profiling = phase("profiling");
    assert_eq!(
        l.concurrency_ramp_duration_s,
        ramp(&profiling, "concurrency_ramp")
    );
    assert_eq!(
        l.request_rate_ramp_duration_s,
        ramp(&profiling, "rate_ramp")
    );
    assert_eq!(
        l.prefill_concurrency_ramp_duration_s,
        ramp(&profiling, "prefill_ramp")
    );
    assert_eq!(l.prefill_concurrency, None);
    let valid = spec.validate().unwrap();
    assert!(
        valid.warnings().iter().any(
            |w| w.contains("--prefill-concurrency-ramp-duration without --prefill-concurrency")
        ),
        "{:?}",
        valid.warnings()
    );
}

/// `scenario_workload_profiles` expands as shipped: its five named
/// scenarios, each its fields laid over the config's as AIPerf's own
/// `config expand` lays them (scenario_workload_profiles.expand.json): the
/// directory names, each scenario's prompt and output lengths (a normal
/// kept normal, a log-normal or `peaks` replacing the base's normal whole),
/// its rate and concurrency over the base's poisson phase of 180 s, the
/// base's warmup and SLOs kept; then `multiRun`'s three trials.
#[test]
fn scenario_workload_profiles_lay_each_scenario_over_the_config() {
    use speedbench_client::synthetic::{LengthDistribution, TokenLength};
    let name = "scenario_workload_profiles";
    let aiperf = aiperf_expansion(name);
    let theirs = aiperf["variations"].as_array().unwrap();
    let sweep = expand(name, &template(name), &[]).unwrap();
    assert_eq!(sweep.runs().len(), theirs.len());
    let length = |spec_mean: Option<u32>, stddev: f64, text: &Option<String>| match text {
        Some(t) => LengthDistribution::from_json(&serde_json::from_str(t).unwrap()).unwrap(),
        None => LengthDistribution::Normal(TokenLength {
            mean: spec_mean.unwrap(),
            stddev,
        }),
    };
    let aiperfs = |v: &Value| match (v.get("peaks"), v.get("median")) {
        (Some(peaks), _) => LengthDistribution::Peaks(
            (peaks.as_array().unwrap().iter())
                .map(|p| {
                    (
                        p["weight"].as_f64().unwrap(),
                        aiperf_length(&p["distribution"]),
                    )
                })
                .collect(),
        ),
        _ => aiperf_length(v),
    };
    for (run, t) in sweep.runs().iter().zip(theirs) {
        assert_eq!(run.dir_name, t["dir_name"].as_str().unwrap());
        let spec = run.spec().unwrap();
        let b = &t["benchmark"];
        let (d, l) = (&spec.dataset.synthetic, &spec.load);
        let prompts = &b["datasets"][0]["prompts"];
        assert_eq!(Some(d.entries as u64), b["datasets"][0]["entries"].as_u64());
        assert_eq!(
            length(d.isl, d.isl_stddev, &d.isl_distribution),
            aiperfs(&prompts["isl"]),
            "{}",
            run.dir_name
        );
        assert_eq!(
            length(spec.sampling.osl, d.osl_stddev, &d.osl_distribution),
            aiperfs(&prompts["osl"]),
            "{}",
            run.dir_name
        );
        let phases = b["phases"].as_array().unwrap();
        let phase = |n: &str| phases.iter().find(|p| p["name"] == n).unwrap();
        assert_eq!(l.request_rate, phase("profiling")["rate"].as_f64());
        assert_eq!(
            l.max_concurrency.map(|c| c as u64),
            phase("profiling")["concurrency"].as_u64()
        );
        assert_eq!(
            l.benchmark_duration_s,
            phase("profiling")["duration"].as_f64()
        );
        assert_eq!(
            Some(l.warmup_request_count),
            phase("warmup")["requests"].as_u64()
        );
        assert_eq!(spec.figures.goodput.to_string().split(' ').count(), 2);
        assert!(spec.validate().is_ok(), "{}", run.dir_name);
    }
    let trials = sweep.trials().unwrap().clone();
    assert_eq!((trials.num_profile_runs, trials.cooldown_s), (3, 30.0));
    assert_eq!(sweep.in_trials(&trials).unwrap().runs().len(), 15);
}

/// One of AIPerf's expanded length distributions: `{mean, stddev}` or
/// `{mean, median}`.
fn aiperf_length(v: &Value) -> speedbench_client::synthetic::LengthDistribution {
    use speedbench_client::synthetic::LengthDistribution;
    let mean = v["mean"].as_f64().unwrap();
    match v.get("median") {
        Some(median) => LengthDistribution::LogNormal {
            mean,
            median: median.as_f64().unwrap(),
        },
        None => LengthDistribution::Normal(speedbench_client::synthetic::TokenLength {
            mean: mean as u32,
            stddev: v["stddev"].as_f64().unwrap_or(0.0),
        }),
    }
}

/// A sweep's runs take `randomSeed + index` (AIPerf's derivation), or the
/// seed itself with `sameSeed: true`; `iterationOrder: repeated` (AIPerf's
/// default) is read, `independent` refused at its line.
#[test]
fn a_sweeps_runs_derive_their_seeds_as_aiperf_does() {
    let text = template("speed_bench_sweep");
    let seeds = |text: &str| -> Vec<u64> {
        let sweep = expand("speed_bench_sweep", text, &[]).unwrap();
        (sweep.runs().iter())
            .map(|r| r.spec().unwrap().load.random_seed)
            .collect()
    };
    let derived = seeds(&text);
    assert_eq!(derived, (42..42 + derived.len() as u64).collect::<Vec<_>>());
    let with = |extra: &str| text.replacen("sweep:\n", &format!("sweep:\n{extra}"), 1);
    let same = seeds(&with("  sameSeed: true\n  iterationOrder: repeated\n"));
    assert!(same.len() > 1 && same.iter().all(|&s| s == 42), "{same:?}");
    let err = expand(
        "speed_bench_sweep",
        &with("  iterationOrder: independent\n"),
        &[],
    )
    .unwrap_err();
    assert!(
        err.contains("sweep.iteration_order") && err.contains("repeated"),
        "{err}"
    );
}

/// `kv_cache_test` as shipped: user-centric warmup and measured phases
/// (each its own users and rate), a pool of shared prefixes and
/// conversations of drawn turns, each value AIPerf's own expansion holds.
#[test]
fn kv_cache_test_keeps_its_users_and_prefixes() {
    let name = "kv_cache_test";
    let aiperf = aiperf_expansion(name);
    let b = &aiperf["variations"][0]["benchmark"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let (l, s) = (&spec.load, &spec.dataset.synthetic);
    let prefixes = &b["datasets"][0]["prefix_prompts"];
    assert_eq!(
        Some(s.prefix_prompts as u64),
        prefixes["pool_size"].as_u64()
    );
    assert_eq!(
        Some(u64::from(s.prefix_length)),
        prefixes["length"].as_u64()
    );
    assert_eq!(
        Some(f64::from(s.turn_mean)),
        b["datasets"][0]["turns"]["mean"].as_f64()
    );
    let (warmup, profiling) = (
        aiperf_phase(&aiperf, "warmup"),
        aiperf_phase(&aiperf, "profiling"),
    );
    assert_eq!(l.num_users.map(|n| n as u64), profiling["users"].as_u64());
    assert_eq!(l.user_centric_rate, profiling["rate"].as_f64());
    assert_eq!(l.benchmark_duration_s, profiling["duration"].as_f64());
    assert_eq!(
        Some(l.benchmark_grace_period_s),
        profiling["grace_period"].as_f64()
    );
    assert_eq!(
        l.warmup_num_users.map(|n| n as u64),
        warmup["users"].as_u64()
    );
    assert_eq!(l.warmup_user_centric_rate, warmup["rate"].as_f64());
    assert_eq!(l.warmup_duration_s, warmup["duration"].as_f64());
    assert!(spec.validate().is_ok(), "{:?}", spec.validate().err());
}

/// `trace_replay` as shipped: its synthesis block as `--synthesis-*`, each
/// value AIPerf's own expansion holds, its fixed schedule, and all three
/// of the scrape's files.
#[test]
fn trace_replay_keeps_its_synthesis() {
    let name = "trace_replay";
    let aiperf = aiperf_expansion(name);
    let theirs = &aiperf["variations"][0]["benchmark"]["datasets"][0]["synthesis"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let ours = serde_json::to_value(&spec.dataset.synthesis).unwrap();
    for field in [
        "speedup_ratio",
        "prefix_len_multiplier",
        "prefix_root_multiplier",
        "prompt_len_multiplier",
        "output_len_multiplier",
        "max_isl",
        "max_osl",
    ] {
        assert_eq!(ours[field].as_f64(), theirs[field].as_f64(), "{field}");
    }
    assert!(spec.load.fixed_schedule && spec.load.fixed_schedule_auto_offset);
    assert!(spec.scrape.csv && spec.scrape.parquet);
    assert!(spec.validate().is_ok(), "{:?}", spec.validate().err());
}

/// A trace's `forceMinTokens` is `--force-min-tokens`; left out, the
/// output lengths stay caps.
#[test]
fn a_traces_force_min_tokens_is_the_flag() {
    let name = "trace_replay";
    let text = template(name);
    let sweep = expand(name, &text, &[]).unwrap();
    assert!(!sweep.runs()[0].spec().unwrap().sampling.force_min_tokens);
    let forced = text.replacen(
        "format: mooncake_trace",
        "format: mooncake_trace\n    forceMinTokens: true",
        1,
    );
    assert_ne!(forced, text, "the template names its format");
    let sweep = expand(name, &forced, &[]).unwrap();
    assert!(sweep.runs()[0].spec().unwrap().sampling.force_min_tokens);
}

/// `tokenizer.name` is `--tokenizer` (read where prompts are built), its
/// download settings accepted as meaningless for a local file; a chat
/// template applied by the client is refused by field and line.
#[test]
fn a_tokenizer_block_names_the_local_tokenizer() {
    let with_tokenizer = |block: &str| {
        template("minimal").replace(
            "  endpoint:\n",
            &format!("  tokenizer:\n{block}  endpoint:\n"),
        )
    };
    let text = with_tokenizer(
        "    name: /models/llama/tokenizer.json\n    revision: main\n    trustRemoteCode: false\n    apply_chat_template: false\n",
    );
    let sweep = expand("minimal", &text, &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        spec.dataset.synthetic.tokenizer.as_deref(),
        Some(Path::new("/models/llama/tokenizer.json"))
    );
    let text = with_tokenizer("    name: gpt2\n    apply_chat_template: true\n");
    let err = expand("minimal", &text, &[]).unwrap_err();
    let line = line_of(&text, "tokenizer:", "apply_chat_template");
    assert!(
        err.contains(&format!("minimal.yaml:{line}"))
            && err.contains("`tokenizer.apply_chat_template`")
            && err.contains("the server applies the template"),
        "{err}"
    );
}

/// A dataset's `sampling` is `--dataset-sampling-strategy`; a strategy
/// AIPerf does not have is refused by field and line.
#[test]
fn a_datasets_sampling_is_the_sampling_strategy() {
    let with_sampling = |strategy: &str| {
        template("minimal").replace(
            "    type: synthetic\n",
            &format!("    type: synthetic\n    sampling: {strategy}\n"),
        )
    };
    for (name, expected) in [
        ("shuffle", speedbench_client::DatasetSampling::Shuffle),
        ("random", speedbench_client::DatasetSampling::Random),
        ("sequential", speedbench_client::DatasetSampling::Sequential),
    ] {
        let sweep = expand("minimal", &with_sampling(name), &[]).unwrap();
        let spec = sweep.runs()[0].spec().unwrap();
        assert_eq!(spec.load.dataset_sampling, expected, "{name}");
    }
    let text = with_sampling("weighted");
    let err = expand("minimal", &text, &[]).unwrap_err();
    let line = line_of(&text, "type: synthetic", "sampling:");
    assert!(
        err.contains(&format!("minimal.yaml:{line}")) && err.contains("`datasets[0].sampling"),
        "{err}"
    );
}

/// `--num-profile-runs N` on the command line beside a config: its one
/// run repeated N times (with `multiRun` or without), or a sweep's runs in
/// N trials; no run repeats itself inside the sweep.
#[test]
fn num_profile_runs_on_the_command_line_repeats_a_configs_runs() {
    let base = RunSpec::default()
        .with("num-profile-runs", "3")
        .unwrap()
        .with("url", "http://127.0.0.1:9")
        .unwrap();
    let given: BTreeSet<String> = ["num-profile-runs", "url"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let parse = |text: &str| Sweep::parse(Path::new("minimal.yaml"), text, &base, &given);
    let phase = "    type: concurrency\n    concurrency: 2\n    requests: 8\n";
    for text in [
        minimal_with_phase(phase),
        format!("{}multiRun:\n  numRuns: 2\n", minimal_with_phase(phase)),
    ] {
        let sweep = parse(&text).unwrap();
        assert_eq!(sweep.trials().unwrap().num_profile_runs, 3);
        let spec = sweep.runs()[0].spec().unwrap();
        assert_eq!(spec.repeat.num_profile_runs, 1);
        assert!(spec.validate().is_ok());
    }
    let grid = format!(
        "{}sweep:\n  type: grid\n  parameters:\n    concurrency: [1, 2]\n",
        minimal_with_phase(phase)
    );
    let sweep = parse(&grid).unwrap();
    assert_eq!(sweep.runs().len(), 2);
    assert_eq!(sweep.trials().unwrap().num_profile_runs, 3);
}

/// AIPerf's `gpu_telemetry` template, as shipped: the scrape URLs, the
/// lengths and the phases AIPerf's own expansion gives.
#[test]
fn gpu_telemetry_expands_as_shipped() {
    let name = "gpu_telemetry";
    let aiperf = aiperf_expansion(name);
    let telemetry = &aiperf["variations"][0]["benchmark"]["gpu_telemetry"];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    let urls: Vec<&str> = (telemetry["urls"].as_array().unwrap().iter())
        .map(|u| u.as_str().unwrap())
        .collect();
    assert_eq!(spec.scrape.gpu_telemetry, urls);
    assert_eq!(urls.len(), 2);
    let profiling = aiperf_phase(&aiperf, "profiling");
    assert_eq!(
        Some(spec.load.concurrency as u64),
        profiling["concurrency"].as_u64()
    );
    assert_eq!(spec.load.request_count, profiling["requests"].as_u64());
    let warmup = aiperf_phase(&aiperf, "warmup");
    assert_eq!(
        Some(spec.load.warmup_request_count),
        warmup["requests"].as_u64()
    );
    assert_eq!(spec.dataset.synthetic.isl, Some(256));
}

/// AIPerf's `public_dataset` template (ShareGPT), as shipped: the dataset,
/// its `entries` as `--limit` (ShareGPT's rows are of one category), its
/// sampling and its phases as AIPerf's own expansion gives them.
#[test]
fn public_dataset_expands_as_shipped() {
    let name = "public_dataset";
    let aiperf = aiperf_expansion(name);
    let dataset = &aiperf["variations"][0]["benchmark"]["datasets"][0];
    let sweep = expand(name, &template(name), &[]).unwrap();
    let spec = sweep.runs()[0].spec().unwrap();
    assert_eq!(
        spec.dataset.source,
        Some(speedbench_run::DatasetSource::PublicDataset(
            dataset["dataset"].as_str().unwrap().into()
        ))
    );
    assert_eq!(
        spec.dataset.limit.map(|n| n.get() as u64),
        dataset["entries"].as_u64()
    );
    assert_eq!(dataset["sampling"], "shuffle");
    assert_eq!(
        spec.load.dataset_sampling,
        speedbench_client::DatasetSampling::Shuffle
    );
    let profiling = aiperf_phase(&aiperf, "profiling");
    assert_eq!(spec.load.request_count, profiling["requests"].as_u64());
    assert_eq!(
        Some(spec.load.concurrency as u64),
        profiling["concurrency"].as_u64()
    );
    let warmup = aiperf_phase(&aiperf, "warmup");
    assert_eq!(
        Some(spec.load.warmup_request_count),
        warmup["requests"].as_u64()
    );
}

/// `entries` of a public dataset whose rows are of several categories has
/// no `--limit` to become, and is refused by line with what to write.
#[test]
fn entries_of_a_dataset_of_several_categories_is_refused() {
    let text =
        template("public_dataset").replace("dataset: sharegpt", "dataset: speed_bench_qualitative");
    let err = expand("public_dataset", &text, &[]).unwrap_err();
    let entries = line_of(&text, "type: public", "entries:");
    assert!(
        err.contains(&format!(
            "public_dataset.yaml:{entries}: `datasets[0].entries`"
        )) && err.contains("`--limit` keeps N of each category"),
        "{err}"
    );
    let text = template("public_dataset").replace("dataset: sharegpt", "dataset: sharegtp");
    let err = expand("public_dataset", &text, &[]).unwrap_err();
    assert!(err.contains("2 fields speedbench cannot honour"), "{err}");
    assert!(err.contains("did you mean \"sharegpt\""), "{err}");
}
