//! The HTTP phases of a run's requests (AIPerf's "HTTP Trace Timing"
//! table, `--show-trace-timing`): where each request's time went at the
//! transport layer.

use serde::{Deserialize, Serialize};
use speedbench_record::{HttpPhases, RequestRecord};

use crate::measured::is_measured;
use crate::passes::{PassFold, run_passes};
use crate::summary::Summary;
use crate::summary_passes::{SummaryPasses, end_passes};

const NS_PER_MS: f64 = 1e6;

/// AIPerf's kilobyte (`MetricSizeUnit.KILOBYTES`: 1,024 bytes).
const BYTES_PER_KB: f64 = 1024.0;

/// Per-request distributions of the HTTP phases over the measured
/// requests that carry them ([`RequestRecord::http_phases`]), named by
/// AIPerf 0.13.0's metric tags, in its display order. Times in ms, data in
/// KB of 1,024 bytes, as AIPerf displays them.
///
/// Each request's `duration` is `sending + waiting + receiving` (its first
/// write to its last byte), its `connection_overhead` is `blocked +
/// dns_lookup + connecting` and its `total` the six phases together, as
/// AIPerf's `http_req_duration`, `http_req_connection_overhead` and
/// `http_req_total` are. `connection_reused` is 1 or 0 per request: its
/// `avg` is the share of requests sent on a kept-alive connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpTraceMetrics {
    /// Measured requests that carry phases.
    pub requests: u64,
    /// Measured requests without them: sent over TLS or hyper's client
    /// (`--http-client hyper`), which time no phases.
    pub without_phases: u64,
    /// `http_req_blocked` (ms).
    pub blocked_ms: Option<Summary>,
    /// `http_req_dns_lookup` (ms).
    pub dns_lookup_ms: Option<Summary>,
    /// `http_req_connecting` (ms).
    pub connecting_ms: Option<Summary>,
    /// `http_req_sending` (ms).
    pub sending_ms: Option<Summary>,
    /// `http_req_waiting`, the time to first byte (ms).
    pub waiting_ms: Option<Summary>,
    /// `http_req_receiving` (ms).
    pub receiving_ms: Option<Summary>,
    /// `http_req_connection_reused` (1 or 0 per request).
    pub connection_reused: Option<Summary>,
    /// `http_req_data_sent` (KB).
    pub data_sent_kb: Option<Summary>,
    /// `http_req_chunks_sent`.
    pub chunks_sent: Option<Summary>,
    /// `http_req_data_received` (KB).
    pub data_received_kb: Option<Summary>,
    /// `http_req_chunks_received`.
    pub chunks_received: Option<Summary>,
    /// `http_req_connection_overhead` (ms).
    pub connection_overhead_ms: Option<Summary>,
    /// `http_req_duration` (ms).
    pub duration_ms: Option<Summary>,
    /// `http_req_total` (ms).
    pub total_ms: Option<Summary>,
}

/// One request's value of each figure, in [`HttpTraceMetrics`]' order.
fn values(p: &HttpPhases) -> [f64; 14] {
    let ms = |ns: u64| ns as f64 / NS_PER_MS;
    let overhead = p.blocked_ns + p.dns_lookup_ns + p.connecting_ns;
    let duration = p.sending_ns + p.waiting_ns + p.receiving_ns;
    [
        ms(p.blocked_ns),
        ms(p.dns_lookup_ns),
        ms(p.connecting_ns),
        ms(p.sending_ns),
        ms(p.waiting_ns),
        ms(p.receiving_ns),
        f64::from(u8::from(p.connection_reused)),
        p.bytes_sent as f64 / BYTES_PER_KB,
        p.chunks_sent as f64,
        p.bytes_received as f64 / BYTES_PER_KB,
        p.chunks_received as f64,
        ms(overhead),
        ms(duration),
        ms(overhead + duration),
    ]
}

impl HttpTraceMetrics {
    /// The figures of `records`; `None` when no measured one carries
    /// phases.
    pub fn from_records(records: &[RequestRecord]) -> Option<HttpTraceMetrics> {
        let mut fold = HttpTraceFold::default();
        let Ok(()) = run_passes(records, &mut fold, &mut |_| {});
        fold.finish()
    }
}

/// [`HttpTraceMetrics`] folded over records read in passes.
#[derive(Debug, Default)]
pub(crate) struct HttpTraceFold {
    requests: u64,
    without_phases: u64,
    figures: [SummaryPasses; 14],
}

impl PassFold for HttpTraceFold {
    fn add(&mut self, pass: u32, r: &RequestRecord) {
        if !is_measured(r) {
            return;
        }
        let Some(phases) = &r.http_phases else {
            self.without_phases += u64::from(pass == 0);
            return;
        };
        self.requests += u64::from(pass == 0);
        for (figure, value) in self.figures.iter_mut().zip(values(phases)) {
            figure.add(value);
        }
    }

    fn end_pass(&mut self) -> bool {
        end_passes(&mut self.figures)
    }
}

impl HttpTraceFold {
    pub(crate) fn finish(&self) -> Option<HttpTraceMetrics> {
        if self.requests == 0 {
            return None;
        }
        let [
            blocked_ms,
            dns_lookup_ms,
            connecting_ms,
            sending_ms,
            waiting_ms,
            receiving_ms,
            connection_reused,
            data_sent_kb,
            chunks_sent,
            data_received_kb,
            chunks_received,
            connection_overhead_ms,
            duration_ms,
            total_ms,
        ] = self.figures.each_ref().map(SummaryPasses::finish);
        Some(HttpTraceMetrics {
            requests: self.requests,
            without_phases: self.without_phases,
            blocked_ms,
            dns_lookup_ms,
            connecting_ms,
            sending_ms,
            waiting_ms,
            receiving_ms,
            connection_reused,
            data_sent_kb,
            chunks_sent,
            data_received_kb,
            chunks_received,
            connection_overhead_ms,
            duration_ms,
            total_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    fn with(phases: Option<HttpPhases>) -> RequestRecord {
        RequestRecord {
            http_phases: phases,
            ..Default::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    /// Two requests' phases by hand: a new connection and a reused one.
    #[test]
    fn figures_by_hand() {
        let new = HttpPhases {
            blocked_ns: 10_000,
            dns_lookup_ns: 0,
            connecting_ns: 90_000,
            sending_ns: 20_000,
            waiting_ns: 5_000_000,
            receiving_ns: 15_000_000,
            connection_reused: false,
            bytes_sent: 2_048,
            bytes_received: 10_240,
            chunks_sent: 1,
            chunks_received: 17,
        };
        let reused = HttpPhases {
            blocked_ns: 2_000,
            connecting_ns: 0,
            sending_ns: 10_000,
            waiting_ns: 3_000_000,
            receiving_ns: 7_000_000,
            connection_reused: true,
            bytes_sent: 1_024,
            bytes_received: 5_120,
            chunks_received: 9,
            ..new
        };
        let mut failed = with(Some(new));
        failed.error_kind = Some(ErrorKind::Timeout);
        let mut warmup = with(Some(new));
        warmup.warmup = true;
        let records = [
            with(Some(new)),
            with(Some(reused)),
            with(None),
            failed,
            warmup,
        ];
        let m = HttpTraceMetrics::from_records(&records).unwrap();
        assert_eq!((m.requests, m.without_phases), (2, 1));
        let avg = |s: Option<Summary>| s.unwrap().avg;
        // Blocked: 0.010 and 0.002 ms; connecting 0.090 and 0.
        assert!(close(avg(m.blocked_ms), 0.006));
        assert!(close(avg(m.connecting_ms), 0.045));
        assert!(close(avg(m.dns_lookup_ms), 0.0));
        // Waiting 5 and 3 ms: p50 4, p90 3 + 0.9 * 2.
        let waiting = m.waiting_ms.unwrap();
        assert!(close(waiting.p50, 4.0) && close(waiting.p90, 4.8));
        // Duration: 20.02 and 10.01 ms; overhead 0.100 and 0.002 ms; the
        // total their sums, 20.12 and 10.012 ms.
        let duration = m.duration_ms.unwrap();
        assert!(close(duration.max, 20.02) && close(duration.min, 10.01));
        let overhead = m.connection_overhead_ms.unwrap();
        assert!(close(overhead.max, 0.1) && close(overhead.min, 0.002));
        let total = m.total_ms.unwrap();
        assert!(close(total.max, 20.12) && close(total.min, 10.012));
        // Half the requests reused a connection.
        assert!(close(avg(m.connection_reused), 0.5));
        // 2 and 1 KB sent, 10 and 5 KB received; 17 and 9 reads.
        assert!(close(avg(m.data_sent_kb), 1.5));
        assert!(close(avg(m.data_received_kb), 7.5));
        assert!(close(avg(m.chunks_received), 13.0));
        assert!(close(avg(m.chunks_sent), 1.0));
    }

    #[test]
    fn none_without_a_measured_request_with_phases() {
        assert_eq!(HttpTraceMetrics::from_records(&[with(None)]), None);
        assert_eq!(HttpTraceMetrics::from_records(&[]), None);
    }
}
