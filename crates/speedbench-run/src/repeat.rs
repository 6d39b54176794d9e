//! `--num-profile-runs N`: the measured phase run N times over the same
//! prompts in the same order, each run a run of its own in
//! `OUTPUT/profile_runs/run_000K` ([`Sweep::repeated`]), then
//! `OUTPUT/aggregate.json`: every headline figure's spread across the runs
//! ([`RepeatedMetrics`]). A run that failed, was interrupted or never
//! started is left out of the figures and named in the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use speedbench_metrics::RepeatedMetrics;
pub use speedbench_runs::{AGGREGATE_FILE_NAME, LeftOut, RepeatedRuns};

use crate::error::RunError;
use crate::spec::RunSpec;
use crate::sweep::{RunEnd, Sweep, SweepOutcome, SweepRun};

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

/// The figures of the completed runs of `outcome` (repeated runs under
/// `parent`) at `confidence`: `aggregate.json`'s content.
pub fn repeated_runs(outcome: &SweepOutcome, parent: &Path, confidence: f64) -> RepeatedRuns {
    figures_of(&outcome.runs.iter().collect::<Vec<_>>(), parent, confidence)
}

/// Where [`trial_aggregates`] writes each run's figures across trials:
/// `parent/aggregate/<run's directory name>/` (AIPerf's place for them).
pub const TRIAL_AGGREGATES_DIR: &str = "aggregate";

/// The figures across trials of each run of a sweep run in trials
/// ([`Sweep::in_trials`], `variations` runs per trial), in the sweep's
/// order: each with the directory its `aggregate.json` belongs in
/// (`parent/aggregate/<dir name>`, [`RepeatedRuns::write`]). Run names in
/// them are relative to `parent` (`profile_runs/trial_0002/2-c-4`).
pub fn trial_aggregates(
    outcome: &SweepOutcome,
    parent: &Path,
    variations: usize,
    confidence: f64,
) -> Vec<(PathBuf, RepeatedRuns)> {
    outcome
        .runs_by_variation(variations)
        .into_iter()
        .map(|runs| {
            let dir = parent.join(TRIAL_AGGREGATES_DIR).join(&runs[0].0.dir_name);
            (dir, figures_of(&runs, parent, confidence))
        })
        .collect()
}

/// The figures of the completed runs among `runs`, named relative to
/// `parent`; the others named with why they were left out.
fn figures_of(runs: &[&(SweepRun, RunEnd)], parent: &Path, confidence: f64) -> RepeatedRuns {
    let name = |dir: &Path| {
        dir.strip_prefix(parent)
            .unwrap_or(dir)
            .display()
            .to_string()
    };
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    for (run, end) in runs.iter().copied() {
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
        num_runs: runs.len(),
        num_successful_runs: kept.len(),
        run_dirs: runs.iter().map(|(r, _)| name(&r.dir)).collect(),
        left_out,
        metrics: RepeatedMetrics::of(&kept, confidence),
    }
}
