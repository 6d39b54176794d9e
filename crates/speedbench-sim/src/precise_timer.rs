//! Deadlines met to within microseconds, for injected delays.
//!
//! tokio's timer wheel has a 1 ms resolution and fires at the first tick
//! after a deadline, so a 5 ms TTFT would really be 5-7 ms. A client's TTFT
//! error is judged against the injected delay, so the simulator waits the
//! bulk of a delay on tokio's timer and the last stretch on one dedicated
//! thread that sleeps with a high-resolution timer (timer slack lowered to
//! 1 ns on Linux) and wakes the waiting task at the deadline.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

/// How much of a delay is left to the precise thread: more than tokio's
/// worst rounding (1 ms tick plus a scheduling hiccup).
const FINE_STRETCH: Duration = Duration::from_millis(3);

struct Entry {
    deadline: Instant,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.deadline == other.deadline
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.deadline.cmp(&other.deadline)
    }
}

struct TimerThread {
    queue: Mutex<BinaryHeap<Reverse<Entry>>>,
    changed: Condvar,
}

fn timer_thread() -> &'static TimerThread {
    static TIMER: OnceLock<&'static TimerThread> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static TimerThread = Box::leak(Box::new(TimerThread {
            queue: Mutex::new(BinaryHeap::new()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("sim-precise-timer".into())
            .spawn(move || run(timer))
            .expect("spawning the simulator's timer thread");
        timer
    })
}

fn run(timer: &TimerThread) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument; 1 ns is the
    // smallest slack (0 would mean "the default", 50 us).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let mut queue = timer.queue.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let now = Instant::now();
        while queue.peek().is_some_and(|Reverse(e)| e.deadline <= now) {
            if let Some(Reverse(e)) = queue.pop() {
                e.waker.wake();
            }
        }
        queue = match queue.peek() {
            Some(Reverse(e)) => {
                let wait = e.deadline.saturating_duration_since(now);
                timer
                    .changed
                    .wait_timeout(queue, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
            None => timer.changed.wait(queue).unwrap_or_else(|e| e.into_inner()),
        };
    }
}

/// A reusable wait for successive deadlines.
pub(crate) struct PreciseTimer {
    coarse: Pin<Box<Sleep>>,
    /// The deadline (and waker) last handed to the timer thread.
    armed: Option<(Instant, Waker)>,
}

impl PreciseTimer {
    pub(crate) fn new() -> PreciseTimer {
        PreciseTimer {
            coarse: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed: None,
        }
    }

    /// Ready once `deadline` has passed.
    pub(crate) fn poll_until(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let now = Instant::now();
        if now >= deadline {
            return Poll::Ready(());
        }
        if deadline - now > FINE_STRETCH {
            let coarse_at = tokio::time::Instant::from_std(deadline - FINE_STRETCH);
            if self.coarse.deadline() != coarse_at {
                self.coarse.as_mut().reset(coarse_at);
            }
            if self.coarse.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        let fresh =
            !matches!(&self.armed, Some((d, w)) if *d == deadline && w.will_wake(cx.waker()));
        if fresh {
            self.armed = Some((deadline, cx.waker().clone()));
            let timer = timer_thread();
            let mut queue = timer.queue.lock().unwrap_or_else(|e| e.into_inner());
            let earliest = queue.peek().is_none_or(|Reverse(e)| deadline < e.deadline);
            queue.push(Reverse(Entry {
                deadline,
                waker: cx.waker().clone(),
            }));
            if earliest {
                timer.changed.notify_one();
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_at_the_deadline_not_at_the_next_millisecond() {
        // Deadlines between ticks of tokio's wheel, near and far; the same
        // ones through tokio's own timer, measured in the same run.
        let offsets: Vec<Duration> = (0..20)
            .map(|i| Duration::from_micros(700 + 450 * i))
            .collect();
        let mut timer = PreciseTimer::new();
        let (mut precise, mut wheel) = (Vec::new(), Vec::new());
        for &offset in &offsets {
            let deadline = Instant::now() + offset;
            std::future::poll_fn(|cx| timer.poll_until(deadline, cx)).await;
            let woke = Instant::now();
            assert!(woke >= deadline, "woke before its deadline");
            precise.push(woke - deadline);
            let deadline = Instant::now() + offset;
            tokio::time::sleep_until(deadline.into()).await;
            wheel.push(Instant::now() - deadline);
        }
        precise.sort();
        wheel.sort();
        let median = |v: &[Duration]| v[v.len() / 2];
        assert!(
            median(&precise) < median(&wheel),
            "median lateness {:?}, tokio's wheel {:?}",
            median(&precise),
            median(&wheel)
        );
    }
}
