//! End-to-end `--http-client lean|hyper`: the same run through either
//! client records the same requests, tokens and acceptance (each equal to
//! the simulator's own log), streaming and not, with keep-alive reuse; the
//! choice is recorded with the run's options.

use crate::common;

use common::*;
use speedbench_record::RequestRecord;
use speedbench_sim::SimConfig;

/// Runs the fixture through `client`; the records, and the simulator's
/// connection count.
async fn profile(client: &str, streaming: bool) -> (Vec<RequestRecord>, u64, serde_json::Value) {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(4, 24)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        &server.url(),
        "-m",
        "speedbench-sim",
        "--input-file",
        fixture.to_str().unwrap(),
        "--concurrency",
        "4",
        "--http-client",
        client,
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ]
    .into_iter()
    .map(str::to_string)
    .collect::<Vec<_>>();
    if streaming {
        args.push("--streaming".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args).await;
    assert!(out.status.success(), "{client}: {out:?}");
    let truth = server.ground_truth();
    let connections: u64 = server.connections_by_peer().values().sum();
    server.shutdown().await;
    let file = read_run(&out_dir).unwrap();
    let dataset = speedbench_dataset::Dataset::from_jsonl_file(fixture).unwrap();
    assert_matches_truth(&dataset, &file.records, &truth);
    assert_eq!(truth.requests, file.records.len() as u64, "{client}");
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
    (file.records, connections, run_json)
}

/// What a record says about the work, not about its timing.
fn work(r: &RequestRecord) -> (String, u32, Option<u64>, Option<u64>, String) {
    (
        r.conversation_id.clone(),
        r.turn_index,
        r.completion_tokens,
        r.spec.as_ref().map(|s| s.accepted_draft_tokens),
        r.output_text.clone(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_clients_record_the_same_work_streaming_and_not() {
    for streaming in [true, false] {
        let (lean, lean_conns, lean_json) = profile("lean", streaming).await;
        let (hyper, hyper_conns, _) = profile("hyper", streaming).await;
        // Every turn of every fixture row once, the same work either way.
        assert!(lean.len() > 40, "{}", lean.len());
        assert!(lean.iter().all(|r| r.is_success()), "{lean:?}");
        let mut a: Vec<_> = lean.iter().map(work).collect();
        let mut b: Vec<_> = hyper.iter().map(work).collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "streaming={streaming}");
        if streaming {
            assert!(lean.iter().all(|r| r.ttft_ns.is_some()));
        }
        // The engine probes go out at once, a connection each, before the
        // run: not the run's clients'.
        let probes = speedbench_client::PROBE_PATHS.len() as u64;
        let (lean_conns, hyper_conns) = (
            lean_conns.saturating_sub(probes),
            hyper_conns.saturating_sub(probes),
        );
        // Connections are kept alive and reused: 4 in flight, 40+ requests.
        assert!(lean_conns <= 8, "lean opened {lean_conns} connections");
        // hyper's pool takes a connection back only after the response is
        // read to its end, so a busy machine sees it open one for a request
        // that raced the return (9 once, with every test binary running):
        // reuse is at least three requests per connection.
        let requests = hyper.len() as u64;
        assert!(
            hyper_conns * 3 <= requests,
            "hyper opened {hyper_conns} connections for {requests} requests"
        );
        assert_eq!(
            lean_json["config"]["client"]["http_client"], "lean",
            "{lean_json}"
        );
    }
}
