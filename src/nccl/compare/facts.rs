//! The facts both sides have an opinion on, in the order a report lists them: one function
//! per fact, each comparing NCCL's side with gdrdoctor's (as the checks' registry runs one check
//! per entry, src/checks/mod.rs `ALL`).

use super::sides::{Pair, Sides, judged_pair, nccl_level, pcie_rank, run_policy, shown_level};
use super::topology::{topo_gpu_nic, topo_gpus, topo_nics};
use super::{Comparison, list};
use crate::model::Evidence;
use crate::nccl::c2c;
use crate::nccl::effective::{self, Candidate, Judgement};
use crate::nccl::explain::Nic;
use std::collections::BTreeSet;

/// One compared fact.
pub(super) struct Fact {
    /// What its comparisons are about (`Comparison::fact`).
    pub id: &'static str,
    /// The check whose evidence a difference sends the operator to.
    pub check: &'static str,
    pub compare: fn(&Sides) -> Vec<Comparison>,
}

/// Every fact, in report order; the ones from the topology dump last.
pub(super) static FACTS: &[Fact] = &[
    Fact {
        id: "network",
        check: "rdma-link",
        compare: network,
    },
    Fact {
        id: "nics",
        check: "rdma-link",
        compare: nics,
    },
    Fact {
        id: "hca-gdr",
        check: "peer-memory",
        compare: hca_gdr,
    },
    Fact {
        id: "gpu-nic",
        check: "pcie-placement",
        compare: gpu_nic,
    },
    Fact {
        id: "topo-gpus",
        check: "gpu-driver",
        compare: topo_gpus,
    },
    Fact {
        id: "topo-nics",
        check: "rdma-link",
        compare: topo_nics,
    },
    Fact {
        id: "topo-gpu-nic",
        check: "pcie-placement",
        compare: topo_gpu_nic,
    },
];

/// The check a difference on this fact sends the operator to.
pub(super) fn check_of(fact: &str) -> &'static str {
    FACTS
        .iter()
        .find(|f| f.id == fact)
        .map_or("pcie-placement", |f| f.check)
}

fn from_log(value: String) -> Evidence {
    Evidence {
        path: "NCCL_DEBUG_FILE".into(),
        value,
    }
}

/// The network: NCCL's `Using network X` against `rdma-link` (an ACTIVE RDMA port or not).
fn network(s: &Sides) -> Vec<Comparison> {
    let Some((_, node)) = s.log else {
        return Vec::new();
    };
    let network = s.network.as_deref();
    let nccl_side = match network {
        Some("Socket") => format!("NET/Socket: {}", s.socket_why.as_deref().unwrap_or("")),
        Some(n) => format!("NET/{n}"),
        None => "not in the log (no `Using network` line)".into(),
    };
    let ours = if s.active.is_empty() {
        format!("sockets: {}", s.why_none)
    } else {
        format!(
            "RDMA: {} ACTIVE port(s): {}",
            s.active.len(),
            s.active
                .iter()
                .map(|(d, p)| format!("{d}:{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let agree = network.map(|n| (n != "Socket") != s.active.is_empty());
    let note = match (agree, network) {
        (Some(false), Some("Socket")) if node.env.contains_key("NCCL_IB_DISABLE") || node.env.contains_key("NCCL_NET") => {
            Some("the environment told NCCL to leave the RDMA devices alone".to_owned())
        }
        (Some(false), Some("Socket")) => Some(
            "NCCL could not use the RDMA ports gdrdoctor sees up: see rdma-access (the device files, libibverbs and its providers, the memlock limit) and NCCL's warnings".to_owned(),
        ),
        (Some(false), _) => Some(
            "NCCL found an RDMA network where gdrdoctor sees no ACTIVE port: a plugin network, or a device gdrdoctor does not read".to_owned(),
        ),
        (None, _) => Some("the log does not say which network NCCL used".to_owned()),
        _ => None,
    };
    let mut ev = vec![from_log(match network {
        Some(n) => format!("Using network {n}"),
        None => "no `Using network` line".into(),
    })];
    ev.extend(node.network_notes.iter().map(|n| from_log(n.clone())));
    ev.extend(s.rdma_evidence.iter().cloned());
    vec![Comparison {
        fact: "network",
        subject: "network".into(),
        nccl: nccl_side,
        gdrdoctor: ours,
        agree,
        note,
        evidence: ev,
    }]
}

/// The NICs: the RDMA devices NCCL lists against the ACTIVE ports gdrdoctor sees.
fn nics(s: &Sides) -> Vec<Comparison> {
    let Some((_, node)) = s.log else {
        return Vec::new();
    };
    let rdma_net = s.network.as_deref().filter(|n| *n != "Socket");
    let listed: Vec<&Nic> = node
        .nics
        .iter()
        .filter(|n| n.net != "Socket" && n.gpu.is_none())
        .collect();
    let with_ports = listed.iter().all(|n| n.port.is_some());
    let nccl_set: BTreeSet<String> = listed
        .iter()
        .map(|n| match (with_ports, n.port) {
            (true, Some(p)) => format!("{}:{p}", n.name),
            _ => n.name.clone(),
        })
        .collect();
    let ours_set: BTreeSet<String> = s
        .active
        .iter()
        .map(|(d, p)| {
            if with_ports {
                format!("{d}:{p}")
            } else {
                d.clone()
            }
        })
        .collect();
    let (agree, note) = match node.env.get("NCCL_IB_HCA") {
        Some(v) => (
            None,
            Some(format!(
                "NCCL_IB_HCA={v} in the environment chooses NCCL's NICs: not compared"
            )),
        ),
        None => {
            let same = nccl_set == ours_set;
            (
                Some(same),
                (!same).then(|| only_one_side(&nccl_set, &ours_set)),
            )
        }
    };
    vec![Comparison {
        fact: "nics",
        subject: "RDMA NICs".into(),
        nccl: match (rdma_net, nccl_set.is_empty()) {
            (_, false) => list(&nccl_set),
            (Some(n), true) => format!("none listed (network {n})"),
            (None, true) => "none".into(),
        },
        gdrdoctor: if ours_set.is_empty() {
            format!("none: {}", s.why_none)
        } else {
            format!("ACTIVE: {}", list(&ours_set))
        },
        agree,
        note,
        evidence: listed
            .iter()
            .map(|n| from_log(format!("NET/{}/{} {}", n.net, n.index, n.name)))
            .collect(),
    }]
}

/// What only one side has: `NCCL does not use X; gdrdoctor sees no ACTIVE port for Y`.
fn only_one_side(nccl_set: &BTreeSet<String>, ours_set: &BTreeSet<String>) -> String {
    let only_nccl: Vec<&String> = nccl_set.difference(ours_set).collect();
    let only_ours: Vec<&String> = ours_set.difference(nccl_set).collect();
    let mut parts = Vec::new();
    if !only_ours.is_empty() {
        parts.push(format!(
            "NCCL does not use {}",
            only_ours
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !only_nccl.is_empty() {
        parts.push(format!(
            "gdrdoctor sees no ACTIVE port for {}",
            only_nccl
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    parts.join("; ")
}

/// Each NIC's GDR decision (`GPU Direct RDMA Enabled|Disabled for HCA`) against `peer-memory`'s
/// GPU memory path (sockets never do GDR).
fn hca_gdr(s: &Sides) -> Vec<Comparison> {
    let Some((_, node)) = s.log else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for nic in node
        .nics
        .iter()
        .filter(|n| n.gpu.is_none() && n.gdr != "not-printed")
    {
        let on = nic.gdr == "enabled";
        let (expected, ours, note) = if nic.net == "Socket" {
            (
                Some(false),
                "a socket interface: sockets never reach GPU memory".to_owned(),
                None,
            )
        } else {
            let (e, why) = s.peer_memory.expect(&nic.name);
            let note = match (e, node.env.get("NCCL_DMABUF_ENABLE")) {
                (Some(true), Some(v)) if v == "0" && !s.peer_memory.peermem => Some(
                    "NCCL_DMABUF_ENABLE=0 in the environment turns the DMA-BUF path off".to_owned(),
                ),
                _ => None,
            };
            (
                e,
                format!(
                    "{}: {why}",
                    match e {
                        Some(true) => "GDR expected",
                        Some(false) => "no GDR expected",
                        None => "not known",
                    }
                ),
                note,
            )
        };
        let word = if on { "Enabled" } else { "Disabled" };
        out.push(Comparison {
            fact: "hca-gdr",
            subject: format!("{} GDR", nic.name),
            nccl: format!(
                "GPU Direct RDMA {word} for HCA {} '{}'",
                nic.index, nic.name
            ),
            gdrdoctor: ours,
            agree: expected.map(|e| e == on),
            note,
            evidence: vec![from_log(format!(
                "NET/{} : GPU Direct RDMA {word} for HCA {} '{}'",
                nic.net, nic.index, nic.name
            ))],
        });
    }
    out
}

/// Each GPU-NIC pair: NCCL's path type (its GRAPH lines) and its GDR decision, against
/// gdrdoctor's placement level and GDR level. NCCL routes a pair without GDR through the CPU,
/// so its path then reads PHB (or farther) whatever the PCIe placement: that is expected, not a
/// difference.
fn gpu_nic(s: &Sides) -> Vec<Comparison> {
    let Some((_, node)) = s.log else {
        return Vec::new();
    };
    // gdrdoctor's side is the judgement `check` makes (`effective::judge`: NCCL's topology
    // file, the NICs NCCL_IB_HCA selects), under the level this run of NCCL says it had, else
    // the one in force on the node (issue 25).
    // The release is the run's, as its log says it (NCCL's C2C rule differs by release), else
    // the node's.
    let release = node
        .nccl
        .version
        .as_deref()
        .and_then(crate::parse::nccl_log::Version::parse)
        .or(s.inv.nccl.release.as_ref().map(|r| r.version));
    let judged = effective::judge_release(s.inv, run_policy(s.inv, s.config, node), release);
    s.pairs.iter().map(|p| pair(s, &judged, p)).collect()
}

/// One pair, both sides.
fn pair(s: &Sides, judged: &Judgement, p: &Pair) -> Comparison {
    let gdr_level = judged.policy.limit.describe();
    let candidate = judged_pair(s.inv, judged, &p.bus, &p.nic.name);
    let (hca_expect, hca_why) = s.peer_memory.expect(&p.nic.name);
    let verdict = candidate.as_ref().map(|c| judged.pair_verdict(c));
    let beyond = verdict == Some(effective::Verdict::NoGdr);
    let c2c = candidate
        .as_ref()
        .is_some_and(|c| c.via == effective::Via::C2c);
    let ours_gdr = match (hca_expect, &candidate) {
        (Some(false), _) => Some(false),
        (_, Some(_)) if beyond => Some(false),
        // Over C2C where the release decides and is not known: no expectation.
        (_, Some(_)) if verdict == Some(effective::Verdict::Unknown) => None,
        (Some(true), Some(_)) => Some(true),
        _ => None,
    };
    // Over NVLink-C2C NCCL's path is P2C (2.27 and later) or PHB (before): not a PCIe level
    // to hold against sysfs's; only the GDR decision is compared.
    let expected_path = candidate.as_ref().filter(|_| !c2c).map(|c| {
        let l = nccl_level(c.level);
        if ours_gdr == Some(false) && pcie_rank(l) < pcie_rank("PHB") {
            "PHB"
        } else {
            l
        }
    });
    let path_agree = match (p.path.map(|p| p.path.as_str()), expected_path) {
        (Some(path), Some(e)) if pcie_rank(path).is_some() => Some(path == e),
        _ => None,
    };
    let gdr_agree = match (p.gdr, ours_gdr) {
        (Some(a), Some(b)) => Some(a == b),
        _ => None,
    };
    let agree = match (path_agree, gdr_agree) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (None, None) => None,
        _ => Some(true),
    };
    let over_c2c = || match c2c::decide_for(judged.release, &judged.c2c_input) {
        Ok(d) => d.describe(&judged.c2c_input),
        Err(_) => "NCCL's releases decide differently, and the release is not known".to_owned(),
    };
    let ours_side = match &candidate {
        Some(c) if c2c => format!(
            "over NVLink-C2C ({} in sysfs), {}: {}",
            c.level,
            gdr_word(ours_gdr),
            match hca_expect {
                Some(false) => hca_why.clone(),
                _ => over_c2c(),
            }
        ),
        Some(c) => format!(
            "{}, {}: {}",
            shown_level(c),
            gdr_word(ours_gdr),
            match (hca_expect, beyond) {
                (Some(false), _) => hca_why.clone(),
                (_, true) => format!("beyond the GDR level {gdr_level}"),
                _ => format!("within the GDR level {gdr_level}, {hca_why}"),
            }
        ),
        None => "no placement (gdrdoctor does not place this GPU or NIC)".into(),
    };
    let note = match (p.path.map(|p| p.path.as_str()), &candidate) {
        (_, None) => Some("not compared: gdrdoctor has no route for the pair".to_owned()),
        (Some(path), _) if c2c => Some(format!(
            "NCCL's path {path} runs over the GPU's NVLink-C2C to its CPU: only the GDR decision is compared"
        )),
        (Some(path), _) if pcie_rank(path).is_none() => Some(format!(
            "NCCL's path {path} is not a PCIe level (through another GPU or the CPU's fabric): only the GDR decision is compared"
        )),
        _ => None,
    };
    Comparison {
        fact: "gpu-nic",
        subject: format!("GPU {} -> {}", p.bus, p.nic.name),
        nccl: nccl_pair_side(p),
        gdrdoctor: ours_side,
        agree,
        note,
        evidence: pair_evidence(p, candidate.as_ref()),
    }
}

fn gdr_word(g: Option<bool>) -> &'static str {
    match g {
        Some(true) => "GDR",
        Some(false) => "no GDR",
        None => "GDR not said",
    }
}

/// `PXB (NET/0-1, 4 hops), GDR (distance PXB within level PXB)`.
fn nccl_pair_side(p: &Pair) -> String {
    format!(
        "{}, {}{}",
        p.path
            .map(|p| format!("{} (NET/{}, {} hops)", p.path, p.net, p.hops))
            .unwrap_or_else(|| "no path line".into()),
        gdr_word(p.gdr),
        match p.line {
            Some(l) => format!(
                " (distance {} {} level {})",
                l.distance_name,
                if l.gdr { "within" } else { "beyond" },
                l.level_name
            ),
            None if !p.groups.is_empty() => " (its NET connections)".into(),
            None => String::new(),
        }
    )
}

/// NCCL's path and decision lines for the pair, and gdrdoctor's sysfs route.
fn pair_evidence(p: &Pair, candidate: Option<&Candidate>) -> Vec<Evidence> {
    let mut ev = Vec::new();
    if let Some(path) = p.path {
        ev.push(from_log(format!(
            "GPU/{} : ... NET/{} ({}/{}/{})",
            path.gpu, path.net, path.hops, path.bandwidth, path.path
        )));
    }
    if let Some(l) = p.line {
        ev.push(from_log(format!(
            "GPU Direct RDMA {} for GPU {} / HCA {} (distance {} {} {})",
            if l.gdr { "Enabled" } else { "Disabled" },
            l.gpu,
            l.nic,
            l.distance,
            if l.gdr { "<=" } else { l.comparison },
            l.level
        )));
    }
    if let Some(r) = candidate.and_then(|c| c.sysfs.as_ref()) {
        ev.push(Evidence {
            path: format!("{} -> {}", p.bus, p.nic.name),
            value: format!(
                "{} via {}",
                r.level,
                if r.bridges.is_empty() {
                    "no bridge".to_owned()
                } else {
                    r.bridges
                        .iter()
                        .map(|b| b.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        });
    }
    ev
}
