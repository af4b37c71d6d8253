//! The numbers NCCL prints for GPU-NIC distances, per release.
//!
//! `GPU Direct RDMA Disabled for GPU 18000 / HCA 0 (distance 5 > 4)` means nothing until the
//! numbering of that release is known: NCCL renumbered its path types six times. Each table is
//! `topoPathTypeStr` (src/graph/topo.cc, with the `PATH_*` defines of src/graph/topo.h) at the
//! tags named, or `pathDists` (src/misc/topo.cc) before 2.6.

use crate::parse::nccl_log::{Era, Version};

/// One numbering, and the releases that use it.
pub struct Table {
    pub era: Era,
    pub names: &'static [&'static str],
    /// NCCL's default `NCCL_NET_GDR_LEVEL` (src/graph/paths.cc `ncclTopoCheckGdr`;
    /// src/transport/net.cc `NCCL_PARAM(NetGdrLevel, ..., PATH_PHB)` before 2.6).
    pub default_level: &'static str,
}

const fn v(minor: u16, patch: u16) -> Version {
    Version::new(2, minor, patch)
}

pub const TABLES: &[Table] = &[
    // v2.4.8-1, v2.5.7-1 src/include/topo.h, graph.h: `enum ncclPathDist`; GDR off at
    // `distance >= level`, the level PHB by default.
    Table {
        era: Era::new(v(0, 0), v(6, 0)),
        names: &["PIX", "PXB", "PHB", "NODE", "SYS"],
        default_level: "PHB",
    },
    // v2.6.4-1, v2.7.8-1.
    Table {
        era: Era::new(v(6, 0), v(8, 0)),
        names: &["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"],
        default_level: "PXB",
    },
    // v2.8.3-1 .. v2.11.4-1: NVB added.
    Table {
        era: Era::new(v(8, 0), v(12, 0)),
        names: &["LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS"],
        default_level: "PXB",
    },
    // v2.12.7-1 .. v2.25.1-1: PXN added (NET and DIS from 2.19, never a GPU-NIC distance).
    Table {
        era: Era::new(v(12, 0), v(26, 0)),
        names: &[
            "LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        default_level: "PXB",
    },
    // v2.26.2-1 .. v2.26.6-1: C2C added.
    Table {
        era: Era::new(v(26, 0), v(27, 0)),
        names: &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        default_level: "PXB",
    },
    // v2.27.3-1: P2C added after PXN.
    Table {
        era: Era::new(v(27, 0), v(27, 5)),
        names: &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS", "NET", "DIS",
        ],
        default_level: "PXB",
    },
    // v2.27.5-1 .. v2.28.9-1: P2C moved before PXN.
    Table {
        era: Era::new(v(27, 5), v(29, 0)),
        names: &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        default_level: "PXB",
    },
    // v2.29.2-1 on: the default level is P2C while NCCL_NET_GDR_C2C=1 (its default), which
    // differs from PXB only on C2C systems (Grace).
    Table {
        era: Era::new(v(29, 0), Version::new(99, 0, 0)),
        names: &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        default_level: "P2C",
    },
];

impl Table {
    pub fn name(&self, n: u32) -> Option<&'static str> {
        self.names.get(n as usize).copied()
    }
}

/// The tables a release range may have used.
pub fn tables(era: Era) -> Vec<&'static Table> {
    TABLES
        .iter()
        .filter(|t| t.era.intersect(era).is_some())
        .collect()
}

/// The table of one release.
pub fn table(version: Version) -> &'static Table {
    TABLES
        .iter()
        .find(|t| t.era.contains(version))
        .unwrap_or(&TABLES[TABLES.len() - 1])
}

/// The number a name has in a table (`NCCL_NET_GDR_LEVEL=PHB`).
pub fn number(t: &Table, name: &str) -> Option<u32> {
    t.names.iter().position(|n| *n == name).map(|i| i as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_per_release() {
        // REFERENCE.md section 9, checked against topoPathTypeStr at each tag.
        let name = |minor, patch, n| table(v(minor, patch)).name(n);
        assert_eq!(name(4, 7, 2), Some("PHB"));
        assert_eq!(name(7, 8, 4), Some("PHB"));
        assert_eq!(name(9, 9, 4), Some("PXB"));
        assert_eq!(name(12, 12, 7), Some("SYS"));
        assert_eq!(name(20, 5, 5), Some("PXN"));
        assert_eq!(name(26, 6, 5), Some("PXB"));
        assert_eq!(name(27, 3, 6), Some("PXN"));
        assert_eq!(name(27, 7, 6), Some("P2C"));
        assert_eq!(name(28, 9, 9), Some("SYS"));
        assert_eq!(table(v(29, 7)).default_level, "P2C");
        assert_eq!(number(table(v(18, 5)), "PXB"), Some(4));
    }

    #[test]
    fn tables_cover_every_release_once() {
        for w in TABLES.windows(2) {
            assert_eq!(w[0].era.until, w[1].era.from);
        }
        assert_eq!(tables(Era::new(v(6, 0), v(24, 0))).len(), 3);
    }
}
