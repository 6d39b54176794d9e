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

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use crate::config::{Chunking, SimConfig, SpecFlavor};
use crate::faults::FaultKind;
use crate::metrics::RequestTruth;
use crate::model::{self, Generation, PromptInfo};
use crate::wire::{
    self, ChatRequest, ChunkTemplate, CommonParams, CompletionRequest, Endpoint, Meta, Stats,
};

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
    if let Some(min) = params.min_tokens()
        && max_tokens.is_some_and(|m| min > m)
    {
        // vLLM's own check.
        return Err("min_tokens must be less than or equal to max_tokens".to_owned());
    }
    if params.ignore_eos() && max_tokens.is_some_and(|m| m > MAX_FORCED_TOKENS) {
        return Err(format!(
            "with ignore_eos, max_tokens must be at most {MAX_FORCED_TOKENS}"
        ));
    }
    Ok((info, params))
}

/// The range a natural output length is drawn in: the configured one,
/// raised to `min_tokens` where a request asks for at least that many
/// (vLLM holds the end of sequence back until then).
fn natural_range(cfg: &SimConfig, min_tokens: Option<u32>) -> (u32, u32) {
    let range = (cfg.output_tokens_min, cfg.output_tokens_max);
    min_tokens.map_or(range, |m| (range.0.max(m), range.1.max(m)))
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
    /// The request asked for SGLang's per-request spec-decode details.
    pub(crate) spec_details_requested: bool,
    /// The time of each of its steps after the first, milliseconds
    /// ([`SimConfig::step_time_ms`] at its arrival).
    pub(crate) step_ms: f64,
}

impl Reply {
    /// Simulates request `index` (counting from 0 in arrival order) with
    /// `fault` injected, `in_flight` requests in the batch (itself
    /// included); `created` is the responses' Unix timestamp.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        cfg: &SimConfig,
        endpoint: Endpoint,
        index: u64,
        info: PromptInfo,
        params: &CommonParams,
        fault: Option<FaultKind>,
        created: u64,
        in_flight: u64,
    ) -> Reply {
        // Only a configured category selects a profile (and is recorded).
        let category = info
            .category
            .clone()
            .filter(|c| cfg.categories.contains_key(c));
        let profile = cfg.profile_for(category.as_deref());
        let step_ms = cfg.step_time_ms(profile.num_spec_tokens, in_flight.max(1));
        let generation = model::generate(
            cfg.seed,
            &info.key,
            profile,
            natural_range(cfg, params.min_tokens()),
            params.max_tokens(),
            params.ignore_eos(),
        );
        let truth = RequestTruth {
            model: params.model().to_string(),
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
            connection: 0,
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
            spec_details_requested: params.spec_details_requested(),
            step_ms,
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
                    self.step_ms,
                )
            }),
            sglang: (cfg.flavor == SpecFlavor::Sglang && self.spec_details_requested)
                .then(|| wire::sglang_spec(&self.generation.spec, self.truth.completion_tokens)),
            // TensorRT-LLM: the request's tokens over its iterations.
            per_iter: (cfg.flavor == SpecFlavor::TrtLlm && !self.generation.iterations.is_empty())
                .then(|| {
                    f64::from(self.truth.completion_tokens)
                        / self.generation.iterations.len() as f64
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
        ms(cfg.ttft_ms) + ms(self.step_ms) * u32::try_from(later_steps).unwrap_or(u32::MAX)
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
        let half = first_half(&body).len();
        match self.fault {
            Some(FaultKind::MalformedJson) => {
                FullBody::Complete(Bytes::from(body[..half].to_owned()))
            }
            Some(FaultKind::NonUtf8) => FullBody::Complete(corrupt_utf8(&body)),
            Some(FaultKind::ResetMidStream { .. }) => {
                FullBody::CutThenReset(Bytes::from(body[..half].to_owned()))
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
        let mut frames = stream_frames(&meta, cfg, self, include_usage, self.stats(cfg));
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

/// The SSE frames of one stream, written into one buffer and handed out
/// as slices of it: one allocation for a stream's frames instead of one
/// per frame (and no `String` per `Value` frame).
struct FrameBuffer(BytesMut);

impl FrameBuffer {
    /// Room for about `frames` frames of a plain chunk's size.
    fn for_frames(frames: usize) -> FrameBuffer {
        FrameBuffer(BytesMut::with_capacity(frames * 256))
    }

    /// `data: <json>\n\n`.
    fn json(&mut self, chunk: &impl serde::Serialize) -> Bytes {
        self.0.extend_from_slice(b"data: ");
        // Serialising JSON into memory fails only on a map with keys that
        // are not strings, which no chunk has.
        let _ = serde_json::to_writer((&mut self.0).writer(), chunk);
        self.0.extend_from_slice(b"\n\n");
        self.0.split().freeze()
    }

    /// The frame of a plain content chunk, from the stream's template.
    fn plain(&mut self, template: &ChunkTemplate, text: &str, finish: Option<&str>) -> Bytes {
        self.0.extend_from_slice(b"data: ");
        template.write(&mut self.0, text, finish);
        self.0.extend_from_slice(b"\n\n");
        self.0.split().freeze()
    }
}

/// An SSE frame holding a content chunk cut in half (`malformed`) or with
/// bytes that are not UTF-8 in its content.
fn bad_chunk(meta: &Meta<'_>, malformed: bool) -> Bytes {
    let chunk = meta
        .content_chunk(" fault", None, Stats::finishing(None, None))
        .to_string();
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
    reply: &Reply,
    include_usage: bool,
    stats: Stats,
) -> VecDeque<(Duration, Bytes)> {
    let (generation, finish, usage) = (&reply.generation, reply.finish(), reply.usage());
    let step_ms = reply.step_ms;
    let mut frames = VecDeque::new();
    let mut out =
        FrameBuffer::for_frames(generation.tokens.len().max(generation.iterations.len()) + 4);
    let template = meta.chunk_template();
    if meta.endpoint == Endpoint::Chat {
        let role = out.json(&meta.plain_role(cfg.chunking == Chunking::PerToken));
        frames.push_back((Duration::ZERO, role));
    }
    let (sglext, usage_stats, mut finishing) = split_stats(stats, include_usage);
    let mut at = ms(cfg.ttft_ms);
    let mut pos = 0usize;
    let last = generation.iterations.len().saturating_sub(1);
    let mut text = String::new(); // A step's tokens, joined: one buffer for every step.
    for (i, &emitted) in generation.iterations.iter().enumerate() {
        if i > 0 {
            at += ms(step_ms);
        }
        let end = (pos + emitted as usize).min(generation.tokens.len());
        let tokens = &generation.tokens[pos..end];
        pos = end;
        match cfg.chunking {
            Chunking::PerStep => {
                let is_last = i == last;
                let extra = if is_last { finishing.take() } else { None };
                text.clear();
                tokens.iter().for_each(|t| text.push_str(t));
                let finish = is_last.then_some(finish);
                let frame = content_frame(&mut out, meta, &template, &text, finish, extra);
                frames.push_back((at, frame));
            }
            Chunking::PerToken => {
                for t in tokens {
                    frames.push_back((at, out.plain(&template, t, None)));
                }
            }
        }
    }
    if cfg.chunking == Chunking::PerToken || generation.iterations.is_empty() {
        let extra = finishing.take();
        let frame = content_frame(&mut out, meta, &template, "", Some(finish), extra);
        frames.push_back((at, frame));
    }
    if let Some(details) = sglext {
        frames.push_back((at, out.json(&meta.sglext_chunk(details))));
    }
    if let Some(stats) = usage_stats {
        frames.push_back((at, out.json(&meta.usage_chunk(usage, stats))));
    }
    frames.push_back((at, Bytes::from_static(b"data: [DONE]\n\n")));
    frames
}

/// Where a stream's statistics go: SGLang's details in a chunk of their
/// own; the usage chunk's (with `include_usage`); what rides on the
/// finishing choice (TensorRT-LLM's figure, and llama.cpp's timings
/// without `include_usage`).
fn split_stats(
    mut stats: Stats,
    include_usage: bool,
) -> (Option<Value>, Option<Stats>, Option<Stats>) {
    let sglext = stats.sglang.take();
    let per_iter = stats.per_iter.take();
    let (usage_stats, finish_timings) = if include_usage {
        (Some(stats), None)
    } else {
        (None, stats.timings)
    };
    let finishing = Stats::finishing(finish_timings, per_iter);
    (sglext, usage_stats, Some(finishing))
}

/// A content frame: as JSON when it carries the finish's extra fields
/// (timings, TensorRT-LLM's figure), else from the plain chunk template.
fn content_frame(
    out: &mut FrameBuffer,
    meta: &Meta<'_>,
    template: &ChunkTemplate,
    text: &str,
    finish: Option<&str>,
    extra: Option<Stats>,
) -> Bytes {
    match extra {
        Some(extra) if !extra.is_empty() => out.json(&meta.content_chunk(text, finish, extra)),
        _ => out.plain(template, text, finish),
    }
}

/// About the first half of `text`, cut on a character boundary (the text
/// may hold characters of several bytes; cutting inside one panicked).
pub(crate) fn first_half(text: &str) -> &str {
    let cut = (0..=text.len() / 2)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    &text[..cut]
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

#[cfg(test)]
mod tests {

    /// `min_tokens` raises the natural length's range to it: the sim's
    /// 8-24 tokens asked for at least 30 are 30; at least 10, 10-24.
    #[test]
    fn min_tokens_raises_the_natural_length() {
        let cfg = SimConfig {
            output_tokens_min: 8,
            output_tokens_max: 24,
            ..SimConfig::default()
        };
        assert_eq!(natural_range(&cfg, None), (8, 24));
        assert_eq!(natural_range(&cfg, Some(10)), (10, 24));
        assert_eq!(natural_range(&cfg, Some(30)), (30, 30));
    }

    #[test]
    fn half_a_body_is_cut_on_a_character_boundary() {
        // "é" is two bytes, "模" three: the middle byte falls inside one.
        assert_eq!(super::first_half("aé"), "a");
        assert_eq!(super::first_half("模型模型"), "模型");
        assert_eq!(super::first_half("x模"), "x");
        assert_eq!(super::first_half(""), "");
        assert_eq!(super::first_half("abcd"), "ab");
    }

    use serde_json::json;

    use super::*;
    use crate::config::{AcceptanceProfile, SpecFlavor};

    fn parse(endpoint: Endpoint, body: Value) -> (PromptInfo, CommonParams) {
        parse_request(endpoint, body.to_string().as_bytes()).expect("a valid request")
    }

    fn chat(content: &str, extra: Value) -> (PromptInfo, CommonParams) {
        let mut body = json!({"messages": [{"role": "user", "content": content}]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        parse(Endpoint::Chat, body)
    }

    fn reply(cfg: &SimConfig, content: &str, extra: Value, fault: Option<FaultKind>) -> Reply {
        let (info, params) = chat(content, extra);
        Reply::new(
            cfg,
            Endpoint::Chat,
            7,
            info,
            &params,
            fault,
            1_700_000_000,
            1,
        )
    }

    /// The JSON documents of SSE frames (`None` for `[DONE]` and bad ones).
    fn documents(frames: &VecDeque<(Duration, Bytes)>) -> Vec<Option<Value>> {
        frames
            .iter()
            .map(|(_, b)| {
                let text = std::str::from_utf8(b).ok()?;
                let data = text.strip_prefix("data: ")?.strip_suffix("\n\n")?;
                serde_json::from_str(data).ok()
            })
            .collect()
    }

    fn delta(doc: &Value) -> &str {
        doc["choices"][0]["delta"]["content"]
            .as_str()
            .unwrap_or_default()
    }

    #[test]
    fn parse_request_checks_the_limits() {
        let ok = |v: Value| parse_request(Endpoint::Chat, v.to_string().as_bytes());
        let user = json!([{"role": "user", "content": "hi"}]);
        assert!(ok(json!({"messages": user, "max_tokens": 1})).is_ok());
        assert_eq!(
            ok(json!({"messages": user, "max_tokens": 0})).unwrap_err(),
            "max_tokens must be at least 1"
        );
        // max_completion_tokens wins, so it is the one checked.
        assert!(ok(json!({"messages": user, "max_tokens": 0, "max_completion_tokens": 2})).is_ok());
        let forced = |m: u32| ok(json!({"messages": user, "max_tokens": m, "ignore_eos": true}));
        assert!(forced(MAX_FORCED_TOKENS).is_ok());
        assert_eq!(
            forced(MAX_FORCED_TOKENS + 1).unwrap_err(),
            "with ignore_eos, max_tokens must be at most 131072"
        );
        // Without ignore_eos a large cap is only a cap.
        assert!(ok(json!({"messages": user, "max_tokens": MAX_FORCED_TOKENS + 1})).is_ok());
        // min_tokens above max_tokens: vLLM's refusal.
        assert!(ok(json!({"messages": user, "max_tokens": 5, "min_tokens": 5})).is_ok());
        assert_eq!(
            ok(json!({"messages": user, "max_tokens": 5, "min_tokens": 6})).unwrap_err(),
            "min_tokens must be less than or equal to max_tokens"
        );
        let bad = parse_request(Endpoint::Completions, b"{\"prompt\": 3}").unwrap_err();
        assert!(bad.starts_with("invalid JSON body: "), "{bad}");
        let (info, _) = parse(Endpoint::Completions, json!({"prompt": ["[qa 1] a", "b"]}));
        assert_eq!(
            (info.prompt_tokens, info.category.as_deref()),
            (4, Some("qa"))
        );
    }

    #[test]
    fn reply_counters_are_the_ground_truth() {
        let cfg = SimConfig::speed_bench_demo().with_seed(4);
        for i in 0..50 {
            let r = reply(&cfg, &format!("[coding {i}] sort"), json!({}), None);
            let (t, g) = (&r.truth, &r.generation);
            assert_eq!(t.completion_tokens as usize, g.tokens.len());
            assert_eq!(t.steps + t.accepted, u64::from(t.completion_tokens));
            assert_eq!(t.proposed, 5 * t.steps);
            assert_eq!(g.spec.histogram.iter().sum::<u64>(), t.steps);
            assert_eq!((t.steps, t.accepted), (g.spec.steps, g.spec.accepted));
            assert_eq!(t.category.as_deref(), Some("coding"));
            assert!(!r.fails());
        }
        // An unknown category is neither used nor recorded; the id counts
        // requests from 0.
        let r = reply(&cfg, "[nope 1] x", json!({"max_tokens": 3}), None);
        assert_eq!(r.truth.category, None);
        assert!(r.truth.truncated && r.truth.completion_tokens == 3);
        assert_eq!(r.id, "chatcmpl-sim7");
        assert!(reply(&cfg, "x", json!({}), Some(FaultKind::Stall)).fails());
        assert!(!reply(&cfg, "x", json!({}), Some(FaultKind::SpecFieldsMissing)).fails());
    }

    #[test]
    fn flavours_give_the_vllm_and_llamacpp_payloads() {
        let base = SimConfig::default().with_ttft_ms(20.0).with_step_ms(2.0);
        let r = reply(&base, "[qa 0] why", json!({}), None);
        let spec = &r.generation.spec;

        let vllm = r.stats(&base);
        assert!(vllm.timings.is_none());
        let v = vllm.vllm.expect("vLLM stats");
        assert_eq!(v["num_spec_steps"], json!(spec.steps));
        assert_eq!(v["num_accepted_draft_tokens"], json!(spec.accepted));
        assert_eq!(v["num_draft_tokens"], json!(spec.proposed));
        assert_eq!(v["num_spec_tokens"], json!(4));
        assert_eq!(v["acceptance_histogram"], json!(spec.histogram));
        assert!(v.get("per_step_accepted").is_none());
        let detailed = r.stats(&base.clone().with_detailed(true)).vllm.unwrap();
        assert_eq!(detailed["per_step_accepted"], json!(spec.per_step_accepted));

        let llama = r.stats(&base.clone().with_flavor(SpecFlavor::LlamaCpp));
        assert!(llama.vllm.is_none());
        let t = llama.timings.expect("llama.cpp timings");
        assert_eq!(t["draft_n"], json!(spec.proposed));
        assert_eq!(t["draft_n_accepted"], json!(spec.accepted));
        assert_eq!(t["predicted_n"], json!(r.truth.completion_tokens));
        assert_eq!(t["prompt_n"], json!(r.truth.prompt_tokens));
        assert_eq!(t["prompt_ms"], json!(20.0));
        let steps_after_first = r.generation.iterations.len() - 1;
        assert_eq!(t["predicted_ms"], json!(2.0 * steps_after_first as f64));

        let both = r.stats(&base.clone().with_flavor(SpecFlavor::Both));
        assert!(both.vllm.is_some() && both.timings.is_some());
        let none = r.stats(&base.clone().with_flavor(SpecFlavor::None));
        assert!(none.vllm.is_none() && none.timings.is_none());

        // Without drafts llama.cpp has no draft fields.
        let off = base
            .clone()
            .with_flavor(SpecFlavor::LlamaCpp)
            .with_default_spec(AcceptanceProfile::baseline());
        let t = reply(&off, "[qa 0] why", json!({}), None)
            .stats(&off)
            .timings;
        assert!(t.unwrap().get("draft_n").is_none());
    }

    #[test]
    fn spec_field_faults_corrupt_only_the_counts() {
        let cfg = SimConfig::default().with_flavor(SpecFlavor::Both);
        let stats = |fault| reply(&cfg, "x y", json!({}), Some(fault)).stats(&cfg);
        let missing = stats(FaultKind::SpecFieldsMissing);
        let (v, t) = (missing.vllm.unwrap(), missing.timings.unwrap());
        assert!(v.get("num_accepted_draft_tokens").is_none() && v.get("num_spec_steps").is_none());
        assert!(v["num_draft_tokens"].is_u64());
        assert!(t.get("draft_n_accepted").is_none() && t["draft_n"].is_u64());
        let wrong = stats(FaultKind::SpecFieldsWrongType);
        let (v, t) = (wrong.vllm.unwrap(), wrong.timings.unwrap());
        for key in [
            "num_accepted_draft_tokens",
            "num_draft_tokens",
            "num_spec_steps",
        ] {
            assert!(
                v[key].as_str().is_some_and(|s| s.parse::<u64>().is_ok()),
                "{key}"
            );
        }
        assert!(v["acceptance_histogram"][0].is_string());
        assert!(t["draft_n"].is_string() && t["draft_n_accepted"].is_string());
        assert!(v["mean_acceptance_length"].is_f64());
    }

    #[test]
    fn per_step_frames_follow_the_schedule() {
        let cfg = SimConfig::default().with_ttft_ms(30.0).with_step_ms(4.0);
        let r = reply(&cfg, "[coding 1] a b", json!({"stream": true}), None);
        let (frames, end) = r.stream(&cfg, true);
        assert_eq!(end, StreamEnd::Finish);
        let steps = r.generation.iterations.len();
        // Role, one chunk per step, usage, [DONE].
        assert_eq!(frames.len(), 1 + steps + 2);
        assert_eq!(frames[0].0, Duration::ZERO);
        for i in 0..steps {
            assert_eq!(frames[1 + i].0, ms(30.0) + ms(4.0) * i as u32, "step {i}");
        }
        let last = r.last_step_at(&cfg);
        assert_eq!(last, ms(30.0) + ms(4.0) * (steps as u32 - 1));
        assert!(frames.iter().skip(steps).all(|f| f.0 == last));
        assert_eq!(&frames[frames.len() - 1].1[..], b"data: [DONE]\n\n");
        let docs = documents(&frames);
        let text: String = docs[1..=steps]
            .iter()
            .map(|d| delta(d.as_ref().unwrap()))
            .collect();
        assert_eq!(text, r.generation.text());
        for (i, d) in docs[1..=steps].iter().enumerate() {
            let per_step = r.generation.iterations[i] as usize;
            assert_eq!(delta(d.as_ref().unwrap()).matches(' ').count(), per_step);
        }
        let finish = &docs[steps].as_ref().unwrap()["choices"][0]["finish_reason"];
        assert_eq!(finish, "stop");
        let usage = docs[steps + 1].as_ref().unwrap();
        assert_eq!(usage["choices"], json!([]));
        assert_eq!(
            usage["usage"]["completion_tokens"],
            json!(r.truth.completion_tokens)
        );
        assert!(usage["metrics"]["speculative_decoding"].is_object());
        // Without include_usage: no usage chunk, so no vLLM stats.
        let (plain, _) = r.stream(&cfg, false);
        assert_eq!(plain.len(), 1 + steps + 1);
        assert!(
            documents(&plain)
                .iter()
                .flatten()
                .all(|d| d.get("metrics").is_none())
        );
    }

    #[test]
    fn per_token_frames_and_timings_placement() {
        let cfg = SimConfig::default()
            .with_flavor(SpecFlavor::LlamaCpp)
            .with_chunking(Chunking::PerToken);
        let r = reply(&cfg, "tell me", json!({"max_tokens": 9}), None);
        let (frames, _) = r.stream(&cfg, false);
        // Role, one chunk per token, the finish chunk with timings, [DONE].
        assert_eq!(frames.len(), 1 + 9 + 2);
        let docs = documents(&frames);
        assert!(docs[0].as_ref().unwrap()["choices"][0]["delta"]["content"].is_null());
        assert!(
            docs[1..10]
                .iter()
                .all(|d| d.as_ref().unwrap().get("timings").is_none())
        );
        let finish = docs[10].as_ref().unwrap();
        assert_eq!(finish["choices"][0]["finish_reason"], "length");
        assert_eq!(finish["timings"]["predicted_n"], json!(9));
        // With include_usage the timings move to the usage chunk.
        let docs = documents(&r.stream(&cfg, true).0);
        assert!(docs[10].as_ref().unwrap().get("timings").is_none());
        assert_eq!(
            docs[11].as_ref().unwrap()["timings"]["predicted_n"],
            json!(9)
        );
    }

    #[test]
    fn stream_faults_cut_stall_or_insert_a_bad_chunk() {
        let cfg = SimConfig::default().with_ttft_ms(10.0);
        let stream = |fault| {
            reply(&cfg, "[qa 2] q", json!({"stream": true}), Some(fault)).stream(&cfg, true)
        };
        let (clean, _) = reply(&cfg, "[qa 2] q", json!({}), None).stream(&cfg, true);

        let (frames, end) = stream(FaultKind::ResetMidStream { after_chunks: 3 });
        assert_eq!((frames.len(), end), (3, StreamEnd::Reset));
        assert!(frames.iter().zip(&clean).all(|(a, b)| a == b));
        let (frames, end) = stream(FaultKind::Stall);
        assert_eq!((frames.len(), end), (1, StreamEnd::Stall));

        for kind in [FaultKind::MalformedJson, FaultKind::NonUtf8] {
            let (frames, end) = stream(kind);
            assert_eq!((frames.len(), end), (clean.len() + 1, StreamEnd::Finish));
            // At the first content's place and time; the rest unchanged.
            assert_eq!(frames[1].0, ms(10.0));
            assert_eq!(documents(&frames)[1], None, "{kind:?}");
            assert_eq!(frames[0], clean[0]);
            assert!(
                frames
                    .iter()
                    .skip(2)
                    .zip(clean.iter().skip(1))
                    .all(|(a, b)| a == b)
            );
            let utf8 = std::str::from_utf8(&frames[1].1).is_ok();
            assert_eq!(utf8, kind == FaultKind::MalformedJson);
        }
    }

    #[test]
    fn full_body_faults() {
        let cfg = SimConfig::default();
        let body = |fault| reply(&cfg, "[qa 3] q", json!({}), fault).full_body(&cfg);
        let FullBody::Complete(clean) = body(None) else {
            panic!("a complete body");
        };
        let v: Value = serde_json::from_slice(&clean).expect("JSON");
        let r = reply(&cfg, "[qa 3] q", json!({}), None);
        assert_eq!(v["choices"][0]["message"]["content"], r.generation.text());
        assert_eq!(v["id"], "chatcmpl-sim7");
        assert_eq!(v["created"], 1_700_000_000);

        let half = clean.slice(..clean.len() / 2);
        assert_eq!(
            body(Some(FaultKind::MalformedJson)),
            FullBody::Complete(half.clone())
        );
        assert_eq!(
            body(Some(FaultKind::ResetMidStream { after_chunks: 2 })),
            FullBody::CutThenReset(half)
        );
        let FullBody::Complete(bad) = body(Some(FaultKind::NonUtf8)) else {
            panic!("a complete body");
        };
        assert!(std::str::from_utf8(&bad).is_err());
        let at = bad.windows(2).position(|w| w == [0xFF, 0xFE]).unwrap();
        assert!(bad[..at].ends_with(b"\"content\":\""));
        assert_eq!([&bad[..at], &bad[at + 2..]].concat(), clean.to_vec());
    }
}
