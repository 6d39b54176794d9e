//! Folding a response (a JSON body or a stream of chunks) into measurements.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;
use speedbench_record::{ServerTimings, SpecDecodeStats};

use crate::chunk_scan::{self, ChunkFold};
use crate::chunk_template::ChunkTemplate;
use crate::secrets::Secrets;
use crate::spec::{self, MalformedSpec, SpecAdapter};
use crate::vllm_fields::VllmFields;

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
    vllm: Option<VllmFields>,
    trtllm: Option<Value>,
    sglang: Option<Value>,
    timings: Option<Value>,
    /// TensorRT-LLM's per-choice `avg_decoded_tokens_per_iter`, the last seen.
    tokens_per_iter: Option<Value>,
    /// Registered adapters, each with the last payload it found.
    custom: Vec<(Arc<dyn SpecAdapter>, Option<Value>)>,
    /// The last chunk that only added text, standing in for the next.
    template: ChunkTemplate,
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

/// Bytes reserved for a response's text when its first chunk comes.
const TEXT_START_CAPACITY: usize = 128;

/// The keys of a choice's `delta`/`message` whose strings are generated
/// text, in the order they are appended.
const TEXT_KEYS: [&str; 3] = ["reasoning", "reasoning_content", "content"];

impl ResponseState {
    /// A state that also looks for the payloads of `adapters`.
    pub(crate) fn new(adapters: &[Arc<dyn SpecAdapter>]) -> ResponseState {
        ResponseState {
            custom: adapters.iter().map(|a| (a.clone(), None)).collect(),
            ..ResponseState::default()
        }
    }

    /// Folds one JSON text (a whole body, or one stream chunk received at
    /// `at`); the parse error when it is not JSON.
    ///
    /// Chunks of the common shape are read byte by byte ([`chunk_scan`]):
    /// a stream of 100 tokens is 100 chunks, and building a
    /// `serde_json::Value` of each was 40% of the client's CPU; a chunk
    /// that copies the one before but for its text is not read again
    /// ([`ChunkTemplate`]). Anything that read
    /// does not take (an error object, a field of another type,
    /// a registered adapter that looks at the whole object) goes through
    /// [`Self::absorb`], which decides every case.
    pub(crate) fn absorb_json(
        &mut self,
        json: &[u8],
        at: Instant,
    ) -> Result<(), serde_json::Error> {
        match std::str::from_utf8(json) {
            Ok(text) => self.absorb_json_str(text, at),
            // Not UTF-8, so not JSON: serde_json names where it fails.
            Err(_) => serde_json::from_slice::<Value>(json).map(|v| self.absorb(&v, at)),
        }
    }

    /// [`Self::absorb_json`] of a text already known to be UTF-8 (an SSE
    /// event's data): serde_json then checks no string of it again.
    pub(crate) fn absorb_json_str(
        &mut self,
        json: &str,
        at: Instant,
    ) -> Result<(), serde_json::Error> {
        if self.text.capacity() == 0 {
            // Room for a short answer at once, not grown from 8 bytes.
            self.text.reserve(TEXT_START_CAPACITY);
        }
        if self.custom.is_empty() {
            // A copy of the chunk before but for its text adds only that.
            if let Some(text) = self.template.text_of(json) {
                let produced = self.push_text(text);
                self.produced(produced, at);
                return Ok(());
            }
            if let Some(fold) = chunk_scan::read_chunk(json, &mut self.text) {
                self.template.keep(json, &fold);
                self.absorb_typed(fold, at);
                return Ok(());
            }
        }
        let v: Value = serde_json::from_str(json)?;
        self.absorb(&v, at);
        Ok(())
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
                    for key in TEXT_KEYS {
                        if let Some(s) = holder.get(key).and_then(Value::as_str) {
                            produced |= self.push_text(s);
                        }
                    }
                }
                if let Some(s) = choice.get("text").and_then(Value::as_str) {
                    produced |= self.push_text(s);
                }
                if let Some(r) = choice.get("finish_reason").and_then(Value::as_str) {
                    self.set_finish_reason(r);
                }
                self.take_choice_payloads(
                    choice.get("speculative_decoding_stats").cloned(),
                    choice.get("speculative_decoding").cloned(),
                    choice.get("avg_decoded_tokens_per_iter").cloned(),
                );
            }
        }
        self.produced(produced, at);
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.set_usage(
                u.get("prompt_tokens").and_then(Value::as_u64),
                u.get("completion_tokens").and_then(Value::as_u64),
            );
        }
        let vllm_summary = (v.get("metrics"))
            .and_then(|m| m.get("speculative_decoding"))
            .cloned()
            .and_then(VllmFields::of);
        self.take_payloads(
            vllm_summary,
            v.get("sglext").cloned(),
            v.get("timings").cloned(),
        );
    }

    /// [`Self::absorb`] of a chunk read by [`chunk_scan`] (its text already appended):
    /// the same steps, to the same end.
    fn absorb_typed(&mut self, fold: ChunkFold<'_>, at: Instant) {
        if fold.finished_with_error {
            self.set_finish_reason("error");
        }
        if let Some(r) = fold.finish_reason {
            self.finish_reason = Some(r.into_owned());
        }
        let [vllm_stats, trtllm, tokens_per_iter] = fold.choice_payloads;
        self.take_choice_payloads(vllm_stats, trtllm, tokens_per_iter);
        self.produced(fold.produced, at);
        self.set_usage(fold.prompt_tokens, fold.completion_tokens);
        self.take_payloads(fold.vllm_summary, fold.sglext, fold.timings);
    }

    /// Appends generated text; true when there was some.
    fn push_text(&mut self, s: &str) -> bool {
        self.text.push_str(s);
        !s.is_empty()
    }

    fn set_finish_reason(&mut self, reason: &str) {
        if reason == "error" {
            self.server_error.get_or_insert_with(|| {
                "server ended the choice with finish_reason \"error\"".into()
            });
        }
        self.finish_reason = Some(reason.to_string());
    }

    /// A choice's spec-decode payloads, each kept when of its shape (moved,
    /// not copied: the chunk's read owns them).
    fn take_choice_payloads(
        &mut self,
        vllm_stats: Option<Value>,
        trtllm: Option<Value>,
        tokens_per_iter: Option<Value>,
    ) {
        if let Some(p) = vllm_stats.and_then(VllmFields::of) {
            self.vllm = Some(p);
        }
        if let Some(p) = trtllm.filter(Value::is_object) {
            self.trtllm = Some(p);
        }
        if let Some(v) = tokens_per_iter.filter(|v| !v.is_null()) {
            self.tokens_per_iter = Some(v);
        }
    }

    /// The top level's payloads: vLLM's `metrics.speculative_decoding`,
    /// SGLang's `sglext.spec_tokens_details`, llama.cpp's `timings`.
    fn take_payloads(
        &mut self,
        vllm_summary: Option<VllmFields>,
        sglext: Option<Value>,
        timings: Option<Value>,
    ) {
        let member = |holder: Option<Value>, key: &str| match holder {
            Some(Value::Object(mut m)) => m.remove(key).filter(Value::is_object),
            _ => None,
        };
        if let Some(p) = vllm_summary {
            self.vllm = Some(p);
        }
        if let Some(p) = member(sglext, "spec_tokens_details") {
            self.sglang = Some(p);
        }
        if let Some(t) = timings.filter(Value::is_object) {
            self.timings = Some(t);
        }
    }

    /// A chunk that carried text counts as one output chunk at `at`.
    fn produced(&mut self, produced: bool, at: Instant) {
        if produced {
            self.chunks += 1;
            if let Some(prev) = self.last_output {
                self.gaps_ns.push(at.duration_since(prev).as_nanos() as u64);
            }
            self.first_output.get_or_insert(at);
            self.last_output = Some(at);
        }
    }

    fn set_usage(&mut self, prompt_tokens: Option<u64>, completion_tokens: Option<u64>) {
        if let Some(p) = prompt_tokens {
            self.prompt_tokens = Some(p);
        }
        if let Some(c) = completion_tokens {
            self.completion_tokens = Some(c);
        }
    }

    /// Removes the credentials in `secrets` from everything the server sent
    /// that leaves as text: known values from the generated text (so it
    /// stays comparable byte for byte), known values and credential shapes
    /// from the finish reason and the error message. The spec-decode
    /// payloads leave only as numbers, or as the message of one that cannot
    /// be right, which is scrubbed where it is made (`HttpClient::exchange`):
    /// scrubbing every key and string of every payload was ~6,000
    /// instructions a request for a vLLM summary.
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
            return spec::from_vllm_fields(p).map(Some);
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

    /// A fixture payload of `fixtures/engines/` (its first line names the
    /// source).
    fn engine_fixture(name: &str) -> String {
        let path = format!(
            "{}/../../fixtures/engines/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        text.split_once('\n').unwrap().1.trim().to_string()
    }

    /// The byte read of a chunk folds exactly as the `Value` read does,
    /// over genuine engine payloads in every place they arrive, and the
    /// shapes it must leave to the general path go there.
    #[test]
    fn the_byte_read_folds_every_chunk_as_the_value_read_does() {
        let vllm = engine_fixture("vllm-doc-per-request-summary.json");
        let sglang = engine_fixture("sglang-pr33518-sglext-spec-tokens-details.json");
        let timings = engine_fixture("mlxvlm-pr1788-timings.json");
        let trtllm = engine_fixture("trtllm-per-choice-avg-decoded-tokens-per-iter.json");
        let vllm_payload = vllm
            .strip_prefix(r#"{"metrics": {"speculative_decoding": "#)
            .and_then(|p| p.strip_suffix("}}"))
            .unwrap();
        // (chunk, read by the byte read?)
        let chunks: Vec<(String, bool)> = vec![
            (r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#.into(), true),
            (r#"{"choices":[{"index":0,"delta":{"content":"Caf\u00e9 \"x\"\n"},"logprobs":null,"finish_reason":null}]}"#.into(), true),
            (r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think","content":null}}]}"#.into(), true),
            (r#"{"choices":[{"index":0,"delta":{"reasoning":"r"},"finish_reason":null}]}"#.into(), true),
            (r#"{"choices":[{"index":0,"text":" done","finish_reason":"length"}]}"#.into(), true),
            (r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#.into(), true),
            (format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop","speculative_decoding_stats":{vllm_payload}}}]}}"#), true),
            (vllm.clone(), true),
            (format!(r#"{{"choices":[],"sglext":{{"spec_tokens_details":{sglang}}}}}"#), true),
            (format!(r#"{{"content":"llama","stop":true,"timings":{timings}}}"#), true),
            (trtllm.clone(), true),
            (r#"{"choices":[{"index":0,"speculative_decoding":{"acceptance_length":2.0}}],"usage":null,"error":null}"#.into(), true),
            (r#"{"choices":null,"metrics":null,"sglext":{"other":1},"timings":[1],"error":false}"#.into(), true),
            // Order: text per choice delta, message, text (reasoning first);
            // a later choice's payload of another shape keeps the earlier;
            // the top level's vLLM payload wins whatever the key order.
            (r#"{"choices":[{"text":"3","message":{"content":"2","reasoning":"1"},"delta":{"content":"b","reasoning_content":"a"}},{"delta":{"content":"4"}}]}"#.into(), true),
            (format!(r#"{{"choices":[{{"speculative_decoding_stats":{vllm_payload},"speculative_decoding":{{"acceptance_length":3.0}},"avg_decoded_tokens_per_iter":2.5}},{{"speculative_decoding_stats":5,"speculative_decoding":[1],"avg_decoded_tokens_per_iter":null}}]}}"#), true),
            (format!(r#"{{"metrics":{{"speculative_decoding":{{"num_drafts":1}}}},"choices":[{{"speculative_decoding_stats":{vllm_payload}}}]}}"#), true),
            // For the general path: errors, and named keys of other types.
            (r#"{"error":{"message":"boom","code":500}}"#.into(), false),
            (r#"{"object":"error","message":"old-style","code":400}"#.into(), false),
            (r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#.into(), false),
            (r#"{"choices":[{"finish_reason":"stop"},"not an object"]}"#.into(), false),
            (r#"{"choices":{"0":{}},"usage":{"prompt_tokens":1.5}}"#.into(), false),
            (r#"{"usage":"none","choices":[{"text":"a","text":"b"}]}"#.into(), false),
            (r#"{"choices":[{"finish_reason":"error","delta":{"content":"x"}}]}"#.into(), true),
            (r#"{"choices":[{"finish_reason":"error"},{"finish_reason":"stop"}],"usage":{"completion_tokens":9}}"#.into(), true),
        ];
        let t0 = Instant::now();
        let (mut typed, mut by_value) = (ResponseState::default(), ResponseState::default());
        for (n, (chunk, fast)) in chunks.iter().enumerate() {
            let at = t0 + Duration::from_millis(n as u64);
            let read_fast = chunk_scan::read_chunk(chunk, &mut String::new()).is_some();
            assert_eq!(read_fast, *fast, "chunk {n}: {chunk}");
            typed.absorb_json(chunk.as_bytes(), at).unwrap();
            by_value.absorb(&serde_json::from_str(chunk).unwrap(), at);
            assert_eq!(
                format!("{typed:?}"),
                format!("{by_value:?}"),
                "after chunk {n}: {chunk}"
            );
        }
        // The fold saw what the chunks hold (a check on the check).
        assert!(
            typed.text.starts_with("Café \"x\"\nthinkr done"),
            "{}",
            typed.text
        );
        assert_eq!(typed.prompt_tokens, Some(12));
        assert!(typed.vllm.is_some() && typed.sglang.is_some() && typed.timings.is_some());
        assert_eq!(typed.server_error.as_deref(), Some("boom"));
        assert!(typed.absorb_json(b"{not json", t0).is_err());
        // Bytes that are not UTF-8 are not JSON, named as serde_json names them.
        let e = typed.absorb_json(b"{\"a\": \"\xff\"}", t0).unwrap_err();
        assert!(e.to_string().contains("invalid unicode"), "{e}");
    }

    /// A stream in vLLM's chunk format (every key its chat chunks send):
    /// with the chunk before standing in for each chunk like it, the fold
    /// is the `Value` read's after every chunk, texts of every kind
    /// included; the chunk before stands in for most of them.
    #[test]
    fn a_stream_folds_alike_with_the_chunk_before_standing_in() {
        let chunk = |text: &str, finish: &str| {
            let text = serde_json::to_string(text).unwrap();
            format!(
                r#"{{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1796502691,"model":"smollm2-135m","choices":[{{"index":0,"delta":{{"content":{text},"reasoning_content":null}},"logprobs":null,"finish_reason":{finish},"token_ids":null}}]}}"#
            )
        };
        let texts = [
            "", " Hello", " there", "!", " é", " 日本", "", " a\\b", " \"q\"", " ", "\n", "\t",
            " x", " y", " z",
        ];
        let mut stream: Vec<String> = texts.iter().map(|t| chunk(t, "null")).collect();
        stream.push(chunk("", "\"length\""));
        stream.push(r#"{"id":"chatcmpl-9","choices":[],"usage":{"prompt_tokens":33,"completion_tokens":16}}"#.into());
        let t0 = Instant::now();
        let (mut fast, mut by_value) = (ResponseState::default(), ResponseState::default());
        let mut stood_in = 0;
        for (n, chunk) in stream.iter().enumerate() {
            let at = t0 + Duration::from_millis(n as u64);
            stood_in += usize::from(fast.template.text_of(chunk).is_some());
            fast.absorb_json(chunk.as_bytes(), at).unwrap();
            by_value.absorb(&serde_json::from_str(chunk).unwrap(), at);
            assert_eq!(
                format!("{fast:?}"),
                format!("{by_value:?}"),
                "chunk {n}: {chunk}"
            );
        }
        assert_eq!(fast.text, texts.concat());
        assert_eq!(fast.finish_reason.as_deref(), Some("length"));
        assert_eq!(fast.completion_tokens, Some(16));
        // Read in full: the first, the four with escapes (the chunk kept
        // before them stays) and the last two.
        assert_eq!(stood_in, 10, "of {}", stream.len());
    }

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
