//! The crash journal: every flushed batch of records also goes to an Arrow
//! IPC stream beside the Parquet file.
//!
//! A Parquet file is unreadable until its footer is written, so a process
//! killed mid-run (SIGKILL, the out-of-memory killer, an abort) used to
//! leave a `records.parquet.partial` no reader could open, with every
//! record it had flushed. An IPC stream needs no footer: each batch is a
//! self-delimited message, so whatever reached the file before the kill
//! reads back, up to a torn last message. The journal is removed once the
//! Parquet file is closed; [`read_journal`] reads what a dead run left.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::SchemaRef;

use crate::custom::CustomColumn;
use crate::error::RecordError;
use crate::record::RequestRecord;
use crate::schema::{batch_to_records, conform_batch, custom_columns_of};

/// The crash journal's file name in a run directory.
pub const JOURNAL_FILE_NAME: &str = "records.journal.arrows";

/// The open journal of a records file being written.
pub(crate) struct Journal {
    path: PathBuf,
    writer: StreamWriter<File>,
}

impl Journal {
    /// Creates (or truncates) `path` and writes the stream's schema.
    pub(crate) fn create(path: &Path, schema: &SchemaRef) -> Result<Journal, RecordError> {
        let file = File::create(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let writer = StreamWriter::try_new(file, schema).map_err(|source| RecordError::Arrow {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Journal {
            path: path.to_path_buf(),
            writer,
        })
    }

    /// Appends one batch and hands it to the operating system.
    pub(crate) fn append(&mut self, batch: &RecordBatch) -> Result<(), RecordError> {
        self.writer
            .write(batch)
            .and_then(|_| self.writer.flush())
            .map_err(|source| RecordError::Arrow {
                path: self.path.clone(),
                source,
            })
    }

    /// The records are safe elsewhere (a closed Parquet file): the journal
    /// goes.
    pub(crate) fn remove(self) {
        let path = self.path.clone();
        drop(self.writer);
        let _ = std::fs::remove_file(path);
    }
}

/// What a crash journal held.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalRecords {
    /// Every record of every complete batch, in the order written.
    pub records: Vec<RequestRecord>,
    /// The caller-defined columns the records carry.
    pub custom_columns: Vec<CustomColumn>,
    /// The file ended inside a batch (the process died writing it): that
    /// batch is lost, everything before it is here.
    pub torn: bool,
}

/// Reads the records a crash journal holds: every complete batch, stopping
/// at a torn last one. An error only when not even the stream's schema can
/// be read (nothing was ever flushed) or a complete batch breaks the
/// record schema (naming the file, row and column).
pub fn read_journal(path: impl AsRef<Path>) -> Result<JournalRecords, RecordError> {
    let path = path.as_ref();
    let source = path.display().to_string();
    let file = File::open(path).map_err(|source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let reader = StreamReader::try_new(file, None).map_err(|source| RecordError::Arrow {
        path: path.to_path_buf(),
        source,
    })?;
    let custom_columns = custom_columns_of(&reader.schema(), None, &source)?;
    let mut records = Vec::new();
    let mut torn = false;
    for batch in reader {
        let Ok(batch) = batch else {
            torn = true;
            break;
        };
        let first_row = records.len();
        let batch = conform_batch(&batch, &source, first_row, false, &custom_columns)?;
        batch_to_records(&batch, &source, first_row, &custom_columns, &mut records)?;
    }
    Ok(JournalRecords {
        records,
        custom_columns,
        torn,
    })
}
