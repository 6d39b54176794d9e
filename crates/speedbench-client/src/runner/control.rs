//! What a caller holds while a run goes: live counters (the stop button
//! is `crate::stop`'s).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// Live counters of a run, for progress displays.
#[derive(Debug, Default)]
pub struct Progress {
    pub(crate) planned: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    pub(crate) skipped: AtomicU64,
    warmup_done: AtomicU64,
    /// Requests (warmup included) handed to the HTTP client and not yet
    /// finished.
    in_flight: AtomicU64,
    /// Records handed to the recorder, warmup and skipped turns included.
    pub(crate) produced: AtomicU64,
    last_finished: std::sync::Mutex<Option<Instant>>,
    /// Set while the run waits for its start (`--start-at`, a barrier file).
    waiting_for_start: AtomicBool,
}

impl Progress {
    /// Profiled requests the run plans to send (0 until known).
    pub fn planned(&self) -> u64 {
        self.planned.load(Ordering::Relaxed)
    }
    /// Profiled requests finished, successful or not.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    /// Profiled requests that failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
    /// Profiled turns not sent because an earlier turn of their
    /// conversation failed.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
    /// The profiled requests as they stand: sent, failed, skipped.
    pub fn tally(&self) -> crate::RequestTally {
        crate::RequestTally {
            sent: self.done(),
            failed: self.failed(),
            skipped: self.skipped(),
        }
    }
    /// Whether the run is waiting for its shared start (a start time or a
    /// barrier file) before its measured phase: a display says so rather
    /// than look stuck.
    pub fn waiting_for_start(&self) -> bool {
        self.waiting_for_start.load(Ordering::Relaxed)
    }
    /// Marks the run as waiting for its start, or not: the runner does
    /// around its start barrier; a caller with a wait of its own may too.
    pub fn set_waiting_for_start(&self, waiting: bool) {
        self.waiting_for_start.store(waiting, Ordering::Relaxed);
    }
    /// Requests (warmup included) sent and not yet answered or failed.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }
    pub(crate) fn sending_one(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn answered_one(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
    /// Warmup requests finished.
    pub fn warmup_done(&self) -> u64 {
        self.warmup_done.load(Ordering::Relaxed)
    }
    /// When the latest request (warmup or profiled) finished: a rate over
    /// the run ends here, not after the server-metrics shutdown delay.
    pub fn last_finished(&self) -> Option<Instant> {
        *self
            .last_finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn finished_one(&self, warmup: bool, failed: bool) {
        let counter = if warmup {
            &self.warmup_done
        } else {
            &self.done
        };
        if failed && !warmup {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        counter.fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .last_finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = Some(Instant::now());
    }
}
