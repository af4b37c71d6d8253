//! `gpu-driver`: every GPU has the driver GDR needs bound to it.

use super::{Check, Context, Meta};
use crate::inventory::kernel::NVIDIA_VERSION;
use crate::inventory::{Gpu, GpuVendor};
use crate::model::{Code, Finding, Fix};

pub struct GpuDriver;

const BOUND: Code = Code {
    id: "gpu-driver-bound",
    summary: "the GPU has its vendor's driver bound",
};

const GPU_NONE: Code = Code {
    id: "gpu-none",
    summary: "no GPU was found on the PCI bus",
};

const COUNT_LOW: Code = Code {
    id: "gpu-count-low",
    summary: "fewer GPUs than the config expects",
};

const NO_DRIVER: Code = Code {
    id: "gpu-no-driver",
    summary: "no driver is bound to the GPU",
};

const NOUVEAU: Code = Code {
    id: "gpu-nouveau",
    summary: "an NVIDIA GPU is bound to nouveau, which cannot do CUDA or GDR",
};

const VFIO: Code = Code {
    id: "gpu-vfio",
    summary: "the GPU is bound to vfio-pci (assigned to a VM), not usable on this host",
};

const UNEXPECTED_DRIVER: Code = Code {
    id: "gpu-unexpected-driver",
    summary: "the GPU is bound to a driver other than its vendor's",
};

const VERSION_UNKNOWN: Code = Code {
    id: "gpu-driver-version-unknown",
    summary: "the NVIDIA driver is bound but its version file is unreadable",
};

const PCI_UNIDENTIFIED: Code = Code {
    id: "pci-unidentified",
    summary: "a PCI function could not be identified, so it may be a GPU gdrdoctor missed",
};

const CODES: &[Code] = &[
    BOUND,
    GPU_NONE,
    COUNT_LOW,
    NO_DRIVER,
    NOUVEAU,
    VFIO,
    UNEXPECTED_DRIVER,
    VERSION_UNKNOWN,
    PCI_UNIDENTIFIED,
];

const META: Meta = Meta {
    id: "gpu-driver",
    title: "GPU driver bound to every GPU",
    codes: CODES,
    readme: include_str!("../../checks/gpu-driver/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for GpuDriver {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let mut out = Vec::new();
        for p in &inv.unidentified {
            let message = if p.path == crate::inventory::pci::PCI_DEVICES {
                format!(
                    "cannot list the PCI functions, so the GPUs cannot be found: {}",
                    p.message
                )
            } else {
                format!("cannot tell whether this is a GPU: {}", p.message)
            };
            out.push(
                Finding::unknown(PCI_UNIDENTIFIED, p.path.clone(), message)
                    .evidence(p.path.clone(), format!("<{}>", p.message)),
            );
        }
        // "No GPU" is only a verdict when every function was identified; otherwise the GPU may
        // be among the unreadable ones, and the unknowns above say so.
        if inv.gpus.is_empty() && inv.unidentified.is_empty() {
            out.push(
                Finding::fail(GPU_NONE, "node", "no GPU found: no NVIDIA or AMD display/3D/accelerator function, and no accelerator declared in the config")
                    .evidence(crate::inventory::pci::PCI_DEVICES, format!("{} PCI functions, none a GPU", inv.pci.len()))
                    .fix(
                        Fix::new("Find out why the GPUs are not on the bus, or declare the accelerator in the config", "Read-only commands.")
                            .manual("lspci -nn | grep -Ei 'nvidia|amd|ati|accelerator|3d|vga'")
                            .manual("dmesg | grep -Ei 'nvrm|amdgpu|pcie.*(error|fail)'")
                            .manual("# other accelerators: add them under `accelerators:` in /etc/gdrdoctor/config.yaml"),
                    ),
            );
        }
        if let Some(want) = cx.config.expect.gpus {
            if inv.gpus.len() < want {
                let list: Vec<String> = inv.gpus.iter().map(|g| g.bdf.to_string()).collect();
                out.push(
                    Finding::fail(COUNT_LOW, "node", format!("{} GPUs found, the config expects {want}", inv.gpus.len()))
                        .evidence(crate::inventory::pci::PCI_DEVICES, if list.is_empty() { "none".into() } else { list.join(" ") })
                        .fix(
                            Fix::new("Find the missing GPU: a GPU that fell off the bus or failed link training is absent from lspci", "Read-only commands; reseating a GPU needs the node drained and powered off.")
                                .manual("dmesg | grep -Ei 'fallen off the bus|Xid|AER|pcie.*link'")
                                .manual("lspci -nn -d 10de: ; lspci -nn -d 1002:"),
                        ),
                );
            }
        }
        for gpu in &inv.gpus {
            out.push(judge(cx, gpu));
        }
        out
    }
}

fn judge(cx: &Context, gpu: &Gpu) -> Finding {
    let inv = cx.inv;
    let Some(f) = inv.function(gpu.bdf) else {
        return Finding::unknown(
            PCI_UNIDENTIFIED,
            gpu.subject(),
            "GPU vanished from the inventory",
        );
    };
    let driver_evidence = (
        f.driver_path(),
        f.driver
            .clone()
            .unwrap_or_else(|| "<no driver link>".into()),
    );
    let subject = gpu.subject();
    let ids = f.ids();
    match (gpu.vendor, f.driver.as_deref()) {
        (_, None) => {
            let fix = match gpu.vendor {
                GpuVendor::Nvidia => Fix::new("Load the NVIDIA driver, or find out why it did not claim this GPU", "modprobe only loads the installed driver; if it fails, dmesg says why (version mismatch, missing firmware, Secure Boot).")
                    .modprobe("nvidia")
                    .manual("dmesg | grep -i nvrm"),
                GpuVendor::Amd => Fix::new("Load amdgpu, or find out why it did not claim this GPU", "modprobe only loads the installed driver; dmesg says why it failed.")
                    .modprobe("amdgpu")
                    .manual("dmesg | grep -i amdgpu"),
                GpuVendor::Other => Fix::new("Load the accelerator's driver", "Depends on the vendor's driver.").manual(format!("lspci -k -s {}", gpu.bdf)),
            };
            Finding::fail(NO_DRIVER, subject, format!("{ids} has no driver bound: nothing can allocate memory on it"))
                .evidence(driver_evidence.0, driver_evidence.1)
                .fix(fix)
        }
        (GpuVendor::Nvidia, Some("nouveau")) => Finding::fail(NOUVEAU, subject, "bound to nouveau, which has no CUDA and no GPUDirect RDMA")
            .evidence(driver_evidence.0, driver_evidence.1)
            .with([inv.kernel.module_evidence("nouveau")])
            .fix(
                Fix::new("Blacklist nouveau and boot with the NVIDIA driver", "Needs a reboot; the console falls back to a basic framebuffer.")
                    .persistent("printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' > /etc/modprobe.d/blacklist-nouveau.conf")
                    .persistent("if command -v update-initramfs >/dev/null; then update-initramfs -u; else dracut --force; fi")
                    .disruptive("systemctl reboot"),
            ),
        (_, Some("vfio-pci")) => Finding::warn(VFIO, subject, "bound to vfio-pci: assigned to a virtual machine, so this host cannot use it for GDR")
            .evidence(driver_evidence.0, driver_evidence.1)
            .fix(
                Fix::new("If the GPU should serve this host, unbind it from vfio-pci and bind its driver", "Detaches the GPU from any VM using it.")
                    .manual(format!("echo {bdf} > /sys/bus/pci/drivers/vfio-pci/unbind && echo {bdf} > /sys/bus/pci/drivers_probe", bdf = gpu.bdf)),
            ),
        (GpuVendor::Nvidia, Some("nvidia")) => {
            let nv = &inv.kernel.nvidia;
            match nv.value() {
                Some(v) => Finding::pass(
                    BOUND,
                    subject,
                    format!("bound to nvidia {} ({} kernel module)", v.version, if v.open { "open" } else { "proprietary" }),
                )
                .evidence(driver_evidence.0, driver_evidence.1)
                .with([nv.evidence()]),
                None => Finding::unknown(VERSION_UNKNOWN, subject, format!("bound to nvidia, but {NVIDIA_VERSION} is unreadable: {}", nv.problem().unwrap_or_default()))
                    .evidence(driver_evidence.0, driver_evidence.1)
                    .with([nv.evidence()]),
            }
        }
        (GpuVendor::Amd, Some("amdgpu")) => {
            let version = inv.kernel.driver_versions.get("amdgpu").and_then(|f| f.value().cloned());
            Finding::pass(BOUND, subject, match version {
                Some(v) => format!("bound to amdgpu {v}"),
                None => "bound to amdgpu (in-tree)".to_owned(),
            })
            .evidence(driver_evidence.0, driver_evidence.1)
        }
        (GpuVendor::Other, Some(d)) => Finding::pass(BOUND, subject, format!("declared accelerator {ids} bound to {d}")).evidence(driver_evidence.0, driver_evidence.1),
        (vendor, Some(d)) => {
            let expected = if vendor == GpuVendor::Nvidia { "nvidia" } else { "amdgpu" };
            Finding::warn(UNEXPECTED_DRIVER, subject, format!("bound to {d}, not {expected}: GDR needs the vendor's driver"))
                .evidence(driver_evidence.0, driver_evidence.1)
                .fix(Fix::new(format!("Bind {expected} to this GPU"), "Unbinding takes the GPU away from whatever uses it now.").manual(format!("lspci -k -s {}", gpu.bdf)))
        }
    }
}
