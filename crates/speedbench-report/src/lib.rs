//! Renderings of a speedbench run: console tables, the per-category
//! acceptance matrix and its exports.
//!
//! - [`render_run_summary`]: the end-of-run console summary of one run's
//!   [`RunMetrics`](speedbench_metrics::RunMetrics), laid out like AIPerf's
//!   "LLM Metrics" and "Spec Decode" tables;
//! - [`AcceptanceMatrix`]: AIPerf `speed-bench-report`'s model-by-category
//!   matrix of token-weighted acceptance length or rate, with
//!   [`to_csv`](AcceptanceMatrix::to_csv) (AIPerf's exact CSV: CRLF,
//!   2 decimals, blanks for missing), [`to_console`](AcceptanceMatrix::to_console),
//!   [`to_markdown`](AcceptanceMatrix::to_markdown) and
//!   [`to_json`](AcceptanceMatrix::to_json);
//! - [`render_category_table`] / [`render_speed_bench_py_summary`]: llama.cpp
//!   `speed_bench.py`'s per-category table of
//!   [`SpeedBenchPyRow`](speedbench_metrics::SpeedBenchPyRow)s, and
//!   [`write_speed_bench_py_json`], its `--output` file written atomically.
//!
//! Tables are plain UTF-8 box drawings without colors or terminal detection.
//!
//! ```
//! use speedbench_record::{RequestRecord, SpecDecodeStats};
//! use speedbench_report::{AcceptanceMatrix, MatrixMetric};
//!
//! let request = |category: &str, accepted, proposed, steps| RequestRecord {
//!     category: Some(category.into()),
//!     spec: Some(SpecDecodeStats {
//!         accepted_draft_tokens: accepted,
//!         proposed_draft_tokens: proposed,
//!         verify_steps: Some(steps),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let records = vec![
//!     request("coding", 10, 129, 43),
//!     request("coding", 4, 12, 4),
//!     request("math", 30, 40, 10),
//! ];
//! let runs = [("my-model".to_string(), records.as_slice())];
//! let matrix = AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &runs);
//! print!("{}", matrix.to_csv());
//! // coding: 1 + (10 + 4) / (43 + 4) = 1.30; math: 1 + 30 / 10 = 4.00;
//! // Overall: (1.2979 + 4.0) / 2 = 2.65.
//! assert_eq!(
//!     matrix.to_csv(),
//!     "Model,coding,math,Overall\r\nmy-model,1.30,4.00,2.65\r\n"
//! );
//! ```

#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod category;
mod compare;
mod compare_html;
mod error;
mod figures;
mod format;
mod html;
mod matrix;
mod server;
mod slices_html;
mod source;
mod summary;
mod svg;
mod sweep_plot;
mod table;
mod tune;

pub use category::{
    NO_OVERLAP, SPEED_BENCH_PY_COLUMNS, SPEED_BENCH_PY_COMPARE_COLUMNS, SPEED_BENCH_PY_LEGEND,
    check_output_free, render_category_table, render_speed_bench_py_comparison,
    render_speed_bench_py_records, render_speed_bench_py_summary, speed_bench_py_cells,
    speed_bench_py_matrix_gap, write_speed_bench_py_json,
};
pub use compare::{
    BYTE_IDENTICAL_NOTE, CategoryComparison, CompareOptions, CompareRun, Comparison, Divergence,
    MAX_BOOTSTRAP_SAMPLES, RunCheck, SAMPLING_FIELDS, SpeedBenchPyComparison, check_runs_match,
    check_speed_bench_py_match, compare, compare_speed_bench_py, load_compare_run,
    run_gpu_telemetry, summary_field,
};
pub use compare_html::{CompareHtml, render_compare_html};
pub use error::ReportError;
pub use figures::{goodput_line, render_gpu_telemetry, render_repeated};
pub use html::{HtmlReport, HtmlRun, render_html};
pub use matrix::{
    AcceptanceMatrix, Cell, MatrixMetric, MatrixRow, OVERALL_DEFINITION, RowRun, RunCells,
    records_cells,
};
pub use server::Weighting;
pub use source::{
    ResolvedSource, SourceChoice, build_matrix, matrix_columns, run_cells, run_column,
};
/// Computed in `speedbench-metrics`; re-exported because [`Comparison`]'s
/// rows carry them.
pub use speedbench_metrics::{DecodeSource, Interval, OVERALL};
pub use summary::{ACCEPTANCE_LENGTH_DEFINITIONS, render_run_summary};
pub use sweep_plot::{PlotPoint, PlotSeries, SweepPlot, SweepPlotKind, render_sweep_plot_svg};
pub use tune::{
    BreakEven, CategoryAnswer, LevelComparison, LoadChoice, PredictedBudget, TunePrediction,
    TuneReport, TunedConfiguration,
};
