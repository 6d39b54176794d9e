//! Checking the prepare step's output against the config it was given.

use serde::Deserialize;
use serde_json::Value;

use crate::error::ResolveError;
use crate::{DatasetError, PLACEHOLDER};

use super::sources::id_text;

#[derive(Deserialize)]
struct OutRow {
    question_id: Option<Value>,
    messages: Option<Vec<OutMessage>>,
}

#[derive(Deserialize)]
struct OutMessage {
    content: Option<Value>,
}

/// Checks the prepare step's output against the config it was given, as
/// AIPerf does: one row per input row (`input`: `question_id` and `source`
/// in upstream order), the same `question_id`s in the same order, and no
/// message content starting with [`PLACEHOLDER`]. Returns the row count.
///
/// The upstream dispatch has no terminal `else`: a source it does not know
/// (or cannot reach) leaves the placeholder and still exits 0, so the rows,
/// not the exit status, are the evidence.
pub fn validate_output(
    config: &str,
    input: &[(Value, String)],
    jsonl: &str,
) -> Result<usize, DatasetError> {
    let mismatch = |message: String| {
        DatasetError::from(ResolveError::PrepareOutput {
            config: config.to_string(),
            message,
        })
    };
    let lines: Vec<&str> = jsonl.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != input.len() {
        return Err(mismatch(format!(
            "{} rows came out for the {} rows that went in",
            lines.len(),
            input.len()
        )));
    }
    let mut unresolved = Vec::new();
    for (n, (line, (want_id, source))) in lines.iter().zip(input).enumerate() {
        let row: OutRow = serde_json::from_str(line)
            .map_err(|e| mismatch(format!("row {} is not a JSON row ({e})", n + 1)))?;
        let got_id = row.question_id.unwrap_or(Value::Null);
        if &got_id != want_id {
            return Err(mismatch(format!(
                "row {} has question_id {}, expected {}: rows were reordered, dropped or \
                 duplicated",
                n + 1,
                got_id,
                want_id
            )));
        }
        let messages = row.messages.ok_or_else(|| {
            mismatch(format!(
                "row {} ({}) has no `messages`",
                n + 1,
                id_text(want_id)
            ))
        })?;
        if messages.iter().any(|m| {
            m.content
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with(PLACEHOLDER))
        }) {
            unresolved.push(format!("{} ({source})", id_text(want_id)));
        }
    }
    if !unresolved.is_empty() {
        return Err(DatasetError::from(ResolveError::Unresolved {
            config: config.to_string(),
            unresolved: unresolved.len(),
            total: input.len(),
            rows: first_few(&unresolved),
        }));
    }
    Ok(lines.len())
}

/// The first five of `rows`, and how many more.
fn first_few(rows: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = rows
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if rows.len() > SHOWN {
        text.push_str(&format!(", and {} more", rows.len() - SHOWN));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(ids: &[&str]) -> Vec<(Value, String)> {
        ids.iter()
            .map(|id| (Value::String(id.to_string()), format!("src/{id}")))
            .collect()
    }

    fn out_row(id: &str, content: &str) -> String {
        format!(
            "{}\n",
            serde_json::json!({"question_id": id, "category": "qa", "messages": [{"role": "user", "content": content}]})
        )
    }

    #[test]
    fn output_must_match_the_config_row_for_row() {
        let ids = input(&["a", "b", "c"]);
        let good = out_row("a", "x") + &out_row("b", "y") + &out_row("c", "z");
        assert_eq!(validate_output("qualitative", &ids, &good).unwrap(), 3);

        // A row missing.
        let short = out_row("a", "x") + &out_row("b", "y");
        let err = validate_output("qualitative", &ids, &short).unwrap_err();
        assert!(
            matches!(
                err,
                DatasetError::Resolve(ResolveError::PrepareOutput { .. })
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("2 rows came out for the 3 rows"),
            "{err}"
        );

        // Reordered.
        let swapped = out_row("a", "x") + &out_row("c", "z") + &out_row("b", "y");
        let err = validate_output("qualitative", &ids, &swapped).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 2 has question_id \"c\", expected \"b\""),
            "{err}"
        );

        // A placeholder left (bare, and with its template).
        let left = out_row("a", PLACEHOLDER)
            + &out_row("b", "y")
            + &out_row("c", &format!("{PLACEHOLDER}\n\n{{question}}"));
        let err = validate_output("throughput_1k", &ids, &left).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                DatasetError::Resolve(ResolveError::Unresolved {
                    unresolved: 2,
                    total: 3,
                    ..
                })
            ),
            "{msg}"
        );
        assert!(
            msg.starts_with("SPEED-Bench 'throughput_1k': 2 of 3 rows were left unresolved by the prepare step, which reports success even when a source is unreachable"),
            "{msg}"
        );
        assert!(msg.contains("a (src/a), c (src/c)"), "{msg}");

        // Not JSON, or no messages.
        let err = validate_output("qualitative", &input(&["a"]), "{nope\n").unwrap_err();
        assert!(err.to_string().contains("row 1 is not a JSON row"), "{err}");
        let err = validate_output("qualitative", &input(&["a"]), "{\"question_id\":\"a\"}\n")
            .unwrap_err();
        assert!(err.to_string().contains("no `messages`"), "{err}");
    }

    #[test]
    fn many_unresolved_rows_are_summarised() {
        let names: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let text: String = refs.iter().map(|id| out_row(id, PLACEHOLDER)).collect();
        let msg = validate_output("qualitative", &input(&refs), &text)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("8 of 8 rows"), "{msg}");
        assert!(msg.contains("q4 (src/q4), and 3 more"), "{msg}");
    }
}
