//! The generation endpoints without the I/O: from a request body to what the
//! response says and when each part of it is due.
//!
//! [`parse_request`] reads and checks a body; [`Reply::new`] simulates the
//! request (its category, text and acceptance) and holds its ground-truth
//! entry; the `Reply` methods build the flavour-specific statistics, the
//! non-streaming body and the timed SSE frames, each with the request's
//! injected fault applied. The server only reads the request, sleeps and
//! hands the bytes to hyper.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use crate::config::{Chunking, SimConfig};
use crate::faults::FaultKind;
use crate::metrics::RequestTruth;
use crate::model::{self, Generation, PromptInfo};
use crate::wire::{self, ChatRequest, CommonParams, CompletionRequest, Endpoint, Meta, Stats};

/// Largest output a request may force with `ignore_eos` (a simulated context limit).
pub(crate) const MAX_FORCED_TOKENS: u32 = 131_072;

/// A delay in milliseconds as a `Duration` (0 for negative or NaN).
pub(crate) fn ms(v: f64) -> Duration {
    Duration::try_from_secs_f64(v / 1e3).unwrap_or(Duration::ZERO)
}

/// Parses a generation request's body and checks its limits; the error is
/// the message of the 400 response.
pub(crate) fn parse_request(
    endpoint: Endpoint,
    body: &[u8],
) -> Result<(PromptInfo, CommonParams), String> {
    let (info, params) = match endpoint {
        Endpoint::Chat => serde_json::from_slice::<ChatRequest>(body)
            .map_err(|e| format!("invalid JSON body: {e}"))
            .and_then(ChatRequest::prompt),
        Endpoint::Completions => serde_json::from_slice::<CompletionRequest>(body)
            .map_err(|e| format!("invalid JSON body: {e}"))
            .and_then(CompletionRequest::prompt),
    }?;
    let max_tokens = params.max_tokens();
    if max_tokens == Some(0) {
        return Err("max_tokens must be at least 1".to_owned());
    }
    if params.ignore_eos() && max_tokens.is_some_and(|m| m > MAX_FORCED_TOKENS) {
        return Err(format!(
            "with ignore_eos, max_tokens must be at most {MAX_FORCED_TOKENS}"
        ));
    }
    Ok((info, params))
}

/// What a scheduled stream does once its frames are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamEnd {
    /// End the body normally.
    Finish,
    /// Break the connection (an injected reset).
    Reset,
    /// Never send anything more (an injected stall).
    Stall,
}

/// A non-streaming response's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FullBody {
    /// The whole body (possibly corrupted by a fault).
    Complete(Bytes),
    /// The first bytes of the body, after which the connection breaks.
    CutThenReset(Bytes),
}

/// One simulated generation request: its output and its ground truth.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// The endpoint it answers.
    pub(crate) endpoint: Endpoint,
    /// The response id (`chatcmpl-simN` / `cmpl-simN`).
    pub(crate) id: String,
    /// The `created` timestamp of every chunk.
    pub(crate) created: u64,
    /// The simulated output.
    pub(crate) generation: Generation,
    /// The ground-truth entry recorded once the request completes.
    pub(crate) truth: RequestTruth,
    /// The injected fault, if any.
    pub(crate) fault: Option<FaultKind>,
}

impl Reply {
    /// Simulates request `index` (counting from 0 in arrival order) with
    /// `fault` injected; `created` is the responses' Unix timestamp.
    pub(crate) fn new(
        cfg: &SimConfig,
        endpoint: Endpoint,
        index: u64,
        info: PromptInfo,
        params: &CommonParams,
        fault: Option<FaultKind>,
        created: u64,
    ) -> Reply {
        // Only a configured category selects a profile (and is recorded).
        let category = info
            .category
            .clone()
            .filter(|c| cfg.categories.contains_key(c));
        let generation = model::generate(
            cfg.seed,
            &info.key,
            cfg.profile_for(category.as_deref()),
            (cfg.output_tokens_min, cfg.output_tokens_max),
            params.max_tokens(),
            params.ignore_eos(),
        );
        let truth = RequestTruth {
            first_content_sent_ns: None,
            conversation: info.first_user,
            turns: info.turns,
            category,
            prompt_tokens: info.prompt_tokens,
            completion_tokens: u32::try_from(generation.tokens.len()).unwrap_or(u32::MAX),
            steps: generation.spec.steps,
            accepted: generation.spec.accepted,
            proposed: generation.spec.proposed,
            ttft_ms: cfg.ttft_ms,
            truncated: generation.truncated,
        };
        let id = match endpoint {
            Endpoint::Chat => format!("chatcmpl-sim{index}"),
            Endpoint::Completions => format!("cmpl-sim{index}"),
        };
        Reply {
            endpoint,
            id,
            created,
            generation,
            truth,
            fault,
        }
    }

    /// Whether the fault makes the request fail (it is then not counted).
    pub(crate) fn fails(&self) -> bool {
        self.fault.is_some_and(|k| k.fails_request())
    }

    fn meta<'a>(&'a self, cfg: &'a SimConfig) -> Meta<'a> {
        Meta {
            endpoint: self.endpoint,
            id: &self.id,
            created: self.created,
            model: &cfg.model,
        }
    }

    fn finish(&self) -> &'static str {
        if self.generation.truncated {
            "length"
        } else {
            "stop"
        }
    }

    fn usage(&self) -> Value {
        wire::usage(self.truth.prompt_tokens, self.truth.completion_tokens)
    }

    /// The per-request statistics of `cfg.flavor` (vLLM's
    /// `speculative_decoding`, llama.cpp's `timings`), corrupted by a
    /// spec-field fault.
    pub(crate) fn stats(&self, cfg: &SimConfig) -> Stats {
        let mut stats = Stats {
            vllm: cfg
                .flavor
                .vllm()
                .then(|| wire::vllm_spec(&self.generation.spec, cfg.detailed)),
            timings: cfg.flavor.llamacpp().then(|| {
                wire::llamacpp_timings(
                    self.truth.prompt_tokens,
                    &self.generation,
                    cfg.ttft_ms,
                    cfg.step_ms,
                )
            }),
        };
        if let Some(kind) = self.fault {
            corrupt_stats(&mut stats, kind);
        }
        stats
    }

    /// When the last decode step is due, from the request's arrival: the
    /// TTFT plus one `step_ms` per step after the first.
    pub(crate) fn last_step_at(&self, cfg: &SimConfig) -> Duration {
        let later_steps = self.generation.iterations.len().saturating_sub(1);
        ms(cfg.ttft_ms) + ms(cfg.step_ms) * u32::try_from(later_steps).unwrap_or(u32::MAX)
    }

    /// The non-streaming body, with a body fault applied: half the JSON
    /// (malformed), bytes that are not UTF-8 in the content, or half the
    /// body and then a reset.
    pub(crate) fn full_body(&self, cfg: &SimConfig) -> FullBody {
        let body = self
            .meta(cfg)
            .full_response(
                &self.generation.text(),
                self.finish(),
                self.usage(),
                self.stats(cfg),
            )
            .to_string();
        match self.fault {
            Some(FaultKind::MalformedJson) => {
                FullBody::Complete(Bytes::from(body[..body.len() / 2].to_owned()))
            }
            Some(FaultKind::NonUtf8) => FullBody::Complete(corrupt_utf8(&body)),
            Some(FaultKind::ResetMidStream { .. }) => {
                FullBody::CutThenReset(Bytes::from(body[..body.len() / 2].to_owned()))
            }
            _ => FullBody::Complete(Bytes::from(body)),
        }
    }

    /// How many frames precede the first content frame (the chat role chunk).
    pub(crate) fn frames_before_content(&self) -> usize {
        usize::from(self.endpoint == Endpoint::Chat)
    }

    /// The timed SSE frames of the streamed response and how the stream
    /// ends, with a stream fault applied: cut after `after_chunks` frames
    /// and reset, cut after the role chunk and stalled, or an extra bad
    /// chunk where the first content would go.
    pub(crate) fn stream(
        &self,
        cfg: &SimConfig,
        include_usage: bool,
    ) -> (VecDeque<(Duration, Bytes)>, StreamEnd) {
        let meta = self.meta(cfg);
        let mut frames = stream_frames(
            &meta,
            cfg,
            &self.generation,
            self.finish(),
            include_usage,
            self.usage(),
            self.stats(cfg),
        );
        let role_frames = self.frames_before_content();
        let end = match self.fault {
            Some(FaultKind::ResetMidStream { after_chunks }) => {
                frames.truncate(after_chunks as usize);
                StreamEnd::Reset
            }
            Some(FaultKind::Stall) => {
                frames.truncate(role_frames);
                StreamEnd::Stall
            }
            Some(kind @ (FaultKind::MalformedJson | FaultKind::NonUtf8)) => {
                // The stream then goes on as if nothing happened.
                let at = frames.get(role_frames).map_or(Duration::ZERO, |f| f.0);
                let bad = bad_chunk(&meta, kind == FaultKind::MalformedJson);
                frames.insert(role_frames.min(frames.len()), (at, bad));
                StreamEnd::Finish
            }
            _ => StreamEnd::Finish,
        };
        (frames, end)
    }
}

fn sse(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// An SSE frame holding a content chunk cut in half (`malformed`) or with
/// bytes that are not UTF-8 in its content.
fn bad_chunk(meta: &Meta<'_>, malformed: bool) -> Bytes {
    let chunk = meta.content_chunk(" fault", None, None).to_string();
    if malformed {
        return Bytes::from(format!("data: {}\n\n", &chunk[..chunk.len() / 2]));
    }
    let mut frame = b"data: ".to_vec();
    frame.extend_from_slice(&corrupt_utf8(&chunk));
    frame.extend_from_slice(b"\n\n");
    Bytes::from(frame)
}

/// Builds the timed SSE frames of one streamed response.
///
/// Chat streams start with a role chunk at offset 0 (before the TTFT delay,
/// as llama.cpp does); content starts at `ttft_ms`, one verify step every
/// `step_ms`. llama.cpp `timings` go on the finish chunk without
/// `include_usage`, on the usage chunk with it; vLLM stats only ever go on the
/// usage chunk.
fn stream_frames(
    meta: &Meta<'_>,
    cfg: &SimConfig,
    generation: &Generation,
    finish: &str,
    include_usage: bool,
    usage: Value,
    stats: Stats,
) -> VecDeque<(Duration, Bytes)> {
    let mut frames = VecDeque::new();
    if meta.endpoint == Endpoint::Chat {
        frames.push_back((
            Duration::ZERO,
            sse(&meta.role_chunk(cfg.chunking == Chunking::PerToken)),
        ));
    }
    let (usage_stats, mut finish_timings) = if include_usage {
        (Some(stats), None)
    } else {
        (None, stats.timings)
    };
    let mut at = ms(cfg.ttft_ms);
    let mut pos = 0usize;
    let last = generation.iterations.len().saturating_sub(1);
    for (i, &emitted) in generation.iterations.iter().enumerate() {
        if i > 0 {
            at += ms(cfg.step_ms);
        }
        let end = (pos + emitted as usize).min(generation.tokens.len());
        let tokens = &generation.tokens[pos..end];
        pos = end;
        match cfg.chunking {
            Chunking::PerStep => {
                let is_last = i == last;
                let chunk = meta.content_chunk(
                    &tokens.concat(),
                    is_last.then_some(finish),
                    if is_last { finish_timings.take() } else { None },
                );
                frames.push_back((at, sse(&chunk)));
            }
            Chunking::PerToken => {
                for t in tokens {
                    frames.push_back((at, sse(&meta.content_chunk(t, None, None))));
                }
            }
        }
    }
    if cfg.chunking == Chunking::PerToken || generation.iterations.is_empty() {
        let chunk = meta.content_chunk("", Some(finish), finish_timings.take());
        frames.push_back((at, sse(&chunk)));
    }
    if let Some(stats) = usage_stats {
        frames.push_back((at, sse(&meta.usage_chunk(usage, stats))));
    }
    frames.push_back((at, Bytes::from_static(b"data: [DONE]\n\n")));
    frames
}

/// Inserts two bytes that are not UTF-8 into the first output string of a
/// JSON text (after `"content":"` or `"text":"`).
pub(crate) fn corrupt_utf8(json: &str) -> Bytes {
    let at = ["\"content\":\"", "\"text\":\""]
        .iter()
        .filter_map(|m| json.find(m).map(|i| i + m.len()))
        .min()
        .unwrap_or(0);
    let mut out = Vec::with_capacity(json.len() + 2);
    out.extend_from_slice(&json.as_bytes()[..at]);
    out.extend_from_slice(&[0xFF, 0xFE]);
    out.extend_from_slice(&json.as_bytes()[at..]);
    Bytes::from(out)
}

/// Corrupts the per-request spec-decode statistics for the spec-field faults.
fn corrupt_stats(stats: &mut Stats, kind: FaultKind) {
    let vllm_counts = [
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_steps",
    ];
    let timing_counts = ["draft_n", "draft_n_accepted"];
    let stringify = |obj: &mut serde_json::Map<String, Value>, key: &str| {
        if let Some(v) = obj.get_mut(key) {
            *v = Value::String(v.to_string());
        }
    };
    if let Some(Value::Object(m)) = &mut stats.vllm {
        match kind {
            FaultKind::SpecFieldsMissing => {
                m.remove("num_accepted_draft_tokens");
                m.remove("num_spec_steps");
            }
            FaultKind::SpecFieldsWrongType => {
                for key in vllm_counts {
                    stringify(m, key);
                }
                if let Some(Value::Array(h)) = m.get_mut("acceptance_histogram") {
                    for v in h {
                        *v = Value::String(v.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(Value::Object(m)) = &mut stats.timings {
        match kind {
            FaultKind::SpecFieldsMissing => {
                m.remove("draft_n_accepted");
            }
            FaultKind::SpecFieldsWrongType => {
                for key in timing_counts {
                    stringify(m, key);
                }
            }
            _ => {}
        }
    }
}
