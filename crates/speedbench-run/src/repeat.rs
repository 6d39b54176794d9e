//! `--num-profile-runs N`: the measured phase run N times over the same
//! prompts in the same order, each run a run of its own in
//! `OUTPUT/profile_runs/run_000K` ([`Sweep::repeated`]), then
//! `OUTPUT/aggregate.json`: every headline figure's spread across the runs
//! ([`RepeatedMetrics`]). A run that failed, was interrupted or never
//! started is left out of the figures and named in the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use speedbench_metrics::RepeatedMetrics;

use crate::error::RunError;
use crate::spec::RunSpec;
use crate::sweep::{RunEnd, Sweep, SweepOutcome};

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

/// The sweep of `spec`'s repeated runs: under `--output-artifact-dir`, or
/// `artifacts/<dataset>-<run id>`; each run waits out the cooldown before
/// it starts. Refused with a store URL (the aggregate is written locally)
/// and with `--output` (every run would write the one file).
pub fn repetitions(spec: &RunSpec) -> Result<Sweep, RunError> {
    let r = &spec.repeat;
    let parent = match &spec.outputs.output_artifact_dir {
        Some(dir) => dir.clone(),
        None => Path::new("artifacts").join(format!(
            "{}-{}",
            spec.dataset.label(),
            speedbench_client::new_run_id()
        )),
    };
    if crate::store_url(&parent, "--output-artifact-dir")?.is_some() {
        return Err(RunError::invalid(
            "--num-profile-runs",
            "repeated runs go into a local directory (their aggregate is written there); \
             upload it after, or run each to the store on its own",
        ));
    }
    if spec.outputs.output.is_some() {
        return Err(RunError::invalid(
            "--output",
            "with --num-profile-runs every run would write the one speed_bench.py file; \
             each run's figures are in its own directory and aggregate.json",
        ));
    }
    Ok(
        Sweep::repeated(spec, parent, r.num_profile_runs, r.warmup_every_run)?
            .with_cooldown(Duration::from_secs_f64(r.cooldown_s)),
    )
}

impl RepeatedRuns {
    /// The figures of the completed runs of `outcome` at `confidence`.
    pub fn of(outcome: &SweepOutcome, parent: &Path, confidence: f64) -> RepeatedRuns {
        let name = |dir: &Path| {
            dir.strip_prefix(parent)
                .unwrap_or(dir)
                .display()
                .to_string()
        };
        let mut kept = Vec::new();
        let mut left_out = Vec::new();
        for (run, end) in &outcome.runs {
            match (end, end.metrics()) {
                (RunEnd::Completed(_), Some(m)) => kept.push(m),
                (RunEnd::Completed(_), None) => left_out.push(LeftOut {
                    run: name(&run.dir),
                    why: "it kept neither records nor a summary".into(),
                }),
                _ => left_out.push(LeftOut {
                    run: name(&run.dir),
                    why: end.describe(),
                }),
            }
        }
        RepeatedRuns {
            num_runs: outcome.runs.len(),
            num_successful_runs: kept.len(),
            run_dirs: outcome.runs.iter().map(|(r, _)| name(&r.dir)).collect(),
            left_out,
            metrics: RepeatedMetrics::of(&kept, confidence),
        }
    }

    /// Writes `aggregate.json` into `parent`; its path.
    pub fn write(&self, parent: &Path) -> Result<PathBuf, RunError> {
        let path = parent.join(AGGREGATE_FILE_NAME);
        let text = serde_json::to_vec_pretty(self).expect("the figures serialise");
        std::fs::create_dir_all(parent)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|source| RunError::Io {
                context: format!("writing {}", path.display()),
                source,
            })?;
        Ok(path)
    }

    /// The `aggregate.json` of a repeated run's directory, when it has one.
    pub fn read(dir: &Path) -> Result<Option<RepeatedRuns>, RunError> {
        let path = dir.join(AGGREGATE_FILE_NAME);
        // A speed_bench.py file, or a run directory of one run.
        if !path.is_file() {
            return Ok(None);
        }
        let text = match std::fs::read(&path) {
            Ok(text) => text,
            Err(source) => {
                return Err(RunError::Io {
                    context: format!("reading {}", path.display()),
                    source,
                });
            }
        };
        serde_json::from_slice(&text)
            .map(Some)
            .map_err(|e| RunError::invalid(format!("reading {}", path.display()), e.to_string()))
    }
}
