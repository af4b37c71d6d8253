//! `pcie-placement`: each GPU has a NIC close enough on the PCIe tree for NCCL to use
//! GPUDirect RDMA, and GPUs do not crowd onto one NIC while a usable one sits idle.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::Inventory;
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::nccl::effective::{self, Basis, Nearest, Policy, PolicySource, Verdict};
use crate::nccl::params::GdrLimit;
use crate::placement::{Level, route};
use std::collections::BTreeMap;

mod c2c;
mod vm;

use c2c::judge_c2c;
use vm::vm_fix;

pub struct PciePlacement;

const GPU_NIC_NEAR: Code = Code {
    id: "gpu-nic-near",
    summary: "the GPU's nearest NIC is within the GDR level policy (NCCL_NET_GDR_LEVEL)",
};

const GPU_NIC_TOO_FAR: Code = Code {
    id: "gpu-nic-too-far",
    summary: "the GPU's nearest NIC is beyond the GDR level policy: NCCL runs it without GPUDirect RDMA",
};

const GPU_NIC_C2C: Code = Code {
    id: "gpu-nic-c2c",
    summary: "the GPU reaches its nearest NICs over NVLink-C2C (Grace), and NCCL of the node's release uses GPUDirect RDMA there",
};

const GPU_NIC_C2C_NO_GDR: Code = Code {
    id: "gpu-nic-c2c-no-gdr",
    summary: "the GPU reaches its nearest NICs over NVLink-C2C, and NCCL of the node's release, with its settings, does not use GPUDirect RDMA there",
};

const GPU_NIC_C2C_RELEASE_UNKNOWN: Code = Code {
    id: "gpu-nic-c2c-release-unknown",
    summary: "the GPU reaches its nearest NICs over NVLink-C2C, where NCCL's releases decide differently, and the node's NCCL release is not known",
};

const GPU_NIC_CROWDED: Code = Code {
    id: "gpu-nic-crowded",
    summary: "several GPUs share one nearest NIC while another NIC within the policy is no GPU's nearest",
};

const GPU_NIC_NARROW: Code = Code {
    id: "gpu-nic-narrow",
    summary: "the only NICs NCCL has for the GPU are narrow functions (a PCIe link or port far below the node's rails): management or storage, not a rail",
};

const NIC_NARROW: Code = Code {
    id: "nic-narrow",
    summary: "a NIC whose PCIe link or port carries under a quarter of the node's widest: a management or storage function, left out of the GPU-NIC pairing",
};

const PLACEMENT_UNKNOWN: Code = Code {
    id: "placement-unknown",
    summary: "a GPU's or NIC's place on the PCIe tree could not be worked out",
};

const PLACEMENT_NO_PAIR: Code = Code {
    id: "placement-no-pair",
    summary: "no GPU or no RDMA NIC, so no GPU-NIC placement to judge",
};

const CODES: &[Code] = &[
    GPU_NIC_NEAR,
    GPU_NIC_TOO_FAR,
    GPU_NIC_C2C,
    GPU_NIC_C2C_NO_GDR,
    GPU_NIC_C2C_RELEASE_UNKNOWN,
    GPU_NIC_CROWDED,
    GPU_NIC_NARROW,
    NIC_NARROW,
    PLACEMENT_UNKNOWN,
    PLACEMENT_NO_PAIR,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(GPU_NIC_NEAR, Action::None),
    Rule::new(GPU_NIC_TOO_FAR, Action::ReplacePart).in_vm(Action::Provider),
    Rule::new(GPU_NIC_C2C, Action::None),
    Rule::new(GPU_NIC_C2C_NO_GDR, Action::FixInPlace),
    Rule::new(GPU_NIC_C2C_RELEASE_UNKNOWN, Action::None),
    Rule::new(GPU_NIC_CROWDED, Action::ReplacePart).in_vm(Action::Provider),
    Rule::new(GPU_NIC_NARROW, Action::ReplacePart).in_vm(Action::Provider),
    Rule::new(NIC_NARROW, Action::None),
    Rule::new(PLACEMENT_UNKNOWN, Action::None),
    Rule::new(PLACEMENT_NO_PAIR, Action::None),
];

const META: Meta = Meta {
    id: "pcie-placement",
    title: "Each GPU has a NIC within NCCL's GDR distance",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/pcie-placement/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for PciePlacement {
    fn meta(&self) -> &'static Meta {
        &META
    }

    /// The placement in a line ([`PciePlacement::placed`]), and the node's narrow functions.
    fn summary(&self, cx: &Context, passed: &[&Finding]) -> String {
        let line = self.placed(cx, passed);
        // The narrow functions are named even on a one-line report: they are what a reader
        // would otherwise take for a GPU's rail.
        let narrow: Vec<&str> = crate::placement::narrow(cx.inv)
            .iter()
            .map(|(i, ..)| cx.inv.rdma[*i].name.as_str())
            .collect();
        if narrow.is_empty() || line.is_empty() {
            line
        } else {
            format!("{line}; narrow functions, not rails: {}", narrow.join(", "))
        }
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        self.findings(cx)
    }
}

impl PciePlacement {
    /// `every GPU has a NIC at PIX`, or within the worst level with the count per level.
    fn placed(&self, cx: &Context, passed: &[&Finding]) -> String {
        let j = effective::judge(cx.inv, cx.config);
        let basis = j.basis;
        // A GPU that reaches its NICs over NVLink-C2C is counted as such, not by its sysfs
        // level (NODE on a Grace tray, which NCCL does not use there).
        let near: Vec<(bool, Level)> = j
            .gpus
            .iter()
            .filter_map(|g| g.nearest.as_ref())
            .filter(|n| {
                passed.iter().any(|f| {
                    f.subject.starts_with(&format!("GPU {} ", n.gpu))
                        || f.subject == format!("GPU {}", n.gpu)
                })
            })
            .map(|n| {
                let c2c = n.nics.first().is_some_and(|c| c.via == effective::Via::C2c);
                (c2c, n.level)
            })
            .collect();
        if near.is_empty() {
            return super::summarize(passed);
        }
        let who = if near.len() == cx.inv.gpus.len() {
            "every GPU has".to_owned()
        } else {
            format!("{} of {} GPUs have", near.len(), cx.inv.gpus.len())
        };
        let c2c = near.iter().filter(|(c, _)| *c).count();
        let release = j.release.map(|v| format!(", NCCL {v}")).unwrap_or_default();
        if c2c == near.len() {
            return format!("{who} its NICs over NVLink-C2C: GPUDirect RDMA{release}");
        }
        let pcie: Vec<Level> = near.iter().filter(|(c, _)| !*c).map(|(_, l)| *l).collect();
        let (Some(best), Some(worst)) = (pcie.iter().min(), pcie.iter().max()) else {
            return super::summarize(passed);
        };
        let also = if c2c > 0 {
            format!("; {c2c} over NVLink-C2C")
        } else {
            String::new()
        };
        let file = match basis {
            Basis::File(t) => format!(" in the topology file NCCL reads ({})", t.path),
            Basis::Sysfs => String::new(),
        };
        if best == worst {
            format!("{who} a NIC at {best}{file}{also}")
        } else {
            let mut counts: BTreeMap<Level, usize> = BTreeMap::new();
            for l in &pcie {
                *counts.entry(*l).or_default() += 1;
            }
            let each: Vec<String> = counts.iter().map(|(l, n)| format!("{l}: {n}")).collect();
            format!(
                "{who} a NIC within {worst}{file} ({}){also}",
                each.join(", ")
            )
        }
    }

    fn findings(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let j = effective::judge(inv, cx.config);
        let (policy, used, basis) = (&j.policy, &j.nics, j.basis);
        if inv.gpus.is_empty() || used.is_empty() {
            let (what, prerequisite) = if inv.gpus.is_empty() {
                ("no GPU (see gpu-driver)".to_owned(), "gpu-driver")
            } else if inv.rdma.is_empty() {
                ("no RDMA device (see rdma-link)".to_owned(), "rdma-link")
            } else if inv.rdma.iter().all(|d| d.is_efa()) {
                (
                    format!(
                        "the node's {} RDMA devices are EFA, which NCCL reaches only through the aws-ofi-nccl plugin, and NCCL loads no such plugin here (see nccl-config)",
                        inv.rdma.len()
                    ),
                    "nccl-config",
                )
            } else {
                (
                    format!(
                        "NCCL_IB_HCA={} selects none of the {} RDMA devices (see nccl-config)",
                        inv.nccl.value("NCCL_IB_HCA").unwrap_or_default(),
                        inv.rdma.len()
                    ),
                    "nccl-config",
                )
            };
            return vec![
                Finding::skip(PLACEMENT_NO_PAIR, "node", what)
                    .evidence(
                        crate::inventory::rdma::CLASS_INFINIBAND,
                        format!("{} GPUs, {} RDMA devices", inv.gpus.len(), inv.rdma.len()),
                    )
                    .prerequisites(&[prerequisite]),
            ];
        }
        let mut out = Vec::new();
        let narrow = crate::placement::narrow(inv);
        for d in used
            .iter()
            .map(|&i| &inv.rdma[i])
            .filter(|d| d.pci.is_none())
        {
            out.push(
                Finding::unknown(PLACEMENT_UNKNOWN, d.name.clone(), format!("{} has no PCI function gdrdoctor could find, so its distance to the GPUs is unknown", d.name))
                    .evidence(d.class_path(), "<no device link, no netdev with a PCI function>"),
            );
        }
        for g in &j.gpus {
            let gpu = &g.gpu;
            let subject = inv
                .gpus
                .iter()
                .find(|x| x.bdf == *gpu)
                .map(|x| x.subject())
                .unwrap_or_default();
            let Some(n) = &g.nearest else {
                out.push(
                    Finding::unknown(
                        PLACEMENT_UNKNOWN,
                        subject,
                        "no NIC with a known route to this GPU",
                    )
                    .evidence(
                        inv.function(*gpu)
                            .map(|f| f.path.clone())
                            .unwrap_or_default(),
                        "<route unknown>",
                    ),
                );
                continue;
            };
            if let Some(f) = narrow_nics(inv, &subject, n, &narrow) {
                out.push(f);
                continue;
            }
            if let Some(decision) = &g.c2c {
                out.push(judge_c2c(inv, &subject, n, decision, &j, basis));
                continue;
            }
            out.push(judge(inv, &subject, n, g.verdict, basis, policy));
        }
        out.extend(
            narrow
                .iter()
                .map(|(i, bw, widest)| named_narrow(inv, *i, bw, *widest)),
        );
        if matches!(basis, Basis::Sysfs) {
            if let GdrLimit::Upto(limit) = policy.limit {
                out.extend(crowding(
                    inv,
                    &crate::placement::nearest_among(inv, used),
                    used,
                    limit,
                ));
            }
        }
        out
    }
}

/// A narrow NIC, named as what it is: not a rail.
fn named_narrow(
    inv: &Inventory,
    i: usize,
    bw: &crate::placement::NicBandwidth,
    widest: f64,
) -> Finding {
    let d = &inv.rdma[i];
    let f = d.pci.and_then(|b| inv.function(b));
    Finding::skip(
        NIC_NARROW,
        d.name.clone(),
        format!(
            "a narrow function ({}), under a quarter of the node's widest NIC ({widest:.1} GB/s): a management or storage function, not a rail; left out of the GPU-NIC pairing and of NCCL_IB_HCA",
            bw.describe()
        ),
    )
    .with(f.into_iter().flat_map(|f| {
        let link = f.detail.as_ref().map(|dt| &dt.link);
        link.map(|l| [l.max_speed.evidence(), l.max_width.evidence()])
            .into_iter()
            .flatten()
    }))
    .with(d.ports.first().map(|p| p.rate.evidence()))
}

/// A GPU whose NICs, as NCCL ranks them, are all narrow functions: NCCL has nothing wider for
/// it (issue 29: a p6-b200's ConnectX-7 management functions beside GPU 4 and 5).
fn narrow_nics(
    inv: &Inventory,
    subject: &str,
    n: &Nearest,
    narrow: &[(usize, crate::placement::NicBandwidth, f64)],
) -> Option<Finding> {
    let bws: Vec<&(usize, crate::placement::NicBandwidth, f64)> = n
        .nics
        .iter()
        .map(|c| narrow.iter().find(|(i, ..)| *i == c.nic))
        .collect::<Option<Vec<_>>>()?;
    let widest = bws.first()?.2;
    let described: Vec<String> = bws
        .iter()
        .map(|(i, b, _)| format!("{} ({})", inv.rdma[*i].name, b.describe()))
        .collect();
    Some(
        Finding::warn(
            GPU_NIC_NARROW,
            subject.to_owned(),
            format!(
                "the only NICs NCCL has for this GPU are narrow functions, {} at {}: under a quarter of the node's widest NIC ({widest:.1} GB/s), a management or storage function, not a rail; this GPU's network traffic is capped at their bandwidth",
                described.join(", "),
                n.level
            ),
        )
        .with(evidence(inv, n, crate::nccl::effective::Basis::Sysfs))
        .fix(
            Fix::new(
                "Give NCCL this GPU's rail: the node's wide NICs are not among those NCCL uses (the network plugin, NCCL_IB_HCA: see nccl-config), or the rail is missing",
                "Read-only commands.",
            )
            .manual("gdrdoctor topo   # every GPU and NIC, with the levels")
            .manual("gdrdoctor nccl   # the settings NCCL needs here"),
        ),
    )
}

fn nic_list(inv: &Inventory, n: &Nearest) -> String {
    n.nics
        .iter()
        .map(|c| inv.rdma[c.nic].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn evidence(inv: &Inventory, n: &Nearest, basis: Basis) -> Vec<Evidence> {
    let mut ev = Vec::new();
    let numa = |b| {
        inv.function(b)
            .and_then(|f| f.detail.as_ref())
            .map(|d| d.numa_node.shown())
            .unwrap_or_else(|| "?".into())
    };
    if let Basis::File(t) = basis {
        let at = |line: Option<usize>| match line {
            Some(l) => format!("line {l}"),
            None => "not in the file: placed from sysfs".to_owned(),
        };
        if let Some(c) = n.nics.first() {
            if let Some((g, _)) = c.lines {
                ev.push(Evidence {
                    path: t.path.clone(),
                    value: format!("{}: GPU {}", at(g), n.gpu),
                });
            }
        }
        for c in &n.nics {
            if let Some((_, l)) = c.lines {
                let d = &inv.rdma[c.nic];
                ev.push(Evidence {
                    path: t.path.clone(),
                    value: format!(
                        "{}: {} {} ({})",
                        at(l),
                        d.name,
                        d.pci.map(|b| b.to_string()).unwrap_or_default(),
                        c.level
                    ),
                });
            }
        }
    }
    if let Some(f) = inv.function(n.gpu) {
        ev.push(Evidence {
            path: f.path.clone(),
            value: format!("GPU, NUMA node {}", numa(n.gpu)),
        });
    }
    for c in &n.nics {
        let d = &inv.rdma[c.nic];
        if let Some(f) = d.pci.and_then(|b| inv.function(b)) {
            let level = c.sysfs.as_ref().map(|r| r.level).unwrap_or(c.level);
            ev.push(Evidence {
                path: f.path.clone(),
                value: format!("{} ({level}), NUMA node {}", d.name, numa(f.bdf)),
            });
        }
    }
    ev
}

/// How the sysfs picture compares, for a pair judged on a topology file: `, NODE in sysfs`.
fn sysfs_beside(n: &Nearest) -> String {
    let levels = n.sysfs_levels();
    if levels.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
    format!(", {} in sysfs", names.join("/"))
}

fn judge(
    inv: &Inventory,
    subject: &str,
    n: &Nearest,
    verdict: Verdict,
    basis: Basis,
    policy: &Policy,
) -> Finding {
    let nics = nic_list(inv, n);
    let plural = if n.nics.len() > 1 { "s" } else { "" };
    let routes: Vec<&crate::placement::Route> =
        n.nics.iter().filter_map(|c| c.sysfs.as_ref()).collect();
    let file = matches!(basis, Basis::File(_));
    let inferred = if !file
        && routes
            .iter()
            .any(|r| r.basis == crate::placement::Basis::PathShape)
    {
        " (switches inferred from the sysfs path: port types need root to read)"
    } else {
        ""
    };
    let numa = if !file && routes.iter().any(|r| r.numa_unknown) {
        " (NUMA nodes unknown: NODE assumed)"
    } else {
        ""
    };
    let where_ = match basis {
        Basis::File(t) => format!(
            " in the topology file NCCL reads ({}){}",
            t.path,
            sysfs_beside(n)
        ),
        Basis::Sysfs => String::new(),
    };
    // The level as NCCL names it: sysfs's NODE is PHB in NCCL's tree, and a fix must set a
    // value NCCL reads (issue 16). A level from a topology file is NCCL's already.
    let shown = crate::nccl::params::level_for_nccl(n.level);
    let nccl = crate::nccl::params::nccl_view(n.level);
    if verdict == Verdict::Gdr {
        let within = match &policy.source {
            PolicySource::Nccl(_) | PolicySource::Run(_) => {
                format!(", within {}", policy.origin())
            }
            PolicySource::Config => String::new(),
        };
        return Finding::pass(
            GPU_NIC_NEAR,
            subject.to_owned(),
            format!(
                "nearest NIC{plural}: {nics} at {}{where_}{inferred}{numa}{within}",
                shown
            ),
        )
        .with(evidence(inv, n, basis));
    }
    let beyond = match policy.limit {
        GdrLimit::Never => format!("and {} turns GPUDirect RDMA off", policy.origin()),
        GdrLimit::Upto(l) => format!("beyond {l} ({})", policy.origin()),
    };
    let mut message = format!(
        "nearest NIC{plural} {nics} at {shown}{where_}, {beyond}: NCCL silently runs this GPU without GPUDirect RDMA, staging through host memory{inferred}{numa}"
    );
    let fix = match (&inv.virtual_pci, basis) {
        (Some(vm), Basis::Sysfs) => {
            message.push_str(&format!(
                ". This is a VM, and placement seen from inside it is the hypervisor's picture ({}): {} in the guest, whatever the host's switches do. The host pairs GPUs and NICs on switches the guest never sees: the provider's topology file, or a passthrough layout that mirrors the host's, is the fix, not the cabling",
                vm.shape.describe(),
                n.level
            ));
            vm_fix(inv, vm)
        }
        _ => Fix::new(
            format!("Put this GPU and a NIC under one PCIe switch (the servers' GPU/NIC pairing), or accept GDR at {shown} by running NCCL with NCCL_NET_GDR_LEVEL={nccl}"),
            "Moving cards needs the node drained and powered off; a wider GDR level can be slower than staging on some CPUs: measure with the GDR write test before adopting it.",
        )
        .manual(format!("# per job: export NCCL_NET_GDR_LEVEL={nccl}"))
        .manual("gdrdoctor topo   # the full GPU x NIC matrix"),
    };
    let mut ev = evidence(inv, n, basis);
    if let (Some(vm), Basis::Sysfs) = (&inv.virtual_pci, basis) {
        ev.extend(vm.evidence.iter().take(1).cloned());
        ev.extend(vm.signals.iter().cloned());
    }
    let f = Finding::fail(GPU_NIC_TOO_FAR, subject.to_owned(), message)
        .with(ev)
        .fix(fix);
    // In a VM the layout is the provider's (the table's rule), unless gdrdoctor knows the
    // provider's topology file for this size: installing it is a change on the node.
    match (&inv.virtual_pci, basis) {
        (Some(vm), Basis::Sysfs) if vm.provider.is_some() => f.action(Action::FixInPlace),
        _ => f,
    }
}

/// GPUs whose one nearest NIC is the same, while another NIC NCCL uses (`nccl_nics`) is no
/// GPU's nearest and would be within the policy for one of them. A NIC `NCCL_IB_HCA` leaves out
/// is not idle: the site chose not to use it.
fn crowding(
    inv: &Inventory,
    near: &[(crate::parse::pci::Bdf, Option<crate::placement::Nearest>)],
    nccl_nics: &[usize],
    policy: Level,
) -> Vec<Finding> {
    let mut sole: BTreeMap<usize, Vec<crate::parse::pci::Bdf>> = BTreeMap::new();
    let mut used = std::collections::BTreeSet::new();
    for n in near.iter().filter_map(|(_, n)| n.as_ref()) {
        used.extend(n.nics.iter().map(|(i, _)| *i));
        if let [(only, _)] = n.nics.as_slice() {
            sole.entry(*only).or_default().push(n.gpu);
        }
    }
    let mut out = Vec::new();
    for (nic, gpus) in sole.iter().filter(|(_, g)| g.len() > 1) {
        let idle: Vec<(usize, crate::placement::Route, crate::parse::pci::Bdf)> = inv
            .rdma
            .iter()
            .enumerate()
            .filter(|(i, _)| !used.contains(i) && nccl_nics.contains(i))
            .filter_map(|(i, d)| {
                gpus.iter()
                    .filter_map(|g| Some((i, route(inv, *g, d.pci?)?, *g)))
                    .filter(|(_, r, _)| r.level <= policy)
                    .min_by_key(|(_, r, _)| r.level)
            })
            .collect();
        if idle.is_empty() {
            continue;
        }
        let gpu_list: Vec<String> = gpus.iter().map(|b| b.to_string()).collect();
        let idle_list: Vec<String> = idle
            .iter()
            .map(|(i, r, g)| format!("{} ({} from GPU {g})", inv.rdma[*i].name, r.level))
            .collect();
        out.push(
            Finding::warn(
                GPU_NIC_CROWDED,
                inv.rdma[*nic].name.clone(),
                format!(
                    "GPUs {} all have {} as their only nearest NIC, while {} is no GPU's nearest: if jobs follow locality, one NIC carries the traffic of {} GPUs and the other idles",
                    gpu_list.join(", "),
                    inv.rdma[*nic].name,
                    idle_list.join(", "),
                    gpus.len()
                ),
            )
            .with(idle.iter().filter_map(|(i, r, _)| inv.rdma[*i].pci.and_then(|b| inv.function(b)).map(|f| Evidence { path: f.path.clone(), value: format!("{} (idle, {})", inv.rdma[*i].name, r.level) })))
            .fix(
                Fix::new(
                    "Map each GPU to its own NIC (NCCL_IB_HCA per rank, or the scheduler's GPU-NIC binding), or re-seat the NIC next to the GPUs that lack one",
                    "Changes which NIC a job uses; no effect on the node itself.",
                )
                .manual("gdrdoctor topo"),
            ),
        );
    }
    out
}
