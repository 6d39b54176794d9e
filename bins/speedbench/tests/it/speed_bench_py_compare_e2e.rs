//! End-to-end: llama.cpp speed_bench.py `--output` JSON files read as runs
//! by `speedbench compare` (speed_bench_compare.py's table) and `speedbench
//! report`, alone and mixed with run directories `profile` made against
//! the simulator's llama.cpp flavour; a malformed file named with its
//! field; and a GGUF-path model id shown by its file stem while the full
//! path stays in run.json and the JSON outputs.
//!
//! The fixtures (`fixtures/speed_bench_py/`) are hand-written; every
//! expected number below is computed here from the values typed into them.

use crate::common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;
use speedbench_metrics::{SpeedBenchPyOutput, speed_bench_py_summary};
use speedbench_sim::{AcceptanceProfile, SimConfig, SpecFlavor};

fn fixture_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/speed_bench_py")
        .join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The rows of a speed_bench.py-style table (the lines after the dash
/// underline, until a blank line or a line that is not a row), by first cell.
fn table_rows(stdout: &str, header_start: &str) -> Vec<Vec<String>> {
    let start = stdout
        .find(header_start)
        .unwrap_or_else(|| panic!("no table headed {header_start:?} in\n{stdout}"));
    let mut lines = stdout[start..].lines();
    let header = lines.next().unwrap();
    let n = header.split_whitespace().count();
    assert!(lines.next().unwrap().starts_with("--------"));
    lines
        .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
        .take_while(|cells| cells.len() == n)
        .collect()
}

fn x2(v: f64) -> String {
    format!("{v:.2}x")
}

fn close(json: &Value, want: f64, what: &str) {
    let got = json.as_f64().unwrap_or_else(|| panic!("{what}: {json}"));
    assert!(
        (got - want).abs() <= 1e-12 * want.abs().max(1.0),
        "{what}: {got} vs {want}"
    );
}

#[test]
fn the_fixtures_summaries_are_speed_bench_pys_of_their_results() {
    // A check on the hand-written files: each summary row is what
    // summarize_group gives over the file's results.
    for name in ["baseline.json", "spec.json"] {
        let text = std::fs::read_to_string(fixture_file(name)).unwrap();
        let file: SpeedBenchPyOutput = serde_json::from_str(&text).unwrap();
        // speed_bench_py_summary lists categories as `results` (completion
        // order) first names them; the file lists them in dataset order.
        let recomputed = speed_bench_py_summary(&file.results);
        assert_eq!(recomputed.len(), file.summary.len(), "{name}");
        for want in &file.summary {
            let got = recomputed
                .iter()
                .find(|r| r.category == want.category)
                .unwrap_or_else(|| panic!("{name}: no {} row", want.category));
            assert_eq!(
                (&got.category, got.requests, got.turns, got.failed),
                (&want.category, want.requests, want.turns, want.failed),
                "{name}"
            );
            assert_eq!((got.draft_n, got.accepted), (want.draft_n, want.accepted));
            for (a, b) in [
                (got.avg_prompt_t_s, want.avg_prompt_t_s),
                (got.avg_pred_t_s, want.avg_pred_t_s),
                (got.avg_latency, want.avg_latency),
                (got.accept_rate, want.accept_rate),
            ] {
                match (a, b) {
                    (Some(a), Some(b)) => assert!((a - b).abs() < 1e-9, "{name} {a} vs {b}"),
                    _ => assert_eq!(a, b, "{name} {}", want.category),
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_speed_bench_py_files_compare_as_speed_bench_compare_py() {
    let (base, spec) = (fixture_file("baseline.json"), fixture_file("spec.json"));
    let out = run(&["compare", "--baseline", s(&base), "--speculative", s(&spec)]).await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stdout.starts_with(&format!(
            "Comparison: baseline={} speculative={}\n",
            base.display(),
            spec.display()
        )),
        "{stdout}"
    );
    // The fixtures' summary rows (avg_pred_t/s, avg_latency; spec's
    // accept_rate), typed by hand:
    //            base pred  spec pred  base lat  spec lat  spec rate
    // coding     45         90         2.6       1.25      120/170
    // math       40         100        2.5       2.0       50/80 (one sample failed)
    // qa         45         45         1.05      1.05      n/a (nothing drafted)
    // overall    260/6      74         2.05      1.32      170/250
    let want: [[String; 8]; 4] = [
        [
            "coding".into(),
            "45.00".into(),
            "90.00".into(),
            x2(90.0 / 45.0),
            "2.600s".into(),
            "1.250s".into(),
            x2(2.6 / 1.25),
            format!("{:.4}", 120.0 / 170.0),
        ],
        [
            "math".into(),
            "40.00".into(),
            "100.00".into(),
            x2(100.0 / 40.0),
            "2.500s".into(),
            "2.000s".into(),
            x2(2.5 / 2.0),
            "0.6250".into(),
        ],
        [
            "qa".into(),
            "45.00".into(),
            "45.00".into(),
            "1.00x".into(),
            "1.050s".into(),
            "1.050s".into(),
            "1.00x".into(),
            "n/a".into(),
        ],
        [
            "overall".into(),
            format!("{:.2}", 260.0 / 6.0),
            "74.00".into(),
            x2(74.0 / (260.0 / 6.0)),
            "2.050s".into(),
            "1.320s".into(),
            x2(2.05 / 1.32),
            "0.6800".into(),
        ],
    ];
    let rows = table_rows(&stdout, "category  base_avg_pred_t/s  spec_avg_pred_t/s");
    assert_eq!(rows, want.map(|r| r.to_vec()).to_vec(), "{stdout}");
    assert_eq!(
        stdout
            .lines()
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>(),
        [
            "category",
            "base_avg_pred_t/s",
            "spec_avg_pred_t/s",
            "decode_speedup",
            "base_avg_latency",
            "spec_avg_latency",
            "latency_speedup",
            "accept_rate"
        ]
    );
    assert!(stderr.contains("are speed_bench.py files"), "{stderr}");
    // Nothing to warn about: same bench, osl, extra inputs and samples.
    assert!(!stderr.contains("warning"), "{stderr}");

    // JSON: the same numbers at full precision, n/a as null.
    let out = run(&[
        "compare",
        "--baseline",
        s(&base),
        "--speculative",
        s(&spec),
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["coding", "math", "qa", "overall"]);
    close(&rows[0]["decode_speedup"], 2.0, "coding decode");
    close(&rows[0]["latency_speedup"], 2.6 / 1.25, "coding latency");
    close(&rows[0]["accept_rate"], 0.7058823529411765, "coding rate");
    close(
        &rows[3]["decode_speedup"],
        74.0 / (260.0 / 6.0),
        "overall decode",
    );
    close(&rows[3]["latency_speedup"], 2.05 / 1.32, "overall latency");
    assert!(rows[2]["accept_rate"].is_null());
    assert!(json["baseline_model"].is_null(), "config.model is null");
    assert_eq!(json["speculative"], Value::from(s(&spec)));

    // Swapped, the speculative side's order and rates lead; a baseline
    // missing a category drops it from the table, and the check says so.
    let dir = tempfile::tempdir().unwrap();
    let mut partial: Value =
        serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    partial["summary"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["category"] != "qa");
    partial["results"]
        .as_array_mut()
        .unwrap()
        .retain(|r| r["category"] != "qa");
    let partial_path = dir.path().join("no_qa.json");
    std::fs::write(&partial_path, partial.to_string()).unwrap();
    let args = [
        "compare",
        "--baseline",
        s(&partial_path),
        "--speculative",
        s(&spec),
    ];
    let refused = run(&args).await;
    assert_eq!(refused.status.code(), Some(1));
    let err = String::from_utf8(refused.stderr).unwrap();
    assert!(
        err.contains("category \"qa\" is only in the speculative speed_bench.py file"),
        "{err}"
    );
    let forced = run(&[&args[..], &["--force"]].concat()).await;
    assert!(forced.status.success());
    let stdout = String::from_utf8(forced.stdout).unwrap();
    let names: Vec<String> = table_rows(&stdout, "category  base_avg_pred_t/s")
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(names, ["coding", "math", "overall"]);
}

/// The llama.cpp-flavoured simulator: speculation on (qa never drafts) or
/// off everywhere.
fn llama_sim(speculate: bool, model: &str) -> SimConfig {
    let p = if speculate { 0.8 } else { 0.0 };
    SimConfig::default()
        .with_flavor(SpecFlavor::LlamaCpp)
        .with_model(model)
        .with_ttft_ms(2.0)
        .with_step_ms(0.25)
        .with_output_tokens(8, 24)
        .with_default_spec(AcceptanceProfile::new(4, 0.6, 0.5).with_p_draft(p))
        .with_category("qa", AcceptanceProfile::new(4, 0.6, 0.5).with_p_draft(0.0))
}

/// Profiles the fixture (non-streaming, as speed_bench.py sends) into
/// `dir`, writing speed_bench.py's JSON to `output`; `model` `None` asks
/// the server.
async fn profile(url: &str, model: Option<&str>, dir: &Path, output: &Path) -> String {
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--input-file",
        fixture().to_str().unwrap(),
        "--concurrency",
        "2",
        "--osl",
        "32",
        "--extra-inputs",
        "temperature:0",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        s(dir),
        "--output",
        s(output),
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    if let Some(m) = model {
        args.extend(["--model".to_string(), m.to_string()]);
    }
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(out.status.success(), "profile exit {:?}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

async fn profiled(
    speculate: bool,
    server_model: &str,
    model: Option<&str>,
    dir: &Path,
    output: &Path,
) -> String {
    let server = sim(llama_sim(speculate, server_model)).await;
    let stdout = profile(&server.url(), model, dir, output).await;
    server.shutdown().await;
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_file_against_a_run_directory_and_report_over_a_mix() {
    let dir = tempfile::tempdir().unwrap();
    let (base_dir, spec_dir) = (dir.path().join("base"), dir.path().join("spec"));
    let (base_json, spec_json) = (dir.path().join("base.json"), dir.path().join("spec.json"));
    profiled(false, "m", Some("m"), &base_dir, &base_json).await;
    profiled(true, "m", Some("m"), &spec_dir, &spec_json).await;

    // The baseline as a speed_bench.py file, the speculative side as its
    // run directory: the same table as with both files (a run
    // directory's speed_bench.py summary comes from its records, as its
    // --output file's does).
    let compare_json = |b: &Path, sp: &Path| {
        let (b, sp) = (b.to_path_buf(), sp.to_path_buf());
        async move {
            let out = run(&[
                "compare",
                "--baseline",
                s(&b),
                "--speculative",
                s(&sp),
                "--format",
                "json",
            ])
            .await;
            assert!(out.status.success(), "compare {b:?} {sp:?}");
            let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
            let rows = v["rows"].take();
            (rows, v)
        }
    };
    let (mixed, mixed_top) = compare_json(&base_json, &spec_dir).await;
    let (files, _) = compare_json(&base_json, &spec_json).await;
    let (reverse_mixed, _) = compare_json(&base_dir, &spec_json).await;
    // Equal but for the last bit a number read back from JSON may differ
    // by (serde_json's float parsing).
    let same = |a: &Value, b: &Value| {
        let (a, b) = (a.as_array().unwrap(), b.as_array().unwrap());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            for (k, v) in x.as_object().unwrap() {
                match (v.as_f64(), y[k].as_f64()) {
                    (Some(p), Some(q)) => {
                        assert!((p - q).abs() <= 1e-12 * q.abs(), "{k}: {p} vs {q}")
                    }
                    _ => assert_eq!(v, &y[k], "{k}"),
                }
            }
        }
    };
    same(&mixed, &files);
    same(&reverse_mixed, &files);
    assert_eq!(mixed_top["speculative_model"], "m");
    // By hand from the two files' summary rows: decode = spec / base
    // avg_pred_t_s, latency = base / spec avg_latency, per category.
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (b, sp) = (read(&base_json), read(&spec_json));
    let rows = mixed.as_array().unwrap();
    assert_eq!(rows.len(), sp["summary"].as_array().unwrap().len());
    for (row, srow) in rows.iter().zip(sp["summary"].as_array().unwrap()) {
        let cat = srow["category"].as_str().unwrap();
        let brow = b["summary"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["category"] == cat)
            .unwrap();
        assert_eq!(row["category"], cat);
        let f = |v: &Value, k: &str| v[k].as_f64().unwrap();
        close(
            &row["decode_speedup"],
            f(srow, "avg_pred_t_s") / f(brow, "avg_pred_t_s"),
            cat,
        );
        close(
            &row["latency_speedup"],
            f(brow, "avg_latency") / f(srow, "avg_latency"),
            cat,
        );
        assert_eq!(row["accept_rate"], srow["accept_rate"], "{cat}");
    }
    let qa = rows.iter().find(|r| r["category"] == "qa").unwrap();
    assert!(qa["accept_rate"].is_null(), "qa never drafts");

    // Two run directories: speedbench's own comparison, as before.
    let out = run(&[
        "compare",
        "--baseline",
        s(&base_dir),
        "--speculative",
        s(&spec_dir),
        "--bootstrap",
        "0",
    ])
    .await;
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Baseline vs speculative"), "{stdout}");
    assert!(!stdout.contains("base_avg_pred_t/s"), "{stdout}");

    // --- report over a mix: the hand-written files, a run directory ---
    let fixtures = fixture_file("");
    let paths = [s(&fixtures), s(&spec_dir)];
    let out = run(&[
        "report",
        paths[0],
        paths[1],
        "--metric",
        "accept_rate",
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let columns: Vec<&str> = json["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let row = |label: &str| -> Value {
        json["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["label"] == label)
            .unwrap_or_else(|| panic!("no row {label} in {json}"))
            .clone()
    };
    let cell =
        |r: &Value, c: &str| r["cells"][columns.iter().position(|x| *x == c).unwrap()].clone();
    let spec_row = row("spec");
    close(&cell(&spec_row, "coding"), 120.0 / 170.0, "spec coding");
    close(&cell(&spec_row, "math"), 50.0 / 80.0, "spec math");
    assert!(cell(&spec_row, "qa").is_null());
    // Overall = macro-average of the present cells.
    close(
        &spec_row["overall"],
        (120.0 / 170.0 + 0.625) / 2.0,
        "spec overall",
    );
    assert_eq!(
        spec_row["requests"][columns.iter().position(|x| *x == "math").unwrap()],
        1
    );
    // The baseline drafted nothing: its row stays, empty, and stderr says why.
    let base_row = row("baseline");
    assert!(
        base_row["cells"]
            .as_array()
            .unwrap()
            .iter()
            .all(Value::is_null)
    );
    assert!(
        stderr.contains("baseline.json (row \"baseline\") has no accept_rate value")
            && stderr.contains("none of them drafted"),
        "{stderr}"
    );
    // The run directory's row, from its records.
    let m_row = row("m");
    assert!(cell(&m_row, "qa").is_null() || cell(&m_row, "qa") == 0.0);
    assert!(m_row["overall"].as_f64().unwrap() > 0.0);

    // A metric a file cannot give: its row is there, empty, with the reason.
    let out = run(&[
        "report", paths[0], paths[1], "--metric", "latency", "--format", "json",
    ])
    .await;
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("spec.json (row \"spec\") has no latency value")
            && stderr.contains("per-sample latencies"),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 3);

    // --format speed-bench-py: each file's summary rows as written, the
    // run directory's from its records.
    let out = run(&["report", paths[0], paths[1], "--format", "speed-bench-py"]).await;
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let spec_file = fixture_file("spec.json");
    let at = stdout
        .find(&format!("spec ({})\n", spec_file.display()))
        .unwrap_or_else(|| panic!("{stdout}"));
    let rows = table_rows(&stdout[at..], "category  samples");
    let overall = rows.iter().find(|r| r[0] == "overall").unwrap();
    assert_eq!(overall[1..6], ["5", "840.00", "74.00", "1.320s", "0.6800"]);
    assert!(stdout[at..].contains("1 of 6 samples failed"));
    assert!(stdout.contains(&format!("m ({})\n", spec_dir.display())));
    assert!(stdout.contains(&format!(
        "baseline ({})\n",
        fixture_file("baseline.json").display()
    )));

    // In a directory, only JSON files of speed_bench.py's layout are runs.
    let mixed_dir = dir.path().join("mixed");
    std::fs::create_dir(&mixed_dir).unwrap();
    std::fs::copy(&spec_json, mixed_dir.join("spec_run.json")).unwrap();
    std::fs::write(mixed_dir.join("notes.json"), r#"{"summary": "not a run"}"#).unwrap();
    let out = run(&[
        "report",
        s(&mixed_dir),
        "--metric",
        "accept_rate",
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stderr)
            .unwrap()
            .contains("Found 1 run directory.")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_file_is_named_with_its_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture_file("spec.json")).unwrap()).unwrap();
    v["summary"][1]["avg_latency"] = Value::from("2.0s");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    let base = fixture_file("baseline.json");
    for args in [
        vec!["compare", "--baseline", s(&base), "--speculative", s(&bad)],
        vec!["report", s(&bad), "--metric", "accept_rate"],
        vec!["report", s(dir.path()), "--format", "speed-bench-py"],
    ] {
        let out = run(&args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains(&format!(
                "{}: not a speed_bench.py --output file: summary[1].avg_latency: invalid type: \
                 string \"2.0s\", expected f64",
                bad.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    // A missing field, and a results element named by its index.
    v["summary"][1]["avg_latency"] = Value::from(2.0);
    v["results"][2].as_object_mut().unwrap().remove("ok");
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = run(&["compare", "--baseline", s(&bad), "--speculative", s(&base)]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!(
            "--baseline: {}: not a speed_bench.py --output file: results[2]: missing field `ok`",
            bad.display()
        )),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gguf_path_model_shows_as_its_stem_and_stays_whole_in_the_files() {
    const GGUF: &str =
        "/home/bench/models/llama.cpp/SmolLM2-135M-Instruct-Q8_0-with-a-long-name.gguf";
    const STEM: &str = "SmolLM2-135M-Instruct-Q8_0-with-a-long-name";
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let output = dir.path().join("out.json");
    // No --model: speedbench asks /v1/models, which names the GGUF file,
    // as llama-server does.
    let stdout = profiled(true, GGUF, None, &run_dir, &output).await;
    // profile's end tables: the stem, not the path.
    assert!(stdout.contains(&format!("│ {STEM} ")), "{stdout}");
    assert!(!stdout.contains(GGUF), "{stdout}");
    // The full id in run.json and in the --output file.
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    assert_eq!(read(&run_dir.join("run.json"))["model"], GGUF);
    assert_eq!(read(&output)["config"]["model"], GGUF);

    // report: the label is the stem, the JSON row keeps the model whole.
    let out = run(&["report", s(&run_dir), "--format", "json"]).await;
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["label"], STEM);
    assert_eq!(json["rows"][0]["model"], GGUF);
    let out = run(&["report", s(&run_dir), s(&output), "--format", "console"]).await;
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains(GGUF), "{table}");
    // The run directory and the file name the same model: their stems
    // collide and each gets its directory or file name.
    assert!(
        table.contains(&format!("{STEM} (run)")) && table.contains(&format!("{STEM} (out.json)")),
        "{table}"
    );
    let out = run(&["report", s(&run_dir), "--format", "speed-bench-py"]).await;
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with(&format!("{STEM} ({})\n", run_dir.display())),
        "{text}"
    );
    // --label still wins.
    let out = run(&[
        "report",
        s(&run_dir),
        "--format",
        "json",
        "--label",
        &format!("{}=smol", run_dir.display()),
    ])
    .await;
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["label"], "smol");
    assert_eq!(json["rows"][0]["model"], GGUF);

    // compare's JSON names both models in full.
    let out = run(&[
        "compare",
        "--baseline",
        s(&output),
        "--speculative",
        s(&run_dir),
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success());
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["baseline_model"], GGUF);
    assert_eq!(json["speculative_model"], GGUF);
}

/// `report` over speed_bench.py files alone, without `--metric`, shows
/// what the files hold (their acceptance rate) instead of failing on the
/// acceptance length they cannot give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_over_speed_bench_py_files_defaults_to_what_they_hold() {
    let fixtures = fixture_file("");
    let out = run(&["report", s(&fixtures), "--format", "json"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("every run is a speed_bench.py file: the matrix is accept_rate"),
        "{stderr}"
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["metric"], "accept_rate", "{json}");
    let same = run(&[
        "report",
        s(&fixtures),
        "--metric",
        "accept_rate",
        "--format",
        "json",
    ])
    .await;
    let asked: Value = serde_json::from_slice(&same.stdout).unwrap();
    assert_eq!(json, asked, "the same matrix as asking for accept_rate");
}

/// `compare` over run directories and over the same runs' `--output` files
/// gives the same numbers in the same unit when asked (`--unit sample`),
/// and every table says its unit: per request over directories by default,
/// per sample over files (all the files hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_names_its_unit_and_the_same_unit_gives_the_same_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (base_dir, spec_dir) = (dir.path().join("base"), dir.path().join("spec"));
    let (base_json, spec_json) = (dir.path().join("base.json"), dir.path().join("spec.json"));
    profiled(false, "m", Some("m"), &base_dir, &base_json).await;
    profiled(true, "m", Some("m"), &spec_dir, &spec_json).await;
    let compare = |b: &Path, sp: &Path, extra: &[&str]| {
        let mut args = vec!["compare", "--baseline", s(b), "--speculative", s(sp)];
        args.extend_from_slice(extra);
        let args: Vec<String> = args.into_iter().map(String::from).collect();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&args).await;
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{stderr}");
            (String::from_utf8(out.stdout).unwrap(), stderr)
        }
    };
    // Directories (made without --bench): per request, said in the title.
    let (by_request, said) = compare(&base_dir, &spec_dir, &["--bootstrap", "0"]).await;
    assert!(
        by_request.contains("Baseline vs speculative, means per request"),
        "{by_request}"
    );
    assert!(said.contains("means per request"), "{said}");
    // Files: per sample, said on stderr (stdout is speed_bench_compare.py's
    // table, byte for byte).
    let (files, said) = compare(&base_json, &spec_json, &[]).await;
    assert!(said.contains("means per sample ("), "{said}");
    // The directories per sample: the files' table exactly.
    let (dirs, said) = compare(&base_dir, &spec_dir, &["--unit", "sample"]).await;
    assert!(said.contains("means per sample (--unit sample)"), "{said}");
    let table = |out: &str| out.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(table(&dirs), table(&files));
    // A file cannot be compared per request.
    let out = run(&[
        "compare",
        "--baseline",
        s(&base_json),
        "--speculative",
        s(&spec_dir),
        "--unit",
        "request",
    ])
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("holds per-sample figures only"), "{stderr}");
}
