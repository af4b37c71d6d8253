//! The GPU libraries' side of a live run: NVML in one child for the whole node, and one
//! worker per GPU (super::worker) that starts CUDA or HIP once for both the probe and the write
//! test; their answers put together as one probe of the node.

use super::worker;
use super::{Ask, ProbeCommand, Runtime, cleared_env, run};
use crate::model::gdr::{PairResult, PairRunner, PairSpec};
use crate::model::gpu::{Cuda, Hip, Lib, Nvml, Probe, ProbeFailure};
use crate::parse::pci::Bdf;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

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
    let deadline = deadline_s
        .map(|s| {
            format!(
                " of {s} s (less {} ms kept for judging and writing the report)",
                crate::deadline::reserve_for(s).as_millis()
            )
        })
        .unwrap_or_default();
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
        if let Some(why) = cmd.no_time() {
            session.not_run = Some(why);
            return session;
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
        merge(nvml, answers, cleared_env())
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
}
