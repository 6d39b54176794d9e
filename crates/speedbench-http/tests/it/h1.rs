//! The lean HTTP/1.1 client against a loopback server that answers each
//! request with bytes a test scripts exactly: framing (chunked in odd
//! pieces, Content-Length, to the close), keep-alive and its refusal, a
//! pooled connection the server closed, interim 1xx heads, malformed and
//! cut-short answers, and what the request carries.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use speedbench_http::{ClientOptions, ConnectFailure, H1Client, H1Response, HttpError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What a scripted answer does after its bytes are written.
#[derive(Clone, Copy, PartialEq)]
enum After {
    /// Waits for the next request on the same connection.
    KeepOpen,
    /// Closes the connection.
    Close,
    /// Holds the connection this long, then closes it (with no pieces: a
    /// request read and never answered).
    HoldThenClose(Duration),
}

/// One scripted answer: pieces written with a flush and a short pause
/// between them, so the client reads them apart.
#[derive(Clone)]
struct Answer {
    pieces: Vec<Vec<u8>>,
    after: After,
}

fn answer(pieces: &[&[u8]], after: After) -> Answer {
    Answer {
        pieces: pieces.iter().map(|p| p.to_vec()).collect(),
        after,
    }
}

/// What the server saw: each request's raw bytes and its connection number.
type Seen = Arc<Mutex<Vec<(usize, Vec<u8>)>>>;

/// Serves the answers in order, one per request, across connections.
async fn server(answers: Vec<Answer>) -> (hyper::Uri, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!(
        "http://{}/v1/chat/completions?x=1",
        listener.local_addr().unwrap()
    )
    .parse()
    .unwrap();
    let seen: Seen = Arc::default();
    let queue = Arc::new(Mutex::new(answers.into_iter()));
    let record = seen.clone();
    tokio::spawn(async move {
        for conn in 0.. {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let (queue, record) = (queue.clone(), record.clone());
            tokio::spawn(async move {
                loop {
                    let Some(request) = read_request(&mut sock).await else {
                        return;
                    };
                    record.lock().unwrap().push((conn, request));
                    let Some(a) = queue.lock().unwrap().next() else {
                        return;
                    };
                    for piece in &a.pieces {
                        if sock.write_all(piece).await.is_err() {
                            return;
                        }
                        let _ = sock.flush().await;
                        tokio::time::sleep(Duration::from_millis(2)).await;
                    }
                    match a.after {
                        After::Close => return,
                        After::HoldThenClose(hold) => {
                            tokio::time::sleep(hold).await;
                            return;
                        }
                        After::KeepOpen => {}
                    }
                }
            });
        }
    });
    (uri, seen)
}

/// One request: its head and a body of the length it declares.
async fn read_request(sock: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf);
            }
        }
        match sock.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn client(uri: &hyper::Uri) -> H1Client {
    let headers = [
        (
            HeaderName::from_static("content-type"),
            HeaderValue::from_static("application/json"),
        ),
        (
            HeaderName::from_static("x-team"),
            HeaderValue::from_static("bench"),
        ),
    ];
    H1Client::new(uri, &headers, &ClientOptions::default()).unwrap()
}

/// The whole body, and the pieces it came in.
async fn body(resp: &mut H1Response) -> Result<(Vec<u8>, usize), HttpError> {
    let mut all = Vec::new();
    let mut pieces = 0;
    while let Some(data) = resp.chunk().await? {
        assert!(!data.is_empty(), "an empty piece was handed out");
        all.extend_from_slice(data);
        pieces += 1;
    }
    Ok((all, pieces))
}

const SSE_HEAD: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

#[tokio::test]
async fn a_chunked_stream_in_odd_pieces_comes_out_whole_and_the_connection_is_reused() {
    let stream: &[&[u8]] = &[
        SSE_HEAD,
        b"f\r\ndata: {\"a\":1}",
        b"\n\n\r",
        b"\n",
        b"e\r\ndata: [DONE]\n\n\r\n0\r\n",
        b"\r\n",
    ];
    let (uri, seen) = server(vec![
        answer(stream, After::KeepOpen),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"],
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    let mut resp = c.post(br#"{"q":1}"#).await.unwrap();
    assert_eq!(resp.status, 200);
    assert_eq!(resp.content_type.as_deref(), Some("text/event-stream"));
    let (all, pieces) = body(&mut resp).await.unwrap();
    assert_eq!(all, b"data: {\"a\":1}\n\ndata: [DONE]\n\n");
    assert!(pieces >= 2, "the stream came in {pieces} pieces");
    assert!(resp.clock.request_written().is_some());
    assert!(resp.clock.last_read().is_some());
    drop(resp);
    assert_eq!(c.idle_connections(), 1);

    let mut resp = c.post(b"[]").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"{}");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!((seen[0].0, seen[1].0), (0, 0), "one connection for both");
    let request = String::from_utf8_lossy(&seen[0].1).to_string();
    let authority = uri.authority().unwrap().as_str();
    assert!(
        request.starts_with(&format!(
            "POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: {authority}\r\n"
        )),
        "{request}"
    );
    assert!(request.contains("\r\ncontent-type: application/json\r\n"));
    assert!(request.contains("\r\nx-team: bench\r\n"));
    assert!(
        request.ends_with("\r\ncontent-length: 7\r\n\r\n{\"q\":1}"),
        "{request}"
    );
}

#[tokio::test]
async fn a_connection_keeps_its_grown_read_buffer_and_nothing_of_the_last_response() {
    // Whole responses in one write, as a server with no delays sends them.
    let big_body = "x".repeat(6_000) + "end";
    let big = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{big_body}",
        big_body.len()
    );
    let (uri, seen) = server(vec![
        answer(&[big.as_bytes()], After::KeepOpen),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nshort"],
            After::KeepOpen,
        ),
        answer(&[big.as_bytes()], After::KeepOpen),
    ])
    .await;
    let c = client(&uri);
    let mut first = c.post(b"1").await.unwrap();
    let (all, first_pieces) = body(&mut first).await.unwrap();
    assert_eq!(all, big_body.as_bytes());
    drop(first);
    // The short answer fits in what the long one left: none of the long
    // one's bytes may show through.
    let mut second = c.post(b"2").await.unwrap();
    assert_eq!(body(&mut second).await.unwrap(), (b"short".to_vec(), 1));
    drop(second);
    let mut third = c.post(b"3").await.unwrap();
    let (all, third_pieces) = body(&mut third).await.unwrap();
    assert_eq!(all, big_body.as_bytes());
    assert!(
        third_pieces < first_pieces,
        "the same answer took {first_pieces} reads on a new buffer and {third_pieces} on the kept one"
    );
    let seen = seen.lock().unwrap();
    assert!(seen.iter().all(|(conn, _)| *conn == 0), "one connection");
}

#[tokio::test]
async fn connection_close_and_close_delimited_bodies_take_a_new_connection() {
    let (uri, seen) = server(vec![
        answer(
            &[b"HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 3\r\n\r\nabc"],
            After::Close,
        ),
        answer(
            &[b"HTTP/1.0 200 OK\r\n\r\nuntil", b" the end"],
            After::Close,
        ),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"],
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    let mut resp = c.post(b"1").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"abc");
    drop(resp);
    assert_eq!(c.idle_connections(), 0, "Connection: close is not pooled");
    let mut resp = c.post(b"2").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"until the end");
    drop(resp);
    assert_eq!(c.idle_connections(), 0);
    let mut resp = c.post(b"3").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap(), (Vec::new(), 0));
    drop(resp);
    assert_eq!(c.idle_connections(), 1);
    let conns: Vec<usize> = seen.lock().unwrap().iter().map(|(c, _)| *c).collect();
    assert_eq!(conns, vec![0, 1, 2]);
}

#[tokio::test]
async fn a_pooled_connection_the_server_closed_is_replaced_before_the_request_is_written() {
    // The first answer keeps the connection in the client's pool, then the
    // server closes it without a word (as llama-server does with streams).
    let (uri, seen) = server(vec![
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na"],
            After::Close,
        ),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb"],
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    let mut resp = c.post(b"1").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"a");
    drop(resp);
    assert_eq!(c.idle_connections(), 1);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut resp = c.post(b"2").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"b");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "the request reached the server once");
    assert_eq!(seen[1].0, 1, "on a new connection");
}

#[tokio::test]
async fn a_server_that_closes_after_answering_gets_a_new_connection_per_request() {
    // llama-server closes every streamed answer's connection while saying
    // keep-alive: once the client has seen that, it pools nothing, so no
    // request can be written in the instant the server is closing.
    let ok = |b: &'static [u8], after| answer(&[b], after);
    let (uri, seen) = server(vec![
        ok(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na",
            After::Close,
        ),
        ok(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb",
            After::KeepOpen,
        ),
        ok(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nc",
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    for (i, want) in [b"a", b"b", b"c"].into_iter().enumerate() {
        let mut resp = c.post(i.to_string().as_bytes()).await.unwrap();
        assert_eq!(body(&mut resp).await.unwrap().0, want);
        drop(resp);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(c.idle_connections(), 0, "nothing is pooled once seen");
    let conns: Vec<usize> = seen.lock().unwrap().iter().map(|(c, _)| *c).collect();
    assert_eq!(
        conns,
        vec![0, 1, 2],
        "a connection of its own for each request"
    );
}

#[tokio::test]
async fn a_request_the_server_read_and_never_answered_is_not_sent_again() {
    // The second request reaches the server on the kept-alive connection;
    // the server holds it, then closes without a byte.
    let (uri, seen) = server(vec![
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na"],
            After::KeepOpen,
        ),
        answer(&[], After::HoldThenClose(Duration::from_millis(300))),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nc"],
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    let mut resp = c.post(b"1").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"a");
    drop(resp);
    let err = c.post(b"2").await.unwrap_err().to_string();
    assert!(err.contains("is not sent again"), "{err}");
    assert!(err.contains("before any response byte"), "{err}");
    // The next request takes a new connection.
    let mut resp = c.post(b"3").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"c");
    let seen = seen.lock().unwrap();
    let bodies: Vec<(usize, bool)> = seen
        .iter()
        .map(|(conn, raw)| (*conn, raw.ends_with(b"2")))
        .collect();
    assert_eq!(
        bodies,
        [(0, false), (0, true), (1, false)],
        "each request reached the server exactly once"
    );
}

#[tokio::test]
async fn an_idle_connection_holding_unasked_bytes_is_not_reused() {
    // The first answer is followed by stray bytes on the kept connection.
    let (uri, seen) = server(vec![
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na", b"junk"],
            After::KeepOpen,
        ),
        answer(
            &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb"],
            After::KeepOpen,
        ),
    ])
    .await;
    let c = client(&uri);
    let mut resp = c.post(b"1").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"a");
    drop(resp);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut resp = c.post(b"2").await.unwrap();
    assert_eq!(body(&mut resp).await.unwrap().0, b"b");
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].0, 1, "on a new connection");
}

#[tokio::test]
async fn interim_heads_are_skipped_and_error_statuses_keep_their_body() {
    let (uri, _) = server(vec![answer(
        &[
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n",
            b"HTTP/1.1 429 Too Many Requests\r\ncontent-length: 9\r\n\r\nslow down",
        ],
        After::KeepOpen,
    )])
    .await;
    let c = client(&uri);
    let mut resp = c.post(b"1").await.unwrap();
    assert_eq!(resp.status, 429);
    assert_eq!(body(&mut resp).await.unwrap().0, b"slow down");
}

#[tokio::test]
async fn broken_answers_are_named_errors() {
    let cases: Vec<(Answer, &str)> = vec![
        (
            answer(
                &[b"HTTP/1.1 200 OK\r\nbad header line\r\n\r\n"],
                After::Close,
            ),
            "malformed response head",
        ),
        (
            answer(&[b"HTTP/1.1 200 OK\r\ncontent-le"], After::Close),
            "the connection closed inside the response head",
        ),
        (
            answer(
                &[b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
                After::Close,
            ),
            "the connection closed before the body was complete",
        ),
        (
            answer(&[SSE_HEAD, b"5\r\nhello\r\n"], After::Close),
            "the connection closed before the body was complete",
        ),
        (
            answer(&[SSE_HEAD, b"xyz\r\n"], After::Close),
            "chunk size \"xyz\" is not a hex number",
        ),
        (
            answer(
                &[b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n"],
                After::Close,
            ),
            "two different Content-Length headers",
        ),
    ];
    for (a, want) in cases {
        let (uri, _) = server(vec![a]).await;
        let c = client(&uri);
        let err = match c.post(b"1").await {
            Err(e) => e,
            Ok(mut resp) => body(&mut resp).await.unwrap_err(),
        };
        let text = speedbench_http::describe(&err);
        assert!(text.contains(want), "{text:?} lacks {want:?}");
        assert!(text.contains(&uri.to_string()), "{text:?} names no URL");
        assert_eq!(
            c.idle_connections(),
            0,
            "{want}: a broken connection was pooled"
        );
    }
    // A cut body is a closed connection to anyone classifying it.
    let (uri, _) = server(vec![answer(
        &[b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort"],
        After::Close,
    )])
    .await;
    let mut resp = client(&uri).post(b"1").await.unwrap();
    let err = body(&mut resp).await.unwrap_err();
    assert_eq!(err.connect_failure(), Some(ConnectFailure::Closed));
}

#[tokio::test]
async fn only_plain_http_urls_are_taken() {
    let options = ClientOptions::default();
    for url in ["https://127.0.0.1:1/v1", "unix:/tmp/x"] {
        let Ok(uri) = url.parse::<hyper::Uri>() else {
            continue;
        };
        let err = H1Client::new(&uri, &[], &options).unwrap_err();
        assert!(matches!(err, HttpError::InvalidUrl { .. }), "{url}: {err}");
    }
}
