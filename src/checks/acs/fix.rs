//! The fix of a Grace or Vera port whose ACS is not rdma_topo's: the kernel parameter rdma-core's
//! `kernel-boot/rdma_topo write-grub-acs` writes, `pci=config_acs="<flags>@<DDDD:BB:DD.F>;..."`
//! in the GRUB drop-in `/etc/default/grub.d/config-acs.cfg` (the entries that differ from the
//! kernel's default, by address), applied by the kernel at enumeration so that the IOMMU groups
//! form from it. Never ACS cleared: that undoes NVIDIA's isolation. A run-time `setpci`, as
//! rdma_topo's `setpci-acs` computes it (the value read with the required bits forced), is shown
//! as a by-hand alternative only, with rdma_topo's warning.
//!
//! The kernel's side (Documentation/admin-guide/kernel-parameters.txt, `config_acs=`): the
//! parameter came with Linux 6.11 (47c8846a49ba "PCI: Extend ACS configurability"); a list of
//! more than one entry parses only with 9cf8a952d57b "PCI/ACS: Fix 'pci=config_acs=' parameter"
//! (Linux 6.15, backported to the 6.12, 6.13 and 6.14 stable series), without which the kernel
//! logs "PCI: Can't parse ACS command line parameter". NVIDIA's Grace Blackwell ConnectX-8
//! GPUDirect RDMA guide asks for its 6.14-nvidia kernel or newer.

use super::grace::{Failing, expected};
use crate::inventory::Inventory;
use crate::inventory::grace::{Grace, Role};
use crate::model::Fix;
use crate::parse::kernel::KernelVersion;

const DROP_IN: &str = "/etc/default/grub.d/config-acs.cfg";
/// What gdrdoctor's ACS fix of before issue 38 installed: it clears ACS on every bridge it
/// names at each boot, which on a Grace system undoes what NVIDIA requires.
const OLD_UNIT: &str = "/etc/systemd/system/gdrdoctor-acs.service";

/// Whether the running kernel takes the `config_acs` list.
pub(super) enum Support {
    Unknown,
    TooOld(KernelVersion),
    /// 6.11 to 6.14 with a list of more than one entry: only with the fix backported.
    NeedsBackport(KernelVersion),
    Supported(KernelVersion),
}

pub(super) fn support(inv: &Inventory, entries: usize) -> Support {
    support_of(
        inv.kernel.version,
        inv.kernel.release.value().map(String::as_str),
        entries,
    )
}

fn support_of(version: Option<KernelVersion>, release: Option<&str>, entries: usize) -> Support {
    let Some(v) = version else {
        return Support::Unknown;
    };
    // NVIDIA's guide names its 6.14-nvidia kernels (Ubuntu's linux-nvidia-64k-6.14) as the ones
    // with what Data Direct needs.
    let nvidia = release.is_some_and(|r| r.contains("-nvidia"));
    if v < KernelVersion(6, 11, 0) {
        Support::TooOld(v)
    } else if v >= KernelVersion(6, 15, 0)
        || entries <= 1
        || (nvidia && v >= KernelVersion(6, 14, 0))
    {
        Support::Supported(v)
    } else {
        Support::NeedsBackport(v)
    }
}

impl Support {
    /// Why a port does not hold what the kernel command line asks of it.
    pub(super) fn why_not_applied(&self) -> String {
        match self {
            Support::TooOld(v) => {
                format!("kernel {v} predates pci=config_acs (Linux 6.11) and ignored it")
            }
            Support::NeedsBackport(v) => format!(
                "kernel {v} may lack 9cf8a952d57b, without which a list of more than one entry fails to parse (\"PCI: Can't parse ACS command line parameter\") and none is applied"
            ),
            Support::Supported(_) | Support::Unknown => "something changed it after boot (setpci), or the kernel refused the entry (dmesg | grep -i acs)".to_owned(),
        }
    }

    /// The kernel's part, for the fix's summary.
    fn said(&self) -> String {
        match self {
            Support::Supported(v) => format!("kernel {v} takes it"),
            Support::TooOld(v) => {
                format!("kernel {v} is too old for it: install 6.14-nvidia or newer first")
            }
            Support::NeedsBackport(v) => format!(
                "kernel {v} takes a list of more than one entry only with 9cf8a952d57b backported"
            ),
            Support::Unknown => "the kernel's version is not known".to_owned(),
        }
    }

    /// The by-hand line before the commands, where the kernel may not take the list.
    fn manual(&self) -> Option<String> {
        match self {
            Support::Supported(_) => None,
            Support::TooOld(v) => Some(format!("# kernel {v} predates pci=config_acs (Linux 6.11): install a newer kernel first (NVIDIA's Grace Blackwell guide: apt install linux-nvidia-64k-6.14, or later)")),
            Support::NeedsBackport(v) => Some(format!("# kernel {v}: a config_acs list of more than one entry needs 9cf8a952d57b (Linux 6.15; backported to 6.12, 6.13 and 6.14 stable): make sure this kernel carries it, or install linux-nvidia-64k-6.14 or a 6.15+ kernel")),
            Support::Unknown => Some("# the kernel's version is not known: pci=config_acs needs Linux 6.11, and a list of more than one entry 6.15 or a stable kernel carrying 9cf8a952d57b".to_owned()),
        }
    }
}

/// The kernel parameter's value rdma_topo write-grub-acs computes: every port whose value
/// differs from the kernel's default, by address (`g.ports` is sorted).
pub(super) fn entries(g: &Grace) -> Vec<String> {
    g.ports
        .iter()
        .filter(|p| p.role != Role::Other)
        .map(|p| format!("{}@{}", expected(p).0, p.bdf))
        .collect()
}

/// The drop-in as rdma_topo write-grub-acs writes it: its comment, then GRUB_CMDLINE_LINUX in
/// double quotes, so that GRUB's shell keeps `$GRUB_CMDLINE_LINUX` and the escaped quotes
/// around the list (`;` must not reach GRUB's parser bare).
fn drop_in(value: &str) -> crate::model::edit::Edit {
    crate::model::edit::Edit::Write {
        file: DROP_IN.into(),
        lines: vec![
            "# Written by gdrdoctor as rdma-core rdma_topo write-grub-acs writes it: ACS settings for RDMA GPU Direct".into(),
            format!("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX pci=config_acs=\\\"{value}\\\"\""),
        ],
    }
}

/// One fix for every port (and IOMMU group) of the node that is not as rdma_topo requires: each
/// finding carries the same commands, which the fix script runs once.
pub(super) fn config_acs(inv: &Inventory, g: &Grace) -> Fix {
    let entries = entries(g);
    let value = entries.join(";");
    let support = support(inv, entries.len());
    let (summary, safety) = if entries.is_empty() {
        (
            "Reboot: at boot the kernel gives every port its default ACS, which is what rdma_topo wants on a NUMA-based system (its write-grub-acs has no entry to add); first remove what clears it (gdrdoctor's earlier gdrdoctor-acs.service)".to_owned(),
            "Restores ACS isolation on the Grace ports; the IOMMU groups form again at the reboot.",
        )
    } else {
        (
            format!(
                "Boot with rdma_topo's ACS: pci=config_acs=\"{value}\" ({} entr{}) in {DROP_IN}, as rdma_topo write-grub-acs writes it (rdma_topo itself where installed), then regenerate GRUB and reboot; Linux 6.11+ takes config_acs, a list of more than one entry 6.15+ or a stable kernel with 9cf8a952d57b (NVIDIA: 6.14-nvidia or newer): {}",
                entries.len(),
                if entries.len() == 1 { "y" } else { "ies" },
                support.said()
            ),
            "Sets ACS as NVIDIA's Data Direct platform requires: each DMA-based complex's segment becomes one IOMMU group, and peer-to-peer from the DMA function to its GPU bypasses the root port. Takes effect at the reboot; a kernel that cannot parse the list leaves the kernel's default.",
        )
    };
    let mut fix = Fix::new(summary, safety);
    if let Some(m) = support.manual() {
        fix = fix.manual(m);
    }
    fix = fix.guarded(
        crate::model::FixClass::Persistent,
        format!("systemctl disable gdrdoctor-acs.service && rm -f {OLD_UNIT}"),
        format!("[ ! -e {OLD_UNIT} ]"),
    );
    if entries.is_empty() {
        fix = fix.disruptive("systemctl reboot");
    } else {
        fix = fix.edit(drop_in(&value));
        fix = crate::checks::grub_regenerate(fix)
            .or("rdma-core's own tool, which writes the same drop-in", |f| {
                f.by_hand("rdma_topo write-grub-acs")
            })
            .or(
                "no /etc/default/grub.d (not a Debian-style GRUB): the boot loader's tool",
                |f| {
                    f.by_hand(format!(
                        "grubby --update-kernel=ALL --args='pci=config_acs={value}'"
                    ))
                },
            );
    }
    fix.manual(
        "dmesg | grep -i -e 'Configured ACS' -e 'ACS command line' -e 'Invalid ACS'   # after the reboot: one 'Configured ACS to 0x....' per entry",
    )
}

/// The fix of one port: the node's, and the run-time alternative for this port alone, as
/// rdma_topo's `setpci-acs` computes it (the value read with the required bits forced), with
/// rdma_topo's warning. By hand only: it never runs from the fix script.
pub(super) fn with_setpci(fix: Fix, f: &Failing) -> Fix {
    fix.manual("# by hand, instead, only on a kernel without config_acs (rdma_topo setpci-acs, \"not recommended\"): the kernel must boot with ACS enabled and the GPU driver needs NVreg_GrdmaPciTopoCheckOverride=1, with which unprivileged userspace can trigger platform RAS failures; the IOMMU groups formed at boot do not change; lost at reboot")
        .manual(format!(
            "setpci -r -s {} ECAP_ACS+0x6.w={:04x}",
            crate::checks::sh(&f.bdf.to_string()),
            f.want.apply(f.control)
        ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_that_take_the_list() {
        let v = |a, b| Some(KernelVersion(a, b, 0));
        assert!(matches!(support_of(v(6, 8), None, 12), Support::TooOld(_)));
        assert!(matches!(support_of(v(6, 10), None, 1), Support::TooOld(_)));
        // One entry parses from 6.11; more need 9cf8a952d57b (6.15, or a stable backport).
        assert!(matches!(
            support_of(v(6, 11), None, 1),
            Support::Supported(_)
        ));
        assert!(matches!(
            support_of(v(6, 13), Some("6.13.0-21-generic"), 12),
            Support::NeedsBackport(_)
        ));
        assert!(matches!(
            support_of(v(6, 14), Some("6.14.0-1008-nvidia-64k"), 12),
            Support::Supported(_)
        ));
        assert!(matches!(
            support_of(v(6, 15), None, 12),
            Support::Supported(_)
        ));
        assert!(matches!(support_of(None, None, 12), Support::Unknown));
        assert!(
            support_of(v(6, 13), None, 3)
                .why_not_applied()
                .contains("Can't parse ACS command line parameter")
        );
    }

    /// The drop-in written to a scratch file: the file holds rdma_topo's line,
    /// which GRUB's shell then expands to the command line words with the list in quotes.
    #[test]
    fn drop_in_is_what_rdma_topo_writes() {
        let dir = tempfile::tempdir().unwrap();
        let value = "xx111x0@0008:00:00.0;xx110x1@0008:02:00.0;xx101x1@0008:02:01.0";
        let crate::model::edit::Edit::Write { file, lines } = drop_in(value) else {
            panic!("the drop-in is a whole file");
        };
        assert_eq!(file, DROP_IN);
        let file = dir.path().join("config-acs.cfg");
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        #[allow(clippy::disallowed_methods)] // a scratch file, not a node
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some(
                r#"GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX pci=config_acs=\"xx111x0@0008:00:00.0;xx110x1@0008:02:00.0;xx101x1@0008:02:01.0\"""#
            )
        );
        // As grub-mkconfig sources it.
        let out = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "GRUB_CMDLINE_LINUX=quiet; . {}; printf '%s' \"$GRUB_CMDLINE_LINUX\"",
                file.display()
            ))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("quiet pci=config_acs=\"{value}\"")
        );
    }
}
