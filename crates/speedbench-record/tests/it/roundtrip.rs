//! Records survive a Parquet round trip, across row groups and schema changes.

use speedbench_record::*;

fn full_record(i: u64) -> RequestRecord {
    RequestRecord {
        run_id: "run-x".into(),
        request_index: i,
        conversation_id: format!("conv-{i}"),
        turn_index: (i % 3) as u32,
        dataset: "speed_bench_qualitative".into(),
        category: i.is_multiple_of(2).then(|| "coding".to_string()),
        model: "m".into(),
        warmup: i == 0,
        start_unix_ns: 1_700_000_000_000_000_000 + i as i64,
        end_unix_ns: 1_700_000_000_500_000_000 + i as i64,
        ttft_ns: Some(20_000_000 + i),
        inter_chunk_latencies_ns: vec![1, 2, 3 + i],
        e2e_latency_ns: 500_000_000,
        prompt_tokens: Some(12),
        completion_tokens: (i != 3).then_some(53),
        output_chunks: 4,
        finish_reason: Some("stop".into()),
        http_status: Some(200),
        error_kind: (i == 3).then_some(ErrorKind::Timeout),
        error_message: (i == 3).then(|| "timed out after 1s".to_string()),
        output_text: format!(" héllo {i}"),
        spec: (i != 3).then(|| SpecDecodeStats {
            source: Some(if i.is_multiple_of(2) {
                SpecSource::Vllm
            } else {
                SpecSource::LlamaCpp
            }),
            accepted_draft_tokens: 4,
            proposed_draft_tokens: 12,
            verify_steps: Some(4),
            num_spec_tokens: Some(3),
            acceptance_histogram: vec![2, 1, 0, 1],
            per_step_accepted: (i == 2).then(|| vec![0, 1, 3, 0]),
            per_step_drafted: (i == 2).then(|| vec![3, 3, 3, 3]),
        }),
        server_timings: (i % 2 == 1).then_some(ServerTimings {
            prompt_n: Some(41),
            cache_n: Some(0),
            prompt_ms: Some(169.05),
            prompt_per_second: Some(242.5),
            predicted_n: Some(64),
            predicted_ms: Some(701.5),
            predicted_per_second: Some(89.8),
        }),
        prompt_sha256: (i != 4).then(|| format!("{:064x}", i * 7919)),
        spec_dropped: (i == 3).then(|| "malformed vllm spec-decode payload: x".to_string()),
        tokens_per_iteration: (i == 5).then_some(2.75),
        resends: (i % 4 == 3) as u32,
        server_index: (i % 3 == 1).then_some(i as u32 % 2),
        // Every field its own value, so a column read into another fails.
        http_phases: (i != 3).then_some(HttpPhases {
            blocked_ns: 1_000 + i,
            dns_lookup_ns: if i == 1 { 2_000 } else { 0 },
            connecting_ns: 3_000 * (i % 2),
            sending_ns: 4_000 + i,
            waiting_ns: 5_000 + i,
            receiving_ns: 6_000 + i,
            connection_reused: i.is_multiple_of(2),
            bytes_sent: 7_000 + i,
            bytes_received: 8_000 + i,
            chunks_sent: 1,
            chunks_received: 9 + i,
        }),
        custom: Default::default(),
    }
}

#[test]
fn every_field_survives_a_round_trip_across_row_groups() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RECORDS_FILE_NAME);
    let mut w = RecordWriter::create(&path).unwrap();
    let records: Vec<_> = (0..7).map(full_record).collect();
    for (n, r) in records.iter().enumerate() {
        w.append(r).unwrap();
        if n % 3 == 2 {
            w.flush().unwrap();
        }
    }
    let manifest = RunManifest {
        run_id: "run-x".into(),
        server_url: redact_url("http://user:pw@127.0.0.1:9/v1?token=t"),
        status: speedbench_record::RunStatus::Completed,
        config: serde_json::json!({"concurrency": 4}),
        ..Default::default()
    };
    assert_eq!(w.close(&manifest).unwrap(), 7);
    let back = read_records_file(&path).unwrap();
    assert_eq!(back.records, records);
    let m = back.manifest.unwrap();
    assert_eq!(m.record_count, 7);
    assert_eq!(m.schema_version, SCHEMA_VERSION);
    assert_eq!(m.server_url, "http://127.0.0.1:9/v1");
    assert_eq!(m.config["concurrency"], 4);
}

/// The visitor refills one record row by row: a field a row leaves null
/// must not keep the previous row's value (the rows alternate spec stats,
/// categories, timings, histograms of other lengths and errors).
#[test]
fn visiting_shows_every_record_as_reading_does_with_nothing_left_from_the_row_before() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RECORDS_FILE_NAME);
    let mut w = RecordWriter::create(&path).unwrap();
    let mut records: Vec<_> = (0..7).map(full_record).collect();
    records[4].spec.as_mut().unwrap().acceptance_histogram = vec![9];
    records[6]
        .spec
        .as_mut()
        .unwrap()
        .acceptance_histogram
        .clear();
    for (n, r) in records.iter().enumerate() {
        w.append(r).unwrap();
        if n % 3 == 2 {
            w.flush().unwrap();
        }
    }
    w.close(&RunManifest::default()).unwrap();
    let mut seen = Vec::new();
    let visited = visit_records(&path, None, |r| seen.push(r.clone())).unwrap();
    assert_eq!(visited.records, 7);
    assert_eq!(visited.manifest.unwrap().record_count, 7);
    assert_eq!(seen, records);

    // Projected, as a report reads it: the same records as the reader's.
    let columns = [
        columns::CATEGORY,
        columns::SPEC_SOURCE,
        columns::SPEC_ACCEPTED_DRAFT_TOKENS,
        columns::SPEC_PROPOSED_DRAFT_TOKENS,
        columns::SPEC_ACCEPTANCE_HISTOGRAM,
        columns::ERROR_KIND,
    ];
    let mut projected = Vec::new();
    visit_records(&path, Some(&columns), |r| projected.push(r.clone())).unwrap();
    assert_eq!(
        projected,
        read_records_file_with(&path, Some(&columns))
            .unwrap()
            .records
    );
    assert_eq!(projected[3].spec, None);
    assert_eq!(
        projected[4].spec.as_ref().unwrap().acceptance_histogram,
        [9]
    );
    assert_eq!(projected[5].category, None);
}

/// A bad value stops the visit with the row and column named.
#[test]
fn visiting_names_the_row_of_a_bad_value() {
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RECORDS_FILE_NAME);
    let mut w = RecordWriter::create(&path).unwrap();
    for i in 0..3 {
        w.append(&full_record(i)).unwrap();
    }
    w.close(&RunManifest::default()).unwrap();
    // Rewrite the file with row 2's error kind unknown.
    let file = std::fs::File::open(&path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
    let batch = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
    let index = batch.schema().index_of(columns::ERROR_KIND).unwrap();
    let mut cols = batch.columns().to_vec();
    cols[index] =
        std::sync::Arc::new(StringArray::from(vec![None, None, Some("meltdown")])) as ArrayRef;
    let bad = RecordBatch::try_new(batch.schema(), cols).unwrap();
    let out = std::fs::File::create(&path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(out, bad.schema(), None).unwrap();
    writer.write(&bad).unwrap();
    writer.close().unwrap();
    let mut visited = 0;
    let err = visit_records(&path, None, |_| visited += 1)
        .unwrap_err()
        .to_string();
    assert_eq!(visited, 2, "the rows before the bad one were visited");
    assert!(
        err.contains("row 2") && err.contains("error_kind") && err.contains("meltdown"),
        "{err}"
    );
}

#[test]
fn a_truncated_file_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let mut w = RecordWriter::create(&path).unwrap();
    w.append(&full_record(1)).unwrap();
    w.close(&RunManifest::default()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = read_records_file(&path).unwrap_err().to_string();
    assert!(err.contains("records.parquet"), "{err}");
    assert!(err.contains("not a readable Parquet"), "{err}");
}

#[test]
fn a_missing_file_is_an_io_error_naming_it() {
    let err = read_records("/nonexistent/records.parquet").unwrap_err();
    assert!(matches!(err, RecordError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/records.parquet"));
}

#[test]
fn a_parquet_file_of_another_schema_names_the_column() {
    use arrow_array::{Int32Array, RecordBatch};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.parquet");
    let batch = RecordBatch::try_from_iter([(
        "run_id",
        Arc::new(Int32Array::from(vec![1, 2])) as arrow_array::ArrayRef,
    )])
    .unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        batch.schema(),
        None,
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let err = read_records(&path).unwrap_err().to_string();
    assert!(
        err.contains("other.parquet") && err.contains("`run_id`"),
        "{err}"
    );
    assert!(err.contains("expected type Utf8"), "{err}");
}

#[test]
fn an_unknown_error_kind_names_row_and_column() {
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.parquet");
    let mut w = RecordWriter::create(&good).unwrap();
    w.append(&full_record(3)).unwrap();
    w.append(&full_record(3)).unwrap();
    w.close(&RunManifest::default()).unwrap();
    // Rewrite the second row's error_kind to a value no version ever wrote.
    let batch = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(
        std::fs::File::open(&good).unwrap(),
        1024,
    )
    .unwrap()
    .next()
    .unwrap()
    .unwrap();
    let idx = batch.schema().index_of("error_kind").unwrap();
    let mut cols: Vec<ArrayRef> = batch.columns().to_vec();
    cols[idx] = Arc::new(StringArray::from(vec![Some("timeout"), Some("gremlins")]));
    let bad_batch = RecordBatch::try_new(batch.schema(), cols).unwrap();
    let bad = dir.path().join("bad.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(
        std::fs::File::create(&bad).unwrap(),
        bad_batch.schema(),
        None,
    )
    .unwrap();
    w.write(&bad_batch).unwrap();
    w.close().unwrap();
    let err = read_records(&bad).unwrap_err().to_string();
    assert!(
        err.contains("bad.parquet: row 1, column `error_kind`"),
        "{err}"
    );
}

#[test]
fn a_projected_read_decodes_only_the_named_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.parquet");
    let mut w = RecordWriter::create(&path).unwrap();
    let records: Vec<_> = (0..5).map(full_record).collect();
    for r in &records {
        w.append(r).unwrap();
    }
    w.close(&RunManifest::default()).unwrap();
    let cols = [
        "category",
        "warmup",
        "spec_source",
        "spec_accepted_draft_tokens",
        "spec_proposed_draft_tokens",
    ];
    let back = read_records_file_with(&path, Some(&cols)).unwrap().records;
    assert_eq!(back.len(), 5);
    for (b, r) in back.iter().zip(&records) {
        assert_eq!((&b.category, b.warmup), (&r.category, r.warmup));
        assert_eq!(
            b.spec
                .as_ref()
                .map(|s| (s.accepted_draft_tokens, s.proposed_draft_tokens)),
            r.spec
                .as_ref()
                .map(|s| (s.accepted_draft_tokens, s.proposed_draft_tokens))
        );
        // Not decoded: left at their defaults.
        assert_eq!(
            (b.output_text.as_str(), b.e2e_latency_ns, b.ttft_ns),
            ("", 0, None)
        );
        assert_eq!(b.spec.as_ref().and_then(|s| s.verify_steps), None);
    }
    let err = read_records_file_with(&path, Some(&["no_such_column"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("`no_such_column`: column is missing"), "{err}");
}

/// A file written before `prompt_sha256` existed (all columns but it) still
/// reads, with the hash `None`.
#[test]
fn a_file_without_the_later_columns_reads_with_nulls() {
    use std::sync::Arc;

    use arrow_array::RecordBatch;
    use parquet::arrow::ArrowWriter;

    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.parquet");
    let mut w = RecordWriter::create(&new).unwrap();
    w.append(&full_record(1)).unwrap();
    w.close(&RunManifest::default()).unwrap();
    let batch = read_batches(&new);
    let keep: Vec<usize> = (0..batch.num_columns())
        .filter(|&i| batch.schema().field(i).name() != columns::PROMPT_SHA256)
        .collect();
    let old_batch: RecordBatch = batch.project(&keep).unwrap();
    let old = dir.path().join("old.parquet");
    let mut ow = ArrowWriter::try_new(
        std::fs::File::create(&old).unwrap(),
        Arc::new(old_batch.schema().as_ref().clone()),
        None,
    )
    .unwrap();
    ow.write(&old_batch).unwrap();
    ow.close().unwrap();
    let back = read_records(&old).unwrap();
    assert_eq!(back[0].prompt_sha256, None);
    let mut want = full_record(1);
    want.prompt_sha256 = None;
    assert_eq!(back[0], want);
}

fn read_batches(path: &std::path::Path) -> arrow_array::RecordBatch {
    let file = std::fs::File::open(path).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    assert_eq!(batches.len(), 1);
    batches.into_iter().next().unwrap()
}

#[test]
fn a_writer_that_never_closed_leaves_its_flushed_records_in_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(PARTIAL_RECORDS_FILE_NAME);
    let journal = dir.path().join(JOURNAL_FILE_NAME);
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(&journal)
        .unwrap();
    for i in 0..5 {
        w.append(&full_record(i)).unwrap();
    }
    w.flush().unwrap();
    for i in 5..8 {
        w.append(&full_record(i)).unwrap();
    }
    w.flush().unwrap();
    // Buffered, never flushed: lost with the process.
    w.append(&full_record(8)).unwrap();
    // As SIGKILL would: no close, no destructor.
    std::mem::forget(w);
    assert!(
        read_records_file(&path).is_err(),
        "no footer, no Parquet reader"
    );
    let got = read_journal(&journal).unwrap();
    assert!(!got.torn);
    assert_eq!(got.records, (0..8).map(full_record).collect::<Vec<_>>());
    // A torn last batch: the ones before it still read.
    let bytes = std::fs::read(&journal).unwrap();
    std::fs::write(&journal, &bytes[..bytes.len() - 40]).unwrap();
    let torn = read_journal(&journal).unwrap();
    assert!(torn.torn);
    assert_eq!(torn.records, (0..5).map(full_record).collect::<Vec<_>>());
}

#[test]
fn a_closed_file_takes_its_journal_away() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(RECORDS_FILE_NAME);
    let journal = dir.path().join(JOURNAL_FILE_NAME);
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(&journal)
        .unwrap();
    w.append(&full_record(1)).unwrap();
    w.flush().unwrap();
    assert!(journal.is_file());
    w.close(&RunManifest::default()).unwrap();
    assert!(!journal.exists());
    assert_eq!(read_records(&path).unwrap().len(), 1);
}

#[test]
fn journal_batches_are_checked_against_their_sums() {
    use speedbench_record::JOURNAL_SUMS_FILE_NAME;
    let dir = tempfile::tempdir().unwrap();
    let (_, journal, w) = two_batches_journaled(dir.path());
    std::mem::forget(w);
    let got = read_journal(&journal).unwrap();
    assert!(got.checked && got.corrupt_batch.is_none());
    assert_eq!((got.records.len(), got.unchecked_records), (5, 0));
    // The last batch's line lost (killed between the batch and its sum):
    // its 2 records are read, said unchecked.
    let sums_path = dir.path().join(JOURNAL_SUMS_FILE_NAME);
    let sums = std::fs::read_to_string(&sums_path).unwrap();
    let kept: Vec<&str> = sums.lines().take(2).collect();
    std::fs::write(&sums_path, kept.join("\n") + "\n").unwrap();
    let got = read_journal(&journal).unwrap();
    assert_eq!((got.records.len(), got.unchecked_records), (5, 2));
    // No sums file (an older journal): read, unchecked.
    std::fs::remove_file(&sums_path).unwrap();
    let got = read_journal(&journal).unwrap();
    assert!(!got.checked);
    assert_eq!(got.records, (0..5).map(full_record).collect::<Vec<_>>());
}

/// The row groups of a file, from its footer.
fn row_group_sizes(path: &std::path::Path) -> Vec<i64> {
    let file = std::fs::File::open(path).unwrap();
    let builder =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    builder
        .metadata()
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows())
        .collect()
}

/// With a journal, flushes go into one row group until it is full (by
/// `ROW_GROUP_ROWS` or `ROW_GROUP_MEMORY`); without one, each flush is its
/// own.
#[test]
fn a_journal_lets_row_groups_span_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let small = |i: u64| RequestRecord {
        request_index: i,
        ..Default::default()
    };
    let path = dir.path().join("journaled.parquet");
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(dir.path().join(JOURNAL_FILE_NAME))
        .unwrap();
    let flush_rows = 1_024;
    let total = 70_000;
    let mut cuts = Vec::new();
    for i in 0..total {
        w.append(&small(i)).unwrap();
        if (i + 1) % flush_rows == 0 {
            let before = w.rows_in_row_groups();
            w.flush().unwrap();
            assert_eq!(w.rows_written(), i + 1);
            if w.rows_in_row_groups() != before {
                // A cut takes every flushed record.
                assert_eq!(w.rows_in_row_groups(), i + 1);
                cuts.push(i + 1);
            }
        }
    }
    assert!(!cuts.is_empty() && cuts[0] > 4 * flush_rows, "{cuts:?}");
    assert_eq!(w.close(&RunManifest::default()).unwrap(), total);
    let sizes = row_group_sizes(&path);
    assert_eq!(sizes.len(), cuts.len() + 1, "{sizes:?} {cuts:?}");
    assert!(
        sizes.iter().all(|&n| n <= ROW_GROUP_ROWS as i64),
        "{sizes:?}"
    );
    assert_eq!(sizes.iter().sum::<i64>() as u64, total);
    let back = read_records(&path).unwrap();
    assert!(
        back.iter()
            .enumerate()
            .all(|(i, r)| r.request_index == i as u64)
    );
    assert_eq!(back.len() as u64, total);

    let path = dir.path().join("bare.parquet");
    let mut w = RecordWriter::create(&path).unwrap();
    for batch in [0..3, 3..10, 10..11] {
        for i in batch {
            w.append(&small(i)).unwrap();
        }
        w.flush().unwrap();
        assert_eq!(w.rows_in_row_groups(), w.rows_written());
    }
    w.close(&RunManifest::default()).unwrap();
    assert_eq!(row_group_sizes(&path), [3, 7, 1]);
}

/// Long outputs cut the row group at `ROW_GROUP_MEMORY`, long before
/// `ROW_GROUP_ROWS`.
#[test]
fn long_outputs_cut_a_row_group_by_its_memory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.parquet");
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(dir.path().join(JOURNAL_FILE_NAME))
        .unwrap();
    // 64 KiB of output each, of letters no compression shrinks much.
    let text = |i: u64| {
        let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..64 * 1024)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect::<String>()
    };
    let mut cut_at = None;
    for i in 0..200u64 {
        w.append(&RequestRecord {
            request_index: i,
            output_text: text(i),
            ..Default::default()
        })
        .unwrap();
        w.flush().unwrap();
        if cut_at.is_none() && w.rows_in_row_groups() > 0 {
            cut_at = Some(i + 1);
        }
    }
    let cut_at = cut_at.expect("a row group was cut");
    // 4 MiB of 64 KiB outputs: about 64 records, however they encode.
    assert!((16..=80).contains(&cut_at), "cut after {cut_at} records");
    w.close(&RunManifest::default()).unwrap();
    let sizes = row_group_sizes(&path);
    assert!(sizes.len() >= 2, "{sizes:?}");
    assert_eq!(sizes.iter().sum::<i64>(), 200);
    let back = read_records(&path).unwrap();
    assert_eq!(back[199].output_text, text(199));
}

/// A write that fails while the row group in progress holds flushed
/// records: the file keeps its complete row groups, and the journal, which
/// holds every flushed record, stays beside it and says how many.
#[test]
fn a_failed_write_keeps_the_journal_that_holds_more() {
    let dir = tempfile::tempdir().unwrap();
    let (path, journal, mut w) = two_batches_journaled(dir.path());
    assert_eq!((w.rows_written(), w.rows_in_row_groups()), (5, 0));
    w.append(&full_record(5)).unwrap();
    let err = RecordError::Metadata {
        path: path.clone(),
        message: "disk full".into(),
    };
    let closed = w.close_after_error(&RunManifest::default(), err);
    assert_eq!(
        (closed.rows, closed.readable, closed.journal_rows),
        (0, true, Some(5))
    );
    assert!(read_records(&path).unwrap().is_empty());
    assert_eq!(
        read_journal(&journal).unwrap().records,
        (0..5).map(full_record).collect::<Vec<_>>()
    );

    // Closed normally, or salvaged with every record in the file: the
    // journal goes.
    let path = dir.path().join("whole.parquet");
    let journal = dir.path().join("whole.journal");
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(&journal)
        .unwrap();
    w.append(&full_record(0)).unwrap();
    w.flush().unwrap();
    w.append(&full_record(1)).unwrap();
    let closed = w.close_or_salvage(&RunManifest::default());
    assert_eq!((closed.rows, closed.journal_rows), (2, None));
    assert!(closed.error.is_none());
    assert!(!journal.exists());
}

/// A writer of a partial records file with its journal in `dir`, that has
/// flushed records 0-2 and 3-4 as two batches; the file's path, the
/// journal's and the writer.
fn two_batches_journaled(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, RecordWriter) {
    let path = dir.join(PARTIAL_RECORDS_FILE_NAME);
    let journal = dir.join(JOURNAL_FILE_NAME);
    let mut w = RecordWriter::create(&path)
        .unwrap()
        .with_journal(&journal)
        .unwrap();
    for batch in [0..3, 3..5] {
        for i in batch {
            w.append(&full_record(i)).unwrap();
        }
        w.flush().unwrap();
    }
    (path, journal, w)
}
