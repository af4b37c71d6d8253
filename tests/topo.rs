//! `gdrdoctor topo`: the matrix for the placement fixtures with known answers, its JSON schema,
//! and the nvidia-smi shape.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

mod common;
use common::*;

/// (fixture, GPU0-NIC0 level) as each fixture's FIXTURE.md states it.
const KNOWN: &[(&str, &str)] = &[
    ("placement-pix", "PIX"),
    ("placement-pxb", "PXB"),
    ("placement-phb", "PHB"),
    ("placement-node", "NODE"),
    ("placement-sys", "SYS"),
    // Port types unreadable (64-byte config): the same answer from the path's shape.
    ("config-unprivileged", "PIX"),
    ("caplist-loop", "PIX"),
    ("lab-switch-pt", "PIX"),
];

fn topo(root: &str) -> serde_json::Value {
    let cfg = format!("{root}/config.yaml");
    let mut args = vec!["--root", root];
    if crate_dir().join(&cfg).is_file() {
        args.extend(["--config", cfg.as_str()]);
    }
    args.extend(["topo", "--format", "json"]);
    let out = gdrdoctor(&args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    json(&out)
}

fn level(t: &serde_json::Value, a: &str, b: &str) -> String {
    let idx = |n: &str| {
        t["devices"]
            .as_array()
            .unwrap()
            .iter()
            .position(|d| d["name"] == n)
            .unwrap()
    };
    t["matrix"][idx(a)][idx(b)]
        .as_str()
        .unwrap_or("null")
        .to_owned()
}

#[test]
fn known_levels() {
    for (fixture, want) in KNOWN {
        let t = topo(&format!("fixtures/{fixture}"));
        assert_eq!(level(&t, "GPU0", "NIC0"), *want, "{fixture}");
        assert_eq!(level(&t, "NIC0", "GPU0"), *want, "{fixture}: symmetric");
        assert_eq!(level(&t, "GPU0", "GPU0"), "X");
    }
}

#[test]
fn eight_gpu_node_matches_its_wiring() {
    // 2 sockets x 2 host bridges, one switch each holding 2 GPUs and 2 NICs.
    let t = topo("fixtures/healthy-8gpu-roce");
    assert_eq!(level(&t, "GPU0", "NIC0"), "PIX");
    assert_eq!(level(&t, "GPU0", "NIC1"), "PIX");
    assert_eq!(level(&t, "GPU0", "NIC2"), "NODE");
    assert_eq!(level(&t, "GPU0", "NIC4"), "SYS");
    assert_eq!(level(&t, "GPU0", "GPU1"), "PIX");
    assert_eq!(level(&t, "NIC6", "NIC7"), "PIX");
    let nic0 = &t["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "NIC0")
        .unwrap()
        .clone();
    assert_eq!(
        (
            nic0["kind"].as_str(),
            nic0["rdma_device"].as_str(),
            nic0["bdf"].as_str()
        ),
        (Some("nic"), Some("mlx5_0"), Some("0000:19:00.0"))
    );
    assert_eq!(nic0["numa_node"], 0);
}

#[test]
fn vm_gpus_on_the_root_bus_meet_in_the_host_bridge() {
    // The H200 VM: both GPUs right on bus 00 (nvidia-smi shows NV18 for their NVLink; PCIe-wise
    // they share only the host bridge).
    let t = topo("fixtures/h200x2-vm");
    assert_eq!(level(&t, "GPU0", "GPU1"), "PHB");
    assert_eq!(t["devices"].as_array().unwrap().len(), 2);
}

#[test]
fn numa_unknown_is_said() {
    let t = topo("fixtures/placement-node");
    assert!(
        t["numa_assumed"].as_array().unwrap().is_empty(),
        "both NUMA nodes known there"
    );
}

#[test]
fn human_output_has_nvidia_smi_shape() {
    let out = stdout(&gdrdoctor(&["--root", "fixtures/placement-pileup", "topo"]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next().unwrap(),
        "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity"
    );
    assert!(
        lines
            .next()
            .unwrap()
            .starts_with("GPU0\t X \tPIX\tPIX\tPHB\t"),
        "{out}"
    );
    for needle in [
        "Legend:",
        "  PIX  = Connection traversing at most a single PCIe bridge",
        "NIC Legend:",
        "  NIC0: mlx5_0 (",
        "  NIC1: mlx5_1 (",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
    insta::assert_snapshot!("placement-pileup.topo", out);
}

#[test]
fn json_fields_are_documented() {
    let doc = std::fs::read_to_string(crate_dir().join("docs/topo-json.md")).unwrap();
    let t = topo("fixtures/healthy-8gpu-roce");
    let mut missing = Vec::new();
    for key in t.as_object().unwrap().keys() {
        if !doc.contains(&format!("| `{key}` |")) {
            missing.push(key.clone());
        }
    }
    for key in t["devices"][0].as_object().unwrap().keys() {
        if !doc.contains(&format!("| `devices[].{key}` |")) {
            missing.push(format!("devices[].{key}"));
        }
    }
    assert!(
        missing.is_empty(),
        "undocumented in docs/topo-json.md: {missing:?}"
    );
}

#[test]
fn crowded_nic_warns_when_the_idle_one_is_within_policy() {
    // placement-pileup: both GPUs' only nearest NIC is mlx5_0 (PIX); mlx5_1 is PHB from both.
    // Within the default PXB policy the idle NIC is no help; with PHB allowed it is.
    let r = json(&gdrdoctor(&[
        "--root",
        "fixtures/placement-pileup",
        "check",
        "--format",
        "json",
    ]));
    assert!(!codes(&r).iter().any(|(c, _)| c == "gpu-nic-crowded"));
    let cfg = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    std::fs::write(cfg.path(), "thresholds:\n  gdr_level: PHB\n").unwrap();
    let r = json(&gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        "fixtures/placement-pileup",
        "check",
        "--format",
        "json",
    ]));
    let crowded: Vec<_> = check(&r, "pcie-placement")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "gpu-nic-crowded")
        .collect();
    assert_eq!(crowded.len(), 1, "{r:#}");
    assert_eq!(crowded[0]["status"], "warn");
    assert!(
        crowded[0]["message"]
            .as_str()
            .unwrap()
            .contains("mlx5_1 (PHB from GPU"),
        "{}",
        crowded[0]["message"]
    );
    // And a PHB node passes placement under a PHB policy.
    let r = json(&gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        "fixtures/placement-phb",
        "check",
        "--format",
        "json",
    ]));
    assert_eq!(check(&r, "pcie-placement")["status"], "pass");
}
