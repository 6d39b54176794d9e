//! The error type of this crate.
//!
//! [`DatasetError`] has a few kinds, each with its own detail enum: a file
//! that cannot be read ([`DatasetError::Io`]), content that is not valid rows
//! ([`ContentError`]), a dataset that is not there ([`LookupError`]) and,
//! with the `hub` feature, a request that failed ([`FetchError`]), bytes that
//! are not what was recorded ([`IntegrityError`]) and placeholder resolution
//! that failed ([`ResolveError`]). Causes are kept as
//! [`source`](std::error::Error::source): an I/O error, the HTTP client's
//! error (connection refused, TLS, DNS), the Parquet reader's error.
//!
//! Messages name the file, row, field or URL involved, and say what to do in
//! terms of this library (environment variables, [`Resolver`](crate::Resolver)
//! modes); they name no command-line flag: a program built on this crate adds
//! its own hints when it reports the error.

use std::path::PathBuf;

/// A boxed cause, kept as the `source` of an error.
pub type BoxedCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong finding, fetching, resolving or loading a
/// dataset.
///
/// Every message names the file, row, field or URL involved. No variant ever
/// holds a Hub token: URLs carry none, and headers are never formatted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DatasetError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file's content is not valid rows.
    #[error(transparent)]
    Content(#[from] ContentError),
    /// The dataset asked for is not there.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// A request to the Hub or a download failed.
    #[cfg(feature = "hub")]
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// Downloaded, cached or bundled bytes are not what was recorded.
    #[cfg(feature = "hub")]
    #[error(transparent)]
    Integrity(#[from] IntegrityError),
    /// SPEED-Bench placeholder rows could not be resolved.
    #[cfg(feature = "hub")]
    #[error(transparent)]
    Resolve(#[from] ResolveError),
}

/// A file's content is not valid rows.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContentError {
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
    /// A Parquet file could not be read, or lacks a needed column.
    #[error("{path}: {message}")]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the column (and quoting the cause).
        message: String,
        /// The Parquet or Arrow reader's error, if it reported one.
        #[source]
        source: Option<BoxedCause>,
    },
}

/// The dataset asked for is not there.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// A dataset name is not registered (see [`crate::registry()`]).
    #[error("unknown dataset {name:?}{}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default())]
    UnknownDataset {
        /// The name asked for.
        name: String,
        /// The closest registered name, when one is close.
        suggestion: Option<String>,
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
    /// A SPEED-Bench config name is not one of
    /// [`crate::registry::SPEED_BENCH_CONFIGS`].
    #[error("unknown SPEED-Bench config {config:?}{}; the configs are {}",
        suggestion.as_ref().map(|s| format!(" (did you mean {s:?}?)")).unwrap_or_default(),
        configs.join(", "))]
    UnknownBenchConfig {
        /// The name asked for.
        config: String,
        /// The closest config, when one is close.
        suggestion: Option<String>,
        /// Every config.
        configs: Vec<String>,
    },
    /// The category selection names "all" and other categories too.
    #[error(
        "category \"all\" means every category and cannot be combined with others \
             (also given: {others:?})"
    )]
    AllCategoriesWithOthers {
        /// The other names given.
        others: Vec<String>,
    },
    /// Categories asked for that no row has (speed_bench.py refuses them
    /// too: a typo would otherwise run a smaller benchmark than asked).
    #[error(
        "dataset {dataset}: no rows in categor{} {}; available categories: {}",
        if unknown.len() == 1 { "y" } else { "ies" },
        unknown.iter().map(|c| format!("{c:?}")).collect::<Vec<_>>().join(", "),
        available.join(", ")
    )]
    UnknownCategories {
        /// The dataset filtered.
        dataset: String,
        /// The names no row has, in the order given.
        unknown: Vec<String>,
        /// The categories the dataset has.
        available: Vec<String>,
    },
    /// The dataset lives outside the Hub: its file must be put in place.
    #[error(
        "{dataset} lives on {location}, not on the Hub: download that file and place it at {path}"
    )]
    NotOnHub {
        /// The registry name.
        dataset: String,
        /// Where the file is published.
        location: String,
        /// Where the dataset cache expects it.
        path: PathBuf,
    },
}

/// A request to the Hub or a download failed.
#[cfg(feature = "hub")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// A Hub request failed to complete (connection, TLS, timeout, bad URL).
    #[error("Hugging Face Hub request {url}: {message}")]
    Network {
        /// The URL (never with credentials).
        url: String,
        /// What happened, with the cause chain.
        message: String,
        /// The HTTP client's error, when there is one (absent for a
        /// deadline speedbench enforces itself, or too many redirects).
        #[source]
        source: Option<BoxedCause>,
    },
    /// A download from outside the Hub (the prepare script) failed.
    #[error("download {url}: {message}")]
    Download {
        /// The URL.
        url: String,
        /// What happened.
        message: String,
        /// The HTTP client's error, when there is one (absent for an error
        /// status).
        #[source]
        source: Option<BoxedCause>,
    },
    /// The Hub answered with an error status.
    #[error("Hugging Face Hub {url}: HTTP {status}: {message}")]
    Status {
        /// The URL.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The Hub's `X-Error-Code`/`X-Error-Message` or body, and what to do.
        message: String,
    },
    /// A gated repository (cais/hle) cannot be read with the credentials here.
    #[error("{message}")]
    Gated {
        /// The gated repository, e.g. `cais/hle`.
        repo: String,
        /// Why access failed.
        reason: GateReason,
        /// The full, actionable message.
        message: String,
    },
    /// Offline mode (`HF_HUB_OFFLINE`) and the file is not in the cache.
    #[error(
        "HF_HUB_OFFLINE is set and {what} is not in the Hub cache {cache}; run once with network \
         access (or unset HF_HUB_OFFLINE), or pre-stage the dataset into a bundle on a connected \
         machine and import that bundle here"
    )]
    Offline {
        /// What was missing (repo, revision, file).
        what: String,
        /// The Hub cache directory searched.
        cache: PathBuf,
    },
    /// A Hub API answer could not be understood.
    #[error("{url}: unexpected Hub answer: {message}")]
    BadAnswer {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// A repository revision has no Parquet file for a config and split.
    #[error(
        "{repo}@{revision}: no Parquet file for config {config:?} split {split:?} (files seen: {seen})"
    )]
    NoParquetFiles {
        /// The repository.
        repo: String,
        /// The revision (commit).
        revision: String,
        /// The config.
        config: String,
        /// The split.
        split: String,
        /// A few of the paths present, for diagnosis.
        seen: String,
    },
}

/// Downloaded, cached or bundled bytes are not what was recorded.
#[cfg(feature = "hub")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IntegrityError {
    /// A download ended early or is larger than announced.
    #[error(
        "{url}: download incomplete: got {got} bytes, expected {expected}; nothing was cached, retry"
    )]
    Truncated {
        /// The URL.
        url: String,
        /// Bytes expected (`X-Linked-Size`, tree size or `Content-Length`).
        expected: u64,
        /// Bytes received.
        got: u64,
    },
    /// A file's checksum (or size) does not match the one recorded for it.
    #[error("{path}: checksum mismatch: expected {expected}, found {actual}{of}")]
    Checksum {
        /// The file (or URL) checked.
        path: String,
        /// Expected digest (hex), or size.
        expected: String,
        /// Actual digest (hex), or size.
        actual: String,
        /// What was checked, which says what to do about it.
        of: ChecksumOf,
    },
    /// A pre-staged bundle or its manifest is invalid.
    #[error("bundle {path}: {message}")]
    Bundle {
        /// The bundle directory or manifest file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// What a checksum was checked on; its `Display` is the advice that ends
/// the message.
#[cfg(feature = "hub")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChecksumOf {
    /// A blob in the Hub cache.
    CachedBlob,
    /// A download whose `X-Linked-Etag` disagrees with the tree listing.
    LinkedEtag,
    /// A download's content, checked as it was streamed.
    Download,
    /// The prepare script downloaded from its pinned URL.
    PrepareScript,
    /// A bundle file, against the bundle's manifest.
    BundleFile {
        /// The manifest.
        manifest: PathBuf,
    },
    /// A bundle file that changed while it was being imported.
    Import,
}

#[cfg(feature = "hub")]
impl std::fmt::Display for ChecksumOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::pins::{PREPARE_SCRIPT_COMMIT, PREPARE_SCRIPT_PATH, PREPARE_SCRIPT_REPO};
        match self {
            ChecksumOf::CachedBlob => f.write_str(
                "; the cached file is corrupt: delete it and run again with network access",
            ),
            ChecksumOf::LinkedEtag => f.write_str(
                " (X-Linked-Etag disagrees with the tree listing; the revision changed?)",
            ),
            ChecksumOf::Download => f.write_str("; nothing was cached, retry"),
            ChecksumOf::PrepareScript => write!(
                f,
                "; speedbench runs only the pinned prepare script ({PREPARE_SCRIPT_REPO}@\
                 {PREPARE_SCRIPT_COMMIT} {PREPARE_SCRIPT_PATH}) and cached nothing. To run \
                 another script deliberately, run it as a local prepare script \
                 (SPEEDBENCH_PREPARE_SCRIPT=PATH)"
            ),
            ChecksumOf::BundleFile { manifest } => write!(
                f,
                "; the file does not match {} (copied incompletely or edited?): copy the bundle \
                 again",
                manifest.display()
            ),
            ChecksumOf::Import => f.write_str("; the file changed during import"),
        }
    }
}

/// SPEED-Bench placeholder rows could not be resolved.
#[cfg(feature = "hub")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// A SPEED-Bench config name is not a bare name.
    #[error(
        "invalid SPEED-Bench config {config:?}: expected a bare name such as 'qualitative' or \
         'throughput_1k'"
    )]
    InvalidConfig {
        /// The name given.
        config: String,
    },
    /// Placeholder rows come from sources the native resolver cannot rebuild
    /// exactly, and native resolution was required ([`crate::Resolver::Native`]).
    #[error(
        "SPEED-Bench {config:?}: {count} placeholder row(s) come from source(s) speedbench cannot \
         rebuild natively: {sources}. Resolve this config with the upstream prepare step instead \
         (the `auto` and `upstream` resolvers run the pinned NeMo-Skills \
         `nemo_skills/dataset/speed-bench/prepare.py` for you; it needs Python 3 with {packages}), \
         or import a bundle pre-staged on a connected machine; see docs/datasets.md",
        packages = crate::pins::PYTHON_PACKAGES
    )]
    Unresolvable {
        /// The SPEED-Bench config.
        config: String,
        /// Rows affected.
        count: usize,
        /// `source (n rows)` list.
        sources: String,
    },
    /// A row's `source` is a URL outside the hosts SPEED-Bench sources from;
    /// the prepare step would fetch it, so it is not run.
    #[error(
        "SPEED-Bench {config:?} row {question_id}: source {source_url:?} is {what}, outside the \
         hosts SPEED-Bench sources its prompts from ({allowed}){more}. The prepare step fetches \
         prompt text from each row's source, so speedbench refuses to run it on this config",
        allowed = crate::pins::ALLOWED_SOURCE_HOSTS.join(", "),
        more = if *others > 0 { format!(" ({others} more row(s) like it)") } else { String::new() }
    )]
    UntrustedSource {
        /// The SPEED-Bench config.
        config: String,
        /// The first offending row's `question_id`.
        question_id: String,
        /// Its `source`.
        source_url: String,
        /// What is wrong: `on host "…"` or `a "file" URL`.
        what: String,
        /// How many further rows are refused.
        others: usize,
    },
    /// The Python interpreter for the prepare step is missing, or lacks a
    /// package it needs.
    #[error(
        "SPEED-Bench {config:?}: {need}the upstream prepare step, which needs Python 3 with \
         {packages}; {problem}. Two ways forward: (1) install them, e.g. `python3 -m venv venv && \
         venv/bin/pip install {packages}`, and run the prepare step with that interpreter \
         (SPEEDBENCH_PYTHON=venv/bin/python); or (2) on a machine that has them, resolve the \
         config into a bundle and import that bundle here",
        need = if *count > 0 {
            format!("{count} placeholder row(s) come from source(s) speedbench does not rebuild \
                     natively ({sources}), so resolving them needs ")
        } else {
            "resolving needs ".to_string()
        },
        packages = crate::pins::PYTHON_PACKAGES
    )]
    PythonUnavailable {
        /// The SPEED-Bench config.
        config: String,
        /// What is wrong with the interpreter, naming it.
        problem: String,
        /// Placeholder rows that need the prepare step (0 when it was
        /// requested explicitly).
        count: usize,
        /// `source (n rows: why)` list of those rows' sources.
        sources: String,
        /// Why the interpreter could not be started, when it could not.
        #[source]
        source: Option<std::io::Error>,
    },
    /// The prepare step exited unsuccessfully.
    #[error(
        "SPEED-Bench {config:?}: the upstream prepare step ({script}) failed with {status}; \
         nothing was cached. Its last output lines:\n{stderr_tail}"
    )]
    PrepareFailed {
        /// The SPEED-Bench config.
        config: String,
        /// The prepare script run.
        script: PathBuf,
        /// The exit status, e.g. `exit status: 1`.
        status: String,
        /// The last lines of its stderr, tokens redacted.
        stderr_tail: String,
    },
    /// The prepare step reported success but left placeholder rows.
    #[error(
        "SPEED-Bench '{config}': {unresolved} of {total} rows were left unresolved by the prepare \
         step, which reports success even when a source is unreachable. speedbench will not \
         benchmark placeholder text, and cached nothing. Re-run to retry; if it persists, one of \
         the source datasets is unavailable. Unresolved: {rows}"
    )]
    Unresolved {
        /// The SPEED-Bench config.
        config: String,
        /// Rows still holding the placeholder.
        unresolved: usize,
        /// Rows in the config.
        total: usize,
        /// The first few as `question_id (source)`.
        rows: String,
    },
    /// The prepare step's output does not match the config it was given.
    #[error(
        "SPEED-Bench '{config}': the prepare step's output does not match the config: {message}; \
         nothing was cached"
    )]
    PrepareOutput {
        /// The SPEED-Bench config.
        config: String,
        /// What differs (row count, order, shape).
        message: String,
    },
    /// A placeholder row could not be rebuilt from its (supported) source.
    #[error(
        "SPEED-Bench {config:?} row {question_id} (source {source_name}, src_id {src_id:?}): {message}"
    )]
    Row {
        /// The SPEED-Bench config.
        config: String,
        /// The row's `question_id`.
        question_id: String,
        /// The row's `source`.
        source_name: String,
        /// The row's `src_id`.
        src_id: String,
        /// What went wrong.
        message: String,
    },
}

/// Why a gated repository could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateReason {
    /// No token in `HF_TOKEN` nor in the token file.
    NoCredentials,
    /// The token is valid but the account has not accepted the terms (403).
    NotAuthorized,
    /// The Hub rejected the token (expired, revoked, no read scope).
    Rejected,
}
