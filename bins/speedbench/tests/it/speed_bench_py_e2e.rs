//! End-to-end: llama.cpp speed_bench.py's per-category summary and its
//! `--output` JSON, from `speedbench profile` against the simulated server
//! in its llama.cpp flavour (non-streaming, as speed_bench.py sends), and
//! from `speedbench report --format speed-bench-py`. Every number is
//! checked against what this test computes from the records file (and the
//! server's own log of drafts), a failed turn fails its sample, and the
//! JSON file is never written over an existing one without --overwrite.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::*;
use serde_json::Value;
use speedbench_dataset::Dataset;
use speedbench_record::RequestRecord;
use speedbench_sim::{AcceptanceProfile, FaultKind, FaultPlan, SimConfig, SpecFlavor};

/// llama.cpp-shaped `timings`; `qa` never drafts; some requests get a 500
/// (chosen from the prompt, so the same ones on every run).
fn llama_sim(faults: bool) -> SimConfig {
    let profile = |p_draft| AcceptanceProfile::new(4, 0.6, 0.5).with_p_draft(p_draft);
    let config = SimConfig::default()
        .with_flavor(SpecFlavor::LlamaCpp)
        .with_ttft_ms(3.0)
        .with_step_ms(0.25)
        .with_output_tokens(8, 40)
        .with_default_spec(profile(0.8))
        .with_category("qa", profile(0.0));
    if faults {
        config.with_fault(FaultPlan::probability(FaultKind::HttpStatus(500), 0.15))
    } else {
        config
    }
}

fn profile_args(url: &str, out_dir: &Path, output: &Path) -> Vec<String> {
    [
        "profile",
        "--url",
        url,
        "--model",
        "m",
        "--input-file",
        fixture().to_str().unwrap(),
        "--concurrency",
        "2",
        "--osl",
        "64",
        "--extra-inputs",
        "temperature:0",
        "--timeout",
        "5",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

async fn run_strings(args: &[String]) -> std::process::Output {
    run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
}

/// One sample as this test computes it from its records (speed_bench.py's
/// `run_one`, written out again here).
#[derive(Debug)]
struct Expected {
    category: String,
    ok: bool,
    turns: u64,
    latency_s: f64,
    prompt_tokens: u64,
    completion_tokens: u64,
    draft_n: u64,
    accepted: u64,
    prompt_ms: f64,
    predicted_ms: f64,
    prompt_n: u64,
    pps: Option<f64>,
    dps: Option<f64>,
}

fn expected_samples(records: &[RequestRecord]) -> BTreeMap<String, Expected> {
    let mut by: BTreeMap<String, Vec<&RequestRecord>> = BTreeMap::new();
    for r in records {
        assert!(!r.warmup);
        by.entry(r.conversation_id.clone()).or_default().push(r);
    }
    by.into_iter()
        .map(|(id, mut turns)| {
            turns.sort_by_key(|r| r.turn_index);
            let ok = turns.iter().all(|r| r.is_success());
            let mut e = Expected {
                category: turns[0].category.clone().unwrap(),
                ok,
                turns: turns.len() as u64,
                latency_s: 0.0,
                prompt_tokens: 0,
                completion_tokens: 0,
                draft_n: 0,
                accepted: 0,
                prompt_ms: 0.0,
                predicted_ms: 0.0,
                prompt_n: 0,
                pps: None,
                dps: None,
            };
            for r in turns.iter().take_while(|r| r.is_success()) {
                e.latency_s += r.e2e_latency_ns as f64 / 1e9;
                if !ok {
                    continue;
                }
                let t = r.server_timings.as_ref().expect("llama.cpp timings");
                let usage_or = |u: Option<u64>, n: Option<u64>| match u {
                    Some(v) if v > 0 => v,
                    _ => n.unwrap_or(0),
                };
                e.prompt_tokens += usage_or(r.prompt_tokens, t.prompt_n);
                e.completion_tokens += usage_or(r.completion_tokens, t.predicted_n);
                e.prompt_ms += t.prompt_ms.unwrap();
                e.predicted_ms += t.predicted_ms.unwrap();
                e.prompt_n += t.prompt_n.unwrap();
                if let Some(s) = &r.spec {
                    e.draft_n += s.proposed_draft_tokens;
                    e.accepted += s.accepted_draft_tokens;
                }
                if turns.len() == 1 {
                    e.pps = t.prompt_per_second;
                    e.dps = t.predicted_per_second;
                }
            }
            if ok && turns.len() > 1 {
                e.pps = Some(e.prompt_tokens as f64 / (e.prompt_ms / 1000.0));
                e.dps = Some(e.completion_tokens as f64 / (e.predicted_ms / 1000.0));
            }
            (id, e)
        })
        .collect()
}

/// A category's row as this test computes it from the samples.
#[derive(Debug)]
struct Row {
    samples: u64,
    turns: u64,
    failed: u64,
    pps: Option<f64>,
    dps: Option<f64>,
    latency: Option<f64>,
    draft_n: u64,
    accepted: u64,
    rate: Option<f64>,
    uncached: Option<f64>,
}

fn expected_row<'a>(samples: impl Iterator<Item = &'a Expected>) -> Row {
    let all: Vec<&Expected> = samples.collect();
    let ok: Vec<&&Expected> = all.iter().filter(|s| s.ok).collect();
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let draft_n = ok.iter().map(|s| s.draft_n).sum();
    let accepted = ok.iter().map(|s| s.accepted).sum();
    Row {
        samples: ok.len() as u64,
        turns: ok.iter().map(|s| s.turns).sum(),
        failed: (all.len() - ok.len()) as u64,
        pps: mean(ok.iter().filter_map(|s| s.pps).collect()),
        dps: mean(ok.iter().filter_map(|s| s.dps).collect()),
        latency: mean(ok.iter().map(|s| s.latency_s).collect()),
        draft_n,
        accepted,
        rate: (draft_n > 0).then(|| accepted as f64 / draft_n as f64),
        uncached: mean(
            ok.iter()
                .map(|s| s.prompt_n as f64 / (s.prompt_ms / 1000.0))
                .collect(),
        ),
    }
}

/// The printed table's rows by category name: the lines between the dash
/// underline and the legend.
fn table(stdout: &str) -> BTreeMap<String, Vec<String>> {
    let start = stdout
        .find("speed_bench.py summary, per sample (elapsed=")
        .unwrap_or_else(|| panic!("no speed_bench.py summary in\n{stdout}"));
    let mut lines = stdout[start..].lines().skip(1);
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "category",
            "samples",
            "avg_prompt_t/s",
            "avg_pred_t/s",
            "avg_latency",
            "accept_rate",
            "avg_uncached_prompt_t/s"
        ]
    );
    assert!(lines.next().unwrap().starts_with("--------"));
    lines
        .take_while(|l| !l.starts_with("samples:") && !l.contains(" samples failed "))
        .map(|l| {
            let cells: Vec<String> = l.split_whitespace().map(String::from).collect();
            assert_eq!(cells.len(), 7, "{l:?}");
            (cells[0].clone(), cells)
        })
        .collect()
}

fn f2(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{v:.2}"))
}

fn close(json: &Value, want: Option<f64>, what: &str) {
    match want {
        None => assert!(json.is_null(), "{what}: {json} vs None"),
        Some(w) => {
            let got = json.as_f64().unwrap_or_else(|| panic!("{what}: {json}"));
            assert!(
                (got - w).abs() <= 1e-9 * w.abs().max(1.0),
                "{what}: {got} vs {w}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_prints_the_summary_and_writes_the_json_both_from_the_records() {
    let server = sim(llama_sim(true)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let output = dir.path().join("speed_bench.json");
    let url = server.url();
    let out = run_strings(&profile_args(&url, &out_dir, &output)).await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let truth = server.ground_truth();
    server.shutdown().await;
    let stdout = String::from_utf8(out.stdout).unwrap();
    eprintln!("stdout:\n{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains(&format!(
        "speed_bench.py JSON written to {}",
        output.display()
    )));

    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    let records = read_run(&out_dir).unwrap().records;
    let samples = expected_samples(&records);
    // The faults failed some samples, multi-turn ones among them (their
    // later turns recorded as skipped, counted in the sample's turns).
    let failed: Vec<&String> = samples
        .iter()
        .filter(|(_, s)| !s.ok)
        .map(|(id, _)| id)
        .collect();
    assert!(
        !failed.is_empty() && failed.len() < samples.len(),
        "{failed:?}"
    );
    assert!(
        records
            .iter()
            .any(|r| r.error_kind == Some(speedbench_record::ErrorKind::Skipped)),
        "no multi-turn sample failed before its last turn: choose another fault seed"
    );
    assert!(samples.values().any(|s| s.ok && s.turns > 1));

    // Categories in dataset order, then overall (every sample pooled).
    let mut order: Vec<String> = Vec::new();
    for c in dataset
        .conversations
        .iter()
        .filter_map(|c| c.category.clone())
    {
        if !order.contains(&c) {
            order.push(c);
        }
    }
    let mut rows: Vec<(String, Row)> = order
        .iter()
        .map(|c| {
            (
                c.clone(),
                expected_row(samples.values().filter(|s| &s.category == c)),
            )
        })
        .collect();
    rows.push(("overall".into(), expected_row(samples.values())));
    let qa = &rows.iter().find(|(c, _)| c == "qa").unwrap().1;
    assert_eq!((qa.draft_n, qa.rate), (0, None), "qa never drafts");

    // --- The printed table --------------------------------------------
    let printed = table(&stdout);
    assert_eq!(printed.len(), rows.len());
    for (category, want) in &rows {
        let cells = &printed[category];
        assert_eq!(cells[1], want.samples.to_string(), "{category} samples");
        assert_eq!(cells[2], f2(want.pps), "{category} avg_prompt_t/s");
        assert_eq!(cells[3], f2(want.dps), "{category} avg_pred_t/s");
        assert_eq!(
            cells[4],
            want.latency.map_or("n/a".into(), |v| format!("{v:.3}s")),
            "{category} avg_latency"
        );
        assert_eq!(
            cells[5],
            want.rate.map_or("n/a".into(), |v| format!("{v:.4}")),
            "{category} accept_rate"
        );
        assert_eq!(
            cells[6],
            f2(want.uncached),
            "{category} avg_uncached_prompt_t/s"
        );
    }
    let overall = &rows.last().unwrap().1;
    assert!(stdout.contains(&format!(
        "{} of {} samples failed",
        overall.failed,
        samples.len()
    )));
    // The drafts behind the successful samples, from the server's own log.
    let ok_first_turns: BTreeSet<&str> = dataset
        .conversations
        .iter()
        .filter(|c| samples[&c.id].ok)
        .map(|c| c.turns[0].as_str())
        .collect();
    let logged = |f: fn(&speedbench_sim::RequestTruth) -> u64| -> u64 {
        truth
            .requests_log
            .iter()
            .filter(|t| ok_first_turns.contains(t.conversation.as_str()))
            .map(f)
            .sum()
    };
    assert_eq!(overall.draft_n, logged(|t| t.proposed));
    assert_eq!(overall.accepted, logged(|t| t.accepted));

    // --- The JSON file --------------------------------------------------
    let text = std::fs::read_to_string(&output).unwrap();
    let keys = [
        "\"completed_samples\"",
        "\"config\"",
        "\"failed_samples\"",
        "\"results\"",
        "\"selected_samples\"",
        "\"summary\"",
    ];
    let at: Vec<usize> = keys
        .iter()
        .map(|k| text.find(&format!("\n  {k}")).unwrap())
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "keys not sorted: {at:?}"
    );
    let json: Value = serde_json::from_str(&text).unwrap();
    let config = &json["config"];
    assert_eq!(config["url"], url.as_str());
    assert_eq!(config["model"], "m");
    assert_eq!(config["bench"], "speed_bench_mini");
    assert_eq!(config["category"], "all");
    assert_eq!(config["osl"], 64);
    assert_eq!(config["concurrency"], 2);
    assert_eq!(
        config["extra_inputs"],
        serde_json::json!({"temperature": 0})
    );
    assert_eq!(config["timeout"], 5.0);
    assert_eq!(config["streaming"], false);
    assert_eq!(config["limit"], Value::Null);
    assert_eq!(json["selected_samples"], dataset.conversations.len());
    assert_eq!(json["failed_samples"], failed.len());
    assert_eq!(json["completed_samples"], samples.len() - failed.len());

    // Every input sample is in `results`, once, with the records' numbers.
    let results = json["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len());
    let input: BTreeSet<&str> = dataset
        .conversations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(unique, input);
    for r in results {
        let id = r["id"].as_str().unwrap();
        let e = &samples[id];
        assert_eq!(r["category"], e.category.as_str(), "{id}");
        assert_eq!(r["ok"], e.ok, "{id}");
        assert_eq!(r["turns"], e.turns, "{id}");
        close(&r["latency_s"], Some(e.latency_s), id);
        assert_eq!(r["prompt_tokens"], e.prompt_tokens, "{id}");
        assert_eq!(r["completion_tokens"], e.completion_tokens, "{id}");
        assert_eq!(
            r["total_tokens"],
            e.prompt_tokens + e.completion_tokens,
            "{id}"
        );
        assert_eq!(r["draft_n"], e.draft_n, "{id}");
        assert_eq!(r["draft_n_accepted"], e.accepted, "{id}");
        close(&r["prompt_per_second"], e.pps, id);
        close(&r["predicted_per_second"], e.dps, id);
        if e.ok {
            close(&r["prompt_ms"], Some(e.prompt_ms), id);
            close(&r["predicted_ms"], Some(e.predicted_ms), id);
            assert_eq!(r["prompt_n"], e.prompt_n, "{id}");
            assert_eq!(r["error"], Value::Null, "{id}");
        } else {
            assert_eq!(r["prompt_ms"], Value::Null, "{id}");
            let error = r["error"].as_str().unwrap();
            assert!(error.contains("failed (http_status)"), "{id}: {error}");
        }
    }
    let summary = json["summary"].as_array().unwrap();
    assert_eq!(summary.len(), rows.len());
    for (row, (category, want)) in summary.iter().zip(&rows) {
        assert_eq!(row["category"], category.as_str());
        assert_eq!(row["requests"], want.samples, "{category}");
        assert_eq!(row["turns"], want.turns, "{category}");
        assert_eq!(row["failed"], want.failed, "{category}");
        assert_eq!(row["draft_n"], want.draft_n, "{category}");
        assert_eq!(row["accepted"], want.accepted, "{category}");
        close(&row["avg_prompt_t_s"], want.pps, category);
        close(&row["avg_pred_t_s"], want.dps, category);
        close(&row["avg_latency"], want.latency, category);
        close(&row["accept_rate"], want.rate, category);
        close(&row["avg_uncached_prompt_t_s"], want.uncached, category);
    }

    // --- report --format speed-bench-py prints the same table -----------
    for format in ["speed-bench-py", "llamacpp"] {
        let report = run(&["report", out_dir.to_str().unwrap(), "--format", format]).await;
        assert!(report.status.success(), "report --format {format}");
        let report_out = String::from_utf8(report.stdout).unwrap();
        assert!(report_out.starts_with(&format!("m ({})\n", out_dir.display())));
        assert_eq!(table(&report_out), printed, "--format {format}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_over_an_existing_file_is_refused_before_the_run_unless_overwrite() {
    let server = sim(llama_sim(false)).await;
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("out.json");
    std::fs::write(&output, "keep me").unwrap();
    let url = server.url();

    // Refused, before a single request is sent; the file untouched.
    let first = dir.path().join("first");
    let out = run_strings(&profile_args(&url, &first, &output)).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--overwrite"), "{stderr}");
    assert!(stderr.contains("out.json"), "{stderr}");
    assert_eq!(server.ground_truth().requests, 0);
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "keep me");
    assert!(!first.join("records.parquet").exists());
    // So is a file in a directory that does not exist, even with --overwrite.
    let mut args = profile_args(&url, &first, &dir.path().join("no/such/out.json"));
    args.push("--overwrite".into());
    let out = run_strings(&args).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("directory does not exist"), "{stderr}");
    assert_eq!(server.ground_truth().requests, 0);

    // With --overwrite the file is replaced by the run's JSON, through a
    // temporary file that does not stay behind.
    let second = dir.path().join("second");
    let mut args = profile_args(&url, &second, &output);
    args.push("--overwrite".into());
    let out = run_strings(&args).await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let requests = server.ground_truth().requests;
    server.shutdown().await;
    let json: Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let records = read_run(&second).unwrap().records;
    assert_eq!(records.len() as u64, requests);
    assert_eq!(json["selected_samples"], 33);
    assert_eq!(json["failed_samples"], 0);
    let turns: u64 = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["turns"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, requests);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp")), "{names:?}");
    assert!(names.contains(&"out.json".to_string()), "{names:?}");
}
