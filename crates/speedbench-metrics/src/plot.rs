//! The figures an AIPerf plot envelope names (`plot:` of a config), taken
//! from a run's [`RunMetrics`], and the Pareto frontier of a set of them.

use crate::run::RunMetrics;
use crate::summary::Summary;

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Higher is better (throughputs).
    Higher,
    /// Lower is better (latencies).
    Lower,
}

/// A run figure by AIPerf's metric tag: the ones its sweep plots draw
/// from request data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotMetric {
    /// `request_latency` (ms).
    RequestLatency,
    /// `time_to_first_token` (ms).
    TimeToFirstToken,
    /// `inter_token_latency` (ms).
    InterTokenLatency,
    /// `output_token_throughput` (tokens/s): one value, `avg` only.
    OutputTokenThroughput,
    /// `request_throughput` (requests/s): one value, `avg` only.
    RequestThroughput,
    /// `output_token_throughput_per_user` (tokens/s/user).
    OutputTokenThroughputPerUser,
    /// `output_sequence_length` (tokens).
    OutputSequenceLength,
    /// `input_sequence_length` (tokens).
    InputSequenceLength,
}

/// Every tag [`PlotMetric::named`] knows, in the order errors list them.
pub const PLOT_METRICS: [&str; 8] = [
    "request_latency",
    "time_to_first_token",
    "inter_token_latency",
    "output_token_throughput",
    "request_throughput",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
];

/// Every statistic [`PlotMetric::value`] takes, as AIPerf names them.
pub const PLOT_STATS: [&str; 7] = ["avg", "min", "max", "p50", "p90", "p99", "std"];

impl PlotMetric {
    /// The metric of AIPerf's tag `tag`; `None` for one speedbench does not
    /// compute from request data (the `*_per_gpu` ones need GPU telemetry).
    pub fn named(tag: &str) -> Option<PlotMetric> {
        use PlotMetric::*;
        Some(match tag {
            "request_latency" => RequestLatency,
            "time_to_first_token" => TimeToFirstToken,
            "inter_token_latency" => InterTokenLatency,
            "output_token_throughput" => OutputTokenThroughput,
            "request_throughput" => RequestThroughput,
            "output_token_throughput_per_user" => OutputTokenThroughputPerUser,
            "output_sequence_length" => OutputSequenceLength,
            "input_sequence_length" => InputSequenceLength,
            _ => return None,
        })
    }

    /// Which way the figure is better (AIPerf's `LARGER_IS_BETTER`).
    pub fn better(self) -> Better {
        use PlotMetric::*;
        match self {
            OutputTokenThroughput
            | RequestThroughput
            | OutputTokenThroughputPerUser
            | OutputSequenceLength => Better::Higher,
            RequestLatency | TimeToFirstToken | InterTokenLatency | InputSequenceLength => {
                Better::Lower
            }
        }
    }

    /// The unit its values are in.
    pub fn unit(self) -> &'static str {
        use PlotMetric::*;
        match self {
            RequestLatency | TimeToFirstToken | InterTokenLatency => "ms",
            OutputTokenThroughput => "tokens/s",
            RequestThroughput => "requests/s",
            OutputTokenThroughputPerUser => "tokens/s/user",
            OutputSequenceLength | InputSequenceLength => "tokens",
        }
    }

    /// Whether the metric is one value per run (a throughput), so that
    /// only `avg` names it.
    pub fn is_one_value(self) -> bool {
        matches!(
            self,
            PlotMetric::OutputTokenThroughput | PlotMetric::RequestThroughput
        )
    }

    /// Its statistic `stat` (one of [`PLOT_STATS`]) in `metrics`; `None`
    /// when the run has no such figure (no successful request, a run that
    /// did not stream has no TTFT) or `stat` is not one of them.
    pub fn value(self, metrics: &RunMetrics, stat: &str) -> Option<f64> {
        use PlotMetric::*;
        let summary: &Option<Summary> = match self {
            OutputTokenThroughput => {
                return (stat == "avg").then_some(metrics.output_token_throughput)?;
            }
            RequestThroughput => return (stat == "avg").then_some(metrics.request_throughput)?,
            RequestLatency => &metrics.request_latency_ms,
            TimeToFirstToken => &metrics.ttft_ms,
            InterTokenLatency => &metrics.inter_token_latency_ms,
            OutputTokenThroughputPerUser => &metrics.output_token_throughput_per_user,
            OutputSequenceLength => &metrics.output_sequence_length,
            InputSequenceLength => &metrics.input_sequence_length,
        };
        let s = summary.as_ref()?;
        Some(match stat {
            "avg" => s.avg,
            "min" => s.min,
            "max" => s.max,
            "p50" => s.p50,
            "p90" => s.p90,
            "p99" => s.p99,
            "std" => s.std,
            _ => return None,
        })
    }
}

/// Which of `points` (x, y) lie on the Pareto frontier, as AIPerf's Pareto
/// plot finds it: sorted by x ascending, ties by y best first, then scanned
/// from the better end of x; a point is on it when its y is at least as good
/// as every y scanned before it. Identical points are all on it.
///
/// ```
/// use speedbench_metrics::{Better, pareto_frontier};
///
/// // (latency, throughput): lower latency and higher throughput are better.
/// let points = [(10.0, 100.0), (20.0, 90.0), (30.0, 300.0), (40.0, 250.0)];
/// let on = pareto_frontier(&points, Better::Lower, Better::Higher);
/// assert_eq!(on, [true, false, true, false]);
/// ```
pub fn pareto_frontier(points: &[(f64, f64)], x: Better, y: Better) -> Vec<bool> {
    // The key a smaller value of which is a better y.
    let y_key = |i: usize| match y {
        Better::Higher => -points[i].1,
        Better::Lower => points[i].1,
    };
    let mut order: Vec<usize> = (0..points.len()).collect();
    order.sort_by(|&a, &b| {
        points[a]
            .0
            .total_cmp(&points[b].0)
            .then(y_key(a).total_cmp(&y_key(b)))
    });
    if x == Better::Higher {
        order.reverse();
    }
    let mut on = vec![false; points.len()];
    let mut best = f64::INFINITY;
    for i in order {
        if y_key(i) <= best {
            on[i] = true;
            best = y_key(i);
        }
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AIPerf's scan, worked by hand: lower latency and higher throughput
    /// better; a tie in x keeps only the better y (sorted first), and an
    /// equal later y stays on (non-strict).
    #[test]
    fn the_frontier_is_aiperfs_scan() {
        let points = [
            (10.0, 100.0), // first: on
            (10.0, 80.0),  // same x, worse y: off
            (20.0, 100.0), // equal y: on (non-strict)
            (25.0, 90.0),  // off
            (30.0, 150.0), // on
            (35.0, 150.0), // equal: on
            (50.0, 120.0), // off
        ];
        let on = pareto_frontier(&points, Better::Lower, Better::Higher);
        assert_eq!(on, [true, false, true, false, true, true, false]);
        // Both lower better (latency vs ITL): scanning up x, y must fall.
        let on = pareto_frontier(
            &[(1.0, 5.0), (2.0, 3.0), (3.0, 4.0)],
            Better::Lower,
            Better::Lower,
        );
        assert_eq!(on, [true, true, false]);
        // Higher x better: scanned from the top of x down, so of a tie in x
        // the worse y comes first (AIPerf sorts ties best first, then scans
        // backwards) and both are on.
        let on = pareto_frontier(
            &[(1.0, 5.0), (2.0, 3.0), (3.0, 1.0), (3.0, 0.5), (0.5, 4.0)],
            Better::Higher,
            Better::Higher,
        );
        assert_eq!(on, [true, true, true, true, false]);
        assert!(pareto_frontier(&[], Better::Lower, Better::Higher).is_empty());
    }

    #[test]
    fn a_metric_gives_its_statistic_and_throughputs_only_avg() {
        let summary = Summary {
            count: 3,
            avg: 2.0,
            min: 1.0,
            max: 3.0,
            p99: 2.98,
            p90: 2.8,
            p50: 2.0,
            std: 0.8,
        };
        let metrics = RunMetrics {
            request_throughput: Some(4.5),
            ttft_ms: Some(summary),
            ..RunMetrics::from_records(&[])
        };
        let ttft = PlotMetric::named("time_to_first_token").unwrap();
        assert_eq!(ttft.value(&metrics, "p90"), Some(2.8));
        assert_eq!(ttft.value(&metrics, "p75"), None);
        let rate = PlotMetric::named("request_throughput").unwrap();
        assert_eq!(rate.value(&metrics, "avg"), Some(4.5));
        assert_eq!(rate.value(&metrics, "p50"), None);
        assert_eq!(
            PlotMetric::named("request_latency")
                .unwrap()
                .value(&metrics, "avg"),
            None
        );
        assert!(PlotMetric::named("output_token_throughput_per_gpu").is_none());
        assert!(PLOT_METRICS.iter().all(|m| PlotMetric::named(m).is_some()));
    }
}
