//! `gpu-driver`: every GPU has the driver GDR needs bound to it, and an NVIDIA GPU that only
//! the open kernel modules drive has them.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::kernel::NVIDIA_VERSION;
use crate::inventory::{Gpu, GpuVendor, Inventory};
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::kmsg::{Event, EventKind};

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

const NEEDS_OPEN: Code = Code {
    id: "gpu-needs-open-module",
    summary: "an NVIDIA GPU that only the open kernel modules drive (Blackwell and later, GH200) has the proprietary module, which cannot run it",
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
    NEEDS_OPEN,
    VERSION_UNKNOWN,
    PCI_UNIDENTIFIED,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(BOUND, Action::None),
    Rule::new(GPU_NONE, Action::ReplacePart),
    Rule::new(COUNT_LOW, Action::ReplacePart),
    Rule::new(NO_DRIVER, Action::FixInPlace),
    Rule::new(NOUVEAU, Action::Reboot),
    Rule::new(VFIO, Action::FixInPlace),
    Rule::new(UNEXPECTED_DRIVER, Action::FixInPlace),
    Rule::new(NEEDS_OPEN, Action::Reboot),
    Rule::new(VERSION_UNKNOWN, Action::None),
    Rule::new(PCI_UNIDENTIFIED, Action::None),
];

const META: Meta = Meta {
    id: "gpu-driver",
    title: "GPU driver bound to every GPU",
    codes: CODES,
    actions: ACTIONS,
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
        // The proprietary module's refusals in the kernel's log, read once for every GPU.
        let refusals: Vec<Event> = inv
            .kernel
            .log
            .events()
            .into_iter()
            .filter(refusal)
            .collect();
        for gpu in &inv.gpus {
            out.push(match needs_open(inv, gpu, &refusals) {
                Some(f) => f,
                None => judge(cx, gpu),
            });
        }
        out
    }
}

/// Why an NVIDIA GPU runs only on NVIDIA's open kernel modules, from its PCI device ID; `None`
/// for the GPUs the proprietary module still drives.
///
/// - Blackwell and later: "The proprietary flavor supports the GPU architectures Maxwell,
///   Pascal, Volta, Turing, and later GPUs until Blackwell. Blackwell and later are only
///   supported by the open kernel modules." (NVIDIA driver README 560.35.03, chapter "Open
///   Linux Kernel Modules", kernel_open.html). By ID: every display-class 10de device from 0x2900
///   up is a Blackwell or later chip (pci.ids 2026.08.22 names them GB1xx, GB2xx, GR1xx; B200 2901,
///   GB200 2941, RTX 5090 2b85, GB10 2e12, B300 3182, GB300 31c2), while 0x28xx is still Ada.
///   That is a reading of the two tables (pci.ids and the "Compatible GPUs" table of
///   NVIDIA/open-gpu-kernel-modules' README at 595.45.04), not a rule NVIDIA states; the driver
///   itself decides by the chip's architecture register (research notes grace.md 2.3).
/// - Grace Hopper (GH200: 2342, 2348): "For cutting-edge platforms such as NVIDIA Grace Hopper
///   or NVIDIA Blackwell, you must use the open-source GPU kernel modules. The proprietary
///   drivers are unsupported on these platforms." (NVIDIA Technical Blog, "NVIDIA Transitions
///   Fully Towards Open-Source GPU Kernel Modules", July 2024); NVIDIA/cloud-native-docs#6: "GH200
///   requires the NVIDIA Open GPU Kernel module driver". Discrete Hopper (H100, H200) does not.
pub fn needs_open_modules(vendor: u16, device: u16, class: u32) -> Option<&'static str> {
    if vendor != 0x10de || class >> 16 != 0x03 {
        return None;
    }
    match device {
        0x2342 | 0x2348 => {
            Some("a Grace Hopper GH200, which NVIDIA supports only on its open kernel modules")
        }
        d if d >= 0x2900 => Some(
            "a Blackwell or later GPU (device ID 0x2900 and up), which only NVIDIA's open kernel modules support",
        ),
        _ => None,
    }
}

/// An event of the proprietary module refusing a GPU: the refusal line, or an RmInitAdapter
/// failure with its status (`0x22:0x56`).
fn refusal(e: &Event) -> bool {
    match &e.kind {
        EventKind::OpenModuleRequired { .. } => true,
        EventKind::RmInitAdapter(s) => s.open_module_refusal(),
        _ => false,
    }
}

/// An NVIDIA GPU that needs the open kernel modules, with the proprietary module loaded (bound
/// to it, or not bound at all) or its refusal in the kernel's log: the failure, with the version
/// file, the device ID and the log's lines about it. `None` otherwise: [`judge`] says the rest.
fn needs_open(inv: &Inventory, gpu: &Gpu, refusals: &[Event]) -> Option<Finding> {
    let f = inv.function(gpu.bdf)?;
    let why = needs_open_modules(f.vendor, f.device, f.class)?;
    let nv = &inv.kernel.nvidia;
    let proprietary = nv.value().filter(|v| !v.open);
    let logged: Vec<&Event> = refusals
        .iter()
        .filter(|e| e.device == Some(gpu.bdf))
        .collect();
    let bound = f.driver.as_deref();
    // The open module loaded now: a refusal in the log came from a module unloaded since, and
    // judge() says the rest.
    if nv.value().is_some_and(|v| v.open) {
        return None;
    }
    let message = match (bound, proprietary, logged.is_empty()) {
        // Another driver (judge() names it), or nvidia with its version file unreadable
        // (judge()'s unknown): nothing here says the proprietary module is the one bound.
        (Some(d), _, _) if d != "nvidia" => return None,
        (Some(_), None, _) | (None, None, true) => return None,
        (Some(_), Some(v), _) => format!(
            "{}: {why}; it is bound to the proprietary nvidia {} kernel module, which cannot run it (CUDA and nvidia-smi find no device on it)",
            f.ids(),
            v.version
        ),
        (None, Some(v), _) => format!(
            "{}: {why}; no driver is bound to it, and the nvidia kernel module loaded is the proprietary {}, which cannot run it",
            f.ids(),
            v.version
        ),
        (None, None, false) => format!(
            "{}: {why}; no driver is bound to it, and the kernel's log holds the proprietary module's refusal of it",
            f.ids()
        ),
    };
    // The lines that say it: the refusal and the RmInitAdapter status, the first of each kind.
    let mut lines: Vec<&Event> = Vec::new();
    for e in &logged {
        if !lines
            .iter()
            .any(|l| std::mem::discriminant(&l.kind) == std::mem::discriminant(&e.kind))
        {
            lines.push(e);
        }
    }
    let message = match logged.len() {
        0 => message,
        n => format!(
            "{message}; the kernel's log holds the refusal ({n} line{})",
            if n == 1 { "" } else { "s" }
        ),
    };
    Some(
        Finding::fail(NEEDS_OPEN, gpu.subject(), message)
            .evidence(f.driver_path(), bound.unwrap_or("<no driver link>"))
            .evidence(format!("{}/device", f.path), format!("{:#06x}", f.device))
            .with([nv.evidence()])
            .with(lines.iter().map(|e| Evidence {
                path: inv.kernel.log.path().to_owned(),
                value: format!("{} {}", e.record.stamp(), e.record.text),
            }))
            .fix(open_module_fix(nv.value().map(|v| v.major))),
    )
}

/// NVIDIA's open kernel modules in place of the proprietary ones, from the packages of the
/// driver branch installed (`major`, from the version file), then a reboot. Ubuntu and NVIDIA's
/// CUDA repository for Ubuntu name them `nvidia-driver-<branch>-open` (Ubuntu's server branch
/// `nvidia-driver-<branch>-server-open`, its prebuilt modules
/// `linux-modules-nvidia-<branch>[-server]-open-<kernel flavour>`); NVIDIA's repository for the
/// RHEL family has the module stream `nvidia-driver:<branch>-open` (or `kmod-nvidia-open-dkms`).
/// How to tell the flavour afterwards: `modinfo nvidia` says `license: Dual MIT/GPL` for the
/// open one, `NVIDIA` for the proprietary one (the driver README's kernel_open.html).
pub(super) fn open_module_fix(major: Option<u32>) -> Fix {
    let fix = Fix::new(
        "Install NVIDIA's open kernel modules of the same driver branch in place of the proprietary ones, then reboot",
        "Swaps the kernel modules of the installed driver branch (the user-space libraries stay); the reboot stops every GPU process: drain the node first.",
    );
    let fix = match major {
        Some(m) => fix
            .persistent(format!(
                "if command -v apt-get >/dev/null; then apt-get install -y nvidia-driver-{m}-open; elif command -v dnf >/dev/null; then dnf -y module switch-to nvidia-driver:{m}-open; else echo 'install the NVIDIA {m} open kernel modules from this distribution' >&2; fi"
            ))
            .manual(format!(
                "apt-get install nvidia-driver-{m}-server-open   # Ubuntu's server branch instead, where nvidia-driver-{m}-server is installed"
            ))
            .manual("dnf install kmod-nvidia-open-dkms   # RHEL family, where the driver came as DKMS packages"),
        None => fix
            .manual("apt-get install nvidia-driver-BRANCH-open   # Ubuntu; BRANCH as in dpkg -l 'nvidia-driver-*'")
            .manual("dnf module switch-to nvidia-driver:BRANCH-open   # RHEL family, NVIDIA's repository"),
    };
    fix.disruptive("systemctl reboot")
        .manual("modinfo -F license nvidia   # after the reboot: Dual MIT/GPL is the open module")
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
                    // Loaded for the other GPUs, modprobe alone binds nothing: ask the driver
                    // to take this one.
                    .guarded(
                        crate::model::FixClass::Runtime,
                        format!("modprobe nvidia && echo {} > /sys/bus/pci/drivers/nvidia/bind", gpu.bdf),
                        format!("[ -e /sys/bus/pci/devices/{}/driver ]", gpu.bdf),
                    )
                    .manual("dmesg | grep -i nvrm"),
                GpuVendor::Amd => Fix::new("Load amdgpu, or find out why it did not claim this GPU", "modprobe only loads the installed driver; dmesg says why it failed.")
                    .guarded(
                        crate::model::FixClass::Runtime,
                        format!("modprobe amdgpu && echo {} > /sys/bus/pci/drivers/amdgpu/bind", gpu.bdf),
                        format!("[ -e /sys/bus/pci/devices/{}/driver ]", gpu.bdf),
                    )
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
                    .edit(crate::model::edit::Edit::Write {
                        file: "/etc/modprobe.d/blacklist-nouveau.conf".into(),
                        lines: vec!["blacklist nouveau".into(), "options nouveau modeset=0".into()],
                    })
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

#[cfg(test)]
mod tests {
    use super::needs_open_modules;

    #[test]
    fn which_gpus_need_the_open_modules() {
        let display = 0x030200;
        // Blackwell data center, consumer and Blackwell Ultra; Rubin's first IDs.
        for id in [
            0x2901, 0x2941, 0x2b85, 0x2c58, 0x2e12, 0x3182, 0x31c2, 0x3021,
        ] {
            assert!(needs_open_modules(0x10de, id, display).is_some(), "{id:#x}");
        }
        // GH200, whether 3D or VGA class.
        assert!(needs_open_modules(0x10de, 0x2342, 0x030200).is_some());
        assert!(needs_open_modules(0x10de, 0x2348, 0x030000).is_some());
        // H100 and H200 (discrete Hopper), A100, an Ada laptop GPU at 0x28e0.
        for id in [0x2330, 0x2335, 0x20b0, 0x28e0] {
            assert!(needs_open_modules(0x10de, id, display).is_none(), "{id:#x}");
        }
        // Not GPUs: a Blackwell HD audio function (class 0403), a Vera CPU bridge (0604);
        // another vendor.
        assert!(needs_open_modules(0x10de, 0x22e8, 0x040300).is_none());
        assert!(needs_open_modules(0x10de, 0x2f95, 0x060400).is_none());
        assert!(needs_open_modules(0x1002, 0x74a1, 0x038000).is_none());
    }
}
