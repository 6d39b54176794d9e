//! Where requests go and what they carry.

use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value, json};
use speedbench_dataset::Message;

use crate::error::ClientError;

/// Which OpenAI-compatible API the requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiKind {
    /// `POST /v1/chat/completions` with `messages`.
    #[default]
    Chat,
    /// `POST /v1/completions` with a `prompt` string.
    Completions,
}

impl ApiKind {
    fn path(self) -> &'static str {
        match self {
            ApiKind::Chat => "/v1/chat/completions",
            ApiKind::Completions => "/v1/completions",
        }
    }
}

/// An API key; its `Debug` and `Display` never show the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A server base URL, normalised: scheme, authority and an optional prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrl {
    scheme: String,
    authority: String,
    prefix: String,
}

impl BaseUrl {
    /// Parses `host:port`, `http://host:port`, or either with `/v1` or a
    /// path prefix (as llama.cpp's client accepts).
    ///
    /// ```
    /// use speedbench_client::BaseUrl;
    /// assert_eq!(BaseUrl::parse("localhost:8000")?.to_string(), "http://localhost:8000");
    /// assert_eq!(BaseUrl::parse("http://h:1/v1/")?.to_string(), "http://h:1");
    /// assert_eq!(BaseUrl::parse("http://h:1/proxy/v1")?.to_string(), "http://h:1/proxy");
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn parse(url: &str) -> Result<BaseUrl, ClientError> {
        let bad = |why: &str| ClientError::InvalidUrl {
            url: speedbench_record::redact_url(url),
            message: why.to_string(),
        };
        let (scheme, rest) = match url.split_once("://") {
            Some((s, r)) => (s.to_ascii_lowercase(), r),
            None => ("http".to_string(), url),
        };
        if scheme != "http" && scheme != "https" {
            return Err(bad("the scheme must be http or https"));
        }
        let rest = rest.split(['?', '#']).next().unwrap_or("");
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if authority.contains('@') {
            return Err(bad(
                "credentials in the URL are not supported; use --api-key",
            ));
        }
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let mut prefix = path.trim_end_matches('/');
        prefix = prefix.strip_suffix("/v1").unwrap_or(prefix);
        Ok(BaseUrl {
            scheme,
            authority: authority.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The full URL of `path` (which starts with `/`) on this server.
    pub fn join(&self, path: &str) -> String {
        format!("{self}{path}")
    }
}

impl fmt::Display for BaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}{}", self.scheme, self.authority, self.prefix)
    }
}

/// Everything about how requests are made, shared by every request of a run.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server.
    pub base_url: BaseUrl,
    /// Chat or completions API.
    pub api: ApiKind,
    /// The `model` field.
    pub model: String,
    /// Request a streamed (SSE) response.
    pub streaming: bool,
    /// `max_tokens` to send, when set.
    pub max_tokens: Option<u32>,
    /// Extra body fields (e.g. `temperature`), merged last so they win.
    pub extra_body: Map<String, Value>,
    /// Sent as `Authorization: Bearer ...`.
    pub api_key: Option<ApiKey>,
    /// Extra HTTP headers.
    pub headers: Vec<(String, String)>,
    /// Per-request timeout, from sending to the last byte.
    pub timeout: Duration,
    /// Extra trusted CA certificates, each a PEM bundle (e.g. a private CA or
    /// a self-signed test server), added to the Mozilla and system roots.
    /// `SSL_CERT_FILE` is honoured as well.
    pub extra_roots_pem: Vec<Vec<u8>>,
}

impl Target {
    /// A target with defaults: chat API, streaming, 600 s timeout, no extra
    /// CA roots.
    pub fn new(base_url: BaseUrl, model: impl Into<String>) -> Target {
        Target {
            base_url,
            api: ApiKind::Chat,
            model: model.into(),
            streaming: true,
            max_tokens: None,
            extra_body: Map::new(),
            api_key: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(600),
            extra_roots_pem: Vec::new(),
        }
    }

    /// The URL requests are sent to.
    pub fn request_url(&self) -> String {
        self.base_url.join(self.api.path())
    }

    /// The JSON body for a request carrying `history` (ending with the
    /// current user turn).
    pub fn body(&self, history: &[Message]) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), Value::String(self.model.clone()));
        match self.api {
            ApiKind::Chat => {
                body.insert(
                    "messages".into(),
                    serde_json::to_value(history).unwrap_or_default(),
                );
            }
            ApiKind::Completions => {
                let prompt: Vec<&str> = history.iter().map(|m| m.content.as_str()).collect();
                body.insert("prompt".into(), Value::String(prompt.join("\n\n")));
            }
        }
        if let Some(n) = self.max_tokens {
            body.insert("max_tokens".into(), json!(n));
        }
        if self.streaming {
            body.insert("stream".into(), Value::Bool(true));
            // Usage (and vLLM's per-request spec stats) only arrive on this chunk.
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        for (k, v) in &self.extra_body {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// Parses `--extra-inputs` values: a JSON object, or `key:value` pairs whose
/// values are parsed as JSON when they can be (`temperature:0` is a number).
///
/// ```
/// use speedbench_client::parse_extra_inputs;
/// let m = parse_extra_inputs(&["temperature:0".into(), "stop:END".into()])?;
/// assert_eq!(m["temperature"], 0);
/// assert_eq!(m["stop"], "END");
/// let m = parse_extra_inputs(&[r#"{"top_p": 0.9}"#.into()])?;
/// assert_eq!(m["top_p"], 0.9);
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ClientError> {
    let mut out = Map::new();
    for item in items {
        let trimmed = item.trim();
        if trimmed.starts_with('{') {
            match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Object(m)) => out.extend(m),
                _ => {
                    return Err(ClientError::InvalidExtraInput {
                        input: item.clone(),
                        message: "not a JSON object".into(),
                    });
                }
            }
            continue;
        }
        let Some((k, v)) = trimmed.split_once(':') else {
            return Err(ClientError::InvalidExtraInput {
                input: item.clone(),
                message: "expected key:value or a JSON object".into(),
            });
        };
        let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
        out.insert(k.trim().to_string(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalise_and_refuse_what_they_cannot_do() {
        assert_eq!(
            BaseUrl::parse("127.0.0.1:9").unwrap().join("/health"),
            "http://127.0.0.1:9/health"
        );
        assert_eq!(
            BaseUrl::parse("HTTPS://x/v1").unwrap().to_string(),
            "https://x"
        );
        let err = BaseUrl::parse("http://user:sekrit@h:1")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("sekrit"), "{err}");
        assert!(BaseUrl::parse("ftp://h").is_err());
    }

    #[test]
    fn bodies_for_both_apis() {
        let mut t = Target::new(BaseUrl::parse("h:1").unwrap(), "m");
        t.max_tokens = Some(16);
        t.extra_body.insert("temperature".into(), json!(0));
        let history = vec![Message {
            role: "user".into(),
            content: "hi".into(),
        }];
        let b = t.body(&history);
        assert_eq!(b["messages"][0]["content"], "hi");
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(
            (b["max_tokens"].clone(), b["temperature"].clone()),
            (json!(16), json!(0))
        );
        t.api = ApiKind::Completions;
        t.streaming = false;
        let b = t.body(&history);
        assert_eq!(b["prompt"], "hi");
        assert!(b.get("stream").is_none());
        assert_eq!(t.request_url(), "http://h:1/v1/completions");
    }

    #[test]
    fn api_keys_never_print() {
        let k = ApiKey::new("sk-abc");
        assert_eq!(format!("{k:?} {k}"), "ApiKey(<redacted>) <redacted>");
    }
}
