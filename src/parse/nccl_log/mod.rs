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
//!
//! What people paste is not always what NCCL printed: Ray appends ` [repeated 4x across cluster]`
//! (with ANSI colours) to lines it folded, wiki pages and issue reports quote message bodies
//! without NCCL's prefix (`9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA`), and pasted
//! configuration files carry log lines in `#` comments. [`parse_bare`] reads the bodies,
//! [`is_comment`] tells the comments, and Ray's suffix is cut before a message is read.
//!
//! AMD's RCCL is NCCL ported to HIP and prints NCCL's lines with its own beside them: the
//! `RCCL version : 2.21.5-HEAD:9a0e6a1` banner (printf, without a prefix), `ROCr version 1.14`,
//! `Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1` (ROCm/rccl src/misc/rocmwrap.cc).

use memchr::memmem;
use std::sync::LazyLock;

mod message;
pub use message::OFI_PLUGIN;
#[cfg(test)]
mod tests;

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
    /// A message body without NCCL's `NCCL INFO` marker ([`parse_bare`]): who printed it is
    /// unknown.
    pub bare: bool,
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
    /// The channel; a body quoted without its `Channel NN :` head has none.
    pub channel: Option<u32>,
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
    /// `NCCL version 2.18.5+cuda12.2` (src/init.cc `VERSION_STRING`), or RCCL's banner:
    /// `RCCL version : 2.21.5-HEAD:9a0e6a1` (ROCm 6.3 on), `RCCL version 2.20.5+hip6.2
    /// HEAD:d380693+` (before), with or without `NCCL INFO` in front.
    Version {
        version: Version,
        text: &'a str,
        rccl: bool,
    },
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
    /// `Connected all rings, use ring PXN 0 GDR 1` (src/transport/generic.cc, 2.24+). GDR starts
    /// at 1 and a ring NET connection set up without GDR makes it 0 (src/transport/net.cc
    /// `if (!req.useGdr && connIndex == 0) comm->useGdr = 0`); with NCCL_LOCAL_REGISTER or
    /// NCCL_GRAPH_REGISTER (both on by default) it is then combined over every rank. So 0 means
    /// some rank's ring went through the network without GDR; 1 with no NET connection says
    /// nothing of the network.
    RingsGdr { pxn: i64, gdr: i64 },
    /// `Failed to open libibverbs.so[.1]` (src/misc/ibvwrap.cc; INFO from 2.12 or so, WARN
    /// before): no libibverbs at all in the process's environment, so NCCL's IB transport
    /// could not even look for a device.
    NoVerbs,
    /// RCCL's DMA-BUF path is off: `Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1`
    /// (`NCCL_ENABLE_DMABUF_SUPPORT=1` in older RCCL) or `Current version of ROCm does not
    /// support dmabuf feature.` (ROCm/rccl src/misc/rocmwrap.cc).
    RcclDmabufOff { text: &'a str },
    /// `ROCr version 1.14`: the HSA runtime RCCL loaded (rocmwrap.cc); the library is RCCL.
    Rocr,
    /// RCCL found AMD's peer memory: `Found /sys/kernel/mm/memory_peers/amdkfd/version`
    /// (ROCm/rccl src/transport/net_ib.cc).
    PeerMemFound { path: &'a str },
    /// A queue pair's address (NET subsystem, src/transport/net_ib.cc): `NET/IB: Dev 0 Port 1
    /// qpn 1047 mtu 5 GID 3 (0/A0A0A0AFFFF0000)` (2.12-2.18), with `query_ece={...}` from
    /// 2.19 and `NCCL Dev 0 IbDev 0` from 2.20. The GID is printed as its subnet prefix and
    /// interface id, each a 64-bit number read from the GID's bytes: `80FE` is fe80::/64, the
    /// link-local prefix; an IPv4-mapped GID (RoCE v2 IPv4) has prefix `0`.
    QpGid {
        dev: &'a str,
        index: i64,
        prefix: &'a str,
    },
    /// A connection that stays inside the node: `via P2P/IPC`, `via SHM/direct/direct`.
    IntraNode,
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
        /// `nNodes 1` (the `comm ... nRanks 2 nNodes 1 localRanks 2` line, src/init.cc, 2.20+).
        nnodes: Option<u32>,
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

/// The words a message body quoted without NCCL's prefix starts from (see [`parse_bare`]).
static BARE: LazyLock<[memmem::Finder<'static>; 4]> = LazyLock::new(|| {
    [
        memmem::Finder::new(b"NET/"),
        memmem::Finder::new(b"GPU Direct RDMA "),
        memmem::Finder::new(b"use ring PXN "),
        memmem::Finder::new(b"RCCL version"),
    ]
});

/// Ray's suffix on a line it folded: ` [repeated 4x across cluster]`, then its advice on the
/// first one (ray python/ray/_private/ray_logging: `[repeated {n}x across cluster]`).
static RAY: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b" [repeated "));

/// Where the line has `NCCL ` first, if at all: the fast test before any decoding.
pub fn find_nccl(line: &[u8]) -> Option<usize> {
    NCCL.find(line)
}

/// A line without `NCCL ` that may still hold a message body NCCL printed: the fast test
/// before [`parse_bare`].
pub fn may_be_bare(line: &[u8]) -> bool {
    BARE.iter().any(|f| f.find(line).is_some())
}

/// A comment of a pasted configuration or script (`# NCCL WARN ...` noted beside a setting):
/// not a line NCCL printed, whatever it quotes.
pub fn is_comment(line: &str) -> bool {
    line.trim_start().starts_with('#')
}

/// The host of a rank as nccl-tests (and rccl-tests) list them before a run: `#  Rank  3 Group
/// 0 Pid  58192 on       z292 device  3 [0000:c8:00] AMD Instinct MI50/MI60` (src/common.cu;
/// without `Group` before 2.11). Every rank of the job is listed, so their hosts tell a
/// single-node run from one across nodes.
pub fn tests_rank_host(line: &str) -> Option<&str> {
    let mut words = line
        .trim_start()
        .strip_prefix('#')?
        .split_ascii_whitespace();
    if words.next()? != "Rank" {
        return None;
    }
    words.by_ref().take(6).find(|w| *w == "on")?;
    let host = words.next()?;
    (words.next()? == "device").then_some(host)
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
            return Some(info_line(info_origin(&line[..at]), info_message(message)));
        }
        if let Some(message) = after.strip_prefix("WARN ") {
            let (origin, _) = origin(&line[..at], true);
            let message = undecorate(message);
            return Some(Line {
                level: Level::Warn,
                origin,
                message,
                event: Event::Warn { text: message },
                era: Era::ANY,
                bare: false,
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
                bare: false,
            });
        }
        start = at + 5;
    }
    None
}

/// A message body NCCL prints, quoted without its `host:pid:tid [dev] NCCL INFO` prefix, as
/// wiki pages, chats and issue reports quote them (`GPU Direct RDMA Disabled for GPU 0 / HCA 0
/// (distance 8 > 5)`; `9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA`; RCCL's `RCCL version :
/// 2.21.5-HEAD:9a0e6a1` banner, which has no prefix of its own). Only the bodies that say
/// something about GDR or the network are taken; the host and rank that printed them are
/// unknown.
pub fn parse_bare(line: &str) -> Option<Line<'_>> {
    let line = undecorate(line);
    let bytes = line.as_bytes();
    let start = if let Some(v) = BARE[3].find(bytes) {
        v
    } else if let Some(via) = VIA_NET.find(bytes) {
        connection_start(&line[..via])?
    } else if let Some(g) = BARE[1].find(bytes) {
        // `NET/IB : GPU Direct RDMA ...` (per HCA) starts at its network's name.
        match line[..g].rfind("NET/") {
            Some(n) if line[n..g].ends_with(": ") => n,
            _ => g,
        }
    } else if let Some(c) = memmem::find(bytes, b"Connected all rings") {
        c
    } else {
        BARE[0].find(bytes)?
    };
    let message = &line[start..];
    let (event, era, level) = if message.starts_with("RCCL version") {
        (version(message)?, Era::ANY, Level::Version)
    } else if message.starts_with("Channel ") || message.starts_with("Ring ") {
        let (e, era) = message::classify(message);
        (e, era, Level::Info)
    } else if VIA_NET.find(message.as_bytes()).is_some() {
        let (e, era) = message::headless_connection(message)?;
        (e, era, Level::Info)
    } else {
        let (e, era) = message::classify(message);
        (e, era, Level::Info)
    };
    let known = matches!(
        event,
        Event::Connection(_)
            | Event::GpuGdr(_)
            | Event::HcaGdr { .. }
            | Event::NetDevices { .. }
            | Event::NoDevice { .. }
            | Event::RingsGdr { .. }
            | Event::Version { .. }
    );
    known.then_some(Line {
        level,
        origin: Origin::default(),
        message,
        event,
        era,
        bare: true,
    })
}

static VIA_NET: LazyLock<memmem::Finder<'static>> =
    LazyLock::new(|| memmem::Finder::new(b" via NET/"));

/// Where a quoted connection body starts: at `Channel ` or `Ring ` when the head is there,
/// else at the rank before ` -> ` (`9[1a000] -> 2[6b000] [send]`).
fn connection_start(head: &str) -> Option<usize> {
    if let Some(c) = head.rfind("Channel ").or_else(|| head.rfind("Ring ")) {
        return Some(c);
    }
    let arrow = head.find(" -> ")?;
    Some(head[..arrow].rfind(' ').map_or(0, |s| s + 1))
}

/// The message without what a log collector appended to it: Ray's ` [repeated 4x across
/// cluster]` (and its advice after the first), and the ANSI colour codes around it, whether
/// their escape byte survived the paste (`\x1b[32m`) or not (` [32m`).
pub fn undecorate(message: &str) -> &str {
    let m = message.trim_end();
    // The cheap test first: Ray's suffix ends in `]`, `)` or an ANSI `m`.
    if !matches!(m.as_bytes().last(), Some(b']' | b')' | b'm')) {
        return m;
    }
    let Some(at) = RAY.find(m.as_bytes()) else {
        return m;
    };
    if !m[at..].contains("x across cluster]") {
        return m;
    }
    trim_ansi_tail(&m[..at])
}

/// Trailing ANSI SGR codes (`\x1b[32m`, or `[32m` whose escape byte a paste lost) and blanks.
fn trim_ansi_tail(mut s: &str) -> &str {
    loop {
        s = s.trim_end();
        let Some(open) = s.rfind('[') else {
            return s;
        };
        let code = &s[open + 1..];
        let sgr = code
            .strip_suffix('m')
            .is_some_and(|c| c.bytes().all(|b| b.is_ascii_digit() || b == b';'));
        if !sgr {
            return s;
        }
        s = s[..open].strip_suffix('\u{1b}').unwrap_or(&s[..open]);
    }
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

/// `[2]`: the CUDA device of NCCL's prefix.
fn dev_word(w: &[u8]) -> Option<u32> {
    (w.len() >= 3 && w[0] == b'[' && w[w.len() - 1] == b']')
        .then(|| digits(&w[1..w.len() - 1]))
        .flatten()
}

/// Words a warning's source location may take: `net_ib.cc:1295`, or a plugin's C++ function
/// with its signature (aws-ofi-nccl's `int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):208`).
const MAX_SOURCE_WORDS: usize = 8;

/// `[ts ]host:pid:tid [dev] [file:line ]` before the marker, read from the end. Byte by byte:
/// this runs on every line of logs of gigabytes.
fn origin(head: &str, warn: bool) -> (Origin<'_>, Option<&str>) {
    let b = head.as_bytes();
    let mut o = Origin::default();
    let mut source = None;
    let Some((mut s, mut e)) = last_word(b, b.len()) else {
        return (o, None);
    };
    // A warning names the source line before `NCCL WARN` (`net_ib.cc:1295`); a plugin's may be
    // several words (a C++ signature), so the words up to the `[dev]` are the source.
    if warn && dev_word(&b[s..e]).is_none() {
        let source_end = e;
        let mut found = false;
        for _ in 0..MAX_SOURCE_WORDS {
            match last_word(b, s) {
                Some(w) => {
                    let source_start = s;
                    (s, e) = w;
                    if dev_word(&b[s..e]).is_some() {
                        source = Some(&head[source_start..source_end]);
                        found = true;
                        break;
                    }
                }
                None => break,
            }
        }
        if !found {
            // No `[dev]` in reach: the last word alone was the source, as before.
            let (ls, _) = last_word(b, b.len()).unwrap_or((0, 0));
            return (o, Some(&head[ls..source_end]));
        }
    }
    let Some(dev) = dev_word(&b[s..e]) else {
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

/// `NCCL version 2.18.5+cuda12.2`; RCCL's `RCCL version : 2.21.5-HEAD:9a0e6a1` and `RCCL
/// version 2.20.5+hip6.2 HEAD:d380693+`.
fn version(message: &str) -> Option<Event<'_>> {
    let (text, rccl) = match message.strip_prefix("NCCL version ") {
        Some(t) => (t, false),
        None => (message.strip_prefix("RCCL version")?, true),
    };
    let text = text.trim_start();
    let text = text.strip_prefix(':').unwrap_or(text).trim();
    let v = Version::parse(text)?;
    Some(Event::Version {
        version: v,
        text: text.split_ascii_whitespace().next().unwrap_or(text),
        rccl,
    })
}

/// Who printed an INFO line, read from what comes before its `NCCL INFO` alone: [`parse`]'s
/// origin of `head NCCL INFO message`, whatever the message.
pub fn info_origin(head: &str) -> Origin<'_> {
    origin(head, false).0
}

/// What an INFO line's message says (the text after `NCCL INFO `), read from the message
/// alone: the message without Ray's suffix, its event and the releases that print it.
pub fn info_message(raw: &str) -> (&str, Event<'_>, Era) {
    let message = undecorate(raw);
    let (event, era) = message::classify(message);
    (message, event, era)
}

/// The INFO line of an [`info_origin`] and an [`info_message`]: what [`parse`] gives for
/// `head NCCL INFO message`, the two parts read apart (the reader of big logs keeps each, as
/// NCCL prints the same prefix and the same messages again and again).
pub fn info_line<'a>(
    origin: Origin<'a>,
    (message, event, era): (&'a str, Event<'a>, Era),
) -> Line<'a> {
    Line {
        level: Level::Info,
        origin,
        message,
        event,
        era,
        bare: false,
    }
}
