//! A sweep's plots (an AIPerf config's `plot:` envelope, its
//! `multi_run_defaults`): one figure of each run against another, drawn
//! once the sweep has ended, into `plots/` under the sweep's directory.

use std::path::{Path, PathBuf};

use speedbench_metrics::{PlotMetric, RunMetrics};
use speedbench_report::{PlotPoint, PlotSeries, SweepPlot, SweepPlotKind, render_sweep_plot_svg};

use super::SweepOutcome;
use crate::RunError;

/// The directory under a sweep's that holds its plots.
pub const PLOTS_DIR: &str = "plots";

/// One figure on an axis: AIPerf's metric tag and statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotAxis {
    /// The metric's tag (`request_latency`).
    pub tag: String,
    /// The metric.
    pub metric: PlotMetric,
    /// The statistic (`avg`, `p90`, ...).
    pub stat: String,
}

impl PlotAxis {
    /// The axis's title: `request_latency avg (ms)`.
    fn title(&self) -> String {
        format!("{} {} ({})", self.tag, self.stat, self.metric.unit())
    }

    fn value(&self, metrics: &RunMetrics) -> Option<f64> {
        self.metric.value(metrics, &self.stat)
    }
}

/// One plot a sweep draws.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotRequest {
    /// Its name in the envelope, and its file's (`NAME.svg`).
    pub name: String,
    /// What it draws through its points.
    pub kind: SweepPlotKind,
    /// Its x figure.
    pub x: PlotAxis,
    /// Its y figure.
    pub y: PlotAxis,
    /// Its title (the envelope's, or made of the figures).
    pub title: String,
}

/// The plots a sweep draws, and what the envelope asked for that is not
/// drawn, each with why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SweepPlots {
    /// Drawn once the sweep has ended.
    pub draw: Vec<PlotRequest>,
    /// What is not drawn, and why (said when the plots are written).
    pub notes: Vec<String>,
}

impl SweepPlots {
    /// Draws every plot over the runs of `outcome` (`variations` runs per
    /// trial, trials in order: a point is a run's figure, or the mean over
    /// its trials that have it), into `parent/plots/NAME.svg`; the files
    /// written.
    pub fn write(
        &self,
        outcome: &SweepOutcome,
        variations: usize,
        parent: &Path,
    ) -> Result<Vec<PathBuf>, RunError> {
        if self.draw.is_empty() {
            return Ok(Vec::new());
        }
        let dir = parent.join(PLOTS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        let mut written = Vec::new();
        for plot in &self.draw {
            let svg = render_sweep_plot_svg(&chart(plot), &series(plot, outcome, variations));
            let path = dir.join(format!("{}.svg", plot.name));
            std::fs::write(&path, svg).map_err(|e| io_error(&path, e))?;
            written.push(path);
        }
        Ok(written)
    }
}

fn io_error(path: &Path, source: std::io::Error) -> RunError {
    RunError::Io {
        context: format!("writing the sweep's plot {}", path.display()),
        source,
    }
}

/// The chart of `plot`: its kind, title and axes.
fn chart(plot: &PlotRequest) -> SweepPlot {
    SweepPlot {
        kind: plot.kind,
        title: plot.title.clone(),
        x_title: plot.x.title(),
        y_title: plot.y.title(),
        x_better: plot.x.metric.better(),
        y_better: plot.y.metric.better(),
    }
}

/// The points of `plot`, a series per model in order of first appearance:
/// each variation's figures, the mean over its trials that have both.
fn series(plot: &PlotRequest, outcome: &SweepOutcome, variations: usize) -> Vec<PlotSeries> {
    let mut out: Vec<PlotSeries> = Vec::new();
    for trials in outcome.runs_by_variation(variations) {
        let figures: Vec<(f64, f64)> = trials
            .iter()
            .filter_map(|(_, end)| end.metrics())
            .filter_map(|m| Some((plot.x.value(m)?, plot.y.value(m)?)))
            .collect();
        if figures.is_empty() {
            continue;
        }
        let n = figures.len() as f64;
        let (run, _) = trials[0];
        let point = PlotPoint {
            label: variation_label(&run.description),
            x: figures.iter().map(|f| f.0).sum::<f64>() / n,
            y: figures.iter().map(|f| f.1).sum::<f64>() / n,
        };
        let group = run
            .spec()
            .and_then(|s| s.target.model.clone())
            .unwrap_or_else(|| "the served model".to_string());
        match out.iter_mut().find(|s| s.group == group) {
            Some(s) => s.points.push(point),
            None => out.push(PlotSeries {
                group,
                points: vec![point],
            }),
        }
    }
    out
}

/// A run's description without its trial and with each swept field by
/// its last name (`phases.profiling.concurrency=4 (trial 1 of 3)` is the
/// variation `concurrency=4`).
fn variation_label(description: &str) -> String {
    let variation = description
        .find(" (trial ")
        .map_or(description, |at| &description[..at]);
    variation
        .split(", ")
        .map(|part| match part.split_once('=') {
            Some((path, value)) => {
                let name = path.rsplit('.').next().unwrap_or(path);
                format!("{name}={value}")
            }
            None => part.to_string(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunSpec;
    use crate::sweep::{RunEnd, Sweep};
    use speedbench_metrics::Summary;

    fn metrics(latency_avg: f64, throughput: f64) -> RunMetrics {
        let latency = Summary {
            count: 1,
            avg: latency_avg,
            min: latency_avg,
            max: latency_avg,
            p99: latency_avg,
            p90: latency_avg,
            p50: latency_avg,
            std: 0.0,
        };
        RunMetrics {
            request_latency_ms: Some(latency),
            output_token_throughput: Some(throughput),
            ..RunMetrics::from_records(&[])
        }
    }

    fn request() -> PlotRequest {
        PlotRequest {
            name: "pareto".into(),
            kind: SweepPlotKind::Pareto,
            x: PlotAxis {
                tag: "request_latency".into(),
                metric: PlotMetric::RequestLatency,
                stat: "avg".into(),
            },
            y: PlotAxis {
                tag: "output_token_throughput".into(),
                metric: PlotMetric::OutputTokenThroughput,
                stat: "avg".into(),
            },
            title: "t".into(),
        }
    }

    /// Two variations in three trials: each point is the mean of its
    /// trials that have both figures; a failed trial is left out.
    #[test]
    fn a_point_is_the_mean_of_its_variations_trials() {
        let base = RunSpec::default()
            .with("url", "http://127.0.0.1:8000")
            .unwrap()
            .with("model", "m")
            .unwrap();
        let grid = Sweep::grid(&base, "sweep", &[("concurrency", &["1", "4"])]).unwrap();
        let trials = crate::RepeatSpec {
            num_profile_runs: 3,
            ..Default::default()
        };
        let runs = grid.in_trials(&trials).unwrap().into_runs();
        let ends = [
            RunEnd::Completed(Some(Box::new(metrics(10.0, 100.0)))),
            RunEnd::Completed(Some(Box::new(metrics(40.0, 400.0)))),
            RunEnd::Completed(Some(Box::new(metrics(20.0, 200.0)))),
            RunEnd::NotStarted,
            RunEnd::Completed(Some(Box::new(metrics(30.0, 300.0)))),
            RunEnd::Completed(Some(Box::new(metrics(50.0, 500.0)))),
        ];
        let outcome = SweepOutcome::from_ends(runs.into_iter().zip(ends).collect());
        let got = series(&request(), &outcome, 2);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].group, "m");
        // concurrency=1: trials 10/100, 20/200, 30/300; concurrency=4:
        // 40/400 and 50/500 (its second trial never started).
        assert_eq!(
            got[0].points,
            [
                PlotPoint {
                    label: "concurrency=1".into(),
                    x: 20.0,
                    y: 200.0
                },
                PlotPoint {
                    label: "concurrency=4".into(),
                    x: 45.0,
                    y: 450.0
                },
            ]
        );
        assert_eq!(
            variation_label(
                "phases.profiling.concurrency=4, request-rate=2 (trial 1 of 3, no warmup)"
            ),
            "concurrency=4, request-rate=2"
        );
        let dir = tempfile::tempdir().unwrap();
        let plots = SweepPlots {
            draw: vec![request()],
            notes: Vec::new(),
        };
        let written = plots.write(&outcome, 2, dir.path()).unwrap();
        assert_eq!(written, [dir.path().join("plots/pareto.svg")]);
        let svg = std::fs::read_to_string(&written[0]).unwrap();
        assert!(svg.contains("data-label=\"concurrency=4\" data-x=\"45\" data-y=\"450\""));
    }
}
