//! Collecting: what each NCCL line says, kept per node (NICs, GDR decisions, connection
//! groups, paths, settings), in memory bounded by what the log names, never by its length.
//! What it kept becomes an explanation in `explanation.rs` ([`Collector::finish`]).

use super::{
    ENV_KEPT, Input, MAX_KEPT, MAX_LIST, MAX_SAMPLES, MAX_TEXT, MAX_WARNINGS, Unrecognised, clean,
    clean_cow, host_key, node_name,
};
use crate::parse::nccl_log::{self as log, Dir, Era, Event, HcaVia, Level, Version};
use std::collections::{BTreeMap, BTreeSet, HashMap};

#[derive(Debug, Default, Clone)]
pub(super) struct ConnAcc {
    pub(super) sends: u64,
    pub(super) receives: u64,
    /// Channels 0-63 as bits; more in `channels_more`.
    pub(super) channels: u64,
    pub(super) channels_more: BTreeSet<u32>,
    pub(super) peers: BTreeSet<u32>,
    pub(super) more_peers: bool,
    pub(super) proxies: BTreeSet<u32>,
    pub(super) pci: bool,
    pub(super) bus: Option<String>,
}

/// A connection group: one rank's connections through one NIC, with or without GDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct ConnKey {
    pub(super) dev: Option<u32>,
    pub(super) rank: u32,
    pub(super) net: u16,
    pub(super) nic: u32,
    pub(super) gdr: bool,
}

/// A NIC from a device list: name, port, link layer or address.
pub(super) type NicInfo = (String, Option<u32>, Option<String>);
/// An HCA decision's key: network, NIC index, and the GPU for 2.4's per-GPU line.
pub(super) type HcaKey = (String, u32, Option<String>);

#[derive(Debug, Clone)]
pub(super) struct HcaAcc {
    pub(super) name: String,
    pub(super) enabled: bool,
    pub(super) via: HcaVia,
    pub(super) lines: u64,
}

#[derive(Debug, Clone)]
pub(super) struct GpuAcc {
    pub(super) enabled: bool,
    pub(super) distance: u32,
    pub(super) level: u32,
    pub(super) inclusive: bool,
    pub(super) read: Option<bool>,
    pub(super) mode: Option<String>,
    pub(super) pxn_via: Option<String>,
    pub(super) lines: u64,
}

#[derive(Debug, Default, Clone)]
pub(super) struct NodeAcc {
    pub(super) key: String,
    pub(super) versions: BTreeMap<Version, String>,
    pub(super) era: Option<Era>,
    pub(super) era_conflict: bool,
    pub(super) networks: BTreeSet<String>,
    pub(super) plugins: BTreeSet<String>,
    pub(super) nics: BTreeMap<(String, u32), NicInfo>,
    pub(super) no_device: BTreeSet<String>,
    pub(super) init_failed: BTreeSet<String>,
    pub(super) plugin_gdr_off: Vec<String>,
    pub(super) hcas: BTreeMap<HcaKey, HcaAcc>,
    pub(super) gpus: BTreeMap<(String, String), GpuAcc>,
    pub(super) nic_distance: BTreeMap<String, (String, Vec<String>)>,
    pub(super) conns: BTreeMap<ConnKey, ConnAcc>,
    pub(super) env: BTreeMap<String, String>,
    pub(super) dmabuf: BTreeSet<u32>,
    pub(super) rings_gdr: BTreeSet<i64>,
    /// rank -> bus id, from the communicator lines.
    pub(super) rank_bus: BTreeMap<u32, String>,
    pub(super) dev_bus: BTreeMap<u32, String>,
    /// GPU -> NET paths from the GRAPH lines: (GPU, NET id) -> the path.
    pub(super) paths: BTreeMap<(String, String), PathAcc>,
    /// Lines of the NET subsystem (GDR decisions) were seen.
    pub(super) net_subsys: bool,
    /// Lines of the INIT subsystem were seen.
    pub(super) init_subsys: bool,
    /// The library is AMD's RCCL (its version banner, `ROCr version`, its DMA-BUF line).
    pub(super) rccl: bool,
    /// `Failed to open libibverbs.so[.1]`.
    pub(super) no_verbs: bool,
    /// RCCL's DMA-BUF path is off, as it said (`Dmabuf feature disabled without ...`).
    pub(super) rccl_dmabuf_off: Option<String>,
    /// RCCL found AMD's peer memory (`Found /sys/kernel/mm/memory_peers/amdkfd/version`).
    pub(super) peermem_found: Option<String>,
    /// A network plugin said it failed to initialize (aws-ofi-nccl's `NET/OFI aws-ofi-nccl
    /// initialization failed`): its warnings, as printed.
    pub(super) plugin_failed: Vec<String>,
    /// The GID each NCCL device's queue pairs were built on: device -> (index, subnet prefix
    /// as printed).
    pub(super) gids: BTreeMap<String, (i64, String)>,
    /// `nNodes` of the communicator lines.
    pub(super) nnodes: BTreeSet<u32>,
    /// Connections that stay inside the node (P2P, SHM): counted.
    pub(super) intra: u64,
}

impl NodeAcc {
    /// The releases a line's wording fits narrow the node's; lines that fit none of the
    /// releases the others fit leave it unknown.
    fn narrow_era(&mut self, era: Era) {
        match self.era {
            None if !self.era_conflict => self.era = Some(era),
            None => {}
            Some(e) => match e.intersect(era) {
                Some(i) => self.era = Some(i),
                None => {
                    self.era = None;
                    self.era_conflict = true;
                }
            },
        }
    }

    /// What a line says of the node alone, each kind kept to a few.
    fn note(&mut self, event: Event<'_>) {
        match event {
            Event::Version {
                version,
                text,
                rccl,
            } => {
                self.rccl |= rccl;
                if self.versions.len() < 8 {
                    self.versions.insert(version, clean(text));
                }
            }
            Event::Network { name } => {
                self.init_subsys = true;
                if self.networks.len() < 8 {
                    self.networks.insert(clean(name));
                }
            }
            Event::NoDevice { net } => {
                if self.no_device.len() < 8 {
                    self.no_device.insert(clean(net));
                }
            }
            Event::NetInitFailed { name } => {
                if self.init_failed.len() < 8 {
                    self.init_failed.insert(clean(name));
                }
            }
            Event::Plugin { name } => {
                // aws-ofi-nccl names itself on every one of its lines: no copy for those.
                if self.plugins.len() < 8 && !self.plugins.contains(name) {
                    self.plugins.insert(clean(name));
                }
            }
            Event::PluginGdrOff { text } => {
                if self.plugins.len() < 8 && !self.plugins.contains(log::OFI_PLUGIN) {
                    self.plugins.insert(log::OFI_PLUGIN.to_owned());
                }
                let text = clean(text);
                if self.plugin_gdr_off.len() < MAX_SAMPLES && !self.plugin_gdr_off.contains(&text) {
                    self.plugin_gdr_off.push(text);
                }
            }
            Event::RingsGdr { gdr, .. } => {
                if self.rings_gdr.len() < 4 {
                    self.rings_gdr.insert(gdr);
                }
            }
            Event::Env { name, value } => {
                // RCCL's own settings and the HSA runtime's change its transport too
                // (RCCL_FORCE_ENABLE_GDRDMA, HSA_FORCE_FINE_GRAIN_PCIE): kept, a few.
                let amd = name.starts_with("RCCL_") || name.starts_with("HSA_");
                if ENV_KEPT.contains(&name) || (amd && self.env.len() < 32) {
                    self.env.insert(name.to_owned(), clean(value));
                }
            }
            Event::NoVerbs => self.no_verbs = true,
            Event::Rocr => self.rccl = true,
            Event::RcclDmabufOff { text } => {
                self.rccl = true;
                if self.rccl_dmabuf_off.is_none() {
                    self.rccl_dmabuf_off = Some(clean(text));
                }
            }
            Event::PeerMemFound { path } => {
                self.rccl = true;
                if self.peermem_found.is_none() {
                    self.peermem_found = Some(clean(path));
                }
            }
            Event::QpGid { dev, index, prefix } => {
                if self.gids.len() < 16 && !self.gids.contains_key(dev) {
                    self.gids.insert(clean(dev), (index, clean(prefix)));
                }
            }
            Event::IntraNode => {
                self.init_subsys = true;
                self.intra += 1;
            }
            Event::DmaBufAvailable { cuda_dev } => {
                self.init_subsys = true;
                if self.dmabuf.len() < MAX_LIST {
                    self.dmabuf.insert(cuda_dev);
                }
            }
            Event::CommInit {
                rank,
                cuda_dev,
                bus_id,
                nnodes,
                ..
            } => {
                self.init_subsys = true;
                if let Some(n) = nnodes {
                    if self.nnodes.len() < 4 {
                        self.nnodes.insert(n);
                    }
                }
                // Every communicator prints them again: the same value is not written again.
                if let Some(b) = bus_id {
                    let b = clean_cow(b);
                    if self.rank_bus.len() < 4096
                        && self.rank_bus.get(&rank).map(String::as_str) != Some(&*b)
                    {
                        self.rank_bus.insert(rank, b.to_string());
                    }
                    if let Some(d) = cuda_dev {
                        if self.dev_bus.len() < 4096
                            && self.dev_bus.get(&d).map(String::as_str) != Some(&*b)
                        {
                            self.dev_bus.insert(d, b.into_owned());
                        }
                    }
                }
            }
            // Kept by the collector (they count against its bounds), or nothing to keep.
            Event::Connection(_)
            | Event::NetDevices { .. }
            | Event::HcaGdr { .. }
            | Event::GpuGdr(_)
            | Event::NicDistance { .. }
            | Event::GpuPaths { .. }
            | Event::Warn { .. }
            | Event::Unrecognised
            | Event::Other => {}
        }
    }
}

#[derive(Debug, Clone)]
pub(super) struct PathAcc {
    pub(super) hops: u32,
    pub(super) bw: f64,
    pub(super) path: String,
    pub(super) lines: u64,
}

#[derive(Clone)]
pub(super) struct WarnAcc {
    pub(super) text: String,
    pub(super) count: u64,
    pub(super) nodes: BTreeSet<String>,
}

/// Reads NCCL logs and keeps what the explanation needs.
#[derive(Default, Clone)]
pub struct Collector {
    pub(super) nodes: Vec<NodeAcc>,
    pub(super) by_host: HashMap<String, usize>,
    pub(super) last: Option<usize>,
    pub(super) nets: Vec<String>,
    pub(super) bare_versions: BTreeMap<Version, String>,
    pub(super) inputs: Vec<Input>,
    pub(super) warnings: Vec<WarnAcc>,
    pub(super) warn_index: HashMap<String, usize>,
    pub(super) unrecognised: Unrecognised,
    pub(super) kept: usize,
    pub(super) dropped: u64,
    /// RCCL's banner was among the bare version lines.
    pub(super) bare_rccl: bool,
    /// The hosts nccl-tests listed its ranks on (`#  Rank  0 ... on node7 device 0`).
    pub(super) tests_hosts: BTreeSet<String>,
    /// The key of the last HCA and GPU-NIC decision looked up, its text written in place: every
    /// rank prints them for every communicator, a lookup each (issue 43).
    hca_key: HcaKey,
    gpu_key: (String, String),
}

/// `to` made `from`'s [`clean`] text, in the room it already has.
fn set_clean(to: &mut String, from: &str) {
    to.clear();
    to.push_str(&clean_cow(from));
}

/// The node of lines quoted without NCCL's prefix (`parse_bare`); no host is this key.
pub(super) const BARE_KEY: &str = "\u{0}bare";

impl Collector {
    pub fn new() -> Self {
        Collector::default()
    }

    fn node(&mut self, host: &str) -> Option<usize> {
        if let Some(i) = self.last {
            if self.nodes[i].key == host {
                return Some(i);
            }
        }
        if let Some(&i) = self.by_host.get(host) {
            self.last = Some(i);
            return Some(i);
        }
        if !self.keep() {
            return None;
        }
        let i = self.nodes.len();
        self.nodes.push(NodeAcc {
            key: host.to_owned(),
            ..NodeAcc::default()
        });
        self.by_host.insert(host.to_owned(), i);
        self.last = Some(i);
        Some(i)
    }

    /// Room for one more distinct thing?
    fn keep(&mut self) -> bool {
        if self.kept >= MAX_KEPT {
            self.dropped += 1;
            return false;
        }
        self.kept += 1;
        true
    }

    fn net(&mut self, name: &str) -> u16 {
        if let Some(i) = self.nets.iter().position(|n| n == name) {
            return i as u16;
        }
        if self.nets.len() >= 256 {
            // A hostile log naming thousands of networks: the rest share one name.
            return 255;
        }
        self.nets.push(clean(name));
        (self.nets.len() - 1) as u16
    }

    /// One parsed line: kept where it belongs (a bare version line, a warning, a node's fact).
    pub(super) fn apply(&mut self, l: log::Line<'_>) {
        self.apply_known(l, None);
    }

    /// [`Collector::apply`], `known` being the node of the line's host when the reader knows it
    /// already (it keeps it per prefix: a host's node never changes). Returns the node the
    /// line went to.
    pub(super) fn apply_known(&mut self, l: log::Line<'_>, known: Option<usize>) -> Option<usize> {
        if l.level == Level::Version && l.origin.host.is_none() {
            if let Event::Version {
                version,
                text,
                rccl,
            } = l.event
            {
                self.bare_rccl |= rccl;
                if self.bare_versions.len() < 16 {
                    self.bare_versions.insert(version, clean(text));
                }
            }
            return None;
        }
        if let Event::Unrecognised = l.event {
            self.unrecognised.count += 1;
            if self.unrecognised.examples.len() < MAX_SAMPLES {
                self.unrecognised.examples.push(clean(l.message));
            }
        }
        let host = if l.bare {
            BARE_KEY.into()
        } else {
            host_key(l.origin.host.unwrap_or(""))
        };
        if let Event::Warn { text } = l.event {
            self.warn(&host, text);
            self.warning_facts(&host, text);
            return None;
        }
        let n = match known {
            Some(n) => n,
            None => self.node(&host)?,
        };
        debug_assert_eq!(self.nodes[n].key, host);
        self.apply_at(n, l.origin.dev, l.era, l.event);
        Some(n)
    }

    /// What a line of node `n`'s host says, kept there (`dev`: the CUDA device of the line's
    /// prefix; `era`: the releases of its wording): [`Collector::apply_known`] once the node is
    /// known. For an INFO line whose event is not [`Event::Unrecognised`] it is all of it.
    pub(super) fn apply_at(&mut self, n: usize, dev: Option<u32>, era: Era, event: Event<'_>) {
        if !era.is_any() {
            self.nodes[n].narrow_era(era);
        }
        match event {
            Event::Connection(c) => self.connection(n, dev, c),
            Event::NetDevices { net, devices } => self.net_devices(n, net, devices),
            Event::HcaGdr {
                net,
                enabled,
                index,
                name,
                via,
                gpu,
            } => {
                set_clean(&mut self.hca_key.0, net);
                self.hca_key.1 = index;
                match (gpu, &mut self.hca_key.2) {
                    (Some(g), Some(k)) => set_clean(k, g),
                    (g, k) => *k = g.map(clean),
                }
                self.nodes[n].net_subsys = true;
                if let Some(h) = self.nodes[n].hcas.get_mut(&self.hca_key) {
                    h.lines += 1;
                    h.enabled = enabled;
                    h.via = via;
                } else if self.keep() {
                    self.nodes[n].hcas.insert(
                        self.hca_key.clone(),
                        HcaAcc {
                            name: clean(name),
                            enabled,
                            via,
                            lines: 1,
                        },
                    );
                }
            }
            Event::GpuGdr(g) => self.gpu_gdr(n, g),
            Event::NicDistance { gpu, net, levels } => {
                let key = clean(gpu);
                if !self.nodes[n].nic_distance.contains_key(&key) && self.keep() {
                    self.nodes[n].nic_distance.insert(
                        key,
                        (
                            clean(net),
                            levels.into_iter().take(MAX_LIST).map(clean).collect(),
                        ),
                    );
                }
            }
            Event::GpuPaths { gpu, paths, .. } => self.gpu_paths(n, gpu, &paths),
            other => self.nodes[n].note(other),
        }
    }

    /// What a warning says of its node's network: a plugin that failed to initialize or
    /// turned GDR off, no libibverbs (older NCCL warns it).
    fn warning_facts(&mut self, host: &str, text: &str) {
        let ofi = text.strip_prefix("NET/OFI ");
        let failed = ofi.is_some_and(|t| {
            t.contains("initialization failed")
                || t.contains("Initializing plugin failed")
                || t.starts_with("Failed to initialize")
        });
        let gdr_off =
            ofi.is_some_and(|t| t.contains("GDR disabled") || t.contains("disabling GDR"));
        let no_verbs = text.starts_with("Failed to open libibverbs");
        if !(failed || gdr_off || no_verbs) {
            return;
        }
        let Some(n) = self.node(host) else { return };
        let node = &mut self.nodes[n];
        let text = clean(text);
        if failed && node.plugin_failed.len() < MAX_SAMPLES && !node.plugin_failed.contains(&text) {
            node.plugin_failed.push(text.clone());
        }
        if gdr_off
            && node.plugin_gdr_off.len() < MAX_SAMPLES
            && !node.plugin_gdr_off.contains(&text)
        {
            node.plugin_gdr_off.push(text);
        }
        if (failed || gdr_off) && node.plugins.len() < 8 {
            node.plugins.insert(log::OFI_PLUGIN.to_owned());
        }
        node.no_verbs |= no_verbs;
    }

    /// `Channel NN : a -> b [send] via NET/...`: counted in its connection group.
    fn connection(&mut self, n: usize, dev: Option<u32>, c: log::Connection<'_>) {
        let net = self.net(c.net);
        let (rank, peer) = c.local_and_peer();
        let key = ConnKey {
            dev,
            rank,
            net,
            nic: c.dev,
            gdr: c.gdr,
        };
        let node = &mut self.nodes[n];
        node.init_subsys = true;
        let acc = match node.conns.get_mut(&key) {
            Some(a) => a,
            None => {
                if self.kept >= MAX_KEPT {
                    self.dropped += 1;
                    return;
                }
                self.kept += 1;
                self.nodes[n].conns.entry(key).or_default()
            }
        };
        match c.dir {
            Dir::Send => acc.sends += 1,
            Dir::Receive => acc.receives += 1,
        }
        match c.channel {
            Some(ch) if ch < 64 => acc.channels |= 1 << ch,
            Some(ch) if acc.channels_more.len() < MAX_LIST => {
                acc.channels_more.insert(ch);
            }
            _ => {}
        }
        if acc.peers.len() < MAX_LIST {
            acc.peers.insert(peer);
        } else if !acc.peers.contains(&peer) {
            acc.more_peers = true;
        }
        if let Some(p) = c.proxy {
            if acc.proxies.len() < MAX_LIST {
                acc.proxies.insert(p);
            }
        }
        acc.pci |= c.pci;
        if acc.bus.is_none() {
            if let Some(b) = c.local_dev().filter(|b| b.len() >= 4) {
                acc.bus = Some(clean(b));
            }
        }
    }

    /// `NET/IB : Using [0]mlx5_0:1/RoCE ...`: each NIC listed, once.
    fn net_devices(&mut self, n: usize, net: &str, devices: Vec<log::NetDevice<'_>>) {
        self.nodes[n].init_subsys = true;
        for d in devices {
            let key = (clean(net), d.index);
            if self.nodes[n].nics.contains_key(&key) || !self.keep() {
                continue;
            }
            self.nodes[n]
                .nics
                .insert(key, (clean(d.name), d.port, d.link.map(clean)));
        }
    }

    /// `GPU Direct RDMA Enabled|Disabled for GPU ... / HCA ...`: the last word on each pair.
    fn gpu_gdr(&mut self, n: usize, g: log::GpuGdr<'_>) {
        self.nodes[n].net_subsys = true;
        set_clean(&mut self.gpu_key.0, g.gpu);
        set_clean(&mut self.gpu_key.1, g.hca);
        if let Some(a) = self.nodes[n].gpus.get_mut(&self.gpu_key) {
            a.lines += 1;
            a.enabled = g.enabled;
            a.distance = g.distance;
            a.level = g.level;
            if g.read.is_some() {
                a.read = g.read;
            }
        } else if self.keep() {
            self.nodes[n].gpus.insert(
                self.gpu_key.clone(),
                GpuAcc {
                    enabled: g.enabled,
                    distance: g.distance,
                    level: g.level,
                    inclusive: g.inclusive,
                    read: g.read,
                    mode: g.mode.map(clean),
                    pxn_via: g.pxn_via.map(clean),
                    lines: 1,
                },
            );
        }
    }

    /// A GRAPH line: only the paths to the networks, which are NCCL's GPU-NIC distances.
    fn gpu_paths(&mut self, n: usize, gpu: &str, paths: &[log::PathTo<'_>]) {
        for p in paths.iter().filter(|p| p.kind == "NET") {
            let key = (clean(gpu), clean(p.id));
            let path = PathAcc {
                hops: p.hops,
                bw: p.bw,
                path: clean(p.path),
                lines: 1,
            };
            // Every rank prints the whole node's paths: the last line counts.
            if let Some(a) = self.nodes[n].paths.get_mut(&key) {
                *a = PathAcc {
                    lines: a.lines + 1,
                    ..path
                };
            } else if self.keep() {
                self.nodes[n].paths.insert(key, path);
            }
        }
    }

    fn warn(&mut self, host: &str, text: &str) {
        // Warnings that differ only in numbers (ports, lengths, addresses) are one warning.
        let mut key = String::new();
        for c in text.chars().take(MAX_TEXT) {
            if !c.is_ascii_digit() {
                key.push(c);
            } else if !key.ends_with('#') {
                key.push('#');
            }
        }
        let i = match self.warn_index.get(&key) {
            Some(&i) => i,
            None => {
                if self.warnings.len() >= MAX_WARNINGS {
                    self.dropped += 1;
                    return;
                }
                self.warnings.push(WarnAcc {
                    text: clean(text),
                    count: 0,
                    nodes: BTreeSet::new(),
                });
                self.warn_index.insert(key, self.warnings.len() - 1);
                self.warnings.len() - 1
            }
        };
        let w = &mut self.warnings[i];
        w.count += 1;
        if w.nodes.len() < MAX_LIST {
            w.nodes.insert(node_name(host));
        }
    }
}
