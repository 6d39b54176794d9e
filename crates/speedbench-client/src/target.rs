//! Where requests go and what they carry.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use speedbench_dataset::Message;

use crate::engine_kind::Engine;
use crate::error::{ClientError, OwnedField};
use crate::models::ModelChoice;
use crate::spec::SpecAdapter;

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
    /// The endpoint's path, e.g. `/v1/chat/completions`.
    pub fn path(self) -> &'static str {
        match self {
            ApiKind::Chat => "/v1/chat/completions",
            ApiKind::Completions => "/v1/completions",
        }
    }

    /// The API's short name: `chat` or `completions`.
    pub fn name(self) -> &'static str {
        match self {
            ApiKind::Chat => "chat",
            ApiKind::Completions => "completions",
        }
    }
}

impl std::str::FromStr for ApiKind {
    type Err = String;

    /// `chat` or `completions`.
    fn from_str(s: &str) -> Result<ApiKind, String> {
        [ApiKind::Chat, ApiKind::Completions]
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| format!("unknown API {s:?} (expected chat or completions)"))
    }
}

/// The headers every request to the target's server carries: the API key as
/// `Authorization: Bearer …` and the `-H` headers, all marked sensitive.
///
/// Refuses an `Authorization` header given together with an API key (one
/// would silently replace the other) and invalid header names or values,
/// without quoting any value.
pub(crate) fn request_headers(
    api_key: Option<&ApiKey>,
    headers: &[(String, String)],
) -> Result<Vec<(HeaderName, HeaderValue)>, ClientError> {
    let mut out = Vec::new();
    if let Some(key) = api_key {
        if let Some((name, _)) = headers
            .iter()
            .find(|(n, _)| n.trim().eq_ignore_ascii_case("authorization"))
        {
            return Err(ClientError::AuthorizationTwice {
                header: name.trim().to_string(),
            });
        }
        let mut v = HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
            ClientError::InvalidHeader {
                name: "authorization".into(),
                message: "the API key holds characters not allowed in a header".into(),
            }
        })?;
        v.set_sensitive(true);
        out.push((AUTHORIZATION, v));
    }
    for (name, value) in headers {
        let invalid = |message: String| ClientError::InvalidHeader {
            name: name.clone(),
            message,
        };
        let n = HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let mut v = HeaderValue::from_str(value).map_err(|e| invalid(e.to_string()))?;
        v.set_sensitive(true);
        out.push((n, v));
    }
    Ok(out)
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
    /// The endpoint a full endpoint URL named (stripped from `prefix`).
    endpoint: Option<ApiKind>,
}

/// Checks `host[:port]` (or `[v6]:port`): a host, and a port in 1..=65535.
fn check_authority(authority: &str) -> Result<(), String> {
    let bracketed = authority.starts_with('[');
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("an IPv6 address needs its closing `]`".into());
        };
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return Err(format!("unexpected {after:?} after the IPv6 address")),
            },
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err("no host".into());
    }
    if !bracketed && host.contains(':') {
        return Err("an IPv6 address must be written in brackets, e.g. [::1]:8000".into());
    }
    if let Some(port) = port {
        if port.is_empty() {
            return Err("empty port after `:`".into());
        }
        if !port.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("the port {port:?} is not a number"));
        }
        match port.parse::<u32>() {
            Ok(p) if (1..=65535).contains(&p) => {}
            _ => return Err(format!("the port {port} is outside 1-65535")),
        }
    }
    Ok(())
}

impl BaseUrl {
    /// Parses `host:port`, `http://host:port`, or either with `/v1` or a
    /// path prefix (as llama.cpp's client accepts). A full endpoint URL
    /// (`…/v1/chat/completions`, `…/v1/completions`, `…/v1/models`) is
    /// understood as its server: the endpoint is stripped, remembered (see
    /// [`BaseUrl::endpoint`]) and a warning says so.
    ///
    /// ```
    /// use speedbench_client::{ApiKind, BaseUrl};
    /// assert_eq!(BaseUrl::parse("localhost:8000")?.to_string(), "http://localhost:8000");
    /// assert_eq!(BaseUrl::parse("http://h:1/v1/")?.to_string(), "http://h:1");
    /// assert_eq!(BaseUrl::parse("http://h:1/proxy/v1")?.to_string(), "http://h:1/proxy");
    /// let full = BaseUrl::parse("http://h:1/v1/chat/completions")?;
    /// assert_eq!((full.to_string(), full.endpoint()), ("http://h:1".into(), Some(ApiKind::Chat)));
    /// assert!(BaseUrl::parse("h:99999").is_err());
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
                "credentials in the URL are not supported; give them as an API key or a header",
            ));
        }
        check_authority(authority).map_err(|why| bad(&why))?;
        let mut prefix = path.trim_end_matches('/');
        let mut endpoint = None;
        let mut stripped = None;
        for (suffix, kind) in [
            ("/v1/chat/completions", Some(ApiKind::Chat)),
            ("/v1/completions", Some(ApiKind::Completions)),
            ("/v1/models", None),
        ] {
            if let Some(p) = prefix.strip_suffix(suffix) {
                prefix = p;
                endpoint = kind;
                stripped = Some(suffix);
                break;
            }
        }
        prefix = prefix.strip_suffix("/v1").unwrap_or(prefix);
        let base = BaseUrl {
            scheme,
            authority: authority.to_string(),
            prefix: prefix.to_string(),
            endpoint,
        };
        if let Some(suffix) = stripped {
            tracing::warn!(
                "the URL {} names the endpoint {suffix}: using the server {base} \
                 (speedbench adds the endpoint path itself)",
                speedbench_record::redact_url(url)
            );
        }
        Ok(base)
    }

    /// The API the parsed URL named, when it was a full endpoint URL.
    pub fn endpoint(&self) -> Option<ApiKind> {
        self.endpoint
    }

    /// Whether the server is reached over TLS (`https://`).
    pub fn is_https(&self) -> bool {
        self.scheme == "https"
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

/// Which HTTP client sends a run's requests to a plain `http://` server
/// (`https://` always goes through hyper and rustls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HttpClientKind {
    /// speedbench-http's lean HTTP/1.1 client ([`speedbench_http::H1Client`]):
    /// a few KiB per request in flight.
    #[default]
    Lean,
    /// hyper's pooled client: about 21 KiB more per connection in flight;
    /// a fallback should a server's HTTP trip the lean client.
    Hyper,
}

/// How a run's connections are reused (AIPerf's
/// `--connection-reuse-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConnectionReuse {
    /// Kept-alive connections pooled and reused by any request.
    #[default]
    Pooled,
    /// A new connection for every request, closed after its response.
    Never,
    /// One connection per conversation, kept across its turns and closed
    /// after the last (what a sticky load balancer needs to keep a
    /// conversation on one replica and its KV cache).
    StickyUserSessions,
}

impl ConnectionReuse {
    /// Every name [`str::parse`] takes, AIPerf's words.
    pub const NAMES: [&'static str; 3] = ["pooled", "never", "sticky-user-sessions"];

    /// `pooled`, `never` or `sticky-user-sessions`.
    pub fn name(self) -> &'static str {
        match self {
            ConnectionReuse::Pooled => "pooled",
            ConnectionReuse::Never => "never",
            ConnectionReuse::StickyUserSessions => "sticky-user-sessions",
        }
    }
}

impl std::str::FromStr for ConnectionReuse {
    type Err = String;

    /// One of [`ConnectionReuse::NAMES`].
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pooled" => Ok(ConnectionReuse::Pooled),
            "never" => Ok(ConnectionReuse::Never),
            "sticky-user-sessions" => Ok(ConnectionReuse::StickyUserSessions),
            other => Err(format!(
                "unknown connection reuse {other:?} (pooled, never or sticky-user-sessions)"
            )),
        }
    }
}

impl HttpClientKind {
    /// `lean` or `hyper`, as [`str::parse`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            HttpClientKind::Lean => "lean",
            HttpClientKind::Hyper => "hyper",
        }
    }
}

impl std::str::FromStr for HttpClientKind {
    type Err = String;

    /// `lean` or `hyper`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lean" => Ok(HttpClientKind::Lean),
            "hyper" => Ok(HttpClientKind::Hyper),
            other => Err(format!("unknown HTTP client {other:?} (lean or hyper)")),
        }
    }
}

/// Everything about how requests are made, shared by every request of a run.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server (the first of several: [`Target::more_urls`]).
    pub base_url: BaseUrl,
    /// More servers of the same model and engine (a fleet behind no load
    /// balancer): conversations go to `base_url` and these in turn, every
    /// turn of a conversation to the same one ([`Target::with_more_urls`]).
    pub more_urls: Vec<BaseUrl>,
    /// Chat or completions API.
    pub api: ApiKind,
    /// The `model` field (the first of [`Target::models`] when set).
    pub model: String,
    /// Several models behind the server (LoRA adapters), each row asking
    /// for one ([`Target::model_for_row`]); `None` sends [`Target::model`].
    pub models: Option<ModelChoice>,
    /// Request a streamed (SSE) response.
    pub streaming: bool,
    /// `max_tokens` to send, when set.
    pub max_tokens: Option<u32>,
    /// Extra body fields (e.g. `temperature`), merged last so they win.
    pub extra_body: Map<String, Value>,
    /// A row's own output length (a trace's `output_length`) is also sent
    /// as `min_tokens`, so the server writes exactly that many tokens
    /// (AIPerf's `--force-min-tokens`). Rows without one are unchanged.
    pub force_min_tokens: bool,
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
    /// Readers of spec-decode statistics for engines speedbench does not
    /// know, asked before the built-in ones ([`Target::with_spec_adapter`]).
    pub spec_adapters: Vec<Arc<dyn SpecAdapter>>,
    /// Source addresses the run's connections take in turn (round-robin),
    /// so one client can hold more connections to one server than one
    /// source address has ephemeral ports; empty lets the system pick
    /// ([`Target::with_local_addrs`]).
    pub local_addrs: Vec<IpAddr>,
    /// The client of requests to a plain `http://` server
    /// ([`Target::with_http_client`]).
    pub http_client: HttpClientKind,
    /// How connections are reused ([`ConnectionReuse`]; pooled by default).
    pub connection_reuse: ConnectionReuse,
    /// The engine behind the server, when known ([`Target::with_engine`]):
    /// its request fields go into every body, and its metrics paths into
    /// the server scrape.
    pub engine: Option<Engine>,
    /// The most bytes kept of one response body that is not a stream, and
    /// of one line or event of a stream ([`DEFAULT_MAX_RESPONSE_BYTES`]); a
    /// response past it fails, naming the cap, instead of growing memory
    /// without bound.
    pub max_response_bytes: usize,
}

/// The default [`Target::max_response_bytes`]: 32 MiB, far above any
/// chat completion or stream chunk (a 128k-token answer is about 0.5 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 << 20;

impl Target {
    /// A target with defaults: chat API, streaming, 600 s timeout, no extra
    /// CA roots.
    pub fn new(base_url: BaseUrl, model: impl Into<String>) -> Target {
        Target {
            base_url,
            more_urls: Vec::new(),
            api: ApiKind::Chat,
            model: model.into(),
            models: None,
            streaming: true,
            max_tokens: None,
            extra_body: Map::new(),
            force_min_tokens: false,
            api_key: None,
            headers: Vec::new(),
            timeout: Duration::from_secs(600),
            extra_roots_pem: Vec::new(),
            spec_adapters: Vec::new(),
            local_addrs: Vec::new(),
            http_client: HttpClientKind::default(),
            connection_reuse: ConnectionReuse::default(),
            engine: None,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }

    /// Rows share out `choice`'s models (its first becomes
    /// [`Target::model`], asked of discovery, the preflight and
    /// `/tokenize`).
    pub fn with_models(mut self, choice: ModelChoice) -> Self {
        self.model = choice.names()[0].clone();
        self.models = Some(choice);
        self
    }

    /// Conversations share `urls` out with [`Target::base_url`] in turn
    /// (round robin, AIPerf's `--url-strategy`); discovery, engine
    /// detection, the preflight and `/tokenize` ask the first server.
    pub fn with_more_urls(mut self, urls: Vec<BaseUrl>) -> Self {
        self.more_urls = urls;
        self
    }

    /// Every server: [`Target::base_url`], then [`Target::more_urls`].
    pub fn urls(&self) -> impl Iterator<Item = &BaseUrl> {
        std::iter::once(&self.base_url).chain(&self.more_urls)
    }

    /// This target with server `index` of [`Target::urls`] as its only
    /// one.
    pub fn for_server(&self, index: usize) -> Target {
        let mut one = self.clone();
        one.base_url = self.urls().nth(index).unwrap_or(&self.base_url).clone();
        one.more_urls = Vec::new();
        one
    }

    /// The model dataset row `index` asks for.
    pub fn model_for_row(&self, index: usize) -> &str {
        match &self.models {
            Some(choice) => choice.for_row(index),
            None => &self.model,
        }
    }

    /// Sets the engine behind the server ([`crate::detect_engine`] finds
    /// it): SGLang's requests then ask for per-request acceptance, and
    /// TensorRT-LLM's Prometheus endpoint is scraped.
    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = Some(engine);
        self
    }

    /// Sets the API to call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_client::{ApiKey, ApiKind, BaseUrl, Target};
    /// let t = Target::new(BaseUrl::parse("127.0.0.1:8000")?, "m")
    ///     .with_api(ApiKind::Completions)
    ///     .with_streaming(false)
    ///     .with_max_tokens(256)
    ///     .with_extra_body("temperature", 0.into())
    ///     .with_api_key(ApiKey::new("sk-test"))
    ///     .with_header("X-Team", "bench")
    ///     .with_timeout(Duration::from_secs(30));
    /// assert!(t.validate().is_ok());
    /// assert_eq!((t.api, t.streaming, t.max_tokens), (ApiKind::Completions, false, Some(256)));
    /// // The body fields speedbench sets itself cannot be replaced.
    /// assert!(t.with_extra_body("stream", true.into()).validate().is_err());
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn with_api(mut self, api: ApiKind) -> Self {
        self.api = api;
        self
    }

    /// Asks for streamed (SSE) responses or not (no TTFT without them).
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    /// Sends `max_tokens`.
    pub fn with_max_tokens(mut self, max_tokens: u32) -> Self {
        self.max_tokens = Some(max_tokens);
        self
    }

    /// Adds a body field (a sampling option such as `temperature`); one
    /// speedbench sets itself is refused by [`Target::validate`].
    pub fn with_extra_body(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra_body.insert(key.into(), value);
        self
    }

    /// The body fields as a record or a log line shows them: every
    /// credential among them (a field named like one, a key-shaped value, at
    /// any depth: `speedbench_credentials::redact_fields`) replaced by
    /// [`REDACTED`](crate::REDACTED). The scrubber ([`Target::secrets`])
    /// knows the values taken out.
    ///
    /// ```
    /// use speedbench_client::{BaseUrl, Target};
    /// let t = Target::new(BaseUrl::parse("h:1")?, "m")
    ///     .with_extra_body("temperature", 0.into())
    ///     .with_extra_body("metadata", serde_json::json!({"api_key": "k-1"}));
    /// let shown = serde_json::Value::Object(t.shown_extra_body());
    /// assert_eq!(shown, serde_json::json!({"temperature": 0, "metadata": {"api_key": "<redacted>"}}));
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn shown_extra_body(&self) -> Map<String, Value> {
        let mut shown = self.extra_body.clone();
        speedbench_credentials::redact_fields(&mut shown);
        shown
    }

    /// Sends `key` as `Authorization: Bearer …`.
    pub fn with_api_key(mut self, key: ApiKey) -> Self {
        self.api_key = Some(key);
        self
    }

    /// Adds an HTTP header to every request (and to `/v1/models`, `/metrics`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the per-request timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Reads spec-decode statistics with `adapter` too (see [`SpecAdapter`]).
    pub fn with_spec_adapter(mut self, adapter: impl SpecAdapter + 'static) -> Self {
        self.spec_adapters.push(Arc::new(adapter));
        self
    }

    /// Opens the run's connections from `addrs` in turn (each must be an
    /// address of this machine, checked by [`Target::validate`]).
    ///
    /// ```
    /// use speedbench_client::{BaseUrl, ClientError, Target};
    /// let t = Target::new(BaseUrl::parse("127.0.0.1:8000")?, "m")
    ///     .with_local_addrs(["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()]);
    /// assert!(t.validate().is_ok());
    /// // 192.0.2.0/24 is for documentation only: no machine has it.
    /// let err = t.with_local_addrs(["192.0.2.9".parse().unwrap()]).validate().unwrap_err();
    /// assert!(matches!(err, ClientError::LocalAddr { .. }), "{err}");
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn with_local_addrs(mut self, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.local_addrs = addrs.into_iter().collect();
        self
    }

    /// Sends plain-`http://` requests through `kind` (the lean client by
    /// default; `https://` always uses hyper).
    pub fn with_http_client(mut self, kind: HttpClientKind) -> Self {
        self.http_client = kind;
        self
    }

    /// Checks what can be checked before any request: header names and
    /// values, an `Authorization` header against an API key, extra body
    /// fields that would replace the ones speedbench sets, a full
    /// endpoint URL against the API in use, and source addresses.
    pub fn validate(&self) -> Result<(), ClientError> {
        request_headers(self.api_key.as_ref(), &self.headers)?;
        speedbench_http::check_local_addrs(&self.local_addrs).map_err(ClientError::from_http)?;
        if let Some(field) = OwnedField::ALL
            .into_iter()
            .find(|f| self.extra_body.contains_key(f.name()))
        {
            return Err(ClientError::OwnedField {
                input: field.name().to_string(),
                field,
            });
        }
        if let Some(named) = self.base_url.endpoint()
            && named != self.api
        {
            return Err(ClientError::EndpointMismatch {
                named,
                used: self.api,
            });
        }
        Ok(())
    }

    /// The URL requests are sent to.
    pub fn request_url(&self) -> String {
        self.base_url.join(self.api.path())
    }

    /// The JSON body for a request carrying `history` (ending with the
    /// current user turn); [`Target::body_json`] writes it as sent.
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
        // What the engine needs to report acceptance per request; the
        // user's extra body still wins.
        if let Some(engine) = self.engine {
            body.extend(engine.request_fields());
        }
        for (k, v) in &self.extra_body {
            body.insert(k.clone(), v.clone());
        }
        Value::Object(body)
    }
}

/// Parses a header argument `Name: value` (spaces around both trimmed).
///
/// The error never quotes the argument: without a colon, all of it may be a
/// credential (`Authorization Bearer sk-...`).
///
/// ```
/// use speedbench_client::parse_header;
/// assert_eq!(parse_header("X-Team: bench")?, ("X-Team".into(), "bench".into()));
/// let err = parse_header("Authorization Bearer sk-123").unwrap_err().to_string();
/// assert!(!err.contains("sk-123"), "{err}");
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
pub fn parse_header(h: &str) -> Result<(String, String), ClientError> {
    h.split_once(':')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| ClientError::InvalidHeader {
            name: "(no name)".into(),
            message: format!(
                "expected Name:value, got {} characters without a ':' (not shown: it may hold a secret)",
                h.chars().count()
            ),
        })
}

/// Parses `--extra-inputs` values: a JSON object, or `key:value` pairs whose
/// values are parsed as JSON when they can be (`temperature:0` is a number).
///
/// Refuses empty keys, a key given twice, and the fields speedbench sets
/// itself ([`OwnedField`]: `model`, `messages`, `prompt`, `stream`,
/// `stream_options`) with [`ClientError::OwnedField`]: overriding them would
/// send requests other than the ones recorded.
///
/// ```
/// use speedbench_client::parse_extra_inputs;
/// let m = parse_extra_inputs(&["temperature:0".into(), "stop:END".into()])?;
/// assert_eq!(m["temperature"], 0);
/// assert_eq!(m["stop"], "END");
/// let m = parse_extra_inputs(&[r#"{"top_p": 0.9}"#.into()])?;
/// assert_eq!(m["top_p"], 0.9);
/// let err = parse_extra_inputs(&["stream:true".into()]).unwrap_err();
/// assert!(matches!(
///     err,
///     speedbench_client::ClientError::OwnedField { field: speedbench_client::OwnedField::Stream, .. }
/// ));
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
pub fn parse_extra_inputs(items: &[String]) -> Result<Map<String, Value>, ClientError> {
    let mut out = Map::new();
    for item in items {
        let invalid = |message: String| ClientError::InvalidExtraInput {
            input: item.clone(),
            message,
        };
        let trimmed = item.trim();
        let pairs: Vec<(String, Value)> = if trimmed.starts_with('{') {
            match serde_json::from_str::<Value>(trimmed) {
                Ok(Value::Object(m)) => m.into_iter().collect(),
                _ => return Err(invalid("not a JSON object".into())),
            }
        } else {
            let Some((k, v)) = trimmed.split_once(':') else {
                return Err(invalid("expected key:value or a JSON object".into()));
            };
            let value = serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.to_string()));
            vec![(k.trim().to_string(), value)]
        };
        for (key, value) in pairs {
            if key.trim().is_empty() {
                return Err(invalid("the key is empty".into()));
            }
            if let Some(field) = OwnedField::ALL.into_iter().find(|f| f.name() == key) {
                return Err(ClientError::OwnedField {
                    input: item.clone(),
                    field,
                });
            }
            if out.contains_key(&key) {
                return Err(invalid(format!(
                    "`{key}` was already given by an earlier item"
                )));
            }
            out.insert(key, value);
        }
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
    fn ports_must_be_real_ports() {
        let err = |u: &str| BaseUrl::parse(u).unwrap_err().to_string();
        assert!(err("h:99999").contains("the port 99999 is outside 1-65535"));
        assert!(err("http://h:0/v1").contains("outside 1-65535"));
        assert!(err("h:123456789012345678901").contains("outside 1-65535"));
        assert!(err("h:80a").contains("not a number"));
        assert!(err("h:").contains("empty port"));
        assert!(err(":8000").contains("no host"));
        assert!(err("::1:8000").contains("brackets"));
        assert!(err("[::1").contains("closing"));
        for ok in ["h:1", "h:65535", "h", "[::1]:8000", "[::1]", "https://x.y"] {
            assert!(BaseUrl::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn full_endpoint_urls_are_understood() {
        for (url, base, kind) in [
            (
                "http://h:1/v1/chat/completions",
                "http://h:1",
                Some(ApiKind::Chat),
            ),
            (
                "h:1/v1/completions/",
                "http://h:1",
                Some(ApiKind::Completions),
            ),
            (
                "http://h:1/proxy/v1/chat/completions?x=1",
                "http://h:1/proxy",
                Some(ApiKind::Chat),
            ),
            ("http://h:1/v1/models", "http://h:1", None),
            ("http://h:1/v1", "http://h:1", None),
        ] {
            let b = BaseUrl::parse(url).unwrap();
            assert_eq!(
                (b.to_string(), b.endpoint()),
                (base.to_string(), kind),
                "{url}"
            );
        }
        let mut t = Target::new(BaseUrl::parse("h:1/v1/chat/completions").unwrap(), "m");
        assert_eq!(t.request_url(), "http://h:1/v1/chat/completions");
        assert!(t.validate().is_ok());
        t.api = ApiKind::Completions;
        let err = t.validate().unwrap_err().to_string();
        assert!(
            err.contains("/v1/chat/completions") && err.contains("use the chat API"),
            "{err}"
        );
    }

    #[test]
    fn an_authorization_header_and_a_key_conflict() {
        let mut t = Target::new(BaseUrl::parse("h:1").unwrap(), "m");
        t.headers = vec![("Authorization".into(), "Bearer from-header".into())];
        assert!(t.validate().is_ok(), "a header alone is fine");
        t.api_key = Some(ApiKey::new("from-key"));
        let err = t.validate().unwrap_err().to_string();
        assert!(
            err.contains("the header Authorization and the API key"),
            "{err}"
        );
        assert!(
            !err.contains("from-header") && !err.contains("from-key"),
            "{err}"
        );
        t.headers = vec![("X-Other".into(), "v".into())];
        let sent = request_headers(t.api_key.as_ref(), &t.headers).unwrap();
        assert_eq!(sent.len(), 2);
        assert!(sent.iter().all(|(_, v)| v.is_sensitive()));
    }

    #[test]
    fn extra_inputs_cannot_take_over_the_protocol() {
        let parse = |items: &[&str]| {
            let items: Vec<String> = items.iter().map(|s| s.to_string()).collect();
            parse_extra_inputs(&items).unwrap_err()
        };
        let err = |items: &[&str]| parse(items).to_string();
        for (item, owned) in [
            ("stream:true", OwnedField::Stream),
            ("model:other", OwnedField::Model),
            ("messages:[]", OwnedField::Messages),
            ("prompt:hi", OwnedField::Prompt),
            (r#"{"stream_options": {}}"#, OwnedField::StreamOptions),
            (" stream :false", OwnedField::Stream),
        ] {
            match parse(&[item]) {
                ClientError::OwnedField { field, .. } => assert_eq!(field, owned, "{item}"),
                other => panic!("{item}: {other}"),
            }
            assert!(err(&[item]).contains("set by speedbench itself"), "{item}");
        }
        assert!(err(&[":5"]).contains("the key is empty"));
        assert!(err(&[r#"{"": 1}"#]).contains("the key is empty"));
        assert!(err(&["temperature:0", r#"{"temperature": 1}"#]).contains("already given"));
        let ok = parse_extra_inputs(&["max_tokens:9".into(), "stream_x:1".into()]).unwrap();
        assert_eq!(
            (ok["max_tokens"].clone(), ok["stream_x"].clone()),
            (json!(9), json!(1))
        );
    }

    #[test]
    fn api_keys_never_print() {
        let k = ApiKey::new("sk-abc");
        assert_eq!(format!("{k:?} {k}"), "ApiKey(<redacted>) <redacted>");
    }
}
