//! GPU memory for AWS EFA: what aws-ofi-nccl and libfabric's efa provider need (issue 29).
//!
//! NCCL reaches EFA only through aws-ofi-nccl, which asks libfabric for an efa endpoint with
//! FI_HMEM. libfabric's efa provider decides whether it can register GPU memory with the device
//! once, at start (prov/efa/src/efa_hmem.c `efa_hmem_info_check_p2p_support_cuda`): it
//! allocates a CUDA buffer and registers it with `ibv_reg_dmabuf_mr` (when built with DMA-BUF MR
//! support and `FI_HMEM_CUDA_USE_DMABUF` is not off), else with `ibv_reg_mr`; if neither works,
//! "P2P support is not available" and every transfer of GPU memory is staged. The device side:
//! - AWS's efa driver (amzn-drivers kernel/linux/efa, what the EFA installer builds) registers
//!   GPU memory itself in `ibv_reg_mr`, through NVIDIA's P2P interface (`nvidia_p2p_get_pages`,
//!   or efa_nv_peermem's copy of it): efa_p2p.c, efa_nvmem_impl.h. It says which provider it
//!   found in the PCI function's `p2p` file ("NVIDIA", "NVIDIA peermem"; empty when none;
//!   releases before the P2P framework wrote `gdr` = 1 when built with GPUDirect support).
//! - the upstream driver has no P2P provider: GPU memory only through DMA-BUF, which it takes
//!   from Linux 5.16 ("RDMA/efa: Add support for dmabuf memory regions", 66f4817b5712), with
//!   the GPU side of the DMA-BUF path (open NVIDIA modules, R515+).
//!
//! nvidia_peermem plays no part: it registers with MLNX_OFED's peer-memory API, which the
//! efa driver does not use. On the instance types aws-ofi-nccl marks `gdr_required` (p4d, p5,
//! p6, ...) a missing path stops the plugin ("GDR disabled on GDR-supported instance type").

use super::{
    EFA_NO_GDR_PATH, GDR_PATH_DMABUF, GDR_PATH_EFA_P2P, GDR_PATH_UNKNOWN, Possible, confirmed,
    kernel_evidence, nvidia_dmabuf, nvidia_verified, plural,
};
use crate::inventory::{Inventory, RdmaDevice};
use crate::model::gpu::Runtime;
use crate::model::{Evidence, Finding, Fix};
use crate::parse::kernel::KernelVersion;

/// The efa driver registers dma-buf memory regions from Linux 5.16.
const EFA_DMABUF_KERNEL: KernelVersion = KernelVersion(5, 16, 0);

/// Whether EFA's rules decide the GPU memory path: NCCL's network is aws-ofi-nccl, or every RDMA
/// device is EFA (NCCL would reach them through that plugin, when it loads).
pub(super) fn applies(inv: &Inventory) -> bool {
    crate::nccl::effective::network(inv) == crate::nccl::effective::Network::AwsOfi
        || (!inv.rdma.is_empty() && inv.rdma.iter().all(RdmaDevice::is_efa))
}

/// What the efa driver's own files say: the P2P provider it names, on how many devices.
enum Driver {
    /// `p2p` names a provider (or the older `gdr` is 1): the value and the devices.
    P2p(String, Vec<Evidence>),
    /// `p2p` is there but empty: AWS's driver, with no provider found.
    NoProvider(Vec<Evidence>),
    /// Neither file: the upstream driver.
    Upstream,
    /// A file that is there could not be read.
    Unreadable(Vec<Evidence>),
}

fn driver(inv: &Inventory) -> Driver {
    let mut named = Vec::new();
    let mut empty = Vec::new();
    let mut unreadable = Vec::new();
    for efa in inv.rdma.iter().filter_map(|d| d.efa.as_ref()) {
        match (&efa.p2p.raw, efa.p2p.value(), efa.gdr.value()) {
            (_, Some(v), _) if !v.is_empty() => named.push((v.clone(), efa.p2p.evidence())),
            (_, _, Some(g)) if g == "1" => {
                named.push(("GPUDirect (gdr = 1)".into(), efa.gdr.evidence()))
            }
            (_, Some(_), _) => empty.push(efa.p2p.evidence()),
            (Err(e), ..) if !e.is_not_found() => unreadable.push(efa.p2p.evidence()),
            _ => {}
        }
    }
    if let Some((value, _)) = named.first() {
        let value = value.clone();
        return Driver::P2p(value, named.into_iter().map(|(_, e)| e).collect());
    }
    if !empty.is_empty() {
        return Driver::NoProvider(empty);
    }
    if !unreadable.is_empty() {
        return Driver::Unreadable(unreadable);
    }
    Driver::Upstream
}

/// The DMA-BUF path as EFA needs it: the GPU side, and the efa driver on Linux 5.16 or later.
fn dmabuf(inv: &Inventory, gpu: &Runtime, evidence: &mut Vec<Evidence>) -> Possible {
    let mut possible = confirmed(nvidia_dmabuf(inv), nvidia_verified(inv, gpu), evidence);
    if let Possible::Yes(_) = possible {
        match inv.kernel.version {
            Some(v) if v < EFA_DMABUF_KERNEL => {
                possible = Possible::No(vec![format!(
                    "kernel {v} is older than {EFA_DMABUF_KERNEL}, where the efa driver took dma-buf memory regions"
                )]);
            }
            None => {
                possible = Possible::Unknown(vec![format!(
                    "kernel release unreadable ({})",
                    inv.kernel.release.problem().unwrap_or_default()
                )]);
            }
            Some(_) => {}
        }
    }
    possible
}

/// The NVIDIA GPUs' memory path to the node's EFA devices.
pub(super) fn judge(inv: &Inventory, gpu: &Runtime, n: usize) -> Finding {
    let gpus = plural(n, "NVIDIA GPU");
    let efa = inv.rdma.iter().filter(|d| d.is_efa()).count();
    let subject = "NVIDIA GPUs";
    let mut evidence = vec![inv.kernel.nvidia.evidence(), kernel_evidence(inv)];
    let drv = driver(inv);
    if let Driver::P2p(value, ev) = &drv {
        evidence.extend(ev.iter().cloned());
        return Finding::pass(
            GDR_PATH_EFA_P2P,
            subject,
            format!(
                "the efa driver registers the {gpus}' memory for its {} itself through its P2P provider ({value}, on {} of them): libfabric's efa provider registers GPU buffers with ibv_reg_mr, the path aws-ofi-nccl uses",
                plural(efa, "EFA device"),
                ev.len()
            ),
        )
        .with(evidence);
    }
    let possible = dmabuf(inv, gpu, &mut evidence);
    let driver_says = match &drv {
        Driver::NoProvider(ev) => {
            evidence.extend(ev.iter().cloned());
            "the efa driver has P2P support but found no provider (the NVIDIA module was not loaded when it looked, or efa_nv_peermem is missing)"
        }
        Driver::Unreadable(ev) => {
            evidence.extend(ev.iter().cloned());
            "the efa driver's p2p file could not be read"
        }
        _ => "the efa driver has no P2P provider (the upstream driver: no p2p file)",
    };
    match possible {
        Possible::Yes(why) => Finding::pass(
            GDR_PATH_DMABUF,
            subject,
            format!(
                "libfabric's efa provider will register the {gpus}' memory through DMA-BUF (ibv_reg_dmabuf_mr): {why}, and the efa driver takes dma-buf regions from Linux {EFA_DMABUF_KERNEL}; {driver_says}"
            ),
        )
        .with(evidence),
        Possible::Unknown(r) => Finding::unknown(
            GDR_PATH_UNKNOWN,
            subject,
            format!(
                "cannot tell whether libfabric's efa provider can register the {gpus}' memory: {driver_says}, and the DMA-BUF path is unknown ({})",
                r.join("; ")
            ),
        )
        .with(evidence),
        Possible::No(r) => fail(inv, &gpus, driver_says, &r, evidence),
    }
}

fn fail(
    inv: &Inventory,
    gpus: &str,
    driver_says: &str,
    why: &[String],
    evidence: Vec<Evidence>,
) -> Finding {
    let consequence = if inv.nccl.plugin.aws_gdr_required() {
        format!(
            "aws-ofi-nccl requires GPUDirect RDMA on {} and refuses to start without it (\"GDR disabled on GDR-supported instance type\"), so NCCL falls back to TCP sockets",
            inv.nccl
                .plugin
                .product_name
                .as_deref()
                .unwrap_or("this instance type")
        )
    } else {
        "libfabric stages every transfer of GPU memory through host buffers".to_owned()
    };
    Finding::fail(
        EFA_NO_GDR_PATH,
        "NVIDIA GPUs",
        format!(
            "no GPUDirect RDMA path from the {gpus} to EFA: {driver_says}, and DMA-BUF is unavailable: {}. {consequence}",
            why.join("; ")
        ),
    )
    .with(evidence)
    .fix(fix(inv))
}

/// From Linux 6.8 AWS's efa driver takes GPU memory only through efa_nv_peermem, which works
/// with the open NVIDIA kernel modules alone: there a proprietary module leaves one way, the
/// open modules (which bring the DMA-BUF path too). Elsewhere, the efa driver's P2P provider
/// first, the open modules as the other way.
const EFA_OPEN_ONLY_KERNEL: KernelVersion = KernelVersion(6, 8, 0);

fn fix(inv: &Inventory) -> Fix {
    let proprietary = inv.kernel.nvidia.value().filter(|v| !v.open);
    let new_kernel = inv.kernel.version.filter(|k| *k >= EFA_OPEN_ONLY_KERNEL);
    if let (Some(nv), Some(k)) = (proprietary, new_kernel) {
        Fix::new(
            format!(
                "Install the open NVIDIA kernel modules of the same release ({}, nvidia-open / kernel-open): on Linux {k} (>= {EFA_OPEN_ONLY_KERNEL}) the efa driver's P2P provider, efa_nv_peermem, refuses the proprietary module, so reinstalling the efa driver cannot help; the open modules give efa_nv_peermem its provider and the DMA-BUF path both",
                nv.version
            ),
            "Swapping the NVIDIA kernel modules needs the GPUs idle and the modules reloaded (a reboot is simplest): drain the node first.",
        )
        .by_hand("# install the open NVIDIA kernel modules of the installed release (e.g. apt install nvidia-open / nvidia-driver-<release>-open; dnf module install nvidia-driver:<release>-open)")
        .manual("cat /proc/driver/nvidia/version   # \"Open Kernel Module\" once it is the open one")
        .manual("cat /sys/class/infiniband/*/device/p2p   # the efa driver's P2P provider")
    } else {
        Fix::new(
            "Install the efa driver with its P2P provider (the EFA installer builds it; /sys/class/infiniband/*/device/p2p then reads NVIDIA), with the NVIDIA module loaded before it, or use the open NVIDIA kernel modules (R515+) on Linux 5.16 or later for the DMA-BUF path",
            "Reinstalling the efa driver takes the EFA devices away while it reloads: drain the node first.",
        )
        .manual("cat /sys/class/infiniband/*/device/p2p   # the efa driver's P2P provider")
        .manual("# EFA installer: ./efa_installer.sh -y (rebuilds efa against the installed NVIDIA driver)")
    }
}
