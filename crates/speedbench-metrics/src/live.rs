//! A run's figures while it runs, for a live view: they take each record
//! as it is written and hold memory that does not grow with the run
//! (percentiles from log-spaced buckets, each within 4.5% of the value;
//! the final figures in `summary.json` stay exact).

use std::collections::BTreeMap;

use serde::Serialize;
use speedbench_record::{ErrorKind, RequestRecord};

use crate::measured::is_sent;
use crate::request::RequestMetricsExt;

/// Buckets per doubling: a bucket spans a factor `2^(1/16)` (4.4%), and a
/// percentile is read as its bucket's geometric middle.
const PER_DOUBLING: f64 = 16.0;
/// The smallest value told apart, milliseconds (1 µs); below it, bucket 0.
const FLOOR_MS: f64 = 1e-3;
/// Buckets from 1 µs to about 10^7 ms (2.8 hours).
const BUCKETS: usize = 16 * 34;
/// Seconds the request rate is averaged over.
const RATE_WINDOW_S: usize = 10;

/// Counts of values in log-spaced buckets.
#[derive(Debug, Clone, PartialEq)]
struct LogHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl LogHistogram {
    fn new() -> LogHistogram {
        LogHistogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }

    fn bucket(ms: f64) -> usize {
        if ms <= FLOOR_MS {
            return 0;
        }
        let b = ((ms / FLOOR_MS).log2() * PER_DOUBLING).floor() as usize + 1;
        b.min(BUCKETS - 1)
    }

    fn add(&mut self, ms: f64) {
        if ms.is_finite() && ms >= 0.0 {
            self.counts[Self::bucket(ms)] += 1;
            self.total += 1;
        }
    }

    /// The `p`-th percentile (0-100): the middle of the bucket holding the
    /// value of rank `⌈p/100 · n⌉`.
    fn percentile(&self, p: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((p / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (b, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(match b {
                    0 => FLOOR_MS,
                    b => FLOOR_MS * ((b as f64 - 0.5) / PER_DOUBLING).exp2(),
                });
            }
        }
        None
    }
}

/// Speculation totals of one category so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct SpecTotals {
    requests: u64,
    accepted: u64,
    steps: u64,
    proposed: u64,
}

/// A run's figures as its records arrive (warmup records left out).
///
/// ```
/// use speedbench_metrics::LiveFigures;
/// use speedbench_record::{RequestRecord, SpecDecodeStats};
/// let mut live = LiveFigures::default();
/// let r = RequestRecord {
///     category: Some("math".into()),
///     start_unix_ns: 0,
///     end_unix_ns: 2_000_000_000,
///     e2e_latency_ns: 2_000_000_000,
///     ttft_ns: Some(100_000_000),
///     spec: Some(SpecDecodeStats { accepted_draft_tokens: 6, proposed_draft_tokens: 8, verify_steps: Some(4), ..Default::default() }),
///     ..Default::default()
/// };
/// live.add(&r);
/// let now = live.snapshot(2_000_000_000);
/// assert_eq!(now.succeeded, 1);
/// assert_eq!(now.categories[0].acceptance_length, Some(2.5));
/// assert!((now.ttft_ms.p50.unwrap() / 100.0 - 1.0).abs() < 0.045);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct LiveFigures {
    succeeded: u64,
    failed: BTreeMap<&'static str, u64>,
    client_cancelled: u64,
    ttft: LogHistogram,
    itl: LogHistogram,
    latency: LogHistogram,
    categories: BTreeMap<String, SpecTotals>,
    /// Requests ended in each of the last seconds, by Unix second.
    ends: [(i64, u64); RATE_WINDOW_S],
}

impl Default for LiveFigures {
    fn default() -> LiveFigures {
        LiveFigures {
            succeeded: 0,
            failed: BTreeMap::new(),
            client_cancelled: 0,
            ttft: LogHistogram::new(),
            itl: LogHistogram::new(),
            latency: LogHistogram::new(),
            categories: BTreeMap::new(),
            ends: [(i64::MIN, 0); RATE_WINDOW_S],
        }
    }
}

/// Three percentiles of one figure, milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LivePercentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

/// One category's acceptance so far.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveCategory {
    /// The category (`(none)` for rows without one).
    pub name: String,
    /// Requests that succeeded in it.
    pub requests: u64,
    /// Token-weighted acceptance length `1 + Σaccepted / Σsteps`, once
    /// steps were reported.
    pub acceptance_length: Option<f64>,
    /// `Σaccepted / Σproposed` in %, once drafts were proposed.
    pub acceptance_rate_pct: Option<f64>,
}

/// What a live view shows at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveSnapshot {
    /// Requests that succeeded.
    pub succeeded: u64,
    /// Requests that failed, by error kind's name, most first.
    pub failed: Vec<(String, u64)>,
    /// Requests cancelled on purpose.
    pub client_cancelled: u64,
    /// Requests ended per second over the last ten seconds.
    pub request_rate: f64,
    /// Time to first token.
    pub ttft_ms: LivePercentiles,
    /// Inter-token latency (each request's mean).
    pub itl_ms: LivePercentiles,
    /// Request latency.
    pub latency_ms: LivePercentiles,
    /// Acceptance per category, by name.
    pub categories: Vec<LiveCategory>,
}

impl LiveFigures {
    /// Takes one record (a warmup record or a skipped turn is left out).
    pub fn add(&mut self, r: &RequestRecord) {
        if !is_sent(r) {
            return;
        }
        self.count_end(r.end_unix_ns);
        match r.error_kind {
            Some(ErrorKind::ClientCancelled) => self.client_cancelled += 1,
            Some(kind) => *self.failed.entry(kind.as_str()).or_default() += 1,
            None => self.add_success(r),
        }
    }

    fn add_success(&mut self, r: &RequestRecord) {
        self.succeeded += 1;
        if let Some(t) = r.ttft_ns {
            self.ttft.add(t as f64 / 1e6);
        }
        if let Some(itl) = r.inter_token_latency_ms() {
            self.itl.add(itl);
        }
        self.latency.add(r.e2e_latency_ns as f64 / 1e6);
        let name = r.category.clone().unwrap_or_else(|| "(none)".into());
        let totals = self.categories.entry(name).or_default();
        totals.requests += 1;
        if let Some(spec) = &r.spec {
            totals.accepted += spec.accepted_draft_tokens;
            totals.proposed += spec.proposed_draft_tokens;
            totals.steps += spec.verify_steps.unwrap_or(0);
        }
    }

    fn count_end(&mut self, end_unix_ns: i64) {
        let second = end_unix_ns.div_euclid(1_000_000_000);
        let slot = &mut self.ends[second.rem_euclid(RATE_WINDOW_S as i64) as usize];
        if slot.0 != second {
            *slot = (second, 0);
        }
        slot.1 += 1;
    }

    /// The figures at `now_unix_ns`: the rate over the ten whole seconds
    /// before `now`'s.
    pub fn snapshot(&self, now_unix_ns: i64) -> LiveSnapshot {
        let now_s = now_unix_ns.div_euclid(1_000_000_000);
        let recent: u64 = self
            .ends
            .iter()
            .filter(|(s, _)| (now_s - RATE_WINDOW_S as i64..now_s).contains(s))
            .map(|(_, n)| n)
            .sum();
        let mut failed: Vec<(String, u64)> = self
            .failed
            .iter()
            .map(|(k, n)| (k.to_string(), *n))
            .collect();
        failed.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        let percentiles = |h: &LogHistogram| LivePercentiles {
            p50: h.percentile(50.0),
            p90: h.percentile(90.0),
            p99: h.percentile(99.0),
        };
        LiveSnapshot {
            succeeded: self.succeeded,
            failed,
            client_cancelled: self.client_cancelled,
            request_rate: recent as f64 / RATE_WINDOW_S as f64,
            ttft_ms: percentiles(&self.ttft),
            itl_ms: percentiles(&self.itl),
            latency_ms: percentiles(&self.latency),
            categories: self
                .categories
                .iter()
                .map(|(name, t)| LiveCategory {
                    name: name.clone(),
                    requests: t.requests,
                    acceptance_length: (t.steps > 0)
                        .then(|| 1.0 + t.accepted as f64 / t.steps as f64),
                    acceptance_rate_pct: (t.proposed > 0)
                        .then(|| 100.0 * t.accepted as f64 / t.proposed as f64),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::SpecDecodeStats;

    fn record(category: &str, ttft_ms: u64, end_s: i64) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            start_unix_ns: 0,
            end_unix_ns: end_s * 1_000_000_000,
            e2e_latency_ns: 3 * ttft_ms * 1_000_000,
            ttft_ns: Some(ttft_ms * 1_000_000),
            ..Default::default()
        }
    }

    #[test]
    fn percentiles_land_within_a_bucket_of_the_exact_ones() {
        let mut live = LiveFigures::default();
        // TTFTs of 1..=1000 ms: exact p50 500, p90 900, p99 990.
        for ms in 1..=1000 {
            live.add(&record("a", ms, 100));
        }
        let s = live.snapshot(101_000_000_000);
        for (got, exact) in [
            (s.ttft_ms.p50, 500.0),
            (s.ttft_ms.p90, 900.0),
            (s.ttft_ms.p99, 990.0),
        ] {
            let got = got.unwrap();
            assert!((got / exact - 1.0).abs() < 0.045, "{got} vs {exact}");
        }
        // The memory is the buckets', whatever the count.
        assert_eq!(live.ttft.counts.len(), BUCKETS);
    }

    #[test]
    fn acceptance_errors_and_rate_are_counted_by_hand() {
        let mut live = LiveFigures::default();
        let spec = |accepted, proposed, steps| SpecDecodeStats {
            accepted_draft_tokens: accepted,
            proposed_draft_tokens: proposed,
            verify_steps: Some(steps),
            ..Default::default()
        };
        // math: (4 + 2) accepted over (2 + 4) steps: 1 + 6/6 = 2.0; 6/12 proposed.
        live.add(&RequestRecord {
            spec: Some(spec(4, 4, 2)),
            ..record("math", 10, 50)
        });
        live.add(&RequestRecord {
            spec: Some(spec(2, 8, 4)),
            ..record("math", 10, 55)
        });
        live.add(&RequestRecord {
            error_kind: Some(ErrorKind::Timeout),
            ..record("math", 10, 58)
        });
        live.add(&RequestRecord {
            error_kind: Some(ErrorKind::Timeout),
            ..record("math", 10, 58)
        });
        live.add(&RequestRecord {
            error_kind: Some(ErrorKind::HttpStatus),
            ..record("x", 1, 59)
        });
        live.add(&RequestRecord {
            error_kind: Some(ErrorKind::ClientCancelled),
            ..record("x", 1, 59)
        });
        live.add(&RequestRecord {
            warmup: true,
            ..record("math", 10, 59)
        });
        live.add(&RequestRecord {
            error_kind: Some(ErrorKind::Skipped),
            ..record("x", 1, 59)
        });
        let s = live.snapshot(60_500_000_000);
        assert_eq!(s.succeeded, 2);
        assert_eq!(
            s.failed,
            [("timeout".to_string(), 2), ("http_status".to_string(), 1)]
        );
        assert_eq!(s.client_cancelled, 1);
        assert_eq!(s.categories.len(), 1);
        assert_eq!(s.categories[0].acceptance_length, Some(2.0));
        assert_eq!(s.categories[0].acceptance_rate_pct, Some(50.0));
        // Ended in seconds 50..60: 6 records (warmup and skipped left out).
        assert_eq!(s.request_rate, 0.6);
        // Ten seconds later, none of them counts.
        assert_eq!(live.snapshot(71_000_000_000).request_rate, 0.0);
    }
}
