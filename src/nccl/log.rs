//! One line of NCCL's `NCCL_DEBUG=INFO` output, and what it says about GPUDirect RDMA.
//!
//! Pure functions from a line to an [`Event`], for every NCCL from 2.4 to 2.30. The wording of
//! the lines that matter changed many times; each pattern below cites the NCCL source file and
//! the release tags (github.com/NVIDIA/nccl) that print it, and every event carries the [`Era`]
//! its wording is consistent with, so that a log without a version line still says which NCCL
//! wrote it.
//!
//! The prefix is NCCL's own (`src/debug.cc`, `ncclDebugLog`; `src/misc/utils.cc` before 2.5):
//! `[timestamp ]host:pid:tid [cudaDev] NCCL INFO msg`, and for warnings
//! `host:pid:tid [cudaDev] file.cc:line NCCL WARN msg`. Launchers add their own in front
//! (`[1,9]<stdout>:`, `(RayTrainWorker pid=83500) `, `0: `), and some logs lose the host part
//! (` [0] NCCL INFO`), so the prefix is read backwards from the `NCCL INFO` marker.

use memchr::memmem;
use std::sync::LazyLock;

/// An NCCL release, `2.18.5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    pub major: u16,
    pub minor: u16,
    pub patch: u16,
}

impl Version {
    pub const fn new(major: u16, minor: u16, patch: u16) -> Self {
        Version {
            major,
            minor,
            patch,
        }
    }

    /// `2.18.5+cuda12.2` -> 2.18.5 (NCCL's `VERSION_STRING`, src/init.cc: major.minor.patch,
    /// then a suffix and `+cudaX.Y`).
    pub fn parse(s: &str) -> Option<Version> {
        let mut parts = s.splitn(3, '.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let rest = parts.next()?;
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let patch = rest[..end].parse().ok()?;
        Some(Version::new(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The releases whose wording a line matches: `from` included, `until` not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Era {
    pub from: Version,
    pub until: Version,
}

impl Era {
    /// Lines every release prints alike.
    pub const ANY: Era = Era::new(Version::new(2, 0, 0), Version::new(99, 0, 0));

    pub const fn new(from: Version, until: Version) -> Self {
        Era { from, until }
    }

    /// `2.x.0` up to (not including) `2.y.0`.
    const fn minors(from: u16, until: u16) -> Self {
        Era::new(Version::new(2, from, 0), Version::new(2, until, 0))
    }

    /// From `2.x.0` on.
    const fn since(from: u16) -> Self {
        Era::new(Version::new(2, from, 0), Version::new(99, 0, 0))
    }

    pub fn intersect(self, other: Era) -> Option<Era> {
        let from = self.from.max(other.from);
        let until = self.until.min(other.until);
        (from < until).then_some(Era { from, until })
    }

    pub fn contains(self, v: Version) -> bool {
        self.from <= v && v < self.until
    }

    pub fn is_any(self) -> bool {
        self == Era::ANY
    }
}

impl std::fmt::Display for Era {
    /// As people say it: `2.12-2.20`, `2.29`, `2.13 or later`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let from = format!("{}.{}", self.from.major, self.from.minor);
        if self.until.major >= 99 {
            return write!(f, "{from} or later");
        }
        // The last release before `until`: 2.21.0 -> 2.20; 2.27.5 -> 2.27.
        let last = if self.until.patch > 0 {
            format!("{}.{}", self.until.major, self.until.minor)
        } else {
            format!(
                "{}.{}",
                self.until.major,
                self.until.minor.saturating_sub(1)
            )
        };
        if last == from {
            write!(f, "{from}")
        } else {
            write!(f, "{from}-{last}")
        }
    }
}

/// Which kind of NCCL line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    /// The bare `NCCL version 2.4.7+cuda10.0` line that rank 0 prints with printf (2.4-2.5)
    /// or NCCL's VERSION level.
    Version,
}

/// Who printed the line: NCCL's `host:pid:tid [cudaDev]` prefix, as much of it as is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Origin<'a> {
    pub host: Option<&'a str>,
    pub pid: Option<u32>,
    /// The CUDA device of the thread that printed (`[2]`).
    pub dev: Option<u32>,
}

/// A parsed NCCL line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub level: Level,
    pub origin: Origin<'a>,
    /// The message after `NCCL INFO` / `NCCL WARN`.
    pub message: &'a str,
    pub event: Event<'a>,
    /// The releases that print this wording.
    pub era: Era,
}

/// Send or receive side of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    Send,
    Receive,
}

/// One NET connection of one channel: `Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection<'a> {
    pub channel: u32,
    pub from: u32,
    pub to: u32,
    /// What NCCL printed in brackets after each rank: the bus id (2.5-2.17), the NVML device
    /// (2.18+), nothing (2.4).
    pub from_dev: Option<&'a str>,
    pub to_dev: Option<&'a str>,
    pub dir: Dir,
    /// The network's name: `IB`, `Socket`, `IBext_v8`, `AWS Libfabric`.
    pub net: &'a str,
    /// NCCL's index of the NIC (`NET/IB/3`).
    pub dev: u32,
    /// PXN: the rank whose NIC carries the traffic (`NET/IB/3(2)`, 2.12+).
    pub proxy: Option<u32>,
    /// `/GDRDMA`: the NIC reads or writes this GPU's memory directly.
    pub gdr: bool,
    /// `(PCI)`: GDR forced through PCIe on a C2C system (2.26+).
    pub pci: bool,
    /// `/Shared`: a shared buffer (2.8+).
    pub shared: bool,
}

impl Connection<'_> {
    /// The rank that printed the line (its own side), and the peer.
    pub fn local_and_peer(&self) -> (u32, u32) {
        match self.dir {
            Dir::Send => (self.from, self.to),
            Dir::Receive => (self.to, self.from),
        }
    }

    /// The bracket after the local rank.
    pub fn local_dev(&self) -> Option<&str> {
        match self.dir {
            Dir::Send => self.from_dev,
            Dir::Receive => self.to_dev,
        }
    }
}

/// Why NCCL says an HCA can or cannot do GDR, in its own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HcaVia {
    /// No reason printed (NCCL 2.13+ topo.cc: peermem or DMA-BUF, it does not say which).
    Unstated,
    /// `(no module)`: NCCL 2.5-2.12 net_ib.cc found no peer-memory module.
    NoModule,
    /// `(no module or not supported by GPU)`: NCCL 2.4 net_ib.cc.
    NoModuleOrGpu,
    /// HPC-X's IB plugin: `GPU Direct RDMA (nvidia-peermem) enabled`.
    PeerMem,
    /// HPC-X's IB plugin: `GPU Direct RDMA (DMABUF) enabled`.
    DmaBuf,
}

/// A GPU-NIC GDR decision with its distance (src/graph/paths.cc `ncclTopoCheckGdr`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuGdr<'a> {
    pub enabled: bool,
    /// The GPU as printed: `2[2]` (2.4), a bus id `1a000` (2.5-2.23), a rank `3` (2.24-2.28),
    /// `GPU/0-1b000 (rank 3)` (2.29).
    pub gpu: &'a str,
    /// The NIC as printed: an index `0` (2.4-2.20), a net id `0`/`1` (2.21+), `NET/0-0` (2.29).
    pub hca: &'a str,
    pub distance: u32,
    pub level: u32,
    /// 2.4-2.5 disable at `distance >= level`; later releases at `distance > level`.
    pub inclusive: bool,
    /// `read 1`: GDR also for sends (reads from GPU memory).
    pub read: Option<bool>,
    /// `mode Default` / `mode PCI` (2.26+).
    pub mode: Option<&'a str>,
    /// `using PXN via GPU/0-2a000` (2.29): the distance is that GPU's.
    pub pxn_via: Option<&'a str>,
}

/// One device from `NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/IB ; OOB ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetDevice<'a> {
    pub index: u32,
    pub name: &'a str,
    pub port: Option<u32>,
    /// `IB`, `RoCE`, `IB/SHARP`; for sockets the address.
    pub link: Option<&'a str>,
}

/// One entry of a GRAPH path line: `NET/0-0 (3/1.2/PHB)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PathTo<'a> {
    /// The node type: `GPU`, `PCI`, `NVS`, `CPU`, `NIC`, `NET` (topo.cc `topoNodeTypeStr`).
    pub kind: &'a str,
    /// Its id as printed: `0-0` (2.21+: system id and local id), `0` or `3B000` (2.6-2.20).
    pub id: &'a str,
    /// Links on the path.
    pub hops: u32,
    /// The path's bandwidth in GB/s as NCCL rates it.
    pub bw: f64,
    /// The path type by name (`topoPathTypeStr`): `LOC`, `PIX`, `PXB`, `PHB`, `SYS`, `PXN`, ...
    pub path: &'a str,
}

/// What a line says.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<'a> {
    /// `NCCL version 2.18.5+cuda12.2` (src/init.cc `VERSION_STRING`).
    Version { version: Version, text: &'a str },
    /// `Using network IB` (src/init.cc, 2.6+).
    Network { name: &'a str },
    /// `NET/IB : Using [0]mlx5_0:1/RoCE ...`, `NET/Socket : Using [0]eth0:10.0.0.1<0>`.
    NetDevices {
        net: &'a str,
        devices: Vec<NetDevice<'a>>,
    },
    /// `NET/IB : No device found.` (src/transport/net_ib.cc, all releases).
    NoDevice { net: &'a str },
    /// `Failed to initialize NET plugin IB` (src/plugin/net.cc, 2.25+).
    NetInitFailed { name: &'a str },
    /// A network plugin named: `P2P plugin IBext_v8` (HPC-X), `Loaded net plugin X`.
    Plugin { name: &'a str },
    /// A plugin saying it turned GDR off: aws-ofi-nccl's `NET/OFI ... disabling GDR`.
    PluginGdrOff { text: &'a str },
    /// `NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`.
    HcaGdr {
        net: &'a str,
        enabled: bool,
        index: u32,
        name: &'a str,
        via: HcaVia,
        /// 2.4 prints it per GPU: `for GPU 0[0] / HCA 0 'mlx5_0' (no module ...)`.
        gpu: Option<&'a str>,
    },
    /// `GPU Direct RDMA Disabled for GPU 18000 / HCA 0 (distance 5 > 4)`.
    GpuGdr(GpuGdr<'a>),
    /// `CUDA Dev 0[0], IB NIC distance :  PIX NODE` (2.4 src/transport/net.cc).
    NicDistance {
        gpu: &'a str,
        net: &'a str,
        levels: Vec<&'a str>,
    },
    /// `Channel 02/0 : 3[3] -> 11[3] [send] via NET/IB/3/GDRDMA`.
    Connection(Connection<'a>),
    /// `Connected all rings, use ring PXN 0 GDR 1` (src/transport/generic.cc, 2.24+).
    RingsGdr { pxn: i64, gdr: i64 },
    /// `NCCL_NET_GDR_LEVEL set by environment to PHB`, `NCCL_IB_HCA set to mlx5`.
    Env { name: &'a str, value: &'a str },
    /// `DMA-BUF is available on GPU device 0` (src/init.cc, 2.13+): the GPU can export
    /// dma-bufs; a capability, not a use.
    DmaBufAvailable { cuda_dev: u32 },
    /// The paths from one GPU to every other node of NCCL's topology, as NCCL computed them
    /// (NCCL_DEBUG_SUBSYS=GRAPH): `GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff
    /// (1/48.0/PHB) NET/0-0 (3/1.2/PHB)`. The path type to a NET is NCCL's own GPU-NIC distance,
    /// after it routed the pair through the CPU when GDR is off for it.
    GpuPaths {
        /// The GPU as printed: `0-60` (2.23+), `60` or `CE000` (2.6-2.22): NCCL's bus id number.
        gpu: &'a str,
        paths: Vec<PathTo<'a>>,
        /// The line ended inside an entry (NCCL cuts it at 1024 bytes): the entries before it.
        truncated: bool,
    },
    /// `comm 0x... rank 3 nranks 16 cudaDev 3 ... busId 1c000 ...` (src/init.cc).
    CommInit {
        rank: u32,
        nranks: u32,
        cuda_dev: Option<u32>,
        bus_id: Option<&'a str>,
    },
    /// A warning, as printed.
    Warn { text: &'a str },
    /// About GDR (it names `GPU Direct RDMA`, `GDRDMA`, `via NET/`, ...), but in no wording
    /// this parser knows: a newer NCCL, or a line cut short.
    Unrecognised,
    /// Anything else NCCL prints.
    Other,
}

static NCCL: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"NCCL "));

/// Where the line has `NCCL ` first, if at all: the fast test before any decoding.
pub fn find_nccl(line: &[u8]) -> Option<usize> {
    NCCL.find(line)
}

static VIA: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b" via "));

/// Every word of [`GDR_WORDS`] has `DMA`, `NET/` or `PXN` in it: three scans tell most lines
/// apart before the words themselves are looked for.
static GDR_HINTS: LazyLock<[memmem::Finder<'static>; 3]> = LazyLock::new(|| {
    [
        memmem::Finder::new(b"DMA"),
        memmem::Finder::new(b"NET/"),
        memmem::Finder::new(b"PXN"),
    ]
});

fn about_gdr(m: &str) -> bool {
    GDR_HINTS.iter().any(|f| f.find(m.as_bytes()).is_some())
        && GDR_WORDS.iter().any(|w| m.contains(w))
}

/// Parses one line (without its newline). `None`: not an NCCL line.
pub fn parse(line: &str) -> Option<Line<'_>> {
    parse_from(line, NCCL.find(line.as_bytes())?)
}

/// [`parse`], the first `NCCL ` being at `first` (the caller's fast test found it already).
pub fn parse_from(line: &str, first: usize) -> Option<Line<'_>> {
    let bytes = line.as_bytes();
    let mut start = first;
    while let Some(i) = NCCL.find(bytes.get(start..)?) {
        let at = start + i;
        let after = &line[at + 5..];
        if let Some(message) = after.strip_prefix("INFO ") {
            let (origin, _) = origin(&line[..at], false);
            return Some(info(origin, message.trim_end()));
        }
        if let Some(message) = after.strip_prefix("WARN ") {
            let (origin, _) = origin(&line[..at], true);
            let message = message.trim_end();
            return Some(Line {
                level: Level::Warn,
                origin,
                message,
                event: Event::Warn { text: message },
                era: Era::ANY,
            });
        }
        if after.starts_with("version ") {
            let message = line[at..].trim_end();
            let event = version(message).unwrap_or(Event::Unrecognised);
            return Some(Line {
                level: Level::Version,
                origin: Origin::default(),
                message,
                event,
                era: Era::ANY,
            });
        }
        start = at + 5;
    }
    None
}

/// The last whitespace-separated word of `b[..end]`, as a range.
fn last_word(b: &[u8], mut end: usize) -> Option<(usize, usize)> {
    while end > 0 && b[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    if end == 0 {
        return None;
    }
    let mut start = end;
    while start > 0 && !b[start - 1].is_ascii_whitespace() {
        start -= 1;
    }
    Some((start, end))
}

/// Decimal digits, and only those.
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + u32::from(d - b'0')))
}

/// `[ts ]host:pid:tid [dev] [file:line ]` before the marker, read from the end. Byte by byte:
/// this runs on every line of logs of gigabytes.
fn origin(head: &str, warn: bool) -> (Origin<'_>, Option<&str>) {
    let b = head.as_bytes();
    let mut o = Origin::default();
    let mut source = None;
    let Some((mut s, mut e)) = last_word(b, b.len()) else {
        return (o, None);
    };
    // A warning names the source line before `NCCL WARN` (`net_ib.cc:1295`).
    if warn && b[s] != b'[' {
        source = Some(&head[s..e]);
        match last_word(b, s) {
            Some(w) => (s, e) = w,
            None => return (o, source),
        }
    }
    let w = &b[s..e];
    let Some(dev) = (w.len() >= 3 && w[0] == b'[' && w[w.len() - 1] == b']')
        .then(|| digits(&w[1..w.len() - 1]))
        .flatten()
    else {
        return (o, source);
    };
    o.dev = Some(dev);
    let Some((hs, he)) = last_word(b, s) else {
        return (o, source);
    };
    // host:pid:tid, the host being whatever a launcher's own prefix leaves of it
    // (`[1,9]<stdout>:node1:21:69` -> node1).
    let word = &b[hs..he];
    let colon = |end: usize| word[..end].iter().rposition(|&c| c == b':');
    let Some(c2) = colon(word.len()) else {
        return (o, source);
    };
    let Some(c1) = colon(c2) else {
        return (o, source);
    };
    if digits(&word[c2 + 1..]).is_none() {
        return (o, source);
    }
    let Some(pid) = digits(&word[c1 + 1..c2]) else {
        return (o, source);
    };
    let host_start = colon(c1).map_or(0, |c| c + 1);
    o.pid = Some(pid);
    if host_start < c1 {
        o.host = Some(&head[hs + host_start..hs + c1]);
    }
    (o, source)
}

fn version(message: &str) -> Option<Event<'_>> {
    let text = message.strip_prefix("NCCL version ")?.trim();
    let v = Version::parse(text)?;
    Some(Event::Version {
        version: v,
        text: text.split_ascii_whitespace().next().unwrap_or(text),
    })
}

fn info<'a>(origin: Origin<'a>, message: &'a str) -> Line<'a> {
    let (event, era) = classify(message);
    Line {
        level: Level::Info,
        origin,
        message,
        event,
        era,
    }
}

/// Words that put a line about GDR or the network: one NCCL does not phrase the way this
/// parser knows is reported as unrecognised, not silently dropped.
const GDR_WORDS: &[&str] = &[
    "GPU Direct RDMA",
    "GDRDMA",
    "via NET/",
    "DMA-BUF is",
    "use ring PXN",
];

fn classify(m: &str) -> (Event<'_>, Era) {
    let parsed = match m.as_bytes().first() {
        Some(b'C') if m.starts_with("Channel ") => connection(m),
        Some(b'R') if m.starts_with("Ring ") => connection(m),
        Some(b'N') if m.starts_with("NET/") => net(m),
        Some(b'N') if m.starts_with("NCCL version ") => version(m).map(|e| (e, Era::ANY)),
        Some(b'N') if m.starts_with("NCCL_") => env(m).map(|e| (e, Era::ANY)),
        Some(b'G') if m.starts_with("GPU Direct RDMA ") => gpu_gdr(m, None),
        Some(b'G') if m.starts_with("GPU/") => gpu_paths(m),
        Some(b'U') if m.starts_with("Using network ") => Some((
            Event::Network {
                name: m["Using network ".len()..].trim(),
            },
            // src/init.cc `initNet`, 2.6+.
            Era::since(6),
        )),
        Some(b'C') if m.starts_with("CUDA Dev ") => nic_distance(m),
        Some(b'C') if m.starts_with("Connected all rings, use ring PXN ") => rings_gdr(m),
        Some(b'D') if m.starts_with("DMA-BUF is available on GPU device ") => m
            ["DMA-BUF is available on GPU device ".len()..]
            .trim()
            .parse()
            .ok()
            // src/init.cc `dmaBufSupported`, 2.13+.
            .map(|d| (Event::DmaBufAvailable { cuda_dev: d }, Era::since(13))),
        Some(b'F') if m.starts_with("Failed to initialize NET plugin ") => Some((
            Event::NetInitFailed {
                name: m["Failed to initialize NET plugin ".len()..].trim(),
            },
            Era::ANY,
        )),
        Some(b'P') if m.starts_with("P2P plugin ") => Some((
            // HPC-X's nccl-rdma-sharp-plugins, src/ib_plugin.c: `P2P plugin %s`.
            Event::Plugin {
                name: m["P2P plugin ".len()..].trim(),
            },
            Era::ANY,
        )),
        Some(b'c') | Some(b'n') if m.starts_with("comm ") || m.starts_with("ncclCommInit") => {
            comm_init(m)
        }
        _ => None,
    };
    match parsed {
        Some(p) => p,
        None if about_gdr(m) => (Event::Unrecognised, Era::ANY),
        None => (Event::Other, Era::ANY),
    }
}

/// `NET/<name> : ...`: devices, GDR per HCA, the 2.4-2.5 per-GPU GDR lines, plugins.
fn net(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = &m["NET/".len()..];
    // aws-ofi-nccl prints `NET/OFI <text>` with no colon (src/nccl_ofi_ofiutils.cpp).
    if let Some(text) = rest.strip_prefix("OFI ") {
        return Some(
            if text.contains("disabling GDR") || text.contains("GDR disabled") {
                (Event::PluginGdrOff { text: m }, Era::ANY)
            } else {
                (Event::Other, Era::ANY)
            },
        );
    }
    let (net, what) = rest.split_once(" : ").or_else(|| rest.split_once(": "))?;
    let net = net.trim();
    if let Some(devs) = what.strip_prefix("Using") {
        return Some((
            Event::NetDevices {
                net,
                devices: net_devices(net, devs),
            },
            Era::ANY,
        ));
    }
    if what.starts_with("No device found") {
        return Some((Event::NoDevice { net }, Era::ANY));
    }
    if what.starts_with("GPU Direct RDMA ") {
        return hca_gdr(net, what).or_else(|| gpu_gdr(what, Some(net)));
    }
    Some((Event::Other, Era::ANY))
}

/// `[0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ...` or `[0]ib0:192.168.11.1<0>`.
fn net_devices<'a>(net: &str, list: &'a str) -> Vec<NetDevice<'a>> {
    let list = list.split(';').next().unwrap_or(list);
    let mut out = Vec::new();
    for word in list.split_ascii_whitespace() {
        let Some((index, rest)) = word
            .strip_prefix('[')
            .and_then(|w| w.split_once(']'))
            .and_then(|(i, r)| Some((i.parse::<u32>().ok()?, r)))
        else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        let dev = if net == "Socket" {
            // src/transport/net_socket.cc: `[%d]%s:%s` (interface, address).
            match rest.split_once(':') {
                Some((name, addr)) => NetDevice {
                    index,
                    name,
                    port: None,
                    link: Some(addr),
                },
                None => NetDevice {
                    index,
                    name: rest,
                    port: None,
                    link: None,
                },
            }
        } else {
            // src/transport/net_ib.cc: `[%d]%s:%d/%s` (device, port, IB or RoCE).
            let (name, after) = rest.split_once(':').unwrap_or((rest, ""));
            let (port, link) = after.split_once('/').unwrap_or((after, ""));
            NetDevice {
                index,
                name,
                port: port.parse().ok(),
                link: (!link.is_empty()).then_some(link),
            }
        };
        out.push(dev);
    }
    out
}

/// The per-HCA line.
///
/// - 2.4 src/transport/net_ib.cc: `NET/IB : GPU Direct RDMA Disabled for GPU %d[%d] / HCA %d
///   '%s' (no module or not supported by GPU)`
/// - 2.5-2.12 src/transport/net_ib.cc: `NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no
///   module)`
/// - 2.13+ src/graph/topo.cc `ncclTopoPopulateNics` (and earlier `ncclTopoGetSystem`):
///   `NET/%s : GPU Direct RDMA %s for HCA %d '%s'` (Enabled or Disabled)
/// - HPC-X nccl-rdma-sharp-plugins src/p2p_plugin.c: `NET/IB : GPU Direct RDMA
///   (nvidia-peermem) enabled for HCA %d '%s` and `(DMABUF) enabled` (no closing quote)
fn hca_gdr<'a>(net: &'a str, what: &'a str) -> Option<(Event<'a>, Era)> {
    let rest = what.strip_prefix("GPU Direct RDMA ")?;
    let (enabled, plugin_via, rest) = if let Some(r) = rest.strip_prefix("Enabled for ") {
        (true, None, r)
    } else if let Some(r) = rest.strip_prefix("Disabled for ") {
        (false, None, r)
    } else if let Some(r) = rest.strip_prefix("(nvidia-peermem) enabled for ") {
        (true, Some(HcaVia::PeerMem), r)
    } else if let Some(r) = rest.strip_prefix("(DMABUF) enabled for ") {
        (true, Some(HcaVia::DmaBuf), r)
    } else {
        return None;
    };
    // 2.4: per GPU, with the HCA's name.
    let (gpu, rest) = match rest.strip_prefix("GPU ") {
        Some(r) => {
            let (g, r) = r.split_once(" / ")?;
            (Some(g), r)
        }
        None => (None, rest),
    };
    let rest = rest.strip_prefix("HCA ")?;
    let (index, rest) = rest.split_once(' ')?;
    let index = index.parse().ok()?;
    let rest = rest.strip_prefix('\'')?;
    let (name, suffix) = match rest.split_once('\'') {
        Some((n, s)) => (n, s.trim()),
        None => (rest.trim_end(), ""),
    };
    let (via, era) = match (plugin_via, suffix, gpu) {
        (Some(v), _, _) => (v, Era::ANY),
        (None, "(no module or not supported by GPU)", Some(_)) => {
            (HcaVia::NoModuleOrGpu, Era::minors(4, 5))
        }
        (None, "(no module)", None) => (HcaVia::NoModule, Era::minors(5, 13)),
        (None, "", None) => (HcaVia::Unstated, Era::since(13)),
        _ => return None,
    };
    Some((
        Event::HcaGdr {
            net,
            enabled,
            index,
            name,
            via,
            gpu,
        },
        era,
    ))
}

/// The per GPU-NIC line with the distance (NET subsystem; GRAPH too from 2.27).
///
/// - 2.4 src/transport/net.cc `netGetGdrSupport`: `NET/%s : GPU Direct RDMA Disabled for GPU
///   %d[%d] / HCA %d (distance %d >= %d)`; `Enabled ... (distance %d < %d), read %d`
/// - 2.5 src/transport/net.cc: the same with `GPU %lx` (the bus id)
/// - 2.6-2.20 src/graph/paths.cc `ncclTopoCheckGdr`: `GPU Direct RDMA Disabled for GPU %lx /
///   HCA %d (distance %d > %d)`; `Enabled ... (distance %d <= %d), read %d`
/// - 2.21-2.23: `GPU %lx / HCA %lx` (a net id); 2.24-2.28: `GPU %d / HCA %lx` (the rank);
///   2.26-2.28 append ` mode %s` to the enabled line
/// - 2.29: `GPU Direct RDMA Disabled for GPU/%ld-%ld (rank %d) - NET/%ld-%ld ([ using PXN via
///   GPU/%ld-%ld, ]distance %d > %d)`; `Enabled ... (distance %d <= %d, read %d, mode %s)`
/// - 2.30: printed at TRACE level only, so never in an INFO log.
fn gpu_gdr<'a>(m: &'a str, net: Option<&'a str>) -> Option<(Event<'a>, Era)> {
    let rest = m.strip_prefix("GPU Direct RDMA ")?;
    let (enabled, rest) = if let Some(r) = rest.strip_prefix("Enabled for ") {
        (true, r)
    } else if let Some(r) = rest.strip_prefix("Disabled for ") {
        (false, r)
    } else {
        return None;
    };
    if let Some(r) = rest.strip_prefix("GPU/") {
        return gpu_gdr_229(enabled, r);
    }
    let rest = rest.strip_prefix("GPU ")?;
    let (gpu, rest) = rest.split_once(" / HCA ")?;
    let (hca, rest) = rest.split_once(" (distance ")?;
    let mut words = rest.split_ascii_whitespace();
    let distance: u32 = words.next()?.parse().ok()?;
    let op = words.next()?;
    let level_word = words.next()?;
    let level: u32 = level_word.trim_end_matches([')', ',']).parse().ok()?;
    let inclusive = match (enabled, op) {
        (false, ">=") | (true, "<") => true,
        (false, ">") | (true, "<=") => false,
        _ => return None,
    };
    let tail = rest.split_once(')').map(|(_, t)| t).unwrap_or("");
    let read = tail
        .split_once("read ")
        .and_then(|(_, r)| r.split_ascii_whitespace().next())
        .and_then(|r| r.trim_end_matches(',').parse::<u32>().ok())
        .map(|r| r != 0);
    let mode = tail
        .split_once("mode ")
        .and_then(|(_, r)| r.split_ascii_whitespace().next());
    let era = if inclusive {
        // `GPU %d[%d]` in 2.4, `GPU %lx` in 2.5; both print `NET/x : ` first.
        if gpu.contains('[') {
            Era::minors(4, 5)
        } else {
            Era::minors(5, 6)
        }
    } else if net.is_some() {
        return None;
    } else if mode.is_some() {
        Era::new(Version::new(2, 26, 0), Version::new(2, 29, 0))
    } else if looks_like_bus_id(gpu) {
        Era::minors(6, 24)
    } else {
        Era::minors(24, 29)
    };
    Some((
        Event::GpuGdr(GpuGdr {
            enabled,
            gpu,
            hca: hca.trim(),
            distance,
            level,
            inclusive,
            read,
            mode,
            pxn_via: None,
        }),
        era,
    ))
}

/// 2.29's form, after `GPU/`: `0-1b000 (rank 3) - NET/0-0 (distance 7 > 5)`.
fn gpu_gdr_229(enabled: bool, r: &str) -> Option<(Event<'_>, Era)> {
    let (gpu_id, rest) = r.split_once(" - NET/")?;
    let (hca, rest) = rest.split_once(" (")?;
    let (pxn_via, rest) = match rest.trim_start().strip_prefix("using PXN via GPU/") {
        Some(p) => {
            let (via, r) = p.split_once(", ")?;
            (Some(via), r)
        }
        None => (None, rest.trim_start()),
    };
    let rest = rest.strip_prefix("distance ")?;
    let mut words = rest.split_ascii_whitespace();
    let distance = words.next()?.parse().ok()?;
    let op = words.next()?;
    let level = words.next()?.trim_end_matches([')', ',']).parse().ok()?;
    match (enabled, op) {
        (false, ">") | (true, "<=") => {}
        _ => return None,
    }
    let read = rest
        .split_once("read ")
        .and_then(|(_, x)| x.split([',', ')']).next())
        .and_then(|x| x.trim().parse::<u32>().ok())
        .map(|x| x != 0);
    let mode = rest
        .split_once("mode ")
        .and_then(|(_, x)| x.split(')').next())
        .map(str::trim);
    Some((
        Event::GpuGdr(GpuGdr {
            enabled,
            gpu: gpu_id.trim(),
            hca: hca.trim(),
            distance,
            level,
            inclusive: false,
            read,
            mode,
            pxn_via,
        }),
        Era::minors(29, 30),
    ))
}

/// A PCI bus id as NCCL prints it (`%lx`: `1a000`, `ca000`), as opposed to a rank or CUDA
/// device number: hexadecimal, with the function's `000` at the end.
fn looks_like_bus_id(s: &str) -> bool {
    s.len() >= 4 && s.ends_with("000") && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// 2.4 src/transport/net.cc `netGetDevices`... `CUDA Dev %d[%d], %s NIC distance : ` then one
/// ` %s` per NIC from `pathDists` (PIX PXB PHB NODE SYS).
fn nic_distance(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("CUDA Dev ")?;
    let (gpu, rest) = rest.split_once(", ")?;
    let (net, levels) = rest.split_once(" NIC distance :")?;
    Some((
        Event::NicDistance {
            gpu,
            net: net.trim(),
            levels: levels.split_ascii_whitespace().collect(),
        },
        Era::minors(3, 6),
    ))
}

/// The connection lines of src/transport/net.cc (`send`/`recv` setup):
///
/// - 2.4: `Ring %02d : %d -> %d [send] via NET/%s/%d%s`
/// - 2.5-2.6: `Ring %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s`
/// - 2.7: `Channel %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s`; 2.8-2.11 add `/Shared`
/// - 2.12-2.17: `Channel %02d/%d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d(%d)%s%s` (the
///   proxy rank in parentheses for PXN)
/// - 2.18+: `%d[%d]` (the NVML device instead of the bus id); 2.26+ add `(PCI)`
///
/// The suffixes are `/GDRDMA`, then `(PCI)`, then `/Shared`.
fn connection(m: &str) -> Option<(Event<'_>, Era)> {
    let via = VIA.find(m.as_bytes())?;
    let target = m[via + 5..].trim_end();
    let Some(target) = target.strip_prefix("NET/") else {
        // P2P, SHM, COLLNET: not a NET connection.
        return Some((Event::Other, Era::ANY));
    };
    let head = &m[..via];
    let (word, rest) = head.split_once(' ')?;
    let (chan, rest) = rest.split_once(" : ")?;
    let (channel, conn_index) = match chan.split_once('/') {
        Some((c, i)) => (c.parse().ok()?, Some(i.parse::<u32>().ok()?)),
        None => (chan.parse().ok()?, None),
    };
    let (from, rest) = rest.split_once(" -> ")?;
    let (to, dir) = rest.rsplit_once(' ')?;
    let dir = match dir {
        "[send]" => Dir::Send,
        "[receive]" => Dir::Receive,
        _ => return None,
    };
    let (from, from_dev) = rank_and_dev(from)?;
    let (to, to_dev) = rank_and_dev(to.trim())?;
    let mut t = target;
    let shared = strip_end(&mut t, "/Shared");
    let pci = strip_end(&mut t, "(PCI)");
    let gdr = strip_end(&mut t, "/GDRDMA");
    let (net, dev) = t.rsplit_once('/')?;
    let (dev, proxy) = match dev.strip_suffix(')').and_then(|d| d.split_once('(')) {
        Some((d, p)) => (d.parse().ok()?, Some(p.parse().ok()?)),
        None => (dev.parse().ok()?, None),
    };
    let era = match (word, conn_index, from_dev) {
        ("Ring", _, None) => Era::minors(3, 5),
        ("Ring", _, Some(_)) => Era::minors(5, 7),
        ("Channel", None, _) => Era::minors(7, 12),
        ("Channel", Some(_), Some(d)) if looks_like_bus_id(d) => Era::minors(12, 18),
        ("Channel", Some(_), _) => Era::since(18),
        _ => return None,
    };
    let era = if pci {
        era.intersect(Era::since(26))?
    } else {
        era
    };
    Some((
        Event::Connection(Connection {
            channel,
            from,
            to,
            from_dev,
            to_dev,
            dir,
            net,
            dev,
            proxy,
            gdr,
            pci,
            shared,
        }),
        era,
    ))
}

fn strip_end(s: &mut &str, suffix: &str) -> bool {
    match s.strip_suffix(suffix) {
        Some(rest) => {
            *s = rest;
            true
        }
        None => false,
    }
}

/// A GPU's paths (src/graph/paths.cc `printNodePaths`, called by `ncclTopoPrintPaths` after
/// NCCL computed and trimmed its topology; INFO under NCCL_DEBUG_SUBSYS=GRAPH):
///
/// - 2.6-2.20: `%s/%lX :` then ` %s/%lX (%d/%f/%s)` per node (`GPU/49000 :... NET/2
///   (4/24.000000/PXB)`)
/// - 2.21-2.22: the header as before, the entries `%s/%lx-%lx (%d/%.1f/%s)` (system id and
///   local id: `GPU/5000 :GPU/0-4000 (2/370.8/NVL) ... NET/0-1 (5/24.0/PHB)`)
/// - 2.23 on: the header `%s/%lx-%lx :` too (`GPU/0-60 :GPU/0-60 (0/5000.0/LOC) ...`)
///
/// 2.5 printed the path type as a number (`%d/%d/%d`): not read, as its numbering is not the
/// distance numbering of the GDR lines. NCCL cuts the line at 1024 bytes; the entries before a
/// cut are kept.
fn gpu_paths(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("GPU/")?;
    let (gpu, list) = rest.split_once(" :")?;
    if gpu.is_empty() || !gpu.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return None;
    }
    let mut paths = Vec::new();
    let mut truncated = false;
    let mut words = list.split_ascii_whitespace();
    while let Some(target) = words.next() {
        let entry = (|| {
            let (kind, id) = target.split_once('/')?;
            let inner = words.next()?.strip_prefix('(')?.strip_suffix(')')?;
            let mut fields = inner.split('/');
            let hops = fields.next()?.parse().ok()?;
            let bw = fields.next()?.parse().ok()?;
            let path = fields.next()?;
            let named = !path.is_empty() && path.bytes().all(|b| b.is_ascii_uppercase());
            (fields.next().is_none() && named && !kind.is_empty()).then_some(PathTo {
                kind,
                id,
                hops,
                bw,
                path,
            })
        })();
        match entry {
            Some(e) => paths.push(e),
            None => {
                truncated = true;
                break;
            }
        }
    }
    if paths.is_empty() {
        return None;
    }
    let era = match (gpu.contains('-'), paths.iter().any(|p| p.id.contains('-'))) {
        (true, _) => Era::since(23),
        (false, true) => Era::minors(21, 23),
        (false, false) => Era::minors(6, 21),
    };
    Some((
        Event::GpuPaths {
            gpu,
            paths,
            truncated,
        },
        era,
    ))
}

/// `3[3]`, `3[1a000]` or `3`.
fn rank_and_dev(s: &str) -> Option<(u32, Option<&str>)> {
    match s.split_once('[') {
        Some((r, d)) => Some((r.trim().parse().ok()?, Some(d.strip_suffix(']')?))),
        None => Some((s.trim().parse().ok()?, None)),
    }
}

fn rings_gdr(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("Connected all rings, use ring PXN ")?;
    let (pxn, gdr) = rest.split_once(" GDR ")?;
    Some((
        Event::RingsGdr {
            pxn: pxn.trim().parse().ok()?,
            gdr: gdr.trim().parse().ok()?,
        },
        Era::since(24),
    ))
}

/// `NCCL_X set by environment to V` (src/include/param.h, src/misc/param.cc, ncclGetLevel in
/// src/graph/paths.cc; integers end with a dot) and `NCCL_IB_HCA set to V` (net_ib.cc).
fn env(m: &str) -> Option<Event<'_>> {
    let (name, rest) = m.split_once(' ')?;
    if !name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let value = rest
        .strip_prefix("set by environment to ")
        .or_else(|| rest.strip_prefix("set to "))?
        .trim();
    let value = value.strip_suffix('.').unwrap_or(value);
    Some(Event::Env { name, value })
}

/// `comm 0x55cc8aa86c70 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x... - Init
/// START` and its variants (src/init.cc).
fn comm_init(m: &str) -> Option<(Event<'_>, Era)> {
    // One pass over the words, `key value` pairs: the first of each key counts.
    let (mut rank, mut nranks, mut cuda_dev, mut bus_id) = (None, None, None, None);
    let mut words = m.split_ascii_whitespace();
    let mut prev = words.next()?;
    for w in words {
        match prev {
            "rank" if rank.is_none() => rank = w.parse().ok(),
            "nranks" | "nRanks" if nranks.is_none() => nranks = w.parse().ok(),
            "cudaDev" if cuda_dev.is_none() => cuda_dev = w.parse().ok(),
            "busId" if bus_id.is_none() => bus_id = Some(w),
            _ => {}
        }
        prev = w;
    }
    Some((
        Event::CommInit {
            rank: rank?,
            nranks: nranks?,
            cuda_dev,
            bus_id,
        },
        Era::ANY,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event<'_> {
        parse(line).expect("an NCCL line").event
    }

    #[test]
    fn prefixes() {
        // NCCL's own prefix (src/debug.cc).
        let l =
            parse("node-1:32726:33054 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to PHB")
                .unwrap();
        assert_eq!(
            l.origin,
            Origin {
                host: Some("node-1"),
                pid: Some(32726),
                dev: Some(0)
            }
        );
        // mpirun --tag-output (aws/aws-k8s-tester#473).
        let l = parse("[1,8]<stdout>:multi-node-nccl-test-worker-1:20:67 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0").unwrap();
        assert_eq!(l.origin.host, Some("multi-node-nccl-test-worker-1"));
        assert_eq!(l.origin.dev, Some(0));
        // Ray (ray-project/ray#40850).
        let l = parse("(RayTrainWorker pid=83500) localhost:83500:84560 [2] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 1 'virbr0'").unwrap();
        assert_eq!(l.origin.host, Some("localhost"));
        assert_eq!(l.origin.dev, Some(2));
        // No host (NVIDIA/nccl-tests#245).
        let l = parse(" [0] NCCL INFO DMA-BUF is available on GPU device 0").unwrap();
        assert_eq!(
            l.origin,
            Origin {
                host: None,
                pid: None,
                dev: Some(0)
            }
        );
        assert_eq!(l.event, Event::DmaBufAvailable { cuda_dev: 0 });
        // A bare marker (NVIDIA/nccl#1151, quoted in prose).
        let l = parse("NCCL INFO GPU Direct RDMA Disabled for GPU ca000 / HCA 0 (distance 7 > 4)")
            .unwrap();
        assert_eq!(l.origin, Origin::default());
        // A warning names its source line (NVIDIA/nccl#1737, HPC-X plugin).
        let l = parse("gh-3714u15:7038:7053 [0] ib_plugin.c:1007 NCCL WARN NET/IB : Got completion from peer 10.1.32.3<42519> with error 5, opcode 0, len 0, vendor err 249").unwrap();
        assert_eq!(l.level, Level::Warn);
        assert_eq!(l.origin.host, Some("gh-3714u15"));
        assert_eq!(l.origin.dev, Some(0));
        assert!(
            matches!(l.event, Event::Warn { text } if text.starts_with("NET/IB : Got completion"))
        );
        // mpirun's rank before the host (NVIDIA/nccl#1453), srun -l's, an empty host
        // (autoscriptlabs/nccl-mesh-plugin#56), a timestamp (NCCL_DEBUG_TIMESTAMP_FORMAT).
        for (line, host, dev) in [
            (
                "[0] h100clust-worker-1:497888:498087 [0] NCCL INFO Connected all trees",
                Some("h100clust-worker-1"),
                0,
            ),
            (
                "0: node7:12:34 [3] NCCL INFO Connected all trees",
                Some("node7"),
                3,
            ),
            (
                ":22901:22901 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0",
                None,
                0,
            ),
            (
                "[2025-01-01 10:00:00] n1:5:6 [7] NCCL INFO Connected all trees",
                Some("n1"),
                7,
            ),
            ("n1:x:6 [7] NCCL INFO Connected all trees", None, 7),
        ] {
            let o = parse(line).unwrap().origin;
            assert_eq!((o.host, o.dev), (host, Some(dev)), "{line}");
        }
        // Not NCCL's.
        assert_eq!(parse("# Avg bus bandwidth    : 33.3227"), None);
        assert_eq!(parse("NCCL is great"), None);
    }

    #[test]
    fn versions() {
        // 2.4 printf (Mellanox/nv_peer_memory#56).
        let l = parse("NCCL version 2.4.7+cuda10.0").unwrap();
        assert_eq!(l.level, Level::Version);
        assert_eq!(
            l.event,
            Event::Version {
                version: Version::new(2, 4, 7),
                text: "2.4.7+cuda10.0"
            }
        );
        // INFO (NVIDIA/nccl#1866).
        assert!(matches!(
            event("cl4-gpu03-vm:1134070:1134070 [0] NCCL INFO NCCL version 2.27.6+cuda13.0"),
            Event::Version { version, .. } if version == Version::new(2, 27, 6)
        ));
        assert_eq!(Version::parse("2.30.3"), Some(Version::new(2, 30, 3)));
        assert_eq!(Version::parse("two"), None);
    }

    #[test]
    fn hca_lines() {
        // 2.5-2.12 (NVIDIA/nccl#899).
        let l = parse("21346d5cefce:5325:5337 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)").unwrap();
        assert_eq!(
            l.event,
            Event::HcaGdr {
                net: "IB",
                enabled: false,
                index: 1,
                name: "mlx5_1",
                via: HcaVia::NoModule,
                gpu: None
            }
        );
        assert_eq!(l.era, Era::minors(5, 13));
        // 2.13+ (NVIDIA/nccl#1676).
        let l = parse("learn01:2228637:2230195 [3] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 2 'mlx5_2'").unwrap();
        assert!(matches!(
            l.event,
            Event::HcaGdr {
                index: 2,
                via: HcaVia::Unstated,
                enabled: false,
                ..
            }
        ));
        assert_eq!(l.era, Era::since(13));
        // Sockets (2.28.9 on a one-GPU machine, REFERENCE.md section 9).
        assert!(matches!(
            event("h:1:2 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'"),
            Event::HcaGdr {
                net: "Socket",
                name: "eth0",
                ..
            }
        ));
        // HPC-X plugin (nccl-rdma-sharp-plugins src/p2p_plugin.c), no closing quote.
        assert!(matches!(
            event(
                "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (nvidia-peermem) enabled for HCA 0 'mlx5_0"
            ),
            Event::HcaGdr {
                enabled: true,
                via: HcaVia::PeerMem,
                name: "mlx5_0",
                ..
            }
        ));
        assert!(matches!(
            event(
                "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA (DMABUF) enabled for HCA 3 'mlx5_3"
            ),
            Event::HcaGdr {
                index: 3,
                via: HcaVia::DmaBuf,
                ..
            }
        ));
        // 2.4 net_ib.cc, per GPU.
        assert!(matches!(
            event(
                "h:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 0[0] / HCA 0 'mlx5_0' (no module or not supported by GPU)"
            ),
            Event::HcaGdr {
                via: HcaVia::NoModuleOrGpu,
                gpu: Some("0[0]"),
                ..
            }
        ));
    }

    #[test]
    fn distance_lines() {
        // 2.4 (Mellanox/nv_peer_memory#56).
        let l = parse("master_node:11717:11986 [2] NCCL INFO NET/IB : GPU Direct RDMA Disabled for GPU 2[2] / HCA 0 (distance 3 >= 2)").unwrap();
        let Event::GpuGdr(g) = l.event else {
            panic!("{:?}", l.event)
        };
        assert_eq!(
            (g.gpu, g.hca, g.distance, g.level, g.inclusive, g.enabled),
            ("2[2]", "0", 3, 2, true, false)
        );
        assert_eq!(l.era, Era::minors(4, 5));
        // 2.6-2.20 (NVIDIA/DeepLearningExamples#383).
        let l = parse("node-1:32729:33061 [3] NCCL INFO GPU Direct RDMA Enabled for GPU 86000 / HCA 0 (distance 4 <= 4), read 0").unwrap();
        let Event::GpuGdr(g) = l.event else { panic!() };
        assert_eq!(
            (g.gpu, g.distance, g.level, g.read, g.enabled),
            ("86000", 4, 4, Some(false), true)
        );
        assert_eq!(l.era, Era::minors(6, 24));
        // 2.24-2.25: the rank (paths.cc `GPU %d / HCA %lx`).
        let l = parse(
            "h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 3 / HCA 1 (distance 7 > 4)",
        )
        .unwrap();
        assert_eq!(l.era, Era::minors(24, 29));
        // 2.26-2.28: ` mode %s`.
        let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 5 <= 5), read 1 mode Default").unwrap();
        let Event::GpuGdr(g) = l.event else { panic!() };
        assert_eq!((g.read, g.mode), (Some(true), Some("Default")));
        assert_eq!(
            l.era,
            Era::new(Version::new(2, 26, 0), Version::new(2, 29, 0))
        );
        // 2.29 (paths.cc `gpuNetMsg`), with and without PXN.
        let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-1b000 (rank 3) - NET/0-0 (distance 9 > 6)").unwrap();
        let Event::GpuGdr(g) = l.event else { panic!() };
        assert_eq!(
            (g.gpu, g.hca, g.distance, g.level),
            ("0-1b000 (rank 3)", "0-0", 9, 6)
        );
        let l = parse("h:1:2 [0] NCCL INFO GPU Direct RDMA Enabled for GPU/0-1b000 (rank 3) - NET/0-0 ( using PXN via GPU/0-2a000, distance 5 <= 6, read 1, mode Default)").unwrap();
        let Event::GpuGdr(g) = l.event else { panic!() };
        assert_eq!(
            (g.pxn_via, g.distance, g.read, g.mode),
            (Some("0-2a000"), 5, Some(true), Some("Default"))
        );
        // Cut short: recognised as about GDR, not parsed.
        assert_eq!(
            event("h:1:2 [1] NCCL INFO GPU Direct RDMA Disabled for GPU 3b000 / HCA 0"),
            Event::Unrecognised
        );
    }

    #[test]
    fn connections() {
        // 2.4 (Mellanox/nv_peer_memory#56).
        let Event::Connection(c) =
            event("master_node:11718:11985 [3] NCCL INFO Ring 01 : 3 -> 6 [send] via NET/IB/0")
        else {
            panic!()
        };
        assert_eq!(
            (c.channel, c.from, c.to, c.dir, c.net, c.dev, c.gdr),
            (1, 3, 6, Dir::Send, "IB", 0, false)
        );
        // 2.5 (NVIDIA/nccl#392).
        let l =
            parse(" [0] NCCL INFO Ring 00 : 15[41000] -> 0[1b000] [receive] via NET/IB/0").unwrap();
        assert_eq!(l.era, Era::minors(5, 7));
        let Event::Connection(c) = l.event else {
            panic!()
        };
        assert_eq!(c.local_and_peer(), (0, 15));
        // 2.7-2.11 (NVIDIA/nccl#707).
        let l = parse("10-90-43-152:120890:121560 [0] NCCL INFO Channel 01 : 2[c7000] -> 0[87000] [receive] via NET/IB/5/GDRDMA").unwrap();
        assert_eq!(l.era, Era::minors(7, 12));
        let Event::Connection(c) = l.event else {
            panic!()
        };
        assert_eq!((c.dev, c.gdr), (5, true));
        // 2.18+ (Azure/aks-rdma-infiniband#36).
        let l = parse("leader-h2nng:523:564 [0] NCCL INFO Channel 08/0 : 9[1] -> 0[0] [receive] via NET/IB/0/GDRDMA").unwrap();
        assert_eq!(l.era, Era::since(18));
        // A plugin's name with a space, PXN proxy, (PCI), /Shared.
        let Event::Connection(c) = event(
            "h:1:2 [0] NCCL INFO Channel 00/1 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/1(3)/GDRDMA(PCI)/Shared",
        ) else {
            panic!()
        };
        assert_eq!(
            (c.net, c.dev, c.proxy, c.gdr, c.pci, c.shared),
            ("AWS Libfabric", 1, Some(3), true, true, true)
        );
        // Not NET.
        assert_eq!(
            event(
                "swat1-04:2017630:2017697 [7] NCCL INFO Channel 00/0 : 7[7] -> 6[6] via P2P/direct pointer/read"
            ),
            Event::Other
        );
        // The ring summary is no connection.
        assert_eq!(
            event("gpu01:351578:352168 [0] NCCL INFO Channel 00/02 :    0   1"),
            Event::Other
        );
        // Cut short (NVIDIA/nccl#1814): about NET, not parsed.
        assert_eq!(
            event(
                "hostname-test:986:1254 [6] NCCL INFO Channel 14/0 : 6[6] -> 38[6] [receive] via NET/IBext_v8/"
            ),
            Event::Unrecognised
        );
    }

    #[test]
    fn init_lines() {
        assert_eq!(
            event(
                "hostname1:25668:27396 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB primaryip:10.10.10.10<0>"
            ),
            Event::NetDevices {
                net: "IB",
                devices: vec![
                    NetDevice {
                        index: 0,
                        name: "mlx5_0",
                        port: Some(1),
                        link: Some("RoCE")
                    },
                    NetDevice {
                        index: 1,
                        name: "mlx5_1",
                        port: Some(1),
                        link: Some("RoCE")
                    },
                ]
            }
        );
        assert!(matches!(
            event("master_node:11715:11984 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.1<0>"),
            Event::NetDevices { net: "Socket", devices } if devices[0].name == "ib0"
        ));
        assert_eq!(
            event("h:1:2 [0] NCCL INFO NET/IB : No device found."),
            Event::NoDevice { net: "IB" }
        );
        assert_eq!(
            event("h:1:2 [0] NCCL INFO Failed to initialize NET plugin IB"),
            Event::NetInitFailed { name: "IB" }
        );
        assert_eq!(
            event("h:1:2 [0] NCCL INFO Using network AWS Libfabric"),
            Event::Network {
                name: "AWS Libfabric"
            }
        );
        assert_eq!(
            event("gh-3714u06:4052:4122 [0] NCCL INFO P2P plugin IBext_v8"),
            Event::Plugin { name: "IBext_v8" }
        );
        assert_eq!(
            event("master_node:11715:11984 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0."),
            Event::Env {
                name: "NCCL_IB_DISABLE",
                value: "0"
            }
        );
        assert_eq!(
            event("h:1:2 [0] NCCL INFO NCCL_IB_HCA set to mlx5"),
            Event::Env {
                name: "NCCL_IB_HCA",
                value: "mlx5"
            }
        );
        assert!(matches!(
            event("[0] NCCL INFO NET/OFI Could not disable CUDA API usage for HMEM, disabling GDR"),
            Event::PluginGdrOff { .. }
        ));
        assert_eq!(
            event(
                "hostname1:25668:27396 [0] NCCL INFO comm 0x55cc8aa86c70 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x65e0bd6ee7449db4 - Init START"
            ),
            Event::CommInit {
                rank: 0,
                nranks: 16,
                cuda_dev: Some(0),
                bus_id: Some("1c000")
            }
        );
        assert_eq!(
            event("h:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1"),
            Event::RingsGdr { pxn: 0, gdr: 1 }
        );
        assert!(matches!(
            event("xxx:16090:16180 [0] NCCL INFO CUDA Dev 0[0], IB NIC distance :  PIX NODE SYS SYS"),
            Event::NicDistance { gpu: "0[0]", net: "IB", levels } if levels == ["PIX", "NODE", "SYS", "SYS"]
        ));
    }

    #[test]
    fn graph_path_lines() {
        // 2.28.9 on the one-GPU machine, NCCL_DEBUG_SUBSYS=ALL (REFERENCE.md section 9).
        let l = parse("h:1:2 [0] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) ").unwrap();
        assert_eq!(l.era, Era::since(23));
        let Event::GpuPaths {
            gpu,
            paths,
            truncated,
        } = l.event
        else {
            panic!("{:?}", l.event)
        };
        assert_eq!((gpu, truncated), ("0-60", false));
        assert_eq!(paths.len(), 3);
        assert_eq!(
            paths[2],
            PathTo {
                kind: "NET",
                id: "0-0",
                hops: 3,
                bw: 1.2,
                path: "PHB"
            }
        );
        // 2.6-2.20 (NVIDIA/nccl#879): no system id, the bandwidth with six decimals.
        let l = parse("resnet-p-worker-0:195626:198757 [0] NCCL INFO GPU/49000 :GPU/16000 (2/264.000000/NVL) GPU/49000 (0/5000.000000/LOC) CPU/0 (3/24.000000/PHB) CPU/1 (4/9.000000/SYS) NET/0 (6/24.000000/PHB) NET/2 (4/24.000000/PXB) NET/4 (7/9.000000/SYS)").unwrap();
        assert_eq!(l.era, Era::minors(6, 21));
        let Event::GpuPaths { gpu, paths, .. } = l.event else {
            panic!()
        };
        assert_eq!(gpu, "49000");
        let nets: Vec<(&str, &str)> = paths
            .iter()
            .filter(|p| p.kind == "NET")
            .map(|p| (p.id, p.path))
            .collect();
        assert_eq!(nets, [("0", "PHB"), ("2", "PXB"), ("4", "SYS")]);
        // 2.21-2.22 (NVIDIA/nccl#1519): the old header, the new entries.
        let l = parse("nathan-h100-1:13878:13953 [0] NCCL INFO GPU/B000 :GPU/0-4000 (2/370.8/NVL) GPU/0-b000 (0/5000.0/LOC) NVS/0-0 (1/370.8/NVL) CPU/0-0 (2/24.0/PHB) NET/0-0 (4/12.0/PHB) NET/0-5 (6/10.0/SYS)").unwrap();
        assert_eq!(l.era, Era::minors(21, 23));
        // Cut at NCCL's 1024 bytes (NVIDIA/nccl#1519 quotes one): what came before stands.
        let Event::GpuPaths {
            paths, truncated, ..
        } = event(
            "h:1:2 [0] NCCL INFO GPU/C000 :GPU/0-4000 (2/370.8/NVL) NET/0-3 (5/24.0/PHB) NET/0-4",
        )
        else {
            panic!()
        };
        assert!(truncated);
        assert_eq!(paths.len(), 2);
        // 2.5's numeric path types, the topology tree's GPU lines and `Paths from` (TRACE
        // builds) are not path lines.
        assert_eq!(
            event("h:1:2 [0] NCCL INFO GPU/1A000 :GPU/1A000 (0/5000/0) NET/0 (4/12/2)"),
            Event::Other
        );
        assert_eq!(event("h:1:2 [0] NCCL INFO GPU/0-60 (0)"), Event::Other);
        assert_eq!(
            event("h:1:2 [0] NCCL INFO Paths from GPU/0-60 :"),
            Event::Other
        );
    }

    #[test]
    fn eras_read_as_people_say_them() {
        assert_eq!(Era::minors(12, 21).to_string(), "2.12-2.20");
        assert_eq!(Era::minors(29, 30).to_string(), "2.29");
        assert_eq!(Era::since(13).to_string(), "2.13 or later");
        assert_eq!(
            Era::minors(6, 24).intersect(Era::since(13)),
            Some(Era::minors(13, 24))
        );
        assert_eq!(Era::minors(4, 5).intersect(Era::since(13)), None);
    }

    #[test]
    fn garbage_never_panics() {
        for l in [
            "NCCL INFO ",
            "NCCL INFO Channel",
            "NCCL INFO Channel 99999999999999 : x -> y [send] via NET/",
            "NCCL INFO Ring : -> [send] via NET//",
            "NCCL INFO GPU Direct RDMA Enabled for GPU/ - NET/ (",
            "NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA x '",
            "NCCL INFO NET/",
            "NCCL WARN",
            "] [ NCCL INFO comm rank",
            "::: [99999999999] NCCL INFO x",
            "NCCL version ",
            "NCCL INFO GPU/ :",
            "NCCL INFO GPU/0 : NET/ (",
            "NCCL INFO GPU/0 :NET/0 (1/x/PHB)",
            "NCCL INFO GPU/0 :NET/0 (99999999999/1.0/PHB)",
        ] {
            let _ = parse(l);
        }
    }
}
