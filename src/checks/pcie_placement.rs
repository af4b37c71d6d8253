//! `pcie-placement`: each GPU has a NIC close enough on the PCIe tree for NCCL to use
//! GPUDirect RDMA, and GPUs do not crowd onto one NIC while a usable one sits idle.

use super::{Check, Context};
use crate::inventory::Inventory;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::placement::{Basis, Level, Nearest, nearest, route};
use std::collections::BTreeMap;

pub struct PciePlacement;

const CODES: &[Code] = &[
    Code {
        id: "gpu-nic-near",
        summary: "the GPU's nearest NIC is within the GDR level policy (NCCL_NET_GDR_LEVEL)",
    },
    Code {
        id: "gpu-nic-too-far",
        summary: "the GPU's nearest NIC is beyond the GDR level policy: NCCL runs it without GPUDirect RDMA",
    },
    Code {
        id: "gpu-nic-crowded",
        summary: "several GPUs share one nearest NIC while another NIC within the policy is no GPU's nearest",
    },
    Code {
        id: "placement-unknown",
        summary: "a GPU's or NIC's place on the PCIe tree could not be worked out",
    },
    Code {
        id: "placement-no-pair",
        summary: "no GPU or no RDMA NIC, so no GPU-NIC placement to judge",
    },
];

impl Check for PciePlacement {
    fn id(&self) -> &'static str {
        "pcie-placement"
    }
    fn title(&self) -> &'static str {
        "Each GPU has a NIC within NCCL's GDR distance"
    }
    fn codes(&self) -> &'static [Code] {
        CODES
    }
    fn readme(&self) -> &'static str {
        include_str!("../../checks/pcie-placement/README.md")
    }

    /// `every GPU has a NIC at PIX`, or within the worst level with the count per level.
    fn summary(&self, cx: &Context, passed: &[&Finding]) -> String {
        let near: Vec<Level> = nearest(cx.inv)
            .into_iter()
            .filter_map(|(_, n)| n)
            .filter(|n| {
                passed.iter().any(|f| {
                    f.subject.starts_with(&format!("GPU {} ", n.gpu))
                        || f.subject == format!("GPU {}", n.gpu)
                })
            })
            .map(|n| n.level)
            .collect();
        let (Some(best), Some(worst)) = (near.iter().min(), near.iter().max()) else {
            return super::summarize(passed);
        };
        let who = if near.len() == cx.inv.gpus.len() {
            "every GPU has".to_owned()
        } else {
            format!("{} of {} GPUs have", near.len(), cx.inv.gpus.len())
        };
        if best == worst {
            format!("{who} a NIC at {best}")
        } else {
            let mut counts: BTreeMap<Level, usize> = BTreeMap::new();
            for l in &near {
                *counts.entry(*l).or_default() += 1;
            }
            let each: Vec<String> = counts.iter().map(|(l, n)| format!("{l}: {n}")).collect();
            format!("{who} a NIC within {worst} ({})", each.join(", "))
        }
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let policy = cx.config.thresholds.gdr_level;
        if inv.gpus.is_empty() || inv.rdma.is_empty() {
            let (what, prerequisite) = if inv.gpus.is_empty() {
                ("no GPU (see gpu-driver)", "gpu-driver")
            } else {
                ("no RDMA device (see rdma-link)", "rdma-link")
            };
            return vec![
                Finding::skip("placement-no-pair", "node", what)
                    .evidence(
                        crate::inventory::rdma::CLASS_INFINIBAND,
                        format!("{} GPUs, {} RDMA devices", inv.gpus.len(), inv.rdma.len()),
                    )
                    .prerequisites(&[prerequisite]),
            ];
        }
        let mut out = Vec::new();
        for d in inv.rdma.iter().filter(|d| d.pci.is_none()) {
            out.push(
                Finding::unknown("placement-unknown", d.name.clone(), format!("{} has no PCI function gdrdoctor could find, so its distance to the GPUs is unknown", d.name))
                    .evidence(d.class_path(), "<no device link, no netdev with a PCI function>"),
            );
        }
        let near = nearest(inv);
        for (gpu, n) in &near {
            let subject = inv
                .gpus
                .iter()
                .find(|g| g.bdf == *gpu)
                .map(|g| g.subject())
                .unwrap_or_default();
            let Some(n) = n else {
                out.push(
                    Finding::unknown(
                        "placement-unknown",
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
            out.push(judge(inv, &subject, n, policy));
        }
        out.extend(crowding(inv, &near, policy));
        out
    }
}

fn nic_list(inv: &Inventory, n: &Nearest) -> String {
    n.nics
        .iter()
        .map(|(i, _)| inv.rdma[*i].name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn evidence(inv: &Inventory, n: &Nearest) -> Vec<Evidence> {
    let mut ev = Vec::new();
    let numa = |b| {
        inv.function(b)
            .and_then(|f| f.detail.as_ref())
            .map(|d| d.numa_node.shown())
            .unwrap_or_else(|| "?".into())
    };
    if let Some(f) = inv.function(n.gpu) {
        ev.push(Evidence {
            path: f.path.clone(),
            value: format!("GPU, NUMA node {}", numa(n.gpu)),
        });
    }
    for (i, r) in &n.nics {
        let d = &inv.rdma[*i];
        if let Some(f) = d.pci.and_then(|b| inv.function(b)) {
            ev.push(Evidence {
                path: f.path.clone(),
                value: format!("{} ({}), NUMA node {}", d.name, r.level, numa(f.bdf)),
            });
        }
    }
    ev
}

fn judge(inv: &Inventory, subject: &str, n: &Nearest, policy: Level) -> Finding {
    let nics = nic_list(inv, n);
    let plural = if n.nics.len() > 1 { "s" } else { "" };
    let inferred = if n.nics.iter().any(|(_, r)| r.basis == Basis::PathShape) {
        " (switches inferred from the sysfs path: port types need root to read)"
    } else {
        ""
    };
    let numa = if n.nics.iter().any(|(_, r)| r.numa_unknown) {
        " (NUMA nodes unknown: NODE assumed)"
    } else {
        ""
    };
    if n.level <= policy {
        return Finding::pass(
            "gpu-nic-near",
            subject.to_owned(),
            format!("nearest NIC{plural}: {nics} at {}{inferred}{numa}", n.level),
        )
        .with(evidence(inv, n));
    }
    Finding::fail(
        "gpu-nic-too-far",
        subject.to_owned(),
        format!(
            "nearest NIC{plural} {nics} at {}, beyond {policy} (NCCL_NET_GDR_LEVEL{}): NCCL silently runs this GPU without GPUDirect RDMA, staging through host memory{inferred}{numa}",
            n.level,
            if policy == Level::Pxb { "'s default" } else { " per the config" }
        ),
    )
    .with(evidence(inv, n))
    .fix(
        Fix::new(
            format!("Put this GPU and a NIC under one PCIe switch (the servers' GPU/NIC pairing), or accept GDR at {} by running NCCL with NCCL_NET_GDR_LEVEL={}", n.level, n.level),
            "Moving cards needs the node drained and powered off; a wider GDR level can be slower than staging on some CPUs: measure with the GDR write test before adopting it.",
        )
        .manual(format!("# per job: export NCCL_NET_GDR_LEVEL={}", n.level))
        .manual("gdrdoctor topo   # the full GPU x NIC matrix"),
    )
}

/// GPUs whose one nearest NIC is the same, while another NIC is no GPU's nearest and would be
/// within the policy for one of them.
fn crowding(
    inv: &Inventory,
    near: &[(crate::parse::pci::Bdf, Option<Nearest>)],
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
            .filter(|(i, _)| !used.contains(i))
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
                "gpu-nic-crowded",
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
