//! One pair, in the child: the buffer under test, the NIC, registration, loopback WRITEs both
//! ways, verification, bandwidth. Every resource is a guard dropped in reverse order on every
//! return path.
//!
//! Here: the buffer under test and the pair's run; [`register`]: the NIC and the buffer's
//! registration (what the one-node and the two-node test share); [`loopback`]: the one-node
//! test; [`srd`]: its transport on an EFA device, which offers no RC; [`transfer`]: WRITEs
//! and their completions, the pattern and its check.

mod loopback;
mod register;
mod srd;
mod transfer;

pub use register::{Dmabuf, Opened, open_and_register};
pub(crate) use transfer::{mismatch, one_write, pattern, round2, stream};

use super::{Failure, FailureKind, Memory, PairResult, PairSpec};
use crate::ffi::gpu::{DeviceMemory, GpuLibrary, OpenedGpu};
use crate::ffi::hostmem::HostBuffer;
use crate::ffi::ibverbs::{self, MemoryRegion, Pd};
use crate::ffi::{cuda, hip, udmabuf};
use loopback::loopback;
use std::time::{Duration, Instant};

pub const ACCESS: i32 =
    ibverbs::ACCESS_LOCAL_WRITE | ibverbs::ACCESS_REMOTE_WRITE | ibverbs::ACCESS_REMOTE_READ;
/// WRITEs in flight during the bandwidth run (perftest's default tx depth is 128; 32 keeps
/// the send queue small and is enough to saturate a loopback).
pub(crate) const DEPTH: u32 = 32;

/// The buffer under test.
pub enum Target<'a> {
    Host(HostBuffer),
    Udma(udmabuf::HostDmabuf),
    /// A GPU's memory (CUDA, HIP).
    Gpu(Box<dyn DeviceMemory + 'a>),
}

impl Target<'_> {
    pub fn addr(&self) -> u64 {
        match self {
            Target::Host(b) => b.addr(),
            Target::Udma(u) => u.addr(),
            Target::Gpu(b) => b.addr(),
        }
    }
    pub fn write(&self, data: &[u8]) -> Result<(), String> {
        match self {
            Target::Host(b) => {
                b.write(data);
                Ok(())
            }
            Target::Udma(u) => {
                u.write(data);
                Ok(())
            }
            Target::Gpu(b) => b.write(data),
        }
    }
    pub fn read(&self, out: &mut [u8]) -> Result<(), String> {
        match self {
            Target::Host(b) => {
                b.read(out);
                Ok(())
            }
            Target::Udma(u) => {
                u.read(out);
                Ok(())
            }
            Target::Gpu(b) => b.read(out),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Target::Host(_) | Target::Udma(_) => "host buffer",
            Target::Gpu(_) => "GPU",
        }
    }
    /// `ibv_reg_mr` on the buffer itself (host memory, or a GPU's through peer memory); `None`
    /// for a host dma-buf, which is registered as a dma-buf only.
    fn reg_mr<'s>(
        &'s self,
        pd: &'s Pd<'_>,
        access: i32,
    ) -> Option<std::io::Result<MemoryRegion<'s>>> {
        match self {
            Target::Host(b) => Some(pd.reg_mr(b, access)),
            Target::Gpu(b) => Some(pd.reg_mr(&**b, access)),
            Target::Udma(_) => None,
        }
    }
}

struct Run {
    res: PairResult,
    start: Instant,
    deadline: Instant,
}

impl Run {
    fn fail(
        mut self,
        kind: FailureKind,
        step: impl Into<String>,
        message: impl Into<String>,
    ) -> PairResult {
        self.res.failure = Some(Failure {
            kind,
            step: step.into(),
            message: message.into(),
        });
        self.done()
    }
    fn done(mut self) -> PairResult {
        self.res.elapsed_ms = self.start.elapsed().as_millis() as u64;
        self.res
    }
}

/// The GPU a pair's buffer lives on, opened once: a worker (crate::probe::gpu::worker) keeps it open
/// between its pairs, so that CUDA (or HIP) starts once per GPU, not once per pair.
pub enum GpuSide<'a> {
    /// Host memory, or nothing opened.
    None,
    Gpu {
        gpu: &'a dyn OpenedGpu,
        /// What opening it did and saw (`cuInit: ...`, the attributes), for every pair's steps.
        steps: &'a [String],
    },
}

/// What runs on the registered buffer under test: the one-node loopback below, or a rail
/// between two nodes (super::twonode). Its arguments: the result so far, what was opened, the
/// buffer, the deadline.
pub type Body<'b> =
    &'b mut dyn FnMut(&mut PairResult, &Opened, &Target, Instant) -> Result<(), Failed>;

/// One pair in a process of its own (`gdrdoctor gdr-pair`): opens what the buffer needs, then
/// [`run_pair_on`].
pub fn run_pair(spec: &PairSpec) -> PairResult {
    run_pair_with(spec, &mut |res, o, t, deadline| {
        loopback(spec, res, o, t, deadline)
    })
}

/// Opens what the buffer needs (CUDA, HIP or nothing), then [`run_pair_on_with`].
pub fn run_pair_with(spec: &PairSpec, body: Body) -> PairResult {
    match spec.memory {
        Memory::Host | Memory::HostDmabuf => run_pair_on_with(spec, &GpuSide::None, body),
        Memory::Cuda => run_pair_on_library::<cuda::Session>(spec, body),
        Memory::Hip => run_pair_on_library::<hip::Session>(spec, body),
    }
}

/// Opens the GPU runtime `L` and the pair's GPU with it, then [`run_pair_on_with`].
fn run_pair_on_library<L: GpuLibrary>(spec: &PairSpec, body: Body) -> PairResult {
    let start = Instant::now();
    let failed = |kind, step: &str, message: String, steps: Vec<String>| PairResult {
        memory_steps: steps,
        failure: Some(Failure {
            kind,
            step: step.into(),
            message,
        }),
        elapsed_ms: start.elapsed().as_millis() as u64,
        ..PairResult::default()
    };
    let Some(bus) = spec.gpu.as_deref() else {
        let why = format!("{} memory needs a GPU", L::NAME);
        return failed(FailureKind::Memory, "spec", why, vec![]);
    };
    let library = match open_library::<L>() {
        Ok(l) => l,
        Err(e) => return failed(FailureKind::Memory, L::LIBRARY, e, vec![]),
    };
    let mut steps = library.started();
    let gpu = match library.gpu(bus) {
        Ok(g) => g,
        Err(e) => return failed(FailureKind::Memory, L::BY_BUS_ID, e, steps),
    };
    steps.extend(gpu.opened());
    let mut r = run_pair_on_with(
        spec,
        &GpuSide::Gpu {
            gpu: &gpu,
            steps: &steps,
        },
        body,
    );
    r.elapsed_ms = start.elapsed().as_millis() as u64;
    r
}

/// A GPU runtime library with everything the write test calls, initialised.
fn open_library<L: GpuLibrary>() -> Result<L, String> {
    let library = L::open().map_err(|e| e.reason())?;
    library.write_test_symbols().map_err(|e| e.reason())?;
    Ok(library)
}

/// One pair on a GPU already opened (or host memory): the buffer, its dma-buf, the NIC,
/// registration, WRITEs both ways, verification, bandwidth.
pub fn run_pair_on(spec: &PairSpec, side: &GpuSide) -> PairResult {
    run_pair_on_with(spec, side, &mut |res, o, t, deadline| {
        loopback(spec, res, o, t, deadline)
    })
}

/// The buffer under test and its dma-buf on a GPU already opened (or host memory), the NIC,
/// registration, then `body` on what was opened.
pub fn run_pair_on_with(spec: &PairSpec, side: &GpuSide, body: Body) -> PairResult {
    let start = Instant::now();
    let mut run = Run {
        res: PairResult::default(),
        start,
        // From the spec: in the two-node test, a peer's `rail_timeout_ms`.
        deadline: crate::deadline::later(start, Duration::from_millis(spec.deadline_ms)),
    };
    let size = spec.size.max(4096) as usize;
    let target = match (spec.memory, side) {
        (Memory::Host, _) => match HostBuffer::new(size) {
            Ok(b) => {
                run.res.memory_steps.push(format!(
                    "host buffer of {}",
                    crate::parse::bytes(size as u64)
                ));
                Target::Host(b)
            }
            Err(e) => return run.fail(FailureKind::Memory, "host allocation", e),
        },
        (Memory::HostDmabuf, _) => match udmabuf::HostDmabuf::create(size) {
            Ok(u) => {
                run.res.memory_steps.push(format!(
                    "{} of host memory as a dma-buf from {}",
                    crate::parse::bytes(size as u64),
                    u.source
                ));
                Target::Udma(u)
            }
            Err(e) => return run.fail(FailureKind::Memory, "host dma-buf", e),
        },
        (m, GpuSide::Gpu { gpu, steps }) if gpu.memory() == m => {
            run.res.memory_steps.extend(steps.iter().cloned());
            match gpu.alloc(size) {
                Ok((b, step)) => {
                    run.res.memory_steps.push(step);
                    Target::Gpu(b)
                }
                Err((call, e)) => return run.fail(FailureKind::Memory, call, e),
            }
        }
        (m, _) => {
            return run.fail(
                FailureKind::Memory,
                "spec",
                format!(
                    "{} memory asked of a process that did not open that GPU",
                    m.as_str()
                ),
            );
        }
    };

    // The GPU side's dma-buf, exported before any NIC is involved.
    let mut dmabuf: Dmabuf = match &target {
        Target::Gpu(b) => Some(b.export_dmabuf().map(|(fd, off)| (fd, off, true))),
        Target::Udma(u) => Some(Ok((u.fd, 0, false))),
        Target::Host(_) => None,
    };
    match &dmabuf {
        Some(Ok((fd, _, true))) => run
            .res
            .memory_steps
            .push(format!("dma-buf exported ({})", crate::ffi::fd_target(*fd))),
        Some(Err(e)) => run
            .res
            .memory_steps
            .push(format!("dma-buf export failed: {e}")),
        _ => {}
    }
    let result = with_nic(spec, run, &target, &dmabuf, body);
    if let (Some(Ok((fd, _, true))), Target::Gpu(b)) = (dmabuf.take(), &target) {
        b.close_dmabuf(fd);
    }
    result
}

/// A step that failed: its kind, its name, what happened.
pub type Failed = (FailureKind, String, String);

pub fn fail(kind: FailureKind, step: impl Into<String>, message: impl Into<String>) -> Failed {
    (kind, step.into(), message.into())
}

fn with_nic(
    spec: &PairSpec,
    mut run: Run,
    target: &Target,
    dmabuf: &Dmabuf,
    body: Body,
) -> PairResult {
    let Some(nic) = &spec.nic else {
        return run.fail(
            FailureKind::NoRdmaDevice,
            "NIC",
            "no RDMA device on this node: nothing to write through",
        );
    };
    let size = spec.size.max(4096) as usize;
    let deadline = run.deadline;
    let driver = spec.nic_driver.as_deref();
    match open_and_register(
        nic,
        driver,
        size,
        &mut run.res,
        target,
        dmabuf,
        |res, o, target| body(res, o, target, deadline),
    ) {
        Ok(()) => run.done(),
        Err((kind, step, message)) => run.fail(kind, step, message),
    }
}
