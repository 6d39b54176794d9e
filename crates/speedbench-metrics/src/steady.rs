//! The steady state of a closed loop over records read in passes
//! ([`SteadyState::of`] is this fold over a slice): a run of any length
//! in a bounded amount of memory.
//!
//! The window runs from the first instant `level` requests were in flight
//! to the last instant they fell below it. Finding those instants means
//! walking the starts and ends in time order; instead of sorting every
//! one, a pass counts them per 1/65,536 of the run, which bounds the
//! requests in flight inside each bucket, and later passes walk only the
//! events of the buckets that can hold a crossing.

use speedbench_record::RequestRecord;

use crate::acceptance::AcceptanceTotals;
use crate::measured::{is_measured, is_sent};
use crate::passes::{PassFold, run_passes};
use crate::request::RequestMetricsExt;
use crate::summary_passes::{SummaryPasses, end_passes};
use crate::window::{SteadyState, SteadyStateOptions, WindowFigures};

const NS_PER_S: f64 = 1e9;
/// Time buckets the run is counted in.
const BUCKETS: usize = 1 << 16;
/// Events a pass collects at most (beyond one bucket's).
const EVENTS_PER_PASS: u64 = 1 << 14;

impl SteadyState {
    /// The steady state of `records`; `None` without a request sent.
    pub fn of(records: &[RequestRecord], options: SteadyStateOptions) -> Option<SteadyState> {
        let mut fold = SteadyFold::new(options);
        let Ok(()) = run_passes(records, &mut fold, &mut |_| {});
        fold.finish()
    }
}

/// [`SteadyState`] folded in passes.
pub(crate) struct SteadyFold {
    options: SteadyStateOptions,
    stage: Stage,
}

/// The run's extent, its earliest start and latest end (Unix ns) over the
/// requests sent, and whether it speculates: what the steady state needs
/// to know before its first pass, folded in a pass of its own or beside
/// another ([`SteadyFold::after`]).
#[derive(Clone, Copy)]
pub(crate) struct Span {
    origin: i64,
    last_end: i64,
    speculates: bool,
}

impl Span {
    /// A span before any request sent.
    pub(crate) const EMPTY: Span = Span {
        origin: i64::MAX,
        last_end: i64::MIN,
        speculates: false,
    };

    /// The run's next record.
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        self.speculates |= is_measured(r) && r.spec.is_some();
        if is_sent(r) {
            self.origin = self.origin.min(r.start_unix_ns);
            self.last_end = self.last_end.max(r.end_unix_ns.max(r.start_unix_ns));
        }
    }

    /// Whether the run speculates ([`crate::run_speculates`]).
    pub(crate) fn speculates(&self) -> bool {
        self.speculates
    }

    /// What follows the span: counting per bucket, or no steady state at
    /// all without a request sent.
    fn counting(self) -> Stage {
        if self.origin == i64::MAX {
            return Stage::Done(Box::new(None));
        }
        Stage::Count {
            span: self,
            starts: vec![0; BUCKETS],
            ends: vec![0; BUCKETS],
        }
    }

    fn bucket(&self, t: i64) -> usize {
        let length = (self.last_end - self.origin) as u128 + 1;
        ((t - self.origin).max(0) as u128 * BUCKETS as u128 / length) as usize
    }
}

enum Stage {
    /// Finding the span.
    Span(Span),
    /// Counting starts and ends per bucket.
    Count {
        span: Span,
        starts: Vec<u32>,
        ends: Vec<u32>,
    },
    /// Walking the events of the buckets that can hold a crossing.
    Bounds(Box<Bounds>),
    /// Folding the figures of the window found.
    Figures(Box<WindowFold>),
    Done(Box<Option<SteadyState>>),
}

impl SteadyFold {
    pub(crate) fn new(options: SteadyStateOptions) -> SteadyFold {
        SteadyFold {
            options,
            stage: Stage::Span(Span::EMPTY),
        }
    }

    /// The fold of a run whose `span` was found in a pass before its first.
    pub(crate) fn after(options: SteadyStateOptions, span: Span) -> SteadyFold {
        SteadyFold {
            options,
            stage: span.counting(),
        }
    }

    /// The steady state, once [`PassFold::end_pass`] returned false;
    /// `None` without a request sent.
    pub(crate) fn finish(self) -> Option<SteadyState> {
        match self.stage {
            Stage::Done(state) => *state,
            _ => None,
        }
    }

    fn level(&self) -> i64 {
        self.options.level() as i64
    }

    /// The steady state of the bounds found (`None`: the level was never
    /// reached), or the window's fold when it is long enough.
    fn judge(&self, span: Span, bounds: Option<(i64, i64)>) -> Stage {
        let (options, level) = (self.options, self.options.level());
        let none = |why: String| {
            Stage::Done(Box::new(Some(SteadyState {
                options,
                level,
                window: None,
                why_none: Some(why),
            })))
        };
        match bounds {
            None => none(format!(
                "requests in flight never reached {level} ({} of the concurrency {})",
                options.threshold, options.concurrency
            )),
            Some((from, to)) if ((to - from) as f64 / NS_PER_S) < options.min_window_s => {
                none(format!(
                    "{level} or more requests were in flight for {:.3} s, under the {} s minimum",
                    (to - from) as f64 / NS_PER_S,
                    options.min_window_s
                ))
            }
            Some(window) => Stage::Figures(Box::new(WindowFold::new(span, window))),
        }
    }
}

impl PassFold for SteadyFold {
    fn add(&mut self, _pass: u32, r: &RequestRecord) {
        match &mut self.stage {
            Stage::Span(span) => span.add(r),
            Stage::Count { span, starts, ends } if is_sent(r) => {
                starts[span.bucket(r.start_unix_ns)] += 1;
                ends[span.bucket(r.end_unix_ns.max(r.start_unix_ns))] += 1;
            }
            Stage::Bounds(bounds) if is_sent(r) => bounds.add(r),
            Stage::Figures(fold) => fold.add(r),
            _ => {}
        }
    }

    fn end_pass(&mut self) -> bool {
        let stage = std::mem::replace(&mut self.stage, Stage::Done(Box::new(None)));
        self.stage = match stage {
            Stage::Span(span) => span.counting(),
            Stage::Count { span, starts, ends } => {
                let mut bounds = Bounds::new(span, self.level(), &starts, &ends);
                match bounds.plan() {
                    true => Stage::Bounds(Box::new(bounds)),
                    false => self.judge(span, None),
                }
            }
            Stage::Bounds(mut bounds) => match bounds.walk() {
                Some(found) => self.judge(bounds.span, found),
                None => Stage::Bounds(bounds),
            },
            Stage::Figures(mut fold) => match fold.end_pass() {
                true => Stage::Figures(fold),
                false => Stage::Done(Box::new(Some(SteadyState {
                    options: self.options,
                    level: self.options.level(),
                    window: Some(fold.finish()),
                    why_none: None,
                }))),
            },
            done @ Stage::Done(_) => done,
        };
        !matches!(self.stage, Stage::Done(_))
    }
}

/// The search for the first upward and the last downward crossing of the
/// level, bucket by bucket.
struct Bounds {
    span: Span,
    level: i64,
    /// Requests in flight at each bucket's start.
    at_start: Vec<i64>,
    /// Events per bucket (starts, ends).
    counts: Vec<(u32, u32)>,
    /// The buckets whose in-flight count can reach the level, in time
    /// order: only they can hold a crossing.
    candidates: Vec<usize>,
    /// The next candidates to walk from the front and, once the first
    /// crossing is found (in candidate `floor`), from the back down to it.
    front: usize,
    back: usize,
    floor: usize,
    first: Option<i64>,
    last: Option<i64>,
    /// The buckets read this pass and their events (time, +1 start / -1
    /// end).
    reading: Vec<(usize, Vec<(i64, i8)>)>,
    /// Per bucket, its place in `reading` ([`UNREAD`] when not read).
    slot: Vec<u32>,
}

/// A bucket's [`Bounds::slot`] when the pass does not read it.
const UNREAD: u32 = u32::MAX;

impl Bounds {
    fn new(span: Span, level: i64, starts: &[u32], ends: &[u32]) -> Bounds {
        let mut at_start = Vec::with_capacity(BUCKETS);
        let mut in_flight = 0i64;
        let mut candidates = Vec::new();
        for (i, (&s, &e)) in starts.iter().zip(ends).enumerate() {
            at_start.push(in_flight);
            // Starts only raise the count: its highest in the bucket is at
            // most this.
            if in_flight + i64::from(s) >= level {
                candidates.push(i);
            }
            in_flight += i64::from(s) - i64::from(e);
        }
        Bounds {
            span,
            level,
            at_start,
            counts: starts.iter().zip(ends).map(|(&s, &e)| (s, e)).collect(),
            back: candidates.len(),
            candidates,
            front: 0,
            floor: 0,
            first: None,
            last: None,
            reading: Vec::new(),
            slot: vec![UNREAD; BUCKETS],
        }
    }

    /// The events read of `bucket` this pass, when it was read.
    fn events(&self, bucket: usize) -> Option<&[(i64, i8)]> {
        let slot = self.slot[bucket];
        (slot != UNREAD).then(|| self.reading[slot as usize].1.as_slice())
    }

    /// Chooses the buckets the next pass reads; false when there is no
    /// candidate (the level was never reached).
    fn plan(&mut self) -> bool {
        if self.candidates.is_empty() {
            return false;
        }
        for &(bucket, _) in &self.reading {
            self.slot[bucket] = UNREAD;
        }
        self.reading.clear();
        let floor = if self.first.is_some() {
            self.floor
        } else {
            self.front
        };
        let (mut budget, mut chosen) = (0u64, Vec::new());
        let mut take = |bucket: usize| {
            let (s, e) = self.counts[bucket];
            let events = u64::from(s) + u64::from(e);
            let fits = budget == 0 || budget + events <= EVENTS_PER_PASS;
            if fits {
                budget += events;
                chosen.push(bucket);
            }
            fits
        };
        if self.first.is_none() {
            for &bucket in &self.candidates[self.front..self.back] {
                if !take(bucket) {
                    break;
                }
            }
        }
        if self.first.is_some() && self.last.is_none() {
            for &bucket in self.candidates[floor..self.back].iter().rev() {
                if !take(bucket) {
                    break;
                }
            }
        }
        for bucket in chosen {
            if self.slot[bucket] == UNREAD {
                self.slot[bucket] = self.reading.len() as u32;
                self.reading.push((bucket, Vec::new()));
            }
        }
        true
    }

    fn add(&mut self, r: &RequestRecord) {
        let end = r.end_unix_ns.max(r.start_unix_ns);
        for (at, change) in [(r.start_unix_ns, 1), (end, -1)] {
            let slot = self.slot[self.span.bucket(at)];
            if slot != UNREAD {
                self.reading[slot as usize].1.push((at, change));
            }
        }
    }

    /// Walks the buckets read; the bounds once both are known (`None`
    /// inside when the level was never reached), `None` when another pass
    /// is needed.
    fn walk(&mut self) -> Option<Option<(i64, i64)>> {
        // At one instant, ends before starts: a slot freed and taken again
        // at the same nanosecond never counts twice.
        (self.reading.iter_mut()).for_each(|(_, events)| events.sort_unstable());
        while self.first.is_none() && self.front < self.back {
            let bucket = self.candidates[self.front];
            let Some(events) = self.events(bucket) else {
                break;
            };
            let first = self.crossings(bucket, events).0;
            self.floor = self.front;
            self.front += 1;
            self.first = first;
        }
        while self.last.is_none() && self.first.is_some() && self.back > self.floor {
            let bucket = self.candidates[self.back - 1];
            let Some(events) = self.events(bucket) else {
                break;
            };
            let last = self.crossings(bucket, events).1;
            self.back -= 1;
            self.last = last;
        }
        match (self.first, self.last) {
            (Some(first), Some(last)) => Some(Some((first, last))),
            // Every request ends, so the count falls below the level after
            // it first reached it; held to the run's end all the same.
            (Some(first), None) if self.back == self.floor => {
                Some(Some((first, self.span.last_end)))
            }
            // Every candidate walked and the level never reached.
            (None, _) if self.front >= self.back => Some(None),
            _ => {
                self.plan();
                None
            }
        }
    }

    /// The first upward and the last downward crossing inside `bucket`.
    fn crossings(&self, bucket: usize, events: &[(i64, i8)]) -> (Option<i64>, Option<i64>) {
        let (mut in_flight, mut first, mut last) = (self.at_start[bucket], None, None);
        for &(at, change) in events {
            let before = in_flight;
            in_flight += i64::from(change);
            if before < self.level && in_flight >= self.level {
                first.get_or_insert(at);
            }
            if before >= self.level && in_flight < self.level {
                last = Some(at);
            }
        }
        (first, last)
    }
}

/// The figures of a window `[from, to)` (Unix ns): the requests that
/// started in it, those that ended in it.
pub(crate) struct WindowFold {
    span: Span,
    window: (i64, i64),
    pass: u32,
    started: u64,
    ok: u64,
    totals: AcceptanceTotals,
    /// Successful requests that ended in the window, and their tokens.
    done: u64,
    tokens: u64,
    /// TTFT, ITL, latency of the successful requests started in it.
    summaries: [SummaryPasses; 3],
}

impl WindowFold {
    fn new(span: Span, window: (i64, i64)) -> WindowFold {
        WindowFold {
            span,
            window,
            pass: 0,
            started: 0,
            ok: 0,
            totals: AcceptanceTotals::default(),
            done: 0,
            tokens: 0,
            summaries: Default::default(),
        }
    }

    fn inside(&self, t: i64) -> bool {
        t >= self.window.0 && t < self.window.1
    }

    fn add(&mut self, r: &RequestRecord) {
        if !is_sent(r) {
            return;
        }
        let first = self.pass == 0;
        if first && self.inside(r.end_unix_ns) && is_measured(r) {
            self.done += 1;
            self.tokens += r.completion_tokens.unwrap_or(0);
        }
        if !self.inside(r.start_unix_ns) {
            return;
        }
        self.started += u64::from(first);
        if !is_measured(r) {
            return;
        }
        if first {
            self.ok += 1;
            self.totals.add_record(r, self.span.speculates);
        }
        let [ttft, itl, latency] = &mut self.summaries;
        r.ttft_ms().into_iter().for_each(|v| ttft.add(v));
        r.inter_token_latency_ms()
            .into_iter()
            .for_each(|v| itl.add(v));
        latency.add(r.request_latency_ms());
    }

    fn end_pass(&mut self) -> bool {
        self.pass += 1;
        end_passes(&mut self.summaries)
    }

    fn finish(&self) -> WindowFigures {
        let (from, to) = self.window;
        let length_s = (to - from).max(0) as f64 / NS_PER_S;
        let per_second = |n: u64| (length_s > 0.0).then(|| n as f64 / length_s);
        let seconds = |t: i64| (t - self.span.origin) as f64 / NS_PER_S;
        let [ttft, itl, latency] = &self.summaries;
        WindowFigures {
            start_s: seconds(from),
            end_s: seconds(to),
            requests: self.ok,
            failed: self.started - self.ok,
            request_throughput: per_second(self.done),
            output_token_throughput: per_second(self.tokens),
            ttft_ms: ttft.finish(),
            inter_token_latency_ms: itl.finish(),
            request_latency_ms: latency.finish(),
            acceptance_length: self.totals.accept_length(),
            draft_acceptance_rate_pct: self.totals.accept_rate().map(|r| r * 100.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// The crossings by sorting every event: the reference.
    fn sorted_bounds(records: &[RequestRecord], level: i64) -> Option<(i64, i64)> {
        let mut events: Vec<(i64, i8)> = Vec::new();
        for r in records.iter().filter(|r| is_sent(r)) {
            events.push((r.start_unix_ns, 1));
            events.push((r.end_unix_ns.max(r.start_unix_ns), -1));
        }
        events.sort_unstable();
        let (mut in_flight, mut first, mut last) = (0i64, None, None);
        for (at, change) in events {
            let before = in_flight;
            in_flight += i64::from(change);
            if before < level && in_flight >= level {
                first.get_or_insert(at);
            }
            if before >= level && in_flight < level {
                last = Some(at);
            }
        }
        Some((first?, last?))
    }

    /// `workers` closed-loop workers, `each` requests apiece, random
    /// lengths (whole microseconds, so ends and starts tie), a ramp.
    fn closed_loop(workers: i64, each: usize, seed: u64) -> Vec<RequestRecord> {
        let mut rng = SplitMix64::new(seed);
        let mut records = Vec::new();
        for w in 0..workers {
            let mut t = 1_000_000_000 + w * 3_000;
            for _ in 0..each {
                let length = 1_000 * (1 + rng.below(50) as i64);
                records.push(RequestRecord {
                    start_unix_ns: t,
                    end_unix_ns: t + length,
                    e2e_latency_ns: length as u64,
                    ttft_ns: Some(500),
                    completion_tokens: Some(4),
                    ..Default::default()
                });
                t += length + 1_000 * rng.below(2) as i64;
            }
        }
        records
    }

    /// A steady state found bucket by bucket spans exactly what walking
    /// every event sorted finds, whatever the level (reached or not) and
    /// however many events share a bucket.
    #[test]
    fn bounds_equal_those_of_every_event_sorted() {
        for (workers, each, seed) in [(8, 5_000, 1), (64, 400, 2), (3, 2, 3)] {
            let records = closed_loop(workers, each, seed);
            for concurrency in [1, workers as usize / 2 + 1, workers as usize, 1000] {
                let options = SteadyStateOptions {
                    concurrency,
                    threshold: 1.0,
                    min_window_s: 0.0,
                };
                let mut fold = SteadyFold::new(options);
                let Ok(()) = run_passes(&records[..], &mut fold, &mut |_| {});
                let state = fold.finish().unwrap();
                let level = options.level() as i64;
                let expected = sorted_bounds(&records, level);
                let origin = records.iter().map(|r| r.start_unix_ns).min().unwrap();
                let found = state.window.as_ref().map(|w| {
                    let at = |s: f64| origin + (s * NS_PER_S).round() as i64;
                    (at(w.start_s), at(w.end_s))
                });
                assert_eq!(found, expected, "{workers} workers, level {level}");
                assert_eq!(state.why_none.is_some(), expected.is_none());
            }
        }
    }
}
