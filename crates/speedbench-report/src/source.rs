//! Where a matrix's cells come from: a run's records, its summary, or the
//! server scrape, in AIPerf's order (records, then summary, then server).

use std::fmt;
use std::str::FromStr;

use speedbench_runs::{RunData, RunFormat};

use crate::ReportError;
use crate::matrix::{
    AcceptanceMatrix, Cell, MatrixMetric, RowRun, RunCells, acceptance_cells, records_cells,
    strip_dataset_prefix,
};
use crate::server::{self, Weighting};

/// Which source a matrix's cells come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceChoice {
    /// The best each run offers: records, then summary, then server.
    Auto,
    /// Per-request records only (the only source that splits a mixed run).
    Records,
    /// The run-level summary only (one column per run).
    Summary,
    /// The server-metrics scrape only (one column per run).
    Server,
}

impl FromStr for SourceChoice {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(SourceChoice::Auto),
            "records" => Ok(SourceChoice::Records),
            "summary" => Ok(SourceChoice::Summary),
            "server" => Ok(SourceChoice::Server),
            _ => Err(ReportError::UnknownSource(s.to_string())),
        }
    }
}

impl fmt::Display for SourceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SourceChoice::Auto => {
                "any source (per-request records, then the run summary, then the server scrape)"
            }
            SourceChoice::Records => "the per-request records",
            SourceChoice::Summary => "the run summary",
            SourceChoice::Server => "the server-metrics scrape",
        })
    }
}

/// The source a run's cells actually came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedSource {
    /// Per-request records.
    Records,
    /// The run summary.
    Summary,
    /// The server scrape, with how its number is weighted.
    Server(Weighting),
    /// Nothing usable.
    None,
}

impl fmt::Display for ResolvedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolvedSource::Records => f.write_str("records"),
            ResolvedSource::Summary => f.write_str("summary"),
            ResolvedSource::Server(weighting) => write!(f, "server ({weighting})"),
            ResolvedSource::None => f.write_str("no source"),
        }
    }
}

/// Record columns a matrix of `metric` reads (pass them to
/// [`load_run_with`](speedbench_runs::load_run_with)): the grouping keys (category,
/// dataset, warmup, error kind, model) and the values it needs.
pub fn matrix_columns(metric: MatrixMetric) -> &'static [&'static str] {
    use speedbench_record::columns::*;
    // Folded into each run's digest as the file is read.
    const ACCEPTANCE: [&str; 15] = speedbench_metrics::RecordsDigest::COLUMNS;
    const LATENCY: [&str; 6] = [CATEGORY, DATASET, WARMUP, ERROR_KIND, MODEL, E2E_LATENCY_NS];
    const DECODE: [&str; 9] = [
        CATEGORY,
        DATASET,
        WARMUP,
        ERROR_KIND,
        MODEL,
        E2E_LATENCY_NS,
        TTFT_NS,
        COMPLETION_TOKENS,
        TIMINGS_PREDICTED_PER_SECOND,
    ];
    const THROUGHPUT: [&str; 8] = [
        CATEGORY,
        DATASET,
        WARMUP,
        ERROR_KIND,
        MODEL,
        START_TIME,
        END_TIME,
        COMPLETION_TOKENS,
    ];
    match metric {
        MatrixMetric::AcceptLength | MatrixMetric::AcceptRate => &ACCEPTANCE,
        MatrixMetric::Latency => &LATENCY,
        MatrixMetric::DecodeTps => &DECODE,
        MatrixMetric::Throughput => &THROUGHPUT,
    }
}

/// The run's single column key for run-level sources: its only record
/// category, else its dataset name without a `speed_bench_` /
/// `spec_al_` prefix.
pub fn run_column(run: &RunData) -> Option<String> {
    let from_records = run.records_digest().and_then(|digest| {
        let mut cats = digest.categories.iter();
        match (cats.next(), cats.next()) {
            (Some(only), None) => Some(only.clone()),
            _ => None,
        }
    });
    from_records.or_else(|| {
        let name = strip_dataset_prefix(&run.dataset);
        (!name.is_empty()).then(|| name.to_string())
    })
}

fn single(run: &RunData, value: Option<f64>, time_averaged: bool) -> RunCells {
    match (run_column(run), value) {
        (Some(column), Some(v)) => RunCells::from([(
            column,
            Cell {
                value: Some(v),
                requests: 0,
                time_averaged,
            },
        )]),
        _ => RunCells::new(),
    }
}

/// The run's cells for `metric` from `choice`, and the source used.
///
/// `Auto` tries records, then summary, then server, taking the first
/// that yields a value. Throughput, decode speed and latency come from
/// records (or, for throughput, the summary): the server scrape has
/// no per-run figure for them here.
pub fn run_cells(
    run: &RunData,
    metric: MatrixMetric,
    choice: SourceChoice,
) -> (RunCells, ResolvedSource) {
    for source in source_order(run, metric, choice) {
        let Some((cells, resolved)) = cells_from(run, metric, *source) else {
            continue;
        };
        if cells.values().any(|c| c.value.is_some()) {
            return (cells, resolved);
        }
    }
    (no_value_cells(run), ResolvedSource::None)
}

/// The sources to try, in order: the one asked for, or (`auto`) records,
/// summary, server; AIPerf's own throughput first for an AIPerf run, so
/// the report prints the number AIPerf printed.
fn source_order(
    run: &RunData,
    metric: MatrixMetric,
    choice: SourceChoice,
) -> &'static [SourceChoice] {
    match choice {
        SourceChoice::Auto
            if run.format == RunFormat::Aiperf && metric == MatrixMetric::Throughput =>
        {
            &[SourceChoice::Summary, SourceChoice::Records]
        }
        SourceChoice::Auto => &[
            SourceChoice::Records,
            SourceChoice::Summary,
            SourceChoice::Server,
        ],
        SourceChoice::Records => &[SourceChoice::Records],
        SourceChoice::Summary => &[SourceChoice::Summary],
        SourceChoice::Server => &[SourceChoice::Server],
    }
}

/// A run's cells from one source; `None` when the run lacks that source.
fn cells_from(
    run: &RunData,
    metric: MatrixMetric,
    source: SourceChoice,
) -> Option<(RunCells, ResolvedSource)> {
    Some(match source {
        // Acceptance from the digest folded as the records were read
        // (all a report over a million records holds of them).
        SourceChoice::Records if metric.is_acceptance() => (
            acceptance_cells(metric, run.records_digest()?.acceptance.totals()),
            ResolvedSource::Records,
        ),
        SourceChoice::Records => (
            records_cells(metric, run.records.as_ref()?),
            ResolvedSource::Records,
        ),
        // A speed_bench.py file's summary rows are per category.
        SourceChoice::Summary if run.speed_bench_py.is_some() => (
            run.speed_bench_py
                .as_ref()
                .map(|file| crate::category::speed_bench_py_cells(file, metric))
                .unwrap_or_default(),
            ResolvedSource::Summary,
        ),
        SourceChoice::Summary => {
            let summary = run.summary.as_ref()?;
            let value = match metric {
                MatrixMetric::AcceptLength => summary.accept_length,
                MatrixMetric::AcceptRate => summary.accept_rate,
                MatrixMetric::Throughput => summary.output_token_throughput,
                MatrixMetric::DecodeTps | MatrixMetric::Latency => None,
            };
            (single(run, value, false), ResolvedSource::Summary)
        }
        SourceChoice::Server => {
            let (v, w) = server::figure(run.server.as_ref()?, metric)?;
            (
                single(run, Some(v), w == Weighting::TimeAveragedGauge),
                ResolvedSource::Server(w),
            )
        }
        SourceChoice::Auto => return None,
    })
}

/// The cells of a run no source gave a value for: an AIPerf run (one
/// category per run directory) keeps its category's column, empty, and so
/// folds into its model's row, as `aiperf speed-bench-report` keeps a
/// category whose run has no value; any other run has none.
fn no_value_cells(run: &RunData) -> RunCells {
    if run.format != RunFormat::Aiperf {
        return RunCells::new();
    }
    let empty = Cell {
        value: None,
        requests: 0,
        time_averaged: false,
    };
    run_column(run)
        .map(|column| RunCells::from([(column, empty)]))
        .unwrap_or_default()
}

/// One report's matrix over loaded runs, and each run's resolved source
/// (in the order of `runs`).
///
/// One row per run, labelled by [`RunData::label`] (make labels unique
/// with [`assign_labels`](speedbench_runs::assign_labels) first); each row carries its run's directory,
/// status and request counts. A run that is not a SPEED-Bench run (an
/// AIPerf run of another dataset) keeps its row and cells but gets no
/// `Overall`, with the reason in [`RowRun::overall_excluded`].
///
/// Runs of one model whose columns do not overlap (AIPerf's scrape
/// workflow: one run per category, each in its own directory) fold into
/// one row labelled by the model, with an `Overall` over all their cells, as
/// `aiperf speed-bench-report` does; [`MatrixRow::folded`](crate::MatrixRow::folded) lists them. Where
/// any two runs of the model share a column (a baseline and a speculative
/// run of the same categories), every run keeps its own row.
pub fn build_matrix(
    metric: MatrixMetric,
    choice: SourceChoice,
    runs: &[RunData],
) -> (AcceptanceMatrix, Vec<ResolvedSource>) {
    let (cells, sources): (Vec<RunCells>, Vec<ResolvedSource>) = runs
        .iter()
        .map(|run| run_cells(run, metric, choice))
        .unzip();
    let groups = fold_groups(runs, &cells);
    let rows = groups
        .iter()
        .map(|group| {
            let mut merged = RunCells::new();
            for &i in group {
                merged.extend(cells[i].iter().map(|(k, c)| (k.clone(), *c)));
            }
            (group_label(runs, group), merged)
        })
        .collect();
    let mut matrix = AcceptanceMatrix::from_cells(metric, rows);
    let columns = matrix.columns.clone();
    for row in &mut matrix.rows {
        let Some(group) = groups.iter().find(|g| group_label(runs, g) == row.label) else {
            continue;
        };
        // The row's run: the first incomplete one, else the first.
        let shown = group
            .iter()
            .copied()
            .find(|&i| !runs[i].status.is_complete())
            .unwrap_or(group[0]);
        let run = &runs[shown];
        let overall_excluded = group
            .iter()
            .map(|&i| &runs[i])
            .find(|r| !r.speed_bench)
            .map(not_speed_bench);
        if overall_excluded.is_some() {
            row.overall = None;
        }
        if group.len() > 1 {
            row.folded = group.iter().map(|&i| runs[i].dir.clone()).collect();
        }
        if metric.is_acceptance() {
            let (positions, by_column) = group_positions(runs, group);
            row.positions = positions;
            row.column_positions = columns
                .iter()
                .map(|c| by_column.get(c).cloned().unwrap_or_default())
                .collect();
        }
        row.run = Some(row_run(run, group.len() == 1, overall_excluded));
    }
    (matrix, sources)
}

/// What a row says of its run (`counts` only for a row of one run).
fn row_run(run: &RunData, alone: bool, overall_excluded: Option<String>) -> RowRun {
    RowRun {
        dir: run.dir.clone(),
        model: run.model.clone(),
        status: run.status,
        status_reason: run.status_reason.clone(),
        counts: alone.then(|| run.counts()).flatten(),
        overall_excluded,
    }
}

/// A row's label: its run's, or, for runs folded into one row, their
/// model's.
fn group_label(runs: &[RunData], group: &[usize]) -> String {
    match group {
        [only] => runs[*only].label.clone(),
        _ => speedbench_runs::display_model(&runs[group[0]].model),
    }
}

/// Acceptance by draft position of a row's runs: from their records'
/// histograms, pooled; else, for a single run, from the per-position
/// counters of its server scrape (vLLM, llama.cpp).
fn group_positions(
    runs: &[RunData],
    group: &[usize],
) -> (Vec<f64>, std::collections::BTreeMap<String, Vec<f64>>) {
    let mut histograms = std::collections::BTreeMap::new();
    for digest in group.iter().filter_map(|&i| runs[i].records_digest()) {
        for (column, h) in digest.acceptance.histograms() {
            histograms
                .entry(column)
                .or_insert_with(speedbench_metrics::PooledHistogram::default)
                .add(&h.counts);
        }
    }
    let (positions, by_column) = crate::matrix::positions_of(&histograms);
    if !positions.is_empty() || group.len() > 1 {
        return (positions, by_column);
    }
    let from_server = runs[group[0]]
        .server
        .as_ref()
        .and_then(|s| {
            s.spec_decode()
                .into_iter()
                .find(|e| !e.per_position.is_empty())
        })
        .map(|e| e.per_position)
        .unwrap_or_default();
    (from_server, by_column)
}

/// Why a non-SPEED-Bench AIPerf run's row has no `Overall`.
fn not_speed_bench(run: &RunData) -> String {
    format!(
        "{} is an AIPerf run of {}, not a SPEED-Bench dataset, so its column is not a \
         SPEED-Bench category and is not averaged (AIPerf's speed-bench-report skips such runs)",
        run.dir.display(),
        if run.dataset.is_empty() {
            "an unnamed (synthetic) dataset".to_string()
        } else {
            format!("dataset {:?}", run.dataset)
        }
    )
}

/// The rows of a matrix as groups of run indices: the runs of one model
/// fold into one group when each has cells and no two share a column;
/// every other run is a group of its own. A run given its own label
/// (`--label`: a label that is not the model's) is never folded.
fn fold_groups(runs: &[RunData], cells: &[RunCells]) -> Vec<Vec<usize>> {
    let mut by_model: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let shown = speedbench_runs::display_model(&run.model);
        let own_label = !run.label.starts_with(&shown);
        match by_model.iter_mut().find(|(m, _)| *m == run.model) {
            Some((_, members)) if !own_label => members.push(i),
            _ if own_label => by_model.push((String::new(), vec![i])),
            _ => by_model.push((run.model.clone(), vec![i])),
        }
    }
    let mut groups = Vec::new();
    for (_, members) in by_model {
        let mut seen = std::collections::BTreeSet::new();
        let disjoint = members.len() > 1
            && members
                .iter()
                .all(|&i| !cells[i].is_empty() && cells[i].keys().all(|k| seen.insert(k.clone())));
        if disjoint {
            groups.push(members);
        } else {
            groups.extend(members.into_iter().map(|i| vec![i]));
        }
    }
    groups
}
