//! What the driver libraries say of one GPU (NVML and CUDA for NVIDIA, HIP for AMD), matched to
//! the PCI inventory by bus address; and the GPUs they list that the inventory lacks.

use super::{
    BAR_SMALL, GDR_UNSUPPORTED, NOT_IN_SYSFS, NOT_SEEN_BY_DRIVER, bar_fix, bound_to, not_seen_fix,
    nvml,
};
use crate::inventory::{Gpu, Inventory};
use crate::model::gpu::bdf;
use crate::model::gpu::{CudaDevice, HipDevice, Lib, NvmlDevice, Probe};
use crate::model::{Evidence, Finding, Fix};
use crate::parse::bytes;
use crate::parse::pci::Bdf;

/// The probe's record of one GPU, matched by PCI address.
fn nvml_device(p: &Probe, b: Bdf) -> Option<&NvmlDevice> {
    p.nvml
        .as_ref()?
        .ready()?
        .devices
        .iter()
        .find(|d| bdf(d.bus_id.as_ref()) == Some(b))
}

fn cuda_device(p: &Probe, b: Bdf) -> Option<&CudaDevice> {
    p.cuda
        .as_ref()?
        .ready()?
        .devices
        .iter()
        .find(|d| bdf(d.bus_id.as_ref()) == Some(b))
}

fn hip_device(p: &Probe, b: Bdf) -> Option<&HipDevice> {
    p.hip
        .as_ref()?
        .ready()?
        .devices
        .iter()
        .find(|d| bdf(d.bus_id.as_ref()) == Some(b))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn nvidia_runtime(
    inv: &Inventory,
    g: &Gpu,
    p: &Probe,
    min_bar: u64,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let subject = g.subject();
    let bound = bound_to(inv, g, "nvidia");
    if let Some(Lib::Ready(nvml)) = &p.nvml {
        match nvml_device(p, g.bdf) {
            Some(d) => {
                let bar = match (d.bar1_total, d.bar1_used) {
                    (Some(t), Some(u)) => format!("BAR1 {} ({} used)", bytes(t), bytes(u)),
                    _ => "BAR1 unknown".into(),
                };
                evidence.push(Evidence {
                    path: nvml.library.to_owned(),
                    value: format!(
                        "device {}: {} {}; {bar}{}",
                        d.index,
                        d.bus_id.as_deref().unwrap_or("?"),
                        d.name.as_deref().unwrap_or("?"),
                        if d.errors.is_empty() {
                            String::new()
                        } else {
                            format!("; {}", d.errors.join("; "))
                        }
                    ),
                });
                facts.push(format!("NVML device {}", d.index));
                nvml::judge(inv, g, nvml, d, facts, evidence, problems);
                // The sysfs BAR was judged above; NVML's is the fallback when sysfs had none.
                if g.aperture.as_ref().and_then(|a| a.value()).is_none() {
                    if let Some(t) = d.bar1_total.filter(|t| *t < min_bar) {
                        problems.push(
                            Finding::fail(
                                BAR_SMALL,
                                subject.clone(),
                                format!("BAR1 is {} (NVML), below the {} threshold: GPUDirect RDMA maps every registered GPU buffer through it", bytes(t), bytes(min_bar)),
                            )
                            .evidence(nvml.library.to_owned(), format!("nvmlDeviceGetBAR1MemoryInfo: total {t}"))
                            .fix(bar_fix(g.vendor, g.bdf)),
                        );
                    }
                }
            }
            None if bound => {
                let lost: Vec<String> = nvml
                    .devices
                    .iter()
                    .filter(|d| d.bus_id.is_none())
                    .flat_map(|d| {
                        d.errors
                            .iter()
                            .map(move |e| format!("device {}: {e}", d.index))
                    })
                    .chain(nvml.errors.iter().cloned())
                    .collect();
                problems.push(
                    Finding::fail(
                        NOT_SEEN_BY_DRIVER,
                        subject.clone(),
                        format!(
                            "bound to nvidia but NVML does not list it ({} devices listed{}): the driver failed to initialise it or lost it",
                            nvml.devices.len(),
                            if lost.is_empty() { String::new() } else { format!("; {}", lost.join("; ")) }
                        ),
                    )
                    .evidence(
                        nvml.library.to_owned(),
                        format!(
                            "bus ids: {}",
                            nvml.devices.iter().filter_map(|d| d.bus_id.clone()).collect::<Vec<_>>().join(", ")
                        ),
                    )
                    .fix(not_seen_fix(g.vendor, g.bdf)),
                );
            }
            None => {}
        }
    }
    if let (Some(Lib::Ready(cuda)), None) = (&p.cuda, p.failure(g.bdf)) {
        match cuda_device(p, g.bdf) {
            Some(d) => {
                evidence.push(Evidence {
                    path: cuda.library.to_owned(),
                    value: format!(
                        "CUDA on {}: {}; GPU_DIRECT_RDMA_SUPPORTED={}, DMA_BUF_SUPPORTED={}{}",
                        g.bdf,
                        cuda_seen(d),
                        attr(d.gdr_supported),
                        attr(d.dmabuf_supported),
                        if d.errors.is_empty() {
                            String::new()
                        } else {
                            format!("; {}", d.errors.join("; "))
                        }
                    ),
                });
                match d.gdr_supported {
                    Some(true) => facts.push("GPUDirect RDMA supported (CUDA)".into()),
                    Some(false) => problems.push(
                        Finding::fail(
                            GDR_UNSUPPORTED,
                            subject.clone(),
                            "CUDA says it does not support GPUDirect RDMA (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0): NICs cannot reach its memory, whatever else is set up. GeForce GPUs, and GPUs under some vGPU profiles, do not offer it".to_string(),
                        )
                        .evidence(cuda.library.to_owned(), format!("CUDA on {}: GPU_DIRECT_RDMA_SUPPORTED=0", g.bdf))
                        .fix(
                            Fix::new(
                                "Use a data-centre or workstation GPU (or a vGPU profile that enables GPUDirect RDMA) for RDMA traffic",
                                "Nothing to run: this is a property of the GPU and its driver mode.",
                            )
                            .manual("nvidia-smi -q | grep -i -E 'product name|virtualization'"),
                        ),
                    ),
                    None => facts.push("GPUDirect RDMA support unknown (CUDA)".into()),
                }
            }
            None if bound => problems.push(
                Finding::fail(
                    NOT_SEEN_BY_DRIVER,
                    subject.clone(),
                    format!(
                        "bound to nvidia but CUDA does not list it ({} devices)",
                        cuda.devices.len()
                    ),
                )
                .evidence(
                    cuda.library.to_owned(),
                    format!(
                        "bus ids: {}",
                        cuda.devices
                            .iter()
                            .filter_map(|d| d.bus_id.clone())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .fix(not_seen_fix(g.vendor, g.bdf)),
            ),
            None => {}
        }
    }
}

fn attr(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "1",
        Some(false) => "0",
        None => "?",
    }
}

pub(super) fn amd_runtime(
    g: &Gpu,
    p: &Probe,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let subject = g.subject();
    let Some(Lib::Ready(hip)) = &p.hip else {
        return;
    };
    if p.failure(g.bdf).is_some() {
        return;
    }
    match hip_device(p, g.bdf) {
        Some(d) => {
            facts.push(format!("HIP device {}", d.ordinal));
            evidence.push(Evidence {
                path: hip.library.to_owned(),
                value: format!(
                    "HIP device {}: {} {}",
                    d.ordinal,
                    d.bus_id.as_deref().unwrap_or("?"),
                    d.name.as_deref().unwrap_or("?")
                ),
            });
        }
        None => problems.push(
            Finding::fail(
                NOT_SEEN_BY_DRIVER,
                subject.clone(),
                format!(
                    "on the bus but HIP does not list it ({} devices)",
                    hip.devices.len()
                ),
            )
            .evidence(
                hip.library.to_owned(),
                format!(
                    "bus ids: {}",
                    hip.devices
                        .iter()
                        .filter_map(|d| d.bus_id.clone())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix(not_seen_fix(g.vendor, g.bdf)),
        ),
    }
}

/// GPUs a library lists that the PCI inventory lacks: a partial sysfs, or a bus id gdrdoctor
/// cannot parse.
/// How CUDA saw the GPU in its probe process, which sees that GPU alone (CUDA_VISIBLE_DEVICES),
/// so every GPU is that process's device 0: the ordinal says nothing across GPUs, the bus id
/// does.
fn cuda_seen(d: &crate::model::gpu::CudaDevice) -> String {
    format!(
        "device {} of its own probe process, bus id {}",
        d.ordinal,
        d.bus_id.as_deref().unwrap_or("?")
    )
}

pub(super) fn unmatched(inv: &Inventory, p: &Probe) -> Vec<Finding> {
    let known = |b: Option<Bdf>| b.is_some_and(|b| inv.gpus.iter().any(|g| g.bdf == b));
    let mut out = Vec::new();
    let mut note = |library: String, what: String, bus: &Option<String>| {
        if !known(bdf(bus.as_ref())) && bus.is_some() {
            let bus = bus.clone().unwrap_or_default();
            out.push(
                Finding::warn(
                    NOT_IN_SYSFS,
                    bus.clone(),
                    format!("{what} at {bus} is not a GPU in {}: sysfs is incomplete, or the address is one gdrdoctor cannot read", crate::inventory::pci::PCI_DEVICES),
                )
                .evidence(library, format!("{what}: {bus}"))
                .fix(
                    Fix::new(
                        "Compare the library's list with the PCI bus; report the address to gdrdoctor if both show the GPU",
                        "Read-only commands.",
                    )
                    .manual("nvidia-smi --query-gpu=pci.bus_id --format=csv; lspci -D -d 10de:"),
                ),
            );
        }
    };
    if let Some(Lib::Ready(n)) = &p.nvml {
        for d in &n.devices {
            note(
                n.library.to_owned(),
                format!("NVML device {}", d.index),
                &d.bus_id,
            );
        }
    }
    if let Some(Lib::Ready(c)) = &p.cuda {
        for d in &c.devices {
            note(
                c.library.to_owned(),
                format!("CUDA device {}", d.ordinal),
                &d.bus_id,
            );
        }
    }
    if let Some(Lib::Ready(h)) = &p.hip {
        for d in &h.devices {
            note(
                h.library.to_owned(),
                format!("HIP device {}", d.ordinal),
                &d.bus_id,
            );
        }
    }
    out
}
