//! The matrix's four renderings: AIPerf's CSV, the console table,
//! Markdown and JSON, and the footnote that goes under them.

use serde_json::{Value, json};
use speedbench_metrics::RequestCounts;
use speedbench_runs::RunStatus;

use super::{AcceptanceMatrix, MatrixRow, OVERALL_DEFINITION};
use crate::table::{FirstColumn, titled_table};

impl AcceptanceMatrix {
    /// AIPerf's CSV: header `Model,<columns>,Overall`, one line per row,
    /// values with 2 decimals (the rate as a fraction), empty fields for
    /// missing values, CRLF line endings (Python's `csv` default), fields
    /// quoted only when they contain a comma, quote or line break.
    ///
    /// When any row's run is incomplete ([`Self::has_incomplete`]) a last
    /// `Status` column holds each run's status (`completed`,
    /// `interrupted`, `died`, ...), so an incomplete run cannot pass for a
    /// full one; with every run complete the CSV is AIPerf's byte for byte.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        let status = self.has_incomplete();
        let header = std::iter::once("Model")
            .chain(self.columns.iter().map(String::as_str))
            .chain(std::iter::once("Overall"))
            .chain(status.then_some("Status"));
        push_csv_line(&mut out, header.map(str::to_string));
        for row in &self.rows {
            let fields = std::iter::once(row.label.clone())
                .chain(row.cells.iter().map(|&v| cell_text(v, "")))
                .chain(std::iter::once(cell_text(row.overall, "")))
                .chain(status.then(|| row_status(row).to_string()));
            push_csv_line(&mut out, fields);
        }
        out
    }

    /// True when a row's run did not complete (interrupted, died, failed,
    /// still running, or records never closed).
    pub fn has_incomplete(&self) -> bool {
        self.rows
            .iter()
            .any(|r| r.run.as_ref().is_some_and(|run| !run.status.is_complete()))
    }

    /// A console table titled [`MatrixMetric::title`](crate::MatrixMetric::title), columns
    /// `Model, <columns>, Overall`, values with
    /// [`MatrixMetric::display_decimals`](crate::MatrixMetric::display_decimals) decimals, `-` for missing.
    pub fn to_console(&self) -> String {
        let header = self.header();
        let rows: Vec<Vec<String>> = self.rows.iter().map(|r| self.text_row(r, "-")).collect();
        let mut out = titled_table(self.metric.title(), &header, &rows, FirstColumn::Left);
        out.push_str(&self.footnote());
        out
    }

    /// A GitHub-flavored Markdown table (values right-aligned, the
    /// metric's display decimals,
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
        out.push('\n');
        out.push_str(&self.footnote());
        out
    }

    /// The matrix as JSON, at full precision:
    /// `{"metric", "columns", "overall_definition", "rows": [{"label",
    /// "cells", "overall", "requests", "time_averaged", "status",
    /// "complete"}]}` with `null` for missing values. Rows built from run
    /// directories also carry `dir`, `status_reason`, `succeeded`,
    /// `failed`, `skipped` and `overall_excluded`; `status` is `null` and
    /// `complete` `true` for rows built from bare records.
    pub fn to_json(&self) -> Value {
        let number = |v: Option<f64>| v.filter(|v| v.is_finite()).map_or(Value::Null, Value::from);
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut row = json!({
                    "label": r.label,
                    "cells": r.cells.iter().map(|&v| number(v)).collect::<Vec<_>>(),
                    "overall": number(r.overall),
                    "requests": r.requests,
                    "time_averaged": r.time_averaged,
                    "status": r.run.as_ref().map(|run| run.status.as_str()),
                    "complete": r.run.as_ref().is_none_or(|run| run.status.is_complete()),
                });
                if let (Some(run), Some(obj)) = (&r.run, row.as_object_mut()) {
                    obj.insert("dir".into(), json!(run.dir.display().to_string()));
                    obj.insert("model".into(), json!(run.model));
                    obj.insert("status_reason".into(), json!(run.status_reason));
                    let count = |f: fn(&RequestCounts) -> u64| run.counts.as_ref().map(f);
                    obj.insert("succeeded".into(), json!(count(|c| c.succeeded)));
                    obj.insert("failed".into(), json!(count(|c| c.failed)));
                    obj.insert("skipped".into(), json!(count(|c| c.skipped)));
                    obj.insert("overall_excluded".into(), json!(run.overall_excluded));
                }
                if !r.positions.is_empty()
                    && let Some(obj) = row.as_object_mut()
                {
                    self.insert_positions(obj, r);
                }
                if !r.folded.is_empty()
                    && let Some(obj) = row.as_object_mut()
                {
                    let dirs: Vec<String> =
                        r.folded.iter().map(|d| d.display().to_string()).collect();
                    obj.insert("folded_runs".into(), json!(dirs));
                }
                row
            })
            .collect();
        json!({
            "metric": self.metric.as_str(),
            "columns": self.columns,
            "overall_definition": OVERALL_DEFINITION,
            "rows": rows,
        })
    }

    /// A row's acceptance by draft position: the row's, the full-budget
    /// lengths, and each column's.
    fn insert_positions(&self, obj: &mut serde_json::Map<String, Value>, r: &MatrixRow) {
        obj.insert("position_acceptance".into(), json!(r.positions));
        // One denominator for the row: its acceptance length's steps (the
        // engine's verify steps; llama.cpp's target passes), so the
        // full-budget length is the row's own.
        obj.insert(
            "position_acceptance_per".into(),
            json!("acceptance_length_step"),
        );
        obj.insert(
            "length_at_budget".into(),
            json!(speedbench_metrics::length_at_budgets(&r.positions)),
        );
        let by_column: serde_json::Map<String, Value> = self
            .columns
            .iter()
            .zip(&r.column_positions)
            .filter(|(_, p)| !p.is_empty())
            .map(|(c, p)| (c.clone(), json!(p)))
            .collect();
        obj.insert("column_position_acceptance".into(), json!(by_column));
    }

    fn header(&self) -> Vec<&str> {
        std::iter::once("Model")
            .chain(self.columns.iter().map(String::as_str))
            .chain(std::iter::once("Overall"))
            .chain(self.has_incomplete().then_some("Status"))
            .collect()
    }

    /// A row's text; time-averaged cells get a `*` (explained by [`Self::footnote`]).
    fn text_row(&self, row: &MatrixRow, missing: &str) -> Vec<String> {
        let decimals = self.metric.display_decimals();
        let cells = row
            .cells
            .iter()
            .zip(&row.time_averaged)
            .map(|(&v, &gauge)| {
                let text = shown(v, decimals, missing);
                if gauge { format!("{text}*") } else { text }
            });
        std::iter::once(row.label.clone())
            .chain(cells)
            .chain(std::iter::once(shown(row.overall, decimals, missing)))
            .chain(self.has_incomplete().then(|| row_status(row).to_string()))
            .collect()
    }

    /// The notes printed under console and Markdown tables: what `Overall`
    /// is ([`OVERALL_DEFINITION`]), `*` when cells are time-averaged
    /// gauges, the incomplete runs, and rows kept out of `Overall`.
    pub fn footnote(&self) -> String {
        let mut out = format!("{OVERALL_DEFINITION}\n");
        let any_gauge = self.rows.iter().any(|r| r.time_averaged.contains(&true));
        if any_gauge {
            out.push_str(
                "* time-averaged gauge samples (SGLang / TensorRT-LLM / vLLM gauges): not token-weighted, \
                 not comparable value-for-value with unmarked cells; Overall is omitted where a row mixes both\n",
            );
        }
        for row in &self.rows {
            let Some(run) = &row.run else { continue };
            if !run.status.is_complete() {
                out.push_str(&format!(
                    "! {} is INCOMPLETE ({}): {}; its cells cover only the requests that finished\n",
                    row.label,
                    run.status,
                    run.status_reason.as_deref().unwrap_or("no outcome recorded")
                ));
            }
            if let Some(why) = &run.overall_excluded {
                out.push_str(&format!("{} has no Overall: {why}\n", row.label));
            }
        }
        out
    }
}

/// The `Status` text of a row: its run's status, `completed` for rows
/// built from bare records.
fn row_status(row: &MatrixRow) -> &'static str {
    row.run
        .as_ref()
        .map_or(RunStatus::Completed.as_str(), |r| r.status.as_str())
}

/// A CSV cell: AIPerf's two decimals.
fn cell_text(v: Option<f64>, missing: &str) -> String {
    shown(v, 2, missing)
}

/// A value with `decimals` decimals, `missing` for none.
fn shown(v: Option<f64>, decimals: usize, missing: &str) -> String {
    match v.filter(|v| v.is_finite()) {
        Some(v) => format!("{v:.decimals$}"),
        None => missing.to_string(),
    }
}

/// Appends one CRLF-terminated CSV line, quoting fields that need it.
pub(crate) fn push_csv_line(out: &mut String, fields: impl Iterator<Item = String>) {
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

/// One Markdown table line, `|` escaped in cells.
pub(crate) fn markdown_line(cells: impl IntoIterator<Item = String>) -> String {
    let cells: Vec<String> = cells.into_iter().map(|c| c.replace('|', "\\|")).collect();
    format!("| {} |\n", cells.join(" | "))
}
