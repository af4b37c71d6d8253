//! One process per GPU (`gdrdoctor gpu-worker`), which starts CUDA (or HIP) once and does all
//! the work that needs it on that GPU: the probe (attributes, the dma-buf export) and then,
//! pair by pair as the parent asks, the GDR write test on the same context.
//!
//! Why one process per GPU: a GPU that hangs its driver or crashes a vendor library costs its
//! own results only, and a process that ends frees everything it held. Why the same process
//! for the probe and the write test: starting CUDA (`cuInit` and the GPU's primary context) is
//! most of the time either takes, and paying it twice per GPU doubled the live run (issue 14).
//!
//! The conversation: the parent starts the worker with a [`WorkerSpec`]; the worker answers
//! once with a [`WorkerProbe`], then reads one [`PairSpec`] per line from its stdin and answers
//! each with a [`PairResult`], until its stdin closes. The parent decides when each pair runs
//! (pairs that share a NIC never run together, see `gdr::plan::waves`) and how long each
//! answer may take; a worker that misses a deadline is killed.

use crate::child::{ANSWER, Conversation};
use crate::ffi::gpu::{GpuLibrary, OpenedGpu};
use crate::ffi::{cuda, hip};
use crate::gdr::engine::{self, GpuSide};
use crate::model::gdr::{Failure, FailureKind, PairResult, PairSpec};
use crate::model::gpu::{Cuda, CudaDevice, Export, HIDING_ENV, Hip, Lib};
use crate::parse::pci::Bdf;
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::Path;
use std::time::Duration;

/// Which runtime a worker starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Runtime {
    Cuda,
    Hip,
}

/// What the parent tells a worker when it starts it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSpec {
    /// The GPU's PCI address.
    pub gpu: String,
    pub runtime: Runtime,
    /// Allocate and export a dma-buf as part of the probe.
    pub export: bool,
}

/// A worker's first answer: what its library says of its GPU (one device), or why it cannot
/// be used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct WorkerProbe {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<Lib<Cuda>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip: Option<Lib<Hip>>,
}

// -- the worker's side ---------------------------------------------------------------------

/// Writes one answer line; a parent that is gone ends the worker.
fn say(out: &mut dyn std::io::Write, value: &impl Serialize) -> bool {
    let json = serde_json::to_string(value).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    writeln!(out, "{ANSWER}{json}")
        .and_then(|()| out.flush())
        .is_ok()
}

/// The pair answer for every request when the GPU could not be opened.
fn refused(kind_step: &(&'static str, String), steps: &[String]) -> PairResult {
    PairResult {
        memory_steps: steps.to_vec(),
        failure: Some(Failure {
            kind: FailureKind::Memory,
            step: kind_step.0.into(),
            message: kind_step.1.clone(),
        }),
        ..PairResult::default()
    }
}

/// Serves requests from `input` until it ends: each line a [`PairSpec`], each answered with
/// `run` (or, for a line that is not one, a failure naming it).
fn serve(
    input: &mut dyn BufRead,
    out: &mut dyn std::io::Write,
    mut run: impl FnMut(&PairSpec) -> PairResult,
) {
    let mut line = String::new();
    loop {
        line.clear();
        match input.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let result = match serde_json::from_str::<PairSpec>(line.trim()) {
            Ok(spec) => run(&spec),
            Err(e) => refused(&("spec", format!("unreadable pair spec: {e}")), &[]),
        };
        if !say(out, &result) {
            return;
        }
    }
}

/// `gdrdoctor gpu-worker --spec JSON`: the whole life of a worker.
pub fn worker_main(spec_json: &str, input: &mut dyn BufRead, out: &mut dyn std::io::Write) {
    let spec = match serde_json::from_str::<WorkerSpec>(spec_json) {
        Ok(s) => s,
        Err(e) => {
            let why = ("spec", format!("unreadable worker spec: {e}"));
            if say(out, &WorkerProbe::default()) {
                serve(input, out, |_| refused(&why, &[]));
            }
            return;
        }
    };
    match spec.runtime {
        Runtime::Cuda => work::<cuda::Session>(&spec, input, out),
        Runtime::Hip => work::<hip::Session>(&spec, input, out),
    }
}

/// How a runtime's facts fit a worker's first answer.
trait Answer: GpuLibrary {
    fn answer(lib: Lib<Self::Facts>) -> WorkerProbe;
}

impl Answer for cuda::Session {
    fn answer(lib: Lib<Cuda>) -> WorkerProbe {
        WorkerProbe {
            cuda: Some(lib),
            hip: None,
        }
    }
}

impl Answer for hip::Session {
    fn answer(lib: Lib<Hip>) -> WorkerProbe {
        WorkerProbe {
            cuda: None,
            hip: Some(lib),
        }
    }
}

fn not_listed<L: GpuLibrary>(bus: &str) -> String {
    format!("{} does not list {bus}", L::NAME)
}

/// A worker on runtime `L`: open it, answer the probe for this worker's GPU, then serve pairs
/// on that GPU (or refuse each, naming why they cannot run).
fn work<L: Answer>(spec: &WorkerSpec, input: &mut dyn BufRead, out: &mut dyn std::io::Write) {
    let bus = spec.gpu.as_str();
    let library = match L::open() {
        Ok(l) => l,
        Err(e) => {
            let why = (L::LIBRARY, e.reason());
            if say(out, &L::answer(e.cast())) {
                serve(input, out, |_| refused(&why, &[]));
            }
            return;
        }
    };
    let started = library.started();
    let Some(ordinal) = Bdf::parse(bus).and_then(|b| library.ordinal_of(b)) else {
        let why = (L::BY_BUS_ID, not_listed::<L>(bus));
        if say(out, &L::answer(Lib::Ready(library.describe(Vec::new())))) {
            serve(input, out, |_| refused(&why, &started));
        }
        return;
    };
    // The GPU is opened for the worker's whole life before anything else: for CUDA that
    // retains its primary context, which the export probe retains and releases too, and a
    // release to zero would destroy it, and the next pair would pay for a new one.
    let gpu = library.gpu(bus);
    let device = library.device(ordinal, spec.export);
    if !say(out, &L::answer(Lib::Ready(library.describe(vec![device])))) {
        return;
    }
    match &gpu {
        Ok(gpu) => {
            let mut steps = started;
            steps.extend(gpu.opened());
            let symbols = library.write_test_symbols().map_err(|e| e.reason());
            serve(input, out, |pair| match &symbols {
                Ok(()) => engine::run_pair_on(pair, &GpuSide::Gpu { gpu, steps: &steps }),
                Err(e) => refused(&(L::LIBRARY, e.clone()), &steps),
            });
        }
        Err(e) => {
            let why = (L::HOLD, e.clone());
            serve(input, out, |_| refused(&why, &started));
        }
    }
}

// -- the parent's side ---------------------------------------------------------------------

/// A running worker, from the parent's side.
pub struct Worker {
    pub gpu: Bdf,
    talk: Conversation,
    /// Its first answer, once read.
    probe: Option<Result<WorkerProbe, String>>,
}

impl Worker {
    /// Starts the worker for `gpu`. `visible`: the value for `CUDA_VISIBLE_DEVICES` that shows
    /// it this GPU alone (its UUID), so that CUDA attaches to no other; the variables that hide
    /// GPUs are removed otherwise.
    pub fn start(
        exe: &Path,
        spec: &WorkerSpec,
        gpu: Bdf,
        visible: Option<&str>,
    ) -> Result<Worker, String> {
        let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let mut env: Vec<(&str, Option<&str>)> = HIDING_ENV.iter().map(|v| (*v, None)).collect();
        if let (Some(uuid), Runtime::Cuda) = (visible, spec.runtime) {
            env.retain(|(k, _)| *k != "CUDA_VISIBLE_DEVICES");
            env.push(("CUDA_VISIBLE_DEVICES", Some(uuid)));
        }
        let talk = Conversation::start(
            exe,
            &["gpu-worker", "--spec", &json],
            &env,
            &format!("the GPU worker for {gpu}"),
        )?;
        Ok(Worker {
            gpu,
            talk,
            probe: None,
        })
    }

    /// Its probe answer, waiting at most `timeout` for it the first time.
    pub fn probe(&mut self, timeout: Duration) -> Result<WorkerProbe, String> {
        if self.probe.is_none() {
            let answer = self.talk.answer(timeout).and_then(|line| {
                serde_json::from_str::<WorkerProbe>(&line).map_err(|e| {
                    format!(
                        "the GPU worker for {}'s answer is unreadable ({e})",
                        self.gpu
                    )
                })
            });
            self.probe = Some(answer);
        }
        self.probe
            .clone()
            .unwrap_or_else(|| Err("no answer".into()))
    }

    /// Runs one pair on this worker's GPU; the answer must come within `timeout`.
    pub fn pair(&mut self, spec: &PairSpec, timeout: Duration) -> Result<PairResult, String> {
        // The probe answer comes first; a worker that never gave it cannot run a pair.
        self.probe(timeout)?;
        let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
        let line = self.talk.ask(&json, timeout)?;
        serde_json::from_str(&line)
            .map_err(|e| format!("the GDR test's answer is unreadable ({e})"))
    }

    /// Done with it: it frees its GPU and exits (killed after `grace`).
    pub fn finish(self, grace: Duration) {
        self.talk.finish(grace);
    }
}

/// The CUDA device for `gpu` out of a worker's probe, or why there is none.
pub fn cuda_device(p: &WorkerProbe) -> Option<&CudaDevice> {
    p.cuda.as_ref()?.ready()?.devices.first()
}

/// An export that was not tried because the worker never answered.
pub fn not_tried(why: &str) -> Export {
    Export::NotTried {
        reason: why.to_owned(),
    }
}
