//! A sweep's plots as standalone SVG files: one figure of each run against
//! another (AIPerf's `multi_run_plots` of a config's `plot:` envelope),
//! a line per group, each point labelled with what set its run apart.

use std::fmt::Write;

use speedbench_metrics::{Better, pareto_frontier};

use crate::svg::{PALETTE, Scale, esc, y_axis};

/// What a sweep plot draws through its points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepPlotKind {
    /// Every point, and a line through those on the Pareto frontier
    /// ([`pareto_frontier`]) of each group.
    Pareto,
    /// Every point, joined in order of x.
    ScatterLine,
}

/// One sweep plot: its kind, title and axes.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepPlot {
    /// What it draws through its points.
    pub kind: SweepPlotKind,
    /// The title above it.
    pub title: String,
    /// The x axis's title (the figure and its statistic).
    pub x_title: String,
    /// The y axis's title.
    pub y_title: String,
    /// Which way x is better (for the Pareto frontier).
    pub x_better: Better,
    /// Which way y is better.
    pub y_better: Better,
}

/// One point: a run of the sweep (or the mean of its trials).
#[derive(Debug, Clone, PartialEq)]
pub struct PlotPoint {
    /// What set its run apart (`concurrency=4`).
    pub label: String,
    /// Its x figure.
    pub x: f64,
    /// Its y figure.
    pub y: f64,
}

/// The points of one group (one model), drawn in one colour.
#[derive(Debug, Clone, PartialEq)]
pub struct PlotSeries {
    /// The group's name, in the legend.
    pub group: String,
    /// Its points, in the sweep's order.
    pub points: Vec<PlotPoint>,
}

const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const PLOT_W: f64 = 600.0;
const PLOT_H: f64 = 320.0;

/// `plot` over `series` as a standalone SVG document. Each point is a
/// circle carrying its group, label, figures and whether it is on the
/// frontier (`data-*` attributes), so the file is also its own data.
pub fn render_sweep_plot_svg(plot: &SweepPlot, series: &[PlotSeries]) -> String {
    let all = || series.iter().flat_map(|s| &s.points);
    let x_scale = Scale::nice(all().map(|p| p.x).fold(0.0, f64::max));
    let y_scale = Scale::nice(all().map(|p| p.y).fold(0.0, f64::max));
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" font-family=\"sans-serif\"><rect width=\"100%\" height=\"100%\" fill=\"white\"/><text x=\"{:.1}\" y=\"22\" font-size=\"15\" text-anchor=\"middle\">{}</text>",
        WIDTH / 2.0,
        esc(&plot.title)
    );
    let (Some(xs), Some(ys)) = (x_scale, y_scale) else {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">no run has both figures</text></svg>",
            WIDTH / 2.0,
            HEIGHT / 2.0
        );
        return svg;
    };
    let _ = write!(svg, "<g transform=\"translate(0 {TOP})\">");
    y_axis(&mut svg, &ys, LEFT, LEFT + PLOT_W, PLOT_H, &plot.y_title);
    x_axis(&mut svg, &xs, &plot.x_title);
    let at = |p: &PlotPoint| (LEFT + PLOT_W * p.x / xs.top, PLOT_H - PLOT_H * p.y / ys.top);
    for (i, s) in series.iter().enumerate() {
        draw_series(&mut svg, plot, (i, s), &at);
    }
    svg.push_str("</g></svg>");
    svg
}

/// One series: its line, its points (each with its label) and its entry
/// in the legend; `at` places a point in the plot's frame.
fn draw_series(
    svg: &mut String,
    plot: &SweepPlot,
    (i, s): (usize, &PlotSeries),
    at: &dyn Fn(&PlotPoint) -> (f64, f64),
) {
    let colour = PALETTE[i % PALETTE.len()];
    let on = on_line(plot, &s.points);
    let mut line: Vec<&PlotPoint> = s
        .points
        .iter()
        .zip(&on)
        .filter(|(_, on)| **on)
        .map(|(p, _)| p)
        .collect();
    line.sort_by(|a, b| a.x.total_cmp(&b.x));
    let path: Vec<String> = line
        .iter()
        .map(|p| {
            let (x, y) = at(p);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = write!(
        svg,
        "<polyline class=\"series-line\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
        path.join(" ")
    );
    for (p, on) in s.points.iter().zip(&on) {
        let (x, y) = at(p);
        let _ = write!(
            svg,
            "<circle class=\"point\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{}\" fill=\"{colour}\" data-group=\"{}\" data-label=\"{}\" data-x=\"{}\" data-y=\"{}\" data-frontier=\"{}\"><title>{}: {} = {}, {} = {}</title></circle><text class=\"point-label\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"9\">{}</text>",
            if *on { 4.5 } else { 3.0 },
            esc(&s.group),
            esc(&p.label),
            p.x,
            p.y,
            plot.kind == SweepPlotKind::Pareto && *on,
            esc(&p.label),
            esc(&plot.x_title),
            p.x,
            esc(&plot.y_title),
            p.y,
            x + 6.0,
            y - 6.0,
            esc(&p.label)
        );
    }
    let _ = write!(
        svg,
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text class=\"legend\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\">{}</text>",
        LEFT + PLOT_W - 150.0,
        8.0 + 16.0 * i as f64,
        LEFT + PLOT_W - 136.0,
        17.0 + 16.0 * i as f64,
        esc(&s.group)
    );
}

/// Which points the series' line goes through: the Pareto frontier, or
/// every point.
fn on_line(plot: &SweepPlot, points: &[PlotPoint]) -> Vec<bool> {
    match plot.kind {
        SweepPlotKind::Pareto => {
            let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.x, p.y)).collect();
            pareto_frontier(&xy, plot.x_better, plot.y_better)
        }
        SweepPlotKind::ScatterLine => vec![true; points.len()],
    }
}

/// Vertical grid lines, tick labels and title of the x axis, below the
/// plot area.
fn x_axis(svg: &mut String, scale: &Scale, title: &str) {
    for t in scale.ticks() {
        let x = LEFT + PLOT_W * t / scale.top;
        let _ = write!(
            svg,
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"0\" y2=\"{PLOT_H}\" stroke=\"#eee\"/><text class=\"tick x-tick\" x=\"{x:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            PLOT_H + 14.0,
            scale.label(t)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{PLOT_H}\" y2=\"{PLOT_H}\" stroke=\"#444\"/><text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
        LEFT + PLOT_W,
        LEFT + PLOT_W / 2.0,
        PLOT_H + 34.0,
        esc(title)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(label: &str, x: f64, y: f64) -> PlotPoint {
        PlotPoint {
            label: label.into(),
            x,
            y,
        }
    }

    fn plot(kind: SweepPlotKind) -> SweepPlot {
        SweepPlot {
            kind,
            title: "Pareto: throughput vs latency".into(),
            x_title: "request_latency avg (ms)".into(),
            y_title: "output_token_throughput avg (tokens/s)".into(),
            x_better: Better::Lower,
            y_better: Better::Higher,
        }
    }

    /// The circles' data, in order: (group, label, x, y, frontier).
    fn circles(svg: &str) -> Vec<(String, String, f64, f64, bool)> {
        let attr = |c: &str, name: &str| {
            let at = c.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            c[at..at + c[at..].find('"').unwrap()].to_string()
        };
        svg.split("<circle ")
            .skip(1)
            .map(|c| {
                (
                    attr(c, "data-group"),
                    attr(c, "data-label"),
                    attr(c, "data-x").parse().unwrap(),
                    attr(c, "data-y").parse().unwrap(),
                    attr(c, "data-frontier") == "true",
                )
            })
            .collect()
    }

    #[test]
    fn a_pareto_plot_marks_its_frontier_and_draws_a_line_through_it() {
        let series = [PlotSeries {
            group: "m <1>".into(),
            points: vec![
                point("concurrency=1", 10.0, 100.0),
                point("concurrency=2", 20.0, 90.0),
                point("concurrency=4", 30.0, 300.0),
            ],
        }];
        let svg = render_sweep_plot_svg(&plot(SweepPlotKind::Pareto), &series);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        let got = circles(&svg);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0],
            (
                "m &lt;1&gt;".into(),
                "concurrency=1".into(),
                10.0,
                100.0,
                true
            )
        );
        assert!(!got[1].4 && got[2].4);
        // Axes from 0 to 30 ms (step 10) and 0 to 300 tokens/s (step 100),
        // 600 x 320 units from x = 70: the frontier's line joins (10, 100)
        // at (70 + 200, 320 - 106.7) and (30, 300) at (670, 0).
        assert!(svg.contains("points=\"270.0,213.3 670.0,0.0\""), "{svg}");
        assert!(svg.contains(">Pareto: throughput vs latency</text>"));
    }

    #[test]
    fn a_scatter_line_joins_every_point_in_order_of_x() {
        let series = [
            PlotSeries {
                group: "a".into(),
                points: vec![point("c=2", 4.0, 2.0), point("c=1", 2.0, 1.0)],
            },
            PlotSeries {
                group: "b".into(),
                points: vec![point("c=1", 1.0, 1.0)],
            },
        ];
        let svg = render_sweep_plot_svg(&plot(SweepPlotKind::ScatterLine), &series);
        // 0..4 and 0..2 (steps of 1 and 0.5): (2, 1) at (370, 160), (4, 2)
        // at (670, 0), joined in order of x though given the other way.
        assert!(svg.contains("points=\"370.0,160.0 670.0,0.0\""), "{svg}");
        assert!(circles(&svg).iter().all(|c| !c.4));
        assert_eq!(svg.matches("class=\"legend\"").count(), 2);
    }

    #[test]
    fn no_figures_say_so() {
        let svg = render_sweep_plot_svg(&plot(SweepPlotKind::Pareto), &[]);
        assert!(svg.contains("no run has both figures"));
        assert!(circles(&svg).is_empty());
    }
}
