//! A self-contained HTML page with SVG charts: no script, no external
//! resource, so it opens offline and can be attached to a ticket.
//!
//! The page opens with one line per run (directory, status, succeeded /
//! failed / skipped requests; an incomplete run gets a red `INCOMPLETE`
//! badge here, in its matrix rows and in its own section). Then every
//! matrix as a table (the same 2-decimal text as the CSV, with
//! `data-row`/`data-col`/`data-value` attributes so tools and tests can
//! read the numbers back) and as a grouped bar chart; then per run the
//! pooled accepted-drafts-per-step histogram and the end-to-end latency
//! distribution of each category (p10/p50/p90 boxes, min/max whiskers).
//!
//! Every chart has titled axes with units and ticks at "nice" numbers
//! (1, 2 or 5 times a power of ten); the histograms of all runs share one
//! percentage scale and the latency charts of all runs one millisecond
//! scale, so runs can be compared by eye.

use std::fmt::Write;

use speedbench_metrics::{BoxStats, RequestMetricsExt, SpecDecodeMetrics, box_stats_by};
use speedbench_record::RequestRecord;

use crate::matrix::{AcceptanceMatrix, MatrixMetric, category_key, column_order};
pub(crate) use crate::svg::{PALETTE, Scale, esc, y_axis};
use speedbench_metrics::RequestCounts;
use speedbench_runs::RunStatus;

/// What one page shows.
#[derive(Debug, Clone)]
pub struct HtmlReport<'a> {
    /// Page title.
    pub title: String,
    /// Matrices to show, each as a table and a chart.
    pub matrices: Vec<AcceptanceMatrix>,
    /// Every run of the report, with or without per-request records.
    pub runs: Vec<HtmlRun<'a>>,
}

/// One run on the page.
#[derive(Debug, Clone)]
pub struct HtmlRun<'a> {
    /// Its row label in the matrices.
    pub label: String,
    /// Its directory, as shown.
    pub dir: String,
    /// How it ended.
    pub status: RunStatus,
    /// Why it is incomplete, in words.
    pub status_reason: Option<String>,
    /// Its measured requests by result, when it has records.
    pub counts: Option<RequestCounts>,
    /// Its records, which feed the histogram and latency charts.
    pub records: Option<&'a [RequestRecord]>,
    /// Its time slices (`--slice-duration`), charted over the run.
    pub time_slices: Vec<speedbench_metrics::TimeSlice>,
}

fn fixed(v: f64) -> String {
    format!("{v:.2}")
}

/// The y-axis title of a matrix chart, with its unit.
fn value_axis_title(metric: MatrixMetric) -> &'static str {
    match metric {
        MatrixMetric::AcceptLength => "acceptance length (tokens per verify step)",
        MatrixMetric::AcceptRate => "draft acceptance rate (fraction of drafted tokens)",
        MatrixMetric::Throughput => "output token throughput (tokens/s)",
        MatrixMetric::DecodeTps => "decode speed (tokens/s)",
        MatrixMetric::Latency => "mean end-to-end latency (ms)",
    }
}

/// A grouped bar chart: one group per column, one bar per row label.
/// The "category" title under a chart's x axis, and the end of its `<svg>`.
pub(crate) fn x_axis_category(svg: &mut String, left: f64, w: f64, h: f64, bottom: f64) {
    let _ = write!(
        svg,
        "<text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">category</text></svg>",
        left + (w - left) / 2.0,
        h + bottom - 6.0
    );
}

fn bar_chart(matrix: &AcceptanceMatrix) -> String {
    let max = matrix
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten().copied())
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let Some(scale) = Scale::nice(max) else {
        return String::new();
    };
    if matrix.columns.is_empty() {
        return String::new();
    }
    let (w, h, left, bottom) = (900.0, 300.0, 70.0, 80.0);
    let group_w = (w - left) / matrix.columns.len() as f64;
    let bar_w = (group_w * 0.8) / matrix.rows.len().max(1) as f64;
    // The view box starts above 0 so the top tick label is not clipped.
    let mut svg = format!(
        "<svg class=\"chart bars\" role=\"img\" aria-label=\"{}\" viewBox=\"0 -14 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(matrix.metric.title()),
        h + bottom + 14.0,
        h + bottom + 14.0
    );
    y_axis(
        &mut svg,
        &scale,
        left,
        w,
        h,
        value_axis_title(matrix.metric),
    );
    for (c, column) in matrix.columns.iter().enumerate() {
        let gx = left + c as f64 * group_w + group_w * 0.1;
        for (r, row) in matrix.rows.iter().enumerate() {
            let Some(v) = row.cells[c].filter(|v| v.is_finite()) else {
                continue;
            };
            let bh = h * v / scale.top;
            let _ = write!(
                svg,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"{}\"><title>{} {}: {}</title></rect>",
                gx + r as f64 * bar_w,
                h - bh,
                bar_w * 0.95,
                PALETTE[r % PALETTE.len()],
                esc(&row.label),
                esc(column),
                fixed(v)
            );
        }
        group_label(&mut svg, gx + group_w * 0.4, h + 14.0, column);
    }
    x_axis_category(&mut svg, left, w, h, bottom);
    svg.push_str(&legend(matrix.rows.iter().map(|r| r.label.as_str())));
    svg
}

/// A bar group's label under the axis at (`x`, `y`), slanted to fit.
pub(crate) fn group_label(svg: &mut String, x: f64, y: f64, text: &str) {
    let _ = write!(
        svg,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"11\" text-anchor=\"end\" transform=\"rotate(-30 {x:.1} {y:.1})\">{}</text>",
        esc(text)
    );
}

/// A colour key: one swatch per label, in [`PALETTE`] order.
pub(crate) fn legend<'a>(labels: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::from("<p class=\"legend\">");
    for (i, label) in labels.enumerate() {
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{}</span> ",
            PALETTE[i % PALETTE.len()],
            esc(label)
        );
    }
    out.push_str("</p>");
    out
}

fn badge(status: RunStatus) -> String {
    if status.is_complete() {
        String::new()
    } else {
        format!(
            " <span class=\"badge incomplete\">INCOMPLETE: {}</span>",
            status.as_str()
        )
    }
}

fn matrix_table(matrix: &AcceptanceMatrix) -> String {
    let status = matrix.has_incomplete();
    let mut out = format!(
        "<table class=\"matrix\" data-metric=\"{}\"><thead><tr><th>Model</th>",
        matrix.metric.as_str()
    );
    for c in &matrix.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("<th>Overall</th>");
    if status {
        out.push_str("<th>Status</th>");
    }
    out.push_str("</tr></thead><tbody>");
    for row in &matrix.rows {
        let row_status = row.run.as_ref().map_or(RunStatus::Completed, |r| r.status);
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{}{}</th>",
            esc(&row.label),
            badge(row_status)
        );
        let cells = row
            .cells
            .iter()
            .zip(&matrix.columns)
            .map(|(v, c)| (*v, c.as_str()));
        for (value, column) in cells.chain(std::iter::once((row.overall, "Overall"))) {
            matrix_cell(&mut out, &row.label, column, value);
        }
        if status {
            let _ = write!(
                out,
                "<td data-row=\"{}\" data-col=\"Status\">{}</td>",
                esc(&row.label),
                row_status.as_str()
            );
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

/// One cell of the matrix: its value (with its row and column, for the
/// page's script), or `-` where there is none.
fn matrix_cell(out: &mut String, row: &str, column: &str, value: Option<f64>) {
    match value.filter(|v| v.is_finite()) {
        Some(v) => {
            let _ = write!(
                out,
                "<td data-row=\"{}\" data-col=\"{}\" data-value=\"{v}\">{}</td>",
                esc(row),
                esc(column),
                fixed(v)
            );
        }
        None => {
            let _ = write!(
                out,
                "<td data-row=\"{}\" data-col=\"{}\">-</td>",
                esc(row),
                esc(column)
            );
        }
    }
}

/// One line per run: directory, status and request counts.
fn runs_table(runs: &[HtmlRun<'_>]) -> String {
    let mut out = String::from(
        "<table class=\"runs\"><thead><tr><th>Run</th><th>Directory</th><th>Status</th>\
         <th>Succeeded</th><th>Failed</th><th>Skipped</th></tr></thead><tbody>",
    );
    for run in runs {
        let count = |f: fn(&RequestCounts) -> u64| {
            run.counts
                .as_ref()
                .map_or("-".to_string(), |c| f(c).to_string())
        };
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{}</th><td class=\"dir\">{}</td><td data-run=\"{}\" data-col=\"status\">{}{}</td>\
             <td data-run=\"{}\" data-col=\"succeeded\">{}</td><td data-run=\"{}\" data-col=\"failed\">{}</td>\
             <td data-run=\"{}\" data-col=\"skipped\">{}</td></tr>",
            esc(&run.label),
            esc(&run.dir),
            esc(&run.label),
            run.status.as_str(),
            badge(run.status),
            esc(&run.label),
            count(|c| c.succeeded),
            esc(&run.label),
            count(|c| c.failed),
            esc(&run.label),
            count(|c| c.skipped),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// `percentages` drawn on a shared `scale` (percent of verify steps).
fn histogram_chart(label: &str, spec: &SpecDecodeMetrics, scale: &Scale) -> String {
    let percentages = spec.histogram.percentages();
    if percentages.is_empty() {
        return String::new();
    }
    let (w, h, left, bottom) = (460.0, 180.0, 60.0, 40.0);
    let bar = (w - left - 10.0) / percentages.len() as f64;
    let mut svg = format!(
        "<figure><svg class=\"chart histogram\" role=\"img\" aria-label=\"accepted drafts per step, {}\" viewBox=\"0 -14 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(label),
        h + bottom + 14.0,
        h + bottom + 14.0
    );
    y_axis(&mut svg, scale, left, w - 10.0, h, "% of verify steps");
    for (j, pct) in percentages.iter().enumerate() {
        let bh = h * pct / scale.top;
        let x = left + j as f64 * bar;
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4e79a7\"><title>{j}: {pct:.1}%</title></rect><text class=\"tick x-tick\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{j}</text>",
            x + bar * 0.1,
            h - bh,
            bar * 0.8,
            x + bar / 2.0,
            h + 14.0,
        );
    }
    let _ = write!(
        svg,
        "<text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">accepted draft tokens in a verify step</text>",
        left + (w - left) / 2.0,
        h + bottom - 6.0
    );
    let _ = write!(
        svg,
        "</svg><figcaption>{}: accepted drafts per verify step, % of {} steps ({} requests with histograms; same scale for every run)</figcaption></figure>",
        esc(label),
        spec.histogram.total_steps(),
        spec.histogram.requests
    );
    svg
}

/// Where acceptance falls off along the draft: the share of verify steps
/// that accepted at least `i` drafts, per draft position `i`, as a curve on
/// a 0-100% axis (every run on the same one).
fn position_chart(label: &str, spec: &SpecDecodeMetrics) -> String {
    let shares = spec.histogram.position_acceptance();
    let Some(scale) = Scale::nice(100.0) else {
        return String::new();
    };
    if shares.len() < 2 {
        return String::new();
    }
    let (w, h, left, bottom) = (460.0, 180.0, 60.0, 40.0);
    let dx = (w - left - 30.0) / (shares.len() - 1) as f64;
    let point = |i: usize, share: f64| {
        (
            left + 10.0 + i as f64 * dx,
            h - h * share * 100.0 / scale.top,
        )
    };
    let mut svg = format!(
        "<figure><svg class=\"chart positions\" role=\"img\" aria-label=\"acceptance by draft position, {}\" viewBox=\"0 -14 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(label),
        h + bottom + 14.0,
        h + bottom + 14.0
    );
    y_axis(&mut svg, &scale, left, w - 10.0, h, "% of verify steps");
    let points: Vec<String> = shares
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let (x, y) = point(i, p);
            format!("{x:.1},{y:.1}")
        })
        .collect();
    let _ = write!(
        svg,
        "<polyline fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\" points=\"{}\"/>",
        points.join(" ")
    );
    for (i, &p) in shares.iter().enumerate() {
        let (x, y) = point(i, p);
        let _ = write!(
            svg,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"#4e79a7\"><title>at least {}: {:.1}%</title></circle><text class=\"tick x-tick\" x=\"{x:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
            i + 1,
            p * 100.0,
            h + 14.0,
            i + 1
        );
    }
    let _ = write!(
        svg,
        "<text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">draft position (steps accepting at least this many drafts)</text>",
        left + (w - left) / 2.0,
        h + bottom - 6.0
    );
    svg.push_str(&budget_caption(label, spec));
    svg
}

/// The position chart's caption: the acceptance length had the draft
/// budget been each k.
fn budget_caption(label: &str, spec: &SpecDecodeMetrics) -> String {
    let budgets: Vec<String> = spec
        .histogram
        .length_at_budgets()
        .iter()
        .enumerate()
        .map(|(i, l)| format!("k={}: {l:.2}", i + 1))
        .collect();
    format!(
        "</svg><figcaption>{}: acceptance by draft position; acceptance length had the draft budget been k (an upper bound: the same drafts, cut at k): {}</figcaption></figure>",
        esc(label),
        budgets.join(", ")
    )
}

/// Per category, in column order, the box of the end-to-end latencies (ms)
/// of the measured requests (computed by `speedbench-metrics`).
fn latencies_by_category(records: &[RequestRecord]) -> Vec<(String, BoxStats)> {
    let mut by_cat = box_stats_by(records, category_key, |r| Some(r.request_latency_ms()));
    let keys: std::collections::BTreeSet<&str> = by_cat.keys().map(String::as_str).collect();
    let order = column_order(&keys);
    order
        .into_iter()
        .filter_map(|k| {
            let s = by_cat.remove(&k)?;
            Some((k, s))
        })
        .collect()
}

/// Box plots of `summaries` on a shared millisecond `scale`.
fn latency_chart(label: &str, summaries: &[(String, BoxStats)], scale: &Scale) -> String {
    if summaries.is_empty() {
        return String::new();
    }
    let (w, row_h, left, right) = (700.0, 22.0, 120.0, 30.0);
    let plot_h = row_h * summaries.len() as f64 + 10.0;
    let h = plot_h + 40.0;
    let x = |v: f64| left + (w - left - right) * v / scale.top;
    let mut svg = format!(
        "<figure><svg class=\"chart latency\" role=\"img\" aria-label=\"latency by category, {}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\">",
        esc(label)
    );
    for t in scale.ticks() {
        let _ = write!(
            svg,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"0\" y2=\"{plot_h:.1}\" stroke=\"#ddd\"/><text class=\"tick x-tick\" x=\"{0:.1}\" y=\"{1:.1}\" font-size=\"10\" text-anchor=\"middle\">{2}</text>",
            x(t),
            plot_h + 12.0,
            scale.label(t)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{plot_h:.1}\" y2=\"{plot_h:.1}\" stroke=\"#444\"/><text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">end-to-end latency (ms)</text>",
        w - right,
        left + (w - left - right) / 2.0,
        h - 6.0
    );
    for (i, (cat, s)) in summaries.iter().enumerate() {
        latency_box(&mut svg, 4.0 + i as f64 * row_h, left, cat, s, &x);
    }
    let _ = write!(
        svg,
        "</svg><figcaption>{}: end-to-end latency by category, ms (box p10–p90, bar p50, whiskers min–max; \
         scale 0–{} ms, the same for every run)</figcaption></figure>",
        esc(label),
        scale.label(scale.top)
    );
    svg
}

/// One category's box in the latency chart, its row's top at `y`.
fn latency_box(
    svg: &mut String,
    y: f64,
    left: f64,
    cat: &str,
    s: &BoxStats,
    x: &dyn Fn(f64) -> f64,
) {
    let (p10, p90) = (s.p10, s.p90);
    let _ = write!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>\
         <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\"/>\
         <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#76b7b2\"><title>{}: p10 {} p50 {} p90 {} ms (n={})</title></rect>\
         <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#000\" stroke-width=\"2\"/>",
        left - 6.0,
        y + 12.0,
        esc(cat),
        x(s.min),
        x(s.max),
        y + 8.0,
        y + 8.0,
        x(p10),
        y + 2.0,
        (x(p90) - x(p10)).max(1.0),
        12.0,
        esc(cat),
        fixed(p10),
        fixed(s.p50),
        fixed(p90),
        s.count,
        x(s.p50),
        x(s.p50),
        y + 1.0,
        y + 15.0
    );
}

/// The page's opening: doctype, the one inline style sheet, and the
/// title as `<title>` and `<h1>`.
pub(crate) fn page_start(title: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px}}\
         td{{text-align:right;font-variant-numeric:tabular-nums}}td.dir{{text-align:left}}\
         .badge.incomplete{{background:#c62828;color:#fff;border-radius:3px;padding:1px 6px;font-size:0.8em;font-weight:bold}}\
         .legend span{{margin-right:1em}}.legend i{{display:inline-block;width:10px;height:10px;margin-right:4px}}\
         .note{{color:#555;font-size:0.9em;margin:0.2em 0}}figure{{margin:1em 0}}</style></head><body><h1>{}</h1>",
        esc(title),
        esc(title)
    )
}

/// The page's end: the version footer.
pub(crate) fn page_end() -> String {
    format!(
        "<footer><p>speedbench {}</p></footer></body></html>\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// Renders the whole page.
pub fn render_html(report: &HtmlReport<'_>) -> String {
    let mut out = page_start(&report.title);
    if !report.runs.is_empty() {
        out.push_str("<section><h2>Runs</h2>");
        out.push_str(&runs_table(&report.runs));
        out.push_str(
            "<p class=\"note\">Failed: sent and failed; skipped: turns never sent because an earlier \
             turn of their conversation failed. Statistics exclude both.</p></section>",
        );
    }
    for m in &report.matrices {
        let _ = write!(out, "<section><h2>{}</h2>", esc(m.metric.title()));
        out.push_str(&matrix_table(m));
        out.push_str(&bar_chart(m));
        for line in m.footnote().lines() {
            let _ = write!(out, "<p class=\"note\">{}</p>", esc(line));
        }
        out.push_str("</section>");
    }
    // Shared scales: every run's histogram and latency chart on one axis.
    let specs: Vec<Option<SpecDecodeMetrics>> = report
        .runs
        .iter()
        .map(|r| r.records.map(SpecDecodeMetrics::from_records))
        .collect();
    let latencies: Vec<Vec<(String, BoxStats)>> = report
        .runs
        .iter()
        .map(|r| r.records.map(latencies_by_category).unwrap_or_default())
        .collect();
    let (pct_scale, ms_scale) = shared_scales(&specs, &latencies);
    for ((run, spec), lat) in report.runs.iter().zip(&specs).zip(&latencies) {
        run_heading(&mut out, run);
        if let (Some(spec), Some(scale)) = (spec, &pct_scale) {
            out.push_str(&histogram_chart(&run.label, spec, scale));
            out.push_str(&position_chart(&run.label, spec));
        }
        if let Some(scale) = &ms_scale {
            out.push_str(&latency_chart(&run.label, lat, scale));
        }
        out.push_str(&crate::slices_html::slice_charts(
            &run.label,
            &run.time_slices,
        ));
        out.push_str("</section>");
    }
    out.push_str(&page_end());
    out
}

/// One percentage scale for every run's histogram and one millisecond
/// scale for every run's latency chart.
fn shared_scales(
    specs: &[Option<SpecDecodeMetrics>],
    latencies: &[Vec<(String, BoxStats)>],
) -> (Option<Scale>, Option<Scale>) {
    let pct = specs
        .iter()
        .flatten()
        .flat_map(|s| s.histogram.percentages())
        .fold(0.0, f64::max);
    let ms = latencies
        .iter()
        .flatten()
        .map(|(_, s)| s.max)
        .fold(0.0, f64::max);
    (Scale::nice(pct), Scale::nice(ms))
}

/// A run's section heading: its label and status, its directory, why it
/// is incomplete, and its request counts.
fn run_heading(out: &mut String, run: &HtmlRun<'_>) {
    let _ = write!(
        out,
        "<section class=\"run\"><h2>{}{}</h2><p class=\"note\">{}</p>",
        esc(&run.label),
        badge(run.status),
        esc(&run.dir)
    );
    if let Some(reason) = &run.status_reason {
        let _ = write!(
            out,
            "<p class=\"status-reason\"><strong>Incomplete run:</strong> {}; its figures cover only the requests that finished.</p>",
            esc(reason)
        );
    }
    match &run.counts {
        Some(c) => {
            let _ = write!(
                out,
                "<p class=\"counts\">{} succeeded, {} failed, {} skipped</p>",
                c.succeeded, c.failed, c.skipped
            );
        }
        None => out.push_str("<p class=\"counts\">no per-request records</p>"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::SpecDecodeStats;

    fn rec(category: &str, acc: u64, steps: u64, e2e_ms: u64, hist: Vec<u64>) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            e2e_latency_ns: e2e_ms * 1_000_000,
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: acc,
                proposed_draft_tokens: steps * 3,
                verify_steps: Some(steps),
                acceptance_histogram: hist,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_page_carries_the_csv_numbers_and_the_charts() {
        // coding: 1 + 6/4 = 2.50; math: 1 + 9/3 = 4.00; Overall 3.25.
        let records = vec![
            rec("coding", 6, 4, 100, vec![1, 1, 1, 1]),
            rec("math", 9, 3, 300, vec![0, 0, 0, 3]),
        ];
        let runs = vec![("m<1>".to_string(), records.as_slice())];
        let matrix = AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &runs);
        assert_eq!(
            matrix.to_csv(),
            "Model,coding,math,Overall\r\nm<1>,2.50,4.00,3.25\r\n"
        );
        let html = render_html(&HtmlReport {
            title: "t & t".into(),
            matrices: vec![matrix],
            runs: vec![HtmlRun {
                label: "m<1>".into(),
                dir: "runs/a".into(),
                status: RunStatus::Completed,
                status_reason: None,
                counts: Some(RequestCounts::from_records(&records)),
                records: Some(&records),
                time_slices: Vec::new(),
            }],
        });
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>t &amp; t</title>"));
        assert!(
            html.contains(
                "data-row=\"m&lt;1&gt;\" data-col=\"coding\" data-value=\"2.5\">2.50</td>"
            ),
            "{html}"
        );
        assert!(html.contains("data-col=\"math\" data-value=\"4\">4.00</td>"));
        assert!(html.contains("data-col=\"Overall\" data-value=\"3.25\">3.25</td>"));
        // Pooled histogram [1,1,1,4] of 7 steps: bucket 3 holds 4/7 = 57%.
        assert!(html.contains("<title>3: 57.1%</title>"), "{html}");
        // Bar chart, histogram, acceptance by position, latency.
        assert_eq!(html.matches("<svg").count(), 4);
        // At least 1, 2, 3 drafts: 6/7, 5/7, 4/7 of the steps.
        for (i, pct) in [(1, "85.7"), (2, "71.4"), (3, "57.1")] {
            assert!(
                html.contains(&format!("<title>at least {i}: {pct}%</title>")),
                "{html}"
            );
        }
        // Budgets: 1 + 6/7, 1 + 11/7, 1 + 15/7.
        assert!(html.contains("k=1: 1.86, k=2: 2.57, k=3: 3.14"), "{html}");
        // Bar chart: max 4.00 -> step 1, ticks 0..4; its axes are titled.
        assert!(html.contains(">acceptance length (tokens per verify step)</text>"));
        assert!(html.contains(">category</text>"));
        // Histogram: max 4/7 = 57.1% -> step 20, ticks 0, 20, 40, 60.
        assert!(html.contains(">% of verify steps</text>"));
        assert!(html.contains("text-anchor=\"end\">60</text>"), "{html}");
        // Latency: max 300 ms -> step 100, ticks 0..300 ms.
        assert!(html.contains(">end-to-end latency (ms)</text>"));
        assert!(html.contains("scale 0–300 ms"), "{html}");
        assert!(html.contains("2 succeeded, 0 failed, 0 skipped"), "{html}");
        assert!(!html.contains("INCOMPLETE"), "a complete run has no badge");
        assert!(!html.contains("<script"), "self-contained and inert");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no external resource"
        );
    }

    #[test]
    fn nice_scales_by_hand() {
        let scale = |max: f64| {
            let s = Scale::nice(max).unwrap();
            (
                s.step,
                s.top,
                s.ticks().iter().map(|&t| s.label(t)).collect::<Vec<_>>(),
            )
        };
        // 4.0 / 5 = 0.8 -> normalized 8 -> step 1; top 4.
        assert_eq!(
            scale(4.0),
            (
                1.0,
                4.0,
                vec!["0", "1", "2", "3", "4"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            )
        );
        // 2.65 / 5 = 0.53 -> 5.3 -> step 1; top 3.
        assert_eq!(scale(2.65).1, 3.0);
        // 1234 / 5 = 246.8 -> 2.468 -> step 500; top 1500.
        let (step, top, labels) = scale(1234.0);
        assert_eq!((step, top), (500.0, 1500.0));
        assert_eq!(labels, ["0", "500", "1000", "1500"]);
        // 0.75 / 5 = 0.15 -> 1.5 -> step 0.2; top 0.8; one decimal.
        let (step, top, labels) = scale(0.75);
        assert!((step - 0.2).abs() < 1e-12 && (top - 0.8).abs() < 1e-12);
        assert_eq!(labels, ["0.0", "0.2", "0.4", "0.6", "0.8"]);
        // 57.14 / 5 = 11.4 -> 1.14 -> step 20; top 60.
        assert_eq!(scale(400.0 / 7.0).1, 60.0);
        // Exactly on a tick stays there: 100 -> step 20, top 100.
        assert_eq!(scale(100.0).1, 100.0);
        assert!(Scale::nice(0.0).is_none() && Scale::nice(f64::NAN).is_none());
    }

    #[test]
    fn an_incomplete_run_gets_badges_and_a_status_column() {
        use crate::matrix::RowRun;
        let records = vec![rec("coding", 6, 4, 100, vec![1, 1, 1, 1])];
        let runs = vec![("m".to_string(), records.as_slice())];
        let mut matrix = AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &runs);
        matrix.rows[0].run = Some(RowRun {
            dir: "runs/a".into(),
            model: "m".into(),
            status: RunStatus::Died,
            status_reason: Some("the process died".into()),
            counts: None,
            overall_excluded: None,
        });
        let html = render_html(&HtmlReport {
            title: "t".into(),
            matrices: vec![matrix],
            runs: vec![HtmlRun {
                label: "m".into(),
                dir: "runs/a".into(),
                status: RunStatus::Died,
                status_reason: Some("the process died".into()),
                counts: Some(RequestCounts {
                    succeeded: 1,
                    failed: 2,
                    skipped: 3,
                    ..Default::default()
                }),
                records: Some(&records),
                time_slices: Vec::new(),
            }],
        });
        assert!(html.contains("<th>Status</th>"));
        assert!(html.contains("data-col=\"Status\">died</td>"), "{html}");
        // Runs table, matrix row and run section.
        assert_eq!(html.matches("INCOMPLETE: died").count(), 3, "{html}");
        assert!(html.contains("1 succeeded, 2 failed, 3 skipped"));
        assert!(html.contains("data-col=\"skipped\">3</td>"));
    }
}
