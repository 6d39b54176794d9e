//! Ground-truth accounting and the Prometheus text exposition of `/metrics`.

use std::fmt::Write as _;

use crate::faults::FaultTruth;

/// A snapshot of everything the server has completed, for checking a client's
/// measurements against the truth.
///
/// Only completed requests count: a streaming request is counted when its final
/// `data: [DONE]` frame is handed to the connection, a non-streaming one when
/// its response is produced. A client that disconnects mid-stream is not counted.
/// For `num_spec_tokens == 0` requests the spec counters (steps, accepted,
/// proposed, histogram) stay zero.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroundTruth {
    /// Completed requests.
    pub requests: u64,
    /// Verify steps with drafts (`vllm:spec_decode_num_drafts_total`).
    pub steps: u64,
    /// Accepted draft tokens, bonus tokens excluded.
    pub accepted: u64,
    /// Proposed draft tokens.
    pub proposed: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Prompt tokens (whitespace word counts).
    pub prompt_tokens: u64,
    /// Pooled dense histogram over all requests: index `j` counts steps that
    /// accepted exactly `j` drafts; length is the largest configured `k` plus 1.
    pub histogram: Vec<u64>,
    /// Accepted drafts per draft position `i` (`..._per_pos_total{position="i"}`);
    /// length is the largest configured `k`.
    pub accepted_per_pos: Vec<u64>,
    /// One entry per completed request, in completion order.
    pub requests_log: Vec<RequestTruth>,
    /// One entry per request that drew a fault, in arrival order (see
    /// [`crate::FaultKind::fails_request`] for which of them also appear in
    /// `requests_log`).
    pub faults: Vec<FaultTruth>,
    /// `/metrics` scrapes served.
    pub scrapes: u64,
    /// Scrape numbers (from 1) at which the exposed counters restarted from
    /// zero ([`crate::FaultKind::CounterReset`]).
    pub counter_resets: Vec<u64>,
    /// Every generation request read whole, in arrival order: when it
    /// arrived, to check a client's send times against.
    pub arrivals: Vec<ArrivalTruth>,
    /// Conversation keys of the requests whose answer was abandoned before
    /// its end: the client went away (or the server shut down) while it
    /// was being generated or sent. Never in `requests_log`.
    pub abandoned: Vec<String>,
}

/// One generation request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalTruth {
    /// Conversation key, as [`RequestTruth::conversation`].
    pub conversation: String,
    /// When its first bytes arrived, nanoseconds since the Unix epoch (the
    /// kernel's receive time on Linux).
    pub at_unix_ns: u64,
}

/// The truth about one completed request (served as JSON by
/// `GET /debug/requests`, so a client in another process can be checked).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RequestTruth {
    /// Conversation key: the first user message's text (the prompt for `/v1/completions`).
    pub conversation: String,
    /// The request's `model` field, as sent (the simulator serves any).
    #[serde(default)]
    pub model: String,
    /// Number of user messages in the request (1 for `/v1/completions`).
    pub turns: u32,
    /// Category taken from the prompt marker, if it named a configured category.
    pub category: Option<String>,
    /// Prompt tokens reported in `usage`.
    pub prompt_tokens: u32,
    /// Output tokens reported in `usage`.
    pub completion_tokens: u32,
    /// Verify steps with drafts.
    pub steps: u64,
    /// Accepted draft tokens.
    pub accepted: u64,
    /// Proposed draft tokens.
    pub proposed: u64,
    /// Configured time to first token in milliseconds.
    pub ttft_ms: f64,
    /// Whether `max_tokens` cut the output (`finish_reason: "length"`).
    pub truncated: bool,
    /// Streaming only: nanoseconds from the arrival of the request's first
    /// packet (the kernel's receive timestamp on Linux; otherwise when the
    /// connection read it) to the start of the socket write that carried
    /// the first content frame (until that write happens, the moment the
    /// frame was handed to hyper). A client's TTFT minus this is its
    /// measurement error plus loopback transit, whatever the timer rounding
    /// of `ttft_ms` and however late hyper wrote the frame.
    pub first_content_sent_ns: Option<u64>,
    /// The connection that carried the request: the server's count of
    /// connections accepted when it was (1 for the first); 0 when unknown.
    #[serde(default)]
    pub connection: u64,
}

impl RequestTruth {
    /// An empty entry, left behind when a completion's entry is moved
    /// into the log.
    pub(crate) fn placeholder() -> RequestTruth {
        RequestTruth {
            model: String::new(),
            conversation: String::new(),
            turns: 0,
            category: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            steps: 0,
            accepted: 0,
            proposed: 0,
            ttft_ms: 0.0,
            truncated: false,
            first_content_sent_ns: None,
            connection: 0,
        }
    }
}

impl GroundTruth {
    pub(crate) fn new(max_k: u32) -> Self {
        Self {
            histogram: vec![0; max_k as usize + 1],
            accepted_per_pos: vec![0; max_k as usize],
            ..Self::default()
        }
    }

    /// Adds one completed request. `histogram` is that request's dense histogram.
    pub(crate) fn record(&mut self, truth: RequestTruth, histogram: &[u64]) {
        self.requests += 1;
        self.steps += truth.steps;
        self.accepted += truth.accepted;
        self.proposed += truth.proposed;
        self.completion_tokens += u64::from(truth.completion_tokens);
        self.prompt_tokens += u64::from(truth.prompt_tokens);
        for (j, &count) in histogram.iter().enumerate() {
            if j >= self.histogram.len() {
                self.histogram.resize(j + 1, 0);
            }
            self.histogram[j] += count;
            // A step that accepted j drafts accepted positions 0..j.
            if j > self.accepted_per_pos.len() {
                self.accepted_per_pos.resize(j, 0);
            }
            for pos in &mut self.accepted_per_pos[..j] {
                *pos += count;
            }
        }
        self.requests_log.push(truth);
    }

    /// The counters (no logs) as they were at this point.
    pub(crate) fn counters(&self) -> GroundTruth {
        GroundTruth {
            requests: self.requests,
            steps: self.steps,
            accepted: self.accepted,
            proposed: self.proposed,
            completion_tokens: self.completion_tokens,
            prompt_tokens: self.prompt_tokens,
            histogram: self.histogram.clone(),
            accepted_per_pos: self.accepted_per_pos.clone(),
            ..GroundTruth::default()
        }
    }

    /// The counters accumulated since `base` (a [`Self::counters`] snapshot).
    pub(crate) fn counters_since(&self, base: &GroundTruth) -> GroundTruth {
        let sub = |a: &[u64], b: &[u64]| -> Vec<u64> {
            a.iter()
                .enumerate()
                .map(|(i, &v)| v.saturating_sub(b.get(i).copied().unwrap_or(0)))
                .collect()
        };
        GroundTruth {
            requests: self.requests.saturating_sub(base.requests),
            steps: self.steps.saturating_sub(base.steps),
            accepted: self.accepted.saturating_sub(base.accepted),
            proposed: self.proposed.saturating_sub(base.proposed),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(base.completion_tokens),
            prompt_tokens: self.prompt_tokens.saturating_sub(base.prompt_tokens),
            histogram: sub(&self.histogram, &base.histogram),
            accepted_per_pos: sub(&self.accepted_per_pos, &base.accepted_per_pos),
            ..GroundTruth::default()
        }
    }
}

/// Which metric families to render.
pub(crate) struct Exposition<'a> {
    pub(crate) truth: &'a GroundTruth,
    pub(crate) model: &'a str,
    pub(crate) running: u64,
    pub(crate) llamacpp: bool,
    /// Server start time (Unix seconds) for the `_created` gauges.
    pub(crate) created_unix: f64,
}

/// Escapes a Prometheus label value.
fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// vLLM's single-sample counters: name, help and value.
fn vllm_counters(t: &GroundTruth) -> [(&'static str, &'static str, u64); 6] {
    [
        (
            "vllm:spec_decode_num_drafts",
            "Number of spec decoding drafts.",
            t.steps,
        ),
        (
            "vllm:spec_decode_num_draft_tokens",
            "Number of draft tokens.",
            t.proposed,
        ),
        (
            "vllm:spec_decode_num_accepted_tokens",
            "Number of accepted tokens.",
            t.accepted,
        ),
        (
            "vllm:prompt_tokens",
            "Number of prefill tokens processed.",
            t.prompt_tokens,
        ),
        (
            "vllm:generation_tokens",
            "Number of generation tokens processed.",
            t.completion_tokens,
        ),
        (
            "vllm:request_success",
            "Count of successfully processed requests.",
            t.requests,
        ),
    ]
}

/// One vLLM counter family as prometheus_client writes it: the `_total`
/// samples (float values) and a `_created` gauge per sample.
fn vllm_counter(
    out: &mut String,
    (base, help): (&str, &str),
    labels: &str,
    samples: &[(String, u64)],
    created: f64,
) {
    let _ = writeln!(out, "# HELP {base}_total {help}");
    let _ = writeln!(out, "# TYPE {base}_total counter");
    for (extra, v) in samples {
        let _ = writeln!(out, "{base}_total{{{labels}{extra}}} {v}.0");
    }
    let _ = writeln!(out, "# HELP {base}_created {help}");
    let _ = writeln!(out, "# TYPE {base}_created gauge");
    for (extra, _) in samples {
        let _ = writeln!(out, "{base}_created{{{labels}{extra}}} {created:.3e}");
    }
}

impl Exposition<'_> {
    /// Renders Prometheus text format 0.0.4.
    pub(crate) fn render(&self) -> String {
        let t = self.truth;
        let labels = format!("model_name=\"{}\",engine=\"0\"", escape_label(self.model));
        let mut out = String::new();
        // prometheus_client style (as vLLM): float values, `# HELP`/`# TYPE`
        // name the `_total` sample, and each counter has a `_created` gauge
        // (start time) that clients must not mistake for a counter.
        let created = self.created_unix;
        let family = |out: &mut String, base: &str, help: &str, samples: &[(String, u64)]| {
            vllm_counter(out, (base, help), &labels, samples, created);
        };
        let one = |v: u64| [(String::new(), v)];
        for (base, help, v) in vllm_counters(t) {
            family(&mut out, base, help, &one(v));
        }
        let per_pos: Vec<(String, u64)> = t
            .accepted_per_pos
            .iter()
            .enumerate()
            .map(|(i, &v)| (format!(",position=\"{i}\""), v))
            .collect();
        family(
            &mut out,
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            &per_pos,
        );
        let _ = write!(
            out,
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n\
             # TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{{{labels}}} {}.0\n",
            self.running
        );
        if self.llamacpp {
            self.render_llamacpp(&mut out);
        }
        out
    }

    /// llama-server's counters (as it writes them: unlabelled, integer
    /// values, `# TYPE` naming the full sample).
    fn render_llamacpp(&self, out: &mut String) {
        let t = self.truth;
        for (name, help, v) in [
            (
                "llamacpp:spec_decode_num_draft_tokens_total",
                "Total draft tokens generated",
                t.proposed,
            ),
            (
                "llamacpp:spec_decode_num_accepted_tokens_total",
                "Total draft tokens accepted by the target model",
                t.accepted,
            ),
            (
                "llamacpp:spec_decode_num_drafts_total",
                "Total speculative decoding verification steps",
                t.steps,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            let _ = writeln!(out, "{name} {v}");
        }
        let name = "llamacpp:tokens_predicted_total";
        let _ = writeln!(out, "# HELP {name} Number of generation tokens processed.");
        let _ = writeln!(out, "# TYPE {name} counter");
        let _ = writeln!(out, "{name} {}", t.completion_tokens);
        // As llama-server: the per-position series exist only once
        // something was drafted, so they appear in the middle of a run.
        if t.steps > 0 {
            let name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total";
            let _ = writeln!(out, "# HELP {name} Accepted tokens per draft position");
            let _ = writeln!(out, "# TYPE {name} counter");
            for (i, v) in t.accepted_per_pos.iter().enumerate() {
                let _ = writeln!(out, "{name}{{position=\"{i}\"}} {v}");
            }
        }
    }
}

/// `1 + accepted / steps` of the whole run so far (0 before any step).
fn acceptance_length(t: &GroundTruth) -> f64 {
    if t.steps == 0 {
        0.0
    } else {
        1.0 + t.accepted as f64 / t.steps as f64
    }
}

/// SGLang's `/metrics`: acceptance gauges only (it has no spec counters),
/// one series per `engine_type`. The `unified` series is the engine's
/// figure; the `draft` series is the draft worker's own, a different
/// number a client must not average in.
pub(crate) fn render_sglang(t: &GroundTruth, model: &str) -> String {
    let model = escape_label(model);
    let rate = if t.proposed == 0 {
        0.0
    } else {
        t.accepted as f64 / t.proposed as f64
    };
    let mut out = String::new();
    for (name, help, unified) in [
        (
            "sglang:spec_accept_length",
            "The average acceptance length of speculative decoding.",
            acceptance_length(t),
        ),
        (
            "sglang:spec_accept_rate",
            "The average acceptance rate of speculative decoding.",
            rate,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        let _ = writeln!(
            out,
            "{name}{{engine_type=\"unified\",model_name=\"{model}\",tp_rank=\"0\"}} {unified}"
        );
        let _ = writeln!(
            out,
            "{name}{{engine_type=\"draft\",model_name=\"{model}\",tp_rank=\"0\"}} 1.0"
        );
    }
    out
}

/// TensorRT-LLM's `/prometheus/metrics`: the `trtllm_` spec counters and
/// gauges (names from its `MetricsCollector`).
pub(crate) fn render_trtllm(t: &GroundTruth, model: &str) -> String {
    let labels = format!(
        "engine_type=\"trtllm\",model_name=\"{}\"",
        escape_label(model)
    );
    let mut out = String::new();
    for (name, kind, value) in [
        (
            "trtllm_spec_decode_num_draft_tokens_total",
            "counter",
            t.proposed as f64,
        ),
        (
            "trtllm_spec_decode_num_accepted_tokens_total",
            "counter",
            t.accepted as f64,
        ),
        (
            "trtllm_spec_decode_acceptance_length",
            "gauge",
            acceptance_length(t),
        ),
    ] {
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name}{{{labels}}} {value:?}");
    }
    out
}

/// TensorRT-LLM's JSON `/metrics`: the iterations since the last read (the
/// queue is drained on read), here one entry per read holding everything
/// the server did since the previous one; `iter` numbers the reads.
pub(crate) fn trtllm_iteration_stats(iter: u64, since_last: &GroundTruth) -> String {
    let d = since_last;
    serde_json::json!([{
        "gpuMemUsage": 56401920000u64,
        "inflightBatchingStats": {},
        "iter": iter,
        "iterLatencyMS": 16.5,
        "kvCacheStats": {},
        "newActiveRequestsQueueLatencyMS": 0.0,
        "specDecodingStats": {
            "numDraftTokens": d.proposed,
            "numAcceptedTokens": d.accepted,
            "numRequestsWithDraftTokens": d.steps,
            "acceptanceLength": acceptance_length(d),
            "iterLatencyMS": 16.5,
            "draftOverhead": 0.1,
        }
    }])
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth(steps: u64, accepted: u64) -> RequestTruth {
        RequestTruth {
            model: String::new(),
            first_content_sent_ns: None,
            connection: 0,
            conversation: "c".into(),
            turns: 1,
            category: None,
            prompt_tokens: 3,
            completion_tokens: (steps + accepted) as u32,
            steps,
            accepted,
            proposed: steps * 2,
            ttft_ms: 0.0,
            truncated: false,
        }
    }

    #[test]
    fn record_pools_histogram_and_positions() {
        let mut g = GroundTruth::new(2);
        g.record(truth(3, 4), &[1, 0, 2]); // 1 step accepted 0, 2 steps accepted 2
        g.record(truth(1, 1), &[0, 1, 0]);
        assert_eq!(g.histogram, vec![1, 1, 2]);
        assert_eq!(g.accepted_per_pos, vec![3, 2]);
        assert_eq!(g.accepted_per_pos.iter().sum::<u64>(), g.accepted);
        assert_eq!(g.requests, 2);
        assert_eq!(g.completion_tokens, 9);
        let base = g.counters();
        assert!(base.requests_log.is_empty());
        g.record(truth(1, 1), &[0, 1, 0]);
        let since = g.counters_since(&base);
        assert_eq!((since.requests, since.steps, since.accepted), (1, 1, 1));
        assert_eq!(since.histogram, vec![0, 1, 0]);
        assert_eq!(since.accepted_per_pos, vec![1, 0]);
    }

    #[test]
    fn render_has_help_type_and_values() {
        let mut g = GroundTruth::new(2);
        g.record(truth(3, 4), &[1, 0, 2]);
        let text = Exposition {
            truth: &g,
            model: "m\"x",
            running: 1,
            llamacpp: true,
            created_unix: 1.7e9,
        }
        .render();
        assert!(text.contains("# TYPE vllm:spec_decode_num_drafts_total counter\n"));
        assert!(text.contains("# TYPE vllm:spec_decode_num_drafts_created gauge\n"));
        assert!(text.contains(
            "vllm:spec_decode_num_drafts_created{model_name=\"m\\\"x\",engine=\"0\"} 1.700e9\n"
        ));
        assert!(text.contains(
            "vllm:spec_decode_num_drafts_total{model_name=\"m\\\"x\",engine=\"0\"} 3.0\n"
        ));
        assert!(text.contains("position=\"1\"} 2.0\n"));
        assert!(text.contains("# TYPE vllm:num_requests_running gauge\n"));
        assert!(text.contains("llamacpp:spec_decode_num_drafts_total 3\n"));
        assert!(text.contains("llamacpp:tokens_predicted_total 7\n"));
        assert!(text.contains(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 2\n"
        ));
        // Nothing drafted yet: no per-position series, as llama-server.
        let empty = GroundTruth::new(2);
        let text = Exposition {
            truth: &empty,
            model: "m",
            running: 0,
            llamacpp: true,
            created_unix: 1.7e9,
        }
        .render();
        assert!(!text.contains("llamacpp:spec_decode_num_accepted_tokens_per_pos"));
        assert!(text.contains("llamacpp:tokens_predicted_total 0\n"));
        assert!(text.ends_with('\n'));
    }
}
