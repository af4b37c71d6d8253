//! `acs` on Grace systems as rdma-core's rdma_topo models them (issue 38), on copies of the
//! GB200 and GB300 fixtures with one thing changed: NCCL told not to use Data Direct, a libmlx5
//! without the call NCCL needs, VPD gone, IOMMU groups shared or missing, ATS on a ConnectX, a
//! segment of another shape, config space only root reads, the command line asking for
//! rdma_topo's ACS on kernels that cannot apply it, a Vera root port. And the non-Grace rule
//! untouched where a Grace port's expected ACS would look like a redirect.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;

const GB300_TO_DMA: &str = "sys/devices/pci0008:00/0008:00:00.0/0008:01:00.0/0008:02:00.0";
const GB300_GPU: &str = "sys/devices/pci0008:00/0008:00:00.0/0008:01:00.0/0008:02:01.0/0008:04:00.0/0008:05:00.0/0008:06:00.0";
const GB200_RP: &str = "sys/devices/pci0008:00/0008:00:00.0";
const GB200_NIC: &str =
    "sys/devices/pci0000:00/0000:00:00.0/0000:01:00.0/0000:02:00.0/0000:03:00.0";

/// The acs check's findings and status, from a JSON report of the copy.
fn acs(n: &NodeCopy) -> (String, Vec<serde_json::Value>) {
    let (_, report) = n.check(&[], &[]);
    let c = check(&report, "acs");
    (
        c["status"].as_str().unwrap().to_owned(),
        c["findings"].as_array().unwrap().clone(),
    )
}

fn with<'a>(findings: &'a [serde_json::Value], code: &str) -> Vec<&'a serde_json::Value> {
    findings.iter().filter(|f| f["code"] == code).collect()
}

fn only<'a>(findings: &'a [serde_json::Value], code: &str) -> &'a serde_json::Value {
    let all = with(findings, code);
    assert_eq!(all.len(), 1, "{code}: {findings:#?}");
    all[0]
}

/// The copy's config space of `dir`, patched.
/// The function's config space edited, and, as on a real node (the kernel reads the IDs once,
/// at enumeration), the `uevent`, `vendor` and `device` it shows beside it.
fn patch_config(n: &NodeCopy, dir: &str, edit: impl FnOnce(&mut Vec<u8>)) {
    let path = n.root.join(dir).join("config");
    let mut bytes = std::fs::read(&path).unwrap();
    edit(&mut bytes);
    let id = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let (vendor, device) = (id(0), id(2));
    let uevent = std::fs::read_to_string(n.root.join(dir).join("uevent")).unwrap();
    let uevent: String = uevent
        .lines()
        .map(|l| match l.starts_with("PCI_ID=") {
            true => format!("PCI_ID={vendor:04X}:{device:04X}\n"),
            false => format!("{l}\n"),
        })
        .collect();
    n.write(&format!("{dir}/uevent"), uevent.into_bytes());
    n.write(
        &format!("{dir}/vendor"),
        format!("0x{vendor:04x}\n").into_bytes(),
    );
    n.write(
        &format!("{dir}/device"),
        format!("0x{device:04x}\n").into_bytes(),
    );
    n.write(&format!("{dir}/config"), bytes);
}

/// `iommu_group` of `dir` pointing at group `g`.
fn set_group(n: &NodeCopy, dir: &str, g: u32) {
    let link = n.root.join(dir).join("iommu_group");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(n.root.join(format!("sys/kernel/iommu_groups/{g}")), link).unwrap();
}

fn group_of(n: &NodeCopy, dir: &str) -> u32 {
    let target = std::fs::read_link(n.root.join(dir).join("iommu_group")).unwrap();
    target
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn nccl_told_not_to_use_data_direct_reaches_the_nics_over_c2c() {
    let n = NodeCopy::of("gb300-tray");
    n.write("etc/nccl.conf", "NCCL_IB_DATA_DIRECT=0\n");
    let (status, f) = acs(&n);
    assert_eq!(status, "warn");
    let off = only(&f, "data-direct-off");
    assert_eq!(off["status"], "warn");
    let text = off.to_string();
    assert!(text.contains("NVLink-C2C"), "{text}");
    assert!(
        text.contains("gdrdoctor edit unset /etc/nccl.conf NCCL_IB_DATA_DIRECT"),
        "{text}"
    );
    for d in with(&f, "data-direct-found") {
        assert!(d["message"].as_str().unwrap().contains("will not use it"));
    }
}

#[test]
fn libmlx5_without_the_data_direct_call() {
    let n = NodeCopy::of("gb300-tray");
    // rdma-core 50's: MLX5_1.24, no mlx5dv_get_data_direct_sysfs_path.
    let mut lib = b"\x7fELF\x02\x01\x01".to_vec();
    lib.extend([0u8; 57]);
    lib.extend(b"mlx5dv_is_supported\0MLX5_1.24\0");
    n.write("usr/lib/aarch64-linux-gnu/libmlx5.so.1", lib);
    let (status, f) = acs(&n);
    assert_eq!(status, "warn");
    let w = only(&f, "data-direct-no-libmlx5").to_string();
    assert!(w.contains("lacks mlx5dv_get_data_direct_sysfs_path"), "{w}");
    assert!(w.contains("rdma-core 54"), "{w}");
    // No libmlx5 at all.
    n.remove("usr/lib/aarch64-linux-gnu/libmlx5.so.1");
    let (_, f) = acs(&n);
    let w = only(&f, "data-direct-no-libmlx5").to_string();
    assert!(w.contains("no libmlx5 on the loader's path"), "{w}");
}

#[test]
fn without_vpd_the_nic_is_one_of_its_numa_node() {
    let n = NodeCopy::of("gb300-tray");
    for dom in ["0008", "0009", "0018", "0019"] {
        n.remove(&format!(
            "sys/devices/pci{dom}:00/{dom}:00:00.0/{dom}:01:00.0/{dom}:02:00.0/{dom}:03:00.0/vpd"
        ));
    }
    let (status, f) = acs(&n);
    assert_eq!(status, "pass");
    let d = with(&f, "data-direct-found")[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        d.contains("one of the ConnectX NICs on NUMA node 0 (mlx5_0 (0000:03:00.0), mlx5_1 (0002:03:00.0)): which one is not known, it has no vpd file"),
        "{d}"
    );
}

#[test]
fn numa_node_devices_sharing_a_group_fail_with_a_reboot() {
    let n = NodeCopy::of("gb200-tray");
    let g = group_of(&n, "sys/devices/pci0008:00/0008:00:00.0/0008:01:00.0");
    set_group(&n, "sys/devices/pci0009:00/0009:00:00.0/0009:01:00.0", g);
    let (status, f) = acs(&n);
    assert_eq!(status, "fail");
    let shared = only(&f, "numa-iommu-group-shared");
    let text = shared.to_string();
    assert!(
        text.contains(&format!("0008:01:00.0 with 0009:01:00.0 (group {g})")),
        "{text}"
    );
    // NUMA-based: rdma_topo has no entry to add, so no drop-in: a reboot restores the default.
    let fix = shared["fix"].to_string();
    assert!(fix.contains("systemctl reboot"), "{fix}");
    assert!(!fix.contains("config-acs.cfg"), "{fix}");
    assert!(!fix.contains("=0000"), "{fix}");
}

#[test]
fn a_gpu_without_an_iommu_group_fails() {
    let n = NodeCopy::of("gb300-tray");
    n.remove(&format!("{GB300_GPU}/iommu_group"));
    let (status, f) = acs(&n);
    assert_eq!(status, "fail");
    let m = only(&f, "grace-iommu-group-missing").to_string();
    assert!(m.contains("no IOMMU group for 0008:06:00.0"), "{m}");
    assert!(m.contains("SMMU"), "{m}");
}

#[test]
fn ats_on_a_connectx_of_a_numa_based_system_fails() {
    let n = NodeCopy::of("gb200-tray");
    patch_config(&n, GB200_NIC, |c| {
        // AER at 0x100 (the fixture's only extended capability) now points at ATS at 0x148.
        let aer = u32::from_le_bytes(c[0x100..0x104].try_into().unwrap());
        c[0x100..0x104].copy_from_slice(&((aer & 0x000f_ffff) | (0x148 << 20)).to_le_bytes());
        c[0x148..0x14c].copy_from_slice(&(0x000f_u32 | (1 << 16)).to_le_bytes());
    });
    let (status, f) = acs(&n);
    assert_eq!(status, "fail");
    let ats = only(&f, "nic-ats-on-grace");
    assert_eq!(ats["subject"], "mlx5_0 (0000:03:00.0)");
    let fix = ats["fix"].to_string();
    assert!(fix.contains("ATS_ENABLED=false"), "{fix}");
    // The other three stay in the pass.
    assert!(
        only(&f, "nic-ats-off")["message"]
            .as_str()
            .unwrap()
            .starts_with("mlx5_1 (0002:03:00.0), mlx5_2")
    );
}

#[test]
fn a_segment_of_another_shape_is_not_judged() {
    let n = NodeCopy::of("gb300-tray");
    // The port above the DMA function is no ConnectX switch port any more.
    patch_config(&n, GB300_TO_DMA, |c| {
        c[2..4].copy_from_slice(&0x1234u16.to_le_bytes())
    });
    let (status, f) = acs(&n);
    assert_eq!(status, "unknown");
    let u = only(&f, "acs-complex-unrecognised");
    assert_eq!(u["subject"], "DMA function 0008:03:00.0");
    let m = u["message"].as_str().unwrap();
    assert!(m.contains("unrecognized upstream path"), "{m}");
    assert!(m.contains("its ports (0008:00:00.0, 0008:01:00.0, 0008:02:01.0, 0008:04:00.0, 0008:05:00.0) are not judged"), "{m}");
    // The other three complexes are.
    assert_eq!(with(&f, "grace-iommu-groups-as-required").len(), 3);
    assert!(with(&f, "acs-not-as-nvidia-requires").is_empty());
}

#[test]
fn a_port_read_without_root_is_unknown() {
    let n = NodeCopy::of("gb300-tray");
    patch_config(&n, GB300_TO_DMA, |c| c.truncate(64));
    let (status, f) = acs(&n);
    assert_eq!(status, "unknown");
    let u = with(&f, "acs-unknown")
        .into_iter()
        .find(|f| f["subject"] == "bridge 0008:02:00.0")
        .unwrap();
    let m = u["message"].as_str().unwrap();
    assert!(
        m.starts_with(
            "ConnectX switch downstream port toward the Data Direct DMA function 0008:03:00.0"
        ),
        "{m}"
    );
    assert!(m.contains("needs root"), "{m}");
}

/// The command line asks for rdma_topo's list on a 6.13 kernel without the fix for lists of
/// more than one entry: the finding says why the ports do not hold it, and the fix says what
/// the kernel needs.
#[test]
fn config_acs_on_a_kernel_that_cannot_parse_the_list() {
    let n = NodeCopy::of("gb300-acs-kernel-default");
    let tray = NodeCopy::of("gb300-tray");
    let cmdline = std::fs::read_to_string(tray.root.join("proc/cmdline")).unwrap();
    assert!(cmdline.contains("pci=config_acs=\"xx111x0@0008:00:00.0;"));
    n.write("proc/cmdline", &cmdline);
    n.write("proc/sys/kernel/osrelease", "6.13.0-21-generic\n");
    n.write(
        "proc/version",
        "Linux version 6.13.0-21-generic (buildd@x) #21-Ubuntu SMP\n",
    );
    let (status, f) = acs(&n);
    assert_eq!(status, "fail");
    let port = with(&f, "acs-not-as-nvidia-requires")
        .into_iter()
        .find(|f| f["subject"] == "bridge 0008:00:00.0")
        .unwrap();
    let m = port["message"].as_str().unwrap();
    assert!(
        m.contains("the kernel command line asks the same (xx111x0@0008:00:00.0)"),
        "{m}"
    );
    assert!(m.contains("9cf8a952d57b"), "{m}");
    let fix = port["fix"].to_string();
    assert!(
        fix.contains("backported to 6.12, 6.13 and 6.14 stable"),
        "{fix}"
    );
}

#[test]
fn a_kernel_before_config_acs_is_said_first() {
    let n = NodeCopy::of("gb300-acs-kernel-default");
    n.write("proc/sys/kernel/osrelease", "6.8.0-1010-nvidia-64k\n");
    n.write(
        "proc/version",
        "Linux version 6.8.0-1010-nvidia-64k (buildd@x) #10-Ubuntu SMP\n",
    );
    let (_, f) = acs(&n);
    let fix = &with(&f, "acs-not-as-nvidia-requires")[0]["fix"];
    assert!(
        fix["summary"]
            .as_str()
            .unwrap()
            .contains("kernel 6.8 is too old"),
        "{fix}"
    );
    let first = &fix["commands"][0];
    assert_eq!(first["class"], "manual");
    assert!(
        first["run"]
            .as_str()
            .unwrap()
            .contains("predates pci=config_acs (Linux 6.11)")
    );
}

/// A Vera root port's default has CmpltRedir read-only off (rdma_topo kernel_acs_isolated).
#[test]
fn a_vera_root_port_is_judged_by_its_own_default() {
    let n = NodeCopy::of("gb200-tray");
    patch_config(&n, GB200_RP, |c| {
        c[2..4].copy_from_slice(&0x2f95u16.to_le_bytes());
        c[0x106..0x108].copy_from_slice(&0x0015u16.to_le_bytes());
    });
    let (status, f) = acs(&n);
    assert_eq!(status, "pass");
    let vera = with(&f, "acs-as-nvidia-requires")
        .into_iter()
        .find(|f| f["message"].as_str().unwrap().contains("Vera root port"))
        .unwrap();
    assert!(
        vera["message"].as_str().unwrap().contains(
            "1 Vera root port (0008:00:00.0): ACSCtl 0x0015, as rdma_topo expects xx101x1"
        ),
        "{vera}"
    );
}

/// The pictures draw no redirect on a Grace system, whose ports hold ReqRedir and CmpltRedir as
/// NVIDIA requires; and the old rule's fix (ACS cleared) is offered nowhere.
#[test]
fn grace_ports_are_no_redirect_to_draw_or_clear() {
    for name in ["gb300-tray", "gb300-acs-kernel-default", "gb200-tray"] {
        for format in ["svg", "dot"] {
            let out = gdrdoctor(&["--root", fixture(name), "topo", "--format", format]);
            assert_eq!(code(&out), 0, "{name} {format}");
            let text = stdout(&out);
            assert!(!text.contains("ACS redirect at"), "{name} {format}");
            assert!(!text.contains("dev bridge redirect\""), "{name} {format}");
        }
        let fix = stdout(&gdrdoctor(&["--root", fixture(name), "fix"]));
        assert!(!fix.contains("ECAP_ACS+0x6.w=0000"), "{name}");
        assert!(!fix.contains("acs-redirect-on-path"), "{name}");
    }
}

/// The GB300's fix script: the drop-in, GRUB regenerated, the reboot; never a setpci run.
#[test]
fn the_gb300_fix_is_rdma_topos_kernel_parameter() {
    let out = gdrdoctor(&["--root", fixture("gb300-acs-kernel-default"), "fix"]);
    let script = stdout(&out);
    let entries = "xx111x0@0008:00:00.0;xx110x1@0008:02:00.0;xx101x1@0008:02:01.0;xx111x0@0009:00:00.0;xx110x1@0009:02:00.0;xx101x1@0009:02:01.0;xx111x0@0018:00:00.0;xx110x1@0018:02:00.0;xx101x1@0018:02:01.0;xx111x0@0019:00:00.0;xx110x1@0019:02:00.0;xx101x1@0019:02:01.0";
    assert!(
        script.contains(&format!("pci=config_acs=\\\"{entries}\\\"")),
        "{script}"
    );
    assert!(script.contains("/etc/default/grub.d/config-acs.cfg"));
    assert!(script.contains("# or, instead (not run): rdma-core's own tool"));
    assert!(script.contains("rdma_topo write-grub-acs"));
    // setpci only as a comment, computed as rdma_topo's setpci-acs computes it.
    for line in script.lines().filter(|l| l.contains("setpci")) {
        assert!(line.trim_start().starts_with('#'), "{line}");
    }
    assert!(script.contains("# (by hand) setpci -r -s 0008:02:00.0 ECAP_ACS+0x6.w=0019"));
    assert!(script.contains("NVreg_GrdmaPciTopoCheckOverride=1"));
}
