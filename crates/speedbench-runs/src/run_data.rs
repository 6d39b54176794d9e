//! What a report can use from one run directory ([`RunData`]), and how its
//! JSON files are read: the one type every loader fills (speedbench's,
//! AIPerf's, speed_bench.py's), kept apart from the loaders so that none of
//! them depends on another.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use serde_json::Value;
use speedbench_metrics::{RecordsDigest, RequestCounts, SpeedBenchPyOutput};
use speedbench_record::{RequestRecord, RunManifest, RunStatus};
use speedbench_scrape::ServerMetricsExport;

use crate::RunsError;

/// Which tool wrote a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFormat {
    /// speedbench (`records.parquet`).
    Speedbench,
    /// AIPerf (`profile_export_aiperf.json`).
    Aiperf,
    /// llama.cpp `speed_bench.py`'s `--output` JSON file (written by it or
    /// by `speedbench profile --output`): per-category summary rows and
    /// per-sample results, no per-request records.
    SpeedBenchPy,
}

/// The run-level figures a report takes from a run's summary file
/// (speedbench's `summary.json`, whose whole is
/// `speedbench_client::RunSummary`, or AIPerf's profile export).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SummaryFigures {
    /// Token-weighted acceptance length.
    pub accept_length: Option<f64>,
    /// Overall draft acceptance rate, as a fraction.
    pub accept_rate: Option<f64>,
    /// Output-token throughput, tokens/s.
    pub output_token_throughput: Option<f64>,
}

/// Everything a report can use from one run directory.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The run directory; for a [`RunFormat::SpeedBenchPy`] run, the file.
    pub dir: PathBuf,
    /// Who wrote it.
    pub format: RunFormat,
    /// Row label: when loaded, the model as shown
    /// ([`display_model`](crate::display_model): a GGUF path's file stem);
    /// [`assign_labels`](crate::assign_labels) makes it unique across the
    /// runs of one report.
    pub label: String,
    /// The model the run measured, in full, as the server or the manifest
    /// names it (a GGUF path stays a path).
    pub model: String,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run counts as incomplete, in words (`None` when complete).
    pub status_reason: Option<String>,
    /// True when the run is a SPEED-Bench (or `spec_al_*`) run whose
    /// columns are categories. False for an AIPerf run of another dataset
    /// (`single_turn`, synthetic): its row is kept, out of `Overall`.
    pub speed_bench: bool,
    /// Dataset name (e.g. `speed_bench_coding`, or an input file stem).
    pub dataset: String,
    /// The run's manifest (`run.json`, else the records file's footer);
    /// `None` for AIPerf directories and runs that have neither.
    pub manifest: Option<RunManifest>,
    /// Per-request records, when the run has them and they were kept (never
    /// for a [`RunFormat::SpeedBenchPy`] run: its samples sum their turns;
    /// never when loaded with [`RecordsRead::Digest`](crate::RecordsRead::Digest)).
    pub records: Option<Vec<RequestRecord>>,
    /// The digest of the run's records when it was folded as they were read
    /// without keeping them ([`RecordsRead::Digest`](crate::RecordsRead::Digest)), or pooled from the
    /// shards of a merged run. Read it through [`RunData::records_digest`],
    /// which folds `records` when there is no digest here.
    pub digest: Option<RecordsDigest>,
    /// Run-level summary, when the run has one.
    pub summary: Option<SummaryFigures>,
    /// The server-metrics export, when the run has one (speedbench's or
    /// AIPerf's layout, read typed).
    pub server: Option<ServerMetricsExport>,
    /// The speed_bench.py `--output` file's content, for a
    /// [`RunFormat::SpeedBenchPy`] run; `None` otherwise.
    pub speed_bench_py: Option<SpeedBenchPyOutput>,
    /// Things worth telling the user (skipped lines and the like).
    pub warnings: Vec<String>,
    /// For a run merged from shards ([`merge_shards`](crate::merge_shards)):
    /// the run id they share, which tells two sharded runs in one parent
    /// apart (their row labels, `--label ID=NAME`, `DIR#ID`).
    pub run_group: Option<String>,
}

pub(crate) fn read_json(path: &Path) -> Result<Value, RunsError> {
    let text = std::fs::read_to_string(path).map_err(|source| RunsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // Editors on Windows write a byte-order mark; JSON has none.
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    serde_json::from_str(text).map_err(|e| RunsError::Artifact {
        path: path.to_path_buf(),
        line: Some(e.line()),
        message: format!("not valid JSON: {e}"),
    })
}

impl RunData {
    /// The digest of the run's records, when they were read: the one
    /// folded while loading (or pooled from shards), else the fold of
    /// [`Self::records`].
    pub fn records_digest(&self) -> Option<Cow<'_, RecordsDigest>> {
        match (&self.digest, &self.records) {
            (Some(digest), _) => Some(Cow::Borrowed(digest)),
            (None, Some(records)) => Some(Cow::Owned(RecordsDigest::of(records))),
            (None, None) => None,
        }
    }

    /// True when the run's per-request records were read (kept, or
    /// folded into [`Self::digest`]).
    pub fn has_records(&self) -> bool {
        self.digest.is_some() || self.records.is_some()
    }

    /// Measured requests by result, when the run has per-request records.
    pub fn counts(&self) -> Option<RequestCounts> {
        self.records_digest().map(|d| d.counts.clone())
    }

    /// Number of distinct categories among the run's non-warmup records.
    pub fn category_count(&self) -> usize {
        self.records_digest().map_or(0, |d| d.categories.len())
    }
}
