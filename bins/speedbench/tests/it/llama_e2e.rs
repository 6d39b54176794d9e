//! Checks on runs against a real llama-server, made by `.ci/llama-server-e2e.sh`.
//!
//! The script sets `SPEEDBENCH_LLAMA_E2E` to a directory holding `spec/`
//! (the model as its own draft), `ngram/` (`--spec-type ngram-mod`, which
//! drafts only on some steps) and `base/` (`--spec-type none`) run
//! directories of the same prompts at temperature 0, and `py-spec/`, `py-base/` with their
//! `py-spec.json`, `py-base.json` (llama.cpp speed_bench.py's workflow: `--limit 1`, `--output`,
//! a fresh server each). Without it (a plain `cargo test`) the
//! test has nothing to check and says so.

use crate::common;

use std::path::{Path, PathBuf};

use common::{read_run, run};
use serde_json::Value;
use speedbench_metrics::SpeedBenchPyOutput;
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
    // One denominator per row: the per-position counters over the same
    // target passes, so the full-budget length is the row's own.
    if let Some(budgets) = server["rows"][0]["length_at_budget"].as_array() {
        let full = budgets.last().and_then(Value::as_f64).unwrap();
        assert!((full - v).abs() < 1e-9, "full budget {full} vs {v}");
        assert_eq!(
            server["rows"][0]["position_acceptance_per"],
            "acceptance_length_step"
        );
    }
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

/// speed_bench.py's rate for one sample, computed here from its records:
/// the server's own `timings.predicted_per_second` for a single turn,
/// Σ completion tokens / Σ `predicted_ms` over the turns of a multi-turn one.
fn sample_pred_rate(turns: &[&RequestRecord]) -> f64 {
    match turns {
        [one] => one
            .server_timings
            .as_ref()
            .and_then(|t| t.predicted_per_second)
            .unwrap(),
        many => {
            let tokens: u64 = many
                .iter()
                .map(|r| {
                    r.completion_tokens
                        .filter(|&n| n != 0)
                        .or(r.server_timings.as_ref().and_then(|t| t.predicted_n))
                        .unwrap()
                })
                .sum();
            let ms: f64 = many
                .iter()
                .map(|r| r.server_timings.as_ref().unwrap().predicted_ms.unwrap())
                .sum();
            tokens as f64 / (ms / 1000.0)
        }
    }
}

fn close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-9 * b.abs().max(1.0),
        "{what}: {a} vs {b}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speed_bench_py_workflow_checks_out() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_LLAMA_E2E is not set (run .ci/llama-server-e2e.sh)");
        return;
    };
    let mut summaries = Vec::new();
    for name in ["py-base", "py-spec"] {
        let dir = root.join(name);
        let records = records(&dir);
        let file: SpeedBenchPyOutput = serde_json::from_str(
            &std::fs::read_to_string(root.join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        // --limit 1 --category all: the first row of each of the five
        // categories, in file order; coding-1 has two turns.
        let mut ids: Vec<&str> = file.results.iter().map(|s| s.id.as_str()).collect();
        ids.sort();
        assert_eq!(
            ids,
            ["coding-1", "math-1", "qa-1", "summarization-1", "writing-1"],
            "{name}"
        );
        assert_eq!(
            (
                file.selected_samples,
                file.completed_samples,
                file.failed_samples
            ),
            (5, 5, 0)
        );
        assert_eq!(records.len(), 6, "{name}: 5 samples, one of two turns");
        assert!(
            records
                .iter()
                .all(|r| r.is_success() && r.ttft_ns.is_none())
        );

        // avg_pred_t/s: the mean over a category's samples of the rates the
        // server sent, per category and over every sample.
        let turns_of = |id: &str| -> Vec<&RequestRecord> {
            let mut t: Vec<&RequestRecord> =
                records.iter().filter(|r| r.conversation_id == id).collect();
            t.sort_by_key(|r| r.turn_index);
            t
        };
        let mut all = Vec::new();
        for row in &file.summary {
            let rates: Vec<f64> = file
                .results
                .iter()
                .filter(|s| {
                    row.category == "overall" || s.category.as_deref() == Some(&row.category)
                })
                .map(|s| sample_pred_rate(&turns_of(&s.id)))
                .collect();
            let mean = rates.iter().sum::<f64>() / rates.len() as f64;
            close(
                row.avg_pred_t_s.unwrap(),
                mean,
                &format!("{name} {} avg_pred_t/s", row.category),
            );
            if row.category != "overall" {
                all.extend(rates);
            }
        }
        assert_eq!(all.len(), 5);

        // accept_rate over the whole run equals the server's own counters.
        let export: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("server_metrics_export.json")).unwrap(),
        )
        .unwrap();
        let overall = file
            .summary
            .iter()
            .find(|r| r.category == "overall")
            .unwrap();
        if name == "py-spec" {
            let accepted = counter_total(&export, "llamacpp:spec_decode_num_accepted_tokens");
            let drafted = counter_total(&export, "llamacpp:spec_decode_num_draft_tokens");
            assert!(drafted > 0.0, "the speculative server drafted nothing");
            assert_eq!(
                (overall.accepted as f64, overall.draft_n as f64),
                (accepted, drafted)
            );
            close(
                overall.accept_rate.unwrap(),
                accepted / drafted,
                "accept_rate",
            );
        } else {
            assert_eq!(overall.draft_n, 0);
            assert_eq!(overall.accept_rate, None, "n/a when nothing was drafted");
        }

        // The model id is the GGUF path: run.json keeps it, tables show its stem.
        let manifest: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
        let model = manifest["model"].as_str().unwrap();
        assert!(model.ends_with(".gguf"), "{model}");
        let stem = Path::new(model)
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let out = run(&[
            "report",
            dir.to_str().unwrap(),
            "--metric",
            "latency",
            "--format",
            "console",
        ])
        .await;
        let table = String::from_utf8_lossy(&out.stdout);
        assert!(table.contains(&stem) && !table.contains(model), "{table}");
        summaries.push(file.summary);
    }

    // compare over the two files: speed_bench_compare.py's speedups.
    let cmp = json_of(&[
        "compare",
        "--baseline",
        root.join("py-base.json").to_str().unwrap(),
        "--speculative",
        root.join("py-spec.json").to_str().unwrap(),
        "--format",
        "json",
    ])
    .await;
    let rows = cmp["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6, "five categories and overall: {cmp}");
    for row in rows {
        let category = row["category"].as_str().unwrap();
        let find = |s: &Vec<speedbench_metrics::SpeedBenchPyRow>| {
            s.iter().find(|r| r.category == category).unwrap().clone()
        };
        let (base, spec) = (find(&summaries[0]), find(&summaries[1]));
        close(
            row["decode_speedup"].as_f64().unwrap(),
            spec.avg_pred_t_s.unwrap() / base.avg_pred_t_s.unwrap(),
            &format!("{category} decode_speedup"),
        );
        close(
            row["latency_speedup"].as_f64().unwrap(),
            base.avg_latency.unwrap() / spec.avg_latency.unwrap(),
            &format!("{category} latency_speedup"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tune_of_the_real_server_checks_out() {
    let Some(dir) = runs() else {
        eprintln!("skipped: SPEEDBENCH_LLAMA_E2E is not set (run .ci/llama-server-e2e.sh)");
        return;
    };
    crate::tune_e2e::check_real_tune(&dir.join("tune"));
}

/// `--isl 48 --osl 16` over completions: llama-server's own count of every
/// prompt (its usage) is the 48 tokens its `/tokenize` counted plus the
/// same special tokens on each (a BOS where the model adds one), and it
/// generated exactly 16 tokens for each (`ignore_eos`).
#[test]
fn synthetic_prompts_have_their_length_by_llama_servers_own_count() {
    let Some(dir) = runs() else {
        eprintln!("skipped: SPEEDBENCH_LLAMA_E2E is not set (run .ci/llama-server-e2e.sh)");
        return;
    };
    crate::synthetic_e2e::check_real_synthetic_run(&dir.join("synthetic"));
}
