//! A credential given as a literal inside one free-form value: a flag
//! (`--url=...`, `--extra-inputs=...`), an environment value, a header.

use crate::fields::credential_in_json;
use crate::names::{is_credential_field, is_credential_name};
use crate::shapes::has_shape;

/// Where in one value a literal credential sits, said without the value:
/// a URL's `user:password@` or query parameter named like a key
/// ([`url_credential`]), `name:value` with a credential's name (a request
/// field as `--extra-inputs` takes it, a header), request fields as a JSON
/// object (at any depth, [`credential_in_json`]), or a key shape anywhere.
/// A `--flag=value` is read for its value. `$(VAR)` references (expanded by
/// the kubelet from a Secret env) are not literals.
///
/// ```
/// use speedbench_credentials::literal_credential;
/// assert!(literal_credential("--url=http://u:pw@h:8000").is_some());
/// assert!(literal_credential("hf_token:abc").is_some());
/// assert!(literal_credential("Authorization: Basic dXNlcjpwYXNz").is_some());
/// assert!(literal_credential("X-Custom: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig").is_some());
/// assert_eq!(literal_credential("temperature:0"), None);
/// assert_eq!(literal_credential("--url=http://$(USER):$(PASS)@h"), None);
/// ```
pub fn literal_credential(value: &str) -> Option<String> {
    let value = match value.strip_prefix("--") {
        Some(flagged) => flagged.split_once('=').map_or("", |(_, v)| v),
        None => value,
    };
    let value = value.trim();
    if value.contains("$(") {
        return None;
    }
    url_credential(value)
        .or_else(|| named_credential(value))
        .or_else(|| has_shape(value).then(|| "a key-shaped value".to_string()))
}

/// `scheme://user:password@host`, or a query parameter named like a
/// credential (`?api-key=...`).
///
/// ```
/// use speedbench_credentials::url_credential;
/// assert!(url_credential("https://h/v1?token=x&a=b").is_some());
/// assert_eq!(url_credential("http://user@h/v1?format=text"), None);
/// ```
pub fn url_credential(value: &str) -> Option<String> {
    let (_, rest) = value.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && userinfo.contains(':')
    {
        return Some("a URL with a user:password".into());
    }
    let query = rest.split_once('?').map(|(_, q)| q)?;
    query.split(['&', '#']).find_map(|pair| {
        let (name, v) = pair.split_once('=')?;
        (is_credential_field(name) && !v.is_empty())
            .then(|| format!("a URL with a {name} query parameter"))
    })
}

/// A header (`Name: value`) that carries a credential: its name is one
/// ([`is_credential_name`]: `Authorization`, `X-Api-Key`, `Cookie`) with a
/// value, or its value is shaped like one (`Bearer ...`, `sk-...`, a JWT)
/// whatever its name.
///
/// ```
/// use speedbench_credentials::header_credential;
/// assert_eq!(header_credential("X-Api-Key: k").unwrap(), "the header X-Api-Key");
/// assert!(header_credential("X-Custom: Bearer t").is_some());
/// assert_eq!(header_credential("X-Priority: high"), None);
/// ```
pub fn header_credential(header: &str) -> Option<String> {
    let (name, value) = header.split_once(':')?;
    let name = name.trim();
    let is_name = !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic());
    (is_name && !value.trim().is_empty() && (is_credential_name(name) || has_shape(value)))
        .then(|| format!("the header {name}"))
}

/// A JSON object of request fields, or `name:value` (a request field as
/// `--extra-inputs` takes it, a header): the name is a credential's
/// ([`is_credential_field`] or [`is_credential_name`]), or the value is
/// JSON holding one, or shaped like one.
fn named_credential(value: &str) -> Option<String> {
    if value.starts_with('{') {
        let object: serde_json::Value = serde_json::from_str(value).ok()?;
        return credential_in_json(&object);
    }
    let (name, v) = value.split_once(':')?;
    let (name, v) = (name.trim(), v.trim());
    // A URL's scheme is not a name, nor is a phrase.
    if v.is_empty() || v.starts_with("//") || name.contains(char::is_whitespace) || name.is_empty()
    {
        return None;
    }
    if is_credential_field(name) || is_credential_name(name) {
        return Some(format!("the value of {name}"));
    }
    if let Ok(nested) = serde_json::from_str::<serde_json::Value>(v)
        && let Some(found) = credential_in_json(&serde_json::json!({ name: nested }))
    {
        return Some(found);
    }
    has_shape(v).then(|| format!("a key-shaped value in {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_a_password_or_a_key_are_literal_credentials() {
        for arg in [
            "--url=http://user:pw@llm:8000",
            "http://u:p@h/v1",
            "--server-metrics=http://h:9400/metrics?api-key=abc",
            "https://h/v1?token=x&a=b",
        ] {
            assert!(literal_credential(arg).is_some(), "{arg}");
        }
        for arg in [
            "--url=http://llm:8000/v1",
            "http://h/metrics?format=text",
            "http://user@h",
            "http://h/v1?max_tokens=8",
        ] {
            assert_eq!(literal_credential(arg), None, "{arg}");
        }
    }

    #[test]
    fn request_fields_in_every_form_are_literal_credentials() {
        for arg in [
            "api_key:sk-1",
            "hf_token:s3cr3t",
            "openai_api_key:x",
            r#"{"temperature":0,"api_key":"x"}"#,
            r#"{"metadata":{"api_key":"x"}}"#,
            r#"metadata:{"api_key":"x"}"#,
            "session:sk-abcdefghijklmnopqrstuv",
            r#"{"user":"hf_ABCDEFGHIJKLMNOPQRSTUV"}"#,
        ] {
            assert!(literal_credential(arg).is_some(), "{arg}");
        }
        for arg in [
            "temperature:0",
            r#"{"max_tokens":8}"#,
            "max_tokens:64",
            "--concurrency=8",
            "stop:Human: ",
        ] {
            assert_eq!(literal_credential(arg), None, "{arg}");
        }
    }

    #[test]
    fn headers_by_name_or_by_the_shape_of_their_value() {
        for header in [
            "Authorization: Bearer x",
            "X-Custom: Bearer s3cr3t",
            "X-Custom: sk-abcdefghijklmnopqrstuv",
            "X-Custom: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abcdefghijk",
            "Cookie: session=1",
        ] {
            assert!(header_credential(header).is_some(), "{header}");
            assert!(literal_credential(header).is_some(), "{header}");
        }
        assert_eq!(header_credential("Content-Type: application/json"), None);
        assert_eq!(header_credential("Authorization:"), None);
    }
}
