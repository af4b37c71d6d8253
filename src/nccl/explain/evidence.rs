//! Evidence that narrows a cause, read across lines and nodes: GDR decided per side of a
//! connection pair (the send with GDR, the matching receive without), NCCL's job-level ring GDR
//! flag (2.24+), GDR through another NIC of the same GPU or node, a network plugin that failed,
//! the GID a queue pair was built on, and what GDR needs by library and release (RCCL's opt-in
//! DMA-BUF path; no DMA-BUF before NCCL 2.13).

use super::collector::{Collector, NodeAcc};
use super::release::Known;
use crate::model::nccl::explain::{ConnGroup, See, see};
use std::collections::{HashMap, HashSet};

/// A cause, as `diagnosis` keeps them: kind, subject, message, checks, fix.
pub(super) struct Cause {
    pub(super) kind: &'static str,
    pub(super) subject: String,
    pub(super) message: String,
    pub(super) see: Vec<See>,
    pub(super) fix: String,
}

/// What the other side of a receive said: a pair whose send went with GDR while this receive
/// went without.
#[derive(Debug, Clone)]
pub(super) struct OtherSide {
    pub(super) peer_rank: u32,
    pub(super) peer_nic: u32,
    pub(super) peer_node: usize,
}

/// Facts of the whole log a node's diagnosis reads: the receives whose send side had GDR, by
/// (node, receiving rank), and the node names by index.
pub(super) struct Context {
    pub(super) one_sided: HashMap<(usize, u32), OtherSide>,
    pub(super) names: Vec<String>,
    pub(super) node: usize,
}

impl Context {
    /// The receives (node, rank) without GDR from a peer whose sends to that rank all had GDR,
    /// where no receive of the rank from that peer had it: GDR was decided per side and the
    /// receiving side lacked it. Read from the connection groups after the log (each group's
    /// peers), so the lines themselves cost nothing more.
    pub(super) fn one_sided(c: &Collector) -> HashMap<(usize, u32), OtherSide> {
        // (sender, receiver) -> the sender's node and NIC, for sends with GDR; and the pairs
        // seen without it on the send side, or with it on the receive side.
        let mut sent_gdr: HashMap<(u32, u32), (usize, u32)> = HashMap::new();
        let mut spoilt: HashSet<(u32, u32)> = HashSet::new();
        for (n, node) in c.nodes.iter().enumerate() {
            for (k, a) in &node.conns {
                for &peer in &a.peers {
                    if a.sends > 0 {
                        if k.gdr {
                            sent_gdr.entry((k.rank, peer)).or_insert((n, k.nic));
                        } else {
                            spoilt.insert((k.rank, peer));
                        }
                    }
                    if a.receives > 0 && k.gdr {
                        spoilt.insert((peer, k.rank));
                    }
                }
            }
        }
        let mut out = HashMap::new();
        for (n, node) in c.nodes.iter().enumerate() {
            for (k, a) in node.conns.iter().filter(|(k, a)| !k.gdr && a.receives > 0) {
                for &peer in &a.peers {
                    let pair = (peer, k.rank);
                    if let (Some(&(peer_node, peer_nic)), false) =
                        (sent_gdr.get(&pair), spoilt.contains(&pair))
                    {
                        out.entry((n, k.rank)).or_insert(OtherSide {
                            peer_rank: peer,
                            peer_nic,
                            peer_node,
                        });
                    }
                }
            }
        }
        out
    }
}

/// "RCCL 2.21.5" where the library is RCCL, else NCCL's own description.
pub(super) fn library(acc: &NodeAcc, known: Known) -> String {
    let d = known.describe();
    if acc.rccl {
        d.replacen("NCCL", "RCCL", 1)
    } else {
        d
    }
}

/// The receive without GDR whose send had it: the receiving node lacks what the sending one
/// has.
pub(super) fn gdr_one_side(ctx: &Context, g: &ConnGroup, other: &OtherSide) -> Cause {
    let here = &ctx.names[ctx.node];
    let there = &ctx.names[other.peer_node];
    let same = ctx.node == other.peer_node;
    let whose = if same {
        format!(
            "the node of rank {} (this log does not say which host printed it)",
            g.rank
        )
    } else {
        format!("{here}, the node of rank {}", g.rank)
    };
    let peer = if same {
        format!("rank {}", other.peer_rank)
    } else {
        format!("rank {} on {there}", other.peer_rank)
    };
    Cause {
        kind: "gdr-one-side",
        subject: format!("rank {} receiving on NET/{}/{}", g.rank, g.net, g.nic),
        message: format!(
            "GDR is decided per side: {peer} sent to rank {} with GDR (NET/{}/{}/GDRDMA), and rank {} received without it (NET/{}/{}). What GDR needs is missing on {whose}: its GPU memory path (nvidia_peermem or nv_peer_mem loaded and registered, or DMA-BUF), or its GPU within NCCL_NET_GDR_LEVEL of NIC {}",
            g.rank, g.net, other.peer_nic, g.rank, g.net, g.nic, g.nic
        ),
        see: vec![
            see("peer-memory", "peermem-not-loaded"),
            see("peer-memory", "peermem-not-registered"),
            see("pcie-placement", "gpu-nic-too-far"),
        ],
        fix: format!(
            "On the node of rank {}: `gdrdoctor check --select peer-memory,pcie-placement` tells which; where the peer-memory module is missing, `modprobe nvidia-peermem` (and `echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf`), as on the node of rank {}, whose GDR works.",
            g.rank, other.peer_rank
        ),
    }
}

/// `Connected all rings, use ring PXN x GDR 0` where this node's own NET connections all used
/// GDR (or it has none, on a job across nodes): NCCL combined the flag over every rank, so
/// another rank's ring went without GDR.
pub(super) fn gdr_off_elsewhere(with_gdr: u64) -> Cause {
    let own = if with_gdr > 0 {
        format!("this node's {with_gdr} NET connection(s) in the log all used GDR, so ")
    } else {
        "this node's lines hold no NET connection, so ".to_owned()
    };
    Cause {
        kind: "gdr-off-elsewhere",
        subject: "ring GDR flag (`use ring ... GDR 0`)".to_owned(),
        message: format!(
            "NCCL printed `Connected all rings, use ring PXN ... GDR 0`: from 2.24 it combines this flag over every rank of the communicator (a ring NET connection without GDR on any rank makes it 0), and {own}another rank's ring went through the network without GDR"
        ),
        see: Vec::new(),
        fix: "GDR off on another rank: get that rank's log. Collect NCCL_DEBUG=INFO from every node (NCCL_DEBUG_FILE=/tmp/nccl.%h.%p writes one file per process) and run `gdrdoctor nccl explain` on them together: the rank whose connections lack /GDRDMA, and why, is in its own lines.".to_owned(),
    }
}

/// A connection without GDR where the same GPU (rank), or another GPU of the node, did GDR
/// through another NIC: the GPU's memory path is there, so only what is specific to this NIC
/// remains.
pub(super) fn nic_specific(g: &ConnGroup, via: (u32, u32, u64)) -> Cause {
    let (rank, nic, n) = via;
    let who = if rank == g.rank {
        format!(
            "the same GPU (rank {rank}) did GDR through NIC {nic} ({n} connection(s) with /GDRDMA), so its memory path (peer memory or DMA-BUF) works"
        )
    } else {
        format!(
            "rank {rank} on this node did GDR through NIC {nic} ({n} connection(s) with /GDRDMA), so the node's GPU memory path (peer memory or DMA-BUF) works"
        )
    };
    Cause {
        kind: "nic-specific",
        subject: format!("NET/{}/{}", g.net, g.nic),
        message: format!(
            "NCCL used NIC {} without GDR for rank {}, while {who}: what remains is specific to NIC {}: its distance from this GPU beyond NCCL_NET_GDR_LEVEL, or its driver's registration of GPU memory (a NIC whose driver has no dma-buf support)",
            g.nic, g.rank, g.nic
        ),
        see: vec![
            see("pcie-placement", "gpu-nic-too-far"),
            see("peer-memory", "nic-no-dmabuf"),
        ],
        fix: format!(
            "`gdrdoctor topo` shows how far NIC {} is from this GPU (and `gdrdoctor check --select pcie-placement,peer-memory` judges it); rerun with NCCL_DEBUG_SUBSYS=INIT,NET for NCCL's own line on this GPU-NIC pair.",
            g.nic
        ),
    }
}

/// The GDR evidence of a node: the first other group on it that used GDR, preferring the same
/// rank (GPU): (rank, NIC, connections).
pub(super) fn gdr_elsewhere(groups: &[ConnGroup], g: &ConnGroup) -> Option<(u32, u32, u64)> {
    let with = |same: bool| {
        groups
            .iter()
            .filter(|o| o.gdr && o.nic != g.nic && o.net == g.net && (o.rank == g.rank) == same)
            .map(|o| (o.rank, o.nic, o.sends + o.receives))
            .next()
    };
    with(true).or_else(|| with(false))
}

/// A network plugin that failed to initialize: NCCL then goes on without it (sockets, or
/// another network), whatever NCCL_IB_DISABLE says.
pub(super) fn plugin_failed(acc: &NodeAcc) -> Cause {
    let first = acc.plugin_failed.first().map(String::as_str).unwrap_or("");
    let ofi = first.starts_with("NET/OFI");
    let plugin = if ofi {
        "aws-ofi-nccl (NET/OFI)"
    } else {
        "the network plugin"
    };
    let ib_off = acc.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1");
    let mut message = format!(
        "{plugin} failed to initialize: `{first}`; NCCL went on without it{}",
        if acc.networks.iter().any(|n| n == "Socket") {
            ", over sockets (TCP), which never do GDR"
        } else {
            ""
        }
    );
    if let Some(gdr) = acc.plugin_gdr_off.first() {
        message.push_str(&format!("; before that it said `{gdr}`"));
    }
    if ib_off {
        message.push_str(". NCCL_IB_DISABLE=1 is usual beside this plugin (EFA is not an InfiniBand NIC) and is not the cause");
    }
    let fix = if ofi {
        "Find why the plugin failed: its warnings before this one (with FI_LOG_LEVEL=warn, Libfabric's: `fi_getinfo: provider efa output empty list` means no EFA device is visible). Check that the EFA devices are passed into the job's container (/dev/infiniband/uverbs*, the Kubernetes EFA device plugin's vpc.amazonaws.com/efa resource), that RLIMIT_MEMLOCK is unlimited, and that the plugin and Libfabric come from one EFA installer. `gdrdoctor check --select rdma-link,rdma-access` on the node says whether the device is there and usable."
    } else {
        "Find why the plugin failed (its warnings before this one); `gdrdoctor check --select rdma-link,rdma-access` on the node says whether its RDMA devices are there and usable."
    };
    Cause {
        kind: "plugin-failed",
        subject: format!("network plugin {plugin}"),
        message,
        see: vec![
            see("rdma-link", "rdma-no-device"),
            see("rdma-access", "uverbs-missing"),
            see("rdma-access", "memlock-low"),
        ],
        fix: fix.to_owned(),
    }
}

/// NCCL's print of a GID's subnet prefix for fe80::/64 (the link-local prefix): the first 8
/// bytes of the GID read as a little-endian number (src/transport/net_ib.cc `%lX`).
pub(super) const LINK_LOCAL_PREFIX: &str = "80FE";

/// The link-local GIDs the node's queue pairs were built on: `(device, index)`.
pub(super) fn link_local_gids(acc: &NodeAcc) -> Vec<(String, i64)> {
    acc.gids
        .iter()
        .filter(|(_, (_, prefix))| prefix.eq_ignore_ascii_case(LINK_LOCAL_PREFIX))
        .map(|(dev, (index, _))| (dev.clone(), *index))
        .collect()
}

/// What the node's network notes say of a link-local GID.
pub(super) fn gid_note(acc: &NodeAcc, dev: &str, index: i64) -> String {
    let set = match acc.env.get("NCCL_IB_GID_INDEX") {
        Some(v) => format!(" (NCCL_IB_GID_INDEX={v} in the environment)"),
        None => String::new(),
    };
    format!(
        "NCCL device {dev}: queue pairs built on GID {index}{set}, a link-local GID (fe80::/64, printed `{LINK_LOCAL_PREFIX}/...`): RoCE v2 between nodes needs the port's IPv4 GID"
    )
}

/// What a QP-setup warning means when a link-local GID was in use.
pub(super) fn modify_qp_meaning(
    text: &str,
    link_local: Option<&(String, i64)>,
) -> Option<(String, Vec<See>)> {
    if !text.contains("ibv_modify_qp") {
        return None;
    }
    let gid = match link_local {
        Some((dev, index)) => format!(
            "The QP was built on GID {index} of NCCL device {dev}, which is link-local (fe80::/64): it does not route between nodes, so moving the QP to RTR fails. Set NCCL_IB_GID_INDEX to the port's RoCE v2 IPv4 GID index (`gdrdoctor nccl` prints it), or leave it unset on NCCL 2.21 and later, which picks that GID itself"
        ),
        None => "The queue pair could not be connected: on RoCE usually the GID index (a link-local GID, or an index the port lacks: NVIDIA/nccl#718), on InfiniBand the subnet manager".to_owned(),
    };
    Some((
        gid,
        vec![
            see("rdma-gid", "roce-v2-ipv4"),
            see("rdma-gid", "roce-no-ip-gid"),
        ],
    ))
}

/// What GDR needs on this node, by library and release, where the log leaves it unverified:
/// RCCL's DMA-BUF path is opt-in; before NCCL 2.13 there is no DMA-BUF path at all.
pub(super) fn requirements(acc: &NodeAcc, known: Known, rdma_nics: bool) -> Vec<String> {
    let mut out = Vec::new();
    if acc.rccl {
        match (&acc.peermem_found, &acc.rccl_dmabuf_off) {
            (Some(path), _) => out.push(format!(
                "RCCL found AMD's peer memory (`{path}`): its GDR path through the NIC is there"
            )),
            (None, Some(off)) => out.push(format!(
                "RCCL's DMA-BUF path is opt-in and was off (`{off}`): GDR here needs AMD's peer memory (RCCL looks for /sys/kernel/mm/memory_peers/amdkfd/version, or ib_register_peer_memory_client in /proc/kallsyms on kernels 6.4 and later), or NCCL_DMABUF_ENABLE=1 for the DMA-BUF path (amdgpu with CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA)"
            )),
            (None, None) => {}
        }
    } else if rdma_nics && known.before(13) {
        out.push(format!(
            "{}: no DMA-BUF path before 2.13: GDR here needs the peer-memory module, nvidia_peermem (driver R470 and later) or nv_peer_mem, loaded and registered with the RDMA core (/sys/kernel/mm/memory_peers/nv_mem/version)",
            known.describe()
        ));
    }
    out
}

/// The RCCL wording of what the GPU memory path is, for causes that name it.
pub(super) fn rccl_memory_path(acc: &NodeAcc) -> String {
    let dmabuf = if acc.rccl_dmabuf_off.is_some() {
        "its DMA-BUF path was off (opt-in: NCCL_DMABUF_ENABLE=1)"
    } else {
        "its DMA-BUF path (NCCL_DMABUF_ENABLE=1) was not reported in use"
    };
    format!(
        "RCCL found no AMD peer memory (/sys/kernel/mm/memory_peers/amdkfd/version, or ib_register_peer_memory_client on kernels 6.4 and later), and {dmabuf}"
    )
}
