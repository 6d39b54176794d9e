//! Writing records to Parquet incrementally and reading them back.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

mod journal;
mod salvage;
mod trim;

pub use journal::{JOURNAL_FILE_NAME, JOURNAL_SUMS_FILE_NAME, JournalRecords, read_journal};
pub use salvage::ClosedRecords;

use crate::columns;
use crate::custom::{CustomColumn, check_unique};
use crate::error::RecordError;
use crate::manifest::RunManifest;
use crate::record::RequestRecord;
use crate::schema::{
    BatchBuilder, SCHEMA_VERSION, batch_to_records, conform_batch, custom_columns_of, schema_with,
    visit_batch,
};

/// Conventional file name of a run's records inside its artifact directory.
pub const RECORDS_FILE_NAME: &str = "records.parquet";

/// Parquet key-value metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "speedbench.schema_version";

/// Numeric columns whose values rarely repeat: written without a
/// dictionary. (Texts keep theirs: repeated outputs and prompts shrink by
/// it, and the writer falls back to plain pages once a dictionary passes
/// 1 MiB.)
const UNIQUE_VALUED_COLUMNS: &[&str] = &[
    columns::REQUEST_INDEX,
    columns::START_TIME,
    columns::END_TIME,
    columns::TTFT_NS,
    columns::E2E_LATENCY_NS,
    columns::TIMINGS_PROMPT_MS,
    columns::TIMINGS_PROMPT_PER_SECOND,
    columns::TIMINGS_PREDICTED_MS,
    columns::TIMINGS_PREDICTED_PER_SECOND,
    // The HTTP phases' times (a new connection's DNS and connect are
    // mostly zero, and keep theirs).
    columns::HTTP_BLOCKED_NS,
    columns::HTTP_SENDING_NS,
    columns::HTTP_WAITING_NS,
    columns::HTTP_RECEIVING_NS,
];

/// Rows per data page: a page is compressed once full, so the row group in
/// progress holds its rows compressed but for the last page's.
const PAGE_ROWS: usize = 1_024;

/// List columns whose items rarely repeat: written without a dictionary.
const UNIQUE_VALUED_LISTS: &[&str] = &[columns::INTER_CHUNK_LATENCIES_NS];

/// The most records a row group holds while a crash journal keeps the
/// flushed records (see [`RecordWriter`]).
pub const ROW_GROUP_ROWS: usize = 32_768;

/// The most memory, in bytes, the row group in progress takes (its encoded
/// pages) while a crash journal keeps the flushed records: long outputs cut
/// it before [`ROW_GROUP_ROWS`].
pub const ROW_GROUP_MEMORY: usize = 4 << 20;

/// Appends [`RequestRecord`]s to a Parquet file.
///
/// Records are buffered in Arrow builders; [`RecordWriter::flush`] hands the
/// buffer over, so the caller decides how much a crash may cost (the client
/// flushes at least once a second). Without a crash journal each flush is
/// one row group, handed to the operating system. With one
/// ([`RecordWriter::with_journal`]) each flush is written to the journal,
/// which holds it against a crash, and the Parquet row group is cut only
/// every [`ROW_GROUP_ROWS`] records or [`ROW_GROUP_MEMORY`] bytes of encoded
/// rows: the writer keeps every row group's metadata until it closes, so a
/// row group a second would make a run of hours grow without bound.
/// [`RecordWriter::close`] writes the footer, without which no Parquet
/// reader can open the file: call it on every exit path, including Ctrl-C.
pub struct RecordWriter {
    path: PathBuf,
    writer: ArrowWriter<File>,
    buffer: BatchBuilder,
    custom: Vec<CustomColumn>,
    /// Records flushed: in a complete row group, or in the one in progress
    /// and the journal.
    rows_written: u64,
    /// The crash journal, when asked for ([`RecordWriter::with_journal`]).
    journal: Option<journal::Journal>,
    /// Why the journal stopped being written, when it did.
    journal_error: Option<RecordError>,
}

impl RecordWriter {
    /// Creates (or truncates) `path` and writes the Parquet header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self, RecordError> {
        Self::create_with_columns(path, &[])
    }

    /// Creates (or truncates) `path` for records that also carry `custom`
    /// columns (see [`crate::custom`]), stored after the record schema's, in
    /// the order given. Two columns of one name are refused.
    pub fn create_with_columns(
        path: impl AsRef<Path>,
        custom: &[CustomColumn],
    ) -> Result<Self, RecordError> {
        check_unique(custom)?;
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| RecordError::Io {
            path: path.clone(),
            source,
        })?;
        let mut props = WriterProperties::builder();
        // A dictionary of values that never repeat (ids, times, latencies)
        // saves nothing and holds every value of the row group in progress
        // again, in a hash table beside the pages: of a soak's records, the
        // row group in progress took ~110 B a record with them, ~37 without.
        for column in UNIQUE_VALUED_COLUMNS {
            props = props.set_column_dictionary_enabled(ColumnPath::from(*column), false);
        }
        for list in UNIQUE_VALUED_LISTS {
            let path = vec![list.to_string(), "list".into(), "item".into()];
            props = props.set_column_dictionary_enabled(ColumnPath::new(path), false);
        }
        let props = props
            .set_data_page_row_count_limit(PAGE_ROWS)
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_statistics_truncate_length(Some(64))
            .set_offset_index_disabled(true)
            .set_created_by(format!("speedbench-record {}", env!("CARGO_PKG_VERSION")))
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_string(),
                SCHEMA_VERSION.to_string(),
            )]))
            .build();
        let writer =
            ArrowWriter::try_new(file, schema_with(custom), Some(props)).map_err(|source| {
                RecordError::Parquet {
                    path: path.clone(),
                    source,
                }
            })?;
        Ok(RecordWriter {
            path,
            writer,
            buffer: BatchBuilder::new(custom),
            custom: custom.to_vec(),
            rows_written: 0,
            journal: None,
            journal_error: None,
        })
    }

    /// Also writes every flushed batch to a crash journal at `path` (an
    /// Arrow IPC stream, see [`read_journal`]), so a process killed before
    /// [`Self::close`] leaves its flushed records readable. The journal is
    /// removed once the Parquet file is closed, or cut back readable after
    /// a failed write; it stays when neither worked.
    pub fn with_journal(mut self, path: impl AsRef<Path>) -> Result<Self, RecordError> {
        self.journal = Some(journal::Journal::create(
            path.as_ref(),
            &schema_with(&self.custom),
        )?);
        Ok(self)
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The custom columns this file was created with.
    pub fn custom_columns(&self) -> &[CustomColumn] {
        &self.custom
    }

    /// Buffers one record; nothing reaches the file until [`Self::flush`].
    ///
    /// A custom value whose column was not declared, or of another kind
    /// than its column's, is refused with an error naming the file, the row
    /// it would have been and the column; the record is not buffered.
    pub fn append(&mut self, record: &RequestRecord) -> Result<(), RecordError> {
        let row = self.rows_written as usize + self.buffer.len();
        self.buffer
            .push(record)
            .map_err(|(column, message)| RecordError::InvalidValue {
                path: self.path.clone(),
                row,
                column,
                message,
            })
    }

    /// Number of records appended but not yet flushed.
    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// Number of records flushed so far (see [`Self::flush`]).
    pub fn rows_written(&self) -> u64 {
        self.rows_written
    }

    /// Number of flushed records in complete row groups of the file: those
    /// a footer written now would hold.
    pub fn rows_in_row_groups(&self) -> u64 {
        self.rows_written - self.writer.in_progress_rows() as u64
    }

    /// Hands the buffered records over: to the journal and the row group in
    /// progress, which is cut when full (see [`RecordWriter`]), or, without
    /// a journal, as one row group of their own.
    pub fn flush(&mut self) -> Result<(), RecordError> {
        let n = self.buffer.len();
        if n == 0 {
            return Ok(());
        }
        let batch = self.buffer.finish().map_err(|source| RecordError::Arrow {
            path: self.path.clone(),
            source,
        })?;
        self.writer
            .write(&batch)
            .map_err(|source| RecordError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.rows_written += n as u64;
        // The journal is a second copy: when it fails (a full disk), the
        // run goes on with the Parquet file alone, a row group per flush
        // from then on, starting with the rows it held.
        if let Some(journal) = &mut self.journal
            && let Err(e) = journal.append(&batch)
        {
            self.journal = None;
            self.journal_error = Some(e);
        }
        // The encoder's buffers, and the pages it finished (which
        // `memory_size` leaves out: the writer keeps them in memory too).
        let memory = self
            .writer
            .memory_size()
            .max(self.writer.in_progress_size());
        let full = self.writer.in_progress_rows() >= ROW_GROUP_ROWS || memory >= ROW_GROUP_MEMORY;
        if self.journal.is_none() || full {
            self.cut_row_group()?;
        }
        if full {
            // A full row group's pages were just freed: a soak of hours
            // keeps its resident size flat only if the allocator hands
            // them back rather than holding them for reuse.
            trim::release_freed_memory();
        }
        Ok(())
    }

    /// Writes the row group in progress to the file. `sync` empties the
    /// writer's buffer into the file: a complete row group is with the
    /// operating system, not in this process.
    fn cut_row_group(&mut self) -> Result<(), RecordError> {
        self.writer
            .flush()
            .and_then(|_| Ok(self.writer.sync()?))
            .map_err(|source| RecordError::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// Why the crash journal stopped being written (a full disk), if it
    /// did: from then on a killed process loses what it had not closed.
    pub fn journal_error(&self) -> Option<&RecordError> {
        self.journal_error.as_ref()
    }

    /// Flushes, stores the manifest in the footer and closes the file.
    ///
    /// The manifest's `record_count` is set to the number of rows written.
    /// Returns that number.
    pub fn close(mut self, manifest: &RunManifest) -> Result<u64, RecordError> {
        self.flush()?;
        let mut manifest = manifest.clone();
        manifest.record_count = self.rows_written;
        manifest.schema_version = SCHEMA_VERSION.to_string();
        let json = serde_json::to_string(&manifest).map_err(|e| RecordError::Metadata {
            path: self.path.clone(),
            message: e.to_string(),
        })?;
        self.writer
            .append_key_value_metadata(KeyValue::new(RunManifest::PARQUET_KEY.to_string(), json));
        self.writer.close().map_err(|source| RecordError::Write {
            path: self.path.clone(),
            source,
        })?;
        if let Some(journal) = self.journal.take() {
            journal.remove();
        }
        Ok(self.rows_written)
    }
}

/// A records file read back: its manifest and every record in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordsFile {
    /// The manifest stored in the footer, when present.
    pub manifest: Option<RunManifest>,
    /// Every record, in the order they were written.
    pub records: Vec<RequestRecord>,
    /// The file's custom (`x_`) columns, in file order, with the kind each
    /// was read as: pass them to [`RecordWriter::create_with_columns`] to
    /// write the records again with their values.
    pub custom_columns: Vec<CustomColumn>,
}

/// Reads every record of a records file, checking the schema as it goes.
///
/// Errors name the file, and for bad values the row and column.
pub fn read_records_file(path: impl AsRef<Path>) -> Result<RecordsFile, RecordError> {
    read_records_file_with(path, None)
}

/// Reads a records file decoding only `columns` (names from
/// [`crate::record_schema`]); every other field of the returned records is
/// left at its default (empty, zero, `None`).
///
/// A report that needs five columns of a million-row file skips decoding
/// the other thirty, the output text above all. `None` reads everything.
pub fn read_records_file_with(
    path: impl AsRef<Path>,
    columns: Option<&[&str]>,
) -> Result<RecordsFile, RecordError> {
    let mut batches = RecordBatches::open(path.as_ref(), columns)?;
    // Sized once from the footer's row count: growing a vector of a
    // million records by doubling moved about a gigabyte (half the time of
    // a report over such a file went to those copies and page faults).
    let mut records = Vec::with_capacity(batches.rows);
    while let Some(batch) = batches.next_batch()? {
        batch_to_records(
            &batch,
            &batches.source,
            records.len(),
            &batches.custom_columns,
            &mut records,
        )?;
    }
    Ok(RecordsFile {
        manifest: batches.manifest,
        records,
        custom_columns: batches.custom_columns,
    })
}

/// What [`visit_records`] read besides the records it showed.
#[derive(Debug, Clone, PartialEq)]
pub struct VisitedRecords {
    /// The manifest stored in the footer, when present.
    pub manifest: Option<RunManifest>,
    /// How many records were visited: every row of the file.
    pub records: usize,
    /// The file's custom (`x_`) columns, as [`RecordsFile::custom_columns`].
    pub custom_columns: Vec<CustomColumn>,
}

/// Shows every record of a records file to `visit`, in file order, without
/// holding them: the fold for a figure over a file larger than memory, or a
/// million records that a report only sums.
///
/// `columns` decodes only those columns, as in [`read_records_file_with`].
/// `visit` sees one record refilled row by row (its strings keep their
/// allocations), so nothing is allocated per record; clone what must
/// outlive the call. Errors name the file, and for bad values the row and
/// column; the rows before a bad one have been visited.
///
/// ```
/// use speedbench_record::{RecordWriter, RequestRecord, RunManifest, columns, visit_records};
///
/// let dir = std::env::temp_dir().join(format!("visit-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("records.parquet");
/// let mut writer = RecordWriter::create(&path)?;
/// for tokens in [10, 20, 30] {
///     writer.append(&RequestRecord { completion_tokens: Some(tokens), ..Default::default() })?;
/// }
/// writer.close(&RunManifest::default())?;
///
/// let mut total = 0;
/// let visited = visit_records(&path, Some(&[columns::COMPLETION_TOKENS]), |r| {
///     total += r.completion_tokens.unwrap_or(0);
/// })?;
/// assert_eq!((visited.records, total), (3, 60));
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn visit_records(
    path: impl AsRef<Path>,
    columns: Option<&[&str]>,
    mut visit: impl FnMut(&RequestRecord),
) -> Result<VisitedRecords, RecordError> {
    // The read-back of a long run is its peak: begin it from what the
    // run's writing left, not from what the allocator kept of it.
    trim::release_freed_memory();
    let mut batches = RecordBatches::open(path.as_ref(), columns)?;
    let mut scratch = RequestRecord::default();
    let mut visited = 0;
    while let Some(batch) = batches.next_batch()? {
        visit_batch(
            &batch,
            &batches.source,
            visited,
            &batches.custom_columns,
            &mut scratch,
            &mut visit,
        )?;
        visited += batch.num_rows();
    }
    Ok(VisitedRecords {
        manifest: batches.manifest,
        records: visited,
        custom_columns: batches.custom_columns,
    })
}

/// A records file opened for reading: its footer checked, its batches
/// conformed to the record schema as they come.
struct RecordBatches {
    path: PathBuf,
    /// The path as error messages name it.
    source: String,
    manifest: Option<RunManifest>,
    custom_columns: Vec<CustomColumn>,
    /// Rows in the file, from the footer.
    rows: usize,
    /// Only some columns are decoded (the others are filled with nulls).
    projected: bool,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    /// Rows read so far.
    read: usize,
}

impl RecordBatches {
    fn open(path: &Path, columns: Option<&[&str]>) -> Result<RecordBatches, RecordError> {
        let file = File::open(path).map_err(|source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let parquet_err = |source| RecordError::Parquet {
            path: path.to_path_buf(),
            source,
        };
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_err)?;
        let manifest = manifest_from(
            path,
            builder.metadata().file_metadata().key_value_metadata(),
        )?;
        if let Some(columns) = columns {
            let file_schema = builder.schema().clone();
            let mut roots = Vec::with_capacity(columns.len());
            for name in columns {
                let index = file_schema
                    .index_of(name)
                    .map_err(|_| RecordError::Schema {
                        path: path.to_path_buf(),
                        column: name.to_string(),
                        message: "column is missing".into(),
                    })?;
                roots.push(index);
            }
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder = builder.with_projection(mask);
        }
        let source = path.display().to_string();
        let custom_columns = custom_columns_of(builder.schema(), columns, &source)?;
        let rows = usize::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let reader = builder.with_batch_size(8192).build().map_err(parquet_err)?;
        Ok(RecordBatches {
            path: path.to_path_buf(),
            source,
            manifest,
            custom_columns,
            rows,
            projected: columns.is_some(),
            reader,
            read: 0,
        })
    }

    /// The next batch, conformed: other tools' widths (LargeUtf8,
    /// Utf8View, LargeList, ...) become ours.
    fn next_batch(&mut self) -> Result<Option<arrow_array::RecordBatch>, RecordError> {
        let Some(batch) = self.reader.next() else {
            return Ok(None);
        };
        let batch = batch.map_err(|source| RecordError::Arrow {
            path: self.path.clone(),
            source,
        })?;
        let batch = conform_batch(
            &batch,
            &self.source,
            self.read,
            self.projected,
            &self.custom_columns,
        )?;
        self.read += batch.num_rows();
        Ok(Some(batch))
    }
}

/// Reads only the records of a records file (see [`read_records_file`]).
pub fn read_records(path: impl AsRef<Path>) -> Result<Vec<RequestRecord>, RecordError> {
    read_records_file(path).map(|f| f.records)
}

fn manifest_from(
    path: &Path,
    kv: Option<&Vec<KeyValue>>,
) -> Result<Option<RunManifest>, RecordError> {
    // The last entry wins, so a writer may append a newer manifest.
    let Some(json) = kv
        .into_iter()
        .flatten()
        .rev()
        .find(|kv| kv.key == RunManifest::PARQUET_KEY)
        .and_then(|kv| kv.value.as_deref())
    else {
        return Ok(None);
    };
    serde_json::from_str(json)
        .map(Some)
        .map_err(|e| RecordError::Metadata {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
}
