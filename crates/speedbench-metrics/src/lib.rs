//! Per-request and aggregate statistics over speedbench [`RequestRecord`]s.
//!
//! The formulas follow AIPerf's per-request spec-decode metrics and its
//! `speed-bench-report`, and llama.cpp's `speed_bench.py` for its
//! per-sample results, per-category summary and `--output` JSON
//! ([`SpeedBenchPySample`], [`SpeedBenchPyRow`], [`SpeedBenchPyOutput`]):
//!
//! - per-request values ([`RequestMetricsExt`]): acceptance length
//!   `1 + accepted / steps`, draft acceptance rate `accepted / proposed`,
//!   accepted per verified `(accepted + steps) / (proposed + steps)`, ITL
//!   `(e2e - ttft) / (tokens - 1)`, per-user throughput `1 / ITL`;
//! - per-request means ([`Summary`]) weigh every request equally;
//! - token-weighted quantities ([`AcceptanceTotals`]) sum numerator and
//!   denominator over the group and divide once;
//! - the `Overall` of a matrix row is the unweighted mean of its present
//!   cells ([`macro_average`]);
//! - warmup records and failed records are excluded from every statistic
//!   ([`is_measured`], the one definition of a measured request); failures
//!   are counted ([`RequestCounts`]);
//! - plain and per-group means ([`mean`], [`mean_by`]), box-plot numbers
//!   ([`BoxStats`], [`box_stats_by`]) and every percentile
//!   ([`percentile_sorted`], numpy's linear method);
//! - goodput against SLOs ([`Slos`], [`Goodput`]), the steady state of a
//!   closed loop ([`SteadyState`]) and time slices ([`time_slices`]), asked
//!   for through [`FigureOptions`];
//! - run-to-run variance of repeated runs ([`RepeatedMetrics`], [`Spread`]:
//!   mean, sample std, CV and a Student's t interval across the runs);
//! - baseline-against-speculative speedups as llama.cpp's
//!   `speed_bench_compare.py` computes them ([`Speedups`], [`DecodeSource`])
//!   with percentile-bootstrap intervals ([`bootstrap_interval`]) drawn from
//!   [`SplitMix64`], the one seeded generator of speedbench (the client's
//!   arrival schedule and the simulator draw from it too).
//!
//! ```
//! use speedbench_metrics::{RequestMetricsExt, RunMetrics};
//! use speedbench_record::{RequestRecord, SpecDecodeStats};
//!
//! let request = |accepted, proposed, steps| RequestRecord {
//!     spec: Some(SpecDecodeStats {
//!         accepted_draft_tokens: accepted,
//!         proposed_draft_tokens: proposed,
//!         verify_steps: Some(steps),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let records = [request(10, 129, 43), request(4, 12, 4)];
//!
//! // Per request: 1 + 10/43 and 1 + 4/4.
//! println!("AL of the first request: {:.4}", records[0].acceptance_length().unwrap());
//! assert_eq!(records[1].acceptance_length(), Some(2.0));
//!
//! let spec = RunMetrics::from_records(&records).spec_decode;
//! // Equal weight per request: (1.2326 + 2.0) / 2.
//! let mean = spec.acceptance_length.unwrap().avg;
//! // Token-weighted: 1 + 14/47.
//! let weighted = spec.token_weighted_acceptance_length().unwrap();
//! println!("acceptance length: mean {mean:.4}, token-weighted {weighted:.4}");
//! assert!((weighted - (1.0 + 14.0 / 47.0)).abs() < 1e-12);
//! ```
//!
//! [`RequestRecord`]: speedbench_record::RequestRecord

#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod acceptance;
mod bootstrap;
mod boxplot;
mod decide;
mod fold;
mod goodput;
mod http_trace;
mod live;
mod mean;
mod measured;
mod passes;
mod plot;
mod predict;
mod repeat;
mod request;
mod rng;
mod run;
mod run_fold;
mod spec;
mod speed_bench_py;
mod speedup;
mod steady;
mod summary;
mod summary_passes;
mod window;

pub use acceptance::{
    AcceptanceTotals, ITERATION_LABEL, RequestAcceptance, iterations_of, macro_average,
    request_acceptance, run_speculates, zero_step_defect,
};
pub use bootstrap::{Bootstrap, Interval, bootstrap_interval};
pub use boxplot::{BoxStats, box_stats_by};
pub use decide::{Candidate, Choice, break_even, choose};
pub use fold::{
    AcceptanceFold, DATASET_PREFIXES, RecordsDigest, acceptance_by, histograms_by, matrix_column,
    strip_dataset_prefix,
};
pub use goodput::{Goodput, GoodputComparison, Slo, SloAttainment, SloMetric, Slos};
pub use http_trace::HttpTraceMetrics;
pub use live::{LiveCategory, LiveFigures, LivePercentiles, LiveSnapshot};
pub use mean::{GroupMean, mean, mean_by};
pub use measured::is_measured;
pub use passes::RecordPasses;
pub use plot::{Better, PLOT_METRICS, PLOT_STATS, PlotMetric, pareto_frontier};
pub use predict::{
    BudgetPrediction, MeasuredPasses, decode_speedup, pass_time_ms, predict_budgets,
};
pub use repeat::{AcrossRuns, RatioInterval, RepeatedFigure, RepeatedMetrics, Spread, t_quantile};
pub use request::RequestMetricsExt;
pub use rng::SplitMix64;
pub use run::{
    ErrorCount, FigureOptions, MIN_RESOLVED_INTERVAL_NS, ModelMetrics, RequestCounts, RunMetrics,
    ServerTimingMetrics,
};
pub use spec::{PerPass, PooledHistogram, SpecDecodeMetrics, length_at_budgets};
pub use speed_bench_py::{
    OVERALL, SpeedBenchPyComparisonRow, SpeedBenchPyConfig, SpeedBenchPyOutput, SpeedBenchPyRow,
    SpeedBenchPySample, has_llamacpp_timing, has_llamacpp_timings, speed_bench_py_compare,
    speed_bench_py_elapsed_s, speed_bench_py_rows, speed_bench_py_summary,
};
pub use speedup::{DecodeSource, Speedups, decode_tps_by, mean_ratio, ratio};
pub use summary::{Summary, percentile_sorted};
pub use summary_passes::SummaryPasses;
pub use window::{SteadyState, SteadyStateOptions, TimeSlice, WindowFigures, time_slices};
