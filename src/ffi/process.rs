//! Ending a GPU child without the GPU libraries' own teardown.

/// Ends this process now, with `code`, without running `atexit` handlers or destructors. A GPU
/// child ends this way once its answers are written and flushed: the kernel frees whatever the
/// process held (contexts, device memory, dma-bufs, verbs objects) when it exits, and it does so
/// faster than the libraries' own teardown first: releasing each CUDA context by hand and then
/// libcuda's exit handlers made a 4-GPU H100 `check` 50-65 ms slower (issue 24, measured
/// against the CUDA floor in bench/gpu.sh).
pub fn exit_without_teardown(code: i32) -> ! {
    // SAFETY: _exit takes no pointer and never returns; skipping the exit handlers is the point.
    unsafe { libc::_exit(code) }
}
