//! Run-level statistics (AIPerf's "LLM Metrics" console table).

use serde::{Deserialize, Serialize};
use speedbench_record::{ErrorKind, RequestRecord, columns};

use crate::goodput::{Goodput, Slos};
use crate::http_trace::HttpTraceMetrics;
use crate::measured::is_measured;
use crate::passes::{PassFold, run_passes};
use crate::request::RequestMetricsExt;
use crate::spec::SpecDecodeMetrics;
use crate::summary::Summary;
use crate::summary_passes::{SummaryPasses, end_passes};
use crate::window::{SteadyState, SteadyStateOptions, TimeSlice};

/// Aggregate statistics of one run.
///
/// Warmup records and failed records (`error_kind` set) are excluded from
/// every statistic; failures are still counted in [`RequestCounts`].
/// Latency summaries are in milliseconds, throughputs in per-second units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// How many requests there were, and how many failed, by kind.
    pub counts: RequestCounts,
    /// From the earliest `start_unix_ns` to the latest `end_unix_ns` over
    /// every non-warmup record (failed ones included: they occupied the
    /// window; skipped turns, never sent, left out), in seconds; `None` without such records or when not positive.
    pub benchmark_duration_s: Option<f64>,
    /// Successful requests / benchmark duration (requests/s).
    pub request_throughput: Option<f64>,
    /// Σ completion tokens of the successful requests / benchmark duration
    /// (tokens/s).
    pub output_token_throughput: Option<f64>,
    /// Time to first token (ms).
    pub ttft_ms: Option<Summary>,
    /// Per-request inter-token latency `(e2e - ttft) / (tokens - 1)` (ms).
    pub inter_token_latency_ms: Option<Summary>,
    /// Inter-chunk gaps pooled over all requests, each gap one sample (ms).
    pub inter_chunk_latency_ms: Option<Summary>,
    /// End-to-end request latency (ms).
    pub request_latency_ms: Option<Summary>,
    /// Completion tokens per request.
    pub output_sequence_length: Option<Summary>,
    /// Prompt tokens per request.
    pub input_sequence_length: Option<Summary>,
    /// Per-request `1 / ITL` (tokens/s/user), AIPerf's definition.
    pub output_token_throughput_per_user: Option<Summary>,
    /// The speculative-decoding section.
    pub spec_decode: SpecDecodeMetrics,
    /// llama.cpp server-side timings.
    pub server_timings: ServerTimingMetrics,
    /// Rates computed over intervals too short to time (see
    /// [`MIN_RESOLVED_INTERVAL_NS`]), one sentence each; empty when every
    /// rate rests on a measurable interval. The rates are still reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timing_warnings: Vec<String>,
    /// Goodput against the run's SLOs ([`FigureOptions::slos`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// The steady state of a closed loop ([`FigureOptions::steady_state`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
    /// The run in slices of [`FigureOptions::slice_duration_s`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time_slices: Vec<TimeSlice>,
    /// The requests' HTTP phases ([`FigureOptions::http_trace`]), where
    /// any measured request carries them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_trace: Option<HttpTraceMetrics>,
    /// Every figure per model, where the records name several (LoRA
    /// adapters behind one server), in order of each model's first record.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_model: Vec<ModelMetrics>,
}

/// The figures of one model's records ([`RunMetrics::by_model`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMetrics {
    /// The `model` the records asked for.
    pub model: String,
    /// Their figures, as [`RunMetrics::from_records`] computes a run's.
    pub metrics: Box<RunMetrics>,
}

/// The figures of a run that need more than its records: its SLOs, its
/// slice length, its concurrency. The default asks for none of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FigureOptions {
    /// `--goodput`: goodput against these SLOs (none: no goodput).
    #[serde(skip_serializing_if = "Slos::is_empty")]
    pub slos: Slos,
    /// `--slice-duration`: the run in slices of this many seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice_duration_s: Option<f64>,
    /// The steady state of a closed loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyStateOptions>,
    /// `--show-trace-timing`: the HTTP phases' figures
    /// ([`RunMetrics::http_trace`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub http_trace: bool,
}

/// Shortest interval, in nanoseconds, a rate is trusted over: 1 ms.
///
/// The client times a response at the socket, to within tens of
/// microseconds on loopback (TTFT error p99 14-30 µs against the
/// simulator); a server that writes a whole answer at once, or a simulator
/// with no delays, leaves a decode window (`e2e - TTFT`) of a few
/// microseconds or less, and dividing tokens by it gives rates like 1e11
/// tokens/s that measure the clock, not the server. Under 1 ms, that
/// timing error is above a few percent of the interval; no real model
/// decodes a request's tokens that fast per user.
pub const MIN_RESOLVED_INTERVAL_NS: u64 = 1_000_000;

impl FigureOptions {
    /// The key of `run.json`'s `config` that holds the options a run was
    /// made with, so a report of the run computes the same figures.
    pub const CONFIG_KEY: &str = "figures";

    /// The options a run was made with, from its `run.json`; the default
    /// (no SLO, no slices, no steady state) for a run that asked for none
    /// or predates them.
    pub fn of_run(manifest: &speedbench_record::RunManifest) -> FigureOptions {
        manifest
            .config
            .get(FigureOptions::CONFIG_KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }
}

impl RunMetrics {
    /// The record columns no figure of [`RunMetrics`] reads, whatever the
    /// [`FigureOptions`]: a records file read in passes leaves them
    /// undecoded. The output text, the prompt's hash, the request's
    /// identity (run, index, conversation, turn) and what else it left
    /// (finish reason, HTTP status, output chunks, server).
    pub const UNREAD_COLUMNS: [&'static str; 10] = [
        columns::OUTPUT_TEXT,
        columns::PROMPT_SHA256,
        columns::RUN_ID,
        columns::REQUEST_INDEX,
        columns::CONVERSATION_ID,
        columns::TURN_INDEX,
        columns::FINISH_REASON,
        columns::HTTP_STATUS,
        columns::OUTPUT_CHUNKS,
        columns::SERVER_INDEX,
    ];

    /// Computes every run-level statistic from the records of one run,
    /// none of the [`FigureOptions`] figures.
    pub fn from_records(records: &[RequestRecord]) -> RunMetrics {
        RunMetrics::with_figures(records, &FigureOptions::default())
    }

    /// [`RunMetrics::from_records`], with the figures `options` asks for
    /// ([`RunMetrics::from_passes`] over the records in memory).
    pub fn with_figures(records: &[RequestRecord], options: &FigureOptions) -> RunMetrics {
        let Ok(metrics) = RunMetrics::from_passes(records, options);
        metrics
    }
}

/// Request counts of a run.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Every record, warmup included.
    pub total: u64,
    /// Warmup records (whether or not they failed); excluded from the rest.
    pub warmup: u64,
    /// Non-warmup records without an error.
    pub succeeded: u64,
    /// Non-warmup records of requests sent that failed (an error other
    /// than [`ErrorKind::Skipped`]).
    pub failed: u64,
    /// Non-warmup turns never sent because an earlier turn of their
    /// conversation failed ([`ErrorKind::Skipped`]); not in `failed`.
    #[serde(default)]
    pub skipped: u64,
    /// `failed` split by kind, in [`ErrorKind::ALL`] order, kinds with a
    /// zero count left out (never [`ErrorKind::Skipped`]).
    pub failed_by_kind: Vec<ErrorCount>,
    /// The message of the first failed request, in record order (the
    /// server's own words for an HTTP status: `HTTP 404: The model X does
    /// not exist`), so a run that failed says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// Non-warmup requests the client cancelled on purpose
    /// ([`ErrorKind::ClientCancelled`], `--request-cancellation-rate`); not
    /// in `failed`. Left out of JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub client_cancelled: u64,
    /// Records (warmup included) whose request was written more than once:
    /// a server that reset a kept-alive connection without reading the
    /// request (see `RequestRecord::resends`). Left out of JSON when 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resent: u64,
    /// Why the first skipped turn was not sent (its record's message: an
    /// earlier turn of its conversation failed, or the turn is empty).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_skip_reason: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl RequestCounts {
    /// Counts the records.
    pub fn from_records(records: &[RequestRecord]) -> RequestCounts {
        let mut counts = RequestCounts::default();
        for r in records {
            counts.add(r);
        }
        counts
    }

    /// Counts one more record (the next in record order: the first failed
    /// one gives [`Self::first_error`]).
    pub fn add(&mut self, r: &RequestRecord) {
        self.total += 1;
        self.resent += u64::from(r.resends > 0);
        match (r.warmup, r.error_kind) {
            (true, _) => self.warmup += 1,
            (false, None) => self.succeeded += 1,
            (false, Some(ErrorKind::ClientCancelled)) => self.client_cancelled += 1,
            (false, Some(ErrorKind::Skipped)) => {
                self.skipped += 1;
                if self.first_skip_reason.is_none() {
                    self.first_skip_reason.clone_from(&r.error_message);
                }
            }
            (false, Some(kind)) => {
                self.failed += 1;
                if self.first_error.is_none() {
                    self.first_error.clone_from(&r.error_message);
                }
                self.add_failed(kind, 1);
            }
        }
    }

    /// Adds the counts of records that come after these (another shard of
    /// the run): sums, and the first error of the two in that order.
    pub fn merge(&mut self, later: &RequestCounts) {
        self.total += later.total;
        self.warmup += later.warmup;
        self.succeeded += later.succeeded;
        self.failed += later.failed;
        self.skipped += later.skipped;
        self.client_cancelled += later.client_cancelled;
        self.resent += later.resent;
        for e in &later.failed_by_kind {
            self.add_failed(e.kind, e.count);
        }
        if self.first_error.is_none() {
            self.first_error.clone_from(&later.first_error);
        }
        if self.first_skip_reason.is_none() {
            self.first_skip_reason.clone_from(&later.first_skip_reason);
        }
    }

    /// `count` more failures of `kind` in [`Self::failed_by_kind`], which
    /// stays in [`ErrorKind::ALL`] order.
    fn add_failed(&mut self, kind: ErrorKind, count: u64) {
        let rank = |k: ErrorKind| ErrorKind::ALL.iter().position(|&x| x == k);
        match self.failed_by_kind.iter_mut().find(|e| e.kind == kind) {
            Some(e) => e.count += count,
            None => {
                let at = self
                    .failed_by_kind
                    .iter()
                    .position(|e| rank(e.kind) > rank(kind))
                    .unwrap_or(self.failed_by_kind.len());
                self.failed_by_kind.insert(at, ErrorCount { kind, count });
            }
        }
    }

    /// Non-warmup failures of one kind.
    pub fn failed_of(&self, kind: ErrorKind) -> u64 {
        self.failed_by_kind
            .iter()
            .find(|e| e.kind == kind)
            .map_or(0, |e| e.count)
    }
}

/// How many non-warmup requests failed with one [`ErrorKind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// The kind of failure.
    pub kind: ErrorKind,
    /// Requests that failed with it.
    pub count: u64,
}

/// llama.cpp `timings` speeds over the measured requests that reported them.
///
/// The means are unweighted means of the per-request values, as llama.cpp's
/// `speed_bench.py` computes `avg_prompt_t/s` and `avg_pred_t/s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerTimingMetrics {
    /// Measured requests that carried server timings.
    pub requests: u64,
    /// Per-request `timings.prompt_per_second` (tokens/s).
    pub prompt_tps: Option<Summary>,
    /// Per-request `timings.predicted_per_second` (tokens/s).
    pub decode_tps: Option<Summary>,
}

impl ServerTimingMetrics {
    /// Computes the statistics, skipping warmup and failed records.
    pub fn from_records(records: &[RequestRecord]) -> ServerTimingMetrics {
        let mut fold = ServerTimingFold::default();
        let Ok(()) = run_passes(records, &mut fold, &mut |_| {});
        fold.finish()
    }

    /// Unweighted mean prompt (prefill) speed, tokens/s.
    pub fn mean_prompt_tps(&self) -> Option<f64> {
        self.prompt_tps.map(|s| s.avg)
    }

    /// Unweighted mean decode speed, tokens/s.
    pub fn mean_decode_tps(&self) -> Option<f64> {
        self.decode_tps.map(|s| s.avg)
    }
}

/// [`ServerTimingMetrics`] folded over records read in passes.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServerTimingFold {
    requests: u64,
    /// Prompt and decode tokens/s.
    speeds: [SummaryPasses; 2],
}

impl PassFold for ServerTimingFold {
    fn add(&mut self, pass: u32, r: &RequestRecord) {
        if !is_measured(r) {
            return;
        }
        self.requests += u64::from(pass == 0 && r.server_timings.is_some());
        let [prompt, decode] = &mut self.speeds;
        r.prompt_tokens_per_second()
            .into_iter()
            .for_each(|v| prompt.add(v));
        r.decode_tokens_per_second()
            .into_iter()
            .for_each(|v| decode.add(v));
    }

    fn end_pass(&mut self) -> bool {
        end_passes(&mut self.speeds)
    }
}

impl ServerTimingFold {
    pub(crate) fn finish(&self) -> ServerTimingMetrics {
        let [prompt, decode] = &self.speeds;
        ServerTimingMetrics {
            requests: self.requests,
            prompt_tps: prompt.finish(),
            decode_tps: decode.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ServerTimings;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// A streamed request: start/end in seconds, ttft/e2e in ms.
    fn req(start_s: i64, end_s: i64, ttft_ms: u64, e2e_ms: u64, tokens: u64) -> RequestRecord {
        RequestRecord {
            start_unix_ns: start_s * 1_000_000_000,
            end_unix_ns: end_s * 1_000_000_000,
            ttft_ns: Some(ttft_ms * 1_000_000),
            e2e_latency_ns: e2e_ms * 1_000_000,
            prompt_tokens: Some(100),
            completion_tokens: Some(tokens),
            ..Default::default()
        }
    }

    /// What [`RunMetrics::UNREAD_COLUMNS`] hold changes no figure: every
    /// figure asked for, over records whose those fields differ.
    #[test]
    fn the_unread_columns_change_no_figure() {
        let figures = FigureOptions {
            slos: "ttft:50".parse().unwrap(),
            steady_state: Some(crate::SteadyStateOptions {
                concurrency: 2,
                threshold: crate::SteadyStateOptions::DEFAULT_THRESHOLD,
                min_window_s: 0.5,
            }),
            slice_duration_s: Some(2.0),
            http_trace: true,
        };
        let records: Vec<RequestRecord> = (0..40)
            .map(|i| RequestRecord {
                model: ["a", "b"][i as usize % 2].into(),
                inter_chunk_latencies_ns: vec![1_000_000 + i, 2_000_000],
                http_phases: Some(Default::default()),
                spec: (i % 3 != 0).then(|| speedbench_record::SpecDecodeStats {
                    accepted_draft_tokens: i % 4,
                    proposed_draft_tokens: 4,
                    verify_steps: Some(2),
                    ..Default::default()
                }),
                error_kind: (i % 7 == 0).then_some(speedbench_record::ErrorKind::Timeout),
                ..req(i as i64 / 4, i as i64 / 4 + 1, 20 + i, 400 + i, 10 + i)
            })
            .collect();
        let mut other = records.clone();
        for (i, r) in other.iter_mut().enumerate() {
            for column in RunMetrics::UNREAD_COLUMNS {
                match column {
                    columns::OUTPUT_TEXT => r.output_text = format!("text {i}"),
                    columns::PROMPT_SHA256 => r.prompt_sha256 = Some(format!("{i:064x}")),
                    columns::RUN_ID => r.run_id = format!("run {i}"),
                    columns::REQUEST_INDEX => r.request_index = 1_000 - i as u64,
                    columns::CONVERSATION_ID => r.conversation_id = format!("c{}", i % 3),
                    columns::TURN_INDEX => r.turn_index = i as u32,
                    columns::FINISH_REASON => r.finish_reason = Some("length".into()),
                    columns::HTTP_STATUS => r.http_status = Some(200 + i as u16),
                    columns::OUTPUT_CHUNKS => r.output_chunks = i as u64,
                    columns::SERVER_INDEX => r.server_index = Some(i as u32),
                    other => panic!("no other value for {other}"),
                }
            }
        }
        assert_eq!(
            RunMetrics::with_figures(&other, &figures),
            RunMetrics::with_figures(&records, &figures)
        );
    }

    #[test]
    fn figures_per_model_by_hand() {
        // Model a: 10 -> 12 s and 11 -> 14 s, 20 and 28 tokens; 6 of 8
        // drafts over 4 steps and 2 of 8 over 4: length 1 + 8/8 = 2.
        // Model b: 12 -> 13 s, 10 tokens, 3 of 4 over 2 steps: 2.5.
        let spec = |accepted, proposed, steps| speedbench_record::SpecDecodeStats {
            accepted_draft_tokens: accepted,
            proposed_draft_tokens: proposed,
            verify_steps: Some(steps),
            ..Default::default()
        };
        let with = |mut r: RequestRecord, model: &str, s| {
            r.model = model.into();
            r.spec = Some(s);
            r
        };
        let records = [
            with(req(10, 12, 100, 2000, 20), "a", spec(6, 8, 4)),
            with(req(12, 13, 100, 1000, 10), "b", spec(3, 4, 2)),
            with(req(11, 14, 300, 3000, 28), "a", spec(2, 8, 4)),
        ];
        let m = RunMetrics::from_records(&records);
        let names: Vec<&str> = m.by_model.iter().map(|b| b.model.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        let (a, b) = (&m.by_model[0].metrics, &m.by_model[1].metrics);
        assert_eq!((a.counts.succeeded, b.counts.succeeded), (2, 1));
        assert!(close(a.benchmark_duration_s.unwrap(), 4.0));
        assert!(close(a.output_token_throughput.unwrap(), 48.0 / 4.0));
        assert!(close(
            a.spec_decode.token_weighted_acceptance_length().unwrap(),
            2.0
        ));
        assert!(close(
            b.spec_decode.token_weighted_acceptance_length().unwrap(),
            2.5
        ));
        assert!(
            a.by_model.is_empty(),
            "one model's own figures nest no further"
        );
        // One model: no breakdown.
        assert!(RunMetrics::from_records(&records[..1]).by_model.is_empty());
    }

    #[test]
    fn throughput_and_latencies() {
        // A: start 10 s, end 12 s, ttft 100 ms, e2e 2000 ms, 20 tokens
        //    ITL = 1900/19 = 100 ms; per user = 10 tok/s
        // B: start 11 s, end 14 s, ttft 300 ms, e2e 3000 ms, 28 tokens
        //    ITL = 2700/27 = 100 ms; per user = 10 tok/s
        // duration = 14 - 10 = 4 s; request throughput = 2/4 = 0.5 req/s;
        // output token throughput = 48/4 = 12 tok/s.
        // TTFT mean = 200 ms, std = 100 ms; latency mean = 2500 ms.
        let mut a = req(10, 12, 100, 2000, 20);
        a.inter_chunk_latencies_ns = vec![1_000_000, 3_000_000];
        let mut b = req(11, 14, 300, 3000, 28);
        b.inter_chunk_latencies_ns = vec![5_000_000];
        let m = RunMetrics::from_records(&[a, b]);
        assert_eq!(m.benchmark_duration_s, Some(4.0));
        assert!(close(m.request_throughput.unwrap(), 0.5));
        assert!(close(m.output_token_throughput.unwrap(), 12.0));
        let ttft = m.ttft_ms.unwrap();
        assert!(close(ttft.avg, 200.0));
        assert!(close(ttft.std, 100.0));
        assert!(close(m.request_latency_ms.unwrap().avg, 2500.0));
        let itl = m.inter_token_latency_ms.unwrap();
        assert!(close(itl.avg, 100.0));
        assert!(close(itl.std, 0.0));
        assert!(close(m.output_token_throughput_per_user.unwrap().avg, 10.0));
        // Chunk gaps pooled: [1, 3, 5] ms -> count 3, mean 3, p50 3.
        let icl = m.inter_chunk_latency_ms.unwrap();
        assert_eq!(icl.count, 3);
        assert!(close(icl.avg, 3.0));
        assert!(close(m.output_sequence_length.unwrap().avg, 24.0));
        assert!(close(m.input_sequence_length.unwrap().avg, 100.0));
    }

    #[test]
    fn rates_over_unresolvable_intervals_are_flagged() {
        // A: ttft 2 ms, e2e 2.000_5 ms, 11 tokens -> decode window 500 ns,
        //    per-user throughput 10 / 500e-9 s = 2e7 tokens/s: flagged.
        // B: ttft 100 ms, e2e 2000 ms, 20 tokens: a measurable window.
        let mut a = req(10, 12, 0, 0, 11);
        a.ttft_ns = Some(2_000_000);
        a.e2e_latency_ns = 2_000_500;
        let m = RunMetrics::from_records(&[a.clone(), req(10, 12, 100, 2000, 20)]);
        assert_eq!(m.timing_warnings.len(), 1, "{:?}", m.timing_warnings);
        assert_eq!(
            RunMetrics::timing_warnings_of(&[a.clone(), req(10, 12, 100, 2000, 20)]),
            m.timing_warnings
        );
        let w = &m.timing_warnings[0];
        assert!(w.starts_with("1 of 2 streamed requests"), "{w}");
        assert!(
            w.contains("per-user throughput (up to 2.000e7 tokens/s) are below")
                && w.contains("after the first within 1 ms (e2e - TTFT)"),
            "{w}"
        );
        // Tokens that came all at once: no finite rate, no "(up to ...)".
        let mut at_once = a.clone();
        at_once.e2e_latency_ns = at_once.ttft_ns.unwrap();
        let w = RunMetrics::timing_warnings_of(&[at_once]).join("\n");
        assert!(w.contains("per-user throughput are below"), "{w}");
        assert!(!w.contains("unbounded") && !w.contains("  "), "{w}");
        // The rate is still reported, not dropped.
        assert!(close(m.output_token_throughput_per_user.unwrap().max, 2e7));
        // Exactly 1 ms is measurable; so is every request of a normal run.
        a.e2e_latency_ns = 3_000_000;
        assert!(
            RunMetrics::from_records(&[a.clone()])
                .timing_warnings
                .is_empty()
        );
        // A whole run inside 1 ms: its throughputs are flagged too.
        let mut tiny = req(0, 0, 0, 0, 5);
        tiny.end_unix_ns = 400_000;
        tiny.ttft_ns = None;
        let m = RunMetrics::from_records(&[tiny]);
        assert_eq!(m.timing_warnings.len(), 1);
        assert!(
            m.timing_warnings[0].contains("took 0.400 ms"),
            "{:?}",
            m.timing_warnings
        );
    }

    #[test]
    fn warmup_is_excluded_everywhere() {
        // The warmup record starts earlier and has a huge TTFT: neither the
        // duration (2 s) nor the TTFT summary (100 ms) may see it.
        let mut warm = req(0, 11, 9000, 9500, 50);
        warm.warmup = true;
        let m = RunMetrics::from_records(&[warm, req(10, 12, 100, 2000, 20)]);
        assert_eq!(m.counts.total, 2);
        assert_eq!(m.counts.warmup, 1);
        assert_eq!(m.counts.succeeded, 1);
        assert_eq!(m.benchmark_duration_s, Some(2.0));
        assert_eq!(m.ttft_ms.unwrap().count, 1);
        assert!(close(m.ttft_ms.unwrap().avg, 100.0));
        // 20 tokens / 2 s = 10 tok/s.
        assert!(close(m.output_token_throughput.unwrap(), 10.0));
    }

    #[test]
    fn errors_are_counted_not_measured() {
        // Two failures (timeout, http) and one success.
        // Duration spans the failures too: 10 s .. 16 s = 6 s;
        // request throughput counts successes only: 1/6 req/s.
        let mut t = req(10, 16, 5000, 6000, 0);
        t.error_kind = Some(ErrorKind::Timeout);
        let mut h = req(11, 11, 1, 1, 0);
        h.error_kind = Some(ErrorKind::HttpStatus);
        let mut warm_fail = req(0, 1, 1, 1, 0);
        warm_fail.warmup = true;
        warm_fail.error_kind = Some(ErrorKind::Timeout);
        let m = RunMetrics::from_records(&[t, h, warm_fail, req(12, 14, 100, 2000, 20)]);
        let c = &m.counts;
        assert_eq!((c.total, c.warmup, c.succeeded, c.failed), (4, 1, 1, 2));
        assert_eq!(c.failed_of(ErrorKind::Timeout), 1);
        assert_eq!(c.failed_of(ErrorKind::HttpStatus), 1);
        assert_eq!(c.failed_of(ErrorKind::Connection), 0);
        assert_eq!(c.skipped, 0);
        assert_eq!(
            c.failed_by_kind,
            vec![
                ErrorCount {
                    kind: ErrorKind::Timeout,
                    count: 1
                },
                ErrorCount {
                    kind: ErrorKind::HttpStatus,
                    count: 1
                },
            ]
        );
        assert_eq!(m.benchmark_duration_s, Some(6.0));
        assert!(close(m.request_throughput.unwrap(), 1.0 / 6.0));
        assert_eq!(m.ttft_ms.unwrap().count, 1);
        assert!(close(m.ttft_ms.unwrap().avg, 100.0));
    }

    #[test]
    fn empty_run() {
        let m = RunMetrics::from_records(&[]);
        assert_eq!(m.counts, RequestCounts::default());
        assert_eq!(m.benchmark_duration_s, None);
        assert_eq!(m.request_throughput, None);
        assert_eq!(m.ttft_ms, None);
        assert_eq!(m.inter_chunk_latency_ms, None);
        assert_eq!(m.server_timings.requests, 0);
        assert_eq!(m.server_timings.mean_decode_tps(), None);
    }

    #[test]
    fn server_timing_means_are_unweighted() {
        // prompt/s 100 and 300 -> mean 200; decode/s 10 and 20 -> mean 15,
        // whatever the token counts behind them.
        let timed = |p: f64, d: f64| RequestRecord {
            server_timings: Some(ServerTimings {
                prompt_per_second: Some(p),
                predicted_per_second: Some(d),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut failed = timed(1e6, 1e6);
        failed.error_kind = Some(ErrorKind::Protocol);
        let s = ServerTimingMetrics::from_records(&[
            timed(100.0, 10.0),
            timed(300.0, 20.0),
            failed,
            RequestRecord::default(),
        ]);
        assert_eq!(s.requests, 2);
        assert!(close(s.mean_prompt_tps().unwrap(), 200.0));
        assert!(close(s.mean_decode_tps().unwrap(), 15.0));
        assert!(close(s.decode_tps.unwrap().std, 5.0));
    }

    #[test]
    fn skipped_turns_are_counted_apart_and_occupy_no_time() {
        // A turn failed at 10..12 s; the next turn of its conversation was
        // skipped (its stamps at 0 must not stretch the window); a success
        // at 12..14 s. Window 10..14 s = 4 s; 1 success / 4 s.
        let mut failed = req(10, 12, 1, 1, 0);
        failed.error_kind = Some(ErrorKind::Connection);
        let mut skipped = req(0, 0, 0, 0, 0);
        skipped.error_kind = Some(ErrorKind::Skipped);
        let m = RunMetrics::from_records(&[failed, skipped, req(12, 14, 100, 2000, 20)]);
        let c = &m.counts;
        assert_eq!((c.total, c.succeeded, c.failed, c.skipped), (3, 1, 1, 1));
        assert_eq!(c.failed_of(ErrorKind::Skipped), 0);
        assert_eq!(m.benchmark_duration_s, Some(4.0));
        assert_eq!(m.request_throughput, Some(0.25));
    }
}
