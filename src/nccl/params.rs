//! What NCCL makes of the values of the parameters that decide GPUDirect RDMA, read from its
//! sources (NVIDIA/nccl, the tags named at each function). Pure: strings in, meanings out.

use crate::model::Level;

/// The parameters that change whether and where NCCL uses GPUDirect RDMA, in the order a
/// report lists them, each with what it does.
pub const GDR_PARAMS: &[(&str, &str)] = &[
    (
        "NCCL_TOPO_FILE",
        "a topology XML NCCL builds its PCI tree from instead of sysfs",
    ),
    (
        "NCCL_NET_GDR_LEVEL",
        "the farthest GPU-NIC distance at which NCCL uses GPUDirect RDMA (PXB by default)",
    ),
    (
        "NCCL_NET_GDR_C2C",
        "whether NCCL uses GPUDirect RDMA to the NICs of a GPU's own CPU over NVLink-C2C (Grace; 2.26: off by default, 2.27 and later: on)",
    ),
    (
        "NCCL_IB_DATA_DIRECT",
        "whether NCCL reaches a ConnectX-8 through its Data Direct DMA function (2.27 and later; on by default)",
    ),
    (
        "NCCL_NET_GDR_READ",
        "whether sends read GPU memory directly (0: never)",
    ),
    ("NCCL_IB_HCA", "which RDMA devices and ports NCCL uses"),
    (
        "NCCL_IB_DISABLE",
        "1: no InfiniBand/RoCE at all (sockets, no GPUDirect RDMA)",
    ),
    (
        "NCCL_IB_GID_INDEX",
        "the GID index NCCL uses on every RoCE port (default: its own pick per port)",
    ),
    (
        "NCCL_IB_ADDR_FAMILY",
        "the address family of the RoCE GID NCCL picks (AF_INET by default)",
    ),
    (
        "NCCL_DMABUF_ENABLE",
        "0: NCCL does not register GPU memory through DMA-BUF",
    ),
    (
        "NCCL_NET",
        "the network NCCL must use (IB, Socket, or a plugin's name)",
    ),
    (
        "NCCL_NET_PLUGIN",
        "the network plugin library NCCL loads (none: the built-in ones)",
    ),
    (
        "NCCL_IGNORE_CPU_AFFINITY",
        "1: NCCL ignores the job's CPU affinity and uses the GPU's (cloud images set it)",
    ),
];

pub fn is_gdr_param(name: &str) -> bool {
    GDR_PARAMS.iter().any(|(n, _)| *n == name)
}

/// `strtoll`, as NCCL reads integer parameters (a parser: it lives with nccl.conf's).
pub use crate::parse::nccl_conf::nccl_int;

/// What `NCCL_NET_GDR_LEVEL` means to NCCL: the farthest distance at which it uses GPUDirect
/// RDMA. NCCL's path types between LOC and PIX (NVLink, C2C) never apply to a PCIe NIC, so a
/// level below PIX means never; PXN and P2C sit between PXB and PHB and admit what PXB admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GdrLimit {
    Never,
    Upto(Level),
}

impl GdrLimit {
    /// Whether a GPU-NIC pair at `level` (gdrdoctor's sysfs level) gets GPUDirect RDMA. NCCL
    /// has no NODE: two host bridges of one NUMA node meet in one CPU in its tree, which it
    /// calls PHB (src/graph/xml.cc creates one `cpu` per NUMA node), so NODE counts as PHB
    /// against a level NCCL was given; a level from the config (which may say NODE) compares as
    /// written.
    pub fn admits(self, level: Level) -> bool {
        match self {
            GdrLimit::Never => false,
            GdrLimit::Upto(limit) => {
                let l = if limit == Level::Node {
                    level
                } else {
                    nccl_view(level)
                };
                l <= limit
            }
        }
    }

    pub fn describe(self) -> String {
        match self {
            GdrLimit::Never => "never (GPUDirect RDMA off)".into(),
            GdrLimit::Upto(l) => l.as_str().into(),
        }
    }
}

/// The level NCCL's own tree gives a pair that sysfs places at `level`: NODE is PHB to NCCL.
pub fn nccl_view(level: Level) -> Level {
    if level == Level::Node {
        Level::Phb
    } else {
        level
    }
}

/// A sysfs level as a finding states the level NCCL will use: NCCL's own name, with the
/// nvidia-smi name beside it where they differ (`NODE in sysfs (PHB for NCCL)`). NCCL's path
/// types (src/graph/topo.h: LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET, DIS) have no
/// NODE, and `NCCL_NET_GDR_LEVEL=NODE` is a value NCCL ignores (`ncclGetLevel`).
pub fn level_for_nccl(level: Level) -> String {
    let nccl = nccl_view(level);
    if nccl == level {
        level.as_str().to_owned()
    } else {
        format!("{} in sysfs ({} for NCCL)", level.as_str(), nccl.as_str())
    }
}

/// Why a `NCCL_NET_GDR_LEVEL` value means what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LevelValue {
    /// A path type name NCCL knows.
    Named(GdrLimit),
    /// An old-style number (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and up SYS).
    Numbered(GdrLimit),
    /// Not a name NCCL accepts (names are upper case, compared exactly): NCCL ignores it and
    /// keeps its default.
    Ignored,
}

/// `NCCL_NET_GDR_LEVEL` as NCCL reads it (src/graph/paths.cc `ncclGetLevel`, 2.7 to 2.30):
/// compared exactly with the path type names up to SYS, else, when it starts with a digit, an
/// old-style number (`levelsOldToNew`); anything else leaves the default in place.
pub fn gdr_level(value: &str) -> LevelValue {
    // Every name any release accepts; those below PIX never admit a PCIe NIC.
    const NEVER: &[&str] = &["LOC", "NVL", "NVB", "C2C"];
    let named = match value {
        v if NEVER.contains(&v) => Some(GdrLimit::Never),
        "PIX" => Some(GdrLimit::Upto(Level::Pix)),
        "PXB" | "PXN" | "P2C" => Some(GdrLimit::Upto(Level::Pxb)),
        "PHB" => Some(GdrLimit::Upto(Level::Phb)),
        "SYS" => Some(GdrLimit::Upto(Level::Sys)),
        _ => None,
    };
    if let Some(l) = named {
        return LevelValue::Named(l);
    }
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        let (n, _) = nccl_int(value);
        let l = match n {
            0 => GdrLimit::Never,
            1 => GdrLimit::Upto(Level::Pix),
            2 => GdrLimit::Upto(Level::Pxb),
            3 => GdrLimit::Upto(Level::Phb),
            _ => GdrLimit::Upto(Level::Sys),
        };
        return LevelValue::Numbered(l);
    }
    LevelValue::Ignored
}

/// One entry of `NCCL_IB_HCA`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcaEntry {
    pub name: String,
    /// `None`: every port.
    pub port: Option<u32>,
}

/// `NCCL_IB_HCA` as NCCL reads it (src/transport/net_ib/init.cc, src/misc/utils.cc
/// `parseStringList`, `matchIfList`): `^` first excludes, then `=` asks for exact names
/// (otherwise each entry is a prefix: `mlx5_1` also selects `mlx5_10`), then comma-separated
/// `name[:port]` entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcaList {
    pub exclude: bool,
    pub exact: bool,
    pub entries: Vec<HcaEntry>,
}

impl HcaList {
    pub fn parse(value: &str) -> HcaList {
        let (exclude, rest) = match value.strip_prefix('^') {
            Some(r) => (true, r),
            None => (false, value),
        };
        let (exact, rest) = match rest.strip_prefix('=') {
            Some(r) => (true, r),
            None => (false, rest),
        };
        let entries = rest
            .split(',')
            .filter_map(|e| {
                let mut parts = e.split(':');
                let name = parts.next().filter(|n| !n.is_empty())?;
                let port = parts.next().filter(|p| !p.is_empty()).map(nccl_int_atoi);
                Some(HcaEntry {
                    name: name.to_owned(),
                    port: port.and_then(|p| u32::try_from(p).ok()),
                })
            })
            .collect();
        HcaList {
            exclude,
            exact,
            entries,
        }
    }

    fn entry_matches(&self, e: &HcaEntry, device: &str, port: Option<u32>) -> bool {
        let name = if self.exact {
            device == e.name
        } else {
            device.starts_with(&e.name)
        };
        name && (e.port.is_none() || port.is_none() || e.port == port)
    }

    /// Whether NCCL uses `device` port `port` (`None`: any port of it).
    pub fn selects(&self, device: &str, port: Option<u32>) -> bool {
        // An empty list matches every device, so `^` alone excludes them all, as in NCCL.
        let hit = self.entries.is_empty()
            || self
                .entries
                .iter()
                .any(|e| self.entry_matches(e, device, port));
        hit != self.exclude
    }

    /// The entries that match none of `devices` (typos, devices this node lacks).
    pub fn unmatched<'a>(&'a self, devices: &[&str]) -> Vec<&'a HcaEntry> {
        self.entries
            .iter()
            .filter(|e| !devices.iter().any(|d| self.entry_matches(e, d, None)))
            .collect()
    }
}

/// `NCCL_SOCKET_IFNAME` is read by the same two functions as `NCCL_IB_HCA` (src/os/linux.cc
/// `ncclOsFindInterfaces`, src/misc/socket.cc `ncclFindInterfaces`, 2.29 and later; before,
/// `findInterfaces` in socket.cc): `^` excludes, `=` asks for exact names, else each entry is a
/// prefix; a `:port` after a name is read and not used for interfaces.
pub type IfList = HcaList;

/// `atoi`: what `parseStringList` makes of a port number.
fn nccl_int_atoi(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    let n = digits.parse::<i64>().unwrap_or(0);
    if neg { -n } else { n }
}

/// `NCCL_IB_ADDR_FAMILY` (src/transport/net_ib/connect.cc `envIbAddrFamily`): `AF_INET6`
/// exactly selects IPv6, anything else IPv4.
pub fn wants_ipv6(value: Option<&str>) -> bool {
    value == Some("AF_INET6")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdr_levels() {
        assert_eq!(
            gdr_level("PHB"),
            LevelValue::Named(GdrLimit::Upto(Level::Phb))
        );
        assert_eq!(gdr_level("phb"), LevelValue::Ignored);
        assert_eq!(gdr_level("LOC"), LevelValue::Named(GdrLimit::Never));
        assert_eq!(
            gdr_level("3"),
            LevelValue::Numbered(GdrLimit::Upto(Level::Phb))
        );
        assert_eq!(
            gdr_level("5"),
            LevelValue::Numbered(GdrLimit::Upto(Level::Sys))
        );
        assert_eq!(gdr_level("0"), LevelValue::Numbered(GdrLimit::Never));
        let phb = GdrLimit::Upto(Level::Phb);
        assert!(phb.admits(Level::Node), "NCCL calls NODE PHB");
        assert!(!phb.admits(Level::Sys));
        assert!(!GdrLimit::Upto(Level::Pxb).admits(Level::Node));
        assert!(GdrLimit::Upto(Level::Node).admits(Level::Node));
        assert!(!GdrLimit::Never.admits(Level::Pix));
    }

    #[test]
    fn hca_lists() {
        let l = HcaList::parse("mlx5_1");
        assert!(l.selects("mlx5_10", Some(1)), "a prefix");
        let l = HcaList::parse("=mlx5_1:1,mlx5_2");
        assert!(!l.selects("mlx5_10", None));
        assert!(l.selects("mlx5_1", Some(1)));
        assert!(!l.selects("mlx5_1", Some(2)));
        assert!(l.selects("mlx5_2", Some(2)));
        let l = HcaList::parse("^=mlx5_0");
        assert!(!l.selects("mlx5_0", None));
        assert!(l.selects("mlx5_1", None));
        assert!(HcaList::parse("").selects("anything", None));
        assert!(!HcaList::parse("^").selects("anything", None));
        let l = HcaList::parse("=mlx5_0,mlx5_9");
        let unmatched = l.unmatched(&["mlx5_0", "mlx5_1"]);
        assert_eq!(unmatched.len(), 1);
        assert_eq!(unmatched[0].name, "mlx5_9");
    }
}
