//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong loading a dataset.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid row.
    #[error("{source_name}:{line}: {message}")]
    InvalidRow {
        /// The file (or other source) involved.
        source_name: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong, naming the field.
        message: String,
    },
    /// Rows still hold the upstream placeholder instead of prompt text.
    #[error(
        "{source_name}: {count} row(s) still hold the SPEED-Bench placeholder instead of prompt text \
         (first: {first_ids}); resolve the dataset from its upstream sources before benchmarking it"
    )]
    UnresolvedPlaceholders {
        /// The file involved.
        source_name: String,
        /// How many rows are affected.
        count: usize,
        /// The first few affected rows as `line N (id)`.
        first_ids: String,
    },
    /// The file holds no rows.
    #[error("{source_name}: no rows")]
    Empty {
        /// The file involved.
        source_name: String,
    },
    /// A category filter matched nothing.
    #[error(
        "dataset {dataset}: no rows in categories {wanted:?}; available categories: {available:?}"
    )]
    NoRowsMatch {
        /// The dataset filtered.
        dataset: String,
        /// The requested categories.
        wanted: Vec<String>,
        /// The categories the dataset has.
        available: Vec<String>,
    },
}
