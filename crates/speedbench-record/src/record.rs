//! The in-memory form of one request record.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::custom::CustomValue;

/// One request (one turn of one conversation) as the client measured it.
///
/// This is the unit every speedbench crate agrees on: the client produces it,
/// [`crate::RecordWriter`] stores it as one Parquet row, and the metrics and
/// report crates read it back with [`crate::read_records`].
///
/// Durations are integer nanoseconds taken from a monotonic clock; the two
/// wall-clock timestamps exist only to place the request on a timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RequestRecord {
    /// Identifier of the run this request belongs to.
    pub run_id: String,
    /// Position of the request in dispatch order within the run (0-based).
    pub request_index: u64,
    /// Conversation (dataset row) identifier, e.g. SPEED-Bench's `question_id`.
    pub conversation_id: String,
    /// Turn of the conversation this request carried (0-based).
    pub turn_index: u32,
    /// Dataset name, e.g. `speed_bench_qualitative` or the input file stem.
    pub dataset: String,
    /// Category (SPEED-Bench domain or entropy tier) of the row, if known.
    pub category: Option<String>,
    /// Model name sent in the request.
    pub model: String,
    /// True for warmup requests, which every statistic excludes.
    pub warmup: bool,
    /// Wall-clock time the request was sent, nanoseconds since the Unix epoch.
    pub start_unix_ns: i64,
    /// Wall-clock time the response ended, nanoseconds since the Unix epoch.
    pub end_unix_ns: i64,
    /// Time from sending the request to the first output-bearing byte chunk.
    pub ttft_ns: Option<u64>,
    /// Gaps between consecutive output-bearing chunks after the first.
    ///
    /// A chunk may carry several tokens (a verify step usually emits its
    /// accepted tokens together), so these are inter-chunk gaps.
    pub inter_chunk_latencies_ns: Vec<u64>,
    /// Time from sending the request to the end of the response.
    pub e2e_latency_ns: u64,
    /// Prompt tokens reported by the server's `usage`.
    pub prompt_tokens: Option<u64>,
    /// Completion tokens reported by the server's `usage` (or `timings`).
    pub completion_tokens: Option<u64>,
    /// Number of output-bearing chunks received.
    pub output_chunks: u64,
    /// Server-reported reason the generation stopped.
    pub finish_reason: Option<String>,
    /// HTTP status of the response, when one arrived.
    pub http_status: Option<u16>,
    /// Error classification; `None` means the request succeeded.
    pub error_kind: Option<ErrorKind>,
    /// Human-readable error detail (never contains credentials).
    pub error_message: Option<String>,
    /// The generated text (content plus reasoning), used by lossless checks.
    pub output_text: String,
    /// SHA-256 (lowercase hex) of what the dataset gave this request: the
    /// conversation's preamble and its user turns up to this one (not the
    /// live replies), so two runs can show they asked the same things.
    /// `None` in files written before the column existed.
    #[serde(default)]
    pub prompt_sha256: Option<String>,
    /// Speculative-decoding statistics, when the server reported them.
    pub spec: Option<SpecDecodeStats>,
    /// Why the server's speculative-decoding payload was left out of every
    /// acceptance figure (then `spec` is `None`): zero verify steps with
    /// drafts, negative derived steps, a missing count, broken invariants.
    /// `None` when the payload was used or there was none.
    #[serde(default)]
    pub spec_dropped: Option<String>,
    /// The engine's own tokens decoded per iteration of this request
    /// (TensorRT-LLM's per-choice `avg_decoded_tokens_per_iter`). It is the
    /// acceptance length only when every iteration verified a draft.
    #[serde(default)]
    pub tokens_per_iteration: Option<f64>,
    /// Server-side timings, when the server reported them (llama.cpp).
    pub server_timings: Option<ServerTimings>,
    /// How many times the request was written again after its first write:
    /// 0 for a request sent once. A request is written again only where the
    /// server provably never read it (it reset a kept-alive connection
    /// before any byte of an answer); its times count from the first write.
    #[serde(default)]
    pub resends: u32,
    /// How the request's connection was had and its bytes went and came
    /// (AIPerf's HTTP trace phases), for a request the lean HTTP/1.1 client
    /// read a response head of and then read to its end or saw fail on the
    /// wire; `None` for one that failed before a head, timed out or was
    /// cancelled, and over TLS and on hyper's client (`--http-client
    /// hyper`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_phases: Option<HttpPhases>,
    /// Which of the run's several servers (`--url`, 0-based) served the
    /// request; `None` for a run of one server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_index: Option<u32>,
    /// Values of caller-defined columns (names start with `x_`; see
    /// [`crate::custom`]), by column name. Columns a record leaves out are
    /// stored as null.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom: BTreeMap<String, CustomValue>,
}

impl RequestRecord {
    /// True when the request finished without error.
    pub fn is_success(&self) -> bool {
        self.error_kind.is_none()
    }
}

/// Why a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The TCP connection could not be opened or broke.
    Connection,
    /// The request exceeded its timeout.
    Timeout,
    /// The server answered with a non-2xx status.
    HttpStatus,
    /// The server sent an error object inside a stream or body.
    ServerError,
    /// The response could not be parsed.
    Protocol,
    /// The run was interrupted while the request was in flight.
    Cancelled,
    /// Never sent: an earlier turn of the same conversation failed, so
    /// there was no honest reply to carry as history.
    Skipped,
    /// Cancelled on purpose by the client (`--request-cancellation-rate`):
    /// counted apart from failures and kept out of latency figures.
    ClientCancelled,
}

impl ErrorKind {
    /// Every kind, in a stable order.
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Connection,
        ErrorKind::Timeout,
        ErrorKind::HttpStatus,
        ErrorKind::ServerError,
        ErrorKind::Protocol,
        ErrorKind::Cancelled,
        ErrorKind::Skipped,
        ErrorKind::ClientCancelled,
    ];

    /// The stable name stored in Parquet.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Connection => "connection",
            ErrorKind::Timeout => "timeout",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::ServerError => "server_error",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Skipped => "skipped",
            ErrorKind::ClientCancelled => "client_cancelled",
        }
    }

    /// Parses a stored name back.
    pub fn parse(name: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// Which wire format the speculative-decoding numbers were read from.
///
/// The four engines speedbench reads itself, and [`SpecSource::Other`] for an
/// engine a downstream crate reads (its adapter names it); new engines need
/// no change to this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SpecSource {
    /// vLLM's per-request `metrics.speculative_decoding` object.
    Vllm,
    /// llama.cpp's `timings.draft_n` / `timings.draft_n_accepted`.
    LlamaCpp,
    /// SGLang's `sglext.spec_tokens_details` or `meta_info`.
    Sglang,
    /// TensorRT-LLM's per-choice `speculative_decoding` object.
    TensorRtLlm,
    /// Another engine, by its stable name (lowercase letters, digits and
    /// `_`; see [`SpecSource::named`]).
    Other(&'static str),
}

impl SpecSource {
    /// Every built-in source, in a stable order.
    pub const ALL: [SpecSource; 4] = [
        SpecSource::Vllm,
        SpecSource::LlamaCpp,
        SpecSource::Sglang,
        SpecSource::TensorRtLlm,
    ];

    /// The stable name stored in Parquet.
    pub fn as_str(self) -> &'static str {
        match self {
            SpecSource::Vllm => "vllm",
            SpecSource::LlamaCpp => "llamacpp",
            SpecSource::Sglang => "sglang",
            SpecSource::TensorRtLlm => "tensorrt_llm",
            SpecSource::Other(name) => name,
        }
    }

    /// Parses the name of a built-in source.
    pub fn parse(name: &str) -> Option<SpecSource> {
        SpecSource::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The source of that name: a built-in one, or [`SpecSource::Other`]
    /// for any other valid name (interned: each distinct name is stored
    /// once per process). `None` for a name that is empty, longer than 64
    /// bytes, or holds anything but lowercase ASCII letters, digits and `_`.
    ///
    /// ```
    /// use speedbench_record::SpecSource;
    /// assert_eq!(SpecSource::named("vllm"), Some(SpecSource::Vllm));
    /// let mine = SpecSource::named("my_engine").unwrap();
    /// assert_eq!(mine, SpecSource::Other("my_engine"));
    /// assert_eq!(mine.as_str(), "my_engine");
    /// assert_eq!(SpecSource::named("My Engine"), None);
    /// ```
    pub fn named(name: &str) -> Option<SpecSource> {
        if let Some(builtin) = SpecSource::parse(name) {
            return Some(builtin);
        }
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        valid.then(|| SpecSource::Other(intern(name)))
    }
}

/// One `&'static str` per distinct name, so [`SpecSource`] stays `Copy`.
fn intern(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock, PoisonError};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(leaked);
    leaked
}

impl Serialize for SpecSource {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SpecSource {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        // The names older JSON files used (serde's snake_case of the variants).
        let known = match name.as_str() {
            "llama_cpp" => "llamacpp",
            "tensor_rt_llm" => "tensorrt_llm",
            other => other,
        };
        SpecSource::named(known)
            .ok_or_else(|| serde::de::Error::custom(format!("invalid spec source name {name:?}")))
    }
}

/// Speculative-decoding statistics of one request.
///
/// Invariants (checked by the adapters that build it): `accepted_draft_tokens
/// <= proposed_draft_tokens`; when a histogram is present its counts sum to
/// `verify_steps` and its index-weighted sum equals `accepted_draft_tokens`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SpecDecodeStats {
    /// Where the numbers came from.
    pub source: Option<SpecSource>,
    /// Draft tokens the target accepted (the bonus token is not counted).
    pub accepted_draft_tokens: u64,
    /// Draft tokens proposed to the target.
    pub proposed_draft_tokens: u64,
    /// Verify steps (target forward passes that checked a draft).
    ///
    /// `None` when the engine gives no way to know it.
    pub verify_steps: Option<u64>,
    /// Configured draft budget `k`, when reported.
    pub num_spec_tokens: Option<u32>,
    /// Dense histogram: entry `j` counts verify steps that accepted exactly
    /// `j` drafts. Empty when the engine did not report one.
    pub acceptance_histogram: Vec<u64>,
    /// Accepted drafts of each verify step, in order (vLLM `detailed`).
    pub per_step_accepted: Option<Vec<u32>>,
    /// Proposed drafts of each verify step, in order (vLLM `detailed`).
    pub per_step_drafted: Option<Vec<u32>>,
}

/// Server-side timings of one request, as llama.cpp's `timings` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ServerTimings {
    /// Prompt tokens processed (not served from the prompt cache).
    pub prompt_n: Option<u64>,
    /// Prompt tokens served from the prompt cache.
    pub cache_n: Option<u64>,
    /// Milliseconds spent on prompt processing.
    pub prompt_ms: Option<f64>,
    /// Prompt processing speed, tokens per second.
    pub prompt_per_second: Option<f64>,
    /// Tokens generated.
    pub predicted_n: Option<u64>,
    /// Milliseconds spent generating.
    pub predicted_ms: Option<f64>,
    /// Generation (decode) speed, tokens per second.
    pub predicted_per_second: Option<f64>,
}

/// The HTTP phases of one request, k6's and HAR's as AIPerf 0.13.0 names
/// them (`http_req_*`), in nanoseconds from the client's monotonic clock.
///
/// `sending + waiting + receiving` runs from the request's first write to
/// its last byte read: the record's `e2e_latency_ns` for a request written
/// once. AIPerf's `http_req_duration`, `http_req_connection_overhead` and
/// `http_req_total` are sums of these (`speedbench-metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HttpPhases {
    /// `http_req_blocked`: from the request's turn to go until its
    /// connection was in hand (an idle one, checked open) or began to
    /// connect. speedbench's pool has no limit to queue behind, so this is
    /// the pool's own work; for a request written again it includes the
    /// write the server reset unread.
    pub blocked_ns: u64,
    /// `http_req_dns_lookup`: resolving the host name (0 for an IP
    /// literal or a reused connection).
    pub dns_lookup_ns: u64,
    /// `http_req_connecting`: opening the TCP connection (0 when reused).
    pub connecting_ns: u64,
    /// `http_req_sending`: the request's first write to its last byte
    /// handed to the kernel.
    pub sending_ns: u64,
    /// `http_req_waiting` (TTFB): the last byte sent to the arrival of the
    /// body's first byte (the head's for an empty body), not to the first
    /// token.
    pub waiting_ns: u64,
    /// `http_req_receiving`: from the body's first byte to the response's
    /// last (0 when one read brought the body).
    pub receiving_ns: u64,
    /// `http_req_connection_reused`: the request went out on a kept-alive
    /// connection.
    pub connection_reused: bool,
    /// `http_req_data_sent`: bytes of the request's body.
    pub bytes_sent: u64,
    /// `http_req_data_received`: bytes of the response's body, chunked
    /// framing removed.
    pub bytes_received: u64,
    /// `http_req_chunks_sent`: writes that carried the request.
    pub chunks_sent: u64,
    /// `http_req_chunks_received`: reads that brought body bytes.
    pub chunks_received: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_sources_round_trip_by_name_including_other_engines() {
        for (json, source) in [
            ("\"vllm\"", SpecSource::Vllm),
            ("\"llamacpp\"", SpecSource::LlamaCpp),
            ("\"llama_cpp\"", SpecSource::LlamaCpp),
            ("\"tensor_rt_llm\"", SpecSource::TensorRtLlm),
            ("\"my_engine\"", SpecSource::Other("my_engine")),
        ] {
            let back: SpecSource = serde_json::from_str(json).unwrap();
            assert_eq!(back, source, "{json}");
            let text = serde_json::to_string(&back).unwrap();
            assert_eq!(serde_json::from_str::<SpecSource>(&text).unwrap(), source);
        }
        assert!(serde_json::from_str::<SpecSource>("\"Bad Name\"").is_err());
    }
}
