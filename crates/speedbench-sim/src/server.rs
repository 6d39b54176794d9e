//! The HTTP server: routing, scheduled SSE bodies, accept loop and lifecycle.
//!
//! What a generation request is answered with is built in [`crate::respond`];
//! this module reads the request, keeps the accounting and sends the bytes
//! on their schedule.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use speedbench_clock::{ConnectionClock, TimedStream, WriteStamp};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, Sleep};

use crate::SimError;
use crate::config::{SimConfig, SpecFlavor};
use crate::faults::{self, FaultKind, FaultTruth};
use crate::metrics::{ArrivalTruth, Exposition, GroundTruth, RequestTruth};
use crate::model::PromptInfo;
use crate::precise_timer::PreciseTimer;
use crate::respond::{self, FullBody, Reply, StreamEnd};
use crate::wire::{self, Endpoint};

/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Listen backlog; large so bursts of thousands of connects are not
/// dropped (the kernel caps it at `net.core.somaxconn`).
const LISTEN_BACKLOG: u32 = 65_535;

/// State shared by all connections of one server.
struct Shared {
    config: SimConfig,
    truth: Mutex<GroundTruth>,
    running: AtomicU64,
    next_id: AtomicU64,
    started_unix: f64,
    /// `/metrics` counter-reset state.
    metrics_baseline: Mutex<MetricsBaseline>,
    /// TensorRT-LLM flavour: the reads of its JSON `/metrics` so far and
    /// the counters at the last one (its queue is drained on read).
    iteration_reads: Mutex<(u64, GroundTruth)>,
    /// Streamed requests whose first content's write is stamped by their
    /// connection, possibly after the request was recorded (hyper may
    /// still hold the frame when the body ends).
    content_sends: Mutex<Vec<ContentSend>>,
    /// Connections accepted, by the client's (source) address.
    peers: Mutex<BTreeMap<IpAddr, u64>>,
    /// Connections accepted so far (each request logs its connection's
    /// number, [`RequestTruth::connection`]).
    connections: AtomicU64,
    /// The words `/tokenize` has numbered.
    vocab: Mutex<crate::tokenize::Vocab>,
}

/// Where to find when a recorded request's first content actually left.
struct ContentSend {
    /// The request's index in `requests_log`.
    index: usize,
    received: std::time::Instant,
    write: WriteStamp,
}

impl Shared {
    fn truth(&self) -> MutexGuard<'_, GroundTruth> {
        // The lock is never held across a panic point that leaves the data
        // inconsistent, so a poisoned lock is still usable.
        self.truth.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn content_sends(&self) -> MutexGuard<'_, Vec<ContentSend>> {
        self.content_sends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ground truth, each streamed request's `first_content_sent_ns`
    /// taken from the start of the write that carried the content, where
    /// its connection has stamped it.
    fn truth_snapshot(&self) -> GroundTruth {
        let mut truth = self.truth().clone();
        for send in self.content_sends().iter() {
            if let (Some(entry), Some(at)) =
                (truth.requests_log.get_mut(send.index), send.write.get())
            {
                let ns = at.saturating_duration_since(send.received).as_nanos();
                entry.first_content_sent_ns = Some(u64::try_from(ns).unwrap_or(u64::MAX));
            }
        }
        truth
    }
}

/// What `/metrics` subtracts from the true counters.
#[derive(Default)]
struct MetricsBaseline {
    /// The true counters at the last injected reset; `None` before any.
    at_reset: Option<GroundTruth>,
    /// The true counters at the previous scrape.
    previous: Option<GroundTruth>,
}

/// Keeps `vllm:num_requests_running` up while a request is in flight.
struct RunningGuard(Arc<Shared>);

impl RunningGuard {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.running.fetch_add(1, Ordering::Relaxed);
        Self(Arc::clone(shared))
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What to record once a request has completed.
struct Completion {
    shared: Arc<Shared>,
    truth: RequestTruth,
    histogram: Vec<u64>,
    /// When the request arrived, and the stamp its connection fills when
    /// the first content's bytes leave.
    content_write: Option<(std::time::Instant, WriteStamp)>,
    /// Whether it was recorded; one dropped unrecorded was abandoned.
    committed: bool,
}

impl Drop for Completion {
    fn drop(&mut self) {
        if !self.committed {
            let conversation = std::mem::take(&mut self.truth.conversation);
            self.shared.truth().abandoned.push(conversation);
        }
    }
}

impl Completion {
    /// What to record once `reply` completes; `None` when its fault makes
    /// it fail (it is then never counted).
    fn of(shared: &Arc<Shared>, reply: &Reply) -> Option<Completion> {
        (!reply.fails()).then(|| Completion {
            shared: Arc::clone(shared),
            truth: reply.truth.clone(),
            histogram: reply.generation.spec.histogram.clone(),
            content_write: None,
            committed: false,
        })
    }

    fn commit(mut self) {
        self.committed = true;
        let shared = Arc::clone(&self.shared);
        let mut truth = shared.truth();
        if let Some((received, write)) = self.content_write.take() {
            let index = truth.requests_log.len();
            self.shared.content_sends().push(ContentSend {
                index,
                received,
                write,
            });
        }
        let request = std::mem::replace(&mut self.truth, RequestTruth::placeholder());
        truth.record(request, &self.histogram);
    }
}

/// The body error that makes hyper drop the connection mid-response.
#[derive(Debug, thiserror::Error)]
#[error("simulated connection reset")]
struct InjectedReset;

/// What a scheduled body does once its frames are sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// End the body normally.
    End,
    /// Fail the body, so hyper closes the connection without finishing it.
    Reset,
    /// [`Tail::Reset`] after its short pause has started.
    ResetNow,
    /// Never produce another frame.
    Stall,
}

/// Response body: either a complete buffer or a timed sequence of SSE frames.
enum SimBody {
    Full(Option<Bytes>),
    Scheduled(Box<Scheduled>),
}

/// SSE frames released at fixed offsets from the request start, so a slow
/// reader sees a backlog (as from a real server) rather than a slowed server.
struct Scheduled {
    start: Instant,
    /// When the request arrived, and how many frames precede the first
    /// content frame, to record when that frame actually left.
    received: Instant,
    frames_before_content: Option<usize>,
    /// The connection's clock, which stamps the write of the first content.
    clock: Option<ConnectionClock>,
    frames: VecDeque<(Duration, Bytes)>,
    /// Releases frames at their offsets to within microseconds.
    timer: PreciseTimer,
    /// The pause before an injected reset.
    sleep: Pin<Box<Sleep>>,
    on_complete: Option<Completion>,
    running: Option<RunningGuard>,
    tail: Tail,
}

impl Scheduled {
    /// One frame handed over: when it is the first content frame, the
    /// ground truth gets its send time (replaced by the write's start
    /// once the connection has stamped it).
    fn count_down_to_content(&mut self) {
        match self.frames_before_content {
            Some(0) => {
                self.frames_before_content = None;
                if let Some(done) = self.on_complete.as_mut() {
                    let sent = self.received.elapsed().as_nanos();
                    done.truth.first_content_sent_ns =
                        Some(u64::try_from(sent).unwrap_or(u64::MAX));
                    done.content_write = self
                        .clock
                        .as_ref()
                        .map(|c| (self.received.into_std(), c.stamp_next_write()));
                }
            }
            Some(n) => self.frames_before_content = Some(n - 1),
            None => {}
        }
    }
}

impl Scheduled {
    /// `frames` released from `start`, then `tail`; nothing recorded.
    fn new(
        start: Instant,
        received: Instant,
        frames: VecDeque<(Duration, Bytes)>,
        tail: Tail,
    ) -> Scheduled {
        Scheduled {
            start,
            received,
            frames_before_content: None,
            clock: None,
            frames,
            timer: PreciseTimer::new(),
            sleep: Box::pin(tokio::time::sleep_until(start)),
            on_complete: None,
            running: None,
            tail,
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = InjectedReset;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, InjectedReset>>> {
        let s = match self.get_mut() {
            SimBody::Full(b) => return Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Scheduled(s) => s,
        };
        let Some(&(at, _)) = s.frames.front() else {
            return match s.tail {
                Tail::End => Poll::Ready(None),
                Tail::Reset => {
                    // Pause briefly first, so hyper flushes the frames already
                    // sent; then fail once: hyper drops the connection.
                    s.tail = Tail::ResetNow;
                    s.sleep
                        .as_mut()
                        .reset(Instant::now() + Duration::from_millis(5));
                    ready!(s.sleep.as_mut().poll(cx));
                    s.tail = Tail::End;
                    Poll::Ready(Some(Err(InjectedReset)))
                }
                Tail::ResetNow => {
                    ready!(s.sleep.as_mut().poll(cx));
                    s.tail = Tail::End;
                    Poll::Ready(Some(Err(InjectedReset)))
                }
                // Nothing will ever wake this body; the connection stays
                // open until the client gives up or the server shuts down.
                Tail::Stall => Poll::Pending,
            };
        };
        let deadline = s.start + at;
        ready!(s.timer.poll_until(deadline.into_std(), cx));
        let Some((_, bytes)) = s.frames.pop_front() else {
            return Poll::Ready(None);
        };
        s.count_down_to_content();
        if s.frames.is_empty() {
            // Recorded before `[DONE]` reaches the client, so a client that
            // has read the whole stream always finds it in the ground truth
            // (and no longer counted as running).
            if let Some(done) = s.on_complete.take() {
                done.commit();
            }
            s.running = None;
        }
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            SimBody::Full(b) => b.is_none(),
            SimBody::Scheduled(s) => s.frames.is_empty() && s.tail == Tail::End,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => SizeHint::with_exact(0),
            SimBody::Scheduled(_) => SizeHint::default(),
        }
    }
}

/// `at` on the Unix clock, nanoseconds (through the time since it).
fn unix_ns_of(at: Instant) -> u64 {
    let since = at.elapsed();
    SystemTime::now()
        .checked_sub(since)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn json_response(status: StatusCode, body: &Value) -> Response<SimBody> {
    let mut resp = Response::new(SimBody::Full(Some(Bytes::from(body.to_string()))));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response<SimBody> {
    json_response(status, &wire::error_body(status.as_u16(), kind, message))
}

/// The response of an injected [`FaultKind::HttpStatus`] fault.
fn fault_status_response(code: u16) -> Response<SimBody> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let (kind, message) = match code {
        429 => (
            "rate_limit_error",
            "simulated fault: rate limit reached, retry later",
        ),
        503 => (
            "service_unavailable",
            "simulated fault: the server is overloaded",
        ),
        500..=599 => ("internal_server_error", "simulated fault: internal error"),
        _ => ("invalid_request_error", "simulated fault: request rejected"),
    };
    let mut resp = error_response(status, kind, message);
    if code == 429 {
        resp.headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
    }
    resp
}

/// A Prometheus text exposition response.
fn text_response(text: String) -> Response<SimBody> {
    let mut resp = Response::new(SimBody::Full(Some(Bytes::from(text))));
    resp.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    resp
}

/// The endpoints only one engine serves, as the flavour's engine serves
/// them (SGLang's `/get_server_info` and gauges, llama.cpp's `/props`,
/// TensorRT-LLM's JSON `/metrics` and `/prometheus/metrics`); `None` for
/// every other request.
fn engine_route(shared: &Shared, method: &Method, path: &str) -> Option<Response<SimBody>> {
    let resp = match (method, path, shared.config.flavor) {
        (&Method::GET, "/get_server_info", SpecFlavor::Sglang) => json_response(
            StatusCode::OK,
            &serde_json::json!({"model_path": shared.config.model, "speculative_algorithm": "EAGLE"}),
        ),
        (&Method::GET, "/props", SpecFlavor::LlamaCpp) => json_response(
            StatusCode::OK,
            &serde_json::json!({"total_slots": 1, "default_generation_settings": {}}),
        ),
        (&Method::GET, "/prometheus/metrics", SpecFlavor::TrtLlm) => {
            let text =
                crate::metrics::render_trtllm(&shared.truth().counters(), &shared.config.model);
            text_response(text)
        }
        (&Method::GET, "/metrics", SpecFlavor::TrtLlm) => {
            let now = shared.truth().counters();
            let mut reads = shared
                .iteration_reads
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            reads.0 += 1;
            let since = now.counters_since(&reads.1);
            let body = crate::metrics::trtllm_iteration_stats(reads.0, &since);
            reads.1 = now.counters();
            let mut resp = Response::new(SimBody::Full(Some(Bytes::from(body))));
            resp.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            resp
        }
        (&Method::GET, "/metrics", SpecFlavor::Sglang) => {
            let text =
                crate::metrics::render_sglang(&shared.truth().counters(), &shared.config.model);
            text_response(text)
        }
        _ => return None,
    };
    Some(resp)
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<SimBody> {
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    let known = [
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/models",
        "/health",
        "/metrics",
        "/debug/requests",
        "/reset_prefix_cache",
        "/tokenize",
        "/detokenize",
    ];
    let flavor = shared.config.flavor;
    if let Some(resp) = engine_route(&shared, &method, &path) {
        return resp;
    }
    match (&method, path.as_str()) {
        (&Method::POST, "/v1/chat/completions") => generate(shared, Endpoint::Chat, req).await,
        (&Method::POST, "/v1/completions") => generate(shared, Endpoint::Completions, req).await,
        (&Method::GET, "/v1/models") => json_response(
            StatusCode::OK,
            &wire::models(&shared.config.model, unix_now(), flavor.owner()),
        ),
        (&Method::GET, "/health") => {
            json_response(StatusCode::OK, &serde_json::json!({"status": "ok"}))
        }
        (&Method::GET, "/debug/requests") => {
            // A copy of the whole log: a bench reads it once after its run,
            // not while measuring.
            let log =
                serde_json::to_value(&shared.truth_snapshot().requests_log).unwrap_or_default();
            json_response(StatusCode::OK, &serde_json::json!({ "requests": log }))
        }
        (&Method::GET, "/metrics") => metrics_response(&shared),
        // vLLM's: the simulator keeps no cache, so there is nothing to
        // empty, but a tune asks before each run and says what answered.
        (&Method::POST, "/reset_prefix_cache") => Response::new(SimBody::Full(None)),
        (&Method::POST, "/tokenize" | "/detokenize") if crate::tokenize::served(flavor) => {
            tokenizer_route(&shared, &path, req).await
        }
        (_, p) if known.contains(&p) => error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            &format!("method {method} not allowed on {p}"),
        ),
        (_, p) => error_response(
            StatusCode::NOT_FOUND,
            "not_found_error",
            &format!("no route for {method} {p}"),
        ),
    }
}

/// `/tokenize` or `/detokenize` in the flavour's engine's shape.
async fn tokenizer_route(shared: &Shared, path: &str, req: Request<Incoming>) -> Response<SimBody> {
    let body = match read_body(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let flavor = shared.config.flavor;
    let answer = serde_json::from_slice::<Value>(&body)
        .map_err(|e| format!("the body is not JSON: {e}"))
        .and_then(|body| {
            let mut vocab = shared.vocab.lock().unwrap_or_else(|e| e.into_inner());
            if path == "/tokenize" {
                crate::tokenize::tokenize(&mut vocab, flavor, &body)
            } else {
                crate::tokenize::detokenize(&vocab, flavor, &body)
            }
        });
    match answer {
        Ok(answer) => json_response(StatusCode::OK, &answer),
        Err(msg) => error_response(StatusCode::BAD_REQUEST, "invalid_request_error", &msg),
    }
}

/// `/metrics`: the counters as a Prometheus exposition, as if the server
/// had restarted just after the previous scrape where the fault plan says
/// so.
fn metrics_response(shared: &Shared) -> Response<SimBody> {
    let exposed = {
        let mut truth = shared.truth();
        truth.scrapes += 1;
        let scrape = truth.scrapes;
        let mut baseline = shared
            .metrics_baseline
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let now = truth.counters();
        if faults::scrape_resets(&shared.config.faults, scrape) {
            // This scrape shows only what happened since the previous one,
            // so a client counting increases across resets (as Prometheus'
            // `increase()` does) loses nothing.
            truth.counter_resets.push(scrape);
            baseline.at_reset = Some(baseline.previous.take().unwrap_or_default());
        }
        baseline.previous = Some(now.clone());
        match baseline.at_reset.as_ref() {
            Some(base) => now.counters_since(base),
            None => now,
        }
    };
    let text = Exposition {
        truth: &exposed,
        model: &shared.config.model,
        running: shared.running.load(Ordering::Relaxed),
        llamacpp: shared.config.flavor.llamacpp(),
        created_unix: shared.started_unix,
    }
    .render();
    text_response(text)
}

/// The number of the connection a request came on (1 for the server's
/// first), put in each request's extensions.
#[derive(Debug, Clone, Copy)]
struct ConnectionNumber(u64);

/// Serves one generation request: reads and checks it, injects its fault,
/// simulates it and sends the response on its schedule.
async fn generate(
    shared: Arc<Shared>,
    endpoint: Endpoint,
    req: Request<Incoming>,
) -> Response<SimBody> {
    let clock = req.extensions().get::<ConnectionClock>().cloned();
    let connection = req
        .extensions()
        .get::<ConnectionNumber>()
        .map_or(0, |c| c.0);
    let received = arrival(clock.as_ref());
    let body = match read_body(req).await {
        Ok(body) => body,
        Err(resp) => return resp,
    };
    let (info, params) = match respond::parse_request(endpoint, &body) {
        Ok(parsed) => parsed,
        Err(msg) => return error_response(StatusCode::BAD_REQUEST, "invalid_request_error", &msg),
    };
    shared.truth().arrivals.push(ArrivalTruth {
        conversation: info.first_user.clone(),
        at_unix_ns: unix_ns_of(received),
    });
    let index = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let fault = inject_fault(&shared, index + 1, &info);
    if let Some(FaultKind::HttpStatus(code)) = fault {
        return fault_status_response(code);
    }
    let running = RunningGuard::new(&shared);
    let mut reply = Reply::new(
        &shared.config,
        endpoint,
        index,
        info,
        &params,
        fault,
        unix_now(),
        shared.running.load(Ordering::Relaxed),
    );
    reply.truth.connection = connection;
    if params.stream() {
        stream_response(
            &shared,
            &reply,
            params.include_usage(),
            received,
            clock,
            running,
        )
    } else {
        full_response(&shared, &reply, received, running).await
    }
}

/// When a request arrived: its connection's first read of it (the kernel's
/// receive time where available), or now.
fn arrival(clock: Option<&ConnectionClock>) -> Instant {
    let now = std::time::Instant::now();
    Instant::from_std(
        clock
            .and_then(ConnectionClock::first_read)
            .map_or(now, |t| t.min(now)),
    )
}

/// The request body, or the 400 response when it cannot be read (or is
/// larger than [`MAX_BODY_BYTES`]).
async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<SimBody>> {
    match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) => Err(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("could not read request body: {e}"),
        )),
    }
}

/// The fault of generation request number `ordinal` (from 1), listed in the
/// ground truth when there is one.
fn inject_fault(shared: &Shared, ordinal: u64, info: &PromptInfo) -> Option<FaultKind> {
    let cfg = &shared.config;
    let kind = faults::request_fault(&cfg.faults, ordinal, cfg.seed, &info.key)?;
    shared.truth().faults.push(FaultTruth {
        ordinal,
        conversation: info.first_user.clone(),
        turns: info.turns,
        kind,
    });
    tracing::debug!(request = ordinal, fault = %kind.name(), "injecting a fault");
    Some(kind)
}

/// A non-streaming response, whole, after the request's total delay
/// (never, for a stall); it is recorded before it is handed over.
async fn full_response(
    shared: &Arc<Shared>,
    reply: &Reply,
    received: Instant,
    running: RunningGuard,
) -> Response<SimBody> {
    let cfg = &shared.config;
    let completion = Completion::of(shared, reply);
    if reply.fault == Some(FaultKind::Stall) {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(reply.last_step_at(cfg)).await;
    let body = reply.full_body(cfg);
    if let Some(done) = completion {
        done.commit();
    }
    drop(running);
    let body = match body {
        FullBody::Complete(bytes) => SimBody::Full(Some(bytes)),
        FullBody::CutThenReset(bytes) => {
            let frames = VecDeque::from([(Duration::ZERO, bytes)]);
            let now = Instant::now();
            SimBody::Scheduled(Box::new(Scheduled::new(now, received, frames, Tail::Reset)))
        }
    };
    let mut resp = Response::new(body);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// A streamed response: its frames released on their schedule, counted
/// from the request's arrival as a real server's TTFT is.
fn stream_response(
    shared: &Arc<Shared>,
    reply: &Reply,
    include_usage: bool,
    received: Instant,
    clock: Option<ConnectionClock>,
    running: RunningGuard,
) -> Response<SimBody> {
    let (frames, end) = reply.stream(&shared.config, include_usage);
    let tail = match end {
        StreamEnd::Finish => Tail::End,
        StreamEnd::Reset => Tail::Reset,
        StreamEnd::Stall => Tail::Stall,
    };
    let body = SimBody::Scheduled(Box::new(Scheduled {
        frames_before_content: Some(reply.frames_before_content()),
        clock,
        on_complete: Completion::of(shared, reply),
        running: Some(running),
        ..Scheduled::new(received, received, frames, tail)
    }));
    let mut resp = Response::new(body);
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn bind(addr: SocketAddr, reuse_port: bool) -> Result<TcpListener, SimError> {
    let err = |source| SimError::Bind { addr, source };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(err)?;
    socket.set_reuseaddr(true).map_err(err)?;
    if reuse_port {
        socket.set_reuseport(true).map_err(err)?;
    }
    socket.bind(addr).map_err(err)?;
    socket.listen(LISTEN_BACKLOG).map_err(err)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    *shared
                        .peers
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(peer.ip())
                        .or_default() += 1;
                    // Small SSE frames must leave immediately for honest timing.
                    let _ = stream.set_nodelay(true);
                    let connection =
                        ConnectionNumber(shared.connections.fetch_add(1, Ordering::Relaxed) + 1);
                    let shared = Arc::clone(&shared);
                    conns.spawn(async move {
                        // Stamps when each request's first packet arrived
                        // (the kernel's receive time on Linux): delays are
                        // counted from there, as a real server's would be.
                        let stream = TimedStream::new(stream);
                        let clock = stream.clock().clone();
                        let service = service_fn(move |mut req: Request<Incoming>| {
                            let shared = Arc::clone(&shared);
                            req.extensions_mut().insert(clock.clone());
                            req.extensions_mut().insert(connection);
                            async move { Ok::<_, Infallible>(handle(shared, req).await) }
                        });
                        if let Err(e) = http1::Builder::new()
                            .serve_connection(stream, service)
                            .await
                        {
                            tracing::debug!(error = %e, "connection ended with an error");
                        }
                    });
                }
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    conns.shutdown().await;
}

/// A running simulated server.
///
/// Dropping it without calling [`SimServer::shutdown`] also stops the accept
/// loop and its connections, but without waiting for them.
#[derive(Debug)]
pub struct SimServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl SimServer {
    /// Validates `config`, binds `addr` (port 0 picks a free port) and spawns the
    /// accept loop on the current tokio runtime. Returns once listening.
    pub async fn start(config: SimConfig, addr: SocketAddr) -> Result<SimServer, SimError> {
        Self::start_bound(config, addr, false).await
    }

    /// [`SimServer::start`] with `SO_REUSEPORT`: several simulator
    /// processes started so on one port share it, the kernel spreading new
    /// connections over them, so that together they hold more connections
    /// than one process's open-file limit allows. Each process keeps its
    /// own ground truth and `/metrics`.
    pub async fn start_shared_port(
        config: SimConfig,
        addr: SocketAddr,
    ) -> Result<SimServer, SimError> {
        Self::start_bound(config, addr, true).await
    }

    async fn start_bound(
        config: SimConfig,
        addr: SocketAddr,
        reuse_port: bool,
    ) -> Result<SimServer, SimError> {
        config.validate()?;
        let listener = bind(addr, reuse_port)?;
        let local = listener
            .local_addr()
            .map_err(|source| SimError::Bind { addr, source })?;
        let shared = Arc::new(Shared {
            truth: Mutex::new(GroundTruth::new(config.max_spec_tokens())),
            config,
            running: AtomicU64::new(0),
            next_id: AtomicU64::new(0),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            metrics_baseline: Mutex::new(MetricsBaseline::default()),
            iteration_reads: Mutex::new((0, GroundTruth::default())),
            content_sends: Mutex::new(Vec::new()),
            peers: Mutex::new(BTreeMap::new()),
            connections: AtomicU64::new(0),
            vocab: Mutex::default(),
        });
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(accept_loop(listener, Arc::clone(&shared), rx));
        Ok(SimServer {
            addr: local,
            shared,
            stop: Some(tx),
            task,
        })
    }

    /// The bound address (with the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL such as `http://127.0.0.1:PORT` (an unspecified bind address
    /// is reported as loopback).
    pub fn url(&self) -> String {
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        format!("http://{}", SocketAddr::new(ip, self.addr.port()))
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &SimConfig {
        &self.shared.config
    }

    /// A snapshot of the completed-request accounting.
    pub fn ground_truth(&self) -> GroundTruth {
        self.shared.truth_snapshot()
    }

    /// How many connections the server accepted from each client (source)
    /// address, e.g. to check that a client spread its connections over
    /// several source addresses.
    pub fn connections_by_peer(&self) -> BTreeMap<IpAddr, u64> {
        self.shared
            .peers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Stops accepting, aborts open connections (including in-flight
    /// streams, which are then not counted) and waits for the loop to end.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Serves `config` on `addr` until `shutdown` resolves (e.g. Ctrl-C), then
/// shuts down and returns the final ground truth. Logs the URL via `tracing`.
pub async fn run_until(
    config: SimConfig,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()>,
) -> Result<GroundTruth, SimError> {
    let server = SimServer::start(config, addr).await?;
    tracing::info!(url = %server.url(), "speedbench-sim listening");
    shutdown.await;
    let truth = server.ground_truth();
    server.shutdown().await;
    Ok(truth)
}
