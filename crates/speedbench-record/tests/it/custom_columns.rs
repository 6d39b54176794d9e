//! Caller-defined columns: written, read back, projected, rewritten, salvaged,
//! and refused when undeclared or of the wrong kind.

use std::collections::BTreeMap;

use speedbench_record::{
    CustomColumn, CustomKind, CustomValue, RecordError, RecordWriter, RequestRecord, RunManifest,
    columns, read_records_file, read_records_file_with,
};

fn declared() -> Vec<CustomColumn> {
    vec![
        CustomColumn::new("x_power_w", CustomKind::Float64).unwrap(),
        CustomColumn::new("x_replica", CustomKind::Utf8).unwrap(),
        CustomColumn::new("x_queue", CustomKind::Int64).unwrap(),
        CustomColumn::new("x_cached", CustomKind::Boolean).unwrap(),
    ]
}

fn record(i: u64) -> RequestRecord {
    let mut custom = BTreeMap::new();
    custom.insert(
        "x_power_w".to_string(),
        CustomValue::Float64(i as f64 * 0.5),
    );
    if i.is_multiple_of(2) {
        // Odd rows leave these out: nulls in the file, absent when read.
        custom.insert("x_replica".to_string(), CustomValue::Utf8(format!("r{i}")));
        custom.insert("x_queue".to_string(), CustomValue::Int64(-(i as i64)));
    }
    custom.insert(
        "x_cached".to_string(),
        CustomValue::Boolean(i.is_multiple_of(3)),
    );
    RequestRecord {
        run_id: "r".into(),
        request_index: i,
        custom,
        ..Default::default()
    }
}

fn write(path: &std::path::Path, columns: &[CustomColumn], records: &[RequestRecord]) {
    let mut w = RecordWriter::create_with_columns(path, columns).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close(&RunManifest::default()).unwrap();
}

#[test]
fn custom_values_survive_write_read_and_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let records: Vec<_> = (0..5).map(record).collect();
    write(&path, &declared(), &records);

    let file = read_records_file(&path).unwrap();
    assert_eq!(file.records, records);
    assert_eq!(file.custom_columns, declared());

    // A rewrite declares what the file held and gives the same file back.
    let again = dir.path().join("again.parquet");
    write(&again, &file.custom_columns, &file.records);
    assert_eq!(read_records_file(&again).unwrap(), file);

    // A projected read decodes only the custom columns it names.
    let narrow = read_records_file_with(&path, Some(&[columns::REQUEST_INDEX, "x_queue"])).unwrap();
    assert_eq!(narrow.custom_columns, vec![declared()[2].clone()]);
    let queue: Vec<_> = narrow
        .records
        .iter()
        .map(|r| r.custom.get("x_queue").cloned())
        .collect();
    assert_eq!(
        queue,
        [
            Some(CustomValue::Int64(0)),
            None,
            Some(CustomValue::Int64(-2)),
            None,
            Some(CustomValue::Int64(-4))
        ]
    );
}

#[test]
fn a_file_without_custom_columns_reads_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let plain = RequestRecord {
        run_id: "r".into(),
        ..Default::default()
    };
    write(&path, &[], std::slice::from_ref(&plain));
    let file = read_records_file(&path).unwrap();
    assert!(file.custom_columns.is_empty());
    assert!(file.records[0].custom.is_empty());
}

#[test]
fn undeclared_or_mistyped_values_are_refused_naming_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let mut w = RecordWriter::create_with_columns(&path, &declared()).unwrap();
    w.append(&record(0)).unwrap();
    let mut bad = record(1);
    bad.custom
        .insert("x_queue".into(), CustomValue::Utf8("seven".into()));
    let err = w.append(&bad).unwrap_err();
    assert!(
        matches!(err, RecordError::InvalidValue { row: 1, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("records.parquet")
            && text.contains("`x_queue`")
            && text.contains("a utf8 value in a int64 column"),
        "{text}"
    );
    let mut unknown = record(1);
    unknown
        .custom
        .insert("x_typo".into(), CustomValue::Int64(1));
    let text = w.append(&unknown).unwrap_err().to_string();
    assert!(
        text.contains("`x_typo`")
            && text.contains("not declared")
            && text.contains("x_power_w, x_replica"),
        "{text}"
    );
    // Refused records are not buffered: the file holds the good one only.
    w.append(&record(2)).unwrap();
    w.close(&RunManifest::default()).unwrap();
    let file = read_records_file(&path).unwrap();
    assert_eq!(file.records, vec![record(0), record(2)]);

    // A writer without custom columns names none.
    let mut plain = RecordWriter::create(dir.path().join("plain.parquet")).unwrap();
    let text = plain.append(&record(0)).unwrap_err().to_string();
    assert!(text.contains("custom columns: none"), "{text}");

    let twice = [declared()[0].clone(), declared()[0].clone()];
    let err = RecordWriter::create_with_columns(dir.path().join("t.parquet"), &twice)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("\"x_power_w\"") && err.contains("declared twice"),
        "{err}"
    );
}

#[test]
fn a_salvaged_file_keeps_its_custom_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let mut w = RecordWriter::create_with_columns(&path, &declared()).unwrap();
    for i in 0..3 {
        w.append(&record(i)).unwrap();
    }
    w.flush().unwrap();
    // A write error after one row group: the file is closed with it.
    let error = RecordError::Metadata {
        path: path.clone(),
        message: "disk full (simulated)".into(),
    };
    let closed = w.close_after_error(&RunManifest::default(), error);
    assert_eq!(closed.rows, 3);
    let file = read_records_file(&path).unwrap();
    assert_eq!(file.records, (0..3).map(record).collect::<Vec<_>>());
    assert_eq!(file.custom_columns, declared());
}
