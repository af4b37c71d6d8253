//! Both sides of the comparison, read once. NCCL's: the node of its log, the network it used,
//! the GPUs it was given, each GPU-NIC pair it named with what it said of the pair, and its
//! topology dump. gdrdoctor's: the ports it sees ACTIVE, and the findings `rdma-link` and
//! `peer-memory` already produced ([`OwnView`]), never the checks run again.

use super::OwnView;
use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::nccl::{Library, Run, TopoDump};
use crate::model::{Evidence, Finding, Level, Status};
use crate::nccl::effective::{self, Candidate, Judgement, Policy, PolicySource};
use crate::nccl::explain::{
    ConnGroup, Explanation, GpuNic, NetPath, Nic, Node, bus_id_of, nic_index,
};
use crate::nccl::params::{LevelValue, gdr_level};
use crate::parse::nccl_dump::{self, Dump};
use crate::parse::pci::Bdf;

/// What each fact compares.
pub(super) struct Sides<'a> {
    pub inv: &'a Inventory,
    pub config: &'a Config,
    pub run: &'a Run,
    /// NCCL's log, read: the explanation and its node (the child runs on this node only).
    pub log: Option<(&'a Explanation, &'a Node)>,
    /// The network NCCL used (`network_of`).
    pub network: Option<String>,
    /// Why NCCL used sockets, in its own terms, when it did.
    pub socket_why: Option<String>,
    /// The GPUs of the communicator: rank and PCI address.
    pub ranks: Vec<(u32, String)>,
    /// Each GPU-NIC pair NCCL named (GRAPH paths, GDR decisions), by PCI address and NIC index.
    pub pairs: Vec<Pair<'a>>,
    /// NCCL's topology dump, when it wrote one, and what it holds (`None`: unreadable).
    pub dump: Option<(&'a TopoDump, Option<Dump>)>,
    /// `peer-memory`'s GPU memory path.
    pub peer_memory: PeerMemory,
    /// The RDMA ports gdrdoctor sees ACTIVE: device and port.
    pub active: Vec<(String, u32)>,
    /// Why gdrdoctor sees no RDMA network (`rdma-link`'s words).
    pub why_none: String,
    /// `rdma-link`'s evidence where it did not pass.
    pub rdma_evidence: Vec<Evidence>,
}

/// One GPU-NIC pair as NCCL's log has it.
pub(super) struct Pair<'a> {
    /// The GPU's PCI address.
    pub bus: String,
    pub nic: &'a Nic,
    /// NCCL's path from the GPU to the NIC (GRAPH).
    pub path: Option<&'a NetPath>,
    /// NCCL's GPU-NIC GDR decision line.
    pub line: Option<&'a GpuNic>,
    /// The GPU's NET connections through the NIC.
    pub groups: Vec<&'a ConnGroup>,
    /// Whether NCCL uses GDR for the pair: its decision line, else its connections, else its
    /// path (through the CPU means without, where no level was set).
    pub gdr: Option<bool>,
}

impl<'a> Sides<'a> {
    pub fn new(
        inv: &'a Inventory,
        config: &'a Config,
        own: &OwnView,
        run: &'a Run,
        ranks: Vec<(u32, String)>,
    ) -> Sides<'a> {
        let log = run
            .explanation
            .as_ref()
            .and_then(|e| e.nodes.first().map(|n| (e, n)));
        let network = log.and_then(|(_, n)| network_of(n));
        let socket_why = match (log, network.as_deref()) {
            (Some((e, node)), Some("Socket")) => Some(socket_reason(node, e)),
            _ => None,
        };
        let pairs = log.map_or_else(Vec::new, |(_, node)| pairs(node, &ranks));
        // The ports gdrdoctor sees up.
        let active: Vec<(String, u32)> = inv
            .rdma
            .iter()
            .flat_map(|d| {
                d.ports
                    .iter()
                    .filter(|p| p.is_active())
                    .map(move |p| (d.name.clone(), p.num))
            })
            .collect();
        Sides {
            inv,
            config,
            run,
            log,
            network,
            socket_why,
            ranks,
            pairs,
            dump: run
                .topology_dump
                .as_ref()
                .map(|t| (t, nccl_dump::parse(&t.text))),
            peer_memory: PeerMemory {
                // RCCL's DMA-BUF path is opt-in (ROCm/rccl src/misc/rocmwrap.cc): without
                // NCCL_DMABUF_ENABLE=1 among the settings it read, it has none.
                rccl_dmabuf_off: run.library == Library::Rccl
                    && log
                        .and_then(|(_, n)| n.env.get("NCCL_DMABUF_ENABLE"))
                        .is_none_or(|v| v.trim() != "1"),
                ..PeerMemory::of(&own.peer_memory)
            },
            active,
            why_none: why_none(inv, &own.rdma_link),
            rdma_evidence: own
                .rdma_link
                .iter()
                .filter(|f| f.status != Status::Pass)
                .flat_map(|f| f.evidence.iter().take(2).cloned())
                .take(4)
                .collect(),
        }
    }

    /// The RDMA NIC NCCL lists at this index (not a socket, not 2.4's per-GPU line).
    pub fn rdma_nic(&self, index: u32) -> Option<&'a Nic> {
        let (_, node) = self.log?;
        node.nics
            .iter()
            .find(|n| n.index == index && n.net != "Socket" && n.gpu.is_none())
    }
}

/// Why there is no RDMA network, as `rdma-link` says it.
fn why_none(inv: &Inventory, rdma_link: &[Finding]) -> String {
    if rdma_link.iter().any(|f| f.code == "rdma-no-device") {
        "no RDMA device (rdma-link: rdma-no-device)".to_owned()
    } else if inv.rdma.is_empty() {
        "no RDMA device".to_owned()
    } else {
        format!(
            "no ACTIVE RDMA port on {} (rdma-link)",
            inv.rdma
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Each GPU-NIC pair the log names, on an RDMA NIC, in PCI address order, with NCCL's side.
fn pairs<'a>(node: &'a Node, ranks: &[(u32, String)]) -> Vec<Pair<'a>> {
    let rdma_nic = |idx: u32| {
        node.nics
            .iter()
            .find(|n| n.index == idx && n.net != "Socket" && n.gpu.is_none())
    };
    let env_set = node.env.contains_key("NCCL_NET_GDR_LEVEL");
    let mut named: Vec<(String, u32)> = Vec::new();
    for p in &node.paths {
        if let (Some(b), Some(i)) = (p.bus_id.as_deref().and_then(norm_bus), p.nic) {
            if rdma_nic(i).is_some() && !named.contains(&(b.clone(), i)) {
                named.push((b, i));
            }
        }
    }
    for g in &node.gpu_nic {
        if let (Some(b), Some(i)) = (gpu_of(&g.gpu, ranks), nic_index(&g.nic)) {
            if rdma_nic(i).is_some() && !named.contains(&(b.clone(), i)) {
                named.push((b, i));
            }
        }
    }
    named.sort();
    let mut out = Vec::new();
    for (bus, idx) in named {
        let Some(nic) = rdma_nic(idx) else { continue };
        let path = node.paths.iter().find(|p| {
            p.nic == Some(idx) && p.bus_id.as_deref().and_then(norm_bus).as_ref() == Some(&bus)
        });
        let line = node.gpu_nic.iter().find(|g| {
            nic_index(&g.nic) == Some(idx) && gpu_of(&g.gpu, ranks).as_ref() == Some(&bus)
        });
        let rank = ranks.iter().find(|(_, b)| *b == bus).map(|(r, _)| *r);
        let groups: Vec<&ConnGroup> = node
            .connections
            .iter()
            .filter(|c| Some(c.rank) == rank && c.nic == idx && c.net != "Socket")
            .collect();
        let gdr = if let Some(l) = line {
            Some(l.gdr)
        } else if !groups.is_empty() {
            Some(groups.iter().any(|c| c.gdr))
        } else {
            path.and_then(|p| match p.path.as_str() {
                "LOC" | "NVL" | "NVB" | "C2C" | "PIX" | "PXB" | "P2C" => Some(true),
                "PHB" | "SYS" if !env_set => Some(false),
                _ => None,
            })
        };
        out.push(Pair {
            bus,
            nic,
            path,
            line,
            groups,
            gdr,
        });
    }
    out
}

/// `NCCL 2.28.9 (/usr/lib/.../libnccl.so.2.28.9)`.
pub(super) fn nccl_named(run: &Run) -> String {
    let a = run.answer.as_ref();
    let version = a
        .and_then(|a| a.version.clone())
        .or_else(|| {
            run.explanation
                .as_ref()
                .and_then(|e| e.nodes.first())
                .and_then(|n| n.nccl.version.clone())
        })
        .map(|v| format!("{} {v}", run.library.name()))
        .unwrap_or_else(|| run.library.name().into());
    match run
        .library_file
        .as_deref()
        .or(a.and_then(|a| a.library.as_deref()))
    {
        Some(lib) => format!("{version} ({lib})"),
        None => version,
    }
}

/// The NCCL name of a placement level: NCCL has no NODE, a path between host bridges of one
/// NUMA node is PHB to it (its CPU nodes are NUMA domains, src/graph/topo.h).
pub(super) fn nccl_level(l: Level) -> &'static str {
    match l {
        Level::Node => "PHB",
        other => other.as_str(),
    }
}

/// The GDR level of a run of NCCL: the `NCCL_NET_GDR_LEVEL` its log says it had, where NCCL
/// reads the value, else the level in force on the node (`effective::policy`).
pub(super) fn run_policy(inv: &Inventory, config: &Config, node: &Node) -> Policy {
    match node
        .env
        .get("NCCL_NET_GDR_LEVEL")
        .map(|v| (v, gdr_level(v)))
    {
        Some((v, LevelValue::Named(limit) | LevelValue::Numbered(limit))) => Policy {
            limit,
            source: PolicySource::Run(v.clone()),
        },
        _ => effective::policy(inv, config),
    }
}

/// The GPU at bus ID `bus` and the RDMA device `nic`, as `check` places the pair.
pub(super) fn judged_pair(
    inv: &Inventory,
    judged: &Judgement,
    bus: &str,
    nic: &str,
) -> Option<Candidate> {
    let g = Bdf::parse(bus)?;
    let gi = inv.gpus.iter().position(|x| x.bdf == g)?;
    let ni = inv.rdma.iter().position(|d| d.name == nic)?;
    judged.pair(inv, gi, ni)
}

/// A pair's level as gdrdoctor states it against NCCL's: NCCL's own (`NODE (PHB to NCCL)`
/// from sysfs), with the sysfs level beside where a topology file makes them differ.
pub(super) fn shown_level(c: &Candidate) -> String {
    let sysfs = c.sysfs.as_ref().map(|r| r.level);
    match sysfs {
        Some(s) if c.lines.is_some() && s != c.level => {
            format!("{} in NCCL's topology file ({s} in sysfs)", c.level)
        }
        _ if c.level == Level::Node => format!("{} (PHB to NCCL)", c.level),
        _ => c.level.to_string(),
    }
}

/// NCCL's PCIe path types in its order (topoPathTypeStr, 2.26+ numbering without the others).
pub(super) fn pcie_rank(path: &str) -> Option<u8> {
    match path {
        "PIX" => Some(0),
        "PXB" => Some(1),
        "PHB" => Some(2),
        "SYS" => Some(3),
        _ => None,
    }
}

/// The peer-memory verdict, per NIC.
pub(super) struct PeerMemory {
    pub peermem: bool,
    dmabuf: bool,
    /// The library is RCCL and its DMA-BUF path is off: NCCL_DMABUF_ENABLE=1 is not among the
    /// settings it read.
    rccl_dmabuf_off: bool,
    /// A finding that says there is no path at all.
    none: Option<String>,
    /// NICs that cannot register dma-bufs.
    no_dmabuf: Vec<String>,
}

impl PeerMemory {
    fn of(findings: &[Finding]) -> PeerMemory {
        let has = |code: &str| {
            findings
                .iter()
                .any(|f| f.code == code && f.status == Status::Pass)
        };
        let (peermem, dmabuf) = (has("gdr-path-peermem"), has("gdr-path-dmabuf"));
        let none = (!peermem && !dmabuf)
            .then(|| {
                findings
                    .iter()
                    .find(|f| {
                        matches!(
                            f.code,
                            "peermem-not-loaded" | "peermem-not-registered" | "amd-no-gdr-path"
                        )
                    })
                    .map(|f| f.code.to_owned())
            })
            .flatten();
        PeerMemory {
            peermem,
            dmabuf,
            rccl_dmabuf_off: false,
            none,
            no_dmabuf: findings
                .iter()
                .filter(|f| f.code == "nic-no-dmabuf")
                .map(|f| f.subject.clone())
                .collect(),
        }
    }

    /// Whether gdrdoctor expects NCCL to enable GDR on this NIC, and why.
    pub fn expect(&self, nic: &str) -> (Option<bool>, String) {
        if self.peermem {
            (
                Some(true),
                "the peer-memory path (peer-memory: gdr-path-peermem)".into(),
            )
        } else if self.dmabuf && self.no_dmabuf.iter().any(|n| n == nic) {
            (
                Some(false),
                format!(
                    "only the DMA-BUF path, which {nic}'s driver cannot register (peer-memory: nic-no-dmabuf)"
                ),
            )
        } else if self.dmabuf && self.rccl_dmabuf_off {
            (
                Some(false),
                "only the DMA-BUF path, which RCCL takes only with NCCL_DMABUF_ENABLE=1, not set (peer-memory: gdr-path-dmabuf)".into(),
            )
        } else if self.dmabuf {
            (
                Some(true),
                "the DMA-BUF path (peer-memory: gdr-path-dmabuf)".into(),
            )
        } else if let Some(code) = &self.none {
            (
                Some(false),
                format!("no GPU memory path (peer-memory: {code})"),
            )
        } else {
            (None, "the GPU memory path is unknown (peer-memory)".into())
        }
    }
}

pub(super) fn norm_bus(s: &str) -> Option<String> {
    Bdf::parse(s.trim()).map(|b| b.to_string())
}

/// The PCI address of a GPU as NCCL named it in a GDR decision: a bus id (`1a000`), a rank
/// (`3`, 2.24-2.28, mapped through the child's rank order), `0-1b000 (rank 3)` (2.29).
fn gpu_of(gpu: &str, ranks: &[(u32, String)]) -> Option<String> {
    if let Some((id, _)) = gpu.split_once(" (rank ") {
        return bus_id_of(id);
    }
    if gpu.len() >= 4 && gpu.ends_with("000") && gpu.bytes().all(|b| b.is_ascii_hexdigit()) {
        return bus_id_of(gpu);
    }
    let rank: u32 = gpu.parse().ok()?;
    ranks
        .iter()
        .find(|(r, _)| *r == rank)
        .map(|(_, b)| b.clone())
}

/// The network NCCL used; failing a `Using network` line, sockets when every NIC it judged is one.
fn network_of(node: &Node) -> Option<String> {
    node.networks.first().cloned().or_else(|| {
        (!node.nics.is_empty() && node.nics.iter().all(|n| n.net == "Socket"))
            .then(|| "Socket".to_owned())
    })
}

/// Why NCCL used sockets, in its own terms.
fn socket_reason(node: &Node, e: &Explanation) -> String {
    if node.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1") {
        return "NCCL_IB_DISABLE=1 in the environment".into();
    }
    if let Some(v) = node.env.get("NCCL_NET") {
        return format!("NCCL_NET={v} in the environment");
    }
    if node
        .network_notes
        .iter()
        .any(|n| n.contains("No device found"))
    {
        return "no RDMA device (NET/IB : No device found)".into();
    }
    if let Some(w) = e.warnings.iter().find(|w| w.text.contains("NET/IB")) {
        return format!("its IB transport could not be used ({})", w.text);
    }
    if node
        .network_notes
        .iter()
        .any(|n| n.starts_with("Failed to initialize NET plugin"))
    {
        return "its IB transport failed to initialise".into();
    }
    "NCCL chose sockets".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_named_in_every_wording() {
        let ranks = vec![
            (0, "0000:18:00.0".to_owned()),
            (1, "0000:3b:00.0".to_owned()),
        ];
        assert_eq!(gpu_of("1", &ranks).as_deref(), Some("0000:3b:00.0"));
        assert_eq!(gpu_of("18000", &ranks).as_deref(), Some("0000:18:00.0"));
        assert_eq!(
            gpu_of("0-3b000 (rank 1)", &ranks).as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(gpu_of("7", &ranks), None);
    }
}
