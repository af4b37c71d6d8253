//! The explanation built from what was collected: per node its NCCL, NICs, GPU-NIC decisions,
//! paths and connection groups; the diagnoses; the verdict.

use super::collector::{Collector, GpuAcc, NodeAcc};
use super::diagnosis::{diagnose, single_node, warning_meaning};
use super::evidence::{self, Context};
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
    let mut ctx = Context {
        one_sided: Context::one_sided(&c),
        names: c.nodes.iter().map(|n| node_name(&n.key)).collect(),
        node: 0,
    };
    let mut order: Vec<usize> = (0..c.nodes.len()).collect();
    order.sort_by(|&a, &b| c.nodes[a].key.cmp(&c.nodes[b].key));
    let mut link_local = None;
    for i in order {
        let acc = &c.nodes[i];
        let (known, mut nccl) = version_of(acc, &single_bare, c.bare_rccl);
        let known = narrow_by_level(acc, known);
        if let (Known::Range(e), Some(_)) = (known, &nccl.range) {
            nccl.range = Some(e.to_string());
        }
        let node = node(acc, known, nccl, &c.nets);
        tally.add(acc, &node);
        ctx.node = i;
        diagnose(acc, known, &node, &ctx, &mut diagnoses, &mut hints);
        if link_local.is_none() {
            link_local = evidence::link_local_gids(acc).into_iter().next();
        }
        nodes.push(node);
    }
    tally.elsewhere = diagnoses.iter().any(|d| d.cause == "gdr-off-elsewhere");
    tally.plugin_failed = diagnoses
        .iter()
        .find(|d| d.cause == "plugin-failed")
        .map(|d| d.subject.clone());
    if tally.total > 0 && tally.with_gdr == tally.total {
        // Every NET connection used GDR: what a node would need is had.
        for n in &mut nodes {
            n.requirements.clear();
        }
    }
    // Lines from several hosts: not one node's run, whatever each host's lines show.
    let hosts = c
        .nodes
        .iter()
        .filter(|n| !n.key.is_empty() && n.key != super::collector::BARE_KEY)
        .count();
    tally.many_nodes |= hosts > 1;
    // nccl-tests listed every rank with its host: one host is a single-node run.
    if let (None, Some(host)) = (&tally.one_node, c.tests_hosts.iter().next()) {
        if c.tests_hosts.len() == 1 {
            tally.one_node = Some(format!("nccl-tests listed every rank on {host}"));
        }
    }
    tally.many_nodes |= c.tests_hosts.len() > 1;
    reading_hints(&c, tally.total, &mut hints);
    if link_local.is_some() {
        hints.insert("A queue pair was built on a link-local GID (fe80::/64): RoCE v2 between nodes needs the port's IPv4 GID; `gdrdoctor nccl` on a node prints the index (NCCL_IB_GID_INDEX), and `gdrdoctor check --select rdma-gid` shows each port's GID table.".to_owned());
    }
    let warnings = c
        .warnings
        .iter()
        .map(|w| {
            let (meaning, see) = warning_meaning(&w.text, link_local.as_ref());
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
    let nics = nics(acc);
    let rdma_nics =
        nics.iter().any(|n| n.net != "Socket") || acc.networks.iter().any(|n| n != "Socket");
    Node {
        name: node_name(&acc.key),
        nccl,
        networks: acc.networks.iter().cloned().collect(),
        plugins: acc.plugins.iter().cloned().collect(),
        nics,
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
            .chain(acc.plugin_failed.iter().cloned())
            .chain(acc.plugin_gdr_off.iter().cloned())
            .chain(
                evidence::link_local_gids(acc)
                    .iter()
                    .map(|(dev, index)| evidence::gid_note(acc, dev, *index)),
            )
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
        intra_node_connections: acc.intra,
        communicator_nodes: acc.nnodes.iter().copied().collect(),
        // Where NCCL said nothing of GDR here (no decision, no NET connection, whose causes
        // would say it): what it would need.
        requirements: if !acc.conns.is_empty() || !acc.hcas.is_empty() || !acc.gpus.is_empty() {
            Vec::new()
        } else {
            evidence::requirements(acc, known, rdma_nics)
        },
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
    /// Why the run looks like one node's: `nNodes 1`, connections inside the node only,
    /// nccl-tests' rank list.
    one_node: Option<String>,
    /// Some node's communicators spanned nodes (`nNodes 2` or more).
    many_nodes: bool,
    /// NCCL's ring GDR flag says another rank went without GDR.
    elsewhere: bool,
    /// A network plugin failed to initialize (`network plugin aws-ofi-nccl (NET/OFI)`): NCCL
    /// decided nothing against GDR, it went on without the plugin.
    plugin_failed: Option<String>,
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
        if self.one_node.is_none() {
            if single_node(acc) {
                self.one_node = Some("its communicators say nNodes 1".to_owned());
            } else if acc.intra > 0 {
                self.one_node = Some("its connections stay inside the node".to_owned());
            }
        }
        self.many_nodes |= acc.nnodes.iter().any(|&n| n > 1);
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
        } else if self.elsewhere {
            (
                1,
                if total > 0 {
                    format!(
                        "all {total} NET connections in the log used GPUDirect RDMA, but NCCL's ring GDR flag says another rank's did not"
                    )
                } else {
                    "no NET connection in the log, and NCCL's ring GDR flag says a rank's did not use GPUDirect RDMA".to_owned()
                },
            )
        } else if let (0, Some(why), false) = (total, &self.one_node, self.many_nodes) {
            (
                3,
                format!(
                    "GPUDirect RDMA not exercised: no NET connection in this log, and {why}: a run on one node uses P2P and shared memory, not the network"
                ),
            )
        } else if total > 0 {
            (
                0,
                format!("all {total} NET connections used GPUDirect RDMA"),
            )
        } else if let Some(plugin) = &self.plugin_failed {
            (
                1,
                format!(
                    "no NET connection in the log: the {plugin} failed to initialize, and NCCL went on without it"
                ),
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
