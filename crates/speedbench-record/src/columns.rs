//! The records file's column names, one constant per column of
//! `record_schema()` (documented column by column in
//! `docs/record-schema.md`).
//!
//! Use them instead of string literals wherever a column is named, e.g. to
//! decode only some columns:
//!
//! ```
//! use speedbench_record::columns;
//! let wanted = [columns::CATEGORY, columns::WARMUP, columns::SPEC_VERIFY_STEPS];
//! assert_eq!(wanted, ["category", "warmup", "spec_verify_steps"]);
//! assert_eq!(columns::ALL.len(), 52);
//! ```

/// `run_id`: run identifier (utf8).
pub const RUN_ID: &str = "run_id";

/// `request_index`: dispatch order within the run, warmup included (uint64).
pub const REQUEST_INDEX: &str = "request_index";

/// `conversation_id`: dataset row id, `question_id` (utf8).
pub const CONVERSATION_ID: &str = "conversation_id";

/// `turn_index`: turn of the conversation, 0-based (uint32).
pub const TURN_INDEX: &str = "turn_index";

/// `dataset`: dataset name, the input file stem (utf8).
pub const DATASET: &str = "dataset";

/// `category`: SPEED-Bench category or entropy tier (utf8, nullable).
pub const CATEGORY: &str = "category";

/// `model`: the `model` sent (utf8).
pub const MODEL: &str = "model";

/// `warmup`: true for warmup requests, which every statistic excludes (bool).
pub const WARMUP: &str = "warmup";

/// `start_time`: request sent: its first write to the connection (timestamp ns, UTC).
pub const START_TIME: &str = "start_time";

/// `end_time`: response ended: the read that returned its last bytes (timestamp ns, UTC).
pub const END_TIME: &str = "end_time";

/// `ttft_ns`: request sent to the first chunk carrying output text; null without streaming (uint64, nullable).
pub const TTFT_NS: &str = "ttft_ns";

/// `inter_chunk_latencies_ns`: gaps between consecutive output chunks (`list<uint64>`).
pub const INTER_CHUNK_LATENCIES_NS: &str = "inter_chunk_latencies_ns";

/// `e2e_latency_ns`: request sent to the last byte, `end_time - start_time` (uint64).
pub const E2E_LATENCY_NS: &str = "e2e_latency_ns";

/// `prompt_tokens`: `usage.prompt_tokens` (uint64, nullable).
pub const PROMPT_TOKENS: &str = "prompt_tokens";

/// `completion_tokens`: `usage.completion_tokens`, else llama.cpp `timings.predicted_n` (uint64, nullable).
pub const COMPLETION_TOKENS: &str = "completion_tokens";

/// `output_chunks`: chunks that carried output text (uint64).
pub const OUTPUT_CHUNKS: &str = "output_chunks";

/// `finish_reason`: the finish reason the server reported (utf8, nullable).
pub const FINISH_REASON: &str = "finish_reason";

/// `http_status`: response status, when a response arrived (uint16, nullable).
pub const HTTP_STATUS: &str = "http_status";

/// `error_kind`: null on success, else the kind of failure (utf8, nullable).
pub const ERROR_KIND: &str = "error_kind";

/// `error_message`: what went wrong, never a credential (utf8, nullable).
pub const ERROR_MESSAGE: &str = "error_message";

/// `output_text`: the generated text, reasoning then content (utf8).
pub const OUTPUT_TEXT: &str = "output_text";

/// `spec_source`: who reported spec-decode stats; null when none did (utf8, nullable).
pub const SPEC_SOURCE: &str = "spec_source";

/// `spec_accepted_draft_tokens`: accepted drafts, bonus tokens not counted (uint64, nullable).
pub const SPEC_ACCEPTED_DRAFT_TOKENS: &str = "spec_accepted_draft_tokens";

/// `spec_proposed_draft_tokens`: proposed drafts (uint64, nullable).
pub const SPEC_PROPOSED_DRAFT_TOKENS: &str = "spec_proposed_draft_tokens";

/// `spec_verify_steps`: verify steps; llama.cpp: `predicted_n - draft_n_accepted` (uint64, nullable).
pub const SPEC_VERIFY_STEPS: &str = "spec_verify_steps";

/// `spec_num_spec_tokens`: draft budget k, when reported (uint32, nullable).
pub const SPEC_NUM_SPEC_TOKENS: &str = "spec_num_spec_tokens";

/// `spec_acceptance_histogram`: entry j = steps that accepted exactly j drafts (`list<uint64>`, nullable).
pub const SPEC_ACCEPTANCE_HISTOGRAM: &str = "spec_acceptance_histogram";

/// `spec_per_step_accepted`: vLLM `detailed`: accepted drafts per step (`list<uint32>`, nullable).
pub const SPEC_PER_STEP_ACCEPTED: &str = "spec_per_step_accepted";

/// `spec_per_step_drafted`: vLLM `detailed`: proposed drafts per step (`list<uint32>`, nullable).
pub const SPEC_PER_STEP_DRAFTED: &str = "spec_per_step_drafted";

/// `timings_prompt_n`: llama.cpp `timings.prompt_n` (uint64, nullable).
pub const TIMINGS_PROMPT_N: &str = "timings_prompt_n";

/// `timings_cache_n`: llama.cpp `timings.cache_n` (uint64, nullable).
pub const TIMINGS_CACHE_N: &str = "timings_cache_n";

/// `timings_prompt_ms`: llama.cpp `timings.prompt_ms` (float64, nullable).
pub const TIMINGS_PROMPT_MS: &str = "timings_prompt_ms";

/// `timings_prompt_per_second`: llama.cpp `timings.prompt_per_second` (float64, nullable).
pub const TIMINGS_PROMPT_PER_SECOND: &str = "timings_prompt_per_second";

/// `timings_predicted_n`: llama.cpp `timings.predicted_n` (uint64, nullable).
pub const TIMINGS_PREDICTED_N: &str = "timings_predicted_n";

/// `timings_predicted_ms`: llama.cpp `timings.predicted_ms` (float64, nullable).
pub const TIMINGS_PREDICTED_MS: &str = "timings_predicted_ms";

/// `timings_predicted_per_second`: llama.cpp `timings.predicted_per_second` (float64, nullable).
pub const TIMINGS_PREDICTED_PER_SECOND: &str = "timings_predicted_per_second";

/// `prompt_sha256`: SHA-256 (hex) of what the dataset gave this request:
/// its conversation's preamble and user turns up to this one, not the live
/// replies (utf8, nullable; absent from files written before it existed).
pub const PROMPT_SHA256: &str = "prompt_sha256";

/// `spec_dropped`: why the server's acceptance payload was left out of every
/// acceptance figure (zero verify steps with drafts, negative derived steps,
/// a missing count, broken invariants); null when it was used or when there
/// was none (utf8, nullable).
pub const SPEC_DROPPED: &str = "spec_dropped";

/// `tokens_per_iteration`: the engine's own tokens decoded per iteration of
/// this request (TensorRT-LLM's `avg_decoded_tokens_per_iter`); acceptance
/// length only when every iteration verified a draft (float64, nullable).
pub const TOKENS_PER_ITERATION: &str = "tokens_per_iteration";

/// `resends`: how many times the request was written again after its first
/// write (0: sent once). speedbench writes a request again only where the
/// server provably never read it: it reset a kept-alive connection before
/// any byte of an answer. The record's times count from the first write
/// (uint32, nullable; null, in files written before it existed, reads as 0).
pub const RESENDS: &str = "resends";

/// `server_index`: which of a run's several `--url`s served the request
/// (0-based, in the order given); null for a run of one server (uint32,
/// nullable; absent from files written before it existed).
pub const SERVER_INDEX: &str = "server_index";

/// `http_blocked_ns`: AIPerf's `http_req_blocked`: until the request's connection was in hand or began to connect (uint64, nullable).
pub const HTTP_BLOCKED_NS: &str = "http_blocked_ns";

/// `http_dns_lookup_ns`: `http_req_dns_lookup`: resolving the host; 0 for an IP literal or a reused connection (uint64, nullable).
pub const HTTP_DNS_LOOKUP_NS: &str = "http_dns_lookup_ns";

/// `http_connecting_ns`: `http_req_connecting`: opening the TCP connection; 0 when reused (uint64, nullable).
pub const HTTP_CONNECTING_NS: &str = "http_connecting_ns";

/// `http_sending_ns`: `http_req_sending`: first write to the last byte handed to the kernel (uint64, nullable).
pub const HTTP_SENDING_NS: &str = "http_sending_ns";

/// `http_waiting_ns`: `http_req_waiting` (TTFB): last byte sent to the body's first byte (uint64, nullable).
pub const HTTP_WAITING_NS: &str = "http_waiting_ns";

/// `http_receiving_ns`: `http_req_receiving`: the body's first byte to the response's last (uint64, nullable).
pub const HTTP_RECEIVING_NS: &str = "http_receiving_ns";

/// `http_connection_reused`: `http_req_connection_reused`: sent on a kept-alive connection (bool, nullable).
pub const HTTP_CONNECTION_REUSED: &str = "http_connection_reused";

/// `http_bytes_sent`: `http_req_data_sent`: bytes of the request's body (uint64, nullable).
pub const HTTP_BYTES_SENT: &str = "http_bytes_sent";

/// `http_bytes_received`: `http_req_data_received`: bytes of the response's body, chunked framing removed (uint64, nullable).
pub const HTTP_BYTES_RECEIVED: &str = "http_bytes_received";

/// `http_chunks_sent`: `http_req_chunks_sent`: writes that carried the request (uint64, nullable).
pub const HTTP_CHUNKS_SENT: &str = "http_chunks_sent";

/// `http_chunks_received`: `http_req_chunks_received`: reads that brought body bytes (uint64, nullable).
pub const HTTP_CHUNKS_RECEIVED: &str = "http_chunks_received";

/// The HTTP phase columns ([`crate::HttpPhases`]), null where none were
/// measured (over TLS, on hyper's client, before a response head, for a
/// request timed out or cancelled).
pub const HTTP_PHASES: [&str; 11] = [
    HTTP_BLOCKED_NS,
    HTTP_DNS_LOOKUP_NS,
    HTTP_CONNECTING_NS,
    HTTP_SENDING_NS,
    HTTP_WAITING_NS,
    HTTP_RECEIVING_NS,
    HTTP_CONNECTION_REUSED,
    HTTP_BYTES_SENT,
    HTTP_BYTES_RECEIVED,
    HTTP_CHUNKS_SENT,
    HTTP_CHUNKS_RECEIVED,
];

/// Columns added after the first schema: a file without them still reads,
/// with nulls.
pub const ADDED_LATER: [&str; 16] = [
    PROMPT_SHA256,
    SPEC_DROPPED,
    TOKENS_PER_ITERATION,
    RESENDS,
    SERVER_INDEX,
    HTTP_BLOCKED_NS,
    HTTP_DNS_LOOKUP_NS,
    HTTP_CONNECTING_NS,
    HTTP_SENDING_NS,
    HTTP_WAITING_NS,
    HTTP_RECEIVING_NS,
    HTTP_CONNECTION_REUSED,
    HTTP_BYTES_SENT,
    HTTP_BYTES_RECEIVED,
    HTTP_CHUNKS_SENT,
    HTTP_CHUNKS_RECEIVED,
];

/// Every column, in schema order.
pub const ALL: [&str; 52] = [
    RUN_ID,
    REQUEST_INDEX,
    CONVERSATION_ID,
    TURN_INDEX,
    DATASET,
    CATEGORY,
    MODEL,
    WARMUP,
    START_TIME,
    END_TIME,
    TTFT_NS,
    INTER_CHUNK_LATENCIES_NS,
    E2E_LATENCY_NS,
    PROMPT_TOKENS,
    COMPLETION_TOKENS,
    OUTPUT_CHUNKS,
    FINISH_REASON,
    HTTP_STATUS,
    ERROR_KIND,
    ERROR_MESSAGE,
    OUTPUT_TEXT,
    SPEC_SOURCE,
    SPEC_ACCEPTED_DRAFT_TOKENS,
    SPEC_PROPOSED_DRAFT_TOKENS,
    SPEC_VERIFY_STEPS,
    SPEC_NUM_SPEC_TOKENS,
    SPEC_ACCEPTANCE_HISTOGRAM,
    SPEC_PER_STEP_ACCEPTED,
    SPEC_PER_STEP_DRAFTED,
    TIMINGS_PROMPT_N,
    TIMINGS_CACHE_N,
    TIMINGS_PROMPT_MS,
    TIMINGS_PROMPT_PER_SECOND,
    TIMINGS_PREDICTED_N,
    TIMINGS_PREDICTED_MS,
    TIMINGS_PREDICTED_PER_SECOND,
    PROMPT_SHA256,
    SPEC_DROPPED,
    TOKENS_PER_ITERATION,
    RESENDS,
    SERVER_INDEX,
    HTTP_BLOCKED_NS,
    HTTP_DNS_LOOKUP_NS,
    HTTP_CONNECTING_NS,
    HTTP_SENDING_NS,
    HTTP_WAITING_NS,
    HTTP_RECEIVING_NS,
    HTTP_CONNECTION_REUSED,
    HTTP_BYTES_SENT,
    HTTP_BYTES_RECEIVED,
    HTTP_CHUNKS_SENT,
    HTTP_CHUNKS_RECEIVED,
];

#[cfg(all(test, feature = "parquet"))]
mod tests {
    use super::*;

    #[test]
    fn the_constants_are_the_schemas_columns_in_order() {
        let schema = crate::record_schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ALL);
    }
}
