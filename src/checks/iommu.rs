//! `iommu`: the IOMMU lets GPU<->NIC peer-to-peer DMA through untranslated.

use super::{Check, Context, Meta, grub_fix};
use crate::inventory::Inventory;
use crate::inventory::iommu::CLASS_IOMMU;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::kernel::KernelVersion;
use crate::parse::pci::Bdf;
use std::collections::BTreeMap;

pub struct IommuCheck;

const OFF: Code = Code {
    id: "iommu-off",
    summary: "no IOMMU translates DMA: peer-to-peer goes straight through",
};

const PASSTHROUGH: Code = Code {
    id: "iommu-passthrough",
    summary: "the devices' IOMMU groups are identity (passthrough)",
};

const TRANSLATED: Code = Code {
    id: "iommu-translated",
    summary: "GPU or NIC DMA is translated by the IOMMU (DMA / DMA-FQ), which degrades or breaks peer-to-peer",
};

const BLOCKED: Code = Code {
    id: "iommu-blocked",
    summary: "the device's IOMMU group blocks DMA",
};

const VFIO: Code = Code {
    id: "iommu-vfio",
    summary: "the device is in a VFIO-owned (unmanaged) group: assigned to a VM",
};

const GROUP_UNKNOWN: Code = Code {
    id: "iommu-group-unknown",
    summary: "the device's IOMMU group or its type could not be read",
};

const NO_DEVICES: Code = Code {
    id: "iommu-no-devices",
    summary: "no GPU or RDMA device to judge",
};

const CODES: &[Code] = &[
    OFF,
    PASSTHROUGH,
    TRANSLATED,
    BLOCKED,
    VFIO,
    GROUP_UNKNOWN,
    NO_DEVICES,
];

const META: Meta = Meta {
    id: "iommu",
    title: "IOMMU passthrough (or off) for GPUs and NICs",
    codes: CODES,
    readme: include_str!("../../checks/iommu/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for IommuCheck {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let cmdline = inv.kernel.cmdline.evidence();
        let units = Evidence {
            path: CLASS_IOMMU.into(),
            value: match (&inv.iommu.units_error, inv.iommu.units.is_empty()) {
                (Some(e), _) => format!("<{}>", e.reason()),
                (None, true) => "<no IOMMU units>".into(),
                (None, false) => inv.iommu.units.join(" "),
            },
        };
        let devices = subjects(inv);
        if devices.is_empty() {
            return vec![
                Finding::skip(
                    NO_DEVICES,
                    "node",
                    "no GPU or RDMA device (see gpu-driver, rdma-link)",
                )
                .with([units, cmdline])
                .prerequisites(&["gpu-driver", "rdma-link"]),
            ];
        }
        let any_group = devices.iter().any(|(_, bdf)| group_of(inv, *bdf).is_some());
        if let (Some(e), false) = (&inv.iommu.units_error, any_group) {
            return vec![
                Finding::unknown(
                    GROUP_UNKNOWN,
                    "node",
                    format!("cannot tell whether an IOMMU is active: {e}"),
                )
                .with([units, cmdline]),
            ];
        }
        if inv.iommu.units.is_empty() && !any_group {
            return vec![
                Finding::pass(
                    OFF,
                    "node",
                    "no IOMMU is active: device DMA is untranslated, as GDR wants",
                )
                .with([units, cmdline]),
            ];
        }

        // Group devices by what their group's type says, one finding per verdict.
        let mut by_type: BTreeMap<String, Vec<(String, Evidence)>> = BTreeMap::new();
        let mut out = Vec::new();
        for (name, bdf) in &devices {
            let Some(group) = group_of(inv, *bdf) else {
                let why = if inv.function(*bdf).is_none() {
                    format!("its PCI function {bdf} could not be identified")
                } else {
                    format!(
                        "IOMMU units exist ({}) but {bdf} has no iommu_group link",
                        inv.iommu.units.join(" ")
                    )
                };
                out.push(Finding::unknown(GROUP_UNKNOWN, name.clone(), why).with([units.clone()]));
                continue;
            };
            let fact = &inv.iommu.groups[&group];
            match fact.value() {
                Some(t) => by_type.entry(t.clone()).or_default().push((
                    name.clone(),
                    Evidence {
                        path: fact.path.clone(),
                        value: format!("{t} ({name})"),
                    },
                )),
                None => out.push(
                    Finding::unknown(
                        GROUP_UNKNOWN,
                        name.clone(),
                        format!(
                            "cannot read the type of IOMMU group {group}: {}",
                            fact.problem().unwrap_or_default()
                        ),
                    )
                    .with([fact.evidence()]),
                ),
            }
        }
        for (kind, members) in by_type {
            let mut evidence: Vec<Evidence> = members.iter().map(|(_, e)| e.clone()).collect();
            evidence.dedup();
            evidence.push(cmdline.clone());
            let list = brief(&members.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>());
            let origin = origin(inv);
            let finding = match kind.as_str() {
                "identity" => Finding::pass(PASSTHROUGH, "IOMMU", format!("passthrough (identity) for {list}; {origin}")),
                "DMA" | "DMA-FQ" => {
                    let mode = if kind == "DMA" { "strict" } else { "lazy" };
                    Finding::fail(
                        TRANSLATED,
                        "IOMMU",
                        format!("{list}: IOMMU group type {kind} (translated, {mode}): every peer-to-peer DMA between GPU and NIC is remapped, which slows GDR or breaks it; {origin}"),
                    )
                    .fix(passthrough_fix(inv))
                }
                "blocked" => Finding::fail(BLOCKED, "IOMMU", format!("{list}: IOMMU group type blocked: the device cannot DMA at all")).fix(
                    Fix::new("Find what blocked the group (a driver unbound under VFIO, a failed probe)", "Read-only command.").manual("dmesg | grep -i -e iommu -e dmar -e 'AMD-Vi'"),
                ),
                "unmanaged" => Finding::warn(VFIO, "IOMMU", format!("{list}: IOMMU group owned by VFIO (unmanaged): assigned to a virtual machine")).fix(
                    Fix::new("If the device should serve this host, detach it from VFIO", "Detaches it from any VM using it.").manual("ls -l /sys/kernel/iommu_groups/*/devices/"),
                ),
                _ => Finding::unknown(GROUP_UNKNOWN, "IOMMU", format!("{list}: IOMMU group type {kind} not known to gdrdoctor")),
            };
            out.push(finding.with(evidence).with(default_evidence(inv)));
        }
        out
    }
}

/// The kernel parameters that decide the IOMMU mode, as the operator will look for them.
const IOMMU_PARAMS: [&str; 5] = [
    "intel_iommu",
    "amd_iommu",
    "iommu",
    "iommu.passthrough",
    "iommu.strict",
];

/// What set the mode: the command line's IOMMU words, else the kernel's built-in default.
fn origin(inv: &Inventory) -> String {
    if let Some(problem) = inv.kernel.cmdline.problem() {
        return format!("the kernel command line could not be read ({problem})");
    }
    let words: Vec<String> = IOMMU_PARAMS
        .iter()
        .filter_map(|k| inv.kernel.cmdline_param(k))
        .map(|p| match &p.value {
            Some(v) => format!("{}={v}", p.key),
            None => p.key.clone(),
        })
        .collect();
    if !words.is_empty() {
        return format!("set by the kernel command line: {}", words.join(" "));
    }
    match default_mode(inv) {
        Some(opt) => format!(
            "no IOMMU words on the kernel command line, so the kernel default applies ({opt})"
        ),
        None => {
            "no IOMMU words on the kernel command line, so the kernel's built-in default applies"
                .into()
        }
    }
}

/// CONFIG_IOMMU_DEFAULT_{PASSTHROUGH,DMA_LAZY,DMA_STRICT}, when the kernel config is readable.
fn default_mode(inv: &Inventory) -> Option<String> {
    let c = inv.kernel.config.as_ref()?;
    [
        "CONFIG_IOMMU_DEFAULT_PASSTHROUGH",
        "CONFIG_IOMMU_DEFAULT_DMA_LAZY",
        "CONFIG_IOMMU_DEFAULT_DMA_STRICT",
    ]
    .into_iter()
    .find(|o| c.enabled(o))
    .map(|o| format!("{o}=y"))
}

fn default_evidence(inv: &Inventory) -> Option<Evidence> {
    let c = inv.kernel.config.as_ref()?;
    default_mode(inv).map(|v| Evidence {
        path: c.path.clone(),
        value: v,
    })
}

/// The GPUs and RDMA PCI functions, by short name: `GPU 0000:18:00.0`, `mlx5_0`.
fn subjects(inv: &Inventory) -> Vec<(String, Bdf)> {
    let mut v: Vec<(String, Bdf)> = inv
        .gpus
        .iter()
        .map(|g| (format!("GPU {}", g.bdf), g.bdf))
        .collect();
    for d in &inv.rdma {
        if let Some(bdf) = d.pci {
            if !v.iter().any(|(_, b)| *b == bdf) {
                v.push((d.name.clone(), bdf));
            }
        }
    }
    v
}

/// `GPU 0000:18:00.0, GPU 0000:1a:00.0, mlx5_0` -> `2 GPUs (0000:18:00.0, 0000:1a:00.0) and
/// mlx5_0`: the evidence lists each device's group, the message stays one readable line.
fn brief(names: &[&str]) -> String {
    let gpus: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_prefix("GPU "))
        .collect();
    let nics: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| !n.starts_with("GPU "))
        .collect();
    let mut parts = Vec::new();
    match gpus.len() {
        0 => {}
        1 => parts.push(format!("GPU {}", gpus[0])),
        n => parts.push(format!("{n} GPUs ({})", gpus.join(", "))),
    }
    match nics.len() {
        0 => {}
        1 => parts.push(nics[0].to_owned()),
        n => parts.push(format!("{n} RDMA NICs ({})", nics.join(", "))),
    }
    parts.join(" and ")
}

fn group_of(inv: &Inventory, bdf: Bdf) -> Option<u32> {
    inv.function(bdf)?.detail.as_ref()?.iommu_group
}

/// The kernel parameter that gives passthrough depends on the platform (REFERENCE.md section 4).
fn passthrough_fix(inv: &Inventory) -> Fix {
    let arch = inv.kernel.arch.as_ref().map(|(a, _)| a.as_str());
    let platform = inv.iommu.platform();
    let strict = inv.kernel.cmdline_param("iommu.strict").is_some();
    let no_pt = inv
        .kernel
        .cmdline_param("iommu.passthrough")
        .is_some_and(|p| p.value.as_deref() == Some("0"))
        || inv
            .kernel
            .cmdline_param("iommu")
            .is_some_and(|p| p.value.as_deref() == Some("nopt"));
    let mut remove: Vec<&str> = Vec::new();
    if strict {
        remove.push("iommu.strict=1");
    }
    if no_pt {
        remove.extend(["iommu.passthrough=0", "iommu=nopt"]);
    }
    let safety = "Passthrough gives host-owned devices untranslated DMA (no IOMMU isolation for them; VFIO-assigned devices keep theirs). Takes effect after a reboot.";
    if arch == Some("aarch64") || platform == Some("arm-smmu") {
        // NVIDIA: on arm64 SMMU kernels before 6.11, passthrough broke CUDA.
        if inv
            .kernel
            .version
            .is_some_and(|v| v < KernelVersion(6, 11, 0))
        {
            return Fix::new(
                "On this arm64 kernel, passthrough is not safe for CUDA: upgrade to kernel >= 6.11 first, then boot with iommu.passthrough=1",
                "Older arm64 SMMU kernels broke CUDA in passthrough mode (NVIDIA); upgrade the kernel first.",
            )
            .manual(format!("# kernel {} < 6.11: install a 6.11+ kernel, then add iommu.passthrough=1", inv.kernel.version.map(|v| v.to_string()).unwrap_or_default()));
        }
        return grub_fix(
            Fix::new("Boot with iommu.passthrough=1 (Arm SMMU)", safety),
            &["iommu.passthrough=1"],
            &remove,
        );
    }
    match platform {
        Some("intel") | Some("amd") => grub_fix(
            Fix::new(
                "Boot with iommu=pt (keeps the IOMMU on for VFIO, passthrough for host devices)",
                safety,
            ),
            &["iommu=pt"],
            &remove,
        ),
        _ => grub_fix(
            Fix::new("Boot with iommu.passthrough=1", safety),
            &["iommu.passthrough=1"],
            &remove,
        ),
    }
}
