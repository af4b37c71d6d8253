//! The life of gdrdoctor's own child processes: how they die with their parent, and how a GPU
//! child ends without the GPU libraries' teardown.

/// Makes the child that `command` starts die with this process: `prctl(PR_SET_PDEATHSIG,
/// SIGKILL)` between fork and exec. The --deadline watchdog may end gdrdoctor while a child is
/// still inside a driver call, and no orphan may keep the GPU or a NIC busy after that.
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the child between fork and exec; prctl is async-signal-safe
    // and touches nothing of the parent's state.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            Ok(())
        });
    }
}

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
