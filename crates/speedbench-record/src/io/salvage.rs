//! Closing a records file after a write failed (a full disk, a file-size
//! limit, an I/O error): the file is cut back to its last complete row group
//! and given a footer, so every record flushed before the failure stays
//! readable by any Parquet reader.

use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;

use parquet::file::metadata::{
    FileMetaData, KeyValue, ParquetMetaData, ParquetMetaDataWriter, RowGroupMetaData,
};

use super::RecordWriter;
use crate::error::RecordError;
use crate::manifest::RunManifest;
use crate::schema::SCHEMA_VERSION;

/// Parquet files start with these four bytes.
const MAGIC_LEN: u64 = 4;

impl RecordWriter {
    /// Closes the file after a failed write, keeping what reached the disk.
    ///
    /// Row groups whose bytes all lie within the file are kept, in order, up
    /// to the first that does not; the file is truncated after the last kept
    /// one (which also gives back the space a half-written row group took)
    /// and a footer listing them, with `manifest` in it, is written there.
    /// Records still buffered are lost; the caller knows how many it sent.
    ///
    /// Returns the number of records the file now holds.
    pub fn close_after_error(self, manifest: &RunManifest) -> Result<u64, RecordError> {
        let path = self.path.clone();
        let io = |source| RecordError::Io {
            path: path.clone(),
            source,
        };
        // A separate handle: the writer's buffered tail must not land after
        // the footer when the writer is dropped.
        let file = self.writer.inner().try_clone().map_err(io)?;
        let parquet_err = |source| RecordError::Parquet {
            path: path.clone(),
            source,
        };
        let (serialized, _) = self.writer.into_serialized_writer().map_err(parquet_err)?;
        let row_groups = serialized.flushed_row_groups().to_vec();
        let schema = Arc::new(serialized.schema_descr().clone());
        let props = serialized.properties().clone();
        drop(serialized);

        let on_disk = file.metadata().map_err(io)?.len();
        let (kept, end) = complete_prefix(&row_groups, on_disk);
        let row_groups: Vec<RowGroupMetaData> = row_groups.into_iter().take(kept).collect();
        let num_rows: i64 = row_groups.iter().map(|rg| rg.num_rows()).sum();

        let mut manifest = manifest.clone();
        manifest.record_count = num_rows as u64;
        manifest.schema_version = SCHEMA_VERSION.to_string();
        let json = serde_json::to_string(&manifest).map_err(|e| RecordError::Metadata {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let mut kv: Vec<KeyValue> = props.key_value_metadata().cloned().unwrap_or_default();
        kv.push(KeyValue::new(RunManifest::PARQUET_KEY.to_string(), json));
        let file_metadata = FileMetaData::new(
            props.writer_version().as_num(),
            num_rows,
            Some(props.created_by().to_string()),
            Some(kv),
            schema,
            None,
        );
        let metadata = ParquetMetaData::new(file_metadata, row_groups);

        file.set_len(end).map_err(io)?;
        let mut out = &file;
        out.seek(SeekFrom::Start(end)).map_err(io)?;
        ParquetMetaDataWriter::new(&mut out, &metadata)
            .finish()
            .map_err(parquet_err)?;
        out.flush().map_err(io)?;
        file.sync_all().map_err(io)?;
        Ok(num_rows as u64)
    }
}

/// How many leading row groups lie wholly within `file_len` bytes, and the
/// offset just past the last of them.
fn complete_prefix(row_groups: &[RowGroupMetaData], file_len: u64) -> (usize, u64) {
    let mut end = MAGIC_LEN;
    for (i, rg) in row_groups.iter().enumerate() {
        let rg_end = rg
            .columns()
            .iter()
            .map(|c| {
                let (start, len) = c.byte_range();
                start + len
            })
            .max()
            .unwrap_or(end);
        if rg_end > file_len {
            return (i, end);
        }
        end = end.max(rg_end);
    }
    (row_groups.len(), end)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::io::read_records_file;
    use crate::record::RequestRecord;

    fn record(i: u64) -> RequestRecord {
        RequestRecord {
            run_id: "r".into(),
            request_index: i,
            conversation_id: format!("c{i}"),
            output_text: "x".repeat(200),
            e2e_latency_ns: 1_000 + i,
            ..Default::default()
        }
    }

    /// Two row groups reach the file, then garbage (a half-written third):
    /// closing after the error keeps exactly the two.
    #[test]
    fn a_half_written_row_group_is_cut_and_the_rest_stays_readable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.parquet.partial");
        let mut w = RecordWriter::create(&path).unwrap();
        for batch in [0..3u64, 3..5] {
            for i in batch {
                w.append(&record(i));
            }
            w.flush().unwrap();
        }
        // What a failed write leaves: bytes past the last row group, and
        // records still buffered.
        w.writer
            .inner()
            .try_clone()
            .unwrap()
            .write_all(&[7; 999])
            .unwrap();
        w.append(&record(5));
        let manifest = RunManifest {
            run_id: "r".into(),
            outcome: "failed".into(),
            ..Default::default()
        };
        assert_eq!(w.close_after_error(&manifest).unwrap(), 5);
        let back = read_records_file(&path).unwrap();
        let ids: Vec<u64> = back.records.iter().map(|r| r.request_index).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
        assert_eq!(back.records[4], record(4));
        let m = back.manifest.unwrap();
        assert_eq!((m.outcome.as_str(), m.record_count), ("failed", 5));
    }

    #[test]
    fn nothing_flushed_leaves_an_empty_readable_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.parquet.partial");
        let mut w = RecordWriter::create(&path).unwrap();
        w.append(&record(0));
        assert_eq!(w.close_after_error(&RunManifest::default()).unwrap(), 0);
        assert!(read_records_file(&path).unwrap().records.is_empty());
    }
}
