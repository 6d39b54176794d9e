//! One run of a speculative-decoding benchmark, as a value, and the one
//! executor that runs it.
//!
//! A [`RunSpec`] holds everything a run needs (target, dataset selection,
//! load shape, sampling, outputs, shard, scrape), in the vocabulary of
//! `speedbench profile`'s flags. [`RunSpec::validate`] holds every check
//! a run makes before its first request; [`execute`] (or [`run_spec`],
//! which loads the dataset too) runs it end to end: the served model,
//! the store, the open-file limit, the engine and its preflight, the run,
//! the upload, and the figures read back from the records. What happens
//! on the way goes to an [`Observer`]: `speedbench` prints it with a
//! progress bar and tables, a test or a downstream benchmark shows what
//! it likes. A downstream benchmark adds its own record sinks, annotators
//! and engine adapters to the [`ValidRun`] that validation returns
//! ([`ValidRun::with_sink`], [`ValidRun::with_annotator`],
//! [`ValidRun::with_spec_adapter`]): one path, with every check. Several
//! runs are a [`sweep::Sweep`], from a file or built in code
//! ([`sweep::Sweep::grid`]).
//!
//! ```
//! use speedbench_run::{DatasetSource, RunResults, RunSpec, Silent};
//! use speedbench_client::{RunStatus, StopHandle};
//! use speedbench_sim::{SimConfig, SimServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
//! let dir = tempfile::tempdir()?;
//! let rows = dir.path().join("rows.jsonl");
//! std::fs::write(&rows, r#"{"question_id": "c1", "category": "coding", "turns": ["Sort a list."]}"#)?;
//!
//! let mut spec = RunSpec::default();
//! spec.target.url = server.url();
//! spec.target.streaming = true;
//! spec.dataset.source = Some(DatasetSource::InputFile(rows));
//! spec.load.concurrency = 2;
//! spec.load.request_count = Some(4);
//! spec.outputs.output_artifact_dir = Some(dir.path().join("run"));
//! spec.scrape.shutdown_delay_s = 0.0;
//!
//! let report = speedbench_run::run_spec(&spec, StopHandle::new(), &mut Silent).await?;
//! let RunResults::Records { metrics, .. } = &report.results else { panic!("records kept") };
//! assert_eq!(metrics.counts.succeeded, 4);
//! assert_eq!(report.into_status()?, RunStatus::Completed);
//! server.shutdown().await;
//! # Ok(()) }
//! ```

#![doc(test(attr(deny(warnings))))]

pub mod compare;
mod dataset;
mod describe;
mod error;
mod execute;
pub mod fetch;
mod finished;
pub mod flags;
mod observer;
pub mod process;
pub mod repeat;
mod replies;
pub mod report;
mod shaping;
mod spec;
#[cfg(feature = "store")]
mod staging;
#[cfg(not(feature = "store"))]
#[path = "no_store.rs"]
mod staging;
mod store_types;
pub mod sweep;
mod synthetic;
pub mod text;
pub mod tune;
mod user_files;
mod valid_run;
mod validate;
mod words;
mod yaml;

pub use dataset::{dataset_error, dataset_hint};
pub use error::RunError;
pub use execute::{execute, run_spec};
pub use finished::{RunReport, RunResults, ShownPaths};
pub use observer::{EngineSource, Observer, Silent};
pub use spec::{
    DatasetSource, DatasetSpec, EngineChoice, FigureSpec, LoadSpec, OutputSpec, RepeatSpec,
    RunSpec, SamplingSpec, ScrapeSpec, Secret, ShardSpec, SyntheticSpec, TargetSpec,
};
/// An error with every cause its message does not already quote, on one
/// line (as the command line prints errors).
pub use speedbench_http::describe as error_message;
pub use staging::{StoreError, StoreUrl, UploadReport, store_url};
pub use validate::ValidRun;
