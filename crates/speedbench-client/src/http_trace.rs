//! `http_trace.jsonl` (`--export-http-trace`, AIPerf's `artifacts.trace`):
//! each request's HTTP trace, its moments on the wall clock, in the field
//! names of AIPerf 0.13.0's `AioHttpTraceDataExport`.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use speedbench_http::{ResponseDetail, WireTrace};

/// One line of `http_trace.jsonl`: how one request's connection was had and
/// when its bytes went and came, as Unix nanoseconds.
///
/// Written for every request the lean HTTP/1.1 client carried as far as a
/// response head; the join key with `records.parquet` is `request_index`.
/// The phases of the record's `http_*` columns are differences of these
/// moments: sending is `request_send_end_ns - request_send_start_ns`,
/// waiting `response_receive_start_ns - request_send_end_ns`, receiving
/// `response_receive_end_ns - response_receive_start_ns`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpTraceLine {
    /// The run, as in `records.parquet`'s `run_id`.
    pub run_id: String,
    /// The request, as in `records.parquet`'s `request_index`.
    pub request_index: u64,
    /// Conversation (row) identifier.
    pub conversation_id: String,
    /// Turn within the conversation, from 0.
    pub turn_index: u32,
    /// True for warmup requests.
    pub warmup: bool,
    /// The client that traced it: `speedbench_h1`.
    pub trace_type: String,
    /// When the request was handed to the connection pool.
    pub connection_pool_wait_start_ns: Option<i64>,
    /// When its connection was in hand or began to connect.
    pub connection_pool_wait_end_ns: Option<i64>,
    /// The host name's lookup; null for an IP literal or a reused
    /// connection.
    pub dns_lookup_start_ns: Option<i64>,
    /// The lookup's end.
    pub dns_lookup_end_ns: Option<i64>,
    /// The TCP connect, after DNS; null for a reused connection.
    pub tcp_connect_start_ns: Option<i64>,
    /// The connect's end.
    pub tcp_connect_end_ns: Option<i64>,
    /// Whether the request went out on a kept-alive connection.
    pub connection_reused: bool,
    /// The connection's local address.
    pub local_ip: Option<String>,
    /// The connection's local port.
    pub local_port: Option<u16>,
    /// The server's address.
    pub remote_ip: Option<String>,
    /// The server's port.
    pub remote_port: Option<u16>,
    /// The request's first write (the record's `start_time` when it was
    /// written once).
    pub request_send_start_ns: Option<i64>,
    /// When its last byte had been handed to the kernel.
    pub request_send_end_ns: Option<i64>,
    /// Writes that carried the request.
    pub request_chunks_count: u64,
    /// Bytes of the request's body.
    pub request_bytes_total: u64,
    /// The response's status.
    pub response_status_code: Option<u16>,
    /// The status line's reason phrase.
    pub response_reason: Option<String>,
    /// When the response head arrived.
    pub response_headers_received_ns: Option<i64>,
    /// The response's headers (scrubbed of the run's credentials); a
    /// header sent several times has its values joined by `, `.
    pub response_headers: BTreeMap<String, String>,
    /// When the body's first byte arrived (the head's, for an empty body).
    pub response_receive_start_ns: Option<i64>,
    /// Each read that brought body bytes: when it arrived and how many.
    pub response_chunks: Vec<(i64, u64)>,
    /// Reads that brought body bytes.
    pub response_chunks_count: u64,
    /// Bytes of the response's body, chunked framing removed.
    pub response_bytes_total: u64,
    /// When the response's last byte arrived.
    pub response_receive_end_ns: Option<i64>,
}

/// What names one request in `http_trace.jsonl`.
pub(crate) struct TraceKey<'a> {
    pub run_id: &'a str,
    pub request_index: u64,
    pub conversation_id: &'a str,
    pub turn_index: u32,
    pub warmup: bool,
}

impl HttpTraceLine {
    /// The line of one request from its trace, its response's detail and
    /// its status, with `unix` placing an instant on the wall clock.
    pub(crate) fn of(
        key: TraceKey<'_>,
        wire: &WireTrace,
        detail: Option<ResponseDetail>,
        status: Option<u16>,
        unix: &dyn Fn(Instant) -> i64,
    ) -> HttpTraceLine {
        let at = |i: Option<Instant>| i.map(unix);
        let detail = detail.unwrap_or_default();
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (name, value) in detail.headers {
            headers
                .entry(name.to_ascii_lowercase())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        let (local, remote) = wire.addrs.unzip();
        let moments = wire.exchange_moments();
        let moment = |i: usize| moments.map(|m| unix(m[i]));
        HttpTraceLine {
            run_id: key.run_id.to_string(),
            request_index: key.request_index,
            conversation_id: key.conversation_id.to_string(),
            turn_index: key.turn_index,
            warmup: key.warmup,
            trace_type: "speedbench_h1".into(),
            connection_pool_wait_start_ns: at(wire.asked),
            connection_pool_wait_end_ns: at(wire.connect_began.or(wire.connection_ready)),
            dns_lookup_start_ns: at(wire.dns.map(|d| d.0)),
            dns_lookup_end_ns: at(wire.dns.map(|d| d.1)),
            tcp_connect_start_ns: at(wire.tcp_connect.map(|c| c.0)),
            tcp_connect_end_ns: at(wire.tcp_connect.map(|c| c.1)),
            connection_reused: wire.reused,
            local_ip: local.map(|a| a.ip().to_string()),
            local_port: local.map(|a| a.port()),
            remote_ip: remote.map(|a| a.ip().to_string()),
            remote_port: remote.map(|a| a.port()),
            request_send_start_ns: moment(0),
            request_send_end_ns: moment(1),
            request_chunks_count: u64::from(wire.writes),
            request_bytes_total: wire.body_bytes_sent,
            response_status_code: status,
            response_reason: (!detail.reason.is_empty()).then_some(detail.reason),
            response_headers_received_ns: at(wire.head_received),
            response_headers: headers,
            response_receive_start_ns: moment(2),
            response_chunks: (detail.body_reads.into_iter())
                .map(|(t, n)| (unix(t), n))
                .collect(),
            response_chunks_count: u64::from(wire.body_reads),
            response_bytes_total: wire.body_bytes_received,
            response_receive_end_ns: moment(3),
        }
    }
}
