//! A repeated run's directory (`--num-profile-runs`): its runs under
//! [`REPEATED_RUNS_DIR`](crate::REPEATED_RUNS_DIR) and `aggregate.json`,
//! the figures across them ([`RepeatedRuns`]).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use speedbench_metrics::RepeatedMetrics;

use crate::RunsError;

/// The file of a repeated run's figures across its runs.
pub const AGGREGATE_FILE_NAME: &str = "aggregate.json";

/// `aggregate.json`: the runs asked for, those in the figures, those left
/// out and why, and the figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedRuns {
    /// Runs asked for (`--num-profile-runs`).
    pub num_runs: usize,
    /// Runs that completed: the figures are theirs.
    pub num_successful_runs: usize,
    /// Each run's directory under the parent, in order.
    pub run_dirs: Vec<String>,
    /// Runs left out of the figures, each with why.
    pub left_out: Vec<LeftOut>,
    /// The figures across the completed runs.
    #[serde(flatten)]
    pub metrics: RepeatedMetrics,
}

/// A run left out of the figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Its directory under the parent (`profile_runs/run_0002`).
    pub run: String,
    /// How it ended.
    pub why: String,
}

impl RepeatedRuns {
    /// The directories of the runs in the figures, under `parent`.
    pub fn kept_dirs(&self, parent: &Path) -> Vec<PathBuf> {
        let left_out: Vec<&str> = self.left_out.iter().map(|l| l.run.as_str()).collect();
        self.run_dirs
            .iter()
            .filter(|d| !left_out.contains(&d.as_str()))
            .map(|d| parent.join(d))
            .collect()
    }

    /// Writes `aggregate.json` into `parent`; its path.
    pub fn write(&self, parent: &Path) -> Result<PathBuf, RunsError> {
        let path = parent.join(AGGREGATE_FILE_NAME);
        let text = serde_json::to_vec_pretty(self).expect("the figures serialise");
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| RunsError::Io {
                path: path.clone(),
                source,
            })?;
        Ok(path)
    }

    /// The `aggregate.json` of a repeated run's directory; `None` for
    /// anything else (a run directory of one run, a speed_bench.py file).
    pub fn read(dir: &Path) -> Result<Option<RepeatedRuns>, RunsError> {
        let path = dir.join(AGGREGATE_FILE_NAME);
        if !path.is_file() {
            return Ok(None);
        }
        let text = std::fs::read(&path).map_err(|source| RunsError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| RunsError::Artifact {
                path,
                line: None,
                message: e.to_string(),
            })
    }
}

/// The run directories `dir` stands for: a repeated run's completed runs,
/// else `dir` itself (an unreadable `aggregate.json` counts as none).
pub fn runs_of(dir: &Path) -> Vec<PathBuf> {
    match RepeatedRuns::read(dir) {
        Ok(Some(runs)) => runs.kept_dirs(dir),
        _ => vec![dir.to_path_buf()],
    }
}
