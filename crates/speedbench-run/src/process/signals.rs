//! Two-stage Ctrl-C: the first SIGINT or SIGTERM stops the run and keeps
//! every finished request; the second exits at once.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use speedbench_client::StopHandle;

/// The exit code for a run stopped by SIGINT (Ctrl-C): 128 + 2.
pub const EXIT_SIGINT: u8 = 130;
/// The exit code for a run stopped by SIGTERM: 128 + 15.
pub const EXIT_SIGTERM: u8 = 143;

/// What a signal did, for the caller to tell its user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SignalEvent {
    /// The first signal: the run is stopping and saving what it measured.
    Stopping {
        /// The exit code the signal calls for ([`EXIT_SIGINT`] or [`EXIT_SIGTERM`]).
        exit_code: u8,
    },
    /// The second signal: the process exits with `exit_code` right after.
    Aborting {
        /// The exit code the signal calls for.
        exit_code: u8,
    },
}

/// Which signal stopped the run, once one did.
#[derive(Debug, Clone, Default)]
pub struct SignalWatch(Arc<AtomicU8>);

impl SignalWatch {
    /// The exit code of the signal that stopped the run (130 for SIGINT,
    /// 143 for SIGTERM), or `None` while none came.
    pub fn exit_code(&self) -> Option<u8> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            code => Some(code),
        }
    }
}

/// Stops `stop` on the first SIGINT or SIGTERM and exits the process on the
/// second, calling `notify` before each (print there, not here: this crate
/// writes nothing to the terminal). Needs a running tokio runtime.
pub fn stop_on_signals(
    stop: StopHandle,
    notify: impl Fn(SignalEvent) + Send + Sync + 'static,
) -> SignalWatch {
    let watch = SignalWatch::default();
    let seen = watch.0.clone();
    tokio::spawn(async move {
        let exit_code = next_signal().await;
        seen.store(exit_code, Ordering::Relaxed);
        notify(SignalEvent::Stopping { exit_code });
        stop.stop();
        let exit_code = next_signal().await;
        notify(SignalEvent::Aborting { exit_code });
        kill_owned_groups();
        std::process::exit(i32::from(exit_code));
    });
    watch
}

/// Waits for SIGINT or SIGTERM and returns the exit code it calls for.
async fn next_signal() -> u8 {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => EXIT_SIGINT,
                _ = term.recv() => EXIT_SIGTERM,
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                EXIT_SIGINT
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        EXIT_SIGINT
    }
}

/// The process groups of the servers this process started and has not yet
/// stopped (`speedbench tune`): an abort (the second Ctrl-C) kills them
/// before it exits, so no server outlives the tune that started it.
static OWNED_GROUPS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Records a process group this process owns until [`disown_group`].
pub(crate) fn own_group(pgid: i32) {
    OWNED_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(pgid);
}

/// Forgets a process group that was stopped.
pub(crate) fn disown_group(pgid: i32) {
    OWNED_GROUPS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&g| g != pgid);
}

/// SIGKILLs every owned process group.
fn kill_owned_groups() {
    let groups = OWNED_GROUPS.lock().unwrap_or_else(|e| e.into_inner());
    for &pgid in groups.iter() {
        // SAFETY: kill(2) with a negative pid signals a process group; it
        // touches no memory of ours.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}
