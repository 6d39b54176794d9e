//! Run directories: finding them, loading them, and choosing a source.
//!
//! A run directory is either speedbench's (`records.parquet`, with
//! `summary.json` and `server_metrics_export.json` beside it when present)
//! or AIPerf's (`profile_export_aiperf.json`, `profile_export.jsonl`,
//! `server_metrics_export.json`). Acceptance comes from the best source a
//! run offers, in AIPerf's order: per-request records, then the run summary,
//! then the server scrape.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde_json::Value;
use speedbench_metrics::RunMetrics;
use speedbench_record::{RECORDS_FILE_NAME, RequestRecord, read_records_file_with};

use crate::matrix::{Cell, MatrixMetric, RunCells, records_cells, strip_dataset_prefix};
use crate::server::{self, SERVER_METRICS_JSON, Weighting};
use crate::{ReportError, aiperf};

/// speedbench's run summary file (serialized [`RunMetrics`]).
pub const SUMMARY_JSON: &str = "summary.json";

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
        f.write_str(match self {
            ResolvedSource::Records => "records",
            ResolvedSource::Summary => "summary",
            ResolvedSource::Server(Weighting::TokenWeighted) => "server (counters, token-weighted)",
            ResolvedSource::Server(Weighting::TimeAveragedGauge) => {
                "server (gauges, time-averaged, not token-weighted)"
            }
            ResolvedSource::None => "none",
        })
    }
}

/// Which tool wrote a run directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFormat {
    /// speedbench (`records.parquet`).
    Speedbench,
    /// AIPerf (`profile_export_aiperf.json`).
    Aiperf,
}

/// Run-level numbers from a run's summary file.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RunSummary {
    /// Token-weighted acceptance length.
    pub accept_length: Option<f64>,
    /// Overall draft acceptance rate, as a fraction.
    pub accept_rate: Option<f64>,
    /// Output-token throughput, tokens/s.
    pub output_token_throughput: Option<f64>,
}

/// Everything a report can use from one run directory.
#[derive(Debug, Clone)]
pub struct RunData {
    /// The directory.
    pub dir: PathBuf,
    /// Who wrote it.
    pub format: RunFormat,
    /// Row label: the model.
    pub label: String,
    /// Dataset name (e.g. `speed_bench_coding`, or an input file stem).
    pub dataset: String,
    /// Per-request records, when the run has them.
    pub records: Option<Vec<RequestRecord>>,
    /// Run-level summary, when the run has one.
    pub summary: Option<RunSummary>,
    /// The server-metrics export, when the run has one.
    pub server: Option<Value>,
    /// Things worth telling the user (skipped lines and the like).
    pub warnings: Vec<String>,
}

fn is_run_dir(dir: &Path) -> bool {
    dir.join(RECORDS_FILE_NAME).is_file() || dir.join(aiperf::PROFILE_JSON).is_file()
}

/// Run directories among `paths`: each path that is one, else its immediate
/// children that are (in name order). Errors when a path is not a directory
/// or nothing is found.
pub fn find_run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReportError> {
    let mut dirs = Vec::new();
    for path in paths {
        if !path.is_dir() {
            return Err(ReportError::NotADirectory(path.clone()));
        }
        if is_run_dir(path) {
            dirs.push(path.clone());
            continue;
        }
        let entries = std::fs::read_dir(path).map_err(|source| ReportError::Io {
            path: path.clone(),
            source,
        })?;
        let mut children: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_run_dir(p))
            .collect();
        children.sort();
        dirs.extend(children);
    }
    if dirs.is_empty() {
        return Err(ReportError::NoRuns {
            paths: paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(dirs)
}

fn read_json(path: &Path) -> Result<Value, ReportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ReportError::Artifact {
        path: path.to_path_buf(),
        line: Some(e.line()),
        message: format!("not valid JSON: {e}"),
    })
}

fn optional_json(path: &Path) -> Result<Option<Value>, ReportError> {
    if path.is_file() {
        read_json(path).map(Some)
    } else {
        Ok(None)
    }
}

/// Loads one run directory of either format, every record column included.
pub fn load_run(dir: &Path) -> Result<RunData, ReportError> {
    load_run_for(dir, None)
}

/// Record columns a matrix of `metric` reads (besides the grouping keys).
fn columns_for(metric: MatrixMetric) -> &'static [&'static str] {
    const KEYS: [&str; 5] = ["category", "dataset", "warmup", "error_kind", "model"];
    const ACCEPTANCE: [&str; 9] = [
        KEYS[0],
        KEYS[1],
        KEYS[2],
        KEYS[3],
        KEYS[4],
        "spec_source",
        "spec_accepted_draft_tokens",
        "spec_proposed_draft_tokens",
        "spec_verify_steps",
    ];
    const LATENCY: [&str; 6] = [
        KEYS[0],
        KEYS[1],
        KEYS[2],
        KEYS[3],
        KEYS[4],
        "e2e_latency_ns",
    ];
    const DECODE: [&str; 9] = [
        KEYS[0],
        KEYS[1],
        KEYS[2],
        KEYS[3],
        KEYS[4],
        "e2e_latency_ns",
        "ttft_ns",
        "completion_tokens",
        "timings_predicted_per_second",
    ];
    const THROUGHPUT: [&str; 8] = [
        KEYS[0],
        KEYS[1],
        KEYS[2],
        KEYS[3],
        KEYS[4],
        "start_time",
        "end_time",
        "completion_tokens",
    ];
    match metric {
        MatrixMetric::AcceptLength | MatrixMetric::AcceptRate => &ACCEPTANCE,
        MatrixMetric::Latency => &LATENCY,
        MatrixMetric::DecodeTps => &DECODE,
        MatrixMetric::Throughput => &THROUGHPUT,
    }
}

/// Loads one run directory, decoding only the record columns `metric`
/// needs (all of them for `None`): a million-row matrix then skips the
/// output text and latency lists it never reads.
pub fn load_run_for(dir: &Path, metric: Option<MatrixMetric>) -> Result<RunData, ReportError> {
    let server = optional_json(&dir.join(SERVER_METRICS_JSON))?;
    if dir.join(RECORDS_FILE_NAME).is_file() {
        let file = read_records_file_with(dir.join(RECORDS_FILE_NAME), metric.map(columns_for))?;
        let manifest = file.manifest.unwrap_or_default();
        let summary = match optional_json(&dir.join(SUMMARY_JSON))? {
            None => None,
            Some(v) => {
                let metrics: RunMetrics =
                    serde_json::from_value(v).map_err(|e| ReportError::Artifact {
                        path: dir.join(SUMMARY_JSON),
                        line: None,
                        message: format!("not a speedbench run summary: {e}"),
                    })?;
                Some(RunSummary {
                    accept_length: metrics.spec_decode.token_weighted_acceptance_length(),
                    accept_rate: metrics
                        .spec_decode
                        .overall_draft_acceptance_rate_pct()
                        .map(|p| p / 100.0),
                    output_token_throughput: metrics.output_token_throughput,
                })
            }
        };
        let label = Some(manifest.model)
            .filter(|m| !m.is_empty())
            .or_else(|| file.records.first().map(|r| r.model.clone()))
            .unwrap_or_else(|| dir.display().to_string());
        let dataset = Some(manifest.dataset)
            .filter(|d| !d.is_empty())
            .or_else(|| file.records.first().map(|r| r.dataset.clone()))
            .unwrap_or_default();
        return Ok(RunData {
            dir: dir.to_path_buf(),
            format: RunFormat::Speedbench,
            label,
            dataset,
            records: Some(file.records),
            summary,
            server,
            warnings: Vec::new(),
        });
    }
    let profile_path = dir.join(aiperf::PROFILE_JSON);
    let profile = read_json(&profile_path)?;
    let label = aiperf::model(&profile).unwrap_or_else(|| "unknown".into());
    let dataset = aiperf::dataset(&profile).unwrap_or_default();
    let mut warnings = Vec::new();
    let records_path = dir.join(aiperf::PROFILE_JSONL);
    let records = if records_path.is_file() {
        let (records, skipped) = aiperf::read_records(&records_path, &label, &dataset)?;
        if skipped > 0 {
            warnings.push(format!(
                "{}: skipped {skipped} unreadable line(s)",
                records_path.display()
            ));
        }
        Some(records)
    } else {
        None
    };
    let summary = RunSummary {
        accept_length: aiperf::stat_avg(&profile, "spec_decode_token_weighted_acceptance_length"),
        accept_rate: aiperf::stat_avg(&profile, "spec_decode_overall_draft_acceptance_rate")
            .map(|p| p / 100.0),
        output_token_throughput: aiperf::stat_avg(&profile, "output_token_throughput"),
    };
    Ok(RunData {
        dir: dir.to_path_buf(),
        format: RunFormat::Aiperf,
        label,
        dataset,
        records,
        summary: Some(summary),
        server,
        warnings,
    })
}

impl RunData {
    /// The run's single column key for run-level sources: its only record
    /// category, else its dataset name without a `speed_bench_` /
    /// `spec_al_` prefix.
    pub fn run_column(&self) -> Option<String> {
        let from_records = self.records.as_ref().and_then(|records| {
            let mut cats = records
                .iter()
                .filter(|r| !r.warmup)
                .filter_map(|r| r.category.as_deref())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter();
            match (cats.next(), cats.next()) {
                (Some(only), None) => Some(only.to_string()),
                _ => None,
            }
        });
        from_records.or_else(|| {
            let name = strip_dataset_prefix(&self.dataset);
            (!name.is_empty()).then(|| name.to_string())
        })
    }

    /// Number of distinct categories among the run's measured records.
    pub fn category_count(&self) -> usize {
        self.records.as_ref().map_or(0, |records| {
            records
                .iter()
                .filter(|r| !r.warmup)
                .filter_map(|r| r.category.as_deref())
                .collect::<std::collections::BTreeSet<_>>()
                .len()
        })
    }

    fn single(&self, value: Option<f64>, time_averaged: bool) -> RunCells {
        match (self.run_column(), value) {
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
    pub fn cells(&self, metric: MatrixMetric, choice: SourceChoice) -> (RunCells, ResolvedSource) {
        let order: &[SourceChoice] = match choice {
            SourceChoice::Auto => &[
                SourceChoice::Records,
                SourceChoice::Summary,
                SourceChoice::Server,
            ],
            SourceChoice::Records => &[SourceChoice::Records],
            SourceChoice::Summary => &[SourceChoice::Summary],
            SourceChoice::Server => &[SourceChoice::Server],
        };
        for source in order {
            let (cells, resolved) = match source {
                SourceChoice::Records => match &self.records {
                    Some(records) => (records_cells(metric, records), ResolvedSource::Records),
                    None => continue,
                },
                SourceChoice::Summary => {
                    let Some(summary) = &self.summary else {
                        continue;
                    };
                    let value = match metric {
                        MatrixMetric::AcceptLength => summary.accept_length,
                        MatrixMetric::AcceptRate => summary.accept_rate,
                        MatrixMetric::Throughput => summary.output_token_throughput,
                        MatrixMetric::DecodeTps | MatrixMetric::Latency => None,
                    };
                    (self.single(value, false), ResolvedSource::Summary)
                }
                SourceChoice::Server => {
                    let Some(export) = &self.server else { continue };
                    let found = match metric {
                        MatrixMetric::AcceptLength => server::accept_length(export),
                        MatrixMetric::AcceptRate => server::accept_rate(export),
                        _ => None,
                    };
                    match found {
                        Some((v, w)) => (
                            self.single(Some(v), w == Weighting::TimeAveragedGauge),
                            ResolvedSource::Server(w),
                        ),
                        None => continue,
                    }
                }
                SourceChoice::Auto => continue,
            };
            if cells.values().any(|c| c.value.is_some()) {
                return (cells, resolved);
            }
        }
        (RunCells::new(), ResolvedSource::None)
    }
}
