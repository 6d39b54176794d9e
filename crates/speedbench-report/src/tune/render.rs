//! A tune's answer as console tables, Markdown, JSON and an HTML page with
//! a chart of speedup against load per category.

use std::fmt::Write;

use serde_json::Value;
use speedbench_metrics::{Choice, Interval};

use super::{CategoryAnswer, TuneReport, TunedConfiguration, row};
use crate::Comparison;
use crate::html::{PALETTE, Scale, esc, page_end, page_start, y_axis};
use crate::table::{FirstColumn, titled_table};

/// `1.52 [1.40, 1.63]`, or `-`.
fn speedup_text(speedup: Option<f64>, interval: Option<Interval>) -> String {
    match (speedup, interval) {
        (Some(s), Some(i)) => format!("{s:.2} [{:.2}, {:.2}]", i.low, i.high),
        (Some(s), None) => format!("{s:.2}"),
        _ => "-".into(),
    }
}

/// A table's header and rows.
type Table = (Vec<String>, Vec<Vec<String>>);

impl TuneReport {
    /// `concurrency=4`.
    fn level_name(&self, load: &str) -> String {
        format!("{}={load}", self.load_flag)
    }

    /// The header and rows of `category`'s table: a row per configuration,
    /// a column per load level (latency speedup, interval, acceptance
    /// length, byte-identical share), then the pooled figures.
    fn category_rows(&self, category: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let mut header = vec!["configuration".to_string()];
        header.extend(self.load_levels.iter().map(|l| self.level_name(l)));
        header.push("all levels".into());
        let rows = self
            .configurations
            .iter()
            .map(|c| {
                let mut cells = vec![c.name.clone()];
                cells.extend(
                    c.levels
                        .iter()
                        .map(|l| cell(l.comparison.as_ref(), category)),
                );
                cells.push(cell(c.pooled.as_ref(), category));
                cells
            })
            .collect();
        (header, rows)
    }

    /// Console tables, one per category, then the answers and notes.
    pub fn to_console(&self) -> String {
        let mut out = self.heading();
        for answer in &self.categories {
            let (header, rows) = self.category_rows(&answer.category);
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            let title = format!(
                "{}: latency (lat) and decode (dec) speedup vs baseline [{:.0}% interval] · acceptance length (AL) and rate (AR) · byte-identical outputs (=)",
                answer.category,
                self.confidence * 100.0
            );
            out.push('\n');
            out.push_str(&titled_table(&title, &header, &rows, FirstColumn::Left));
        }
        for (title, (header, rows)) in self.level_tables() {
            let header: Vec<&str> = header.iter().map(String::as_str).collect();
            out.push('\n');
            out.push_str(&titled_table(&title, &header, &rows, FirstColumn::Left));
        }
        out.push_str(&self.answers_text());
        out
    }

    /// The tables of a figure per run that the tune has: goodput against
    /// its SLOs, energy per output token; each with its title.
    fn level_tables(&self) -> Vec<(String, Table)> {
        let goodput = format!(
            "Goodput against SLOs {}: requests/s (good share of those sent)",
            self.slos
        );
        [
            (goodput, self.goodput_rows()),
            (
                "Energy per output token (J, DCGM)".to_string(),
                self.energy_rows(),
            ),
        ]
        .into_iter()
        .filter_map(|(title, table)| Some((title, table?)))
        .collect()
    }

    /// With SLOs: a row for the baseline and each configuration, a column
    /// per load level, each cell the run's goodput and good share.
    fn goodput_rows(&self) -> Option<Table> {
        if self.slos.is_empty() {
            return None;
        }
        let text = |g: &speedbench_metrics::Goodput| {
            let rate = g.goodput.map_or("-".to_string(), |v| format!("{v:.2}"));
            let share = g
                .good_request_fraction
                .map_or(String::new(), |f| format!(" ({:.0}%)", f * 100.0));
            format!("{rate}{share}")
        };
        Some(self.level_table(|c, baseline| {
            let g = c.goodput.as_ref()?;
            Some(text(if baseline {
                &g.baseline
            } else {
                &g.speculative
            }))
        }))
    }

    /// Where the runs scraped their GPUs: the energy per output token of
    /// each run, a row per configuration, a column per load level.
    fn energy_rows(&self) -> Option<Table> {
        let any = self.configurations.iter().any(|c| {
            c.levels
                .iter()
                .any(|l| l.comparison.as_ref().is_some_and(|c| c.energy.is_some()))
        });
        any.then(|| {
            self.level_table(|c, baseline| {
                let e = c.energy.as_ref()?;
                let side = if baseline {
                    &e.baseline
                } else {
                    &e.speculative
                };
                Some(format!("{:.4}", side.energy_per_output_token_j))
            })
        })
    }

    /// A row for the baseline and each configuration, a column per load
    /// level, each cell `cell(level's comparison, is the baseline's)`.
    fn level_table(&self, cell: impl Fn(&Comparison, bool) -> Option<String>) -> Table {
        let at = |c: &crate::tune::TunedConfiguration, i: usize, baseline: bool| {
            cell(c.levels.get(i)?.comparison.as_ref()?, baseline)
        };
        let header = std::iter::once("configuration".to_string())
            .chain(self.load_levels.iter().map(|l| self.level_name(l)))
            .collect();
        let levels = 0..self.load_levels.len();
        let baseline = levels.clone().map(|i| {
            let v = self.configurations.iter().find_map(|c| at(c, i, true));
            v.unwrap_or_else(|| "-".to_string())
        });
        let mut rows = vec![
            std::iter::once("baseline".to_string())
                .chain(baseline)
                .collect(),
        ];
        for c in &self.configurations {
            let cells = levels
                .clone()
                .map(|i| at(c, i, false).unwrap_or_else(|| "-".to_string()));
            rows.push(std::iter::once(c.name.clone()).chain(cells).collect());
        }
        (header, rows)
    }

    /// A Markdown section per category, then the answers and notes.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# Tune: {}\n\n{}", self.dir.display(), self.heading());
        for answer in &self.categories {
            let (header, rows) = self.category_rows(&answer.category);
            let _ = write!(
                out,
                "\n## {}\n\n| {} |\n|",
                answer.category,
                header.join(" | ")
            );
            out.push_str(&" --- |".repeat(header.len()));
            out.push('\n');
            for r in rows {
                let _ = writeln!(out, "| {} |", r.join(" | "));
            }
        }
        for (title, (header, rows)) in self.level_tables() {
            let _ = write!(out, "\n## {title}\n\n| {} |\n|", header.join(" | "));
            out.push_str(&" --- |".repeat(header.len()));
            out.push('\n');
            for r in rows {
                let _ = writeln!(out, "| {} |", r.join(" | "));
            }
        }
        out.push_str("\n## Recommended\n\n");
        out.push_str(&self.answers_text());
        out
    }

    /// The whole answer as JSON; per category, `recommended` holds the
    /// chosen configuration's parameters (`null` when none is chosen).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("a tune report serialises")
    }

    fn heading(&self) -> String {
        let temperature = match &self.temperature {
            Some(t) => format!("temperature {t} in every run"),
            None => "the server's default temperature".into(),
        };
        format!(
            "{} configuration(s) against the baseline at {} {} level(s) ({}); {temperature}.\n",
            self.configurations.len(),
            self.load_levels.len(),
            self.load_flag,
            self.load_levels.join(", "),
        )
    }

    /// The recommendation lines and the notes.
    fn answers_text(&self) -> String {
        let mut out = String::from(
            "\nRecommended (latency speedup, every load level pooled; chosen only beyond the \
             intervals):\n",
        );
        for a in &self.categories {
            let _ = writeln!(out, "  {}: {}", a.category, a.choice.describe());
            let by_load: Vec<String> = a
                .by_load
                .iter()
                .map(|l| format!("{}: {}", self.level_name(&l.load), short(&l.choice)))
                .collect();
            let _ = writeln!(out, "      by load: {}", by_load.join("; "));
            let _ = writeln!(out, "      break-even: {}", self.break_even_text(a));
        }
        out.push_str(&self.predictions_text());
        for c in &self.configurations {
            if let Some(share) = row(c.pooled.as_ref(), speedbench_metrics::OVERALL)
                .and_then(|r| r.identical_share())
            {
                let _ = writeln!(
                    out,
                    "Lossless check, {}: {:.1}% of paired outputs byte-identical to the baseline's",
                    c.name,
                    share * 100.0
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        out
    }

    /// Per load level, what the run with the largest draft budget predicts
    /// for every smaller one (overall), beside what the tune measured.
    fn predictions_text(&self) -> String {
        let mut out = String::new();
        if self.predictions.is_empty() {
            out.push_str(
                "\nNo prediction of smaller draft budgets: it needs streamed runs (--streaming) \
                 whose answers carry per-step acceptance histograms (vLLM's \
                 --per-request-spec-decode-metrics, SGLang's; llama.cpp reports totals only).\n",
            );
        }
        for load in &self.load_levels {
            let best = self
                .predictions
                .iter()
                .filter(|p| &p.load == load && p.category == speedbench_metrics::OVERALL)
                .max_by_key(|p| p.budget);
            let Some(p) = best else { continue };
            let _ = writeln!(
                out,
                "\nPredicted from {} alone at {} (draft budget {}; {:.2} ms a pass against the \
                 baseline's {:.2}; docs/tune.md):",
                p.configuration,
                self.level_name(load),
                p.budget,
                p.spec_pass_ms,
                p.base_pass_ms
            );
            for b in &p.budgets {
                let measured = match (b.measured, b.error, &b.measured_by) {
                    (Some(m), Some(e), Some(by)) => {
                        format!("measured {m:.2} by {by} ({:+.1}%)", e * 100.0)
                    }
                    _ => "not measured".into(),
                };
                let _ = writeln!(
                    out,
                    "  k={:<3} acceptance length {:.2}, decode speedup {:.2}; {measured}",
                    b.predicted.k, b.predicted.acceptance_length, b.predicted.decode_speedup
                );
            }
            if let Some(top) = p.budgets.iter().max_by(|a, b| {
                a.predicted
                    .decode_speedup
                    .total_cmp(&b.predicted.decode_speedup)
            }) {
                let _ = writeln!(out, "  predicted best budget: k={}", top.predicted.k);
            }
        }
        out
    }

    fn break_even_text(&self, a: &CategoryAnswer) -> String {
        let parts: Vec<String> = a
            .break_even
            .iter()
            .map(|b| match &b.load {
                Some(l) => format!("{} pays up to {}", b.configuration, self.level_name(l)),
                None => format!("{} does not pay at the lowest load", b.configuration),
            })
            .collect();
        parts.join("; ")
    }

    /// A page: the heading, a chart and a table per category, the answers.
    pub fn to_html(&self) -> String {
        let mut out = page_start(&format!("Tune: {}", self.dir.display()));
        let _ = write!(out, "<p>{}</p>", esc(&self.heading()));
        for answer in &self.categories {
            let _ = write!(
                out,
                "<h2>{}</h2><p>Recommended: <b>{}</b></p>",
                esc(&answer.category),
                esc(&answer.choice.describe())
            );
            out.push_str(&self.chart(&answer.category));
            let (header, rows) = self.category_rows(&answer.category);
            out.push_str("<table><tr>");
            for h in header {
                let _ = write!(out, "<th>{}</th>", esc(&h));
            }
            out.push_str("</tr>");
            for r in rows {
                out.push_str("<tr>");
                for (i, c) in r.iter().enumerate() {
                    let class = if i == 0 { " class=\"dir\"" } else { "" };
                    let _ = write!(out, "<td{class}>{}</td>", esc(c));
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
        }
        let _ = write!(out, "<pre>{}</pre>", esc(&self.answers_text()));
        out.push_str(&page_end());
        out
    }

    /// Latency speedup against load, a line per configuration, with 1.0
    /// marked.
    fn chart(&self, category: &str) -> String {
        let points: Vec<(&TunedConfiguration, Vec<Option<f64>>)> = self
            .configurations
            .iter()
            .map(|c| {
                let ys = c
                    .levels
                    .iter()
                    .map(|l| {
                        row(l.comparison.as_ref(), category)?
                            .speedups
                            .latency_speedup
                    })
                    .collect();
                (c, ys)
            })
            .collect();
        let max = points
            .iter()
            .flat_map(|(_, ys)| ys.iter().flatten())
            .fold(1.0f64, |m, &y| m.max(y));
        let Some(scale) = Scale::nice(max * 1.1) else {
            return String::new();
        };
        let (left, w, h) = (60.0, 560.0, 220.0);
        let n = self.load_levels.len().max(1);
        let x = |i: usize| left + (w - left) * (i as f64 + 0.5) / n as f64;
        let y = |v: f64| h - h * v / scale.top;
        let mut svg = format!(
            "<figure><svg class=\"tune-chart\" data-category=\"{}\" width=\"{w}\" height=\"{}\" \
             viewBox=\"0 0 {w} {}\">",
            esc(category),
            h + 30.0,
            h + 30.0
        );
        y_axis(&mut svg, &scale, left, w, h, "latency speedup (x)");
        self.load_axis(&mut svg, (left, w, h), y(1.0), x);
        for (ci, (c, ys)) in points.iter().enumerate() {
            let colour = PALETTE[ci % PALETTE.len()];
            let path: Vec<String> = ys
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| format!("{:.1},{:.1}", x(i), y(v))))
                .collect();
            let _ = write!(
                svg,
                "<polyline class=\"line\" data-configuration=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
                esc(&c.name),
                path.join(" ")
            );
        }
        svg.push_str("</svg>");
        svg.push_str(&crate::html::legend(
            points.iter().map(|(c, _)| c.name.as_str()),
        ));
        svg.push_str("</figure>");
        svg
    }
}

impl TuneReport {
    /// The 1.0 line and the load levels under the chart.
    fn load_axis(
        &self,
        svg: &mut String,
        (left, w, h): (f64, f64, f64),
        one: f64,
        x: impl Fn(usize) -> f64,
    ) {
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{one:.1}\" y2=\"{one:.1}\" stroke=\"#c62828\" stroke-dasharray=\"4 3\"/>",
        );
        for (i, load) in self.load_levels.iter().enumerate() {
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
                x(i),
                h + 14.0,
                esc(&self.level_name(load))
            );
        }
    }
}

/// A cell: the latency and decode speedups with their intervals, the
/// acceptance length and rate, the byte-identical share.
fn cell(c: Option<&Comparison>, category: &str) -> String {
    let Some(r) = row(c, category) else {
        return "-".into();
    };
    let s = &r.speedups;
    // Repeated runs: the latency speedup across runs (`runs`), which the
    // choice uses, else the bootstrap over requests.
    let latency = match r.latency_across_runs {
        Some(a) => {
            let interval = speedbench_metrics::Interval {
                low: a.low,
                high: a.high,
            };
            format!("{} runs", speedup_text(Some(a.ratio), Some(interval)))
        }
        None => speedup_text(s.latency_speedup, s.latency_speedup_ci),
    };
    let mut text = format!(
        "lat {latency} · dec {}",
        speedup_text(s.decode_speedup, s.decode_speedup_ci)
    );
    if let Some(al) = s.accept_length {
        let _ = write!(text, " · AL {al:.2}");
    }
    if let Some(rate) = s.accept_rate {
        let _ = write!(text, " · AR {:.0}%", rate * 100.0);
    }
    if let Some(share) = r.identical_share() {
        let _ = write!(text, " · ={:.0}%", share * 100.0);
    }
    text
}

/// A choice in a few words.
fn short(choice: &Choice) -> String {
    match choice {
        Choice::Configuration { name } => name.clone(),
        Choice::NoSignificantDifference { among } => format!("any of {}", among.join("/")),
        Choice::Baseline => "baseline".into(),
    }
}
