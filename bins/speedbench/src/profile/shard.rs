//! `profile --shard I/N`, `--start-at` and `--start-after-barrier`: the
//! flags of a sharded run (docs/distributed.md); the split itself is
//! `speedbench_client::Shard`'s.

use std::path::PathBuf;

use clap::Args;
use speedbench_client::Shard;
use speedbench_run::ShardSpec;

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
    /// The shard and start options as the run specification holds them.
    pub(crate) fn to_spec(&self) -> ShardSpec {
        let mut spec = ShardSpec::default();
        spec.shard = self.shard;
        spec.shard_count = self.shard_count;
        spec.shard_index = self.shard_index;
        spec.start_at = self.start_at;
        spec.start_after_barrier = self.start_after_barrier.clone();
        spec
    }
}
