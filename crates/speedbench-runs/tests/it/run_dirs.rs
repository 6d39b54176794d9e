//! Loading run directories of both tools from disk.

use std::path::{Path, PathBuf};

use speedbench_record::{ErrorKind, RecordWriter, RequestRecord, RunManifest};
use speedbench_runs::{
    AIPERF_PROFILE_FILE_NAME, RecordsRead, RunFormat, RunStatus, RunsError, find_run_dirs,
    load_run, load_run_with,
};

fn peer_run3() -> PathBuf {
    // Real AIPerf 0.13.0 artifacts from a loopback run (fixtures/aiperf).
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/run3-speed_bench_coding")
}

#[test]
fn an_aiperf_directory_loads_as_records_summary_and_export() {
    let run = load_run(&peer_run3()).unwrap();
    assert_eq!(run.format, RunFormat::Aiperf);
    assert_eq!(
        (run.label.as_str(), run.model.as_str()),
        ("stub-model", "stub-model")
    );
    assert_eq!(run.dataset, "speed_bench_coding");
    assert!(run.speed_bench);
    assert_eq!(run.status, RunStatus::Completed);
    assert!(run.manifest.is_none());
    // One warmup and two profiling lines.
    let records = run.records.as_ref().unwrap();
    assert_eq!(records.len(), 3);
    assert_eq!(records.iter().filter(|r| r.warmup).count(), 1);
    let counts = run.counts().unwrap();
    assert_eq!((counts.succeeded, counts.failed, counts.warmup), (2, 0, 1));
    assert!(run.summary.unwrap().accept_length.is_some());
    assert!(run.server.is_some());
}

fn write_run(dir: &Path, outcome: &str, records: &[RequestRecord]) {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = RunManifest {
        model: "m".into(),
        dataset: "speed_bench_qualitative".into(),
        status: outcome.parse().expect("a run status"),
        ..Default::default()
    };
    let mut w = RecordWriter::create(dir.join("records.parquet")).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close(&manifest).unwrap();
}

#[test]
fn a_speedbench_directory_keeps_its_manifest_status_and_counts() {
    let parent = tempfile::tempdir().unwrap();
    let ok = RequestRecord {
        model: "m".into(),
        category: Some("coding".into()),
        output_text: "hello".into(),
        ..Default::default()
    };
    let failed = RequestRecord {
        error_kind: Some(ErrorKind::Timeout),
        category: Some("math".into()),
        ..ok.clone()
    };
    let skipped = RequestRecord {
        error_kind: Some(ErrorKind::Skipped),
        ..ok.clone()
    };
    write_run(
        &parent.path().join("a"),
        "interrupted",
        &[ok.clone(), failed, skipped],
    );
    write_run(&parent.path().join("b"), "completed", &[ok]);
    // A directory that is not a run is passed over among a parent's children.
    std::fs::create_dir(parent.path().join("notes")).unwrap();

    let dirs = find_run_dirs(&[parent.path().to_path_buf()]).unwrap();
    assert_eq!(dirs, vec![parent.path().join("a"), parent.path().join("b")]);
    let a = load_run(&dirs[0]).unwrap();
    assert_eq!(a.format, RunFormat::Speedbench);
    assert_eq!(a.status, RunStatus::Interrupted);
    assert!(a.status_reason.as_deref().unwrap().contains("interrupted"));
    assert_eq!(
        a.manifest.as_ref().unwrap().dataset,
        "speed_bench_qualitative"
    );
    let c = a.counts().unwrap();
    assert_eq!((c.succeeded, c.failed, c.skipped), (1, 1, 1));
    assert_eq!(a.category_count(), 2);
    assert_eq!(load_run(&dirs[1]).unwrap().status, RunStatus::Completed);

    // Only the named columns are decoded; the others keep their defaults.
    let narrow = load_run_with(
        &dirs[0],
        RecordsRead::Columns(&[speedbench_record::columns::CATEGORY]),
    )
    .unwrap();
    let records = narrow.records.unwrap();
    assert_eq!(records[0].category.as_deref(), Some("coding"));
    assert_eq!(records[0].output_text, "");

    // Only the digest: no record kept, the same counts and categories as
    // the records give, the model and status as before.
    let columns = &speedbench_metrics::RecordsDigest::COLUMNS;
    let digested = load_run_with(&dirs[0], RecordsRead::Digest(columns)).unwrap();
    assert!(digested.records.is_none() && digested.has_records());
    assert_eq!(digested.counts(), a.counts());
    assert_eq!(digested.category_count(), 2);
    assert_eq!(
        (digested.model.as_str(), digested.status),
        (a.model.as_str(), a.status)
    );
    assert_eq!(
        digested.digest,
        Some(speedbench_metrics::RecordsDigest::of(
            a.records.as_ref().unwrap()
        ))
    );
}

#[test]
fn a_records_file_never_closed_is_shown_unfinished() {
    let dir = tempfile::tempdir().unwrap();
    // A process killed mid-write leaves a .partial without a footer.
    std::fs::write(
        dir.path().join("records.parquet.partial"),
        b"PAR1 no footer",
    )
    .unwrap();
    let run = load_run(dir.path()).unwrap();
    assert_eq!(run.status, RunStatus::Unfinished);
    assert!(run.records.is_none());
    assert!(
        run.warnings[0].contains("no readable records"),
        "{:?}",
        run.warnings
    );
}

#[test]
fn paths_that_are_not_runs_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let err = load_run(&missing).unwrap_err();
    assert!(matches!(err, RunsError::Missing(_)), "{err:?}");
    assert!(err.to_string().contains("nope: no such directory"), "{err}");
    let err = find_run_dirs(&[missing]).unwrap_err().to_string();
    assert!(err.contains("no such directory"), "{err}");
    let err = load_run(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("not a run directory") && err.contains(AIPERF_PROFILE_FILE_NAME),
        "{err}"
    );
    // A BOM before run.json's JSON is read like Windows editors write it.
    write_run(
        &dir.path().join("r"),
        "completed",
        &[RequestRecord::default()],
    );
    let manifest = RunManifest {
        model: "from-run-json".into(),
        status: speedbench_record::RunStatus::Completed,
        ..Default::default()
    };
    let json = serde_json::to_string(&manifest).unwrap();
    std::fs::write(dir.path().join("r/run.json"), format!("\u{feff}{json}")).unwrap();
    assert_eq!(
        load_run(&dir.path().join("r")).unwrap().model,
        "from-run-json"
    );
}

#[test]
fn malformed_artifacts_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("profile_export_aiperf.json"), "not json {").unwrap();
    let err = load_run(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("profile_export_aiperf.json:1: not valid JSON"),
        "{err}"
    );
    let empty = tempfile::tempdir().unwrap();
    let err = find_run_dirs(&[empty.path().to_path_buf()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no run directories under"), "{err}");
}
