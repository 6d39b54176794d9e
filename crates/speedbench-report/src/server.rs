//! Acceptance from a server-metrics export (`server_metrics_export.json`,
//! speedbench's or AIPerf's): read typed by `speedbench_scrape`, whose
//! precedence (AIPerf's: acceptance gauges, then counters, then any gauge
//! named like one) the client's end-of-run line uses too, so one export
//! gives one number.

use speedbench_scrape::ServerMetricsExport;
pub use speedbench_scrape::Weighting;

use crate::matrix::MatrixMetric;

/// The export's run-level figure for `metric`, and how it is weighted
/// (`None` for metrics the scrape has no run figure for).
pub(crate) fn figure(
    export: &ServerMetricsExport,
    metric: MatrixMetric,
) -> Option<(f64, Weighting)> {
    let found = match metric {
        MatrixMetric::AcceptLength => export.acceptance_length(),
        MatrixMetric::AcceptRate => export.acceptance_rate(),
        MatrixMetric::Throughput | MatrixMetric::DecodeTps | MatrixMetric::Latency => None,
    };
    found.map(|a| (a.value, a.weighting))
}
