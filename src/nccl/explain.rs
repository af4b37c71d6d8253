//! `gdrdoctor nccl explain`: what NCCL decided about GPUDirect RDMA, read from its own
//! `NCCL_DEBUG=INFO` output, and why, in the terms of gdrdoctor's checks.
//!
//! Everything else gdrdoctor says is a prediction of what NCCL will do; this reads what it did.
//! A [`Collector`] takes the log line by line from any reader (a file, standard input, a pipe
//! from NCCL itself) and keeps only what the explanation needs, in memory bounded by the number
//! of nodes, GPUs and NICs, never by the length of the log; [`Collector::finish`] gives the
//! [`Explanation`]: per node, the NCCL version, the network, each NIC's GDR decision, each
//! GPU-NIC distance decision, the connections with and without GDR; then, for every place GDR
//! was not used, the cause and the gdrdoctor check and code that explain it, with the fix.
//!
//! The JSON form is documented in docs/nccl-explain-json.md.

use super::levels::{self, Table};
use crate::parse::nccl_log::{self as log, Dir, Era, Event, HcaVia, Level, Version};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, BufRead, Read};

/// Longest line kept. NCCL's own lines are at most 1 KiB plus the launcher's prefix (its
/// message buffer is 1024 bytes, src/debug.cc); longer lines are counted and skipped, never held.
pub const MAX_LINE: usize = 64 * 1024;
/// Distinct things kept across all nodes (connection groups, GPU-NIC decisions, NICs, nodes):
/// a log that names more (a hostile one) gets the rest counted as dropped.
const MAX_KEPT: usize = 100_000;
/// Peers and channels listed per connection group.
const MAX_LIST: usize = 64;
/// Distinct warnings kept.
const MAX_WARNINGS: usize = 1_000;
/// Examples kept of lines that were not understood.
const MAX_SAMPLES: usize = 3;
/// Longest text quoted from the log.
const MAX_TEXT: usize = 300;

/// The environment variables that change NCCL's GDR decisions (NCCL's docs, env.html).
const ENV_KEPT: &[&str] = &[
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_NET_GDR_C2C",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_DMABUF_ENABLE",
    "NCCL_NET",
    "NCCL_NET_PLUGIN",
    "NCCL_TOPO_FILE",
    "NCCL_SOCKET_IFNAME",
    "NCCL_CROSS_NIC",
    "NCCL_PXN_DISABLE",
];

/// A log with no `NCCL INFO` or `NCCL WARN` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotNcclLog {
    pub inputs: Vec<Input>,
}

impl std::fmt::Display for NotNcclLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
        write!(
            f,
            "{}: no `NCCL INFO` or `NCCL WARN` line in {} lines: not the output of a job run with NCCL_DEBUG=INFO",
            names.join(", "),
            self.inputs.iter().map(|i| i.lines).sum::<u64>()
        )?;
        if let Some(e) = self.inputs.iter().find_map(|i| i.error.as_ref()) {
            write!(f, " (reading stopped: {e})")?;
        }
        Ok(())
    }
}

/// One input, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    pub name: String,
    pub gzip: bool,
    /// Bytes read (after decompression).
    pub bytes: u64,
    pub lines: u64,
    /// `NCCL INFO` and `NCCL WARN` lines.
    pub nccl_lines: u64,
    /// Lines longer than [`MAX_LINE`], skipped.
    pub long_lines_skipped: u64,
    /// Why reading stopped early, if it did (a corrupt gzip stream, a read error).
    pub error: Option<String>,
}

/// Lines about GDR that no known wording matched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unrecognised {
    pub count: u64,
    pub examples: Vec<String>,
}

// ---------------------------------------------------------------------------------------------
// Collection

#[derive(Debug, Default)]
struct ConnAcc {
    sends: u64,
    receives: u64,
    /// Channels 0-63 as bits; more in `channels_more`.
    channels: u64,
    channels_more: BTreeSet<u32>,
    peers: BTreeSet<u32>,
    more_peers: bool,
    proxies: BTreeSet<u32>,
    pci: bool,
    bus: Option<String>,
}

/// A connection group: one rank's connections through one NIC, with or without GDR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ConnKey {
    dev: Option<u32>,
    rank: u32,
    net: u16,
    nic: u32,
    gdr: bool,
}

/// A NIC from a device list: name, port, link layer or address.
type NicInfo = (String, Option<u32>, Option<String>);
/// An HCA decision's key: network, NIC index, and the GPU for 2.4's per-GPU line.
type HcaKey = (String, u32, Option<String>);

#[derive(Debug)]
struct HcaAcc {
    name: String,
    enabled: bool,
    via: HcaVia,
    lines: u64,
}

#[derive(Debug)]
struct GpuAcc {
    enabled: bool,
    distance: u32,
    level: u32,
    inclusive: bool,
    read: Option<bool>,
    mode: Option<String>,
    pxn_via: Option<String>,
    lines: u64,
}

#[derive(Debug, Default)]
struct NodeAcc {
    key: String,
    versions: BTreeMap<Version, String>,
    era: Option<Era>,
    era_conflict: bool,
    networks: BTreeSet<String>,
    plugins: BTreeSet<String>,
    nics: BTreeMap<(String, u32), NicInfo>,
    no_device: BTreeSet<String>,
    init_failed: BTreeSet<String>,
    plugin_gdr_off: Vec<String>,
    hcas: BTreeMap<HcaKey, HcaAcc>,
    gpus: BTreeMap<(String, String), GpuAcc>,
    nic_distance: BTreeMap<String, (String, Vec<String>)>,
    conns: BTreeMap<ConnKey, ConnAcc>,
    env: BTreeMap<String, String>,
    dmabuf: BTreeSet<u32>,
    rings_gdr: BTreeSet<i64>,
    /// rank -> bus id, from the communicator lines.
    rank_bus: BTreeMap<u32, String>,
    dev_bus: BTreeMap<u32, String>,
    /// GPU -> NET paths from the GRAPH lines: (GPU, NET id) -> the path.
    paths: BTreeMap<(String, String), PathAcc>,
    /// Lines of the NET subsystem (GDR decisions) were seen.
    net_subsys: bool,
    /// Lines of the INIT subsystem were seen.
    init_subsys: bool,
}

#[derive(Debug)]
struct PathAcc {
    hops: u32,
    bw: f64,
    path: String,
    lines: u64,
}

struct WarnAcc {
    text: String,
    count: u64,
    nodes: BTreeSet<String>,
}

/// Reads NCCL logs and keeps what the explanation needs.
#[derive(Default)]
pub struct Collector {
    nodes: Vec<NodeAcc>,
    by_host: HashMap<String, usize>,
    last: Option<usize>,
    nets: Vec<String>,
    bare_versions: BTreeMap<Version, String>,
    inputs: Vec<Input>,
    warnings: Vec<WarnAcc>,
    warn_index: HashMap<String, usize>,
    unrecognised: Unrecognised,
    kept: usize,
    dropped: u64,
}

/// Text from the log, made safe to print: hostile characters escaped by the one sanitizer,
/// long text cut.
fn clean(s: &str) -> String {
    crate::sanitize::cut(s, MAX_TEXT)
}

/// A host name as nodes are told apart: whole up to MAX_TEXT characters, cut there as every
/// other name from a log is (`clean`), the cut marked. No host name is that long (DNS allows 253
/// bytes); a log whose hosts agree that far and differ after is hostile, and its nodes are one.
/// Kept whole, 30,000 lines with 60 KB host prefixes held 3.6 GB (issue 25).
fn host_key(host: &str) -> std::borrow::Cow<'_, str> {
    if host.len() <= MAX_TEXT {
        return host.into();
    }
    // The one sanitizer's cut, so that the key is already the name shown.
    crate::sanitize::cut(host, MAX_TEXT).into()
}

impl Collector {
    pub fn new() -> Self {
        Collector::default()
    }

    /// Reads one input to its end: plain text or gzip (told by its first bytes), line by line,
    /// never holding more than one line of [`MAX_LINE`] bytes. A read error ends this input and
    /// is reported with it; what was read before still counts.
    pub fn read<R: Read>(&mut self, name: &str, input: R) {
        let mut input = io::BufReader::with_capacity(256 * 1024, input);
        let gzip = matches!(input.fill_buf(), Ok(b) if b.starts_with(&[0x1f, 0x8b]));
        let mut summary = Input {
            name: clean(name),
            gzip,
            bytes: 0,
            lines: 0,
            nccl_lines: 0,
            long_lines_skipped: 0,
            error: None,
        };
        let result = if gzip {
            let decoder = flate2::bufread::MultiGzDecoder::new(input);
            self.read_lines(
                io::BufReader::with_capacity(256 * 1024, decoder),
                &mut summary,
            )
        } else {
            self.read_lines(input, &mut summary)
        };
        if let Err(e) = result {
            summary.error = Some(e.to_string());
        }
        self.inputs.push(summary);
    }

    fn read_lines<R: BufRead>(&mut self, mut r: R, s: &mut Input) -> io::Result<()> {
        let mut carry: Vec<u8> = Vec::new();
        // Inside a line already found too long: its rest is skipped up to the newline.
        let mut overlong = false;
        loop {
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                break;
            }
            let len = buf.len();
            s.bytes += len as u64;
            let mut pos = 0;
            while pos < len {
                match memchr::memchr(b'\n', &buf[pos..]) {
                    Some(i) => {
                        let piece = &buf[pos..pos + i];
                        if overlong {
                            overlong = false;
                        } else if carry.len() + piece.len() > MAX_LINE {
                            s.lines += 1;
                            s.long_lines_skipped += 1;
                            carry.clear();
                        } else if carry.is_empty() {
                            self.line(piece, s);
                        } else {
                            carry.extend_from_slice(piece);
                            self.line(&carry, s);
                            carry.clear();
                        }
                        pos += i + 1;
                    }
                    None => {
                        let rest = &buf[pos..];
                        if !overlong {
                            if carry.len() + rest.len() > MAX_LINE {
                                overlong = true;
                                s.lines += 1;
                                s.long_lines_skipped += 1;
                                carry = Vec::new();
                            } else {
                                carry.extend_from_slice(rest);
                            }
                        }
                        pos = len;
                    }
                }
            }
            r.consume(len);
        }
        // The last line, without a newline.
        if !carry.is_empty() {
            self.line(&carry, s);
        }
        Ok(())
    }

    /// One line of log (without its newline).
    pub fn feed_line(&mut self, line: &[u8]) {
        let mut s = Input {
            name: String::new(),
            gzip: false,
            bytes: 0,
            lines: 0,
            nccl_lines: 0,
            long_lines_skipped: 0,
            error: None,
        };
        self.line(line, &mut s);
        match self.inputs.last_mut() {
            Some(i) if i.name.is_empty() => {
                i.lines += s.lines;
                i.nccl_lines += s.nccl_lines;
                i.bytes += line.len() as u64 + 1;
            }
            _ => {
                s.bytes = line.len() as u64 + 1;
                self.inputs.push(s);
            }
        }
    }

    fn line(&mut self, bytes: &[u8], s: &mut Input) {
        s.lines += 1;
        // The fast test: most lines of a big log are NCCL's, but anything without `NCCL `
        // needs no decoding at all.
        let Some(at) = log::find_nccl(bytes) else {
            return;
        };
        // Valid UTF-8 (nearly every line) is checked at full speed; only a line that is not
        // goes through the slower lossy decoding. The offset stays right: lossy decoding only
        // grows the text after the first invalid byte, so it is searched again then.
        let text = match std::str::from_utf8(bytes) {
            Ok(s) => std::borrow::Cow::Borrowed(s),
            Err(_) => String::from_utf8_lossy(bytes),
        };
        let line = match text {
            std::borrow::Cow::Borrowed(s) => log::parse_from(s, at),
            std::borrow::Cow::Owned(ref s) => log::parse(s),
        };
        let Some(line) = line else {
            return;
        };
        if line.level != Level::Version {
            s.nccl_lines += 1;
        }
        self.apply(line);
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

    fn apply(&mut self, l: log::Line<'_>) {
        if l.level == Level::Version && l.origin.host.is_none() {
            if let Event::Version { version, text } = l.event {
                if self.bare_versions.len() < 16 {
                    self.bare_versions.insert(version, clean(text));
                }
            }
            return;
        }
        if let Event::Unrecognised = l.event {
            self.unrecognised.count += 1;
            if self.unrecognised.examples.len() < MAX_SAMPLES {
                self.unrecognised.examples.push(clean(l.message));
            }
        }
        let host = host_key(l.origin.host.unwrap_or(""));
        if let Event::Warn { text } = l.event {
            self.warn(&host, text);
            return;
        }
        let Some(n) = self.node(&host) else { return };
        if !l.era.is_any() {
            let node = &mut self.nodes[n];
            match node.era {
                None if !node.era_conflict => node.era = Some(l.era),
                None => {}
                Some(e) => match e.intersect(l.era) {
                    Some(i) => node.era = Some(i),
                    None => {
                        node.era = None;
                        node.era_conflict = true;
                    }
                },
            }
        }
        let dev = l.origin.dev;
        match l.event {
            Event::Connection(c) => {
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
                if c.channel < 64 {
                    acc.channels |= 1 << c.channel;
                } else if acc.channels_more.len() < MAX_LIST {
                    acc.channels_more.insert(c.channel);
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
            Event::Version { version, text } => {
                let node = &mut self.nodes[n];
                if node.versions.len() < 8 {
                    node.versions.insert(version, clean(text));
                }
            }
            Event::Network { name } => {
                let node = &mut self.nodes[n];
                node.init_subsys = true;
                if node.networks.len() < 8 {
                    node.networks.insert(clean(name));
                }
            }
            Event::NetDevices { net, devices } => {
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
            Event::NoDevice { net } => {
                let node = &mut self.nodes[n];
                if node.no_device.len() < 8 {
                    node.no_device.insert(clean(net));
                }
            }
            Event::NetInitFailed { name } => {
                let node = &mut self.nodes[n];
                if node.init_failed.len() < 8 {
                    node.init_failed.insert(clean(name));
                }
            }
            Event::Plugin { name } => {
                let node = &mut self.nodes[n];
                if node.plugins.len() < 8 {
                    node.plugins.insert(clean(name));
                }
            }
            Event::PluginGdrOff { text } => {
                let node = &mut self.nodes[n];
                let text = clean(text);
                if node.plugin_gdr_off.len() < MAX_SAMPLES && !node.plugin_gdr_off.contains(&text) {
                    node.plugin_gdr_off.push(text);
                }
            }
            Event::HcaGdr {
                net,
                enabled,
                index,
                name,
                via,
                gpu,
            } => {
                let key = (clean(net), index, gpu.map(clean));
                self.nodes[n].net_subsys = true;
                if let Some(h) = self.nodes[n].hcas.get_mut(&key) {
                    h.lines += 1;
                    h.enabled = enabled;
                    h.via = via;
                } else if self.keep() {
                    self.nodes[n].hcas.insert(
                        key,
                        HcaAcc {
                            name: clean(name),
                            enabled,
                            via,
                            lines: 1,
                        },
                    );
                }
            }
            Event::GpuGdr(g) => {
                self.nodes[n].net_subsys = true;
                let key = (clean(g.gpu), clean(g.hca));
                if let Some(a) = self.nodes[n].gpus.get_mut(&key) {
                    a.lines += 1;
                    a.enabled = g.enabled;
                    a.distance = g.distance;
                    a.level = g.level;
                    if g.read.is_some() {
                        a.read = g.read;
                    }
                } else if self.keep() {
                    self.nodes[n].gpus.insert(
                        key,
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
            Event::RingsGdr { gdr, .. } => {
                let node = &mut self.nodes[n];
                if node.rings_gdr.len() < 4 {
                    node.rings_gdr.insert(gdr);
                }
            }
            Event::Env { name, value } => {
                if ENV_KEPT.contains(&name) {
                    self.nodes[n].env.insert(name.to_owned(), clean(value));
                }
            }
            Event::DmaBufAvailable { cuda_dev } => {
                let node = &mut self.nodes[n];
                node.init_subsys = true;
                if node.dmabuf.len() < MAX_LIST {
                    node.dmabuf.insert(cuda_dev);
                }
            }
            Event::CommInit {
                rank,
                cuda_dev,
                bus_id,
                ..
            } => {
                let node = &mut self.nodes[n];
                node.init_subsys = true;
                if let Some(b) = bus_id {
                    if node.rank_bus.len() < 4096 {
                        node.rank_bus.insert(rank, clean(b));
                    }
                    if let Some(d) = cuda_dev {
                        if node.dev_bus.len() < 4096 {
                            node.dev_bus.insert(d, clean(b));
                        }
                    }
                }
            }
            Event::GpuPaths { gpu, paths, .. } => {
                // Only the paths to the networks: those are NCCL's GPU-NIC distances.
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
            Event::Warn { .. } | Event::Unrecognised | Event::Other => {}
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

fn node_name(host: &str) -> String {
    if host.is_empty() {
        "(no host in the log)".to_owned()
    } else {
        clean(host)
    }
}

// ---------------------------------------------------------------------------------------------
// The explanation

/// What the log says, and why GDR was or was not used.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub schema: u32,
    pub inputs: Vec<Input>,
    pub nodes: Vec<Node>,
    pub diagnoses: Vec<Diagnosis>,
    pub warnings: Vec<Warning>,
    pub hints: Vec<String>,
    pub unrecognised: Unrecognised,
    /// Distinct things past the memory bounds, counted and not kept.
    pub dropped: u64,
    pub verdict: Verdict,
}

/// One node (a host name in the log's prefixes).
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub name: String,
    pub nccl: NcclVersion,
    pub networks: Vec<String>,
    pub plugins: Vec<String>,
    pub nics: Vec<Nic>,
    pub gpu_nic: Vec<GpuNic>,
    pub env: BTreeMap<String, String>,
    /// What NCCL said of networks it could not use: `NET/IB : No device found`, `Failed to
    /// initialize NET plugin IB`, a plugin turning GDR off.
    pub network_notes: Vec<String>,
    pub dmabuf_gpus: Vec<u32>,
    /// `Connected all rings, use ring PXN x GDR y` (2.24+): y as NCCL printed it.
    pub rings_gdr: Vec<i64>,
    pub connections: Vec<ConnGroup>,
    /// NCCL's path from each GPU to each network device (NCCL_DEBUG_SUBSYS=GRAPH); absent when
    /// the log has no GRAPH path line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<NetPath>,
}

/// One GPU -> NET path from NCCL's GRAPH lines: the distance NCCL itself uses.
#[derive(Debug, Clone, Serialize)]
pub struct NetPath {
    /// The GPU as printed (`0-60`, `3B000`).
    pub gpu: String,
    /// Its PCI address, read from NCCL's number (`0000:00:06.0`).
    pub bus_id: Option<String>,
    /// The NET node as printed (`0-0`, `2`).
    pub net: String,
    /// NCCL's index of the network device (the `N` of `HCA N` and `NET/IB/N`).
    pub nic: Option<u32>,
    pub hops: u32,
    /// GB/s, as NCCL rates the path.
    pub bandwidth: f64,
    /// The path type: `PIX`, `PXB`, `PHB`, `SYS`, `PXN`, ... After NCCL turned GDR off for the
    /// pair, the path through the CPU (`PHB` or farther).
    pub path: String,
    /// How many lines said this (every rank prints it).
    pub lines: u64,
}

/// A PCI address from NCCL's number for it (`60`, `0-3b000`, `CE000`): src/misc/utils.cc
/// `int64ToBusId` prints `%04lx:%02lx:%02lx.%01lx` of id>>20, id>>12, id>>4 and id, masked.
pub fn bus_id_of(nccl_id: &str) -> Option<String> {
    let local = nccl_id.rsplit('-').next().unwrap_or(nccl_id);
    let id = u64::from_str_radix(local, 16).ok()?;
    let text = format!(
        "{:04x}:{:02x}:{:02x}.{:01x}",
        id >> 20,
        (id & 0xff000) >> 12,
        (id & 0xff0) >> 4,
        id & 0xf
    );
    crate::parse::pci::Bdf::parse(&text).map(|b| b.to_string())
}

/// Which NCCL wrote the node's lines.
#[derive(Debug, Clone, Serialize)]
pub struct NcclVersion {
    /// `2.18.5+cuda12.2`, when a version line says so.
    pub version: Option<String>,
    /// `log` (the node's own version line), `log-unprefixed` (a version line without a host,
    /// taken for every node), `wording` (inferred from how the lines are phrased), `unknown`.
    pub source: &'static str,
    /// With `wording`: the releases the lines fit, `2.12-2.20`.
    pub range: Option<String>,
    /// Every version line of the node, when there are several.
    pub all: Vec<String>,
}

/// A NIC as NCCL listed it, with its GDR decision.
#[derive(Debug, Clone, Serialize)]
pub struct Nic {
    pub net: String,
    pub index: u32,
    pub name: String,
    pub port: Option<u32>,
    /// `IB`, `RoCE`, `IB/SHARP`; for a socket, its address.
    pub link: Option<String>,
    /// `enabled`, `disabled`, or `not-printed`.
    pub gdr: &'static str,
    /// NCCL's reason as printed: `no module`, `nvidia-peermem`, `DMABUF`, ...
    pub reason: Option<String>,
    /// 2.4 prints the decision per GPU: which.
    pub gpu: Option<String>,
}

/// One GPU-NIC GDR decision with its distance.
#[derive(Debug, Clone, Serialize)]
pub struct GpuNic {
    pub gpu: String,
    pub nic: String,
    pub gdr: bool,
    pub distance: u32,
    pub distance_name: String,
    pub level: u32,
    pub level_name: String,
    /// `default` (NCCL's own), `environment` (NCCL_NET_GDR_LEVEL), or `not-default`.
    pub level_source: &'static str,
    /// 2.4-2.5 compare `distance >= level`, later releases `distance > level`.
    pub comparison: &'static str,
    pub read: Option<bool>,
    pub mode: Option<String>,
    pub pxn_via: Option<String>,
    /// How many lines said this (every rank prints it).
    pub lines: u64,
}

/// One rank's connections through one NIC, all with GDR or all without.
#[derive(Debug, Clone, Serialize)]
pub struct ConnGroup {
    /// The CUDA device of the printing thread (`[2]` in the prefix).
    pub cuda_dev: Option<u32>,
    pub rank: u32,
    /// What NCCL printed in brackets after the rank, when it is a bus id.
    pub bus: Option<String>,
    pub net: String,
    pub nic: u32,
    pub gdr: bool,
    pub sends: u64,
    pub receives: u64,
    pub channels: Vec<u32>,
    pub peers: Vec<u32>,
    pub more_peers: bool,
    pub proxies: Vec<u32>,
    pub pci: bool,
}

/// A gdrdoctor check and finding code that explains a cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct See {
    pub check: &'static str,
    pub code: &'static str,
}

const fn see(check: &'static str, code: &'static str) -> See {
    See { check, code }
}

/// Why GDR was not used somewhere.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The nodes it applies to (the same cause on many nodes is one diagnosis).
    pub nodes: Vec<String>,
    /// `distance`, `level-from-env`, `no-peer-memory`, `sockets`, `plugin-disabled`,
    /// `gdr-read-off`, `not-explained`.
    pub cause: &'static str,
    /// What it is about: `GPU 18000 -> NIC 0`, `NIC 0 'mlx5_0'`, `network Socket`.
    pub subject: String,
    /// What NCCL printed, and what it means.
    pub message: String,
    /// The gdrdoctor checks and codes that explain it, most likely first; empty when the cause
    /// is the job's own setting or a plugin's decision, outside any check.
    pub see: Vec<See>,
    pub fix: String,
    /// NET connections without GDR that this explains (0: NCCL's decision, with no connection
    /// line in the log).
    pub connections: u64,
    /// The ranks those connections belong to.
    pub ranks: Vec<u32>,
}

/// An `NCCL WARN` line, with the same ones counted.
#[derive(Debug, Clone, Serialize)]
pub struct Warning {
    pub text: String,
    pub count: u64,
    pub nodes: Vec<String>,
    pub meaning: Option<String>,
    pub see: Vec<See>,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub net_connections: u64,
    pub with_gdr: u64,
    pub without_gdr: u64,
    /// 0: every NET connection used GDR; 1: some did not (or nothing says it did).
    pub exit_code: u8,
    pub summary: String,
}

/// What is known of a node's NCCL release.
#[derive(Debug, Clone, Copy)]
enum Known {
    Exact(Version),
    Range(Era),
    Unknown,
}

impl Known {
    fn era(self) -> Era {
        match self {
            Known::Exact(v) => Era::new(v, Version::new(v.major, v.minor, v.patch + 1)),
            Known::Range(e) => e,
            Known::Unknown => Era::ANY,
        }
    }

    /// Definitely older than 2.x.0?
    fn before(self, minor: u16) -> bool {
        self.era().until <= Version::new(2, minor, 0)
    }

    /// Definitely 2.x.0 or later?
    fn since(self, minor: u16) -> bool {
        self.era().from >= Version::new(2, minor, 0)
    }

    fn describe(self) -> String {
        match self {
            Known::Exact(v) => format!("NCCL {v}"),
            Known::Range(e) => format!("NCCL {e}"),
            Known::Unknown => "this NCCL".to_owned(),
        }
    }
}

fn build(c: Collector) -> Explanation {
    let single_bare = (c.bare_versions.len() == 1)
        .then(|| c.bare_versions.iter().next().map(|(v, t)| (*v, t.clone())))
        .flatten();
    let mut nodes = Vec::new();
    let mut diagnoses = Vec::new();
    let mut hints = BTreeSet::new();
    let (mut total, mut with_gdr) = (0u64, 0u64);
    let mut decided_off = false;
    let mut decided_on = false;
    let mut order: Vec<&NodeAcc> = c.nodes.iter().collect();
    order.sort_by(|a, b| a.key.cmp(&b.key));
    for acc in order {
        let (known, mut nccl) = version_of(acc, &single_bare);
        let known = narrow_by_level(acc, known);
        if let (Known::Range(e), Some(_)) = (known, &nccl.range) {
            nccl.range = Some(e.to_string());
        }
        let mut node = Node {
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
            connections: Vec::new(),
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
        };
        for (k, a) in &acc.conns {
            let n = a.sends + a.receives;
            total += n;
            if k.gdr {
                with_gdr += n;
            }
            let mut channels: Vec<u32> = (0..64).filter(|i| a.channels & (1 << i) != 0).collect();
            channels.extend(a.channels_more.iter().copied());
            node.connections.push(ConnGroup {
                cuda_dev: k.dev,
                rank: k.rank,
                bus: a.bus.clone().or_else(|| acc.rank_bus.get(&k.rank).cloned()),
                net: c.nets[k.net as usize].clone(),
                nic: k.nic,
                gdr: k.gdr,
                sends: a.sends,
                receives: a.receives,
                channels,
                peers: a.peers.iter().copied().collect(),
                more_peers: a.more_peers,
                proxies: a.proxies.iter().copied().collect(),
                pci: a.pci,
            });
        }
        decided_off |=
            acc.hcas.values().any(|h| !h.enabled) || acc.gpus.values().any(|g| !g.enabled);
        decided_on |= acc.hcas.values().any(|h| h.enabled) || acc.gpus.values().any(|g| g.enabled);
        diagnose(acc, known, &node, &mut diagnoses, &mut hints);
        nodes.push(node);
    }
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
    } else if decided_off || !diagnoses.is_empty() {
        (
            1,
            "no NET connection in the log, and NCCL decided against GPUDirect RDMA".to_owned(),
        )
    } else if decided_on {
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
    Explanation {
        schema: 1,
        inputs: c.inputs,
        nodes,
        diagnoses,
        warnings,
        hints: hints.into_iter().collect(),
        unrecognised: c.unrecognised,
        dropped: c.dropped,
        verdict: Verdict {
            net_connections: total,
            with_gdr,
            without_gdr: without,
            exit_code,
            summary,
        },
    }
}

fn version_of(acc: &NodeAcc, bare: &Option<(Version, String)>) -> (Known, NcclVersion) {
    let all: Vec<String> = if acc.versions.len() > 1 {
        acc.versions.values().cloned().collect()
    } else {
        Vec::new()
    };
    if let Some((v, text)) = acc.versions.iter().next() {
        return (
            Known::Exact(*v),
            NcclVersion {
                version: Some(text.clone()),
                source: "log",
                range: None,
                all,
            },
        );
    }
    if let Some((v, text)) = bare {
        return (
            Known::Exact(*v),
            NcclVersion {
                version: Some(text.clone()),
                source: "log-unprefixed",
                range: None,
                all,
            },
        );
    }
    match acc.era {
        Some(e) if !acc.era_conflict => (
            Known::Range(e),
            NcclVersion {
                version: None,
                source: "wording",
                range: Some(e.to_string()),
                all,
            },
        ),
        _ => (
            Known::Unknown,
            NcclVersion {
                version: None,
                source: "unknown",
                range: None,
                all,
            },
        ),
    }
}

/// A level NCCL printed as a number, with the name the environment gave it
/// (`NCCL_NET_GDR_LEVEL set by environment to PHB`), tells the numbering, hence the releases:
/// PHB is 4 only in 2.6-2.7.
fn narrow_by_level(acc: &NodeAcc, known: Known) -> Known {
    let Known::Range(era) = known else {
        return known;
    };
    let Some(name) = acc.env.get("NCCL_NET_GDR_LEVEL") else {
        return known;
    };
    let mut narrowed: Option<Era> = None;
    for t in levels::tables(era) {
        if acc
            .gpus
            .values()
            .all(|g| t.name(g.level) == Some(name.as_str()))
            && !acc.gpus.is_empty()
        {
            let fit = t.era.intersect(era).unwrap_or(t.era);
            narrowed = Some(match narrowed {
                None => fit,
                Some(n) => Era::new(n.from.min(fit.from), n.until.max(fit.until)),
            });
        }
    }
    narrowed.map(Known::Range).unwrap_or(known)
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

/// The names a distance number may have: one, or several with the releases of each.
fn names(tables: &[&'static Table], n: u32) -> String {
    let mut by_name: Vec<(&str, Era)> = Vec::new();
    for t in tables {
        let name = t.name(n).unwrap_or("?");
        match by_name.iter_mut().find(|(x, _)| *x == name) {
            Some((_, e)) => {
                e.from = e.from.min(t.era.from);
                e.until = e.until.max(t.era.until);
            }
            None => by_name.push((name, t.era)),
        }
    }
    match by_name.as_slice() {
        [] => "?".to_owned(),
        [(name, _)] => (*name).to_owned(),
        many => many
            .iter()
            .map(|(name, e)| format!("{name} in NCCL {e}"))
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// The numberings a decision may be read in, and whether that rests on assuming NCCL's default
/// level. The environment's level name, when the log has it, picks the numbering.
fn tables_for(acc: &NodeAcc, known: Known, g: &GpuAcc) -> (Vec<&'static Table>, bool) {
    let era = if g.inclusive {
        known
            .era()
            .intersect(Era::new(Version::new(2, 0, 0), Version::new(2, 6, 0)))
    } else {
        known
            .era()
            .intersect(Era::new(Version::new(2, 6, 0), Version::new(99, 0, 0)))
    }
    .unwrap_or(known.era());
    let all = levels::tables(era);
    if all.len() <= 1 {
        return (all, false);
    }
    if let Some(name) = acc.env.get("NCCL_NET_GDR_LEVEL") {
        let fit: Vec<_> = all
            .iter()
            .copied()
            .filter(|t| t.name(g.level) == Some(name.as_str()))
            .collect();
        if !fit.is_empty() {
            return (fit, false);
        }
        return (all, false);
    }
    let fit: Vec<_> = all
        .iter()
        .copied()
        .filter(|t| t.name(g.level) == Some(t.default_level) && t.name(g.distance).is_some())
        .collect();
    if fit.is_empty() {
        (all, false)
    } else {
        (fit, true)
    }
}

fn level_source(acc: &NodeAcc, tables: &[&'static Table], g: &GpuAcc) -> &'static str {
    if acc.env.contains_key("NCCL_NET_GDR_LEVEL") {
        "environment"
    } else if tables
        .iter()
        .all(|t| t.name(g.level) == Some(t.default_level))
    {
        "default"
    } else {
        "not-default"
    }
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

// ---------------------------------------------------------------------------------------------
// Diagnosis

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

/// The NIC index a decision line names: `0`, a net id `1` (hex), or `0-1` (2.29).
fn nic_index(nic: &str) -> Option<u32> {
    let local = nic.rsplit('-').next().unwrap_or(nic);
    u32::from_str_radix(local, 16).ok()
}

fn is_socket(net: &str) -> bool {
    net == "Socket"
}

/// Why one connection group had no GDR.
struct Cause {
    kind: &'static str,
    subject: String,
    message: String,
    see: Vec<See>,
    fix: String,
}

fn diagnose(
    acc: &NodeAcc,
    known: Known,
    node: &Node,
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
        let cause = cause_of(acc, known, g, hints);
        add(cause, g.sends + g.receives, Some(g.rank));
    }
    // NCCL's decisions against GDR where the log shows no connection at all: they are still
    // why GDR would not be used, and the only answer an init-only log has.
    if node.connections.is_empty() {
        // Sockets: NCCL said so, or every NIC it judged is a socket, or the IB transport found
        // nothing and no other network was named (2.4-2.5 print no `Using network` line).
        let ib_gone = (acc.no_device.contains("IB") || acc.init_failed.contains("IB"))
            && node.networks.iter().all(|n| is_socket(n))
            && !acc.nics.keys().any(|(net, _)| !is_socket(net));
        if node.networks.iter().any(|n| is_socket(n))
            || (!acc.hcas.is_empty() && acc.hcas.keys().all(|(net, _, _)| is_socket(net)))
            || ib_gone
        {
            add(sockets(acc, "Socket"), 0, None);
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
            if !acc.plugin_gdr_off.is_empty() {
                add(
                    plugin_off(acc, node.networks.first().map(String::as_str)),
                    0,
                    None,
                );
            }
        }
    }
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
    if known.since(30) && !without.is_empty() {
        hints.insert("NCCL 2.30 and later print the GPU-NIC distance decision only at NCCL_DEBUG=TRACE; the per-NIC line (`GPU Direct RDMA Enabled|Disabled for HCA`) is still INFO under NCCL_DEBUG_SUBSYS=NET.".to_owned());
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

fn cause_of(acc: &NodeAcc, known: Known, g: &ConnGroup, hints: &mut BTreeSet<String>) -> Cause {
    if is_socket(&g.net) {
        return sockets(acc, &g.net);
    }
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
            return distance(acc, known, gpu, nic, a);
        }
        if g.receives == 0 && a.read == Some(false) {
            return read_off(gpu, nic, g);
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
        return no_peer_memory(acc, known, &off_subject(&this));
    }
    if !hca_off.is_empty() && !hca_on_this {
        // NCCL tests for peer memory once per process, whatever the NIC.
        let subject = format!("NIC {}, like {}", g.nic, off_subject(&hca_off));
        return no_peer_memory(acc, known, &subject);
    }
    if !acc.plugin_gdr_off.is_empty() {
        return plugin_off(acc, Some(&g.net));
    }
    if !acc.net_subsys {
        hints.insert("Some NET connections went without GDR and the log has no `GPU Direct RDMA` line saying why: rerun with NCCL_DEBUG_SUBSYS=INIT,NET (or ALL) to get NCCL's decision per NIC and per GPU-NIC pair.".to_owned());
    }
    Cause {
        kind: "not-explained",
        subject: format!("NET/{}/{}", g.net, g.nic),
        message: if acc.net_subsys {
            format!(
                "NCCL used NIC {} without GDR and printed no decision against it for this GPU",
                g.nic
            )
        } else {
            format!(
                "NCCL used NIC {} without GDR; the log has no NET-subsystem line with NCCL's reason",
                g.nic
            )
        },
        see: vec![
            see("peer-memory", "peermem-not-loaded"),
            see("pcie-placement", "gpu-nic-too-far"),
        ],
        fix: "Rerun with NCCL_DEBUG_SUBSYS=INIT,NET for NCCL's reason; on the node, `gdrdoctor check` says whether a GPU memory path exists (peer-memory) and how far each GPU is from its NIC (pcie-placement).".to_owned(),
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

fn sockets(acc: &NodeAcc, net: &str) -> Cause {
    let ib_off = acc.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1");
    let (message, see_list, fix) = if ib_off {
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
fn warning_meaning(text: &str) -> (Option<String>, Vec<See>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn explain(text: &str) -> Explanation {
        let mut c = Collector::new();
        c.read("test", text.as_bytes());
        c.finish().expect("an NCCL log")
    }

    #[test]
    fn graph_paths_to_the_networks_are_kept_per_gpu_and_nic() {
        // 2.28.9 on the one-GPU machine (REFERENCE.md section 9), printed by two ranks; and
        // NVIDIA/nccl#879's 2.x line with three NETs.
        let e = explain(
            "h:1:2 [0] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) \n\
             h:1:3 [1] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) \n\
             h:1:3 [1] NCCL INFO GPU/49000 :GPU/49000 (0/5000.000000/LOC) NET/0 (6/24.000000/PHB) NET/2 (4/24.000000/PXB) NET/4 (7/9.000000/SYS)\n",
        );
        let p = &e.nodes[0].paths;
        let seen: Vec<String> = p
            .iter()
            .map(|x| {
                let bus = x.bus_id.as_deref().unwrap_or("?");
                format!("{bus} {} {:?} {} {}", x.net, x.nic, x.path, x.lines)
            })
            .collect();
        assert_eq!(
            seen,
            [
                "0000:00:06.0 0-0 Some(0) PHB 2",
                "0000:49:00.0 0 Some(0) PHB 1",
                "0000:49:00.0 2 Some(2) PXB 1",
                "0000:49:00.0 4 Some(4) SYS 1",
            ]
        );
        assert_eq!(bus_id_of("0-3b000").as_deref(), Some("0000:3b:00.0"));
        assert_eq!(bus_id_of("CE000").as_deref(), Some("0000:ce:00.0"));
        assert_eq!(bus_id_of("zz"), None);
    }

    #[test]
    fn distance_in_a_2_4_log() {
        // Mellanox/nv_peer_memory#56 (NCCL 2.4.7).
        let e = explain(
            "NCCL version 2.4.7+cuda10.0\n\
             master_node:11717:11986 [2] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 2[2] / HCA 0 (distance 3 >= 2)\n\
             master_node:11717:11986 [2] NCCL INFO Ring 00 : 6 -> 2 [receive] via NET/IB/0\n",
        );
        assert_eq!(e.verdict.exit_code, 1);
        let d = &e.diagnoses[0];
        assert_eq!(d.cause, "distance");
        assert_eq!(d.see, vec![see("pcie-placement", "gpu-nic-too-far")]);
        assert!(
            d.message
                .contains("3 (NODE) >= level 2 (PHB, NCCL's default)"),
            "{}",
            d.message
        );
        assert!(d.fix.contains("NCCL_NET_GDR_LEVEL=4"), "{}", d.fix);
    }

    #[test]
    fn the_environment_level_picks_the_numbering() {
        // NVIDIA/DeepLearningExamples#383: level 4 named PHB is 2.6-2.7's numbering, so 5 is SYS.
        let e = explain(
            "node-1:32726:33054 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB\n\
             node-1:32726:33054 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 18000 / HCA 0 (distance 5 > 4)\n",
        );
        assert_eq!(e.nodes[0].gpu_nic[0].distance_name, "SYS");
        assert_eq!(e.nodes[0].gpu_nic[0].level_name, "PHB");
        assert_eq!(e.diagnoses[0].cause, "distance");
    }

    #[test]
    fn all_gdr_is_exit_0() {
        let e = explain(
            "h:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
        );
        assert_eq!((e.verdict.exit_code, e.verdict.with_gdr), (0, 1));
        assert!(e.diagnoses.is_empty());
    }

    #[test]
    fn not_nccl() {
        let mut c = Collector::new();
        c.read("junk", &b"\x00\x01binary\xff\n"[..]);
        assert!(c.finish().is_err());
    }

    #[test]
    fn long_lines_are_counted_not_held() {
        let mut text = "x".repeat(MAX_LINE + 10);
        text.push('\n');
        text.push_str(
            "h:1:2 [0] NCCL INFO Channel 00/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA\n",
        );
        let e = explain(&text);
        assert_eq!(e.inputs[0].long_lines_skipped, 1);
        assert_eq!(e.inputs[0].lines, 2);
        assert_eq!(e.verdict.with_gdr, 1);
    }

    /// Host names are kept to MAX_TEXT characters, as every other name from a log: distinct
    /// hosts of 60 KB each were each held whole, twice (issue 25).
    #[test]
    fn long_host_names_are_cut_as_names_are() {
        let mut c = Collector::new();
        for i in 0..50 {
            let host = format!("{i:03}{}", "h".repeat(60_000));
            c.feed_line(format!("{host}:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0").as_bytes());
        }
        c.feed_line(b"short:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5_0");
        assert_eq!(c.nodes.len(), 51);
        assert!(c.nodes.iter().all(|n| n.key.len() <= MAX_TEXT + 3));
        assert!(c.by_host.keys().all(|k| k.len() <= MAX_TEXT + 3));
        let e = c.finish().unwrap();
        let names: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
        assert!(names.contains(&"short"), "{names:?}");
        let cut = crate::sanitize::cut(&format!("000{}", "h".repeat(60_000)), MAX_TEXT);
        assert!(
            cut.ends_with('…') && cut.chars().count() == MAX_TEXT,
            "{cut}"
        );
        assert!(names.contains(&cut.as_str()), "{:?}", &names[..2]);
    }
}
