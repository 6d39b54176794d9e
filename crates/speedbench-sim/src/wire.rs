//! OpenAI-compatible JSON shapes: request parsing and response bodies.

use bytes::{BufMut, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::model::{Generation, PromptInfo, SpecStats};

/// Fields of `/v1/chat/completions` the simulator honours (others are ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    messages: Vec<ChatMessage>,
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// Fields of `/v1/completions` the simulator honours (others are ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct CompletionRequest {
    prompt: PromptInput,
    #[serde(flatten)]
    pub(crate) common: CommonParams,
}

/// Parameters shared by both endpoints.
#[derive(Debug, Deserialize)]
pub(crate) struct CommonParams {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    max_completion_tokens: Option<u32>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    ignore_eos: Option<bool>,
    #[serde(default)]
    min_tokens: Option<u32>,
    #[serde(default)]
    return_spec_tokens_details: Option<bool>,
}

impl CommonParams {
    /// The `model` asked for (any is served).
    pub(crate) fn model(&self) -> &str {
        self.model.as_deref().unwrap_or_default()
    }

    /// `max_completion_tokens`, else `max_tokens` (vLLM's precedence).
    pub(crate) fn max_tokens(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    /// vLLM / llama.cpp `ignore_eos`: generate exactly `max_tokens` tokens.
    pub(crate) fn ignore_eos(&self) -> bool {
        self.ignore_eos.unwrap_or(false)
    }

    /// vLLM's `min_tokens`: no end of sequence before that many tokens.
    pub(crate) fn min_tokens(&self) -> Option<u32> {
        self.min_tokens.filter(|&m| m > 0)
    }

    /// SGLang's opt-in to per-request spec-decode details.
    pub(crate) fn spec_details_requested(&self) -> bool {
        self.return_spec_tokens_details.unwrap_or(false)
    }

    pub(crate) fn stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    pub(crate) fn include_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

#[derive(Debug, Deserialize)]
struct StreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Content>,
}

/// Message content: a string or a list of content parts (text parts are used).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize)]
struct ContentPart {
    #[serde(default)]
    text: Option<String>,
}

impl Content {
    fn into_text(self) -> String {
        match self {
            Content::Text(s) => s,
            Content::Parts(parts) => parts
                .into_iter()
                .filter_map(|p| p.text)
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum PromptInput {
    Text(String),
    Many(Vec<String>),
}

impl ChatRequest {
    /// Validates and extracts the prompt.
    pub(crate) fn prompt(self) -> Result<(PromptInfo, CommonParams), String> {
        if self.messages.is_empty() {
            return Err("'messages' must contain at least one message".to_owned());
        }
        let info = PromptInfo::from_messages(self.messages.into_iter().map(|m| {
            (
                m.role,
                m.content.map(Content::into_text).unwrap_or_default(),
            )
        }));
        Ok((info, self.common))
    }
}

impl CompletionRequest {
    /// Validates and extracts the prompt (a list of prompts is joined by newlines).
    pub(crate) fn prompt(self) -> Result<(PromptInfo, CommonParams), String> {
        let text = match self.prompt {
            PromptInput::Text(s) => s,
            PromptInput::Many(v) if v.is_empty() => {
                return Err("'prompt' must not be empty".to_owned());
            }
            PromptInput::Many(v) => v.join("\n"),
        };
        Ok((PromptInfo::from_prompt(text), self.common))
    }
}

/// Which OpenAI endpoint a response belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Chat,
    Completions,
}

/// Identity fields shared by all chunks of one response.
pub(crate) struct Meta<'a> {
    pub(crate) endpoint: Endpoint,
    pub(crate) id: &'a str,
    pub(crate) created: u64,
    pub(crate) model: &'a str,
}

/// Per-flavour statistics attached to a response.
pub(crate) struct Stats {
    /// `metrics: {speculative_decoding: ...}` (vLLM flavour).
    pub(crate) vllm: Option<Value>,
    /// `timings: {...}` (llama.cpp flavour).
    pub(crate) timings: Option<Value>,
    /// `sglext: {spec_tokens_details: ...}` (SGLang flavour, when asked).
    pub(crate) sglang: Option<Value>,
    /// `avg_decoded_tokens_per_iter` on the choice (TensorRT-LLM flavour).
    pub(crate) per_iter: Option<f64>,
}

impl Stats {
    /// Nothing to attach: the chunk is a plain one.
    pub(crate) fn is_empty(&self) -> bool {
        self.vllm.is_none()
            && self.timings.is_none()
            && self.sglang.is_none()
            && self.per_iter.is_none()
    }

    /// What rides on the finishing content chunk: llama.cpp's `timings`
    /// and TensorRT-LLM's per-choice figure.
    pub(crate) fn finishing(timings: Option<Value>, per_iter: Option<f64>) -> Stats {
        Stats {
            vllm: None,
            timings,
            sglang: None,
            per_iter,
        }
    }
}

impl Meta<'_> {
    fn root(&self, object: &str, choices: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!(object));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("choices".into(), choices);
        m
    }

    fn chunk_object(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Chat => "chat.completion.chunk",
            Endpoint::Completions => "text_completion",
        }
    }

    /// The non-streaming response body.
    pub(crate) fn full_response(
        &self,
        text: &str,
        finish: &str,
        usage: Value,
        stats: Stats,
    ) -> Value {
        let (object, choice) = match self.endpoint {
            Endpoint::Chat => (
                "chat.completion",
                json!({"index": 0, "message": {"role": "assistant", "content": text},
                       "logprobs": null, "finish_reason": finish}),
            ),
            Endpoint::Completions => (
                "text_completion",
                json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish}),
            ),
        };
        let mut m = self.root(object, json!([choice]));
        m.insert("usage".into(), usage);
        attach(&mut m, stats);
        Value::Object(m)
    }

    /// The first streamed chunk of a chat response: the assistant role.
    /// `null_content` gives llama.cpp's `"content": null`, else vLLM's `""`.
    /// Streams send [`Meta::plain_role`]; this `Value` form is what a test
    /// holds its bytes equal to.
    #[cfg(test)]
    pub(crate) fn role_chunk(&self, null_content: bool) -> Value {
        let content = if null_content { json!(null) } else { json!("") };
        let choice = json!({"index": 0, "delta": {"role": "assistant", "content": content},
                            "logprobs": null, "finish_reason": null});
        Value::Object(self.root(self.chunk_object(), json!([choice])))
    }

    /// A streamed chunk carrying `text` (may be empty) and optionally the
    /// finish reason and the finishing statistics ([`Stats::finishing`]).
    pub(crate) fn content_chunk(&self, text: &str, finish: Option<&str>, extra: Stats) -> Value {
        let choice = match (self.endpoint, text.is_empty()) {
            (Endpoint::Chat, false) => json!({"index": 0, "delta": {"content": text},
                                              "logprobs": null, "finish_reason": finish}),
            (Endpoint::Chat, true) => json!({"index": 0, "delta": {},
                                             "logprobs": null, "finish_reason": finish}),
            (Endpoint::Completions, _) => json!({"index": 0, "text": text,
                                                 "logprobs": null, "finish_reason": finish}),
        };
        let mut m = self.root(self.chunk_object(), json!([choice]));
        attach(&mut m, extra);
        Value::Object(m)
    }

    /// SGLang's separate streamed chunk: `choices: []` and `sglext`.
    pub(crate) fn sglext_chunk(&self, details: Value) -> Value {
        let mut m = self.root(self.chunk_object(), json!([]));
        m.insert("sglext".into(), json!({ "spec_tokens_details": details }));
        Value::Object(m)
    }

    /// The extra `include_usage` chunk: `choices: []`, `usage` and stats.
    /// Streams send [`Meta::usage_chunk`]; this `Value` form is what a test
    /// holds its bytes equal to.
    #[cfg(test)]
    pub(crate) fn usage_chunk_value(&self, usage: Value, stats: Stats) -> Value {
        let mut m = self.root(self.chunk_object(), json!([]));
        m.insert("usage".into(), usage);
        attach(&mut m, stats);
        Value::Object(m)
    }
}

/// The `include_usage` chunk, serialised from its parts in `Value`'s
/// (sorted) key order instead of built as a map first: one per stream,
/// and the map and its keys were a fifth of the simulator's work per
/// request. A test holds the bytes equal to [`Meta::usage_chunk_value`]'s.
#[derive(Serialize)]
pub(crate) struct UsageChunk<'a> {
    choices: [(); 0],
    created: u64,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<VllmMetrics>,
    model: &'a str,
    object: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sglext: Option<SglangExt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timings: Option<Value>,
    usage: Value,
}

/// `metrics: {speculative_decoding: ..}` (vLLM).
#[derive(Serialize)]
struct VllmMetrics {
    speculative_decoding: Value,
}

/// `sglext: {spec_tokens_details: ..}` (SGLang).
#[derive(Serialize)]
struct SglangExt {
    spec_tokens_details: Value,
}

impl<'a> Meta<'a> {
    /// The extra `include_usage` chunk: `choices: []`, `usage` and stats
    /// (TensorRT-LLM's per-choice figure has no choice to ride on).
    pub(crate) fn usage_chunk(&self, usage: Value, stats: Stats) -> UsageChunk<'a> {
        UsageChunk {
            choices: [],
            created: self.created,
            id: self.id,
            metrics: stats.vllm.map(|v| VllmMetrics {
                speculative_decoding: v,
            }),
            model: self.model,
            object: self.chunk_object(),
            sglext: stats.sglang.map(|d| SglangExt {
                spec_tokens_details: d,
            }),
            timings: stats.timings,
            usage,
        }
    }
}

/// A streamed chunk with nothing attached (no statistics, no usage),
/// serialised straight from borrowed fields: every token or step of every
/// stream is one, and building each as a `Value` map first was a fifth of
/// the simulator's CPU. The fields are declared in `Value`'s (sorted) key
/// order, so the bytes equal those of the `Value` built by
/// [`Meta::content_chunk`] / [`Meta::role_chunk`] (a test holds them equal).
#[derive(Serialize)]
pub(crate) struct PlainChunk<'a> {
    choices: [PlainChoice<'a>; 1],
    created: u64,
    id: &'a str,
    model: &'a str,
    object: &'static str,
}

#[derive(Serialize)]
struct PlainChoice<'a> {
    /// Chat only.
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<PlainDelta<'a>>,
    finish_reason: Option<&'a str>,
    index: u32,
    logprobs: (),
    /// Completions only.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
}

#[derive(Serialize)]
struct PlainDelta<'a> {
    /// Absent (`{}`), `null` (llama.cpp's role chunk) or the text.
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
}

impl<'a> Meta<'a> {
    /// [`Meta::role_chunk`], typed.
    pub(crate) fn plain_role(&self, null_content: bool) -> PlainChunk<'a> {
        self.plain(PlainChoice {
            delta: Some(PlainDelta {
                content: Some((!null_content).then_some("")),
                role: Some("assistant"),
            }),
            finish_reason: None,
            index: 0,
            logprobs: (),
            text: None,
        })
    }

    /// What a stream's plain content chunks share, rendered once
    /// ([`ChunkTemplate`]).
    pub(crate) fn chunk_template(&self) -> ChunkTemplate {
        /// The fields after `choices`, in `Value`'s key order.
        #[derive(Serialize)]
        struct Tail<'a> {
            created: u64,
            id: &'a str,
            model: &'a str,
            object: &'static str,
        }
        let json = serde_json::to_vec(&Tail {
            created: self.created,
            id: self.id,
            model: self.model,
            object: self.chunk_object(),
        })
        .unwrap_or_default();
        let mut tail = b"],".to_vec();
        // `{"created":..}` without its opening brace.
        tail.extend_from_slice(json.get(1..).unwrap_or_default());
        ChunkTemplate {
            endpoint: self.endpoint,
            tail,
        }
    }

    fn plain(&self, choice: PlainChoice<'a>) -> PlainChunk<'a> {
        PlainChunk {
            choices: [choice],
            created: self.created,
            id: self.id,
            model: self.model,
            object: self.chunk_object(),
        }
    }
}

/// A stream's content chunks with nothing attached, written from a
/// template: the fields every chunk of a stream shares (`created`, `id`,
/// `model`, `object`) are rendered once, and each chunk writes its text and
/// finish reason only. Every token or step of every stream is one, and
/// serialising each whole (keys escaped one byte at a time) was the
/// simulator's largest cost. The bytes are those of the `Value` built by
/// [`Meta::content_chunk`] (a test holds them equal).
pub(crate) struct ChunkTemplate {
    endpoint: Endpoint,
    /// `],"created":..,"id":..,"model":..,"object":..}`.
    tail: Vec<u8>,
}

impl ChunkTemplate {
    /// Appends the chunk carrying `text` (may be empty) and `finish`.
    pub(crate) fn write(&self, out: &mut BytesMut, text: &str, finish: Option<&str>) {
        out.extend_from_slice(b"{\"choices\":[{");
        if self.endpoint == Endpoint::Chat {
            if text.is_empty() {
                out.extend_from_slice(b"\"delta\":{},");
            } else {
                out.extend_from_slice(b"\"delta\":{\"content\":");
                json_string(out, text);
                out.extend_from_slice(b"},");
            }
        }
        out.extend_from_slice(b"\"finish_reason\":");
        match finish {
            Some(reason) => json_string(out, reason),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"index\":0,\"logprobs\":null");
        if self.endpoint == Endpoint::Completions {
            out.extend_from_slice(b",\"text\":");
            json_string(out, text);
        }
        out.extend_from_slice(b"}");
        out.extend_from_slice(&self.tail);
    }
}

/// `text` as a JSON string, escaped as serde_json escapes it.
fn json_string(out: &mut BytesMut, text: &str) {
    // Writing a string into memory cannot fail.
    let _ = serde_json::to_writer(out.writer(), text);
}

fn attach(m: &mut Map<String, Value>, stats: Stats) {
    if let Some(v) = stats.vllm {
        m.insert("metrics".into(), json!({"speculative_decoding": v}));
    }
    if let Some(t) = stats.timings {
        m.insert("timings".into(), t);
    }
    if let Some(d) = stats.sglang {
        m.insert("sglext".into(), json!({ "spec_tokens_details": d }));
    }
    if let Some(v) = stats.per_iter
        && let Some(Value::Array(choices)) = m.get_mut("choices")
    {
        for c in choices.iter_mut().filter_map(Value::as_object_mut) {
            c.insert("avg_decoded_tokens_per_iter".into(), json!(v));
        }
    }
}

/// SGLang's `spec_tokens_details` object (PR #33518's fields; its own
/// identity `spec_accept_length == completion_tokens / spec_verify_ct`).
pub(crate) fn sglang_spec(spec: &SpecStats, completion_tokens: u32) -> Value {
    json!({
        "spec_accept_rate": ratio(spec.accepted as f64, spec.proposed as f64),
        "spec_accept_length": ratio(f64::from(completion_tokens), spec.steps as f64),
        "spec_num_correct_drafts": spec.accepted,
        "spec_num_proposed_drafts": spec.proposed,
        "spec_verify_ct": spec.steps,
        "spec_correct_drafts_histogram": spec.histogram,
    })
}

/// The OpenAI `usage` object.
pub(crate) fn usage(prompt_tokens: u32, completion_tokens: u32) -> Value {
    json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": u64::from(prompt_tokens) + u64::from(completion_tokens),
    })
}

/// `a / b`, or 0 when `b` is zero (keeps JSON free of NaN/inf).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// vLLM's `metrics.speculative_decoding` object.
pub(crate) fn vllm_spec(spec: &SpecStats, detailed: bool) -> Value {
    let mut v = json!({
        "mean_acceptance_length": 1.0 + ratio(spec.accepted as f64, spec.steps as f64),
        "draft_acceptance_rate": ratio(spec.accepted as f64, spec.proposed as f64),
        "acceptance_histogram": spec.histogram,
        "acceptance_histogram_by_draft_length":
            if spec.steps > 0 { json!({spec.k.to_string(): spec.histogram}) } else { json!({}) },
        "num_spec_steps": spec.steps,
        "num_accepted_draft_tokens": spec.accepted,
        "num_draft_tokens": spec.proposed,
        "num_spec_tokens": spec.k,
    });
    if detailed && let Value::Object(m) = &mut v {
        m.insert("per_step_accepted".into(), json!(spec.per_step_accepted));
        m.insert("per_step_drafted".into(), json!(spec.per_step_drafted));
    }
    v
}

/// llama.cpp's `timings` object, from the nominal schedule: `prompt_ms` is the
/// configured TTFT, `predicted_ms` is `step_ms` times the iterations after the
/// first. `draft_n` / `draft_n_accepted` are omitted when nothing was drafted.
pub(crate) fn llamacpp_timings(
    prompt_tokens: u32,
    generation: &Generation,
    ttft_ms: f64,
    step_ms: f64,
) -> Value {
    let predicted_n = generation.tokens.len() as f64;
    let prompt_n = f64::from(prompt_tokens);
    let predicted_ms = step_ms * generation.iterations.len().saturating_sub(1) as f64;
    let mut v = json!({
        "cache_n": 0,
        "prompt_n": prompt_tokens,
        "prompt_ms": ttft_ms,
        "prompt_per_token_ms": ratio(ttft_ms, prompt_n),
        "prompt_per_second": ratio(1e3 * prompt_n, ttft_ms),
        "predicted_n": generation.tokens.len(),
        "predicted_ms": predicted_ms,
        "predicted_per_token_ms": ratio(predicted_ms, predicted_n),
        "predicted_per_second": ratio(1e3 * predicted_n, predicted_ms),
    });
    if generation.spec.proposed > 0
        && let Value::Object(m) = &mut v
    {
        m.insert("draft_n".into(), json!(generation.spec.proposed));
        m.insert("draft_n_accepted".into(), json!(generation.spec.accepted));
    }
    v
}

/// OpenAI-style error body.
pub(crate) fn error_body(status: u16, kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": status}})
}

/// `GET /v1/models` body.
pub(crate) fn models(model: &str, created: u64, owner: &str) -> Value {
    json!({"object": "list", "data": [
        {"id": model, "object": "model", "created": created, "owned_by": owner,
         "root": model, "parent": null}
    ]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_variants() {
        let r: ChatRequest = serde_json::from_str(
            r#"{"model":"x","messages":[{"role":"system","content":null},
                {"role":"user","content":[{"type":"text","text":"[coding 1] hi there"}]}],
                "max_tokens":5,"max_completion_tokens":3,"stream":true,
                "stream_options":{"include_usage":true},"temperature":0}"#,
        )
        .expect("parse");
        let (info, p) = r.prompt().expect("valid");
        assert_eq!(p.max_tokens(), Some(3));
        assert!(p.stream() && p.include_usage());
        assert_eq!(info.first_user, "[coding 1] hi there");
        assert_eq!(info.category.as_deref(), Some("coding"));
        let empty: ChatRequest = serde_json::from_str(r#"{"messages":[]}"#).expect("parse");
        assert!(empty.prompt().is_err());
        assert!(serde_json::from_str::<ChatRequest>(r#"{"messages":[],"max_tokens":-1}"#).is_err());
    }

    #[test]
    fn parses_completion_prompt_list() {
        let r: CompletionRequest =
            serde_json::from_str(r#"{"prompt":["a b","c"]}"#).expect("parse");
        let (info, p) = r.prompt().expect("valid");
        assert_eq!(info.prompt_tokens, 3);
        assert!(!p.stream());
        assert_eq!(p.max_tokens(), None);
    }

    #[test]
    fn templated_and_typed_chunks_are_the_bytes_of_the_value_chunks() {
        let frame = |v: Value| v.to_string().into_bytes();
        let plain = |c: PlainChunk<'_>| serde_json::to_vec(&c).unwrap();
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let meta = Meta {
                endpoint,
                id: "chatcmpl-\"7\"",
                created: 1_796_458_652,
                model: "speedbench/sim\u{e9}",
            };
            for text in ["", " token", "line\nbreak \"quoted\" \\ \u{1F600}\u{1}"] {
                for finish in [None, Some("stop"), Some("length")] {
                    let mut written = BytesMut::new();
                    meta.chunk_template().write(&mut written, text, finish);
                    assert_eq!(
                        written.to_vec(),
                        frame(meta.content_chunk(text, finish, Stats::finishing(None, None))),
                        "{endpoint:?} {text:?} {finish:?}"
                    );
                }
            }
            for null_content in [false, true] {
                assert_eq!(
                    plain(meta.plain_role(null_content)),
                    frame(meta.role_chunk(null_content)),
                    "{endpoint:?} role {null_content}"
                );
            }
        }
    }

    #[test]
    fn the_typed_usage_chunk_is_the_bytes_of_the_value_one() {
        let spec = SpecStats {
            k: 3,
            steps: 4,
            accepted: 5,
            proposed: 12,
            histogram: vec![1, 1, 1, 1],
            per_step_accepted: vec![0, 1, 2, 2],
            per_step_drafted: vec![3, 3, 3, 3],
        };
        let meta = Meta {
            endpoint: Endpoint::Chat,
            id: "chatcmpl-\"u\"",
            created: 1_796_458_652,
            model: "m\u{e9}",
        };
        let stats = |vllm: bool, timings: bool, sglang: bool, per_iter: bool| Stats {
            vllm: vllm.then(|| vllm_spec(&spec, true)),
            timings: timings.then(|| json!({"predicted_n": 9, "predicted_ms": 1.5, "draft_n": 4})),
            sglang: sglang.then(|| sglang_spec(&spec, 9)),
            per_iter: per_iter.then_some(2.25),
        };
        for endpoint in [Endpoint::Chat, Endpoint::Completions] {
            let meta = Meta { endpoint, ..meta };
            for flags in 0..16u8 {
                let [v, t, g, p] = [1, 2, 4, 8].map(|bit| flags & bit != 0);
                let typed =
                    serde_json::to_string(&meta.usage_chunk(usage(7, 9), stats(v, t, g, p)))
                        .unwrap();
                let value = meta
                    .usage_chunk_value(usage(7, 9), stats(v, t, g, p))
                    .to_string();
                assert_eq!(typed, value, "{endpoint:?} flags {flags:04b}");
            }
        }
    }

    #[test]
    fn vllm_spec_zero_steps_has_no_nan() {
        let v = vllm_spec(
            &SpecStats {
                histogram: vec![0],
                ..SpecStats::default()
            },
            true,
        );
        assert_eq!(v["mean_acceptance_length"], json!(1.0));
        assert_eq!(v["draft_acceptance_rate"], json!(0.0));
        assert_eq!(v["per_step_accepted"], json!([]));
    }
}
