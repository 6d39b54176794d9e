//! The per-category acceptance matrix (AIPerf's `speed-bench-report`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};
use speedbench_metrics::{AcceptanceTotals, acceptance_by, macro_average};
use speedbench_record::RequestRecord;

use crate::ReportError;
use crate::table::{FirstColumn, titled_table};

/// SPEED-Bench's 11 qualitative categories, in AIPerf's column order.
const QUALITATIVE: [&str; 11] = [
    "coding",
    "humanities",
    "math",
    "multilingual",
    "qa",
    "rag",
    "reasoning",
    "roleplay",
    "stem",
    "summarization",
    "writing",
];
/// SPEED-Bench's throughput entropy tiers, in AIPerf's column order.
const THROUGHPUT_TIERS: [&str; 3] = ["low_entropy", "mixed", "high_entropy"];
/// The `spec_al_*` benchmarks, in AIPerf's column order.
const SPEC_AL: [&str; 5] = ["gsm8k", "math500", "mtbench", "humaneval", "mbpp"];
/// Dataset-name prefixes stripped to get a category when a record has none.
const DATASET_PREFIXES: [&str; 2] = ["speed_bench_", "spec_al_"];

/// Which acceptance statistic a matrix holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixMetric {
    /// Token-weighted acceptance length `1 + Σaccepted / Σsteps` (named
    /// `accept_length`).
    AcceptLength,
    /// Token-weighted draft acceptance rate `Σaccepted / Σproposed` as a
    /// fraction in `0..=1`, as AIPerf's report prints it (named
    /// `accept_rate`).
    AcceptRate,
}

impl MatrixMetric {
    /// The name used on the command line and in JSON: `accept_length` or
    /// `accept_rate`.
    pub fn as_str(self) -> &'static str {
        match self {
            MatrixMetric::AcceptLength => "accept_length",
            MatrixMetric::AcceptRate => "accept_rate",
        }
    }

    /// The console title, as AIPerf's report: `Acceptance Length Report` or
    /// `Acceptance Rate Report`.
    pub fn title(self) -> &'static str {
        match self {
            MatrixMetric::AcceptLength => "Acceptance Length Report",
            MatrixMetric::AcceptRate => "Acceptance Rate Report",
        }
    }

    fn value(self, totals: &AcceptanceTotals) -> Option<f64> {
        match self {
            MatrixMetric::AcceptLength => totals.accept_length(),
            MatrixMetric::AcceptRate => totals.accept_rate(),
        }
    }
}

impl fmt::Display for MatrixMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MatrixMetric {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate]
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ReportError::UnknownMetric(s.to_string()))
    }
}

/// A model-by-category acceptance matrix: one row per model (or run), one
/// column per category, and a macro-averaged `Overall`.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptanceMatrix {
    /// The statistic in the cells.
    pub metric: MatrixMetric,
    /// Category names, in display order.
    pub columns: Vec<String>,
    /// Rows sorted by label.
    pub rows: Vec<MatrixRow>,
}

/// One row of an [`AcceptanceMatrix`].
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRow {
    /// Row label: the model or run name.
    pub label: String,
    /// One value per column; `None` when the row has no value there.
    pub cells: Vec<Option<f64>>,
    /// Unweighted mean of the present cells (`macro_average`).
    pub overall: Option<f64>,
    /// Requests with spec stats behind each cell (0 where none).
    pub requests: Vec<u64>,
}

impl AcceptanceMatrix {
    /// Builds the matrix from labelled runs.
    ///
    /// Each run's records are grouped by category with
    /// [`speedbench_metrics::acceptance_by`], which skips warmup records,
    /// failed records and records without spec stats; the key is
    /// `record.category`, or when that is `None` the dataset name with a
    /// `speed_bench_` / `spec_al_` prefix stripped (records with neither are
    /// skipped). Cells are token-weighted ([`MatrixMetric`]).
    ///
    /// Runs with the same label merge into one row; a later run's category
    /// overwrites an earlier one's (as AIPerf's `results[model].update`).
    /// Rows come out sorted by label, as AIPerf sorts by model.
    ///
    /// Columns: if every category is one of the 11 qualitative ones, their
    /// SPEED-Bench order (`coding, humanities, math, multilingual, qa, rag,
    /// reasoning, roleplay, stem, summarization, writing`); else if all are
    /// entropy tiers, `low_entropy, mixed, high_entropy`; else if all are
    /// spec_al benchmarks, `gsm8k, math500, mtbench, humaneval, mbpp`; else
    /// sorted. A category present in a run but without a value (e.g. all
    /// its requests had zero steps) still gets a column, with an empty cell.
    pub fn from_runs(
        metric: MatrixMetric,
        runs: &[(String, &[RequestRecord])],
    ) -> AcceptanceMatrix {
        let mut merged: BTreeMap<&str, BTreeMap<String, AcceptanceTotals>> = BTreeMap::new();
        for (label, records) in runs {
            merged
                .entry(label.as_str())
                .or_default()
                .extend(acceptance_by(records, category_key));
        }
        let categories: BTreeSet<&str> = merged
            .values()
            .flat_map(|cells| cells.keys().map(String::as_str))
            .collect();
        let columns = column_order(&categories);
        let rows = merged
            .into_iter()
            .map(|(label, cells)| {
                let totals: Vec<Option<&AcceptanceTotals>> =
                    columns.iter().map(|c| cells.get(c)).collect();
                let values: Vec<Option<f64>> = totals
                    .iter()
                    .map(|t| t.and_then(|t| metric.value(t)))
                    .collect();
                MatrixRow {
                    label: label.to_string(),
                    overall: macro_average(&values),
                    cells: values,
                    requests: totals.iter().map(|t| t.map_or(0, |t| t.requests)).collect(),
                }
            })
            .collect();
        AcceptanceMatrix {
            metric,
            columns,
            rows,
        }
    }

    /// AIPerf's CSV: header `Model,<columns>,Overall`, one line per row,
    /// values with 2 decimals (the rate as a fraction), empty fields for
    /// missing values, CRLF line endings (Python's `csv` default), fields
    /// quoted only when they contain a comma, quote or line break.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let header = std::iter::once("Model")
            .chain(self.columns.iter().map(String::as_str))
            .chain(std::iter::once("Overall"));
        push_csv_line(&mut out, header.map(str::to_string));
        for row in &self.rows {
            let fields = std::iter::once(row.label.clone())
                .chain(row.cells.iter().map(|&v| cell_text(v, "")))
                .chain(std::iter::once(cell_text(row.overall, "")));
            push_csv_line(&mut out, fields);
        }
        out
    }

    /// A console table titled [`MatrixMetric::title`], columns
    /// `Model, <columns>, Overall`, values with 2 decimals, `-` for missing.
    pub fn to_console(&self) -> String {
        let header = self.header();
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| self.text_row(r, "-")).collect();
        titled_table(self.metric.title(), &header, &rows, FirstColumn::Left)
    }

    /// A GitHub-flavored Markdown table (values right-aligned, 2 decimals,
    /// `-` for missing, `|` in labels escaped).
    pub fn to_markdown(&self) -> String {
        let header = self.header();
        let mut out = markdown_line(header.iter().map(|h| h.to_string()));
        let rule = std::iter::once("---".to_string())
            .chain(std::iter::repeat_n("---:".to_string(), header.len() - 1));
        out.push_str(&markdown_line(rule));
        for row in &self.rows {
            out.push_str(&markdown_line(self.text_row(row, "-")));
        }
        out
    }

    /// The matrix as JSON, at full precision:
    /// `{"metric", "columns", "rows": [{"label", "cells", "overall",
    /// "requests"}]}` with `null` for missing values.
    pub fn to_json(&self) -> Value {
        let number = |v: Option<f64>| v.filter(|v| v.is_finite()).map_or(Value::Null, Value::from);
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "label": r.label,
                    "cells": r.cells.iter().map(|&v| number(v)).collect::<Vec<_>>(),
                    "overall": number(r.overall),
                    "requests": r.requests,
                })
            })
            .collect();
        json!({
            "metric": self.metric.as_str(),
            "columns": self.columns,
            "rows": rows,
        })
    }

    fn header(&self) -> Vec<&str> {
        std::iter::once("Model")
            .chain(self.columns.iter().map(String::as_str))
            .chain(std::iter::once("Overall"))
            .collect()
    }

    fn text_row(&self, row: &MatrixRow, missing: &str) -> Vec<String> {
        std::iter::once(row.label.clone())
            .chain(row.cells.iter().map(|&v| cell_text(v, missing)))
            .chain(std::iter::once(cell_text(row.overall, missing)))
            .collect()
    }
}

/// The matrix key of a record: its category, else its dataset name without
/// a SPEED-Bench / spec_al prefix; `None` when both are empty.
fn category_key(r: &RequestRecord) -> Option<String> {
    if let Some(c) = r.category.as_deref().filter(|c| !c.is_empty()) {
        return Some(c.to_string());
    }
    let stripped = DATASET_PREFIXES
        .iter()
        .find_map(|p| r.dataset.strip_prefix(p))
        .unwrap_or(&r.dataset);
    (!stripped.is_empty()).then(|| stripped.to_string())
}

fn column_order(categories: &BTreeSet<&str>) -> Vec<String> {
    for known in [&QUALITATIVE[..], &THROUGHPUT_TIERS[..], &SPEC_AL[..]] {
        if categories.iter().all(|c| known.contains(c)) {
            return known
                .iter()
                .filter(|k| categories.contains(*k))
                .map(|k| k.to_string())
                .collect();
        }
    }
    categories.iter().map(|c| c.to_string()).collect()
}

fn cell_text(v: Option<f64>, missing: &str) -> String {
    match v.filter(|v| v.is_finite()) {
        Some(v) => format!("{v:.2}"),
        None => missing.to_string(),
    }
}

fn push_csv_line(out: &mut String, fields: impl Iterator<Item = String>) {
    let fields: Vec<String> = fields
        .map(|f| {
            if f.contains([',', '"', '\r', '\n']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f
            }
        })
        .collect();
    out.push_str(&fields.join(","));
    out.push_str("\r\n");
}

fn markdown_line(cells: impl IntoIterator<Item = String>) -> String {
    let cells: Vec<String> = cells.into_iter().map(|c| c.replace('|', "\\|")).collect();
    format!("| {} |\n", cells.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ErrorKind, SpecDecodeStats};

    fn rec(category: &str, accepted: u64, steps: u64, proposed: u64) -> RequestRecord {
        RequestRecord {
            category: Some(category.to_string()),
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: Some(steps),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// coding: (acc 10, steps 43, prop 129) + (acc 4, steps 4, prop 12);
    /// math: (acc 30, steps 10, prop 40).
    fn two_categories() -> Vec<RequestRecord> {
        vec![
            rec("coding", 10, 43, 129),
            rec("coding", 4, 4, 12),
            rec("math", 30, 10, 40),
        ]
    }

    fn matrix(metric: MatrixMetric, runs: &[(&str, &[RequestRecord])]) -> AcceptanceMatrix {
        let runs: Vec<(String, &[RequestRecord])> =
            runs.iter().map(|&(l, r)| (l.to_string(), r)).collect();
        AcceptanceMatrix::from_runs(metric, &runs)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn accept_length_csv_by_hand() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptLength, &[("llama", &records)]);
        // coding AL = 1 + (10+4)/(43+4) = 1 + 14/47 = 1.2979 -> 1.30
        // math AL = 1 + 30/10 = 4.00
        // Overall = (1.2979 + 4.0) / 2 = 2.6489 -> 2.65 (macro average)
        assert_eq!(m.columns, ["coding", "math"]);
        let row = &m.rows[0];
        assert!(close(row.cells[0].unwrap(), 1.0 + 14.0 / 47.0));
        assert!(close(row.cells[1].unwrap(), 4.0));
        assert!(close(row.overall.unwrap(), (1.0 + 14.0 / 47.0 + 4.0) / 2.0));
        assert_eq!(row.requests, [2, 1]);
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nllama,1.30,4.00,2.65\r\n"
        );
    }

    #[test]
    fn accept_rate_is_a_fraction() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptRate, &[("llama", &records)]);
        // coding rate = (10+4)/(129+12) = 14/141 = 0.0993 -> 0.10
        // math rate = 30/40 = 0.75
        // Overall = (0.0993 + 0.75) / 2 = 0.4246 -> 0.42
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nllama,0.10,0.75,0.42\r\n"
        );
        assert!(close(m.rows[0].cells[0].unwrap(), 14.0 / 141.0));
    }

    #[test]
    fn warmup_and_errors_are_excluded() {
        let mut records = two_categories();
        // A warmup with AL 1 + 100/1 = 101 in coding, a timeout with AL 101 in
        // math, and a failed request alone in "rag": none may show.
        let mut warm = rec("coding", 100, 1, 100);
        warm.warmup = true;
        let mut failed = rec("math", 100, 1, 100);
        failed.error_kind = Some(ErrorKind::Timeout);
        let mut rag = rec("rag", 100, 1, 100);
        rag.error_kind = Some(ErrorKind::Connection);
        records.extend([warm, failed, rag]);
        let m = matrix(MatrixMetric::AcceptLength, &[("llama", &records)]);
        // Same numbers as without them; no rag column; requests 2 and 1.
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nllama,1.30,4.00,2.65\r\n"
        );
        assert_eq!(m.rows[0].requests, [2, 1]);
    }

    #[test]
    fn missing_cells_are_blank_dash_or_null() {
        let a = two_categories();
        let b = vec![rec("math", 3, 2, 4)];
        let m = matrix(
            MatrixMetric::AcceptLength,
            &[("b-model", &b), ("a-model", &a)],
        );
        // Rows sorted by label. b-model: math = 1 + 3/2 = 2.50, no coding;
        // Overall over the present cell only = 2.50.
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\n\
             a-model,1.30,4.00,2.65\r\n\
             b-model,,2.50,2.50\r\n"
        );
        assert_eq!(m.rows[1].requests, [0, 1]);
        let json = m.to_json();
        assert_eq!(json["rows"][1]["cells"][0], Value::Null);
        assert_eq!(json["rows"][1]["cells"][1], 2.5);
        let console = m.to_console();
        assert!(
            console.contains("│ b-model │      - │ 2.50 │    2.50 │\n"),
            "{console}"
        );
        assert!(m.to_markdown().contains("| b-model | - | 2.50 | 2.50 |\n"));
    }

    #[test]
    fn rows_with_the_same_label_merge_later_wins() {
        let first = vec![rec("coding", 2, 2, 4), rec("math", 1, 1, 2)];
        let second = vec![rec("coding", 6, 3, 9)];
        let m = matrix(MatrixMetric::AcceptLength, &[("m", &first), ("m", &second)]);
        // coding from the second run: 1 + 6/3 = 3.00 (the first run's
        // 1 + 2/2 = 2.00 is overwritten); math kept: 1 + 1/1 = 2.00;
        // Overall = (3 + 2) / 2 = 2.50.
        assert_eq!(m.rows.len(), 1);
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nm,3.00,2.00,2.50\r\n"
        );
        assert_eq!(m.rows[0].requests, [1, 1]);
    }

    #[test]
    fn zero_step_category_keeps_an_empty_column() {
        let records = vec![rec("coding", 0, 0, 0), rec("math", 30, 10, 40)];
        let m = matrix(MatrixMetric::AcceptLength, &[("x", &records)]);
        // coding: 0 steps -> no AL, but 1 request; Overall = math alone = 4.00.
        assert_eq!(m.to_csv(), "Model,coding,math,Overall\r\nx,,4.00,4.00\r\n");
        assert_eq!(m.rows[0].requests, [1, 1]);
    }

    fn columns(cats: &[&str]) -> Vec<String> {
        column_order(&cats.iter().copied().collect())
    }

    #[test]
    fn column_order_rules() {
        assert_eq!(
            columns(&["writing", "qa", "coding"]),
            ["coding", "qa", "writing"]
        );
        assert_eq!(
            columns(&["high_entropy", "low_entropy", "mixed"]),
            ["low_entropy", "mixed", "high_entropy"]
        );
        assert_eq!(
            columns(&["mbpp", "humaneval", "gsm8k", "math500", "mtbench"]),
            ["gsm8k", "math500", "mtbench", "humaneval", "mbpp"]
        );
        // Mixed families or unknown names: sorted.
        assert_eq!(
            columns(&["low_entropy", "coding"]),
            ["coding", "low_entropy"]
        );
        assert_eq!(columns(&["zeta", "alpha"]), ["alpha", "zeta"]);
        assert!(columns(&[]).is_empty());
    }

    #[test]
    fn dataset_name_is_the_fallback_key() {
        let from_dataset = |dataset: &str| RequestRecord {
            category: None,
            dataset: dataset.to_string(),
            ..rec("", 2, 1, 4)
        };
        let records = vec![
            from_dataset("spec_al_mbpp"),
            from_dataset("speed_bench_gsm8k"),
            from_dataset(""),
        ];
        let m = matrix(MatrixMetric::AcceptLength, &[("x", &records)]);
        // Prefixes stripped, spec_al order; the record with neither category
        // nor dataset is skipped. Each cell 1 + 2/1 = 3.00.
        assert_eq!(m.columns, ["gsm8k", "mbpp"]);
        assert_eq!(
            m.to_csv(),
            "Model,gsm8k,mbpp,Overall\r\nx,3.00,3.00,3.00\r\n"
        );
        // A category wins over the dataset name.
        let tagged = RequestRecord {
            dataset: "speed_bench_qualitative".into(),
            ..rec("coding", 1, 1, 1)
        };
        assert_eq!(category_key(&tagged).as_deref(), Some("coding"));
        assert_eq!(
            category_key(&from_dataset("prompts")).as_deref(),
            Some("prompts")
        );
    }

    #[test]
    fn csv_quotes_like_python() {
        let records = vec![rec("math", 30, 10, 40)];
        let m = matrix(MatrixMetric::AcceptLength, &[("org/m, \"v2\"", &records)]);
        assert_eq!(
            m.to_csv(),
            "Model,math,Overall\r\n\"org/m, \"\"v2\"\"\",4.00,4.00\r\n"
        );
    }

    #[test]
    fn console_exact() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptLength, &[("llama", &records)]);
        // 5 borders + (1+5+1) + (1+6+1) + (1+4+1) + (1+7+1) = 35 wide;
        // title (24 chars) pad (35 - 24) / 2 = 5.
        let expected = format!(
            "{}Acceptance Length Report\n{}",
            " ".repeat(5),
            "\
┍━━━━━━━┯━━━━━━━━┯━━━━━━┯━━━━━━━━━┑
│ Model │ coding │ math │ Overall │
┝━━━━━━━┿━━━━━━━━┿━━━━━━┿━━━━━━━━━┥
│ llama │   1.30 │ 4.00 │    2.65 │
└───────┴────────┴──────┴─────────┘
"
        );
        assert_eq!(m.to_console(), expected);
        let rate = matrix(MatrixMetric::AcceptRate, &[("llama", &records)]);
        assert!(rate.to_console().contains("Acceptance Rate Report\n"));
    }

    #[test]
    fn markdown_exact() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptLength, &[("a|b", &records)]);
        assert_eq!(
            m.to_markdown(),
            "| Model | coding | math | Overall |\n\
             | --- | ---: | ---: | ---: |\n\
             | a\\|b | 1.30 | 4.00 | 2.65 |\n"
        );
    }

    #[test]
    fn json_keeps_full_precision() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptLength, &[("llama", &records)]);
        let coding = 1.0 + 14.0 / 47.0;
        assert_eq!(
            m.to_json(),
            json!({
                "metric": "accept_length",
                "columns": ["coding", "math"],
                "rows": [{
                    "label": "llama",
                    "cells": [coding, 4.0],
                    "overall": (coding + 4.0) / 2.0,
                    "requests": [2, 1],
                }],
            })
        );
    }

    #[test]
    fn empty_matrix() {
        let m = matrix(MatrixMetric::AcceptLength, &[]);
        assert_eq!(m.to_csv(), "Model,Overall\r\n");
        assert_eq!(m.to_json()["rows"], json!([]));
    }

    #[test]
    fn metric_names_round_trip() {
        for m in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
            assert_eq!(m.to_string().parse::<MatrixMetric>(), Ok(m));
        }
        assert_eq!("accept_rate".parse(), Ok(MatrixMetric::AcceptRate));
        let err = "throughput".parse::<MatrixMetric>().unwrap_err();
        assert_eq!(err, ReportError::UnknownMetric("throughput".into()));
        assert_eq!(
            err.to_string(),
            "unknown matrix metric \"throughput\" (expected accept_length or accept_rate)"
        );
    }
}
