//! `gpu`: what the GPU driver itself says of each GPU on the bus. Does the driver see it (NVML
//! and CUDA for NVIDIA; KFD and HIP for AMD), does it support GPUDirect RDMA, and is its BAR1
//! large enough to map the memory NICs will register? The libraries are asked in a child
//! process (crate::probe::gpu); missing libraries and failed initialisation are findings here.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::{Gpu, GpuVendor, Inventory};
use crate::model::Action;
use crate::model::gpu::Lib;
use crate::model::gpu::{RECORDED_NVML, Runtime, SkipReason};
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::pci::Bdf;

mod judge;
mod libraries;
mod nvml;
mod runtime;

pub struct GpuCheck;

const READY: Code = Code {
    id: "gpu-ready",
    summary: "the driver sees the GPU, it supports GPUDirect RDMA, and its BAR1 is large enough",
};

const NOT_SEEN_BY_DRIVER: Code = Code {
    id: "gpu-not-seen-by-driver",
    summary: "a GPU on the PCI bus that the driver's libraries (NVML, CUDA, KFD, HIP) do not list: fell off the bus, or failed to initialise",
};

const NOT_RESPONDING: Code = Code {
    id: "gpu-not-responding",
    summary: "the GPU's config space reads all ones (vendor ID 0xffff): it does not answer on the PCIe bus",
};

const GDR_UNSUPPORTED: Code = Code {
    id: "gpu-gdr-unsupported",
    summary: "CUDA says the GPU does not support GPUDirect RDMA",
};

const BAR_SMALL: Code = Code {
    id: "gpu-bar-small",
    summary: "BAR1 (the window NICs reach GPU memory through) is below the threshold",
};

const BAR_UNKNOWN: Code = Code {
    id: "gpu-bar-unknown",
    summary: "the GPU's BARs could not be read",
};

const PERSISTENCE_OFF: Code = Code {
    id: "gpu-persistence-off",
    summary: "NVML says persistence mode is off: the driver tears the GPU down whenever no process holds it, so every CUDA start (each job, each prolog) initialises it again",
};

const NVLINK_DOWN: Code = Code {
    id: "gpu-nvlink-down",
    summary: "a GPU has fewer active NVLinks than another GPU of its model: NCCL runs at the lower NVLink bandwidth",
};

const C2C_DOWN: Code = Code {
    id: "gpu-c2c-down",
    summary: "a GPU's NVLink-C2C links to its CPU are not all up: with none up, NCCL reaches the CPU's NICs over PCIe only (no GDR over C2C)",
};

const FABRIC_NOT_READY: Code = Code {
    id: "gpu-fabric-not-ready",
    summary: "NVML's NVLink fabric state is not Completed with Success (NVSwitch systems): Fabric Manager has not set the GPU up, so NCCL hangs or falls back",
};

const NOT_IN_SYSFS: Code = Code {
    id: "gpu-not-in-sysfs",
    summary: "a GPU library lists a GPU that the PCI inventory does not have",
};

const NVIDIA_LIBRARY_MISSING: Code = Code {
    id: "nvidia-library-missing",
    summary: "libnvidia-ml.so.1 or libcuda.so.1 is not installed: the driver's user-space half is missing",
};

const NVIDIA_LIBRARY_TOO_OLD: Code = Code {
    id: "nvidia-library-too-old",
    summary: "an NVIDIA library lacks a function gdrdoctor needs",
};

const NVIDIA_DRIVER_NOT_LOADED: Code = Code {
    id: "nvidia-driver-not-loaded",
    summary: "NVIDIA GPUs are present but NVML says the kernel driver is not loaded",
};

const NVIDIA_DRIVER_MISMATCH: Code = Code {
    id: "nvidia-driver-mismatch",
    summary: "the NVIDIA user-space libraries and the loaded kernel module are different versions",
};

const RUNTIME_ERROR: Code = Code {
    id: "gpu-runtime-error",
    summary: "a GPU library failed to initialise (no device visible to it, no permission, ...)",
};

const ROCM_LIBRARY_MISSING: Code = Code {
    id: "rocm-library-missing",
    summary: "AMD GPUs are present but HIP or HSA (ROCm) cannot be loaded or lacks a function, so nothing was verified",
};

const PROBE_SKIPPED: Code = Code {
    id: "gpu-probe-skipped",
    summary: "the GPU libraries were not asked (a captured root, or --no-gpu-probe)",
};

const PROBE_FAILED: Code = Code {
    id: "gpu-probe-failed",
    summary: "the GPU probe hung, crashed or gave no readable answer",
};

const NO_RUNTIME_RULES: Code = Code {
    id: "gpu-no-runtime-rules",
    summary: "declared accelerators of a vendor gdrdoctor has no runtime rules for",
};

const RUNTIME_NO_GPU: Code = Code {
    id: "gpu-runtime-no-gpu",
    summary: "no GPU, so nothing to ask the GPU libraries",
};

const CODES: &[Code] = &[
    READY,
    NOT_SEEN_BY_DRIVER,
    NOT_RESPONDING,
    GDR_UNSUPPORTED,
    BAR_SMALL,
    BAR_UNKNOWN,
    PERSISTENCE_OFF,
    NVLINK_DOWN,
    C2C_DOWN,
    FABRIC_NOT_READY,
    NOT_IN_SYSFS,
    NVIDIA_LIBRARY_MISSING,
    NVIDIA_LIBRARY_TOO_OLD,
    NVIDIA_DRIVER_NOT_LOADED,
    NVIDIA_DRIVER_MISMATCH,
    RUNTIME_ERROR,
    ROCM_LIBRARY_MISSING,
    PROBE_SKIPPED,
    PROBE_FAILED,
    NO_RUNTIME_RULES,
    RUNTIME_NO_GPU,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(READY, Action::None),
    Rule::new(NOT_SEEN_BY_DRIVER, Action::Reboot),
    Rule::new(NOT_RESPONDING, Action::Reboot).in_vm(Action::Provider),
    Rule::new(GDR_UNSUPPORTED, Action::ReplacePart),
    Rule::new(BAR_SMALL, Action::Reboot).in_vm(Action::Provider),
    Rule::new(BAR_UNKNOWN, Action::None),
    Rule::new(PERSISTENCE_OFF, Action::FixInPlace),
    Rule::new(NVLINK_DOWN, Action::ResetGpu),
    Rule::new(C2C_DOWN, Action::ReplacePart),
    Rule::new(FABRIC_NOT_READY, Action::FixInPlace),
    Rule::new(NOT_IN_SYSFS, Action::None),
    Rule::new(NVIDIA_LIBRARY_MISSING, Action::FixInPlace),
    Rule::new(NVIDIA_LIBRARY_TOO_OLD, Action::FixInPlace),
    Rule::new(NVIDIA_DRIVER_NOT_LOADED, Action::FixInPlace),
    Rule::new(NVIDIA_DRIVER_MISMATCH, Action::Reboot),
    Rule::new(RUNTIME_ERROR, Action::FixInPlace),
    Rule::new(ROCM_LIBRARY_MISSING, Action::FixInPlace),
    Rule::new(PROBE_SKIPPED, Action::None),
    Rule::new(PROBE_FAILED, Action::None),
    Rule::new(NO_RUNTIME_RULES, Action::None),
    Rule::new(RUNTIME_NO_GPU, Action::None),
];

const META: Meta = Meta {
    id: "gpu",
    title: "GPUs as their driver sees them: present, GDR-capable, BAR1",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/gpu/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for GpuCheck {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let min_bar = cx.config.thresholds.bar1_min_mib.saturating_mul(1 << 20);
        let mut out = Vec::new();
        if inv.gpus.is_empty() {
            return vec![
                Finding::skip(RUNTIME_NO_GPU, "node", "no GPU found (see gpu-driver)")
                    .evidence(
                        crate::inventory::pci::PCI_DEVICES,
                        format!("{} PCI functions, none a GPU", inv.pci.len()),
                    )
                    .prerequisites(&["gpu-driver"]),
            ];
        }
        let runtime = &cx.runs.gpu;
        let probe = runtime.probe();
        match runtime {
            Runtime::Skipped { reason } if *reason != SkipReason::NoGpu => {
                let mut f = Finding::skip(
                    PROBE_SKIPPED,
                    "node",
                    format!(
                        "GPU libraries not asked ({}): the driver's view of each GPU, its GPUDirect RDMA support and its dma-buf export are unverified",
                        reason.describe()
                    ),
                )
                .evidence("gdrdoctor probe-gpu", format!("<not run: {}>", reason.describe()));
                // A capture whose recorded NVML answer cannot be read: as if it had none, and
                // said here.
                if let Some(p) = inv.problems.iter().find(|p| p.path == RECORDED_NVML) {
                    f.message.push_str(&format!(
                        "; the capture's recorded NVML answer ({}) is unusable: {}",
                        p.path, p.message
                    ));
                    f = f.evidence(p.path.clone(), format!("<{}>", p.message));
                }
                out.push(f)
            }
            Runtime::Recorded(r) => out.push(
                Finding::skip(
                    PROBE_SKIPPED,
                    "node",
                    format!(
                        "CUDA not asked ({}): each GPU's GPUDirect RDMA support and dma-buf export are unverified; NVML's answer is the one `gdrdoctor capture` recorded on the node",
                        SkipReason::Offline.describe()
                    ),
                )
                .evidence(
                    "gdrdoctor probe-gpu",
                    format!("<CUDA not run: {}>", SkipReason::Offline.describe()),
                )
                .evidence(
                    r.path.clone(),
                    match r.probe.nvml.as_ref() {
                        Some(Lib::Ready(n)) => format!(
                            "NVML {} on the node: {} devices",
                            n.driver_version.as_deref().unwrap_or("(version unknown)"),
                            n.devices.len()
                        ),
                        Some(_) => "NVML unusable on the node (see below)".into(),
                        None => "NVML gave no answer on the node (see below)".into(),
                    },
                ),
            ),
            // A probe without any answer is judged on each GPU below: none of them passes.
            _ => {}
        }
        if let Some(p) = probe {
            out.extend(libraries::library_findings(inv, p));
            for f in p.failed.iter().filter(|f| f.part == "nvml") {
                out.push(
                    Finding::unknown(
                        PROBE_FAILED,
                        "node",
                        format!("NVML gave no answer: {}", f.error),
                    )
                    .evidence("gdrdoctor probe-gpu --nvml", format!("<{}>", f.error)),
                );
            }
        }
        for g in &inv.gpus {
            match g.vendor {
                GpuVendor::Nvidia | GpuVendor::Amd => {
                    out.push(judge::judge(inv, runtime, g, probe, min_bar))
                }
                GpuVendor::Other => {}
            }
        }
        let other: Vec<&Gpu> = inv
            .gpus
            .iter()
            .filter(|g| g.vendor == GpuVendor::Other)
            .collect();
        if !other.is_empty() {
            out.push(
                Finding::skip(
                    NO_RUNTIME_RULES,
                    "declared accelerators",
                    format!(
                        "{} declared in the config: gdrdoctor has no driver library to ask for this vendor",
                        other.iter().map(|g| g.bdf.to_string()).collect::<Vec<_>>().join(", ")
                    ),
                )
                .with(other.iter().filter_map(|g| inv.function(g.bdf)).map(|f| Evidence {
                    path: format!("{}/vendor", f.path),
                    value: format!("0x{:04x}", f.vendor),
                })),
            );
        }
        if let Some(p) = probe {
            out.extend(runtime::unmatched(inv, p));
        }
        out
    }
}

fn bound_to(inv: &Inventory, g: &Gpu, driver: &str) -> bool {
    inv.function(g.bdf)
        .is_some_and(|f| f.driver.as_deref() == Some(driver))
}

fn not_seen_fix(vendor: GpuVendor, gpu: Bdf) -> Fix {
    let safety = "A GPU reset or reboot kills every process on that GPU; a GPU that keeps dropping out needs hardware service (riser, power, the GPU).";
    match vendor {
        GpuVendor::Amd => Fix::new(
            "Find out why amdgpu did not bring the GPU up for compute (dmesg), then reboot; have it serviced if it recurs",
            safety,
        )
        .manual(format!("dmesg | grep -i -E 'amdgpu|kfd' | grep -i -E '{}|error|fail' | tail -30", short(gpu)))
        .disruptive("systemctl reboot"),
        _ => Fix::new(
            "Find out why the driver dropped the GPU (dmesg: Xid 79 'fallen off the bus', RmInitAdapter failed); reset it, or reboot, and have it serviced if it recurs",
            safety,
        )
        .manual("dmesg | grep -i -E 'nvrm|xid' | tail -30")
        .disruptive(format!("nvidia-smi -r -i {gpu}   # reset this GPU (no process may use it)"))
        .disruptive("systemctl reboot"),
    }
}

/// `43:00.0` for dmesg, which names devices as `0000:43:00.0` but greps well on the tail.
fn short(b: Bdf) -> String {
    let s = b.to_string();
    s.split_once(':').map(|(_, t)| t.to_owned()).unwrap_or(s)
}

fn bar_fix(vendor: GpuVendor, gpu: Bdf) -> Fix {
    let fix = Fix::new(
        "Give the GPU a large BAR: enable 'Above 4G Decoding' and 'Resizable BAR' in the BIOS; workstation GPUs (A40, A6000, L40) in display mode switch to compute mode with NVIDIA's displaymodeselector",
        "BIOS changes and mode switches take effect after a reboot; displaymodeselector rewrites the GPU's configuration, read its notes first.",
    )
    .manual(format!("lspci -vv -s {gpu} | grep -i -E 'region|resizable'"));
    match vendor {
        GpuVendor::Nvidia => fix
            .manual(format!("nvidia-smi -q -d MEMORY -i {gpu} | grep -A3 BAR1"))
            .disruptive("displaymodeselector --gpumode physical_display_disabled   # NVIDIA's tool (from its download, on PATH), then reboot"),
        _ => fix.disruptive("systemctl reboot   # after enabling Resizable BAR in the BIOS"),
    }
}
