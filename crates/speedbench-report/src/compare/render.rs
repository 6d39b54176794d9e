//! A comparison as text: console and Markdown rows, CSV and JSON, and the
//! columns the HTML page shares.

use speedbench_metrics::Interval;

use super::{CategoryComparison, Comparison};
use crate::format::{fixed, thousands};
use crate::matrix::{markdown_line, push_csv_line};

/// One numeric column of [`Comparison::to_csv`] (and of the HTML page's
/// table, which shows the same text).
#[derive(Clone, Copy)]
pub(crate) struct CompareColumn {
    /// The CSV header.
    pub(crate) name: &'static str,
    /// Decimals printed.
    pub(crate) decimals: usize,
    /// The row's value.
    pub(crate) value: fn(&CategoryComparison) -> Option<f64>,
}

impl CompareColumn {
    /// The row's cell text: the value at this column's decimals, empty
    /// when missing or not finite.
    pub(crate) fn text(&self, row: &CategoryComparison) -> String {
        (self.value)(row)
            .filter(|v| v.is_finite())
            .map_or_else(String::new, |v| format!("{v:.*}", self.decimals))
    }
}

macro_rules! column {
    ($name:literal, $decimals:literal, |$r:ident| $value:expr) => {
        CompareColumn {
            name: $name,
            decimals: $decimals,
            value: |$r: &CategoryComparison| $value,
        }
    };
}

/// The CSV's numeric columns after `category`, in order; `decode_source`
/// (text) follows them.
pub(crate) const COMPARE_COLUMNS: [CompareColumn; 19] = [
    column!("base_requests", 0, |r| Some(
        r.speedups.base_requests as f64
    )),
    column!("spec_requests", 0, |r| Some(
        r.speedups.spec_requests as f64
    )),
    column!("base_decode_tps", 2, |r| r.speedups.base_decode_tps),
    column!("spec_decode_tps", 2, |r| r.speedups.spec_decode_tps),
    column!("decode_speedup", 2, |r| r.speedups.decode_speedup),
    column!("decode_speedup_low", 2, |r| r
        .speedups
        .decode_speedup_ci
        .map(|c| c.low)),
    column!("decode_speedup_high", 2, |r| r
        .speedups
        .decode_speedup_ci
        .map(|c| c.high)),
    column!("base_latency_s", 3, |r| r.speedups.base_latency_s),
    column!("spec_latency_s", 3, |r| r.speedups.spec_latency_s),
    column!("latency_speedup", 2, |r| r.speedups.latency_speedup),
    column!("latency_speedup_low", 2, |r| r
        .speedups
        .latency_speedup_ci
        .map(|c| c.low)),
    column!("latency_speedup_high", 2, |r| r
        .speedups
        .latency_speedup_ci
        .map(|c| c.high)),
    column!("accept_rate", 4, |r| r.speedups.accept_rate),
    column!("accept_length", 2, |r| r.speedups.accept_length),
    column!("accept_length_low", 2, |r| r
        .speedups
        .accept_length_ci
        .map(|c| c.low)),
    column!("accept_length_high", 2, |r| r
        .speedups
        .accept_length_ci
        .map(|c| c.high)),
    column!("paired", 0, |r| Some(r.paired as f64)),
    column!("identical", 0, |r| Some(r.identical as f64)),
    column!("identical_share", 4, |r| r.identical_share()),
];

/// The CSV's last column: which decode speed the speedup used.
pub(crate) const DECODE_SOURCE_COLUMN: &str = "decode_source";

/// A row's `decode_source` cell (`server`, `client`, or empty).
pub(crate) fn decode_source_text(row: &CategoryComparison) -> String {
    row.speedups
        .decode_source
        .and_then(|s| serde_json::to_value(s).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

fn opt(v: Option<f64>) -> String {
    v.filter(|v| v.is_finite())
        .map_or_else(|| "n/a".to_string(), thousands)
}

pub(super) fn with_ci(v: Option<f64>, ci: Option<Interval>, suffix: &str) -> String {
    match (v, ci) {
        (Some(v), Some(ci)) => format!(
            "{}{suffix} [{}, {}]",
            fixed(v, 2),
            fixed(ci.low, 2),
            fixed(ci.high, 2)
        ),
        (Some(v), None) => format!("{}{suffix}", fixed(v, 2)),
        _ => "n/a".into(),
    }
}

/// The console and Markdown columns.
const TEXT_HEADER: [&str; 10] = [
    "category",
    "base_decode_t/s",
    "spec_decode_t/s",
    "decode_speedup",
    "base_latency",
    "spec_latency",
    "latency_speedup",
    "accept_rate",
    "accept_length",
    "byte_identical",
];

impl Comparison {
    /// The console and Markdown rows: llama.cpp's columns, each interval
    /// in brackets after its value, `n/a` for missing.
    fn text_rows(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|r| {
                vec![
                    r.category.clone(),
                    opt(r.speedups.base_decode_tps),
                    opt(r.speedups.spec_decode_tps),
                    with_ci(r.speedups.decode_speedup, r.speedups.decode_speedup_ci, "x"),
                    r.speedups
                        .base_latency_s
                        .map_or("n/a".into(), |v| format!("{}s", fixed(v, 3))),
                    r.speedups
                        .spec_latency_s
                        .map_or("n/a".into(), |v| format!("{}s", fixed(v, 3))),
                    with_ci(
                        r.speedups.latency_speedup,
                        r.speedups.latency_speedup_ci,
                        "x",
                    ),
                    r.speedups.accept_rate.map_or("n/a".into(), |v| fixed(v, 4)),
                    with_ci(r.speedups.accept_length, r.speedups.accept_length_ci, ""),
                    match r.identical_share() {
                        Some(s) => format!("{}/{} ({:.0}%)", r.identical, r.paired, s * 100.0),
                        None => "n/a".into(),
                    },
                ]
            })
            .collect()
    }

    /// The console table (llama.cpp's columns plus intervals and the lossless check).
    pub fn to_console(&self) -> String {
        let header = TEXT_HEADER;
        let rows = self.text_rows();
        let mut out = crate::table::titled_table(
            &format!(
                "Baseline vs speculative, means per request ({:.0}% bootstrap intervals in \
                 brackets)",
                self.confidence * 100.0
            ),
            &header,
            &rows,
            crate::table::FirstColumn::Left,
        );
        out.push_str(&self.goodput_line());
        out.push_str(&self.across_runs_line());
        out.push_str(&self.energy_line());
        let overall = self.rows.last();
        if let Some(o) = overall.filter(|o| o.paired > 0) {
            out.push_str(&format!(
                "Byte-identical outputs: {} of {} paired requests ({:.1}%); {} differ{}.\n\
                 Note: {}\n",
                o.identical,
                o.paired,
                o.identical_share().unwrap_or(0.0) * 100.0,
                self.diverging,
                self.after_divergence_note(),
                self.byte_identical_note
            ));
        }
        if !self.divergences.is_empty() {
            out.push_str("First differences (baseline vs speculative):\n");
        }
        for d in self.divergences.iter().take(5) {
            out.push_str(&format!(
                "  {} turn {}: first difference at byte {}: base {:?} vs spec {:?}\n",
                d.conversation_id,
                d.turn_index,
                d.byte_offset,
                d.baseline_excerpt,
                d.speculative_excerpt
            ));
        }
        out
    }

    /// `Goodput against SLOs ...: baseline X requests/s (a of b sent), speculative
    /// Y (c of d sent): Rx` when SLOs were given, else nothing.
    pub(crate) fn goodput_line(&self) -> String {
        let Some(g) = &self.goodput else {
            return String::new();
        };
        let side = |s: &speedbench_metrics::Goodput| {
            let rate = s
                .goodput
                .map_or("-".into(), |v| format!("{v:.2} requests/s"));
            format!("{rate} ({} of {} sent good)", s.good_requests, s.attempted)
        };
        let ratio = g
            .goodput_ratio
            .map_or(String::new(), |r| format!(": {r:.2}x"));
        format!(
            "Goodput against SLOs {}: baseline {}, speculative {}{ratio}\n",
            g.slos,
            side(&g.baseline),
            side(&g.speculative)
        )
    }

    /// With both sides' GPUs scraped: energy per output token and its
    /// ratio; else nothing.
    pub(crate) fn energy_line(&self) -> String {
        let Some(e) = &self.energy else {
            return String::new();
        };
        format!(
            "Energy per output token (DCGM): baseline {:.4} J ({} J over {} tokens), \
             speculative {:.4} J ({} J over {} tokens): {:.2}x\n",
            e.baseline.energy_per_output_token_j,
            thousands(e.baseline.energy_j),
            e.baseline.output_tokens,
            e.speculative.energy_per_output_token_j,
            thousands(e.speculative.energy_j),
            e.speculative.output_tokens,
            e.energy_per_token_ratio
        )
    }

    /// With repeated runs on both sides: the ratios of their per-run
    /// figures and the intervals across runs; else nothing.
    pub(crate) fn across_runs_line(&self) -> String {
        let Some(a) = &self.across_runs else {
            return String::new();
        };
        let text = |name: &str, r: &Option<speedbench_metrics::RatioInterval>| {
            r.map(|r| format!("{name} {:.2}x [{:.2}, {:.2}]", r.ratio, r.low, r.high))
        };
        let parts: Vec<String> = [
            text("latency speedup", &a.latency_speedup),
            text("output token throughput", &a.output_token_throughput_ratio),
            text("goodput", &a.goodput_ratio),
        ]
        .into_iter()
        .flatten()
        .collect();
        format!(
            "Across runs ({} baseline, {} speculative; {:.0}% intervals across runs, Welch t on \
             the log ratio): {}\n",
            a.baseline_runs,
            a.speculative_runs,
            a.confidence * 100.0,
            parts.join(", ")
        )
    }

    /// `; N later turns not compared (...)` when a conversation diverged
    /// before its last turn, else nothing.
    fn after_divergence_note(&self) -> String {
        match self.after_divergence {
            0 => String::new(),
            n => format!(
                "; {n} later turn(s) not compared: an earlier turn of their conversation already \
                 differed, so their history (each run's own reply) differs too"
            ),
        }
    }

    /// The comparison as JSON, at full precision.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// One CSV row per category (`overall` last): `category`, the numeric
    /// columns `base_requests, spec_requests, base_decode_tps,
    /// spec_decode_tps, decode_speedup, decode_speedup_low,
    /// decode_speedup_high, base_latency_s, spec_latency_s,
    /// latency_speedup, latency_speedup_low, latency_speedup_high,
    /// accept_rate, accept_length, accept_length_low, accept_length_high,
    /// paired, identical, identical_share`, then `decode_source`. CRLF line
    /// ends like the report's CSV; tokens/s, speedups and acceptance
    /// lengths with 2 decimals, latencies (s) with 3, the two shares
    /// (fractions) with 4; an empty field where a value is missing (no
    /// interval without `--bootstrap`, no acceptance without speculation).
    ///
    /// ```
    /// use speedbench_record::{RequestRecord, ServerTimings};
    /// use speedbench_report::{CompareOptions, compare};
    /// let request = |tps: f64, seconds: f64| RequestRecord {
    ///     conversation_id: "q1".into(),
    ///     category: Some("math".into()),
    ///     e2e_latency_ns: (seconds * 1e9) as u64,
    ///     output_text: "4".into(),
    ///     server_timings: Some(ServerTimings {
    ///         predicted_per_second: Some(tps),
    ///         ..Default::default()
    ///     }),
    ///     ..Default::default()
    /// };
    /// let options = CompareOptions { bootstrap_samples: 0, ..Default::default() };
    /// let c = compare(&[request(50.0, 2.0)], &[request(100.0, 0.5)], &options)?;
    /// let csv = c.to_csv();
    /// let mut lines = csv.lines();
    /// assert!(lines.next().unwrap().starts_with("category,base_requests,spec_requests,base_decode_tps"));
    /// // 100 / 50 = 2x decode, 2 s / 0.5 s = 4x latency; one identical pair.
    /// assert_eq!(
    ///     lines.next(),
    ///     Some("math,1,1,50.00,100.00,2.00,,,2.000,0.500,4.00,,,,,,,1,1,1.0000,server")
    /// );
    /// # Ok::<(), speedbench_report::ReportError>(())
    /// ```
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let header = std::iter::once("category")
            .chain(COMPARE_COLUMNS.iter().map(|c| c.name))
            .chain(std::iter::once(DECODE_SOURCE_COLUMN))
            .map(str::to_string);
        push_csv_line(&mut out, header);
        for row in &self.rows {
            let fields = std::iter::once(row.category.clone())
                .chain(COMPARE_COLUMNS.iter().map(|c| c.text(row)))
                .chain(std::iter::once(decode_source_text(row)));
            push_csv_line(&mut out, fields);
        }
        out
    }

    /// A Markdown table with the console's columns (intervals in brackets),
    /// then the byte-identical summary and its note, and the first
    /// differences.
    pub fn to_markdown(&self) -> String {
        let mut out = markdown_line(TEXT_HEADER.iter().map(|h| h.to_string()));
        let rule = std::iter::once("---".to_string()).chain(std::iter::repeat_n(
            "---:".to_string(),
            TEXT_HEADER.len() - 1,
        ));
        out.push_str(&markdown_line(rule));
        for row in self.text_rows() {
            out.push_str(&markdown_line(row));
        }
        out.push_str(&format!(
            "\n{:.0}% percentile-bootstrap intervals in brackets.\n",
            self.confidence * 100.0
        ));
        let extra = self.goodput_line() + &self.across_runs_line() + &self.energy_line();
        if !extra.is_empty() {
            out.push_str(&format!("\n{extra}"));
        }
        if let Some(o) = self.rows.last().filter(|o| o.paired > 0) {
            out.push_str(&format!(
                "\nByte-identical outputs: {} of {} paired requests ({:.1}%); {} differ{}.\n\n{}\n",
                o.identical,
                o.paired,
                o.identical_share().unwrap_or(0.0) * 100.0,
                self.diverging,
                self.after_divergence_note(),
                self.byte_identical_note
            ));
        }
        if !self.divergences.is_empty() {
            out.push_str("\nFirst differences (baseline vs speculative):\n\n");
        }
        for d in self.divergences.iter().take(5) {
            out.push_str(&format!(
                "- `{}` turn {}: first difference at byte {}: base {:?} vs spec {:?}\n",
                d.conversation_id.replace('`', "'"),
                d.turn_index,
                d.byte_offset,
                d.baseline_excerpt,
                d.speculative_excerpt
            ));
        }
        out
    }
}
