//! `iommu`: the IOMMU lets GPU<->NIC peer-to-peer DMA through untranslated on x86 (Intel VT-d,
//! AMD-Vi); on the Arm SMMU (Grace), translated is what NVIDIA recommends, and passthrough is
//! judged by the kernel's release and ACS ([`smmu_passthrough`]).

use super::Rule;
use super::{Check, Context, Meta, grub_fix};
use crate::inventory::Inventory;
use crate::inventory::iommu::CLASS_IOMMU;
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
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

const SMMU_TRANSLATED: Code = Code {
    id: "iommu-smmu-translated",
    summary: "the Arm SMMU translates GPU and NIC DMA (DMA / DMA-FQ): the mode NVIDIA recommends on Grace, in which GPUDirect RDMA and DMA-BUF work",
};

const SMMU_PASSTHROUGH_CUDA: Code = Code {
    id: "iommu-smmu-passthrough-breaks-cuda",
    summary: "Arm SMMU passthrough on a kernel before 6.11 without NVIDIA's SMMU patch, with ACS on above a Grace superchip GPU: no CUDA context can be created",
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
    SMMU_TRANSLATED,
    SMMU_PASSTHROUGH_CUDA,
    BLOCKED,
    VFIO,
    GROUP_UNKNOWN,
    NO_DEVICES,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(OFF, Action::None),
    Rule::new(PASSTHROUGH, Action::None),
    Rule::new(TRANSLATED, Action::Reboot),
    Rule::new(SMMU_TRANSLATED, Action::None),
    Rule::new(SMMU_PASSTHROUGH_CUDA, Action::Reboot),
    Rule::new(BLOCKED, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(VFIO, Action::FixInPlace),
    Rule::new(GROUP_UNKNOWN, Action::None),
    Rule::new(NO_DEVICES, Action::None),
];

const META: Meta = Meta {
    id: "iommu",
    title: "IOMMU passthrough (or off) for GPUs and NICs",
    codes: CODES,
    actions: ACTIONS,
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
        let mut by_type: BTreeMap<String, Vec<(String, Bdf, Evidence)>> = BTreeMap::new();
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
                    *bdf,
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
        let arm = arm_smmu(inv);
        for (kind, members) in by_type {
            let mut evidence: Vec<Evidence> = members.iter().map(|(_, _, e)| e.clone()).collect();
            evidence.dedup();
            evidence.push(cmdline.clone());
            let list = brief(
                &members
                    .iter()
                    .map(|(n, _, _)| n.as_str())
                    .collect::<Vec<_>>(),
            );
            let origin = origin(inv);
            let finding = match kind.as_str() {
                "identity" if arm => {
                    let bdfs: Vec<Bdf> = members.iter().map(|(_, b, _)| *b).collect();
                    smmu_passthrough(inv, &bdfs, &list, &origin)
                }
                "identity" => Finding::pass(PASSTHROUGH, "IOMMU", format!("passthrough (identity) for {list}; {origin}")),
                "DMA" | "DMA-FQ" if arm => smmu_translated(&kind, &list, &origin),
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

/// An Arm SMMU: the node's architecture is aarch64, or its IOMMU units are SMMUs.
fn arm_smmu(inv: &Inventory) -> bool {
    inv.kernel
        .arch
        .as_ref()
        .is_some_and(|(a, _)| a == "aarch64")
        || inv.iommu.platform() == Some("arm-smmu")
}

/// The kernel parameter that gives passthrough depends on the platform (REFERENCE.md section 4).
/// Not for the Arm SMMU, where translated passes ([`smmu_translated`]).
fn passthrough_fix(inv: &Inventory) -> Fix {
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

// -- The Arm SMMU (Grace): translated passes, passthrough by kernel and ACS (issue 38) ---------

/// Translated on the Arm SMMU passes: it is what NVIDIA sets and recommends on Grace.
/// nvidia-tuned boots kernels before 6.11 with `iommu.passthrough=0`: "Setting
/// `iommu.passthrough=0` restores translating (DMA-FQ) domains, the CD table is allocated, the
/// bind succeeds, and CUDA, GPUDirect RDMA and the DMA-BUF path the ACS correction sets up all
/// work" (NVIDIA/nodewright-packages#122); NVIDIA's Grace Linux install guide: "We recommend that
/// you add the iommu.passthrough=0 kernel parameter until this issue is resolved" (quoted by
/// k8snetworkplumbingwg/sriov-network-operator#864, which stopped setting passthrough on Arm
/// for it). x86's rule (translated fails, nccl#660) stays x86's.
fn smmu_translated(kind: &str, list: &str, origin: &str) -> Finding {
    let mode = if kind == "DMA" { "strict" } else { "lazy" };
    Finding::pass(
        SMMU_TRANSLATED,
        "IOMMU",
        format!(
            "{list}: IOMMU group type {kind} (translated, {mode}) on the Arm SMMU: the mode NVIDIA recommends on Grace (iommu.passthrough=0), in which CUDA, GPUDirect RDMA and the DMA-BUF path work (NVIDIA nodewright-packages#122); {origin}"
        ),
    )
}

/// Whether the kernel's Arm SMMU driver attaches a PASID to an identity (passthrough) domain,
/// which nvidia_uvm's ATS bind of a Grace superchip GPU needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdentityPasid {
    /// Linux 6.11 and later: "Upstream fixed this in two steps: 6.10 made CD tables
    /// allocate-on-demand, and 6.11 added `STRTAB_STE_1_S1DSS_BYPASS` (PASID on an identity
    /// STE). 6.11 is the threshold." (NVIDIA/nodewright-packages#122; nvidia-tuned's
    /// configure_iommu_passthrough.sh compares `uname -r`'s major.minor with 6.11).
    Upstream,
    /// NVIDIA's linux-nvidia 6.8 kernel (Ubuntu's `6.8.0-N-nvidia`, `6.8.0-N-nvidia-64k`) after
    /// 6.8.0-1010: NVIDIA carries "NVIDIA: SAUCE: iommu/arm-smmu-v3: Allow default substream
    /// bypass with a pasid support" in that tree (NVIDIA/NV-Kernels#22, 2024-08-07, re-applied
    /// in #23 on 2024-08-19); #22's test shows 6.8.0-1010-nvidia-64k (built 2024-07-15) failing
    /// without it ("Without SAUCE patch, CUDA apps fail with iommu.passthrough=y", a GH200).
    /// Assumed: every later ABI of the tree carries it (the first Ubuntu package that does is
    /// not established). Other NVIDIA flavours before 6.11 (`-nvidia-adv`, 6.2, 6.5, the 6.6
    /// tree of NV-Kernels#202) are not taken to.
    NvidiaPatch,
    /// Before 6.11 without NVIDIA's patch.
    Missing,
    /// The kernel's release is unknown.
    Unknown,
}

fn identity_pasid(
    release: Option<&str>,
    version: Option<crate::parse::kernel::KernelVersion>,
) -> IdentityPasid {
    use crate::parse::kernel::KernelVersion;
    match version {
        None => IdentityPasid::Unknown,
        Some(v) if v >= KernelVersion(6, 11, 0) => IdentityPasid::Upstream,
        Some(_) if release.is_some_and(nvidia_smmu_patch) => IdentityPasid::NvidiaPatch,
        Some(_) => IdentityPasid::Missing,
    }
}

/// `6.8.0-N-nvidia` or `6.8.0-N-nvidia-64k` with N above 1010 ([`IdentityPasid::NvidiaPatch`]).
fn nvidia_smmu_patch(release: &str) -> bool {
    let Some((abi, flavour)) = release
        .strip_prefix("6.8.0-")
        .and_then(|r| r.split_once('-'))
    else {
        return false;
    };
    matches!(flavour, "nvidia" | "nvidia-64k") && abi.parse::<u32>().is_ok_and(|n| n > 1010)
}

/// ACS Request Redirect and Upstream Forwarding. nodewright-packages#122 ties the pre-6.11
/// failure to ACS: "no CUDA context can be created at all when ACS is enabled". How ACS enters:
/// the kernel enables a device's PASID only when every port above it has these two on
/// (drivers/pci/ats.c `pci_enable_pasid`: `pci_acs_path_enabled(pdev, NULL, PCI_ACS_RR |
/// PCI_ACS_UF)`), counting root and downstream ports (drivers/pci/pci.c `pci_acs_enabled`) and
/// a feature the port's capability lacks as on (`pci_acs_flags_enabled`); without a PASID there
/// is no ATS bind to fail. With an SMMU present the kernel turns ACS on at every port
/// (`pci_request_acs`, then `pci_std_enable_acs`: SrcValid, ReqRedir, CmpltRedir, UpstreamFwd,
/// 0x001d), and rdma_topo's values for a GB300 keep both on the GPU's path.
const PASID_ACS: u16 = (1 << 2) | (1 << 4);

/// What the ports above a GPU say of [`PASID_ACS`], with the evidence read.
enum PathAcs {
    On,
    Off(String),
    Unknown(String),
}

fn pasid_acs(inv: &Inventory, gpu: Bdf) -> (PathAcs, Vec<Evidence>) {
    use crate::parse::pci::{PortType, acs, acs_flags, extended_readable, path_functions};
    let Some(f) = inv.function(gpu) else {
        return (
            PathAcs::Unknown(format!("{gpu} is not in the inventory")),
            Vec::new(),
        );
    };
    let path = path_functions(&f.path);
    let mut evidence = Vec::new();
    for b in &path[..path.len().saturating_sub(1)] {
        let Some(d) = inv.function(*b).and_then(|p| p.detail.as_ref()) else {
            return (
                PathAcs::Unknown(format!("bridge {b} was not read")),
                evidence,
            );
        };
        let config = d.config_bytes();
        let readable = Evidence {
            path: d.config_path.clone(),
            value: format!("{} bytes readable", config.len()),
        };
        match d.port_type {
            Some(PortType::RootPort | PortType::SwitchDownstream) => {}
            Some(_) => continue,
            None => {
                evidence.push(readable);
                return (
                    PathAcs::Unknown(format!("{b}'s port type is unreadable")),
                    evidence,
                );
            }
        }
        if !extended_readable(config) {
            evidence.push(readable);
            return (
                PathAcs::Unknown(format!(
                    "{b}'s ACS is in its extended config space, which only root reads"
                )),
                evidence,
            );
        }
        let Some(a) = acs(config) else {
            evidence.push(Evidence {
                path: d.config_path.clone(),
                value: "no ACS extended capability (ID 0x000d)".into(),
            });
            return (PathAcs::Off(format!("{b} has no ACS")), evidence);
        };
        evidence.push(Evidence {
            path: format!("{} @{:#x}", d.config_path, a.control_offset()),
            value: format!("{:#06x} ({})", a.control, acs_flags(a.control)),
        });
        let need = PASID_ACS & a.capability;
        if a.control & need != need {
            return (
                PathAcs::Off(format!("{b}'s ACSCtl {:#06x}", a.control)),
                evidence,
            );
        }
    }
    (PathAcs::On, evidence)
}

/// Passthrough on the Arm SMMU: fine from 6.11 and on NVIDIA's patched linux-nvidia 6.8; before
/// that, a Grace superchip GPU with ACS on above it cannot create a CUDA context. The GPUs it is
/// about are the superchips' (GH200, GB200, GB300, joined to their Grace by NVLink-C2C), whose
/// memory nvidia_uvm maps through the SMMU's ATS: the GPUs of every report of the failure
/// (NV-Kernels#22 on a GH200, nodewright-packages#122 on GB300 trays).
fn smmu_passthrough(inv: &Inventory, members: &[Bdf], list: &str, origin: &str) -> Finding {
    use crate::inventory::GpuVendor;
    let kernel = inv.kernel.release.evidence();
    let release = inv.kernel.release.value().map(String::as_str);
    let rel = release.unwrap_or("of unknown release");
    let plain = format!("passthrough (identity) for {list}");
    let gpus: Vec<Bdf> = inv
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia && g.c2c.is_some() && members.contains(&g.bdf))
        .map(|g| g.bdf)
        .collect();
    let rule = identity_pasid(release, inv.kernel.version);
    let pass = |why: String| {
        Finding::pass(PASSTHROUGH, "IOMMU", format!("{plain}; {why}; {origin}"))
            .with([kernel.clone()])
    };
    match rule {
        IdentityPasid::Upstream => {
            return pass(format!(
                "kernel {rel} is 6.11 or later, whose Arm SMMU driver attaches a PASID to an identity domain, so CUDA runs in passthrough (NVIDIA nodewright-packages#122)"
            ));
        }
        IdentityPasid::NvidiaPatch => {
            return pass(format!(
                "kernel {rel} is NVIDIA's linux-nvidia 6.8 after 6.8.0-1010, taken to carry NVIDIA's patch that lets the Arm SMMU attach a PASID to an identity domain (NVIDIA NV-Kernels#22, #23)"
            ));
        }
        // No superchip GPU in passthrough: nothing of the failure applies.
        _ if gpus.is_empty() => {
            return Finding::pass(PASSTHROUGH, "IOMMU", format!("{plain}; {origin}"));
        }
        IdentityPasid::Unknown => {
            return Finding::unknown(
                SMMU_PASSTHROUGH_CUDA,
                "IOMMU",
                format!(
                    "{plain} on the Arm SMMU, and the kernel's release is unknown ({}): before 6.11, without NVIDIA's SMMU patch, a Grace superchip GPU with ACS on above it cannot create a CUDA context; {origin}",
                    inv.kernel.release.problem().unwrap_or_default()
                ),
            )
            .with([kernel])
            .fix(translate_fix(inv));
        }
        IdentityPasid::Missing => {}
    }
    let (mut on, mut off, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    let mut evidence = vec![kernel.clone()];
    for g in &gpus {
        let (state, seen) = pasid_acs(inv, *g);
        for e in seen {
            if !evidence.contains(&e) {
                evidence.push(e);
            }
        }
        match state {
            PathAcs::On => on.push(g.to_string()),
            PathAcs::Off(why) => off.push(format!("{g}: {why}")),
            PathAcs::Unknown(why) => unknown.push(format!("{g}: {why}")),
        }
    }
    let why = format!(
        "kernel {rel} is older than 6.11 and not NVIDIA's patched linux-nvidia 6.8, so its Arm SMMU driver cannot attach a PASID to an identity domain"
    );
    if !on.is_empty() {
        return Finding::fail(
            SMMU_PASSTHROUGH_CUDA,
            "IOMMU",
            format!(
                "{plain} on the Arm SMMU; {why}, and ACS (ReqRedir, UpstreamFwd) is on above GPU {}: nvidia_uvm's ATS bind fails and no CUDA context can be created, cudaMalloc reporting the GPUs busy (NVIDIA nodewright-packages#122, NV-Kernels#22); {origin}",
                on.join(", ")
            ),
        )
        .with(evidence)
        .fix(translate_fix(inv));
    }
    if !unknown.is_empty() {
        return Finding::unknown(
            SMMU_PASSTHROUGH_CUDA,
            "IOMMU",
            format!(
                "{plain} on the Arm SMMU; {why}, and whether ACS is on above the GPUs is unknown ({}): the kernel turns it on with an SMMU present, and with it on no CUDA context can be created (NVIDIA nodewright-packages#122); {origin}",
                unknown.join("; ")
            ),
        )
        .with(evidence)
        .fix(translate_fix(inv));
    }
    pass(format!(
        "{why}, but ACS is off above every Grace superchip GPU ({}), so the kernel enables no PASID for them and the failure NVIDIA reports with ACS on does not arise",
        off.join("; ")
    ))
    .with(evidence.into_iter().skip(1))
}

/// Back to translation on the Arm SMMU: `iommu.passthrough=0` on the kernel command line, the
/// passthrough word taken out (the last `iommu.passthrough` wins, and a word in
/// GRUB_CMDLINE_LINUX_DEFAULT would come after ours). Only the forms the kernel reads as true
/// (`kstrtobool`: 1, y, t, on, ...) are named, never a value copied off the node into the
/// script.
fn translate_fix(inv: &Inventory) -> Fix {
    const TRUE: [&str; 7] = ["1", "y", "Y", "yes", "t", "true", "on"];
    let mut remove = vec!["iommu.passthrough=1".to_owned()];
    if let Some(v) = inv
        .kernel
        .cmdline_param("iommu.passthrough")
        .and_then(|p| p.value.as_deref())
        .and_then(|v| TRUE.iter().find(|t| **t == v))
        .filter(|v| **v != "1")
    {
        remove.push(format!("iommu.passthrough={v}"));
    }
    let remove: Vec<&str> = remove.iter().map(String::as_str).collect();
    grub_fix(
        Fix::new(
            "Boot with iommu.passthrough=0: the Arm SMMU translating, as NVIDIA sets it on Grace for kernels before 6.11 (CUDA, GPUDirect RDMA and DMA-BUF work translated); or move to a kernel 6.11 or later (NVIDIA's linux-nvidia 6.8 carries the fix too) and keep passthrough",
            "Translation maps every device's DMA through the SMMU again (isolation back; some I/O-heavy loads are slower than in passthrough). Takes effect after a reboot.",
        ),
        &["iommu.passthrough=0"],
        &remove,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::kernel::KernelVersion;

    #[test]
    fn identity_pasid_by_release() {
        let v = |s: &str| crate::parse::kernel::kernel_version(s);
        let rule = |s: &str| identity_pasid(Some(s), v(s));
        // The threshold, upstream and NVIDIA's own 6.14 flavour.
        assert_eq!(rule("6.11.0-1002-nvidia-64k"), IdentityPasid::Upstream);
        assert_eq!(rule("6.14.0-1008-nvidia-64k"), IdentityPasid::Upstream);
        assert_eq!(rule("6.17.0-5-generic"), IdentityPasid::Upstream);
        // NV-Kernels#22's test kernel, before the patch; later linux-nvidia 6.8 builds.
        assert_eq!(rule("6.8.0-1010-nvidia-64k"), IdentityPasid::Missing);
        assert_eq!(rule("6.8.0-1011-nvidia-64k"), IdentityPasid::NvidiaPatch);
        assert_eq!(rule("6.8.0-1025-nvidia"), IdentityPasid::NvidiaPatch);
        // Ubuntu's generic kernels, another NVIDIA tree, an older NVIDIA flavour.
        assert_eq!(rule("6.8.0-60-generic-64k"), IdentityPasid::Missing);
        assert_eq!(rule("6.8.0-1005-nvidia-adv-64k"), IdentityPasid::Missing);
        assert_eq!(rule("6.2.0-1012-nvidia-64k"), IdentityPasid::Missing);
        assert_eq!(rule("6.10.14"), IdentityPasid::Missing);
        assert_eq!(identity_pasid(None, None), IdentityPasid::Unknown);
        assert_eq!(
            identity_pasid(Some("6.8.0-junk-nvidia"), Some(KernelVersion(6, 8, 0))),
            IdentityPasid::Missing
        );
    }
}
