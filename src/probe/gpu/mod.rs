//! The GPU runtime: what NVML, CUDA and HIP say about the GPUs sysfs shows, on a live node.
//!
//! The vendor libraries are loaded in a child process (`gdrdoctor probe-gpu`), never in the
//! process that writes the report: a GPU that fell off the bus can hang the driver for minutes,
//! and a vendor library can crash or print to our stdout. The parent gives the child a
//! deadline, reads its JSON, and a hang, a crash or garbage becomes a finding. The child also
//! frees every context and buffer by exiting, so the node is left as it was found.

// The probe's answer types live with the other model types (crate::model::gpu), so that ffi/
// builds them without importing this module; `gpu::model` stays for the callers not yet moved.
pub use crate::model::gpu as model;
mod session;
pub mod worker;

pub use session::{FINISH_GRACE, GpuSession, Target, cut_short, merge};

use crate::model::gpu::{HIDING_ENV, Probe};
use std::path::PathBuf;
use std::time::Duration;

/// What to ask the child for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ask {
    pub nvml: bool,
    pub cuda: bool,
    pub hip: bool,
    /// Allocate and export a dma-buf on every GPU (CUDA, HIP).
    pub export: bool,
}

impl Ask {
    /// Everything `gdrdoctor check` judges.
    pub const FULL: Ask = Ask {
        nvml: true,
        cuda: true,
        hip: true,
        export: true,
    };
    /// What `gdrdoctor topo` shows: NVLinks, from NVML alone.
    pub const NVML: Ask = Ask {
        nvml: true,
        cuda: false,
        hip: false,
        export: false,
    };

    pub fn args(self) -> Vec<&'static str> {
        [
            (self.nvml, "--nvml"),
            (self.cuda, "--cuda"),
            (self.hip, "--hip"),
            (self.export, "--export"),
        ]
        .into_iter()
        .filter_map(|(on, arg)| on.then_some(arg))
        .collect()
    }
}

/// How to run the probe: this binary, with a deadline.
#[derive(Debug, Clone)]
pub struct ProbeCommand {
    pub exe: PathBuf,
    pub timeout: Duration,
    pub ask: Ask,
    /// `--deadline` (seconds) when it made `timeout` shorter than configured: a probe killed
    /// then was cut short, it did not hang.
    pub cut_by_deadline: Option<f64>,
}

impl ProbeCommand {
    /// Why the probe is not run at all: the --deadline left it no time.
    fn no_time(&self) -> Option<String> {
        let seconds = self.cut_by_deadline?;
        (self.timeout < Duration::from_millis(100)).then(|| {
            format!("the GPU probe was not run: the --deadline of {seconds} s left no time for it")
        })
    }
}

/// `NAME=value` of each variable that hides GPUs set in gdrdoctor's environment: removed from
/// the probe's, and named in its answer.
fn cleared_env() -> Vec<String> {
    HIDING_ENV
        .iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|v| format!("{name}={}", v.to_string_lossy()))
        })
        .collect()
}

/// The child's side: load what was asked for, print the JSON, exit.
pub fn child_main(ask: Ask) -> String {
    // The three libraries are independent; ask them at the same time.
    let probe = std::thread::scope(|s| {
        let nvml = s.spawn(|| ask.nvml.then(crate::ffi::nvml::probe));
        let hip = s.spawn(|| ask.hip.then(|| crate::ffi::hip::probe(ask.export)));
        let cuda = ask.cuda.then(|| crate::ffi::cuda::probe(ask.export));
        Probe {
            nvml: nvml.join().unwrap_or(None),
            cuda,
            hip: hip.join().unwrap_or(None),
            cleared_env: Vec::new(),
            failed: Vec::new(),
        }
    });
    serde_json::to_string(&probe).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The parent's side: run the child, wait at most `timeout`, and read its answer.
pub fn run(cmd: &ProbeCommand) -> Runtime {
    let cleared = cleared_env();
    let mut args = vec!["probe-gpu"];
    args.extend(cmd.ask.args());
    if let Some(error) = cmd.no_time() {
        return Runtime::Failed { error };
    }
    let line = match crate::child::run(&cmd.exe, &args, HIDING_ENV, cmd.timeout, "the GPU probe") {
        Ok(line) => line,
        Err(e) if e.contains("did not finish") => {
            if let Some(seconds) = cmd.cut_by_deadline {
                return Runtime::Failed {
                    error: format!(
                        "{e}: cut short by the --deadline of {seconds} s, which bounds the whole run (not a verdict on the GPUs)"
                    ),
                };
            }
            return Runtime::Failed {
                error: format!("{e} (a GPU that hangs the driver: look for Xid errors in `dmesg`)"),
            };
        }
        Err(e) if e.contains("signal") || e.contains("exited") => {
            return Runtime::Failed {
                error: e.replacen(
                    "the GPU probe ",
                    "the GPU probe (a GPU library crashed) ",
                    1,
                ),
            };
        }
        Err(e) => return Runtime::Failed { error: e },
    };
    match serde_json::from_str::<Probe>(&line) {
        Ok(mut probe) => {
            probe.cleared_env = cleared;
            Runtime::Probed(Box::new(probe))
        }
        Err(e) => Runtime::Failed {
            error: format!("the GPU probe's answer is unreadable ({e})"),
        },
    }
}

// What the GPU libraries said (the runtime, a recorded NVML answer, the NVLinks between GPUs) is
// model data (crate::model::gpu): the inventory, the checks and the reports read it.
pub use crate::model::gpu::{RECORDED_NVML, Recorded, Runtime, SkipReason, bdf, nvlinks};
