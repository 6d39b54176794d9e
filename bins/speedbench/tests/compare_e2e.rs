//! End-to-end: a baseline run and a speculative run of the same prompts,
//! then `speedbench compare`.

mod common;

use common::*;
use speedbench_sim::{AcceptanceProfile, SimConfig, SpecFlavor};

async fn profile_against(config: SimConfig, out: &std::path::Path) {
    let server = sim(config).await;
    let status = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--category",
        "math,roleplay",
        "--streaming",
        "--concurrency",
        "2",
        "--extra-inputs",
        "temperature:0",
        "--output-artifact-dir",
        out.to_str().unwrap(),
    ])
    .await
    .status;
    assert!(status.success());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_reports_speedup_and_a_lossless_check() {
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    let demo = SimConfig {
        step_ms: 2.0,
        flavor: SpecFlavor::Both,
        ..SimConfig::speed_bench_demo()
    };
    // The same server with speculation off: every step emits one token.
    let mut baseline = demo.clone();
    baseline.default_spec = AcceptanceProfile::baseline();
    baseline.categories.clear();
    profile_against(baseline, &base).await;
    profile_against(demo, &spec).await;

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
        "--format",
        "json",
        "--bootstrap",
        "200",
    ])
    .await;
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["math", "roleplay", "overall"]);
    let overall = &rows[2];
    // The simulator's text does not depend on speculation, so every paired
    // output is byte-identical: 6 rows of math+roleplay, 2 of them two-turn.
    assert_eq!(overall["paired"], 8);
    assert_eq!(overall["identical"], 8);
    assert_eq!(json["diverging"], 0);
    // Each verify step takes the same 2 ms with or without drafts, and the
    // server's own (llama.cpp-shaped) timings say so, so the speculative run
    // decodes faster, by about the acceptance length.
    for row in rows {
        assert_eq!(row["decode_source"], "server");
        let speedup = row["decode_speedup"].as_f64().unwrap();
        let al = row["accept_length"].as_f64().unwrap();
        assert!(speedup > 1.0 && (speedup / al - 1.0).abs() < 0.25, "{row}");
        let ci = &row["accept_length_ci"];
        assert!(ci["low"].as_f64().unwrap() <= row["accept_length"].as_f64().unwrap());
    }
    // math accepts more than roleplay in the demo profiles.
    assert!(
        rows[0]["accept_length"].as_f64().unwrap() > rows[1]["accept_length"].as_f64().unwrap()
    );

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
    ])
    .await;
    let console = String::from_utf8(out.stdout).unwrap();
    assert!(
        console.contains("Lossless check: 8 of 8 paired outputs are byte-identical"),
        "{console}"
    );
}
