//! `profile --shard I/N`, `--start-at` and `--start-after-barrier`: the
//! flags of a sharded run (docs/distributed.md); the split itself is
//! `speedbench_client::Shard`'s.

use std::path::PathBuf;

use clap::Args;
use speedbench_client::{LoadConfig, RunOutcome, Shard, StartBarrier};

use crate::{CliError, fail};

/// Sharding and the shared start of the measured phase.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ShardArgs {
    /// Run shard I of N (I from 0) of the work the other flags describe:
    /// conversations k with k mod N == I, concurrency and counts divided,
    /// request-rate arrivals thinned. Every shard needs the same --run-id;
    /// `speedbench report` merges them (docs/distributed.md). Wins over
    /// --shard-count and --shard-index.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// The shard count N, for a shard whose index comes from
    /// --shard-index or JOB_COMPLETION_INDEX (a Kubernetes indexed Job).
    #[arg(long, value_name = "N", env = "SPEEDBENCH_SHARD_COUNT")]
    pub shard_count: Option<u32>,
    /// With --shard-count: this shard's index (default: JOB_COMPLETION_INDEX).
    #[arg(
        long,
        value_name = "I",
        env = "JOB_COMPLETION_INDEX",
        requires = "shard_count"
    )]
    pub shard_index: Option<u32>,
    /// Start the measured phase (after any warmup) at this Unix time, in
    /// seconds (fractions allowed), so that every shard starts together;
    /// run.json records the planned and the measured start.
    #[arg(long, value_name = "UNIX_TIME", conflicts_with = "start_after_barrier")]
    pub start_at: Option<f64>,
    /// Start the measured phase (after any warmup) once FILE exists (on a
    /// filesystem every shard sees); the planned start is its modification
    /// time. A URL barrier is not supported.
    #[arg(long, value_name = "FILE")]
    pub start_after_barrier: Option<PathBuf>,
}

impl ShardArgs {
    /// Sets the shard and the start barrier of `load`.
    pub(crate) fn apply(&self, load: &mut LoadConfig) -> Result<(), CliError> {
        load.shard = match (self.shard, self.shard_count, self.shard_index) {
            (Some(shard), _, _) => Some(shard),
            (None, Some(count), Some(index)) => Some(
                Shard::new(index, count)
                    .map_err(|e| fail("--shard-count/--shard-index", e.to_string()))?,
            ),
            (None, Some(count), None) => {
                return Err(fail(
                    "--shard-count",
                    format!(
                        "{count} shards, but which is this one? Give --shard-index I (or set \
                         JOB_COMPLETION_INDEX), or --shard I/{count}"
                    ),
                ));
            }
            (None, None, _) => None,
        };
        load.start_barrier = match (&self.start_at, &self.start_after_barrier) {
            (Some(at), _) => Some(
                StartBarrier::at_unix_seconds(*at)
                    .map_err(|e| fail("--start-at", e.to_string()))?,
            ),
            (None, Some(path)) => {
                let text = path.to_string_lossy();
                if text.starts_with("http://") || text.starts_with("https://") {
                    return Err(fail(
                        "--start-after-barrier",
                        "a URL barrier is not supported; give a file on a filesystem every \
                         shard sees, or --start-at UNIX_TIME",
                    ));
                }
                Some(StartBarrier::File(path.clone()))
            }
            (None, None) => None,
        };
        Ok(())
    }
}

/// A shard needs the run id its siblings share: it is what the report
/// merges them by.
pub(crate) fn check_run_id(run_id: Option<&str>, load: &LoadConfig) -> Result<(), CliError> {
    if let Some(id) = run_id
        && id.trim().is_empty()
    {
        return Err(fail(
            "--run-id",
            "is empty: give the id the run's records carry (omit the flag for a fresh one)",
        ));
    }
    match (load.shard, run_id) {
        (Some(shard), None) => Err(fail(
            "--shard",
            format!(
                "shard {shard} needs --run-id ID, the same on every shard of the run: each \
                 records as ID-shard{}of{} and `speedbench report` merges them by ID",
                shard.index(),
                shard.count()
            ),
        )),
        _ => Ok(()),
    }
}

/// The id a run's default directory is named after: the shard's own id
/// for a shard, else `run_id`.
pub(crate) fn dir_id(run_id: &str, load: &LoadConfig) -> String {
    load.shard
        .map_or_else(|| run_id.to_string(), |s| s.run_id(run_id))
}

/// One stderr line on how the measured phase started against its barrier.
pub(crate) fn print_start(outcome: &RunOutcome) {
    if let Some(s) = &outcome.start {
        eprintln!(
            "start ({}): planned {:.3}, measured {:.3} (offset {:+.3} ms)",
            s.barrier,
            s.planned_unix_ns as f64 / 1e9,
            s.measured_unix_ns as f64 / 1e9,
            s.offset_ns as f64 / 1e6
        );
    }
}
