//! End-to-end: input files as editors save them (a UTF-8 byte-order mark,
//! CRLF line ends) run, and a category filter naming a category the file
//! lacks is refused before anything is sent (as speed_bench.py refuses it),
//! names trimmed.

use crate::common;

use common::*;
use speedbench_record::read_records;
use speedbench_sim::SimConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bom_file_runs_and_unknown_categories_are_refused() {
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
    let profile = |categories: &'static str| {
        vec![
            "profile".to_string(),
            "--url".into(),
            server.url(),
            "--input-file".into(),
            input.to_str().unwrap().into(),
            "--category".into(),
            categories.into(),
            "--output-artifact-dir".into(),
            out_dir.to_str().unwrap().into(),
        ]
    };
    let refused = run(&profile("math,maths,writing")
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>())
    .await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "no rows in categories \"maths\", \"writing\"; available categories: coding, math"
        ),
        "{stderr}"
    );
    assert_eq!(server.ground_truth().requests, 0, "nothing was sent");
    // Names are trimmed: `math, ` is the math category.
    let out = run(&profile("math, ")
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>())
    .await;
    server.shutdown().await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let records = read_records(out_dir.join("records.parquet")).unwrap();
    let mut ids: Vec<&str> = records.iter().map(|r| r.conversation_id.as_str()).collect();
    ids.sort();
    // The first row (behind the BOM) keeps its id; only math rows ran.
    assert_eq!(ids, ["m1", "m2"]);
    assert!(records.iter().all(|r| r.is_success()));
}
