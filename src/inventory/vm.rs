//! Virtual PCI: a VM whose GPUs and NICs the hypervisor presents without the switches that
//! pair them on the host. Seen from inside, every GPU-NIC pair meets at a host bridge or the
//! CPU, whatever the hardware does; only a topology file from the provider (or a passthrough
//! layout that mirrors the host's switches) tells NCCL the real pairing (issues 16, 29).
//!
//! The shapes, from what such guests show in sysfs:
//! - Hyper-V vPCI (Azure): every device is its own PCI domain under a VMBus device,
//!   `/sys/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/<guid>/pci0001:00/
//!   0001:00:00.0` (Linux drivers/pci/controller/pci-hyperv.c; paths as public Azure guest logs
//!   show them);
//! - QEMU's PCI expander bridges (`pxb-pcie`, 1b36:000b): extra root buses that stand for host
//!   NUMA nodes, not for switches;
//! - QEMU's PCIe root ports (`pcie-root-port`, 1b36:000c), one per passed-through device, as
//!   QEMU's docs/pcie.txt advises for a q35 guest: every pair meets at the guest's host bridge;
//! - a single flat root bus: every GPU and NIC on a host bridge with no bridge above it, which no
//!   physical server does (it has root ports at least; EC2's p4d shows it so);
//! - a guest by its other signals only: DMI strings a hypervisor writes (`QEMU`, `KVM`,
//!   `Amazon EC2`, ...) or the `hypervisor` CPU flag, whatever its PCI tree looks like.
//!
//! Every signal found is kept as evidence, so a finding can say why this is a VM.

use super::{Gpu, Kernel, PciFunction, RdmaDevice};
use crate::model::Evidence;
use crate::parse::pci::{Bdf, path_functions};
use crate::root::Root;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    HyperV,
    QemuExpander,
    QemuRootPorts,
    FlatRootBus,
    /// No PCI shape of its own: the DMI strings or the CPU flag say guest.
    Guest,
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
            Shape::QemuRootPorts => {
                "every GPU and NIC sits behind its own QEMU PCIe root port (1b36:000c), so every pair meets only at the guest's host bridge"
            }
            Shape::FlatRootBus => {
                "every GPU and NIC sits directly on a host bridge, with no bridge above it, as only a virtual machine shows them"
            }
            Shape::Guest => {
                "a virtual machine: the guest's PCI tree is the one the hypervisor built, not the host's"
            }
        }
    }
}

/// A provider's topology file for a VM size: where its image puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderFile {
    /// `Azure ND A100 v4`, `EC2 p4d.24xlarge`.
    pub size: String,
    /// Where the image (or the plugin) puts it.
    pub path: String,
    /// Where the file comes from.
    pub source: String,
    /// Who makes NCCL read it.
    pub naming: Naming,
    /// It is on this node.
    pub present: bool,
}

/// How a provider's topology file reaches NCCL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// The image's `/etc/nccl.conf` names it (`NCCL_TOPO_FILE`).
    NcclConf,
    /// The network plugin sets `NCCL_TOPO_FILE` to it itself, when the file is there and
    /// `NCCL_TOPO_FILE` is unset (aws-ofi-nccl's platform table, src/platform-aws.cpp).
    Plugin,
}

#[derive(Debug, Clone)]
pub struct Virtual {
    pub shape: Shape,
    /// The PCI functions that show its shape.
    pub evidence: Vec<Evidence>,
    /// The DMI strings and the CPU flag that say guest.
    pub signals: Vec<Evidence>,
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

/// DMI strings a hypervisor writes for its guests: (attribute, text it contains, what it says).
/// QEMU's SMBIOS defaults (hw/smbios: manufacturer "QEMU", machine "Standard PC (Q35 + ICH9,
/// 2009)" / "Standard PC (i440FX + PIIX, 1996)"), libvirt/RHEL's "KVM", EC2's "Amazon EC2"
/// (Nitro guests; `.metal` sizes are bare metal), Hyper-V's "Virtual Machine", GCE, OpenStack,
/// VMware, Xen.
const DMI_GUESTS: &[(&str, &str, &str)] = &[
    ("sys_vendor", "QEMU", "QEMU's SMBIOS"),
    ("product_name", "Standard PC (", "a QEMU machine type"),
    ("product_name", "KVM", "KVM"),
    (
        "sys_vendor",
        "Amazon EC2",
        "an EC2 instance (a Nitro guest)",
    ),
    ("product_name", "Virtual Machine", "Hyper-V"),
    (
        "product_name",
        "Google Compute Engine",
        "Google Compute Engine",
    ),
    ("product_name", "OpenStack Nova", "OpenStack Nova"),
    ("sys_vendor", "VMware", "VMware"),
    ("product_name", "HVM domU", "Xen"),
];

/// QEMU's PCIe root port, `-device pcie-root-port` (hw/pci-bridge/gen_pcie_root_port.c:
/// PCI_VENDOR_ID_REDHAT 0x1b36, PCI_DEVICE_ID_REDHAT_PCIE_RP 0x000c).
const QEMU_ROOT_PORT: (u16, u16) = (0x1b36, 0x000c);
/// QEMU's PCIe expander bridge, `pxb-pcie` (PCI_DEVICE_ID_REDHAT_PXB_PCIE 0x000b).
const QEMU_EXPANDER: (u16, u16) = (0x1b36, 0x000b);

/// The DMI strings and the CPU flag that say this is a guest, as evidence.
fn guest_signals(kernel: &Kernel) -> Vec<Evidence> {
    let mut out = Vec::new();
    let metal = kernel
        .product_name
        .as_deref()
        .is_some_and(|p| p.ends_with(".metal") || p.contains(".metal-"));
    for (attr, needle, what) in DMI_GUESTS {
        let value = match *attr {
            "sys_vendor" => kernel.sys_vendor.as_deref(),
            _ => kernel.product_name.as_deref(),
        };
        if let Some(v) = value.filter(|v| v.contains(needle)) {
            if metal && *needle == "Amazon EC2" {
                continue;
            }
            out.push(Evidence {
                path: format!("/sys/class/dmi/id/{attr}"),
                value: format!("{v} ({what})"),
            });
        }
    }
    if kernel.hypervisor_flag.value() == Some(&true) {
        out.push(kernel.hypervisor_flag.evidence());
    }
    out
}

/// The PCI shape of a VM, and the functions that show it.
fn shape(
    pci: &BTreeMap<Bdf, PciFunction>,
    endpoints: &[&PciFunction],
) -> Option<(Shape, Vec<Evidence>)> {
    let id = |f: &PciFunction| (f.vendor, f.device);
    let shown = |f: &PciFunction, what: &str| Evidence {
        path: f.path.clone(),
        value: format!("{} ({what})", f.ids()),
    };
    if endpoints
        .iter()
        .any(|f| f.path.split('/').any(|c| c.starts_with("VMBUS:")))
    {
        return Some((Shape::HyperV, Vec::new()));
    }
    if let Some(f) = pci.values().find(|f| id(f) == QEMU_EXPANDER) {
        return Some((
            Shape::QemuExpander,
            vec![shown(f, "QEMU PCIe expander bridge")],
        ));
    }
    // The bridge right above each endpoint: a QEMU root port above every one of them.
    let parents: Vec<Option<&PciFunction>> = endpoints
        .iter()
        .map(|f| {
            let path = path_functions(&f.path);
            path.len()
                .checked_sub(2)
                .and_then(|i| path.get(i))
                .and_then(|b| pci.get(b))
        })
        .collect();
    if parents
        .iter()
        .all(|p| p.is_some_and(|p| id(p) == QEMU_ROOT_PORT))
    {
        let ev = parents
            .iter()
            .flatten()
            .take(1)
            .map(|p| shown(p, "QEMU PCIe root port, one per device"))
            .collect();
        return Some((Shape::QemuRootPorts, ev));
    }
    if endpoints.iter().all(|f| path_functions(&f.path).len() == 1) {
        return Some((Shape::FlatRootBus, Vec::new()));
    }
    None
}

/// Whether the node is a VM (its GPUs and NICs virtual PCI), how, and why.
pub fn detect(
    root: &Root,
    pci: &BTreeMap<Bdf, PciFunction>,
    gpus: &[Gpu],
    rdma: &[RdmaDevice],
    kernel: &Kernel,
    nccl: &super::nccl::Nccl,
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
    let guest = guest_signals(kernel);
    let (shape, mut evidence) = match shape(pci, &endpoints) {
        Some(s) => s,
        None if !guest.is_empty() => (Shape::Guest, Vec::new()),
        None => return None,
    };
    if matches!(
        shape,
        Shape::HyperV | Shape::FlatRootBus | Shape::QemuExpander
    ) {
        evidence.extend(endpoints.iter().take(2).map(|f| Evidence {
            path: f.path.clone(),
            value: format!("{} ({})", f.ids(), crate::parse::pci::class_name(f.class)),
        }));
    }
    let provider = azure(root, pci, gpus, kernel, shape).or_else(|| aws(root, nccl));
    Some(Virtual {
        shape,
        evidence,
        signals: guest,
        provider,
    })
}

/// Azure's topology file for this VM's GPUs, on a Hyper-V guest.
fn azure(
    root: &Root,
    pci: &BTreeMap<Bdf, PciFunction>,
    gpus: &[Gpu],
    kernel: &Kernel,
    shape: Shape,
) -> Option<ProviderFile> {
    let product = kernel.product.as_deref();
    let azure = shape == Shape::HyperV
        || product
            .is_some_and(|p| p.contains("Microsoft Corporation") && p.contains("Virtual Machine"));
    if !azure {
        return None;
    }
    let (_, size, path, source) = AZURE.iter().find(|(ids, ..)| {
        gpus.iter().any(|g| {
            pci.get(&g.bdf)
                .is_some_and(|f| f.vendor == 0x10de && ids.contains(&f.device))
        })
    })?;
    Some(ProviderFile {
        size: (*size).to_owned(),
        path: (*path).to_owned(),
        source: (*source).to_owned(),
        naming: Naming::NcclConf,
        present: root.exists(path),
    })
}

/// aws-ofi-nccl's topology file for this EC2 instance type: beside the plugin NCCL loads, or
/// where the EFA installer puts it.
fn aws(root: &Root, nccl: &super::nccl::Nccl) -> Option<ProviderFile> {
    let t = nccl.plugin.aws_topology()?;
    Some(ProviderFile {
        size: format!("EC2 {}", t.platform),
        present: root.exists(&t.path),
        path: t.path,
        source: t.source,
        naming: Naming::Plugin,
    })
}
