//! End-to-end: `speedbench datasets` and `profile --public-dataset` from an
//! imported pre-staged bundle, with no network (HF_HUB_OFFLINE, dead endpoint).

use crate::common;

use common::*;
use speedbench_sim::{SimConfig, SimServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_names_every_dataset() {
    let out = run(&["datasets"]).await;
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "speed_bench_qualitative",
        "speed_bench_summarization",
        "speed_bench_throughput_32k_high_entropy",
        "spec_al_gsm8k",
        "spec_al_mtbench",
        "spec_bench",
    ] {
        assert!(text.contains(name), "{name}");
    }
    let out = run(&["profile", "--public-dataset", "spec_al_gsm9k"]).await;
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("did you mean \"spec_al_gsm8k\""), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_bundle_profiles_offline() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let rows = std::fs::read_to_string(fixture()).unwrap();
    speedbench_dataset::bundle::stage_rows(
        &bundle,
        "speed_bench_qualitative",
        &rows,
        None,
        None,
        "test",
    )
    .unwrap();
    let cache = dir.path().join("cache");
    let out = run(&[
        "datasets",
        "import",
        bundle.to_str().unwrap(),
        "--dataset-cache",
        cache.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("imported speed_bench_qualitative (33 rows")
    );

    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let run_dir = dir.path().join("run");
    let out = bin()
        .args([
            "profile",
            "--url",
            &server.url(),
            "--public-dataset",
            "speed_bench_coding",
            "--dataset-cache",
            cache.to_str().unwrap(),
            "--osl",
            "32",
            "--output-artifact-dir",
            run_dir.to_str().unwrap(),
        ])
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .await
        .unwrap();
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("checksum verified"), "{stderr}");
    let records = read_run(&run_dir).unwrap().records;
    // Three coding rows, the first two turns long.
    assert_eq!(records.len(), 4);
    assert!(
        records
            .iter()
            .all(|r| r.category.as_deref() == Some("coding"))
    );
    assert!(records.iter().all(|r| r.dataset == "speed_bench_coding"));
}
