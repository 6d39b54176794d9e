//! A stream's chunks are one another's copies but for their text: the
//! chunk before, read in full, stands for the next one.
//!
//! Every content chunk of an OpenAI-compatible stream repeats the one
//! before it byte for byte (id, model, `created`, the choice's index and
//! nulls) except for the string of text it carries. Reading each with
//! serde_json was ~40% of the client's user-space instructions per
//! request (~2,700 a chunk against the simulator); comparing it with the
//! chunk before is ~100.
//!
//! The chunk kept is one the byte read took in full ([`crate::chunk_scan`])
//! that did nothing but add its one string of text, written without
//! escapes. A new chunk whose bytes are the kept one's up to that
//! string's opening quote and from its closing quote on, with bytes
//! between that hold no quote, backslash or control character, lexes into
//! the very same tokens but for that string's value, which is those bytes
//! (a quote or backslash among them could end the string or escape the
//! quote, so such a chunk is read in full instead). It folds as the kept
//! one did, with its own text: that text is all it adds.

use std::fmt;

use crate::chunk_scan::ChunkFold;

/// The last chunk that did nothing but add one string of text, and
/// where that string lies in it.
#[derive(Default)]
pub(crate) struct ChunkTemplate {
    chunk: String,
    /// The string's bytes, between its quotes; `None`: nothing kept.
    text: Option<(usize, usize)>,
}

impl ChunkTemplate {
    /// Keeps `json`, which the byte read folded into `fold`, when the
    /// chunk did nothing but add one string of text written without
    /// escapes; a chunk of another kind leaves the kept one.
    pub(crate) fn keep(&mut self, json: &str, fold: &ChunkFold<'_>) {
        if !fold.only_text() {
            return;
        }
        let Some((start, end)) = fold.text_span(json) else {
            return;
        };
        let bytes = json.as_bytes();
        // The borrowed string is the bytes between its quotes.
        if start == 0 || bytes[start - 1] != b'"' || bytes.get(end) != Some(&b'"') {
            return;
        }
        self.chunk.clear();
        self.chunk.push_str(json);
        self.text = Some((start, end));
    }

    /// The text of `json` when it is the kept chunk with another string
    /// of text in the same place, one without quotes, backslashes or
    /// control characters (so that its bytes are its text).
    pub(crate) fn text_of<'j>(&self, json: &'j str) -> Option<&'j str> {
        let (start, end) = self.text?;
        let (before, after) = (&self.chunk[..start], &self.chunk[end..]);
        let text_end = json.len().checked_sub(after.len())?;
        if text_end < before.len() || !json.starts_with(before) || !json.ends_with(after) {
            return None;
        }
        // Both ends are next to an ASCII quote: char boundaries.
        let text = &json[before.len()..text_end];
        let plain = |b: &u8| *b != b'"' && *b != b'\\' && *b >= 0x20;
        text.as_bytes().iter().all(plain).then_some(text)
    }
}

/// The kept chunk is a copy of one already folded, not part of what the
/// response holds: its `Debug` says only whether there is one.
impl fmt::Debug for ChunkTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChunkTemplate")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk_scan::read_chunk;

    /// The template kept from `chunk`.
    fn kept(chunk: &str) -> ChunkTemplate {
        let mut template = ChunkTemplate::default();
        let fold = read_chunk(chunk, &mut String::new()).unwrap();
        template.keep(chunk, &fold);
        template
    }

    const CHUNK: &str = r#"{"choices":[{"delta":{"content":" then"},"finish_reason":null,"index":0,"logprobs":null}],"created":1,"id":"c","object":"chat.completion.chunk"}"#;

    /// A chunk like the kept one gives its own text; a chunk that differs
    /// anywhere else, or whose text needs reading (quotes, escapes,
    /// control characters), gives none.
    #[test]
    fn only_the_text_may_differ() {
        let template = kept(CHUNK);
        let with = |text: &str| CHUNK.replace(" then", text);
        assert_eq!(template.text_of(&with(" now")), Some(" now"));
        assert_eq!(template.text_of(&with("")), Some(""));
        assert_eq!(template.text_of(&with("é 日本")), Some("é 日本"));
        assert_eq!(template.text_of(CHUNK), Some(" then"));
        for text in [r#"a","x":"b"#, r"a\nb", "a\u{1}b", r#"a\""#, "\""] {
            assert_eq!(template.text_of(&with(text)), None, "{text:?}");
        }
        for other in [
            CHUNK.replace("\"created\":1", "\"created\":2"),
            CHUNK.replace("null,\"index\"", "\"stop\",\"index\""),
            CHUNK[..CHUNK.len() - 1].to_string(),
            String::new(),
            "{\"choices\":[{\"delta\":{\"content\":\"".into(),
        ] {
            assert_eq!(template.text_of(&other), None, "{other}");
        }
    }

    /// Only a chunk that did nothing but add one string written without
    /// escapes is kept.
    #[test]
    fn chunks_that_do_more_are_not_kept() {
        for chunk in [
            CHUNK.replace(" then", r"th\u0065n"),
            CHUNK.replace("null,\"index\"", "\"stop\",\"index\""),
            CHUNK.replace("\"created\"", "\"usage\":{\"prompt_tokens\":1},\"created\""),
            r#"{"choices":[{"delta":{"content":"a","reasoning":"b"}}]}"#.into(),
            r#"{"choices":[{"text":"a"},{"text":"b"}]}"#.into(),
            r#"{"choices":[{"delta":{"content":null}}]}"#.into(),
        ] {
            assert_eq!(kept(&chunk).text, None, "{chunk}");
        }
        assert!(kept(r#"{"choices":[{"text":""}]}"#).text.is_some());
    }
}
