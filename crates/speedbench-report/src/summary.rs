//! The end-of-run console summary (AIPerf's "LLM Metrics" tables).

use speedbench_metrics::{
    HttpTraceMetrics, ITERATION_LABEL, PerPass, PooledHistogram, RequestCounts, RunMetrics,
    ServerTimingMetrics, SpecDecodeMetrics, Summary,
};

use crate::figures;
use crate::format::{count_of, thousands};
use crate::table::{FirstColumn, titled_table};

/// The columns of every metric table, as AIPerf prints them.
const HEADER: [&str; 8] = ["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"];

/// Renders the console summary of one run.
///
/// Sections, separated by blank lines, each present only when it has data:
///
/// 1. `speedbench | LLM Metrics`: per-request distributions (TTFT, ITL,
///    inter-chunk latency, request latency, output/input sequence length,
///    per-user output throughput) with `avg min max p99 p90 p50 std`
///    columns, then the run-level Output Token Throughput, Request
///    Throughput and Request Count (successful requests) with `N/A` in the
///    distribution columns, as AIPerf prints them;
/// 2. `speedbench | LLM Metrics: Spec Decode` when any measured request
///    carried spec-decode stats, followed by
///    [`ACCEPTANCE_LENGTH_DEFINITIONS`], the pooled
///    `Accepted drafts per step (% of steps)` line and a note on zero-step
///    requests and requests without spec stats;
/// 3. `speedbench | LLM Metrics: Server Timings` (llama.cpp `timings`),
///    and `speedbench | HTTP Trace Timing` when the run asked for its
///    requests' HTTP phases (`--show-trace-timing`);
/// 4. with the figures the run asked for: the goodput line under the
///    first table (and its `Goodput (requests/sec)` row), the steady
///    state's table (or why there is none) and the time slices' table;
/// 5. `Errors: …` when any non-warmup request failed.
///
/// Rows without data are left out rather than printed empty. Numbers use
/// AIPerf's format: thousands separators and 2 decimals (`4,963.79`).
pub fn render_run_summary(metrics: &RunMetrics) -> String {
    let mut sections = vec![llm_metrics(metrics)];
    sections.extend(metrics.goodput.as_ref().map(figures::goodput_line));
    sections.extend(spec_decode(&metrics.spec_decode));
    sections.extend(server_timings(&metrics.server_timings));
    sections.extend(metrics.http_trace.as_ref().map(http_trace));
    sections.extend(
        (metrics.steady_state.as_ref())
            .map(|s| figures::steady_state(s, metrics.benchmark_duration_s)),
    );
    sections.extend(figures::time_slices(&metrics.time_slices));
    sections.extend(figures::models(&metrics.by_model));
    sections.extend(errors(&metrics.counts));
    sections.join("\n")
}

/// The value of one table row.
enum Value {
    /// A per-request distribution: all seven columns.
    Dist(Option<Summary>),
    /// A run-level number: `avg` only, `N/A` elsewhere (as AIPerf).
    Scalar(Option<f64>),
}
use Value::{Dist, Scalar};

/// Table rows of the candidates that have a value, in order.
fn table_rows(candidates: &[(&str, Value)]) -> Vec<Vec<String>> {
    candidates
        .iter()
        .filter_map(|(label, value)| {
            let cells: Vec<String> = match value {
                Dist(s) => {
                    let s = s.as_ref()?;
                    [s.avg, s.min, s.max, s.p99, s.p90, s.p50, s.std]
                        .iter()
                        .map(|&v| thousands(v))
                        .collect()
                }
                Scalar(v) => std::iter::once(thousands((*v)?))
                    .chain(std::iter::repeat_n("N/A".to_string(), HEADER.len() - 2))
                    .collect(),
            };
            Some(std::iter::once(label.to_string()).chain(cells).collect())
        })
        .collect()
}

fn llm_metrics(m: &RunMetrics) -> String {
    let rows = table_rows(&[
        ("Time to First Token (ms)", Dist(m.ttft_ms)),
        ("Inter Token Latency (ms)", Dist(m.inter_token_latency_ms)),
        ("Inter Chunk Latency (ms)", Dist(m.inter_chunk_latency_ms)),
        ("Request Latency (ms)", Dist(m.request_latency_ms)),
        (
            "Output Sequence Length (tokens)",
            Dist(m.output_sequence_length),
        ),
        (
            "Input Sequence Length (tokens)",
            Dist(m.input_sequence_length),
        ),
        (
            "Output Token Throughput Per User (tokens/sec/user)",
            Dist(m.output_token_throughput_per_user),
        ),
        (
            "Output Token Throughput (tokens/sec)",
            Scalar(m.output_token_throughput),
        ),
        (
            "Request Throughput (requests/sec)",
            Scalar(m.request_throughput),
        ),
        (
            "Request Count (requests)",
            Scalar(Some(m.counts.succeeded as f64)),
        ),
        (
            "Goodput (requests/sec)",
            Scalar(m.goodput.as_ref().and_then(|g| g.goodput)),
        ),
    ]);
    titled_table(
        "speedbench | LLM Metrics",
        &HEADER,
        &rows,
        FirstColumn::Right,
    )
}

fn spec_decode(spec: &SpecDecodeMetrics) -> Option<String> {
    if spec.totals.requests == 0 && spec.totals.dropped_requests == 0 {
        return None;
    }
    // AIPerf's row order.
    let rows = table_rows(&[
        ("Acceptance Length (ratio)", Dist(spec.acceptance_length)),
        (
            "Token-Weighted Acceptance Length (ratio)",
            Scalar(spec.token_weighted_acceptance_length()),
        ),
        (
            "Draft Acceptance Rate (%)",
            Dist(spec.draft_acceptance_rate_pct),
        ),
        (
            "Overall Draft Acceptance Rate (%)",
            Scalar(spec.overall_draft_acceptance_rate_pct()),
        ),
        (
            "Accepted per Verified (ratio)",
            Dist(spec.accepted_per_verified),
        ),
        ("Spec Decode Steps (count)", Dist(spec.spec_decode_steps)),
    ]);
    let mut out = String::new();
    if !rows.is_empty() {
        out.push_str(&titled_table(
            "speedbench | LLM Metrics: Spec Decode",
            &HEADER,
            &rows,
            FirstColumn::Right,
        ));
    }
    if spec.acceptance_length.is_some() || spec.token_weighted_acceptance_length().is_some() {
        out.push_str(ACCEPTANCE_LENGTH_DEFINITIONS);
    }
    if let Some(line) = histogram_line(&spec.histogram, spec.totals.requests) {
        out.push_str(&line);
        out.push_str(&position_lines(&spec.histogram));
    }
    if let Some(line) = not_counted_line(spec) {
        out.push_str(&line);
    }
    (!out.is_empty()).then_some(out)
}

/// What each acceptance length printed for a run is (docs/metrics.md): the
/// per-request distribution, the token-weighted run figure, and the
/// matrices' `Overall`.
pub const ACCEPTANCE_LENGTH_DEFINITIONS: &str = "  Acceptance length, three ways: \
\"Acceptance Length\" avg = mean over requests of each request's 1 + accepted / steps; \
\"Token-Weighted\" = 1 + Σaccepted / Σsteps over all requests (the run's figure); \
a report's \"Overall\" = macro-average, the unweighted mean of its category cells\n";

/// AIPerf's `  Accepted drafts per step (% of steps):  0: 22%   1: 26% ...`
/// (percent rounded to integers, as AIPerf does), followed by how many steps
/// and requests the pooled histogram covers.
fn histogram_line(h: &PooledHistogram, spec_requests: u64) -> Option<String> {
    let pct = h.percentages();
    if pct.is_empty() {
        return None;
    }
    let buckets = histogram_buckets(&pct);
    let steps = count_of(h.total_steps(), "step");
    let coverage = if h.requests < spec_requests {
        format!("{} of {spec_requests} requests with histograms", h.requests)
    } else {
        format!("{} with histograms", count_of(h.requests, "request"))
    };
    Some(format!(
        "  Accepted drafts per step (% of steps):  {}   ({steps}, {coverage})\n",
        buckets.join("   ")
    ))
}

/// The histogram's buckets as AIPerf's console prints them: `j: p%` for
/// each bucket, with every bucket from [`HISTOGRAM_CONSOLE_CAP`] on folded
/// into one `>=8: p%` (AIPerf's `SPEC_DECODE_HISTOGRAM_CONSOLE_CAP`).
fn histogram_buckets(pct: &[f64]) -> Vec<String> {
    if pct.len() <= HISTOGRAM_CONSOLE_CAP {
        return pct
            .iter()
            .enumerate()
            .map(|(j, p)| format!("{j}: {p:.0}%"))
            .collect();
    }
    let (shown, folded) = pct.split_at(HISTOGRAM_CONSOLE_CAP);
    let mut out: Vec<String> = shown
        .iter()
        .enumerate()
        .map(|(j, p)| format!("{j}: {p:.0}%"))
        .collect();
    let rest: f64 = folded.iter().sum();
    out.push(format!(">={HISTOGRAM_CONSOLE_CAP}: {rest:.0}%"));
    out
}

/// Where acceptance falls off along the draft, from the same histogram:
/// the share of steps accepting at least `i` drafts per position `i`, and
/// the acceptance length each smaller draft budget would have given.
fn position_lines(h: &PooledHistogram) -> String {
    let at_least = h.position_acceptance();
    if at_least.len() < 2 {
        return String::new();
    }
    let positions: Vec<String> = at_least
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}: {:.0}%", i + 1, p * 100.0))
        .collect();
    let budgets: Vec<String> = h
        .length_at_budgets()
        .iter()
        .enumerate()
        .map(|(i, l)| format!("k={}: {l:.2}", i + 1))
        .collect();
    format!(
        "  Steps accepting at least i drafts (acceptance by draft position):  {}\n  \
         Acceptance length had the draft budget been k (upper bound: the same drafts, cut at k):  {}\n",
        positions.join("   "),
        budgets.join("   ")
    )
}

/// Buckets of the console histogram line before the rest fold into one.
const HISTOGRAM_CONSOLE_CAP: usize = 8;

/// Which measured requests the per-request spec distributions do not cover.
fn not_counted_line(spec: &SpecDecodeMetrics) -> Option<String> {
    let mut parts = Vec::new();
    let zero_step_left_out = spec.zero_step_requests - spec.zero_step_in_distributions;
    if zero_step_left_out > 0 {
        parts.push(format!(
            "{} with zero verify steps (no per-request values)",
            count_of(zero_step_left_out, "request")
        ));
    }
    if spec.requests_without_spec > 0 {
        parts.push(format!(
            "{} without spec-decode stats",
            count_of(spec.requests_without_spec, "request")
        ));
    }
    if spec.totals.dropped_requests > 0 {
        parts.push(format!(
            "{} whose acceptance payload could not be right (dropped from every acceptance figure: see spec_dropped)",
            count_of(spec.totals.dropped_requests, "request")
        ));
    }
    let mut out = String::new();
    if !parts.is_empty() {
        out.push_str(&format!(
            "  Not in the distributions: {}\n",
            parts.join("; ")
        ));
    }
    if let Some(line) = per_pass_line(&spec.per_pass) {
        out.push_str(&line);
    }
    if spec.zero_step_in_distributions > 0 {
        out.push_str(&format!(
            "  Drafted nothing (zero verify steps): {}, in the per-request distributions at vLLM's own figures (acceptance length 1, draft acceptance rate 0%, 0 steps), as AIPerf counts them\n",
            count_of(spec.zero_step_in_distributions, "request")
        ));
    }
    if spec.totals.iteration_requests > 0 {
        out.push_str(&format!(
            "  Acceptance length of {} is {}\n",
            count_of(spec.totals.iteration_requests, "request"),
            ITERATION_LABEL
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// vLLM's acceptance length per target pass beside its own (per drafting
/// step), when some decode passes drafted nothing.
fn per_pass_line(p: &PerPass) -> Option<String> {
    if p.passes_left_out() == 0 {
        return None;
    }
    let length = p.length()?;
    Some(format!(
        "  Per target pass: {length:.2} tokens ({} over {} passes, drafting or not); vLLM's own acceptance length counts only its {} drafting steps ({} decode passes drafted nothing)\n",
        p.tokens,
        p.passes(),
        p.engine_steps,
        p.passes_left_out()
    ))
}

fn server_timings(t: &ServerTimingMetrics) -> Option<String> {
    let rows = table_rows(&[
        ("Prompt Processing (tokens/sec)", Dist(t.prompt_tps)),
        ("Decode (tokens/sec)", Dist(t.decode_tps)),
    ]);
    if rows.is_empty() {
        return None;
    }
    let table = titled_table(
        "speedbench | LLM Metrics: Server Timings",
        &HEADER,
        &rows,
        FirstColumn::Right,
    );
    Some(format!(
        "{table}  Server-reported speeds (llama.cpp timings) of {}; avg is the unweighted mean per request\n",
        count_of(t.requests, "request")
    ))
}

/// AIPerf's HTTP Trace Timing table, its rows in AIPerf's display order.
fn http_trace(t: &HttpTraceMetrics) -> String {
    let rows = table_rows(&[
        ("HTTP Blocked (ms)", Dist(t.blocked_ms)),
        ("HTTP DNS Lookup (ms)", Dist(t.dns_lookup_ms)),
        ("HTTP Connecting (ms)", Dist(t.connecting_ms)),
        ("HTTP Sending (ms)", Dist(t.sending_ms)),
        ("HTTP Waiting (TTFB) (ms)", Dist(t.waiting_ms)),
        ("HTTP Receiving (ms)", Dist(t.receiving_ms)),
        ("HTTP Connection Reused (ratio)", Dist(t.connection_reused)),
        ("HTTP Data Sent (KB)", Dist(t.data_sent_kb)),
        ("HTTP Chunks Sent (count)", Dist(t.chunks_sent)),
        ("HTTP Data Received (KB)", Dist(t.data_received_kb)),
        ("HTTP Chunks Received (count)", Dist(t.chunks_received)),
        (
            "HTTP Connection Overhead (ms)",
            Dist(t.connection_overhead_ms),
        ),
        ("HTTP Duration (excl. conn) (ms)", Dist(t.duration_ms)),
        ("HTTP Total Time (ms)", Dist(t.total_ms)),
    ]);
    let table = titled_table(
        "speedbench | HTTP Trace Timing",
        &HEADER,
        &rows,
        FirstColumn::Right,
    );
    let mut out = format!(
        "{table}  HTTP phases of {} as the client's sockets saw them; KB of 1,024 bytes\n",
        count_of(t.requests, "request")
    );
    if t.without_phases > 0 {
        out.push_str(&format!(
            "  {} sent over TLS or hyper's client (--http-client hyper) carry no phases and are not in this table\n",
            count_of(t.without_phases, "request")
        ));
    }
    out
}

/// `Errors: 3 of 120 requests failed (timeout: 2, connection: 1); statistics
/// exclude them`, kinds by descending count; then the skipped turns and the
/// requests written twice, each when there are any.
fn errors(c: &RequestCounts) -> Option<String> {
    let mut out = String::new();
    if c.failed > 0 {
        let mut kinds = c.failed_by_kind.clone();
        kinds.sort_by_key(|e| std::cmp::Reverse(e.count)); // stable: ties keep ErrorKind::ALL order
        let kinds: Vec<String> = kinds
            .iter()
            .map(|e| format!("{}: {}", e.kind.as_str(), e.count))
            .collect();
        let measured = c.succeeded + c.failed;
        out.push_str(&format!(
            "Errors: {} of {} failed ({}); statistics exclude them\n",
            c.failed,
            count_of(measured, "request"),
            kinds.join(", "),
        ));
        if let Some(m) = c.first_error.as_deref() {
            out.push_str(&format!(
                "First error: {}\n",
                first_line(m, FIRST_ERROR_CHARS)
            ));
        }
    }
    if c.skipped > 0 {
        // Each skipped record says why; the first reason stands for them.
        let why = match (c.first_skip_reason.as_deref(), c.skipped) {
            (Some(reason), 1) => format!(" ({reason})"),
            (Some(reason), _) => {
                format!(" (the first: {reason}; each record's error_message says why)")
            }
            (None, _) => String::new(),
        };
        out.push_str(&format!(
            "Skipped: {} never sent{why}\n",
            count_of(c.skipped, "turn")
        ));
    }
    if c.client_cancelled > 0 {
        out.push_str(&format!(
            "Cancelled on purpose: {} (--request-cancellation-rate); not failures, out of every latency figure\n",
            count_of(c.client_cancelled, "request")
        ));
    }
    if c.resent > 0 {
        out.push_str(&format!(
            "Sent twice: {} written again on a new connection after the server reset a kept-alive one without reading it; timed from the first write (column `resends`)\n",
            count_of(c.resent, "request")
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// The most characters of the first error's message a summary shows.
const FIRST_ERROR_CHARS: usize = 300;

/// The first line of `text`, at most `max` characters (`...` when cut).
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    match line.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ErrorKind, RequestRecord, ServerTimings, SpecDecodeStats};

    const MS: u64 = 1_000_000;
    const S: i64 = 1_000_000_000;

    /// A successful streamed request; times in s (wall clock) and ms.
    #[allow(clippy::too_many_arguments)]
    fn req(
        start_s: i64,
        end_s: i64,
        ttft_ms: u64,
        e2e_ms: u64,
        prompt: u64,
        tokens: u64,
        gaps_ms: &[u64],
    ) -> RequestRecord {
        RequestRecord {
            start_unix_ns: start_s * S,
            end_unix_ns: end_s * S,
            ttft_ns: Some(ttft_ms * MS),
            e2e_latency_ns: e2e_ms * MS,
            prompt_tokens: Some(prompt),
            completion_tokens: Some(tokens),
            inter_chunk_latencies_ns: gaps_ms.iter().map(|g| g * MS).collect(),
            ..Default::default()
        }
    }

    fn with_spec(
        mut r: RequestRecord,
        acc: u64,
        prop: u64,
        steps: u64,
        hist: &[u64],
    ) -> RequestRecord {
        r.spec = Some(SpecDecodeStats {
            accepted_draft_tokens: acc,
            proposed_draft_tokens: prop,
            verify_steps: Some(steps),
            acceptance_histogram: hist.to_vec(),
            ..Default::default()
        });
        r
    }

    fn failed(kind: ErrorKind) -> RequestRecord {
        RequestRecord {
            error_kind: Some(kind),
            ..req(12, 13, 9_000, 9_500, 1_000, 1_000, &[777])
        }
    }

    /// Two vLLM requests plus three failures (2 timeouts, 1 connection).
    fn run() -> Vec<RequestRecord> {
        vec![
            with_spec(
                req(10, 12, 100, 2000, 100, 20, &[1, 3]),
                10,
                129,
                43,
                &[39, 1, 0, 3],
            ),
            with_spec(
                req(11, 14, 300, 3000, 50, 28, &[5]),
                4,
                12,
                4,
                &[2, 1, 0, 1],
            ),
            failed(ErrorKind::Connection),
            failed(ErrorKind::Timeout),
            failed(ErrorKind::Timeout),
        ]
    }

    /// The cells after the label of the table line whose label is `label`.
    fn cells<'a>(out: &'a str, label: &str) -> Vec<&'a str> {
        let line = out
            .lines()
            .find(|l| l.split('│').nth(1).map(str::trim) == Some(label))
            .unwrap_or_else(|| panic!("no row {label:?} in\n{out}"));
        let cells: Vec<&str> = line.split('│').map(str::trim).collect();
        cells[2..cells.len() - 1].to_vec()
    }

    const NA: [&str; 6] = ["N/A"; 6];

    fn with_na(avg: &str) -> Vec<&str> {
        std::iter::once(avg).chain(NA).collect()
    }

    #[test]
    fn llm_metrics_rows_by_hand() {
        let out = render_run_summary(&RunMetrics::from_records(&run()));
        assert!(out.starts_with(&format!("{}speedbench | LLM Metrics\n", " ".repeat(52))));
        // Columns: avg, min, max, p99, p90, p50, std; numpy linear percentiles
        // over 2 samples [a, b]: pXX = a + XX/100 * (b - a); std = |b - a| / 2.
        // TTFT [100, 300]: avg 200, p99 = 100 + .99*200 = 298, p90 = 280, std 100.
        assert_eq!(
            cells(&out, "Time to First Token (ms)"),
            [
                "200.00", "100.00", "300.00", "298.00", "280.00", "200.00", "100.00"
            ]
        );
        // ITL: (2000-100)/(20-1) = 100 and (3000-300)/(28-1) = 100.
        assert_eq!(
            cells(&out, "Inter Token Latency (ms)"),
            [
                "100.00", "100.00", "100.00", "100.00", "100.00", "100.00", "0.00"
            ]
        );
        // Chunk gaps pooled [1, 3, 5]: avg 3; p99: h = .99*2 = 1.98 -> 3 + .98*2
        // = 4.96; p90: h = 1.8 -> 4.60; std = sqrt((4+0+4)/3) = 1.633 -> 1.63.
        assert_eq!(
            cells(&out, "Inter Chunk Latency (ms)"),
            ["3.00", "1.00", "5.00", "4.96", "4.60", "3.00", "1.63"]
        );
        // Latency [2000, 3000]: p99 = 2000 + 990 = 2990; thousands separators.
        assert_eq!(
            cells(&out, "Request Latency (ms)"),
            [
                "2,500.00", "2,000.00", "3,000.00", "2,990.00", "2,900.00", "2,500.00", "500.00"
            ]
        );
        // OSL [20, 28]: p99 = 20 + .99*8 = 27.92, p90 = 27.2, std 4.
        assert_eq!(
            cells(&out, "Output Sequence Length (tokens)"),
            ["24.00", "20.00", "28.00", "27.92", "27.20", "24.00", "4.00"]
        );
        // ISL [50, 100]: p99 = 50 + .99*50 = 99.5, p90 = 95, std 25.
        assert_eq!(
            cells(&out, "Input Sequence Length (tokens)"),
            [
                "75.00", "50.00", "100.00", "99.50", "95.00", "75.00", "25.00"
            ]
        );
        // Per user = 1 / 100 ms = 10 tokens/s for both.
        assert_eq!(
            cells(&out, "Output Token Throughput Per User (tokens/sec/user)")[0],
            "10.00"
        );
        // Window 10 s .. 14 s = 4 s (failures inside it); 48 tokens / 4 s = 12;
        // 2 successes / 4 s = 0.5; count = successes only.
        assert_eq!(
            cells(&out, "Output Token Throughput (tokens/sec)"),
            with_na("12.00")
        );
        assert_eq!(
            cells(&out, "Request Throughput (requests/sec)"),
            with_na("0.50")
        );
        assert_eq!(cells(&out, "Request Count (requests)"), with_na("2.00"));
    }

    #[test]
    fn spec_decode_rows_by_hand() {
        let out = render_run_summary(&RunMetrics::from_records(&run()));
        assert!(out.contains(
            "\n\n                               speedbench | LLM Metrics: Spec Decode\n"
        ));
        // AL per request: 1 + 10/43 = 1.23256, 1 + 4/4 = 2 -> avg 1.61628,
        // p99 = 1.23256 + .99*.76744 = 1.99233, p90 = 1.92326, std .38372.
        assert_eq!(
            cells(&out, "Acceptance Length (ratio)"),
            ["1.62", "1.23", "2.00", "1.99", "1.92", "1.62", "0.38"]
        );
        // Token-weighted: 1 + (10+4)/(43+4) = 1.29787.
        assert_eq!(
            cells(&out, "Token-Weighted Acceptance Length (ratio)"),
            with_na("1.30")
        );
        // Rate %: 10/129 = 7.75194, 4/12 = 33.33333 -> avg 20.54264,
        // p99 = 7.75194 + .99*25.58140 = 33.07752, p90 = 30.77519, std 12.79070.
        assert_eq!(
            cells(&out, "Draft Acceptance Rate (%)"),
            ["20.54", "7.75", "33.33", "33.08", "30.78", "20.54", "12.79"]
        );
        // Overall: 14/141*100 = 9.92908.
        assert_eq!(
            cells(&out, "Overall Draft Acceptance Rate (%)"),
            with_na("9.93")
        );
        // APV: 53/172 = .30814, 8/16 = .5 -> avg .40407, p99 = .30814 + .99*.19186
        // = .49808, p90 = .48081, std .09593.
        assert_eq!(
            cells(&out, "Accepted per Verified (ratio)"),
            ["0.40", "0.31", "0.50", "0.50", "0.48", "0.40", "0.10"]
        );
        // Steps [4, 43]: p99 = 4 + .99*39 = 42.61, p90 = 39.1, std 19.5.
        assert_eq!(
            cells(&out, "Spec Decode Steps (count)"),
            ["23.50", "4.00", "43.00", "42.61", "39.10", "23.50", "19.50"]
        );
        // Pooled [39,1,0,3] + [2,1,0,1] = [41,2,0,4] over 47 steps:
        // 87.2% -> 87, 4.3% -> 4, 0, 8.5% -> 9.
        assert!(out.contains(
            "\n  Accepted drafts per step (% of steps):  0: 87%   1: 4%   2: 0%   3: 9%   \
             (47 steps, 2 requests with histograms)\n"
        ));
        assert!(!out.contains("Not in the distributions"));
        // The three acceptance lengths are named: 1.62 is the per-request
        // mean, 1.30 the token-weighted figure.
        assert!(out.contains(
            "  Acceptance length, three ways: \"Acceptance Length\" avg = mean over requests"
        ));
        assert!(out.contains(ACCEPTANCE_LENGTH_DEFINITIONS));
    }

    #[test]
    fn errors_line_counts_kinds_by_frequency() {
        let out = render_run_summary(&RunMetrics::from_records(&run()));
        // 2 ok + 3 failed = 5 non-warmup requests; kinds by count, descending.
        assert!(out.ends_with(
            "\nErrors: 3 of 5 requests failed (timeout: 2, connection: 1); statistics exclude them\n"
        ));
        // Their 9,000 ms TTFT and 777 ms gap are in no statistic.
        assert!(!out.contains("9,000.00") && !out.contains("777.00"));
    }

    #[test]
    fn exact_output_without_spec_or_errors() {
        // One request: ttft 50 ms, e2e 1050 ms, 11 tokens, no chunk gaps,
        // start 0 s, end 2 s. ITL = 1000/10 = 100 ms; per user = 10 tok/s;
        // throughput 11/2 = 5.5 tok/s, 1/2 = 0.5 req/s. No gaps -> no ICL row;
        // no spec stats -> no Spec Decode table; no failures -> no Errors line.
        let mut r = req(0, 2, 50, 1050, 7, 11, &[]);
        r.prompt_tokens = None; // -> no ISL row
        let out = render_run_summary(&RunMetrics::from_records(&[r]));
        // Width: 9 borders + (1+50+1) label column (the per-user label is 50
        // chars) + 6 * (1+8+1) + (1+4+1) = 127; title pad (127 - 24) / 2 = 51.
        let table = "\
┍━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━━━━━┯━━━━━━┑
│                                             Metric │      avg │      min │      max │      p99 │      p90 │      p50 │  std │
┝━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━━━━━┿━━━━━━┥
│                           Time to First Token (ms) │    50.00 │    50.00 │    50.00 │    50.00 │    50.00 │    50.00 │ 0.00 │
│                           Inter Token Latency (ms) │   100.00 │   100.00 │   100.00 │   100.00 │   100.00 │   100.00 │ 0.00 │
│                               Request Latency (ms) │ 1,050.00 │ 1,050.00 │ 1,050.00 │ 1,050.00 │ 1,050.00 │ 1,050.00 │ 0.00 │
│                    Output Sequence Length (tokens) │    11.00 │    11.00 │    11.00 │    11.00 │    11.00 │    11.00 │ 0.00 │
│ Output Token Throughput Per User (tokens/sec/user) │    10.00 │    10.00 │    10.00 │    10.00 │    10.00 │    10.00 │ 0.00 │
│               Output Token Throughput (tokens/sec) │     5.50 │      N/A │      N/A │      N/A │      N/A │      N/A │  N/A │
│                  Request Throughput (requests/sec) │     0.50 │      N/A │      N/A │      N/A │      N/A │      N/A │  N/A │
│                           Request Count (requests) │     1.00 │      N/A │      N/A │      N/A │      N/A │      N/A │  N/A │
└────────────────────────────────────────────────────┴──────────┴──────────┴──────────┴──────────┴──────────┴──────────┴──────┘
";
        let expected = format!("{}speedbench | LLM Metrics\n{table}", " ".repeat(51));
        assert_eq!(out, expected);
    }

    #[test]
    fn zero_step_and_plain_requests_are_noted() {
        // vLLM acc 4 prop 12 steps 4 hist [2,1,0,1]; a zero-step request with an
        // all-zero histogram; a request without spec stats; a llama.cpp-like
        // request without histogram (acc 6, prop 8, steps 2).
        let base = || req(0, 1, 10, 100, 5, 5, &[]);
        let records = vec![
            with_spec(base(), 4, 12, 4, &[2, 1, 0, 1]),
            with_spec(base(), 0, 0, 0, &[0, 0, 0, 0]),
            base(),
            with_spec(base(), 6, 8, 2, &[]),
        ];
        let out = render_run_summary(&RunMetrics::from_records(&records));
        // Histogram [2,1,0,1] + [0,0,0,0] over 4 steps: 50%, 25%, 0%, 25%;
        // 2 of the 3 spec requests sent a (non-empty) histogram.
        assert!(out.contains(
            "  Accepted drafts per step (% of steps):  0: 50%   1: 25%   2: 0%   3: 25%   \
             (4 steps, 2 of 3 requests with histograms)\n"
        ));
        assert!(out.contains(
            "  Not in the distributions: 1 request with zero verify steps (no per-request \
             values); 1 request without spec-decode stats\n"
        ));
        // Token-weighted AL = 1 + (4+0+6)/(4+0+2) = 2.67 (zero-step adds nothing).
        assert_eq!(
            cells(&out, "Token-Weighted Acceptance Length (ratio)"),
            with_na("2.67")
        );
        // Per-request AL: 2.0 and 1 + 6/2 = 4.0 -> avg 3.00 (zero-step skipped).
        assert_eq!(
            cells(&out, "Acceptance Length (ratio)")[..3],
            ["3.00", "2.00", "4.00"]
        );
        assert!(!out.contains("Errors:"));
    }

    #[test]
    fn spec_table_omitted_without_spec_stats() {
        let out = render_run_summary(&RunMetrics::from_records(&[req(0, 1, 10, 100, 5, 5, &[])]));
        assert!(!out.contains("Spec Decode"));
        assert!(!out.contains("Accepted drafts per step"));
        assert!(!out.contains("Not in the distributions"));
    }

    /// The HTTP Trace Timing table, with `--show-trace-timing` only.
    #[test]
    fn http_trace_table_by_hand() {
        // Two requests: waiting 5 and 3 ms, receiving 15 and 7 ms, sending
        // 0.02 and 0.01 ms, a new connection (0.09 ms) and a reused one.
        let traced = |waiting_ms: u64, receiving_ms: u64, reused: bool| RequestRecord {
            http_phases: Some(speedbench_record::HttpPhases {
                blocked_ns: 10_000,
                connecting_ns: if reused { 0 } else { 90_000 },
                sending_ns: if reused { 10_000 } else { 20_000 },
                waiting_ns: waiting_ms * MS,
                receiving_ns: receiving_ms * MS,
                connection_reused: reused,
                bytes_sent: 512,
                bytes_received: if reused { 1_024 } else { 3_072 },
                chunks_sent: 1,
                chunks_received: if reused { 8 } else { 12 },
                ..Default::default()
            }),
            ..req(0, 1, 10, 100, 5, 5, &[])
        };
        let records = [
            traced(5, 15, false),
            traced(3, 7, true),
            req(0, 1, 10, 100, 5, 5, &[]),
        ];
        let asked = speedbench_metrics::FigureOptions {
            http_trace: true,
            ..Default::default()
        };
        let out = render_run_summary(&RunMetrics::with_figures(&records, &asked));
        assert!(out.contains("speedbench | HTTP Trace Timing\n"));
        // Waiting [3, 5]: avg 4, min 3, max 5, p99 4.98, p90 4.8, p50 4, std 1.
        assert_eq!(
            cells(&out, "HTTP Waiting (TTFB) (ms)"),
            ["4.00", "3.00", "5.00", "4.98", "4.80", "4.00", "1.00"]
        );
        // Duration: 0.01 + 3 + 7 = 10.01 and 0.02 + 5 + 15 = 20.02 ms;
        // the total adds 0.01 blocked and 0.09 connecting to the second.
        assert_eq!(
            cells(&out, "HTTP Duration (excl. conn) (ms)")[..3],
            ["15.02", "10.01", "20.02"]
        );
        assert_eq!(
            cells(&out, "HTTP Total Time (ms)")[..3],
            ["15.07", "10.02", "20.12"]
        );
        assert_eq!(cells(&out, "HTTP Connection Reused (ratio)")[0], "0.50");
        // 1 and 3 KB received.
        assert_eq!(
            cells(&out, "HTTP Data Received (KB)")[..3],
            ["2.00", "1.00", "3.00"]
        );
        assert!(out.contains("  HTTP phases of 2 requests as the client's sockets saw them"));
        assert!(out.contains("  1 request sent over TLS or hyper's client"));
        // Not asked for: no table.
        let plain = render_run_summary(&RunMetrics::from_records(&records));
        assert!(!plain.contains("HTTP Trace Timing"));
    }

    #[test]
    fn server_timings_table() {
        // prompt/s 100 and 300 -> avg 200, p99 = 100 + .99*200 = 298, std 100;
        // decode/s 10 and 20 -> avg 15, p90 = 10 + .9*10 = 19, std 5.
        let timed = |p: f64, d: f64| RequestRecord {
            server_timings: Some(ServerTimings {
                prompt_per_second: Some(p),
                predicted_per_second: Some(d),
                ..Default::default()
            }),
            ..req(0, 1, 10, 100, 5, 5, &[])
        };
        let out = render_run_summary(&RunMetrics::from_records(&[
            timed(100.0, 10.0),
            timed(300.0, 20.0),
        ]));
        assert!(out.contains("speedbench | LLM Metrics: Server Timings\n"));
        assert_eq!(
            cells(&out, "Prompt Processing (tokens/sec)"),
            [
                "200.00", "100.00", "300.00", "298.00", "280.00", "200.00", "100.00"
            ]
        );
        assert_eq!(
            cells(&out, "Decode (tokens/sec)"),
            ["15.00", "10.00", "20.00", "19.90", "19.00", "15.00", "5.00"]
        );
        assert!(out.contains(
            "  Server-reported speeds (llama.cpp timings) of 2 requests; avg is the unweighted \
             mean per request\n"
        ));
    }

    #[test]
    fn error_kinds_tie_in_stable_order() {
        // http_status 2 first (most frequent); connection and timeout tie at 1
        // and keep ErrorKind::ALL order (connection before timeout).
        let records = [
            failed(ErrorKind::Timeout),
            failed(ErrorKind::HttpStatus),
            failed(ErrorKind::Connection),
            failed(ErrorKind::HttpStatus),
        ];
        let out = render_run_summary(&RunMetrics::from_records(&records));
        assert!(out.ends_with(
            "Errors: 4 of 4 requests failed (http_status: 2, connection: 1, timeout: 1); \
             statistics exclude them\n"
        ));
    }

    #[test]
    fn spec_stats_without_any_value_print_nothing() {
        // Steps unknown and nothing proposed: no ratio, no histogram, no
        // zero-step request -> no Spec Decode section, no stray blank line.
        let mut r = req(0, 1, 10, 100, 5, 5, &[]);
        r.spec = Some(SpecDecodeStats::default());
        let out = render_run_summary(&RunMetrics::from_records(&[r]));
        assert!(!out.contains("Spec Decode"));
        assert!(out.ends_with("┘\n"));
    }

    #[test]
    fn all_failed_run_keeps_count_and_errors() {
        // No successful request: only Request Count 0 (and the duration-based
        // throughputs: 0 tokens / 1 s = 0.00, 0 requests / 1 s = 0.00).
        let out = render_run_summary(&RunMetrics::from_records(&[failed(ErrorKind::Protocol)]));
        assert_eq!(cells(&out, "Request Count (requests)"), with_na("0.00"));
        assert_eq!(
            cells(&out, "Request Throughput (requests/sec)"),
            with_na("0.00")
        );
        assert!(!out.contains("Time to First Token"));
        assert!(
            out.ends_with("Errors: 1 of 1 request failed (protocol: 1); statistics exclude them\n")
        );
    }

    #[test]
    fn a_failed_run_says_its_first_error_in_the_servers_words() {
        let mut bad = failed(ErrorKind::HttpStatus);
        bad.error_message = Some("HTTP 404 Not Found: The model `x` does not exist".into());
        let mut long = failed(ErrorKind::HttpStatus);
        long.error_message = Some(format!("{}\nsecond line", "e".repeat(400)));
        let out = render_run_summary(&RunMetrics::from_records(&[bad, long.clone()]));
        assert!(out.ends_with(
            "Errors: 2 of 2 requests failed (http_status: 2); statistics exclude them\n\
             First error: HTTP 404 Not Found: The model `x` does not exist\n"
        ));
        let out = render_run_summary(&RunMetrics::from_records(&[long]));
        assert!(
            out.ends_with(&format!("First error: {}...\n", "e".repeat(300))),
            "{out}"
        );
    }

    #[test]
    fn histogram_buckets_from_eight_on_fold_as_aiperf_does() {
        // Ten buckets of 10% each: 0..7 shown, 8 and 9 folded into 20%.
        let pct = [10.0; 10];
        let b = histogram_buckets(&pct);
        assert_eq!(b.len(), 9);
        assert_eq!(b[7], "7: 10%");
        assert_eq!(b[8], ">=8: 20%");
        // Eight buckets (0..7): nothing to fold.
        assert_eq!(histogram_buckets(&[50.0; 2]), ["0: 50%", "1: 50%"]);
        assert!(
            !histogram_buckets(&[12.5; 8])
                .iter()
                .any(|s| s.starts_with(">="))
        );
    }

    #[test]
    fn position_lines_by_hand() {
        let h = PooledHistogram {
            counts: vec![4, 3, 1, 2],
            requests: 1,
        };
        assert_eq!(
            position_lines(&h),
            "  Steps accepting at least i drafts (acceptance by draft position):  1: 60%   2: 30%   3: 20%\n  \
             Acceptance length had the draft budget been k (upper bound: the same drafts, cut at k):  k=1: 1.60   k=2: 1.90   k=3: 2.10\n"
        );
        // k = 1: nothing to show beyond the histogram itself.
        let one = PooledHistogram {
            counts: vec![1, 1],
            requests: 1,
        };
        assert_eq!(position_lines(&one), "");
    }

    #[test]
    fn vllm_per_pass_figure_is_said_beside_its_own() {
        let mut spec = SpecDecodeMetrics::from_records(&[]);
        // 50 tokens, 20 accepted: 30 passes; 2 prefills, 5 drafting steps.
        spec.per_pass = PerPass {
            requests: 2,
            tokens: 50,
            accepted: 20,
            engine_steps: 5,
        };
        let text = not_counted_line(&spec).unwrap();
        assert!(
            text.contains("Per target pass: 1.67 tokens (50 over 30 passes, drafting or not); vLLM's own acceptance length counts only its 5 drafting steps (23 decode passes drafted nothing)"),
            "{text}"
        );
        // Every decode pass drafted: nothing to add.
        spec.per_pass.engine_steps = 28;
        assert_eq!(not_counted_line(&spec), None);
    }

    #[test]
    fn vllm_zero_step_requests_are_said_where_they_count() {
        let mut spec = SpecDecodeMetrics::from_records(&[]);
        spec.zero_step_requests = 3;
        spec.zero_step_in_distributions = 2;
        let text = not_counted_line(&spec).unwrap();
        assert!(
            text.contains("Not in the distributions: 1 request with zero verify steps"),
            "{text}"
        );
        assert!(
            text.contains("Drafted nothing (zero verify steps): 2 requests, in the per-request distributions at vLLM's own figures"),
            "{text}"
        );
    }

    #[test]
    fn dropped_payloads_and_tokens_per_iteration_are_said() {
        let mut spec = SpecDecodeMetrics::from_records(&[]);
        spec.totals.dropped_requests = 2;
        spec.totals.iteration_requests = 3;
        let text = not_counted_line(&spec).unwrap();
        assert!(
            text.contains("2 requests whose acceptance payload could not be right"),
            "{text}"
        );
        assert!(
            text.contains("Acceptance length of 3 requests is tokens per iteration"),
            "{text}"
        );
    }

    #[test]
    fn skipped_turns_get_their_own_line() {
        let mut records = run();
        let skipped = |why: &str| RequestRecord {
            error_message: Some(why.into()),
            ..failed(ErrorKind::Skipped)
        };
        records.push(skipped(
            "not sent: turn 1 of this conversation is empty or whitespace only",
        ));
        records.push(skipped(
            "not sent: turn 1 of this conversation failed (timeout)",
        ));
        let out = render_run_summary(&RunMetrics::from_records(&records));
        assert!(
            out.contains("Errors: 3 of 5 requests failed (timeout: 2, connection: 1)"),
            "{out}"
        );
        assert!(
            out.contains(
                "Skipped: 2 turns never sent (the first: not sent: turn 1 of this conversation is \
                 empty or whitespace only; each record's error_message says why)\n"
            ),
            "{out}"
        );
    }
}
