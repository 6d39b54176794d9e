//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong writing or reading a records file.
///
/// The `Parquet`, `Write` and `Arrow` variants exist with the `parquet`
/// feature (on by default), as does everything that returns them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The file could not be opened, created or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The Parquet layer rejected the file (corrupt, truncated or not Parquet).
    #[error("{path}: not a readable Parquet records file: {source}")]
    #[cfg(feature = "parquet")]
    Parquet {
        /// The file involved.
        path: PathBuf,
        /// The underlying Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Writing the records file failed (a full disk, a file-size limit, an
    /// I/O error).
    #[error("{path}: cannot write: {source}")]
    #[cfg(feature = "parquet")]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// Arrow could not assemble or decode a batch.
    #[error("{path}: {source}")]
    #[cfg(feature = "parquet")]
    Arrow {
        /// The file involved.
        path: PathBuf,
        /// The underlying Arrow error.
        #[source]
        source: arrow_schema::ArrowError,
    },
    /// A column is missing or has the wrong type.
    #[error("{path}: column `{column}`: {message}")]
    Schema {
        /// The file involved.
        path: PathBuf,
        /// The offending column.
        column: String,
        /// What is wrong with it.
        message: String,
    },
    /// A value in one row breaks the schema's rules.
    #[error("{path}: row {row}, column `{column}`: {message}")]
    InvalidValue {
        /// The file involved.
        path: PathBuf,
        /// Row index within the file (0-based).
        row: usize,
        /// The offending column.
        column: String,
        /// What is wrong with the value.
        message: String,
    },
    /// A custom column's name or value breaks the rules of
    /// [`crate::custom`] (no `x_` prefix, declared twice, not declared, a
    /// value of another kind).
    #[error("custom column {column:?}: {message}")]
    CustomColumn {
        /// The column's name.
        column: String,
        /// What is wrong.
        message: String,
    },
    /// The run metadata stored in the file is not valid JSON of the expected shape.
    #[error("{path}: run metadata: {message}")]
    Metadata {
        /// The file involved.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// Another process holds the run directory's lock: a run is writing there.
    #[error("{dir}: another speedbench run is writing to this directory (its lock {lock} is held)")]
    RunDirBusy {
        /// The run directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The directory already holds a run, and overwriting was not allowed.
    #[error("{dir}: already holds a run ({found} exists); its results are kept")]
    RunDirOccupied {
        /// The run directory.
        dir: PathBuf,
        /// The first run file found there.
        found: String,
    },
}
