//! Why GDR was not used: for each connection group without it (and, in a log without
//! connections, each decision against it), the cause in NCCL's terms, the gdrdoctor check and
//! code that explain it, and the fix.

use super::collector::{GpuAcc, HcaAcc, HcaKey, NodeAcc};
use super::evidence::{self, Cause, Context};
use super::release::{Known, level_source, names, tables_for};
use crate::model::nccl::explain::{ConnGroup, Diagnosis, Node, See, nic_index, see};
use crate::nccl::levels;
use crate::parse::nccl_log::{Era, HcaVia, Version};
use std::collections::BTreeSet;

/// The ways a GPU can be named in a GDR decision line, reduced to keys a connection can match.
fn gpu_keys(gpu: &str) -> Vec<String> {
    let mut keys = Vec::new();
    // 2.29: `0-1b000 (rank 3)`.
    if let Some((id, rank)) = gpu.split_once(" (rank ") {
        if let Some(b) = id.rsplit('-').next() {
            keys.push(format!("bus:{}", b.trim_start_matches('0')));
        }
        keys.push(format!("rank:{}", rank.trim_end_matches(')')));
    } else if let Some((cuda, _)) = gpu.split_once('[') {
        // 2.4: `cudaDev[nvmlDev]`.
        keys.push(format!("cuda:{cuda}"));
    } else if gpu.len() >= 4 && gpu.ends_with("000") {
        keys.push(format!("bus:{}", gpu.trim_start_matches('0')));
    } else {
        keys.push(format!("rank:{gpu}"));
    }
    keys
}

fn conn_keys(acc: &NodeAcc, g: &ConnGroup) -> Vec<String> {
    let mut keys = vec![format!("rank:{}", g.rank)];
    if let Some(d) = g.cuda_dev {
        keys.push(format!("cuda:{d}"));
        if let Some(b) = acc.dev_bus.get(&d) {
            keys.push(format!("bus:{}", b.trim_start_matches('0')));
        }
    }
    if let Some(b) = &g.bus {
        keys.push(format!("bus:{}", b.trim_start_matches('0')));
    }
    keys
}

fn is_socket(net: &str) -> bool {
    net == "Socket"
}

pub(super) fn diagnose(
    acc: &NodeAcc,
    known: Known,
    node: &Node,
    ctx: &Context,
    out: &mut Vec<Diagnosis>,
    hints: &mut BTreeSet<String>,
) {
    let mut found: Vec<(Cause, u64, BTreeSet<u32>)> = Vec::new();
    let mut add = |cause: Cause, n: u64, rank: Option<u32>| match found
        .iter_mut()
        .find(|(c, _, _)| c.kind == cause.kind && c.subject == cause.subject)
    {
        Some((_, count, ranks)) => {
            *count += n;
            ranks.extend(rank);
        }
        None => found.push((cause, n, rank.into_iter().collect())),
    };
    let without: Vec<&ConnGroup> = node.connections.iter().filter(|g| !g.gdr).collect();
    for g in &without {
        let cause = cause_of(acc, known, g, node, ctx, hints);
        add(cause, g.sends + g.receives, Some(g.rank));
    }
    // NCCL's job-level ring flag (2.24+) says another rank went without GDR, where this
    // node's own connections all had it.
    if acc.rings_gdr.contains(&0) && without.is_empty() && !single_node(acc) {
        let with: u64 = node.connections.iter().map(|g| g.sends + g.receives).sum();
        add(evidence::gdr_off_elsewhere(with), 0, None);
    }
    // NCCL's decisions against GDR where the log shows no connection at all: they are still
    // why GDR would not be used, and the only answer an init-only log has.
    if node.connections.is_empty() {
        none_connected(acc, known, node, &mut add);
    }
    merge(found, node, out);
    if known.since(30) && !without.is_empty() {
        hints.insert("NCCL 2.30 and later print the GPU-NIC distance decision only at NCCL_DEBUG=TRACE; the per-NIC line (`GPU Direct RDMA Enabled|Disabled for HCA`) is still INFO under NCCL_DEBUG_SUBSYS=NET.".to_owned());
    }
}

/// The node's communicators stayed on it: `nNodes 1` on every communicator line that says.
pub(super) fn single_node(acc: &NodeAcc) -> bool {
    !acc.nnodes.is_empty() && acc.nnodes.iter().all(|&n| n == 1)
}

/// What a node without any NET connection line says against GDR: sockets (or the plugin that
/// failed before them), distance decisions, NICs without a GPU memory path, a plugin's own.
fn none_connected(
    acc: &NodeAcc,
    known: Known,
    node: &Node,
    add: &mut impl FnMut(Cause, u64, Option<u32>),
) {
    // Sockets: NCCL said so, or every NIC it judged is a socket, or the IB transport found
    // nothing and no other network was named (2.4-2.5 print no `Using network` line).
    let ib_gone = (acc.no_device.contains("IB") || acc.init_failed.contains("IB"))
        && node.networks.iter().all(|n| is_socket(n))
        && !acc.nics.keys().any(|(net, _)| !is_socket(net));
    if node.networks.iter().any(|n| is_socket(n))
        || (!acc.hcas.is_empty() && acc.hcas.keys().all(|(net, _, _)| is_socket(net)))
        || ib_gone
    {
        if acc.plugin_failed.is_empty() {
            add(sockets(acc, "Socket"), 0, None);
        } else {
            add(evidence::plugin_failed(acc), 0, None);
        }
    } else {
        for ((gpu, nic), g) in &acc.gpus {
            if !g.enabled {
                add(distance(acc, known, gpu, nic, g), 0, None);
            }
        }
        let off: Vec<_> = acc
            .hcas
            .iter()
            .filter(|(k, h)| !h.enabled && !is_socket(&k.0))
            .collect();
        if !off.is_empty() {
            add(no_peer_memory(acc, known, &off_subject(&off)), 0, None);
        }
        if !acc.plugin_failed.is_empty() {
            add(evidence::plugin_failed(acc), 0, None);
        } else if !acc.plugin_gdr_off.is_empty() {
            add(
                plugin_off(acc, node.networks.first().map(String::as_str)),
                0,
                None,
            );
        }
    }
}

type Found = Vec<(Cause, u64, BTreeSet<u32>)>;

/// The node's causes into the diagnoses: the same cause, word for word, on another node is the
/// same diagnosis.
fn merge(found: Found, node: &Node, out: &mut Vec<Diagnosis>) {
    for (c, n, ranks) in found {
        // The same cause, word for word, on another node is the same diagnosis.
        match out.iter_mut().find(|d| {
            d.cause == c.kind && d.subject == c.subject && d.message == c.message && d.fix == c.fix
        }) {
            Some(d) => {
                d.nodes.push(node.name.clone());
                d.connections += n;
                d.ranks.extend(ranks);
                d.ranks.sort_unstable();
                d.ranks.dedup();
            }
            None => out.push(Diagnosis {
                nodes: vec![node.name.clone()],
                cause: c.kind,
                subject: c.subject,
                message: c.message,
                see: c.see,
                fix: c.fix,
                connections: n,
                ranks: ranks.into_iter().collect(),
            }),
        }
    }
}

fn off_subject(off: &[(&HcaKey, &HcaAcc)]) -> String {
    let mut names: Vec<String> = off
        .iter()
        .map(|((_, i, gpu), h)| match gpu {
            Some(g) => format!("GPU {g} / NIC {i} '{}'", h.name),
            None => format!("NIC {i} '{}'", h.name),
        })
        .collect();
    names.dedup();
    if names.len() > 4 {
        let n = names.len();
        names.truncate(3);
        names.push(format!("{} more", n - 3));
    }
    names.join(", ")
}

fn cause_of(
    acc: &NodeAcc,
    known: Known,
    g: &ConnGroup,
    node: &Node,
    ctx: &Context,
    hints: &mut BTreeSet<String>,
) -> Cause {
    if is_socket(&g.net) {
        if !acc.plugin_failed.is_empty() {
            return evidence::plugin_failed(acc);
        }
        return sockets(acc, &g.net);
    }
    if let Some(c) = decided(acc, known, g) {
        return c;
    }
    // The other side of the pair had GDR: this side's node lacks it.
    if g.sends == 0 {
        if let Some(other) = ctx.one_sided.get(&(ctx.node, g.rank)) {
            return evidence::gdr_one_side(ctx, g, other);
        }
    }
    if !acc.plugin_gdr_off.is_empty() {
        return plugin_off(acc, Some(&g.net));
    }
    // GDR through another NIC of this GPU (or of this node) rules its memory path out.
    if let Some(via) = evidence::gdr_elsewhere(&node.connections, g) {
        return evidence::nic_specific(g, via);
    }
    if !acc.net_subsys {
        hints.insert("Some NET connections went without GDR and the log has no `GPU Direct RDMA` line saying why: rerun with NCCL_DEBUG_SUBSYS=INIT,NET (or ALL) to get NCCL's decision per NIC and per GPU-NIC pair.".to_owned());
    }
    not_explained(acc, known, g)
}

/// NCCL's own decision against GDR for this connection's GPU and NIC: the distance line, GDR
/// for receives only, the NIC's (or the process's) peer-memory test.
fn decided(acc: &NodeAcc, known: Known, g: &ConnGroup) -> Option<Cause> {
    let keys = conn_keys(acc, g);
    // The GPU-NIC decision for this GPU and NIC; failing a GPU match, the only one for the NIC.
    let for_nic: Vec<(&(String, String), &GpuAcc)> = acc
        .gpus
        .iter()
        .filter(|((_, nic), _)| nic_index(nic) == Some(g.nic))
        .collect();
    let matched = for_nic
        .iter()
        .find(|((gpu, _), _)| gpu_keys(gpu).iter().any(|k| keys.contains(k)))
        .or_else(|| {
            let off: Vec<_> = for_nic.iter().filter(|(_, a)| !a.enabled).collect();
            (off.len() == 1 && for_nic.len() == 1).then(|| off[0])
        });
    if let Some(((gpu, nic), a)) = matched {
        if !a.enabled {
            return Some(distance(acc, known, gpu, nic, a));
        }
        if g.receives == 0 && a.read == Some(false) {
            return Some(read_off(gpu, nic, g));
        }
    }
    // The NIC's own decision; failing that, a node-wide one (the peer-memory test is one per
    // process, whatever the NIC).
    let hca_off = acc
        .hcas
        .iter()
        .filter(|((net, _, _), h)| !h.enabled && !is_socket(net))
        .collect::<Vec<_>>();
    let this = hca_off
        .iter()
        .filter(|((_, i, _), _)| *i == g.nic)
        .copied()
        .collect::<Vec<_>>();
    let hca_on_this = acc
        .hcas
        .iter()
        .any(|((net, i, _), h)| h.enabled && *i == g.nic && !is_socket(net));
    if !this.is_empty() {
        return Some(no_peer_memory(acc, known, &off_subject(&this)));
    }
    if !hca_off.is_empty() && !hca_on_this {
        // NCCL tests for peer memory once per process, whatever the NIC.
        let subject = format!("NIC {}, like {}", g.nic, off_subject(&hca_off));
        return Some(no_peer_memory(acc, known, &subject));
    }
    None
}

/// A connection without GDR and nothing in the log that says why: what to rerun with, and
/// what GDR needs in this library and release.
fn not_explained(acc: &NodeAcc, known: Known, g: &ConnGroup) -> Cause {
    let mut message = if acc.net_subsys {
        format!(
            "NCCL used NIC {} without GDR and printed no decision against it for this GPU",
            g.nic
        )
    } else {
        format!(
            "NCCL used NIC {} without GDR; the log has no NET-subsystem line with NCCL's reason",
            g.nic
        )
    };
    let mut see_list = vec![
        see("peer-memory", "peermem-not-loaded"),
        see("pcie-placement", "gpu-nic-too-far"),
    ];
    let mut fix = "Rerun with NCCL_DEBUG_SUBSYS=INIT,NET for NCCL's reason; on the node, `gdrdoctor check` says whether a GPU memory path exists (peer-memory) and how far each GPU is from its NIC (pcie-placement).".to_owned();
    if acc.rccl {
        message.push_str(&format!(
            ". {}: {}",
            evidence::library(acc, known),
            evidence::rccl_memory_path(acc)
        ));
        see_list[0] = see("peer-memory", "amd-no-gdr-path");
        fix.push_str(" For RCCL: NCCL_DMABUF_ENABLE=1 turns its DMA-BUF path on; its peer-memory path needs amdkfd's peer memory (memory_peers/amdkfd) or a kernel 6.4+ with ib_register_peer_memory_client.");
    } else if known.before(13) {
        message.push_str(&format!(
            ". {} has no DMA-BUF path (2.13 added it): its GDR needs the peer-memory module, nvidia_peermem (driver R470 and later) or nv_peer_mem, loaded and registered on this node",
            known.describe()
        ));
        see_list.insert(1, see("peer-memory", "peermem-not-registered"));
    }
    Cause {
        kind: "not-explained",
        subject: format!("NET/{}/{}", g.net, g.nic),
        message,
        see: see_list,
        fix,
    }
}

fn distance(acc: &NodeAcc, known: Known, gpu: &str, nic: &str, g: &GpuAcc) -> Cause {
    let (tables, assumed) = tables_for(acc, known, g);
    let d = names(&tables, g.distance);
    let l = names(&tables, g.level);
    let op = if g.inclusive { ">=" } else { ">" };
    let env = acc.env.get("NCCL_NET_GDR_LEVEL");
    let source = match (env, level_source(acc, &tables, g)) {
        (Some(v), _) => format!("NCCL_NET_GDR_LEVEL={v} in the environment"),
        (None, "default") if assumed => {
            "taken as NCCL's default level (the log has no version line)".to_owned()
        }
        (None, "default") => "NCCL's default".to_owned(),
        _ => "not NCCL's default: NCCL_NET_GDR_LEVEL (or NCCL_NET_GDR_C2C) was set".to_owned(),
    };
    let subject = format!("GPU {gpu} -> NIC {nic}");
    // Would the default level have allowed it? Then the environment is the cause.
    let within_default = tables.iter().all(|t| {
        levels::number(t, t.default_level).is_some_and(|def| {
            if g.inclusive {
                g.distance < def
            } else {
                g.distance <= def
            }
        })
    });
    let pxn = g
        .pxn_via
        .as_ref()
        .map(|p| format!(" (through PXN: the distance of GPU/{p})"))
        .unwrap_or_default();
    let numeric = g.inclusive;
    if env.is_some() && within_default {
        let default = tables.first().map(|t| t.default_level).unwrap_or("PXB");
        return Cause {
            kind: "level-from-env",
            subject,
            message: format!(
                "GDR disabled: distance {} ({d}) {op} level {} ({l}){pxn}; the level is {source}, stricter than NCCL's default {default}",
                g.distance, g.level
            ),
            see: Vec::new(),
            fix: format!(
                "Unset NCCL_NET_GDR_LEVEL in the job's environment (or /etc/nccl.conf, ~/.nccl.conf), or raise it to at least {}. `gdrdoctor nccl` prints the settings this node needs.",
                if numeric {
                    (g.distance + 1).to_string()
                } else {
                    d.clone()
                }
            ),
        };
    }
    Cause {
        kind: "distance",
        subject,
        message: format!(
            "GDR disabled by distance: {} ({d}) {op} level {} ({l}, {source}){pxn}: NCCL stages this GPU's network traffic through host memory",
            g.distance, g.level
        ),
        see: vec![see("pcie-placement", "gpu-nic-too-far")],
        fix: format!(
            "Put the GPU and its NIC under one PCIe switch (how HGX boards pair them: check the slot map), or accept GDR over this path for the job with NCCL_NET_GDR_LEVEL={}; through the CPU it can be slower than staging, so measure with `gdrdoctor gdr-test`. `gdrdoctor topo` shows every GPU-NIC distance.",
            if numeric {
                format!(
                    "{} (this NCCL takes a number, and needs it above the distance)",
                    g.distance + 1
                )
            } else {
                d.split(' ').next().unwrap_or("SYS").to_owned()
            }
        ),
    }
}

fn read_off(gpu: &str, nic: &str, g: &ConnGroup) -> Cause {
    Cause {
        kind: "gdr-read-off",
        subject: format!("GPU {gpu} -> NIC {nic}, sends"),
        message: format!(
            "NCCL enabled GDR for this GPU with `read 0`: rank {} receives into GPU memory directly but sends through host memory (NCCL turns GDR reads on by default only on GPUs with NVLink, or from compute capability 8.0 in later releases)",
            g.rank
        ),
        see: Vec::new(),
        fix: "Nothing is broken: this is NCCL's policy. NCCL_NET_GDR_READ=1 makes sends use GDR as well; measure before keeping it.".to_owned(),
    }
}

/// The peer-memory paths NCCL looks for, per release (src/transport/net_ib.cc
/// `ncclIbGdrSupport`): `nv_mem` always; `nvidia-peermem` 2.11-2.21; `nv_mem_nc` from 2.22;
/// the module itself (`/sys/module/nvidia_peermem/version`) from 2.23. Those the releases in
/// question may not all have say from when.
fn peermem_paths(known: Known) -> String {
    let era = known.era();
    let paths: [(&str, Era); 4] = [
        (
            "/sys/kernel/mm/memory_peers/nv_mem/version",
            Era::new(Version::new(2, 0, 0), Version::new(99, 0, 0)),
        ),
        (
            ".../memory_peers/nvidia-peermem/version",
            Era::new(Version::new(2, 11, 0), Version::new(2, 22, 0)),
        ),
        (
            ".../memory_peers/nv_mem_nc/version",
            Era::new(Version::new(2, 22, 0), Version::new(99, 0, 0)),
        ),
        (
            "/sys/module/nvidia_peermem/version",
            Era::new(Version::new(2, 23, 0), Version::new(99, 0, 0)),
        ),
    ];
    let mut out = Vec::new();
    for (path, when) in paths {
        let Some(overlap) = when.intersect(era) else {
            continue;
        };
        if overlap == era {
            out.push(path.to_owned());
        } else {
            out.push(format!("{path} (NCCL {when})"));
        }
    }
    out.join(", ")
}

fn no_peer_memory(acc: &NodeAcc, known: Known, subject: &str) -> Cause {
    if acc.rccl {
        return rccl_no_memory_path(acc, known, subject);
    }
    let via = acc.hcas.values().find(|h| !h.enabled).map(|h| h.via);
    let who = known.describe();
    let paths = peermem_paths(known);
    let mut see_list = vec![see("peer-memory", "peermem-not-loaded")];
    let mut message = match via {
        Some(HcaVia::NoModule) | Some(HcaVia::NoModuleOrGpu) => format!(
            "GDR disabled for the NIC: `(no module)`: {who} found no peer-memory module (none of {paths} exists; they appear when nvidia_peermem or nv_peer_mem is loaded and registered with the RDMA core), and this NCCL has no DMA-BUF path (2.13+)"
        ),
        _ => format!(
            "GDR disabled for the NIC: {who} found neither a peer-memory module (it looks for {paths}) nor a DMA-BUF path"
        ),
    };
    if !matches!(via, Some(HcaVia::NoModule) | Some(HcaVia::NoModuleOrGpu)) && !known.before(13) {
        if !acc.dmabuf.is_empty() {
            message.push_str(": the GPUs export dma-bufs (`DMA-BUF is available on GPU device`), so the NIC side refused: a kernel before 5.12, a NIC driver without dma-buf support, rdma-core before 34, or NCCL_DMABUF_ENABLE=0");
            see_list.insert(0, see("peer-memory", "nic-no-dmabuf"));
            see_list.push(see("rdma-access", "libibverbs-no-dmabuf"));
        } else if acc.init_subsys && known.since(13) {
            message.push_str(": no `DMA-BUF is available on GPU device` line, so the GPU driver offers no dma-buf (the proprietary kernel module, a driver before R515, or CUDA before 11.7)");
        } else {
            message.push_str(" (whether the GPUs offer DMA-BUF, NCCL prints under INIT: `DMA-BUF is available on GPU device N`)");
        }
    }
    if acc.env.get("NCCL_DMABUF_ENABLE").is_some_and(|v| v == "0") {
        message.push_str("; NCCL_DMABUF_ENABLE=0 is set, which turns the DMA-BUF path off");
    }
    // NVIDIA/nccl#1676: before 2.23, NCCL does not take a loaded nvidia_peermem for one unless
    // it registered under /sys/kernel/mm/memory_peers.
    if !known.since(23) {
        message.push_str(". Before NCCL 2.23 a loaded nvidia_peermem counts only when it registered with the RDMA core's peer-memory API (NVIDIA/nccl#1676)");
        see_list.push(see("peer-memory", "peermem-not-registered"));
    }
    let dmabuf_fix = if known.before(13) {
        " NCCL 2.13 and later can also use DMA-BUF (NVIDIA's open kernel modules R515+, Linux 5.12+), with no extra module."
    } else {
        " Or use the DMA-BUF path: NVIDIA's open kernel modules (R515+) on Linux 5.12+ with rdma-core 34+, no extra module."
    };
    Cause {
        kind: "no-peer-memory",
        subject: subject.to_owned(),
        message,
        see: see_list,
        fix: format!(
            "Load the peer-memory module: `modprobe nvidia-peermem` now, `echo nvidia-peermem > /etc/modules-load.d/nvidia-peermem.conf` for every boot; it works only on an RDMA stack with the peer-memory API (DOCA-OFED/MLNX_OFED).{dmabuf_fix} `gdrdoctor check --select peer-memory` on the node tells which path it has."
        ),
    }
}

/// RCCL's NIC without GDR: its peer-memory test is AMD's (ROCm/rccl src/transport/net_ib.cc:
/// memory_peers/amdkfd, or ib_register_peer_memory_client on kernels 6.4+), and its DMA-BUF
/// path is opt-in.
fn rccl_no_memory_path(acc: &NodeAcc, known: Known, subject: &str) -> Cause {
    Cause {
        kind: "no-peer-memory",
        subject: subject.to_owned(),
        message: format!(
            "GDR disabled for the NIC: {}: {}",
            evidence::library(acc, known),
            evidence::rccl_memory_path(acc)
        ),
        see: vec![see("peer-memory", "amd-no-gdr-path")],
        fix: "Set NCCL_DMABUF_ENABLE=1 where the DMA-BUF path is available (amdgpu with CONFIG_DMABUF_MOVE_NOTIFY and CONFIG_PCI_P2PDMA, rdma-core 34+, a NIC driver with dma-buf support), or provide AMD's peer memory (amdgpu-dkms with MLNX_OFED's peer-memory API, or a kernel 6.4+). `gdrdoctor check --select peer-memory` on the node tells which path it has.".to_owned(),
    }
}

fn sockets(acc: &NodeAcc, net: &str) -> Cause {
    let ib_off = acc.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1");
    let (message, see_list, fix) = if acc.no_verbs {
        (
            "NCCL used sockets (TCP), which never do GDR: `Failed to open libibverbs.so[.1]`: the job's environment has no libibverbs (rdma-core), so NCCL could not even look for an RDMA NIC".to_owned(),
            vec![
                see("rdma-access", "libibverbs-missing"),
                see("rdma-link", "rdma-no-device"),
            ],
            "Install rdma-core's libibverbs where the job runs (Debian/Ubuntu: libibverbs1 and ibverbs-providers; RHEL: rdma-core and libibverbs; in a container image too), with /dev/infiniband passed in; `gdrdoctor check --select rdma-access,rdma-link` on the node says what is there.".to_owned(),
        )
    } else if ib_off {
        (
            "NCCL used sockets (TCP), which never do GDR: NCCL_IB_DISABLE=1 in the environment kept it off the RDMA NICs".to_owned(),
            Vec::new(),
            "Unset NCCL_IB_DISABLE (or set it to 0) in the job's environment or nccl.conf.".to_owned(),
        )
    } else if acc.no_device.contains("IB") || acc.init_failed.contains("IB") {
        (
            format!(
                "NCCL used sockets (TCP), which never do GDR: {} no RDMA device could be used by the job (none on the node, none passed into its container, or none it may open)",
                if acc.no_device.contains("IB") { "`NET/IB : No device found`:" } else { "`Failed to initialize NET plugin IB`:" }
            ),
            vec![
                see("rdma-link", "rdma-no-device"),
                see("rdma-access", "uverbs-missing"),
            ],
            "Give the job an RDMA NIC: on the node, `gdrdoctor check --select rdma-link,rdma-access` says whether one is there and usable; in a container, pass /dev/infiniband in (Kubernetes: an RDMA device plugin resource) along with the NIC's netdev.".to_owned(),
        )
    } else {
        (
            "NCCL used sockets (TCP), which never do GDR; the log does not say why no RDMA network was taken (NCCL prints `NET/IB : No device found` or `Failed to initialize NET plugin` under INIT,NET)".to_owned(),
            vec![see("rdma-link", "rdma-no-device")],
            "Rerun with NCCL_DEBUG_SUBSYS=INIT,NET; on the node, `gdrdoctor check --select rdma-link,rdma-access` says whether an RDMA NIC is there and usable.".to_owned(),
        )
    };
    Cause {
        kind: "sockets",
        subject: format!("network {net}"),
        message,
        see: see_list,
        fix,
    }
}

fn plugin_off(acc: &NodeAcc, net: Option<&str>) -> Cause {
    Cause {
        kind: "plugin-disabled",
        subject: format!(
            "network {}",
            net.or_else(|| acc
                .plugin_gdr_off
                .first()
                .and_then(|t| t.split_ascii_whitespace().next()))
                .unwrap_or("plugin")
        ),
        message: format!(
            "The network plugin turned GDR off itself: `{}`",
            acc.plugin_gdr_off.first().map(String::as_str).unwrap_or("")
        ),
        see: Vec::new(),
        fix: "A plugin's own decision, outside gdrdoctor's checks: see the plugin's requirements. aws-ofi-nccl turns GDR off when Libfabric's provider cannot take GPU memory (an instance type without GPUDirect RDMA, or a Libfabric without FI_OPT_CUDA_API_PERMITTED, before 1.18).".to_owned(),
    }
}

/// What a warning means for GDR, and the checks that explain it.
pub(super) fn warning_meaning(
    text: &str,
    link_local: Option<&(String, i64)>,
) -> (Option<String>, Vec<See>) {
    if let Some((meaning, see_list)) = evidence::modify_qp_meaning(text, link_local) {
        return (Some(meaning), see_list);
    }
    if text.starts_with("Failed to open libibverbs") {
        return (
            Some("No libibverbs in the job's environment (rdma-core): NCCL cannot use an RDMA NIC at all and falls back to sockets".to_owned()),
            vec![see("rdma-access", "libibverbs-missing")],
        );
    }
    if text.starts_with("NET/OFI ")
        && (text.contains("initialization failed") || text.contains("Initializing plugin failed"))
    {
        return (
            Some("aws-ofi-nccl, the network plugin for EFA, failed to initialize: NCCL goes on without it (sockets), so no GDR".to_owned()),
            vec![see("rdma-link", "rdma-no-device"), see("rdma-access", "uverbs-missing")],
        );
    }
    // RCCL's own checks of the platform (ROCm/rccl src/init.cc).
    if text.contains("Missing \"iommu=pt\"") || text.contains("Missing \"amd_iommu=on\"") {
        return (
            Some("RCCL checks the kernel command line: without IOMMU passthrough, peer-to-peer DMA between GPU and NIC is translated (slower) or fails".to_owned()),
            vec![see("iommu", "iommu-translated")],
        );
    }
    let completion = text.contains("Got completion");
    let status = |n: &str| {
        text.contains(&format!("error {n},"))
            || text.contains(&format!("status={n} "))
            || text.contains(&format!("error {n} "))
    };
    if completion && status("4") {
        return (
            Some("IBV_WC_LOC_PROT_ERR: the NIC was refused access to the memory it was given. With GDR this is usually ACS redirecting peer-to-peer requests to the root complex, or an IOMMU translating them (NVIDIA/nccl#928: \"IB error 4 is usually due to ACS being enabled\")".to_owned()),
            vec![see("acs", "acs-redirect-on-path"), see("iommu", "iommu-translated")],
        );
    }
    if completion && status("12") {
        return (
            Some("IBV_WC_RETRY_EXC_ERR: the peer never acknowledged (a link, a switch, the RoCE GID or flow-control setup); not a GDR decision".to_owned()),
            vec![see("rdma-link", "rdma-port-down"), see("rdma-gid", "roce-gid-index-differs")],
        );
    }
    if completion && status("5") && text.contains("vendor err 249") {
        return (
            Some("IBV_WC_WR_FLUSH_ERR, vendor syndrome 249: the connection had already failed. NVIDIA/nccl#1353: make sure ACS is disabled, and that the platform firmware is current".to_owned()),
            vec![see("acs", "acs-redirect-on-path")],
        );
    }
    if text.contains("Unable to open device") || text.contains("ibv_open_device failed") {
        return (
            Some("The RDMA device is there but this process could not open it: /dev/infiniband missing or not readable in the job's container, or a user-space driver (provider) that does not match the kernel's".to_owned()),
            vec![see("rdma-access", "uverbs-no-access"), see("rdma-access", "uverbs-missing")],
        );
    }
    if text.contains("ibv_reg_dmabuf_mr failed") {
        return (
            Some("The NIC driver, the kernel or rdma-core could not register a GPU dma-buf (NVIDIA/nccl#778: NCCL_DMABUF_ENABLE=0 falls back to peer memory)".to_owned()),
            vec![see("peer-memory", "nic-no-dmabuf"), see("rdma-access", "libibverbs-no-dmabuf")],
        );
    }
    if text.contains("ibv_reg_mr") && text.contains("Cannot allocate memory") {
        return (
            Some("Memory registration ran out of locked memory (RLIMIT_MEMLOCK)".to_owned()),
            vec![see("rdma-access", "memlock-low")],
        );
    }
    (None, Vec::new())
}
