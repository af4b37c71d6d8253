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
pub mod worker;

use crate::model::gdr::{PairResult, PairRunner, PairSpec};
use crate::model::gpu::{Cuda, HIDING_ENV, Hip, Lib, Nvml, NvmlDevice, Probe, ProbeFailure};
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
    let cleared: Vec<String> = HIDING_ENV
        .iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|v| format!("{name}={}", v.to_string_lossy()))
        })
        .collect();
    let mut args = vec!["probe-gpu"];
    args.extend(cmd.ask.args());
    if let Some(seconds) = cmd.cut_by_deadline {
        if cmd.timeout < Duration::from_millis(100) {
            return Runtime::Failed {
                error: format!(
                    "the GPU probe was not run: the --deadline of {seconds} s left no time for it"
                ),
            };
        }
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

/// How long a worker has, once told it is done, to free its GPU and exit before it is killed.
pub const FINISH_GRACE: Duration = Duration::from_secs(2);

/// Why a GPU's worker has no answer when `--deadline` ended its wait: how long the probe had,
/// which GPU this is, and how many answered in that time. Never a verdict on the GPU: the
/// driver starts GPUs one after another (a 4-GPU H100 node takes about 1.3 s for all), so a
/// short deadline reaches the first GPUs only.
pub fn cut_short(
    had: Duration,
    deadline_s: Option<f64>,
    (gpu, of, answered): (usize, usize, usize),
) -> String {
    let deadline = deadline_s.map(|s| format!(" of {s} s")).unwrap_or_default();
    format!(
        "cut short by --deadline{deadline} after {} ms ({answered} of {of} GPUs reached in that time; this one, GPU {gpu} of {of}, was not): unknown, not a verdict on the GPU; a longer --deadline lets the probe finish",
        had.as_millis()
    )
}

/// A GPU the session may start a worker for.
#[derive(Debug, Clone)]
pub struct Target {
    pub bdf: Bdf,
    pub runtime: worker::Runtime,
    /// `CUDA_VISIBLE_DEVICES` naming this GPU alone (its UUID), when the driver tells it.
    pub visible: Option<String>,
}

/// The GPU libraries' side of a live run: NVML in one child for the whole node, and one worker
/// per GPU ([`worker`]) that starts CUDA or HIP once for both the probe and the write test.
/// Started as soon as the GPUs are known, so that their start-up overlaps reading the rest of
/// the node; asked for the probe with [`GpuSession::probe`], for pairs by the write test.
pub struct GpuSession {
    exe: PathBuf,
    timeout: Duration,
    started: std::time::Instant,
    cut_by_deadline: Option<f64>,
    export: bool,
    targets: Vec<Target>,
    nvml: Option<std::thread::JoinHandle<Runtime>>,
    workers: BTreeMap<Bdf, std::sync::Mutex<Result<worker::Worker, String>>>,
    /// Why nothing was started: the --deadline left no time.
    not_run: Option<String>,
}

impl GpuSession {
    /// Starts NVML (when asked and there is an NVIDIA GPU) and a worker for every GPU whose
    /// runtime is asked. When nothing is asked (the write test alone), workers start only when
    /// a pair needs one ([`GpuSession::ensure`]).
    pub fn start(cmd: &ProbeCommand, targets: Vec<Target>) -> GpuSession {
        let probe = cmd.ask.nvml || cmd.ask.cuda || cmd.ask.hip;
        let mut session = GpuSession {
            exe: cmd.exe.clone(),
            timeout: cmd.timeout,
            started: std::time::Instant::now(),
            cut_by_deadline: cmd.cut_by_deadline,
            export: cmd.ask.export,
            targets,
            nvml: None,
            workers: BTreeMap::new(),
            not_run: None,
        };
        if let Some(seconds) = cmd.cut_by_deadline {
            if cmd.timeout < Duration::from_millis(100) {
                session.not_run = Some(format!(
                    "the GPU probe was not run: the --deadline of {seconds} s left no time for it"
                ));
                return session;
            }
        }
        if !probe {
            return session;
        }
        let nvidia = session
            .targets
            .iter()
            .any(|t| t.runtime == worker::Runtime::Cuda);
        if cmd.ask.nvml && nvidia {
            let nvml = ProbeCommand {
                ask: Ask {
                    nvml: true,
                    cuda: false,
                    hip: false,
                    export: false,
                },
                ..cmd.clone()
            };
            session.nvml = Some(std::thread::spawn(move || {
                crate::trace::mark(|| "NVML child started".into());
                let answer = run(&nvml);
                crate::trace::mark(|| "NVML child answered".into());
                answer
            }));
        }
        let asked: Vec<Bdf> = session
            .targets
            .iter()
            .filter(|t| match t.runtime {
                worker::Runtime::Cuda => cmd.ask.cuda,
                worker::Runtime::Hip => cmd.ask.hip,
            })
            .map(|t| t.bdf)
            .collect();
        for gpu in asked {
            session.ensure(gpu);
        }
        session
    }

    /// Starts the worker for `gpu` unless it runs already. `false`: not a GPU this session
    /// knows.
    pub fn ensure(&mut self, gpu: Bdf) -> bool {
        if self.workers.contains_key(&gpu) {
            return true;
        }
        let Some(t) = self.targets.iter().find(|t| t.bdf == gpu) else {
            return false;
        };
        let started = match &self.not_run {
            Some(why) => Err(why.clone()),
            None => worker::Worker::start(
                &self.exe,
                &worker::WorkerSpec {
                    gpu: gpu.to_string(),
                    runtime: t.runtime,
                    export: self.export,
                },
                gpu,
                t.visible.as_deref(),
            ),
        };
        crate::trace::mark(|| format!("GPU worker {gpu} started"));
        self.workers.insert(gpu, std::sync::Mutex::new(started));
        true
    }

    /// When the probe's time is up.
    fn end(&self) -> std::time::Instant {
        crate::deadline::later(self.started, self.timeout)
    }

    /// A failed answer, in the words an operator needs: a deadline that cut it short is not a
    /// verdict on the GPU; a hang points at the driver.
    fn explain(&self, e: String) -> String {
        if e.contains("did not finish") {
            match self.cut_by_deadline {
                Some(seconds) => format!(
                    "{e}: cut short by the --deadline of {seconds} s, which bounds the whole run (not a verdict on the GPUs)"
                ),
                None => {
                    format!("{e} (a GPU that hangs the driver: look for Xid errors in `dmesg`)")
                }
            }
        } else if e.contains("signal") || e.contains("exited") {
            format!("{e} (a GPU library crashed)")
        } else {
            e
        }
    }

    /// Waits for NVML and every worker's probe answer, all at once and all within the probe's
    /// time, and puts them together as one [`Runtime`]. Nothing here waits past that time: a
    /// worker that has not answered is killed and left to die on its own (a process inside a
    /// driver call can take hundreds of milliseconds to go, see `child::abandon`), so that a
    /// `--deadline` always leaves time for the report.
    pub fn probe(&mut self) -> Runtime {
        if let Some(why) = &self.not_run {
            return Runtime::Failed { error: why.clone() };
        }
        let end = self.end();
        let mut answers: Vec<(Bdf, Result<worker::WorkerProbe, String>)> =
            std::thread::scope(|s| {
                let waits: Vec<_> = self
                    .workers
                    .iter()
                    .map(|(gpu, w)| {
                        s.spawn(move || {
                            let left = end.saturating_duration_since(std::time::Instant::now());
                            let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
                            let answer = match &mut *w {
                                Ok(worker) => worker.probe(left),
                                Err(e) => Err(e.clone()),
                            };
                            crate::trace::mark(|| {
                                format!(
                                    "GPU worker {gpu}: {}",
                                    if answer.is_ok() {
                                        "answered"
                                    } else {
                                        "no answer"
                                    }
                                )
                            });
                            (*gpu, answer)
                        })
                    })
                    .collect();
                waits
                    .into_iter()
                    .zip(self.workers.keys())
                    .map(|(h, gpu)| {
                        h.join().unwrap_or_else(|_| {
                            (
                                *gpu,
                                Err("the thread waiting for this GPU's worker panicked".into()),
                            )
                        })
                    })
                    .collect()
            });
        let nvml = self.nvml.take().map(|h| {
            match h.join().unwrap_or_else(|_| Runtime::Failed {
                error: "the thread waiting for NVML panicked".into(),
            }) {
                Runtime::Probed(p) => Ok(p.nvml),
                Runtime::Failed { error } => Err(error),
                Runtime::Skipped { .. } | Runtime::Recorded(_) => Ok(None),
            }
        });
        let total = answers.len();
        let answered = answers.iter().filter(|(_, a)| a.is_ok()).count();
        for (i, (_, answer)) in answers.iter_mut().enumerate() {
            if let Err(e) = answer {
                *e = match self.cut_by_deadline {
                    Some(_) if e.contains("did not finish") => {
                        cut_short(self.timeout, self.cut_by_deadline, (i + 1, total, answered))
                    }
                    _ => self.explain(std::mem::take(e)),
                };
            }
        }
        let cleared = HIDING_ENV
            .iter()
            .filter_map(|name| {
                std::env::var_os(name).map(|v| format!("{name}={}", v.to_string_lossy()))
            })
            .collect();
        merge(nvml, answers, cleared)
    }
}

impl PairRunner for GpuSession {
    /// Runs one pair on its GPU's worker (started by [`GpuSession::ensure`]).
    fn pair(&self, spec: &PairSpec, timeout: Duration) -> Result<PairResult, String> {
        let gpu = spec
            .gpu
            .as_deref()
            .and_then(Bdf::parse)
            .ok_or("the pair names no GPU")?;
        let w = self
            .workers
            .get(&gpu)
            .ok_or_else(|| format!("no GPU worker for {gpu}"))?;
        let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *w {
            Ok(worker) => worker.pair(spec, timeout).map_err(|e| self.explain(e)),
            Err(e) => Err(e.clone()),
        }
    }
}

impl GpuSession {
    /// Ends every worker: each frees its GPU and exits, within `grace`.
    pub fn finish(self, grace: Duration) {
        std::thread::scope(|s| {
            for (_, w) in self.workers {
                if let Ok(worker) = w.into_inner().unwrap_or_else(|e| e.into_inner()) {
                    s.spawn(move || worker.finish(grace));
                }
            }
        });
        crate::trace::mark(|| "GPU workers ended".into());
    }
}

/// Puts NVML's answer and the workers' together: one library view per runtime, as a single
/// probe of the whole node would have given it, with what did not answer listed per GPU.
pub fn merge(
    nvml: Option<Result<Option<Lib<Nvml>>, String>>,
    answers: Vec<(Bdf, Result<worker::WorkerProbe, String>)>,
    cleared_env: Vec<String>,
) -> Runtime {
    let mut failed: Vec<ProbeFailure> = Vec::new();
    let mut answered = false;
    let nvml = match nvml {
        Some(Ok(lib)) => {
            answered = true;
            lib
        }
        Some(Err(error)) => {
            failed.push(ProbeFailure {
                part: "nvml".into(),
                error,
            });
            None
        }
        None => None,
    };
    let mut cudas: Vec<(Bdf, Lib<Cuda>)> = Vec::new();
    let mut hips: Vec<(Bdf, Lib<Hip>)> = Vec::new();
    for (gpu, answer) in answers {
        match answer {
            Ok(p) => {
                answered = true;
                cudas.extend(p.cuda.map(|l| (gpu, l)));
                hips.extend(p.hip.map(|l| (gpu, l)));
            }
            Err(error) => failed.push(ProbeFailure {
                part: gpu.to_string(),
                error,
            }),
        }
    }
    if !answered {
        if let Some(first) = failed.first() {
            return Runtime::Failed {
                error: first.error.clone(),
            };
        }
    }
    // One runtime's answers as one library: ready when any worker could use it (the others'
    // reasons listed for their GPU), else the reason they all share.
    fn one<T: Clone>(
        libs: Vec<(Bdf, Lib<T>)>,
        devices: impl Fn(&mut T, Vec<T>),
        failed: &mut Vec<ProbeFailure>,
        name: &str,
    ) -> Option<Lib<T>> {
        let ready: Vec<T> = libs
            .iter()
            .filter_map(|(_, l)| l.ready().cloned())
            .collect();
        let Some(first) = ready.first() else {
            return libs.into_iter().next().map(|(_, l)| l);
        };
        let mut lib = first.clone();
        for (gpu, l) in &libs {
            let why = match l {
                Lib::Ready(_) => continue,
                Lib::NotFound { message, .. } => format!("cannot be loaded ({message})"),
                Lib::MissingSymbol { symbol, .. } => format!("lacks {symbol}"),
                Lib::Failed { call, error, .. } => format!("{call} failed with {error}"),
            };
            failed.push(ProbeFailure {
                part: gpu.to_string(),
                error: format!("{name} could not be used on this GPU: {why}"),
            });
        }
        devices(&mut lib, ready);
        Some(Lib::Ready(lib))
    }
    let cuda = one(
        cudas,
        |c: &mut Cuda, all| c.devices = all.into_iter().flat_map(|c| c.devices).collect(),
        &mut failed,
        "CUDA",
    );
    let hip = one(
        hips,
        |h: &mut Hip, all| h.devices = all.into_iter().flat_map(|h| h.devices).collect(),
        &mut failed,
        "HIP",
    );
    Runtime::Probed(Box::new(Probe {
        nvml,
        cuda,
        hip,
        cleared_env,
        failed,
    }))
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

    fn worker_probe(lib: Lib<Cuda>) -> Result<worker::WorkerProbe, String> {
        Ok(worker::WorkerProbe {
            cuda: Some(lib),
            hip: None,
        })
    }

    fn ready(bus: &str) -> Lib<Cuda> {
        Lib::Ready(Cuda {
            library: "libcuda.so.1".into(),
            driver_version: 13000,
            dmabuf_export_symbol: true,
            devices: vec![CudaDevice {
                ordinal: 0,
                bus_id: Some(bus.into()),
                name: None,
                gdr_supported: Some(true),
                dmabuf_supported: Some(true),
                export: Export::NotTried { reason: "x".into() },
                errors: vec![],
            }],
        })
    }

    /// The workers' answers become one view: devices of the workers that could use CUDA, the
    /// others listed per GPU; a reason all of them share stays the library's.
    #[test]
    fn worker_answers_merge_into_one_probe() {
        let b = |s: &str| Bdf::parse(s).unwrap();
        let missing = || Lib::NotFound {
            tried: vec!["libcuda.so.1".into()],
            message: "not found".into(),
        };
        let Runtime::Probed(p) = merge(
            None,
            vec![
                (b("0000:3b:00.0"), worker_probe(ready("0000:3B:00.0"))),
                (
                    b("0000:5e:00.0"),
                    Err("the GPU worker for 0000:5e:00.0 was killed".into()),
                ),
                (
                    b("0000:86:00.0"),
                    worker_probe(Lib::Failed {
                        library: "libcuda.so.1".into(),
                        call: "cuInit".into(),
                        code: 100,
                        error: "CUDA_ERROR_NO_DEVICE".into(),
                    }),
                ),
            ],
            vec![],
        ) else {
            panic!()
        };
        let cuda = p.cuda.as_ref().unwrap().ready().unwrap();
        assert_eq!(cuda.devices.len(), 1);
        assert_eq!(
            p.failure(b("0000:5e:00.0")),
            Some("the GPU worker for 0000:5e:00.0 was killed")
        );
        assert_eq!(
            p.failure(b("0000:86:00.0")),
            Some("CUDA could not be used on this GPU: cuInit failed with CUDA_ERROR_NO_DEVICE")
        );
        assert_eq!(p.failure(b("0000:3b:00.0")), None);

        // Every worker without libcuda: the library's own state, no per-GPU failures.
        let Runtime::Probed(p) = merge(
            Some(Ok(None)),
            vec![
                (b("0000:3b:00.0"), worker_probe(missing())),
                (b("0000:5e:00.0"), worker_probe(missing())),
            ],
            vec![],
        ) else {
            panic!()
        };
        assert_eq!(p.cuda, Some(missing()));
        assert!(p.failed.is_empty());

        // Nothing answered at all: the probe failed, with the first reason.
        let r = merge(
            Some(Err("NVML hung".into())),
            vec![(b("0000:3b:00.0"), Err("worker hung".into()))],
            vec![],
        );
        assert_eq!(
            r,
            Runtime::Failed {
                error: "NVML hung".into()
            }
        );
    }

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
