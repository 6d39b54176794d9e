//! ShareGPT (`anon8231489123/ShareGPT_Vicuna_unfiltered`,
//! `ShareGPT_V3_unfiltered_cleaned_split.json`): a JSON array of
//! `{"id", "conversations": [{"from", "value"}, ...]}`, turned into JSONL
//! rows the way AIPerf's ShareGPT loader pairs them.
//!
//! Each adjacent `human` → `gpt` pair with text becomes one turn: the
//! human message is the prompt, and the gpt message is the reference
//! reply whose token count is that turn's `max_tokens` (`"output_length":
//! "reply"`). Counting needs the model's tokenizer, so it happens before
//! the run (speedbench-run), where AIPerf's length limits
//! ([`ReplyLimits`]) drop whole conversations too.

use serde::Deserialize;

use crate::error::ContentError;
use crate::{DatasetError, strip_bom};

/// The category every ShareGPT row carries.
pub const SHAREGPT_CATEGORY: &str = "sharegpt";

/// AIPerf's (and vLLM's) limits on a ShareGPT turn, in tokens: a
/// conversation with any turn outside them is left out whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyLimits {
    /// The fewest tokens a prompt may have (4).
    pub min_prompt_tokens: u32,
    /// The fewest tokens a reply may have (4; 0 checks none, as AIPerf
    /// does when an output length is given).
    pub min_reply_tokens: u32,
    /// The most tokens a prompt may have (1,024).
    pub max_prompt_tokens: u32,
    /// The most tokens a prompt and its reply may have together (2,048).
    pub max_total_tokens: u32,
}

impl Default for ReplyLimits {
    fn default() -> ReplyLimits {
        ReplyLimits {
            min_prompt_tokens: 4,
            min_reply_tokens: 4,
            max_prompt_tokens: 1024,
            max_total_tokens: 2048,
        }
    }
}

/// The limit a turn is outside ([`ReplyLimits::refuse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitBroken {
    /// The prompt has fewer tokens than `min_prompt_tokens`.
    PromptUnder,
    /// The prompt has more tokens than `max_prompt_tokens`.
    PromptOver,
    /// The reply has fewer tokens than `min_reply_tokens`.
    ReplyUnder,
    /// The prompt and reply together have more than `max_total_tokens`.
    TogetherOver,
}

impl ReplyLimits {
    /// The limit a turn of `prompt` and `reply` tokens is outside (the
    /// first, in AIPerf's order), or `None` when it is inside them.
    pub fn refuse(&self, prompt: u32, reply: u32) -> Option<LimitBroken> {
        if prompt < self.min_prompt_tokens {
            Some(LimitBroken::PromptUnder)
        } else if prompt > self.max_prompt_tokens {
            Some(LimitBroken::PromptOver)
        } else if reply < self.min_reply_tokens {
            Some(LimitBroken::ReplyUnder)
        } else if u64::from(prompt) + u64::from(reply) > u64::from(self.max_total_tokens) {
            Some(LimitBroken::TogetherOver)
        } else {
            None
        }
    }

    /// `broken` in words, with its number: `a prompt under 4 tokens`.
    pub fn explain(&self, broken: LimitBroken) -> String {
        match broken {
            LimitBroken::PromptUnder => {
                format!("a prompt under {} tokens", self.min_prompt_tokens)
            }
            LimitBroken::PromptOver => format!("a prompt over {} tokens", self.max_prompt_tokens),
            LimitBroken::ReplyUnder => format!("a reply under {} tokens", self.min_reply_tokens),
            LimitBroken::TogetherOver => format!(
                "a prompt and reply over {} tokens together",
                self.max_total_tokens
            ),
        }
    }
}

impl std::fmt::Display for ReplyLimits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "prompts of {} to {} tokens, replies of at least {}, at most {} together",
            self.min_prompt_tokens,
            self.max_prompt_tokens,
            self.min_reply_tokens,
            self.max_total_tokens
        )
    }
}

#[derive(Deserialize)]
struct RawEntry {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    conversations: Option<Vec<RawMessage>>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    from: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

/// ShareGPT's conversations as JSONL rows, with what was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGptRows {
    /// One row a conversation with at least one pair: `question_id`,
    /// `category`, `messages` (user and assistant in turn) and
    /// `"output_length": "reply"`.
    pub jsonl: String,
    /// Conversations in the file.
    pub entries: usize,
    /// Conversations kept (rows in `jsonl`).
    pub kept: usize,
}

impl ShareGptRows {
    /// Conversations left out for want of a `human` → `gpt` pair with text
    /// (AIPerf leaves them out too).
    pub fn without_pair(&self) -> usize {
        self.entries - self.kept
    }
}

/// Reads a ShareGPT JSON file's bytes (`source` names it in errors). The
/// bytes are freed once parsed, and each conversation once written as a
/// row, so the file, its parse and its rows are not all held at once.
pub fn sharegpt_rows(source: &str, bytes: Vec<u8>) -> Result<ShareGptRows, DatasetError> {
    let text = String::from_utf8(bytes).map_err(|e| invalid(source, 1, e.to_string()))?;
    let entries: Vec<RawEntry> = serde_json::from_str(strip_bom(&text)).map_err(|e| {
        let message =
            format!("not a ShareGPT file (a JSON array of {{\"id\", \"conversations\"}}): {e}");
        invalid(source, e.line(), message)
    })?;
    drop(text);
    let count = entries.len();
    let mut jsonl = String::new();
    let mut kept = 0;
    let mut seen = std::collections::HashSet::new();
    for (index, entry) in entries.into_iter().enumerate() {
        if let Some(row) = row_of(&entry, index, &mut seen) {
            jsonl.push_str(&row.to_string());
            jsonl.push('\n');
            kept += 1;
        }
    }
    Ok(ShareGptRows {
        jsonl,
        entries: count,
        kept,
    })
}

/// One conversation's row, or `None` when it has no pair.
fn row_of(
    entry: &RawEntry,
    index: usize,
    seen: &mut std::collections::HashSet<String>,
) -> Option<serde_json::Value> {
    let pairs = prompt_reply_pairs(entry.conversations.as_deref().unwrap_or_default());
    if pairs.is_empty() {
        return None;
    }
    let messages: Vec<serde_json::Value> = pairs
        .iter()
        .flat_map(|(prompt, reply)| {
            [
                serde_json::json!({"role": "user", "content": prompt}),
                serde_json::json!({"role": "assistant", "content": reply}),
            ]
        })
        .collect();
    Some(serde_json::json!({
        "question_id": entry_id(entry.id.as_ref(), index, seen),
        "category": SHAREGPT_CATEGORY,
        "messages": messages,
        "output_length": "reply",
    }))
}

/// A conversation's id: its `id`, else `sharegpt-N` by its place; an id
/// seen before gets `#N` (rows are told apart by id).
fn entry_id(
    id: Option<&serde_json::Value>,
    index: usize,
    seen: &mut std::collections::HashSet<String>,
) -> String {
    let id = match id {
        Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => format!("sharegpt-{index}"),
    };
    if seen.insert(id.clone()) {
        return id;
    }
    let unique = format!("{id}#{index}");
    seen.insert(unique.clone());
    unique
}

/// The turns of one conversation, as AIPerf pairs them: with `from` roles,
/// each `human` message followed by a `gpt` one (others skipped); without
/// any, the first two messages.
fn prompt_reply_pairs(messages: &[RawMessage]) -> Vec<(&str, &str)> {
    if messages.len() < 2 {
        return Vec::new();
    }
    if !messages.iter().any(|m| role(m).is_some()) {
        return match (text(&messages[0]), text(&messages[1])) {
            (Some(prompt), Some(reply)) => vec![(prompt, reply)],
            _ => Vec::new(),
        };
    }
    let with_role: Vec<&RawMessage> = messages.iter().filter(|m| role(m).is_some()).collect();
    let mut pairs = Vec::new();
    let mut i = 0;
    while i + 1 < with_role.len() {
        let (asked, answered) = (with_role[i], with_role[i + 1]);
        if role(asked) == Some("human") && role(answered) == Some("gpt") {
            if let (Some(prompt), Some(reply)) = (text(asked), text(answered)) {
                pairs.push((prompt, reply));
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    pairs
}

/// A message's text, when it has any.
fn text(message: &RawMessage) -> Option<&str> {
    message.value.as_deref().filter(|v| !v.is_empty())
}

/// A message's role, when it is `human` or `gpt`.
fn role(message: &RawMessage) -> Option<&str> {
    (message.from.as_deref()).filter(|r| matches!(*r, "human" | "gpt"))
}

fn invalid(source: &str, line: usize, message: String) -> DatasetError {
    DatasetError::from(ContentError::InvalidRow {
        source_name: source.to_string(),
        line: line.max(1),
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    fn msg(from: &str, value: &str) -> serde_json::Value {
        serde_json::json!({"from": from, "value": value})
    }

    #[test]
    fn pairs_follow_aiperfs_rules() {
        let file = serde_json::json!([
            {"id": "a", "conversations": [msg("human", "q1"), msg("gpt", "r1"), msg("human", "q2"), msg("gpt", "r2")]},
            // A leading gpt message and a system one are skipped; a pair
            // with an empty side is dropped but still consumed.
            {"id": "b", "conversations": [msg("gpt", "hello"), msg("system", "s"), msg("human", ""), msg("gpt", "x"), msg("human", "q"), msg("gpt", "r")]},
            // Without roles, the first two values are one pair.
            {"id": "c", "conversations": [{"value": "p"}, {"value": "c"}, {"value": "more"}]},
            // Nothing to pair: left out.
            {"id": "d", "conversations": [msg("human", "alone")]},
            {"id": "e", "conversations": [msg("gpt", "g"), msg("human", "h")]},
            {"id": "f"},
            // A repeated id and a missing one.
            {"id": "a", "conversations": [msg("human", "q"), msg("gpt", "r")]},
            {"conversations": [msg("human", "q"), msg("gpt", "r")]},
        ]);
        let rows = sharegpt_rows("sg.json", file.to_string().into_bytes()).unwrap();
        assert_eq!((rows.entries, rows.kept, rows.without_pair()), (8, 5, 3));
        let dataset = Dataset::from_jsonl_str("sg", &rows.jsonl).unwrap();
        let summary: Vec<(&str, Vec<&str>, Vec<&str>)> = dataset
            .conversations
            .iter()
            .map(|c| {
                (
                    c.id.as_str(),
                    c.turns.iter().map(String::as_str).collect(),
                    c.reference_replies.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("a", vec!["q1", "q2"], vec!["r1", "r2"]),
                ("b", vec!["q"], vec!["r"]),
                ("c", vec!["p"], vec!["c"]),
                ("a#6", vec!["q"], vec!["r"]),
                ("sharegpt-7", vec!["q"], vec!["r"]),
            ]
        );
        assert!((dataset.conversations.iter()).all(|c| c.category.as_deref() == Some("sharegpt")));
    }

    #[test]
    fn a_file_that_is_not_sharegpt_is_named() {
        let err = sharegpt_rows("sg.json", b"{\"id\": 1}".to_vec())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("sg.json:1: not a ShareGPT file"), "{err}");
        let err = sharegpt_rows(
            "sg.json",
            b"[\n{\"conversations\": [{\"value\": 3}]}]".to_vec(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("sg.json:2: "), "{err}");
    }

    #[test]
    fn the_limits_are_aiperfs() {
        let limits = ReplyLimits::default();
        assert_eq!(limits.refuse(4, 4), None);
        assert_eq!(limits.refuse(1024, 1024), None);
        assert_eq!(limits.refuse(3, 100), Some(LimitBroken::PromptUnder));
        assert_eq!(limits.refuse(1025, 10), Some(LimitBroken::PromptOver));
        assert_eq!(limits.refuse(100, 3), Some(LimitBroken::ReplyUnder));
        assert_eq!(limits.refuse(1000, 1049), Some(LimitBroken::TogetherOver));
        assert_eq!(limits.refuse(1000, 1048), None);
        let any_reply = ReplyLimits {
            min_reply_tokens: 0,
            ..limits
        };
        assert_eq!(any_reply.refuse(100, 0), None);
        // A prompt too short is named first, as AIPerf checks it first.
        assert_eq!(limits.refuse(2, 2), Some(LimitBroken::PromptUnder));
        assert_eq!(
            limits.explain(LimitBroken::TogetherOver),
            "a prompt and reply over 2048 tokens together"
        );
    }
}
