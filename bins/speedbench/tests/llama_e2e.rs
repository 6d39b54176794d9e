//! Checks on runs against a real llama-server, made by `.ci/llama-server-e2e.sh`.
//!
//! The script sets `SPEEDBENCH_LLAMA_E2E` to a directory holding `spec/`
//! (the model as its own draft), `ngram/` (`--spec-type ngram-mod`, which
//! drafts only on some steps) and `base/` (`--spec-type none`) run
//! directories of the same prompts at temperature 0. Without it (a plain `cargo test`) the
//! test has nothing to check and says so.

mod common;

use std::path::{Path, PathBuf};

use common::{read_run, run};
use serde_json::Value;
use speedbench_record::RequestRecord;

fn runs() -> Option<PathBuf> {
    std::env::var_os("SPEEDBENCH_LLAMA_E2E").map(PathBuf::from)
}

fn records(dir: &Path) -> Vec<RequestRecord> {
    read_run(dir).unwrap().records
}

/// Sum of a counter's deltas over every series of the server-metrics export.
fn counter_total(export: &Value, name: &str) -> f64 {
    export["metrics"][name]["series"]
        .as_array()
        .unwrap_or_else(|| panic!("{name} missing from the scrape export"))
        .iter()
        .map(|s| s["stats"]["total"].as_f64().unwrap())
        .sum()
}

async fn json_of(args: &[&str]) -> Value {
    let out = run(args).await;
    assert!(out.status.success(), "{args:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_runs_check_out() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_LLAMA_E2E is not set (run .ci/llama-server-e2e.sh)");
        return;
    };
    let (spec_dir, base_dir) = (root.join("spec"), root.join("base"));
    let spec = records(&spec_dir);
    let base = records(&base_dir);
    // 7 rows, 2 of them two-turn: 9 requests per run, all successful.
    assert_eq!((spec.len(), base.len()), (9, 9));
    assert!(spec.iter().chain(&base).all(|r| r.is_success()), "{spec:?}");

    // llama.cpp timings were captured for every request.
    for r in spec.iter().chain(&base) {
        let t = r
            .server_timings
            .as_ref()
            .unwrap_or_else(|| panic!("no timings: {r:?}"));
        assert!(
            t.predicted_n.is_some() && t.predicted_per_second.is_some(),
            "{t:?}"
        );
    }
    // The baseline drafted nothing, so llama.cpp sent no draft fields.
    assert!(base.iter().all(|r| r.spec.is_none()));
    let drafted: u64 = spec
        .iter()
        .filter_map(|r| r.spec.as_ref())
        .map(|s| s.proposed_draft_tokens)
        .sum();
    let accepted: u64 = spec
        .iter()
        .filter_map(|r| r.spec.as_ref())
        .map(|s| s.accepted_draft_tokens)
        .sum();
    assert!(drafted > 0, "n-gram speculation drafted nothing");
    eprintln!("per-request sums: {accepted} of {drafted} drafts accepted");

    // The report's accept_rate is sum(accepted)/sum(drafted), per category.
    let spec_arg = spec_dir.to_str().unwrap();
    let matrix = json_of(&[
        "report",
        spec_arg,
        "--metric",
        "accept_rate",
        "--source",
        "records",
        "--format",
        "json",
    ])
    .await;
    let columns: Vec<&str> = matrix["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    for (i, column) in columns.iter().enumerate() {
        let (a, d) = spec
            .iter()
            .filter(|r| r.category.as_deref() == Some(column))
            .filter_map(|r| r.spec.as_ref())
            .fold((0u64, 0u64), |(a, d), s| {
                (a + s.accepted_draft_tokens, d + s.proposed_draft_tokens)
            });
        let cell = &matrix["rows"][0]["cells"][i];
        if d == 0 {
            assert!(cell.is_null(), "{column}: nothing drafted, no cell");
        } else {
            assert!(
                (cell.as_f64().unwrap() - a as f64 / d as f64).abs() < 1e-12,
                "{column}: {cell} vs {a}/{d}"
            );
        }
    }

    // The server scrape (llamacpp: counters, read like vLLM's) agrees with
    // the per-request sums: no other client used the server.
    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(spec_dir.join("server_metrics_export.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        counter_total(&export, "llamacpp:spec_decode_num_accepted_tokens") as u64,
        accepted
    );
    assert_eq!(
        counter_total(&export, "llamacpp:spec_decode_num_draft_tokens") as u64,
        drafted
    );
    let server = json_of(&[
        "report",
        spec_arg,
        "--metric",
        "accept_rate",
        "--source",
        "server",
        "--format",
        "json",
    ])
    .await;
    let rate = server["rows"][0]["cells"][0].as_f64().unwrap();
    assert!(
        (rate - accepted as f64 / drafted as f64).abs() < 1e-12,
        "server {rate} vs records {accepted}/{drafted}"
    );

    // Baseline vs speculative: a decode speedup per category and a lossless figure.
    let cmp = json_of(&[
        "compare",
        "--baseline",
        base_dir.to_str().unwrap(),
        "--speculative",
        spec_arg,
        "--format",
        "json",
    ])
    .await;
    let rows = cmp["rows"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        columns.len() + 1,
        "one row per category plus overall"
    );
    for row in rows {
        assert_eq!(row["decode_source"], "server", "{row}");
        assert!(row["decode_speedup"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["latency_speedup"].as_f64().unwrap() > 0.0, "{row}");
    }
    let overall = rows.last().unwrap();
    assert_eq!(overall["paired"], 9);
    eprintln!(
        "lossless check: {} of {} greedy outputs identical with and without speculation; overall decode speedup {:.2}x",
        overall["identical"], overall["paired"], overall["decode_speedup"]
    );

    sources_agree(&spec_dir, &spec).await;
    let ngram_dir = root.join("ngram");
    if ngram_dir.is_dir() {
        sources_agree(&ngram_dir, &records(&ngram_dir)).await;
    }
}

/// Records, summary and server give one acceptance length for the run:
/// tokens per target pass, passes that drafted nothing included (llama.cpp
/// drafts only on some steps, and sends no draft fields for a request that
/// never drafted); and the per-position counters, which llama-server
/// publishes only once it has drafted, add up to the accepted tokens.
async fn sources_agree(dir: &Path, records: &[RequestRecord]) {
    assert_eq!(records.len(), 9);
    let predicted: u64 = records
        .iter()
        .map(|r| r.server_timings.as_ref().unwrap().predicted_n.unwrap())
        .sum();
    let (accepted, drafted) = records
        .iter()
        .filter_map(|r| r.spec.as_ref())
        .fold((0u64, 0u64), |(a, d), s| {
            (a + s.accepted_draft_tokens, d + s.proposed_draft_tokens)
        });
    let undrafted = records.iter().filter(|r| r.spec.is_none()).count();
    let arg = dir.to_str().unwrap();
    let value = |m: &Value| m["rows"][0]["cells"][0].as_f64();
    let report = |source: &'static str| {
        let arg = arg.to_string();
        async move {
            json_of(&[
                "report",
                &arg,
                "--metric",
                "accept_length",
                "--source",
                source,
                "--format",
                "json",
            ])
            .await
        }
    };
    let summary = report("summary").await;
    let server = report("server").await;
    let by_category = report("records").await;
    if drafted == 0 {
        eprintln!("{}: nothing drafted, no acceptance length", dir.display());
        assert_eq!(value(&summary), None);
        return;
    }
    // 1 + Σaccepted / Σ(predicted_n - accepted), from the records by hand.
    let expected = 1.0 + accepted as f64 / (predicted - accepted) as f64;
    let (s, v) = (value(&summary).unwrap(), value(&server).unwrap());
    eprintln!(
        "{}: acceptance length {expected:.4} ({accepted} accepted, {predicted} predicted, \
         {undrafted} of 9 requests drafted nothing); summary {s:.4}, server {v:.4}",
        dir.display()
    );
    assert!((s - expected).abs() < 1e-9, "summary {s} vs {expected}");
    assert!((v - expected).abs() < 1e-9, "server {v} vs {expected}");
    // Every category is a column, each cell over all its requests.
    let columns = by_category["columns"].as_array().unwrap();
    let categories: std::collections::BTreeSet<&str> = records
        .iter()
        .filter_map(|r| r.category.as_deref())
        .collect();
    assert_eq!(columns.len(), categories.len(), "{by_category}");
    let covered: u64 = by_category["rows"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(covered, 9, "{by_category}");

    let export: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("server_metrics_export.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        counter_total(&export, "llamacpp:tokens_predicted") as u64,
        predicted
    );
    assert_eq!(
        counter_total(&export, "llamacpp:spec_decode_num_accepted_tokens_per_pos") as u64,
        accepted,
        "per-position counters, which appear only once the server drafts"
    );
}
