//! [`Console`]: a run's events on the terminal, as `speedbench profile`
//! prints them: progress on stderr, the summary tables on stdout.

use std::path::Path;
use std::sync::Arc;

use speedbench_client::scrape::{Acceptance, ServerMetricsExport};
use speedbench_client::{Engine, Preflight, Progress, RunOutcome};
use speedbench_dataset::PublicDataset;
use speedbench_metrics::{RunMetrics, has_llamacpp_timings};
use speedbench_record::RequestRecord;
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, render_run_summary, render_speed_bench_py_records,
};
use speedbench_run::{EngineSource, Observer, RunReport, RunResults};
use speedbench_store::{StoreUrl, UploadReport};

use crate::progress::{self, Display};

/// Prints a run's events; holds the progress display while it runs.
#[derive(Default)]
pub(crate) struct Console {
    display: Option<Display>,
}

impl Observer for Console {
    fn dataset_loaded(&mut self, loaded: &PublicDataset) {
        eprintln!("dataset {}", loaded_line(loaded));
    }

    fn rows_limited(&mut self, limit: usize, kept: usize, before: usize) {
        eprintln!(
            "--limit {limit}: {kept} of {before} rows kept (the first {limit} of each category)"
        );
    }

    fn staging(&mut self, url: &StoreUrl, dir: &Path) {
        eprintln!(
            "uploading to {url} (the run is staged in {})",
            dir.display()
        );
    }

    fn engine(&mut self, engine: Engine, source: &EngineSource) {
        match source {
            EngineSource::Named => eprintln!("engine: {engine} (--engine)"),
            EngineSource::Detected(evidence) => eprintln!("engine: {engine} ({evidence})"),
        }
    }

    fn preflight(&mut self, check: &Preflight) {
        print_preflight(check);
    }

    fn run_started(&mut self, progress: Arc<Progress>) {
        self.display = Some(progress::spawn(progress));
    }

    fn run_ended(&mut self) {
        if let Some(display) = self.display.take() {
            progress::finish(display);
        }
    }

    fn uploaded(&mut self, report: &UploadReport) {
        eprintln!("{}", speedbench_run::fetch::uploaded_line(report));
    }

    fn finished(&mut self, report: &RunReport) {
        print_report(report);
    }

    fn warning(&mut self, message: &str) {
        eprintln!("warning: {message}");
    }
}

/// A loaded public dataset in one line: its name, size and origin.
pub(crate) fn loaded_line(loaded: &PublicDataset) -> String {
    format!(
        "{}: {} conversations, {} turns, from {}",
        loaded.spec.name,
        loaded.dataset.conversations.len(),
        loaded.dataset.turn_count(),
        loaded.origin
    )
}

/// Whether per-request acceptance came back, and what to change when not.
fn print_preflight(check: &Preflight) {
    let engine = check.engine;
    match (&check.error, &check.acceptance) {
        (Some(error), _) => eprintln!("preflight: the request failed: {error}"),
        (None, Some(acceptance)) => eprintln!("preflight: per-request acceptance: {acceptance}"),
        (None, None) => {
            if let Some(dropped) = &check.dropped {
                eprintln!("preflight: the acceptance payload cannot be right: {dropped}");
            }
            eprintln!(
                "preflight: no per-request acceptance came back from {engine}: {}. The server \
                 scrape may still give run-level figures; --engine names another engine, \
                 --no-preflight skips this check",
                check.advice().unwrap_or_default()
            );
        }
    }
}

/// The end of a run: start and schedule, the scrape, the summary tables,
/// and where every file went.
fn print_report(report: &RunReport) {
    let outcome = &report.outcome;
    print_timing(outcome);
    if let Some(path) = &outcome.server_metrics_path {
        server_metrics_line(path);
    }
    for e in &outcome.write_errors {
        eprintln!("error: {e}");
    }
    match &report.results {
        RunResults::Records {
            metrics,
            label,
            records,
        } => print_tables(metrics, label, records),
        RunResults::SummaryOnly { metrics, path } => {
            print!("{}", render_run_summary(metrics));
            eprintln!(
                "note: --export-level summary: the per-category matrices need the per-request \
                 records, which were not kept; `speedbench report` shows the run-level figures \
                 of {} and the server scrape",
                path.display()
            );
        }
        RunResults::Unreadable(e) => eprintln!("error: reading the records back: {e}"),
        _ => {}
    }
    if let Some(path) = &report.speed_bench_py {
        eprintln!("speed_bench.py JSON written to {}", path.display());
    }
    eprintln!(
        "{}",
        progress::final_line(&report.progress, report.request_throughput())
    );
    print_files(report);
}

/// The shared start of a sharded run and the arrival schedule's lateness.
fn print_timing(outcome: &RunOutcome) {
    if let Some(s) = &outcome.start {
        eprintln!(
            "start ({}): planned {:.3}, measured {:.3} (offset {:+.3} ms)",
            s.barrier,
            s.planned_unix_ns as f64 / 1e9,
            s.measured_unix_ns as f64 / 1e9,
            s.offset_ns as f64 / 1e6
        );
    }
    if let Some(s) = &outcome.schedule {
        eprintln!(
            "schedule: {} arrivals, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            s.arrivals,
            s.lateness_p50_ns as f64 / 1e6,
            s.lateness_p99_ns as f64 / 1e6,
            s.lateness_max_ns as f64 / 1e6
        );
    }
}

/// The run summary and, where the records give them, the per-category
/// matrices and speed_bench.py's tables.
fn print_tables(metrics: &RunMetrics, label: &str, records: &[RequestRecord]) {
    for warning in &metrics.timing_warnings {
        eprintln!("warning: {warning}");
    }
    print!("{}", render_run_summary(metrics));
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        let matrix = AcceptanceMatrix::from_runs(metric, &[(label.to_string(), records)]);
        if matrix.rows.iter().any(|r| r.overall.is_some()) {
            print!("{}", matrix.to_console());
        }
    }
    if has_llamacpp_timings(records) {
        print!("{}", render_speed_bench_py_records(records));
    }
}

/// Where the records, manifest, summary and raw responses are.
fn print_files(report: &RunReport) {
    let outcome = &report.outcome;
    if outcome.unsaved > 0 {
        eprintln!(
            "{} finished requests could not be saved (the records file failed)",
            outcome.unsaved
        );
    }
    let shown = &report.shown;
    if let Some(path) = &shown.raw_responses {
        eprintln!("raw response bodies in {path}");
    }
    let kept = if outcome.records_removed {
        "summarised, not kept (--export-level summary), from"
    } else {
        "in"
    };
    eprintln!(
        "{} records {kept} {} (manifest {}{})",
        outcome.record_count,
        shown.records,
        shown.manifest,
        shown
            .summary
            .as_ref()
            .map_or(String::new(), |p| format!(", summary {p}"))
    );
}

/// One stderr line with the acceptance the server scrape gives: the
/// figures `speedbench report --source server` prints for the run.
fn server_metrics_line(path: &Path) {
    let export = match ServerMetricsExport::read(path) {
        Ok(export) => export,
        Err(e) => {
            eprintln!("server metrics: {e}");
            return;
        }
    };
    if export.summary.endpoints_successful.is_empty() {
        eprintln!(
            "server metrics: no endpoint answered (see {})",
            path.display()
        );
        return;
    }
    let (length, rate) = (export.acceptance_length(), export.acceptance_rate());
    if length.is_none() && rate.is_none() {
        return;
    }
    let f = |a: &Option<Acceptance>| {
        a.as_ref().map_or("-".to_string(), |a| {
            format!("{:.3} ({}, {})", a.value, a.metric, a.weighting)
        })
    };
    eprintln!(
        "server metrics: acceptance length {}, acceptance rate {}",
        f(&length),
        f(&rate)
    );
    engine_lines(&export);
}

/// llama-server's own figure beside speedbench's, and the acceptance by
/// draft position where an engine's counters give it.
fn engine_lines(export: &ServerMetricsExport) {
    // llama-server's own log divides by drafting steps only; speedbench's
    // figure counts every target pass (docs/engines.md): both, labelled.
    if let Some(length) = export
        .spec_decode()
        .into_iter()
        .find(|e| e.engine == "llamacpp")
        .and_then(|llama| llama.per_drafting_step_length())
    {
        eprintln!(
            "server metrics: llama.cpp's own acceptance length (its log's, per drafting step: \
             1 + accepted / drafting steps) {length:.3}; speedbench's counts every target pass"
        );
    }
    if let Some(engine) = export
        .spec_decode()
        .into_iter()
        .find(|e| !e.per_position.is_empty())
    {
        let shares: Vec<String> = engine
            .per_position
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}: {p:.3}", i + 1))
            .collect();
        eprintln!(
            "server metrics: acceptance by draft position ({} counters, accepted at position / drafts): {}",
            engine.engine,
            shares.join(", ")
        );
    }
}
