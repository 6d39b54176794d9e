//! Folding a response (a JSON body or a stream of chunks) into measurements.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use speedbench_record::{ServerTimings, SpecDecodeStats};

use crate::secrets::Secrets;
use crate::spec::{self, MalformedSpec, SpecAdapter};

/// Everything learned from one response so far.
#[derive(Debug, Default)]
pub(crate) struct ResponseState {
    pub text: String,
    pub chunks: u64,
    pub first_output: Option<Instant>,
    last_output: Option<Instant>,
    pub gaps_ns: Vec<u64>,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    pub server_error: Option<String>,
    vllm: Option<Value>,
    trtllm: Option<Value>,
    sglang: Option<Value>,
    timings: Option<Value>,
    /// TensorRT-LLM's per-choice `avg_decoded_tokens_per_iter`, the last seen.
    tokens_per_iter: Option<Value>,
    /// Registered adapters, each with the last payload it found.
    custom: Vec<(Arc<dyn SpecAdapter>, Option<Value>)>,
    pub done: bool,
}

fn error_message(v: &Value) -> Option<String> {
    // OpenAI shape {"error": {...}} or older vLLM/SGLang {"object": "error", ...}.
    let err = match v.get("error") {
        Some(e) if !e.is_null() && e != &Value::Bool(false) => e,
        _ if v.get("object").and_then(Value::as_str) == Some("error") => v,
        _ => return None,
    };
    let msg = err
        .get("message")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string());
    Some(msg)
}

impl ResponseState {
    /// A state that also looks for the payloads of `adapters`.
    pub(crate) fn new(adapters: &[Arc<dyn SpecAdapter>]) -> ResponseState {
        ResponseState {
            custom: adapters.iter().map(|a| (a.clone(), None)).collect(),
            ..ResponseState::default()
        }
    }

    /// Folds one JSON object (a whole body, or one stream chunk received at `at`).
    pub(crate) fn absorb(&mut self, v: &Value, at: Instant) {
        if let Some(msg) = error_message(v) {
            self.server_error.get_or_insert(msg);
            return;
        }
        for (adapter, payload) in &mut self.custom {
            if let Some(p) = adapter.find(v) {
                *payload = Some(p.clone());
            }
        }
        let mut produced = false;
        if let Some(choices) = v.get("choices").and_then(Value::as_array) {
            for choice in choices {
                for holder in [choice.get("delta"), choice.get("message")]
                    .into_iter()
                    .flatten()
                {
                    for key in ["reasoning", "reasoning_content", "content"] {
                        if let Some(s) = holder.get(key).and_then(Value::as_str)
                            && !s.is_empty()
                        {
                            self.text.push_str(s);
                            produced = true;
                        }
                    }
                }
                if let Some(s) = choice.get("text").and_then(Value::as_str)
                    && !s.is_empty()
                {
                    self.text.push_str(s);
                    produced = true;
                }
                if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                    if r == "error" {
                        self.server_error.get_or_insert_with(|| {
                            "server ended the choice with finish_reason \"error\"".into()
                        });
                    }
                    self.finish_reason = Some(r.to_string());
                }
                for key in ["speculative_decoding_stats"] {
                    if let Some(p) = choice.get(key).filter(|p| p.is_object()) {
                        self.vllm = Some(p.clone());
                    }
                }
                if let Some(p) = choice.get("speculative_decoding").filter(|p| p.is_object()) {
                    self.trtllm = Some(p.clone());
                }
                if let Some(v) = choice
                    .get("avg_decoded_tokens_per_iter")
                    .filter(|v| !v.is_null())
                {
                    self.tokens_per_iter = Some(v.clone());
                }
            }
        }
        if produced {
            self.chunks += 1;
            if let Some(prev) = self.last_output {
                self.gaps_ns.push(at.duration_since(prev).as_nanos() as u64);
            }
            self.first_output.get_or_insert(at);
            self.last_output = Some(at);
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            if let Some(p) = u.get("prompt_tokens").and_then(Value::as_u64) {
                self.prompt_tokens = Some(p);
            }
            if let Some(c) = u.get("completion_tokens").and_then(Value::as_u64) {
                self.completion_tokens = Some(c);
            }
        }
        if let Some(p) = v
            .pointer("/metrics/speculative_decoding")
            .filter(|p| p.is_object())
        {
            self.vllm = Some(p.clone());
        }
        if let Some(p) = v
            .pointer("/sglext/spec_tokens_details")
            .filter(|p| p.is_object())
        {
            self.sglang = Some(p.clone());
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.timings = Some(t.clone());
        }
    }

    /// Removes the credentials in `secrets` from everything the server sent:
    /// known values from the generated text (so it stays comparable byte for
    /// byte), known values and credential shapes from the finish reason, the
    /// error message and the spec-decode payloads (whose malformed-payload
    /// messages may quote them).
    pub(crate) fn scrub(&mut self, secrets: &Secrets) {
        if let std::borrow::Cow::Owned(clean) = secrets.scrub_output(&self.text) {
            self.text = clean;
        }
        for s in [&mut self.finish_reason, &mut self.server_error]
            .into_iter()
            .flatten()
        {
            secrets.scrub_in_place(s);
        }
        for v in [
            &mut self.vllm,
            &mut self.trtllm,
            &mut self.sglang,
            &mut self.timings,
        ]
        .into_iter()
        .chain(self.custom.iter_mut().map(|(_, p)| p))
        .flatten()
        {
            secrets.scrub_json(v);
        }
    }

    /// The server-reported timings (llama.cpp), if any.
    pub(crate) fn server_timings(&self) -> Option<ServerTimings> {
        let t = self.timings.as_ref()?;
        let f = |k: &str| t.get(k).and_then(Value::as_f64);
        let u = |k: &str| t.get(k).and_then(Value::as_u64);
        Some(ServerTimings {
            prompt_n: u("prompt_n"),
            cache_n: u("cache_n"),
            prompt_ms: f("prompt_ms"),
            prompt_per_second: f("prompt_per_second"),
            predicted_n: u("predicted_n"),
            predicted_ms: f("predicted_ms"),
            predicted_per_second: f("predicted_per_second"),
        })
    }

    /// Completion tokens from `usage`, else from llama.cpp's `predicted_n`.
    pub(crate) fn completion_tokens(&self) -> Option<u64> {
        self.completion_tokens.or_else(|| {
            self.timings
                .as_ref()
                .and_then(|t| t.get("predicted_n"))
                .and_then(Value::as_u64)
        })
    }

    /// TensorRT-LLM's tokens per iteration, when sent: `Err` when it cannot
    /// be right (below 1, not a number).
    pub(crate) fn tokens_per_iteration(&self) -> Result<Option<f64>, MalformedSpec> {
        self.tokens_per_iter
            .as_ref()
            .map(spec::tokens_per_iteration)
            .transpose()
    }

    /// The spec-decode stats, from the richest format the server sent.
    ///
    /// Registered adapters come first, in order; then the per-request
    /// formats with verify-step counts (vLLM,
    /// TensorRT-LLM, SGLang); llama.cpp's timings last.
    pub(crate) fn spec(&self) -> Result<Option<SpecDecodeStats>, MalformedSpec> {
        for (adapter, payload) in &self.custom {
            if let Some(p) = payload {
                return spec::from_adapter(adapter.as_ref(), p).map(Some);
            }
        }
        if let Some(p) = &self.vllm {
            return spec::from_vllm(p).map(Some);
        }
        if let Some(p) = &self.trtllm {
            return spec::from_trtllm(p).map(Some);
        }
        if let Some(p) = &self.sglang {
            return spec::from_sglang(p).map(Some);
        }
        match &self.timings {
            Some(t) => spec::from_llamacpp(t),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn stream_chunks_fold_into_text_timing_usage_and_stats() {
        let t0 = Instant::now();
        let mut s = ResponseState::default();
        s.absorb(
            &json!({"choices":[{"delta":{"role":"assistant","content":null}}]}),
            t0,
        );
        s.absorb(
            &json!({"choices":[{"delta":{"reasoning":"think"}}]}),
            t0 + Duration::from_millis(10),
        );
        s.absorb(
            &json!({"choices":[{"delta":{"content":" a b"}}]}),
            t0 + Duration::from_millis(13),
        );
        s.absorb(
            &json!({"choices":[{"delta":{},"finish_reason":"stop"}]}),
            t0 + Duration::from_millis(14),
        );
        s.absorb(
            &json!({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3},
                "metrics":{"speculative_decoding":{"acceptance_histogram":[1,1],"num_spec_steps":2,
                "num_accepted_draft_tokens":1,"num_draft_tokens":2,"num_spec_tokens":1}}}),
            t0 + Duration::from_millis(15),
        );
        assert_eq!(s.text, "think a b");
        assert_eq!(s.chunks, 2);
        assert_eq!(s.first_output, Some(t0 + Duration::from_millis(10)));
        assert_eq!(s.gaps_ns, vec![3_000_000]);
        assert_eq!((s.prompt_tokens, s.completion_tokens()), (Some(5), Some(3)));
        assert_eq!(s.finish_reason.as_deref(), Some("stop"));
        assert_eq!(s.spec().unwrap().unwrap().verify_steps, Some(2));
    }

    #[test]
    fn error_objects_in_both_shapes() {
        let mut s = ResponseState::default();
        s.absorb(
            &json!({"error":{"message":"boom","type":"x"}}),
            Instant::now(),
        );
        assert_eq!(s.server_error.as_deref(), Some("boom"));
        let mut s = ResponseState::default();
        s.absorb(
            &json!({"object":"error","message":"old style"}),
            Instant::now(),
        );
        assert_eq!(s.server_error.as_deref(), Some("old style"));
        let mut s = ResponseState::default();
        s.absorb(
            &json!({"choices":[{"delta":{},"finish_reason":"error"}]}),
            Instant::now(),
        );
        assert!(s.server_error.is_some());
    }

    #[test]
    fn llamacpp_completion_tokens_come_from_timings() {
        let mut s = ResponseState::default();
        s.absorb(
            &json!({"choices":[{"message":{"content":"hi"},"finish_reason":"length"}],
                "timings":{"predicted_n":64,"predicted_per_second":90.5,"draft_n":47,"draft_n_accepted":40}}),
            Instant::now(),
        );
        assert_eq!(s.completion_tokens(), Some(64));
        assert_eq!(s.server_timings().unwrap().predicted_per_second, Some(90.5));
        assert_eq!(s.spec().unwrap().unwrap().verify_steps, Some(24));
    }
}
