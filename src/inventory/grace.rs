//! Grace and Vera systems as rdma-core's `kernel-boot/rdma_topo` models them (issue 38): which
//! PCI functions it types (Grace/Vera root ports, ConnectX and BlueField switch ports, ConnectX
//! NIC functions, the ConnectX-8 Data Direct DMA function, NVIDIA GPUs), which kind of system it
//! is (DMA-based or NUMA-based), its complexes, and the role of every port in them. The `acs`
//! check judges the ports against rdma_topo's values; this module only gathers the facts.
//!
//! rdma_topo (linux-rdma/rdma-core kernel-boot/rdma_topo, read at 691953d8) decides the kind for
//! the whole system (`PCITopo.__detect_topo_type`): any 15b3:2100 function makes it DMA-based;
//! else a GPU whose parent is a root port makes it NUMA-based; else a ConnectX switch with a GPU
//! and a NIC makes it "inline". gdrdoctor models only Grace and Vera systems: a DMA function, or
//! a GPU right below a Grace or Vera root port (rdma_topo's NUMA rule also takes a GPU below any
//! root port, which would take in every x86 node with GPUs on root ports; and its inline complex
//! sits below an x86 root port by definition). Every other node keeps gdrdoctor's own ACS rule.
//!
//! A DMA-based complex (`__get_nvcx_complex`, `NVCX_DMA_Complex`) is one DMA function and one
//! GPU below one Grace root port, in exactly this shape:
//!
//! ```text
//! Grace root port - ConnectX switch upstream port -+- downstream port - DMA function 15b3:2100
//!                                                  +- downstream port - switch - switch - GPU
//! ```
//!
//! with nothing else below the root port; its NIC's own function (15b3:1023) sits elsewhere,
//! found by the VPD keyword V3 it shares with the DMA function. A NUMA-based complex
//! (`__get_nvcx_numa_complex`) is the ConnectX NIC functions and the GPUs of one NUMA node.

use super::PciFunction;
use crate::model::Evidence;
use crate::parse::pci::{Bdf, path_functions};
use crate::parse::vpd::Vpd;
use crate::root::{ReadError, Root};
use std::collections::BTreeMap;

const VENDOR_NVIDIA: u16 = 0x10de;
const VENDOR_MELLANOX: u16 = 0x15b3;

/// rdma_topo's device types (its `pci_device_types`), for the functions it judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Type {
    /// NVIDIA Grace PCIe root port: 10de:22b1, 22b2, 22b8.
    GraceRp,
    /// NVIDIA Vera PCIe root port: 10de:2f95, 2f96.
    VeraRp,
    /// A ConnectX switch's upstream or downstream port: 15b3:197c, 1979.
    CxSwitch,
    /// A BlueField-3 switch's port: 15b3:197b.
    Bf3Switch,
    /// A ConnectX-7, -8 or -9 NIC function: 15b3:1021, 1023, 1025.
    CxNic,
    /// A BlueField-3's NIC function: 15b3:a2dc.
    Bf3Nic,
    /// The ConnectX-8 Data Direct DMA function: 15b3:2100.
    CxDma,
    /// Any NVIDIA display-class function (rdma_topo's `PCI_NVGPU`: vendor 10de, class 03).
    Gpu,
}

impl Type {
    pub fn of(f: &PciFunction) -> Option<Type> {
        Some(match (f.vendor, f.device) {
            (VENDOR_NVIDIA, 0x22b1 | 0x22b2 | 0x22b8) => Type::GraceRp,
            (VENDOR_NVIDIA, 0x2f95 | 0x2f96) => Type::VeraRp,
            (VENDOR_MELLANOX, 0x1021 | 0x1023 | 0x1025) => Type::CxNic,
            (VENDOR_MELLANOX, 0xa2dc) => Type::Bf3Nic,
            (VENDOR_MELLANOX, 0x2100) => Type::CxDma,
            (VENDOR_MELLANOX, 0x197b) => Type::Bf3Switch,
            (VENDOR_MELLANOX, 0x197c | 0x1979) => Type::CxSwitch,
            (VENDOR_NVIDIA, _) if f.class >> 16 == 0x03 => Type::Gpu,
            _ => return None,
        })
    }

    /// rdma_topo's name for it (`grace_rp`, `cx_switch`, ...), which its messages print.
    pub fn rdma_topo_name(self) -> &'static str {
        match self {
            Type::GraceRp => "grace_rp",
            Type::VeraRp => "vera_rp",
            Type::CxSwitch => "cx_switch",
            Type::Bf3Switch => "bf3_switch",
            Type::CxNic => "cx_nic",
            Type::Bf3Nic => "bf3_nic",
            Type::CxDma => "cx_dma",
            Type::Gpu => "nvgpu",
        }
    }

    /// The ports rdma_topo sets ACS on: root ports of Grace and Vera, switch ports of ConnectX
    /// and BlueField-3 (`PCITopo.compute_acs`).
    pub fn is_port(self) -> bool {
        matches!(
            self,
            Type::GraceRp | Type::VeraRp | Type::CxSwitch | Type::Bf3Switch
        )
    }
}

/// The kind of system, for all its complexes (rdma_topo's `TopoType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A ConnectX-8 Data Direct DMA function beside each GPU (GB300).
    DmaBased,
    /// GPUs right below Grace or Vera root ports, NICs below others (GB200).
    NumaBased,
}

impl Kind {
    /// rdma_topo's name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::DmaBased => "DMA-based",
            Kind::NumaBased => "NUMA-based",
        }
    }
}

/// What a port is in its complex.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The Grace root port at the top of a DMA-based complex.
    DmaRootPort { dma: Bdf, gpu: Bdf },
    /// The shared switch's downstream port toward the DMA function.
    TowardDma { dma: Bdf, gpu: Bdf },
    /// The shared switch's downstream port toward the GPU (through the second switch).
    TowardGpu { dma: Bdf, gpu: Bdf },
    /// Any other Grace or Vera root port or ConnectX/BlueField switch port: the kernel's default.
    Other,
}

/// A port rdma_topo sets ACS on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub bdf: Bdf,
    pub ty: Type,
    pub role: Role,
}

/// How a DMA function was paired with its NIC's own function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pairing {
    /// The NIC functions sharing the DMA function's VPD V3, as rdma_topo pairs them.
    Vpd { v3: String, pfs: Vec<Bdf> },
    /// VPD V3 unreadable (or absent): the ConnectX NIC functions on the DMA function's NUMA node,
    /// one of which is its NIC.
    Numa {
        node: Option<i32>,
        candidates: Vec<Bdf>,
        why: String,
    },
    /// VPD read and holding a V3 that no NIC function shares (rdma_topo: "V3 UUID matching
    /// failed").
    Unmatched { v3: String },
}

/// One DMA-based complex: the ports of its segment and the functions they lead to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DmaComplex {
    pub dma: Bdf,
    pub gpu: Bdf,
    pub root_port: Bdf,
    pub upstream: Bdf,
    pub toward_dma: Bdf,
    pub toward_gpu: Bdf,
    pub nic: Pairing,
}

/// One NUMA-based complex.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaComplex {
    pub node: i32,
    /// ConnectX NIC functions on the node.
    pub nics: Vec<Bdf>,
    pub gpus: Vec<Bdf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Complex {
    Dma(DmaComplex),
    Numa(NumaComplex),
    /// What rdma_topo would refuse ("Unexpected topology structure"), and why; `segment`: the
    /// root port whose ports gdrdoctor then does not judge (their values depend on the complex).
    Unrecognised {
        subject: String,
        why: String,
        segment: Option<Bdf>,
    },
}

/// A VPD read (rdma_topo reads it for ConnectX NIC and DMA functions only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VpdRead {
    pub path: String,
    pub vpd: Result<Vpd, ReadError>,
}

impl VpdRead {
    pub fn v3(&self) -> Option<String> {
        self.vpd.as_ref().ok()?.text("V3").filter(|v| v.len() <= 64)
    }

    pub fn evidence(&self) -> Evidence {
        let value = match &self.vpd {
            Ok(v) => match (self.v3(), &v.identifier) {
                (Some(v3), Some(id)) => format!("V3 {v3} ({id})"),
                (Some(v3), None) => format!("V3 {v3}"),
                (None, _) => "<no V3 keyword in VPD-R>".to_owned(),
            },
            Err(e) => format!("<{}>", e.reason()),
        };
        Evidence {
            path: self.path.clone(),
            value,
        }
    }
}

/// Where NCCL's loader finds libmlx5 and whether it exports the call NCCL's Data Direct needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Libmlx5 {
    /// (the name dlopen was given, the file, which part of the search found it).
    pub found: Option<(String, String, String)>,
    /// `mlx5dv_get_data_direct_sysfs_path` is in it; `None`: it could not be read.
    pub data_direct: Option<bool>,
}

/// NCCL loads rdma-core's mlx5 provider by these names, in order (src/misc/mlx5dvsymbols.cc).
pub const LIBMLX5_NAMES: [&str; 2] = ["libmlx5.so", "libmlx5.so.1"];
/// The call NCCL looks up for Data Direct, at symbol version MLX5_1.25 (rdma-core 54,
/// debian/ibverbs-providers.symbols: `mlx5dv_get_data_direct_sysfs_path@MLX5_1.25 54`).
pub const DATA_DIRECT_SYMBOL: &str = "mlx5dv_get_data_direct_sysfs_path";
/// A shared library's dynamic symbol names sit in its first pages; the scan stops here.
const SYMBOL_SCAN_MAX: u64 = 8 << 20;

/// A Grace or Vera system, as rdma_topo would model it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grace {
    pub kind: Kind,
    /// What made it one: a DMA function, or a GPU right below a Grace or Vera root port.
    pub signature: Evidence,
    /// Every port rdma_topo sets ACS on, by address.
    pub ports: Vec<Port>,
    pub complexes: Vec<Complex>,
    /// The VPD of every ConnectX NIC and DMA function.
    pub vpd: BTreeMap<Bdf, VpdRead>,
    /// DMA-based systems only.
    pub libmlx5: Option<Libmlx5>,
}

impl Grace {
    pub fn port(&self, bdf: Bdf) -> Option<&Port> {
        self.ports
            .binary_search_by(|p| p.bdf.cmp(&bdf))
            .ok()
            .map(|i| &self.ports[i])
    }
}

/// The functions above `f`, top down (its parent last).
fn above(f: &PciFunction) -> Vec<Bdf> {
    let mut path = path_functions(&f.path);
    path.pop();
    path
}

fn type_at(pci: &BTreeMap<Bdf, PciFunction>, b: Bdf) -> Option<Type> {
    pci.get(&b).and_then(Type::of)
}

/// Whether the node is one gdrdoctor models as rdma_topo does, and the evidence: the first DMA
/// function, else the first GPU right below a Grace or Vera root port. Read from the PCI IDs and
/// paths alone, before any detail, so that the details of every function rdma_topo looks at
/// can be read.
pub fn signature(pci: &BTreeMap<Bdf, PciFunction>) -> Option<(Kind, Evidence)> {
    if let Some(f) = pci.values().find(|f| Type::of(f) == Some(Type::CxDma)) {
        return Some((
            Kind::DmaBased,
            Evidence {
                path: f.path.clone(),
                value: format!(
                    "{}: a ConnectX-8 Data Direct DMA function, so rdma_topo models the node as DMA-based",
                    f.ids()
                ),
            },
        ));
    }
    pci.values().find_map(|f| {
        if Type::of(f) != Some(Type::Gpu) {
            return None;
        }
        let parent = *above(f).last()?;
        let rp = pci.get(&parent)?;
        matches!(Type::of(rp), Some(Type::GraceRp | Type::VeraRp)).then(|| {
            (
                Kind::NumaBased,
                Evidence {
                    path: f.path.clone(),
                    value: format!(
                        "GPU {} right below {} root port {parent} ({}), so rdma_topo models the node as NUMA-based",
                        f.ids(),
                        if Type::of(rp) == Some(Type::VeraRp) { "Vera" } else { "Grace" },
                        rp.ids()
                    ),
                },
            )
        })
    })
}

/// The functions rdma_topo looks at, whose details (config space, NUMA node, IOMMU group) the
/// inventory must read on such a node.
pub fn functions(pci: &BTreeMap<Bdf, PciFunction>) -> Vec<Bdf> {
    pci.values()
        .filter(|f| Type::of(f).is_some())
        .map(|f| f.bdf)
        .collect()
}

/// The system's complexes and ports, read once the details are in.
pub fn load(
    root: &Root,
    pci: &BTreeMap<Bdf, PciFunction>,
    kind: Kind,
    signature: Evidence,
    loader: impl FnOnce() -> Libmlx5,
) -> Grace {
    let mut vpd = BTreeMap::new();
    for f in pci.values() {
        if matches!(Type::of(f), Some(Type::CxNic | Type::CxDma)) {
            let path = format!("{}/vpd", f.path);
            let read = root
                .read_prefix(&path, 32 << 10)
                .map(|b| crate::parse::vpd::parse(&b));
            vpd.insert(f.bdf, VpdRead { path, vpd: read });
        }
    }
    let complexes = match kind {
        Kind::DmaBased => pci
            .values()
            .filter(|f| Type::of(f) == Some(Type::CxDma))
            .map(|f| dma_complex(pci, &vpd, f))
            .collect(),
        Kind::NumaBased => numa_complexes(pci),
    };
    let mut ports: Vec<Port> = pci
        .values()
        .filter_map(|f| {
            let ty = Type::of(f).filter(|t| t.is_port())?;
            Some(Port {
                bdf: f.bdf,
                ty,
                role: Role::Other,
            })
        })
        .collect();
    for c in &complexes {
        if let Complex::Dma(d) = c {
            let (dma, gpu) = (d.dma, d.gpu);
            for (at, role) in [
                (d.root_port, Role::DmaRootPort { dma, gpu }),
                (d.toward_dma, Role::TowardDma { dma, gpu }),
                (d.toward_gpu, Role::TowardGpu { dma, gpu }),
            ] {
                if let Some(p) = ports.iter_mut().find(|p| p.bdf == at) {
                    p.role = role;
                }
            }
        }
    }
    Grace {
        kind,
        signature,
        ports,
        complexes,
        vpd,
        libmlx5: (kind == Kind::DmaBased).then(loader),
    }
}

/// rdma_topo's shape check for one DMA function (`__get_nvcx_complex`), in its order.
fn dma_complex(
    pci: &BTreeMap<Bdf, PciFunction>,
    vpd: &BTreeMap<Bdf, VpdRead>,
    dma: &PciFunction,
) -> Complex {
    let path = above(dma);
    let segment = path.first().copied();
    let unrecognised = |why: String| Complex::Unrecognised {
        subject: format!("DMA function {}", dma.bdf),
        why,
        segment,
    };
    let is = |b: Option<&Bdf>, t: Type| b.is_some_and(|b| type_at(pci, *b) == Some(t));
    let n = path.len();
    let (toward_dma, upstream, root_port) = match (n >= 3)
        .then(|| (&path[n - 1], &path[n - 2], &path[n - 3]))
    {
        Some((d, u, r))
            if is(Some(d), Type::CxSwitch)
                && is(Some(u), Type::CxSwitch)
                && is(Some(r), Type::GraceRp) =>
        {
            (*d, *u, *r)
        }
        _ => {
            return unrecognised(
                "its upstream path is not a ConnectX switch's downstream and upstream ports below a Grace root port (rdma_topo: \"unrecognized upstream path\")".into(),
            );
        }
    };
    let below: Vec<&PciFunction> = pci
        .values()
        .filter(|f| f.bdf != root_port && above(f).contains(&root_port))
        .collect();
    let gpus: Vec<&PciFunction> = below
        .iter()
        .copied()
        .filter(|f| Type::of(f) == Some(Type::Gpu))
        .collect();
    let [gpu] = gpus.as_slice() else {
        return unrecognised(format!(
            "{} GPUs below its root port {root_port}, where rdma_topo wants exactly one (\"does not have a nearby GPU\")",
            gpus.len()
        ));
    };
    let gpath = above(gpu);
    let m = gpath.len();
    let toward_gpu = match (m >= 4).then(|| &gpath[m - 4..]) {
        Some([u, d1, u2, d2])
            if *u == upstream
                && is(Some(d1), Type::CxSwitch)
                && is(Some(u2), Type::CxSwitch)
                && is(Some(d2), Type::CxSwitch) =>
        {
            *d1
        }
        _ => {
            return unrecognised(format!(
                "GPU {} does not sit two ConnectX switches below the upstream port {upstream} (rdma_topo: \"unrecognized upstream path from the GPU\")",
                gpu.bdf
            ));
        }
    };
    let expected = [
        dma.bdf,
        toward_dma,
        upstream,
        gpu.bdf,
        toward_gpu,
        gpath[m - 2],
        gpath[m - 1],
    ];
    let extra: Vec<String> = below
        .iter()
        .filter(|f| !expected.contains(&f.bdf))
        .map(|f| format!("{} ({})", f.bdf, f.ids()))
        .collect();
    if !extra.is_empty() {
        return unrecognised(format!(
            "below its root port {root_port} also {} (rdma_topo: \"unexpected PCI devices in the topology\")",
            extra.join(", ")
        ));
    }
    Complex::Dma(DmaComplex {
        dma: dma.bdf,
        gpu: gpu.bdf,
        root_port,
        upstream,
        toward_dma,
        toward_gpu,
        nic: pairing(pci, vpd, dma),
    })
}

fn numa_of(f: &PciFunction) -> Option<i32> {
    f.detail
        .as_ref()
        .and_then(|d| d.numa_node.value().copied())
        .filter(|n| *n >= 0)
}

/// The DMA function's NIC: by VPD V3 as rdma_topo pairs them, else by NUMA node.
fn pairing(
    pci: &BTreeMap<Bdf, PciFunction>,
    vpd: &BTreeMap<Bdf, VpdRead>,
    dma: &PciFunction,
) -> Pairing {
    let nics = || {
        pci.values()
            .filter(|f| Type::of(f) == Some(Type::CxNic))
            .collect::<Vec<_>>()
    };
    let read = vpd.get(&dma.bdf);
    if let Some(v3) = read.and_then(VpdRead::v3) {
        let pfs: Vec<Bdf> = nics()
            .into_iter()
            .filter(|f| vpd.get(&f.bdf).and_then(VpdRead::v3).as_ref() == Some(&v3))
            .map(|f| f.bdf)
            .collect();
        return if pfs.is_empty() {
            Pairing::Unmatched { v3 }
        } else {
            Pairing::Vpd { v3, pfs }
        };
    }
    let why = match read.map(|r| &r.vpd) {
        Some(Err(ReadError::PermissionDenied { .. })) => "its VPD needs root".to_owned(),
        Some(Err(ReadError::NotFound { .. })) => "it has no vpd file".to_owned(),
        Some(Err(e)) => format!("its VPD could not be read ({})", e.reason()),
        _ => "its VPD holds no V3 keyword".to_owned(),
    };
    let node = numa_of(dma);
    Pairing::Numa {
        node,
        candidates: nics()
            .into_iter()
            .filter(|f| node.is_some() && numa_of(f) == node)
            .map(|f| f.bdf)
            .collect(),
        why,
    }
}

/// rdma_topo's NUMA-based complexes: the ConnectX NIC functions and GPUs of each NUMA node.
fn numa_complexes(pci: &BTreeMap<Bdf, PciFunction>) -> Vec<Complex> {
    let mut nodes: BTreeMap<i32, (Vec<Bdf>, Vec<Bdf>)> = BTreeMap::new();
    for f in pci.values() {
        let Some(node) = numa_of(f) else { continue };
        match Type::of(f) {
            Some(Type::CxNic) => nodes.entry(node).or_default().0.push(f.bdf),
            Some(Type::Gpu) => nodes.entry(node).or_default().1.push(f.bdf),
            _ => {}
        }
    }
    nodes
        .into_iter()
        .map(|(node, (nics, gpus))| {
            if nics.is_empty() || gpus.is_empty() {
                let (has, lacks) = if nics.is_empty() {
                    (format!("GPUs {}", list(&gpus)), "ConnectX NICs")
                } else {
                    (format!("ConnectX NICs {}", list(&nics)), "GPUs")
                };
                Complex::Unrecognised {
                    subject: format!("NUMA node {node}"),
                    why: format!(
                        "{has} but no {lacks} (rdma_topo: \"No {} found in NUMA-based complex\")",
                        if nics.is_empty() { "CX NICs" } else { "GPUs" }
                    ),
                    segment: None,
                }
            } else {
                Complex::Numa(NumaComplex { node, nics, gpus })
            }
        })
        .collect()
}

fn list(b: &[Bdf]) -> String {
    b.iter().map(Bdf::to_string).collect::<Vec<_>>().join(", ")
}

/// Where NCCL's `dlopen` finds libmlx5 on the loader's path (`search`, the plugin's loader
/// search: src/inventory/nccl_plugin.rs), and whether it exports the Data Direct call.
pub fn libmlx5(root: &Root, search: &[(String, String)]) -> Libmlx5 {
    let found = LIBMLX5_NAMES
        .iter()
        .find_map(|name| super::nccl_plugin::resolve(root, name, search));
    let data_direct = found
        .as_ref()
        .and_then(|f| exports_data_direct(root, &f.real));
    Libmlx5 {
        found: found.map(|f| (f.path, f.real, f.via)),
        data_direct,
    }
}

/// Whether the library at `real` names [`DATA_DIRECT_SYMBOL`]: a growing prefix is read (a
/// capture keeps what was read), up to [`SYMBOL_SCAN_MAX`].
pub fn exports_data_direct(root: &Root, real: &str) -> Option<bool> {
    let needle = DATA_DIRECT_SYMBOL.as_bytes();
    let mut n: u64 = 256 << 10;
    loop {
        let bytes = root.read_prefix(real, n).ok()?;
        if bytes.windows(needle.len()).any(|w| w == needle) {
            return Some(true);
        }
        if (bytes.len() as u64) < n || n >= SYMBOL_SCAN_MAX {
            return Some(false);
        }
        n *= 4;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::inventory::Inventory;

    fn inventory(name: &str) -> Inventory {
        let root = Root::captured(&crate::test_fixtures::fixture_path(name)).unwrap();
        Inventory::load(&root, &Config::default())
    }

    fn bdf(s: &str) -> Bdf {
        Bdf::parse(s).unwrap()
    }

    #[test]
    fn gb300_is_dma_based_with_a_complex_per_gpu() {
        let inv = inventory("gb300-tray");
        let g = inv.grace.as_ref().unwrap();
        assert_eq!(g.kind, Kind::DmaBased);
        let dma: Vec<&DmaComplex> = g
            .complexes
            .iter()
            .filter_map(|c| match c {
                Complex::Dma(d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(dma.len(), 4, "{:?}", g.complexes);
        let d = dma[0];
        assert_eq!(
            (
                d.dma,
                d.gpu,
                d.root_port,
                d.upstream,
                d.toward_dma,
                d.toward_gpu
            ),
            (
                bdf("0008:03:00.0"),
                bdf("0008:06:00.0"),
                bdf("0008:00:00.0"),
                bdf("0008:01:00.0"),
                bdf("0008:02:00.0"),
                bdf("0008:02:01.0")
            )
        );
        // Paired by VPD V3, crossed as NVIDIA's sample pairs them.
        match &d.nic {
            Pairing::Vpd { pfs, .. } => assert_eq!(pfs, &[bdf("0002:03:00.0")]),
            other => panic!("{other:?}"),
        }
        let roles: Vec<Role> = [
            "0008:00:00.0",
            "0008:02:00.0",
            "0008:02:01.0",
            "0008:05:00.0",
        ]
        .iter()
        .map(|b| g.port(bdf(b)).unwrap().role)
        .collect();
        let (dma, gpu) = (d.dma, d.gpu);
        assert_eq!(
            roles,
            [
                Role::DmaRootPort { dma, gpu },
                Role::TowardDma { dma, gpu },
                Role::TowardGpu { dma, gpu },
                Role::Other
            ]
        );
        // The details of every function rdma_topo looks at were read, the DMA function's too.
        assert!(inv.function(d.dma).unwrap().detail.is_some());
        let lib = g.libmlx5.as_ref().unwrap();
        assert_eq!(lib.data_direct, Some(true));
        assert!(
            lib.found
                .as_ref()
                .unwrap()
                .1
                .ends_with("libmlx5.so.1.25.54.0")
        );
    }

    #[test]
    fn gb200_is_numa_based_with_a_complex_per_grace() {
        let inv = inventory("gb200-tray");
        let g = inv.grace.as_ref().unwrap();
        assert_eq!(g.kind, Kind::NumaBased);
        assert!(g.signature.value.contains("right below Grace root port"));
        assert_eq!(
            g.complexes,
            [
                Complex::Numa(NumaComplex {
                    node: 0,
                    nics: vec![bdf("0000:03:00.0"), bdf("0002:03:00.0")],
                    gpus: vec![bdf("0008:01:00.0"), bdf("0009:01:00.0")],
                }),
                Complex::Numa(NumaComplex {
                    node: 1,
                    nics: vec![bdf("0010:03:00.0"), bdf("0012:03:00.0")],
                    gpus: vec![bdf("0018:01:00.0"), bdf("0019:01:00.0")],
                }),
            ]
        );
        assert!(g.ports.iter().all(|p| p.role == Role::Other));
        assert!(g.libmlx5.is_none());
    }

    #[test]
    fn other_nodes_are_not_modelled() {
        for name in ["healthy-8gpu-roce", "aws-p6-b200", "placement-phb"] {
            assert!(inventory(name).grace.is_none(), "{name}");
        }
    }
}
