//! The comparison as a self-contained HTML page: the CSV's table, a chart
//! of the decode and latency speedups per category with their bootstrap
//! intervals as whiskers and a 1.0x reference line, and a chart of the
//! draft acceptance rate beside the byte-identical share. No script and no
//! external resource, like the report page, whose style sheet, axes and
//! scales it reuses.
//!
//! Every number the page shows is the CSV's text for the same cell: table
//! cells carry `data-row` (category) and `data-col` (CSV column), chart
//! marks `data-row`, `data-col` and `data-text`, so a test (or a tool) can
//! read them back against [`Comparison::to_csv`].

use std::fmt::Write;

use crate::compare::{
    COMPARE_COLUMNS, CategoryComparison, CompareColumn, Comparison, DECODE_SOURCE_COLUMN,
    decode_source_text,
};
use crate::html::{
    PALETTE, Scale, esc, group_label, legend, page_end, page_start, x_axis_category, y_axis,
};

/// What the comparison page shows besides the [`Comparison`] itself.
#[derive(Debug, Clone)]
pub struct CompareHtml<'a> {
    /// Page title.
    pub title: String,
    /// The baseline run's directory, as shown.
    pub baseline: String,
    /// The speculative run's directory, as shown.
    pub speculative: String,
    /// Bootstrap resamples per interval (0: no intervals).
    pub bootstrap_samples: usize,
    /// Seed of the resampling.
    pub seed: u64,
    /// Warnings about the two runs (incomplete runs, differences allowed
    /// with `--force`), printed on the page as they were on stderr.
    pub warnings: Vec<String>,
    /// The comparison.
    pub comparison: &'a Comparison,
}

/// The CSV column named `name`.
fn column(name: &str) -> CompareColumn {
    *COMPARE_COLUMNS
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| unreachable!("{name} is a comparison column"))
}

/// One bar series of a chart: its value column and, when it has one, the
/// columns of its interval's ends.
struct Series {
    label: &'static str,
    value: CompareColumn,
    interval: Option<(CompareColumn, CompareColumn)>,
}

/// One chart mark's data attributes: the CSV cell it shows.
fn mark(row: &CategoryComparison, col: &CompareColumn) -> String {
    format!(
        "data-row=\"{}\" data-col=\"{}\" data-text=\"{}\"",
        esc(&row.category),
        col.name,
        col.text(row)
    )
}

/// A grouped bar chart, one group per row of `c`, one bar per series,
/// interval whiskers where a series has them, and a dashed reference line
/// at `reference` when given.
fn grouped_chart(
    class: &str,
    aria: &str,
    c: &Comparison,
    series: &[Series],
    scale: &Scale,
    y_title: &str,
    reference: Option<(f64, &str)>,
) -> String {
    let (w, h, left, bottom) = (900.0, 300.0, 70.0, 80.0);
    let group_w = (w - left) / c.rows.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    let y = |v: f64| h - h * (v / scale.top).clamp(0.0, 1.0);
    let mut svg = format!(
        "<svg class=\"chart {class}\" role=\"img\" aria-label=\"{}\" viewBox=\"0 -14 {w} {}\" width=\"{w}\" height=\"{}\">",
        esc(aria),
        h + bottom + 14.0,
        h + bottom + 14.0
    );
    y_axis(&mut svg, scale, left, w, h, y_title);
    for (g, row) in c.rows.iter().enumerate() {
        let gx = left + g as f64 * group_w + group_w * 0.1;
        for (s, ser) in series.iter().enumerate() {
            let place = BarPlace {
                x: gx + s as f64 * bar_w,
                width: bar_w,
                floor: h,
                color: PALETTE[s % PALETTE.len()],
            };
            draw_bar(&mut svg, row, ser, &place, &y);
        }
        group_label(&mut svg, gx + group_w * 0.4, h + 14.0, &row.category);
    }
    if let Some((at, label)) = reference {
        let _ = write!(
            svg,
            "<line class=\"reference\" x1=\"{left}\" x2=\"{w}\" y1=\"{0:.1}\" y2=\"{0:.1}\" stroke=\"#c62828\" stroke-dasharray=\"6 4\"/>\
             <text class=\"reference-label\" x=\"{1:.1}\" y=\"{2:.1}\" font-size=\"10\" text-anchor=\"end\" fill=\"#c62828\">{3}</text>",
            y(at),
            w - 2.0,
            y(at) - 3.0,
            esc(label)
        );
    }
    x_axis_category(&mut svg, left, w, h, bottom);
    svg.push_str(&legend(series.iter().map(|s| s.label)));
    svg
}

/// Where one bar of a grouped chart stands: its left edge, its slot's
/// width, the chart's floor and its series' colour.
struct BarPlace {
    x: f64,
    width: f64,
    floor: f64,
    color: &'static str,
}

/// One series' bar for one row, with its title and its interval's whisker;
/// nothing where the value is missing.
fn draw_bar(
    svg: &mut String,
    row: &CategoryComparison,
    ser: &Series,
    place: &BarPlace,
    y: &dyn Fn(f64) -> f64,
) {
    let Some(v) = (ser.value.value)(row).filter(|v| v.is_finite()) else {
        return;
    };
    let interval = ser.interval.and_then(|(lo, hi)| {
        let low = (lo.value)(row).filter(|v| v.is_finite())?;
        let high = (hi.value)(row).filter(|v| v.is_finite())?;
        Some((lo, hi, low, high))
    });
    let shown = match &interval {
        Some((lo, hi, _, _)) => format!(
            "{}: {} {} [{}, {}]",
            esc(&row.category),
            ser.label,
            ser.value.text(row),
            lo.text(row),
            hi.text(row)
        ),
        None => format!(
            "{}: {} {}",
            esc(&row.category),
            ser.label,
            ser.value.text(row)
        ),
    };
    let x = place.x;
    let _ = write!(
        svg,
        "<rect class=\"bar\" {} x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{shown}</title></rect>",
        mark(row, &ser.value),
        y(v),
        place.width * 0.95,
        place.floor - y(v),
        place.color,
    );
    if let Some((lo, hi, low, high)) = interval {
        let ends = Whisker {
            cx: x + place.width * 0.95 / 2.0,
            cap: (place.width * 0.25).min(6.0),
            low: y(low),
            high: y(high),
        };
        ends.draw(svg, row, &ser.value, &lo, &hi);
    }
}

/// An interval's whisker on a bar: where it stands and how wide its caps.
struct Whisker {
    cx: f64,
    cap: f64,
    /// The interval's ends, in the chart's y coordinates.
    low: f64,
    high: f64,
}

impl Whisker {
    /// The vertical line and its two caps, each marked with the column it
    /// shows.
    fn draw(
        &self,
        svg: &mut String,
        row: &CategoryComparison,
        value: &CompareColumn,
        lo: &CompareColumn,
        hi: &CompareColumn,
    ) {
        let Whisker { cx, cap, low, high } = *self;
        let _ = write!(
            svg,
            "<g class=\"whisker\"><line {} x1=\"{cx:.1}\" x2=\"{cx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\"/>\
             <line class=\"cap\" {} x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\"/>\
             <line class=\"cap\" {} x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#222\"/></g>",
            format_args!(
                "data-row=\"{}\" data-col=\"{}\"",
                esc(&row.category),
                value.name
            ),
            low,
            high,
            mark(row, lo),
            cx - cap,
            cx + cap,
            low,
            low,
            mark(row, hi),
            cx - cap,
            cx + cap,
            high,
            high,
        );
    }
}

/// The table: the CSV's columns and text, `-` where the CSV is empty.
fn table(c: &Comparison) -> String {
    // Twenty columns: the table scrolls sideways rather than the page.
    let mut out = String::from(
        "<div style=\"overflow-x:auto\"><table class=\"comparison\"><thead><tr><th>category</th>",
    );
    for col in COMPARE_COLUMNS.iter() {
        let _ = write!(out, "<th>{}</th>", col.name);
    }
    let _ = write!(out, "<th>{DECODE_SOURCE_COLUMN}</th></tr></thead><tbody>");
    for row in &c.rows {
        let cat = esc(&row.category);
        let _ = write!(out, "<tr><th scope=\"row\">{cat}</th>");
        for col in COMPARE_COLUMNS.iter() {
            match (col.value)(row).filter(|v| v.is_finite()) {
                Some(v) => {
                    let _ = write!(
                        out,
                        "<td data-row=\"{cat}\" data-col=\"{}\" data-value=\"{v}\">{}</td>",
                        col.name,
                        col.text(row)
                    );
                }
                None => {
                    let _ = write!(
                        out,
                        "<td data-row=\"{cat}\" data-col=\"{}\">-</td>",
                        col.name
                    );
                }
            }
        }
        let source = decode_source_text(row);
        let _ = write!(
            out,
            "<td data-row=\"{cat}\" data-col=\"{DECODE_SOURCE_COLUMN}\">{}</td></tr>",
            if source.is_empty() { "-" } else { &source }
        );
    }
    out.push_str("</tbody></table></div>");
    out
}

/// The largest finite value of `cols` over every row.
fn max_of(c: &Comparison, cols: &[CompareColumn]) -> f64 {
    c.rows
        .iter()
        .flat_map(|r| cols.iter().filter_map(move |col| (col.value)(r)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
}

/// Renders the comparison page.
///
/// ```
/// use speedbench_record::{RequestRecord, ServerTimings};
/// use speedbench_report::{CompareHtml, CompareOptions, compare, render_compare_html};
/// let request = |tps: f64, seconds: f64| RequestRecord {
///     conversation_id: "q1".into(),
///     category: Some("math".into()),
///     e2e_latency_ns: (seconds * 1e9) as u64,
///     server_timings: Some(ServerTimings {
///         predicted_per_second: Some(tps),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let options = CompareOptions { bootstrap_samples: 0, ..Default::default() };
/// let comparison = compare(&[request(50.0, 2.0)], &[request(100.0, 0.5)], &options)?;
/// let page = render_compare_html(&CompareHtml {
///     title: "speedbench compare".into(),
///     baseline: "runs/base".into(),
///     speculative: "runs/spec".into(),
///     bootstrap_samples: 0,
///     seed: 0,
///     warnings: vec![],
///     comparison: &comparison,
/// });
/// assert!(page.contains("data-row=\"math\" data-col=\"decode_speedup\" data-value=\"2\">2.00</td>"));
/// assert!(page.contains("class=\"reference\""));
/// # Ok::<(), speedbench_report::ReportError>(())
/// ```
pub fn render_compare_html(page: &CompareHtml<'_>) -> String {
    let c = page.comparison;
    let mut out = page_start(&page.title);
    let _ = write!(
        out,
        "<p class=\"runs\">Baseline: <code class=\"dir\">{}</code><br>Speculative: <code class=\"dir\">{}</code></p>",
        esc(&page.baseline),
        esc(&page.speculative)
    );
    let intervals = if page.bootstrap_samples == 0 {
        "No bootstrap intervals (--bootstrap 0).".to_string()
    } else {
        format!(
            "Intervals: {:.0}% percentile bootstrap, {} resamples of the requests of each category, seed {}.",
            c.confidence * 100.0,
            page.bootstrap_samples,
            page.seed
        )
    };
    let _ = write!(out, "<p class=\"note\">{}</p>", esc(&intervals));
    for w in &page.warnings {
        let _ = write!(
            out,
            "<p class=\"warning\"><strong>Warning:</strong> {}</p>",
            esc(w)
        );
    }
    out.push_str("<section><h2>Per category</h2>");
    out.push_str(&table(c));
    out.push_str(
        "<p class=\"note\">decode_speedup = speculative mean decode tokens/s over the baseline's; \
         latency_speedup = baseline mean end-to-end latency over the speculative run's; \
         accept_rate and accept_length are the speculative run's (token-weighted); identical_share \
         is the share of paired requests whose outputs are byte-identical. _low/_high: interval \
         ends; - where a value is missing.</p></section>",
    );
    speedup_section(&mut out, page);
    share_section(&mut out, c);
    divergence_section(&mut out, c);
    out.push_str(&page_end());
    out
}

/// The decode and latency speedups per category, with their intervals.
fn speedup_section(out: &mut String, page: &CompareHtml<'_>) {
    let c = page.comparison;
    let speedups = [
        Series {
            label: "decode speedup",
            value: column("decode_speedup"),
            interval: Some((column("decode_speedup_low"), column("decode_speedup_high"))),
        },
        Series {
            label: "latency speedup",
            value: column("latency_speedup"),
            interval: Some((
                column("latency_speedup_low"),
                column("latency_speedup_high"),
            )),
        },
    ];
    let speedup_cols: Vec<CompareColumn> = speedups
        .iter()
        .flat_map(|s| {
            std::iter::once(s.value).chain(s.interval.into_iter().flat_map(|(a, b)| [a, b]))
        })
        .collect();
    // The scale always reaches 1.0x, so the reference line is on it.
    if let Some(scale) = Scale::nice(max_of(c, &speedup_cols).max(1.0)) {
        out.push_str("<section><h2>Speedups</h2>");
        out.push_str(&grouped_chart(
            "speedups",
            "decode and latency speedup per category",
            c,
            &speedups,
            &scale,
            "speedup (×, speculative over baseline)",
            Some((1.0, "1.0x")),
        ));
        let _ = write!(
            out,
            "<p class=\"note\">Bars: speedup per category ({}); whiskers: its interval; dashed \
             line: 1.0x, no change (above it the speculative run is faster).</p></section>",
            if page.bootstrap_samples == 0 {
                "no intervals were computed".to_string()
            } else {
                format!("{:.0}% bootstrap", c.confidence * 100.0)
            }
        );
    }
}

/// The acceptance rate and the byte-identical share per category.
fn share_section(out: &mut String, c: &Comparison) {
    let shares = [
        Series {
            label: "draft acceptance rate (accepted / drafted tokens)",
            value: column("accept_rate"),
            interval: None,
        },
        Series {
            label: "byte-identical outputs (share of paired requests)",
            value: column("identical_share"),
            interval: None,
        },
    ];
    if max_of(c, &[shares[0].value, shares[1].value]) > 0.0
        && let Some(scale) = Scale::nice(1.0)
    {
        out.push_str("<section><h2>Acceptance and byte-identical outputs</h2>");
        out.push_str(&grouped_chart(
            "shares",
            "acceptance rate and byte-identical share per category",
            c,
            &shares,
            &scale,
            "share (fraction, 0–1)",
            None,
        ));
        let _ = write!(
            out,
            "<p class=\"note\">{}</p></section>",
            esc(&c.byte_identical_note)
        );
    }
}

/// The first paired outputs that differ.
fn divergence_section(out: &mut String, c: &Comparison) {
    if !c.divergences.is_empty() {
        let _ = write!(
            out,
            "<section><h2>First differences</h2><p class=\"note\">{} paired output(s) differ; the first {} (baseline vs speculative):</p><ul class=\"divergences\">",
            c.diverging,
            c.divergences.len()
        );
        for d in &c.divergences {
            let _ = write!(
                out,
                "<li><code>{}</code> turn {}: first difference at byte {}: base <code>{}</code> vs spec <code>{}</code></li>",
                esc(&d.conversation_id),
                d.turn_index,
                d.byte_offset,
                esc(&format!("{:?}", d.baseline_excerpt)),
                esc(&format!("{:?}", d.speculative_excerpt))
            );
        }
        out.push_str("</ul></section>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::{CompareOptions, compare};
    use speedbench_record::{RequestRecord, ServerTimings, SpecDecodeStats};

    fn rec(
        id: &str,
        category: &str,
        tps: f64,
        e2e_s: f64,
        text: &str,
        spec: bool,
    ) -> RequestRecord {
        RequestRecord {
            conversation_id: id.into(),
            category: Some(category.into()),
            e2e_latency_ns: (e2e_s * 1e9) as u64,
            output_text: text.into(),
            server_timings: Some(ServerTimings {
                predicted_per_second: Some(tps),
                ..Default::default()
            }),
            spec: spec.then(|| SpecDecodeStats {
                accepted_draft_tokens: 30,
                proposed_draft_tokens: 40,
                verify_steps: Some(10),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn page(bootstrap: usize) -> String {
        let base = vec![
            rec("a", "coding", 50.0, 2.0, "x", false),
            rec("b", "coding", 70.0, 4.0, "p q", false),
            rec("c", "math", 60.0, 1.0, "m<", false),
        ];
        let spec = vec![
            rec("a", "coding", 120.0, 1.0, "x", true),
            rec("b", "coding", 120.0, 1.0, "p r", true),
            rec("c", "math", 90.0, 0.5, "m<", true),
        ];
        let options = CompareOptions {
            bootstrap_samples: bootstrap,
            ..Default::default()
        };
        let c = compare(&base, &spec, &options).unwrap();
        render_compare_html(&CompareHtml {
            title: "compare <t>".into(),
            baseline: "runs/base".into(),
            speculative: "runs/spec".into(),
            bootstrap_samples: bootstrap,
            seed: 0,
            warnings: vec!["the baseline run was interrupted".into()],
            comparison: &c,
        })
    }

    #[test]
    fn the_page_has_the_csv_cells_the_charts_and_the_reference_line() {
        let html = page(0);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("<title>compare &lt;t&gt;</title>"));
        // coding: decode 120 / 60 = 2.00x, latency 3 s / 1 s = 3.00x.
        assert!(
            html.contains(
                "data-row=\"coding\" data-col=\"decode_speedup\" data-value=\"2\">2.00</td>"
            ),
            "{html}"
        );
        assert!(html.contains(
            "data-row=\"coding\" data-col=\"latency_speedup\" data-value=\"3\">3.00</td>"
        ));
        // No bootstrap: the interval cells are empty and no whisker is drawn.
        assert!(html.contains("data-row=\"coding\" data-col=\"decode_speedup_low\">-</td>"));
        assert!(!html.contains("class=\"whisker\""));
        // Speedup chart: max 3.0 -> step 1, ticks 0..3; 1.0x sits at
        // 300 - 300 * 1/3 = 200.
        assert!(html.contains(">speedup (×, speculative over baseline)</text>"));
        assert!(
            html.contains("class=\"reference\" x1=\"70\" x2=\"900\" y1=\"200.0\" y2=\"200.0\""),
            "{html}"
        );
        assert!(html.contains(">1.0x</text>"));
        assert!(html.contains(
            "<rect class=\"bar\" data-row=\"coding\" data-col=\"decode_speedup\" data-text=\"2.00\""
        ));
        // Shares chart: accept rate 30/40 = 0.75, identical 1 of 2 = 0.5.
        assert!(html.contains(">share (fraction, 0–1)</text>"));
        assert!(html.contains("data-row=\"coding\" data-col=\"accept_rate\" data-text=\"0.7500\""));
        assert!(
            html.contains("data-row=\"coding\" data-col=\"identical_share\" data-text=\"0.5000\"")
        );
        assert_eq!(html.matches("<svg").count(), 2);
        assert!(html.contains("No bootstrap intervals (--bootstrap 0)."));
        assert!(html.contains("<strong>Warning:</strong> the baseline run was interrupted"));
        assert!(
            html.contains("base <code>&quot;q&quot;</code> vs spec <code>&quot;r&quot;</code>")
        );
        assert!(!html.contains("<script"), "self-contained and inert");
        assert!(!html.contains("http://") && !html.contains("https://"));
    }

    #[test]
    fn intervals_are_whiskers_on_their_bars() {
        let html = page(200);
        // Whiskers carry the CSV text of both interval ends.
        assert!(html.contains("class=\"whisker\""));
        for col in [
            "decode_speedup_low",
            "decode_speedup_high",
            "latency_speedup_low",
            "latency_speedup_high",
        ] {
            assert!(
                html.contains(&format!(
                    "class=\"cap\" data-row=\"overall\" data-col=\"{col}\" data-text=\""
                )),
                "{col}: {html}"
            );
        }
        assert!(html.contains("Intervals: 95% percentile bootstrap, 200 resamples"));
    }
}
