//! `acs` on a Grace or Vera system (issue 38): every port rdma-core's `kernel-boot/rdma_topo`
//! sets ACS on, judged against the value rdma_topo computes for the port's role
//! (`NVCX_DMA_Complex.compute_acs`, `PCITopo.compute_acs`, `kernel_acs_isolated`) under its
//! compare mask (`combine_acs`: only the bits the value names are compared); then what
//! `rdma_topo check` checks beside ACS: the IOMMU groups of each complex and, on a NUMA-based
//! system, the ConnectX functions' ATS; and Data Direct (data_direct.rs). The fix is rdma_topo's
//! `write-grub-acs` (fix.rs), never ACS cleared: on these platforms NVIDIA wants isolation, with
//! exactly the holes of the DMA-based complex.

use super::{ABSENT, Read, UNKNOWN, control_evidence, read};
use crate::inventory::Inventory;
use crate::inventory::grace::{Complex, Grace, Port, Role, Type};
use crate::model::{Code, Evidence, Finding, Fix, Status};
use crate::parse::acs::{AcsEntry, AcsFlags};
use crate::parse::pci::{ACS_BITS, Bdf, EXT_CAP_ID_ATS, extended_readable, has_extended};

pub(super) const AS_REQUIRED: Code = Code {
    id: "acs-as-nvidia-requires",
    summary: "a Grace/Vera port's ACS Control holds the value rdma_topo computes for its role",
};

pub(super) const NOT_AS_REQUIRED: Code = Code {
    id: "acs-not-as-nvidia-requires",
    summary: "a Grace/Vera port's ACS Control differs from the value rdma_topo computes for its role",
};

pub(super) const UNRECOGNISED: Code = Code {
    id: "acs-complex-unrecognised",
    summary: "a Grace PCIe segment is not a complex rdma_topo recognises: its ports are not judged",
};

pub(super) const GROUPS_AS_REQUIRED: Code = Code {
    id: "grace-iommu-groups-as-required",
    summary: "the IOMMU groups of a Grace complex are as rdma_topo check requires",
};

pub(super) const DMA_GPU_GROUPS_DIFFER: Code = Code {
    id: "dma-gpu-iommu-groups-differ",
    summary: "a Data Direct DMA function and its GPU are in different IOMMU groups",
};

pub(super) const NUMA_GROUP_SHARED: Code = Code {
    id: "numa-iommu-group-shared",
    summary: "ConnectX NICs or GPUs of a NUMA-based complex share an IOMMU group",
};

pub(super) const GROUP_MISSING: Code = Code {
    id: "grace-iommu-group-missing",
    summary: "a function of a Grace complex has no IOMMU group",
};

pub(super) const ATS_OFF: Code = Code {
    id: "nic-ats-off",
    summary: "the ConnectX functions of a NUMA-based complex have no ATS capability, as rdma_topo requires",
};

pub(super) const ATS_ON: Code = Code {
    id: "nic-ats-on-grace",
    summary: "a ConnectX function of a NUMA-based complex has ATS enabled, which Grace does not support",
};

/// rdma_topo's value for a port, and why it is that.
pub(super) fn expected(p: &Port) -> (AcsFlags, &'static str) {
    let (s, why) = match p.role {
        // "Disable ACS SV on the root port, this forces the entire segment into one
        // iommu_group and avoids kernel bugs building groups for irregular ACS."
        Role::DmaRootPort { .. } => (
            "xx111x0",
            "SrcValid off puts the whole segment in one IOMMU group",
        ),
        Role::TowardDma { .. } => (
            "xx110x1",
            "ReqRedir off lets the DMA function's requests reach the GPU peer to peer across the ConnectX switch",
        ),
        Role::TowardGpu { .. } => (
            "xx101x1",
            "CmpltRedir off lets the GPU's completions reach the DMA function across the switch",
        ),
        // kernel_acs_isolated: a Vera root port has CmpltRedir read-only off.
        Role::Other if p.ty == Type::VeraRp => ("xx101x1", "kernel default"),
        Role::Other => ("xx111x1", "kernel default"),
    };
    (
        AcsFlags::parse(s).unwrap_or(AcsFlags { set: 0, clear: 0 }),
        why,
    )
}

/// What the port is, for a finding.
fn role(p: &Port) -> String {
    match p.role {
        Role::DmaRootPort { dma, gpu } => format!(
            "Grace root port above the DMA-based complex of DMA function {dma} and GPU {gpu}"
        ),
        Role::TowardDma { dma, gpu } => format!(
            "ConnectX switch downstream port toward the Data Direct DMA function {dma} (GPU {gpu}'s complex)"
        ),
        Role::TowardGpu { dma, gpu } => format!(
            "ConnectX switch downstream port toward GPU {gpu} (DMA function {dma}'s complex)"
        ),
        Role::Other => kind_of(p).0.to_owned(),
    }
}

/// The port's role without its complex, for grouping the ports that pass: (one, many).
fn kind_of(p: &Port) -> (&'static str, &'static str) {
    match (p.role, p.ty) {
        (Role::DmaRootPort { .. }, _) => (
            "Grace root port above a DMA-based complex",
            "Grace root ports above DMA-based complexes",
        ),
        (Role::TowardDma { .. }, _) => (
            "ConnectX switch downstream port toward a Data Direct DMA function",
            "ConnectX switch downstream ports toward Data Direct DMA functions",
        ),
        (Role::TowardGpu { .. }, _) => (
            "ConnectX switch downstream port toward a GPU",
            "ConnectX switch downstream ports toward GPUs",
        ),
        (_, Type::GraceRp) => ("Grace root port", "Grace root ports"),
        (_, Type::VeraRp) => ("Vera root port", "Vera root ports"),
        (_, Type::Bf3Switch) => ("BlueField-3 switch port", "BlueField-3 switch ports"),
        _ => ("ConnectX switch port", "ConnectX switch ports"),
    }
}

/// The bits of `control` that differ from what `want` forces: `ReqRedir on`.
fn differing(control: u16, want: AcsFlags) -> String {
    (0..7)
        .filter(|b| want.mask() & (1 << b) != 0 && (control ^ want.set) & (1 << b) != 0)
        .map(|b| {
            format!(
                "{} {}",
                ACS_BITS[b],
                if control & (1 << b) != 0 { "on" } else { "off" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The `pci=config_acs=` the kernel booted with: the last `pci=` that has one wins (each
/// `pci_setup` call replaces the kernel's `config_acs_param`).
pub(super) fn cmdline_config_acs(inv: &Inventory) -> Option<Vec<AcsEntry>> {
    let params = inv.kernel.cmdline.value()?;
    params
        .iter()
        .filter(|p| p.key == "pci")
        .filter_map(|p| crate::parse::acs::config_acs_option(p.value.as_deref()?))
        .next_back()
        .map(crate::parse::acs::config_acs)
}

/// What the kernel command line says of a port that fails, when it says something.
fn cmdline_note(inv: &Inventory, p: &Port, want: AcsFlags, default: bool) -> Option<String> {
    let f = inv.function(p.bdf)?;
    let Some(entries) = cmdline_config_acs(inv) else {
        return (!default).then(|| "the kernel command line has no pci=config_acs".to_owned());
    };
    let Some(e) = entries.iter().find(|e| e.names(p.bdf, f.vendor, f.device)) else {
        return (!default).then(|| "the kernel's pci=config_acs has no entry for it".to_owned());
    };
    Some(match e.flags {
        // The entry forces at least rdma_topo's bits, the same way.
        Some(flags) if want.mask() & !flags.mask() == 0 && flags.set & want.mask() == want.set => {
            format!(
                "the kernel command line asks the same ({}), yet the port does not hold it: {}",
                e.text,
                super::fix::support(inv, entries.len()).why_not_applied()
            )
        }
        Some(_) => format!(
            "the kernel command line asks {} for it, not rdma_topo's {want}",
            e.text
        ),
        None => format!(
            "the kernel's pci=config_acs entry {} has flags the kernel refuses (\"Invalid ACS flags\")",
            e.text
        ),
    })
}

/// A port that fails, for the fix's by-hand `setpci` lines: its address, rdma_topo's value and
/// the value read.
pub(super) struct Failing {
    pub bdf: Bdf,
    pub want: AcsFlags,
    pub control: u16,
}

/// Whether `b` is below (or is) the root port of a segment gdrdoctor does not judge.
pub(super) fn in_segment(inv: &Inventory, b: Bdf, segment: Bdf) -> bool {
    b == segment
        || inv
            .function(b)
            .is_some_and(|f| crate::parse::pci::path_functions(&f.path).contains(&segment))
}

/// Every finding of `acs` on a Grace or Vera system.
pub(super) fn run(inv: &Inventory, g: &Grace) -> Vec<Finding> {
    let (mut out, segments) = unrecognised(inv, g);
    let ports = ports(inv, g, &segments);
    out.extend(ports.cannot);
    out.extend(passes(g, ports.passed, ports.absent));
    let (mut judged, group_fails) = groups(inv, g);
    // What failed, for Data Direct: a complex that does not route as NVIDIA requires yet.
    let failed: Vec<Bdf> = ports
        .failing
        .iter()
        .map(|(_, f)| f.bdf)
        .chain(
            group_fails
                .iter()
                .filter_map(|f| Bdf::parse(f.subject.strip_prefix("DMA function ")?)),
        )
        .collect();
    let fix = super::fix::config_acs(inv, g);
    for (f, port) in ports.failing {
        out.push(f.fix(super::fix::with_setpci(fix.clone(), &port)));
    }
    for f in group_fails {
        out.push(f.fix(fix.clone()));
    }
    out.append(&mut judged);
    out.extend(ats(inv, g));
    out.extend(super::data_direct::run(inv, g, &failed));
    out
}

/// The complexes rdma_topo would refuse, and the root ports of their segments, whose ports are
/// then not judged.
fn unrecognised(inv: &Inventory, g: &Grace) -> (Vec<Finding>, Vec<Bdf>) {
    let mut out = Vec::new();
    let mut segments = Vec::new();
    for c in &g.complexes {
        let Complex::Unrecognised {
            subject,
            why,
            segment,
        } = c
        else {
            continue;
        };
        segments.extend(*segment);
        let skipped: Vec<String> = segment
            .map(|s| {
                g.ports
                    .iter()
                    .filter(|p| in_segment(inv, p.bdf, s))
                    .map(|p| p.bdf.to_string())
                    .collect()
            })
            .unwrap_or_default();
        let tail = if skipped.is_empty() {
            String::new()
        } else {
            format!(
                "; its ports ({}) are not judged: their values depend on the complex",
                skipped.join(", ")
            )
        };
        out.push(
            Finding::unknown(
                UNRECOGNISED,
                subject.clone(),
                format!(
                    "not one of rdma_topo's {} complexes: {why}{tail}",
                    g.kind.name()
                ),
            )
            .with([g.signature.clone()]),
        );
    }
    (out, segments)
}

/// The ports that pass, by role and value: (role one, many), why, the value, each port.
type Group = (
    (&'static str, &'static str),
    &'static str,
    AcsFlags,
    Vec<(Bdf, u16, Evidence)>,
);

/// Every port judged.
struct Ports {
    /// Unknown (unreadable, or a role port without ACS).
    cannot: Vec<Finding>,
    passed: Vec<Group>,
    /// Ports with no ACS capability, which rdma_topo skips.
    absent: Vec<(Bdf, Evidence)>,
    /// The failures, still without their fix (one for all).
    failing: Vec<(Finding, Failing)>,
}

/// Each port against rdma_topo's value for its role (outside the segments not judged).
fn ports(inv: &Inventory, g: &Grace, segments: &[Bdf]) -> Ports {
    let mut j = Ports {
        cannot: Vec::new(),
        passed: Vec::new(),
        absent: Vec::new(),
        failing: Vec::new(),
    };
    for p in &g.ports {
        if segments.iter().any(|s| in_segment(inv, p.bdf, *s)) {
            continue;
        }
        let (want, why) = expected(p);
        let default = p.role == Role::Other;
        let subject = format!("bridge {}", p.bdf);
        let what = role(p);
        let (a, d) = match read(inv, p.bdf, &subject, &what) {
            Read::Acs(a, d) => (a, d),
            Read::Cannot(f) => {
                j.cannot.push(f);
                continue;
            }
            Read::Absent(d) if default => {
                j.absent.push((
                    p.bdf,
                    Evidence {
                        path: d.config_path.clone(),
                        value: "no ACS extended capability (ID 0x000d)".into(),
                    },
                ));
                continue;
            }
            Read::Absent(d) => {
                // rdma_topo asserts the capability on these three ports.
                j.cannot.push(
                    Finding::unknown(
                        UNRECOGNISED,
                        subject,
                        format!("{what}: no ACS capability, where rdma_topo's DMA-based complex sets {want} on it"),
                    )
                    .evidence(d.config_path.clone(), "no ACS extended capability (ID 0x000d)"),
                );
                continue;
            }
        };
        let (path, value) = control_evidence(d, &a);
        let evidence = Evidence { path, value };
        if want.holds(a.control) {
            let label = kind_of(p);
            match j
                .passed
                .iter_mut()
                .find(|(l, w, _, _)| *l == label && *w == why)
            {
                Some(group) => group.3.push((p.bdf, a.control, evidence)),
                None => j
                    .passed
                    .push((label, why, want, vec![(p.bdf, a.control, evidence)])),
            }
            continue;
        }
        let note = cmdline_note(inv, p, want, default)
            .map(|n| format!("; {n}"))
            .unwrap_or_default();
        let finding = Finding::fail(
            NOT_AS_REQUIRED,
            subject,
            format!(
                "{what}: ACSCtl {:#06x} has {}, where rdma_topo expects {want} ({:#06x} under mask {:#06x}; {why}){note}",
                a.control,
                differing(a.control, want),
                want.set,
                want.mask(),
            ),
        )
        .with([evidence])
        .with((!note.is_empty()).then(|| inv.kernel.cmdline.evidence()));
        j.failing.push((
            finding,
            Failing {
                bdf: p.bdf,
                want,
                control: a.control,
            },
        ));
    }
    j
}

/// One pass per role and value, and one for the ports without ACS.
fn passes(g: &Grace, passed: Vec<Group>, absent: Vec<(Bdf, Evidence)>) -> Vec<Finding> {
    let mut out = Vec::new();
    let subject = format!("{} ports", g.kind.name());
    for (label, why, want, ports) in passed {
        let mut values: Vec<u16> = ports.iter().map(|(_, v, _)| *v).collect();
        values.sort_unstable();
        values.dedup();
        let values: Vec<String> = values.iter().map(|v| format!("{v:#06x}")).collect();
        let names: Vec<String> = ports.iter().map(|(b, _, _)| b.to_string()).collect();
        out.push(
            Finding::pass(
                AS_REQUIRED,
                subject.clone(),
                format!(
                    "{} {} ({}): ACSCtl {}, as rdma_topo expects {want} ({why})",
                    names.len(),
                    if names.len() == 1 { label.0 } else { label.1 },
                    names.join(", "),
                    values.join(", "),
                ),
            )
            .with(ports.into_iter().map(|(_, _, e)| e)),
        );
    }
    if !absent.is_empty() {
        let names: Vec<String> = absent.iter().map(|(b, _)| b.to_string()).collect();
        out.push(
            Finding::pass(
                ABSENT,
                subject,
                format!(
                    "{} port{} without an ACS capability ({}): rdma_topo sets nothing on them",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                ),
            )
            .with(absent.into_iter().map(|(_, e)| e)),
        );
    }
    out
}

fn group_of(inv: &Inventory, b: Bdf) -> (Option<u32>, Evidence) {
    let f = inv.function(b);
    let group = f
        .and_then(|f| f.detail.as_ref())
        .and_then(|d| d.iommu_group);
    let path = f.map_or_else(
        || format!("{}/{b}", crate::inventory::pci::PCI_DEVICES),
        |f| format!("{}/iommu_group", f.path),
    );
    let value = match group {
        Some(n) => format!("group {n}"),
        None => "<no iommu_group link>".to_owned(),
    };
    (group, Evidence { path, value })
}

/// The fix where a function has no IOMMU group at all: rdma_topo fails it, and the groups form
/// at boot from the SMMU's tables.
fn smmu_fix() -> Fix {
    Fix::new(
        "Boot with the SMMU on: rdma_topo check needs the IOMMU groups (the NVIDIA driver's GPUDirect RDMA topology check reads them); iommu.passthrough=1 keeps them with untranslated DMA",
        "Read-only commands; the SMMU is a firmware and kernel setting, changed at a reboot.",
    )
    .manual("ls /sys/class/iommu/ /sys/kernel/iommu_groups/ | head")
    .manual("# check the firmware's SMMU setting and that the kernel command line does not turn the SMMU off")
}

/// rdma_topo check's IOMMU group checks: the DMA function and its GPU in one group
/// (`NVCX_DMA_Complex.check`: "Correct iommu_groups are required to avoid
/// NVreg_GrdmaPciTopoCheckOverride"); every NIC function and GPU of a NUMA node in a group of its
/// own (`NVCX_NUMA_Complex.__check_iommu_group`). The findings complete as they are, and the
/// fails that take the ACS fix (the groups form at boot from the ports' ACS).
fn groups(inv: &Inventory, g: &Grace) -> (Vec<Finding>, Vec<Finding>) {
    let (mut pass, mut fail) = (Vec::new(), Vec::new());
    for c in &g.complexes {
        match c {
            Complex::Dma(d) => {
                let (gd, ed) = group_of(inv, d.dma);
                let (gg, eg) = group_of(inv, d.gpu);
                let subject = format!("DMA function {}", d.dma);
                match (gd, gg) {
                    (Some(a), Some(b)) if a == b => pass.push(
                        Finding::pass(
                            GROUPS_AS_REQUIRED,
                            subject,
                            format!("with its GPU {} in IOMMU group {a}, as rdma_topo check requires (the NVIDIA driver's GPUDirect RDMA topology check then needs no NVreg_GrdmaPciTopoCheckOverride)", d.gpu),
                        )
                        .with([ed, eg]),
                    ),
                    (Some(a), Some(b)) => fail.push(
                        Finding::fail(
                            DMA_GPU_GROUPS_DIFFER,
                            subject,
                            format!("in IOMMU group {a} and its GPU {} in group {b}: rdma_topo check wants one group (\"Correct iommu_groups are required to avoid NVreg_GrdmaPciTopoCheckOverride\"); the segment becomes one group when its root port boots with SrcValid off", d.gpu),
                        )
                        .with([ed, eg]),
                    ),
                    _ => pass.push(missing(&subject, &[ed, eg])),
                }
            }
            Complex::Numa(n) => {
                let subject = format!("NUMA node {}", n.node);
                let all: Vec<(Bdf, Option<u32>, Evidence)> = n
                    .nics
                    .iter()
                    .chain(&n.gpus)
                    .map(|b| {
                        let (g, e) = group_of(inv, *b);
                        (*b, g, e)
                    })
                    .collect();
                let evidence: Vec<Evidence> = all.iter().map(|(_, _, e)| e.clone()).collect();
                if all.iter().any(|(_, g, _)| g.is_none()) {
                    pass.push(missing(&subject, &evidence));
                    continue;
                }
                let mut shared: Vec<String> = Vec::new();
                for (i, (b, g, _)) in all.iter().enumerate() {
                    let with: Vec<String> = all[i + 1..]
                        .iter()
                        .filter(|(_, h, _)| h == g)
                        .map(|(c, _, _)| c.to_string())
                        .collect();
                    if !with.is_empty() && !shared.iter().any(|s| s.contains(&b.to_string())) {
                        shared.push(format!(
                            "{b} with {} (group {})",
                            with.join(", "),
                            g.unwrap_or_default()
                        ));
                    }
                }
                let who = format!(
                    "ConnectX NIC functions {} and GPUs {}",
                    list(&n.nics),
                    list(&n.gpus)
                );
                if shared.is_empty() {
                    pass.push(
                        Finding::pass(
                            GROUPS_AS_REQUIRED,
                            subject,
                            format!("{who}: each in an IOMMU group of its own, as rdma_topo check requires of a NUMA-based complex"),
                        )
                        .with(evidence),
                    );
                } else {
                    fail.push(
                        Finding::fail(
                            NUMA_GROUP_SHARED,
                            subject,
                            format!("{who}: {} share an IOMMU group, where rdma_topo check wants each in its own (\"Multiple devices share the same kernel iommu_group\"): a port above them booted without the kernel's ACS isolation", shared.join("; ")),
                        )
                        .with(evidence),
                    );
                }
            }
            Complex::Unrecognised { .. } => {}
        }
    }
    (pass, fail)
}

/// A group missing: a fail with its own fix (added to the passes' list, which carries its fix).
fn missing(subject: &str, evidence: &[Evidence]) -> Finding {
    let none: Vec<&str> = evidence
        .iter()
        .filter(|e| e.value.starts_with('<'))
        .map(|e| e.path.trim_end_matches("/iommu_group"))
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .collect();
    Finding::fail(
        GROUP_MISSING,
        subject,
        format!(
            "no IOMMU group for {}: rdma_topo check fails a complex without them (\"Kernel iommu_group missing\"), and the NVIDIA driver's GPUDirect RDMA topology check reads them",
            none.join(", ")
        ),
    )
    .with(evidence.iter().cloned())
    .fix(smmu_fix())
}

fn list(b: &[Bdf]) -> String {
    b.iter().map(Bdf::to_string).collect::<Vec<_>>().join(", ")
}

/// rdma_topo check on a NUMA-based system: no ATS capability on any ConnectX NIC function
/// ("ATS capability for cx_nic ... is available" fails). Grace's root ports do not support ATS
/// (NVIDIA's Grace Blackwell ConnectX-8 GPUDirect RDMA guide).
fn ats(inv: &Inventory, g: &Grace) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut off: Vec<(Bdf, Evidence)> = Vec::new();
    for c in &g.complexes {
        let Complex::Numa(n) = c else { continue };
        for b in &n.nics {
            let Some(d) = inv.function(*b).and_then(|f| f.detail.as_ref()) else {
                continue;
            };
            let config = d.config_bytes();
            let name = nic_name(inv, *b);
            if !extended_readable(config) {
                out.push(
                    Finding::unknown(
                        UNKNOWN,
                        name,
                        "ATS capability unknown: needs root (this process could not read the extended config space)",
                    )
                    .evidence(d.config_path.clone(), format!("{} bytes readable", config.len())),
                );
            } else if has_extended(config, EXT_CAP_ID_ATS) {
                out.push(
                    Finding::fail(
                        ATS_ON,
                        name.clone(),
                        "has an ATS capability (ATS enabled in its firmware), which rdma_topo check fails on a NUMA-based complex: the Grace CPU does not support PCIe ATS",
                    )
                    .evidence(d.config_path.clone(), "ATS extended capability (ID 0x000f) present")
                    .fix(
                        Fix::new(
                            format!("Turn ATS off in the NIC's firmware (mlxconfig ATS_ENABLED=false), then reset the firmware or reboot: {name}"),
                            "The firmware change takes effect only after a firmware reset or a cold reboot; the NIC's links go down meanwhile.",
                        )
                        .disruptive(format!("mlxconfig -y -d {} set ATS_ENABLED=false", super::super::sh(&b.to_string())))
                        .disruptive(format!("mlxfwreset -y -d {} reset", super::super::sh(&b.to_string()))),
                    ),
                );
            } else {
                off.push((
                    *b,
                    Evidence {
                        path: d.config_path.clone(),
                        value: "no ATS extended capability (ID 0x000f)".into(),
                    },
                ));
            }
        }
    }
    if !off.is_empty() {
        let names: Vec<String> = off.iter().map(|(b, _)| nic_name(inv, *b)).collect();
        out.push(
            Finding::pass(
                ATS_OFF,
                "ConnectX NIC functions",
                format!(
                    "{}: no ATS capability, as rdma_topo check requires on a NUMA-based complex (Grace has no ATS)",
                    names.join(", ")
                ),
            )
            .with(off.into_iter().map(|(_, e)| e)),
        );
    }
    out
}

/// `mlx5_0 (0000:03:00.0)`, or the address alone for a function without an RDMA device.
pub(super) fn nic_name(inv: &Inventory, b: Bdf) -> String {
    match inv.rdma.iter().find(|d| d.pci == Some(b)) {
        Some(d) => format!("{} ({b})", d.name),
        None => b.to_string(),
    }
}

/// The compact report's line: what passed, counted.
pub(super) fn summary(g: &Grace, passed: &[&Finding]) -> String {
    let count = |code: &str| passed.iter().filter(|f| f.code == code).count();
    let ports: usize = passed
        .iter()
        .filter(|f| f.code == AS_REQUIRED.id && f.status == Status::Pass)
        .map(|f| f.evidence.len())
        .sum();
    let mut parts = Vec::new();
    if ports > 0 {
        parts.push(format!("{ports} ports at rdma_topo's ACS values"));
    }
    let groups = count(GROUPS_AS_REQUIRED.id);
    if groups > 0 {
        parts.push(format!(
            "IOMMU groups as rdma_topo check requires ({groups} complex{})",
            if groups == 1 { "" } else { "es" }
        ));
    }
    if count(ATS_OFF.id) > 0 {
        parts.push("no ATS on the ConnectX functions".into());
    }
    let dd = count(super::data_direct::FOUND.id);
    if dd > 0 {
        parts.push(format!(
            "{dd} Data Direct DMA function{} paired",
            if dd == 1 { "" } else { "s" }
        ));
    }
    if parts.is_empty() {
        return crate::checks::summarize(passed);
    }
    format!("{} (rdma_topo): {}", g.kind.name(), parts.join("; "))
}
