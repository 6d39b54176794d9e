//! The connection clock against a loopback server that says exactly when it
//! read each request and wrote each chunk.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use speedbench_http::{ClientOptions, ConnectionClock, new_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Moments the server saw, per request: (connection number, request fully
/// read, second chunk written).
type ServerMoments = (usize, Instant, Instant);

/// Serves keep-alive connections: each response is chunked, its second chunk
/// written 20 ms after the first.
async fn server() -> (String, mpsc::UnboundedReceiver<ServerMoments>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        for conn in 0.. {
            let (mut sock, _) = listener.accept().await.unwrap();
            sock.set_nodelay(true).unwrap();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let read_at = Instant::now();
                    buf.clear();
                    sock.write_all(
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n",
                    )
                    .await
                    .unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let second_at = Instant::now();
                    sock.write_all(b"6\r\nsecond\r\n0\r\n\r\n").await.unwrap();
                    let _ = tx.send((conn, read_at, second_at));
                }
            });
        }
    });
    (url, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stamps_bound_the_true_moments_on_every_request_of_a_connection() {
    let (url, mut moments) = server().await;
    let client = new_client(&ClientOptions::default()).unwrap();
    for i in 0..2 {
        // Let the first connection go back to the pool, so the second
        // request reuses it and must be stamped afresh.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let before_send = Instant::now();
        let req = Request::get(url.as_str())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = client.request(req).await.unwrap();
        let clock = resp
            .extensions()
            .get::<ConnectionClock>()
            .cloned()
            .expect("every response carries its connection's clock");
        let written = clock.request_written().expect("the request was written");
        let mut body = resp.into_body();
        let mut frames = Vec::new();
        while let Some(frame) = body.frame().await {
            let now = Instant::now();
            if let Ok(data) = frame.unwrap().into_data() {
                frames.push((data, clock.arrival(now), now));
            }
        }
        let (conn, read_at, second_at) = moments.recv().await.unwrap();
        assert_eq!(conn, 0, "request {i} did not reuse the pooled connection");
        let last_read = clock
            .last_read()
            .expect("reads that returned data are stamped");
        assert!(
            last_read >= second_at,
            "the last read is the one after the last write"
        );
        // The request's bytes left after we asked to send them and before
        // the server had read them.
        assert!(written >= before_send, "request stamped before it was sent");
        assert!(
            written <= read_at,
            "request stamped after the server read it"
        );
        let second = frames
            .iter()
            .find(|(d, _, _)| d.as_ref() == b"second")
            .expect("second chunk");
        // The second chunk's stamp is no earlier than the server wrote it and
        // no later than this task saw it.
        assert!(
            second.1 >= second_at,
            "arrival stamped before the server wrote it"
        );
        assert!(second.1 <= second.2);
    }
}

/// On Linux the kernel stamps packets as they arrive: a reader that gets to
/// them late (here its only thread is blocked) still times them right.
#[cfg(target_os = "linux")]
#[test]
fn kernel_stamps_do_not_wait_for_the_reader() {
    // The server gets its own thread and runtime, so it writes on time while
    // the client's single thread is blocked.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (url, mut moments) = server().await;
            tx.send(url).unwrap();
            while moments.recv().await.is_some() {}
        });
    });
    let url = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = new_client(&ClientOptions::default()).unwrap();
        let req = Request::get(url.as_str())
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = client.request(req).await.unwrap();
        let clock = resp.extensions().get::<ConnectionClock>().cloned().unwrap();
        assert!(clock.kernel_receive_stamps());
        let headers_at = Instant::now();
        // The second chunk leaves the server ~20 ms after the headers; this
        // thread (the connection's reader too) only reads it after 80 ms.
        std::thread::sleep(Duration::from_millis(80));
        let mut body = resp.into_body();
        let mut second = None;
        while let Some(frame) = body.frame().await {
            let now = Instant::now();
            if frame
                .unwrap()
                .into_data()
                .is_ok_and(|d| d.as_ref() == b"second")
            {
                second = Some(clock.arrival(now));
            }
        }
        let waited = second.expect("second chunk") - headers_at;
        assert!(
            waited < Duration::from_millis(60),
            "stamped {waited:?} after the headers: the read time, not the arrival"
        );
    });
}

/// A server that asks for a write stamp learns when the next write started:
/// not before it asked, not after the write returned, and not changed by the
/// writes that follow.
#[tokio::test]
async fn a_write_stamp_is_the_start_of_the_next_write_only() {
    use hyper::rt::Write;
    use speedbench_http::TimedStream;
    use std::pin::Pin;

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut peer = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (sock, _) = listener.accept().await.unwrap();
    let mut stream = TimedStream::new(sock);
    async fn write(stream: &mut TimedStream, bytes: &[u8]) {
        let n = std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, bytes))
            .await
            .unwrap();
        assert_eq!(n, bytes.len());
    }

    write(&mut stream, b"head").await;
    let asked = Instant::now();
    let stamp = stream.clock().stamp_next_write();
    assert_eq!(
        stamp.get(),
        None,
        "no write has happened since it was asked"
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    let before = Instant::now();
    write(&mut stream, b"frame").await;
    let after = Instant::now();
    let at = stamp.get().expect("the next write fills the stamp");
    assert!(at >= before && at >= asked && at <= after);
    write(&mut stream, b"tail").await;
    assert_eq!(stamp.get(), Some(at), "a later write changed the stamp");

    // A second request is filled by its own next write; the first stays.
    let second = stream.clock().stamp_next_write();
    tokio::time::sleep(Duration::from_millis(2)).await;
    write(&mut stream, b"more").await;
    assert!(second.get().unwrap() > at);
    assert_eq!(stamp.get(), Some(at));

    let mut got = vec![0u8; 17];
    peer.read_exact(&mut got).await.unwrap();
    assert_eq!(got, b"headframetailmore");
}

/// A client's connection that meets an end of stream after writing a
/// request, before any byte of its answer, waits a moment for the reset
/// that a closed socket's kernel answers unread bytes with, and reports
/// that reset (the request was never read) rather than the end of stream
/// (it may have been): the race of a server closing a kept-alive
/// connection just as the next request goes out, made certain by a server
/// that sends its end of stream first and resets 5 ms after the request
/// arrives.
#[tokio::test]
async fn an_end_of_stream_with_a_reset_behind_it_is_the_reset() {
    use hyper::rt::{Read, Write};
    use speedbench_http::TimedStream;
    use std::pin::Pin;

    async fn write(stream: &mut TimedStream, bytes: &[u8]) {
        std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_write(cx, bytes))
            .await
            .unwrap();
    }
    async fn read(stream: &mut TimedStream) -> std::io::Result<Vec<u8>> {
        let mut buf = [0u8; 64];
        let mut read_buf = hyper::rt::ReadBuf::new(&mut buf);
        std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_read(cx, read_buf.unfilled()))
            .await?;
        Ok(read_buf.filled().to_vec())
    }

    for reset in [true, false] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        let mut stream = TimedStream::new(client).awaiting_resets(Duration::from_millis(300));
        write(&mut stream, b"first").await;
        let mut got = [0u8; 5];
        server.read_exact(&mut got).await.unwrap();
        server.write_all(b"answer").await.unwrap();
        assert_eq!(read(&mut stream).await.unwrap(), b"answer");
        // The server's end of stream goes out, then the next request.
        server.shutdown().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        write(&mut stream, b"second").await;
        let serving = tokio::spawn(async move {
            server.readable().await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            if !reset {
                // Read: the close is a plain one, no reset follows.
                let mut got = [0u8; 6];
                server.read_exact(&mut got).await.unwrap();
            }
            drop(server);
        });
        let started = Instant::now();
        let outcome = read(&mut stream).await;
        serving.await.unwrap();
        if reset {
            let e = outcome.expect_err("the reset behind the end of stream");
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
                ),
                "{e:?}"
            );
            assert!(started.elapsed() < Duration::from_millis(300));
        } else {
            assert_eq!(outcome.unwrap(), b"", "a plain end of stream stands");
            assert!(started.elapsed() >= Duration::from_millis(300), "it waited");
        }
        // Once over, the connection does not wait again.
        let again = Instant::now();
        let _ = read(&mut stream).await;
        assert!(again.elapsed() < Duration::from_millis(100));
    }
}
