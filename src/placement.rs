//! Where GPUs and NICs sit on the PCIe tree relative to each other, in the levels `nvidia-smi
//! topo -m` and NCCL use: PIX, PXB, PHB, NODE, SYS.
//!
//! Derived from the devices' real sysfs paths (`/sys/devices/pci0000:17/0000:17:01.0/...`): the
//! `pciDDDD:BB` component is the host bridge, the functions below it are the bridges on the way
//! down. A PCIe switch shows as two bridge levels (an upstream port and its downstream ports)
//! but counts as ONE bridge, as NCCL counts it (src/graph/xml.cc climbs two levels at a time):
//! GPU and NIC on two downstream ports of one switch are PIX. Port types from config space tell
//! root ports, upstream and downstream ports apart; when config space is unreadable (64 bytes
//! for a non-root user), the first bridge below a host bridge is taken as the root port and the
//! bridges below it as upstream/downstream pairs, which is NCCL's own assumption.

use crate::inventory::Inventory;
use crate::parse::pci::{Bdf, PortType, path_functions};
use serde::{Deserialize, Serialize};

/// Ordered from nearest to farthest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    #[serde(rename = "PIX", alias = "pix")]
    Pix,
    #[serde(rename = "PXB", alias = "pxb")]
    Pxb,
    #[serde(rename = "PHB", alias = "phb")]
    Phb,
    #[serde(rename = "NODE", alias = "node")]
    Node,
    #[serde(rename = "SYS", alias = "sys")]
    Sys,
}

impl Level {
    pub const ALL: [Level; 5] = [Level::Pix, Level::Pxb, Level::Phb, Level::Node, Level::Sys];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Pix => "PIX",
            Level::Pxb => "PXB",
            Level::Phb => "PHB",
            Level::Node => "NODE",
            Level::Sys => "SYS",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// nvidia-smi's legend line.
    pub fn legend(self) -> &'static str {
        match self {
            Level::Sys => {
                "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"
            }
            Level::Node => {
                "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"
            }
            Level::Phb => {
                "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"
            }
            Level::Pxb => {
                "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)"
            }
            Level::Pix => "Connection traversing at most a single PCIe bridge",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the switch structure of a path was known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Every bridge's PCI Express port type was read from config space.
    PortTypes,
    /// Some port type was unreadable: bridges below the root port taken as switch pairs.
    PathShape,
}

/// The route between two PCI functions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub level: Level,
    /// The bridges a peer-to-peer transfer crosses: those below the pair's common ancestor on
    /// either side (all of them, root ports included, when the pair shares no bridge).
    pub bridges: Vec<Bdf>,
    pub basis: Basis,
    /// Different host bridges whose NUMA nodes are unknown: NODE was assumed.
    pub numa_unknown: bool,
}

/// The host bridge component of a sysfs device path: `pci0000:17`.
fn host_bridge(path: &str) -> Option<&str> {
    path.split('/')
        .find(|c| c.starts_with("pci") && c.len() > 3 && c[3..].contains(':'))
}

/// The switch units above a function, top down, each named by its first bridge, and whether
/// every port type was known.
fn units(inv: &Inventory, bridges: &[Bdf]) -> (Vec<Bdf>, Basis) {
    let types: Vec<Option<PortType>> = bridges
        .iter()
        .map(|b| {
            inv.function(*b)
                .and_then(|f| f.detail.as_ref())
                .and_then(|d| d.port_type)
        })
        .collect();
    if types.iter().all(Option::is_some) {
        let mut out = Vec::new();
        for (b, t) in bridges.iter().zip(&types) {
            match t {
                // The root port belongs to the host bridge (the CPU), not to a switch.
                Some(PortType::RootPort) => {}
                // A downstream port is part of the switch its upstream port opened.
                Some(PortType::SwitchDownstream) if !out.is_empty() => {}
                _ => out.push(*b),
            }
        }
        return (out, Basis::PortTypes);
    }
    // NCCL's assumption: root port first, then upstream/downstream pairs.
    let out = bridges.iter().skip(1).step_by(2).copied().collect();
    (out, Basis::PathShape)
}

/// The route between two functions in the inventory; `None` when either is unknown.
pub fn route(inv: &Inventory, a: Bdf, b: Bdf) -> Option<Route> {
    let (fa, fb) = (inv.function(a)?, inv.function(b)?);
    let (ca, cb) = (path_functions(&fa.path), path_functions(&fb.path));
    let (ba, bb) = (
        &ca[..ca.len().saturating_sub(1)],
        &cb[..cb.len().saturating_sub(1)],
    );
    let (ua, basis_a) = units(inv, ba);
    let (ub, basis_b) = units(inv, bb);
    let basis = if basis_a == Basis::PortTypes && basis_b == Basis::PortTypes {
        Basis::PortTypes
    } else {
        Basis::PathShape
    };

    if host_bridge(&fa.path) != host_bridge(&fb.path) {
        let numa = |f: &crate::inventory::PciFunction| {
            f.detail
                .as_ref()
                .and_then(|d| d.numa_node.value().copied())
                .filter(|n| *n >= 0)
        };
        let (na, nb) = (numa(fa), numa(fb));
        let level = match (na, nb) {
            (Some(x), Some(y)) if x != y => Level::Sys,
            _ => Level::Node,
        };
        let bridges = ba.iter().chain(bb).copied().collect();
        return Some(Route {
            level,
            bridges,
            basis,
            numa_unknown: na.is_none() || nb.is_none(),
        });
    }
    let common = ca.iter().zip(&cb).take_while(|(x, y)| x == y).count();
    let bridges: Vec<Bdf> = ba
        .iter()
        .skip(common)
        .chain(bb.iter().skip(common))
        .copied()
        .collect();
    let same_device = a.domain == b.domain && a.bus == b.bus && a.device == b.device;
    // Functions of one device (two ports of one NIC) are PIX; so are devices behind the same
    // bridge. Devices right on the root bus (VMs, integrated endpoints) meet only in the host
    // bridge: PHB.
    let level = if same_device || (ba == bb && !ba.is_empty()) {
        Level::Pix
    } else {
        let shared = ua.iter().zip(&ub).take_while(|(x, y)| x == y).count();
        if shared == 0 {
            Level::Phb
        } else if (ua.len() - shared) + (ub.len() - shared) == 0 {
            Level::Pix
        } else {
            Level::Pxb
        }
    };
    Some(Route {
        level,
        bridges,
        basis,
        numa_unknown: false,
    })
}

/// A GPU or NIC in the matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Device {
    /// `GPU0`, `NIC0`.
    pub name: String,
    pub kind: Kind,
    pub bdf: Option<Bdf>,
    /// The RDMA device a NIC row stands for (`mlx5_0`).
    pub rdma_device: Option<String>,
    /// The GPU's model, when known.
    pub model: Option<String>,
    pub numa_node: Option<i32>,
    pub cpu_affinity: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gpu,
    Nic,
}

/// Every GPU and RDMA NIC, and the level between each pair.
#[derive(Debug, Clone)]
pub struct Matrix {
    pub devices: Vec<Device>,
    /// `levels[i][j]`: `None` on the diagonal and where a route is unknown.
    pub levels: Vec<Vec<Option<Route>>>,
    /// `nvlinks[i][j]`: NVLinks between two GPUs, as NVML reports them (live only).
    pub nvlinks: Vec<Vec<Option<u32>>>,
}

pub fn matrix(inv: &Inventory) -> Matrix {
    let detail = |b: Option<Bdf>| {
        b.and_then(|b| inv.function(b))
            .and_then(|f| f.detail.as_ref())
    };
    let mut devices: Vec<Device> = inv
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| Device {
            name: format!("GPU{i}"),
            kind: Kind::Gpu,
            bdf: Some(g.bdf),
            rdma_device: None,
            model: g.model.clone(),
            numa_node: detail(Some(g.bdf)).and_then(|d| d.numa_node.value().copied()),
            cpu_affinity: detail(Some(g.bdf)).and_then(|d| d.local_cpulist.clone()),
        })
        .collect();
    devices.extend(inv.rdma.iter().enumerate().map(|(i, d)| Device {
        name: format!("NIC{i}"),
        kind: Kind::Nic,
        bdf: d.pci,
        rdma_device: Some(d.name.clone()),
        model: None,
        numa_node: detail(d.pci).and_then(|d| d.numa_node.value().copied()),
        cpu_affinity: detail(d.pci).and_then(|d| d.local_cpulist.clone()),
    }));
    let levels = devices
        .iter()
        .enumerate()
        .map(|(i, a)| {
            devices
                .iter()
                .enumerate()
                .map(|(j, b)| match (i == j, a.bdf, b.bdf) {
                    (false, Some(x), Some(y)) => route(inv, x, y),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let links = inv
        .gpu_runtime
        .probe()
        .map(crate::gpu::nvlinks)
        .unwrap_or_default();
    let nvlinks = devices
        .iter()
        .map(|a| {
            devices
                .iter()
                .map(|b| match (a.kind, b.kind, a.bdf, b.bdf) {
                    (Kind::Gpu, Kind::Gpu, Some(x), Some(y)) => links.get(&(x, y)).copied(),
                    _ => None,
                })
                .collect()
        })
        .collect();
    Matrix {
        devices,
        levels,
        nvlinks,
    }
}

/// A GPU's nearest NICs: every NIC at the smallest level, with its route.
#[derive(Debug, Clone)]
pub struct Nearest {
    pub gpu: Bdf,
    pub level: Level,
    /// Indices into `inv.rdma`, with their routes.
    pub nics: Vec<(usize, Route)>,
}

/// For each GPU, its nearest RDMA NICs; `None` for a GPU when no NIC has a known route.
pub fn nearest(inv: &Inventory) -> Vec<(Bdf, Option<Nearest>)> {
    inv.gpus
        .iter()
        .map(|g| {
            let routes: Vec<(usize, Route)> = inv
                .rdma
                .iter()
                .enumerate()
                .filter_map(|(i, d)| Some((i, route(inv, g.bdf, d.pci?)?)))
                .collect();
            let best = routes.iter().map(|(_, r)| r.level).min();
            let near = best.map(|level| Nearest {
                gpu: g.bdf,
                level,
                nics: routes
                    .into_iter()
                    .filter(|(_, r)| r.level == level)
                    .collect(),
            });
            (g.bdf, near)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_parse() {
        assert!(
            Level::Pix < Level::Pxb
                && Level::Pxb < Level::Phb
                && Level::Phb < Level::Node
                && Level::Node < Level::Sys
        );
        assert_eq!(Level::parse("phb"), Some(Level::Phb));
        assert_eq!(Level::parse("NV18"), None);
        assert_eq!(
            host_bridge("/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0"),
            Some("pci0000:17")
        );
        assert_eq!(host_bridge("/sys/devices/virtual/net/lo"), None);
    }
}
