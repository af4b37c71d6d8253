//! Cloud GPU fabrics as NCCL sees them (issue 29), on copies of the AWS and KVM fixtures with one
//! thing changed: the network plugin missing, unfound, unable to load or told to turn GDR off;
//! the efa driver without a P2P provider; a p6-b200 whose NCCL has only its narrow functions; a
//! bare-metal tree that DMI and the CPU flag say is a guest; EFA's counters growing in a window;
//! `--strict` on a healthy EFA node.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::{Path, PathBuf};

/// The EFA side of a copy.
trait Efa {
    fn efa_p2p(&self) -> Vec<PathBuf>;
}

impl Efa for NodeCopy {
    /// Every EFA device's p2p file, as AWS's efa driver writes it.
    fn efa_p2p(&self) -> Vec<PathBuf> {
        let class = self.root.join("sys/class/infiniband");
        let mut out: Vec<PathBuf> = std::fs::read_dir(class)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path().join("device/p2p");
                p.is_file().then_some(p)
            })
            .collect();
        out.sort();
        out
    }
}

fn one<'a>(report: &'a serde_json::Value, code: &str, status: &str) -> &'a serde_json::Value {
    findings_with(report, code)
        .into_iter()
        .find(|f| f["status"] == status)
        .unwrap_or_else(|| panic!("no {status} {code}: {:#}", report["checks"]))
}

fn text(f: &serde_json::Value) -> String {
    f.to_string()
}

/// A healthy EFA node passes `--strict`: no unknown link layer, no RoCE rule applied to EFA.
#[test]
fn strict_passes_a_healthy_efa_node() {
    for name in ["aws-p5-efa", "aws-p4d-efa-topo", "aws-p6-b200"] {
        let out = gdrdoctor(&["--root", fixture(name), "check", "--strict"]);
        assert_eq!(code(&out), 0, "{name}: {}", stdout(&out));
        let human = stdout(&out);
        assert!(!human.contains("RoCE,"), "{name}: {human}");
        assert!(!human.contains("cannot parse"), "{name}: {human}");
    }
}

/// Without aws-ofi-nccl NCCL's own transport skips EFA: the node runs over sockets, which
/// nccl-config fails and pcie-placement says (no NIC NCCL uses).
#[test]
fn efa_without_the_plugin_runs_over_sockets() {
    let n = NodeCopy::of("aws-p5-efa");
    n.remove("opt/amazon/ofi-nccl");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "nccl-net-plugin-missing", "fail");
    let m = text(f);
    assert!(
        m.contains("32 EFA devices") && m.contains("TCP sockets"),
        "{m}"
    );
    assert!(m.contains("libnccl-net.so"), "{m}");
    let p = one(&r, "placement-no-pair", "skip");
    assert!(text(p).contains("aws-ofi-nccl"), "{p}");
}

/// The fix's commands of a finding: (run, guard).
fn commands(f: &serde_json::Value) -> Vec<(String, String)> {
    f["fix"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            (s("run"), s("guard"))
        })
        .collect()
}

/// The loader's fix for aws-ofi-nccl installed in `dir`: the directory in its own ld.so.conf.d
/// file and ldconfig, skipped once both are done.
fn loader_fix(dir: &str) -> (String, String) {
    let conf = "/etc/ld.so.conf.d/aws-ofi-nccl.conf";
    (
        format!("echo {dir} > {conf} && ldconfig"),
        format!("grep -qxF {dir} {conf} 2>/dev/null && ldconfig -p | grep -qF '=> {dir}/'"),
    )
}

/// aws-ofi-nccl installed where the loader does not look: the fix puts its directory on the
/// loader's path, which every NCCL release searches, not its path in NCCL_NET_PLUGIN, which
/// NCCL 2.4 to 2.21 make into libnccl-net-<path>.so. A path there works with 2.22 and later; with
/// NCCL_NET_PLUGIN=ofi, NCCL finds libnccl-net-ofi.so (the name 2.4 and later form).
#[test]
fn plugin_off_the_loader_path_and_named_by_nccl_net_plugin() {
    let n = NodeCopy::of("aws-p4d-efa-topo");
    n.remove("etc/ld.so.conf.d/000_efa.conf");
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "nccl-net-plugin-missing", "fail");
    assert_eq!(
        commands(f)[0],
        loader_fix("/opt/amazon/ofi-nccl/lib"),
        "{f}"
    );
    assert!(
        text(f).contains("NCCL 2.4 to 2.21 make any value X into libnccl-net-X.so"),
        "{f}"
    );
    // libnccl-net.so is there: nothing else to set.
    assert!(!text(f).contains("NCCL_NET_PLUGIN=ofi"), "{f}");
    n.write(
        "etc/nccl.conf",
        "NCCL_NET_PLUGIN=/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so\n",
    );
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let f = one(&r, "nccl-net-plugin", "pass");
    assert!(text(f).contains("aws-ofi-nccl 1.13.2-aws"), "{f}");
    // Back on the loader's path, named by its short name.
    n.write(
        "etc/ld.so.conf.d/000_efa.conf",
        "/opt/amazon/ofi-nccl/lib\n/opt/amazon/efa/lib\n",
    );
    n.write("etc/nccl.conf", "NCCL_NET_PLUGIN=ofi\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let f = one(&r, "nccl-net-plugin", "pass");
    assert!(text(f).contains("NCCL_NET_PLUGIN=ofi"), "{f}");
}

/// aws-ofi-nccl 1.14 to 1.16 from their Debian packages, in lib/<arch>-linux-gnu (dh_auto_configure's
/// multiarch libdir; aws-ofi-nccl contrib/debian-template/rules), with the loader not told (the
/// package's own ld.so.conf.d file gone): found there, on x86_64 and on Arm, and the fix names
/// that directory; applied, NCCL loads the plugin. Without libnccl-net.so beside it (a build
/// with `--disable-nccl-net-library`), the fix also sets NCCL_NET_PLUGIN=ofi.
#[test]
fn plugin_in_the_multiarch_directory() {
    for (arch, default_name) in [("x86_64", true), ("aarch64", false)] {
        let n = NodeCopy::of("aws-p4d-efa-topo");
        let lib = std::fs::read(n.root.join("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so")).unwrap();
        n.remove("opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so")
            .remove("opt/amazon/ofi-nccl/lib/libnccl-net.so");
        let dir = format!("/opt/amazon/ofi-nccl/lib/{arch}-linux-gnu");
        n.write(&format!("{dir}/libnccl-net-ofi.so")[1..], &lib);
        if default_name {
            n.write(&format!("{dir}/libnccl-net.so")[1..], &lib);
        }
        n.write("proc/sys/kernel/arch", format!("{arch}\n"))
            .write("etc/ld.so.conf.d/000_efa.conf", "/opt/amazon/efa/lib\n");
        let (c, r) = n.check(&[], &[]);
        assert_eq!(c, 1, "{arch}: {:#}", r["checks"]);
        let f = one(&r, "nccl-net-plugin-missing", "fail");
        let cmds = commands(f);
        assert_eq!(cmds[0], loader_fix(&dir), "{arch}: {f}");
        assert!(
            text(f).contains(&format!("installed at {dir}/libnccl-net-ofi.so")),
            "{arch}: {f}"
        );
        let ofi = (
            "gdrdoctor edit set /etc/nccl.conf NCCL_NET_PLUGIN=ofi".to_owned(),
            String::new(),
        );
        assert_eq!(cmds.contains(&ofi), !default_name, "{arch}: {cmds:?}");
        // What the fix does, done by hand on the copy: NCCL loads the plugin from there.
        n.write("etc/ld.so.conf.d/aws-ofi-nccl.conf", format!("{dir}\n"));
        if !default_name {
            n.write("etc/nccl.conf", "NCCL_NET_PLUGIN=ofi\n");
        }
        let (c, r) = n.check(&[], &[]);
        assert_eq!(c, 0, "{arch}: {:#}", r["checks"]);
        let f = one(&r, "nccl-net-plugin", "pass");
        assert!(
            text(f).contains("/etc/ld.so.conf.d/aws-ofi-nccl.conf line 1"),
            "{arch}: {f}"
        );
    }
}

/// A plugin NCCL_NET_PLUGIN names but nobody installed, on a node without EFA: NCCL uses its
/// own transport, which is worth a warning, not a failure.
#[test]
fn unfound_plugin_on_an_infiniband_node_warns() {
    let n = NodeCopy::of("healthy-4gpu-ib-peermem");
    n.write("etc/nccl.conf", "NCCL_NET_PLUGIN=sharp\n");
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "nccl-net-plugin-unfound", "warn");
    assert!(text(f).contains("libnccl-net-sharp.so"), "{f}");
}

/// aws-ofi-nccl without libfabric cannot load at all.
#[test]
fn plugin_without_libfabric_fails() {
    let n = NodeCopy::of("aws-p4d-efa-topo");
    n.remove("opt/amazon/efa");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "nccl-net-plugin-broken", "fail");
    assert!(text(f).contains("libfabric.so.1"), "{f}");
}

/// The settings the plugin documents and libfabric reads: P2P turned off fails, RDMAV_FORK_SAFE
/// warns.
#[test]
fn plugin_settings_that_turn_gdr_off() {
    let n = NodeCopy::of("aws-p4d-efa-topo");
    n.write(
        "etc/nccl.conf",
        "FI_HMEM_DISABLE_P2P=1\nRDMAV_FORK_SAFE=1\n",
    );
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "nccl-net-plugin-setting", "fail");
    assert!(text(f).contains("FI_HMEM_DISABLE_P2P=1"), "{f}");
    let w = one(&r, "nccl-net-plugin-setting", "warn");
    assert!(text(w).contains("RDMAV_FORK_SAFE"), "{w}");
}

/// EFA's GPU memory path: the upstream driver (no p2p file) takes DMA-BUF on a new kernel with
/// the open NVIDIA module; AWS's driver with no provider and the proprietary module has none,
/// which fails and names aws-ofi-nccl's refusal on p4d.
#[test]
fn efa_gpu_memory_paths() {
    let n = NodeCopy::of("aws-p4d-efa-topo");
    for p in n.efa_p2p() {
        std::fs::remove_file(p).unwrap();
    }
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "gdr-path-dmabuf", "pass");
    assert!(text(f).contains("ibv_reg_dmabuf_mr"), "{f}");

    let n = NodeCopy::of("aws-p4d-efa-topo");
    for p in n.efa_p2p() {
        std::fs::write(p, "\n").unwrap();
    }
    n.write(
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n",
    );
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "efa-no-gdr-path", "fail");
    let m = text(f);
    assert!(
        m.contains("found no provider") && m.contains("p4d.24xlarge"),
        "{m}"
    );
    assert!(
        !findings_with(&r, "peermem-not-loaded").iter().any(|_| true),
        "{m}"
    );
    // Issue 40: on Linux 6.8 with the proprietary module, reinstalling the efa driver cannot
    // give it a provider (efa_nv_peermem refuses that module): the fix is the open modules.
    let fix = f["fix"].to_string();
    assert!(
        fix.contains("Install the open NVIDIA kernel modules of the same release (535.183.01")
            && fix.contains("efa_nv_peermem, refuses the proprietary module"),
        "{fix}"
    );
    assert!(!fix.contains("efa_installer.sh"), "{fix}");
    // On 6.5 the efa driver's own provider is still the way.
    n.write("proc/sys/kernel/osrelease", "6.5.0-1024-aws\n");
    let (_, r) = n.check(&[], &[]);
    let fix = one(&r, "efa-no-gdr-path", "fail")["fix"].to_string();
    assert!(
        fix.contains("efa_installer.sh") && fix.contains("Install the efa driver"),
        "{fix}"
    );
}

/// A p6-b200 whose NCCL has no aws-ofi-nccl: its own transport has only the two narrow
/// ConnectX-7 functions, which every GPU warns about; `gdrdoctor nccl` leaves them out of
/// NCCL_IB_HCA, and with the plugin it sets no NCCL_IB_HCA at all.
#[test]
fn narrow_functions_are_never_rails() {
    let out = gdrdoctor(&["--root", fixture("aws-p6-b200"), "nccl"]);
    let s = stdout(&out);
    assert!(s.contains("# NCCL_IB_HCA not set"), "{s}");
    assert!(s.contains("aws-ofi-nccl"), "{s}");
    assert!(!s.contains("ibp115s0f0:1"), "{s}");

    let n = NodeCopy::of("aws-p6-b200");
    n.remove("opt/amazon/ofi-nccl");
    let (_, r) = n.check(&[], &[]);
    let w = findings_with(&r, "gpu-nic-narrow");
    assert_eq!(w.len(), 8, "{:#}", r["checks"]);
    assert!(
        text(w[0]).contains("ibp115s0f0") && text(w[0]).contains("x2"),
        "{}",
        w[0]
    );
    let s = stdout(&n.run(&["nccl"]));
    assert!(!s.contains("ibp115s0f0:1"), "{s}");
    assert!(s.contains("a narrow function"), "{s}");
    // Issue 40: nor does it open GDR through the CPU for those functions' sake.
    assert!(!s.contains("NCCL_NET_GDR_LEVEL='SYS'"), "{s}");
    assert!(!s.contains("NCCL_NET_GDR_LEVEL=SYS"), "{s}");
    assert!(
        s.contains("# NCCL_NET_GDR_LEVEL: not set: the nearest NICs of every GPU are narrow or front-end functions, not rails"),
        "{s}"
    );
}

/// A tree with root ports and no switch, which alone reads as bare metal, is a VM when DMI and
/// the CPU flag say so: the failure is worded for a VM, with both signals as evidence.
#[test]
fn dmi_and_the_cpu_flag_make_a_guest() {
    let n = NodeCopy::of("placement-phb");
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "gpu-nic-too-far", "fail");
    assert!(text(f).contains("PCIe switch"), "{f}");
    n.write("sys/devices/virtual/dmi/id/sys_vendor", "QEMU\n")
        .write(
            "sys/devices/virtual/dmi/id/product_name",
            "Standard PC (Q35 + ICH9, 2009)\n",
        )
        .write(
            "proc/cpuinfo",
            "processor\t: 0\nflags\t\t: fpu sse2 hypervisor lm\n\n",
        );
    let link = n.root.join("sys/class/dmi/id");
    if !link.exists() {
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("../../devices/virtual/dmi/id", &link).unwrap();
    }
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "gpu-nic-too-far", "fail");
    let m = text(f);
    assert!(
        m.contains("This is a VM") && m.contains("PHB in the guest"),
        "{m}"
    );
    assert!(m.contains("QEMU (QEMU's SMBIOS)"), "{m}");
    assert!(
        m.contains("/proc/cpuinfo") && m.contains("hypervisor"),
        "{m}"
    );
    assert!(
        !m.contains("Put this GPU and a NIC under one PCIe switch"),
        "{m}"
    );
}

/// EFA's port counters join link-health: rx_drops growing in a window warns as retries, with a
/// fix that says the network is AWS's.
#[test]
fn efa_drops_growing_in_a_window_warn() {
    let n = NodeCopy::of("aws-p4d-efa-topo");
    let class = n.root.join("sys/class/infiniband");
    for dev in std::fs::read_dir(&class).unwrap() {
        let dev = dev.unwrap().file_name().into_string().unwrap();
        let dir = format!("sys/class/infiniband/{dev}/ports/1/hw_counters");
        for c in std::fs::read_dir(n.root.join(&dir)).unwrap() {
            let c = c.unwrap().file_name().into_string().unwrap();
            let v = if dev == "rdmap16s27" && c == "rx_drops" {
                "41\n"
            } else {
                "0\n"
            };
            n.write(&format!("gdrdoctor/sample/{dir}/{c}"), v);
        }
    }
    n.write("gdrdoctor/sample/window", "5.0\n");
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "link-retries-growing", "warn");
    let m = text(f);
    assert!(m.contains("rdmap16s27") && m.contains("rx_drops"), "{m}");
    assert!(m.contains("AWS"), "{m}");
}

/// The plugin's version and where it was found are what `capture` keeps: offline equals live.
#[test]
fn a_capture_keeps_the_plugin_and_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p4d.tar.gz");
    let c = gdrdoctor(&[
        "--root",
        fixture("aws-p4d-efa-topo"),
        "capture",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code(&c), 0, "{}", stderr(&c));
    let live = gdrdoctor(&["--root", fixture("aws-p4d-efa-topo"), "check"]);
    let offline = gdrdoctor(&["--root", out.to_str().unwrap(), "check"]);
    let strip = |s: String| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(stdout(&live)), strip(stdout(&offline)));
    assert!(stdout(&offline).contains("aws-ofi-nccl 1.13.2-aws"));
    assert!(Path::new(&out).is_file());
}

/// A guest laid out well (an expander bridge per NUMA node, an emulated switch per pair) passes;
/// a failure there is still worded for a VM, with its expander bridge and DMI as evidence.
#[test]
fn a_failure_in_a_well_laid_out_guest_is_a_vms() {
    let out = gdrdoctor(&["--root", fixture("kvm-h200x8-pxb"), "check"]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let n = NodeCopy::of("kvm-h200x8-pxb");
    n.write("etc/nccl.conf", "NCCL_NET_GDR_LEVEL=LOC\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "gpu-nic-too-far", "fail");
    let m = text(f);
    assert!(
        m.contains("This is a VM") && m.contains("QEMU PCI expander bridges"),
        "{m}"
    );
    assert!(
        m.contains("1b36:000b") && m.contains("QEMU (QEMU's SMBIOS)"),
        "{m}"
    );
}
