//! A tiny raw-TCP HTTP/1.1 client for tests: Content-Length and chunked
//! bodies, with arrival timestamps for SSE events.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A parsed response.
#[derive(Debug, Clone)]
pub(crate) struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// SSE `data:` payloads with the time (since the request was written)
    /// at which the read completing the event returned.
    pub events: Vec<(Duration, String)>,
}

impl HttpResponse {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    pub(crate) fn text(&self) -> String {
        String::from_utf8(self.body.clone()).expect("UTF-8 body")
    }

    /// SSE payloads parsed as JSON, excluding `[DONE]`.
    pub(crate) fn chunks(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|(_, d)| d != "[DONE]")
            .map(|(_, d)| serde_json::from_str(d).expect("JSON chunk"))
            .collect()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

struct Head {
    status: u16,
    headers: Vec<(String, String)>,
    chunked: bool,
    length: Option<usize>,
}

fn parse_head(raw: &[u8]) -> Head {
    let text = std::str::from_utf8(raw).expect("ASCII head");
    let mut lines = text.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status code");
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header line");
            (k.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    let get = |n: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(n))
            .map(|(_, v)| v.clone())
    };
    Head {
        status,
        chunked: get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")),
        length: get("content-length").and_then(|v| v.parse().ok()),
        headers,
    }
}

/// Reads one response from `tcp` (which may stay open for keep-alive).
pub(crate) async fn read_response(tcp: &mut TcpStream, start: Instant) -> HttpResponse {
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut head: Option<Head> = None;
    let mut cursor = 0;
    let mut body = Vec::new();
    let mut sse_scan = 0;
    let mut events = Vec::new();
    loop {
        let n = tcp.read(&mut buf).await.expect("read");
        let now = start.elapsed();
        raw.extend_from_slice(&buf[..n]);
        if head.is_none()
            && let Some(i) = find(&raw, b"\r\n\r\n")
        {
            head = Some(parse_head(&raw[..i]));
            cursor = i + 4;
        }
        let mut done = n == 0;
        if let Some(h) = &head {
            if h.chunked {
                while let Some(line_len) = find(&raw[cursor..], b"\r\n") {
                    let size_text =
                        std::str::from_utf8(&raw[cursor..cursor + line_len]).expect("hex");
                    let size = usize::from_str_radix(size_text.trim(), 16).expect("chunk size");
                    let data_start = cursor + line_len + 2;
                    if raw.len() < data_start + size + 2 {
                        break;
                    }
                    body.extend_from_slice(&raw[data_start..data_start + size]);
                    cursor = data_start + size + 2;
                    if size == 0 {
                        done = true;
                        break;
                    }
                }
            } else {
                let want = h.length.unwrap_or(usize::MAX);
                let take = (raw.len() - cursor).min(want - body.len());
                body.extend_from_slice(&raw[cursor..cursor + take]);
                cursor += take;
                done |= body.len() == want;
            }
            while let Some(i) = find(&body[sse_scan..], b"\n\n") {
                let event =
                    std::str::from_utf8(&body[sse_scan..sse_scan + i]).expect("UTF-8 event");
                for line in event.lines() {
                    if let Some(d) = line.strip_prefix("data: ") {
                        events.push((now, d.to_owned()));
                    }
                }
                sse_scan += i + 2;
            }
        }
        if done {
            break;
        }
    }
    let h = head.expect("response head");
    let is_sse = h
        .headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("content-type") && v.starts_with("text/event-stream"));
    HttpResponse {
        status: h.status,
        headers: h.headers,
        body,
        events: if is_sse { events } else { Vec::new() },
    }
}

/// Writes one request on `tcp`.
pub(crate) async fn write_request(
    tcp: &mut TcpStream,
    method: &str,
    path: &str,
    body: Option<&str>,
    close: bool,
) {
    let body = body.unwrap_or("");
    let conn = if close { "close" } else { "keep-alive" };
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: {conn}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.expect("write");
}

/// One request on a fresh connection.
pub(crate) async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> HttpResponse {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.set_nodelay(true).expect("nodelay");
    write_request(&mut tcp, method, path, body, true).await;
    let start = Instant::now();
    read_response(&mut tcp, start).await
}

/// `POST` a JSON value.
pub(crate) async fn post(addr: SocketAddr, path: &str, body: &Value) -> HttpResponse {
    send(addr, "POST", path, Some(&body.to_string())).await
}

/// A chat request body with one user message.
pub(crate) fn chat(content: &str, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "model": "anything",
        "messages": [{"role": "user", "content": content}],
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

/// Concatenated content of streamed chunks (chat `delta.content` or completions `text`).
pub(crate) fn streamed_text(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter_map(|c| c["choices"].get(0))
        .filter_map(|ch| ch["delta"]["content"].as_str().or(ch["text"].as_str()))
        .collect()
}

/// Chunks with non-empty content.
pub(crate) fn content_chunks(chunks: &[Value]) -> Vec<&Value> {
    chunks
        .iter()
        .filter(|c| {
            c["choices"].get(0).is_some_and(|ch| {
                ch["delta"]["content"]
                    .as_str()
                    .or(ch["text"].as_str())
                    .is_some_and(|s| !s.is_empty())
            })
        })
        .collect()
}

/// Sum of all samples of a Prometheus metric name (across label sets).
pub(crate) fn prom_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .map(|l| {
            l.rsplit(' ')
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .expect("sample value")
        })
        .sum()
}
