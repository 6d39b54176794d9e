//! The HTTP(S) client plumbing shared by speedbench's crates.
//!
//! One place builds connectors (plain TCP with `TCP_NODELAY`, or TLS through
//! rustls with the Mozilla roots, the system's roots and any extra PEM bundle
//! named by `SSL_CERT_FILE`), so the dataset crate's Hub client and the load
//! generator speak HTTPS the same way. [`get`] is a small buffered GET with a
//! deadline and redirect following, for control-plane calls (model lists,
//! health checks, Hub API and file downloads). [`H1Client`] is the lean
//! HTTP/1.1 client for a load generator's own requests to a plain
//! `http://` server (a few KiB per request in flight instead of hyper's
//! ~21 KiB per connection).
//!
//! Every connection is a [`TimedStream`], whose reads and writes stamp the
//! [`ConnectionClock`] each response carries; both come from
//! `speedbench-clock` (re-exported here), which a server can use without
//! this crate's TLS.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use speedbench_http::{ClientOptions, ConnectFailure, HttpError, get, new_client};
//!
//! let client = new_client(&ClientOptions::default()).unwrap();
//! // Nothing listens on port 9 of loopback: the error says so, with the URL.
//! let err = get(&client, "http://127.0.0.1:9/health", &[], Duration::from_secs(2)).await.unwrap_err();
//! assert!(matches!(err, HttpError::Connect { .. }));
//! assert_eq!(err.connect_failure(), Some(ConnectFailure::Refused));
//! # }
//! ```

#![doc(test(attr(deny(warnings))))]
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, LOCATION};
use hyper::{Request, StatusCode};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpSocket;

pub use speedbench_clock::{ConnectionClock, TimedConnector, TimedStream, WriteStamp};

mod h1;
mod tls;
pub use h1::{H1Client, H1Response, READ_BUF, ResponseDetail, Sends, WireTrace};
use tls::tls_config;

/// The connector every speedbench client uses: HTTP, or HTTPS via rustls,
/// with each connection's reads stamping a [`ConnectionClock`] that every response
/// carries in its extensions.
pub type Connector = HttpsConnector<TcpConnector>;

/// The least time an end of stream before any answer waits for a reset
/// behind it ([`TimedStream::awaiting_resets`]): on loopback the reset
/// follows within microseconds, but a loaded host may not run the softirq
/// at once (a clean-clone CI running the whole suite on two cores saw a
/// reset come later than 2 ms: the request was then taken as read and
/// lost). Only that rare path waits, and only this long.
const RESET_SETTLE_MIN: std::time::Duration = std::time::Duration::from_millis(20);

/// The most it waits: past this the connection's round trip is not what
/// holds the reset back.
const RESET_SETTLE_MAX: std::time::Duration = std::time::Duration::from_millis(500);

/// The TCP layer of [`Connector`]: hyper-util's connector (through
/// [`TimedConnector`]), one per source address of
/// [`ClientOptions::local_addrs`], each new connection taking the next
/// address in turn (round-robin), so that one client can open more
/// connections to one server than one source address has ephemeral ports.
/// Without source addresses the system picks one, as usual.
#[derive(Debug, Clone)]
pub struct TcpConnector {
    /// One connector per source address (one unbound connector without any).
    connectors: Arc<[TimedConnector]>,
    /// The source addresses, in the order the connectors use them.
    local_addrs: Arc<[IpAddr]>,
    /// How many connections were started: the next address's index, modulo.
    next: Arc<AtomicUsize>,
}

impl TcpConnector {
    /// A connector (with `TCP_NODELAY`) taking `local_addrs` in turn as the
    /// source address of new connections; checks first that each is an
    /// address of this machine and that none is given twice
    /// ([`HttpError::LocalAddr`]).
    pub fn new(local_addrs: &[IpAddr]) -> Result<TcpConnector, HttpError> {
        check_local_addrs(local_addrs)?;
        let one = |addr: Option<IpAddr>| {
            let mut http = HttpConnector::new();
            http.set_nodelay(true);
            http.enforce_http(false);
            http.set_local_address(addr);
            TimedConnector(http)
        };
        let connectors: Arc<[TimedConnector]> = if local_addrs.is_empty() {
            Arc::new([one(None)])
        } else {
            local_addrs.iter().map(|&a| one(Some(a))).collect()
        };
        Ok(TcpConnector {
            connectors,
            local_addrs: local_addrs.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Connects to `host:port` (an IP literal, bracketed for IPv6, or a
    /// name) from the next source address, with `TCP_NODELAY`, without
    /// hyper-util's connector: its boxed connect future costs about 1.8 KiB
    /// per connection being made, which a load generator opening thousands
    /// at once pays in full. Names resolve through the system resolver; each
    /// address is tried in turn, skipping those of the other IP family than
    /// the source address. With `addrs`, the connection's local and peer
    /// addresses are read too.
    pub(crate) async fn connect_direct(
        &self,
        host: &str,
        port: u16,
        addrs: bool,
    ) -> io::Result<DirectConnection> {
        let local = match self.local_addrs.len() {
            0 => None,
            n => Some(self.local_addrs[self.next.fetch_add(1, Ordering::Relaxed) % n]),
        };
        let (peers, dns) = resolve(host, port).await?;
        let mut last = None;
        let mut first_try = None;
        for addr in peers {
            if local.is_some_and(|l| l.is_ipv4() != addr.is_ipv4()) {
                continue;
            }
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            if let Some(l) = local {
                socket.bind(SocketAddr::new(l, 0))?;
            }
            let started = std::time::Instant::now();
            let began = *first_try.get_or_insert(started);
            match socket.connect(addr).await {
                Ok(stream) => {
                    let connected = std::time::Instant::now();
                    stream.set_nodelay(true)?;
                    let addrs = match addrs {
                        true => Some((stream.local_addr()?, stream.peer_addr()?)),
                        false => None,
                    };
                    // The handshake took a round trip: a reset behind an
                    // end of stream arrives within a couple of them.
                    let settle = (connected - started) * 2;
                    let settle = settle.clamp(RESET_SETTLE_MIN, RESET_SETTLE_MAX);
                    return Ok(DirectConnection {
                        stream: TimedStream::new(stream).awaiting_resets(settle),
                        dns,
                        tcp_connect: (began, connected),
                        addrs,
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("{host} has no address of the source address's IP family"),
            )
        }))
    }

    /// How many source addresses new connections take in turn (1 when the
    /// system picks it).
    pub fn source_count(&self) -> usize {
        self.connectors.len()
    }
}

/// The addresses of `host` (an IP literal, bracketed for IPv6, or a name)
/// at `port`, and the name's lookup, start and end (`None` for a literal).
async fn resolve(
    host: &str,
    port: u16,
) -> io::Result<(
    Vec<SocketAddr>,
    Option<(std::time::Instant, std::time::Instant)>,
)> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok((vec![SocketAddr::new(ip, port)], None));
    }
    let asked = std::time::Instant::now();
    let found = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| io::Error::other(DnsFailure(e)))?
        .collect();
    Ok((found, Some((asked, std::time::Instant::now()))))
}

/// A connection [`TcpConnector::connect_direct`] opened, and how.
pub(crate) struct DirectConnection {
    pub(crate) stream: TimedStream,
    /// The name's lookup, start and end; `None` for an IP literal.
    pub(crate) dns: Option<(std::time::Instant, std::time::Instant)>,
    /// From the first address tried to the one that connected.
    pub(crate) tcp_connect: (std::time::Instant, std::time::Instant),
    /// Local and peer addresses, when asked for.
    pub(crate) addrs: Option<(SocketAddr, SocketAddr)>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A host name that did not resolve (an [`io::Error`]'s inner error, so that
/// [`ConnectFailure::of`] tells it apart).
#[derive(Debug)]
struct DnsFailure(io::Error);

impl std::fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "dns error: {}", self.0)
    }
}

impl std::error::Error for DnsFailure {}

impl tower_service::Service<hyper::Uri> for TcpConnector {
    type Response = TimedStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<TimedStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // hyper-util's connector is always ready; each call clones one.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: hyper::Uri) -> Self::Future {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.connectors.len();
        // A clone of hyper-util's connector shares its configuration (an Arc).
        let mut connector = self.connectors[i].clone();
        Box::pin(async move {
            let started = std::time::Instant::now();
            let stream = connector.call(uri).await?;
            // hyper's pooled connections wait for a reset behind an end of
            // stream as the lean client's do (`connect_direct`): without it,
            // a request written as the server closed a kept-alive connection
            // read as "closed before message completed", which the server
            // may have read, and was lost instead of written again.
            let settle = (started.elapsed() * 2).clamp(RESET_SETTLE_MIN, RESET_SETTLE_MAX);
            Ok(stream.awaiting_resets(settle))
        })
    }
}

/// Checks that every address in `addrs` can be a source address here (one
/// of this machine's addresses: a socket can be bound to it) and that none
/// is given twice; the error names the address.
///
/// ```
/// use std::net::{IpAddr, Ipv4Addr};
/// use speedbench_http::{HttpError, check_local_addrs};
///
/// assert!(check_local_addrs(&[IpAddr::V4(Ipv4Addr::LOCALHOST)]).is_ok());
/// // 192.0.2.0/24 is reserved for documentation: no machine has it.
/// let err = check_local_addrs(&["192.0.2.7".parse().unwrap()]).unwrap_err();
/// assert!(matches!(err, HttpError::LocalAddr { .. }));
/// assert!(err.to_string().contains("192.0.2.7"), "{err}");
/// ```
pub fn check_local_addrs(addrs: &[IpAddr]) -> Result<(), HttpError> {
    for (i, &addr) in addrs.iter().enumerate() {
        if addrs[..i].contains(&addr) {
            return Err(HttpError::LocalAddr {
                addr,
                message: "given twice".into(),
            });
        }
        // Binding a UDP socket to port 0 claims nothing lasting and fails
        // just as a TCP bind would for an address this machine lacks.
        std::net::UdpSocket::bind((addr, 0)).map_err(|e| HttpError::LocalAddr {
            addr,
            message: format!("not usable as a source address on this machine ({e})"),
        })?;
    }
    Ok(())
}

/// A pooled client whose request bodies are buffered [`Bytes`].
pub type HttpClient = Client<Connector, Full<Bytes>>;

/// Everything that can go wrong building a client or making a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// A CA bundle could not be read or holds no certificate.
    #[error("CA bundle {path}: {message}")]
    CaBundle {
        /// The bundle file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The URL cannot be requested.
    #[error("invalid URL {url}: {message}")]
    InvalidUrl {
        /// The URL.
        url: String,
        /// Why.
        message: String,
    },
    /// No connection, or the connection broke.
    /// [`HttpError::connect_failure`] tells refused from TLS from DNS.
    #[error("{url}: {message}")]
    Connect {
        /// The URL.
        url: String,
        /// The error and its causes, in words.
        message: String,
        /// The error itself (hyper's, with its causes below it).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// No complete answer before the deadline.
    #[error("{url}: no complete answer within {timeout:?}")]
    Timeout {
        /// The URL.
        url: String,
        /// The deadline.
        timeout: Duration,
    },
    /// A source address for connections is not one of this machine's
    /// addresses, or was given twice.
    #[error("source address {addr}: {message}")]
    LocalAddr {
        /// The address.
        addr: IpAddr,
        /// What is wrong with it.
        message: String,
    },
    /// The server's answer is not HTTP/1.1 as [`H1Client`] reads it (a
    /// malformed head, broken chunked framing).
    #[error("{url}: {message}")]
    Protocol {
        /// The URL.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// The body passed the cap it was read under ([`get_capped`]).
    #[error("{url}: the response body passed the cap of {limit} bytes")]
    BodyTooLarge {
        /// The URL.
        url: String,
        /// The cap, in bytes.
        limit: usize,
    },
    /// Redirects did not end.
    #[error("{url}: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects {
        /// The first URL.
        url: String,
    },
}

/// What stopped a connection, as far as its causes tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectFailure {
    /// Nothing listens there (the peer refused the connection).
    Refused,
    /// The host name did not resolve.
    Dns,
    /// The TLS handshake or a TLS record failed (a certificate not trusted,
    /// a plain-HTTP server on an `https://` URL).
    Tls,
    /// The connection was reset or closed before the answer was complete.
    Closed,
    /// Anything else.
    Other,
}

impl ConnectFailure {
    /// Classifies `error` by the first cause in its chain that says which
    /// failure it is.
    pub fn of(error: &(dyn std::error::Error + 'static)) -> ConnectFailure {
        use std::io::ErrorKind;
        let mut next = Some(error);
        while let Some(e) = next {
            if e.downcast_ref::<rustls::Error>().is_some() {
                return ConnectFailure::Tls;
            }
            // An io::Error's `source` skips the error it wraps, which may be
            // another io::Error (hyper-rustls wraps tokio-rustls's).
            let mut io = e.downcast_ref::<std::io::Error>();
            while let Some(err) = io {
                let inner = err.get_ref();
                if inner.is_some_and(|i| i.downcast_ref::<rustls::Error>().is_some()) {
                    return ConnectFailure::Tls;
                }
                if inner.is_some_and(|i| i.is::<DnsFailure>()) {
                    return ConnectFailure::Dns;
                }
                match err.kind() {
                    ErrorKind::ConnectionRefused => return ConnectFailure::Refused,
                    ErrorKind::ConnectionReset
                    | ErrorKind::ConnectionAborted
                    | ErrorKind::BrokenPipe
                    | ErrorKind::UnexpectedEof => return ConnectFailure::Closed,
                    _ => {}
                }
                io = inner.and_then(|i| i.downcast_ref::<std::io::Error>());
            }
            if let Some(h) = e.downcast_ref::<hyper::Error>()
                && (h.is_incomplete_message() || h.is_closed())
            {
                return ConnectFailure::Closed;
            }
            // hyper-util's connector names resolution failures so.
            if e.to_string() == "dns error" {
                return ConnectFailure::Dns;
            }
            next = e.source();
        }
        ConnectFailure::Other
    }
}

impl HttpError {
    /// For [`HttpError::Connect`], what stopped the connection.
    pub fn connect_failure(&self) -> Option<ConnectFailure> {
        match self {
            HttpError::Connect { source, .. } => Some(ConnectFailure::of(source.as_ref())),
            _ => None,
        }
    }

    /// The error with `note` added to its message (connection and protocol
    /// errors; others are returned as they are).
    pub(crate) fn noted(mut self, note: &str) -> HttpError {
        if let HttpError::Connect { message, .. } | HttpError::Protocol { message, .. } = &mut self
        {
            message.push_str(note);
        }
        self
    }
}

/// Redirects [`get`] follows before giving up.
pub const MAX_REDIRECTS: usize = 10;

/// How to build a client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Idle keep-alive connections kept per host.
    pub max_idle_per_host: usize,
    /// Extra trusted roots in PEM form (for private CAs and loopback tests).
    pub extra_roots_pem: Vec<Vec<u8>>,
    /// Read extra roots from the file named by `SSL_CERT_FILE`, if set.
    pub use_ssl_cert_file: bool,
    /// Source addresses new connections take in turn ([`TcpConnector`]);
    /// empty lets the system pick.
    pub local_addrs: Vec<IpAddr>,
    /// The lean client keeps each response's [`ResponseDetail`] and its
    /// connection's addresses ([`WireTrace::addrs`]): what AIPerf's
    /// `--export-http-trace` writes. Off, it keeps only what the phases
    /// need.
    pub trace_detail: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            max_idle_per_host: 64,
            extra_roots_pem: Vec::new(),
            use_ssl_cert_file: true,
            local_addrs: Vec::new(),
            trace_detail: false,
        }
    }
}

/// Builds the HTTP/HTTPS connector with `TCP_NODELAY` (latency matters more
/// than packet count for a benchmark), taking the source addresses of
/// [`ClientOptions::local_addrs`] in turn.
pub fn new_connector(options: &ClientOptions) -> Result<Connector, HttpError> {
    let tcp = TcpConnector::new(&options.local_addrs)?;
    Ok(HttpsConnectorBuilder::new()
        .with_tls_config(tls_config(options)?)
        .https_or_http()
        .enable_http1()
        .wrap_connector(tcp))
}

/// Builds a pooled keep-alive client.
pub fn new_client(options: &ClientOptions) -> Result<HttpClient, HttpError> {
    Ok(Client::builder(TokioExecutor::new())
        .http1_read_buf_exact_size(4096)
        .pool_max_idle_per_host(options.max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(90))
        .build(new_connector(options)?))
}

/// The error and its causes on one line (hyper's top-level text alone is vague).
pub fn describe(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        // An error that already spells its causes out (as
        // `HttpError::Connect` does) is not repeated.
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg
}

/// A buffered response.
#[derive(Debug, Clone)]
pub struct Buffered {
    /// The status of the final (non-redirect) response.
    pub status: StatusCode,
    /// Its headers.
    pub headers: hyper::HeaderMap,
    /// Its whole body.
    pub body: Bytes,
    /// The URL that answered, after redirects.
    pub url: String,
}

fn resolve_location(base: &hyper::Uri, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map(|a| a.as_str()).unwrap_or("");
    if location.starts_with('/') {
        format!("{scheme}://{authority}{location}")
    } else {
        let path = base.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        format!("{scheme}://{authority}{dir}{location}")
    }
}

/// The most [`get`] buffers of a body ([`get_capped`] takes another cap).
pub const GET_MAX_BODY: usize = 256 * 1024 * 1024;

/// GETs `url`, following up to [`MAX_REDIRECTS`] redirects, and buffers the
/// body, up to [`GET_MAX_BODY`] bytes; the whole exchange must finish
/// within `timeout`.
///
/// `headers` are sent on the first request and on redirects to the same
/// host only, so a credential is never handed to a CDN or another site.
pub async fn get(
    client: &HttpClient,
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    timeout: Duration,
) -> Result<Buffered, HttpError> {
    get_capped(client, url, headers, timeout, GET_MAX_BODY).await
}

/// [`get`], buffering at most `max_body` bytes of the body: a longer one
/// (by its `Content-Length`, or as it arrives) is
/// [`HttpError::BodyTooLarge`], and no more of it is read. For probes and
/// health checks, whose answers are small, so that a server answering
/// gigabytes cannot take the client's memory.
pub async fn get_capped(
    client: &HttpClient,
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    timeout: Duration,
    max_body: usize,
) -> Result<Buffered, HttpError> {
    let fut = async {
        let first: hyper::Uri = parse_uri(url)?;
        let mut current = first.clone();
        for _ in 0..=MAX_REDIRECTS {
            let mut req = Request::get(current.clone());
            // The caller's headers (credentials among them) go to its own
            // host only, never to where a redirect points.
            if current.authority() == first.authority() {
                for (n, v) in headers {
                    req = req.header(n, v);
                }
            }
            let req = empty_body(req, &current.to_string())?;
            let resp = client
                .request(req)
                .await
                .map_err(|e| connect_error(&current, Box::new(e)))?;
            if resp.status().is_redirection()
                && let Some(loc) = resp.headers().get(LOCATION).and_then(|v| v.to_str().ok())
            {
                current = parse_uri(&resolve_location(&current, loc))?;
                continue;
            }
            return read_capped(resp, &current, max_body).await;
        }
        Err(HttpError::TooManyRedirects {
            url: url.to_string(),
        })
    };
    within(url, timeout, fut).await
}

/// `fut`, or [`HttpError::Timeout`] naming `url` once `timeout` passes.
async fn within<T>(
    url: &str,
    timeout: Duration,
    fut: impl Future<Output = Result<T, HttpError>>,
) -> Result<T, HttpError> {
    tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| HttpError::Timeout {
            url: url.to_string(),
            timeout,
        })?
}

/// A request with an empty body, or the error naming `url`.
fn empty_body(
    builder: hyper::http::request::Builder,
    url: &str,
) -> Result<Request<Full<Bytes>>, HttpError> {
    builder
        .body(Full::new(Bytes::new()))
        .map_err(|e| HttpError::InvalidUrl {
            url: url.to_string(),
            message: e.to_string(),
        })
}

/// POSTs an empty body to `url` (no redirect followed) and returns the
/// status and at most `max_body` bytes of the answer, all within
/// `timeout`: for a server's administrative endpoints (a cache reset).
pub async fn post_empty(
    client: &HttpClient,
    url: &str,
    timeout: Duration,
    max_body: usize,
) -> Result<Buffered, HttpError> {
    let fut = async {
        let uri = parse_uri(url)?;
        let req = empty_body(Request::post(uri.clone()), url)?;
        send_buffered(client, req, &uri, max_body).await
    };
    within(url, timeout, fut).await
}

/// POSTs the JSON `body` to `url` with `headers` (no redirect followed)
/// and returns the status and at most `max_body` bytes of the answer, all
/// within `timeout`: for a server's utility endpoints (`/tokenize`).
pub async fn post_json(
    client: &HttpClient,
    url: &str,
    headers: &[(HeaderName, HeaderValue)],
    body: Vec<u8>,
    timeout: Duration,
    max_body: usize,
) -> Result<Buffered, HttpError> {
    let fut = async {
        let uri = parse_uri(url)?;
        let mut req =
            Request::post(uri.clone()).header(hyper::header::CONTENT_TYPE, "application/json");
        for (n, v) in headers {
            req = req.header(n, v);
        }
        let req = req
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| HttpError::InvalidUrl {
                url: url.to_string(),
                message: e.to_string(),
            })?;
        send_buffered(client, req, &uri, max_body).await
    };
    within(url, timeout, fut).await
}

/// Sends `req` and buffers at most `max_body` bytes of its answer.
async fn send_buffered(
    client: &HttpClient,
    req: Request<Full<Bytes>>,
    uri: &hyper::Uri,
    max_body: usize,
) -> Result<Buffered, HttpError> {
    let resp = client
        .request(req)
        .await
        .map_err(|e| connect_error(uri, Box::new(e)))?;
    read_capped(resp, uri, max_body).await
}

fn parse_uri(url: &str) -> Result<hyper::Uri, HttpError> {
    url.parse()
        .map_err(|e: hyper::http::uri::InvalidUri| HttpError::InvalidUrl {
            url: url.to_string(),
            message: e.to_string(),
        })
}

fn connect_error(url: &hyper::Uri, e: Box<dyn std::error::Error + Send + Sync>) -> HttpError {
    HttpError::Connect {
        url: url.to_string(),
        message: describe(e.as_ref()),
        source: e,
    }
}

/// The answer's body, at most `max_body` bytes: refused by its declared
/// length before any is read, or as soon as it passes the cap.
async fn read_capped(
    resp: hyper::Response<hyper::body::Incoming>,
    url: &hyper::Uri,
    max_body: usize,
) -> Result<Buffered, HttpError> {
    let status = resp.status();
    let headers = resp.headers().clone();
    let too_large = || HttpError::BodyTooLarge {
        url: url.to_string(),
        limit: max_body,
    };
    let declared = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > max_body as u64) {
        return Err(too_large());
    }
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| connect_error(url, Box::new(e)))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > max_body {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(Buffered {
        status,
        headers,
        body: Bytes::from(bytes),
        url: url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_redirects_resolve_against_the_current_url() {
        let base: hyper::Uri = "http://h:1/api/datasets/x".parse().unwrap();
        assert_eq!(resolve_location(&base, "/cdn/f"), "http://h:1/cdn/f");
        assert_eq!(resolve_location(&base, "y"), "http://h:1/api/datasets/y");
        assert_eq!(resolve_location(&base, "https://cdn/z"), "https://cdn/z");
    }

    #[tokio::test]
    async fn new_connections_take_the_source_addresses_in_turn() {
        use tower_service::Service;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: hyper::Uri = format!("http://{}/", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let addrs: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
        let mut tcp = TcpConnector::new(&addrs).unwrap();
        assert_eq!(tcp.source_count(), 2);
        let mut peers = Vec::new();
        let mut streams = Vec::new();
        for _ in 0..4 {
            streams.push(tcp.call(uri.clone()).await.unwrap());
            let (_, peer) = listener.accept().await.unwrap();
            peers.push(peer.ip().to_string());
        }
        assert_eq!(peers, ["127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"]);
        // Without addresses, the system picks (127.0.0.1 towards 127.0.0.1).
        let mut tcp = TcpConnector::new(&[]).unwrap();
        let _s = tcp.call(uri).await.unwrap();
        let (_, peer) = listener.accept().await.unwrap();
        assert_eq!(peer.ip().to_string(), "127.0.0.1");
    }

    #[test]
    fn source_addresses_are_checked_and_named() {
        let twice: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(); 2];
        let err = new_client(&ClientOptions {
            local_addrs: twice,
            use_ssl_cert_file: false,
            ..Default::default()
        })
        .unwrap_err()
        .to_string();
        assert_eq!(err, "source address 127.0.0.2: given twice");
        let err = check_local_addrs(&["192.0.2.1".parse().unwrap()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("source address 192.0.2.1: not usable as a source address"),
            "{err}"
        );
    }

    #[test]
    fn a_bundle_without_certificates_is_refused() {
        let options = ClientOptions {
            extra_roots_pem: vec![b"not a pem".to_vec()],
            use_ssl_cert_file: false,
            ..Default::default()
        };
        let err = new_client(&options).unwrap_err().to_string();
        assert!(err.contains("no PEM certificate"), "{err}");
    }
}
