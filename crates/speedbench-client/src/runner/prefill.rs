//! `--prefill-concurrency` (AIPerf's): at most N requests waiting for their
//! first output at once. A request takes a slot before it is sent and gives
//! it back when its first output arrives (a streamed one), or when its
//! response ends; the wait for a slot is the client's and is not part of
//! the request's latency. With a ramp the slots open one at a time, the
//! k-th of N at `ramp × (k − 1) / (N − 1)`, as the concurrency ramp's.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

/// The slots of one phase, and the task that opens them over a ramp.
pub(super) struct PrefillGate {
    slots: Arc<Semaphore>,
    ramp: Option<JoinHandle<()>>,
}

impl PrefillGate {
    /// `limit` slots (at least 1), all at once or opened over `ramp` (on
    /// the current runtime, from now).
    pub(super) fn new(limit: usize, ramp: Option<Duration>) -> PrefillGate {
        let limit = limit.max(1);
        let Some(over) = ramp.filter(|_| limit > 1) else {
            return PrefillGate {
                slots: Arc::new(Semaphore::new(limit)),
                ramp: None,
            };
        };
        let slots = Arc::new(Semaphore::new(1));
        let opening = Arc::clone(&slots);
        let start = tokio::time::Instant::now();
        let ramp = tokio::spawn(async move {
            for k in 1..limit {
                let share = k as f64 / (limit - 1) as f64;
                tokio::time::sleep_until(start + over.mul_f64(share)).await;
                opening.add_permits(1);
            }
        });
        PrefillGate {
            slots,
            ramp: Some(ramp),
        }
    }

    /// A slot, once one is free.
    pub(super) async fn enter(&self) -> OwnedSemaphorePermit {
        Arc::clone(&self.slots)
            .acquire_owned()
            .await
            .expect("the gate's semaphore is never closed")
    }
}

impl Drop for PrefillGate {
    fn drop(&mut self) {
        if let Some(ramp) = self.ramp.take() {
            ramp.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn slots_open_over_the_ramp() {
        let ms = Duration::from_millis;
        let gate = PrefillGate::new(3, Some(ms(300)));
        let first = gate.enter().await;
        let start = tokio::time::Instant::now();
        let second = gate.enter().await;
        let at_second = start.elapsed();
        assert!(at_second >= ms(140) && at_second < ms(290), "{at_second:?}");
        let third = gate.enter().await;
        assert!(start.elapsed() >= ms(290), "{:?}", start.elapsed());
        // All three held: a fourth waits for one to come back.
        assert!(tokio::time::timeout(ms(100), gate.enter()).await.is_err());
        drop(first);
        let _fourth = gate.enter().await;
        drop((second, third));
        let flat = PrefillGate::new(2, None);
        let (_a, _b) = (flat.enter().await, flat.enter().await);
        assert!(tokio::time::timeout(ms(50), flat.enter()).await.is_err());
    }
}
