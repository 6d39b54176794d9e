//! A simulated OpenAI-compatible inference server with a configurable,
//! deterministic speculative-decoding model.
//!
//! It is the test double for the speedbench client and the default demo
//! server. It speaks HTTP/1.1 (keep-alive) on tokio + hyper, with one task per
//! connection, so thousands of concurrent connections are fine.
//!
//! # Endpoints
//! - `POST /v1/chat/completions`, `POST /v1/completions`: honour `max_tokens` /
//!   `max_completion_tokens` (the latter wins), `ignore_eos` (with a
//!   `max_tokens` of at most 131072: exactly that many tokens, as in vLLM and
//!   llama.cpp), `min_tokens` (vLLM's: at least that many, at most
//!   `max_tokens`, a larger one refused as vLLM does), `stream` and `stream_options.include_usage`. Other request
//!   fields (including `model`, `n`, sampling parameters) are ignored; there is
//!   always one choice. Bad JSON or a bad shape gives 400
//!   `{"error":{"message":…,"type":"invalid_request_error","code":400}}`.
//! - `GET /v1/models`, `GET /health` (`{"status":"ok"}`), `GET /metrics`
//!   (Prometheus text 0.0.4: `vllm:spec_decode_*` counters, token and request
//!   counters, `vllm:num_requests_running`; plus `llamacpp:spec_decode_*` for the
//!   llama.cpp flavours). Unknown paths give a 404 JSON error.
//! - `POST /tokenize` and `POST /detokenize` (every flavour but TensorRT-LLM,
//!   whose `trtllm-serve` has none), in the flavour's engine's shape: vLLM's
//!   and SGLang's `{prompt}`, llama.cpp's `{content}`, answering `tokens`;
//!   the text back as `prompt`, `text` (SGLang) or `content` (llama.cpp).
//!   Its tokens are the words it counts as prompt tokens, numbered as first
//!   seen.
//! - `GET /debug/requests`: `{"requests": [...]}`, the ground truth's
//!   per-request log ([`RequestTruth`] as JSON), for checking a client that
//!   runs in another process (for example its TTFT against the moment the
//!   first content frame was sent).
//!
//! # The model
//! - **Prompt tokens** are the whitespace-separated word count of all message
//!   contents (no chat-template overhead).
//! - **Output text** is a sequence of tokens, each `" word"` from a built-in
//!   word list, drawn by a SplitMix64 PRNG seeded only by `(seed, full prompt)`.
//!   The natural length is drawn in `[output_tokens_min, output_tokens_max]`
//!   and capped by `max_tokens` (`finish_reason` is then `"length"`, else
//!   `"stop"`). The text does not depend on the acceptance profile, so the
//!   same prompt gives byte-identical text with and without speculation, and
//!   regardless of arrival order or concurrency.
//! - **Acceptance** uses a separate PRNG stream. Each verify step accepts `j`
//!   drafts (see [`AcceptanceProfile`]) and emits `j + 1` tokens (the last step
//!   is truncated to the remaining length); each step proposes `k` drafts. So
//!   `steps + accepted == completion_tokens` whenever `k > 0`. With `k == 0` no
//!   drafts exist: spec counters stay zero and every step emits one token.
//! - **Category**: real servers never see categories, so the simulator derives
//!   one from the prompt. If the first user message (the prompt for
//!   `/v1/completions`) starts with `[<name>` followed by whitespace or `]`
//!   (e.g. `"[coding 0] Write…"`) and `<name>` is a key of
//!   [`SimConfig::categories`], that profile is used; otherwise
//!   [`SimConfig::default_spec`].
//! - **Timing**: streamed content starts `ttft_ms` after the request and each
//!   further verify step follows `step_ms` later (frames are scheduled from the
//!   request start). Chat streams send the role chunk immediately, before the
//!   TTFT delay, so clients must time the first *content*. Non-streaming
//!   responses arrive after the same total delay.
//!
//! # Per-request statistics by flavour ([`SpecFlavor`])
//! - `Vllm`: root `metrics.speculative_decoding` with `acceptance_histogram`
//!   (dense, length k+1), `acceptance_histogram_by_draft_length`,
//!   `num_spec_steps`, `num_accepted_draft_tokens`, `num_draft_tokens`,
//!   `num_spec_tokens`, `mean_acceptance_length`, `draft_acceptance_rate`, and
//!   with [`SimConfig::detailed`] `per_step_accepted` / `per_step_drafted`.
//!   Streaming: only on the `include_usage` chunk (`"choices":[]`); without
//!   `include_usage` a stream carries no vLLM stats, as in vLLM.
//! - `LlamaCpp`: root `timings` (`cache_n` 0, `prompt_n`, `prompt_ms`,
//!   `prompt_per_token_ms`, `prompt_per_second`, `predicted_n`, `predicted_ms`,
//!   `predicted_per_token_ms`, `predicted_per_second`, and `draft_n` /
//!   `draft_n_accepted` only when something was drafted). Streaming: on the
//!   finish chunk without `include_usage`, on the usage chunk with it.
//! - `Both`: both of the above. `None`: nothing per request; only `/metrics`.
//!
//! # Faults
//! [`SimConfig::faults`] injects deterministic failures: connection resets
//! mid-stream, HTTP 429/500/503 with OpenAI error bodies, malformed and
//! non-UTF-8 chunks, stalls, missing or wrong-typed spec-decode fields, and
//! `/metrics` counters that restart from zero. Each [`FaultPlan`] selects
//! requests by arrival number or by a hash of the prompt; every faulted
//! request is listed in [`GroundTruth::faults`]. See [`FaultKind`].
//!
//! # Accounting
//! [`SimServer::ground_truth`] and `/metrics` count a request once it
//! completes: a stream when its final `data: [DONE]` frame is handed to the
//! connection, a non-streaming request when its response is produced. A
//! client that disconnects mid-stream is not counted. The per-request log
//! grows with every request (fine for benchmarks, not for months of uptime).
//!
//! # Example
//! ```
//! use speedbench_sim::{SimConfig, SimServer};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = SimServer::start(SimConfig::default(), "127.0.0.1:0".parse()?).await?;
//! let body = r#"{"messages":[{"role":"user","content":"[coding 0] Say hi"}],"max_tokens":8}"#;
//! let mut tcp = tokio::net::TcpStream::connect(server.local_addr()).await?;
//! let request = format!(
//!     "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
//!      Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
//!     body.len()
//! );
//! tcp.write_all(request.as_bytes()).await?;
//! let mut response = String::new();
//! tcp.read_to_string(&mut response).await?;
//! assert!(response.starts_with("HTTP/1.1 200"));
//! assert!(response.contains(r#""finish_reason":"length""#));
//! assert!(response.contains(r#""speculative_decoding""#));
//!
//! let truth = server.ground_truth();
//! assert_eq!(truth.requests, 1);
//! assert_eq!(truth.completion_tokens, 8);
//! assert_eq!(truth.steps + truth.accepted, 8);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```

#![doc(test(attr(deny(warnings))))]
#![warn(missing_docs)]

mod config;
mod faults;
mod metrics;
mod model;
mod precise_timer;
mod respond;
mod seed;
mod server;
mod tokenize;
mod wire;

use std::net::SocketAddr;

pub use config::{AcceptanceProfile, Chunking, SimConfig, SpecFlavor};
pub use faults::{FaultKind, FaultPlan, FaultTruth};
pub use metrics::{ArrivalTruth, GroundTruth, RequestTruth};
pub use server::{SimServer, run_until};

/// Errors from starting the simulator.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The configuration failed [`SimConfig::validate`].
    #[error("invalid simulator config: {0}")]
    InvalidConfig(String),
    /// A configuration file could not be read or is not a configuration.
    #[error("{path}: {message}")]
    ConfigFile {
        /// The file.
        path: std::path::PathBuf,
        /// What went wrong (the I/O error, or the JSON error with its line).
        message: String,
    },
    /// Binding or listening on the address failed.
    #[error("failed to listen on {addr}: {source}")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
}
