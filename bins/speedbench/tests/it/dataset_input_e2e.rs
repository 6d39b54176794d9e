//! End-to-end: input files as editors save them (a UTF-8 byte-order mark,
//! CRLF line ends) run, and a category filter naming a category the file
//! lacks says so instead of dropping it silently.

use crate::common;

use common::*;
use speedbench_record::read_records;
use speedbench_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bom_file_runs_and_unknown_categories_are_warned_about() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("notepad.jsonl");
    let rows = [
        r#"{"question_id":"m1","category":"math","turns":["What is 2+2?"]}"#,
        r#"{"question_id":"c1","category":"coding","turns":["Write a sort."]}"#,
        r#"{"question_id":"m2","category":"math","turns":["What is 3+3?"]}"#,
    ];
    // What Windows Notepad saves: a BOM, then CRLF lines.
    std::fs::write(&input, format!("\u{feff}{}\r\n", rows.join("\r\n"))).unwrap();
    let out_dir = tmp.path().join("out");
    let server = sim(SimConfig::speed_bench_demo()).await;
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        input.to_str().unwrap(),
        "--category",
        "math,maths,writing",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "no rows in categories \"maths\", \"writing\" (ignored); available categories: coding, math"
        ),
        "{stderr}"
    );
    let records = read_records(out_dir.join("records.parquet")).unwrap();
    let mut ids: Vec<&str> = records.iter().map(|r| r.conversation_id.as_str()).collect();
    ids.sort();
    // The first row (behind the BOM) keeps its id; only math rows ran.
    assert_eq!(ids, ["m1", "m2"]);
    assert!(records.iter().all(|r| r.is_success()));
}
