//! End-to-end: bad input files make the binary exit non-zero with an error
//! that names the file (and the row or line, when one is at fault).

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use speedbench_record::{ErrorKind, RecordWriter, RequestRecord, RunManifest, SpecDecodeStats};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_fails_naming(out: &Output, needles: &[&str]) {
    assert!(!out.status.success(), "expected a failure");
    assert_eq!(out.status.code(), Some(1), "a plain failure, not a crash");
    let err = stderr(out);
    for n in needles {
        assert!(err.contains(n), "{n:?} not in stderr:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

fn record(i: u64, error: Option<ErrorKind>) -> RequestRecord {
    RequestRecord {
        run_id: "r".into(),
        request_index: i,
        conversation_id: format!("c{i}"),
        dataset: "d".into(),
        category: Some("coding".into()),
        model: "m".into(),
        start_unix_ns: 1_000,
        end_unix_ns: 2_000,
        ttft_ns: Some(100),
        e2e_latency_ns: 1_000,
        completion_tokens: Some(10),
        output_chunks: 3,
        error_kind: error,
        error_message: error.map(|_| "took too long".into()),
        output_text: "hello".into(),
        spec: Some(SpecDecodeStats {
            accepted_draft_tokens: 4,
            proposed_draft_tokens: 8,
            verify_steps: Some(6),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A run directory with a valid records file of `records`.
fn run_dir(parent: &Path, name: &str, records: &[RequestRecord]) -> std::path::PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let mut w = RecordWriter::create(dir.join("records.parquet")).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close(&RunManifest::default()).unwrap();
    dir
}

async fn report(dir: &Path, tmp: &Path) -> Output {
    let csv = tmp.join("out.csv");
    run(&[
        "report",
        dir.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ])
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_on_broken_records_files_fails_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let records: Vec<_> = (0..4).map(|i| record(i, None)).collect();
    let good = run_dir(tmp.path(), "good", &records);
    let bytes = std::fs::read(good.join("records.parquet")).unwrap();
    let out = report(&good, tmp.path()).await;
    assert!(out.status.success(), "the intact file reports fine");

    let variants: [(&str, Vec<u8>); 4] = [
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("empty", Vec::new()),
        ("garbage", b"this is not parquet at all\n".repeat(40)),
        ("no_footer", bytes[..bytes.len() - 8].to_vec()),
    ];
    for (name, content) in variants {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("records.parquet"), content).unwrap();
        let out = report(&dir, tmp.path()).await;
        let file = dir.join("records.parquet");
        assert_fails_naming(&out, &[file.to_str().unwrap()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_broken_run_is_named_and_its_siblings_are_still_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let parent = tmp.path().join("sweep");
    let records: Vec<_> = (0..4).map(|i| record(i, None)).collect();
    run_dir(&parent, "a-good", &records);
    run_dir(&parent, "c-good", &records);
    let broken = parent.join("b-broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("records.parquet"), b"not parquet").unwrap();
    let out = run(&["report", parent.to_str().unwrap(), "--format", "json"]).await;
    // The table of the two good runs is printed; the broken one is named
    // in the error and the exit code says the report is not whole.
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", stderr(&out));
    });
    assert_eq!(json["rows"].as_array().unwrap().len(), 2, "{json}");
    let broken_file = broken.join("records.parquet");
    assert_fails_naming(
        &out,
        &[
            broken_file.to_str().unwrap(),
            "the report goes on without it",
            &format!(
                "1 of 3 runs could not be read and are not in it: {}",
                broken.display()
            ),
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_on_a_bad_value_names_the_row_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    // Row 2 holds an error kind; rename it on disk to one no version wrote.
    // Same length, so the file stays structurally valid Parquet.
    let records = vec![
        record(0, None),
        record(1, None),
        record(2, Some(ErrorKind::Timeout)),
    ];
    let dir = run_dir(tmp.path(), "bad_value", &records);
    let path = dir.join("records.parquet");
    let mut bytes = std::fs::read(&path).unwrap();
    let mut patched = 0;
    let mut i = 0;
    while i + 7 <= bytes.len() {
        if &bytes[i..i + 7] == b"timeout" {
            bytes[i..i + 7].copy_from_slice(b"gremlin");
            patched += 1;
        }
        i += 1;
    }
    assert!(patched > 0, "the kind is stored as plain text");
    std::fs::write(&path, bytes).unwrap();
    let out = report(&dir, tmp.path()).await;
    assert_fails_naming(
        &out,
        &[path.to_str().unwrap(), "row 2", "`error_kind`", "gremlin"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_on_directories_without_runs_fails_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty_run");
    std::fs::create_dir_all(&empty).unwrap();
    let out = report(&empty, tmp.path()).await;
    assert_fails_naming(&out, &[empty.to_str().unwrap()]);

    let missing = tmp.path().join("does_not_exist");
    let out = report(&missing, tmp.path()).await;
    assert_fails_naming(&out, &[missing.to_str().unwrap()]);
}

/// `profile --input-file` on `content` (no server is contacted: the file
/// is rejected first).
async fn profile_on(name: &str, content: &[u8]) -> (Output, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(name);
    std::fs::write(&path, content).unwrap();
    let out = run(&[
        "profile",
        "--url",
        "127.0.0.1:9",
        "-m",
        "m",
        "--input-file",
        path.to_str().unwrap(),
        "--output-artifact-dir",
        tmp.path().join("out").to_str().unwrap(),
    ])
    .await;
    assert!(
        !tmp.path().join("out").join("records.parquet").exists(),
        "no run started"
    );
    (out, path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_rejects_bad_jsonl_naming_file_and_line() {
    let good = r#"{"question_id":"a","category":"coding","turns":["hi"]}"#;
    // Another good row (ids must be unique).
    let good2 = r#"{"question_id":"a2","category":"coding","turns":["hello"]}"#;
    let placeholder = format!(
        r#"{{"question_id":"p","category":"qa","turns":["{}"]}}"#,
        speedbench_dataset::PLACEHOLDER
    );
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "wrong_type.jsonl",
            format!(
                "{good}\n{good2}\n{}\n",
                r#"{"question_id":"b","turns":"hi"}"#
            ),
            vec!["wrong_type.jsonl", ":3:"],
        ),
        (
            "no_turns.jsonl",
            format!("{good}\n{}\n", r#"{"question_id":"b","category":"qa"}"#),
            vec!["no_turns.jsonl", ":2:", "turns"],
        ),
        (
            "not_json.jsonl",
            format!("{good}\n{{\"question_id\": \n"),
            vec!["not_json.jsonl", ":2:"],
        ),
        (
            "placeholder.jsonl",
            format!("{good}\n{good2}\n{placeholder}\n"),
            vec!["placeholder.jsonl", "line 3", "placeholder"],
        ),
        ("empty.jsonl", String::new(), vec!["empty.jsonl"]),
        (
            "repeated_id.jsonl",
            format!(
                "{good}\n{}\n{}\n",
                r#"{"question_id":"b","category":"qa","turns":["x"]}"#,
                r#"{"question_id":"a","category":"qa","turns":["another prompt"]}"#
            ),
            vec!["repeated_id.jsonl:3:", "`question_id` \"a\" repeats line 1"],
        ),
    ];
    for (name, content, needles) in cases {
        let (out, _) = profile_on(name, content.as_bytes()).await;
        assert_fails_naming(&out, &needles);
    }
    // Bytes that are not UTF-8, and a file that is not there.
    let mut bytes = format!("{good}\n").into_bytes();
    bytes.extend_from_slice(b"{\"question_id\":\"\xff\xfe\",\"turns\":[\"x\"]}\n");
    let (out, _) = profile_on("binary.jsonl", &bytes).await;
    assert_fails_naming(&out, &["binary.jsonl:2:", "not UTF-8"]);
    // UTF-16 (Windows' "Unicode") is named as such.
    let mut utf16 = vec![0xFF, 0xFE];
    utf16.extend(good.encode_utf16().flat_map(u16::to_le_bytes));
    let (out, _) = profile_on("utf16.jsonl", &utf16).await;
    assert_fails_naming(&out, &["utf16.jsonl:1:", "UTF-16"]);
    let out = run(&[
        "profile",
        "--url",
        "127.0.0.1:9",
        "-m",
        "m",
        "--input-file",
        "/nonexistent/rows.jsonl",
    ])
    .await;
    assert_fails_naming(&out, &["/nonexistent/rows.jsonl"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_public_dataset_names_suggest_the_closest() {
    let tmp = tempfile::tempdir().unwrap();
    for (typo, suggestion) in [
        ("speed_bench_qualitativ", "speed_bench_qualitative"),
        ("specbench", "spec_bench"),
    ] {
        let out = bin()
            .args([
                "profile",
                "--url",
                "127.0.0.1:9",
                "-m",
                "m",
                "--public-dataset",
                typo,
                "--dataset-cache",
                tmp.path().to_str().unwrap(),
                "--output-artifact-dir",
                tmp.path().join("out").to_str().unwrap(),
            ])
            // Never the network: the name is rejected before any Hub request.
            .env("HF_ENDPOINT", "http://127.0.0.1:9")
            .env("HF_HUB_OFFLINE", "1")
            .output()
            .await
            .unwrap();
        assert_fails_naming(
            &out,
            &[
                typo,
                &format!("did you mean {suggestion:?}"),
                "speedbench datasets",
            ],
        );
    }
}
