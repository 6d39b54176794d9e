//! Handing memory the allocator keeps back to the system.

/// Asks glibc's allocator to return the free memory it holds (at the top
/// of each arena and whole free pages inside them): a finished row group's
/// pages were freed, but glibc keeps freed memory for reuse, so a long
/// run's resident size would creep up by what the allocator holds.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn release_freed_memory() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators return memory on their own terms.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_freed_memory() {}
