//! NVLink-C2C: the GPUs joined to their CPU by C2C (Grace Hopper and Grace Blackwell
//! superchips: GH200, GB200, GB300), through which NCCL reaches the NICs of that CPU with
//! GPUDirect RDMA (issue 38).
//!
//! NCCL learns the link from NVML (src/graph/xml.cc `ncclTopoGetXmlFromGpu`: on compute
//! capability 9.0 and later, `NVML_FI_DEV_C2C_LINK_COUNT` and each link's status, an XML `c2c`
//! node under the GPU when one is up). gdrdoctor takes it the same way when NVML was asked (the
//! GPU probe live, or `gdrdoctor/nvml.json` in a capture: [`apply_nvml`]), and otherwise from
//! the platform's signature: the GPU's PCI device ID is a superchip's, whose GPU is always
//! joined to its Grace by C2C. A Grace CPU with PCIe GPU cards in its slots has no C2C, and the
//! IDs of those cards are not in the table.

use super::Gpu;
use crate::model::Evidence;
use crate::model::gpu::NvmlDevice;
use crate::parse::pci::Bdf;

/// The superchips' GPUs, by PCI device ID (vendor 10de): the IDs NVIDIA's driver lists for
/// them (NVIDIA/open-gpu-kernel-modules README.md, "Compatible GPUs", 595.45.04: GH200 2342
/// and 2348, GB200 2941, GB300 31c2; pci.ids 2026.08.22 adds GB300 31c3). The HGX parts of
/// the same chips (B200 2901, B300 3182) sit behind PCIe switches with no C2C.
pub const SUPERCHIP_GPUS: &[(u16, &str)] = &[
    (0x2342, "GH200"),
    (0x2348, "GH200 144G HBM3e"),
    (0x2941, "GB200"),
    (0x31c2, "GB300"),
    (0x31c3, "GB300"),
];

/// How a GPU is joined to its CPU by C2C, and what says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct C2c {
    /// A C2C link is up: NCCL joins the GPU to its CPU by it. `false`: NVML reports C2C links,
    /// none up, and NCCL reaches the CPU over PCIe only.
    pub active: bool,
    /// NVML said it (live, or as a capture recorded it); otherwise the platform's signature.
    pub from_nvml: bool,
    pub evidence: Evidence,
}

/// The platform's signature: a superchip GPU's device ID.
pub fn platform(sysfs_path: &str, device: u16) -> Option<C2c> {
    let (_, name) = SUPERCHIP_GPUS.iter().find(|(id, _)| *id == device)?;
    Some(C2c {
        active: true,
        from_nvml: false,
        evidence: Evidence {
            path: format!("{sysfs_path}/device"),
            value: format!(
                "0x{device:04x}: {name}, a superchip GPU joined to its Grace CPU by NVLink-C2C"
            ),
        },
    })
}

/// NVML's answer where it has one for the GPU: C2C links reported (up or not), or none (no
/// C2C, whatever the signature says). A GPU NVML was not asked about keeps the signature.
pub fn apply_nvml(gpus: &mut [Gpu], devices: &[NvmlDevice], source: &str) {
    for g in gpus.iter_mut() {
        let Some(c) = devices
            .iter()
            .find(|d| d.bus_id.as_deref().and_then(Bdf::parse) == Some(g.bdf))
            .and_then(|d| d.c2c)
        else {
            continue;
        };
        g.c2c = (c.links > 0).then(|| C2c {
            active: c.active > 0,
            from_nvml: true,
            evidence: Evidence {
                path: source.to_owned(),
                value: format!(
                    "GPU {}: {} C2C link{}, {} up{}",
                    g.bdf,
                    c.links,
                    if c.links == 1 { "" } else { "s" },
                    c.active,
                    c.max_bw
                        .map(|b| format!(", {b} MB/s each"))
                        .unwrap_or_default()
                ),
            },
        });
    }
}
