//! `peer-memory`: which path lets a NIC reach GPU memory on this node, and which one NCCL takes.
//!
//! NCCL (src/transport/net_ib*): a NIC gets `NCCL_PTR_DMABUF` when a dummy `ibv_reg_dmabuf_mr`
//! does not fail with EOPNOTSUPP, and `NCCL_PTR_CUDA` (peermem) when
//! `/sys/kernel/mm/memory_peers/nv_mem/version` (or `nv_mem_nc`, or
//! `/sys/module/nvidia_peermem/version`) exists. With `NCCL_DMABUF_ENABLE=1` (the default), CUDA
//! 11.7 or later and `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`, buffers are registered through
//! DMA-BUF, falling through to the peermem path otherwise. Neither: NCCL silently stages through
//! host memory.

mod efa;

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::kernel::{KernelConfig, MEMORY_PEERS, NVIDIA_VERSION};
use crate::inventory::{GpuVendor, Inventory, RdmaDevice};
use crate::model::Action;
use crate::model::gpu::{Export, Lib};
use crate::model::gpu::{Runtime, SkipReason};
use crate::model::{Code, Evidence, Finding, Fix, Status};
use crate::parse::kernel::KernelVersion;

pub struct PeerMemory;

const GDR_PATH_DMABUF: Code = Code {
    id: "gdr-path-dmabuf",
    summary: "the DMA-BUF path is available: NCCL will register GPU memory through it",
};

const GDR_PATH_PEERMEM: Code = Code {
    id: "gdr-path-peermem",
    summary: "the peer-memory path (nvidia_peermem / amd_peer_mem) is available and NCCL will use it",
};

const PEERMEM_NOT_LOADED: Code = Code {
    id: "peermem-not-loaded",
    summary: "no DMA-BUF path and nvidia_peermem is not loaded: no GPUDirect RDMA at all",
};

const PEERMEM_NOT_REGISTERED: Code = Code {
    id: "peermem-not-registered",
    summary: "nvidia_peermem is loaded but registered no peer-memory client with the RDMA core",
};

const AMD_NO_GDR_PATH: Code = Code {
    id: "amd-no-gdr-path",
    summary: "AMD GPUs have neither the DMA-BUF prerequisites nor amd_peer_mem",
};

const GDR_PATH_UNKNOWN: Code = Code {
    id: "gdr-path-unknown",
    summary: "the facts needed to tell the GDR path could not be read, or the accelerator is unknown",
};

const NIC_NO_DMABUF: Code = Code {
    id: "nic-no-dmabuf",
    summary: "an RDMA device whose driver cannot register dma-bufs, on a node whose GPUs rely on DMA-BUF",
};

const GDR_PATH_EFA_P2P: Code = Code {
    id: "gdr-path-efa-p2p",
    summary: "the efa driver registers GPU memory itself through its P2P provider (device/p2p names NVIDIA)",
};

const EFA_NO_GDR_PATH: Code = Code {
    id: "efa-no-gdr-path",
    summary: "EFA devices with neither the efa driver's P2P provider nor the DMA-BUF path: libfabric cannot register GPU memory",
};

const NO_GPU: Code = Code {
    id: "peer-memory-no-gpu",
    summary: "no GPU, so no GPU memory path to judge",
};

const CODES: &[Code] = &[
    GDR_PATH_DMABUF,
    GDR_PATH_PEERMEM,
    PEERMEM_NOT_LOADED,
    PEERMEM_NOT_REGISTERED,
    AMD_NO_GDR_PATH,
    GDR_PATH_UNKNOWN,
    NIC_NO_DMABUF,
    GDR_PATH_EFA_P2P,
    EFA_NO_GDR_PATH,
    NO_GPU,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(GDR_PATH_DMABUF, Action::None),
    Rule::new(GDR_PATH_PEERMEM, Action::None),
    Rule::new(PEERMEM_NOT_LOADED, Action::FixInPlace),
    Rule::new(PEERMEM_NOT_REGISTERED, Action::FixInPlace),
    Rule::new(AMD_NO_GDR_PATH, Action::FixInPlace),
    Rule::new(GDR_PATH_UNKNOWN, Action::None),
    Rule::new(NIC_NO_DMABUF, Action::FixInPlace),
    Rule::new(GDR_PATH_EFA_P2P, Action::None),
    Rule::new(EFA_NO_GDR_PATH, Action::FixInPlace),
    Rule::new(NO_GPU, Action::None),
];

/// The earliest kernel with dma-buf memory regions in the RDMA core (ib_umem_dmabuf, 5.12).
const DMABUF_KERNEL: KernelVersion = KernelVersion(5, 12, 0);
/// NVIDIA exports dma-bufs of device memory from R515 (CUDA 11.7), open kernel modules only.
const DMABUF_NVIDIA_MAJOR: u32 = 515;
/// cuMemGetHandleForAddressRange and CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: CUDA 11.7.
const DMABUF_CUDA: i32 = 11070;

const META: Meta = Meta {
    id: "peer-memory",
    title: "A GPU memory path for the NIC (DMA-BUF or peermem)",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/peer-memory/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for PeerMemory {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let mut out = Vec::new();
        let count = |v: GpuVendor| inv.gpus.iter().filter(|g| g.vendor == v).count();
        let (nvidia, amd, other) = (
            count(GpuVendor::Nvidia),
            count(GpuVendor::Amd),
            count(GpuVendor::Other),
        );
        let peermem = nvidia_peermem(inv);

        let mut dmabuf_relied_on = false;
        if nvidia > 0 && efa::applies(inv) {
            // NCCL reaches EFA through aws-ofi-nccl and libfabric: their rules, not net_ib's.
            out.push(efa::judge(inv, &cx.runs.gpu, nvidia));
        } else if nvidia > 0 {
            let (finding, uses_dmabuf) = judge_nvidia(inv, &cx.runs.gpu, nvidia, &peermem);
            dmabuf_relied_on |= uses_dmabuf;
            out.push(finding);
        }
        if amd > 0 {
            let (finding, uses_dmabuf) = judge_amd(inv, &cx.runs.gpu, amd);
            dmabuf_relied_on |= uses_dmabuf;
            out.push(finding);
        }
        if other > 0 {
            let declared: Vec<_> = inv
                .gpus
                .iter()
                .filter(|g| g.vendor == GpuVendor::Other)
                .filter_map(|g| inv.function(g.bdf))
                .collect();
            let names: Vec<String> = declared.iter().map(|f| f.bdf.to_string()).collect();
            out.push(
                Finding::unknown(
                    GDR_PATH_UNKNOWN,
                    "declared accelerators",
                    format!("{} ({}) are of a vendor gdrdoctor has no GDR rules for; only a GDR write test can tell", names.join(", "), plural(other, "accelerator")),
                )
                .with(declared.iter().map(|f| Evidence {
                    path: f.driver_path(),
                    value: format!("{} bound to {}", f.ids(), f.driver.as_deref().unwrap_or("no driver")),
                })),
            );
        }
        // A loaded but unregistered nvidia_peermem is worth saying even when another path covers
        // for it: it is the inbox-RDMA-stack trap (nccl#1939), and it breaks any job that sets
        // NCCL_DMABUF_ENABLE=0.
        if let Peermem::LoadedUnregistered(module) = &peermem {
            if !out.iter().any(|f| f.code == PEERMEM_NOT_REGISTERED.id) {
                out.push(unregistered(
                    inv,
                    module,
                    Status::Warn,
                    "no GPU relies on it now".into(),
                ));
            }
        }
        if dmabuf_relied_on {
            for dev in &inv.rdma {
                if nic_dmabuf(dev) == Some(false) {
                    out.push(
                        Finding::warn(
                            NIC_NO_DMABUF,
                            dev.name.clone(),
                            format!("{} ({}) cannot register dma-bufs (its driver returns EOPNOTSUPP): GPU memory cannot be registered with it", dev.name, dev.driver.as_deref().unwrap_or("software RDMA")),
                        )
                        .evidence(dev.class_path(), format!("driver {}", dev.driver.as_deref().unwrap_or("unknown")))
                        .fix(Fix::new("Use an RDMA NIC whose driver supports dma-buf memory regions (mlx5 does) for GPU traffic", "Nothing to run: this is a property of the NIC driver.").manual("rdma link show")),
                    );
                }
            }
        }
        if out.is_empty() {
            out.push(
                Finding::skip(NO_GPU, "node", "no GPU found (see gpu-driver)")
                    .evidence(
                        crate::inventory::pci::PCI_DEVICES,
                        format!("{} PCI functions, none a GPU", inv.pci.len()),
                    )
                    .prerequisites(&["gpu-driver"]),
            );
        }
        out
    }
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// Where the GPU side of the DMA-BUF path stands.
enum Possible {
    Yes(String),
    No(Vec<String>),
    Unknown(Vec<String>),
}

impl Possible {
    /// Any reason against decides; then any unknown; else it is possible, for `why`.
    fn from(no: Vec<String>, unknown: Vec<String>, why: impl FnOnce() -> String) -> Possible {
        if !no.is_empty() {
            Possible::No(no)
        } else if !unknown.is_empty() {
            Possible::Unknown(unknown)
        } else {
            Possible::Yes(why())
        }
    }
}

enum Peermem {
    /// Registered with the RDMA core: the `memory_peers` entry and its version.
    Registered(String, String),
    LoadedUnregistered(String),
    NotLoaded,
}

fn nvidia_peermem(inv: &Inventory) -> Peermem {
    let k = &inv.kernel;
    // nvidia_peermem registers `nv_mem`; some driver branches add `nv_mem_nc` (NCCL checks both).
    if let Some((name, fact)) = k.memory_peers.iter().find(|(n, _)| n.starts_with("nv_mem")) {
        return Peermem::Registered(name.clone(), fact.shown());
    }
    for module in ["nvidia_peermem", "nv_peer_mem"] {
        if k.module(module).is_some_and(|m| m.live()) {
            return Peermem::LoadedUnregistered(module.into());
        }
    }
    Peermem::NotLoaded
}

fn kernel_ok(
    inv: &Inventory,
    reasons_no: &mut Vec<String>,
    reasons_unknown: &mut Vec<String>,
) -> Option<KernelVersion> {
    match inv.kernel.version {
        Some(v) if v >= DMABUF_KERNEL => Some(v),
        Some(v) => {
            reasons_no.push(format!(
                "kernel {v} is older than {DMABUF_KERNEL} (no dma-buf memory regions)"
            ));
            None
        }
        None => {
            reasons_unknown.push(format!(
                "kernel release unreadable ({})",
                inv.kernel.release.problem().unwrap_or_default()
            ));
            None
        }
    }
}

fn nvidia_dmabuf(inv: &Inventory) -> Possible {
    let (mut no, mut unknown) = (Vec::new(), Vec::new());
    let nv = &inv.kernel.nvidia;
    let mut driver = None;
    match nv.value() {
        Some(v) if !v.open => no.push(format!("the NVIDIA {} kernel module is the proprietary one; DMA-BUF needs the open kernel modules", v.version)),
        Some(v) if v.major < DMABUF_NVIDIA_MAJOR => no.push(format!("NVIDIA driver {} predates dma-buf export (R{DMABUF_NVIDIA_MAJOR})", v.version)),
        Some(v) => driver = Some(v.version.clone()),
        // Missing while a GPU is bound to nvidia means an incomplete capture, not a missing driver.
        None if nv.is_missing() && !inv.gpus.iter().any(|g| inv.function(g.bdf).is_some_and(|f| f.driver.as_deref() == Some("nvidia"))) => {
            no.push(format!("the NVIDIA driver is not loaded ({NVIDIA_VERSION} missing)"))
        }
        None => unknown.push(nv.problem().unwrap_or_default()),
    }
    let kernel = kernel_ok(inv, &mut no, &mut unknown);
    if let Some(c) = &inv.kernel.config {
        if !c.enabled("CONFIG_DMA_SHARED_BUFFER") {
            no.push(format!(
                "{}: {}",
                c.path,
                c.shown("CONFIG_DMA_SHARED_BUFFER")
            ));
        }
    }
    Possible::from(no, unknown, || {
        format!(
            "open kernel module {}, kernel {} (>= {DMABUF_KERNEL})",
            driver.unwrap_or_default(),
            kernel.map(|k| k.to_string()).unwrap_or_default()
        )
    })
}

fn kernel_evidence(inv: &Inventory) -> Evidence {
    inv.kernel.release.evidence()
}

fn peers_evidence(inv: &Inventory) -> Evidence {
    let peers = &inv.kernel.memory_peers;
    Evidence {
        path: MEMORY_PEERS.into(),
        value: if peers.is_empty() {
            "<no peer-memory clients>".into()
        } else {
            peers
                .iter()
                .map(|(n, f)| format!("{n} (version {})", f.shown()))
                .collect::<Vec<_>>()
                .join(", ")
        },
    }
}

fn no_rdma_note(inv: &Inventory) -> &'static str {
    if inv.rdma.is_empty() {
        "; no RDMA device to use it with yet (see rdma-link)"
    } else {
        ""
    }
}

/// The NVIDIA verdict, and whether it relies on DMA-BUF.
fn judge_nvidia(inv: &Inventory, gpu: &Runtime, n: usize, peermem: &Peermem) -> (Finding, bool) {
    let gpus = plural(n, "NVIDIA GPU");
    let subject = "NVIDIA GPUs";
    let mut evidence = vec![
        inv.kernel.nvidia.evidence(),
        kernel_evidence(inv),
        peers_evidence(inv),
        inv.kernel.module_evidence("nvidia_peermem"),
    ];
    // The inference from driver and kernel, confirmed or overturned by the export probe.
    let dmabuf = confirmed(nvidia_dmabuf(inv), nvidia_verified(inv, gpu), &mut evidence);
    match (&dmabuf, peermem) {
        (Possible::Yes(why), _) => {
            let also = match peermem {
                Peermem::Registered(name, _) => format!("; nvidia_peermem is registered too ({name}), the fallback"),
                _ => String::new(),
            };
            (Finding::pass(GDR_PATH_DMABUF, subject, format!("NCCL will use the DMA-BUF path for the {gpus}: {why}{also}{}", no_rdma_note(inv))).with(evidence), true)
        }
        (_, Peermem::Registered(name, version)) => {
            let why_not = match &dmabuf {
                Possible::No(r) => format!("DMA-BUF is unavailable: {}", r.join("; ")),
                Possible::Unknown(r) => format!("DMA-BUF unknown: {}", r.join("; ")),
                Possible::Yes(_) => unreachable!("handled above"),
            };
            (Finding::pass(GDR_PATH_PEERMEM, subject, format!("NCCL will use the peer-memory path for the {gpus}: nvidia_peermem registered as {name} (version {version}); {why_not}")).with(evidence), false)
        }
        (Possible::Unknown(r), _) => (
            Finding::unknown(GDR_PATH_UNKNOWN, subject, format!("cannot tell whether the DMA-BUF path works for the {gpus} ({}), and nvidia_peermem is not registered", r.join("; "))).with(evidence),
            false,
        ),
        (Possible::No(r), Peermem::LoadedUnregistered(module)) => (unregistered(inv, module, Status::Fail, format!("and DMA-BUF is unavailable: {}: the {gpus} have no GDR path", r.join("; "))), false),
        // GPUs only the open modules drive, on the proprietary module: nvidia_peermem is no
        // help (the GPUs do not run at all); the open modules are the fix (gpu-driver says so).
        (Possible::No(r), Peermem::NotLoaded) if needs_open(inv) => (
            Finding::fail(
                PEERMEM_NOT_LOADED,
                subject,
                format!("no GPUDirect RDMA path for the {gpus}: DMA-BUF is unavailable: {}; and these GPUs run only on NVIDIA's open kernel modules (see gpu-driver), so nvidia_peermem on the proprietary module would not help. NCCL will silently copy through host memory", r.join("; ")),
            )
            .with(evidence)
            .prerequisites(&["gpu-driver"])
            .fix(super::gpu_driver::open_module_fix(
                inv.kernel.nvidia.value().map(|v| v.major),
            )),
            false,
        ),
        (Possible::No(r), Peermem::NotLoaded) => (
            Finding::fail(
                PEERMEM_NOT_LOADED,
                subject,
                format!("no GPUDirect RDMA path for the {gpus}: nvidia_peermem is not loaded, and DMA-BUF is unavailable: {}. NCCL will silently copy through host memory", r.join("; ")),
            )
            .with(evidence)
            .fix(
                Fix::new(
                    "Load nvidia-peermem now and at every boot (or move to the open kernel modules, R515+, on kernel >= 5.12 for the DMA-BUF path)",
                    "nvidia-peermem needs the peer-memory API of MLNX_OFED/DOCA-OFED's ib_core; on an inbox RDMA stack it fails with 'Unknown symbol ib_register_peer_memory_client'.",
                )
                .modprobe("nvidia-peermem")
                .load_at_boot("nvidia-peermem"),
            ),
            false,
        ),
    }
}

/// Whether an NVIDIA GPU of the node runs only on the open kernel modules while the proprietary
/// module is loaded.
fn needs_open(inv: &Inventory) -> bool {
    let proprietary = inv.kernel.nvidia.value().is_some_and(|v| !v.open);
    proprietary
        && inv.gpus.iter().any(|g| {
            inv.function(g.bdf).is_some_and(|f| {
                super::gpu_driver::needs_open_modules(f.vendor, f.device, f.class).is_some()
            })
        })
}

/// What the CUDA dma-buf export probe showed for the NVIDIA GPUs.
enum Verified {
    /// Every NVIDIA GPU exported a dma-buf: the evidence, and a phrase saying so.
    Yes(Vec<Evidence>, String),
    /// Some could not: why, per GPU.
    No(Vec<String>, Vec<Evidence>),
    Unverified(String),
}

fn nvidia_verified(inv: &Inventory, gpu: &Runtime) -> Verified {
    let probe = match probed(gpu) {
        Ok(p) => p,
        Err(unverified) => return unverified,
    };
    let cuda = match &probe.cuda {
        None => return Verified::Unverified("CUDA was not asked".into()),
        Some(Lib::Ready(c)) => c,
        Some(other) => return Verified::Unverified(not_usable(other).unwrap_or_default()),
    };
    let mut walk = Exports::default();
    if cuda.driver_version < DMABUF_CUDA {
        walk.no.push(format!(
            "the CUDA driver API is {} (dma-buf export needs {})",
            cuda_version(cuda.driver_version),
            cuda_version(DMABUF_CUDA)
        ));
    }
    walk.walk(
        inv,
        probe,
        GpuVendor::Nvidia,
        "CUDA",
        &cuda.library,
        |bdf| {
            let d = cuda
                .devices
                .iter()
                .find(|d| crate::model::gpu::bdf(d.bus_id.as_ref()) == Some(bdf))?;
            Some((
                d.ordinal,
                "DMA_BUF_SUPPORTED=1; cuMemGetHandleForAddressRange",
                &d.export,
            ))
        },
    );
    walk.verdict(|exported| {
        format!(
            "{} exported a dma-buf of device memory (CUDA {})",
            if exported == 1 {
                "the GPU".to_owned()
            } else {
                format!("each of the {exported} GPUs")
            },
            cuda_version(cuda.driver_version)
        )
    })
}

/// The DMA-BUF path as inferred from the driver and the kernel, confirmed or overturned by what
/// the export probe showed; the probe's evidence joins `evidence`.
fn confirmed(mut dmabuf: Possible, verified: Verified, evidence: &mut Vec<Evidence>) -> Possible {
    match (&mut dmabuf, verified) {
        (Possible::Yes(why), Verified::Yes(ev, how)) => {
            why.push_str(&format!("; verified: {how}"));
            evidence.extend(ev);
        }
        (Possible::Yes(why), Verified::Unverified(reason)) => {
            why.push_str(&format!(" (inferred, not verified: {reason})"));
        }
        (Possible::Yes(_) | Possible::Unknown(_), Verified::No(reasons, ev)) => {
            dmabuf = Possible::No(reasons);
            evidence.extend(ev);
        }
        (_, Verified::Yes(ev, _) | Verified::No(_, ev)) => evidence.extend(ev),
        _ => {}
    }
    dmabuf
}

/// The probe's answer, or why the dma-buf export is unverified without one.
fn probed(gpu: &Runtime) -> Result<&crate::model::gpu::Probe, Verified> {
    match gpu {
        Runtime::Skipped { reason } => Err(Verified::Unverified(format!(
            "GPU probe not run: {}",
            reason.describe()
        ))),
        // A capture's recorded NVML answer says nothing of the dma-buf export.
        Runtime::Recorded(_) => Err(Verified::Unverified(format!(
            "GPU probe not run: {}",
            SkipReason::Offline.describe()
        ))),
        // Some reasons name the probe themselves ("the GPU probe was not run: ..."): said once.
        Runtime::Failed { error } if error.starts_with("the GPU probe") => {
            Err(Verified::Unverified(error.clone()))
        }
        Runtime::Failed { error } => Err(Verified::Unverified(format!(
            "the GPU probe failed: {error}"
        ))),
        Runtime::Probed(p) => Ok(p),
    }
}

/// What the GPUs of one vendor showed of the dma-buf export: those that exported, those that
/// did not and why, those the probe could not ask.
#[derive(Default)]
struct Exports {
    no: Vec<String>,
    evidence: Vec<Evidence>,
    exported: usize,
    unanswered: Vec<String>,
}

impl Exports {
    /// Each GPU of `vendor`, as the library `api` at `library` listed it (`device`: its ordinal,
    /// how it exports, and what it showed).
    fn walk<'a>(
        &mut self,
        inv: &Inventory,
        probe: &crate::model::gpu::Probe,
        vendor: GpuVendor,
        api: &str,
        library: &str,
        device: impl Fn(crate::parse::pci::Bdf) -> Option<(i32, &'static str, &'a Export)>,
    ) {
        for g in inv.gpus.iter().filter(|g| g.vendor == vendor) {
            if let Some(e) = probe.failure(g.bdf) {
                self.unanswered.push(format!(
                    "{}: its probe gave no answer (see gpu): {e}",
                    g.bdf
                ));
                continue;
            }
            let Some((ordinal, how, export)) = device(g.bdf) else {
                self.no
                    .push(format!("{}: {api} does not list it (see gpu)", g.bdf));
                continue;
            };
            let value = export_evidence(
                // Each GPU's probe process sees that GPU alone: its ordinal there is 0 for
                // every GPU, so the bus id names it.
                &format!("{api} on {} (device {ordinal} of its probe process)", g.bdf),
                how,
                g.bdf,
                export,
                &mut self.exported,
                &mut self.no,
            );
            self.evidence.push(Evidence {
                path: library.to_owned(),
                value,
            });
        }
    }

    /// Yes when every GPU exported (`said`: the phrase, given how many), unverified when none
    /// refused but some could not be asked, else no.
    fn verdict(self, said: impl FnOnce(usize) -> String) -> Verified {
        if self.no.is_empty() && !self.unanswered.is_empty() {
            // A GPU that could not be asked leaves the path unproven, not refuted.
            return Verified::Unverified(self.unanswered.join("; "));
        }
        if self.no.is_empty() {
            Verified::Yes(self.evidence, said(self.exported))
        } else {
            Verified::No(self.no, self.evidence)
        }
    }
}

fn not_usable<T>(l: &Lib<T>) -> Option<String> {
    match l {
        Lib::NotFound { tried, .. } => {
            Some(format!("{} cannot be loaded (see gpu)", tried.join(", ")))
        }
        Lib::MissingSymbol { library, symbol } => {
            Some(format!("{library} lacks {symbol} (see gpu)"))
        }
        Lib::Failed { call, error, .. } => Some(format!("{call} failed with {error} (see gpu)")),
        Lib::Ready(_) => None,
    }
}

/// What the HIP/HSA dma-buf export probe showed for the AMD GPUs.
fn amd_verified(inv: &Inventory, gpu: &Runtime) -> Verified {
    let probe = match probed(gpu) {
        Ok(p) => p,
        Err(unverified) => return unverified,
    };
    let hip = match &probe.hip {
        None => return Verified::Unverified("HIP was not asked".into()),
        Some(Lib::Ready(h)) => h,
        Some(other) => return Verified::Unverified(not_usable(other).unwrap_or_default()),
    };
    if let Some(why) = not_usable(&hip.hsa) {
        return Verified::Unverified(why);
    }
    let mut walk = Exports::default();
    walk.walk(inv, probe, GpuVendor::Amd, "HIP", &hip.library, |bdf| {
        let d = hip
            .devices
            .iter()
            .find(|d| crate::model::gpu::bdf(d.bus_id.as_ref()) == Some(bdf))?;
        Some((d.ordinal, "hsa_amd_portable_export_dmabuf", &d.export))
    });
    walk.verdict(|exported| format!("{exported} GPU(s) exported a dma-buf of device memory (HSA)"))
}

/// cuDriverGetVersion's 12080 as `12.8`.
fn cuda_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

fn unregistered(inv: &Inventory, module: &str, status: Status, consequence: String) -> Finding {
    Finding::new(
        PEERMEM_NOT_REGISTERED,
        status,
        module.to_owned(),
        format!("{module} is loaded but registered no peer-memory client ({MEMORY_PEERS}/nv_mem missing): the RDMA core lacks the peer-memory API (an inbox RDMA stack), so ibv_reg_mr on GPU memory fails; {consequence}"),
    )
    .with([inv.kernel.module_evidence(module), peers_evidence(inv)])
    .fix(
        Fix::new(
            "Use an RDMA stack with the peer-memory API (MLNX_OFED / DOCA-OFED) and reload the module, or use the DMA-BUF path (open kernel modules R515+, kernel >= 5.12) and unload it",
            "Reloading nvidia_peermem is safe while no job holds GPU memory registrations.",
        )
        .manual("# install DOCA-OFED (or MLNX_OFED) so that ib_core exports ib_register_peer_memory_client, then reload the module")
        // Only where the RDMA core has the API: on an inbox stack a reload would leave the
        // module unloaded (issue 39).
        .guarded(
            crate::model::FixClass::Runtime,
            format!("grep -qw ib_register_peer_memory_client /proc/kallsyms && modprobe -r {module} && modprobe {module}"),
            format!("[ -d {MEMORY_PEERS}/nv_mem ]"),
        ),
    )
}

fn amd_dmabuf(inv: &Inventory) -> Possible {
    let (mut no, mut unknown) = (Vec::new(), Vec::new());
    let kernel = kernel_ok(inv, &mut no, &mut unknown);
    // perftest's ROCm path checks the same two options.
    let wanted = ["CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_PCI_P2PDMA"];
    match &inv.kernel.config {
        Some(c) => no.extend(
            wanted
                .iter()
                .filter(|o| !c.enabled(o))
                .map(|o| format!("{}: {}", c.path, c.shown(o))),
        ),
        None => unknown.push(format!(
            "kernel config unreadable (tried {})",
            inv.kernel.config_tried.join(", ")
        )),
    }
    Possible::from(no, unknown, || {
        format!(
            "kernel {} with CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA",
            kernel.map(|k| k.to_string()).unwrap_or_default()
        )
    })
}

fn config_evidence(c: Option<&KernelConfig>, options: &[&str]) -> Vec<Evidence> {
    c.map(|c| {
        options
            .iter()
            .map(|o| Evidence {
                path: c.path.clone(),
                value: c.shown(o),
            })
            .collect()
    })
    .unwrap_or_default()
}

fn judge_amd(inv: &Inventory, gpu: &Runtime, n: usize) -> (Finding, bool) {
    let gpus = plural(n, "AMD GPU");
    let subject = "AMD GPUs";
    let mut evidence = vec![kernel_evidence(inv)];
    evidence.extend(config_evidence(
        inv.kernel.config.as_ref(),
        &["CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_PCI_P2PDMA"],
    ));
    evidence.push(inv.kernel.module_evidence("amd_peer_mem"));
    let legacy = ["amd_peer_mem", "amdp2p"]
        .into_iter()
        .find(|m| inv.kernel.module(m).is_some_and(|m| m.live()));
    let dmabuf = confirmed(amd_dmabuf(inv), amd_verified(inv, gpu), &mut evidence);
    match (dmabuf, legacy) {
        (Possible::Yes(why), _) => (Finding::pass(GDR_PATH_DMABUF, subject, format!("the DMA-BUF path is available for the {gpus}: {why}{}", no_rdma_note(inv))).with(evidence), true),
        (_, Some(m)) => (Finding::pass(GDR_PATH_PEERMEM, subject, format!("the peer-memory path is available for the {gpus}: {m} is loaded")).with(evidence), false),
        (Possible::Unknown(r), None) => (Finding::unknown(GDR_PATH_UNKNOWN, subject, format!("cannot tell whether the DMA-BUF path works for the {gpus}: {}", r.join("; "))).with(evidence), false),
        (Possible::No(r), None) => (
            Finding::fail(AMD_NO_GDR_PATH, subject, format!("no GPUDirect RDMA path for the {gpus}: DMA-BUF is unavailable ({}) and amd_peer_mem is not loaded", r.join("; ")))
                .with(evidence)
                .fix(
                    Fix::new(
                        "Boot a kernel built with CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y (the kernels ROCm supports are), or install the legacy amd_peer_mem module",
                        "A kernel change needs a reboot into the new kernel.",
                    )
                    .manual("grep -E 'DMABUF_MOVE_NOTIFY|PCI_P2PDMA' /boot/config-$(uname -r)")
                    .manual("# install such a kernel (the distribution's ROCm-supported kernel), make it the default, then reboot into it: a reboot into the same kernel changes nothing"),
                ),
            false,
        ),
    }
}

/// Whether an RDMA device's driver can register dma-bufs: mlx5 can (since 5.12, when the RDMA
/// core got dma-buf MRs); the software devices cannot (rxe returned EOPNOTSUPP in the lab).
/// Others: not known here; the GDR write test tells.
fn nic_dmabuf(dev: &RdmaDevice) -> Option<bool> {
    match dev.driver.as_deref()? {
        "mlx5_core" => Some(true),
        // EFA is judged on its own path (efa.rs).
        "efa" => None,
        "rxe" | "siw" => Some(false),
        _ => None,
    }
}

/// The evidence line for one GPU's dma-buf export probe (`who`: `CUDA device 0 (BDF)`; `how`:
/// the call that exports), counting it in `exported` or saying in `no` why it was not.
fn export_evidence(
    who: &str,
    how: &str,
    bdf: crate::parse::pci::Bdf,
    export: &Export,
    exported: &mut usize,
    no: &mut Vec<String>,
) -> String {
    match export {
        Export::Exported { bytes, fd_target } => {
            *exported += 1;
            // The fd's link names a dma-buf: `anon_inode:dmabuf` before Linux 5.x's dmabuffs,
            // `/dmabuf:` (then the buffer's name, empty here) after.
            let what = if fd_target.contains("dmabuf") {
                "a dma-buf"
            } else {
                "an fd that is not a dma-buf"
            };
            format!(
                "{who}: {how} exported {} as {what} (its fd links to \"{fd_target}\")",
                crate::parse::bytes(*bytes)
            )
        }
        Export::Failed { call, error } => {
            no.push(format!("{bdf}: {call} failed with {error}"));
            format!("{who}: {call}: {error}")
        }
        Export::NotTried { reason } => {
            no.push(format!("{bdf}: {reason}"));
            format!("{who}: not exported: {reason}")
        }
    }
}

#[cfg(test)]
mod display_tests {
    use super::*;

    /// Issue 40 (2x H200): "exported 2 MiB as /dmabuf:" read as a path; the evidence says what
    /// the fd is.
    #[test]
    fn a_dma_buf_export_says_it_is_one() {
        let bdf = crate::parse::pci::Bdf::parse("0000:18:00.0").unwrap();
        let (mut n, mut no) = (0, Vec::new());
        let e = Export::Exported {
            bytes: 2 << 20,
            fd_target: "/dmabuf:".into(),
        };
        let line = export_evidence(
            "CUDA on 0000:18:00.0",
            "cuMemGetHandleForAddressRange",
            bdf,
            &e,
            &mut n,
            &mut no,
        );
        assert_eq!(
            line,
            "CUDA on 0000:18:00.0: cuMemGetHandleForAddressRange exported 2 MiB as a dma-buf (its fd links to \"/dmabuf:\")"
        );
        assert_eq!(n, 1);
    }

    /// Issue 40: "the GPU probe failed: the GPU probe was not run: ..." says the probe once.
    #[test]
    fn the_probe_is_named_once() {
        let r = Runtime::Failed {
            error: "the GPU probe was not run: the --deadline of 0.1 s left no time for it".into(),
        };
        match probed(&r) {
            Err(Verified::Unverified(m)) => assert_eq!(
                m,
                "the GPU probe was not run: the --deadline of 0.1 s left no time for it"
            ),
            _ => panic!("not unverified"),
        }
        let r = Runtime::Failed {
            error: "NVML timed out".into(),
        };
        match probed(&r) {
            Err(Verified::Unverified(m)) => assert_eq!(m, "the GPU probe failed: NVML timed out"),
            _ => panic!("not unverified"),
        }
    }
}
