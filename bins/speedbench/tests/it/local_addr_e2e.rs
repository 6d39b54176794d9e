//! End-to-end `--local-addr`: the real binary spreads its connections over
//! the source addresses given, as the simulated server sees them, and an
//! address this machine does not have is refused by name before any request.

use crate::common;

use std::net::IpAddr;

use common::*;
use speedbench_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_come_from_every_local_addr_given() {
    let server = sim(SimConfig::speed_bench_demo().with_output_tokens(2, 4)).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let fixture = fixture();
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "-m",
        "speedbench-sim",
        "--streaming",
        "--input-file",
        fixture.to_str().unwrap(),
        "--request-count",
        "32",
        "--concurrency",
        "8",
        "--local-addr",
        "127.0.0.2,127.0.0.3",
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let truth = server.ground_truth();
    let peers = server.connections_by_peer();
    server.shutdown().await;
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 32);
    assert!(records.iter().all(|r| r.is_success()));
    assert_eq!(truth.requests, 32);
    // Every connection the run opened came from one of the two addresses
    // (none from 127.0.0.1, the system's pick towards 127.0.0.1), and both
    // were used: new connections take them in turn.
    let two: [IpAddr; 2] = ["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
    assert_eq!(peers.keys().copied().collect::<Vec<_>>(), two, "{peers:?}");
    let (a, b) = (peers[&two[0]], peers[&two[1]]);
    assert!(a.abs_diff(b) <= 1, "round-robin: {peers:?}");
    // The flag is recorded with the run's options.
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("run.json")).unwrap()).unwrap();
    let text = run_json.to_string();
    assert!(
        text.contains(r#""local_addr":["127.0.0.2","127.0.0.3"]"#),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_this_machine_lacks_is_refused_by_name() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    // 192.0.2.0/24 is reserved for documentation: no machine has it.
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "-m",
        "speedbench-sim",
        "--input-file",
        fixture.to_str().unwrap(),
        "--request-count",
        "4",
        "--local-addr",
        "127.0.0.2",
        "--local-addr",
        "192.0.2.1",
        "--no-server-metrics",
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--local-addr")
            && stderr.contains("source address 192.0.2.1: not usable as a source address"),
        "{stderr}"
    );
    assert_eq!(server.ground_truth().requests, 0, "nothing was sent");
    server.shutdown().await;

    // Not an address at all: clap names the flag and the value.
    let out = run(&["profile", "--local-addr", "127.0.0.300", "-m", "x"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("127.0.0.300") && stderr.contains("--local-addr"),
        "{stderr}"
    );
}
