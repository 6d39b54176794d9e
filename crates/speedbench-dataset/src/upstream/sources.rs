//! Screening rows' `source` URLs: the prepare step fetches them, so only
//! the hosts SPEED-Bench sources from are allowed.

use serde_json::Value;

use crate::DatasetError;
use crate::error::ResolveError;

pub use crate::pins::ALLOWED_SOURCE_HOSTS;

/// Why a row's `source` is refused, or `None` if the prepare step may use
/// it: a bare `org/name` has no host and passes; a URL must be `http(s)` on
/// one of [`ALLOWED_SOURCE_HOSTS`].
///
/// The host is read as Python's `urlparse(...).netloc` reads it (what
/// follows `//`, without user info and port), compared case-insensitively.
/// Unlike AIPerf, a URL with another scheme (`file:`, `ftp:`) is refused even
/// without a host.
pub fn untrusted_source(source: &str) -> Option<String> {
    let source = source.trim();
    let (scheme, rest) = match source.split_once(':') {
        Some((s, rest))
            if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (Some(s.to_ascii_lowercase()), rest)
        }
        _ => (None, source),
    };
    let host = rest.strip_prefix("//").map(|after| {
        let netloc = after.split(['/', '?', '#']).next().unwrap_or("");
        let netloc = netloc.rsplit('@').next().unwrap_or("");
        let host = if netloc.starts_with('[') {
            netloc
                .split(']')
                .next()
                .unwrap_or("")
                .trim_start_matches('[')
        } else {
            netloc.split(':').next().unwrap_or("")
        };
        host.to_ascii_lowercase()
    });
    match (scheme.as_deref(), host) {
        (None, None) => None,
        (Some("http" | "https") | None, Some(h)) if ALLOWED_SOURCE_HOSTS.contains(&h.as_str()) => {
            None
        }
        (Some("http" | "https") | None, Some(h)) if !h.is_empty() => Some(format!("on host {h:?}")),
        (Some(s), _) if s != "http" && s != "https" => Some(format!("a {s:?} URL")),
        _ => Some("a URL without a host".to_string()),
    }
}

/// Refuses a config whose rows name an untrusted source (see
/// [`untrusted_source`]), naming the first such row.
pub fn check_sources<'a>(
    config: &str,
    rows: impl IntoIterator<Item = (&'a Value, &'a str)>,
) -> Result<(), DatasetError> {
    let mut first: Option<(String, String, String)> = None;
    let mut others = 0;
    for (question_id, source) in rows {
        if let Some(what) = untrusted_source(source) {
            if first.is_none() {
                first = Some((id_text(question_id), source.to_string(), what));
            } else {
                others += 1;
            }
        }
    }
    match first {
        None => Ok(()),
        Some((question_id, source_url, what)) => {
            Err(DatasetError::from(ResolveError::UntrustedSource {
                config: config.to_string(),
                question_id,
                source_url,
                what,
                others,
            }))
        }
    }
}

pub(super) fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_hosts_and_bare_ids_pass() {
        for ok in [
            "cais/hle",
            "TIGER-Lab/MMLU-Pro",
            "https://huggingface.co/datasets/RUCAIBox/BAMBOO/resolve/main/senhallu_16k.jsonl",
            "https://raw.githubusercontent.com/mtbench101/mt-bench-101/main/x.jsonl",
            "http://HuggingFace.co/datasets/x",
            "https://user@github.com:443/ZenMoore/RoleBench/tree/main",
            "https://www.gutenberg.org/ebooks/1",
            "https://opencompass.openxlab.space/utils/AdaLEval/stackselect_16k.json",
            "",
        ] {
            assert_eq!(untrusted_source(ok), None, "{ok}");
        }
        for (bad, what) in [
            ("https://evil.example/x.jsonl", "on host \"evil.example\""),
            (
                "https://huggingface.co.evil.example/datasets/x",
                "on host \"huggingface.co.evil.example\"",
            ),
            (
                "https://huggingface.co@evil.example/x",
                "on host \"evil.example\"",
            ),
            ("//evil.example/x", "on host \"evil.example\""),
            ("file:///etc/passwd", "a \"file\" URL"),
            ("ftp://huggingface.co/x", "a \"ftp\" URL"),
        ] {
            assert_eq!(untrusted_source(bad).as_deref(), Some(what), "{bad}");
        }
    }

    #[test]
    fn an_untrusted_source_names_its_row() {
        let rows = [
            (Value::String("q1".into()), "cais/hle".to_string()),
            (
                Value::String("q2".into()),
                "https://evil.example/a.json".to_string(),
            ),
            (
                Value::String("q3".into()),
                "https://evil.example/b.json".to_string(),
            ),
        ];
        let err =
            check_sources("throughput_1k", rows.iter().map(|(q, s)| (q, s.as_str()))).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                DatasetError::Resolve(ResolveError::UntrustedSource { others: 1, .. })
            ),
            "{msg}"
        );
        assert!(
            msg.contains("row q2")
                && msg.contains("https://evil.example/a.json")
                && msg.contains("huggingface.co, raw.githubusercontent.com")
                && msg.contains("1 more row"),
            "{msg}"
        );
    }
}
