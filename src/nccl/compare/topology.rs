//! NCCL's dumped topology against gdrdoctor's view: the GPUs NCCL found against those it was
//! given, the RDMA NICs it found (and their PCI addresses) against the ACTIVE ports, and each
//! GPU-NIC distance its tree gives against placement's level.

use super::sides::{Sides, judged_pair, nccl_level, norm_bus, shown_level};
use super::{Comparison, list};
use crate::model::Evidence;
use crate::model::nccl::TopoDump;
use crate::nccl::effective;
use crate::parse::nccl_dump::{self, Dump, DumpNet};
use crate::parse::pci::Bdf;
use std::collections::BTreeSet;

/// The dump and what it holds, when NCCL wrote one that can be read.
fn readable<'s>(s: &'s Sides) -> Option<(&'s TopoDump, &'s Dump)> {
    match &s.dump {
        Some((t, Some(dump))) => Some((t, dump)),
        _ => None,
    }
}

/// Evidence from the dump's file.
fn from_dump(t: &TopoDump, value: String) -> Evidence {
    Evidence {
        path: t
            .path
            .clone()
            .unwrap_or_else(|| "NCCL_TOPO_DUMP_FILE".into()),
        value,
    }
}

/// The GPUs in NCCL's topology against those it was given; an unreadable dump says so here.
pub(super) fn topo_gpus(s: &Sides) -> Vec<Comparison> {
    let run = s.run;
    let (t, dump) = match &s.dump {
        None => return Vec::new(),
        Some((t, None)) => {
            return vec![Comparison {
                fact: "topo-gpus",
                subject: "topology dump".into(),
                nccl: format!("{} bytes without a <system> element", t.bytes),
                gdrdoctor: format!("{} GPU(s) given to NCCL", run.gpus.len()),
                agree: None,
                note: Some("NCCL's topology dump is unreadable: not compared".into()),
                evidence: Vec::new(),
            }];
        }
        Some((t, Some(dump))) => (*t, dump),
    };
    let ours: BTreeSet<String> = run.gpus.iter().filter_map(|g| norm_bus(g)).collect();
    let theirs: BTreeSet<String> = dump
        .gpus
        .iter()
        .filter_map(|g| g.bus_id.as_deref().and_then(norm_bus))
        .collect();
    vec![Comparison {
        fact: "topo-gpus",
        subject: "GPUs in NCCL's topology".into(),
        nccl: list(&theirs),
        gdrdoctor: format!("given to NCCL: {}", list(&ours)),
        agree: Some(ours == theirs),
        note: (ours != theirs).then(|| {
            "NCCL's topology does not hold the GPUs it was given: an NCCL_TOPO_FILE, or GPUs it could not place".to_owned()
        }),
        evidence: dump
            .gpus
            .iter()
            .map(|g| {
                from_dump(
                    t,
                    format!(
                        "<gpu rank={} gdr={}> in <pci busid={}>",
                        g.rank.map_or("?".into(), |r| r.to_string()),
                        g.gdr.map_or("?", |b| if b { "1" } else { "0" }),
                        g.bus_id.as_deref().unwrap_or("?")
                    ),
                )
            })
            .collect(),
    }]
}

/// The RDMA NICs of the dump: its nets that are RDMA devices here, or all of them on an RDMA
/// network (a socket network's nets are netdevs).
fn rdma_nets<'d>(s: &Sides, dump: &'d Dump) -> Vec<&'d DumpNet> {
    let rdma_names: BTreeSet<&str> = s.inv.rdma.iter().map(|d| d.name.as_str()).collect();
    let network = s.network.as_deref();
    let socket = network == Some("Socket");
    dump.nets
        .iter()
        .filter(|n| rdma_names.contains(n.name.as_str()) || (!socket && network.is_some()))
        .collect()
}

/// The RDMA NICs NCCL found (and their PCI addresses) against the ACTIVE ports.
pub(super) fn topo_nics(s: &Sides) -> Vec<Comparison> {
    let Some((t, dump)) = readable(s) else {
        return Vec::new();
    };
    let rdma_nets = rdma_nets(s, dump);
    let theirs: BTreeSet<String> = rdma_nets.iter().map(|n| n.name.clone()).collect();
    let active: BTreeSet<String> = s
        .inv
        .rdma
        .iter()
        .filter(|d| d.ports.iter().any(|p| p.is_active()))
        .map(|d| d.name.clone())
        .collect();
    let mut moved = Vec::new();
    for n in &rdma_nets {
        let ours = s
            .inv
            .rdma
            .iter()
            .find(|d| d.name == n.name)
            .and_then(|d| d.pci)
            .map(|b| b.to_string());
        let theirs = n.bus_id.as_deref().and_then(norm_bus);
        if let (Some(o), Some(t)) = (&ours, &theirs) {
            if o != t {
                moved.push(format!("{} at {t} for NCCL, {o} in sysfs", n.name));
            }
        }
    }
    let same = theirs == active && moved.is_empty();
    let mut notes = Vec::new();
    if theirs != active {
        notes.push(format!(
            "NCCL's topology holds {}, gdrdoctor sees ACTIVE ports on {}",
            list(&theirs),
            list(&active)
        ));
    }
    notes.extend(moved);
    vec![Comparison {
        fact: "topo-nics",
        subject: "RDMA NICs in NCCL's topology".into(),
        nccl: if theirs.is_empty() {
            format!(
                "none{}",
                if dump.nets.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (only {})",
                        dump.nets
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )
        } else {
            list(&theirs)
        },
        gdrdoctor: format!("ACTIVE: {}", list(&active)),
        agree: if s.network.is_none() && theirs.is_empty() {
            None
        } else {
            Some(same)
        },
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        evidence: dump
            .nets
            .iter()
            .map(|n| {
                from_dump(
                    t,
                    format!(
                        "<net name={} dev={} port={} gdr={}> in {}",
                        n.name,
                        n.dev.map_or("?".into(), |d| d.to_string()),
                        n.port.map_or("?".into(), |d| d.to_string()),
                        n.gdr.map_or("?", |b| if b { "1" } else { "0" }),
                        n.bus_id
                            .as_deref()
                            .map_or("no PCI device (on the CPU)".to_owned(), |b| format!(
                                "<pci busid={b}>"
                            ))
                    ),
                )
            })
            .collect(),
    }]
}

/// Each GPU-NIC distance, NCCL's tree against placement.
pub(super) fn topo_gpu_nic(s: &Sides) -> Vec<Comparison> {
    let Some((t, dump)) = readable(s) else {
        return Vec::new();
    };
    // NCCL's tree as `check` builds it: from the topology file when one is in effect.
    let judged = effective::judge(s.inv, s.config);
    let rdma_nets = rdma_nets(s, dump);
    let mut out = Vec::new();
    for g in &dump.gpus {
        let Some(gb) = g.bus_id.as_deref().and_then(Bdf::parse) else {
            continue;
        };
        for n in &rdma_nets {
            let Some(dev) = s.inv.rdma.iter().find(|d| d.name == n.name) else {
                continue;
            };
            let pair = judged_pair(s.inv, &judged, &gb.to_string(), &dev.name);
            let route = pair.as_ref().and_then(|c| c.sysfs.clone());
            let theirs = nccl_dump::level(g, n);
            let ours = pair.as_ref().map(|c| nccl_level(c.level));
            out.push(Comparison {
                fact: "topo-gpu-nic",
                subject: format!("GPU {gb} -> {} in NCCL's topology", n.name),
                nccl: theirs.to_owned(),
                gdrdoctor: match &pair {
                    Some(c) => shown_level(c),
                    None => "no placement".into(),
                },
                agree: ours.map(|o| o == theirs),
                note: match ours {
                    None => Some("not compared: gdrdoctor has no route for the pair".into()),
                    Some(o) if o != theirs => Some(
                        "NCCL's PCI tree differs from the one gdrdoctor expects it to build (sysfs, or the topology file in effect): a virtual PCI tree, or switches NCCL merged".into(),
                    ),
                    _ => None,
                },
                evidence: vec![
                    from_dump(
                        t,
                        format!(
                            "<gpu> under {} ; <net name={}> under {}",
                            g.place.pci.join(" > "),
                            n.name,
                            if n.place.pci.is_empty() {
                                "the CPU".to_owned()
                            } else {
                                n.place.pci.join(" > ")
                            }
                        ),
                    ),
                    Evidence {
                        path: format!("{gb} -> {}", n.name),
                        value: route
                            .as_ref()
                            .map_or("no route".into(), |r| r.level.to_string()),
                    },
                ],
            });
        }
    }
    out
}
