//! A request's JSON body, written straight from the conversation.
//!
//! [`Target::body`] builds a `serde_json::Value`: every message's text is
//! copied into it, written out, then freed, for every request (and a
//! SPEED-Bench prompt runs to kilobytes). [`Target::body_json`] writes the
//! same bytes from borrowed parts; a test holds the two equal.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};
use serde_json::Value;
use speedbench_dataset::Message;

use crate::target::{ApiKind, Target};

impl Target {
    /// [`Target::body`] as the bytes sent: keys sorted as a `Value`'s map
    /// writes them, each message as `{"content": ..., "role": ...}`, the
    /// engine's fields and then the user's extra body replacing what they
    /// name.
    pub fn body_json(&self, history: &[Message]) -> Vec<u8> {
        self.body_json_capped(history, None)
    }

    /// [`Target::body_json`] with `max_tokens` in place of the run's (a
    /// trace row's output length), when given; with
    /// [`Target::force_min_tokens`], `min_tokens` too.
    pub fn body_json_capped(&self, history: &[Message], max_tokens: Option<u32>) -> Vec<u8> {
        self.body_json_for(&self.model, history, max_tokens)
    }

    /// [`Target::body_json_capped`] asking for `model` (a row's, of
    /// [`Target::models`]).
    pub fn body_json_for(
        &self,
        model: &str,
        history: &[Message],
        max_tokens: Option<u32>,
    ) -> Vec<u8> {
        let engine_fields = self.engine.map(|e| e.request_fields());
        let mut fields: BTreeMap<&str, Field<'_>> = BTreeMap::new();
        fields.insert("model", Field::Str(model));
        match self.api {
            ApiKind::Chat => fields.insert("messages", Field::Messages(history)),
            ApiKind::Completions => fields.insert("prompt", Field::Prompt(history)),
        };
        if let Some(n) = max_tokens.or(self.max_tokens) {
            fields.insert("max_tokens", Field::Count(n));
        }
        if let Some(n) = max_tokens.filter(|_| self.force_min_tokens) {
            fields.insert("min_tokens", Field::Count(n));
        }
        if self.streaming {
            fields.insert("stream", Field::True);
            fields.insert("stream_options", Field::IncludeUsage);
        }
        let extra = engine_fields.iter().flatten().chain(&self.extra_body);
        for (k, v) in extra {
            fields.insert(k, Field::Json(v));
        }
        // Writing to a `Vec` fails only for a map key that is not a string,
        // and every key here is one.
        serde_json::to_vec(&fields).unwrap_or_default()
    }
}

/// One top-level field of the body, borrowed.
enum Field<'a> {
    Str(&'a str),
    Messages(&'a [Message]),
    /// The turns' texts joined by a blank line (the completions API).
    Prompt(&'a [Message]),
    Count(u32),
    True,
    /// `{"include_usage": true}`: usage (and vLLM's per-request spec
    /// stats) arrive only on the chunk it asks for.
    IncludeUsage,
    Json(&'a Value),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Str(v) => s.serialize_str(v),
            Field::Messages(history) => s.collect_seq(history.iter().map(SortedMessage)),
            Field::Prompt(history) => s.collect_str(&JoinedTurns(history)),
            Field::Count(n) => s.serialize_u32(*n),
            Field::True => s.serialize_bool(true),
            Field::IncludeUsage => {
                let mut map = s.serialize_map(Some(1))?;
                map.serialize_entry("include_usage", &true)?;
                map.end()
            }
            Field::Json(v) => v.serialize(s),
        }
    }
}

/// A message with its keys in a `Value`'s order (`content`, `role`).
struct SortedMessage<'a>(&'a Message);

impl Serialize for SortedMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Message { role, content } = self.0;
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("content", content)?;
        map.serialize_entry("role", role)?;
        map.end()
    }
}

/// The turns' texts joined by `"\n\n"`, written without joining them first.
struct JoinedTurns<'a>(&'a [Message]);

impl fmt::Display for JoinedTurns<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, m) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n\n")?;
            }
            f.write_str(&m.content)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_kind::Engine;
    use crate::target::BaseUrl;

    fn history() -> Vec<Message> {
        let m = |role: &str, content: &str| Message {
            role: role.into(),
            content: content.into(),
        };
        vec![
            m("system", "Be brief."),
            m(
                "user",
                "Quote \"this\"\\ and a\nnewline, \u{1} a control, caf\u{e9} \u{1F680}",
            ),
            m("assistant", ""),
            m("user", "</script> & <b>"),
        ]
    }

    /// The written body is byte for byte the `Value` body, whatever the
    /// target sets and whatever the extra body replaces.
    #[test]
    fn the_written_body_is_the_value_body() {
        let url = BaseUrl::parse("http://127.0.0.1:1").unwrap();
        let base = Target::new(url, "m\"odel");
        let targets = [
            base.clone(),
            base.clone().with_streaming(false),
            base.clone().with_max_tokens(64),
            base.clone()
                .with_api(ApiKind::Completions)
                .with_max_tokens(7),
            base.clone()
                .with_api(ApiKind::Completions)
                .with_streaming(false),
            base.clone().with_engine(Engine::Sglang),
            base.clone()
                .with_engine(Engine::Sglang)
                .with_max_tokens(3)
                .with_extra_body("return_spec_tokens_details", false.into())
                .with_extra_body("max_tokens", 9.into())
                .with_extra_body("temperature", 0.into())
                .with_extra_body(
                    "a_first",
                    serde_json::json!({"z": [1, 2.5, null], "a": "x"}),
                ),
        ];
        for (i, t) in targets.iter().enumerate() {
            for h in [&history()[..], &history()[..1], &[]] {
                let want = serde_json::to_vec(&t.body(h)).unwrap();
                assert_eq!(
                    String::from_utf8(t.body_json(h)).unwrap(),
                    String::from_utf8(want).unwrap(),
                    "target {i}, {} messages",
                    h.len()
                );
            }
        }
    }

    /// `--force-min-tokens`: a row's own output length goes out as
    /// `min_tokens` beside its `max_tokens`; the run's `--osl` cap does
    /// not, and the user's extra body still wins.
    #[test]
    fn a_rows_output_length_is_also_its_min_tokens_when_forced() {
        let url = BaseUrl::parse("http://127.0.0.1:1").unwrap();
        let mut target = Target::new(url, "m")
            .with_streaming(false)
            .with_max_tokens(50);
        let body = |t: &Target, row: Option<u32>| -> serde_json::Value {
            serde_json::from_slice(&t.body_json_capped(&history()[..1], row)).unwrap()
        };
        assert_eq!(body(&target, Some(12)).get("min_tokens"), None);
        target.force_min_tokens = true;
        let forced = body(&target, Some(12));
        assert_eq!(
            (forced["max_tokens"].as_u64(), forced["min_tokens"].as_u64()),
            (Some(12), Some(12))
        );
        assert_eq!(body(&target, None).get("min_tokens"), None);
        let target = target.with_extra_body("min_tokens", 3.into());
        assert_eq!(body(&target, Some(12))["min_tokens"], 3);
    }
}
