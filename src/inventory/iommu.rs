//! IOMMU hardware units and the group type of every device a check looks at.

use super::{Fact, PciFunction};
use crate::parse::pci::Bdf;
use crate::root::Root;
use std::collections::BTreeMap;

pub const CLASS_IOMMU: &str = "/sys/class/iommu";
pub const GROUPS: &str = "/sys/kernel/iommu_groups";

#[derive(Debug)]
pub struct Iommu {
    /// `dmar0` (Intel VT-d), `ivhd0` (AMD-Vi), `smmu3.0x...` (Arm SMMUv3), ...
    pub units: Vec<String>,
    pub units_error: Option<crate::root::ReadError>,
    /// Group number -> `/sys/kernel/iommu_groups/<n>/type`, for the groups of detailed devices.
    pub groups: BTreeMap<u32, Fact<String>>,
}

impl Iommu {
    pub fn load(root: &Root, pci: &BTreeMap<Bdf, PciFunction>) -> Iommu {
        let (units, units_error) = match root.read_dir(CLASS_IOMMU) {
            Ok(l) => (l.names, None),
            // Absent on a node without IOMMU support; but a root without /sys/class at all is a
            // capture that left sysfs out, and says nothing.
            Err(e) if e.is_not_found() && root.is_dir("/sys/class") => (Vec::new(), None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let mut groups = BTreeMap::new();
        for f in pci.values() {
            if let Some(g) = f.detail.as_ref().and_then(|d| d.iommu_group) {
                groups.entry(g).or_insert_with(|| {
                    // kernel: drivers/iommu/iommu.c iommu_group_show_type()
                    Fact::read(root, format!("{GROUPS}/{g}/type"), |s| {
                        ["identity", "DMA", "DMA-FQ", "blocked", "unmanaged", "auto"]
                            .contains(&s)
                            .then(|| s.to_owned())
                    })
                });
            }
        }
        Iommu {
            units,
            units_error,
            groups,
        }
    }

    /// The vendor of the IOMMU hardware, from its unit names.
    pub fn platform(&self) -> Option<&'static str> {
        let first = self.units.first()?;
        Some(if first.starts_with("dmar") {
            "intel"
        } else if first.starts_with("ivhd") {
            "amd"
        } else if first.starts_with("smmu") || first.contains("smmu") {
            "arm-smmu"
        } else {
            "other"
        })
    }
}
