//! A failed connection keeps its cause: refused, TLS and closed connections
//! are told apart from the error alone.

use std::time::Duration;

use speedbench_http::{ClientOptions, ConnectFailure, HttpError, describe, get, new_client};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

async fn fail(url: &str) -> HttpError {
    let client = new_client(&ClientOptions::default()).unwrap();
    get(&client, url, &[], Duration::from_secs(10))
        .await
        .unwrap_err()
}

/// A loopback port nothing listens on.
async fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

/// Serves every connection with `reply` after reading what the client sent.
async fn serve(reply: &'static [u8]) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let _ = sock.write_all(reply).await;
                // Dropping the socket closes it.
            });
        }
    });
    port
}

#[tokio::test]
async fn refused_tls_and_closed_are_told_apart() {
    let refused = fail(&format!("http://127.0.0.1:{}/", free_port().await)).await;
    assert_eq!(refused.connect_failure(), Some(ConnectFailure::Refused));

    // Plain HTTP where TLS was expected.
    let plain = serve(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let tls = fail(&format!("https://127.0.0.1:{plain}/")).await;
    assert_eq!(tls.connect_failure(), Some(ConnectFailure::Tls), "{tls}");

    // Accepted, then closed without an answer.
    let closing = serve(b"").await;
    let closed = fail(&format!("http://127.0.0.1:{closing}/")).await;
    assert_eq!(
        closed.connect_failure(),
        Some(ConnectFailure::Closed),
        "{closed}"
    );

    // The cause is a source, and spelling the chain out repeats nothing.
    let source = std::error::Error::source(&refused).expect("a source");
    assert!(source.to_string().contains("client error"), "{source}");
    let text = describe(&refused);
    assert_eq!(text.matches("Connection refused").count(), 1, "{text}");
    assert!(text.starts_with("http://127.0.0.1:"), "{text}");

    // Not a connection error at all.
    let invalid = fail("http://[::1/").await;
    assert_eq!(invalid.connect_failure(), None);
}

/// hyper-util's connector reports a failed lookup as "dns error" over the
/// resolver's error; a test cannot resolve a name without the network, so
/// the chain is built here the way hyper-util builds it.
#[test]
fn a_failed_lookup_is_dns() {
    #[derive(Debug)]
    struct Named(&'static str, Option<std::io::Error>);
    impl std::fmt::Display for Named {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl std::error::Error for Named {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_ref().map(|e| e as _)
        }
    }
    let lookup = std::io::Error::other("failed to lookup address information");
    let chain = Named("client error (Connect)", None);
    assert_eq!(ConnectFailure::of(&chain), ConnectFailure::Other);
    let dns = Named("dns error", Some(lookup));
    assert_eq!(ConnectFailure::of(&dns), ConnectFailure::Dns);
}
