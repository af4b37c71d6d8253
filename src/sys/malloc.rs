//! The C allocator, which Rust's global allocator is: giving freed memory back to the system.

/// Gives the free pages of every malloc arena back to the system. glibc keeps what a thread
/// freed in that thread's arena for its later use, so a process whose threads each held a big
/// archive in turn (`fleet -j N`) would keep up to N of them resident, whatever the run's
/// budget allowed at once. Elsewhere (musl) freed memory is returned eagerly: nothing to do.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointer; it only releases pages that hold no allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}
