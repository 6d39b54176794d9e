//! Parsing SPEED-Bench-shaped JSONL rows.

use std::collections::HashMap;

use serde::Deserialize;

use crate::error::ContentError;
use crate::{Conversation, DatasetError, Message, PromptToBuild};

/// The text SPEED-Bench publishes in place of prompts it may not redistribute.
pub const PLACEHOLDER: &str =
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH";

#[derive(Deserialize)]
struct RawRow {
    question_id: Option<serde_json::Value>,
    category: Option<String>,
    messages: Option<Vec<Message>>,
    turns: Option<Vec<String>>,
    /// A trace row's prompt (AIPerf's `mooncake_trace` with text; its
    /// `single_turn` rows' `text`).
    #[serde(alias = "text")]
    text_input: Option<String>,
    /// A trace row's send time, milliseconds.
    timestamp: Option<f64>,
    /// A trace row's output length (`max_tokens`), or `"reply"`: each
    /// turn's is the token count of the assistant message after it.
    output_length: Option<serde_json::Value>,
    /// A trace row's prompt as a token count (built before the run).
    input_length: Option<u64>,
    /// The blocks of that prompt, by id (shared prefixes).
    hash_ids: Option<Vec<u64>>,
}

/// The UTF-8 byte-order mark some editors (Windows Notepad, Excel's CSV/JSON
/// export) put at the start of a file.
pub const UTF8_BOM: char = '\u{feff}';

/// `text` without a leading UTF-8 byte-order mark.
///
/// A BOM is not part of the content, and a JSON parser rejects it
/// ("expected value at line 1 column 1"), so every file speedbench reads as
/// text goes through this first.
///
/// ```
/// assert_eq!(speedbench_dataset::strip_bom("\u{feff}{\"a\":1}"), "{\"a\":1}");
/// assert_eq!(speedbench_dataset::strip_bom("{}"), "{}");
/// ```
pub fn strip_bom(text: &str) -> &str {
    text.strip_prefix(UTF8_BOM).unwrap_or(text)
}

pub(crate) fn parse_rows(source: &str, text: &str) -> Result<Vec<Conversation>, DatasetError> {
    let text = strip_bom(text);
    let mut rows = Vec::new();
    let mut placeholders = Vec::new();
    // Each id's first line: ids must be unique, since runs are paired by id.
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        if line.trim().is_empty() {
            continue;
        }
        let invalid = |message: String| {
            DatasetError::from(ContentError::InvalidRow {
                source_name: source.to_string(),
                line: line_no,
                message,
            })
        };
        let mut raw: RawRow = serde_json::from_str(line).map_err(|e| invalid(e.to_string()))?;
        let id = row_id(raw.question_id.take(), line_no).map_err(&invalid)?;
        if let Some(first) = first_line.insert(id.clone(), line_no) {
            return Err(invalid(format!(
                "`question_id` {id:?} repeats line {first}; every row needs its own id \
                 (records and `speedbench compare` tell requests apart by it)"
            )));
        }
        let row = conversation(raw, id).map_err(&invalid)?;
        if (row.turns.iter()).any(|t| t.trim_start().starts_with(PLACEHOLDER)) {
            placeholders.push(format!("line {line_no} ({})", row.id));
            continue;
        }
        rows.push(row);
    }
    if !placeholders.is_empty() {
        return Err(unresolved(source, &placeholders));
    }
    if rows.is_empty() {
        return Err(DatasetError::from(ContentError::Empty {
            source_name: source.to_string(),
        }));
    }
    Ok(rows)
}

/// One row read: its trace fields, its prompt to build, its turns and
/// their replies; an error names the field.
fn conversation(mut raw: RawRow, id: String) -> Result<Conversation, String> {
    let (timestamp_us, max_output_tokens, from_replies) = trace_fields(&mut raw)?;
    let prompt_to_build = prompt_to_build(&mut raw)?;
    let reference_replies = match from_replies {
        true => reference_replies(raw.messages.as_deref(), raw.turns.is_some())?,
        false => Vec::new(),
    };
    let (preamble, turns) = match prompt_to_build {
        Some(_) => (Vec::new(), Vec::new()),
        None => row_turns(raw.messages, raw.turns)?,
    };
    Ok(Conversation {
        id,
        category: raw.category.filter(|c| !c.is_empty()),
        preamble,
        turns,
        timestamp_us,
        max_output_tokens,
        turn_output_tokens: Vec::new(),
        prompt_to_build,
        reference_replies,
    })
}

/// The error for rows that still hold SPEED-Bench's placeholder, naming
/// the first five.
fn unresolved(source: &str, placeholders: &[String]) -> DatasetError {
    DatasetError::from(ContentError::UnresolvedPlaceholders {
        source_name: source.to_string(),
        count: placeholders.len(),
        first_ids: placeholders
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// A trace row's send time (µs), its output length, and whether each
/// turn's is its reply's (`"output_length": "reply"`); its `text_input`
/// becomes its one turn.
fn trace_fields(raw: &mut RawRow) -> Result<(Option<u64>, Option<u32>, bool), String> {
    if let Some(text) = raw.text_input.take() {
        if raw.turns.is_some() || raw.messages.is_some() {
            return Err(
                "`text_input` is the row's prompt: leave out `turns` and `messages`".into(),
            );
        }
        raw.turns = Some(vec![text]);
    }
    let timestamp_us = match raw.timestamp {
        None => None,
        Some(ms) if ms.is_finite() && ms >= 0.0 => Some((ms * 1e3).round() as u64),
        Some(ms) => {
            return Err(format!(
                "`timestamp` must be 0 or more milliseconds, got {ms}"
            ));
        }
    };
    let (output_length, from_reply) = match raw.output_length.take() {
        None => (None, false),
        Some(serde_json::Value::String(word)) if word == "reply" => (None, true),
        Some(serde_json::Value::Number(n)) if n.as_u64().is_some_and(|n| n <= u32::MAX.into()) => {
            (n.as_u64().map(|n| n as u32), false)
        }
        Some(other) => {
            return Err(format!(
                "field `output_length` must be a token count or \"reply\", found {other}"
            ));
        }
    };
    Ok((timestamp_us, output_length, from_reply))
}

/// The reply after each user message of a row whose output lengths are
/// its replies' (`"output_length": "reply"`): every user message needs an
/// assistant one right after it.
fn reference_replies(messages: Option<&[Message]>, has_turns: bool) -> Result<Vec<String>, String> {
    let Some(messages) = messages.filter(|_| !has_turns) else {
        return Err(
            "`\"output_length\": \"reply\"` counts each user message's reply: give \
             `messages` (user and assistant in turn), not `turns`"
                .into(),
        );
    };
    let mut replies = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if m.role != "user" {
            continue;
        }
        match messages.get(i + 1) {
            Some(next) if next.role == "assistant" => replies.push(next.content.clone()),
            _ => {
                return Err(format!(
                    "field `messages[{i}]` has no assistant reply after it, and \
                     `\"output_length\": \"reply\"` takes its output length from one"
                ));
            }
        }
    }
    Ok(replies)
}

/// A trace row's prompt given as `input_length` tokens (with `hash_ids`),
/// where it has no text: the text, when given, is the prompt (as AIPerf
/// reads such rows) and the length is left to it.
fn prompt_to_build(raw: &mut RawRow) -> Result<Option<PromptToBuild>, String> {
    let hash_ids = raw.hash_ids.take();
    let Some(length) = raw.input_length else {
        if hash_ids.is_some() && raw.turns.is_none() && raw.messages.is_none() {
            return Err("`hash_ids` name the blocks of an `input_length` prompt: give it".into());
        }
        return Ok(None);
    };
    if raw.turns.is_some() || raw.messages.is_some() {
        return Ok(None);
    }
    let tokens = u32::try_from(length)
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| {
            format!(
                "`input_length` must be 1 to {} tokens, got {length}",
                u32::MAX
            )
        })?;
    Ok(Some(PromptToBuild {
        tokens,
        hash_ids: hash_ids.unwrap_or_default(),
    }))
}

/// A row's id: its `question_id` as text, or `row-N` by its line.
fn row_id(question_id: Option<serde_json::Value>, line_no: usize) -> Result<String, String> {
    match question_id {
        Some(serde_json::Value::String(s)) => Ok(s),
        Some(serde_json::Value::Number(n)) => Ok(n.to_string()),
        Some(other) => Err(format!(
            "field `question_id` must be a string or number, found {other}"
        )),
        None => Ok(format!("row-{line_no}")),
    }
}

/// A row's preamble and user turns, from its `messages` or its `turns`;
/// a row without a user turn is refused.
fn row_turns(
    messages: Option<Vec<Message>>,
    turns: Option<Vec<String>>,
) -> Result<(Vec<Message>, Vec<String>), String> {
    let (preamble, turns) = match (messages, turns) {
        (Some(messages), _) => split_messages(messages)?,
        (None, Some(turns)) => (Vec::new(), turns),
        (None, None) => return Err("row has neither `messages` nor `turns`".to_string()),
    };
    if turns.is_empty() {
        return Err("row has no user turn".to_string());
    }
    Ok((preamble, turns))
}

/// Splits resolved `messages` into a system preamble and the user turns.
///
/// Assistant messages in the file are reference answers, not history: the
/// client feeds back the live reply instead, as AIPerf does.
fn split_messages(messages: Vec<Message>) -> Result<(Vec<Message>, Vec<String>), String> {
    let mut preamble = Vec::new();
    let mut turns = Vec::new();
    for (i, m) in messages.into_iter().enumerate() {
        match m.role.as_str() {
            "system" | "developer" if turns.is_empty() => preamble.push(m),
            "user" => turns.push(m.content),
            "assistant" => {}
            other => {
                return Err(format!(
                    "field `messages[{i}].role` has unsupported value {other:?}"
                ));
            }
        }
    }
    Ok((preamble, turns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_rows_carry_their_time_and_output_length() {
        let text = "{\"timestamp\": 1500.25, \"text_input\": \"hi\", \"output_length\": 7}\n\
                    {\"question_id\": \"b\", \"timestamp\": 0, \"turns\": [\"x\"]}\n";
        let rows = parse_rows("t.jsonl", text).unwrap();
        assert_eq!(rows[0].turns, ["hi"]);
        assert_eq!(rows[0].timestamp_us, Some(1_500_250));
        assert_eq!(rows[0].max_output_tokens, Some(7));
        assert_eq!(
            (rows[1].timestamp_us, rows[1].max_output_tokens),
            (Some(0), None)
        );
        let err = |line: &str| parse_rows("t.jsonl", line).unwrap_err().to_string();
        // A prompt by length is kept to be built; with text, the text is it.
        let by_length = r#"{"timestamp": 1, "input_length": 9, "hash_ids": [4, 2], "output_length": 3}
{"timestamp": 2, "text_input": "hi", "input_length": 9}"#;
        let rows = parse_rows("t.jsonl", by_length).unwrap();
        let want = PromptToBuild {
            tokens: 9,
            hash_ids: vec![4, 2],
        };
        assert_eq!(rows[0].prompt_to_build, Some(want));
        assert!(rows[0].turns.is_empty());
        assert_eq!(rows[0].max_output_tokens, Some(3));
        assert_eq!(
            (rows[1].turns.as_slice(), &rows[1].prompt_to_build),
            (&["hi".to_string()][..], &None)
        );
        let zero = err(r#"{"input_length": 0}"#);
        assert!(
            zero.contains("t.jsonl:1") && zero.contains("`input_length`"),
            "{zero}"
        );
        assert!(err(r#"{"hash_ids": [1]}"#).contains("`hash_ids`"));
        assert!(err(r#"{"text_input": "a", "turns": ["b"]}"#).contains("leave out `turns`"));
        assert!(err(r#"{"timestamp": -3, "text_input": "a"}"#).contains("`timestamp`"));
    }

    #[test]
    fn reply_rows_keep_each_turns_reply() {
        let text = r#"{"question_id":"a","messages":[{"role":"system","content":"s"},{"role":"user","content":"u1"},{"role":"assistant","content":"r1"},{"role":"user","content":"u2"},{"role":"assistant","content":"r2"}],"output_length":"reply"}
{"question_id":"b","messages":[{"role":"user","content":"u"},{"role":"assistant","content":"r"}],"output_length":9}"#;
        let rows = parse_rows("r.jsonl", text).unwrap();
        assert_eq!(rows[0].turns, ["u1", "u2"]);
        assert_eq!(rows[0].reference_replies, ["r1", "r2"]);
        assert_eq!(rows[0].max_output_tokens, None);
        assert!(rows[1].reference_replies.is_empty());
        assert_eq!(rows[1].max_output_tokens, Some(9));
        let err = |line: &str| parse_rows("r.jsonl", line).unwrap_err().to_string();
        let unanswered = err(
            r#"{"messages":[{"role":"user","content":"u"},{"role":"user","content":"v"},{"role":"assistant","content":"r"}],"output_length":"reply"}"#,
        );
        assert!(
            unanswered.starts_with("r.jsonl:1: field `messages[0]` has no assistant reply"),
            "{unanswered}"
        );
        assert!(err(r#"{"turns":["u"],"output_length":"reply"}"#).contains("not `turns`"));
        assert!(
            err(r#"{"turns":["u"],"output_length":"many"}"#)
                .contains("`output_length` must be a token count or \"reply\", found \"many\"")
        );
        assert!(err(r#"{"turns":["u"],"output_length":-1}"#).contains("`output_length`"));
    }

    #[test]
    fn both_row_shapes_parse() {
        let text = r#"{"question_id":"a","category":"qa","turns":["x","y"]}
{"question_id":7,"category":"rag","messages":[{"role":"system","content":"s"},{"role":"user","content":"u1"},{"role":"assistant","content":"ref"},{"role":"user","content":"u2"}]}"#;
        let rows = parse_rows("f.jsonl", text).unwrap();
        assert_eq!(rows[0].turns, vec!["x", "y"]);
        assert_eq!(rows[1].id, "7");
        assert_eq!(rows[1].preamble[0].content, "s");
        assert_eq!(rows[1].turns, vec!["u1", "u2"]);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text =
            "{\"question_id\":\"a\",\"turns\":[\"x\"]}\n{\"question_id\":[1],\"turns\":[\"x\"]}";
        let err = parse_rows("f.jsonl", text).unwrap_err().to_string();
        assert!(err.starts_with("f.jsonl:2: field `question_id`"), "{err}");
        let err = parse_rows("f.jsonl", "{\"question_id\":\"a\"}")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("f.jsonl:1") && err.contains("`messages` nor `turns`"),
            "{err}"
        );
        let err = parse_rows("f.jsonl", "not json").unwrap_err().to_string();
        assert!(err.starts_with("f.jsonl:1:"), "{err}");
        let err = parse_rows("f.jsonl", "\n\n").unwrap_err().to_string();
        assert_eq!(err, "f.jsonl: no rows");
    }

    #[test]
    fn a_repeated_id_names_both_lines() {
        let text = "{\"question_id\":\"a\",\"turns\":[\"x\"]}\n{\"question_id\":\"b\",\"turns\":[\"y\"]}\n\n{\"question_id\":\"a\",\"turns\":[\"z\"]}";
        let err = parse_rows("f.jsonl", text).unwrap_err().to_string();
        assert!(
            err.starts_with("f.jsonl:4: `question_id` \"a\" repeats line 1"),
            "{err}"
        );
        // A number and a string spelling the same id are the same id.
        let text =
            "{\"question_id\":7,\"turns\":[\"x\"]}\n{\"question_id\":\"7\",\"turns\":[\"y\"]}";
        let err = parse_rows("f.jsonl", text).unwrap_err().to_string();
        assert!(
            err.contains("f.jsonl:2: `question_id` \"7\" repeats line 1"),
            "{err}"
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_not_content() {
        let text = "\u{feff}{\"question_id\":\"a\",\"category\":\"qa\",\"turns\":[\"x\"]}\r\n";
        let rows = parse_rows("f.jsonl", text).unwrap();
        assert_eq!((rows[0].id.as_str(), rows[0].turns[0].as_str()), ("a", "x"));
    }

    #[test]
    fn placeholder_rows_are_counted_and_named() {
        let ph = format!("{PLACEHOLDER}\n\n{{question}}");
        let text = format!(
            "{{\"question_id\":\"ok\",\"turns\":[\"fine\"]}}\n{{\"question_id\":\"p1\",\"turns\":[{ph:?}]}}\n{{\"question_id\":\"p2\",\"messages\":[{{\"role\":\"user\",\"content\":{PLACEHOLDER:?}}}]}}"
        );
        let err = parse_rows("q.jsonl", &text).unwrap_err().to_string();
        assert!(err.contains("2 row(s)"), "{err}");
        assert!(err.contains("line 2 (p1), line 3 (p2)"), "{err}");
    }
}
