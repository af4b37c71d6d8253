//! The node as NCCL will see it (issue 16): its configuration files, the declared job
//! environment and the topology file, on the Azure ND A100 v4 guest fixtures and on variants of
//! them made in a temp dir (a stale file, a malformed one, hostile ones, a site GDR level, an HCA
//! list, a pinned GID index).
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::PathBuf;
use std::time::Duration;

const TOPO: &str = "opt/microsoft/ndv4/topo.xml";
const TOPO_ABS: &str = "/opt/microsoft/ndv4/topo.xml";
/// The image's file, as the fixture holds it.
const NDV4: &str = include_str!("../fixtures/nccl-topo/ndv4-topo.xml");

fn one<'a>(report: &'a serde_json::Value, code: &str, status: &str) -> &'a serde_json::Value {
    let f = findings_with(report, code);
    assert!(
        f.iter().any(|f| f["status"] == status),
        "no {status} {code}: {:#}",
        report["checks"]
    );
    f.into_iter().find(|f| f["status"] == status).unwrap()
}

fn text(f: &serde_json::Value) -> String {
    f.to_string()
}

/// Without the image's files every GPU is too far from its NICs, and the fix names the file;
/// with them NCCL's tree puts each GPU at PIX, and the sysfs level is said beside it.
#[test]
fn ndv4_without_and_with_the_image_files() {
    let (c, r) = NodeCopy::of("azure-ndv4-vm").check(&[], &[]);
    assert_eq!(c, 1);
    let far = findings_with(&r, "gpu-nic-too-far");
    assert_eq!(far.len(), 8);
    let f = text(far[0]);
    assert!(f.contains("hypervisor's picture"), "{f}");
    assert!(f.contains("Hyper-V virtual PCI"), "{f}");
    assert!(
        f.contains("NCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml"),
        "{f}"
    );
    assert!(f.contains("VMBUS:01"), "{f}");

    let (c, r) = NodeCopy::of("azure-ndv4-vm-topo").check(&[], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let near = findings_with(&r, "gpu-nic-near");
    assert_eq!(near.len(), 8);
    let f = text(near[0]);
    assert!(
        f.contains(
            "at PIX in the topology file NCCL reads (/opt/microsoft/ndv4/topo.xml), NODE in sysfs"
        ),
        "{f}"
    );
    assert!(f.contains("line 12: GPU 0001:00:00.0"), "{f}");
    let s = text(one(&r, "nccl-setting", "pass"));
    assert!(s.contains("/etc/nccl.conf line 2"), "{s}");
}

/// A file written for another VM: a GPU the node lacks is named with its line, and the node's
/// own GPU missing from the file is placed from sysfs.
/// The MI300X fixture's own tree (fixtures/amd-mi300x-roce/FIXTURE.md), as RCCL dumps it:
/// version 2, each GPU and bnxt_re NIC under one Gen5 switch (the layout of ROCm/rccl#1185's
/// dump, fixtures/nccl-topo/rccl-1185-topo.xml).
fn mi300x_topo(version: u32) -> String {
    let mut s = format!("<system version=\"{version}\">\n");
    for (numa_bus, pairs) in [
        (0x21, [(0x23, 0x24), (0x25, 0x26)]),
        (0x41, [(0x43, 0x44), (0x45, 0x46)]),
    ] {
        s.push_str(&format!("  <cpu numaid=\"0\" affinity=\"ffffffff\" arch=\"x86_64\" vendor=\"AMD\" familyid=\"25\" modelid=\"17\">\n    <pci busid=\"0000:{numa_bus:02x}:00.0\" class=\"0x060400\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n"));
        for (gpu, nic) in pairs {
            let dev = (gpu - 0x23) / 2 % 2 + if numa_bus == 0x41 { 2 } else { 0 };
            s.push_str(&format!("      <pci busid=\"0000:{gpu:02x}:00.0\" class=\"0x120000\" vendor=\"0x1002\" device=\"0x74a1\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n        <gpu dev=\"{dev}\" sm=\"94\" gcn=\"gfx942\" rank=\"{dev}\" gdr=\"1\"/>\n      </pci>\n"));
            s.push_str(&format!("      <pci busid=\"0000:{nic:02x}:00.0\" class=\"0x020000\" vendor=\"0x14e4\" device=\"0x1760\" link_speed=\"32.0 GT/s PCIe\" link_width=\"16\">\n        <nic>\n          <net name=\"bnxt_re{dev}\" dev=\"{dev}\" speed=\"400000\" port=\"1\" gdr=\"1\"/>\n        </nic>\n      </pci>\n"));
        }
        s.push_str("    </pci>\n  </cpu>\n");
    }
    s.push_str("</system>\n");
    s
}

/// RCCL reads its own topology file (version 2) and refuses NCCL's (version 1): on the MI300X
/// fixture, /etc/nccl.conf naming RCCL's file is judged as RCCL reads it (issue 30).
#[test]
fn rccl_topology_file_on_mi300x() {
    let node = NodeCopy::of("amd-mi300x-roce");
    node.write("etc/nccl.conf", "NCCL_TOPO_FILE=/etc/rccl-topo.xml\n")
        .write("etc/rccl-topo.xml", mi300x_topo(2));
    let (_, r) = node.check(&[], &[]);
    assert!(
        findings_with(&r, "nccl-topo-file-invalid").is_empty(),
        "{:#}",
        r["checks"]
    );
    let ok = one(&r, "nccl-topo-file-ok", "pass");
    assert!(text(ok).contains("/etc/rccl-topo.xml"), "{}", text(ok));
    // NCCL's version 1 on the same node: RCCL refuses it, and says which version it reads.
    node.write("etc/rccl-topo.xml", mi300x_topo(1));
    let (c, r) = node.check(&[], &[]);
    assert_eq!(c, 1);
    let f = text(one(&r, "nccl-topo-file-invalid", "fail"));
    assert!(f.contains("RCCL reads only version 2"), "{f}");
    assert!(f.contains("every RCCL job"), "{f}");
    // RCCL's file on an NVIDIA node: NCCL refuses it, as before.
    let node = NodeCopy::of("azure-ndv4-vm-topo");
    node.write(TOPO, NDV4.replacen("version=\"1\"", "version=\"2\"", 1));
    let (_, r) = node.check(&[], &[]);
    let f = text(one(&r, "nccl-topo-file-invalid", "fail"));
    assert!(f.contains("NCCL reads only version 1"), "{f}");
}

/// `gdrdoctor nccl` on an AMD node writes RCCL's opt-in for its DMA-BUF path where that path
/// is the one the node has; an NVIDIA node gets no such line (NCCL's is on by default).
#[test]
fn rccl_settings_on_mi300x() {
    let node = NodeCopy::of("amd-mi300x-roce");
    let out = gdrdoctor(&["--root", node.root.to_str().unwrap(), "nccl"]);
    let text = stdout(&out);
    assert!(text.contains("export NCCL_DMABUF_ENABLE='1'"), "{text}");
    assert!(text.contains("CONFIG_DMABUF_MOVE_NOTIFY=y"), "{text}");
    assert!(text.contains("\nNCCL_DMABUF_ENABLE=1\n"), "{text}");
    // The release is RCCL's: not known on a captured root (live, RCCL is asked as NCCL is:
    // nccl_verify::rccls_version_is_asked_of_the_library), or as stated.
    assert!(
        text.contains("\n# RCCL's version is not known: a captured root holds no librccl to ask, and none of its files names the release (--nccl-version states it)\n"),
        "{text}"
    );
    let out = gdrdoctor(&[
        "--root",
        node.root.to_str().unwrap(),
        "nccl",
        "--nccl-version",
        "2.22.3",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("\n# RCCL 2.22.3 (--nccl-version)\n"),
        "{text}"
    );
    assert!(!text.contains("NCCL 2.22.3"), "{text}");
    let out = gdrdoctor(&["--root", fixture("azure-ndv4-vm-topo"), "nccl"]);
    assert!(
        !stdout(&out).contains("NCCL_DMABUF_ENABLE"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn stale_topology_file() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    n.write(TOPO, NDV4.replace("0003:00:00.0", "0009:00:00.0"));
    let (_, r) = n.check(&[], &[]);
    let stale = text(one(&r, "nccl-topo-file-stale", "warn"));
    assert!(stale.contains("GPU 0009:00:00.0 (line 4)"), "{stale}");
    assert!(stale.contains(TOPO_ABS), "{stale}");
    let missing = text(one(&r, "nccl-topo-file-incomplete", "warn"));
    assert!(missing.contains("GPU 0003:00:00.0"), "{missing}");
    // That GPU is placed from sysfs, as NCCL places it: under its NUMA node's CPU, no PIX.
    let far = findings_with(&r, "gpu-nic-too-far");
    assert_eq!(far.len(), 1, "{far:?}");
    assert!(text(far[0]).contains("0003:00:00.0"));
}

/// A file NCCL cannot load: a clear finding with the file and line, placement judged on sysfs.
#[test]
fn malformed_topology_file() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    let cut = &NDV4[..NDV4.find("<cpu numaid=\"2\"").unwrap()];
    n.write(TOPO, format!("<?xml version=\"1.0\"?>\n{cut}"));
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1);
    let f = text(one(&r, "nccl-topo-file-invalid", "fail"));
    assert!(f.contains(TOPO_ABS) && f.contains("line 1"), "{f}");
    assert!(f.contains("XML declaration"), "{f}");
    // Truncated without the declaration: still invalid, at the end of the file.
    n.write(TOPO, cut);
    let (_, r) = n.check(&[], &[]);
    let f = text(one(&r, "nccl-topo-file-invalid", "fail"));
    assert!(f.contains("still open"), "{f}");
}

/// Hostile files: huge, deeply nested, entity expansion, bytes that are not UTF-8. Each is a
/// finding that names the file, in bounded time, and never a panic.
#[test]
fn hostile_topology_files() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    let laughs = {
        let mut s = String::from("<!DOCTYPE lolz [<!ENTITY l0 \"lol\">");
        for i in 1..10 {
            s += &format!("<!ENTITY l{i} \"{}\">", format!("&l{};", i - 1).repeat(10));
        }
        s + "]>\n<system version=\"1\">&l9;</system>\n"
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("huge", vec![b' '; 4 << 20], "nccl-topo-file-unreadable"),
        (
            "deep",
            "<pci>".repeat(100_000).into_bytes(),
            "nccl-topo-file-unreadable",
        ),
        ("entities", laughs.into_bytes(), "nccl-topo-file-invalid"),
        (
            "not UTF-8",
            NDV4.replace("AuthenticAMD", "Authentic\u{1}AMD")
                .into_bytes()
                .into_iter()
                .map(|b| if b == 1 { 0xff } else { b })
                .collect(),
            "nccl-topo-file-unreadable",
        ),
    ];
    for (what, bytes, code) in cases {
        n.write(TOPO, bytes);
        let ((_, r), took) = in_time(Duration::from_secs(5), || n.check(&[], &[]));
        assert!(
            took.last().unwrap() < &Duration::from_secs(5),
            "{what}: {took:?}"
        );
        let f = findings_with(&r, code);
        assert!(!f.is_empty(), "{what}: no {code}: {:#}", r["checks"]);
        assert!(text(f[0]).contains(TOPO_ABS), "{what}: {}", f[0]);
    }
}

/// A site GDR level of PHB, from /etc/nccl.conf, the config's `nccl.env` or `--nccl-env`: the
/// guest's NODE pairs pass, and the finding says where the level came from.
#[test]
fn site_gdr_level_phb() {
    let n = NodeCopy::of("azure-ndv4-vm");
    n.write("etc/nccl.conf", "NCCL_NET_GDR_LEVEL=PHB\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let f = text(one(&r, "gpu-nic-near", "pass"));
    assert!(
        f.contains("within NCCL_NET_GDR_LEVEL=PHB from /etc/nccl.conf line 1"),
        "{f}"
    );

    let n = NodeCopy::of("azure-ndv4-vm");
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("prolog.env");
    std::fs::write(&env, "# TaskProlog\nexport NCCL_NET_GDR_LEVEL=PHB\n").unwrap();
    let (c, r) = n.check(&["--nccl-env", env.to_str().unwrap()], &[]);
    assert_eq!(c, 0);
    let f = text(one(&r, "nccl-setting", "pass"));
    assert!(f.contains("prolog.env line 2"), "{f}");

    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, "nccl:\n  env:\n    NCCL_NET_GDR_LEVEL: PHB\n").unwrap();
    let (c, r) = n.check(&["--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(c, 0);
    let f = text(one(&r, "nccl-setting", "pass"));
    assert!(f.contains("config nccl.env"), "{f}");

    // The environment comes first, as NCCL reads it: it overrides /etc/nccl.conf.
    n.write("etc/nccl.conf", "NCCL_NET_GDR_LEVEL=LOC\n");
    let (c, r) = n.check(&["--config", cfg.to_str().unwrap()], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let f = text(one(&r, "nccl-setting", "pass"));
    assert!(
        f.contains("NCCL ignores the later NCCL_NET_GDR_LEVEL=LOC"),
        "{f}"
    );
}

/// An HCA list limits the NICs judged: with only the NUMA-1 NICs, the GPUs of the other NUMA
/// nodes are too far on NCCL's tree; a name the node lacks is said.
#[test]
fn hca_list_limits_the_nics() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    n.write(
        "etc/nccl.conf",
        format!("NCCL_TOPO_FILE={TOPO_ABS}\nNCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_9\n"),
    );
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1);
    assert_eq!(findings_with(&r, "gpu-nic-near").len(), 2);
    let far = findings_with(&r, "gpu-nic-too-far");
    assert_eq!(far.len(), 6);
    assert!(text(far[0]).contains("at SYS"), "{}", far[0]);
    let u = text(one(&r, "nccl-hca-unmatched", "warn"));
    assert!(u.contains("mlx5_9") && u.contains("/etc/nccl.conf"), "{u}");
}

/// A pinned GID index, against every RoCE port's table: slot 2 is RoCE v1 (a fail naming the
/// slot), slot 3 RoCE v2 IPv4 (a pass).
#[test]
fn pinned_gid_index() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.write("etc/nccl.conf", "NCCL_IB_GID_INDEX=2\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1);
    let f = text(one(&r, "nccl-gid-index-bad", "fail"));
    assert!(f.contains("RoCE v1") && f.contains("/gids/2"), "{f}");
    n.write("etc/nccl.conf", "NCCL_IB_GID_INDEX=3\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    one(&r, "nccl-gid-index-ok", "pass");
    n.write("etc/nccl.conf", "NCCL_IB_GID_INDEX=9\n");
    let (_, r) = n.check(&[], &[]);
    let f = text(one(&r, "nccl-gid-index-bad", "fail"));
    assert!(f.contains("slot 9 is empty"), "{f}");
}

/// Lines of nccl.conf that do not do what they seem: shown, with the line NCCL would read.
#[test]
fn conf_lines_nccl_ignores() {
    let n = NodeCopy::of("azure-ndv4-vm");
    n.write("etc/nccl.conf", "NCCL_NET_GDR_LEVEL = PHB\n");
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "the level is not read: NODE stays too far");
    let f = text(one(&r, "nccl-conf-line-ignored", "warn"));
    assert!(
        f.contains("/etc/nccl.conf") && f.contains("NCCL_NET_GDR_LEVEL=PHB"),
        "{f}"
    );
}

/// Each setting that takes GPUDirect RDMA away, or that NCCL reads otherwise than it looks,
/// in /etc/nccl.conf of the healthy 8-GPU RoCE node (RDMA devices, no peer-memory module): its
/// own finding. And an nccl.conf that cannot be read, and a topology file that turns GDR off for
/// a GPU.
#[test]
fn settings_that_take_gdr_away() {
    // (nccl.conf, code, status)
    let cases = [
        ("NCCL_IB_DISABLE=1", "nccl-ib-disabled", "fail"),
        ("NCCL_NET=Socket", "nccl-net-not-ib", "fail"),
        ("NCCL_NET=AWS-OFI", "nccl-net-not-ib", "warn"),
        ("NCCL_NET_GDR_LEVEL=LOC", "nccl-gdr-level-off", "fail"),
        ("NCCL_NET_GDR_LEVEL=phb", "nccl-gdr-level-ignored", "warn"),
        ("NCCL_NET_GDR_READ=0", "nccl-gdr-read-off", "warn"),
        ("NCCL_DMABUF_ENABLE=0", "nccl-dmabuf-disabled", "fail"),
        (
            "NCCL_TOPO_FILE=/nonexistent/topo.xml",
            "nccl-topo-file-missing",
            "warn",
        ),
    ];
    let n = NodeCopy::of("healthy-8gpu-roce");
    let mut wrong = Vec::new();
    for (conf, code, status) in cases {
        n.write("etc/nccl.conf", format!("{conf}\n"));
        let (_, r) = n.check(&[], &[]);
        if findings_with(&r, code)
            .iter()
            .all(|f| f["status"] != status)
        {
            wrong.push(format!("{conf}: no {status} {code} in {:?}", codes(&r)));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    // A directory where NCCL reads a file: unknown, never "not set".
    std::fs::remove_file(n.root.join("etc/nccl.conf")).unwrap();
    std::fs::create_dir(n.root.join("etc/nccl.conf")).unwrap();
    let (_, r) = n.check(&[], &[]);
    let f = text(one(&r, "nccl-conf-unreadable", "unknown"));
    assert!(f.contains("not a regular file (directory)"), "{f}");
    // gdr="0" on a GPU of the topology file: NCCL keeps it.
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    let gpu =
        r#"<pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"/>"#;
    assert!(NDV4.contains(gpu));
    let off = r#"<pci busid="0003:00:00.0" class="0x030200" link_speed="16 GT/s" link_width="16"><gpu dev="0" sm="80" gdr="0"/></pci>"#;
    n.write(TOPO, NDV4.replace(gpu, off));
    let (_, r) = n.check(&[], &[]);
    let f = text(one(&r, "nccl-topo-file-gdr-off", "fail"));
    assert!(f.contains("GPU 0003:00:00.0"), "{f}");
}

/// A RoCE port whose netdev is a bond with a vxlan stacked on it: the vxlan's IPv4 GID comes
/// first in the table (index 3), the bond's own at 5. The bond's is chosen, with the candidates
/// and why, by rdma-gid and by `gdrdoctor nccl` alike.
#[test]
fn gid_choice_on_bond_and_vxlan() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    let port = "sys/class/infiniband/mlx5_0/ports/1";
    let v4 = |ip: &str| format!("0000:0000:0000:0000:0000:ffff:{ip}");
    let table = [
        (
            "fe80:0000:0000:0000:ba3f:d2ff:fea1:b2c4".to_owned(),
            "IB/RoCE v1",
            "bond0",
        ),
        (
            "fe80:0000:0000:0000:ba3f:d2ff:fea1:b2c4".to_owned(),
            "RoCE v2",
            "bond0",
        ),
        (v4("0ac8:0005"), "IB/RoCE v1", "vxlan100"),
        (v4("0ac8:0005"), "RoCE v2", "vxlan100"),
        (v4("c0a8:0101"), "IB/RoCE v1", "bond0"),
        (v4("c0a8:0101"), "RoCE v2", "bond0"),
    ];
    for (i, (gid, ty, ndev)) in table.iter().enumerate() {
        n.write(&format!("{port}/gids/{i}"), format!("{gid}\n"));
        n.write(&format!("{port}/gid_attrs/types/{i}"), format!("{ty}\n"));
        n.write(&format!("{port}/gid_attrs/ndevs/{i}"), format!("{ndev}\n"));
    }
    let (_, r) = n.check(&[], &[]);
    let f = findings_with(&r, "roce-v2-ipv4")
        .into_iter()
        .find(|f| f["subject"] == "mlx5_0 port 1")
        .unwrap();
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("NCCL_IB_GID_INDEX=5"), "{m}");
    assert!(m.contains("2 candidates") && m.contains("vxlan100"), "{m}");
    assert!(m.contains("bond0 is the port's own"), "{m}");

    let out = gdrdoctor(&["--root", n.root.to_str().unwrap(), "nccl"]);
    let s = stdout(&out);
    assert!(s.contains("mlx5_0 port 1: index 5"), "{s}");
}

/// `gdrdoctor nccl` judges on NCCL's tree (no GDR level needed where the topology file gives
/// PIX) and says what nccl.conf already sets: the same value, or the line it would change.
#[test]
fn nccl_settings_agree_with_nccl_conf() {
    let n = NodeCopy::of("azure-ndv4-vm-topo");
    let out = stdout(&gdrdoctor(&["--root", n.root.to_str().unwrap(), "nccl"]));
    assert!(out.contains("# NCCL_NET_GDR_LEVEL not set"), "{out}");
    assert!(out.contains("the farthest nearest NIC is at PIX"), "{out}");

    let n = NodeCopy::of("azure-ndv4-vm");
    n.write(
        "etc/nccl.conf",
        "NCCL_NET_GDR_LEVEL=SYS\nNCCL_IB_HCA=mlx5\n",
    );
    let out = stdout(&gdrdoctor(&["--root", n.root.to_str().unwrap(), "nccl"]));
    assert!(
        out.contains(
            "/etc/nccl.conf line 1 sets NCCL_NET_GDR_LEVEL=SYS now: this changes that line to"
        ),
        "{out}"
    );
    assert!(
        out.contains("/etc/nccl.conf line 2 sets NCCL_IB_HCA=mlx5 now"),
        "{out}"
    );
}

/// NCCL has no NODE (src/graph/topo.h: LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS, NET,
/// DIS): sysfs's NODE is PHB in its tree, and NCCL ignores NCCL_NET_GDR_LEVEL=NODE. Every
/// setting gdrdoctor writes names PHB; a finding that states the level NCCL uses says both.
#[test]
fn node_is_phb_for_nccl() {
    for name in ["placement-node", "azure-ndv4-vm"] {
        let n = NodeCopy::of(name);
        let root = n.root.to_str().unwrap();
        let out = stdout(&gdrdoctor(&["--root", root, "nccl"]));
        assert!(!out.contains("NCCL_NET_GDR_LEVEL=NODE"), "{name}: {out}");
        assert!(!out.contains("NCCL_NET_GDR_LEVEL='NODE'"), "{name}: {out}");
        assert!(
            out.contains("export NCCL_NET_GDR_LEVEL='PHB'"),
            "{name}: {out}"
        );
        assert!(out.contains("\nNCCL_NET_GDR_LEVEL=PHB\n"), "{name}: {out}");
        assert!(
            out.contains("at NODE in sysfs (PHB for NCCL)"),
            "{name}: {out}"
        );

        let (_, r) = n.check(&[], &[]);
        let f = one(&r, "gpu-nic-too-far", "fail");
        let t = text(f);
        assert!(!t.contains("NCCL_NET_GDR_LEVEL=NODE"), "{name}: {t}");
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .contains("at NODE in sysfs (PHB for NCCL)"),
            "{name}: {t}"
        );
        // The fix script writes only values NCCL reads.
        let script = stdout(&gdrdoctor(&["--root", root, "fix"]));
        assert!(!script.contains("GDR_LEVEL=NODE"), "{name}: {script}");
    }
}

/// A pin that lands on a valid RoCE v2 GID, but the vxlan's stacked on the port's bond, not the
/// bond's own: a warn naming both netdevs and the index of the port's own GID (5). With the pin
/// on the bond's own GID, nothing to say beyond the pass.
#[test]
fn pinned_gid_index_on_a_stacked_netdev() {
    let n = NodeCopy::of("healthy-8gpu-roce");
    n.vxlan_stacked_on_bond();
    // Only mlx5_0, so that the pin is judged on that port alone.
    n.write(
        "etc/nccl.conf",
        "NCCL_IB_HCA==mlx5_0\nNCCL_IB_GID_INDEX=3\n",
    );
    let (_, r) = n.check(&[], &[]);
    let f = one(&r, "nccl-gid-index-stacked", "warn");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("mlx5_0 port 1: GID 3 is RoCE v2 10.200.0.5 on vxlan100, not on the port's own netdev bond0; bond0's own RoCE v2 GID is at index 5"),
        "{m}"
    );
    let fix = f["fix"].to_string();
    assert!(fix.contains("NCCL_IB_GID_INDEX=5"), "{fix}");
    assert!(findings_with(&r, "nccl-gid-index-ok").is_empty());

    n.write(
        "etc/nccl.conf",
        "NCCL_IB_HCA==mlx5_0\nNCCL_IB_GID_INDEX=5\n",
    );
    let (_, r) = n.check(&[], &[]);
    assert!(findings_with(&r, "nccl-gid-index-stacked").is_empty());
    one(&r, "nccl-gid-index-ok", "pass");
}

/// The VMBus part of a Hyper-V device path: `LNXSYSTM:00/.../VMBUS:01/<guid>/`.
const VMBUS: &str = "LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/";

/// `path` (relative to the root) without the VMBus part.
fn unvmbus(path: &std::path::Path) -> PathBuf {
    let s = path.to_str().unwrap();
    match s.find(VMBUS) {
        Some(at) => {
            let rest = &s[at + VMBUS.len()..];
            let after_guid = rest.find('/').map(|i| &rest[i + 1..]).unwrap_or("");
            PathBuf::from(format!("{}{after_guid}", &s[..at]))
        }
        None => path.to_owned(),
    }
}

/// `target` resolved lexically against `dir` (both relative to the root).
fn resolve(dir: &std::path::Path, target: &std::path::Path) -> PathBuf {
    let mut out: Vec<std::ffi::OsString> = dir.iter().map(|c| c.to_owned()).collect();
    for c in target.iter() {
        match c.to_str().unwrap() {
            ".." => {
                out.pop();
            }
            "." => {}
            _ => out.push(c.to_owned()),
        }
    }
    out.iter().collect()
}

/// The azure-ndv4-vm guest with its PCI host bridges taken out from under VMBus: every GPU and
/// NIC then sits directly on a host bridge of its own under /sys/devices, with no bridge above
/// it (the flat single-root-bus shape a KVM guest without switches shows), DMI saying QEMU.
fn flat_vm() -> NodeCopy {
    let n = NodeCopy::of("azure-ndv4-vm");
    let root = n.root.clone();
    // Every symlink, re-pointed: the target resolved from where the link was, the VMBus part
    // taken out of both, made relative again from where the link is now.
    let mut links = Vec::new();
    let mut stack = vec![root.join("sys")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let t = e.file_type().unwrap();
            if t.is_symlink() {
                links.push(e.path().strip_prefix(&root).unwrap().to_owned());
            } else if t.is_dir() {
                stack.push(e.path());
            }
        }
    }
    let devices = root.join("sys/devices");
    let guests = devices.join(VMBUS);
    for g in std::fs::read_dir(&guests).unwrap() {
        let g = g.unwrap().path();
        for bus in std::fs::read_dir(&g).unwrap() {
            let bus = bus.unwrap().path();
            std::fs::rename(&bus, devices.join(bus.file_name().unwrap())).unwrap();
        }
    }
    std::fs::remove_dir_all(devices.join("LNXSYSTM:00")).unwrap();
    for old in links {
        let new = unvmbus(&old);
        let abs = root.join(&new);
        let target = std::fs::read_link(&abs).unwrap();
        let to = unvmbus(&resolve(old.parent().unwrap(), &target));
        let from = new.parent().unwrap();
        let common = from
            .iter()
            .zip(to.iter())
            .take_while(|(a, b)| a == b)
            .count();
        let mut rel = PathBuf::new();
        for _ in common..from.iter().count() {
            rel.push("..");
        }
        for c in to.iter().skip(common) {
            rel.push(c);
        }
        std::fs::remove_file(&abs).unwrap();
        std::os::unix::fs::symlink(rel, &abs).unwrap();
    }
    for (f, v) in [
        ("sys_vendor", "QEMU"),
        ("product_name", "Standard PC (Q35 + ICH9, 2009)"),
        ("board_vendor", ""),
        ("board_name", ""),
    ] {
        n.write(&format!("sys/devices/virtual/dmi/id/{f}"), format!("{v}\n"));
    }
    n
}

/// The two VM shapes besides Hyper-V: a single flat root bus, and QEMU's PCI expander bridges.
/// Each is recognised, and the placement finding says that placement seen from inside a VM is
/// the hypervisor's picture, with the provider's topology file (not a card move) as the fix.
#[test]
fn vm_shapes_flat_root_bus_and_qemu_pxb() {
    let n = flat_vm();
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "gpu-nic-too-far", "fail");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("This is a VM, and placement seen from inside it is the hypervisor's picture (every GPU and NIC sits directly on a host bridge"),
        "{m}"
    );
    assert!(!m.contains("Hyper-V"), "{m}");
    let fix = f["fix"]["summary"].as_str().unwrap();
    assert!(
        fix.contains("Get your provider's NCCL topology file") && fix.contains("NCCL_TOPO_FILE"),
        "{fix}"
    );
    assert!(!text(f).contains("PCIe switch"), "{f}");

    // A QEMU PCIe expander bridge (1b36:000b) on the root bus: the pxb shape.
    let pxb = "sys/devices/pci0000:00/0000:00:05.0";
    for (file, v) in [
        ("vendor", "0x1b36"),
        ("device", "0x000b"),
        ("class", "0x060000"),
        ("subsystem_vendor", "0x1af4"),
        ("subsystem_device", "0x1100"),
        ("numa_node", "-1"),
    ] {
        n.write(&format!("{pxb}/{file}"), format!("{v}\n"));
    }
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:05.0",
        n.root.join("sys/bus/pci/devices/0000:00:05.0"),
    )
    .unwrap();
    let (c, r) = n.check(&[], &[]);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    let f = one(&r, "gpu-nic-too-far", "fail");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains(
            "placement seen from inside it is the hypervisor's picture (QEMU PCI expander bridges"
        ),
        "{m}"
    );
    assert!(
        text(f).contains("1b36:000b (QEMU PCIe expander bridge)"),
        "{f}"
    );
}
