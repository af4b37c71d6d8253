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

use crate::model::gpu::{HIDING_ENV, NvmlDevice, Probe, ProbeFailure};
use crate::parse::pci::Bdf;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// What the inventory knows of the GPU runtime.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Runtime {
    /// The probe did not run.
    Skipped { reason: SkipReason },
    /// The probe ran; what the libraries said.
    Probed(Box<Probe>),
    /// A captured root whose capture recorded NVML's answer on the node ([`RECORDED_NVML`]):
    /// NVML's part of the probe as it was then. CUDA and HIP are not asked offline.
    Recorded(Box<Recorded>),
    /// The probe ran and gave no answer: it hung, crashed, or wrote something unreadable.
    Failed { error: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SkipReason {
    /// A captured root: its GPUs are elsewhere.
    Offline,
    /// `--no-gpu-probe`, or a command that does not need it.
    Disabled,
    /// No NVIDIA or AMD GPU on the bus: nothing to ask.
    NoGpu,
}

impl SkipReason {
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::Offline => "a captured root, whose GPUs are elsewhere",
            SkipReason::Disabled => "--no-gpu-probe",
            SkipReason::NoGpu => "no NVIDIA or AMD GPU on the PCI bus",
        }
    }
}

impl Runtime {
    /// What the libraries answered: live, or NVML's answer as a capture recorded it.
    pub fn probe(&self) -> Option<&Probe> {
        match self {
            Runtime::Probed(p) => Some(p),
            Runtime::Recorded(r) => Some(&r.probe),
            _ => None,
        }
    }
}

/// Where `gdrdoctor capture` puts NVML's answer inside the captured tree: a top-level name of
/// gdrdoctor's own, which no node has, read only from captured roots (never from `/`).
pub const RECORDED_NVML: &str = "/gdrdoctor/nvml.json";

/// NVML's answer as `capture` recorded it: the NVML-only probe child's JSON ([`Probe`], with
/// `nvml` and any `failed` part of NVML), written at [`RECORDED_NVML`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// The file in the capture.
    pub path: String,
    #[serde(flatten)]
    pub probe: Probe,
}

impl Recorded {
    /// The recorded JSON, as the capture wrote it; only NVML's part is kept (a capture never
    /// records CUDA or HIP: they are not asked offline).
    pub fn parse(path: &str, text: &[u8]) -> Result<Recorded, String> {
        let mut probe: Probe = serde_json::from_slice(text).map_err(|e| e.to_string())?;
        probe.cuda = None;
        probe.hip = None;
        probe.failed.retain(|f| f.part == "nvml");
        Ok(Recorded {
            path: path.to_owned(),
            probe,
        })
    }

    /// What `capture` writes: NVML's part of a probe, one JSON document and a newline.
    pub fn text(nvml: &Runtime) -> Option<String> {
        let probe = match nvml {
            Runtime::Probed(p) => Probe {
                nvml: p.nvml.clone(),
                cuda: None,
                hip: None,
                cleared_env: p.cleared_env.clone(),
                failed: p
                    .failed
                    .iter()
                    .filter(|f| f.part == "nvml")
                    .cloned()
                    .collect(),
            },
            // No answer at all: recorded as NVML's failure, as the live check reports it.
            Runtime::Failed { error } => Probe {
                failed: vec![ProbeFailure {
                    part: "nvml".into(),
                    error: error.clone(),
                }],
                ..Probe::default()
            },
            Runtime::Skipped { .. } | Runtime::Recorded(_) => return None,
        };
        serde_json::to_string_pretty(&probe).ok().map(|t| t + "\n")
    }
}

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

/// NVML and CUDA bus ids (`00000000:3B:00.0`, `0000:3B:00.0`) as sysfs addresses.
pub fn bdf(bus_id: Option<&String>) -> Option<Bdf> {
    bus_id.and_then(|s| Bdf::parse(s.trim()))
}

/// NVLink counts between GPU pairs, as `nvidia-smi topo -m` shows them (`NV18`): links from one
/// GPU straight to the other, or, through NVSwitches, the smaller of the two GPUs' switch links
/// (every switch-attached GPU reaches every other across the switch fabric).
pub fn nvlinks(probe: &Probe) -> BTreeMap<(Bdf, Bdf), u32> {
    let mut out = BTreeMap::new();
    let Some(nvml) = probe.nvml.as_ref().and_then(|l| l.ready()) else {
        return out;
    };
    let gpus: Vec<(Bdf, &NvmlDevice)> = nvml
        .devices
        .iter()
        .filter_map(|d| bdf(d.bus_id.as_ref()).map(|b| (b, d)))
        .collect();
    for (a, da) in &gpus {
        let switch_a = da
            .nvlinks
            .iter()
            .filter(|l| l.remote_type == "switch")
            .count() as u32;
        for (b, db) in &gpus {
            if a == b {
                continue;
            }
            let direct = da
                .nvlinks
                .iter()
                .filter(|l| l.remote_type != "switch" && bdf(l.remote_bus_id.as_ref()) == Some(*b))
                .count() as u32;
            let switch_b = db
                .nvlinks
                .iter()
                .filter(|l| l.remote_type == "switch")
                .count() as u32;
            let n = direct + switch_a.min(switch_b);
            if n > 0 {
                out.insert((*a, *b), n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::gpu::*;

    fn dev(bus: &str, links: &[(&str, &str)]) -> NvmlDevice {
        NvmlDevice {
            index: 0,
            bus_id: Some(bus.into()),
            name: None,
            bar1_total: None,
            bar1_used: None,
            nvlinks: links
                .iter()
                .enumerate()
                .map(|(i, (t, r))| NvLink {
                    link: i as u32,
                    remote_type: (*t).into(),
                    remote_bus_id: Some((*r).into()),
                })
                .collect(),
            nvlinks_down: vec![],
            persistence_mode: None,
            fabric: None,
            errors: vec![],
        }
    }

    fn probe(devices: Vec<NvmlDevice>) -> Probe {
        Probe {
            nvml: Some(Lib::Ready(Nvml {
                library: "x".into(),
                driver_version: None,
                cuda_driver_version: None,
                devices,
                errors: vec![],
            })),
            ..Probe::default()
        }
    }

    #[test]
    fn direct_links_count_per_pair() {
        let a = "00000000:3B:00.0";
        let b = "00000000:5E:00.0";
        let p = probe(vec![
            dev(a, &[("gpu", b), ("gpu", b), ("gpu", b)]),
            dev(b, &[("gpu", a), ("gpu", a), ("gpu", a)]),
        ]);
        let m = nvlinks(&p);
        let (ba, bb) = (Bdf::parse(a).unwrap(), Bdf::parse(b).unwrap());
        assert_eq!(m.get(&(ba, bb)), Some(&3));
        assert_eq!(m.get(&(bb, ba)), Some(&3));
        assert_eq!(ba.to_string(), "0000:3b:00.0");
    }

    #[test]
    fn switch_links_are_shared_across_the_fabric() {
        let sw = "00000000:05:00.0";
        let links18: Vec<(&str, &str)> = (0..18).map(|_| ("switch", sw)).collect();
        let links12: Vec<(&str, &str)> = (0..12).map(|_| ("switch", sw)).collect();
        let p = probe(vec![
            dev("00000000:18:00.0", &links18),
            dev("00000000:2A:00.0", &links18),
            dev("00000000:3A:00.0", &links12),
            dev("00000000:4A:00.0", &[]),
        ]);
        let m = nvlinks(&p);
        let b = |s: &str| Bdf::parse(s).unwrap();
        assert_eq!(m.get(&(b("0000:18:00.0"), b("0000:2a:00.0"))), Some(&18));
        assert_eq!(m.get(&(b("0000:18:00.0"), b("0000:3a:00.0"))), Some(&12));
        assert_eq!(m.get(&(b("0000:18:00.0"), b("0000:4a:00.0"))), None);
    }
}
