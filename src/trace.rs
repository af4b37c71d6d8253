//! `GDRDOCTOR_TRACE=1`: a line on standard error at each step of a run, with the milliseconds
//! since the process started, to see where a live run's time goes (the GPU probe's children
//! start, answer and end; the stages of `check`). BENCHMARKS.md uses it to compare `check`
//! with the CUDA floor on the GPU machines. Off, it costs one relaxed load per step.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();
static ON: AtomicBool = AtomicBool::new(false);

/// Notes when the process started and whether tracing is on; call first thing in `main`.
pub fn start() {
    START.get_or_init(Instant::now);
    let on = std::env::var_os("GDRDOCTOR_TRACE").is_some_and(|v| v != "0" && !v.is_empty());
    ON.store(on, Ordering::Relaxed);
}

/// One step, when tracing is on.
pub fn mark(what: impl FnOnce() -> String) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let ms = START
        .get()
        .map(|s| s.elapsed().as_secs_f64() * 1000.0)
        .unwrap_or(0.0);
    // A trace line lost to a closed stderr is no loss.
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "gdrdoctor: trace {ms:8.1} ms {}", what());
}
