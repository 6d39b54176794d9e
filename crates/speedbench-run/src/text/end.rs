//! What a run says when it ends: its figures' tables, its timing, where
//! every file went and what the server's own counters said.

use std::path::Path;

use speedbench_client::RunOutcome;
use speedbench_client::scrape::{Acceptance, ServerMetricsExport};
use speedbench_metrics::{RecordsDigest, RunMetrics, has_llamacpp_timings};
use speedbench_record::RequestRecord;
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, render_run_summary, render_speed_bench_py_records,
};

use crate::finished::{RunReport, RunResults};

use super::Text;
use super::progress::final_line;

/// The end of a run: start and schedule, the scrape, the summary tables,
/// the closing progress line and where every file went.
pub fn run_end(report: &RunReport) -> Vec<Text> {
    let outcome = &report.outcome;
    let mut out = timing_lines(outcome);
    if let Some(path) = &outcome.server_metrics_path {
        out.extend(server_metrics_lines(path).into_iter().map(Text::Err));
    }
    out.extend(
        outcome
            .write_errors
            .iter()
            .map(|e| Text::Err(format!("error: {e}"))),
    );
    out.extend(results(&report.results));
    if let Some(gpu) = &outcome.gpu_telemetry {
        out.push(Text::Out(speedbench_report::render_gpu_telemetry(gpu)));
    }
    if let Some(path) = &report.speed_bench_py {
        out.push(Text::Err(format!(
            "speed_bench.py JSON written to {}",
            path.display()
        )));
    }
    out.push(Text::Err(final_line(
        &report.progress,
        report.request_throughput(),
    )));
    out.extend(file_lines(report).into_iter().map(Text::Err));
    out
}

/// The summary tables, or why there are none.
fn results(results: &RunResults) -> Vec<Text> {
    match results {
        RunResults::Records {
            metrics,
            label,
            digest,
            held,
        } => tables(metrics, label, digest, held.as_deref()),
        RunResults::SummaryOnly { metrics, path } => vec![
            Text::Out(render_run_summary(metrics)),
            Text::Err(format!(
                "note: --export-level summary: the per-category matrices need the per-request \
                 records, which were not kept; `speedbench report` shows the run-level figures \
                 of {} and the server scrape",
                path.display()
            )),
        ],
        RunResults::Unreadable(e) => {
            vec![Text::Err(format!("error: reading the records back: {e}"))]
        }
        _ => Vec::new(),
    }
}

/// The shared start of a sharded run and the arrival schedule's lateness.
fn timing_lines(outcome: &RunOutcome) -> Vec<Text> {
    let mut out = Vec::new();
    if let Some(s) = &outcome.start {
        out.push(Text::Err(format!(
            "start ({}): planned {:.3}, measured {:.3} (offset {:+.3} ms)",
            s.barrier,
            s.planned_unix_ns as f64 / 1e9,
            s.measured_unix_ns as f64 / 1e9,
            s.offset_ns as f64 / 1e6
        )));
    }
    if let Some(s) = &outcome.schedule {
        out.push(Text::Err(format!(
            "schedule: {} arrivals, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            s.arrivals,
            s.lateness_p50_ns as f64 / 1e6,
            s.lateness_p99_ns as f64 / 1e6,
            s.lateness_max_ns as f64 / 1e6
        )));
    }
    out
}

/// The run summary and, where the records give them, the per-category
/// matrices (from their digest) and speed_bench.py's tables (from the
/// records, `held` for a run with llama.cpp's timings).
fn tables(
    metrics: &RunMetrics,
    label: &str,
    digest: &RecordsDigest,
    held: Option<&[RequestRecord]>,
) -> Vec<Text> {
    let mut out: Vec<Text> = metrics
        .timing_warnings
        .iter()
        .map(|w| Text::Err(format!("warning: {w}")))
        .collect();
    if let [only] = metrics.time_slices.as_slice()
        && !only.complete
    {
        out.push(Text::Err(format!(
            "warning: --slice-duration is longer than the run ({:.3} s): one partial slice",
            only.figures.end_s
        )));
    }
    out.push(Text::Out(render_run_summary(metrics)));
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        let matrix = AcceptanceMatrix::from_digests(metric, &[(label.to_string(), digest)]);
        if let Some(matrix) = matrix.filter(|m| m.rows.iter().any(|r| r.overall.is_some())) {
            out.push(Text::Out(matrix.to_console()));
        }
    }
    if let Some(records) = held.filter(|records| has_llamacpp_timings(records)) {
        out.push(Text::Out(render_speed_bench_py_records(records)));
    }
    out
}

/// Where the records, manifest, summary and raw responses are.
fn file_lines(report: &RunReport) -> Vec<String> {
    let outcome = &report.outcome;
    let mut out = Vec::new();
    if outcome.unsaved > 0 {
        out.push(format!(
            "{} finished requests could not be saved (the records file failed)",
            outcome.unsaved
        ));
    }
    let shown = &report.shown;
    if let Some(path) = &shown.raw_responses {
        out.push(format!("raw response bodies in {path}"));
    }
    if let Some(path) = &shown.http_trace {
        out.push(format!("HTTP traces in {path}"));
    }
    let kept = if outcome.records_removed {
        "summarised, not kept (--export-level summary), from"
    } else {
        "in"
    };
    out.push(format!(
        "{} records {kept} {} (manifest {}{})",
        outcome.record_count,
        shown.records,
        shown.manifest,
        shown
            .summary
            .as_ref()
            .map_or(String::new(), |p| format!(", summary {p}"))
    ));
    if let Some(path) = &outcome.gpu_telemetry_path {
        out.push(format!("GPU telemetry (DCGM scrape) in {}", path.display()));
    }
    out
}

/// The acceptance the server scrape gives: the figures `speedbench report
/// --source server` prints for the run.
fn server_metrics_lines(path: &Path) -> Vec<String> {
    let export = match ServerMetricsExport::read(path) {
        Ok(export) => export,
        Err(e) => return vec![format!("server metrics: {e}")],
    };
    if export.summary.endpoints_successful.is_empty() {
        return vec![format!(
            "server metrics: no endpoint answered (see {})",
            path.display()
        )];
    }
    let (length, rate) = (export.acceptance_length(), export.acceptance_rate());
    if length.is_none() && rate.is_none() {
        return Vec::new();
    }
    let f = |a: &Option<Acceptance>| {
        a.as_ref().map_or("-".to_string(), |a| {
            format!("{:.3} ({}, {})", a.value, a.metric, a.weighting)
        })
    };
    let mut out = vec![format!(
        "server metrics: acceptance length {}, acceptance rate {}",
        f(&length),
        f(&rate)
    )];
    out.extend(engine_lines(&export));
    out
}

/// llama-server's own figure beside speedbench's, and the acceptance by
/// draft position where an engine's counters give it.
pub(super) fn engine_lines(export: &ServerMetricsExport) -> Vec<String> {
    let mut out = Vec::new();
    // llama-server's own log divides by drafting steps only; speedbench's
    // figure counts every target pass (docs/engines.md): both, labelled.
    if let Some(length) = export
        .spec_decode()
        .into_iter()
        .find(|e| e.engine == "llamacpp")
        .and_then(|llama| llama.per_drafting_step_length())
    {
        out.push(format!(
            "server metrics: llama.cpp's own acceptance length (its log's, per drafting step: \
             1 + accepted / drafting steps) {length:.3}; speedbench's counts every target pass"
        ));
    }
    if let Some(engine) = export
        .spec_decode()
        .into_iter()
        .find(|e| !e.per_position.is_empty())
    {
        // Up to the last position anything was accepted at (an n-gram
        // drafter's budget may be 64, most of it never reached).
        let last = engine.per_position.iter().rposition(|p| *p > 0.0);
        let shown = last.map_or(0, |i| i + 1);
        let shares: Vec<String> = engine.per_position[..shown]
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}: {p:.3}", i + 1))
            .collect();
        let hidden = engine.per_position.len() - shown;
        let rest = match hidden {
            0 => String::new(),
            n => format!(" (positions {}-{}: 0)", shown + 1, shown + n),
        };
        // The acceptance length's own denominator (its full-budget sum).
        let over = match engine.steps.zip(engine.drafts) {
            Some((steps, drafts)) if steps != drafts => "target passes",
            _ => "drafts",
        };
        out.push(format!(
            "server metrics: acceptance by draft position ({} counters, accepted at position / {over}): {}{rest}",
            engine.engine,
            shares.join(", ")
        ));
    }
    out
}
