//! The shared request-record schema of speedbench.
//!
//! Every speedbench crate speaks in [`RequestRecord`]s: the client measures
//! one per request (one turn of a conversation), [`RecordWriter`] appends them
//! to a Parquet file as the run goes, and the metrics and report crates read
//! them back with [`read_records_file`]. The column layout is
//! [`record_schema`], documented column by column in `docs/record-schema.md`.
//!
//! # Features
//!
//! - `parquet` (default): the Arrow schema, [`RecordWriter`], the readers
//!   and the run directory (file names, lock). Without it the crate is the
//!   record types alone ([`RequestRecord`], [`RunManifest`], the category
//!   lists), with no Arrow or Parquet dependency: what
//!   `speedbench-metrics` needs to compute over records it is handed.
//!
//! ```
//! # #[cfg(feature = "parquet")] {
//! use speedbench_record::{RecordWriter, RequestRecord, RunManifest, SpecDecodeStats, SpecSource,
//!     read_records_file};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("records.parquet");
//! let mut writer = RecordWriter::create(&path)?;
//! writer.append(&RequestRecord {
//!     run_id: "run-1".into(),
//!     conversation_id: "q1".into(),
//!     category: Some("coding".into()),
//!     completion_tokens: Some(53),
//!     spec: Some(SpecDecodeStats {
//!         source: Some(SpecSource::Vllm),
//!         accepted_draft_tokens: 10,
//!         proposed_draft_tokens: 129,
//!         verify_steps: Some(43),
//!         acceptance_histogram: vec![39, 1, 0, 3],
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! })?;
//! writer.flush()?; // one row group is now on disk
//! writer.close(&RunManifest { run_id: "run-1".into(), ..Default::default() })?;
//!
//! let file = read_records_file(&path)?;
//! assert_eq!(file.records.len(), 1);
//! assert_eq!(file.records[0].spec.as_ref().unwrap().verify_steps, Some(43));
//! assert_eq!(file.manifest.unwrap().record_count, 1);
//! # }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![doc(test(attr(deny(warnings))))]
// Without `parquet` the docs still name the writer and readers it adds.
#![cfg_attr(not(feature = "parquet"), allow(rustdoc::broken_intra_doc_links))]

mod categories;
pub mod columns;
pub mod custom;
mod error;
#[cfg(feature = "parquet")]
mod io;
mod manifest;
#[cfg(feature = "parquet")]
mod phase_columns;
mod record;
#[cfg(feature = "parquet")]
mod rundir;
#[cfg(feature = "parquet")]
mod schema;
mod status;
mod tune;

pub use categories::{QUALITATIVE_CATEGORIES, SPEC_AL_BENCHMARKS, THROUGHPUT_TIERS};
pub use custom::{CUSTOM_COLUMN_PREFIX, CustomColumn, CustomKind, CustomValue};
pub use error::RecordError;
#[cfg(feature = "parquet")]
pub use io::{
    ClosedRecords, JOURNAL_FILE_NAME, JOURNAL_SUMS_FILE_NAME, JournalRecords, RECORDS_FILE_NAME,
    ROW_GROUP_MEMORY, ROW_GROUP_ROWS, RecordWriter, RecordsFile, SCHEMA_VERSION_KEY,
    VisitedRecords, read_journal, read_records, read_records_file, read_records_file_with,
    visit_records,
};
pub use manifest::{MeasuredStart, RunManifest, RunShard, redact_url};
pub use record::{
    ErrorKind, HttpPhases, RequestRecord, ServerTimings, SpecDecodeStats, SpecSource,
};
#[cfg(feature = "parquet")]
pub use rundir::{
    GPU_TELEMETRY_FILE_NAME, HTTP_TRACE_FILE_NAME, LOCK_FILE_NAME, PARTIAL_RECORDS_FILE_NAME,
    RAW_RESPONSES_FILE_NAME, RUN_FILE_NAMES, RunDirLock, SERVER_METRICS_CSV_FILE_NAME,
    SERVER_METRICS_FILE_NAME, SERVER_METRICS_PARQUET_FILE_NAME, SUMMARY_FILE_NAME, run_is_live,
};
#[cfg(feature = "parquet")]
pub use schema::{SCHEMA_VERSION, record_schema};
pub use status::RunStatus;
pub use tune::{TuneConfiguration, TuneManifest, TuneRun};
