//! Virtual PCI: a VM whose GPUs and NICs the hypervisor presents without the switches that
//! pair them on the host. Seen from inside, every GPU-NIC pair meets at a host bridge or the
//! CPU, whatever the hardware does; only a topology file from the provider tells NCCL the real
//! pairing (issue 16).
//!
//! Three shapes, from what such guests show in sysfs:
//! - Hyper-V vPCI (Azure): every device is its own PCI domain under a VMBus device,
//!   `/sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/<guid>/pci0001:00/
//!   0001:00:00.0` (Linux drivers/pci/controller/pci-hyperv.c; paths as public Azure guest logs
//!   show them);
//! - QEMU's PCI expander bridges (`pxb-pcie`, 1b36:000b): extra root buses that stand for host
//!   NUMA nodes, not for switches;
//! - a single flat root bus: every GPU and NIC on a host bridge with no bridge above it, which no
//!   physical server does (it has root ports at least).

use super::{Gpu, PciFunction, RdmaDevice};
use crate::model::Evidence;
use crate::parse::pci::{Bdf, path_functions};
use crate::root::Root;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    HyperV,
    QemuExpander,
    FlatRootBus,
}

impl Shape {
    pub fn describe(self) -> &'static str {
        match self {
            Shape::HyperV => {
                "Hyper-V virtual PCI: every GPU and NIC is its own PCI domain, with no bridge between them"
            }
            Shape::QemuExpander => {
                "QEMU PCI expander bridges: root buses that stand for host NUMA nodes, not for the host's switches"
            }
            Shape::FlatRootBus => {
                "every GPU and NIC sits directly on a host bridge, with no bridge above it, as only a virtual machine shows them"
            }
        }
    }
}

/// A provider's topology file for a VM size: where its image puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFile {
    /// `Azure ND A100 v4`.
    pub size: &'static str,
    /// The path the image's `/etc/nccl.conf` names.
    pub path: &'static str,
    /// Where the file comes from.
    pub source: &'static str,
    /// It is on this node.
    pub present: bool,
}

#[derive(Debug, Clone)]
pub struct Virtual {
    pub shape: Shape,
    /// The paths that show it.
    pub evidence: Vec<Evidence>,
    /// The provider's topology file for this VM, when one is known.
    pub provider: Option<ProviderFile>,
}

/// Azure's sizes, by GPU (azhpc-images components/customizations/ndv4.sh, ndv5.sh, ncv4.sh:
/// each links its file under /opt/microsoft/<size>/topo.xml and names that in /etc/nccl.conf).
const AZURE: &[(&[u16], &str, &str, &str)] = &[
    (
        &[0x20b0, 0x20b2],
        "Azure ND A100 v4",
        "/opt/microsoft/ndv4/topo.xml",
        "azhpc-images topology/ndv4-topo.xml",
    ),
    (
        &[0x2330, 0x2335],
        "Azure ND H100 v5 / ND H200 v5",
        "/opt/microsoft/ndv5/topo.xml",
        "azhpc-images topology/ndv5-topo.xml",
    ),
    (
        &[0x20b5],
        "Azure NC A100 v4",
        "/opt/microsoft/ncv4/topo.xml",
        "azhpc-images topology/ncv4-topo.xml",
    ),
];

/// Whether the node's GPUs and NICs are virtual PCI, and how.
pub fn detect(
    root: &Root,
    pci: &BTreeMap<Bdf, PciFunction>,
    gpus: &[Gpu],
    rdma: &[RdmaDevice],
    product: Option<&str>,
) -> Option<Virtual> {
    let endpoints: Vec<&PciFunction> = gpus
        .iter()
        .map(|g| g.bdf)
        .chain(rdma.iter().filter_map(|d| d.pci))
        .filter_map(|b| pci.get(&b))
        .collect();
    if endpoints.is_empty() {
        return None;
    }
    let shape = if endpoints
        .iter()
        .any(|f| f.path.split('/').any(|c| c.starts_with("VMBUS:")))
    {
        Shape::HyperV
    } else if pci
        .values()
        .any(|f| f.vendor == 0x1b36 && f.device == 0x000b)
    {
        Shape::QemuExpander
    } else if endpoints.iter().all(|f| path_functions(&f.path).len() == 1) {
        Shape::FlatRootBus
    } else {
        return None;
    };
    let mut evidence: Vec<Evidence> = endpoints
        .iter()
        .take(2)
        .map(|f| Evidence {
            path: f.path.clone(),
            value: format!("{} ({})", f.ids(), crate::parse::pci::class_name(f.class)),
        })
        .collect();
    if shape == Shape::QemuExpander {
        if let Some(f) = pci
            .values()
            .find(|f| f.vendor == 0x1b36 && f.device == 0x000b)
        {
            // First: the finding that cites one piece of evidence cites what shows the shape.
            evidence.insert(
                0,
                Evidence {
                    path: f.path.clone(),
                    value: "1b36:000b (QEMU PCIe expander bridge)".into(),
                },
            );
        }
    }
    let azure = shape == Shape::HyperV
        || product
            .is_some_and(|p| p.contains("Microsoft Corporation") && p.contains("Virtual Machine"));
    let provider = azure
        .then(|| {
            AZURE.iter().find(|(ids, ..)| {
                gpus.iter().any(|g| {
                    pci.get(&g.bdf)
                        .is_some_and(|f| f.vendor == 0x10de && ids.contains(&f.device))
                })
            })
        })
        .flatten()
        .map(|(_, size, path, source)| ProviderFile {
            size,
            path,
            source,
            present: root.exists(path),
        });
    Some(Virtual {
        shape,
        evidence,
        provider,
    })
}
