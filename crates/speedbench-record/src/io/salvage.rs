//! Closing a records file after a write failed (a full disk, a file-size
//! limit, an I/O error): the file is cut back to its last complete row group
//! and given a footer, so every record flushed before the failure stays
//! readable by any Parquet reader.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use parquet::arrow::{ArrowSchemaConverter, encode_arrow_schema};
use parquet::file::metadata::{
    FileMetaData, KeyValue, ParquetMetaData, ParquetMetaDataWriter, RowGroupMetaData,
};
use parquet::file::properties::WriterVersion;

use super::{RecordWriter, SCHEMA_VERSION_KEY};
use crate::RunStatus;
use crate::error::RecordError;
use crate::manifest::RunManifest;
use crate::schema::SCHEMA_VERSION;

/// Parquet files start with these four bytes.
const MAGIC_LEN: u64 = 4;

/// How closing a records file went, when a write may fail.
#[derive(Debug)]
pub struct ClosedRecords {
    /// Records the file holds now.
    pub rows: u64,
    /// The write that failed, if one did; the file was then cut back to its
    /// last complete row group (when `readable`).
    pub error: Option<RecordError>,
    /// False only when not even a footer could be written: no Parquet
    /// reader can open the file.
    pub readable: bool,
    /// Why the footer could not be written after `error`, when it could not.
    pub close_error: Option<RecordError>,
    /// Records the crash journal holds when it holds more than the file
    /// (those of the row group that was in progress): the journal then
    /// stays beside the file, for `speedbench recover`. `None` when the
    /// file holds every record flushed, or no journal was written.
    pub journal_rows: Option<u64>,
}

impl ClosedRecords {
    /// How the file ended after `error`, given how writing its footer went.
    fn after(error: RecordError, footer: Result<u64, RecordError>) -> ClosedRecords {
        let readable = footer.is_ok();
        let (rows, close_error) = match footer {
            Ok(rows) => (rows, None),
            Err(close) => (0, Some(close)),
        };
        ClosedRecords {
            rows,
            error: Some(error),
            readable,
            close_error,
            journal_rows: None,
        }
    }

    /// Keeps `journal` (which holds every one of the `flushed` records)
    /// when the file holds fewer, and removes it otherwise.
    fn settle_journal(mut self, journal: Option<super::journal::Journal>, flushed: u64) -> Self {
        if let Some(journal) = journal {
            if self.readable && self.rows >= flushed {
                journal.remove();
            } else {
                self.journal_rows = Some(flushed);
            }
        }
        self
    }
}

/// What a footer written after a failure needs: a handle of the file, and
/// the row groups the writer had completed.
struct Snapshot {
    file: File,
    row_groups: Vec<RowGroupMetaData>,
    /// The file's Arrow schema (the record schema and any custom columns).
    schema: arrow_schema::SchemaRef,
}

impl RecordWriter {
    /// Closes the file with `manifest` as [`Self::close`] does, but when a
    /// write fails (the last row group or the footer), closes it as
    /// [`Self::close_after_error`] does, so the records that reached the
    /// disk stay readable.
    pub fn close_or_salvage(mut self, manifest: &RunManifest) -> ClosedRecords {
        if let Err(e) = self.flush() {
            return self.close_after_error(manifest, e);
        }
        let snapshot = match self.snapshot() {
            Ok(s) => s,
            Err(e) => return self.close_after_error(manifest, e),
        };
        let path = self.path.clone();
        let flushed = self.rows_written;
        // Taken from the writer so that a failed close leaves it on disk.
        let journal = self.journal.take();
        match self.close(manifest) {
            Ok(rows) => ClosedRecords {
                rows,
                error: None,
                readable: true,
                close_error: None,
                journal_rows: None,
            }
            .settle_journal(journal, flushed),
            Err(error) => ClosedRecords::after(error, snapshot.write_footer(&path, manifest))
                .settle_journal(journal, flushed),
        }
    }

    /// Closes the file after `error`, a failed write, keeping what reached
    /// the disk.
    ///
    /// Row groups whose bytes all lie within the file are kept, in order, up
    /// to the first that does not; the file is truncated after the last kept
    /// one (which also gives back the space a half-written row group took)
    /// and a footer listing them, with `manifest` in it (its outcome set to
    /// [`RunStatus::Failed`]), is written there. Records still buffered are
    /// lost; the caller knows how many it sent. Flushed records of the row
    /// group that was in progress are in the crash journal, which then stays
    /// ([`ClosedRecords::journal_rows`]).
    pub fn close_after_error(
        mut self,
        manifest: &RunManifest,
        error: RecordError,
    ) -> ClosedRecords {
        // The crash journal goes only once the file holds what it does;
        // else it may be all that holds the records.
        let journal = self.journal.take();
        let flushed = self.rows_written;
        let cut = self.snapshot().and_then(|snapshot| {
            let path = self.path.clone();
            // The writer's buffer, if its flush succeeds now, lands before
            // the cut; the file's length is read only after it is gone.
            drop(self);
            snapshot.write_footer(&path, manifest)
        });
        ClosedRecords::after(error, cut).settle_journal(journal, flushed)
    }

    fn snapshot(&self) -> Result<Snapshot, RecordError> {
        let file = self
            .writer
            .inner()
            .try_clone()
            .map_err(|source| RecordError::Io {
                path: self.path.clone(),
                source,
            })?;
        Ok(Snapshot {
            file,
            row_groups: self.writer.flushed_row_groups().to_vec(),
            schema: self.buffer.schema().clone(),
        })
    }
}

impl Snapshot {
    /// Cuts the file after its last complete row group and writes a footer
    /// there; returns the rows kept. When the footer does not fit (the disk
    /// is still full, or a file-size limit is near), the last row group is
    /// given up and the cut made before it, until one fits: fewer records,
    /// but a file every reader opens.
    fn write_footer(self, path: &Path, manifest: &RunManifest) -> Result<u64, RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let on_disk = self.file.metadata().map_err(io)?.len();
        let mut kept = complete_prefix(&self.row_groups, on_disk);
        loop {
            let end = kept.last().map_or(MAGIC_LEN, |&(_, end)| end);
            let row_groups = self.row_groups[..kept.len()].to_vec();
            match self.footer_at(path, end, row_groups, manifest) {
                Ok(rows) => return Ok(rows),
                Err(e) if kept.is_empty() => return Err(e),
                Err(_) => {
                    kept.pop();
                }
            }
        }
    }

    fn footer_at(
        &self,
        path: &Path,
        end: u64,
        row_groups: Vec<RowGroupMetaData>,
        manifest: &RunManifest,
    ) -> Result<u64, RecordError> {
        let io = |source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let parquet_err = |source| RecordError::Write {
            path: path.to_path_buf(),
            source,
        };
        let num_rows: i64 = row_groups.iter().map(|rg| rg.num_rows()).sum();
        let json = failed_manifest_json(path, manifest, num_rows as u64)?;
        let arrow_schema = self.schema.clone();
        // The writer's own conversion (ArrowWriter with default options).
        let schema = ArrowSchemaConverter::new()
            .convert(&arrow_schema)
            .map_err(parquet_err)?;
        let kv = vec![
            KeyValue::new(SCHEMA_VERSION_KEY.to_string(), SCHEMA_VERSION.to_string()),
            KeyValue::new(
                parquet::arrow::ARROW_SCHEMA_META_KEY.to_string(),
                encode_arrow_schema(&arrow_schema),
            ),
            KeyValue::new(RunManifest::PARQUET_KEY.to_string(), json),
        ];
        let file_metadata = FileMetaData::new(
            WriterVersion::PARQUET_1_0.as_num(),
            num_rows,
            Some(format!(
                "speedbench-record {} (closed after a write error)",
                env!("CARGO_PKG_VERSION")
            )),
            Some(kv),
            Arc::new(schema),
            None,
        );
        let metadata = ParquetMetaData::new(file_metadata, row_groups);

        // Encoded first and written with `write_all`: a write that stops
        // short at a file-size limit is an error here, not a footer cut
        // off (the metadata writer took a short write as done).
        let mut footer = Vec::new();
        ParquetMetaDataWriter::new(&mut footer, &metadata)
            .finish()
            .map_err(parquet_err)?;
        // Cutting first gives back the space the failed tail took.
        self.file.set_len(end).map_err(io)?;
        let mut out = &self.file;
        out.seek(SeekFrom::Start(end)).map_err(io)?;
        out.write_all(&footer).map_err(io)?;
        out.flush().map_err(io)?;
        self.file.sync_all().map_err(io)?;
        Ok(num_rows as u64)
    }
}

/// The manifest the salvaged footer carries: the run failed, with the
/// records that were kept.
fn failed_manifest_json(
    path: &Path,
    manifest: &RunManifest,
    records: u64,
) -> Result<String, RecordError> {
    let mut manifest = manifest.clone();
    manifest.status = RunStatus::Failed;
    manifest.record_count = records;
    manifest.schema_version = SCHEMA_VERSION.to_string();
    serde_json::to_string(&manifest).map_err(|e| RecordError::Metadata {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The leading row groups that lie wholly within `file_len` bytes, each
/// with the offset just past it.
fn complete_prefix(row_groups: &[RowGroupMetaData], file_len: u64) -> Vec<(usize, u64)> {
    let mut kept = Vec::new();
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
            break;
        }
        end = end.max(rg_end);
        kept.push((i, end));
    }
    kept
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
                w.append(&record(i)).unwrap();
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
        w.append(&record(5)).unwrap();
        let manifest = RunManifest {
            run_id: "r".into(),
            status: RunStatus::Failed,
            ..Default::default()
        };
        let err = RecordError::Metadata {
            path: path.clone(),
            message: "disk full".into(),
        };
        let closed = w.close_after_error(&manifest, err);
        assert_eq!((closed.rows, closed.readable), (5, true));
        assert!(closed.error.unwrap().to_string().contains("disk full"));
        let back = read_records_file(&path).unwrap();
        let ids: Vec<u64> = back.records.iter().map(|r| r.request_index).collect();
        assert_eq!(ids, [0, 1, 2, 3, 4]);
        assert_eq!(back.records[4], record(4));
        let m = back.manifest.unwrap();
        assert_eq!((m.status, m.record_count), (RunStatus::Failed, 5));
    }

    #[test]
    fn a_normal_close_keeps_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.parquet");
        let mut w = RecordWriter::create(&path).unwrap();
        w.append(&record(0)).unwrap();
        w.flush().unwrap();
        w.append(&record(1)).unwrap();
        let manifest = RunManifest {
            status: RunStatus::Completed,
            ..Default::default()
        };
        let closed = w.close_or_salvage(&manifest);
        assert_eq!((closed.rows, closed.readable), (2, true));
        assert!(closed.error.is_none());
        let back = read_records_file(&path).unwrap();
        assert_eq!(back.records.len(), 2);
        assert_eq!(back.manifest.unwrap().status, RunStatus::Completed);
    }

    #[test]
    fn nothing_flushed_leaves_an_empty_readable_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("records.parquet.partial");
        let mut w = RecordWriter::create(&path).unwrap();
        w.append(&record(0)).unwrap();
        let err = RecordError::Metadata {
            path: path.clone(),
            message: "disk full".into(),
        };
        let closed = w.close_after_error(&RunManifest::default(), err);
        assert_eq!((closed.rows, closed.readable), (0, true));
        assert!(read_records_file(&path).unwrap().records.is_empty());
    }
}
