//! The typed read of a response chunk of the common shape.
//!
//! A stream of 100 tokens is 100 chunks, and reading each is most of what
//! the client does per request. Building a `serde_json::Value` of a chunk
//! was 40% of the client's CPU; a derived struct of it (strings borrowed)
//! still moved a ~500-byte struct through every level of the read. Here the
//! chunk is read by visitors that append its text straight to the
//! response's and stage the few other things it holds ([`ChunkFold`]):
//! nothing is built that is not kept. Wall time per content chunk 535 ->
//! 310 ns on the reference machine (docs/benchmarks.md).
//!
//! Whatever this read does not take (an error object, a named key of
//! another type, a key given twice) makes it give up with the text as it
//! was, and the chunk goes through the general `Value` path, which decides
//! every case; a test holds the two folds equal over genuine engine chunks.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::vllm_fields::{MetricsSummary, VllmFields};

/// What a chunk holds beyond its text, staged: the response takes it only
/// once the whole chunk has been read and is not an error.
#[derive(Debug, Default)]
pub(crate) struct ChunkFold<'a> {
    /// Some choice carried non-empty text.
    pub produced: bool,
    /// The strings of text read, and the last of them when it was
    /// borrowed from the chunk (no escapes): where a chunk's one text
    /// string lies ([`ChunkFold::text_span`]).
    text_strings: u32,
    last_text: Option<&'a str>,
    /// The last choice's `finish_reason`.
    pub finish_reason: Option<Cow<'a, str>>,
    /// Some choice finished with `"error"`.
    pub finished_with_error: bool,
    /// `usage.prompt_tokens` and `usage.completion_tokens`.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// The choices' payloads, the last of each of its shape (vLLM's
    /// `speculative_decoding_stats` and TensorRT-LLM's `speculative_decoding`
    /// objects, `avg_decoded_tokens_per_iter` any value but `null`).
    pub choice_payloads: [Option<Value>; 3],
    /// The top level's `metrics.speculative_decoding` (vLLM's per-request
    /// summary), `sglext` and `timings`.
    pub vllm_summary: Option<VllmFields>,
    pub sglext: Option<Value>,
    pub timings: Option<Value>,
}

impl<'a> ChunkFold<'a> {
    /// Whether the chunk did nothing but (maybe) add text: no finish
    /// reason, token counts or payload.
    pub(crate) fn only_text(&self) -> bool {
        self.finish_reason.is_none()
            && !self.finished_with_error
            && self.prompt_tokens.is_none()
            && self.completion_tokens.is_none()
            && self.choice_payloads.iter().all(Option::is_none)
            && self.vllm_summary.is_none()
            && self.sglext.is_none()
            && self.timings.is_none()
    }

    /// Appends one string of a choice's text to `text`.
    pub(crate) fn add_text(&mut self, text: &mut String, s: Cow<'a, str>) {
        text.push_str(&s);
        self.produced |= !s.is_empty();
        self.text_strings += 1;
        self.last_text = match s {
            Cow::Borrowed(s) => Some(s),
            Cow::Owned(_) => None,
        };
    }

    /// The byte range in `json` (the chunk this fold was read from) of
    /// its text, when the chunk held exactly one string of text and the
    /// string had no escapes (so its bytes are its text).
    pub(crate) fn text_span(&self, json: &str) -> Option<(usize, usize)> {
        let text = self.last_text.filter(|_| self.text_strings == 1)?;
        let start = (text.as_ptr() as usize).checked_sub(json.as_ptr() as usize)?;
        (start + text.len() <= json.len()).then_some((start, start + text.len()))
    }
}

/// Reads `json` as a chunk of the common shape, appending its generated
/// text to `text` in the order the general path appends it (per choice:
/// `delta`'s reasoning, reasoning_content and content, then `message`'s,
/// then `text`); `None`, with `text` as it was, when the chunk is not one
/// this read takes. The byte scan ([`crate::chunk_scan`]) reads it when it
/// can, serde's visitors when it cannot.
pub(crate) fn read_chunk<'a>(json: &'a str, text: &mut String) -> Option<ChunkFold<'a>> {
    crate::chunk_scan::scan_chunk(json, text).or_else(|| read_typed(json, text))
}

/// [`read_chunk`] by serde's visitors alone.
pub(crate) fn read_typed<'a>(json: &'a str, text: &mut String) -> Option<ChunkFold<'a>> {
    let before = text.len();
    let mut fold = ChunkFold::default();
    let mut de = serde_json::Deserializer::from_str(json);
    let read = ChunkSeed {
        text: &mut *text,
        fold: &mut fold,
    }
    .deserialize(&mut de)
    .and_then(|plain| de.end().map(|()| plain));
    if read.unwrap_or(false) {
        Some(fold)
    } else {
        text.truncate(before);
        None
    }
}

/// Marks `key` seen; a key given twice is an error (the general path
/// takes the last, which this read does not try to match).
fn first_time<E: serde::de::Error>(seen: &mut u16, key: u16) -> Result<(), E> {
    if *seen & key != 0 {
        return Err(E::custom("a key given twice"));
    }
    *seen |= key;
    Ok(())
}

/// The top-level keys this read looks at.
#[derive(Clone, Copy, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChunkKey {
    Choices,
    Usage,
    Error,
    Object,
    Metrics,
    Sglext,
    Timings,
    #[serde(other)]
    Other,
}

/// The whole chunk: `Ok(false)` when it is an error (for the general path).
struct ChunkSeed<'s, 'a> {
    text: &'s mut String,
    fold: &'s mut ChunkFold<'a>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for ChunkSeed<'_, 'a> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ChunkSeed<'_, 'a> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a response object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let (mut seen, mut plain) = (0u16, true);
        while let Some(key) = map.next_key::<ChunkKey>()? {
            let bit = 1 << key as u16;
            if !matches!(key, ChunkKey::Other) {
                first_time(&mut seen, bit)?;
            }
            match key {
                ChunkKey::Choices => map.next_value_seed(ChoicesSeed {
                    text: &mut *self.text,
                    fold: &mut *self.fold,
                })?,
                ChunkKey::Usage => {
                    if let Some(u) = map.next_value::<Option<Usage>>()? {
                        self.fold.prompt_tokens = u.prompt_tokens;
                        self.fold.completion_tokens = u.completion_tokens;
                    }
                }
                // `null` and `false` say there is no error.
                ChunkKey::Error => {
                    let e = map.next_value::<Option<Value>>()?;
                    plain &= e.is_none_or(|e| e == Value::Bool(false));
                }
                // Older vLLM and SGLang: `{"object": "error", ...}`.
                ChunkKey::Object => {
                    let o = map.next_value::<Option<Borrowed<'de>>>()?;
                    plain &= o.is_none_or(|o| o.0 != "error");
                }
                ChunkKey::Metrics => {
                    let metrics = map.next_value::<Option<MetricsSummary>>()?;
                    self.fold.vllm_summary = metrics.and_then(|m| m.0);
                }
                ChunkKey::Sglext => self.fold.sglext = map.next_value()?,
                ChunkKey::Timings => self.fold.timings = map.next_value()?,
                ChunkKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(plain)
    }
}

/// `usage` as an object of token counts.
#[derive(Deserialize)]
struct Usage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// A string, borrowed from the input when it holds no escapes. (serde's
/// `#[serde(borrow)]` copies a `Cow` inside an `Option` every time; a
/// newtype's is one it borrows.)
struct Borrowed<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Borrowed<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Inner<'a>(#[serde(borrow)] Cow<'a, str>);
        Ok(Borrowed(Inner::deserialize(d)?.0))
    }
}

/// `choices`: `null` or an array of choice objects.
struct ChoicesSeed<'s, 'a> {
    text: &'s mut String,
    fold: &'s mut ChunkFold<'a>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for ChoicesSeed<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ChoicesSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of choices")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(ChoiceSeed {
                text: &mut *self.text,
                fold: &mut *self.fold,
            })?
            .is_some()
        {}
        Ok(())
    }
}

/// The keys of a choice this read looks at.
#[derive(Clone, Copy, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum ChoiceKey {
    Delta,
    Message,
    Text,
    FinishReason,
    SpeculativeDecodingStats,
    SpeculativeDecoding,
    AvgDecodedTokensPerIter,
    #[serde(other)]
    Other,
}

/// One choice object.
struct ChoiceSeed<'s, 'a> {
    text: &'s mut String,
    fold: &'s mut ChunkFold<'a>,
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for ChoiceSeed<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de: 'a, 'a> Visitor<'de> for ChoiceSeed<'_, 'a> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a choice object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u16;
        let (mut delta, mut message, mut plain_text) = (None, None, None);
        while let Some(key) = map.next_key::<ChoiceKey>()? {
            if !matches!(key, ChoiceKey::Other) {
                first_time(&mut seen, 1 << key as u16)?;
            }
            match key {
                ChoiceKey::Delta => delta = map.next_value::<Option<TextFields<'de>>>()?,
                ChoiceKey::Message => message = map.next_value::<Option<TextFields<'de>>>()?,
                ChoiceKey::Text => plain_text = map.next_value::<Option<Borrowed<'de>>>()?,
                ChoiceKey::FinishReason => {
                    if let Some(r) = map.next_value::<Option<Borrowed<'de>>>()? {
                        self.fold.finished_with_error |= r.0 == "error";
                        self.fold.finish_reason = Some(r.0);
                    }
                }
                // The spec-decode stats are objects; tokens per iteration
                // any value but `null` (which reads as none).
                ChoiceKey::SpeculativeDecodingStats => keep_payload(
                    &mut self.fold.choice_payloads[0],
                    map.next_value()?,
                    Value::is_object,
                ),
                ChoiceKey::SpeculativeDecoding => keep_payload(
                    &mut self.fold.choice_payloads[1],
                    map.next_value()?,
                    Value::is_object,
                ),
                ChoiceKey::AvgDecodedTokensPerIter => {
                    keep_payload(&mut self.fold.choice_payloads[2], map.next_value()?, |_| {
                        true
                    })
                }
                ChoiceKey::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let fields = [delta, message].into_iter().flatten().flat_map(|t| t.0);
        for s in fields.flatten().chain(plain_text.map(|t| t.0)) {
            self.fold.add_text(self.text, s);
        }
        Ok(())
    }
}

/// A later choice's payload of the right shape replaces an earlier one;
/// one absent or of another shape does not (as the general path keeps them).
pub(crate) fn keep_payload(
    slot: &mut Option<Value>,
    payload: Option<Value>,
    shape: fn(&Value) -> bool,
) {
    if let Some(p) = payload.filter(shape) {
        *slot = Some(p);
    }
}

/// The keys of a `delta` or `message` whose strings are generated text.
#[derive(Clone, Copy, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum TextKey {
    Reasoning,
    ReasoningContent,
    Content,
    #[serde(other)]
    Other,
}

/// A choice's `delta` or `message`: its reasoning, reasoning_content and
/// content, in the order they are appended (`null` ones none).
struct TextFields<'a>([Option<Cow<'a, str>>; 3]);

impl<'de> Deserialize<'de> for TextFields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = TextFields<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a delta or message object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TextFields<'de>, A::Error> {
                let mut fields = TextFields([None, None, None]);
                let mut seen = 0u16;
                while let Some(key) = map.next_key::<TextKey>()? {
                    if matches!(key, TextKey::Other) {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    }
                    let slot = key as usize;
                    first_time(&mut seen, 1 << slot)?;
                    fields.0[slot] = map.next_value::<Option<Borrowed<'de>>>()?.map(|b| b.0);
                }
                Ok(fields)
            }
        }
        d.deserialize_map(Fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_appended_in_fold_order_and_strings_are_borrowed() {
        let chunk = r#"{"object":"chat.completion.chunk","choices":[{"delta":{"content":" tok","reasoning":"r\n"},"finish_reason":"stop","text":"t","message":{"reasoning_content":"m"}},{"text":"b","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":null}}"#;
        let mut text = String::from("old");
        let fold = read_chunk(chunk, &mut text).unwrap();
        // delta's reasoning (escaped, so owned), its content, message's,
        // then text; the second choice after the first.
        assert_eq!(text, "oldr\n tokmtb");
        assert!(fold.produced);
        // The last choice's reason, borrowed from the chunk.
        assert!(matches!(fold.finish_reason, Some(Cow::Borrowed("length"))));
        assert!(!fold.finished_with_error);
        assert_eq!(
            (fold.prompt_tokens, fold.completion_tokens),
            (Some(3), None)
        );
        assert!(fold.choice_payloads.iter().all(Option::is_none));
    }

    #[test]
    fn chunks_for_the_general_path_leave_the_text_as_it_was() {
        for chunk in [
            r#"{"choices":[{"delta":{"content":"x"}}],"error":{"message":"boom"}}"#,
            r#"{"choices":[{"delta":{"content":"x"}}],"object":"error"}"#,
            r#"{"choices":[{"text":"a","text":"b"}]}"#,
            r#"{"choices":[{"delta":{"content":"a","content":"b"}}]}"#,
            r#"{"choices":[{"text":"a"}],"choices":[{"text":"b"}]}"#,
            r#"{"choices":[{"text":"a"}],"usage":{"prompt_tokens":1.5}}"#,
            r#"{"choices":[{"text":"a"}, 5]}"#,
            r#"{"choices":[{"text":"a"}]} trailing"#,
            r#"{"choices":[{"text":"a"}]"#,
        ] {
            let mut text = String::from("kept");
            assert!(read_chunk(chunk, &mut text).is_none(), "{chunk}");
            assert_eq!(text, "kept", "{chunk}");
        }
        // `null` and `false` are no error; unknown keys may repeat.
        let mut text = String::new();
        let chunk = r#"{"error":null,"x":1,"x":2,"choices":[{"text":"a"}]}"#;
        assert!(read_chunk(chunk, &mut text).is_some());
        let chunk = r#"{"error":false,"choices":null}"#;
        assert!(read_chunk(chunk, &mut text).is_some());
        assert_eq!(text, "a");
    }
}
