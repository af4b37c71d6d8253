//! The runs above the facts: what only a run on the live node can learn. The inventory reads
//! the node ([`Inventory`]); this stage starts the GPU probe as soon as the GPUs are known,
//! while the rest is read, probes this process's access to RDMA, and hands the checks what the
//! runs found ([`Runs`]). The GDR write test and NCCL's own run come after loading (the
//! commands run them on the session this leaves running).
//!
//! A captured root runs nothing: what a capture recorded of a run (NVML's answer, the kernel's
//! QoS answers) stands for it, so that a check offline says what it said live.

pub mod access;
pub mod baseline;
pub mod gdr_test;
pub mod gpu;
pub mod nccl;
pub mod qos;
pub mod sample;
pub mod twonode;

use crate::config::Config;
use crate::inventory::{GpuVendor, Inventory, Partial, Threads};
use crate::model::Runs;
use crate::model::gpu::{Runtime, SkipReason};
use crate::probe::gpu::{GpuSession, ProbeCommand, Target};
use crate::root::Root;

/// What to run beside reading the node.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Probe this process's access to RDMA (device nodes, memlock, libibverbs). Live roots only.
    pub access: bool,
    /// Ask the GPU libraries (NVML, CUDA, HIP) in a child process. Live roots only; `None`
    /// skips it (`--no-gpu-probe`, `capture`).
    pub gpu_probe: Option<ProbeCommand>,
    /// Run the GPU probe with a captured root too (`check --gpu-probe`): the root is the
    /// host's, seen from a container that has the host's GPUs.
    pub gpu_probe_on_root: bool,
    /// Ask the kernel about the RoCE ports' netdevs (dcbnl, ethtool). Live roots only; a
    /// captured root's recorded answers are read whatever this says.
    pub qos: bool,
}

/// Reads the node and runs what `options` asks, the GPU probe to its end.
pub fn load(root: &Root, config: &Config, options: Options) -> (Inventory, Runs) {
    let (mut inv, mut runs, session) = load_pending(root, config, options);
    if let Some(mut s) = session {
        runs.gpu = s.probe();
        s.finish(crate::probe::gpu::FINISH_GRACE);
        inv.learn(&runs.gpu);
    }
    (inv, runs)
}

/// Like [`load`], but returns the GPU session as it runs: the caller runs the GDR write test on
/// its workers, then asks it for the probe ([`GpuSession::probe`]) and ends it. Until then
/// `runs.gpu` reads as not asked.
pub fn load_pending(
    root: &Root,
    config: &Config,
    options: Options,
) -> (Inventory, Runs, Option<GpuSession>) {
    pending_on(root, config, options, Threads::Two)
}

/// Reads a capture as `fleet` does: the inventory on the calling thread (fleet already reads
/// one capture per core, and two threads per capture cost a third of its wall time), nothing
/// run; a capture's recorded NVML answer stands for the GPU probe, as in [`load`].
pub fn load_captured(root: &Root, config: &Config) -> (Inventory, Runs) {
    let (inv, runs, _) = pending_on(root, config, Options::default(), Threads::One);
    (inv, runs)
}

/// [`load_pending`], the inventory read on `threads`.
fn pending_on(
    root: &Root,
    config: &Config,
    options: Options,
    threads: Threads,
) -> (Inventory, Runs, Option<GpuSession>) {
    let partial = Inventory::begin_on(root, config, threads);
    // The GPU workers start as soon as the GPUs are known, while the rest is read.
    let session = start_gpu(root, &partial, &options);
    let mut inv = partial.finish(root);
    let mut runs = Runs::none(root.is_live());
    runs.access = (options.access && root.is_live()).then(|| access::load(root, &inv.rdma));
    runs.qos = qos::load(root, &mut inv, options.qos);
    // A capture may hold the second reading of a sample window: its growth is judged offline
    // as it was live.
    if !root.is_live() {
        runs.sample = sample::recorded(root, &inv);
    }
    let nvidia = inv.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia);
    let session = match session {
        // A capture may hold NVML's answer on the node: its NVML facts stand offline.
        Err(SkipReason::Offline) if nvidia => {
            runs.gpu = match crate::inventory::gpu::recorded_nvml(root, &mut inv.problems) {
                Some(r) => Runtime::Recorded(Box::new(r)),
                None => Runtime::Skipped {
                    reason: SkipReason::Offline,
                },
            };
            inv.learn(&runs.gpu);
            None
        }
        Err(reason) => {
            runs.gpu = Runtime::Skipped { reason };
            None
        }
        Ok(session) => Some(session),
    };
    (inv, runs, session)
}

/// The GPU session, started on the GPUs found so far; or why there is none.
fn start_gpu(root: &Root, partial: &Partial, options: &Options) -> Result<GpuSession, SkipReason> {
    let has = |v: GpuVendor| partial.gpus.iter().any(|g| g.vendor == v);
    let (nvidia, amd) = (has(GpuVendor::Nvidia), has(GpuVendor::Amd));
    let here = root.is_live() || options.gpu_probe_on_root;
    match (&options.gpu_probe, nvidia || amd, here) {
        (_, false, _) => Err(SkipReason::NoGpu),
        (_, true, false) => Err(SkipReason::Offline),
        (None, true, true) => Err(SkipReason::Disabled),
        (Some(cmd), true, true) => {
            let mut cmd = cmd.clone();
            cmd.ask.nvml &= nvidia;
            cmd.ask.cuda &= nvidia;
            cmd.ask.hip &= amd;
            let targets = partial
                .gpus
                .iter()
                .filter_map(|g| {
                    let runtime = match g.vendor {
                        GpuVendor::Nvidia => crate::probe::gpu::worker::Runtime::Cuda,
                        GpuVendor::Amd => crate::probe::gpu::worker::Runtime::Hip,
                        GpuVendor::Other => return None,
                    };
                    Some(Target {
                        bdf: g.bdf,
                        runtime,
                        visible: g.uuid.clone(),
                    })
                })
                .collect();
            Ok(GpuSession::start(&cmd, targets))
        }
    }
}
