//! The per-category acceptance matrix (AIPerf's `speed-bench-report`):
//! its cells, rows and `Overall` here (every number from
//! `speedbench-metrics`), its renderings in `render`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use speedbench_metrics::{
    AcceptanceTotals, GroupMean, RecordsDigest, RequestCounts, RequestMetricsExt, RunMetrics,
    acceptance_by, decode_tps_by, macro_average, mean_by,
};
use speedbench_record::{
    QUALITATIVE_CATEGORIES, RequestRecord, SPEC_AL_BENCHMARKS, THROUGHPUT_TIERS,
};
use speedbench_runs::RunStatus;

use crate::ReportError;

mod render;

pub(crate) use render::{markdown_line, push_csv_line};

/// What `Overall` is, printed under tables and stored in JSON: the
/// SPEED-Bench paper's and AIPerf's macro-average.
pub const OVERALL_DEFINITION: &str = "Overall = macro-average: the unweighted mean of the row's category cells \
     (not the run's token-weighted figure over all its requests)";

/// Which statistic a matrix holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatrixMetric {
    /// Token-weighted acceptance length `1 + Σaccepted / Σsteps` (named
    /// `accept_length`).
    AcceptLength,
    /// Token-weighted draft acceptance rate `Σaccepted / Σproposed` as a
    /// fraction in `0..=1`, as AIPerf's report prints it (named
    /// `accept_rate`).
    AcceptRate,
    /// Output-token throughput of the whole run, tokens/s (named
    /// `throughput`). A rate over a run cannot be split by category, so a
    /// run contributes one column.
    Throughput,
    /// Mean per-request decode speed, tokens/s (named `decode_tps`): the
    /// server's own figure (llama.cpp `predicted_per_second`) where it
    /// reports one, else the client's `(completion_tokens - 1) / (e2e - ttft)`.
    DecodeTps,
    /// Mean end-to-end request latency, milliseconds (named `latency`).
    Latency,
}

impl MatrixMetric {
    /// Every metric, in CLI order.
    pub const ALL: [MatrixMetric; 5] = [
        MatrixMetric::AcceptLength,
        MatrixMetric::AcceptRate,
        MatrixMetric::Throughput,
        MatrixMetric::DecodeTps,
        MatrixMetric::Latency,
    ];

    /// The name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            MatrixMetric::AcceptLength => "accept_length",
            MatrixMetric::AcceptRate => "accept_rate",
            MatrixMetric::Throughput => "throughput",
            MatrixMetric::DecodeTps => "decode_tps",
            MatrixMetric::Latency => "latency",
        }
    }

    /// Decimals in the console and Markdown tables: 4 for the rate (a
    /// fraction, as speed_bench.py and `compare` print it: 0.59 hides the
    /// difference between two drafters), 2 for the rest. AIPerf's CSV keeps
    /// its 2 for every metric.
    pub fn display_decimals(self) -> usize {
        match self {
            MatrixMetric::AcceptRate => 4,
            _ => 2,
        }
    }

    /// The console title (AIPerf's for the metrics it has).
    pub fn title(self) -> &'static str {
        match self {
            MatrixMetric::AcceptLength => "Acceptance Length Report",
            MatrixMetric::AcceptRate => "Acceptance Rate Report",
            MatrixMetric::Throughput => "Throughput Report (tokens/sec)",
            MatrixMetric::DecodeTps => "Decode Speed Report (tokens/sec)",
            MatrixMetric::Latency => "Latency Report (ms)",
        }
    }

    /// True for the two acceptance metrics, which every source can give.
    pub fn is_acceptance(self) -> bool {
        matches!(self, MatrixMetric::AcceptLength | MatrixMetric::AcceptRate)
    }

    fn value(self, totals: &AcceptanceTotals) -> Option<f64> {
        match self {
            MatrixMetric::AcceptLength => totals.accept_length(),
            MatrixMetric::AcceptRate => totals.accept_rate(),
            _ => None,
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
        MatrixMetric::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| ReportError::UnknownMetric(s.to_string()))
    }
}

/// One cell before it is placed in a matrix.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cell {
    /// The value; `None` when the column exists but has no value.
    pub value: Option<f64>,
    /// Requests behind the value (0 for run-level sources).
    pub requests: u64,
    /// True when the value is a time-average of gauge samples rather than a
    /// token-weighted ratio (SGLang, TensorRT-LLM, vLLM's gauges).
    pub time_averaged: bool,
}

/// The cells of one run, keyed by column (category, tier or dataset).
pub type RunCells = BTreeMap<String, Cell>;

/// A model-by-category matrix: one row per model (or run), one column per
/// category, and a macro-averaged `Overall`.
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
    /// Unweighted mean of the present cells (`macro_average`); `None` when
    /// the row mixes token-weighted and time-averaged cells, which answer
    /// different questions and must not be averaged together.
    pub overall: Option<f64>,
    /// Requests behind each cell (0 where none or run-level).
    pub requests: Vec<u64>,
    /// Per cell: true when it is a time-averaged gauge value.
    pub time_averaged: Vec<bool>,
    /// The run behind the row, when the matrix was built from run
    /// directories ([`crate::build_matrix`]); `None` otherwise. For a
    /// folded row, its first incomplete run, else its first.
    pub run: Option<RowRun>,
    /// The runs folded into this row (one model, columns that do not
    /// overlap: see [`crate::build_matrix`]); empty for a row of one run.
    pub folded: Vec<std::path::PathBuf>,
    /// Acceptance by draft position over the row (acceptance metrics only):
    /// entry `i` is the share of verify steps that accepted at least `i + 1`
    /// drafts, from the pooled per-request histograms, else from the
    /// engine's per-position counters; empty when neither is known.
    pub positions: Vec<f64>,
    /// [`Self::positions`] per column, in column order (per-request
    /// histograms only; empty where unknown).
    pub column_positions: Vec<Vec<f64>>,
}

/// Acceptance by draft position from per-column pooled histograms (see
/// [`speedbench_metrics::histograms_by`]): over all columns, and per column.
pub(crate) fn positions_of(
    by_column: &BTreeMap<String, speedbench_metrics::PooledHistogram>,
) -> (Vec<f64>, BTreeMap<String, Vec<f64>>) {
    let mut pooled = speedbench_metrics::PooledHistogram::default();
    for h in by_column.values() {
        pooled.add(&h.counts);
    }
    let columns = by_column
        .iter()
        .map(|(k, h)| (k.clone(), h.position_acceptance()))
        .collect();
    (pooled.position_acceptance(), columns)
}

/// The run behind a matrix row: where it came from and how far it got.
#[derive(Debug, Clone, PartialEq)]
pub struct RowRun {
    /// The run directory (or speed_bench.py file).
    pub dir: std::path::PathBuf,
    /// The model the run measured, in full (the row's label may show a GGUF
    /// path by its file stem); in JSON as `model`.
    pub model: String,
    /// How the run ended.
    pub status: RunStatus,
    /// Why the run is incomplete, in words.
    pub status_reason: Option<String>,
    /// Its measured requests by result, when it has per-request records.
    pub counts: Option<RequestCounts>,
    /// Why the row has no `Overall` although it has cells (e.g. an AIPerf
    /// run of a dataset that is not SPEED-Bench's).
    pub overall_excluded: Option<String>,
}

/// The cells one run's records give for `metric`, per category.
///
/// Warmup and failed records never count. Acceptance cells are
/// token-weighted ([`speedbench_metrics::acceptance_by`]); latency is the
/// mean end-to-end latency in ms; decode speed is the mean per-request decode
/// tokens/s. [`MatrixMetric::Throughput`] is a whole-run rate and gives one
/// cell, keyed by the run's only category, or by its dataset when it mixes
/// categories (it cannot be split).
pub fn records_cells(metric: MatrixMetric, records: &[RequestRecord]) -> RunCells {
    match metric {
        MatrixMetric::AcceptLength | MatrixMetric::AcceptRate => {
            acceptance_cells(metric, acceptance_by(records, category_key))
        }
        MatrixMetric::Latency => mean_cells(mean_by(records, category_key, |r| {
            Some(r.request_latency_ms())
        })),
        MatrixMetric::DecodeTps => mean_cells(decode_tps_by(records, category_key)),
        MatrixMetric::Throughput => {
            let measured: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
            let categories: BTreeSet<String> =
                measured.iter().filter_map(|r| category_key(r)).collect();
            let key = match categories.len() {
                1 => categories.into_iter().next().unwrap_or_default(),
                _ => measured
                    .first()
                    .map(|r| strip_dataset_prefix(&r.dataset).to_string())
                    .unwrap_or_default(),
            };
            let metrics = RunMetrics::from_records(records);
            let cell = Cell {
                value: metrics.output_token_throughput,
                requests: metrics.counts.succeeded,
                time_averaged: false,
            };
            if key.is_empty() {
                RunCells::new()
            } else {
                RunCells::from([(key, cell)])
            }
        }
    }
}

/// One acceptance cell per group's totals (computed by `speedbench-metrics`).
pub(crate) fn acceptance_cells(
    metric: MatrixMetric,
    totals: BTreeMap<String, AcceptanceTotals>,
) -> RunCells {
    totals
        .into_iter()
        .map(|(k, t)| {
            let cell = Cell {
                value: metric.value(&t),
                requests: t.requests,
                time_averaged: false,
            };
            (k, cell)
        })
        .collect()
}

/// One cell per group mean (computed by `speedbench-metrics`).
fn mean_cells(groups: BTreeMap<String, GroupMean>) -> RunCells {
    groups
        .into_iter()
        .map(|(k, g)| {
            let cell = Cell {
                value: g.mean,
                requests: g.count,
                time_averaged: false,
            };
            (k, cell)
        })
        .collect()
}

impl AcceptanceMatrix {
    /// Builds the matrix from labelled runs' records (see [`records_cells`]).
    ///
    /// Every run gives its own row, even when two share a label (AIPerf's
    /// `results[model].update` merged them, silently overwriting one run's
    /// categories with another's): give runs distinct labels
    /// (`speedbench_runs::assign_labels`). Rows come out sorted by label (stable),
    /// as AIPerf sorts by model.
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
        if metric.is_acceptance() {
            let digests: Vec<(String, RecordsDigest)> = (runs.iter())
                .map(|(label, records)| (label.clone(), RecordsDigest::of(records)))
                .collect();
            let digests: Vec<(String, &RecordsDigest)> =
                digests.iter().map(|(l, d)| (l.clone(), d)).collect();
            if let Some(matrix) = AcceptanceMatrix::from_digests(metric, &digests) {
                return matrix;
            }
        }
        let cells = runs
            .iter()
            .map(|(label, records)| (label.clone(), records_cells(metric, records)))
            .collect();
        AcceptanceMatrix::from_cells(metric, cells)
    }

    /// An acceptance matrix ([`MatrixMetric::is_acceptance`]) from runs'
    /// digests, folded as their records were read (a million-record run
    /// need not be held): the cells and positions [`Self::from_runs`] gives
    /// from the records themselves. `None` for a metric a digest does not
    /// hold (latency, decode speed, throughput).
    pub fn from_digests(
        metric: MatrixMetric,
        runs: &[(String, &RecordsDigest)],
    ) -> Option<AcceptanceMatrix> {
        if !metric.is_acceptance() {
            return None;
        }
        let cells = (runs.iter())
            .map(|(label, d)| {
                (
                    label.clone(),
                    acceptance_cells(metric, d.acceptance.totals()),
                )
            })
            .collect();
        let mut matrix = AcceptanceMatrix::from_cells(metric, cells);
        // Rows are the runs sorted by label, stably: the same order.
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by(|&a, &b| runs[a].0.cmp(&runs[b].0));
        for (row, &i) in matrix.rows.iter_mut().zip(&order) {
            let (positions, by_column) = positions_of(&runs[i].1.acceptance.histograms());
            row.positions = positions;
            row.column_positions = matrix
                .columns
                .iter()
                .map(|c| by_column.get(c).cloned().unwrap_or_default())
                .collect();
        }
        Some(matrix)
    }

    /// Builds the matrix from cells already computed per run, whatever their
    /// source; one row per run, ordering and `Overall` as [`Self::from_runs`].
    pub fn from_cells(metric: MatrixMetric, runs: Vec<(String, RunCells)>) -> AcceptanceMatrix {
        let mut merged = runs;
        merged.sort_by(|a, b| a.0.cmp(&b.0));
        let categories: BTreeSet<&str> = merged
            .iter()
            .flat_map(|(_, cells)| cells.keys().map(String::as_str))
            .collect();
        let columns = column_order(&categories);
        let rows = merged
            .iter()
            .map(|(label, cells)| {
                let row: Vec<Cell> = columns
                    .iter()
                    .map(|c| cells.get(c).copied().unwrap_or_default())
                    .collect();
                let values: Vec<Option<f64>> = row.iter().map(|c| c.value).collect();
                let present: BTreeSet<bool> = row
                    .iter()
                    .filter(|c| c.value.is_some())
                    .map(|c| c.time_averaged)
                    .collect();
                MatrixRow {
                    label: label.clone(),
                    overall: if present.len() > 1 {
                        None
                    } else {
                        macro_average(&values)
                    },
                    cells: values,
                    requests: row.iter().map(|c| c.requests).collect(),
                    time_averaged: row
                        .iter()
                        .map(|c| c.value.is_some() && c.time_averaged)
                        .collect(),
                    run: None,
                    folded: Vec::new(),
                    positions: Vec::new(),
                    column_positions: Vec::new(),
                }
            })
            .collect();
        AcceptanceMatrix {
            metric,
            columns,
            rows,
        }
    }
}

/// The matrix key of a record ([`speedbench_metrics::matrix_column`]), owned.
pub(crate) fn category_key(r: &RequestRecord) -> Option<String> {
    speedbench_metrics::matrix_column(r).map(str::to_string)
}

pub(crate) use speedbench_metrics::strip_dataset_prefix;

pub(crate) fn column_order(categories: &BTreeSet<&str>) -> Vec<String> {
    for known in [
        &QUALITATIVE_CATEGORIES[..],
        &THROUGHPUT_TIERS[..],
        &SPEC_AL_BENCHMARKS[..],
    ] {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
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

    #[test]
    fn json_carries_acceptance_by_draft_position_per_row_and_column() {
        let with_hist = |category: &str, accepted: u64, steps: u64, hist: Vec<u64>| {
            let mut r = rec(category, accepted, steps, steps * 3);
            r.spec.as_mut().unwrap().acceptance_histogram = hist;
            r
        };
        // coding: 4 steps [1, 1, 1, 1]; math: 3 steps [0, 0, 0, 3].
        let records = vec![
            with_hist("coding", 6, 4, vec![1, 1, 1, 1]),
            with_hist("math", 9, 3, vec![0, 0, 0, 3]),
        ];
        let m = matrix(MatrixMetric::AcceptLength, &[("m", &records)]);
        let json = m.to_json();
        let row = &json["rows"][0];
        // Pooled [1, 1, 1, 4] over 7 steps: at least 1, 2, 3 = 6/7, 5/7, 4/7.
        let shares: Vec<f64> = row["position_acceptance"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(shares, [6.0 / 7.0, 5.0 / 7.0, 4.0 / 7.0]);
        let budgets = row["length_at_budget"].as_array().unwrap();
        assert!(close(budgets[2].as_f64().unwrap(), 1.0 + 15.0 / 7.0));
        assert_eq!(
            row["column_position_acceptance"]["coding"],
            serde_json::json!([0.75, 0.5, 0.25])
        );
        assert_eq!(
            row["column_position_acceptance"]["math"],
            serde_json::json!([1.0, 1.0, 1.0])
        );
        // Not an acceptance metric: no position data.
        let latency = matrix(MatrixMetric::Latency, &[("m", &records)]);
        assert!(
            latency.to_json()["rows"][0]
                .get("position_acceptance")
                .is_none()
        );
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
    fn rows_with_the_same_label_stay_separate_rows() {
        let first = vec![rec("coding", 2, 2, 4), rec("math", 1, 1, 2)];
        let second = vec![rec("coding", 6, 3, 9)];
        let m = matrix(MatrixMetric::AcceptLength, &[("m", &first), ("m", &second)]);
        // Nothing merged or overwritten: first run coding 1 + 2/2 = 2.00,
        // math 1 + 1/1 = 2.00, Overall 2.00; second run coding 1 + 6/3 = 3.00,
        // Overall 3.00. Same labels keep their input order.
        assert_eq!(m.rows.len(), 2);
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nm,2.00,2.00,2.00\r\nm,3.00,,3.00\r\n"
        );
        assert_eq!(m.rows[0].requests, [1, 1]);
        assert_eq!(m.rows[1].requests, [1, 0]);
    }

    #[test]
    fn an_incomplete_run_adds_a_status_column() {
        let records = two_categories();
        let mut m = matrix(
            MatrixMetric::AcceptLength,
            &[("a", &records), ("b", &records)],
        );
        m.rows[1].run = Some(RowRun {
            dir: "runs/b".into(),
            model: "b".into(),
            status: RunStatus::Interrupted,
            status_reason: Some("interrupted".into()),
            counts: Some(RequestCounts {
                succeeded: 3,
                failed: 1,
                skipped: 2,
                ..Default::default()
            }),
            overall_excluded: None,
        });
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall,Status\r\na,1.30,4.00,2.65,completed\r\nb,1.30,4.00,2.65,interrupted\r\n"
        );
        let json = m.to_json();
        assert_eq!(json["rows"][0]["complete"], true);
        assert_eq!(json["rows"][1]["complete"], false);
        assert_eq!(json["rows"][1]["status"], "interrupted");
        assert_eq!(json["rows"][1]["skipped"], 2);
        let console = m.to_console();
        assert!(console.contains("│      Status │"), "{console}");
        assert!(console.contains("│ interrupted │"), "{console}");
        assert!(
            console.contains("! b is INCOMPLETE (interrupted)"),
            "{console}"
        );
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
        assert_eq!(m.to_console(), format!("{expected}{OVERALL_DEFINITION}\n"));
        let rate = matrix(MatrixMetric::AcceptRate, &[("llama", &records)]);
        assert!(rate.to_console().contains("Acceptance Rate Report\n"));
    }

    #[test]
    fn the_rate_has_four_decimals_on_screen_and_aiperfs_two_in_csv() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptRate, &[("llama", &records)]);
        // coding 14/141 = 0.09929..., math 30/40, Overall their mean 0.42464...
        assert!(
            m.to_markdown()
                .contains("| llama | 0.0993 | 0.7500 | 0.4246 |"),
            "{}",
            m.to_markdown()
        );
        assert!(
            m.to_console()
                .contains("│ llama │ 0.0993 │ 0.7500 │  0.4246 │"),
            "{}",
            m.to_console()
        );
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nllama,0.10,0.75,0.42\r\n"
        );
    }

    #[test]
    fn markdown_exact() {
        let records = two_categories();
        let m = matrix(MatrixMetric::AcceptLength, &[("a|b", &records)]);
        assert_eq!(
            m.to_markdown(),
            "| Model | coding | math | Overall |\n\
             | --- | ---: | ---: | ---: |\n\
             | a\\|b | 1.30 | 4.00 | 2.65 |\n\n\
             Overall = macro-average: the unweighted mean of the row's category cells \
             (not the run's token-weighted figure over all its requests)\n"
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
                "overall_definition": OVERALL_DEFINITION,
                "rows": [{
                    "label": "llama",
                    "cells": [coding, 4.0],
                    "overall": (coding + 4.0) / 2.0,
                    "requests": [2, 1],
                    "time_averaged": [false, false],
                    "status": null,
                    "complete": true,
                }],
            })
        );
    }

    #[test]
    fn gauge_cells_are_marked_and_never_averaged_with_weighted_ones() {
        let weighted = Cell {
            value: Some(2.0),
            requests: 3,
            time_averaged: false,
        };
        let gauge = Cell {
            value: Some(3.0),
            requests: 0,
            time_averaged: true,
        };
        let m = AcceptanceMatrix::from_cells(
            MatrixMetric::AcceptLength,
            vec![
                (
                    "mixed".into(),
                    RunCells::from([("coding".into(), weighted), ("math".into(), gauge)]),
                ),
                ("sglang".into(), RunCells::from([("math".into(), gauge)])),
            ],
        );
        // "mixed" holds a token-weighted 2.0 and a time-averaged 3.0: no Overall.
        // "sglang" holds gauges only: Overall = 3.0 (a mean of like with like).
        assert_eq!(m.rows[0].overall, None);
        assert_eq!(m.rows[1].overall, Some(3.0));
        assert_eq!(m.rows[0].time_averaged, [false, true]);
        let console = m.to_console();
        assert!(
            console.contains("│ mixed  │   2.00 │ 3.00* │       - │"),
            "{console}"
        );
        assert!(
            console.contains("* time-averaged gauge samples"),
            "{console}"
        );
        // CSV stays AIPerf's plain numbers.
        assert_eq!(
            m.to_csv(),
            "Model,coding,math,Overall\r\nmixed,2.00,3.00,\r\nsglang,,3.00,3.00\r\n"
        );
    }

    fn timed(
        category: &str,
        e2e_ms: u64,
        ttft_ms: u64,
        tokens: u64,
        server_tps: Option<f64>,
    ) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            e2e_latency_ns: e2e_ms * 1_000_000,
            ttft_ns: Some(ttft_ms * 1_000_000),
            completion_tokens: Some(tokens),
            start_unix_ns: 0,
            end_unix_ns: (e2e_ms * 1_000_000) as i64,
            server_timings: server_tps.map(|t| speedbench_record::ServerTimings {
                predicted_per_second: Some(t),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn latency_decode_speed_and_throughput_by_hand() {
        let records = vec![
            // coding: client decode (11-1)/(1.1-0.1 s) = 10 tok/s and (21-1)/(2.1-0.1) = 10;
            // latency (1100 + 2100)/2 = 1600 ms.
            timed("coding", 1100, 100, 11, None),
            timed("coding", 2100, 100, 21, None),
            // math: the server's own figures win: (50 + 70)/2 = 60 tok/s; latency 500 ms.
            timed("math", 500, 100, 9, Some(50.0)),
            timed("math", 500, 100, 9, Some(70.0)),
        ];
        let runs = [("m".to_string(), records.as_slice())];
        let lat = AcceptanceMatrix::from_runs(MatrixMetric::Latency, &runs);
        assert_eq!(
            lat.to_csv(),
            "Model,coding,math,Overall\r\nm,1600.00,500.00,1050.00\r\n"
        );
        let tps = AcceptanceMatrix::from_runs(MatrixMetric::DecodeTps, &runs);
        assert_eq!(
            tps.to_csv(),
            "Model,coding,math,Overall\r\nm,10.00,60.00,35.00\r\n"
        );
        // Throughput is a run-level rate: (11+21+9+9) tokens over the 2.1 s the
        // run spans = 23.81 tok/s, one column named after the dataset because
        // the run mixes two categories.
        let mut mixed = records.clone();
        for r in &mut mixed {
            r.dataset = "speed_bench_qualitative".into();
        }
        let runs = [("m".to_string(), mixed.as_slice())];
        let thr = AcceptanceMatrix::from_runs(MatrixMetric::Throughput, &runs);
        assert_eq!(thr.columns, ["qualitative"]);
        assert!((thr.rows[0].cells[0].unwrap() - 50.0 / 2.1).abs() < 1e-9);
    }

    #[test]
    fn empty_matrix() {
        let m = matrix(MatrixMetric::AcceptLength, &[]);
        assert_eq!(m.to_csv(), "Model,Overall\r\n");
        assert_eq!(m.to_json()["rows"], json!([]));
    }

    #[test]
    fn metric_names_round_trip() {
        for m in MatrixMetric::ALL {
            assert_eq!(m.to_string().parse::<MatrixMetric>().unwrap(), m);
        }
        let err = "tps".parse::<MatrixMetric>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown matrix metric \"tps\" (expected accept_length, accept_rate, throughput, decode_tps or latency)"
        );
        assert!(matches!(err, ReportError::UnknownMetric(m) if m == "tps"));
    }
}
