//! Figures over a window of a run: the steady state of a closed loop and
//! fixed-length time slices.
//!
//! One rule places a request in a window for every figure but throughput:
//! the window its request *started* in (AIPerf's time slices do the same),
//! so a latency is counted once. Throughput is what the window delivered:
//! the successful requests that *ended* in it, and their output tokens,
//! over its length. Times are seconds from the run's start, the earliest
//! start of a non-warmup request sent.

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::acceptance::{AcceptanceTotals, run_speculates};
use crate::measured::{is_measured, is_sent};
use crate::request::RequestMetricsExt;
use crate::summary::Summary;

const NS_PER_S: f64 = 1e9;

/// The figures of one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowFigures {
    /// Start, seconds from the run's start.
    pub start_s: f64,
    /// End, seconds from the run's start.
    pub end_s: f64,
    /// Successful requests that started in the window.
    pub requests: u64,
    /// Failed requests that started in the window.
    pub failed: u64,
    /// Successful requests that ended in the window, per second of it.
    pub request_throughput: Option<f64>,
    /// Their output tokens, per second of the window.
    pub output_token_throughput: Option<f64>,
    /// TTFT of the requests started in the window (ms).
    pub ttft_ms: Option<Summary>,
    /// Their inter-token latency (ms).
    pub inter_token_latency_ms: Option<Summary>,
    /// Their end-to-end latency (ms).
    pub request_latency_ms: Option<Summary>,
    /// Their token-weighted acceptance length `1 + Σaccepted / Σsteps`.
    pub acceptance_length: Option<f64>,
    /// Their draft acceptance rate `Σaccepted / Σproposed` (%).
    pub draft_acceptance_rate_pct: Option<f64>,
}

/// The records of a run as windows see them: sent, outside the warmup.
struct Timeline<'a> {
    records: Vec<&'a RequestRecord>,
    /// The earliest start, Unix ns.
    origin: i64,
    /// The latest end, Unix ns.
    last_end: i64,
    speculates: bool,
}

impl<'a> Timeline<'a> {
    fn of(records: &'a [RequestRecord]) -> Option<Timeline<'a>> {
        let sent: Vec<&RequestRecord> = records.iter().filter(|r| is_sent(r)).collect();
        let origin = sent.iter().map(|r| r.start_unix_ns).min()?;
        let last_end = sent
            .iter()
            .map(|r| r.end_unix_ns.max(r.start_unix_ns))
            .max()?;
        Some(Timeline {
            records: sent,
            origin,
            last_end,
            speculates: run_speculates(records),
        })
    }

    fn seconds(&self, unix_ns: i64) -> f64 {
        (unix_ns - self.origin) as f64 / NS_PER_S
    }

    /// The figures of the window `(from, to)` (Unix ns) from the requests
    /// that `started` in it and those that `ended` in it.
    fn figures_of(
        &self,
        (from, to): (i64, i64),
        started: &[&RequestRecord],
        ended: &[&RequestRecord],
    ) -> WindowFigures {
        let ok: Vec<&RequestRecord> = started.iter().copied().filter(|r| is_measured(r)).collect();
        let summarize = |f: &dyn Fn(&RequestRecord) -> Option<f64>| {
            Summary::of(&ok.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
        };
        let mut totals = AcceptanceTotals::default();
        for r in &ok {
            totals.add_record(r, self.speculates);
        }
        let (done, tokens) = (ended.iter())
            .filter(|r| is_measured(r))
            .fold((0u64, 0u64), |(n, t), r| {
                (n + 1, t + r.completion_tokens.unwrap_or(0))
            });
        let length_s = (to - from).max(0) as f64 / NS_PER_S;
        let per_second = |n: u64| (length_s > 0.0).then(|| n as f64 / length_s);
        WindowFigures {
            start_s: self.seconds(from),
            end_s: self.seconds(to),
            requests: ok.len() as u64,
            failed: (started.len() - ok.len()) as u64,
            request_throughput: per_second(done),
            output_token_throughput: per_second(tokens),
            ttft_ms: summarize(&|r| r.ttft_ms()),
            inter_token_latency_ms: summarize(&|r| r.inter_token_latency_ms()),
            request_latency_ms: summarize(&|r| Some(r.request_latency_ms())),
            acceptance_length: totals.accept_length(),
            draft_acceptance_rate_pct: totals.accept_rate().map(|r| r * 100.0),
        }
    }
}

/// One slice of `--slice-duration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeSlice {
    /// 0 for the first slice.
    pub index: usize,
    /// False for the last slice when the run ended before its full length
    /// (its figures are over the shorter span).
    pub complete: bool,
    /// Its figures.
    #[serde(flatten)]
    pub figures: WindowFigures,
}

/// The run cut into consecutive slices of `duration_s` seconds from its
/// start, the last one ending with the run; every slice is listed, an empty
/// one too. Empty without a request sent or with a duration not above 0.
pub fn time_slices(records: &[RequestRecord], duration_s: f64) -> Vec<TimeSlice> {
    let Some(timeline) = Timeline::of(records) else {
        return Vec::new();
    };
    if !(duration_s.is_finite() && duration_s > 0.0) {
        return Vec::new();
    }
    let step = ((duration_s * NS_PER_S) as i64).max(1);
    let span = timeline.last_end - timeline.origin;
    let count = (span / step + 1) as usize;
    // Each request into the slice it started in and the one it ended in,
    // in one pass: slice i is [origin + i·step, origin + (i+1)·step), the
    // last one closed at the run's end.
    let slot = |t: i64| (((t - timeline.origin).max(0) / step) as usize).min(count - 1);
    let mut started: Vec<Vec<&RequestRecord>> = vec![Vec::new(); count];
    let mut ended: Vec<Vec<&RequestRecord>> = vec![Vec::new(); count];
    for r in &timeline.records {
        started[slot(r.start_unix_ns)].push(r);
        ended[slot(r.end_unix_ns)].push(r);
    }
    (0..count)
        .map(|i| {
            let from = timeline.origin + i as i64 * step;
            let full_end = from + step;
            let to = if i + 1 == count {
                timeline.last_end.min(full_end)
            } else {
                full_end
            };
            TimeSlice {
                index: i,
                complete: full_end <= timeline.last_end,
                figures: timeline.figures_of((from, to), &started[i], &ended[i]),
            }
        })
        .collect()
}

/// How the steady state of a closed loop is found.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SteadyStateOptions {
    /// The run's concurrency (requests it keeps in flight).
    pub concurrency: usize,
    /// The share of it that counts as steady: 0.95 by default.
    pub threshold: f64,
    /// The shortest window reported, seconds.
    pub min_window_s: f64,
}

impl SteadyStateOptions {
    /// The default share of the concurrency in flight.
    pub const DEFAULT_THRESHOLD: f64 = 0.95;
    /// The default shortest window, seconds.
    pub const DEFAULT_MIN_WINDOW_S: f64 = 1.0;

    /// Requests in flight that count as steady: `⌈threshold × concurrency⌉`,
    /// at least 1.
    pub fn level(&self) -> usize {
        ((self.threshold * self.concurrency as f64) - 1e-9)
            .ceil()
            .max(1.0) as usize
    }
}

/// The steady state of a closed-loop run: the window from the moment the
/// requests in flight first reached [`SteadyStateOptions::level`] to the
/// last moment they fell below it (the ramp-up and the drain left out;
/// the instants between one request's end and the next one's start
/// inside it do not end it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyState {
    /// How it was found.
    pub options: SteadyStateOptions,
    /// Requests in flight it needed.
    pub level: usize,
    /// Its figures; `None` when there was none long enough ([`SteadyState::why_none`]).
    pub window: Option<WindowFigures>,
    /// Why there is no window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_none: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    const S: i64 = 1_000_000_000;

    /// A streamed success from `start` to `end` (seconds, as ms-precise
    /// floats), 10 output tokens, TTFT 100 ms.
    fn req(start: f64, end: f64) -> RequestRecord {
        let start_ns = (start * 1e9) as i64;
        let end_ns = (end * 1e9) as i64;
        RequestRecord {
            start_unix_ns: 100 * S + start_ns,
            end_unix_ns: 100 * S + end_ns,
            e2e_latency_ns: (end_ns - start_ns) as u64,
            ttft_ns: Some(100_000_000),
            completion_tokens: Some(10),
            ..Default::default()
        }
    }

    #[test]
    fn slices_place_latency_by_start_and_throughput_by_end() {
        // 0-1.5, 0.5-2.5, 2.2-2.6 (failed), 2.7-4.0: the run spans 4 s.
        let mut failed = req(2.2, 2.6);
        failed.error_kind = Some(ErrorKind::Timeout);
        let records = vec![req(0.0, 1.5), req(0.5, 2.5), failed, req(2.7, 4.0)];
        let slices = time_slices(&records, 1.5);
        let shape: Vec<(f64, f64, bool, u64, u64)> = slices
            .iter()
            .map(|s| {
                (
                    s.figures.start_s,
                    s.figures.end_s,
                    s.complete,
                    s.figures.requests,
                    s.figures.failed,
                )
            })
            .collect();
        assert_eq!(
            shape,
            [
                (0.0, 1.5, true, 2, 0),
                (1.5, 3.0, true, 1, 1),
                (3.0, 4.0, false, 0, 0),
            ]
        );
        // Throughput by end: slice 0 ends none before 1.5 (the 1.5 end is
        // in slice 1), slice 1 ends 1.5 and 2.5, slice 2 ends 4.0 (the
        // last slice takes its end).
        let rates: Vec<Option<f64>> = slices
            .iter()
            .map(|s| s.figures.request_throughput)
            .collect();
        assert_eq!(rates, [Some(0.0), Some(2.0 / 1.5), Some(1.0)]);
        assert_eq!(slices[1].figures.output_token_throughput, Some(20.0 / 1.5));
        // Latency of the two started in slice 0: 1500 and 2000 ms.
        assert_eq!(slices[0].figures.request_latency_ms.unwrap().avg, 1750.0);
        assert!(slices[2].figures.request_latency_ms.is_none());
        assert!(time_slices(&records, 0.0).is_empty());
        assert!(time_slices(&[], 1.0).is_empty());
    }

    #[test]
    fn one_pass_placement_equals_filtering_each_slice() {
        let mut rng = crate::SplitMix64::new(7);
        let records: Vec<RequestRecord> = (0..500)
            .map(|_| {
                let start = (rng.next_f64() * 20.0 * 1e3).round() / 1e3;
                req(start, start + (rng.next_f64() * 3.0 * 1e3).round() / 1e3)
            })
            .collect();
        let slices = time_slices(&records, 0.7);
        let origin = records.iter().map(|r| r.start_unix_ns).min().unwrap();
        let last_end = records.iter().map(|r| r.end_unix_ns).max().unwrap();
        for s in &slices {
            let from = origin + (s.figures.start_s * 1e9).round() as i64;
            let to = origin + (s.figures.end_s * 1e9).round() as i64;
            let last = s.index + 1 == slices.len();
            let inside = |t: i64| t >= from && (t < to || last && t == last_end);
            let started = records.iter().filter(|r| inside(r.start_unix_ns)).count() as u64;
            let ended = records.iter().filter(|r| inside(r.end_unix_ns)).count() as f64;
            assert_eq!(s.figures.requests, started, "slice {}", s.index);
            let length = s.figures.end_s - s.figures.start_s;
            if length > 0.0 {
                let rate = s.figures.request_throughput.unwrap();
                assert!((rate * length - ended).abs() < 1e-6, "slice {}", s.index);
            }
        }
        assert_eq!(slices.iter().map(|s| s.figures.requests).sum::<u64>(), 500);
    }

    #[test]
    fn a_slice_as_long_as_the_run_is_one_complete_slice_plus_its_end() {
        let records = vec![req(0.0, 2.0)];
        let slices = time_slices(&records, 5.0);
        assert_eq!(slices.len(), 1);
        assert!(!slices[0].complete);
        assert_eq!(slices[0].figures.request_throughput, Some(0.5));
    }

    #[test]
    fn steady_state_spans_first_reach_to_last_fall_of_the_level() {
        // Concurrency 4, threshold 0.75: level 3. In flight: 1 at 0, 2 at
        // 0.5, 3 at 1.0 (the window opens), a handover at 3.0/3.0, 2 at
        // 5.0 (the window closes), then the drain.
        let records = vec![
            req(0.0, 5.0),
            req(0.5, 3.0),
            req(3.0, 6.0),
            req(1.0, 7.0),
            req(1.2, 1.8), // a short one that started inside the window
        ];
        let options = SteadyStateOptions {
            concurrency: 4,
            threshold: 0.75,
            min_window_s: 1.0,
        };
        let steady = SteadyState::of(&records, options).unwrap();
        assert_eq!(steady.level, 3);
        let w = steady.window.unwrap();
        assert_eq!((w.start_s, w.end_s), (1.0, 5.0));
        // Started inside [1, 5): the ones at 1.0, 1.2 and 3.0.
        assert_eq!(w.requests, 3);
        // Ended inside [1, 5): at 1.8 and 3.0 (5.0 is the window's end).
        assert_eq!(w.request_throughput, Some(2.0 / 4.0));
        assert_eq!(
            w.request_latency_ms.unwrap().avg,
            (6000.0 + 600.0 + 3000.0) / 3.0
        );

        let too_short = SteadyState::of(
            &records,
            SteadyStateOptions {
                min_window_s: 4.5,
                ..options
            },
        )
        .unwrap();
        assert!(too_short.window.is_none());
        assert!(
            too_short
                .why_none
                .unwrap()
                .contains("4.000 s, under the 4.5 s minimum")
        );
        let never = SteadyState::of(
            &records,
            SteadyStateOptions {
                concurrency: 8,
                ..options
            },
        )
        .unwrap();
        assert!(never.why_none.unwrap().contains("never reached 6"));
    }

    #[test]
    fn the_level_rounds_up_and_is_at_least_one() {
        let at = |concurrency, threshold| {
            SteadyStateOptions {
                concurrency,
                threshold,
                min_window_s: 0.0,
            }
            .level()
        };
        assert_eq!(at(16, 0.95), 16, "15.2 rounds up");
        assert_eq!(at(20, 0.95), 19, "exactly 19");
        assert_eq!(at(1, 0.1), 1);
    }
}
