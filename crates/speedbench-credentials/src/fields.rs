//! Request fields (a JSON object, as `--extra-inputs` gives them) that hold
//! credentials, at any depth: by their name or by their value's shape.

use serde_json::{Map, Value};

use crate::REDACTED;
use crate::names::is_credential_field;
use crate::shapes::{redact_shapes, shapes};

/// The first credential in `value`, said by where it is and never by what
/// it is: `the request field metadata.api_key` for a field named like one
/// ([`is_credential_field`]), `a key-shaped value in the request field
/// user` for a string shaped like one ([`shapes`](crate::shapes)).
///
/// ```
/// use serde_json::json;
/// use speedbench_credentials::credential_in_json;
/// let fields = json!({"temperature": 0, "extra": [{"hf_token": "x"}]});
/// assert_eq!(credential_in_json(&fields).unwrap(), "the request field extra[0].hf_token");
/// assert_eq!(credential_in_json(&json!({"max_tokens": 8})), None);
/// ```
pub fn credential_in_json(value: &Value) -> Option<String> {
    find(value, "")
}

fn find(value: &Value, path: &str) -> Option<String> {
    match value {
        Value::Object(map) => map.iter().find_map(|(key, v)| {
            let here = join(path, key);
            if is_credential_field(key) && !is_empty(v) {
                return Some(format!("the request field {here}"));
            }
            find(v, &here)
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find(v, &format!("{path}[{i}]"))),
        Value::String(s) if !shapes(s).is_empty() => Some(format!(
            "a key-shaped value in the request field {}",
            if path.is_empty() { "(the value)" } else { path }
        )),
        _ => None,
    }
}

/// `path.key`, or `key` at the top.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Null, `""` and empty containers hold nothing to hide.
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Hides every credential in `value` in place: a field named like one
/// gets [`REDACTED`] for its whole value, a key-shaped string keeps its
/// other words. Returns the values taken out (each string of a hidden
/// field, each key-shaped piece), for a scrubber to find their echoes.
///
/// ```
/// use serde_json::json;
/// use speedbench_credentials::redact_json;
/// let mut fields = json!({"metadata": {"api_key": "k-123"}, "user": "Bearer t0k"});
/// let hidden = redact_json(&mut fields);
/// assert_eq!(fields, json!({"metadata": {"api_key": "<redacted>"}, "user": "Bearer <redacted>"}));
/// assert_eq!(hidden, ["k-123", "t0k"]);
/// ```
pub fn redact_json(value: &mut Value) -> Vec<String> {
    let mut hidden = Vec::new();
    redact(value, &mut hidden);
    hidden
}

/// As [`redact_json`], for an object of request fields itself (a
/// request body's extra fields).
pub fn redact_fields(fields: &mut Map<String, Value>) -> Vec<String> {
    let mut hidden = Vec::new();
    redact_object(fields, &mut hidden);
    hidden
}

fn redact_object(map: &mut Map<String, Value>, hidden: &mut Vec<String>) {
    for (key, v) in map.iter_mut() {
        if is_credential_field(key) && !is_empty(v) {
            strings(v, hidden);
            *v = Value::String(REDACTED.into());
        } else {
            redact(v, hidden);
        }
    }
}

fn redact(value: &mut Value, hidden: &mut Vec<String>) {
    match value {
        Value::Object(map) => redact_object(map, hidden),
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, hidden)),
        Value::String(s) => {
            let found = shapes(s);
            if !found.is_empty() {
                hidden.extend(found.into_iter().map(|r| s[r].to_string()));
                *s = redact_shapes(s).into_owned();
            }
        }
        _ => {}
    }
}

/// Every string in `v` (a number or a boolean as its JSON text).
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
        Value::Object(map) => map.values().for_each(|i| strings(i, out)),
        Value::Null => {}
        other => out.push(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_fields_are_found_and_hidden_at_any_depth() {
        let mut v = json!({
            "metadata": {"api_key": {"primary": "p-1", "n": 7}},
            "a": [1, {"b": {"client_secret": "s"}}],
            "max_tokens": 8,
            "token": "",
        });
        assert_eq!(
            credential_in_json(&v).unwrap(),
            "the request field a[1].b.client_secret"
        );
        let hidden = redact_json(&mut v);
        assert_eq!(v["metadata"]["api_key"], REDACTED);
        assert_eq!(v["a"][1]["b"]["client_secret"], REDACTED);
        assert_eq!(v["max_tokens"], 8);
        assert_eq!(v["token"], "", "nothing to hide");
        let mut hidden = hidden;
        hidden.sort();
        assert_eq!(hidden, ["7", "p-1", "s"]);
    }

    #[test]
    fn shaped_values_are_found_under_any_name() {
        let v = json!({"session": "sk-0123456789abcdefghij"});
        assert_eq!(
            credential_in_json(&v).unwrap(),
            "a key-shaped value in the request field session"
        );
        assert_eq!(credential_in_json(&json!({"user": "alice"})), None);
    }
}
