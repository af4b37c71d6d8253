//! `gpu`: what the GPU driver itself says of each GPU on the bus. Does the driver see it (NVML
//! and CUDA for NVIDIA; KFD and HIP for AMD), does it support GPUDirect RDMA, and is its BAR1
//! large enough to map the memory NICs will register? The libraries are asked in a child
//! process (crate::probe::gpu); missing libraries and failed initialisation are findings here.

use super::{Check, Context, Meta};
use crate::inventory::gpu::KFD_NODES;
use crate::inventory::kernel::NVIDIA_VERSION;
use crate::inventory::{Gpu, GpuVendor, Inventory};
use crate::model::gpu::{CudaDevice, HipDevice, Lib, NvmlDevice, Probe};
use crate::model::gpu::{RECORDED_NVML, Runtime, SkipReason, bdf};
use crate::model::{Code, Evidence, Finding, Fix, Status};
use crate::parse::bytes;
use crate::parse::pci::Bdf;

mod nvml;

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

const META: Meta = Meta {
    id: "gpu",
    title: "GPUs as their driver sees them: present, GDR-capable, BAR1",
    codes: CODES,
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
            out.extend(library_findings(inv, p));
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
                    out.push(judge(inv, runtime, g, probe, min_bar))
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
            out.extend(unmatched(inv, p));
        }
        out
    }
}

fn bound_to(inv: &Inventory, g: &Gpu, driver: &str) -> bool {
    inv.function(g.bdf)
        .is_some_and(|f| f.driver.as_deref() == Some(driver))
}

/// The NVIDIA driver version from the kernel module, for fixes that install the matching
/// user-space packages (`580` from `580.159.04`).
fn nvidia_branch(inv: &Inventory) -> Option<(String, u32)> {
    inv.kernel
        .nvidia
        .value()
        .map(|v| (v.version.clone(), v.major))
}

fn install_fix(inv: &Inventory, what: &str) -> Fix {
    let (summary, apt, dnf) = match nvidia_branch(inv) {
        Some((version, major)) => (
            format!(
                "Install the NVIDIA user-space libraries of the loaded driver ({version}); {what}"
            ),
            format!(
                "apt-get install libnvidia-compute-{major}   # Debian/Ubuntu: the package of the loaded branch"
            ),
            "dnf install nvidia-driver-cuda-libs   # RHEL and derivatives (NVIDIA's repository)"
                .to_owned(),
        ),
        None => (
            format!(
                "Install the NVIDIA driver, kernel module and user-space libraries of one version; {what}"
            ),
            "apt-get install nvidia-driver-<branch>-open   # Debian/Ubuntu".to_owned(),
            "dnf module install nvidia-driver:<branch>-open   # RHEL and derivatives".to_owned(),
        ),
    };
    Fix::new(
        summary,
        "Installing libraries of another version than the loaded module causes a version mismatch; match them. In a container, the NVIDIA Container Toolkit mounts the host's libraries (--gpus / CDI).",
    )
    .manual(apt)
    .manual(dnf)
}

fn mismatch_fix() -> Fix {
    Fix::new(
        "Load the kernel module that matches the installed libraries: reboot, or reload the NVIDIA modules",
        "Reloading the modules needs every GPU process stopped (nvidia-persistenced, DCGM, jobs); a reboot is the safe way on a production node.",
    )
    .manual("cat /proc/driver/nvidia/version; ls -l /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1")
    .disruptive("systemctl stop nvidia-persistenced nvidia-dcgm 2>/dev/null; modprobe -r nvidia_peermem nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia")
    .disruptive("systemctl reboot")
}

/// Findings about the libraries themselves: absent, too old, or refusing to start.
fn library_findings(inv: &Inventory, p: &Probe) -> Vec<Finding> {
    let mut out = Vec::new();
    let driver_evidence = inv.kernel.nvidia.evidence();
    for (lib, purpose) in [
        (
            p.nvml.as_ref().map(lib_state),
            "NVML (the driver's view of every GPU: nvidia-smi, DCGM)",
        ),
        (
            p.cuda.as_ref().map(lib_state),
            "the CUDA driver API (every CUDA program, NCCL)",
        ),
    ] {
        let Some(state) = lib else { continue };
        let f = match state {
            State::Ready => continue,
            State::NotFound { tried, message } => Finding::fail(
                NVIDIA_LIBRARY_MISSING,
                tried.first().cloned().unwrap_or_default(),
                format!("{purpose} cannot be loaded ({message}), yet NVIDIA GPUs are on the bus"),
            )
            .evidence(tried.join(", "), format!("<{message}>"))
            .with([driver_evidence.clone()])
            .fix(install_fix(inv, "then run gdrdoctor again")),
            State::MissingSymbol { library, symbol } => Finding::fail(
                NVIDIA_LIBRARY_TOO_OLD,
                library.to_owned(),
                format!("{library} does not export {symbol}: a driver older than the API gdrdoctor and NCCL use"),
            )
            .evidence(library.to_owned(), format!("<no symbol {symbol}>"))
            .with([driver_evidence.clone()])
            .fix(install_fix(inv, "a driver of branch 515 or later for dma-buf export")),
            State::Failed { library, call, error } => nvidia_init_failure(inv, library, call, error),
        };
        out.push(f);
    }
    if let Some(hip) = &p.hip {
        let hsa = hip.ready().map(|h| &h.hsa);
        for (state, what) in [
            (Some(lib_state(hip)), "HIP (libamdhip64)"),
            (
                hsa.map(lib_state),
                "HSA (libhsa-runtime64, for the dma-buf export)",
            ),
        ] {
            let Some(state) = state else { continue };
            let f = match state {
                State::Ready => continue,
                State::NotFound { tried, message } => Finding::warn(
                    ROCM_LIBRARY_MISSING,
                    tried.first().cloned().unwrap_or_default(),
                    format!("{what} cannot be loaded ({message}): the AMD GPUs' dma-buf export and the ROCm runtime's view of them are not verified. Nodes that run ROCm only inside containers have no host ROCm"),
                )
                .evidence(tried.join(", "), format!("<{message}>")),
                State::MissingSymbol { library, symbol } => Finding::warn(
                    ROCM_LIBRARY_MISSING,
                    library.to_owned(),
                    format!("{library} does not export {symbol}: a ROCm older than the dma-buf export API (ROCm 5.6+)"),
                )
                .evidence(library.to_owned(), format!("<no symbol {symbol}>")),
                State::Failed { library, call, error } => Finding::fail(
                    RUNTIME_ERROR,
                    library.to_owned(),
                    format!("{call} failed with {error}: no ROCm program can use the AMD GPUs. hipErrorNoDevice with GPUs on the bus usually means /dev/kfd or /dev/dri/renderD* is not accessible (the render and video groups) or a device cgroup hides them"),
                )
                .evidence(library.to_owned(), format!("{call}: {error}"))
                .fix(
                    Fix::new(
                        "Give the user access to /dev/kfd and /dev/dri/renderD*, or run as root; check that amdgpu loaded without errors",
                        "Adding a user to the render and video groups takes effect at their next login.",
                    )
                    .manual("ls -l /dev/kfd /dev/dri/renderD*; dmesg | grep -i amdgpu | tail")
                    .manual("usermod -aG render,video <user>   # each user who runs GPU jobs"),
                ),
            };
            let f = if f.status == Status::Warn {
                f.fix(
                    Fix::new(
                        "Install the ROCm runtime on the host (or run gdrdoctor inside the ROCm container the jobs use)",
                        "Installing ROCm adds packages only; it does not touch the kernel driver.",
                    )
                    .manual("apt-get install rocm-hip-runtime   # Debian/Ubuntu, from AMD's repository")
                    .manual("dnf install rocm-hip-runtime   # RHEL and derivatives"),
                )
            } else {
                f
            };
            out.push(f);
        }
    }
    out
}

enum State<'a> {
    Ready,
    NotFound {
        tried: &'a [String],
        message: &'a str,
    },
    MissingSymbol {
        library: &'a str,
        symbol: &'a str,
    },
    Failed {
        library: &'a str,
        call: &'a str,
        error: &'a str,
    },
}

fn lib_state<T>(l: &Lib<T>) -> State<'_> {
    match l {
        Lib::Ready(_) => State::Ready,
        Lib::NotFound { tried, message } => State::NotFound { tried, message },
        Lib::MissingSymbol { library, symbol } => State::MissingSymbol { library, symbol },
        Lib::Failed {
            library,
            call,
            error,
            ..
        } => State::Failed {
            library,
            call,
            error,
        },
    }
}

fn nvidia_init_failure(inv: &Inventory, library: &str, call: &str, error: &str) -> Finding {
    let evidence = [
        Evidence {
            path: library.to_owned(),
            value: format!("{call}: {error}"),
        },
        inv.kernel.nvidia.evidence(),
    ];
    let uvm_loaded = inv.kernel.module("nvidia_uvm").is_some_and(|m| m.live());
    match error {
        "NVML_ERROR_DRIVER_NOT_LOADED" => Finding::fail(
            NVIDIA_DRIVER_NOT_LOADED,
            library,
            format!("{call} says the NVIDIA kernel driver is not loaded ({NVIDIA_VERSION} is what it reads), yet NVIDIA GPUs are on the bus"),
        )
        .with(evidence)
        .fix(
            Fix::new(
                "Load the NVIDIA kernel module; if it refuses, dmesg says why (a kernel without its DKMS build, Secure Boot, a missing firmware file)",
                "Loading the module only adds a driver; nothing running is disturbed.",
            )
            .modprobe("nvidia")
            .manual("dmesg | grep -i -E 'nvrm|nvidia' | tail -20"),
        ),
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH" | "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH" | "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" => Finding::fail(
            NVIDIA_DRIVER_MISMATCH,
            library,
            format!("{call} failed with {error}: {library} is of another version than the loaded kernel module ({}): the driver was upgraded without a reboot, or a container brought its own libraries", inv.kernel.nvidia.shown()),
        )
        .with(evidence)
        .fix(mismatch_fix()),
        "CUDA_ERROR_UNKNOWN" | "CUDA_ERROR_NO_DEVICE" if !uvm_loaded => Finding::fail(
            RUNTIME_ERROR,
            library,
            format!("{call} failed with {error}, and nvidia_uvm is not loaded: CUDA needs it (and /dev/nvidia-uvm) to initialise"),
        )
        .with(evidence)
        .with([inv.kernel.module_evidence("nvidia_uvm")])
        .fix(
            Fix::new(
                "Load nvidia_uvm and create its device nodes, now and at every boot",
                "Loading the module only adds a driver; nothing running is disturbed.",
            )
            .modprobe("nvidia-uvm")
            .guarded(crate::model::FixClass::Runtime, "nvidia-modprobe -u -c=0", "[ -c /dev/nvidia-uvm ]")
            .load_at_boot("nvidia-uvm"),
        ),
        _ => Finding::fail(
            RUNTIME_ERROR,
            library,
            format!("{call} failed with {error}: CUDA and NVML programs cannot use the GPUs. With GPUs on the bus this is usually access: /dev/nvidia* permissions, or a device cgroup (a container without the GPUs, Slurm's ConstrainDevices)"),
        )
        .with(evidence)
        .fix(
            Fix::new(
                "Make /dev/nvidiactl, /dev/nvidia-uvm and /dev/nvidia<N> accessible to the process (or run as root), then run gdrdoctor again",
                "Changing device permissions affects every user of the node; prefer a group.",
            )
            .manual("ls -l /dev/nvidia*; nvidia-smi")
            .manual("dmesg | grep -i -E 'nvrm|xid' | tail -20"),
        ),
    }
}

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

/// One GPU: every problem found, or a pass that says what was verified.
fn judge(
    inv: &Inventory,
    runtime: &Runtime,
    g: &Gpu,
    probe: Option<&Probe>,
    min_bar: u64,
) -> Finding {
    let subject = g.subject();
    let mut evidence = Vec::new();
    let mut facts: Vec<String> = Vec::new();
    let mut problems: Vec<Finding> = Vec::new();
    let bar_name = if g.vendor == GpuVendor::Nvidia {
        "BAR1"
    } else {
        "VRAM BAR"
    };

    // A GPU that does not answer config reads is gone from the bus whatever sysfs still lists
    // for it (driver link, BARs): the kernel keeps those from when it did answer.
    if let Some(dead) = inv.function(g.bdf).and_then(|f| f.not_responding()) {
        problems.push(
            Finding::fail(
                NOT_RESPONDING,
                subject.clone(),
                "its config space reads all ones (vendor ID 0xffff) while sysfs still lists it: the GPU does not answer on the PCIe bus (fell off the bus, or held in reset), so nothing can use its memory",
            )
            .with(dead)
            .fix(super::not_responding_fix(g.bdf, "GPU")),
        );
    }

    // BAR1 from sysfs: the same on a live node and on its capture.
    let mut bar_known = false;
    if let Some(a) = &g.aperture {
        match a.value() {
            Some(ap) => {
                bar_known = true;
                evidence.push(Evidence {
                    path: a.path.clone(),
                    value: ap.describe(),
                });
                if ap.size < min_bar {
                    let unassigned = ap.size == 0;
                    problems.push(
                        Finding::fail(
                            BAR_SMALL,
                            subject.clone(),
                            if unassigned {
                                format!("no prefetchable BAR assigned: the platform did not map {bar_name}, so no NIC can reach its memory")
                            } else {
                                format!("{bar_name} is {}, below the {} threshold: GPUDirect RDMA maps every registered GPU buffer through it, and registrations fail once it is full", bytes(ap.size), bytes(min_bar))
                            },
                        )
                        .evidence(a.path.clone(), ap.describe())
                        .fix(bar_fix(g.vendor, g.bdf)),
                    );
                } else {
                    facts.push(format!("{bar_name} {}", bytes(ap.size)));
                }
            }
            None => problems.push(match a.nonsense() {
                // A region misread would put another region in BAR1's place: unknown.
                Some(bad) => Finding::unknown(
                    BAR_UNKNOWN,
                    subject.clone(),
                    format!(
                        "cannot tell its {bar_name}: {} makes no sense, {bad}",
                        a.path
                    ),
                )
                .evidence(a.path.clone(), bad),
                None => Finding::unknown(
                    BAR_UNKNOWN,
                    subject.clone(),
                    format!("cannot read its BARs: {}", a.problem().unwrap_or_default()),
                )
                .with([a.evidence()]),
            }),
        }
    }

    // AMD: the render node ROCm opens, and the KFD topology it enumerates (offline too).
    if g.vendor == GpuVendor::Amd && bound_to(inv, g, "amdgpu") {
        let drm_path = inv
            .function(g.bdf)
            .map(|f| format!("{}/drm", f.path))
            .unwrap_or_default();
        match &g.drm {
            Some(Ok(nodes)) => match nodes.iter().find(|n| n.starts_with("renderD")) {
                Some(render) => {
                    facts.push(format!("render node {render}"));
                    evidence.push(Evidence {
                        path: drm_path,
                        value: nodes.join(" "),
                    });
                }
                None => problems.push(
                    Finding::fail(
                        NOT_SEEN_BY_DRIVER,
                        subject.clone(),
                        "bound to amdgpu but it has no render node (renderD*): amdgpu did not finish bringing it up, and ROCm cannot open it".to_string(),
                    )
                    .evidence(drm_path, if nodes.is_empty() { "<empty>".into() } else { nodes.join(" ") })
                    .fix(not_seen_fix(g.vendor, g.bdf)),
                ),
            },
            Some(Err(e)) if e.is_not_found() => problems.push(
                Finding::fail(
                    NOT_SEEN_BY_DRIVER,
                    subject.clone(),
                    "bound to amdgpu but it has no DRM device: amdgpu did not finish bringing it up, and ROCm cannot open it".to_string(),
                )
                .evidence(e.path(), format!("<{}>", e.reason()))
                .fix(not_seen_fix(g.vendor, g.bdf)),
            ),
            Some(Err(e)) => problems.push(
                Finding::unknown(NOT_SEEN_BY_DRIVER, subject.clone(), format!("cannot read its DRM nodes: {}", e.reason()))
                    .evidence(e.path(), format!("<{}>", e.reason())),
            ),
            None => {}
        }
        match &inv.kfd {
            Some(Ok(kfd)) => match kfd.nodes.get(&g.bdf) {
                Some(path) => {
                    facts.push("in the KFD topology".into());
                    evidence.push(Evidence {
                        path: path.clone(),
                        value: format!("GPU node for {}", g.bdf),
                    });
                }
                None => problems.push(
                    Finding::fail(
                        NOT_SEEN_BY_DRIVER,
                        subject.clone(),
                        "bound to amdgpu but not in the KFD topology: ROCm cannot use it".to_string(),
                    )
                    .evidence(KFD_NODES, format!("{} GPU nodes, none at {}", kfd.nodes.len(), g.bdf))
                    .fix(not_seen_fix(g.vendor, g.bdf)),
                ),
            },
            Some(Err(e)) => problems.push(
                Finding::fail(
                    NOT_SEEN_BY_DRIVER,
                    subject.clone(),
                    format!("bound to amdgpu but there is no KFD topology ({}): the kernel's compute interface (CONFIG_HSA_AMD) is off or failed, so ROCm sees no GPU", e.message),
                )
                .evidence(e.path.clone(), format!("<{}>", e.message))
                .fix(not_seen_fix(g.vendor, g.bdf)),
            ),
            None => {}
        }
    }

    if let Some(e) = probe.and_then(|p| p.failure(g.bdf)) {
        // Its worker hung, crashed or could not use the library the others used: this GPU
        // alone is unknown; the rest of the probe stands.
        problems.push(
            Finding::unknown(
                PROBE_FAILED,
                subject.clone(),
                format!("the GPU libraries gave no answer for it: {e}"),
            )
            .evidence("gdrdoctor gpu-worker", format!("<{e}>")),
        );
    }
    if let Runtime::Failed { error } = runtime {
        // Nothing answered (hung, crashed, or cut short by --deadline): what sysfs says of the
        // GPU stands, but the driver's view is unknown, never a pass.
        problems.push(
            Finding::unknown(
                PROBE_FAILED,
                subject.clone(),
                format!("the GPU libraries gave no answer: {error}"),
            )
            .evidence("gdrdoctor probe-gpu", format!("<{error}>")),
        );
    }
    if let Some(p) = probe {
        match g.vendor {
            GpuVendor::Nvidia => {
                nvidia_runtime(inv, g, p, min_bar, &mut facts, &mut evidence, &mut problems)
            }
            GpuVendor::Amd => amd_runtime(g, p, &mut facts, &mut evidence, &mut problems),
            GpuVendor::Other => {}
        }
        if !p.cleared_env.is_empty() {
            evidence.push(Evidence {
                path: "environment".into(),
                value: format!(
                    "{} (removed for the probe, which asks every GPU)",
                    p.cleared_env.join(" ")
                ),
            });
        }
    }

    // The worst problem speaks for the GPU; the others follow in its message.
    problems.sort_by_key(|f| std::cmp::Reverse(f.status));
    let mut rest = problems.into_iter();
    match rest.next() {
        Some(mut worst) => {
            for other in rest {
                worst
                    .message
                    .push_str(&format!("; also {}: {}", other.code, other.message));
                worst.evidence.extend(other.evidence);
                if worst.fix.is_none() {
                    worst.fix = other.fix;
                }
            }
            worst
        }
        None => {
            if !bar_known && g.aperture.is_none() {
                facts.push("no BAR information".into());
            }
            let asked = |ready: bool| {
                if ready {
                    ""
                } else {
                    " (its driver libraries could not be used: see above)"
                }
            };
            let verified = match (runtime, g.vendor) {
                (Runtime::Probed(p), GpuVendor::Nvidia) => asked(
                    p.nvml.as_ref().is_some_and(|l| l.ready().is_some())
                        && p.cuda.as_ref().is_some_and(|l| l.ready().is_some()),
                ),
                (Runtime::Probed(p), _) => {
                    asked(p.hip.as_ref().is_some_and(|l| l.ready().is_some()))
                }
                (Runtime::Recorded(_), GpuVendor::Nvidia) => {
                    " (NVML as the capture recorded it; CUDA not asked: see gpu-probe-skipped)"
                }
                (Runtime::Recorded(_), _) => {
                    " (the driver libraries were not asked: see gpu-probe-skipped)"
                }
                (Runtime::Failed { .. }, _) => " (the GPU probe failed: see above)",
                (Runtime::Skipped { .. }, _) => {
                    " (the driver libraries were not asked: see gpu-probe-skipped)"
                }
            };
            Finding::pass(
                READY,
                subject.clone(),
                format!("{}{verified}", facts.join("; ")),
            )
            .with(evidence)
        }
    }
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
            .disruptive("./displaymodeselector --gpumode physical_display_disabled   # NVIDIA's tool, then reboot"),
        _ => fix.disruptive("systemctl reboot   # after enabling Resizable BAR in the BIOS"),
    }
}

#[allow(clippy::too_many_arguments)]
fn nvidia_runtime(
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
                        "CUDA device {}: {}; GPU_DIRECT_RDMA_SUPPORTED={}, DMA_BUF_SUPPORTED={}{}",
                        d.ordinal,
                        d.bus_id.as_deref().unwrap_or("?"),
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
                        .evidence(cuda.library.to_owned(), format!("CUDA device {}: GPU_DIRECT_RDMA_SUPPORTED=0", d.ordinal))
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

fn amd_runtime(
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
fn unmatched(inv: &Inventory, p: &Probe) -> Vec<Finding> {
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
