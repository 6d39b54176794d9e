//! One request on the wire, timed at the moment bytes arrive.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use hyper::{Method, Request};
use serde_json::Value;
use speedbench_dataset::Message;
use speedbench_http::{
    ClientOptions, ConnectionClock, H1Client, ResponseDetail, Sends, WireTrace, describe,
    new_client,
};
use speedbench_record::{ErrorKind, HttpPhases, SpecDecodeStats};

use crate::error::ClientError;
use crate::response::ResponseState;
use crate::secrets::Secrets;
use crate::spec::MalformedSpec;
use crate::sse::SseParser;
use crate::target::{HttpClientKind, Target, request_headers};

/// A pooled keep-alive HTTP client bound to one target.
#[derive(Clone)]
pub(crate) struct HttpClient {
    transport: Transport,
    /// hyper without connection reuse, built once the server was seen
    /// resetting a kept-alive connection without reading the request
    /// written to it, and taken for every request from then on (hyper's
    /// path; the lean client keeps its own).
    unpooled: Arc<OnceLock<speedbench_http::HttpClient>>,
    /// The options the transport was built with (for `unpooled`).
    options: ClientOptions,
    url: hyper::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// Scrubs what the server sends back before anyone stores or logs it.
    secrets: Secrets,
    /// Keep each response's body bytes ([`Exchange::raw`]).
    capture_raw: bool,
}

/// What carries a target's requests. Only hyper reads TLS roots: the
/// lean client's target builds no hyper client at all (a bundle of CA
/// certificates, `SSL_CERT_FILE`'s among them, parsed for nothing was a
/// third of a short run's start-up).
#[derive(Clone)]
enum Transport {
    /// The lean HTTP/1.1 client: a plain `http://` target, unless hyper
    /// was asked for.
    Lean(H1Client),
    /// hyper's pooled client: `https://`, or `--http-client hyper`.
    Hyper(speedbench_http::HttpClient),
}

/// The lean client of `url`, its errors as the client names them.
fn lean_client(
    url: &hyper::Uri,
    headers: &[(HeaderName, HeaderValue)],
    options: &ClientOptions,
) -> Result<H1Client, ClientError> {
    H1Client::new(url, headers, options).map_err(|e| match e {
        e @ speedbench_http::HttpError::LocalAddr { .. } => ClientError::from_http(e),
        e => ClientError::InvalidUrl {
            url: url.to_string(),
            message: e.to_string(),
        },
    })
}

/// What one exchange produced: the folded response plus how it ended.
pub(crate) struct Exchange {
    pub sent_at: Instant,
    pub ended_at: Instant,
    pub status: Option<u16>,
    pub state: ResponseState,
    pub error: Option<(ErrorKind, String)>,
    /// How often the request was written again, and when first.
    pub sends: Sends,
    /// The answering connection's clock, once a response arrived.
    clock: Option<ConnectionClock>,
    /// How the lean client had the connection and what crossed it, once a
    /// response head arrived on it.
    pub wire: Option<WireTrace>,
    /// The response's reason, headers (scrubbed) and body reads, with
    /// [`HttpClient::with_http_trace`].
    pub wire_detail: Option<ResponseDetail>,
    /// The response's `Content-Type`, scrubbed.
    pub content_type: Option<String>,
    /// With raw capture on: the body as received (lossy UTF-8), scrubbed
    /// with [`Secrets::scrub_raw`]; `None` when capture is off.
    pub raw: Option<String>,
    /// The body bytes while they arrive (raw capture only).
    raw_bytes: Option<Vec<u8>>,
    /// [`Target::max_response_bytes`] of the request.
    max_response_bytes: usize,
    /// The response's spec-decode stats ([`ResponseState::spec`]), a
    /// payload that cannot be right named with its message scrubbed.
    pub spec: Result<Option<SpecDecodeStats>, MalformedSpec>,
    /// TensorRT-LLM's tokens per iteration, likewise.
    pub tokens_per_iteration: Result<Option<f64>, MalformedSpec>,
    /// A `--prefill-concurrency` slot, given back at the first output.
    prefill_slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl Exchange {
    /// The request's HTTP phases, where the lean client carried it and a
    /// response head arrived.
    pub(crate) fn http_phases(&self) -> Option<HttpPhases> {
        let wire = self.wire.as_ref()?;
        let [written, sent, first, last] = wire.exchange_moments()?;
        let ns = |d: std::time::Duration| d.as_nanos() as u64;
        Some(HttpPhases {
            blocked_ns: ns(wire.blocked()),
            dns_lookup_ns: ns(wire.dns_lookup()),
            connecting_ns: ns(wire.connecting()),
            sending_ns: ns(sent.saturating_duration_since(written)),
            waiting_ns: ns(first.saturating_duration_since(sent)),
            receiving_ns: ns(last.saturating_duration_since(first)),
            connection_reused: wire.reused,
            bytes_sent: wire.body_bytes_sent,
            bytes_received: wire.body_bytes_received,
            chunks_sent: u64::from(wire.writes),
            chunks_received: u64::from(wire.body_reads),
        })
    }

    /// When the response's latest bytes arrived, capped at `now`: as the
    /// lean client stamped them before its connection went back to the
    /// pool (where another request may read on it), else by the clock.
    fn last_arrival(&self, now: Instant) -> Instant {
        match (self.wire.as_ref().and_then(|w| w.last_byte), &self.clock) {
            (Some(last), _) => last.min(now),
            (None, Some(clock)) => clock.arrival(now),
            (None, None) => now,
        }
    }

    /// The first output is here: the prefill slot is given back.
    fn release_prefill_at_first_output(&mut self) {
        if self.prefill_slot.is_some() && self.state.first_output.is_some() {
            self.prefill_slot = None;
        }
    }
}

impl HttpClient {
    pub(crate) fn new(target: &Target, max_connections: usize) -> Result<HttpClient, ClientError> {
        let url_text = target.request_url();
        let url: hyper::Uri = url_text
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| ClientError::InvalidUrl {
                url: url_text.clone(),
                message: e.to_string(),
            })?;
        target.validate()?;
        let mut headers = vec![(CONTENT_TYPE, HeaderValue::from_static("application/json"))];
        headers.extend(request_headers(target.api_key.as_ref(), &target.headers)?);
        // llama-server closes the connection after every streamed answer
        // while its headers say keep-alive: a request written to it in that
        // instant would be lost, so its connections are not reused.
        // `--connection-reuse-strategy never` asks the same of every server.
        let reuse = target.engine != Some(crate::Engine::LlamaCpp)
            && target.connection_reuse != crate::ConnectionReuse::Never;
        let options = ClientOptions {
            max_idle_per_host: if reuse { max_connections } else { 0 },
            extra_roots_pem: target.extra_roots_pem.clone(),
            local_addrs: target.local_addrs.clone(),
            ..Default::default()
        };
        let transport = match (url.scheme_str(), target.http_client) {
            (Some("http"), HttpClientKind::Lean) => {
                Transport::Lean(lean_client(&url, &headers, &options)?)
            }
            _ => Transport::Hyper(new_client(&options).map_err(ClientError::from_http)?),
        };
        Ok(HttpClient {
            transport,
            unpooled: Arc::default(),
            options,
            url,
            headers,
            secrets: target.secrets(),
            capture_raw: false,
        })
    }

    /// A client of the same server and options with a pool of its own,
    /// holding at most one idle connection: one conversation's, so that
    /// its turns share a connection no other conversation uses, closed
    /// when the conversation drops it (`sticky-user-sessions`). A server
    /// whose connections are not reused (llama.cpp) keeps none.
    pub(crate) fn for_one_session(&self) -> HttpClient {
        let mut options = self.options.clone();
        options.max_idle_per_host = options.max_idle_per_host.min(1);
        // These options built a client already: a failure here cannot
        // come from them, but is said rather than hidden.
        let built = match &self.transport {
            Transport::Lean(_) => {
                lean_client(&self.url, &self.headers, &options).map(Transport::Lean)
            }
            Transport::Hyper(_) => {
                (new_client(&options).map(Transport::Hyper)).map_err(ClientError::from_http)
            }
        };
        match built {
            Ok(transport) => HttpClient {
                transport,
                unpooled: Arc::default(),
                options,
                ..self.clone()
            },
            Err(e) => {
                tracing::warn!(error = %e, "a session's own connection could not be set up; it shares the pool");
                self.clone()
            }
        }
    }

    /// Keeps every response's body bytes ([`Exchange::raw`]).
    pub(crate) fn with_raw_capture(mut self, on: bool) -> HttpClient {
        self.capture_raw = on;
        self
    }

    /// Keeps every response's head and body reads and its connection's
    /// addresses ([`Exchange::wire_detail`]), for `--export-http-trace`.
    pub(crate) fn with_http_trace(mut self, on: bool) -> Result<HttpClient, ClientError> {
        if self.options.trace_detail == on {
            return Ok(self);
        }
        self.options.trace_detail = on;
        if let Transport::Lean(_) = self.transport {
            self.transport = Transport::Lean(lean_client(&self.url, &self.headers, &self.options)?);
        }
        Ok(self)
    }

    /// Sends one request and reads the whole response, never failing: every
    /// problem ends up in [`Exchange::error`]. Every string the server sent
    /// back is scrubbed of the target's credentials (see [`Secrets`]).
    pub(crate) async fn exchange(&self, target: &Target, history: &[Message]) -> Exchange {
        self.exchange_body(target, Bytes::from(target.body_json(history)))
            .await
    }

    /// [`HttpClient::exchange`] of a body already written
    /// ([`Target::body_json`]).
    pub(crate) async fn exchange_body(&self, target: &Target, body: Bytes) -> Exchange {
        self.exchange_holding(target, body, None).await
    }

    /// [`HttpClient::exchange_body`] holding `prefill_slot` until the first
    /// output arrives (or the response ends).
    pub(crate) async fn exchange_holding(
        &self,
        target: &Target,
        body: Bytes,
        prefill_slot: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Exchange {
        let sent_at = Instant::now();
        let mut ex = Exchange {
            sent_at,
            ended_at: sent_at,
            status: None,
            state: ResponseState::new(&target.spec_adapters),
            error: None,
            sends: Sends::default(),
            clock: None,
            wire: None,
            wire_detail: None,
            content_type: None,
            raw: None,
            raw_bytes: self.capture_raw.then(Vec::new),
            max_response_bytes: target.max_response_bytes,
            spec: Ok(None),
            tokens_per_iteration: Ok(None),
            prefill_slot,
        };
        let result = tokio::time::timeout(target.timeout, self.run(body, &mut ex)).await;
        ex.prefill_slot = None;
        let now = Instant::now();
        // A complete response ended when its last bytes were read.
        ex.ended_at = match &result {
            Ok(Ok(())) => ex.last_arrival(now),
            _ => now,
        };
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => ex.error = Some(e),
            Err(_) => {
                ex.error = Some((
                    ErrorKind::Timeout,
                    format!("no complete response within {:?}", target.timeout),
                ))
            }
        }
        if let Some(msg) = ex.state.server_error.clone() {
            ex.error = with_server_error(ex.error.take(), msg);
        }
        self.scrub(&mut ex);
        ex
    }

    /// Everything of an exchange that leaves the process, scrubbed of the
    /// run's credentials: the error, the response's fields, the payloads'
    /// messages, the content type and the raw body.
    fn scrub(&self, ex: &mut Exchange) {
        if let Some((_, msg)) = &mut ex.error {
            self.secrets.scrub_in_place(msg);
        }
        ex.state.scrub(&self.secrets);
        // The payloads leave only as these numbers, or as the message of one
        // that cannot be right (which may quote it): the message is
        // scrubbed, not every key and string of every payload.
        let scrubbed = |mut m: MalformedSpec| {
            self.secrets.scrub_in_place(&mut m.message);
            m
        };
        ex.spec = ex.state.spec().map_err(scrubbed);
        ex.tokens_per_iteration = ex.state.tokens_per_iteration().map_err(scrubbed);
        if let Some(ct) = &mut ex.content_type {
            self.secrets.scrub_in_place(ct);
        }
        if let Some(detail) = &mut ex.wire_detail {
            self.secrets.scrub_in_place(&mut detail.reason);
            for (name, value) in &mut detail.headers {
                self.secrets.scrub_in_place(name);
                self.secrets.scrub_in_place(value);
            }
        }
        if let Some(bytes) = ex.raw_bytes.take() {
            let text = String::from_utf8_lossy(&bytes);
            ex.raw = Some(self.secrets.scrub_raw(&text).into_owned());
        }
    }

    async fn send(
        &self,
        client: &speedbench_http::HttpClient,
        body: Bytes,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper_util::client::legacy::Error> {
        let mut req = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone());
        for (n, v) in &self.headers {
            req = req.header(n, v);
        }
        // The builder only fails on an invalid URI or header, both checked in `new`.
        let req = req
            .body(Full::new(body))
            .expect("request parts validated in HttpClient::new");
        client.request(req).await
    }

    /// The hyper client for the next request: the unpooled one once it
    /// exists, else the pooled one.
    fn hyper_client<'a>(
        &'a self,
        pooled: &'a speedbench_http::HttpClient,
    ) -> &'a speedbench_http::HttpClient {
        self.unpooled.get().unwrap_or(pooled)
    }

    /// The client that keeps no connection, built the first time.
    fn unpooled_client(&self) -> Result<&speedbench_http::HttpClient, (ErrorKind, String)> {
        if let Some(c) = self.unpooled.get() {
            return Ok(c);
        }
        let options = ClientOptions {
            max_idle_per_host: 0,
            ..self.options.clone()
        };
        let built = new_client(&options).map_err(|e| (ErrorKind::Connection, e.to_string()))?;
        Ok(self.unpooled.get_or_init(|| built))
    }

    async fn run(&self, body: Bytes, ex: &mut Exchange) -> Result<(), (ErrorKind, String)> {
        match &self.transport {
            Transport::Lean(lean) => Self::run_lean(lean, &body, ex).await,
            Transport::Hyper(pooled) => self.run_hyper(pooled, body, ex).await,
        }
    }

    /// The exchange through the lean HTTP/1.1 client (which writes a
    /// request once: see [`H1Client::post`]).
    async fn run_lean(
        lean: &H1Client,
        body: &[u8],
        ex: &mut Exchange,
    ) -> Result<(), (ErrorKind, String)> {
        let mut resp = lean
            .post_logged(body, &mut ex.sends)
            .await
            .map_err(|e| (ErrorKind::Connection, describe(&e)))?;
        let mut fold = BodyFold::start(
            ex,
            resp.status,
            resp.content_type.take(),
            Some(resp.clock.clone()),
        );
        let read = loop {
            match resp.chunk().await {
                Ok(Some(data)) => {
                    if let Err(e) = fold.feed(ex, data) {
                        break Err(e);
                    }
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err((ErrorKind::Connection, describe(&e))),
            }
        };
        ex.wire = Some(resp.trace());
        ex.wire_detail = resp.take_detail();
        read?;
        fold.finish(ex)
    }

    /// The exchange through hyper's pooled client.
    async fn run_hyper(
        &self,
        pooled: &speedbench_http::HttpClient,
        body: Bytes,
        ex: &mut Exchange,
    ) -> Result<(), (ErrorKind, String)> {
        // Sent once: hyper's pool retries by itself only a request that
        // never left (its connection was found closed before the write);
        // one that failed after it may have reached the server is the
        // request's failure, not a reason to send it again, unless the
        // server reset a kept-alive connection before answering (see
        // `unread_on_kept_alive`).
        let resp = match self.send(self.hyper_client(pooled), body.clone()).await {
            Ok(resp) => resp,
            Err(e) => match unread_on_kept_alive(&e) {
                Some(written) => {
                    let unpooled = self.unpooled_client()?;
                    tracing::debug!(
                        "{}: the server reset a kept-alive connection without reading the request; written again on a new connection",
                        describe(&e)
                    );
                    ex.sends.first_written = ex.sends.first_written.or(written);
                    ex.sends.resends += 1;
                    self.send(unpooled, body).await.map_err(|e| {
                        let mut failed = hyper_failure(&e);
                        failed.1.push_str(" (written a second time: the server had reset a kept-alive connection without reading it)");
                        failed
                    })?
                }
                None => return Err(hyper_failure(&e)),
            },
        };
        let content_type = resp
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        let clock = resp.extensions().get::<ConnectionClock>().cloned();
        let mut fold = BodyFold::start(ex, resp.status().as_u16(), content_type, clock);
        let mut body = resp.into_body();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| (ErrorKind::Connection, describe(&e)))?;
            if let Ok(data) = frame.into_data() {
                fold.feed(ex, &data)?;
            }
        }
        fold.finish(ex)
    }
}

/// A failed hyper request as the record's error.
fn hyper_failure(e: &hyper_util::client::legacy::Error) -> (ErrorKind, String) {
    let mut message = describe(e);
    if !e.is_connect() {
        message.push_str(" (not sent again: the server may have read the request)");
    }
    (ErrorKind::Connection, message)
}

/// When a request hyper wrote to a kept-alive connection (one that had
/// answered before) met a reset before any byte of its answer, when it was
/// written (`Some(None)` if unknown): the server's kernel resets a socket
/// closed with bytes unread, so the server never read it. `None` for any
/// other failure, which the server may have read.
fn unread_on_kept_alive(e: &hyper_util::client::legacy::Error) -> Option<Option<Instant>> {
    if e.is_connect() {
        return None;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut reset = false;
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            reset |= matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            );
        }
        source = s.source();
    }
    let mut extensions = hyper::http::Extensions::new();
    e.connect_info()?.get_extras(&mut extensions);
    let clock = extensions.get::<ConnectionClock>()?;
    // It answered before (it read earlier), and nothing of this answer
    // arrived (its last response began before this request was written).
    let kept_alive = clock.last_read().is_some();
    let unanswered = match (clock.first_read(), clock.request_written()) {
        (Some(read), Some(written)) => read < written,
        _ => false,
    };
    (reset && kept_alive && unanswered).then(|| clock.request_written())
}

/// Folds a response body into an [`Exchange`] as its bytes arrive: SSE
/// events into the response state, anything else whole.
struct BodyFold {
    status: u16,
    is_sse: bool,
    sse: SseParser,
    whole: Vec<u8>,
    /// [`Target::max_response_bytes`].
    max_bytes: usize,
}

impl BodyFold {
    /// Records the response head in `ex`.
    fn start(
        ex: &mut Exchange,
        status: u16,
        content_type: Option<String>,
        clock: Option<ConnectionClock>,
    ) -> BodyFold {
        ex.status = Some(status);
        let max_bytes = ex.max_response_bytes;
        let is_sse = content_type
            .as_deref()
            .is_some_and(|v| v.starts_with("text/event-stream"));
        ex.content_type = content_type;
        // The request is timed from when its bytes were written and frames
        // from when their connection read them, not from when this task got
        // round to either (see `ConnectionClock`).
        // A request written again is timed from its first write.
        let written = ex
            .sends
            .first_written
            .or_else(|| clock.as_ref().and_then(ConnectionClock::request_written));
        if let Some(written) = written
            && written >= ex.sent_at
        {
            ex.sent_at = written;
        }
        ex.clock = clock;
        BodyFold {
            status,
            is_sse,
            sse: SseParser::with_max_line(max_bytes),
            whole: Vec::new(),
            max_bytes,
        }
    }

    fn success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// Takes the body bytes just received.
    fn feed(&mut self, ex: &mut Exchange, data: &[u8]) -> Result<(), (ErrorKind, String)> {
        // Timestamp before any parsing: this is when the bytes arrived.
        let now = Instant::now();
        let at = ex.clock.as_ref().map_or(now, |c| c.arrival(now));
        if let Some(raw) = &mut ex.raw_bytes {
            raw.extend_from_slice(data);
        }
        if !self.success() || !self.is_sse {
            if self.whole.len() + data.len() > self.max_bytes {
                self.whole = Vec::new();
                return Err((
                    ErrorKind::Protocol,
                    format!(
                        "the response body passed the cap of {} (raise it: --max-response-bytes)",
                        byte_count(self.max_bytes)
                    ),
                ));
            }
            self.whole.extend_from_slice(data);
            return Ok(());
        }
        // Events are folded as the parser finds them, borrowed from its
        // buffer; the first that cannot be folded ends the fold.
        let mut failed = None;
        let state = &mut ex.state;
        self.sse.push_with(data, |ev| {
            if failed.is_some() {
                return;
            }
            if ev.lossy {
                failed = Some(not_utf8());
            } else if ev.data.starts_with("[DONE]") {
                state.done = true;
            } else if let Err(e) = state.absorb_json_str(ev.data, at) {
                failed = Some((
                    ErrorKind::Protocol,
                    format!("stream chunk is not JSON ({e}): {}", excerpt(ev.data)),
                ));
            }
        });
        if self.sse.over_limit() {
            return Err((
                ErrorKind::Protocol,
                format!(
                    "a stream line or event passed the cap of {} (raise it: --max-response-bytes)",
                    byte_count(self.max_bytes)
                ),
            ));
        }
        if self.sse.invalid_utf8_lines() > 0 {
            return Err(not_utf8());
        }
        if let Some(e) = failed {
            return Err(e);
        }
        ex.release_prefill_at_first_output();
        Ok(())
    }

    /// The body is complete: an error status, a truncated stream or a body
    /// that is not JSON is the exchange's error.
    fn finish(self, ex: &mut Exchange) -> Result<(), (ErrorKind, String)> {
        // A whole body's output arrived with its last bytes, as the lean
        // client stamped them. hyper's pool may already have handed the
        // connection to another request, whose write and reads its clock
        // then holds: there it is when the body was parsed.
        let now = Instant::now();
        let at = (ex.wire.as_ref())
            .and_then(|w| w.last_byte)
            .map_or(now, |last| last.min(now));
        if !self.success() {
            let text = String::from_utf8_lossy(&self.whole);
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| {
                    let mut s = ResponseState::default();
                    s.absorb(&v, at);
                    s.server_error
                })
                .unwrap_or_else(|| excerpt(&text));
            let status = hyper::StatusCode::from_u16(self.status)
                .map_or_else(|_| self.status.to_string(), |s| s.to_string());
            return Err((ErrorKind::HttpStatus, format!("HTTP {status}: {detail}")));
        }
        if self.is_sse {
            if !ex.state.done {
                return Err((
                    ErrorKind::Protocol,
                    "stream ended without `data: [DONE]` (truncated response)".into(),
                ));
            }
        } else {
            ex.state.absorb_json(&self.whole, at).map_err(|e| {
                (
                    ErrorKind::Protocol,
                    format!(
                        "response body is not JSON ({e}): {}",
                        excerpt(&String::from_utf8_lossy(&self.whole))
                    ),
                )
            })?;
        }
        Ok(())
    }
}

impl ClientError {
    /// A client-building failure: a bad source address, or else the TLS setup.
    pub(crate) fn from_http(e: speedbench_http::HttpError) -> ClientError {
        match e {
            speedbench_http::HttpError::LocalAddr { addr, message } => {
                ClientError::LocalAddr { addr, message }
            }
            other => ClientError::Tls(other.to_string()),
        }
    }
}

/// `1 byte`, `N bytes`.
fn byte_count(n: usize) -> String {
    match n {
        1 => "1 byte".to_string(),
        n => format!("{n} bytes"),
    }
}

/// A stream that is not valid UTF-8: its text cannot be recorded as sent.
fn not_utf8() -> (ErrorKind, String) {
    (
        ErrorKind::Protocol,
        "stream is not valid UTF-8 (SSE streams must be UTF-8)".into(),
    )
}

fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(200).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}
/// The request's error once the server said one in the stream: its
/// message is the error, or, after an error event and then a close (with
/// or without a clean end), the cause, the close what followed it.
fn with_server_error(
    error: Option<(ErrorKind, String)>,
    msg: String,
) -> Option<(ErrorKind, String)> {
    match error {
        None => Some((ErrorKind::ServerError, msg)),
        Some((ErrorKind::Protocol | ErrorKind::Connection, then)) => Some((
            ErrorKind::ServerError,
            format!("{msg} (then the stream ended: {then})"),
        )),
        other => other,
    }
}
