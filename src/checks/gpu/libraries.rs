//! The GPU driver libraries themselves (NVML, CUDA, HIP, HSA): absent, too old, or refusing to
//! start. One finding per library, for the node, before any GPU is judged.

use super::{
    NVIDIA_DRIVER_MISMATCH, NVIDIA_DRIVER_NOT_LOADED, NVIDIA_LIBRARY_MISSING,
    NVIDIA_LIBRARY_TOO_OLD, ROCM_LIBRARY_MISSING, RUNTIME_ERROR,
};
use crate::inventory::Inventory;
use crate::inventory::kernel::NVIDIA_VERSION;
use crate::model::gpu::{Lib, Probe};
use crate::model::{Evidence, Finding, Fix, Status};

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
pub(super) fn library_findings(inv: &Inventory, p: &Probe) -> Vec<Finding> {
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
