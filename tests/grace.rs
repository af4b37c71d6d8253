//! Grace nodes as NCCL runs them (issue 38): a GPU joined to its Grace by NVLink-C2C reaches the
//! NICs of that Grace over it, and NCCL's rule for that differs by release. The views agree
//! (check, topo, `gdrdoctor nccl`), the release is read from the node's files offline as live,
//! and NVML's word on the C2C link, where NVML was asked, wins over the platform's signature.

use crate::common::*;

/// The findings of `pcie-placement` with `code`.
fn placement<'a>(r: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    check(r, "pcie-placement")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

#[test]
fn gb200_gpus_reach_their_grace_nics_over_c2c_with_gdr() {
    let r = json(&gdrdoctor(&[
        "--root",
        fixture("gb200-tray"),
        "check",
        "--format",
        "json",
    ]));
    let c2c = placement(&r, "gpu-nic-c2c");
    assert_eq!(c2c.len(), 4, "{r:#}");
    for f in &c2c {
        let m = f["message"].as_str().unwrap();
        assert!(m.contains("over NVLink-C2C"), "{m}");
        assert!(m.contains("mode Default"), "{m}");
        assert!(m.contains("NCCL 2.27.3"), "{m}");
    }
    assert_eq!(check(&r, "pcie-placement")["status"], "pass");
    // The BlueField-3 front ends are NICs of the same Graces, not what a PCIe rule fails.
    assert!(placement(&r, "gpu-nic-too-far").is_empty());
}

/// `topo` shows the pairs as GDR over C2C, where nvidia-smi prints SYS: the cell and the
/// decision line in the human output, `via` and `mode` in the JSON.
#[test]
fn topo_shows_gdr_over_c2c() {
    for name in ["gb200-tray", "gb300-tray"] {
        let human = stdout(&gdrdoctor(&["--root", fixture(name), "topo"]));
        let gpu0 = human.lines().nth(1).unwrap();
        assert!(gpu0.starts_with("GPU0\t"), "{human}");
        assert!(gpu0.contains("\tC2C\t"), "{name}: {gpu0}");
        assert!(
            human.contains("  C2C  = "),
            "{name}: the legend says what C2C is"
        );
        assert!(
            human.contains(
                "GPU0: GDR: NIC0, NIC1, NIC4 over C2C (NCCL's P2C; sysfs NODE), mode Default"
            ),
            "{name}: {human}"
        );
        let t = json(&gdrdoctor(&[
            "--root",
            fixture(name),
            "topo",
            "--format",
            "json",
        ]));
        for g in t["gdr"]["gpus"].as_array().unwrap() {
            assert_eq!(g["verdict"], "gdr", "{name}: {g}");
            assert_eq!(g["via"], "c2c", "{name}: {g}");
            assert_eq!(g["mode"], "default", "{name}: {g}");
        }
        assert_eq!(t["matrix"][0][4], "C2C", "{name}");
    }
}

/// NCCL 2.26 leaves GPUDirect RDMA over C2C off unless NCCL_NET_GDR_C2C=1: the placement fails
/// and its fix, and `gdrdoctor nccl`, set it; NCCL_NET_GDR_LEVEL is never what they propose.
#[test]
fn nccl_226_needs_net_gdr_c2c() {
    let r = json(&gdrdoctor(&[
        "--root",
        fixture("gb200-nccl226"),
        "check",
        "--format",
        "json",
    ]));
    let fails = placement(&r, "gpu-nic-c2c-no-gdr");
    assert_eq!(fails.len(), 4, "{r:#}");
    let fix = fails[0]["fix"].to_string();
    assert!(fix.contains("NCCL_NET_GDR_C2C=1"), "{fix}");
    assert!(!fix.contains("NCCL_NET_GDR_LEVEL"), "{fix}");
    assert!(!fix.contains("PCIe switch"), "no card to move: {fix}");
    let m = fails[0]["message"].as_str().unwrap();
    assert!(m.contains("NCCL 2.26.5"), "{m}");
    let nccl = stdout(&gdrdoctor(&["--root", fixture("gb200-nccl226"), "nccl"]));
    assert!(nccl.contains("export NCCL_NET_GDR_C2C='1'"), "{nccl}");
    assert!(nccl.contains("\nNCCL_NET_GDR_C2C=1\n"), "{nccl}");
    assert!(!nccl.contains("export NCCL_NET_GDR_LEVEL"), "{nccl}");
}

/// From 2.27 NCCL uses GDR over C2C by default: `gdrdoctor nccl` proposes neither C2C setting
/// nor a level, and leaves the BlueField-3 front ends out of NCCL_IB_HCA.
#[test]
fn nccl_227_needs_nothing_and_bluefield_is_no_rail() {
    let nccl = stdout(&gdrdoctor(&["--root", fixture("gb200-tray"), "nccl"]));
    assert!(!nccl.contains("export NCCL_NET_GDR_C2C"), "{nccl}");
    assert!(!nccl.contains("export NCCL_NET_GDR_LEVEL"), "{nccl}");
    assert!(nccl.contains("# NCCL 2.27.3 ("), "{nccl}");
    assert!(
        nccl.contains("export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1'"),
        "{nccl}"
    );
    assert!(
        nccl.contains("mlx5_4 (0006:03:00.0, 15b3:a2dc): a BlueField DPU's port"),
        "{nccl}"
    );
    // A release stated on the command line decides: 2.26 needs the setting.
    let nccl = stdout(&gdrdoctor(&[
        "--root",
        fixture("gb200-tray"),
        "nccl",
        "--nccl-version",
        "2.26.2",
    ]));
    assert!(nccl.contains("export NCCL_NET_GDR_C2C='1'"), "{nccl}");
}

/// NCCL_NET_GDR_C2C=0 with NCCL 2.27: nccl-config fails naming GDR off, and its fix sets the
/// line to 1; the placement fails with it.
#[test]
fn net_gdr_c2c_off_fails_nccl_config() {
    let r = json(&gdrdoctor(&[
        "--root",
        fixture("gb200-gdr-c2c-off"),
        "check",
        "--format",
        "json",
    ]));
    let f = findings_with(&r, "nccl-gdr-c2c-off");
    assert_eq!(f.len(), 1, "{r:#}");
    assert_eq!(f[0]["status"], "fail");
    let m = f[0]["message"].as_str().unwrap();
    assert!(
        m.contains("turns GPUDirect RDMA over NVLink-C2C off"),
        "{m}"
    );
    assert!(m.contains("/etc/nccl.conf line 1"), "{m}");
    let fix = f[0]["fix"].to_string();
    assert!(
        fix.contains("gdrdoctor edit set /etc/nccl.conf NCCL_NET_GDR_C2C=1"),
        "{fix}"
    );
    assert_eq!(placement(&r, "gpu-nic-c2c-no-gdr").len(), 4);
    // Before 2.26 NCCL does not read the setting: nothing to say about it.
    let cfg = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(cfg.path(), "nccl:\n  version: \"2.25.1\"\n").unwrap();
    let r = json(&gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        fixture("gb200-gdr-c2c-off"),
        "check",
        "--format",
        "json",
    ]));
    assert!(findings_with(&r, "nccl-gdr-c2c-off").is_empty(), "{r:#}");
    let f = placement(&r, "gpu-nic-c2c-no-gdr");
    assert!(
        f[0]["message"]
            .as_str()
            .unwrap()
            .contains("NCCL up to 2.25"),
        "{r:#}"
    );
    assert!(f[0]["fix"].to_string().contains("NCCL 2.27 or later"));
}

/// The release is read from the node's files: without them the decision is unknown (the
/// releases differ), never a pass or a fail; a capture keeps what was read, and the copy
/// decides as the node did.
#[test]
fn release_from_the_node_files_offline_as_live() {
    let node = NodeCopy::of("gb200-tray");
    node.remove("usr/lib/aarch64-linux-gnu/libnccl.so.2");
    node.remove("usr/lib/aarch64-linux-gnu/libnccl.so.2.27.3");
    // dpkg's list still names the file the package installed.
    let (_, r) = node.check(&[], &[]);
    let m = placement(&r, "gpu-nic-c2c")[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(m.contains("/var/lib/dpkg/info/libnccl2.list"), "{m}");
    node.remove("var/lib/dpkg/info/libnccl2.list");
    let (_, r) = node.check(&[], &[]);
    let unknown = placement(&r, "gpu-nic-c2c-release-unknown");
    assert_eq!(unknown.len(), 4, "{r:#}");
    assert_eq!(check(&r, "pcie-placement")["status"], "unknown");
    assert!(unknown[0]["fix"].to_string().contains("nccl.version"));
    // nccl.h names it too.
    node.write(
        "usr/include/nccl.h",
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 26\n#define NCCL_PATCH 5\n",
    );
    let (_, r) = node.check(&[], &[]);
    assert_eq!(placement(&r, "gpu-nic-c2c-no-gdr").len(), 4, "{r:#}");

    // A capture of the fixture keeps the library's link and name: offline equals the root.
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("gb200.tar.gz");
    let out = gdrdoctor(&[
        "--root",
        fixture("gb200-tray"),
        "capture",
        "--no-gpu-probe",
        cap.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let r = json(&gdrdoctor(&[
        "--root",
        cap.to_str().unwrap(),
        "check",
        "--format",
        "json",
    ]));
    let m = placement(&r, "gpu-nic-c2c")[0]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(m.contains("NCCL 2.27.3"), "{m}");
}

/// NVML's word on the C2C link wins over the signature where NVML was asked: a capture whose
/// recorded answer says the links are down leaves NCCL the PCIe path (NODE: too far), and one
/// of a GH200 whose answer has no C2C field keeps the signature.
#[test]
fn nvml_decides_the_c2c_link_where_it_was_asked() {
    let node = NodeCopy::of("gb200-tray");
    let devices: Vec<serde_json::Value> = [
        "0008:01:00.0",
        "0009:01:00.0",
        "0018:01:00.0",
        "0019:01:00.0",
    ]
    .iter()
    .enumerate()
    .map(|(i, b)| {
        serde_json::json!({
            "index": i, "bus_id": format!("0000{b}"), "name": "NVIDIA GB200",
            "bar1_total": null, "bar1_used": null, "nvlinks": [], "nvlinks_down": [],
            "persistence_mode": true, "fabric": null,
            // GPU 0's links all down; the others up.
            "c2c": {"links": 10, "active": if i == 0 { 0 } else { 10 }, "max_bw": 45000},
            "errors": []
        })
    })
    .collect();
    let recorded = serde_json::json!({
        "nvml": {"status": "ready", "library": "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
                 "driver_version": "570.133.20", "cuda_driver_version": 12080,
                 "devices": devices, "errors": []},
        "cleared_env": []
    });
    node.write("gdrdoctor/nvml.json", recorded.to_string());
    let (_, r) = node.check(&[], &[]);
    let far = placement(&r, "gpu-nic-too-far");
    assert_eq!(far.len(), 1, "{r:#}");
    assert!(
        far[0]["subject"]
            .as_str()
            .unwrap()
            .starts_with("GPU 0008:01:00.0")
    );
    assert_eq!(placement(&r, "gpu-nic-c2c").len(), 3);
    let ev = placement(&r, "gpu-nic-c2c")[0]["evidence"].to_string();
    assert!(
        ev.contains("/gdrdoctor/nvml.json"),
        "NVML's answer is the evidence: {ev}"
    );
    // The gpu check names the links down, with the fields NVML answered.
    let down = findings_with(&r, "gpu-c2c-down");
    assert_eq!(down.len(), 1, "{r:#}");
    assert_eq!(down[0]["status"], "fail");
    assert!(
        down[0]["subject"]
            .as_str()
            .unwrap()
            .starts_with("GPU 0008:01:00.0")
    );
    assert!(
        down[0]["evidence"]
            .to_string()
            .contains("C2C_LINK_COUNT 10, 0 with")
    );
}
