//! The read of a response chunk of the common shape, byte by byte.
//!
//! A stream of 100 tokens is 100 chunks, and reading each is most of what
//! the client does per request. Building a `serde_json::Value` of a chunk
//! was 40% of the client's CPU; serde's visitors over it (strings
//! borrowed, nothing built that was not kept) still cost ~7,300
//! instructions for each chunk the stream's template
//! ([`crate::chunk_template`]) cannot stand in for (the first, the first
//! content after the role, the finish and the usage with a server's
//! statistics), a third of the client's instructions per request: serde's
//! general machinery, every key read into a string and matched through an
//! identifier visitor, every value skipped through `IgnoredAny`. This read
//! walks the bytes once, compares keys as bytes and skips what it does not
//! keep in place; it appends the chunk's text straight to the response's
//! and stages the few other things it holds ([`ChunkFold`]).
//!
//! It takes only what it is sure of: JSON as RFC 8259 writes it (it checks
//! every byte it passes, skipped values included), keys without escapes,
//! each named key of the type the general path reads. Anything else (an
//! error object, a key given twice, a number where a count must be an
//! integer, a lone surrogate, nesting past [`MAX_DEPTH`]) makes it give up
//! with the text as it was, and the chunk goes through the general `Value`
//! path, which decides every case. The statistics objects it meets
//! (`sglext`, `timings`, the choices' payloads) it hands to serde_json's
//! `Value` read where they lie; vLLM's per-request summary it scans. Tests
//! hold the fold of every chunk it takes equal to the `Value` path's, over
//! genuine engine chunks and tens of thousands of mutations of them.

use std::borrow::Cow;

use serde_json::Value;

use crate::vllm_fields::VllmFields;

/// Deeper nesting than this in a skipped value is left to serde_json
/// (whose own limit is 128).
const MAX_DEPTH: u32 = 32;

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
/// this read takes.
pub(crate) fn read_chunk<'a>(json: &'a str, text: &mut String) -> Option<ChunkFold<'a>> {
    let before = text.len();
    let mut scan = Scan { src: json, at: 0 };
    let mut fold = ChunkFold::default();
    let read = scan.chunk(text, &mut fold).and_then(|()| {
        scan.skip_ws();
        (scan.at == json.len()).then_some(())
    });
    match read {
        Some(()) => Some(fold),
        None => {
            text.truncate(before);
            None
        }
    }
}

/// A later choice's payload of the right shape replaces an earlier one;
/// one absent or of another shape does not (as the general path keeps them).
fn keep_payload(slot: &mut Option<Value>, payload: Option<Value>, shape: fn(&Value) -> bool) {
    if let Some(p) = payload.filter(shape) {
        *slot = Some(p);
    }
}

/// Marks the key of bit `bit` seen; `None` when it was seen before.
fn first_time(seen: &mut u16, bit: u16) -> Option<()> {
    (*seen & bit == 0).then(|| *seen |= bit)
}

/// A position in the chunk's text.
struct Scan<'a> {
    src: &'a str,
    at: usize,
}

impl<'a> Scan<'a> {
    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    #[inline]
    fn skip_ws(&mut self) {
        let bytes = self.bytes();
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.bytes().get(self.at).copied()
    }

    /// Consumes `byte` after whitespace.
    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Consumes `null` when it comes next.
    fn null(&mut self) -> Option<bool> {
        if self.peek()? != b'n' {
            return Some(false);
        }
        self.literal(b"null")?;
        Some(true)
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes().get(self.at..end)? == word).then(|| self.at = end)
    }

    /// An object's members: `member` reads each value after its key (a
    /// key without escapes, as bytes).
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            member(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array's elements, each read by `element`.
    fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            element(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A key: a string without escapes, as its bytes.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.at;
        self.skip_plain();
        let bytes = self.bytes();
        (*bytes.get(self.at)? == b'"').then(|| {
            self.at += 1;
            &bytes[start..self.at - 1]
        })
    }

    /// A string: borrowed when it holds no escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.eat(b'"')?;
        let start = self.at;
        self.skip_plain();
        let bytes = self.bytes();
        match *bytes.get(self.at)? {
            b'"' => {
                self.at += 1;
                // Both ends are ASCII quotes: char boundaries.
                Some(Cow::Borrowed(&self.src[start..self.at - 1]))
            }
            b'\\' => {
                let mut owned = String::from(&self.src[start..self.at]);
                self.escaped_rest(&mut owned)?;
                Some(Cow::Owned(owned))
            }
            _ => None,
        }
    }

    /// Moves to the next quote, backslash or control character (or the
    /// end), eight bytes at a time: the lowest byte a word's test flags is
    /// the first such byte (a false flag can only follow a true one).
    #[inline]
    fn skip_plain(&mut self) {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        let bytes = self.bytes();
        while let Some(word) = bytes.get(self.at..self.at + 8) {
            let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
            let zero_in = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
            let special = zero_in(x ^ (ONES * u64::from(b'"')))
                | zero_in(x ^ (ONES * u64::from(b'\\')))
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
            if special != 0 {
                self.at += (special.trailing_zeros() / 8) as usize;
                return;
            }
            self.at += 8;
        }
        while let Some(&b) = bytes.get(self.at) {
            if b == b'"' || b == b'\\' || b < 0x20 {
                return;
            }
            self.at += 1;
        }
    }

    /// The rest of a string from a backslash, unescaped onto `out`, to
    /// its closing quote.
    fn escaped_rest(&mut self, out: &mut String) -> Option<()> {
        loop {
            let bytes = self.bytes();
            match *bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                b'\\' => {
                    self.at += 1;
                    let escape = *bytes.get(self.at)?;
                    self.at += 1;
                    out.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    });
                }
                b if b < 0x20 => return None,
                _ => {
                    let start = self.at;
                    self.skip_plain();
                    out.push_str(&self.src[start..self.at]);
                }
            }
        }
    }

    /// The character of a `\u` escape (the `\u` read), a surrogate pair
    /// taken whole; `None` for a lone surrogate.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if !(0xD800..0xE000).contains(&first) {
            return char::from_u32(first);
        }
        if first >= 0xDC00 {
            return None;
        }
        self.literal(b"\\u")?;
        let second = self.hex4()?;
        if !(0xDC00..0xE000).contains(&second) {
            return None;
        }
        char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.at..self.at + 4)?;
        let mut value = 0;
        for &d in digits {
            value = value * 16 + char::from(d).to_digit(16)?;
        }
        self.at += 4;
        Some(value)
    }

    /// `null` or a string.
    fn optional_string(&mut self) -> Option<Option<Cow<'a, str>>> {
        if self.null()? {
            return Some(None);
        }
        self.string().map(Some)
    }

    /// `null` or an integer that fits a `u64` (a fraction, an exponent or
    /// a sign is left to the `Value` read).
    fn optional_count(&mut self) -> Option<Option<u64>> {
        if self.null()? {
            return Some(None);
        }
        self.count().map(Some)
    }

    /// Skips one value, checking it is JSON.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'{' => self.object(|s, _| s.skip_value(depth + 1)),
            b'[' => self.array(|s| s.skip_value(depth + 1)),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// A number as RFC 8259 writes it: `-? (0 | [1-9][0-9]*) (. [0-9]+)?
    /// ([eE] [+-]? [0-9]+)?`.
    fn number(&mut self) -> Option<()> {
        let bytes = self.bytes();
        let digits = |at: &mut usize| {
            let start = *at;
            while bytes.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at > start
        };
        let mut at = self.at;
        if bytes.get(at) == Some(&b'-') {
            at += 1;
        }
        match bytes.get(at) {
            Some(b'0') => at += 1,
            Some(b'1'..=b'9') => {
                digits(&mut at);
            }
            _ => return None,
        }
        if bytes.get(at) == Some(&b'.') {
            at += 1;
            digits(&mut at).then_some(())?;
        }
        let exponent = matches!(bytes.get(at), Some(b'e' | b'E'));
        if exponent {
            at += 1;
            if let Some(b'+' | b'-') = bytes.get(at) {
                at += 1;
            }
            digits(&mut at).then_some(())?;
        }
        // serde_json refuses a number beyond f64's range: one that could be
        // is left to it.
        let text = &self.src[self.at..at];
        if (exponent || text.len() > 18) && !text.parse::<f64>().is_ok_and(|v| v.abs() < 1e300) {
            return None;
        }
        self.at = at;
        Some(())
    }

    /// A value that serde reads (a statistics object), read from where
    /// the scan is; the scan goes on after it.
    fn serde_value<T: serde::de::DeserializeOwned>(&mut self) -> Option<T> {
        self.skip_ws();
        let rest = self.src.get(self.at..)?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        self.at += values.byte_offset();
        Some(value)
    }

    /// The whole chunk.
    fn chunk(&mut self, text: &mut String, fold: &mut ChunkFold<'a>) -> Option<()> {
        let mut seen = 0u16;
        self.object(|s, key| {
            let bit = match key {
                b"choices" => 1,
                b"usage" => 2,
                b"error" => 4,
                b"object" => 8,
                b"metrics" => 16,
                b"sglext" => 32,
                b"timings" => 64,
                _ => return s.skip_value(0),
            };
            first_time(&mut seen, bit)?;
            match key {
                b"choices" => s.choices(text, fold),
                b"usage" => s.usage(fold),
                // `null` and `false` say there is no error; an error is the
                // general path's.
                b"error" => match s.peek()? {
                    b'f' => s.literal(b"false"),
                    _ => s.null()?.then_some(()),
                },
                // Older vLLM and SGLang: `{"object": "error", ...}`.
                b"object" => s
                    .optional_string()?
                    .is_none_or(|o| o != "error")
                    .then_some(()),
                b"metrics" => s.metrics().map(|summary| fold.vllm_summary = summary),
                b"sglext" => s.serde_value().map(|v| fold.sglext = v),
                _ => s.serde_value().map(|v| fold.timings = v),
            }
        })
    }

    /// A top-level `metrics`: `null` or an object; its
    /// `speculative_decoding` member (the last, when given twice), as the
    /// `Value` read takes it.
    fn metrics(&mut self) -> Option<Option<VllmFields>> {
        if self.null()? {
            return Some(None);
        }
        let mut summary = None;
        self.object(|s, key| match key {
            b"speculative_decoding" => s.vllm_fields().map(|fields| summary = fields),
            _ => s.skip_value(0),
        })?;
        Some(summary)
    }

    /// vLLM's `speculative_decoding`: `null` or an object, whose fields
    /// the adapter reads kept as values (the last of a key given twice).
    fn vllm_fields(&mut self) -> Option<Option<VllmFields>> {
        if self.null()? {
            return Some(None);
        }
        let mut fields = VllmFields::default();
        self.object(|s, key| match VllmFields::slot_of(key) {
            Some(slot) => s.json_value().map(|value| fields.set(slot, value)),
            None => s.skip_value(0),
        })?;
        Some(Some(fields))
    }

    /// A value as serde_json's `Value` reads it: counts, arrays of counts
    /// and `null` here, anything else by serde_json.
    fn json_value(&mut self) -> Option<Value> {
        let start = self.at;
        if self.null()? {
            return Some(Value::Null);
        }
        if let Some(count) = self.count() {
            return Some(Value::from(count));
        }
        if self.peek()? == b'[' {
            let mut counts = Vec::new();
            let read = self.array(|s| s.count().map(|c| counts.push(Value::from(c))));
            if read.is_some() {
                return Some(Value::Array(counts));
            }
        }
        self.at = start;
        self.serde_value()
    }

    /// An integer that fits a `u64`, consumed only when it is one: digits,
    /// no leading zero, no fraction or exponent.
    fn count(&mut self) -> Option<u64> {
        self.skip_ws();
        let bytes = self.bytes();
        let start = self.at;
        let mut end = start;
        while bytes.get(end).is_some_and(u8::is_ascii_digit) {
            end += 1;
        }
        let digits = &self.src[start..end];
        let leading_zero = digits.len() > 1 && digits.starts_with('0');
        if leading_zero || matches!(bytes.get(end), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let count = digits.parse().ok()?;
        self.at = end;
        Some(count)
    }

    /// `usage`: `null` or an object of token counts.
    fn usage(&mut self, fold: &mut ChunkFold<'a>) -> Option<()> {
        let slot = |key: &[u8]| match key {
            b"prompt_tokens" => Some(0),
            b"completion_tokens" => Some(1),
            _ => None,
        };
        [fold.prompt_tokens, fold.completion_tokens] = self.named(slot, Self::optional_count)?;
        Some(())
    }

    /// `null` or an object: the values of the keys `slot` places (each
    /// given once), each read by `read`; its other keys skipped.
    fn named<T, const N: usize>(
        &mut self,
        slot: impl Fn(&[u8]) -> Option<usize>,
        read: impl Fn(&mut Self) -> Option<Option<T>>,
    ) -> Option<[Option<T>; N]> {
        let mut values = std::array::from_fn(|_| None);
        if self.null()? {
            return Some(values);
        }
        let mut seen = 0u16;
        self.object(|s, key| {
            let Some(slot) = slot(key) else {
                return s.skip_value(0);
            };
            first_time(&mut seen, 1 << slot)?;
            values[slot] = read(s)?;
            Some(())
        })?;
        Some(values)
    }

    /// `choices`: `null` or an array of choice objects.
    fn choices(&mut self, text: &mut String, fold: &mut ChunkFold<'a>) -> Option<()> {
        if self.null()? {
            return Some(());
        }
        self.array(|s| s.choice(text, fold))
    }

    /// One choice: its text appended as the general path appends it
    /// (`delta`'s, `message`'s, then `text`), its finish reason and
    /// payloads staged.
    fn choice(&mut self, text: &mut String, fold: &mut ChunkFold<'a>) -> Option<()> {
        let mut seen = 0u16;
        let (mut delta, mut message, mut plain) = ([None, None, None], [None, None, None], None);
        self.object(|s, key| {
            let bit = match key {
                b"delta" => 1,
                b"message" => 2,
                b"text" => 4,
                b"finish_reason" => 8,
                b"speculative_decoding_stats" => 16,
                b"speculative_decoding" => 32,
                b"avg_decoded_tokens_per_iter" => 64,
                _ => return s.skip_value(0),
            };
            first_time(&mut seen, bit)?;
            match key {
                b"delta" => delta = s.text_fields()?,
                b"message" => message = s.text_fields()?,
                b"text" => plain = s.optional_string()?,
                b"finish_reason" => {
                    if let Some(reason) = s.optional_string()? {
                        fold.finished_with_error |= reason == "error";
                        fold.finish_reason = Some(reason);
                    }
                }
                b"speculative_decoding_stats" => keep_payload(
                    &mut fold.choice_payloads[0],
                    s.serde_value()?,
                    Value::is_object,
                ),
                b"speculative_decoding" => keep_payload(
                    &mut fold.choice_payloads[1],
                    s.serde_value()?,
                    Value::is_object,
                ),
                _ => keep_payload(&mut fold.choice_payloads[2], s.serde_value()?, |_| true),
            }
            Some(())
        })?;
        for s in delta.into_iter().chain(message).chain([plain]).flatten() {
            fold.add_text(text, s);
        }
        Some(())
    }

    /// A `delta` or `message`: `null`, or an object whose reasoning,
    /// reasoning_content and content are strings or `null`.
    fn text_fields(&mut self) -> Option<[Option<Cow<'a, str>>; 3]> {
        let slot = |key: &[u8]| match key {
            b"reasoning" => Some(0),
            b"reasoning_content" => Some(1),
            b"content" => Some(2),
            _ => None,
        };
        self.named(slot, Self::optional_string)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::response::ResponseState;
    use std::time::Instant;

    /// The bodies of `fixtures/engines/`' JSON files (after the line that
    /// names the source).
    fn engine_bodies() -> Vec<String> {
        let dir = format!("{}/../../fixtures/engines", env!("CARGO_MANIFEST_DIR"));
        let mut bodies = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                bodies.push(text.split_once('\n').unwrap().1.trim().to_string());
            }
        }
        assert!(bodies.len() >= 6, "{}", bodies.len());
        bodies
    }

    /// Chunks as the simulator and vLLM stream them, and some of every
    /// kind this read takes.
    fn stream_chunks() -> Vec<String> {
        let head = r#""created":1796692487,"id":"chatcmpl-sim0","model":"speedbench-sim","object":"chat.completion.chunk""#;
        vec![
            format!(r#"{{"choices":[{{"delta":{{"content":"","role":"assistant"}},"finish_reason":null,"index":0,"logprobs":null}}],{head}}}"#),
            format!(r#"{{"choices":[{{"delta":{{"content":" accept time"}},"finish_reason":null,"index":0,"logprobs":null}}],{head}}}"#),
            format!(r#"{{"choices":[{{"delta":{{"content":" length"}},"finish_reason":"stop","index":0,"logprobs":null}}],{head}}}"#),
            format!(r#"{{"choices":[],{head},"metrics":{{"speculative_decoding":{{"acceptance_histogram":[4,2,0,2],"acceptance_histogram_by_draft_length":{{"3":[4,2,0,2]}},"draft_acceptance_rate":0.3333333333333333,"mean_acceptance_length":2.0,"num_accepted_draft_tokens":8,"num_draft_tokens":24,"num_spec_steps":8,"num_spec_tokens":3}}}},"usage":{{"completion_tokens":16,"prompt_tokens":2,"total_tokens":18}}}}"#),
            r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1796502691,"model":"smollm2-135m","choices":[{"index":0,"delta":{"content":" \"q\" a\\b\n\t\u00e9\ud83d\ude00 \/","reasoning_content":null},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#.into(),
            r#"{"choices":[{"index":0,"text":" done","finish_reason":"length","speculative_decoding_stats":{"num_drafts":2},"avg_decoded_tokens_per_iter":2.5}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10},"error":null}"#.into(),
            r#" { "choices" : [ { "message" : { "reasoning" : "r" , "content" : "m" } , "x" : [ -0.5e+3 , 1E2 , { } , [ ] , true , false , null ] } ] , "sglext" : { "a" : 1 } , "timings" : [ 1 ] , "error" : false } "#.into(),
            r#"{"metrics":{"speculative_decoding":{"num_spec_steps":3,"num_draft_tokens":9,"acceptance_histogram":[2,1,0,0],"num_draft_tokens":10,"num_accepted_draft_tokens":null,"per_step_drafted":[3,3.5],"num_spec_tokens":-1}},"choices":null}"#.into(),
        ]
    }

    /// `chunk` folded by this read (where it takes it) and by the general
    /// path alone: the same response, or the same refusal of what is not
    /// JSON. Whether this read took it.
    fn folds_alike(chunk: &str) -> bool {
        let t0 = Instant::now();
        let took = read_chunk(chunk, &mut String::new()).is_some();
        let mut fast = ResponseState::default();
        let read = fast.absorb_json_str(chunk, t0);
        match serde_json::from_str::<Value>(chunk) {
            Ok(v) => {
                let mut by_value = ResponseState::default();
                by_value.absorb(&v, t0);
                assert!(read.is_ok(), "{chunk}");
                assert_eq!(format!("{fast:?}"), format!("{by_value:?}"), "{chunk}");
            }
            Err(_) => assert!(!took && read.is_err(), "not JSON, yet read: {chunk}"),
        }
        took
    }

    #[test]
    fn the_common_chunks_are_read_and_fold_as_the_value_read() {
        let corpus = stream_chunks();
        for chunk in &corpus {
            assert!(folds_alike(chunk), "this read gave up on {chunk}");
        }
        // Whole engine bodies, read here or not, fold alike.
        let bodies = engine_bodies();
        let taken = bodies.iter().filter(|b| folds_alike(b)).count();
        assert!(taken >= 5, "{taken}");
        let mut text = String::new();
        let fold = read_chunk(&corpus[4], &mut text).unwrap();
        assert_eq!(text, " \"q\" a\\b\n\t\u{e9}\u{1F600} /");
        assert!(fold.text_span(&corpus[4]).is_none(), "escaped: owned");
        let fold = read_chunk(&corpus[1], &mut text).unwrap();
        assert!(fold.only_text() && fold.text_span(&corpus[1]).is_some());
        // vLLM's fields as the `Value` read keeps them: the last of a key
        // given twice, any value of a key it reads, the rest dropped.
        let fold = read_chunk(&corpus[7], &mut String::new()).unwrap();
        let fields = fold.vllm_summary.unwrap();
        let summary: Value = serde_json::from_str(&corpus[7]).unwrap();
        let by_value = VllmFields::of(summary["metrics"]["speculative_decoding"].clone());
        assert_eq!(Some(fields.clone()), by_value);
        assert_eq!(fields.get("num_draft_tokens"), Some(&Value::from(10)));
        assert_eq!(fields.get("num_spec_tokens"), Some(&Value::from(-1)));
        assert_eq!(
            fields.get("per_step_drafted"),
            Some(&serde_json::json!([3, 3.5]))
        );
        assert_eq!(fields.get("per_step_accepted"), None);
    }

    #[test]
    fn what_this_read_is_not_sure_of_is_left_to_the_value_read() {
        for chunk in [
            r#"{"choices":[{"text":"\ud800"}]}"#,
            r#"{"choices":[{"text":"\udc00x"}]}"#,
            r#"{"choices":[{"text":"\ud800\u0041"}]}"#,
            r#"{"choices":[{"text":"\x"}]}"#,
            r#"{"choices":[{"text":"a"}],"x":01}"#,
            r#"{"choices":[{"text":"a"}],"x":1.}"#,
            r#"{"choices":[{"text":"a"}],"x":-}"#,
            r#"{"choices":[{"text":"a"}],"x":.5}"#,
            r#"{"choices":[{"text":"a"}],"x":[1,]}"#,
            r#"{"choices":[{"text":"a"},]}"#,
            r#"{"choices":[{"text":"a"}],}"#,
            r#"{"choices":[{"text":"a"}],"x":tru}"#,
            r#"{"choices":[{"text":"a"}],"\u0078":1}"#,
            r#"{"usage":{"prompt_tokens":1.0}}"#,
            r#"{"usage":{"prompt_tokens":-1}}"#,
            r#"{"usage":{"prompt_tokens":18446744073709551616}}"#,
            r#"{"usage":[1,2]}"#,
            r#"{"error":true}"#,
            r#"{"choices":[{"text":"a"}]}x"#,
            "{\"choices\":[{\"text\":\"a\tb\"}]}",
        ] {
            let mut text = String::from("kept");
            assert!(read_chunk(chunk, &mut text).is_none(), "{chunk}");
            assert_eq!(text, "kept", "{chunk}");
            folds_alike(chunk);
        }
        let deep = format!(r#"{{"x":{}1{}}}"#, "[".repeat(40), "]".repeat(40));
        assert!(!folds_alike(&deep));
    }

    /// One random edit of `bytes`: a byte of JSON's alphabet replaced,
    /// removed or inserted, or a whole token inserted (good and bad ones
    /// that single bytes rarely make).
    fn mutate(bytes: &mut Vec<u8>, next: &mut impl FnMut(usize) -> usize) {
        const ALPHABET: &[u8] = b"{}[]\",:\\ 0123456789.-+eEtrufalsnu\n\txyz";
        const TOKENS: &[&str] = &[
            "\\x",
            "\\u00e9",
            "\\ud800",
            "\\udc00",
            "\\ud83d\\ude00",
            "\\n",
            "\\\"",
            "01",
            "1.",
            "-0",
            "1e5",
            "1E+",
            "null",
            "true",
            "false",
            ",",
            "\"\"",
            "{}",
            "[]",
            "\u{1}",
            "\"content\":",
            "\"text\":",
            "\"usage\":",
            "\"finish_reason\":",
            "\"error\":",
        ];
        let at = next(bytes.len() + 1);
        let b = ALPHABET[next(ALPHABET.len())];
        match next(4) {
            0 if at < bytes.len() => bytes[at] = b,
            1 if at < bytes.len() => {
                bytes.remove(at);
            }
            2 => {
                let token = TOKENS[next(TOKENS.len())].bytes();
                bytes.splice(at..at, token);
            }
            _ => bytes.insert(at, b),
        }
    }

    /// Tens of thousands of byte-level mutations of the corpus: every one
    /// this read takes folds as the `Value` read does, and it takes none
    /// that is not JSON.
    #[test]
    fn every_mutation_folds_as_the_value_read() {
        let mut corpus = stream_chunks();
        corpus.extend(engine_bodies());
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        let (mut taken, mut tried) = (0, 0);
        for round in 0..20_000 {
            let mut bytes = corpus[round % corpus.len()].clone().into_bytes();
            for _ in 0..1 + next(3) {
                mutate(&mut bytes, &mut next);
            }
            let Ok(chunk) = String::from_utf8(bytes) else {
                continue;
            };
            tried += 1;
            taken += usize::from(folds_alike(&chunk));
        }
        // Most mutations break the JSON; enough of them must not.
        assert!(tried > 15_000 && taken > 2_000, "{taken} of {tried}");
    }

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
