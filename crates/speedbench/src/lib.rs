//! Benchmark speculative decoding on OpenAI-compatible servers: the
//! speedbench crates behind one dependency, as ripgrep's `grep` crate is.
//!
//! | module | crate | owns |
//! |---|---|---|
//! | [`dataset`] | `speedbench-dataset` | loading, resolving, caching and filtering datasets |
//! | [`client`] | `speedbench-client` | driving a server, streaming, recording ([`client::RecordSink`], [`client::spec::SpecAdapter`]) |
//! | [`record`] | `speedbench-record` | the record type, the Parquet schema, the run directory |
//! | [`metrics`] | `speedbench-metrics` | every statistic: per request, per category, per run |
//! | [`scrape`] | `speedbench-scrape` | Prometheus expositions and the server-metrics export |
//! | [`runs`] | `speedbench-runs` | finding and loading run directories (speedbench's and AIPerf's) |
//! | [`report`] | `speedbench-report` | matrices, comparisons and their renderings |
//! | [`sim`] | `speedbench-sim` | the simulated speculative-decoding server |
//! | [`run`] | `speedbench-run` | one run as a value ([`run::RunSpec`]) and the executor that runs it ([`run::execute`], [`run::Observer`]) |
//! | [`process`] | `speedbench-run` | what a benchmark program needs of its process: open-file limit, two-stage Ctrl-C |
//! | `store` | `speedbench-store` | run directories in S3, GCS and Azure |
//! | `kube` | `speedbench-kube` | the Kubernetes Job of a sharded run |
//!
//! Features choose what is compiled: `sim`, `hub` (public datasets from the
//! Hugging Face Hub), `report` (`runs` and `report`), `store` (object
//! stores; with `run`, store URLs as a run's output or a report's input),
//! `run` (`run` and `process`; it brings `hub` and `report`), all default,
//! and `kube`. A run-only program takes `default-features = false,
//! features = ["run"]`: no object-store client (under 130 packages, held in
//! CI; a store URL is refused by name). A benchmark that only drives
//! servers and reads its records takes `default-features = false`: no Hub
//! client, no object stores, no TLS beyond what its own `https://` targets
//! need.
//!
//! The third-party types in their signatures are re-exported too
//! ([`serde_json`], [`arrow_schema`], [`tokio`]), so a downstream benchmark
//! needs no version of its own in step with speedbench's.
//!
//! A whole benchmark, against the simulated server: profile a dataset, then
//! print its acceptance-length matrix.
//!
//! ```
//! use std::sync::Arc;
//! use speedbench::client::{BaseUrl, Load, ProfileRun, Progress, StopHandle, Target};
//! use speedbench::dataset::Dataset;
//! use speedbench::report::{AcceptanceMatrix, MatrixMetric};
//! use speedbench::sim::{SimConfig, SimServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
//! let rows = r#"{"question_id": "c1", "category": "coding", "turns": ["Sort a list in Rust."]}
//! {"question_id": "w1", "category": "writing", "turns": ["A haiku about speed."]}"#;
//! let dataset = Dataset::from_jsonl_str("mini", rows)?;
//! let target = Target::new(BaseUrl::parse(&server.url())?, "speedbench-sim");
//! let dir = tempfile::tempdir()?;
//! let run = ProfileRun::new(dataset, target, dir.path().join("run"))
//!     .with_load(Load::closed_loop(2).with_num_conversations(4));
//! let outcome = speedbench::client::run_profile(run, StopHandle::new(), Arc::new(Progress::default())).await?;
//! // The records, from the file the run left (its summary read them in
//! // passes and holds none).
//! let records = speedbench::record::read_records_file(&outcome.records_path)?.records;
//! let matrix = AcceptanceMatrix::from_runs(
//!     MatrixMetric::AcceptLength,
//!     &[("sim".to_string(), records.as_slice())],
//! );
//! assert_eq!(matrix.rows.len(), 1);
//! assert!(matrix.rows[0].overall.is_some());
//! print!("{}", matrix.to_console());
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! A complete program on this crate alone is in `examples/downstream.rs`.

#![doc(test(attr(deny(warnings))))]
#[cfg(feature = "run")]
pub use speedbench_run::process;

/// A run's `summary.json`: its outcome and every run-level statistic.
pub use speedbench_client::RunSummary;
/// How a run ended: the one status type of every crate (the client's
/// verdict, `run.json`'s `outcome`, a loaded run directory's status).
pub use speedbench_record::RunStatus;

pub use arrow_schema;
pub use serde_json;
pub use speedbench_client as client;
pub use speedbench_dataset as dataset;
#[cfg(feature = "kube")]
pub use speedbench_kube as kube;
pub use speedbench_metrics as metrics;
pub use speedbench_record as record;
#[cfg(feature = "report")]
pub use speedbench_report as report;
#[cfg(feature = "run")]
pub use speedbench_run as run;
#[cfg(feature = "report")]
pub use speedbench_runs as runs;
pub use speedbench_scrape as scrape;
#[cfg(feature = "sim")]
pub use speedbench_sim as sim;
#[cfg(feature = "store")]
pub use speedbench_store as store;
pub use tokio;
