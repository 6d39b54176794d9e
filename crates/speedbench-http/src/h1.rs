//! A lean HTTP/1.1 client for a benchmark's own requests to a plain
//! `http://` server: one `POST` at a time per connection, the response read
//! straight from the socket by the task that sent the request.
//!
//! Why not hyper for these: a hyper client connection costs about 21 KiB of
//! user memory whatever its request (heaptrack at 1,024 in flight: its
//! dispatch channel's first block 9.0 KiB, a write buffer that starts at
//! 8 KiB, the read buffer 4 KiB), and a load generator holds one per
//! in-flight request. Here a connection in flight is its socket, its
//! [`ConnectionClock`] and a read buffer that starts at [`READ_BUF`] bytes
//! and grows only as far as the server's bursts do (kept with the
//! connection for its next response, up to 16 KiB); the request is written
//! from one buffer that is freed once sent. TLS, redirects and the control-plane
//! calls stay on hyper ([`crate::new_client`]).
//!
//! What it speaks: a response head parsed by `httparse` (1xx heads skipped),
//! a body framed by `Transfer-Encoding: chunked` (extensions and trailers
//! skipped), `Content-Length`, or the connection's end; keep-alive unless
//! either side said `Connection: close` (HTTP/1.0: only with `keep-alive`).
//! A request is written once: a pooled connection is checked before any
//! byte goes out (one that the server closed while idle, or that holds
//! bytes nobody asked for, is dropped and the next one or a new one taken),
//! and a connection that ends after the request was written is the
//! request's failure, never a reason to send it again: the server may have
//! read it, and a POST to an inference server is not idempotent. Every
//! connection is a [`TimedStream`], so the response's clock stamps when
//! bytes reached the socket.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::Uri;
use hyper::header::{HeaderName, HeaderValue};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{ClientOptions, ConnectionClock, HttpError, TcpConnector, TimedStream};

/// The read buffer a response starts with. It doubles when a response head
/// or a chunk-size line does not fit, and when a read fills it whole (a
/// large body), up to `MAX_READ_BUF`.
pub const READ_BUF: usize = 512;

/// The most a read buffer grows to for a large body.
const MAX_READ_BUF: usize = 16 * 1024;

/// The largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;

/// The largest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

/// A pooled connection found closed sooner than this after its response
/// was closed by a server that does not keep connections, not by an idle
/// timeout (servers' shortest are seconds).
const QUICK_CLOSE: Duration = Duration::from_secs(1);

/// How long an idle connection is kept for reuse.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Response header slots `httparse` is given.
const MAX_HEADERS: usize = 100;

/// A pooled keep-alive HTTP/1.1 client for `POST`s to one `http://` URL.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use speedbench_http::{ClientOptions, ConnectFailure, H1Client};
///
/// let url: hyper::Uri = "http://127.0.0.1:9/v1/chat/completions".parse().unwrap();
/// let client = H1Client::new(&url, &[], &ClientOptions::default()).unwrap();
/// // Nothing listens on port 9 of loopback.
/// let err = client.post(b"{}").await.unwrap_err();
/// assert_eq!(err.connect_failure(), Some(ConnectFailure::Refused));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct H1Client {
    pool: Arc<Pool>,
}

#[derive(Debug)]
struct Pool {
    connector: TcpConnector,
    /// The host, as the URL writes it (IPv6 in brackets).
    host: String,
    port: u16,
    /// The URL as errors show it.
    url: String,
    /// The request line, `Host` and the caller's headers, each line ended.
    head: Vec<u8>,
    /// Idle connections, the most recently used last: taken from the back,
    /// expired ones dropped from the front.
    idle: Mutex<VecDeque<(Conn, Instant)>>,
    max_idle: usize,
    /// Set once the server is seen closing a connection right after its
    /// response (llama-server does after every streamed answer, while its
    /// headers say keep-alive): from then on no connection is kept, so no
    /// request is written to one the server is closing.
    closes_after_response: AtomicBool,
    /// [`ClientOptions::trace_detail`].
    detail: bool,
}

#[derive(Debug)]
struct Conn {
    io: TokioIo<TimedStream>,
    clock: ConnectionClock,
    /// The read buffer of the connection's last response, kept at the size
    /// it grew to: a server that sends its whole response at once is then
    /// read in one call, not in 512, 1,024, 2,048 ... byte reads every
    /// time. A server that streams slowly never grows it past `READ_BUF`.
    spare: Vec<u8>,
    /// Local and peer addresses, with [`ClientOptions::trace_detail`].
    addrs: Option<(SocketAddr, SocketAddr)>,
}

/// How one write of a request on one connection failed.
enum Failure {
    /// The server reset the connection before any byte of an answer: its
    /// socket was closed with the request unread. `written`: when the
    /// request's first bytes reached this connection's socket.
    Unread {
        error: HttpError,
        written: Option<Instant>,
    },
    /// Anything else: the server may have read the request.
    Other(HttpError),
}

impl Failure {
    fn into_error(self) -> HttpError {
        match self {
            Failure::Unread { error, .. } | Failure::Other(error) => error,
        }
    }
}

/// How a request went out ([`H1Client::post_logged`]): how many times it
/// was written again, and when it was first written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sends {
    /// Writes after the first: 0 for a request sent once. A request is
    /// written again only where the server never read it (a kept-alive
    /// connection it reset before any byte of an answer).
    pub resends: u32,
    /// When the first write's first bytes reached the socket, set when the
    /// request was written again (the response's clock then has the last
    /// write's time).
    pub first_written: Option<Instant>,
}

/// How the connection that carried a request was had, and when and how its
/// bytes went and came: every HTTP phase of the request (AIPerf's
/// `http_req_*`, k6's and HAR's): blocked ([`WireTrace::blocked`]), DNS,
/// connecting, sending (`written` to `sent_at`), waiting (`sent_at` to
/// `body_started`, or to `head_received` for an empty body) and receiving
/// (from there to `last_byte`). Bytes and chunks are the bodies', as AIPerf
/// counts them.
///
/// The stamps are the connection's [`ConnectionClock`]'s, taken before the
/// connection went back to the pool, where the next request's would
/// replace them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireTrace {
    /// When the request was handed to [`H1Client::post_logged`].
    pub asked: Option<Instant>,
    /// When the connection that carried the answered write was in hand: an
    /// idle one checked open, or a new one opened.
    pub connection_ready: Option<Instant>,
    /// When a new connection began to be made (before any DNS lookup);
    /// `None` for a reused one.
    pub connect_began: Option<Instant>,
    /// The host name's lookup, start and end; `None` for an IP literal and
    /// a reused connection.
    pub dns: Option<(Instant, Instant)>,
    /// The TCP connect, start (after DNS) and end; `None` when reused.
    pub tcp_connect: Option<(Instant, Instant)>,
    /// Whether the request went out on a kept-alive connection.
    pub reused: bool,
    /// The connection's local and peer addresses, with
    /// [`ClientOptions::trace_detail`].
    pub addrs: Option<(SocketAddr, SocketAddr)>,
    /// When the answered write's first bytes reached the socket
    /// ([`ConnectionClock::request_written`]).
    pub written: Option<Instant>,
    /// When the request's last byte had been handed to the kernel.
    pub sent_at: Option<Instant>,
    /// When the response's first bytes, its head's, arrived
    /// ([`ConnectionClock::first_read`]).
    pub head_received: Option<Instant>,
    /// When the read that brought the body's first byte arrived (with the
    /// head or after it); `None` before any body byte.
    pub body_started: Option<Instant>,
    /// When the latest bytes of the response arrived
    /// ([`ConnectionClock::last_read`]).
    pub last_byte: Option<Instant>,
    /// Bytes of the request's body written.
    pub body_bytes_sent: u64,
    /// Writes that carried the request (head and body together).
    pub writes: u32,
    /// Bytes of the response's body read so far, its chunked framing
    /// removed.
    pub body_bytes_received: u64,
    /// Reads that brought body bytes.
    pub body_reads: u32,
}

impl WireTrace {
    /// Takes the clock's stamps of this request's write and response.
    fn stamp(&mut self, clock: &ConnectionClock) {
        self.written = clock.request_written();
        self.head_received = clock.first_read();
        self.last_byte = clock.last_read();
    }

    /// AIPerf's `http_req_blocked`: from the request's turn to go until its
    /// connection was in hand or began to connect. The pool has no limit
    /// to queue behind: this is its own work, and for a request written
    /// again it includes the write the server reset unread.
    pub fn blocked(&self) -> Duration {
        let end = self.connect_began.or(self.connection_ready);
        span(self.asked, end)
    }

    /// `http_req_dns_lookup`: zero for an IP literal and a reused
    /// connection.
    pub fn dns_lookup(&self) -> Duration {
        self.dns
            .map_or(Duration::ZERO, |(a, b)| b.saturating_duration_since(a))
    }

    /// The moments of the send and the receive, in order: the answered
    /// write's start, its last byte sent, the body's first byte (the
    /// head's, for an empty body) and the response's last byte; `None`
    /// before a response head. A kernel receive stamp can fall a little
    /// before the moment the write call returned: the send's end is then
    /// taken as the first byte's arrival.
    pub fn exchange_moments(&self) -> Option<[Instant; 4]> {
        let written = self.written?;
        let first = self.body_started.or(self.head_received)?.max(written);
        let last = self.last_byte?.max(first);
        let sent = self.sent_at.unwrap_or(written).clamp(written, first);
        Some([written, sent, first, last])
    }

    /// `http_req_connecting`: the TCP connect after DNS; zero when reused.
    pub fn connecting(&self) -> Duration {
        (self.tcp_connect).map_or(Duration::ZERO, |(a, b)| b.saturating_duration_since(a))
    }
}

/// From `from` to `to`, zero where either is unknown.
fn span(from: Option<Instant>, to: Option<Instant>) -> Duration {
    match (from, to) {
        (Some(a), Some(b)) => b.saturating_duration_since(a),
        _ => Duration::ZERO,
    }
}

/// What a response keeps beyond its [`WireTrace`] with
/// [`ClientOptions::trace_detail`] (AIPerf's `--export-http-trace`): its
/// head's status line reason and headers, and each body read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseDetail {
    /// The status line's reason phrase (`OK`).
    pub reason: String,
    /// The head's headers, in order, values as sent (lossy UTF-8).
    pub headers: Vec<(String, String)>,
    /// Each read that brought body bytes: when it arrived and how many
    /// body bytes (framing removed) it brought.
    pub body_reads: Vec<(Instant, u64)>,
}

impl H1Client {
    /// A client for `POST`s to `url` (`http://` only) with `headers` on
    /// every request besides `Host` and `Content-Length`, keeping up to
    /// `options.max_idle_per_host` idle connections and taking the source
    /// addresses of `options.local_addrs` in turn.
    pub fn new(
        url: &Uri,
        headers: &[(HeaderName, HeaderValue)],
        options: &ClientOptions,
    ) -> Result<H1Client, HttpError> {
        let invalid = |message: &str| HttpError::InvalidUrl {
            url: url.to_string(),
            message: message.to_string(),
        };
        if url.scheme_str() != Some("http") {
            return Err(invalid("the HTTP/1.1 client speaks plain http:// only"));
        }
        let authority = url
            .authority()
            .ok_or_else(|| invalid("the URL has no host"))?;
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        let mut head = format!("POST {path} HTTP/1.1\r\nhost: {authority}\r\n").into_bytes();
        for (name, value) in headers {
            head.extend_from_slice(name.as_str().as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value.as_bytes());
            head.extend_from_slice(b"\r\n");
        }
        Ok(H1Client {
            pool: Arc::new(Pool {
                connector: TcpConnector::new(&options.local_addrs)?,
                host: authority.host().to_string(),
                port: authority.port_u16().unwrap_or(80),
                url: url.to_string(),
                head,
                idle: Mutex::new(VecDeque::new()),
                max_idle: options.max_idle_per_host,
                closes_after_response: AtomicBool::new(false),
                detail: options.trace_detail,
            }),
        })
    }

    /// Sends `body` and reads the response head; the body is read with
    /// [`H1Response::chunk`]. The request is written once, except where the
    /// server provably never read it: an idle connection is used only if it
    /// is still open and quiet before the first byte goes out, and a
    /// connection that fails after the request was written fails the
    /// request (the server may have read it), unless the server reset a
    /// kept-alive connection before any byte of an answer (see
    /// [`H1Client::post_logged`]).
    pub async fn post(&self, body: &[u8]) -> Result<H1Response, HttpError> {
        self.post_logged(body, &mut Sends::default()).await
    }

    /// [`H1Client::post`], saying in `sends` how the request went out.
    ///
    /// A server that closes a kept-alive connection a moment after
    /// answering, without reading the request the client has just written
    /// to it, makes its kernel answer with a reset: a socket closed with
    /// unread bytes sends RST, one whose bytes were read sends a plain end
    /// of stream. Such a request never reached the server, so it is written
    /// once more on a new connection, and `sends` records it
    /// ([`Sends::resends`], and [`Sends::first_written`] so that the
    /// request is timed from its first write). Once the server is seen
    /// doing this soon after an answer, no connection is kept for reuse.
    /// An end of stream, or anything after the first byte of an answer,
    /// still fails the request: the server may have read it.
    pub async fn post_logged(
        &self,
        body: &[u8],
        sends: &mut Sends,
    ) -> Result<H1Response, HttpError> {
        let asked = Instant::now();
        while let Some((mut conn, since)) = self.pool.take_idle() {
            if conn.still_open().await {
                let quick = since.elapsed() < QUICK_CLOSE;
                let trace = WireTrace {
                    asked: Some(asked),
                    connection_ready: Some(Instant::now()),
                    reused: true,
                    addrs: conn.addrs,
                    ..WireTrace::default()
                };
                return match self.pool.attempt(conn, body, trace).await {
                    Ok(response) => Ok(response),
                    Err(Failure::Other(e)) => Err(e),
                    Err(Failure::Unread { error, written }) => {
                        let first = (asked, written);
                        self.resend_unread(body, sends, error, first, quick).await
                    }
                };
            }
            if since.elapsed() < QUICK_CLOSE {
                // Not an idle timeout: the server closes after answering.
                self.pool
                    .closes_after_response
                    .store(true, Ordering::Relaxed);
            }
            tracing::debug!("an idle connection was closed by the server; not reused");
        }
        let (conn, trace) = self.pool.connect(asked).await?;
        self.pool
            .attempt(conn, body, trace)
            .await
            .map_err(Failure::into_error)
    }

    /// Writes again, on a new connection, a request that a kept-alive
    /// connection's reset shows the server never read; `(asked, written)`:
    /// when the request was handed to the client, and when first written.
    async fn resend_unread(
        &self,
        body: &[u8],
        sends: &mut Sends,
        reset: HttpError,
        (asked, written): (Instant, Option<Instant>),
        quick: bool,
    ) -> Result<H1Response, HttpError> {
        if quick {
            // Written right after the connection's last answer and reset
            // unread: the server closes kept-alive connections after
            // answering, whatever its headers said.
            self.pool
                .closes_after_response
                .store(true, Ordering::Relaxed);
        }
        tracing::debug!(
            "{reset}: the server reset a kept-alive connection without reading the request; written again on a new connection"
        );
        sends.first_written = sends.first_written.or(written);
        let (conn, trace) = self.pool.connect(asked).await?;
        sends.resends += 1;
        self.pool
            .attempt(conn, body, trace)
            .await
            .map_err(|f| f.into_error().noted(" (written a second time: the server had reset a kept-alive connection without reading it)"))
    }

    /// Idle connections held for reuse now.
    pub fn idle_connections(&self) -> usize {
        self.pool.idle.lock().map_or(0, |idle| idle.len())
    }
}

impl Conn {
    /// True when the connection is open with nothing to read: a read that
    /// is not ready at once. End of stream (the server closed it), a reset
    /// or unasked-for bytes all mean it must not carry a request.
    async fn still_open(&mut self) -> bool {
        let mut probe = [0u8; 1];
        let mut buf = tokio::io::ReadBuf::new(&mut probe);
        // One poll of the read, no timer: `timeout(Duration::ZERO, read)`
        // armed a timer that fires on the driver's next 1 ms tick, which
        // held every reused connection back a millisecond (c=1 fell from
        // ~15,000 to ~800 requests/s).
        std::future::poll_fn(|cx| {
            let read =
                tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut self.io), cx, &mut buf);
            std::task::Poll::Ready(read.is_pending())
        })
        .await
    }
}

impl Pool {
    fn take_idle(&self) -> Option<(Conn, Instant)> {
        let mut idle = self.idle.lock().ok()?;
        let now = Instant::now();
        while idle
            .front()
            .is_some_and(|(_, since)| now.duration_since(*since) >= IDLE_TIMEOUT)
        {
            idle.pop_front();
        }
        idle.pop_back()
    }

    fn give_back(&self, conn: Conn) {
        if self.closes_after_response.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < self.max_idle
        {
            idle.push_back((conn, Instant::now()));
        }
    }

    /// A new connection, and how long it took to have, for a request
    /// handed to the client at `asked`.
    async fn connect(&self, asked: Instant) -> Result<(Conn, WireTrace), HttpError> {
        let began = Instant::now();
        let made = self
            .connector
            .connect_direct(&self.host, self.port, self.detail)
            .await
            .map_err(|e| HttpError::Connect {
                url: self.url.clone(),
                message: crate::describe(&e),
                source: Box::new(e),
            })?;
        let trace = WireTrace {
            asked: Some(asked),
            connect_began: Some(began),
            connection_ready: Some(made.tcp_connect.1),
            dns: made.dns,
            tcp_connect: Some(made.tcp_connect),
            addrs: made.addrs,
            ..WireTrace::default()
        };
        let clock = made.stream.clock().clone();
        let conn = Conn {
            io: TokioIo::new(made.stream),
            clock,
            spare: Vec::new(),
            addrs: made.addrs,
        };
        Ok((conn, trace))
    }

    fn io_error(&self, during: &str, e: std::io::Error) -> HttpError {
        HttpError::Connect {
            url: self.url.clone(),
            message: format!("{during}: {e}"),
            source: Box::new(e),
        }
    }

    fn protocol(&self, message: impl Into<String>) -> HttpError {
        HttpError::Protocol {
            url: self.url.clone(),
            message: message.into(),
        }
    }

    /// Writes the request on `conn` and reads the response head; `trace`
    /// says how the connection was had, and the response's carries on.
    async fn attempt(
        self: &Arc<Self>,
        mut conn: Conn,
        body: &[u8],
        mut trace: WireTrace,
    ) -> Result<H1Response, Failure> {
        match write_request(&mut conn.io, &self.head, body).await {
            Ok(writes) => {
                trace.sent_at = Some(Instant::now());
                (trace.body_bytes_sent, trace.writes) = (body.len() as u64, writes);
            }
            Err(e) => return Err(self.unanswered("writing the request", e, &conn.clock)),
        }
        let mut buf = ReadBuffer::reusing(std::mem::take(&mut conn.spare));
        let head = self.read_head(&mut conn, &mut buf).await?;
        let framing = if head.status == 101
            || head.status == 204
            || head.status == 304
            || (100..200).contains(&head.status)
        {
            Framing::Length(0)
        } else if head.chunked {
            Framing::Chunked(Chunk::Size)
        } else if let Some(n) = head.content_length {
            Framing::Length(n)
        } else {
            Framing::UntilClose
        };
        // A connection that switched protocols is no longer HTTP/1.1.
        let keep_alive =
            head.keep_alive && head.status != 101 && !matches!(framing, Framing::UntilClose);
        Ok(H1Response {
            status: head.status,
            content_type: head.content_type,
            clock: conn.clock.clone(),
            conn: Some(conn),
            buf,
            framing,
            keep_alive,
            trace,
            body_reads_seen: 0,
            detail: head.detail,
            pool: self.clone(),
        })
    }

    /// Reads the final response head (interim 1xx answers skipped) into
    /// `buf`.
    async fn read_head(&self, conn: &mut Conn, buf: &mut ReadBuffer) -> Result<Head, Failure> {
        loop {
            // Nothing arrived yet: nothing to parse.
            let parsed = match buf.pending() {
                [] => Ok(None),
                pending => parse_head(pending, self.detail),
            };
            match parsed {
                Ok(Some((head, len))) => {
                    buf.consume(len);
                    // An interim answer (100 Continue, 103 Early Hints):
                    // the real one follows on the same connection.
                    if (100..200).contains(&head.status) && head.status != 101 {
                        continue;
                    }
                    return Ok(head);
                }
                Ok(None) => {}
                Err(message) => return Err(Failure::Other(self.protocol(message))),
            }
            let received = buf.received;
            match buf.fill(&mut conn.io, MAX_HEAD).await {
                Ok(0) if received == 0 => {
                    // An end of stream, unless a reset came with it: a
                    // server that had closed the socket when the request
                    // arrived refused it (its end of stream came first).
                    let e = conn.io.inner().take_error().ok().flatten();
                    let e = e.unwrap_or_else(|| {
                        std::io::Error::new(
                            std::io::ErrorKind::UnexpectedEof,
                            "the server closed the connection before any response byte",
                        )
                    });
                    return Err(self.unanswered("reading the response", e, &conn.clock));
                }
                Ok(0) => {
                    let message = "the connection closed inside the response head";
                    return Err(Failure::Other(self.protocol(message)));
                }
                Ok(_) => {}
                Err(Fill::Io(e)) if received == 0 => {
                    return Err(self.unanswered("reading the response", e, &conn.clock));
                }
                Err(Fill::Io(e)) => {
                    return Err(Failure::Other(self.io_error("reading the response", e)));
                }
                Err(Fill::TooLong) => {
                    return Err(Failure::Other(self.protocol(format!(
                        "the response head is longer than {MAX_HEAD} bytes"
                    ))));
                }
            }
        }
    }

    /// A request that got no byte of an answer. Once a byte may have left,
    /// the request is never sent again, but for a reset: the server's
    /// kernel resets a socket closed with the request still unread.
    fn unanswered(&self, what: &str, e: std::io::Error, clock: &ConnectionClock) -> Failure {
        let unread = matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        );
        if unread {
            let why =
                format!("{what} (the server reset the connection without reading the request)");
            return Failure::Unread {
                error: self.io_error(&why, e),
                written: clock.request_written(),
            };
        }
        Failure::Other(self.io_error(
            &format!("{what} (the request was written and is not sent again: the server may have read it)"),
            e,
        ))
    }
}

/// Writes `head`, the `Content-Length` line and `body` with vectored writes,
/// copying none of them into a buffer of the request's own; the writes
/// that took.
async fn write_request(
    io: &mut TokioIo<TimedStream>,
    head: &[u8],
    body: &[u8],
) -> std::io::Result<u32> {
    use std::io::{IoSlice, Write};
    let mut length = [0u8; 48];
    let length_len = {
        let mut cursor = std::io::Cursor::new(&mut length[..]);
        write!(cursor, "content-length: {}\r\n\r\n", body.len())?;
        cursor.position() as usize
    };
    let parts: [&[u8]; 3] = [head, &length[..length_len], body];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let (mut written, mut writes) = (0, 0u32);
    while written < total {
        let mut skip = written;
        let mut slices = [IoSlice::new(&[]); 3];
        let mut k = 0;
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            slices[k] = IoSlice::new(&part[skip..]);
            skip = 0;
            k += 1;
        }
        let n = io.write_vectored(&slices[..k]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        written += n;
        writes += 1;
    }
    io.flush().await?;
    Ok(writes)
}

/// The response head at the start of `bytes` and its length, if all of it
/// arrived; with `detail`, its reason and headers kept. Not async on
/// purpose: the header slots live on this call's stack, not in every
/// in-flight request's future; left uninitialised, as httparse allows
/// (writing 100 empty slots first was ~800 instructions a call).
fn parse_head(bytes: &[u8], detail: bool) -> Result<Option<(Head, usize)>, String> {
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Response::new(&mut []);
    let config = httparse::ParserConfig::default();
    match config.parse_response_with_uninit_headers(&mut parsed, bytes, &mut headers) {
        Ok(httparse::Status::Complete(len)) => {
            let mut head = Head::of(&parsed)?;
            if detail {
                head.detail = Some(Box::new(ResponseDetail {
                    reason: parsed.reason.unwrap_or_default().to_string(),
                    headers: (parsed.headers.iter())
                        .map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into()))
                        .collect(),
                    body_reads: Vec::new(),
                }));
            }
            Ok(Some((head, len)))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(e) => Err(format!("malformed response head: {e}")),
    }
}

/// What the response head says.
#[derive(Debug)]
struct Head {
    status: u16,
    content_type: Option<String>,
    content_length: Option<u64>,
    chunked: bool,
    keep_alive: bool,
    /// The reason and headers, with [`ClientOptions::trace_detail`].
    detail: Option<Box<ResponseDetail>>,
}

impl Head {
    fn of(parsed: &httparse::Response<'_, '_>) -> Result<Head, String> {
        let status = parsed.code.ok_or("no status code")?;
        // HTTP/1.1 keeps the connection unless told; HTTP/1.0 only if told.
        let mut keep_alive = parsed.version == Some(1);
        let mut head = Head {
            status,
            content_type: None,
            content_length: None,
            chunked: false,
            keep_alive: false,
            detail: None,
        };
        let mut transfer_encoding = false;
        for h in parsed.headers.iter() {
            let value = String::from_utf8_lossy(h.value);
            let value = value.trim();
            if h.name.eq_ignore_ascii_case("content-type") {
                head.content_type = Some(value.to_string());
            } else if h.name.eq_ignore_ascii_case("content-length") {
                let n: u64 = value
                    .parse()
                    .map_err(|_| format!("Content-Length {value:?} is not a number"))?;
                if head.content_length.is_some_and(|m| m != n) {
                    return Err("two different Content-Length headers".into());
                }
                head.content_length = Some(n);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_encoding = true;
                // Chunked counts only as the last coding (RFC 9112 6.3).
                head.chunked = value
                    .rsplit(',')
                    .next()
                    .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value.split(',').map(str::trim) {
                    if token.eq_ignore_ascii_case("close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case("keep-alive") && parsed.version == Some(0)
                    {
                        keep_alive = true;
                    }
                }
            }
        }
        if transfer_encoding {
            // Transfer-Encoding overrides Content-Length; a coding other
            // than chunked last runs until the connection closes.
            head.content_length = None;
            if !head.chunked {
                keep_alive = false;
            }
        }
        head.keep_alive = keep_alive;
        Ok(head)
    }
}

/// How the body ends.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    /// Chunked, at this point of a chunk.
    Chunked(Chunk),
    /// At the connection's end.
    UntilClose,
    /// Read whole.
    Done,
}

#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// Reading a chunk-size line.
    Size,
    /// This many bytes of chunk data are left.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines, up to the empty line.
    Trailer,
}

/// A response whose head was read; its body comes in [`H1Response::chunk`].
#[derive(Debug)]
pub struct H1Response {
    /// The status code.
    pub status: u16,
    /// `Content-Type`, as sent.
    pub content_type: Option<String>,
    /// The connection's clock: when the request was written and when the
    /// latest bytes reached the socket.
    pub clock: ConnectionClock,
    conn: Option<Conn>,
    buf: ReadBuffer,
    framing: Framing,
    keep_alive: bool,
    /// How the connection was had, the request written and the body read.
    trace: WireTrace,
    /// The read count ([`ReadBuffer::reads`]) when body bytes were last
    /// taken, so each read that brought some counts once.
    body_reads_seen: u32,
    /// The head's reason and headers and each body read, with
    /// [`ClientOptions::trace_detail`].
    detail: Option<Box<ResponseDetail>>,
    pool: Arc<Pool>,
}

/// One step of the body's framing over what is buffered.
enum Step {
    /// These buffered bytes are body data.
    Data(std::ops::Range<usize>),
    /// More bytes are needed.
    More,
    /// The body is complete.
    End,
}

impl H1Response {
    /// How the request's connection was had and what crossed it so far:
    /// call it once the body was read (or failed) for the whole response.
    pub fn trace(&self) -> WireTrace {
        let mut trace = self.trace;
        if !matches!(self.framing, Framing::Done) {
            // Not complete, so not given back to the pool: no other request
            // stamps the clock. A complete one was stamped as it ended.
            trace.stamp(&self.clock);
        }
        trace
    }

    /// The next piece of the body as it arrived (chunked framing removed),
    /// `None` once the body is complete; the connection then goes back to
    /// the pool if both sides keep it. Dropping a response before its end
    /// closes the connection.
    pub async fn chunk(&mut self) -> Result<Option<&[u8]>, HttpError> {
        let range = loop {
            match self.step()? {
                Step::Data(range) => break range,
                Step::End => {
                    self.framing = Framing::Done;
                    self.release();
                    return Ok(None);
                }
                Step::More => {}
            }
            let Some(conn) = self.conn.as_mut() else {
                return Ok(None);
            };
            match self.buf.fill(&mut conn.io, MAX_LINE).await {
                Ok(0) if matches!(self.framing, Framing::UntilClose) => {
                    self.framing = Framing::Done;
                    self.trace.stamp(&self.clock);
                    self.conn = None;
                    return Ok(None);
                }
                Ok(0) => {
                    self.conn = None;
                    let e = std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the connection closed before the body was complete",
                    );
                    return Err(self.pool.io_error("reading the response body", e));
                }
                Ok(_) => {}
                Err(Fill::Io(e)) => {
                    self.conn = None;
                    return Err(self.pool.io_error("reading the response body", e));
                }
                Err(Fill::TooLong) => {
                    self.conn = None;
                    return Err(self.pool.protocol(format!(
                        "a chunk-size or trailer line is longer than {MAX_LINE} bytes"
                    )));
                }
            }
        };
        self.count_body(range.len());
        Ok(Some(&self.buf.data[range]))
    }

    /// Counts `n` body bytes just taken from the buffer: they came with
    /// the latest read.
    fn count_body(&mut self, n: usize) {
        let trace = &mut self.trace;
        trace.body_bytes_received += n as u64;
        let new_read = self.buf.reads != self.body_reads_seen;
        if new_read {
            trace.body_reads += 1;
            self.body_reads_seen = self.buf.reads;
        }
        if trace.body_started.is_none() {
            trace.body_started = self.clock.last_read();
        }
        if let Some(detail) = &mut self.detail {
            match detail.body_reads.last_mut() {
                Some((_, bytes)) if !new_read => *bytes += n as u64,
                _ => {
                    let at = self.clock.last_read().unwrap_or_else(Instant::now);
                    detail.body_reads.push((at, n as u64));
                }
            }
        }
    }

    /// The head's reason and headers and each body read so far, with
    /// [`ClientOptions::trace_detail`] (taken: a second call gives `None`).
    pub fn take_detail(&mut self) -> Option<ResponseDetail> {
        self.detail.take().map(|d| *d)
    }

    /// Advances the framing over the buffered bytes.
    fn step(&mut self) -> Result<Step, HttpError> {
        loop {
            let buf = &mut self.buf;
            let (step, next) = match self.framing {
                Framing::Done | Framing::Length(0) => (Step::End, Framing::Done),
                Framing::Length(left) => {
                    let n = take(left, buf);
                    (data_or_more(buf, n), Framing::Length(left - n as u64))
                }
                Framing::Chunked(Chunk::Data(left)) => {
                    let n = take(left, buf);
                    let next = if left == n as u64 {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - n as u64)
                    };
                    (data_or_more(buf, n), Framing::Chunked(next))
                }
                Framing::UntilClose => {
                    let n = buf.pending().len();
                    (data_or_more(buf, n), Framing::UntilClose)
                }
                Framing::Chunked(mut chunk) => {
                    let framed = chunk_step(&mut chunk, buf);
                    self.framing = Framing::Chunked(chunk);
                    match framed {
                        Ok(ChunkStep::More) => return Ok(Step::More),
                        Ok(ChunkStep::End) => return Ok(Step::End),
                        Ok(ChunkStep::InData) => continue,
                        Err(message) => return Err(self.pool.protocol(message)),
                    }
                }
            };
            self.framing = next;
            return Ok(step);
        }
    }

    /// Returns the connection to the pool when the body is complete, both
    /// sides keep it, and nothing past the response was received.
    /// The response's stamps are taken first: once the connection is back
    /// in the pool, the next request's stamp its clock.
    fn release(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        self.trace.stamp(&self.clock);
        if self.keep_alive && self.buf.pending().is_empty() {
            conn.spare = self.buf.take_data();
            self.pool.give_back(conn);
        }
    }
}

/// Up to `left` pending bytes, as a count.
fn take(left: u64, buf: &ReadBuffer) -> usize {
    left.min(buf.pending().len() as u64) as usize
}

/// The next `n` pending bytes as data (consumed), or a call for more.
fn data_or_more(buf: &mut ReadBuffer, n: usize) -> Step {
    if n == 0 {
        return Step::More;
    }
    let start = buf.start;
    buf.consume(n);
    Step::Data(start..start + n)
}

/// Where chunked framing stands after the lines it could read.
#[derive(Debug, PartialEq, Eq)]
enum ChunkStep {
    /// A line is incomplete.
    More,
    /// Chunk data comes next (the caller takes it).
    InData,
    /// The last chunk and the trailers were read.
    End,
}

/// Reads the chunk-size, data-end and trailer lines that are buffered.
fn chunk_step(chunk: &mut Chunk, buf: &mut ReadBuffer) -> Result<ChunkStep, String> {
    loop {
        match *chunk {
            Chunk::Data(_) => return Ok(ChunkStep::InData),
            Chunk::Size => {
                let Some(line) = buf.line() else {
                    return Ok(ChunkStep::More);
                };
                let size = chunk_size(&buf.data[line.clone()])?;
                buf.consume_line(line);
                *chunk = if size == 0 {
                    Chunk::Trailer
                } else {
                    Chunk::Data(size)
                };
            }
            Chunk::DataEnd => {
                let Some(line) = buf.line() else {
                    return Ok(ChunkStep::More);
                };
                if !line.is_empty() {
                    return Err("chunk data is not followed by CRLF".into());
                }
                buf.consume_line(line);
                *chunk = Chunk::Size;
            }
            Chunk::Trailer => {
                let Some(line) = buf.line() else {
                    return Ok(ChunkStep::More);
                };
                let last = line.is_empty();
                buf.consume_line(line);
                if last {
                    return Ok(ChunkStep::End);
                }
            }
        }
    }
}

/// The size of a chunk-size line (extensions after `;` and blanks
/// ignored), read from its bytes: one per chunk of every stream, so
/// nothing is allocated unless it is wrong.
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = digits.trim_ascii();
    let bad = || {
        format!(
            "chunk size {:?} is not a hex number",
            String::from_utf8_lossy(line)
        )
    };
    if digits.is_empty() {
        return Err(bad());
    }
    digits.iter().try_fold(0u64, |size, &b| {
        let digit = (b as char).to_digit(16).ok_or_else(bad)?;
        size.checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(digit)))
            .ok_or_else(bad)
    })
}

/// Why a buffer could not be filled.
enum Fill {
    Io(std::io::Error),
    /// What is pending already fills `limit` bytes.
    TooLong,
}

/// A response's read buffer: `data[start..end]` is received and not yet
/// consumed.
#[derive(Debug)]
struct ReadBuffer {
    data: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes received in all.
    received: u64,
    /// Reads that returned bytes.
    reads: u32,
    /// Where the pending line was searched up to (so a line arriving in
    /// pieces is scanned once).
    scanned: usize,
    /// The last read filled the free space whole: more was probably waiting.
    filled_whole: bool,
}

impl ReadBuffer {
    /// A buffer over `data` (a previous response's, its contents stale),
    /// `READ_BUF` bytes when it is smaller.
    fn reusing(mut data: Vec<u8>) -> ReadBuffer {
        if data.len() < READ_BUF {
            data.resize(READ_BUF, 0);
        }
        ReadBuffer {
            data,
            start: 0,
            end: 0,
            received: 0,
            reads: 0,
            scanned: 0,
            filled_whole: false,
        }
    }

    /// The buffer itself, for the connection's next response; one grown
    /// past `MAX_READ_BUF` (a long head or line) is not kept.
    fn take_data(&mut self) -> Vec<u8> {
        let data = std::mem::take(&mut self.data);
        (self.start, self.end, self.scanned) = (0, 0, 0);
        if data.len() > MAX_READ_BUF {
            Vec::new()
        } else {
            data
        }
    }

    fn pending(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        self.scanned = self.start;
    }

    /// The pending line's contents, without its `\n` or `\r\n`, if its end
    /// arrived.
    fn line(&mut self) -> Option<std::ops::Range<usize>> {
        let from = self.scanned.max(self.start);
        match self.data[from..self.end].iter().position(|&b| b == b'\n') {
            Some(i) => {
                let nl = from + i;
                let end = if nl > self.start && self.data[nl - 1] == b'\r' {
                    nl - 1
                } else {
                    nl
                };
                Some(self.start..end)
            }
            None => {
                self.scanned = self.end;
                None
            }
        }
    }

    /// Consumes a line [`ReadBuffer::line`] returned, with its line end.
    fn consume_line(&mut self, line: std::ops::Range<usize>) {
        let mut at = line.end;
        if self.data[at] == b'\r' {
            at += 1;
        }
        self.start = at + 1;
        self.scanned = self.start;
    }

    /// Reads once into the free space, making room first (moving pending
    /// bytes to the front, or doubling the buffer while pending bytes stay
    /// under `limit`). The count read; 0 at the connection's end.
    async fn fill(&mut self, io: &mut TokioIo<TimedStream>, limit: usize) -> Result<usize, Fill> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            self.scanned = 0;
        }
        if self.filled_whole && self.data.len() < MAX_READ_BUF {
            self.data.resize(self.data.len() * 2, 0);
        }
        if self.end == self.data.len() {
            if self.start > 0 {
                self.data.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.scanned -= self.start;
                self.start = 0;
            } else if self.data.len() >= limit {
                return Err(Fill::TooLong);
            } else {
                let len = (self.data.len() * 2).min(limit);
                self.data.resize(len, 0);
            }
        }
        let free = self.data.len() - self.end;
        let n = io
            .read(&mut self.data[self.end..])
            .await
            .map_err(Fill::Io)?;
        self.filled_whole = n == free;
        self.end += n;
        self.received += n as u64;
        self.reads += u32::from(n > 0);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(bytes: &[u8]) -> ReadBuffer {
        let mut b = ReadBuffer::reusing(Vec::new());
        b.data[..bytes.len()].copy_from_slice(bytes);
        b.end = bytes.len();
        b
    }

    /// Runs chunked framing over `wire` fed in pieces of `piece` bytes,
    /// returning the body and whether the end was reached with nothing
    /// left over.
    fn dechunk(wire: &[u8], piece: usize) -> Result<(Vec<u8>, bool), String> {
        let mut buf = ReadBuffer::reusing(Vec::new());
        buf.data = vec![0; wire.len().max(1)];
        let mut chunk = Chunk::Size;
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            let more = match chunk {
                Chunk::Data(left) => {
                    let n = take(left, &buf);
                    if let Step::Data(r) = data_or_more(&mut buf, n) {
                        body.extend_from_slice(&buf.data[r]);
                        chunk = if left == n as u64 {
                            Chunk::DataEnd
                        } else {
                            Chunk::Data(left - n as u64)
                        };
                        false
                    } else {
                        true
                    }
                }
                _ => match chunk_step(&mut chunk, &mut buf)? {
                    ChunkStep::End => return Ok((body, buf.pending().is_empty())),
                    ChunkStep::InData => false,
                    ChunkStep::More => true,
                },
            };
            if more {
                if fed == wire.len() {
                    return Ok((body, false));
                }
                let n = piece.min(wire.len() - fed);
                buf.data[buf.end..buf.end + n].copy_from_slice(&wire[fed..fed + n]);
                buf.end += n;
                fed += n;
            }
        }
    }

    #[test]
    fn chunked_bodies_decode_whatever_the_read_sizes() {
        let wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n1\n!\n0\r\nx-trailer: 1\r\n\r\n";
        for piece in 1..=wire.len() {
            let (body, clean) = dechunk(wire, piece).unwrap();
            assert_eq!(body, b"hello, world!", "piece {piece}");
            assert!(clean, "piece {piece}");
        }
    }

    #[test]
    fn chunk_sizes_are_hex_digits_that_fit_in_64_bits() {
        for (line, size) in [
            (&b"0"[..], Some(0)),
            (b"1a", Some(26)),
            (b"FfFf", Some(0xffff)),
            (b" 10 ; ext=1", Some(16)),
            (b"10;", Some(16)),
            (b"ffffffffffffffff", Some(u64::MAX)),
            (b"000000000000000001", Some(1)),
            (b"10000000000000000", None),
            (b"", None),
            (b";x", None),
            (b"+1", None),
            (b"-1", None),
            (b"1 2", None),
            (b"g", None),
            (b"\xff", None),
        ] {
            assert_eq!(
                chunk_size(line).ok(),
                size,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
        let e = chunk_size(b"zz;a").unwrap_err();
        assert_eq!(e, "chunk size \"zz;a\" is not a hex number");
    }

    #[test]
    fn broken_chunked_framing_is_named() {
        assert!(
            dechunk(b"zz\r\n", 4)
                .unwrap_err()
                .contains("not a hex number")
        );
        assert!(
            dechunk(b"2\r\nabX\r\n", 8)
                .unwrap_err()
                .contains("not followed by CRLF")
        );
        // Cut short: no end reached.
        assert_eq!(dechunk(b"5\r\nhel", 3).unwrap(), (b"hel".to_vec(), false));
    }

    #[test]
    fn lines_end_at_lf_or_crlf_and_are_scanned_once() {
        let mut b = buffer(b"ab\r\ncd\nef");
        let l = b.line().unwrap();
        assert_eq!(&b.data[l.clone()], b"ab");
        b.consume_line(l);
        let l = b.line().unwrap();
        assert_eq!(&b.data[l.clone()], b"cd");
        b.consume_line(l);
        assert!(b.line().is_none());
        assert_eq!(b.scanned, b.end);
        assert_eq!(b.pending(), b"ef");
    }

    fn head(text: &str) -> Result<Head, String> {
        let mut headers = [httparse::EMPTY_HEADER; 16];
        let mut r = httparse::Response::new(&mut headers);
        r.parse(text.as_bytes()).unwrap();
        Head::of(&r)
    }

    /// A head in slots left uninitialised: its length and fields, its
    /// headers with detail, none until all of it came, and at most
    /// `MAX_HEADERS` headers.
    #[test]
    fn a_head_is_parsed_only_once_complete_with_at_most_max_headers() {
        let text = "HTTP/1.1 200 OK\r\ncontent-type: a/b\r\nx-n: 1\r\n\r\nbody";
        let (head, len) = parse_head(text.as_bytes(), true).unwrap().unwrap();
        assert_eq!((head.status, len), (200, text.len() - 4));
        assert_eq!(head.content_type.as_deref(), Some("a/b"));
        let detail = head.detail.unwrap();
        assert_eq!(detail.reason, "OK");
        assert_eq!(detail.headers[1], ("x-n".to_string(), "1".to_string()));
        assert!(parse_head(&text.as_bytes()[..20], false).unwrap().is_none());
        let many = |n: usize| {
            let lines: String = (0..n).map(|i| format!("x-{i}: v\r\n")).collect();
            format!("HTTP/1.1 204 No Content\r\n{lines}\r\n")
        };
        assert!(
            parse_head(many(MAX_HEADERS).as_bytes(), false)
                .unwrap()
                .is_some()
        );
        let e = parse_head(many(MAX_HEADERS + 1).as_bytes(), false).unwrap_err();
        assert!(e.contains("malformed response head"), "{e}");
    }

    #[test]
    fn heads_say_how_the_body_ends_and_whether_the_connection_stays() {
        let h = head("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
        assert!(h.chunked && h.keep_alive);
        assert_eq!(h.content_type.as_deref(), Some("text/event-stream"));
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nConnection: close\r\n\r\n").unwrap();
        assert_eq!((h.content_length, h.keep_alive), (Some(12), false));
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n").unwrap();
        assert!(!h.keep_alive);
        let h =
            head("HTTP/1.0 200 OK\r\nContent-Length: 3\r\nConnection: keep-alive\r\n\r\n").unwrap();
        assert!(h.keep_alive);
        // Transfer-Encoding wins over Content-Length; a non-chunked last
        // coding runs to the close.
        let h = head(
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        )
        .unwrap();
        assert!(h.chunked && h.content_length.is_none() && h.keep_alive);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n").unwrap();
        assert!(!h.chunked && !h.keep_alive);
        assert!(
            head("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")
                .unwrap_err()
                .contains("two different")
        );
        assert!(
            head("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n")
                .unwrap_err()
                .contains("not a number")
        );
    }
}
