//! Small variations of a real capture, made in a temp dir, for the branches no other
//! fixture reaches: each test unpacks `fixtures/h200x2-vm`, changes one thing, and asserts the
//! findings that change.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

struct Variant {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Variant {
    fn of(name: &str) -> Variant {
        let (dir, root) = fixture_copy(name);
        Variant { _dir: dir, root }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    fn write(&self, p: &str, content: &str) -> &Self {
        let path = self.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        std::fs::write(path, content).unwrap();
        self
    }

    fn append(&self, p: &str, content: &str) -> &Self {
        let old = std::fs::read_to_string(self.path(p)).unwrap_or_default();
        self.write(p, &(old + content))
    }

    fn remove(&self, p: &str) -> &Self {
        let path = self.path(p);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap()
        } else {
            std::fs::remove_file(path).unwrap()
        }
        self
    }

    fn link(&self, p: &str, target: &str) -> &Self {
        let path = self.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        symlink(target, path).unwrap();
        self
    }

    fn check(&self, extra: &[&str]) -> (i32, serde_json::Value) {
        let root = self.root.to_str().unwrap();
        let mut args = vec!["--root", root, "check", "--format", "json"];
        args.extend(extra);
        let out = gdrdoctor(&args);
        (code(&out), json(&out))
    }
}

fn finding<'a>(report: &'a serde_json::Value, code: &str) -> Option<&'a serde_json::Value> {
    all_findings(report).find(|f| f["code"] == code)
}

fn has(report: &serde_json::Value, code: &str, status: &str) -> bool {
    finding(report, code).is_some_and(|f| f["status"] == status)
}

/// Parts of a device that a check needs and cannot read, or a driver no check expects: each its
/// own finding, never a pass by default.
#[test]
fn damaged_devices_are_named() {
    const PORT: &str = "sys/class/infiniband/mlx5_0/ports/1";
    /// (what, fixture, the change, code, status)
    type Case = (
        &'static str,
        &'static str,
        fn(&Variant),
        &'static str,
        &'static str,
    );
    let cases: [Case; 4] = [
        (
            "a GPU bound to pci-stub",
            "h200x2-vm",
            |v| {
                v.link(
                    "sys/devices/pci0000:00/0000:00:06.0/driver",
                    "../../../bus/pci/drivers/pci-stub",
                );
            },
            "gpu-unexpected-driver",
            "warn",
        ),
        (
            "an RDMA device without ports",
            "healthy-8gpu-roce",
            |v| {
                v.remove("sys/class/infiniband/mlx5_0/ports");
            },
            "rdma-no-ports",
            "unknown",
        ),
        (
            "a RoCE port whose netdev's MTU cannot be read",
            "healthy-8gpu-roce",
            |v| {
                v.remove("sys/class/net/ens1np0/mtu");
            },
            "roce-netdev-unknown",
            "unknown",
        ),
        (
            "a RoCE port whose GID table is all zeros",
            "healthy-8gpu-roce",
            |v| {
                for e in std::fs::read_dir(v.path(&format!("{PORT}/gids"))).unwrap() {
                    let name = e.unwrap().file_name().into_string().unwrap();
                    v.write(
                        &format!("{PORT}/gids/{name}"),
                        "0000:0000:0000:0000:0000:0000:0000:0000\n",
                    );
                }
            },
            "roce-no-gid",
            "fail",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, fixture, change, code, status) in cases {
        let v = Variant::of(fixture);
        change(&v);
        let (_, r) = v.check(&[]);
        if !has(&r, code, status) {
            wrong.push(format!("{what}: no {status} {code} in {:?}", codes(&r)));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// Puts both H200s into IOMMU group `group` of type `kind`, with an Intel unit.
fn with_iommu(v: &Variant, kind: &str, cmdline: &str) {
    v.link("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0");
    std::fs::create_dir_all(v.path("sys/devices/virtual/iommu/dmar0")).unwrap();
    for (i, bdf) in ["0000:00:06.0", "0000:00:07.0"].iter().enumerate() {
        v.write(
            &format!("sys/kernel/iommu_groups/{}/type", 10 + i),
            &format!("{kind}\n"),
        );
        v.link(
            &format!("sys/devices/pci0000:00/{bdf}/iommu_group"),
            &format!("../../../kernel/iommu_groups/{}", 10 + i),
        );
    }
    v.write("proc/cmdline", &format!("{cmdline}\n"));
}

#[test]
fn peermem_loaded_but_unregistered_warns_when_dmabuf_covers() {
    let v = Variant::of("h200x2-vm");
    v.append(
        "proc/modules",
        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (O)\n",
    );
    std::fs::create_dir_all(v.path("sys/module/nvidia_peermem")).unwrap();
    let (_, r) = v.check(&[]);
    assert!(has(&r, "gdr-path-dmabuf", "pass"));
    assert!(has(&r, "peermem-not-registered", "warn"), "{r:#}");
}

#[test]
fn registered_peermem_is_named_as_the_fallback() {
    let v = Variant::of("h200x2-vm");
    v.write("sys/kernel/mm/memory_peers/nv_mem/version", "1.3\n");
    let (_, r) = v.check(&[]);
    let f = finding(&r, "gdr-path-dmabuf").unwrap();
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("nvidia_peermem is registered too (nv_mem)"),
        "{f:#}"
    );
}

#[test]
fn proprietary_module_without_peermem_has_no_path() {
    let v = Variant::of("h200x2-vm");
    v.write("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n");
    let (code, r) = v.check(&[]);
    assert_eq!(code, 1);
    let f = finding(&r, "peermem-not-loaded").unwrap();
    assert_eq!(f["status"], "fail");
    assert!(
        f["message"].as_str().unwrap().contains("proprietary"),
        "{f:#}"
    );
    assert!(has(&r, "gpu-driver-bound", "pass"));
}

#[test]
fn old_kernel_rules_out_dmabuf() {
    let v = Variant::of("h200x2-vm");
    v.write("proc/sys/kernel/osrelease", "5.4.0-150-generic\n");
    let (_, r) = v.check(&[]);
    let f = finding(&r, "peermem-not-loaded").unwrap();
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("kernel 5.4 is older than 5.12"),
        "{f:#}"
    );
}

#[test]
fn missing_version_file_with_a_bound_gpu_is_unknown_not_absent() {
    let v = Variant::of("h200x2-vm");
    v.remove("proc/driver/nvidia/version");
    let (_, r) = v.check(&[]);
    assert!(has(&r, "gpu-driver-version-unknown", "unknown"), "{r:#}");
    assert!(has(&r, "gdr-path-unknown", "unknown"), "{r:#}");
}

#[test]
fn translated_iommu_fails_with_a_platform_fix() {
    let v = Variant::of("h200x2-vm");
    with_iommu(
        &v,
        "DMA",
        "BOOT_IMAGE=/vmlinuz intel_iommu=on iommu.strict=1",
    );
    let (code, r) = v.check(&[]);
    assert_eq!(code, 1);
    let f = finding(&r, "iommu-translated").unwrap();
    let msg = f["message"].as_str().unwrap();
    assert!(
        msg.contains("2 GPUs (0000:00:06.0, 0000:00:07.0)")
            && msg.contains("type DMA (translated, strict)"),
        "{msg}"
    );
    assert!(
        msg.contains("set by the kernel command line: intel_iommu=on iommu.strict=1"),
        "{msg}"
    );
    let cmds: Vec<&str> = f["fix"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["run"].as_str().unwrap())
        .collect();
    assert!(cmds.iter().any(|c| c.contains("iommu=pt")), "{cmds:?}");
    assert!(
        cmds.iter().any(|c| c.contains("--remove iommu.strict=1")),
        "strict=1 is removed: {cmds:?}"
    );
    assert_eq!(f["evidence"][0]["path"], "/sys/kernel/iommu_groups/10/type");
}

#[test]
fn identity_blocked_and_vfio_groups() {
    let v = Variant::of("h200x2-vm");
    with_iommu(&v, "identity", "intel_iommu=on iommu=pt");
    let (code, r) = v.check(&[]);
    assert_eq!(code, 1, "rdma-no-device still fails");
    assert!(has(&r, "iommu-passthrough", "pass"));

    with_iommu(&v, "blocked", "intel_iommu=on");
    assert!(has(&v.check(&[]).1, "iommu-blocked", "fail"));
    with_iommu(&v, "unmanaged", "intel_iommu=on");
    assert!(has(&v.check(&[]).1, "iommu-vfio", "warn"));
    v.write("sys/kernel/iommu_groups/10/type", "\u{ff}garbage\n");
    assert!(has(&v.check(&[]).1, "iommu-group-unknown", "unknown"));
}

#[test]
fn iommu_units_without_a_group_are_unknown() {
    let v = Variant::of("h200x2-vm");
    v.link("sys/class/iommu/dmar0", "../../devices/virtual/iommu/dmar0");
    std::fs::create_dir_all(v.path("sys/devices/virtual/iommu/dmar0")).unwrap();
    let (_, r) = v.check(&[]);
    assert!(has(&r, "iommu-group-unknown", "unknown"), "{r:#}");
    assert_eq!(
        check(&r, "iommu")["status"],
        "unknown",
        "unknown is never a pass"
    );
}

#[test]
fn nouveau_and_vfio_gpus() {
    let v = Variant::of("h200x2-vm");
    v.link(
        "sys/devices/pci0000:00/0000:00:06.0/driver",
        "../../../bus/pci/drivers/vfio-pci",
    );
    v.link(
        "sys/devices/pci0000:00/0000:00:07.0/driver",
        "../../../bus/pci/drivers/nouveau",
    );
    let (_, r) = v.check(&[]);
    assert!(has(&r, "gpu-vfio", "warn"));
    assert!(has(&r, "gpu-nouveau", "fail"));
}

#[test]
fn config_declared_accelerator_vendor_is_judged_unknown() {
    let v = Variant::of("h200x2-vm");
    let cfg = v.path("cfg.yaml");
    std::fs::write(&cfg, "accelerators:\n  - vendor: \"1af4\"\n    device: \"1041\"\n    name: virtio-net pretending\n").unwrap();
    let (_, r) = v.check(&["--config", cfg.to_str().unwrap()]);
    assert_eq!(r["node"]["gpus"], 3);
    assert!(has(&r, "gdr-path-unknown", "unknown"));
    let gpus = r["inventory"]["gpus"].as_array().unwrap();
    assert!(
        gpus.iter()
            .any(|g| g["model"] == "virtio-net pretending" && g["vendor"] == "other"),
        "{gpus:?}"
    );
}

#[test]
fn the_captures_own_config_is_never_read() {
    // A capture carrying /etc/gdrdoctor/config.yaml that would hide its failures.
    let v = Variant::of("h200x2-vm");
    v.write(
        "etc/gdrdoctor/config.yaml",
        "severity:\n  rdma-no-device: pass\n",
    );
    let (code, r) = v.check(&[]);
    assert_eq!(code, 1);
    assert!(has(&r, "rdma-no-device", "fail"));
}

#[test]
fn kernel_config_from_boot_when_proc_has_none() {
    let v = Variant::of("amd-no-gdr-path");
    v.remove("proc/config.gz");
    let (_, r) = v.check(&[]);
    assert!(
        has(&r, "gdr-path-unknown", "unknown"),
        "no config anywhere: unknown, not a pass"
    );
    let release = std::fs::read_to_string(v.path("proc/sys/kernel/osrelease")).unwrap();
    v.write(
        &format!("boot/config-{}", release.trim()),
        "CONFIG_DMABUF_MOVE_NOTIFY=y\nCONFIG_PCI_P2PDMA=y\n",
    );
    let (code, r) = v.check(&[]);
    assert_eq!(code, 0, "{r:#}");
    let f = finding(&r, "gdr-path-dmabuf").unwrap();
    assert!(
        f["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["path"].as_str().unwrap().starts_with("/boot/config-")),
        "{f:#}"
    );
}

#[test]
fn rxe_reaches_its_pci_function_through_the_netdev() {
    // Soft-RoCE has no `device` link; its `parent` names the netdev (seen in the lab).
    let v = Variant::of("h200x2-vm");
    let dev = "sys/devices/virtual/infiniband/rxe0";
    v.write(&format!("{dev}/parent"), "eth0\n");
    v.write(&format!("{dev}/node_type"), "1: CA\n");
    let port = format!("{dev}/ports/1");
    for (f, val) in [
        ("state", "4: ACTIVE"),
        ("phys_state", "5: LinkUp"),
        ("link_layer", "Ethernet"),
        ("rate", "2.5 Gb/sec (1X SDR)"),
        ("lid", "0x0"),
        ("sm_lid", "0x0"),
    ] {
        v.write(&format!("{port}/{f}"), &format!("{val}\n"));
    }
    v.write(
        &format!("{port}/gids/0"),
        "fe80:0000:0000:0000:5054:00ff:fe00:0001\n",
    );
    v.write(
        &format!("{port}/gids/1"),
        "0000:0000:0000:0000:0000:ffff:c000:0201\n",
    );
    v.write(
        &format!("{port}/gids/2"),
        "0000:0000:0000:0000:0000:0000:0000:0000\n",
    );
    for i in 0..2 {
        v.write(&format!("{port}/gid_attrs/types/{i}"), "RoCE v2\n");
        v.write(&format!("{port}/gid_attrs/ndevs/{i}"), "eth0\n");
    }
    v.link(
        "sys/class/infiniband/rxe0",
        "../../devices/virtual/infiniband/rxe0",
    );
    let (_, r) = v.check(&[]);
    let dev = &r["inventory"]["rdma_devices"][0];
    assert_eq!(
        dev["pci"], "0000:00:03.0",
        "eth0 is virtio-net at 00:03.0: {dev:#}"
    );
    assert_eq!(dev["driver"], "rxe");
    assert!(has(&r, "rdma-port-active", "pass"));
    let gid = finding(&r, "roce-v2-ipv4").unwrap();
    assert!(
        gid["message"]
            .as_str()
            .unwrap()
            .contains("NCCL_IB_GID_INDEX=1"),
        "{gid:#}"
    );
    // eth0's MTU is 1500: RDMA MTU 1024.
    assert!(
        finding(&r, "roce-mtu-small").unwrap()["message"]
            .as_str()
            .unwrap()
            .contains("RDMA MTU of 1024")
    );
    // The GPUs rely on DMA-BUF, which rxe cannot register.
    assert!(has(&r, "nic-no-dmabuf", "warn"), "{r:#}");
}

/// A RoCE v2 GID in fe80::/10 but outside fe80::/64 (a link-local address on the netdev that
/// is not the kernel's own fe80::/64 one) ahead of the global one: link-local by RFC 4291, so
/// never the GID gdrdoctor proposes, though NCCL's validGid() (its test is fe80::/64) would take
/// it under NCCL_IB_ADDR_FAMILY=AF_INET6, which the finding says. Before (issue 25): the two GID
/// types disagreed, the rdma-gid check took fe80:0:0:1:: for a global IPv6 GID and proposed it.
#[test]
fn a_link_local_gid_outside_fe80_64_is_never_proposed() {
    let v = Variant::of("roce-ipv6-only");
    let port = "sys/class/infiniband/mlx5_0/ports/1";
    v.write(
        &format!("{port}/gids/1"),
        "fe80:0000:0000:0001:ba3f:d2ff:fea1:b2c4\n",
    );
    let (_, r) = v.check(&[]);
    let gid = check(&r, "rdma-gid")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["subject"].as_str().unwrap().contains("mlx5_0"))
        .unwrap();
    let message = gid["message"].as_str().unwrap();
    assert_eq!(gid["code"], "roce-no-ipv4-gid", "{gid:#}");
    assert!(
        message.contains("the RoCE v2 GIDs are IPv6: index 3 (RoCE v2, 2001:db8:1::1")
            && message.contains("NCCL needs NCCL_IB_GID_INDEX=3 here")
            && message
                .contains("would make NCCL take index 1 (RoCE v2, fe80::1:ba3f:d2ff:fea1:b2c4"),
        "{message}"
    );
    // Every port's routable RoCE v2 GID is at index 3: `gdrdoctor nccl` pins it, and names it
    // for what it is.
    let out = stdout(&gdrdoctor(&["--root", v.root.to_str().unwrap(), "nccl"]));
    assert!(out.contains("export NCCL_IB_GID_INDEX='3'"), "{out}");
    assert!(
        out.contains("mlx5_0 port 1: RoCE v2 IPv6 GID at index 3"),
        "{out}"
    );
}
