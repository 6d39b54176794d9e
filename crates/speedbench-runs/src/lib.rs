//! Benchmark runs as they lie on disk: finding them and loading them.
//!
//! A run is a directory, either speedbench's (`records.parquet`, with
//! `run.json`, `summary.json` and `server_metrics_export.json` beside it
//! when present; `records.parquet.partial` while it runs or after it died)
//! or AIPerf's (`profile_export_aiperf.json`, `profile_export.jsonl`,
//! `server_metrics_export.json`), or a llama.cpp `speed_bench.py`
//! `--output` JSON file (per-category summary rows and per-sample results,
//! written by speed_bench.py or by `speedbench profile --output`). All load
//! into one [`RunData`]: AIPerf's per-request lines become the same
//! [`RequestRecord`]s speedbench writes, so every statistic and every
//! report has one code path; a speed_bench.py file has no per-request
//! records and carries its content in [`RunData::speed_bench_py`].
//!
//! - [`find_run_dirs`]: the run directories among paths (each path, or its
//!   children);
//! - [`load_run`] / [`load_run_with`]: one run, with all record columns,
//!   only the named ones, or only their [`RecordsDigest`](speedbench_metrics::RecordsDigest)
//!   folded as the file is read ([`RecordsRead`]);
//! - [`RunStatus`]: how the run ended (completed, interrupted, failed,
//!   died, still running), from its manifest and its lock;
//! - [`merge_shards`]: the shards of a sharded run (`profile --shard I/N`)
//!   merged into one run over their pooled records, a missing or failed
//!   shard named ([`load_shard_group`]: one directory of shards);
//! - [`assign_labels`]: unique labels for the runs of one report;
//!   [`display_model`]: a model id as a label (a GGUF path's file stem).
//!
//! This crate reads; it computes no statistic (that is
//! `speedbench-metrics`) and renders nothing (that is `speedbench-report`).
//!
//! ```
//! use speedbench_record::{RecordWriter, RequestRecord, RunManifest};
//! use speedbench_runs::{RunFormat, RunStatus, find_run_dirs, load_run};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let parent = tempfile::tempdir()?;
//! let dir = parent.path().join("baseline");
//! std::fs::create_dir(&dir)?;
//! let manifest = RunManifest {
//!     model: "my-model".into(),
//!     status: speedbench_record::RunStatus::Completed,
//!     ..Default::default()
//! };
//! let mut writer = RecordWriter::create(dir.join("records.parquet"))?;
//! writer.append(&RequestRecord { model: "my-model".into(), ..Default::default() })?;
//! writer.close(&manifest)?;
//!
//! let dirs = find_run_dirs(&[parent.path().to_path_buf()])?;
//! assert_eq!(dirs, vec![dir.clone()]);
//! let run = load_run(&dirs[0])?;
//! assert_eq!((run.format, run.status), (RunFormat::Speedbench, RunStatus::Completed));
//! assert_eq!(run.label, "my-model");
//! assert_eq!(run.counts().unwrap().succeeded, 1);
//! # Ok(())
//! # }
//! ```
//!
//! [`RequestRecord`]: speedbench_record::RequestRecord

#![doc(test(attr(deny(warnings))))]

mod aiperf;
mod error;
mod labels;
mod load;
mod model_name;
mod recover;
mod repeated;
mod run_data;
mod shards;
mod speed_bench_py;
mod status;

pub use aiperf::{
    PROFILE_JSON as AIPERF_PROFILE_FILE_NAME, PROFILE_JSONL as AIPERF_RECORDS_FILE_NAME,
};
pub use error::RunsError;
pub use labels::{assign_labels, split_group};
pub use load::{REPEATED_RUNS_DIR, RecordsRead, find_run_dirs, load_run, load_run_with};
pub use model_name::display_model;
pub use recover::{Recovered, recover};
pub use repeated::{AGGREGATE_FILE_NAME, LeftOut, RepeatedRuns, runs_of};
pub use run_data::{RunData, RunFormat, SummaryFigures};
pub use shards::{FoundShard, MergedRun, ShardSet, load_shard_group, merge_shards};
pub use speed_bench_py::SPEED_BENCH_PY_KEYS;
pub use speedbench_record::RunStatus;
