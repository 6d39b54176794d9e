//! Drive an OpenAI-compatible server with a dataset and record every request.
//!
//! The client sends each conversation's turns in order (feeding the live
//! reply back as history), times every response at the moment its bytes
//! arrive, reads whichever speculative-decoding statistics the server
//! reports (vLLM, llama.cpp, SGLang, TensorRT-LLM), and appends one
//! [`speedbench_record::RequestRecord`] per request to
//! `records.parquet` as the run goes.
//!
//! ```no_run
//! use std::sync::Arc;
//! use speedbench_client::{BaseUrl, LoadConfig, ProfileRun, Progress, StopHandle, Target, run_profile};
//! use speedbench_dataset::Dataset;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let run = ProfileRun {
//!     dataset: Dataset::from_jsonl_file("fixtures/speed_bench_mini.jsonl")?,
//!     target: Target::new(BaseUrl::parse("127.0.0.1:8000")?, "my-model"),
//!     load: LoadConfig { concurrency: 4, ..Default::default() },
//!     output_dir: "artifacts/run1".into(),
//!     run_id: "run1".into(),
//!     config: serde_json::json!({}),
//!     server_metrics: None,
//!     overwrite: false,
//!     max_error_rate: None,
//! };
//! let outcome = run_profile(run, StopHandle::new(), Arc::new(Progress::default())).await?;
//! println!("{} records in {}", outcome.record_count, outcome.records_path.display());
//! # Ok(()) }
//! ```
//!
//! The end-to-end example that runs (against the simulated server) is in
//! this crate's `tests/` directory.
mod discovery;
mod error;
mod exchange;
mod recorder;
mod response;
mod runner;
mod schedule;
pub mod scrape;
mod secrets;
pub mod spec;
pub mod sse;
mod target;

pub use discovery::{
    discover_model, discover_model_with_headers, discover_model_with_roots, wait_for_health,
};
pub use error::ClientError;
pub use runner::{
    LoadConfig, ProfileRun, Progress, RequestTally, RunOutcome, RunStatus, RunSummary, StopHandle,
    run_profile,
};
pub use schedule::{Arrival, ArrivalSchedule, ScheduleStats};
pub use secrets::{MIN_OUTPUT_SECRET_LEN, MIN_SECRET_LEN, REDACTED, Secrets};
pub use target::{ApiKey, ApiKind, BaseUrl, Target, parse_extra_inputs};
