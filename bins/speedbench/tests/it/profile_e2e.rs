//! End-to-end: the real binary against the simulated server on loopback.

use crate::common;

use std::time::Duration;

use common::*;
use speedbench_dataset::Dataset;
use speedbench_record::ErrorKind;
use speedbench_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorded_acceptance_and_ttft_match_the_server_ground_truth() {
    let ttft_ms = 40.0;
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(ttft_ms)
        .with_step_ms(1.0);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--input-file",
        fixture().to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "4",
        "--warmup-request-count",
        "3",
        "--osl",
        "200",
        "--extra-inputs",
        "temperature:0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "exit {:?}", out.status);
    let truth = server.ground_truth();
    server.shutdown().await;

    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    let file = read_run(&out_dir).unwrap();
    let manifest = file.manifest.expect("manifest in the footer");
    assert_eq!(manifest.status, "completed");
    assert_eq!(manifest.model, "speedbench-sim");
    let records = file.records;
    // 46 turns profiled plus 3 warmup requests, all successful.
    assert_eq!(records.len(), 49);
    assert_eq!(records.iter().filter(|r| r.warmup).count(), 3);
    assert!(
        records.iter().all(|r| r.is_success()),
        "{:?}",
        records.iter().find(|r| !r.is_success())
    );
    assert_eq!(truth.requests, 49);

    // Every request's numbers equal the server's own log of that request,
    // and the sums equal the server's totals.
    assert_matches_truth(&dataset, &records, &truth);
    let spec = || records.iter().map(|r| r.spec.as_ref().unwrap());
    assert_eq!(
        spec().map(|s| s.accepted_draft_tokens).sum::<u64>(),
        truth.accepted
    );
    assert_eq!(
        spec().map(|s| s.proposed_draft_tokens).sum::<u64>(),
        truth.proposed
    );
    assert_eq!(
        spec().map(|s| s.verify_steps.unwrap()).sum::<u64>(),
        truth.steps
    );

    // TTFT: the server holds the first content for exactly ttft_ms after it
    // receives the request, so no correct measurement can be shorter. The
    // client timestamps frames as they arrive, so the excess is loopback
    // transfer plus scheduling: well under a millisecond on an idle machine.
    // The median bound leaves 10 ms for a loaded 2-core CI box running other
    // tests in parallel; a client that timed after parsing batches, or from
    // the role chunk, would fail the lower or upper bound.
    let injected = Duration::from_secs_f64(ttft_ms / 1000.0).as_nanos() as u64;
    let mut ttfts: Vec<u64> = records.iter().map(|r| r.ttft_ns.unwrap()).collect();
    assert!(
        ttfts.iter().all(|&t| t >= injected),
        "a TTFT below the injected delay: {ttfts:?}"
    );
    ttfts.sort_unstable();
    let median = ttfts[ttfts.len() / 2];
    assert!(
        median < injected + 10_000_000,
        "median TTFT {median} ns vs injected {injected} ns"
    );
    // Against what the server actually did: no request can see its first
    // content before the server handed it to the connection, and the excess
    // (transit both ways plus the client's own overhead) stays small.
    let mut excess = Vec::new();
    for r in records.iter().filter(|r| !r.warmup) {
        let (first, turns) = request_key(&dataset, r);
        // Warmup sent some of these prompts too; the phases run one after
        // the other, so the profiled request is the last one logged.
        let t = truth
            .requests_log
            .iter()
            .rev()
            .find(|t| t.conversation == first && t.turns as usize == turns)
            .unwrap();
        let sent = t.first_content_sent_ns.expect("streamed");
        let ttft = r.ttft_ns.unwrap();
        assert!(
            ttft >= sent,
            "TTFT {ttft} ns before the server sent at {sent} ns"
        );
        excess.push(ttft - sent);
    }
    excess.sort_unstable();
    let median = excess[excess.len() / 2];
    assert!(
        median < 10_000_000,
        "median TTFT excess over the server's send: {median} ns"
    );

    // Multi-turn rows: turns of one conversation ran in order.
    let reasoning: Vec<_> = records
        .iter()
        .filter(|r| r.conversation_id == "reasoning-001" && !r.warmup)
        .collect();
    assert_eq!(
        reasoning.iter().map(|r| r.turn_index).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert!(
        reasoning
            .windows(2)
            .all(|w| w[0].end_unix_ns <= w[1].start_unix_ns)
    );

    // The console summary and the per-category matrix went to stdout.
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Acceptance Length Report"), "{stdout}");
    for category in speedbench_dataset::QUALITATIVE_CATEGORIES {
        assert!(
            stdout.contains(category),
            "{category} missing from\n{stdout}"
        );
    }
    assert!(out_dir.join("run.json").is_file() && out_dir.join("summary.json").is_file());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_yields_error_rows_not_a_crash() {
    let config = SimConfig::speed_bench_demo().with_step_ms(5.0);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let child = spawn_profile(&server, &out_dir);
    wait_for_requests(&server, 4).await;
    let truth = server.ground_truth();
    server.shutdown().await;
    let out = child.wait_with_output().await.unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "a dead server is a result, not a crash: {:?}",
        out.status
    );

    let records = read_run(&out_dir).unwrap().records;
    let ok: Vec<_> = records.iter().filter(|r| r.is_success()).collect();
    let failed: Vec<_> = records.iter().filter(|r| !r.is_success()).collect();
    assert!(
        ok.len() as u64 >= truth.requests,
        "every request the server finished is recorded"
    );
    assert!(!failed.is_empty());
    // Every turn of the fixture has its row: the turns after a failed one
    // of the same conversation as skipped rows.
    assert_eq!(records.len(), 46, "one row per turn");
    for r in failed
        .iter()
        .filter(|r| r.error_kind == Some(ErrorKind::Skipped))
    {
        let earlier_failed = records.iter().any(|e| {
            e.conversation_id == r.conversation_id
                && e.turn_index < r.turn_index
                && !e.is_success()
                && e.error_kind != Some(ErrorKind::Skipped)
        });
        assert!(
            earlier_failed,
            "skipped without a failed turn before: {r:?}"
        );
    }
    for r in &failed {
        let kind = r.error_kind.unwrap();
        assert!(
            matches!(
                kind,
                ErrorKind::Connection | ErrorKind::Protocol | ErrorKind::Skipped
            ),
            "{kind:?}: {:?}",
            r.error_message
        );
        assert!(!r.error_message.as_deref().unwrap_or("").is_empty());
    }
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("failed"),
        "the summary says requests failed:\n{stdout}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_run_leaves_a_readable_file_with_every_finished_request() {
    let config = SimConfig::speed_bench_demo().with_step_ms(10.0);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let child = spawn_profile(&server, &out_dir);
    wait_for_requests(&server, 3).await;
    let pid = child.id().unwrap().to_string();
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().await.unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(130), "interrupted runs exit 130");
    let truth = server.ground_truth();
    server.shutdown().await;

    let file = read_run(&out_dir).expect("readable after Ctrl-C");
    assert_eq!(file.manifest.unwrap().status, "interrupted");
    let dataset = Dataset::from_jsonl_file(fixture()).unwrap();
    let ok: Vec<_> = file
        .records
        .iter()
        .filter(|r| r.is_success())
        .cloned()
        .collect();
    // Every request the server completed reached the file, with its numbers.
    assert_eq!(ok.len() as u64, truth.requests);
    assert_matches_truth(&dataset, &ok, &truth);
    assert!(file.records.len() < 46, "the run stopped early");
    assert!(
        file.records
            .iter()
            .filter(|r| !r.is_success())
            .all(|r| r.error_kind == Some(ErrorKind::Cancelled))
    );
}

/// The cap an open-loop load gets from the open-file limit is said once
/// (the up-front check and the run both computed it, and both said it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_open_loop_cap_is_said_once() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--model",
        "m",
        "--input-file",
        fixture().to_str().unwrap(),
        "--request-rate",
        "1000",
        "--request-count",
        "4",
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("open-loop load without a concurrency cap")
            .count(),
        1,
        "{stderr}"
    );
}

/// Asking for more requests than the rows hold recycles them, and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recycled_rows_are_said() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    std::fs::write(
        &input,
        "{\"question_id\": \"a\", \"turns\": [\"one\", \"two\"]}\n{\"question_id\": \"b\", \"turns\": [\"three\"]}\n",
    )
    .unwrap();
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--request-count",
        "9",
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // A finished run leaves no lock file behind.
    assert!(!dir.path().join("run").join(".speedbench.lock").exists());
    // 9 requests over the 3 turns of the 2 rows: 3 times each.
    assert!(
        stderr.contains(
            "warning: --request-count 9 is more than the 3 requests the selected rows hold: rows \
             are sent again, in order (about 3.0 times each), repeating their prompts"
        ),
        "{stderr}"
    );
}
