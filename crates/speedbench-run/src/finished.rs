//! [`RunReport`]: what a finished run left, where, and the figures it
//! gave. A leaf beside the executor that makes it and the observers that
//! are shown it.

use std::path::PathBuf;
use std::sync::Arc;

use speedbench_client::{Progress, RunOutcome, RunStatus};
use speedbench_metrics::{RecordsDigest, RunMetrics};
use speedbench_record::RequestRecord;

use crate::error::RunError;

/// What a run read back from its own files once it ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunResults {
    /// The per-request records.
    Records {
        /// Every run-level statistic.
        metrics: RunMetrics,
        /// The model as a table row's label (a GGUF path as its stem).
        label: String,
        /// What the per-category matrices read of the records, folded as
        /// the run read them back.
        digest: Box<RecordsDigest>,
        /// The records themselves, read again only where a table needs
        /// each of them: llama.cpp's `timings` (speed_bench.py's tables)
        /// or `--output`; `None` otherwise (a long run's records are not
        /// held).
        held: Option<Vec<RequestRecord>>,
    },
    /// `--export-level summary`: the figures of `summary.json`.
    SummaryOnly {
        /// Every run-level statistic.
        metrics: RunMetrics,
        /// The file they came from.
        path: PathBuf,
    },
    /// The records were not kept and no summary was written.
    Nothing,
    /// The records could not be read back from a run that had already
    /// failed; why.
    Unreadable(String),
}

/// A finished run: what it left, where, and the figures it gave.
#[derive(Debug)]
#[non_exhaustive]
pub struct RunReport {
    /// The client's account of the run.
    pub outcome: RunOutcome,
    /// The served model's name.
    pub model: String,
    /// The requests as they were counted while they ran.
    pub progress: Arc<Progress>,
    /// What was read back.
    pub results: RunResults,
    /// Where speed_bench.py's `--output` JSON was written.
    pub speed_bench_py: Option<PathBuf>,
    /// The records file, manifest, summary and raw responses as the user
    /// finds them (store URLs for a run uploaded to a store).
    pub shown: ShownPaths,
    pub(crate) failure: Option<RunError>,
}

/// A run's files where the user finds them.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ShownPaths {
    /// `records.parquet`.
    pub records: String,
    /// `run.json`.
    pub manifest: String,
    /// `summary.json`, when written.
    pub summary: Option<String>,
    /// `raw_responses.jsonl`, when written.
    pub raw_responses: Option<String>,
    /// `http_trace.jsonl`, when written.
    pub http_trace: Option<String>,
}

impl RunReport {
    /// Every run-level statistic, as read back from the run's files (none
    /// when it kept neither records nor a summary).
    pub fn metrics(&self) -> Option<&RunMetrics> {
        match &self.results {
            RunResults::Records { metrics, .. } | RunResults::SummaryOnly { metrics, .. } => {
                Some(metrics)
            }
            RunResults::Nothing | RunResults::Unreadable(_) => None,
        }
    }

    /// The request throughput the run's summary gives.
    pub fn request_throughput(&self) -> Option<f64> {
        self.metrics().and_then(|m| m.request_throughput)
    }

    /// How the run ended: its status, or the first error that came after
    /// its requests (writing `--output`, the upload), or the reason a
    /// failed run failed.
    pub fn into_status(self) -> Result<RunStatus, RunError> {
        if let Some(e) = self.failure {
            return Err(e);
        }
        match self.outcome.status {
            RunStatus::Failed => Err(RunError::Failed {
                reason: self.outcome.failure.unwrap_or_default(),
            }),
            status => Ok(status),
        }
    }
}
