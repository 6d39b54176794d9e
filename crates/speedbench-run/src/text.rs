//! What a run says as it goes and when it ends, as text: the lines
//! `speedbench` prints (progress, the preflight, the summary tables, where
//! every file went), for any front end that shows a run. An [`Observer`]
//! prints them; a front end of its own may print them differently or not.
//!
//! [`Observer`]: crate::Observer

use std::path::Path;
use std::time::Duration;

use speedbench_client::scrape::{Acceptance, ServerMetricsExport};
use speedbench_client::{Preflight, Progress, RunOutcome};
use speedbench_dataset::PublicDataset;
use speedbench_metrics::{RunMetrics, has_llamacpp_timings};
use speedbench_record::RequestRecord;
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, render_run_summary, render_speed_bench_py_records,
};

use crate::finished::{RunReport, RunResults};

/// One piece of a run's text and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// Results (tables): stdout, as written (newlines included).
    Out(String),
    /// Progress and what happened: stderr, one line.
    Err(String),
}

impl Text {
    /// Writes it where it goes: stdout as is, stderr as a line.
    pub fn print(&self) {
        match self {
            Text::Out(text) => print!("{text}"),
            Text::Err(line) => eprintln!("{line}"),
        }
    }
}

/// A loaded public dataset in one line: its name, size and origin.
pub fn loaded_line(loaded: &PublicDataset) -> String {
    format!(
        "{}: {} conversations, {} turns, from {}",
        loaded.spec.name,
        loaded.dataset.conversations.len(),
        loaded.dataset.turn_count(),
        loaded.origin
    )
}

/// `--limit N` kept `kept` of `before` rows.
pub fn limited_line(limit: usize, kept: usize, before: usize) -> String {
    format!("--limit {limit}: {kept} of {before} rows kept (the first {limit} of each category)")
}

/// A run staged in `dir` for the store `url`.
pub fn staging_line(url: &crate::StoreUrl, dir: &Path) -> String {
    format!(
        "uploading to {url} (the run is staged in {})",
        dir.display()
    )
}

/// The engine, and how it became known.
pub fn engine_line(engine: speedbench_client::Engine, source: &crate::EngineSource) -> String {
    match source {
        crate::EngineSource::Named => format!("engine: {engine} (--engine)"),
        crate::EngineSource::Detected(evidence) => format!("engine: {engine} ({evidence})"),
    }
}

/// The sampling fields every request carries, said before the first one,
/// so that nobody benchmarks sampled, uncapped decoding by accident:
/// `max_tokens` (`--osl`) and every `--extra-inputs` field, or what the
/// server decides when one is missing.
///
/// ```
/// use serde_json::json;
/// use speedbench_run::text::sampling_line;
///
/// let fields = json!({"temperature": 0, "top_p": 1}).as_object().unwrap().clone();
/// assert_eq!(
///     sampling_line(Some(4096), &fields),
///     "sampling: max_tokens 4096 (--osl), temperature 0, top_p 1 (--extra-inputs)"
/// );
/// assert_eq!(
///     sampling_line(None, &Default::default()),
///     "sampling: max_tokens not sent (each answer runs as long as the server allows; --osl \
///      caps it), temperature not sent (the server's default, usually sampled decoding; \
///      --extra-inputs temperature:0 for greedy)"
/// );
/// ```
pub fn sampling_line(
    max_tokens: Option<u32>,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let cap = match max_tokens {
        Some(n) => format!("max_tokens {n} (--osl)"),
        None => {
            "max_tokens not sent (each answer runs as long as the server allows; --osl caps it)"
                .to_string()
        }
    };
    let mut parts = vec![cap];
    if !fields.is_empty() {
        let list: Vec<String> = fields.iter().map(|(k, v)| format!("{k} {v}")).collect();
        parts.push(format!("{} (--extra-inputs)", list.join(", ")));
    }
    if !fields.contains_key("temperature") {
        parts.push(
            "temperature not sent (the server's default, usually sampled decoding; \
             --extra-inputs temperature:0 for greedy)"
                .to_string(),
        );
    }
    format!("sampling: {}", parts.join(", "))
}

/// Whether per-request acceptance came back, and what to change when not.
pub fn preflight_lines(check: &Preflight) -> Vec<String> {
    let engine = check.engine;
    match (&check.error, &check.acceptance) {
        (Some(error), _) => vec![format!("preflight: the request failed: {error}")],
        (None, Some(acceptance)) => {
            vec![format!("preflight: per-request acceptance: {acceptance}")]
        }
        (None, None) => {
            let mut lines = Vec::new();
            if let Some(dropped) = &check.dropped {
                lines.push(format!(
                    "preflight: the acceptance payload cannot be right: {dropped}"
                ));
            }
            lines.push(format!(
                "preflight: no per-request acceptance came back from {engine}: {}. The server \
                 scrape may still give run-level figures; --engine names another engine, \
                 --no-preflight skips this check",
                check.advice().unwrap_or_default()
            ));
            lines
        }
    }
}

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
            records,
        } => tables(metrics, label, records),
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
/// matrices and speed_bench.py's tables.
fn tables(metrics: &RunMetrics, label: &str, records: &[RequestRecord]) -> Vec<Text> {
    let mut out: Vec<Text> = metrics
        .timing_warnings
        .iter()
        .map(|w| Text::Err(format!("warning: {w}")))
        .collect();
    out.push(Text::Out(render_run_summary(metrics)));
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        let matrix = AcceptanceMatrix::from_runs(metric, &[(label.to_string(), records)]);
        if matrix.rows.iter().any(|r| r.overall.is_some()) {
            out.push(Text::Out(matrix.to_console()));
        }
    }
    if has_llamacpp_timings(records) {
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
fn engine_lines(export: &ServerMetricsExport) -> Vec<String> {
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

/// What the display says while the run waits for its shared start.
const WAITING: &str = "waiting for the start (--start-at or --start-after-barrier)";

/// A run's rate and failures while it runs (or that it waits for its
/// start): the message beside a progress bar.
pub fn rate_and_errors(p: &Progress, elapsed: Duration) -> String {
    if p.waiting_for_start() {
        return WAITING.to_string();
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    let warm = if p.warmup_done() > 0 {
        format!(" (+{} warmup)", p.warmup_done())
    } else {
        String::new()
    };
    let skipped = match p.skipped() {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    format!(
        "{:.1} req/s, {} failed{skipped}{warm}",
        (p.done() + p.warmup_done()) as f64 / secs,
        p.failed()
    )
}

/// The line that closes a run's progress: its counts, and the request
/// throughput the summary table prints (successful requests over the
/// benchmark window), so the two never disagree.
pub fn final_line(p: &Progress, request_throughput: Option<f64>) -> String {
    let total = match p.planned() {
        0 => "?".to_string(),
        n => n.to_string(),
    };
    let rate = request_throughput.map_or("? req/s".to_string(), |r| format!("{r:.2} req/s"));
    let skipped = match p.skipped() {
        0 => String::new(),
        n => format!(", {n} skipped"),
    };
    let warm = match p.warmup_done() {
        0 => String::new(),
        n => format!(" (+{n} warmup)"),
    };
    format!(
        "profiled: {}/{total} requests, {rate} (request throughput), {} failed{skipped}{warm}",
        p.done(),
        p.failed()
    )
}

/// A run's progress in one line, for a log: done of planned, rate,
/// failures, time.
pub fn progress_line(p: &Progress, elapsed: Duration) -> String {
    let total = match p.planned() {
        0 => "?".to_string(),
        n => n.to_string(),
    };
    format!(
        "profiling: {}/{total} requests, {}, {:.0}s",
        p.done(),
        rate_and_errors(p, elapsed),
        elapsed.as_secs_f64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_position_line_stops_at_the_last_position_reached_and_names_its_denominator() {
        // An ngram-mod llama-server: 12 accepted at position 1, 6 at 2,
        // none past it of a budget of 5, over 81 - 18 = 63 target passes.
        let counter = |total: f64| serde_json::json!({"type": "counter", "series": [{"stats": {"total": total}}]});
        let positions: Vec<serde_json::Value> = [12.0, 6.0, 0.0, 0.0, 0.0]
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"labels": {"position": i.to_string()}, "stats": {"total": t}}))
            .collect();
        let export = ServerMetricsExport::from_json(
            &serde_json::json!({"metrics": {
                "llamacpp:spec_decode_num_accepted_tokens": counter(18.0),
                "llamacpp:spec_decode_num_draft_tokens": counter(60.0),
                "llamacpp:spec_decode_num_drafts": counter(12.0),
                "llamacpp:tokens_predicted": counter(81.0),
                "llamacpp:spec_decode_num_accepted_tokens_per_pos":
                    {"type": "counter", "series": positions}}})
            .to_string(),
        )
        .unwrap();
        let lines = engine_lines(&export);
        let line = lines
            .iter()
            .find(|l| l.contains("by draft position"))
            .unwrap();
        assert_eq!(
            line,
            &format!(
                "server metrics: acceptance by draft position (llamacpp counters, accepted at \
                 position / target passes): 1: {:.3}, 2: {:.3} (positions 3-5: 0)",
                12.0 / 63.0,
                6.0 / 63.0
            )
        );
    }

    #[test]
    fn the_final_line_shows_the_tables_throughput() {
        let p = Progress::default();
        assert_eq!(
            final_line(&p, Some(65.8)),
            "profiled: 0/? requests, 65.80 req/s (request throughput), 0 failed"
        );
        assert_eq!(
            final_line(&p, None),
            "profiled: 0/? requests, ? req/s (request throughput), 0 failed"
        );
    }

    #[test]
    fn a_run_waiting_for_its_start_says_so() {
        let p = Progress::default();
        p.set_waiting_for_start(true);
        assert_eq!(
            progress_line(&p, Duration::from_secs(7)),
            "profiling: 0/? requests, waiting for the start (--start-at or \
             --start-after-barrier), 7s"
        );
    }

    #[test]
    fn the_plain_line_shows_done_total_rate_and_failures() {
        let p = Progress::default();
        let l = progress_line(&p, Duration::from_secs(2));
        assert_eq!(l, "profiling: 0/? requests, 0.0 req/s, 0 failed, 2s");
    }
}
