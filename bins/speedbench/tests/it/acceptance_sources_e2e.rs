//! End-to-end: one acceptance length whatever the source, on a simulated
//! llama.cpp server that drafts on only some steps (as its n-gram
//! drafters do), and the server counters that appear mid-run.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use serde_json::Value;
use speedbench_sim::{AcceptanceProfile, Chunking, SimConfig, SpecFlavor};

/// llama.cpp-like: `timings` with draft fields only when a request drafted;
/// half the decode steps draft, `qa` never drafts, `math` rarely.
fn partial_drafting() -> SimConfig {
    let profile = |p_draft| AcceptanceProfile::new(4, 0.5, 0.4).with_p_draft(p_draft);
    SimConfig::default()
        .with_flavor(SpecFlavor::LlamaCpp)
        .with_chunking(Chunking::PerToken)
        .with_default_spec(profile(0.5))
        .with_category("qa", profile(0.0))
        .with_category("math", profile(0.2))
}

async fn profile_run(url: &str, out_dir: &Path) {
    let out = run(&[
        "profile",
        "--url",
        url,
        "--input-file",
        fixture().to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "2",
        "--osl",
        "96",
        "--server-metrics-shutdown-delay",
        "0.4",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "exit {:?}", out.status);
}

/// The cell of `column` in the first row, and the requests behind it.
fn cell(matrix: &Value, column: &str) -> (Option<f64>, u64) {
    let i = matrix["columns"]
        .as_array()
        .unwrap()
        .iter()
        .position(|c| c == column)
        .unwrap_or_else(|| panic!("no column {column}: {matrix}"));
    let row = &matrix["rows"][0];
    (
        row["cells"][i].as_f64(),
        row["requests"][i].as_u64().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_summary_and_server_give_one_acceptance_length_when_some_steps_do_not_draft() {
    let server = sim(partial_drafting()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    profile_run(&server.url(), &out_dir).await;
    let truth = server.ground_truth();
    server.shutdown().await;
    assert_eq!(truth.requests, 46);
    // Some steps drafted nothing: fewer drafting steps than target passes.
    let passes = truth.completion_tokens - truth.accepted;
    assert!(truth.steps > 0 && truth.steps < passes, "{truth:?}");

    // The figure every source must give: tokens per target pass over the
    // whole run, from the server's own totals.
    let expected = 1.0 + truth.accepted as f64 / passes as f64;
    let per_draft = 1.0 + truth.accepted as f64 / truth.steps as f64;
    eprintln!("expected {expected:.4}; per drafting step it would be {per_draft:.4}");
    assert!(per_draft - expected > 0.1);

    // Per category from the server's log of each request.
    let mut by: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for t in &truth.requests_log {
        // The fixture's prompts start with "[<category> <n>]".
        let category = t.conversation[1..].split(' ').next().unwrap();
        let e = by.entry(category.to_string()).or_default();
        e.0 += t.accepted;
        e.1 += u64::from(t.completion_tokens);
        e.2 += 1;
    }
    let records = report_json(&out_dir, "accept_length", "records").await;
    for (category, (accepted, tokens, requests)) in &by {
        let (value, covered) = cell(&records, category);
        let want = 1.0 + *accepted as f64 / (tokens - accepted) as f64;
        assert!(
            (value.unwrap() - want).abs() < 1e-12,
            "{category}: {value:?} vs {want}"
        );
        // Every request of the category is behind its cell.
        assert_eq!(covered, *requests, "{category}");
    }
    // qa never drafted: its column is there, at exactly 1 token per pass.
    assert_eq!(by["qa"].0, 0);
    assert_eq!(cell(&records, "qa"), (Some(1.0), 4));

    // The run-level sources: summary.json and the server scrape.
    let summary = report_json(&out_dir, "accept_length", "summary").await;
    let server_cell = report_json(&out_dir, "accept_length", "server").await;
    for (name, m) in [("summary", &summary), ("server", &server_cell)] {
        let v = m["rows"][0]["cells"][0].as_f64().unwrap();
        assert!((v - expected).abs() < 1e-12, "{name}: {v} vs {expected}");
    }
    // The same from the token-weighted totals summary.json stores.
    let summary_json: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    let totals = &summary_json["spec_decode"]["totals"];
    assert_eq!(totals["steps"].as_u64(), Some(passes));
    assert_eq!(totals["requests"].as_u64(), Some(46));
    let undrafted = truth.requests_log.iter().filter(|t| t.steps == 0).count() as u64;
    assert!(undrafted >= 4, "qa's requests never drafted");
    assert_eq!(totals["undrafted_requests"].as_u64(), Some(undrafted));

    // The acceptance rate is over drafted tokens only, the same everywhere.
    let rate = truth.accepted as f64 / truth.proposed as f64;
    for source in ["summary", "server"] {
        let m = report_json(&out_dir, "accept_rate", source).await;
        let v = m["rows"][0]["cells"][0].as_f64().unwrap();
        assert!((v - rate).abs() < 1e-12, "{source}: {v} vs {rate}");
    }
    let rates = report_json(&out_dir, "accept_rate", "records").await;
    assert_eq!(cell(&rates, "qa").0, None, "nothing drafted: no rate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_position_counters_that_appear_mid_run_are_counted_from_zero() {
    // llama-server publishes its per-position accepted counters only once
    // it has drafted: absent from the scrapes before the first request.
    let server = sim(partial_drafting()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    profile_run(&server.url(), &out_dir).await;
    let truth = server.ground_truth();
    server.shutdown().await;

    let export: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    let aggregate = |name: &str| &export["metrics"][name]["aggregate"];
    let per_pos = aggregate("llamacpp:spec_decode_num_accepted_tokens_per_pos");
    let by_position: Vec<u64> = (0..4)
        .map(|i| per_pos["by_position"][i.to_string()].as_f64().unwrap() as u64)
        .collect();
    assert_eq!(by_position, truth.accepted_per_pos);
    assert_eq!(per_pos["total"].as_f64(), Some(truth.accepted as f64));
    assert_eq!(
        aggregate("llamacpp:spec_decode_num_accepted_tokens")["total"].as_f64(),
        Some(truth.accepted as f64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_delay_server_gets_a_warning_not_silent_absurd_rates() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--streaming",
        "--osl",
        "64",
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    server.shutdown().await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("warning:") && stderr.contains("below what the client can time"),
        "{stderr}"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    let warnings = summary["timing_warnings"]
        .as_array()
        .expect("flag in summary.json");
    assert!(
        warnings[0].as_str().unwrap().contains("1 ms (e2e - TTFT)"),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_takes_time_per_token_gets_no_timing_warning() {
    // 20 ms per verify step and 12 tokens of at most 5 per step: every
    // decode window is at least 40 ms, far above the 1 ms limit even when
    // a busy client reads late.
    let server = sim(SimConfig::default()
        .with_step_ms(20.0)
        .with_output_tokens(12, 12))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "8",
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    server.shutdown().await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("below what the client can time"),
        "{stderr}"
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    assert!(summary.get("timing_warnings").is_none(), "{summary}");
}
