//! Enough file descriptors for high concurrency.

/// Raises the soft open-file limit (`RLIMIT_NOFILE`) towards the hard
/// limit when it is below `needed`, and returns the soft limit in force
/// afterwards (`None` where the limit cannot be read).
///
/// Each in-flight request holds one socket, and the simulator holds one
/// per connection, so a run at concurrency 1,024 needs more than the usual
/// default soft limit of 1,024. The hard limit is never exceeded; when it
/// is still too low, the run goes on and failed connects are recorded as
/// connection errors.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // `rlim_t` is `u64` on Linux, not on every unix
pub fn raise_open_files(needed: u64) -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return None;
    }
    let soft = lim.rlim_cur as u64;
    if soft >= needed || lim.rlim_cur >= lim.rlim_max {
        return Some(soft);
    }
    let raised = libc::rlimit {
        rlim_cur: lim.rlim_max,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads one `rlimit` through a valid pointer; raising
    // the soft limit up to the hard limit needs no privilege.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        tracing::debug!(
            from = soft,
            to = raised.rlim_cur as u64,
            "raised the open-file limit"
        );
        Some(raised.rlim_cur as u64)
    } else {
        Some(soft)
    }
}

/// Raises the soft open-file limit; a no-op where there is none.
#[cfg(not(unix))]
pub fn raise_open_files(_needed: u64) -> Option<u64> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_least_as_high() {
        let before = super::raise_open_files(0).expect("readable");
        let after = super::raise_open_files(u64::MAX).expect("readable");
        assert!(after >= before);
    }
}
