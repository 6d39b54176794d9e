//! Loopback test servers: a TLS front for the simulated server, and a
//! scripted HTTP server that sends exactly the bytes (and pauses) a test asks.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use speedbench_client::{
    BaseUrl, Load, ProfileRun, Progress, RunOutcome, StopHandle, Target, run_profile,
};
use speedbench_dataset::{Conversation, Dataset};
use speedbench_record::{RequestRecord, read_records_file};
use speedbench_sim::{SimConfig, SimServer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TLS listener on 127.0.0.1 that forwards every connection to `upstream`.
pub(crate) struct TlsFront {
    /// Where the TLS listener is.
    pub addr: SocketAddr,
    /// The PEM of the CA that signed the listener's certificate.
    pub ca_pem: String,
}

/// Starts a TLS front for `upstream` with a fresh CA and a leaf certificate
/// for `127.0.0.1` and `localhost`.
pub(crate) async fn tls_front(upstream: SocketAddr) -> TlsFront {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![leaf.der().clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A client that refuses the certificate ends the handshake: fine.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut up) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    TlsFront {
        addr,
        ca_pem: ca_cert.pem(),
    }
}

/// One piece of a scripted response body: wait, then write these bytes as
/// one HTTP chunk.
pub(crate) struct Piece {
    pub delay: Duration,
    pub bytes: Vec<u8>,
}

/// `data: {json}\n\n` sent after `delay_ms`.
pub(crate) fn data(delay_ms: u64, json: &str) -> Piece {
    raw(delay_ms, &format!("data: {json}\n\n"))
}

/// Raw bytes sent after `delay_ms`.
pub(crate) fn raw(delay_ms: u64, text: &str) -> Piece {
    Piece {
        delay: Duration::from_millis(delay_ms),
        bytes: text.as_bytes().to_vec(),
    }
}

/// Serves the same scripted SSE response to every request on 127.0.0.1.
pub(crate) async fn scripted_sse(script: Vec<Piece>) -> SocketAddr {
    scripted_sse_with(script, usize::MAX, Closing::AfterAnswer).await
}

/// How a connection of [`scripted_sse_with`] ends once it has answered its
/// share of requests.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Closing {
    /// Closed right after the last answer, before another request comes (a
    /// server closing keep-alive connections silently, as llama-server's
    /// HTTP library does when its keep-alive ends).
    AfterAnswer,
    /// The next request is read, then the connection closed without a
    /// response: the server may have acted on it.
    AfterReading,
}

/// As [`scripted_sse`], but each connection answers only `per_connection`
/// requests, then ends as `closing` says.
pub(crate) async fn scripted_sse_with(
    script: Vec<Piece>,
    per_connection: usize,
    closing: Closing,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let script = Arc::new(script);
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let script = script.clone();
            tokio::spawn(async move {
                tcp.set_nodelay(true).unwrap();
                let mut answered = 0;
                while read_request(&mut tcp).await {
                    if answered == per_connection {
                        return;
                    }
                    answered += 1;
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                    if tcp.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    for piece in script.iter() {
                        tokio::time::sleep(piece.delay).await;
                        let mut chunk = format!("{:x}\r\n", piece.bytes.len()).into_bytes();
                        chunk.extend_from_slice(&piece.bytes);
                        chunk.extend_from_slice(b"\r\n");
                        if tcp.write_all(&chunk).await.is_err() {
                            return;
                        }
                    }
                    if tcp.write_all(b"0\r\n\r\n").await.is_err() {
                        return;
                    }
                    if answered == per_connection && closing == Closing::AfterAnswer {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// Reads one request (head plus `content-length` body); false at EOF.
async fn read_request(tcp: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        match tcp.read(&mut byte).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match tcp.read(&mut byte).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&byte[..n]),
        }
    }
    true
}

/// A dataset of `n` single-turn conversations.
pub(crate) fn single_turns(n: usize) -> Dataset {
    Dataset {
        name: "t".into(),
        conversations: (0..n)
            .map(|i| Conversation {
                id: format!("c{i}"),
                category: None,
                preamble: vec![],
                turns: vec![format!("[coding {i}] say something")],
                ..Default::default()
            })
            .collect(),
    }
}

/// Starts the simulated server with `config` on an ephemeral loopback port.
pub(crate) async fn start_sim(config: SimConfig) -> SimServer {
    SimServer::start(config, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap()
}

/// Runs `dataset` against `target` and reads the records back.
pub(crate) async fn profile(
    dir: &Path,
    dataset: Dataset,
    target: Target,
    load: Load,
) -> Vec<RequestRecord> {
    profile_outcome(dir, dataset, target, load).await.1
}

/// [`profile`], with the run's outcome beside the records.
pub(crate) async fn profile_outcome(
    dir: &Path,
    dataset: Dataset,
    target: Target,
    load: Load,
) -> (RunOutcome, Vec<RequestRecord>) {
    // The in-memory sink sees exactly what the file holds.
    let (sink, in_memory) = speedbench_client::VecSink::new();
    let run = ProfileRun::new(dataset, target, dir)
        .with_load(load)
        .with_run_id("t")
        .with_sink(sink);
    let outcome = run_profile(run, StopHandle::new(), Arc::new(Progress::default()))
        .await
        .unwrap();
    let file = read_records_file(&outcome.records_path).unwrap();
    // What the run read back for summary.json, in passes over the file
    // without holding it, is what the records in memory give.
    let back = outcome
        .read_back
        .as_ref()
        .expect("the records were read back");
    assert_eq!(back.manifest, file.manifest);
    assert_eq!(
        back.metrics,
        speedbench_metrics::RunMetrics::from_records(&file.records)
    );
    assert_eq!(
        back.digest,
        speedbench_metrics::RecordsDigest::of(&file.records)
    );
    assert_eq!(
        back.llamacpp_timings,
        speedbench_metrics::has_llamacpp_timings(&file.records)
    );
    let records = file.records;
    assert_eq!(in_memory.take(), records, "the sink and the file disagree");
    (outcome, records)
}

/// A streaming target at `url` for model `m`.
pub(crate) fn target(url: &str) -> Target {
    Target::new(BaseUrl::parse(url).unwrap(), "m")
}
