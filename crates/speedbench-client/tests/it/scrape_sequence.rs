//! The scraper against a loopback `/metrics` endpoint that serves a fixed
//! sequence of expositions, one per scrape: a counter series that first
//! appears mid-run is counted from 0, not from its first value.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use speedbench_client::scrape::{Scrape, Scraper, SeriesStats, ServerMetricsExport};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `script[i]` to the `i`-th request (the last one once past the
/// end), one request per connection. Returns the URL and the served count.
async fn scripted_metrics(script: Vec<&'static str>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let i = count.load(Ordering::SeqCst);
            let body = script[i.min(script.len() - 1)];
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = sock.write_all(head.as_bytes()).await;
            let _ = sock.write_all(body.as_bytes()).await;
            let _ = sock.shutdown().await;
            count.fetch_add(1, Ordering::SeqCst);
        }
    });
    (url, served)
}

async fn wait_for(served: &AtomicUsize, n: usize) {
    for _ in 0..2000 {
        if served.load(Ordering::SeqCst) >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the endpoint was not scraped {n} times");
}

fn total(export: &ServerMetricsExport, name: &str) -> f64 {
    let m = &export.metrics[name];
    let series: Vec<f64> = m
        .series
        .iter()
        .map(|s| match &s.stats {
            Some(SeriesStats::Counter(c)) => c.total,
            other => panic!("{name}: {other:?}"),
        })
        .collect();
    assert_eq!(
        m.aggregate.as_ref().unwrap().total,
        series.iter().sum::<f64>()
    );
    series.iter().sum()
}

const BEFORE: &str = "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter\n\
    llamacpp:spec_decode_num_accepted_tokens_total 5\n";
/// The per-position series appear with the first drafts: 21 accepted at
/// position 0 and 8 at position 1 (llama-server publishes them only then).
const APPEARED: &str = "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter\n\
    llamacpp:spec_decode_num_accepted_tokens_total 34\n\
    # TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter\n\
    llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 21\n\
    llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 8\n";

fn config(url: &str) -> Scrape {
    let mut c = Scrape::new(vec![url.to_string()]);
    // One scheduled scrape (the immediate first tick); the rest are explicit.
    c.interval = Duration::from_secs(3600);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_that_appears_in_the_second_scrape_counts_from_zero() {
    let (url, served) = scripted_metrics(vec![BEFORE, APPEARED]).await;
    let scraper = Scraper::start(config(&url)).unwrap();
    wait_for(&served, 1).await;
    // Scrape 2 is the final one: the series appears there with 21 and 8.
    let export = scraper.finish(false).await;
    assert_eq!(served.load(Ordering::SeqCst), 2);
    // Present from scrape 1: measured from its first value, 34 - 5.
    assert_eq!(
        total(&export, "llamacpp:spec_decode_num_accepted_tokens"),
        29.0
    );
    // Absent from scrape 1: counted from 0, so 21 + 8 (0 before the fix).
    assert_eq!(
        total(&export, "llamacpp:spec_decode_num_accepted_tokens_per_pos"),
        29.0
    );
    let by = &export.metrics["llamacpp:spec_decode_num_accepted_tokens_per_pos"]
        .aggregate
        .as_ref()
        .unwrap()
        .by_position;
    assert_eq!((by["0"], by["1"]), (21.0, 8.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_series_that_appears_inside_the_window_counts_from_zero_and_one_from_warmup_does_not() {
    // Scrape 1 (start) and 2 (window opens) lack the series; scrape 3 has it.
    let (url, served) = scripted_metrics(vec![BEFORE, BEFORE, APPEARED]).await;
    let scraper = Scraper::start(config(&url)).unwrap();
    wait_for(&served, 1).await;
    scraper.mark_profiling_start().await;
    scraper.mark_profiling_end();
    let export = scraper.finish(false).await;
    assert_eq!(served.load(Ordering::SeqCst), 3);
    assert_eq!(
        total(&export, "llamacpp:spec_decode_num_accepted_tokens_per_pos"),
        29.0
    );

    // The series appears during warmup, in the scrape that opens the
    // window (scrape 2): what it counted before is excluded.
    const LATER: &str = "# TYPE llamacpp:spec_decode_num_accepted_tokens_total counter\n\
        llamacpp:spec_decode_num_accepted_tokens_total 40\n\
        # TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter\n\
        llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 25\n\
        llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 10\n";
    let (url, served) = scripted_metrics(vec![BEFORE, APPEARED, LATER]).await;
    let scraper = Scraper::start(config(&url)).unwrap();
    wait_for(&served, 1).await;
    scraper.mark_profiling_start().await;
    scraper.mark_profiling_end();
    let export = scraper.finish(false).await;
    assert_eq!(served.load(Ordering::SeqCst), 3);
    // (25 - 21) + (10 - 8) and 40 - 34: from the window's reference.
    assert_eq!(
        total(&export, "llamacpp:spec_decode_num_accepted_tokens_per_pos"),
        6.0
    );
    assert_eq!(
        total(&export, "llamacpp:spec_decode_num_accepted_tokens"),
        6.0
    );
}
