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
//!
//! Each message (the schema, then each batch) is checksummed as it is
//! written: a line `END XXH64` per message in [`JOURNAL_SUMS_FILE_NAME`]
//! beside it (the byte offset the message ends at, and the xxHash64 of its
//! bytes), so a bit flipped on disk is found, not read back as a record
//! whose text quietly changed.

use std::fs::File;
use std::hash::Hasher;
use std::io::Write;
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

/// The crash journal's checksums, beside it: one line per message.
pub const JOURNAL_SUMS_FILE_NAME: &str = "records.journal.sums";

/// The open journal of a records file being written.
pub(crate) struct Journal {
    path: PathBuf,
    writer: StreamWriter<Summed>,
    sums_path: PathBuf,
    sums: File,
}

/// The journal file, hashing what goes through it since the last message.
struct Summed {
    file: File,
    hasher: twox_hash::XxHash64,
    written: u64,
}

impl Write for Summed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.hasher.write(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Journal {
    /// Creates (or truncates) `path` and writes the stream's schema (and
    /// its checksum, in the sums file beside it).
    pub(crate) fn create(path: &Path, schema: &SchemaRef) -> Result<Journal, RecordError> {
        let io = |path: &Path, source| RecordError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::create(path).map_err(|e| io(path, e))?;
        let sums_path = path.with_file_name(JOURNAL_SUMS_FILE_NAME);
        let sums = File::create(&sums_path).map_err(|e| io(&sums_path, e))?;
        let summed = Summed {
            file,
            hasher: twox_hash::XxHash64::with_seed(0),
            written: 0,
        };
        let writer =
            StreamWriter::try_new(summed, schema).map_err(|source| RecordError::Arrow {
                path: path.to_path_buf(),
                source,
            })?;
        let mut journal = Journal {
            path: path.to_path_buf(),
            writer,
            sums_path,
            sums,
        };
        journal.checksum()?;
        Ok(journal)
    }

    /// Appends one batch and hands it to the operating system, then its
    /// checksum.
    pub(crate) fn append(&mut self, batch: &RecordBatch) -> Result<(), RecordError> {
        self.writer
            .write(batch)
            .and_then(|_| self.writer.flush())
            .map_err(|source| RecordError::Arrow {
                path: self.path.clone(),
                source,
            })?;
        self.checksum()
    }

    /// Writes the line of the message just written: where it ends, and the
    /// hash of its bytes.
    fn checksum(&mut self) -> Result<(), RecordError> {
        let summed = self.writer.get_mut();
        let line = format!("{} {:016x}\n", summed.written, summed.hasher.finish());
        summed.hasher = twox_hash::XxHash64::with_seed(0);
        self.sums
            .write_all(line.as_bytes())
            .and_then(|_| self.sums.flush())
            .map_err(|source| RecordError::Io {
                path: self.sums_path.clone(),
                source,
            })
    }

    /// The records are safe elsewhere (a closed Parquet file): the journal
    /// goes.
    pub(crate) fn remove(self) {
        let (path, sums) = (self.path.clone(), self.sums_path.clone());
        drop(self.writer);
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(sums);
    }
}

/// What a crash journal held.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalRecords {
    /// Every record of every complete batch, in the order written, up to
    /// the first that fails its checksum.
    pub records: Vec<RequestRecord>,
    /// The caller-defined columns the records carry.
    pub custom_columns: Vec<CustomColumn>,
    /// The file ended inside a batch (the process died writing it): that
    /// batch is lost, everything before it is here.
    pub torn: bool,
    /// Whether the batches were checked against the checksums written with
    /// them (a journal written before they existed has none).
    pub checked: bool,
    /// The first batch (0-based) whose bytes do not match their checksum,
    /// when one does not: a file changed on disk. It and every batch after
    /// it are left out of [`Self::records`].
    pub corrupt_batch: Option<usize>,
    /// Records of the complete batches after the last checksum (a process
    /// killed between a batch and its checksum line): read, not checked.
    pub unchecked_records: usize,
}

/// Reads the records a crash journal holds: every complete batch, stopping
/// at a torn last one or at the first whose bytes do not match the
/// checksum written with them ([`JournalRecords::corrupt_batch`]). An error
/// only when not even the stream's schema can be read (nothing was ever
/// flushed) or a complete batch breaks the record schema (naming the file,
/// row and column).
pub fn read_journal(path: impl AsRef<Path>) -> Result<JournalRecords, RecordError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let sums = read_sums(&path.with_file_name(JOURNAL_SUMS_FILE_NAME));
    let verified = sums.as_deref().map(|sums| verify(&bytes, sums));
    // Without checksums, the whole file; with them, the messages that match.
    let (readable, corrupt_batch, checked_end) = match verified {
        None => (bytes.len(), None, None),
        Some(Verified::Good { end }) => (bytes.len(), None, Some(end)),
        Some(Verified::Bad { end, batch }) => (end, Some(batch), Some(end)),
    };
    let (mut got, batch_ends) = read_stream(path, &bytes[..readable])?;
    got.checked = sums.is_some();
    got.corrupt_batch = corrupt_batch;
    if let (Some(end), None) = (checked_end, corrupt_batch) {
        // Batches ending past the last checksum line were read unchecked.
        let checked = batch_ends
            .iter()
            .rev()
            .find(|(batch_end, _)| *batch_end <= end)
            .map_or(0, |(_, records)| *records);
        got.unchecked_records = got.records.len() - checked;
    }
    Ok(got)
}

/// The `(end, hash)` of each message a sums file lists; `None` without the
/// file. A torn last line (the process died writing it) is left out.
fn read_sums(path: &Path) -> Option<Vec<(usize, u64)>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .map_while(|line| {
                let (end, hash) = line.split_once(' ')?;
                Some((end.parse().ok()?, u64::from_str_radix(hash, 16).ok()?))
            })
            .collect(),
    )
}

/// How a journal's bytes compare with its checksums.
enum Verified {
    /// Every listed message that is whole matches; they end at `end`.
    Good { end: usize },
    /// Batch `batch` (0-based, the schema message not counted) does not
    /// match; the messages before it end at `end`.
    Bad { end: usize, batch: usize },
}

fn verify(bytes: &[u8], sums: &[(usize, u64)]) -> Verified {
    let mut start = 0;
    for (i, &(end, hash)) in sums.iter().enumerate() {
        if end > bytes.len() || end < start {
            // Torn by the kill: the stream reader finds the torn batch.
            break;
        }
        if twox_hash::XxHash64::oneshot(0, &bytes[start..end]) != hash {
            return Verified::Bad {
                end: start,
                batch: i.saturating_sub(1),
            };
        }
        start = end;
    }
    Verified::Good { end: start }
}

/// The records of an IPC stream's complete batches, and where each batch
/// ends in `bytes` with the records read up to it.
fn read_stream(
    path: &Path,
    bytes: &[u8],
) -> Result<(JournalRecords, Vec<(usize, usize)>), RecordError> {
    let source = path.display().to_string();
    // Unbuffered: the cursor's position after a batch is where it ends.
    let mut reader =
        StreamReader::try_new(std::io::Cursor::new(bytes), None).map_err(|source| {
            RecordError::Arrow {
                path: path.to_path_buf(),
                source,
            }
        })?;
    let custom_columns = custom_columns_of(&reader.schema(), None, &source)?;
    let mut records = Vec::new();
    let mut ends = Vec::new();
    let mut torn = false;
    while let Some(batch) = reader.next() {
        let Ok(batch) = batch else {
            torn = true;
            break;
        };
        let first_row = records.len();
        let batch = conform_batch(&batch, &source, first_row, false, &custom_columns)?;
        batch_to_records(&batch, &source, first_row, &custom_columns, &mut records)?;
        ends.push((reader.get_ref().position() as usize, records.len()));
    }
    let got = JournalRecords {
        records,
        custom_columns,
        torn,
        checked: false,
        corrupt_batch: None,
        unchecked_records: 0,
    };
    Ok((got, ends))
}
