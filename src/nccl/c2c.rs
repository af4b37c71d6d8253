//! NCCL's GPUDirect RDMA decision where a GPU reaches a NIC through NVLink-C2C: the GPU joined
//! to its Grace CPU by C2C (GH200, GB200, GB300), the NIC on a PCIe root port of that CPU
//! (issue 38). In sysfs the pair meets only in the CPU (NODE or PHB), which NCCL's PCIe rule
//! would call too far; NCCL has its own rule for it, changed three times.
//!
//! Read at NVIDIA/nccl's release tags (src/graph/paths.cc `ncclTopoCheckGdr`,
//! `ncclTopoComputePaths`, `mergePathType`; src/graph/topo.h; src/graph/topo.cc
//! `ncclTopoAddC2c`):
//! - up to 2.25: the C2C link is an NVLink between GPU and CPU (`LINK_NVL`); GPU to NIC is PHB
//!   (through the CPU), beyond the default level PXB: no GPUDirect RDMA unless
//!   `NCCL_NET_GDR_LEVEL` admits PHB;
//! - 2.26: the path is still PHB, but `NCCL_NET_GDR_C2C=1` (default 0) turns a PHB distance on
//!   a GPU whose way to its CPU is C2C into C2C, within any level: GDR in mode Default (data
//!   over C2C). A level that admits PHB without it gives GDR in mode PCI;
//! - 2.27 and 2.28: the path is P2C (C2C, then PCIe from the CPU; `mergePathType`), and
//!   `NCCL_NET_GDR_C2C` defaults to 1, which turns P2C into C2C as in 2.26. With it 0, P2C is
//!   beyond PXB (2.27.3 numbers P2C after PXN, 2.27.5 before it);
//! - 2.29 and later: P2C only for the GPU's local NICs, and the default level is P2C while
//!   `NCCL_NET_GDR_C2C` is 1 (PXB when it is 0); the distance stays P2C and the mode is Default.
//!
//! In every release a C2C GPU whose NIC is reached over PCIe only (the same switch: GB300's
//! ConnectX-8) gets the PCIe rule, in mode PCI from 2.26 ("Force PCIe mapping if path goes
//! through PCI on a C2C system").

use super::levels::{self, Table};
use super::params;
use crate::parse::nccl_log::Version;

/// The releases that decide alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Era {
    /// Up to 2.25: no C2C rule.
    Before26,
    /// 2.26: `NCCL_NET_GDR_C2C`, off by default.
    V26,
    /// 2.27 and 2.28: P2C, `NCCL_NET_GDR_C2C` on by default.
    V27,
    /// 2.29 and later: P2C is the default level.
    V29,
}

impl Era {
    pub const ALL: [Era; 4] = [Era::Before26, Era::V26, Era::V27, Era::V29];

    pub fn of(v: Version) -> Era {
        match (v.major, v.minor) {
            (2, m) if m < 26 => Era::Before26,
            (2, 26) => Era::V26,
            (2, 27 | 28) => Era::V27,
            _ => Era::V29,
        }
    }

    /// A release of the era, for its numbering (2.27.5's, where P2C comes before PXN).
    fn sample(self) -> Version {
        match self {
            Era::Before26 => Version::new(2, 25, 1),
            Era::V26 => Version::new(2, 26, 6),
            Era::V27 => Version::new(2, 28, 9),
            Era::V29 => Version::new(2, 29, 7),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Era::Before26 => "NCCL up to 2.25",
            Era::V26 => "NCCL 2.26",
            Era::V27 => "NCCL 2.27 and 2.28",
            Era::V29 => "NCCL 2.29 and later",
        }
    }

    /// `NCCL_NET_GDR_C2C`'s default (`NCCL_PARAM(NetGdrC2c, "NET_GDR_C2C", ...)`).
    pub fn c2c_default(self) -> Option<bool> {
        match self {
            Era::Before26 => None,
            Era::V26 => Some(false),
            Era::V27 | Era::V29 => Some(true),
        }
    }
}

/// How NCCL moves the GPU's data to the NIC under GPUDirect RDMA on a C2C system
/// (`ncclTopoGdrMode`, 2.26 and later: `Default`, or `PCI`, which NCCL logs as `mode PCI` and
/// as `(PCI)` after `/GDRDMA` on a channel line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Over C2C.
    Default,
    /// Forced through PCIe.
    Pci,
}

/// NCCL's decision for a C2C pair in one release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub era: Era,
    pub gdr: bool,
    /// `None` before 2.26 (no modes) and without GDR.
    pub mode: Option<Mode>,
    /// The distance NCCL compares, in its names: `PHB`, `C2C`, `P2C`.
    pub distance: &'static str,
    /// The level it is compared with, and where that comes from.
    pub level: String,
}

impl Decision {
    /// `GDR (NCCL 2.27 and 2.28: distance C2C <= PXB (the default level), NCCL_NET_GDR_C2C
    /// unset (1 by default), mode Default: over C2C)`, or `no GDR (...)`.
    pub fn describe(&self, c2c: &Input) -> String {
        let setting = match (self.era.c2c_default(), &c2c.value) {
            (None, _) => String::new(),
            (Some(_), Some(v)) => format!(", NCCL_NET_GDR_C2C={v}"),
            (Some(d), None) => format!(", NCCL_NET_GDR_C2C unset ({} by default)", d as u8),
        };
        let mode = match self.mode {
            Some(Mode::Default) => ", mode Default: over C2C",
            Some(Mode::Pci) => ", mode PCI: forced through PCIe",
            None => "",
        };
        let verb = if self.gdr { "<=" } else { ">" };
        format!(
            "{} ({}: distance {} {verb} {}{setting}{mode})",
            if self.gdr { "GDR" } else { "no GDR" },
            self.era.describe(),
            self.distance,
            self.level
        )
    }
}

/// What the node's settings say: `NCCL_NET_GDR_C2C`'s value, and `NCCL_NET_GDR_LEVEL`'s (None:
/// NCCL's default level).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Input {
    pub value: Option<String>,
    pub level: Option<String>,
}

impl Input {
    /// `NCCL_NET_GDR_C2C` as NCCL's parameter reads it (`ncclLoadParam`: `strtoll` of the whole
    /// value; anything else keeps the default).
    fn c2c(&self, era: Era) -> bool {
        let default = era.c2c_default().unwrap_or(false);
        match &self.value {
            Some(v) => match params::nccl_int(v) {
                (n, true) => n != 0,
                _ => default,
            },
            None => default,
        }
    }
}

/// `NCCL_NET_GDR_LEVEL` as `ncclGetLevel` reads it in a release (the path type names up to SYS,
/// exactly; else a number in the old numbering); `None`: ignored, the default stays.
pub fn level_number(t: &Table, value: &str) -> Option<u32> {
    let sys = levels::number(t, "SYS")?;
    if let Some(n) = levels::number(t, value).filter(|n| *n <= sys) {
        return Some(n);
    }
    if value.starts_with(|c: char| c.is_ascii_digit()) {
        // levelsOldToNew: LOC, PIX, PXB, PHB, SYS, SYS; larger numbers are the last.
        const OLD: [&str; 6] = ["LOC", "PIX", "PXB", "PHB", "SYS", "SYS"];
        let (n, _) = params::nccl_int(value);
        let i = usize::try_from(n.max(0)).unwrap_or(5).min(5);
        return levels::number(t, OLD[i]);
    }
    None
}

/// NCCL's decision in `era` for a GPU whose way to its CPU is C2C and a NIC on that CPU's PCIe.
pub fn decide(era: Era, input: &Input) -> Decision {
    let t = levels::table(era.sample());
    let n = |name: &str| levels::number(t, name).unwrap_or(u32::MAX);
    let c2c = input.c2c(era);
    let default = if era == Era::V29 && c2c { "P2C" } else { "PXB" };
    let (limit, level) = match input.level.as_deref().and_then(|v| {
        let l = level_number(t, v)?;
        Some((
            l,
            format!("{} (NCCL_NET_GDR_LEVEL={v})", t.name(l).unwrap_or("?")),
        ))
    }) {
        Some(x) => x,
        None => (n(default), format!("{default} (the default level)")),
    };
    let (distance, default_mode) = match era {
        Era::Before26 => ("PHB", None),
        Era::V26 if c2c => ("C2C", Some(Mode::Default)),
        Era::V26 => ("PHB", Some(Mode::Pci)),
        Era::V27 if c2c => ("C2C", Some(Mode::Default)),
        Era::V27 => ("P2C", Some(Mode::Pci)),
        Era::V29 => ("P2C", Some(Mode::Default)),
    };
    let gdr = n(distance) <= limit;
    Decision {
        era,
        gdr,
        mode: default_mode.filter(|_| gdr),
        distance,
        level,
    }
}

/// The decision for the node's release, or, where it is not known, for every era: `Ok` when
/// they all agree on whether GDR is used (the first era's wording), else the decisions apart.
pub fn decide_for(release: Option<Version>, input: &Input) -> Result<Decision, Vec<Decision>> {
    if let Some(v) = release {
        return Ok(decide(Era::of(v), input));
    }
    let all: Vec<Decision> = Era::ALL.iter().map(|e| decide(*e, input)).collect();
    if all.iter().all(|d| d.gdr == all[0].gdr) {
        // Name the newest era: the one whose wording a current node's NCCL prints.
        Ok(all[all.len() - 1].clone())
    } else {
        Err(all)
    }
}

/// The mode of a C2C GPU's GDR to a NIC reached over PCIe alone (the same switch), 2.26 and
/// later: PCI.
pub fn pcie_mode(release: Option<Version>) -> Option<Mode> {
    match release.map(Era::of) {
        Some(Era::Before26) => None,
        _ => Some(Mode::Pci),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(c2c: Option<&str>, level: Option<&str>) -> Input {
        Input {
            value: c2c.map(str::to_owned),
            level: level.map(str::to_owned),
        }
    }

    /// ncclTopoCheckGdr at each tag, for a GB200's GPU and a ConnectX-7 of its Grace.
    #[test]
    fn by_release() {
        let d = |e, c, l| {
            let d = decide(e, &input(c, l));
            (d.gdr, d.mode, d.distance)
        };
        // Up to 2.25: PHB, beyond PXB; NCCL_NET_GDR_LEVEL=PHB admits it.
        assert_eq!(d(Era::Before26, None, None), (false, None, "PHB"));
        assert_eq!(d(Era::Before26, None, Some("PHB")), (true, None, "PHB"));
        assert!(!d(Era::Before26, Some("1"), None).0);
        // 2.26: off by default; NCCL_NET_GDR_C2C=1 gives Default mode; PHB gives PCI mode.
        assert_eq!(d(Era::V26, None, None), (false, None, "PHB"));
        assert_eq!(
            d(Era::V26, Some("1"), None),
            (true, Some(Mode::Default), "C2C")
        );
        assert_eq!(
            d(Era::V26, None, Some("PHB")),
            (true, Some(Mode::Pci), "PHB")
        );
        // 2.27/2.28: on by default; 0 leaves P2C beyond PXB; PHB or P2C admit it in PCI mode.
        assert_eq!(d(Era::V27, None, None), (true, Some(Mode::Default), "C2C"));
        assert_eq!(d(Era::V27, Some("0"), None), (false, None, "P2C"));
        assert_eq!(
            d(Era::V27, Some("0"), Some("PHB")),
            (true, Some(Mode::Pci), "P2C")
        );
        assert_eq!(
            d(Era::V27, Some("0"), Some("P2C")),
            (true, Some(Mode::Pci), "P2C")
        );
        assert!(!d(Era::V27, None, Some("LOC")).0);
        // 2.29: P2C is the default level; 0 makes it PXB again.
        assert_eq!(d(Era::V29, None, None), (true, Some(Mode::Default), "P2C"));
        assert_eq!(d(Era::V29, Some("0"), None), (false, None, "P2C"));
        assert_eq!(
            d(Era::V29, Some("0"), Some("SYS")),
            (true, Some(Mode::Default), "P2C")
        );
        // A value NCCL's parameter cannot read keeps the default.
        assert!(d(Era::V27, Some("off"), None).0);
        // Old-style numbers: 3 is PHB.
        assert_eq!(d(Era::V26, None, Some("3")), (true, Some(Mode::Pci), "PHB"));
    }

    #[test]
    fn unknown_release() {
        // Every era agrees that PHB admits the pair.
        assert!(decide_for(None, &input(None, Some("PHB"))).unwrap().gdr);
        // The default differs by era.
        assert_eq!(decide_for(None, &input(None, None)).unwrap_err().len(), 4);
        assert_eq!(Era::of(Version::new(2, 27, 3)), Era::V27);
        assert_eq!(Era::of(Version::new(2, 30, 4)), Era::V29);
    }

    #[test]
    fn levels_as_nccl_reads_them() {
        let t = levels::table(Version::new(2, 28, 9));
        assert_eq!(level_number(t, "P2C"), Some(6));
        assert_eq!(
            level_number(t, "NET"),
            None,
            "names past SYS are not levels"
        );
        assert_eq!(level_number(t, "9"), Some(9), "old 4 and up: SYS");
        assert_eq!(level_number(t, "phb"), None);
        let t = levels::table(Version::new(2, 25, 1));
        assert_eq!(level_number(t, "P2C"), None, "no P2C before 2.27");
    }
}
