//! End-to-end: records files rewritten by the tools users have (polars,
//! pandas/pyarrow) load and report exactly like the file speedbench wrote.
//!
//! The rewritten files are made here with the arrow and parquet crates, the
//! way those tools write them: polars' default zstd compression with
//! `Utf8View` strings and `LargeList`s; a pandas round-trip's `LargeUtf8`
//! strings, dictionary-encoded categoricals, floats for integer columns that
//! hold nulls, `Null`-typed all-null columns, list items named `element`
//! and an extra `__index_level_0__` column; binary string columns; and no
//! speedbench metadata in the footer (the tools drop it).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, TimestampNanosecondType, UInt16Type, UInt64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BinaryViewArray, DictionaryArray, Float64Array, Int64Array,
    LargeBinaryArray, LargeListArray, LargeStringArray, ListArray, NullArray, RecordBatch,
    StringArray, StringViewArray, TimestampMicrosecondArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Schema};
use common::*;
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use speedbench_record::{
    CustomColumn, CustomKind, CustomValue, ErrorKind, RecordWriter, RequestRecord, RunManifest,
    ServerTimings, SpecDecodeStats, SpecSource, read_records_file,
};

const CATEGORIES: [&str; 3] = ["coding", "math", "qa"];

fn records() -> Vec<RequestRecord> {
    (0..12u64)
        .map(|i| {
            let failed = i == 7;
            let start = 1_700_000_000_000_000_000 + i as i64 * 250_000_000;
            RequestRecord {
                run_id: "run-1".into(),
                request_index: i,
                conversation_id: format!("q{i}"),
                turn_index: (i % 2) as u32,
                dataset: "mini".into(),
                category: Some(CATEGORIES[i as usize % 3].into()),
                model: "m".into(),
                warmup: i == 0,
                start_unix_ns: start,
                end_unix_ns: start + 900_000_000 + i as i64 * 1_000,
                // Every third request without TTFT (not streamed): nulls.
                ttft_ns: (i % 3 != 0).then_some(40_000_000 + i * 1_000),
                inter_chunk_latencies_ns: (0..i % 4).map(|j| 5_000 + j).collect(),
                e2e_latency_ns: 900_000_000 + i * 1_000,
                prompt_tokens: Some(30 + i),
                completion_tokens: (!failed).then_some(40 + i),
                output_chunks: i % 4 + 1,
                finish_reason: (!failed).then(|| "stop".into()),
                http_status: failed.then_some(503),
                error_kind: failed.then_some(ErrorKind::HttpStatus),
                error_message: failed.then(|| "Service Unavailable".into()),
                output_text: format!("output é {i}"),
                spec: (!failed).then(|| SpecDecodeStats {
                    source: Some(SpecSource::Vllm),
                    accepted_draft_tokens: 10 + i,
                    proposed_draft_tokens: 30 + 2 * i,
                    verify_steps: Some(20),
                    num_spec_tokens: Some(3),
                    acceptance_histogram: vec![10 - (i % 3), 5, 5 - (i % 2), i % 3 + (i % 2)],
                    per_step_accepted: (i % 2 == 0).then(|| vec![1, 0, 2]),
                    per_step_drafted: (i % 2 == 0).then(|| vec![3, 3, 3]),
                }),
                server_timings: (i % 2 == 1).then(|| ServerTimings {
                    predicted_n: Some(40 + i),
                    predicted_per_second: Some(100.0 + i as f64),
                    ..Default::default()
                }),
                prompt_sha256: (i % 3 != 0).then(|| format!("{i:064x}")),
                spec_dropped: None,
                tokens_per_iteration: None,
                resends: u32::from(i == 5),
                server_index: None,
                http_phases: (i % 4 != 2).then(|| speedbench_record::HttpPhases {
                    blocked_ns: 1_000 + i,
                    connecting_ns: if i == 0 { 80_000 } else { 0 },
                    sending_ns: 3_000 + i,
                    waiting_ns: 2_000_000 + i,
                    receiving_ns: 9_000_000 + i,
                    connection_reused: i != 0,
                    bytes_sent: 400 + i,
                    bytes_received: 5_000 + i,
                    chunks_sent: 1,
                    chunks_received: 20 + i,
                    ..Default::default()
                }),
                // Caller-defined columns, some values left out (nulls).
                custom: [
                    (
                        "x_gpu_power_w",
                        Some(CustomValue::Float64(250.0 + i as f64 / 4.0)),
                    ),
                    (
                        "x_replica",
                        (i % 4 != 1).then(|| CustomValue::Utf8(format!("r{}", i % 3))),
                    ),
                    (
                        "x_shard",
                        (i % 5 != 2).then_some(CustomValue::Int64(i as i64 - 3)),
                    ),
                    ("x_cached", Some(CustomValue::Boolean(i % 2 == 0))),
                ]
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_string(), v?)))
                .collect(),
            }
        })
        .collect()
}

fn custom_columns() -> Vec<CustomColumn> {
    [
        ("x_gpu_power_w", CustomKind::Float64),
        ("x_replica", CustomKind::Utf8),
        ("x_shard", CustomKind::Int64),
        ("x_cached", CustomKind::Boolean),
    ]
    .into_iter()
    .map(|(name, kind)| CustomColumn::new(name, kind).unwrap())
    .collect()
}

fn write_run_json(dir: &Path) {
    let manifest = RunManifest {
        run_id: "run-1".into(),
        model: "m".into(),
        dataset: "mini".into(),
        status: speedbench_record::RunStatus::Completed,
        record_count: 12,
        config: serde_json::json!({"osl": 64, "extra_inputs": {"temperature": 0}}),
        ..Default::default()
    };
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// The run directory speedbench itself would write.
fn original(parent: &Path) -> PathBuf {
    let dir = parent.join("original").join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let mut w =
        RecordWriter::create_with_columns(dir.join("records.parquet"), &custom_columns()).unwrap();
    for r in records() {
        w.append(&r).unwrap();
    }
    w.close(&RunManifest {
        run_id: "run-1".into(),
        model: "m".into(),
        dataset: "mini".into(),
        status: speedbench_record::RunStatus::Completed,
        ..Default::default()
    })
    .unwrap();
    write_run_json(&dir);
    dir
}

fn read_batch(path: &Path) -> RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    assert_eq!(batches.len(), 1);
    batches.into_iter().next().unwrap()
}

/// Rewrites `original`'s records as `flavor` does into `parent/flavor/run`.
fn rewrite(
    original: &Path,
    parent: &Path,
    flavor: &str,
    compression: Compression,
    convert: impl Fn(&Field, &ArrayRef) -> (Field, ArrayRef),
    extra: Option<(Field, ArrayRef)>,
) -> PathBuf {
    let batch = read_batch(&original.join("records.parquet"));
    let (mut fields, mut columns): (Vec<Field>, Vec<ArrayRef>) = batch
        .schema()
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(f, c)| convert(f, c))
        .unzip();
    if let Some((f, c)) = extra {
        fields.push(f);
        columns.push(c);
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    let dir = parent.join(flavor).join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let file = std::fs::File::create(dir.join("records.parquet")).unwrap();
    let props = WriterProperties::builder()
        .set_compression(compression)
        .build();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    write_run_json(&dir);
    dir
}

fn item(list: &ListArray) -> &ArrayRef {
    list.values()
}

fn large_list(f: &Field, c: &ArrayRef) -> (Field, ArrayRef) {
    let list = c.as_list::<i32>();
    let offsets: Vec<i64> = list.value_offsets().iter().map(|&o| o as i64).collect();
    let item_field = Arc::new(Field::new("item", item(list).data_type().clone(), true));
    let array = LargeListArray::try_new(
        item_field.clone(),
        OffsetBuffer::new(offsets.into()),
        item(list).clone(),
        list.nulls().cloned(),
    )
    .unwrap();
    (
        Field::new(f.name(), DataType::LargeList(item_field), true),
        Arc::new(array),
    )
}

/// polars: zstd, `Utf8View`, `LargeList`, microsecond timestamps.
fn polars_like(f: &Field, c: &ArrayRef) -> (Field, ArrayRef) {
    match c.data_type() {
        DataType::Utf8 => (
            Field::new(f.name(), DataType::Utf8View, true),
            Arc::new(StringViewArray::from_iter(c.as_string::<i32>().iter())),
        ),
        DataType::List(_) => large_list(f, c),
        DataType::Timestamp(_, _) => {
            let us: TimestampMicrosecondArray = c
                .as_primitive::<TimestampNanosecondType>()
                .iter()
                .map(|v| v.map(|ns| ns / 1_000))
                .collect();
            let us = us.with_timezone("UTC");
            (
                Field::new(f.name(), us.data_type().clone(), true),
                Arc::new(us),
            )
        }
        _ => (f.clone(), c.clone()),
    }
}

/// A pandas round-trip: `LargeUtf8`, categoricals, floats for integers with
/// nulls, `Null` for all-null columns, list items named `element`.
fn pandas_like(f: &Field, c: &ArrayRef) -> (Field, ArrayRef) {
    let name = f.name();
    if c.null_count() == c.len() {
        return (
            Field::new(name, DataType::Null, true),
            Arc::new(NullArray::new(c.len())),
        );
    }
    match c.data_type() {
        DataType::Utf8 if name == "category" || name == "model" => {
            let dict: DictionaryArray<Int32Type> = c.as_string::<i32>().iter().collect();
            (
                Field::new(name, dict.data_type().clone(), true),
                Arc::new(dict),
            )
        }
        DataType::Utf8 => (
            Field::new(name, DataType::LargeUtf8, true),
            Arc::new(LargeStringArray::from_iter(c.as_string::<i32>().iter())),
        ),
        DataType::UInt64 if c.null_count() > 0 => (
            Field::new(name, DataType::Float64, true),
            Arc::new(Float64Array::from_iter(
                c.as_primitive::<UInt64Type>()
                    .iter()
                    .map(|v| v.map(|x| x as f64)),
            )),
        ),
        DataType::UInt16 => (
            Field::new(name, DataType::Float64, true),
            Arc::new(Float64Array::from_iter(
                c.as_primitive::<UInt16Type>()
                    .iter()
                    .map(|v| v.map(f64::from)),
            )),
        ),
        DataType::List(_) => {
            let list = c.as_list::<i32>();
            let item_field = Arc::new(Field::new("element", item(list).data_type().clone(), false));
            let array = ListArray::try_new(
                item_field.clone(),
                list.offsets().clone(),
                item(list).clone(),
                list.nulls().cloned(),
            )
            .unwrap();
            (
                Field::new(name, DataType::List(item_field), true),
                Arc::new(array),
            )
        }
        _ => (f.clone(), c.clone()),
    }
}

/// Strings stored as binary, of each width.
fn binary_strings(f: &Field, c: &ArrayRef) -> (Field, ArrayRef) {
    if c.data_type() != &DataType::Utf8 {
        return (f.clone(), c.clone());
    }
    let bytes = || c.as_string::<i32>().iter().map(|v| v.map(str::as_bytes));
    let array: ArrayRef = match f.name().len() % 3 {
        0 => Arc::new(BinaryArray::from_iter(bytes())),
        1 => Arc::new(LargeBinaryArray::from_iter(bytes())),
        _ => Arc::new(BinaryViewArray::from_iter(bytes())),
    };
    (Field::new(f.name(), array.data_type().clone(), true), array)
}

async fn report_csv(dir: &Path, metric: &str, out: &Path) -> (Output, String) {
    let output = run(&[
        "report",
        dir.to_str().unwrap(),
        "--metric",
        metric,
        "--format",
        "csv",
        "--output",
        out.to_str().unwrap(),
    ])
    .await;
    let csv = std::fs::read_to_string(out).unwrap_or_default();
    (output, csv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewritten_records_files_report_like_the_original() {
    let tmp = tempfile::tempdir().unwrap();
    let original = original(tmp.path());
    let rewritten = [
        rewrite(
            &original,
            tmp.path(),
            "polars",
            Compression::ZSTD(ZstdLevel::default()),
            polars_like,
            None,
        ),
        rewrite(
            &original,
            tmp.path(),
            "pandas",
            Compression::LZ4_RAW,
            pandas_like,
            Some((
                Field::new("__index_level_0__", DataType::Int64, true),
                Arc::new(Int64Array::from_iter_values(0..12)),
            )),
        ),
        rewrite(
            &original,
            tmp.path(),
            "binary",
            Compression::LZ4,
            binary_strings,
            None,
        ),
    ];
    // The rewritten files really are in the other tools' shapes.
    let polars = read_batch(&rewritten[0].join("records.parquet"));
    assert_eq!(
        polars
            .schema()
            .field_with_name("run_id")
            .unwrap()
            .data_type(),
        &DataType::Utf8View
    );
    assert!(matches!(
        polars
            .schema()
            .field_with_name("inter_chunk_latencies_ns")
            .unwrap()
            .data_type(),
        DataType::LargeList(_)
    ));
    let pandas = read_batch(&rewritten[1].join("records.parquet"));
    assert_eq!(
        pandas
            .schema()
            .field_with_name("ttft_ns")
            .unwrap()
            .data_type(),
        &DataType::Float64
    );
    assert_eq!(
        pandas
            .schema()
            .field_with_name("dataset")
            .unwrap()
            .data_type(),
        &DataType::LargeUtf8
    );

    for metric in [
        "accept_length",
        "accept_rate",
        "latency",
        "throughput",
        "decode_tps",
    ] {
        let (out, expected) = report_csv(&original, metric, &tmp.path().join("original.csv")).await;
        assert!(out.status.success(), "{metric} on the original");
        assert!(
            expected.lines().nth(1).is_some_and(|l| l.starts_with("m,")),
            "{expected}"
        );
        for dir in &rewritten {
            let (out, csv) = report_csv(dir, metric, &tmp.path().join("rewritten.csv")).await;
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success(),
                "{metric} on {}: {stderr}",
                dir.display()
            );
            assert_eq!(csv, expected, "{metric} on {}", dir.display());
        }
    }

    // Every column is read (output text, latency lists, per-step arrays):
    // comparing the original with each rewrite pairs every output.
    for dir in &rewritten {
        let out = run(&[
            "compare",
            "--baseline",
            original.to_str().unwrap(),
            "--speculative",
            dir.to_str().unwrap(),
            "--format",
            "json",
            "--bootstrap",
            "0",
        ])
        .await;
        assert!(out.status.success(), "compare with {}", dir.display());
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let overall = json["rows"].as_array().unwrap().last().unwrap().clone();
        // 12 records: one warmup, one failed.
        assert_eq!(
            (overall["paired"].as_u64(), overall["identical"].as_u64()),
            (Some(10), Some(10))
        );
    }

    // Caller-defined columns survive every rewrite with their values.
    let want: Vec<_> = records().into_iter().map(|r| r.custom).collect();
    for dir in &rewritten {
        let file = read_records_file(dir.join("records.parquet")).unwrap();
        let got: Vec<_> = file.records.into_iter().map(|r| r.custom).collect();
        assert_eq!(got, want, "custom columns in {}", dir.display());
        let names: Vec<&str> = file.custom_columns.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["x_gpu_power_w", "x_replica", "x_shard", "x_cached"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_column_of_the_wrong_type_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let original = original(tmp.path());
    let dir = rewrite(
        &original,
        tmp.path(),
        "wrong",
        Compression::ZSTD(ZstdLevel::default()),
        |f, c| {
            if f.name() == "e2e_latency_ns" {
                let text: StringArray = c
                    .as_primitive::<UInt64Type>()
                    .iter()
                    .map(|v| v.map(|x| format!("{x} ns")))
                    .collect();
                (Field::new(f.name(), DataType::Utf8, false), Arc::new(text))
            } else {
                (f.clone(), c.clone())
            }
        },
        None,
    );
    let (out, _) = report_csv(&dir, "latency", &tmp.path().join("x.csv")).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("column `e2e_latency_ns`") && err.contains("found Utf8"),
        "{err}"
    );
    assert!(!err.contains("index"), "{err}");

    // A value that does not fit names its row and column.
    let dir = rewrite(
        &original,
        tmp.path(),
        "fraction",
        Compression::SNAPPY,
        |f, c| {
            if f.name() == "completion_tokens" {
                let floats: Float64Array = c
                    .as_primitive::<UInt64Type>()
                    .iter()
                    .enumerate()
                    .map(|(i, v)| v.map(|x| x as f64 + if i == 3 { 0.5 } else { 0.0 }))
                    .collect();
                (
                    Field::new(f.name(), DataType::Float64, true),
                    Arc::new(floats),
                )
            } else {
                (f.clone(), c.clone())
            }
        },
        None,
    );
    let (out, _) = report_csv(&dir, "throughput", &tmp.path().join("y.csv")).await;
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("row 3, column `completion_tokens`: 43.5 is not a whole number"),
        "{err}"
    );
}
