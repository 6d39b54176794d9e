//! [`StopHandle`]: the stop button of a run (and of anything that runs
//! beside it, as the server-metrics scrape). A leaf: it imports nothing of
//! this crate.

use std::sync::Arc;

use tokio::sync::watch;

/// Asks a run to stop; in-flight requests are recorded as cancelled.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<watch::Sender<bool>>);

impl StopHandle {
    /// A new handle, not yet triggered.
    pub fn new() -> StopHandle {
        StopHandle(Arc::new(watch::channel(false).0))
    }

    /// Requests the stop. Idempotent.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// True once [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// Resolves once [`Self::stop`] is called (at once if it was).
    pub async fn stopped(&self) {
        let mut rx = self.0.subscribe();
        // An Err means the sender is gone, which cannot happen while self lives.
        let _ = rx.wait_for(|s| *s).await;
    }
}

impl Default for StopHandle {
    fn default() -> Self {
        StopHandle::new()
    }
}
