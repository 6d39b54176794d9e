//! A self-contained HTML page with SVG charts: no script, no external
//! resource, so it opens offline and can be attached to a ticket.
//!
//! The page holds every matrix as a table (the same 2-decimal text as the
//! CSV, with `data-row`/`data-col`/`data-value` attributes so tools and
//! tests can read the numbers back) and as a grouped bar chart, then per
//! run the pooled accepted-drafts-per-step histogram and the end-to-end
//! latency distribution of each category (p10/p50/p90 boxes, min/max
//! whiskers).

use std::collections::BTreeMap;
use std::fmt::Write;

use speedbench_metrics::{SpecDecodeMetrics, Summary, percentile_sorted};
use speedbench_record::RequestRecord;

use crate::matrix::{AcceptanceMatrix, category_key, column_order};

/// What one page shows.
#[derive(Debug, Clone)]
pub struct HtmlReport<'a> {
    /// Page title.
    pub title: String,
    /// Matrices to show, each as a table and a chart.
    pub matrices: Vec<AcceptanceMatrix>,
    /// Labelled runs whose records feed the histograms and latency charts.
    pub runs: Vec<(String, &'a [RequestRecord])>,
}

const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn fixed(v: f64) -> String {
    format!("{v:.2}")
}

/// A grouped bar chart: one group per column, one bar per row label.
fn bar_chart(matrix: &AcceptanceMatrix) -> String {
    let values: Vec<f64> = matrix
        .rows
        .iter()
        .flat_map(|r| r.cells.iter().flatten().copied())
        .collect();
    let max = values.iter().copied().fold(0.0_f64, f64::max);
    if max <= 0.0 || matrix.columns.is_empty() {
        return String::new();
    }
    let (w, h, left, bottom) = (900.0, 300.0, 50.0, 60.0);
    let group_w = (w - left) / matrix.columns.len() as f64;
    let bar_w = (group_w * 0.8) / matrix.rows.len().max(1) as f64;
    // The view box starts above 0 so the top axis label is not clipped.
    let mut svg = format!(
        "<svg class=\"chart\" role=\"img\" aria-label=\"{}\" viewBox=\"0 -14 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(matrix.metric.title()),
        h + bottom + 14.0,
        h + bottom + 14.0
    );
    for i in 0..=4 {
        let v = max * i as f64 / 4.0;
        let y = h - h * i as f64 / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{w}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"end\">{}</text>",
            left - 4.0,
            y + 3.0,
            fixed(v)
        );
    }
    for (c, column) in matrix.columns.iter().enumerate() {
        let gx = left + c as f64 * group_w + group_w * 0.1;
        for (r, row) in matrix.rows.iter().enumerate() {
            let Some(v) = row.cells[c] else { continue };
            let bh = h * v / max;
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
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" transform=\"rotate(-30 {:.1} {:.1})\">{}</text>",
            gx + group_w * 0.4,
            h + 14.0,
            gx + group_w * 0.4,
            h + 14.0,
            esc(column)
        );
    }
    svg.push_str("</svg>");
    svg.push_str(&legend(matrix.rows.iter().map(|r| r.label.as_str())));
    svg
}

fn legend<'a>(labels: impl Iterator<Item = &'a str>) -> String {
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

fn matrix_table(matrix: &AcceptanceMatrix) -> String {
    let mut out = format!(
        "<table class=\"matrix\" data-metric=\"{}\"><thead><tr><th>Model</th>",
        matrix.metric.as_str()
    );
    for c in &matrix.columns {
        let _ = write!(out, "<th>{}</th>", esc(c));
    }
    out.push_str("<th>Overall</th></tr></thead><tbody>");
    for row in &matrix.rows {
        let _ = write!(out, "<tr><th scope=\"row\">{}</th>", esc(&row.label));
        let cells = row
            .cells
            .iter()
            .zip(&matrix.columns)
            .map(|(v, c)| (*v, c.as_str()));
        for (value, column) in cells.chain(std::iter::once((row.overall, "Overall"))) {
            match value.filter(|v| v.is_finite()) {
                Some(v) => {
                    let _ = write!(
                        out,
                        "<td data-row=\"{}\" data-col=\"{}\" data-value=\"{v}\">{}</td>",
                        esc(&row.label),
                        esc(column),
                        fixed(v)
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        "<td data-row=\"{}\" data-col=\"{}\">-</td>",
                        esc(&row.label),
                        esc(column)
                    );
                }
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

fn histogram_chart(label: &str, spec: &SpecDecodeMetrics) -> String {
    let percentages = spec.histogram.percentages();
    if percentages.is_empty() {
        return String::new();
    }
    let (w, h) = (420.0, 180.0);
    let bar = (w - 40.0) / percentages.len() as f64;
    let mut svg = format!(
        "<figure><svg class=\"chart histogram\" role=\"img\" aria-label=\"accepted drafts per step, {}\" viewBox=\"0 0 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(label),
        h + 30.0,
        h + 30.0
    );
    for (j, pct) in percentages.iter().enumerate() {
        let bh = h * pct / 100.0;
        let x = 20.0 + j as f64 * bar;
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{bh:.1}\" fill=\"#4e79a7\"><title>{j}: {pct:.1}%</title></rect><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{j}</text><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{pct:.0}%</text>",
            x + bar * 0.1,
            h - bh,
            bar * 0.8,
            x + bar / 2.0,
            h + 14.0,
            x + bar / 2.0,
            (h - bh - 3.0).max(10.0)
        );
    }
    let _ = write!(
        svg,
        "</svg><figcaption>{}: accepted drafts per verify step, % of {} steps ({} requests with histograms)</figcaption></figure>",
        esc(label),
        spec.histogram.total_steps(),
        spec.histogram.requests
    );
    svg
}

fn latency_chart(label: &str, records: &[RequestRecord]) -> String {
    let mut by_cat: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in records.iter().filter(|r| !r.warmup && r.is_success()) {
        if let Some(k) = category_key(r) {
            by_cat
                .entry(k)
                .or_default()
                .push(r.e2e_latency_ns as f64 / 1e6);
        }
    }
    if by_cat.is_empty() {
        return String::new();
    }
    let keys: std::collections::BTreeSet<&str> = by_cat.keys().map(String::as_str).collect();
    let order = column_order(&keys);
    let summaries: Vec<(String, Summary, Vec<f64>)> = order
        .into_iter()
        .filter_map(|k| {
            let mut v = by_cat.remove(&k)?;
            let s = Summary::of(&v)?;
            v.sort_by(f64::total_cmp);
            Some((k, s, v))
        })
        .collect();
    let max = summaries
        .iter()
        .map(|(_, s, _)| s.max)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let (w, row_h, left) = (700.0, 22.0, 120.0);
    let h = row_h * summaries.len() as f64 + 20.0;
    let x = |v: f64| left + (w - left - 20.0) * v / max;
    let mut svg = format!(
        "<figure><svg class=\"chart latency\" role=\"img\" aria-label=\"latency by category, {}\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\">",
        esc(label)
    );
    for (i, (cat, s, sorted)) in summaries.iter().enumerate() {
        let q = |p: f64| percentile_sorted(sorted, p * 100.0);
        let y = 10.0 + i as f64 * row_h;
        let (p10, p90) = (q(0.10), q(0.90));
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
    let _ = write!(
        svg,
        "</svg><figcaption>{}: end-to-end latency by category, ms (box p10–p90, bar p50, whiskers min–max; scale 0–{})</figcaption></figure>",
        esc(label),
        fixed(max)
    );
    svg
}

/// Renders the whole page.
pub fn render_html(report: &HtmlReport<'_>) -> String {
    let mut out = format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>\
         body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}\
         table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 8px}}\
         td{{text-align:right;font-variant-numeric:tabular-nums}}\
         .legend span{{margin-right:1em}}.legend i{{display:inline-block;width:10px;height:10px;margin-right:4px}}\
         figure{{margin:1em 0}}</style></head><body><h1>{}</h1>",
        esc(&report.title),
        esc(&report.title)
    );
    for m in &report.matrices {
        let _ = write!(out, "<section><h2>{}</h2>", esc(m.metric.title()));
        out.push_str(&matrix_table(m));
        out.push_str(&bar_chart(m));
        if let Some(note) = m.footnote() {
            let _ = write!(out, "<p>{}</p>", esc(&note));
        }
        out.push_str("</section>");
    }
    for (label, records) in &report.runs {
        let _ = write!(out, "<section><h2>{}</h2>", esc(label));
        out.push_str(&histogram_chart(
            label,
            &SpecDecodeMetrics::from_records(records),
        ));
        out.push_str(&latency_chart(label, records));
        out.push_str("</section>");
    }
    out.push_str(&format!(
        "<footer><p>speedbench {}</p></footer></body></html>\n",
        env!("CARGO_PKG_VERSION")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix::MatrixMetric;
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
            runs,
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
        assert_eq!(html.matches("<svg").count(), 3);
        assert!(!html.contains("<script"), "self-contained and inert");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no external resource"
        );
    }
}
