//! End-to-end: `speedbench demo` and `speedbench report` as a new user runs them.

use crate::common;

use common::{read_run, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_then_report_show_every_category() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("demo");
    let out = run(&[
        "demo",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
        "--ttft-ms",
        "1",
        "--step-ms",
        "0",
    ])
    .await;
    assert!(out.status.success());
    // The demo shows a new user the engine found and the preflight's check.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("engine: vllm (GET /v1/models: owned_by \"vllm\")"),
        "{stderr}"
    );
    assert!(
        stderr.contains("preflight: per-request acceptance: vllm: "),
        "{stderr}"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Spec Decode"), "{stdout}");
    assert!(stdout.contains("Acceptance Length Report"), "{stdout}");
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 46);

    let csv = dir.path().join("report.csv");
    let out = run(&[
        "report",
        dir.path().to_str().unwrap(),
        "--format",
        "both",
        "--output",
        csv.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("Acceptance Length Report"), "{stdout}");
    let csv = std::fs::read_to_string(csv).unwrap();
    let header = csv.lines().next().unwrap();
    assert_eq!(
        header,
        "Model,coding,humanities,math,multilingual,qa,rag,reasoning,roleplay,stem,summarization,writing,Overall"
    );
    assert!(csv.lines().nth(1).unwrap().starts_with("speedbench-sim,"));
}

#[tokio::test]
async fn report_on_a_directory_without_runs_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&["report", dir.path().to_str().unwrap()]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("no run directories under"), "{stderr}");
}

#[tokio::test]
async fn a_bad_input_file_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let rows = dir.path().join("rows.jsonl");
    std::fs::write(
        &rows,
        "{\"question_id\":\"a\",\"turns\":[\"x\"]}\n{\"question_id\":\"b\"}\n",
    )
    .unwrap();
    let out = run(&[
        "profile",
        "--url",
        "127.0.0.1:9",
        "--model",
        "m",
        "--input-file",
        rows.to_str().unwrap(),
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("rows.jsonl:2"), "{stderr}");
}

#[tokio::test]
async fn report_reads_aiperf_run_directories_and_names_the_source() {
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("out.csv");
    let out = run(&[
        "report",
        fixtures.to_str().unwrap(),
        "--source",
        "server",
        "--format",
        "csv",
        "--output",
        csv.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("accept_length from server (counters, token-weighted)"),
        "{stderr}"
    );
    // AIPerf's own speed_bench_report.csv has 2.69 for this coding run.
    let expected_cell =
        std::fs::read_to_string(fixtures.join("run3-speed_bench_coding/speed_bench_report.csv"))
            .unwrap();
    assert!(expected_cell.contains("stub-model,2.69,"));
    assert_eq!(
        std::fs::read_to_string(csv).unwrap(),
        "Model,coding,Overall\r\nstub-model,2.69,2.69\r\n"
    );

    let out = run(&["report", fixtures.to_str().unwrap(), "--metric", "nonsense"]).await;
    assert_eq!(out.status.code(), Some(2), "clap rejects an unknown metric");
}
