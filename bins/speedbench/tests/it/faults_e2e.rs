//! End-to-end: the real binary against a simulated server that injects
//! faults. Every run must finish (exit 0), record every request as a success
//! or a typed error, match the server's ground truth on every success, and
//! say how many requests failed.

use crate::common;

use std::collections::HashMap;
use std::path::Path;

use common::*;
use speedbench_dataset::Dataset;
use speedbench_record::{ErrorKind, RequestRecord};
use speedbench_sim::{FaultKind, FaultPlan, GroundTruth, SimConfig, SpecFlavor};

/// What one faulted run left behind.
struct FaultRun {
    records: Vec<RequestRecord>,
    truth: GroundTruth,
    stdout: String,
    stderr: String,
}

async fn run_with_faults(
    faults: Vec<FaultPlan>,
    flavor: SpecFlavor,
    streaming: bool,
    extra: &[&str],
) -> FaultRun {
    let config = SimConfig::speed_bench_demo()
        .with_faults(faults)
        .with_flavor(flavor)
        .with_output_tokens(8, 40);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--input-file",
        fixture.to_str().unwrap(),
        "--concurrency",
        "4",
        "--timeout",
        "1",
        // No 2 s wait for late /metrics counters after the run.
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ];
    if streaming {
        args.push("--streaming");
    }
    args.extend_from_slice(extra);
    let out = run(&args).await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let truth = server.ground_truth();
    server.shutdown().await;
    let file = read_run(&out_dir).unwrap();
    assert_eq!(file.manifest.unwrap().status, "completed");
    assert!(Path::new(&out_dir.join("summary.json")).is_file());
    FaultRun {
        records: file.records,
        truth,
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// The checks every faulted run must pass; returns the failed records.
fn check_run(run: &FaultRun, dataset: &Dataset, conversations: usize) -> Vec<RequestRecord> {
    let key = |r: &RequestRecord| request_key(dataset, r);
    // Nothing measured is lost: one record per request the server saw.
    let failing: Vec<_> = run
        .truth
        .faults
        .iter()
        .filter(|f| f.kind.fails_request())
        .collect();
    let skipped = |r: &&RequestRecord| r.error_kind == Some(ErrorKind::Skipped);
    let sent: Vec<&RequestRecord> = run.records.iter().filter(|r| !skipped(r)).collect();
    assert_eq!(
        sent.len() as u64,
        run.truth.requests + failing.len() as u64,
        "records vs requests the server received"
    );
    // Every turn of the input is in the file: a failed turn's later turns
    // as skipped rows, exactly those.
    let n = dataset.conversations.len();
    let turns: usize = (0..conversations)
        .map(|i| dataset.conversations[i % n].turns.len())
        .sum();
    assert_eq!(run.records.len(), turns, "one row per turn of the input");
    let mut skipped_rows: Vec<(String, u32)> = run
        .records
        .iter()
        .filter(skipped)
        .map(|r| (r.conversation_id.clone(), r.turn_index))
        .collect();
    let mut after_failures: Vec<(String, u32)> = sent
        .iter()
        .filter(|r| !r.is_success())
        .flat_map(|r| {
            let conv = dataset
                .conversations
                .iter()
                .find(|c| c.id == r.conversation_id)
                .unwrap();
            (r.turn_index + 1..conv.turns.len() as u32).map(|t| (conv.id.clone(), t))
        })
        .collect();
    skipped_rows.sort();
    after_failures.sort();
    assert_eq!(skipped_rows, after_failures, "skipped rows");
    for r in run.records.iter().filter(skipped) {
        let msg = r.error_message.as_deref().unwrap();
        assert!(msg.starts_with("not sent: turn "), "{msg}");
    }
    // The failed records are exactly the requests the server faulted.
    let mut failed_keys: Vec<_> = sent
        .iter()
        .filter(|r| !r.is_success())
        .map(|r| key(r))
        .collect();
    let mut faulted_keys: Vec<_> = failing
        .iter()
        .map(|f| (f.conversation.clone(), f.turns as usize))
        .collect();
    failed_keys.sort();
    faulted_keys.sort();
    assert_eq!(failed_keys, faulted_keys);
    // Every error is typed and explained.
    for r in run.records.iter().filter(|r| !r.is_success()) {
        let msg = r.error_message.as_deref().unwrap_or("");
        assert!(msg.len() > 10, "useless message {msg:?} for {r:?}");
    }
    // Every success equals the server's log of that request, byte for byte.
    let mut log: HashMap<(String, usize), _> = HashMap::new();
    for t in &run.truth.requests_log {
        log.insert((t.conversation.clone(), t.turns as usize), t);
    }
    let spec_faulted: Vec<(String, usize)> = run
        .truth
        .faults
        .iter()
        .filter(|f| !f.kind.fails_request())
        .map(|f| (f.conversation.clone(), f.turns as usize))
        .collect();
    for r in run.records.iter().filter(|r| r.is_success()) {
        let k = key(r);
        let t = log
            .get(&k)
            .unwrap_or_else(|| panic!("no log entry for {k:?}"));
        assert_eq!(r.completion_tokens, Some(u64::from(t.completion_tokens)));
        assert_eq!(r.prompt_tokens, Some(u64::from(t.prompt_tokens)));
        if spec_faulted.contains(&k) {
            assert!(r.spec.is_none(), "corrupt stats recorded as numbers: {r:?}");
        } else {
            let s = r.spec.as_ref().expect("spec stats");
            assert_eq!(
                (s.accepted_draft_tokens, s.proposed_draft_tokens),
                (t.accepted, t.proposed)
            );
        }
    }
    // The summary says how many failed, and statistics exclude them.
    let failed = sent.iter().filter(|r| !r.is_success()).count();
    if failed > 0 {
        let line = format!("Errors: {failed} of {} ", sent.len());
        assert!(
            run.stdout.contains(&line),
            "{line:?} not in\n{}",
            run.stdout
        );
        assert!(run.stdout.contains("statistics exclude them"));
    } else {
        assert!(!run.stdout.contains("Errors:"), "{}", run.stdout);
    }
    let skipped_count = run.records.len() - sent.len();
    if skipped_count > 0 {
        let line = format!("Skipped: {skipped_count} turn");
        assert!(
            run.stdout.contains(&line),
            "{line:?} not in\n{}",
            run.stdout
        );
    }
    sent.into_iter()
        .filter(|r| !r.is_success())
        .cloned()
        .collect()
}

fn kinds(records: &[RequestRecord]) -> Vec<ErrorKind> {
    let mut k: Vec<_> = records.iter().filter_map(|r| r.error_kind).collect();
    k.dedup();
    k
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_fault_streaming() {
    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    let cases: Vec<(FaultKind, Option<ErrorKind>, &str)> = vec![
        (
            FaultKind::ResetMidStream { after_chunks: 2 },
            Some(ErrorKind::Connection),
            "",
        ),
        (
            FaultKind::HttpStatus(429),
            Some(ErrorKind::HttpStatus),
            "HTTP 429",
        ),
        (
            FaultKind::HttpStatus(500),
            Some(ErrorKind::HttpStatus),
            "HTTP 500",
        ),
        (
            FaultKind::HttpStatus(503),
            Some(ErrorKind::HttpStatus),
            "overloaded",
        ),
        (
            FaultKind::MalformedJson,
            Some(ErrorKind::Protocol),
            "not JSON",
        ),
        (FaultKind::NonUtf8, Some(ErrorKind::Protocol), "UTF-8"),
        (FaultKind::Stall, Some(ErrorKind::Timeout), "within"),
        (FaultKind::SpecFieldsMissing, None, ""),
        (FaultKind::SpecFieldsWrongType, None, ""),
    ];
    for (kind, expected, needle) in cases {
        eprintln!("== {}", kind.name());
        let run = run_with_faults(
            vec![FaultPlan::every_nth(kind, 6)],
            SpecFlavor::Vllm,
            true,
            &[],
        )
        .await;
        assert!(!run.truth.faults.is_empty(), "{kind:?} never injected");
        let failed = check_run(&run, &dataset, dataset.conversations.len());
        match expected {
            Some(e) => {
                assert_eq!(failed.len(), run.truth.faults.len(), "{kind:?}");
                assert_eq!(kinds(&failed), vec![e], "{kind:?}: {failed:?}");
                for r in &failed {
                    let msg = r.error_message.as_deref().unwrap();
                    assert!(msg.contains(needle), "{kind:?}: {msg}");
                }
            }
            None => {
                assert!(failed.is_empty(), "{kind:?}: {failed:?}");
                assert!(
                    run.stderr.contains("recording no spec-decode stats"),
                    "{kind:?}: no warning in\n{}",
                    run.stderr
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_faults_non_streaming_llamacpp() {
    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    // Hashed selection: the same prompts fault whatever the arrival order.
    let faults = vec![
        FaultPlan::probability(FaultKind::ResetMidStream { after_chunks: 1 }, 0.08),
        FaultPlan::probability(FaultKind::HttpStatus(503), 0.08),
        FaultPlan::probability(FaultKind::MalformedJson, 0.08),
        FaultPlan::probability(FaultKind::NonUtf8, 0.08),
        FaultPlan::probability(FaultKind::SpecFieldsMissing, 0.1),
        FaultPlan::probability(FaultKind::SpecFieldsWrongType, 0.1),
    ];
    let run = run_with_faults(
        faults,
        SpecFlavor::LlamaCpp,
        false,
        &["--num-conversations", "60"],
    )
    .await;
    let failed = check_run(&run, &dataset, 60);
    assert!(!failed.is_empty());
    let mut seen = kinds(&failed);
    seen.sort_by_key(|k| k.as_str());
    seen.dedup();
    assert_eq!(
        seen,
        vec![
            ErrorKind::Connection,
            ErrorKind::HttpStatus,
            ErrorKind::Protocol
        ]
    );
    assert!(
        run.truth.faults.iter().any(|f| !f.kind.fails_request()),
        "some spec-field faults were drawn"
    );
}

/// Finds every `{"total": …, "resets": …}` object under `v`.
fn counter_stats(v: &serde_json::Value, out: &mut Vec<(f64, u64)>) {
    match v {
        serde_json::Value::Object(m) => {
            if let (Some(t), Some(r)) = (
                m.get("total").and_then(|t| t.as_f64()),
                m.get("resets").and_then(|r| r.as_u64()),
            ) {
                out.push((t, r));
            }
            m.values().for_each(|x| counter_stats(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| counter_stats(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counter_reset_between_scrapes_loses_nothing() {
    // Scrapes come every 333 ms; every 6th shows counters restarted just
    // after the previous scrape, i.e. only the last interval's increase.
    // The load lasts over a second (several scrapes), then the scrapes that
    // wait for the counters to settle, so a reset shows one interval's
    // increase (or none) after several intervals' worth: a clear drop, which
    // the export must count without losing any.
    // (A reset right after a scrape that had seen little is invisible to any
    // counter reader, Prometheus included; this layout avoids it.)
    let config = SimConfig::speed_bench_demo()
        .with_faults(vec![FaultPlan::every_nth(FaultKind::CounterReset, 6)])
        .with_ttft_ms(4.0)
        .with_step_ms(1.0)
        .with_output_tokens(8, 24);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let fixture = fixture();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--input-file",
        fixture.to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "2",
        "--request-count",
        "400",
        "--server-metrics-shutdown-delay",
        "1",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let truth = server.ground_truth();
    server.shutdown().await;
    assert!(
        !truth.counter_resets.is_empty(),
        "{} scrapes, none reset",
        truth.scrapes
    );
    let export: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("server_metrics_export.json")).unwrap())
            .unwrap();
    let drafts = export["metrics"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(k, _)| k.starts_with("vllm:spec_decode_num_drafts") && !k.contains("created"))
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no drafts counter in {export}"));
    let mut stats = Vec::new();
    counter_stats(drafts, &mut stats);
    let (total, resets) = stats[0];
    assert!(resets >= 1, "the export saw no reset: {drafts}");
    assert_eq!(
        total, truth.steps as f64,
        "{drafts}\nscrapes {}, resets at {:?}",
        truth.scrapes, truth.counter_resets
    );
}
