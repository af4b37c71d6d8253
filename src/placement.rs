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
use crate::model::gpu::Runtime;
use crate::parse::pci::{Bdf, PortType, path_functions};
use serde::Serialize;

pub use crate::model::Level;

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
pub fn host_bridge(path: &str) -> Option<&str> {
    path.split('/')
        .find(|c| c.starts_with("pci") && c.len() > 3 && c[3..].contains(':'))
}

/// What a bridge on a device's path is, as the levels count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A root port: it belongs to the host bridge (the CPU), not to a switch.
    RootPort,
    /// A switch's upstream port: the switch counts as one bridge, opened here.
    SwitchUpstream,
    /// A downstream port of the switch opened above it.
    SwitchDownstream,
    /// Any other bridge: one bridge of its own.
    Bridge,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::RootPort => "root port",
            Role::SwitchUpstream => "switch upstream port",
            Role::SwitchDownstream => "switch downstream port",
            Role::Bridge => "bridge",
        }
    }
}

/// The role of each bridge above a function (top down), and whether every port type was known.
/// The levels and the pictures of the tree (`topo --format svg`) both read it, so that they
/// count switches alike.
pub fn roles(inv: &Inventory, bridges: &[Bdf]) -> (Vec<Role>, Basis) {
    let types: Vec<Option<PortType>> = bridges
        .iter()
        .map(|b| {
            inv.function(*b)
                .and_then(|f| f.detail.as_ref())
                .and_then(|d| d.port_type)
        })
        .collect();
    if types.iter().all(Option::is_some) {
        let mut opened = false;
        let roles = types
            .iter()
            .map(|t| match t {
                Some(PortType::RootPort) => Role::RootPort,
                // A downstream port is part of the switch (or bridge) opened above it.
                Some(PortType::SwitchDownstream) if opened => Role::SwitchDownstream,
                Some(PortType::SwitchUpstream) => {
                    opened = true;
                    Role::SwitchUpstream
                }
                _ => {
                    opened = true;
                    Role::Bridge
                }
            })
            .collect();
        return (roles, Basis::PortTypes);
    }
    // NCCL's assumption: root port first, then upstream/downstream pairs.
    let roles = (0..bridges.len())
        .map(|i| match i {
            0 => Role::RootPort,
            i if i % 2 == 1 => Role::SwitchUpstream,
            _ => Role::SwitchDownstream,
        })
        .collect();
    (roles, Basis::PathShape)
}

/// The switch units above a function, top down, each named by its first bridge, and whether
/// every port type was known.
fn units(inv: &Inventory, bridges: &[Bdf]) -> (Vec<Bdf>, Basis) {
    let (roles, basis) = roles(inv, bridges);
    let out = bridges
        .iter()
        .zip(roles)
        .filter(|(_, r)| matches!(r, Role::SwitchUpstream | Role::Bridge))
        .map(|(b, _)| *b)
        .collect();
    (out, basis)
}

/// Where one function sits on the PCIe tree: everything a route to or from it needs, worked
/// out once. The matrix asks for the level of every pair; with 5,000 GPUs that is 25 million
/// pairs, so the sysfs path is parsed and the bridges' port types are looked up once per
/// device, not once per pair (issue 14).
#[derive(Debug, Clone)]
pub struct Place {
    bdf: Bdf,
    host_bridge: Option<String>,
    /// The functions on the sysfs path, top down, the function itself last.
    path: Vec<Bdf>,
    /// The switch units above it (see `units`).
    units: Vec<Bdf>,
    basis: Basis,
    /// `numa_node` when the kernel gives one (not -1).
    numa: Option<i32>,
}

impl Place {
    /// `None` when the function is not in the inventory.
    pub fn of(inv: &Inventory, bdf: Bdf) -> Option<Place> {
        let f = inv.function(bdf)?;
        let path = path_functions(&f.path);
        let bridges = &path[..path.len().saturating_sub(1)];
        let (units, basis) = units(inv, bridges);
        Some(Place {
            bdf,
            host_bridge: host_bridge(&f.path).map(str::to_owned),
            units,
            basis,
            numa: f
                .detail
                .as_ref()
                .and_then(|d| d.numa_node.value().copied())
                .filter(|n| *n >= 0),
            path,
        })
    }

    /// The bridges above the function, top down.
    fn bridges(&self) -> &[Bdf] {
        &self.path[..self.path.len().saturating_sub(1)]
    }
}

/// The level between two places, and whether NODE was assumed for unknown NUMA nodes. It
/// allocates nothing: the matrix calls it for every pair of devices.
fn level(a: &Place, b: &Place) -> (Level, bool) {
    if a.host_bridge != b.host_bridge {
        let level = match (a.numa, b.numa) {
            (Some(x), Some(y)) if x != y => Level::Sys,
            _ => Level::Node,
        };
        return (level, a.numa.is_none() || b.numa.is_none());
    }
    let (ba, bb) = (a.bridges(), b.bridges());
    let same_device =
        a.bdf.domain == b.bdf.domain && a.bdf.bus == b.bdf.bus && a.bdf.device == b.bdf.device;
    // Functions of one device (two ports of one NIC) are PIX; so are devices behind the same
    // bridge. Devices right on the root bus (VMs, integrated endpoints) meet only in the host
    // bridge: PHB.
    let level = if same_device || (ba == bb && !ba.is_empty()) {
        Level::Pix
    } else {
        let (ua, ub) = (&a.units, &b.units);
        let shared = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
        if shared == 0 {
            Level::Phb
        } else if (ua.len() - shared) + (ub.len() - shared) == 0 {
            Level::Pix
        } else {
            Level::Pxb
        }
    };
    (level, false)
}

/// The route between two placed functions.
pub fn route_between(a: &Place, b: &Place) -> Route {
    let (level, numa_unknown) = level(a, b);
    let basis = if a.basis == Basis::PortTypes && b.basis == Basis::PortTypes {
        Basis::PortTypes
    } else {
        Basis::PathShape
    };
    let (ba, bb) = (a.bridges(), b.bridges());
    let bridges = if a.host_bridge != b.host_bridge {
        ba.iter().chain(bb).copied().collect()
    } else {
        let common = a
            .path
            .iter()
            .zip(&b.path)
            .take_while(|(x, y)| x == y)
            .count();
        ba.iter()
            .skip(common)
            .chain(bb.iter().skip(common))
            .copied()
            .collect()
    };
    Route {
        level,
        bridges,
        basis,
        numa_unknown,
    }
}

/// The route between two functions in the inventory; `None` when either is unknown.
pub fn route(inv: &Inventory, a: Bdf, b: Bdf) -> Option<Route> {
    Some(route_between(&Place::of(inv, a)?, &Place::of(inv, b)?))
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
    /// The NUMA nodes nvidia-smi's "NUMA Affinity" column names ([`numa_affinity`]).
    pub numa_affinity: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Gpu,
    Nic,
}

/// Every GPU and RDMA NIC, and what the level between each pair is computed from. The levels
/// themselves are not stored: N devices make N^2 cells (25 million for 5,000 GPUs, over a GB
/// as routes), while the places are linear in N and make each cell a few comparisons. Readers
/// ask `level(i, j)` as they write a row out (issue 14).
#[derive(Debug, Clone)]
pub struct Matrix {
    pub devices: Vec<Device>,
    /// `places[i]`: where `devices[i]` sits; `None` without a PCI function in the inventory.
    places: Vec<Option<Place>>,
    /// NVLinks between two GPUs ([`nvlinks`]).
    nvlinks: crate::model::gpu::NvLinks,
    /// `c2c[i]`: `devices[i]` is a GPU joined to its CPU by an active NVLink-C2C link.
    c2c: Vec<bool>,
}

impl Matrix {
    /// The PCIe level between devices `i` and `j`, and whether NODE was assumed for unknown NUMA
    /// nodes; `None` on the diagonal and where a route is unknown.
    pub fn level(&self, i: usize, j: usize) -> Option<(Level, bool)> {
        if i == j {
            return None;
        }
        let (a, b) = (self.places.get(i)?.as_ref()?, self.places.get(j)?.as_ref()?);
        Some(level(a, b))
    }

    /// NVLinks between devices `i` and `j`, when both are GPUs that NVML says are joined.
    /// Whether NCCL reaches NIC `j` from GPU `i` (either order) through the GPU's NVLink-C2C:
    /// the GPU has it up and the pair meets only in the CPU (PHB, or NODE: one CPU per NUMA
    /// node to NCCL), NCCL's P2C path. nvidia-smi prints SYS or NODE there.
    pub fn c2c(&self, i: usize, j: usize) -> bool {
        let (Some(a), Some(b)) = (self.devices.get(i), self.devices.get(j)) else {
            return false;
        };
        let gpu = match (a.kind, b.kind) {
            (Kind::Gpu, Kind::Nic) => i,
            (Kind::Nic, Kind::Gpu) => j,
            _ => return false,
        };
        self.c2c.get(gpu).copied().unwrap_or(false)
            && self
                .level(i, j)
                .is_some_and(|(l, _)| matches!(l, Level::Phb | Level::Node))
    }

    pub fn nvlinks(&self, i: usize, j: usize) -> Option<u32> {
        let (a, b) = (self.devices.get(i)?, self.devices.get(j)?);
        match (a.kind, b.kind, a.bdf, b.bdf) {
            (Kind::Gpu, Kind::Gpu, Some(x), Some(y)) if i != j => self.nvlinks.get(x, y),
            _ => None,
        }
    }
}

/// The NUMA nodes a PCI function is local to, by the rule of nvidia-smi's "NUMA Affinity"
/// column: the kernel's `numa_node` when it gives one (>= 0), else the nodes whose CPUs the
/// function's `local_cpulist` touches (VMs and some one-socket boards say -1: nvidia-smi on the
/// 2x H200 VM, docs/verified/gpu-machine/h200x2, showed NUMA Affinity 0 for CPU Affinity 0-31).
/// Sorted; empty when neither is known.
///
/// `topo`'s NUMA Affinity column and the pictures' NUMA bands both ask this, so that they
/// never disagree (issue 24: the picture said "NUMA node unknown" where `topo` said 0).
pub fn numa_affinity(inv: &Inventory, bdf: Bdf) -> Vec<u32> {
    use crate::parse::cpulist;
    let detail = inv.function(bdf).and_then(|f| f.detail.as_ref());
    if let Some(n) = detail
        .and_then(|d| d.numa_node.value().copied())
        .and_then(|n| u32::try_from(n).ok())
    {
        return vec![n];
    }
    let Some(cpus) = detail
        .and_then(|d| d.local_cpulist.as_deref())
        .and_then(cpulist::parse)
    else {
        return Vec::new();
    };
    inv.kernel
        .numa_nodes
        .iter()
        .filter(|(_, node)| cpulist::intersect(&cpus, node))
        .map(|(id, _)| *id)
        .collect()
}

/// The distance matrix of `inv`'s GPUs and NICs, with the NVLinks between GPUs that NVML
/// reported in the GPU probe (`gpu`): live, or as a capture recorded it.
pub fn matrix(inv: &Inventory, gpu: &Runtime) -> Matrix {
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
            numa_affinity: None,
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
        numa_affinity: None,
    }));
    for d in &mut devices {
        d.numa_affinity = d
            .bdf
            .map(|b| numa_affinity(inv, b))
            .filter(|n| !n.is_empty())
            .map(crate::parse::cpulist::format);
    }
    let places = devices
        .iter()
        .map(|d| d.bdf.and_then(|b| Place::of(inv, b)))
        .collect();
    let c2c = inv
        .gpus
        .iter()
        .map(|g| g.c2c.as_ref().is_some_and(|c| c.active))
        .chain(inv.rdma.iter().map(|_| false))
        .collect();
    Matrix {
        devices,
        places,
        nvlinks: gpu.nvlinks(),
        c2c,
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
    let all: Vec<usize> = (0..inv.rdma.len()).collect();
    nearest_among(inv, &all)
}

/// [`nearest`] among the NICs `nics` (indices into `inv.rdma`): those NCCL uses. Nearest as
/// NCCL's `ncclTopoGetLocal` (src/graph/topo.cc) picks a GPU's NICs: the most path bandwidth
/// first, then the shortest path type; so a narrow function next to the GPU loses to a rail
/// further away (issue 29).
pub fn nearest_among(inv: &Inventory, nics: &[usize]) -> Vec<(Bdf, Option<Nearest>)> {
    // Each NIC placed once, not once per GPU.
    let nics: Vec<(usize, Place, Option<f64>)> = nics
        .iter()
        .filter_map(|&i| {
            let place = Place::of(inv, inv.rdma.get(i)?.pci?)?;
            Some((i, place, nic_bandwidth(inv, i).map(|b| b.gbs)))
        })
        .collect();
    inv.gpus
        .iter()
        .map(|g| {
            let Some(gp) = Place::of(inv, g.bdf) else {
                return (g.bdf, None);
            };
            let gpu_bw = pci_link(inv, g.bdf).map(|l| l.gbs);
            let ranked: Vec<(usize, Option<f64>, Level)> = nics
                .iter()
                .map(|(i, p, bw)| (*i, path_bandwidth(gpu_bw, *bw), level(&gp, p).0))
                .collect();
            let best = local(&ranked);
            let near = best.first().map(|&(_, lvl)| Nearest {
                gpu: g.bdf,
                level: lvl,
                nics: best
                    .iter()
                    .filter_map(|&(i, _)| {
                        let (_, p, _) = nics.iter().find(|(j, ..)| *j == i)?;
                        Some((i, route_between(&gp, p)))
                    })
                    .collect(),
            });
            (g.bdf, near)
        })
        .collect()
}

/// NCCL's local NICs among `ranked` (NIC, path bandwidth, level): the greatest bandwidth, then
/// the smallest level; each with its level. An unknown bandwidth is not held against a NIC.
pub fn local(ranked: &[(usize, Option<f64>, Level)]) -> Vec<(usize, Level)> {
    let bw = |b: Option<f64>| b.unwrap_or(f64::INFINITY);
    let same = |a: f64, b: f64| a == b || (a - b).abs() < 0.01;
    let Some(top) = ranked.iter().map(|(_, b, _)| bw(*b)).reduce(f64::max) else {
        return Vec::new();
    };
    let widest: Vec<&(usize, Option<f64>, Level)> = ranked
        .iter()
        .filter(|(_, b, _)| same(bw(*b), top))
        .collect();
    let Some(min) = widest.iter().map(|(_, _, l)| *l).min() else {
        return Vec::new();
    };
    widest
        .iter()
        .filter(|(_, _, l)| *l == min)
        .map(|(i, _, l)| (*i, *l))
        .collect()
}

/// A PCIe link as NCCL counts it: the lesser of the device's and its upstream port's maximum
/// speed and width (src/graph/xml.cc `ncclTopoGetXmlFromSys` reads `max_link_speed` and
/// `max_link_width` of the device and of `..`), in GB/s as `ncclTopoAddPci` computes it (topo.cc:
/// width x the lane rate of `kvDictPciGen`, 15/30/60/120/240/480 in 100 Mb/s, over 80).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PciLink {
    /// GT/s.
    pub speed: f64,
    pub width: u32,
    /// GB/s.
    pub gbs: f64,
}

impl PciLink {
    /// `16.0 GT/s x2 = 3.0 GB/s`.
    pub fn describe(&self) -> String {
        format!(
            "{:.1} GT/s x{} = {:.1} GB/s",
            self.speed, self.width, self.gbs
        )
    }
}

/// NCCL's lane rate for a transfer rate, in 100 Mb/s (kvDictPciGen; anything else 60).
fn lane_rate(gts: f64) -> f64 {
    const RATES: [(f64, f64); 6] = [
        (2.5, 15.0),
        (5.0, 30.0),
        (8.0, 60.0),
        (16.0, 120.0),
        (32.0, 240.0),
        (64.0, 480.0),
    ];
    RATES
        .iter()
        .find(|(g, _)| (g - gts).abs() < 0.01)
        .map_or(60.0, |(_, r)| *r)
}

/// The PCIe link of function `bdf` as NCCL counts it; `None` when its link files are unknown.
pub fn pci_link(inv: &Inventory, bdf: Bdf) -> Option<PciLink> {
    let f = inv.function(bdf)?;
    let max = |b: Bdf| {
        let d = inv.function(b)?.detail.as_ref()?;
        Some((
            d.link.max_speed.value().copied(),
            d.link.max_width.value().copied(),
        ))
    };
    let (speed, width) = max(bdf)?;
    let path = path_functions(&f.path);
    let port = path
        .len()
        .checked_sub(2)
        .and_then(|i| path.get(i))
        .and_then(|b| max(*b));
    let least = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let speed = least(speed, port.and_then(|p| p.0))?;
    let width = match (width, port.and_then(|p| p.1)) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    // NCCL reads a width of 0 as 16.
    let lanes = if width == 0 { 16 } else { width };
    Some(PciLink {
        speed,
        width: lanes,
        gbs: f64::from(lanes) * lane_rate(speed) / 80.0,
    })
}

/// A NIC's bandwidth as NCCL's tree carries it: the lesser of its PCIe link and its port rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NicBandwidth {
    pub pci: Option<PciLink>,
    /// The fastest port's rate, GB/s (`400 Gb/sec` is 50).
    pub port: Option<f64>,
    /// GB/s.
    pub gbs: f64,
}

impl NicBandwidth {
    /// `PCIe 16.0 GT/s x2 = 3.0 GB/s, port 400 Gb/s`.
    pub fn describe(&self) -> String {
        let pci = self
            .pci
            .map(|l| format!("PCIe {}", l.describe()))
            .unwrap_or_else(|| "PCIe link unknown".into());
        match self.port {
            Some(p) => format!("{pci}, port {} Gb/s", p * 8.0),
            None => pci,
        }
    }
}

/// NIC `i`'s bandwidth (index into `inv.rdma`); `None` when neither its link nor a port rate is
/// known.
pub fn nic_bandwidth(inv: &Inventory, i: usize) -> Option<NicBandwidth> {
    let d = inv.rdma.get(i)?;
    let pci = d.pci.and_then(|b| pci_link(inv, b));
    let port = d
        .ports
        .iter()
        .filter_map(|p| p.rate.value().copied())
        .filter(|r| *r > 0.0)
        .reduce(f64::max)
        .map(|r| r / 8.0);
    let gbs = match (pci.map(|l| l.gbs), port) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some(NicBandwidth { pci, port, gbs })
}

/// The bandwidth between GPU `gpu` and NIC `nic` (index into `inv.rdma`), as [`nearest_among`]
/// ranks it.
pub fn gpu_nic_bandwidth(inv: &Inventory, gpu: Bdf, nic: usize) -> Option<f64> {
    path_bandwidth(
        pci_link(inv, gpu).map(|l| l.gbs),
        nic_bandwidth(inv, nic).map(|b| b.gbs),
    )
}

/// The bandwidth of a GPU-NIC path: the lesser of the two ends' (bridges between are taken to
/// be at least as wide as the ends, as on every server's GPU/NIC switches).
fn path_bandwidth(gpu: Option<f64>, nic: Option<f64>) -> Option<f64> {
    match (gpu, nic) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A NIC carries under a quarter of the node's widest: a management or storage function, not a
/// rail (p6-b200's ConnectX-7 functions at 3 GB/s beside 50 GB/s EFA rails). NCCL has no such
/// cut-off; it ranks by bandwidth, so such a NIC is only ever a GPU's NIC when it is the only
/// one NCCL has.
pub const NARROW_FRACTION: f64 = 0.25;

/// The node's narrow NICs (indices into `inv.rdma`) with their bandwidth and the widest NIC's.
pub fn narrow(inv: &Inventory) -> Vec<(usize, NicBandwidth, f64)> {
    let all: Vec<(usize, NicBandwidth)> = (0..inv.rdma.len())
        .filter_map(|i| Some((i, nic_bandwidth(inv, i)?)))
        .collect();
    let Some(widest) = all.iter().map(|(_, b)| b.gbs).reduce(f64::max) else {
        return Vec::new();
    };
    all.into_iter()
        .filter(|(_, b)| b.gbs < widest * NARROW_FRACTION)
        .map(|(i, b)| (i, b, widest))
        .collect()
}

/// BlueField DPUs' network functions (vendor 15b3): BlueField-2's ConnectX-6 Dx (a2d6) and
/// BlueField-3's (a2dc), as rdma-core's kernel-boot/rdma_topo names the latter (`bf3_nic`).
pub const BLUEFIELD_NICS: &[u16] = &[0xa2d6, 0xa2dc];

/// The node's front-end NICs (indices into `inv.rdma`): BlueField DPU ports on a node whose
/// other RDMA NICs are ConnectX, where the DPU carries the north-south traffic (storage,
/// the tenant network) and the ConnectX the GPUs' rails (GB200 and GB300 trays: one ConnectX
/// per GPU, a BlueField-3 per tray; NVIDIA/NVSentinel's NIC health monitor tells them apart the
/// same way). Never a rail, never in NCCL_IB_HCA.
pub fn front_end(inv: &Inventory) -> Vec<usize> {
    let bluefield = |i: usize| {
        inv.rdma[i]
            .pci
            .and_then(|b| inv.function(b))
            .is_some_and(|f| f.vendor == 0x15b3 && BLUEFIELD_NICS.contains(&f.device))
    };
    let dpus: Vec<usize> = (0..inv.rdma.len()).filter(|&i| bluefield(i)).collect();
    let connectx = (0..inv.rdma.len()).any(|i| {
        !bluefield(i)
            && inv.rdma[i]
                .pci
                .and_then(|b| inv.function(b))
                .is_some_and(|f| f.vendor == 0x15b3)
    });
    if connectx { dpus } else { Vec::new() }
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
