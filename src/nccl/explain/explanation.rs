//! The explanation built from what was collected: per node its NCCL, NICs, GPU-NIC decisions,
//! paths and connection groups; the diagnoses; the verdict.

use super::collector::{Collector, GpuAcc, NodeAcc};
use super::diagnosis::{diagnose, warning_meaning};
use super::release::{Known, level_source, names, narrow_by_level, tables_for, version_of};
use super::{MAX_LINE, node_name};
use crate::model::nccl::explain::{
    ConnGroup, Explanation, GpuNic, NcclVersion, NetPath, Nic, Node, NotNcclLog, Verdict, Warning,
    bus_id_of, nic_index,
};
use crate::parse::nccl_log::HcaVia;
use std::collections::BTreeSet;

impl Collector {
    /// The explanation, or `NotNcclLog` when no input had an NCCL line.
    pub fn finish(self) -> Result<Explanation, NotNcclLog> {
        if self.inputs.iter().all(|i| i.nccl_lines == 0) {
            return Err(NotNcclLog {
                inputs: self.inputs,
            });
        }
        Ok(build(self))
    }
}

/// The explanation of everything collected: each node (in name order) with its diagnoses,
/// then the hints, the warnings and the verdict.
fn build(c: Collector) -> Explanation {
    let single_bare = (c.bare_versions.len() == 1)
        .then(|| c.bare_versions.iter().next().map(|(v, t)| (*v, t.clone())))
        .flatten();
    let mut nodes = Vec::new();
    let mut diagnoses = Vec::new();
    let mut hints = BTreeSet::new();
    let mut tally = Tally::default();
    let mut order: Vec<&NodeAcc> = c.nodes.iter().collect();
    order.sort_by(|a, b| a.key.cmp(&b.key));
    for acc in order {
        let (known, mut nccl) = version_of(acc, &single_bare);
        let known = narrow_by_level(acc, known);
        if let (Known::Range(e), Some(_)) = (known, &nccl.range) {
            nccl.range = Some(e.to_string());
        }
        let node = node(acc, known, nccl, &c.nets);
        tally.add(acc, &node);
        diagnose(acc, known, &node, &mut diagnoses, &mut hints);
        nodes.push(node);
    }
    reading_hints(&c, tally.total, &mut hints);
    let warnings = c
        .warnings
        .iter()
        .map(|w| {
            let (meaning, see) = warning_meaning(&w.text);
            Warning {
                text: w.text.clone(),
                count: w.count,
                nodes: w.nodes.iter().cloned().collect(),
                meaning,
                see,
            }
        })
        .collect();
    let verdict = tally.verdict(!diagnoses.is_empty());
    Explanation {
        schema: 1,
        inputs: c.inputs,
        nodes,
        diagnoses,
        warnings,
        hints: hints.into_iter().collect(),
        unrecognised: c.unrecognised,
        dropped: c.dropped,
        verdict,
    }
}

/// One node as the log shows it; `nets`: the network names the connection groups index.
fn node(acc: &NodeAcc, known: Known, nccl: NcclVersion, nets: &[String]) -> Node {
    Node {
        name: node_name(&acc.key),
        nccl,
        networks: acc.networks.iter().cloned().collect(),
        plugins: acc.plugins.iter().cloned().collect(),
        nics: nics(acc),
        gpu_nic: acc
            .gpus
            .iter()
            .map(|((gpu, nic), g)| gpu_nic(acc, known, gpu, nic, g))
            .collect(),
        env: acc.env.clone(),
        network_notes: acc
            .no_device
            .iter()
            .map(|n| format!("NET/{n} : No device found"))
            .chain(
                acc.init_failed
                    .iter()
                    .map(|n| format!("Failed to initialize NET plugin {n}")),
            )
            .chain(acc.plugin_gdr_off.iter().cloned())
            .collect(),
        dmabuf_gpus: acc.dmabuf.iter().copied().collect(),
        rings_gdr: acc.rings_gdr.iter().copied().collect(),
        connections: acc
            .conns
            .iter()
            .map(|(k, a)| {
                let mut channels: Vec<u32> =
                    (0..64).filter(|i| a.channels & (1 << i) != 0).collect();
                channels.extend(a.channels_more.iter().copied());
                ConnGroup {
                    cuda_dev: k.dev,
                    rank: k.rank,
                    bus: a.bus.clone().or_else(|| acc.rank_bus.get(&k.rank).cloned()),
                    net: nets[k.net as usize].clone(),
                    nic: k.nic,
                    gdr: k.gdr,
                    sends: a.sends,
                    receives: a.receives,
                    channels,
                    peers: a.peers.iter().copied().collect(),
                    more_peers: a.more_peers,
                    proxies: a.proxies.iter().copied().collect(),
                    pci: a.pci,
                }
            })
            .collect(),
        paths: acc
            .paths
            .iter()
            .map(|((gpu, net), p)| NetPath {
                gpu: gpu.clone(),
                bus_id: bus_id_of(gpu),
                net: net.clone(),
                nic: nic_index(net),
                hops: p.hops,
                bandwidth: p.bw,
                path: p.path.clone(),
                lines: p.lines,
            })
            .collect(),
    }
}

/// The NET connections counted over every node, and whether NCCL decided for or against GDR
/// anywhere.
#[derive(Default)]
struct Tally {
    total: u64,
    with_gdr: u64,
    decided_off: bool,
    decided_on: bool,
}

impl Tally {
    fn add(&mut self, acc: &NodeAcc, node: &Node) {
        for g in &node.connections {
            let n = g.sends + g.receives;
            self.total += n;
            if g.gdr {
                self.with_gdr += n;
            }
        }
        self.decided_off |=
            acc.hcas.values().any(|h| !h.enabled) || acc.gpus.values().any(|g| !g.enabled);
        self.decided_on |=
            acc.hcas.values().any(|h| h.enabled) || acc.gpus.values().any(|g| g.enabled);
    }

    /// The answer: 0 when every NET connection used GDR (or, with none, every decision was for
    /// it); 1 otherwise.
    fn verdict(&self, diagnosed: bool) -> Verdict {
        let (total, with_gdr) = (self.total, self.with_gdr);
        let without = total - with_gdr;
        let (exit_code, summary) = if without > 0 {
            (
                1,
                format!("{without} of {total} NET connections without GPUDirect RDMA"),
            )
        } else if total > 0 {
            (
                0,
                format!("all {total} NET connections used GPUDirect RDMA"),
            )
        } else if self.decided_off || diagnosed {
            (
                1,
                "no NET connection in the log, and NCCL decided against GPUDirect RDMA".to_owned(),
            )
        } else if self.decided_on {
            (
                0,
                "no NET connection in the log; NCCL's GDR decisions were all enabled".to_owned(),
            )
        } else {
            (
                1,
                "nothing verified: the log has no NET connection and no GDR decision".to_owned(),
            )
        };
        Verdict {
            net_connections: total,
            with_gdr,
            without_gdr: without,
            exit_code,
            summary,
        }
    }
}

/// What the reading itself leaves to say: no connection line, lines in no known wording, lines
/// too long, things past the memory bounds.
fn reading_hints(c: &Collector, total: u64, hints: &mut BTreeSet<String>) {
    if total == 0 {
        hints.insert("The log has no NET connection line (`Channel NN : a -> b [send] via NET/...`): NCCL prints them under NCCL_DEBUG_SUBSYS=INIT, the default, when a communicator spans nodes. Rerun a multi-node job with NCCL_DEBUG=INFO (and NCCL_DEBUG_SUBSYS=INIT,NET for the reasons).".to_owned());
    }
    if c.unrecognised.count > 0 {
        hints.insert(format!(
            "{} line(s) about GDR or the network were in no wording this gdrdoctor knows (a newer NCCL, or lines cut short) and were skipped; the answer stands on the rest.",
            c.unrecognised.count
        ));
    }
    let skipped: u64 = c.inputs.iter().map(|i| i.long_lines_skipped).sum();
    if skipped > 0 {
        hints.insert(format!(
            "{skipped} line(s) longer than {} KiB were skipped (NCCL's own lines are under 1 KiB).",
            MAX_LINE / 1024
        ));
    }
    if c.dropped > 0 {
        hints.insert(format!(
            "{} distinct item(s) past gdrdoctor's memory bounds were counted and not kept.",
            c.dropped
        ));
    }
}

fn nics(acc: &NodeAcc) -> Vec<Nic> {
    let mut out: Vec<Nic> = Vec::new();
    for ((net, index), (name, port, link)) in &acc.nics {
        out.push(Nic {
            net: net.clone(),
            index: *index,
            name: name.clone(),
            port: *port,
            link: link.clone(),
            gdr: "not-printed",
            reason: None,
            gpu: None,
        });
    }
    for ((net, index, gpu), h) in &acc.hcas {
        let reason = match h.via {
            HcaVia::Unstated => None,
            HcaVia::NoModule => Some("no module"),
            HcaVia::NoModuleOrGpu => Some("no module or not supported by GPU"),
            HcaVia::PeerMem => Some("nvidia-peermem"),
            HcaVia::DmaBuf => Some("DMABUF"),
        }
        .map(str::to_owned);
        let gdr = if h.enabled { "enabled" } else { "disabled" };
        // The HCA line and the device list name the same NIC (by index, and by name when
        // the HCA line's network is a plugin's).
        let listed = out.iter_mut().find(|n| {
            n.gpu.is_none()
                && n.index == *index
                && n.gdr == "not-printed"
                && (n.net == *net || n.name == h.name)
        });
        match (listed, gpu) {
            (Some(n), None) => {
                n.gdr = gdr;
                n.reason = reason;
            }
            _ => out.push(Nic {
                net: net.clone(),
                index: *index,
                name: h.name.clone(),
                port: None,
                link: None,
                gdr,
                reason,
                gpu: gpu.clone(),
            }),
        }
    }
    out
}

fn gpu_nic(acc: &NodeAcc, known: Known, gpu: &str, nic: &str, g: &GpuAcc) -> GpuNic {
    let (tables, _) = tables_for(acc, known, g);
    GpuNic {
        gpu: gpu.to_owned(),
        nic: nic.to_owned(),
        gdr: g.enabled,
        distance: g.distance,
        distance_name: names(&tables, g.distance),
        level: g.level,
        level_name: names(&tables, g.level),
        level_source: level_source(acc, &tables, g),
        comparison: if g.inclusive { ">=" } else { ">" },
        read: g.read,
        mode: g.mode.clone(),
        pxn_via: g.pxn_via.clone(),
        lines: g.lines,
    }
}
