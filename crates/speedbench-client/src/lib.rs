//! Drive an OpenAI-compatible server with a dataset and record every request.
//!
//! The client sends each conversation's turns in order (feeding the live
//! reply back as history), times every response at the moment its bytes
//! arrive, reads whichever speculative-decoding statistics the server
//! reports (vLLM, llama.cpp, SGLang, TensorRT-LLM), and appends one
//! [`speedbench_record::RequestRecord`] per request to
//! `records.parquet` as the run goes.
//!
//! ```
//! use std::sync::Arc;
//! use speedbench_client::{
//!     BaseUrl, Load, ProfileRun, Progress, RunStatus, StopHandle, Target, VecSink,
//!     run_profile,
//! };
//! use speedbench_dataset::Dataset;
//! use speedbench_sim::{SimConfig, SimServer};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The simulated speculative-decoding server, on a free loopback port.
//! let server = SimServer::start(SimConfig::default(), ([127, 0, 0, 1], 0).into()).await?;
//! let dataset = Dataset::from_jsonl_str(
//!     "mini",
//!     r#"{"question_id": "q1", "category": "coding", "turns": ["Write a sort.", "Now in C."]}"#,
//! )?;
//! let mut target = Target::new(BaseUrl::parse(&server.url())?, "speedbench-sim");
//! target.streaming = true;
//! let dir = tempfile::tempdir()?;
//! // Records go to `records.parquet` in the run directory, and to any sink.
//! let (sink, records) = VecSink::new();
//! let run = ProfileRun::new(dataset, target, dir.path().join("run"))
//!     .with_load(Load::closed_loop(2).with_num_conversations(3))
//!     .with_sink(sink);
//! let outcome = run_profile(run, StopHandle::new(), Arc::new(Progress::default())).await?;
//! assert_eq!(outcome.status, RunStatus::Completed);
//! assert_eq!(outcome.record_count, 6); // 3 conversations of 2 turns
//! assert!(records.take().iter().all(|r| r.is_success() && r.ttft_ns <= Some(r.e2e_latency_ns)));
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Records reach a [`RecordSink`] as requests finish; [`VecSink`] keeps them
//! in memory and [`ChannelSink`] streams them to a task.
#![doc(test(attr(deny(warnings))))]
mod annotate;
mod chunk_scan;
mod chunk_template;
mod detect;
mod discovery;
mod engine;
mod engine_kind;
mod error;
mod exchange;
mod export;
mod http_trace;
mod models;
mod pacing;
mod recorder;
mod request_body;
mod response;
mod runner;
mod sampling;
mod schedule;
pub mod scrape;
mod secrets;
mod shard;
mod sink;
pub mod spec;
pub mod sse;
mod stop;
pub mod synthetic;
mod target;
mod tls_roots;
mod users;
mod vllm_fields;

pub use annotate::RecordAnnotator;
pub use detect::PROBE_PATHS;
pub use discovery::{
    discover_model, discover_model_with_headers, discover_model_with_roots, wait_for_health,
};
pub use engine::{
    Engine, EngineGuess, PREFLIGHT_TIMEOUT, PROBE_BUDGET, PROBE_MAX_BODY, Preflight,
    ServerSpeculation, detect_engine, preflight,
};
pub use error::{ClientError, OwnedField};
pub use export::{ExportLevel, RawResponse};
pub use http_trace::HttpTraceLine;
pub use models::{ModelChoice, ModelStrategy};
/// The former name of [`Load`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `Load`: one name per layer (`LoadSpec` asked for, `Load` run)"
)]
pub type LoadConfig = Load;

pub use pacing::{RampShape, RateCurve, RatePoint, RequestRamp};
pub use runner::{
    Cancellation, FixedSchedule, Load, PrefillLimit, ProfileRun, Progress, RESERVED_OPEN_FILES,
    ReadBack, RecordsFilePasses, RequestTally, RunOutcome, RunStatus, RunSummary, StopHandle,
    TurnDelay, check_open_files, new_run_id, run_profile,
};
pub use sampling::DatasetSampling;
pub use schedule::{Arrival, ArrivalSchedule, ScheduleStats};
pub use secrets::{MIN_OUTPUT_SECRET_LEN, MIN_SECRET_LEN, REDACTED, Secrets};
pub use shard::{Shard, StartBarrier};
pub use sink::{ChannelSink, LiveSink, RecordSink, RecordsHandle, VecSink};
pub use target::{
    ApiKey, ApiKind, BaseUrl, ConnectionReuse, DEFAULT_MAX_RESPONSE_BYTES, HttpClientKind, Target,
    parse_extra_inputs, parse_header,
};
pub use users::{UserCentric, UserSchedule, UserStart};
