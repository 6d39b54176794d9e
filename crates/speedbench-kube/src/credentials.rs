//! Credentials must reach a Pod through a Secret, never as a literal in
//! the manifest: what a literal credential looks like in an environment
//! name or value, a header, a URL or a request field.

/// Names that hold credentials (an env, a header, a request field): given
/// only from a Secret.
pub(crate) fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "AUTH",
        "CREDENTIAL",
        "COOKIE",
        "SESSION",
        "SIGNATURE",
    ]
    .iter()
    .any(|w| upper.contains(w))
}

/// Request fields and URL query parameters that carry a credential. Narrower
/// than [`looks_like_credential`]: `max_tokens` is a request field, not a
/// token.
fn names_a_credential(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase().replace('-', "_");
    matches!(
        n.as_str(),
        "key"
            | "apikey"
            | "api_key"
            | "token"
            | "access_token"
            | "auth_token"
            | "id_token"
            | "bearer"
            | "secret"
            | "client_secret"
            | "password"
            | "passwd"
            | "authorization"
            | "auth"
            | "sig"
            | "signature"
            | "x_amz_signature"
            | "x_amz_security_token"
    ) || [
        "_api_key",
        "_apikey",
        "_secret",
        "_password",
        "_access_token",
    ]
    .iter()
    .any(|suffix| n.ends_with(suffix))
}

/// Prefixes of well-known key formats (OpenAI and compatible, Hugging Face,
/// GitHub, Slack, AWS access keys, NVIDIA NGC, JWTs).
const KEY_PREFIXES: [&str; 9] = [
    "sk-",
    "hf_",
    "ghp_",
    "github_pat_",
    "xoxb-",
    "xoxp-",
    "AKIA",
    "nvapi-",
    "eyJ",
];

/// Whether a value has the shape of a key: a well-known prefix followed by
/// at least 16 token characters.
pub(crate) fn looks_like_key_value(value: &str) -> bool {
    let v = value.trim();
    KEY_PREFIXES.iter().any(|p| {
        v.strip_prefix(p).is_some_and(|rest| {
            rest.len() >= 16
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
    })
}

/// Where in one profile argument a literal credential sits, if one does:
/// a URL's `user:password@`, a URL query parameter named like a key, or a
/// request field (`--extra-inputs`) named like one. `$(VAR)` references
/// (expanded by the kubelet from a Secret env) are not literals.
pub(crate) fn literal_credential(arg: &str) -> Option<String> {
    // `--flag=value`; a bare value (after its flag) is taken whole.
    let value = match arg.strip_prefix("--") {
        Some(flagged) => flagged.split_once('=').map_or("", |(_, v)| v),
        None => arg,
    };
    if value.contains("$(") {
        return None;
    }
    if let Some(what) = url_credential(value) {
        return Some(what);
    }
    request_field_credential(value)
}

/// `scheme://user:password@host` or `...?api-key=...`.
fn url_credential(value: &str) -> Option<String> {
    let (_, rest) = value.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@')
        && userinfo.contains(':')
    {
        return Some("a URL with a user:password".into());
    }
    let query = rest.split_once('?').map(|(_, q)| q)?;
    query.split('&').find_map(|pair| {
        let (name, v) = pair.split_once('=')?;
        (names_a_credential(name) && !v.is_empty())
            .then(|| format!("a URL with a {name} query parameter"))
    })
}

/// `key:value` or a JSON object whose key is named like a credential
/// (`api_key:sk-...`, `{"api_key": "..."}`).
fn request_field_credential(value: &str) -> Option<String> {
    let trimmed = value.trim();
    if trimmed.starts_with('{') {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(trimmed).ok()?;
        return object
            .keys()
            .find(|k| names_a_credential(k))
            .map(|k| format!("the request field {k}"));
    }
    let (name, v) = trimmed.split_once(':')?;
    // A URL's scheme is not a field name.
    if v.starts_with("//") || name.contains(char::is_whitespace) || name.starts_with('-') {
        return None;
    }
    (names_a_credential(name) && !v.trim().is_empty()).then(|| format!("the request field {name}"))
}

/// Label keys the API server sets on a Job's Pods itself and refuses (or
/// overwrites) in a Pod template: `job-name`, `controller-uid` and their
/// `batch.kubernetes.io/` forms, and any key under the reserved
/// `kubernetes.io/` and `k8s.io/` prefixes.
pub(crate) fn reserved_label(key: &str) -> bool {
    let prefix = key.split_once('/').map(|(p, _)| p);
    matches!(key, "job-name" | "controller-uid")
        || prefix.is_some_and(|p| {
            p == "kubernetes.io"
                || p == "k8s.io"
                || p.ends_with(".kubernetes.io")
                || p.ends_with(".k8s.io")
        })
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
            "http://h:9400/metrics?api-key=sk-1",
        ] {
            assert!(literal_credential(arg).is_some(), "{arg}");
        }
        for arg in [
            "--url=http://llm:8000/v1",
            "http://h/metrics?format=text",
            "--url=http://$(USER):$(PASS)@h",
            "http://user@h",
        ] {
            assert_eq!(literal_credential(arg), None, "{arg}");
        }
    }

    #[test]
    fn request_fields_named_like_keys_are_literal_credentials() {
        assert!(literal_credential("api_key:sk-1").is_some());
        assert!(literal_credential(r#"{"temperature":0,"api_key":"x"}"#).is_some());
        assert_eq!(literal_credential("temperature:0"), None);
        assert_eq!(literal_credential(r#"{"max_tokens":8}"#), None);
        assert_eq!(literal_credential("max_tokens:64"), None);
        assert_eq!(literal_credential("http://h/v1?max_tokens=8"), None);
        assert!(literal_credential("openai_api_key:x").is_some());
        assert_eq!(literal_credential("--concurrency=8"), None);
    }

    #[test]
    fn key_shaped_values_and_reserved_labels_are_recognised() {
        assert!(looks_like_key_value("sk-abcdefghijklmnopqrstu"));
        assert!(looks_like_key_value("hf_ABCDEFGHIJKLMNOPQRSTUV"));
        assert!(!looks_like_key_value("us-east-1"));
        assert!(!looks_like_key_value("http://minio:9000"));
        assert!(!looks_like_key_value("sk-short"));
        for key in [
            "job-name",
            "controller-uid",
            "batch.kubernetes.io/job-name",
            "kubernetes.io/x",
            "k8s.io/y",
        ] {
            assert!(reserved_label(key), "{key}");
        }
        for key in ["team", "example.com/tier", "app"] {
            assert!(!reserved_label(key), "{key}");
        }
    }
}
