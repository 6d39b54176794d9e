//! Server-side metrics without HTTP: the Prometheus text parser, the
//! `server_metrics_export.json` types, the reduction of scraped samples to
//! counter deltas and gauge statistics, and the one precedence that turns an
//! export into acceptance numbers.
//!
//! This is the portable acceptance path: every engine publishes something
//! on `/metrics` (vLLM's `vllm:spec_decode_*` counters, llama.cpp's
//! `llamacpp:spec_decode_*` counters, SGLang's `sglang:spec_accept_length` /
//! `spec_accept_rate` gauges, TensorRT-LLM's `trtllm_spec_decode_*`).
//!
//! - [`parse_exposition`] parses the Prometheus text format 0.0.4 (and
//!   OpenMetrics text) by hand: `prometheus-parse` rejects `:` in names and
//!   `}` in label values.
//! - [`EndpointSamples`] collects one endpoint's expositions over a run and
//!   [`ServerMetricsExport::from_samples`] reduces them over the profiling
//!   [`Window`] (AIPerf's rules: warmup excluded, resets counted from zero,
//!   gauges' numpy-linear percentiles).
//! - [`ServerMetricsExport`] is what `server_metrics_export.json` holds,
//!   in AIPerf's layout; it reads AIPerf's own exports as well, and
//!   [`ServerMetricsExport::to_csv`] writes AIPerf's CSV layout of it
//!   (units by [`infer_unit`], AIPerf's rules).
//! - [`ServerMetricsExport::acceptance_length`] and
//!   [`acceptance_rate`](ServerMetricsExport::acceptance_rate) apply
//!   AIPerf's precedence (acceptance gauges, then counters, then any gauge
//!   named like one; see the [`acceptance`] module), and
//!   [`spec_decode`](ServerMetricsExport::spec_decode) the same per engine.
//!   speedbench's client and `speedbench report --source server` both call
//!   them, so one export gives one number.
//!
//! The fetching loop lives in `speedbench_client::scrape`; this crate does
//! no I/O besides [`ServerMetricsExport::read`].
//!
//! ```
//! use std::time::Duration;
//! use speedbench_scrape::{EndpointSamples, ServerMetricsExport, Weighting, Window,
//!     parse_exposition};
//!
//! // Three scrapes of a vLLM server that also publishes an acceptance gauge.
//! let mut samples = EndpointSamples::new();
//! for (at_ns, drafts, accepted, gauge) in [(0, 10, 5, 1.9), (1_000, 20, 25, 2.6), (2_000, 30, 45, 2.8)] {
//!     let text = format!(
//!         "# TYPE vllm:spec_decode_num_drafts counter\n\
//!          vllm:spec_decode_num_drafts_total{{engine=\"0\"}} {drafts}\n\
//!          ## TYPE vllm:spec_decode_num_accepted_tokens counter\n\
//!          vllm:spec_decode_num_accepted_tokens_total{{engine=\"0\"}} {accepted}\n\
//!          ## TYPE vllm:spec_decode_mean_accepted_length gauge\n\
//!          vllm:spec_decode_mean_accepted_length {gauge}\n"
//!     );
//!     samples.record(&parse_exposition(&text)?, at_ns, Duration::from_millis(3));
//! }
//! // Warmup ran until 500 ns: the scrape at 0 is the counters' reference.
//! let window = Window { start: Some(500), end: Some(2_000) };
//! let export = ServerMetricsExport::from_samples(
//!     vec![("http://127.0.0.1:8000/metrics".into(), samples)],
//!     window,
//!     Duration::from_millis(333),
//!     "example 0.1",
//! );
//! // Counters: 40 accepted over 20 steps.
//! assert_eq!(export.counter_total("vllm:spec_decode_num_accepted_tokens"), Some(40.0));
//! // But the acceptance gauge comes first, as in AIPerf: the mean of the
//! // two in-window samples, time-averaged.
//! let al = export.acceptance_length().unwrap();
//! assert!((al.value - 2.7).abs() < 1e-12);
//! assert_eq!(al.weighting, Weighting::TimeAveragedGauge);
//!
//! // The export round-trips through its JSON file.
//! let json = serde_json::to_string(&export).unwrap();
//! assert_eq!(ServerMetricsExport::from_json(&json).unwrap(), export);
//! # Ok::<(), speedbench_scrape::ScrapeError>(())
//! ```

#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

pub mod acceptance;
mod collect;
mod csv_export;
mod error;
mod export;
pub mod gpu;
pub mod iteration_stats;
mod parse;
mod raw;
#[cfg(feature = "parquet")]
mod raw_parquet;
mod units;

pub use acceptance::{Acceptance, SpecDecodeSummary, Weighting};
pub use collect::EndpointSamples;
pub use error::ScrapeError;
pub use export::{
    CounterAggregate, CounterStats, EndpointInfo, ExportSummary, GaugeStats, HistogramStats,
    MetricExport, SeriesExport, SeriesStats, ServerMetricsExport, SliceRates, Window,
};
pub use gpu::{EnergyComparison, EnergySide, GpuFigures, GpuTelemetry, is_dcgm};
pub use iteration_stats::{IterationStatsTotals, is_iteration_stats};
pub use parse::{Exposition, MetricType, Sample, parse_exposition};
pub use raw::{RESERVED_COLUMNS, RawRow, RawServerMetrics};
pub use units::infer_unit;
