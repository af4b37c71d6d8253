//! Every fixture under fixtures/ (except the broken corpus, tests/broken.rs) checked end to end:
//! exit code, every check's status, the codes that must appear, and whole-report snapshots in
//! both formats.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

mod common;
use common::*;

struct Case {
    name: &'static str,
    /// A config file inside the fixture, for fixtures that need one (declared accelerators).
    config: Option<&'static str>,
    exit: i32,
    /// In CHECKS order.
    statuses: [&'static str; 10],
    /// (code, status) pairs that must be in the report.
    codes: &'static [(&'static str, &'static str)],
}

const CHECKS: [&str; 10] = [
    "gpu-driver",
    "gpu",
    "peer-memory",
    "pcie-placement",
    "acs",
    "pcie-link",
    "iommu",
    "rdma-link",
    "rdma-gid",
    "rdma-access",
];

const CASES: &[Case] = &[
    // The real H200 VM capture: no RDMA device, but the DMA-BUF path is the one it could use.
    Case {
        name: "h200x2-vm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "skip", "skip", "pass", "pass", "fail", "skip", "skip",
        ],
        codes: &[
            ("gpu-driver-bound", "pass"),
            ("gpu-ready", "pass"),
            ("gpu-probe-skipped", "skip"),
            ("gdr-path-dmabuf", "pass"),
            ("iommu-off", "pass"),
            ("rdma-no-device", "fail"),
            ("rdma-gid-no-device", "skip"),
        ],
    },
    Case {
        name: "healthy-8gpu-roce",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-dmabuf", "pass"),
            ("iommu-passthrough", "pass"),
            ("rdma-port-active", "pass"),
            ("roce-v2-ipv4", "pass"),
        ],
    },
    Case {
        name: "healthy-4gpu-ib-peermem",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-peermem", "pass"),
            ("iommu-off", "pass"),
            ("ib-lid-assigned", "pass"),
        ],
    },
    Case {
        name: "amd-mi300x-roce",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-dmabuf", "pass"),
            ("iommu-passthrough", "pass"),
            ("roce-v2-ipv4", "pass"),
        ],
    },
    Case {
        name: "amd-no-gdr-path",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("amd-no-gdr-path", "fail")],
    },
    Case {
        name: "peermem-missing-proprietary",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("peermem-not-loaded", "fail")],
    },
    Case {
        name: "peermem-unregistered",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("peermem-not-registered", "fail")],
    },
    Case {
        name: "iommu-translated",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "pass", "skip",
        ],
        codes: &[("iommu-translated", "fail")],
    },
    Case {
        name: "rdma-port-down",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "pass", "skip",
        ],
        codes: &[("rdma-port-down", "fail"), ("rdma-port-active", "pass")],
    },
    Case {
        name: "roce-v1-only",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "skip",
        ],
        codes: &[("roce-v1-only", "fail")],
    },
    Case {
        name: "roce-gid-index-differs",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "skip",
        ],
        codes: &[("roce-gid-index-differs", "warn"), ("roce-v2-ipv4", "pass")],
    },
    Case {
        name: "roce-mtu-1500",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "pass", "skip",
        ],
        codes: &[("roce-mtu-small", "warn")],
    },
    Case {
        name: "ib-no-sm",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "fail", "skip",
        ],
        codes: &[("rdma-port-init", "fail"), ("ib-no-lid", "fail")],
    },
    Case {
        name: "roce-no-ip",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "fail", "skip",
        ],
        codes: &[("roce-no-ip-gid", "fail"), ("roce-v2-ipv4", "pass")],
    },
    Case {
        name: "roce-ipv6-only",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "warn", "skip",
        ],
        codes: &[("roce-no-ipv4-gid", "warn")],
    },
    // aarch64 with SMMUv3 in strict mode on a 6.8 kernel: the fix must not be a blind
    // iommu.passthrough=1 (it broke CUDA before 6.11).
    Case {
        name: "arm64-iommu-translated",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "fail", "pass", "pass", "skip",
        ],
        // Grace-style: GPU and NIC on two host bridges of one NUMA node.
        codes: &[("iommu-translated", "fail"), ("gpu-nic-too-far", "fail")],
    },
    // A real-kernel capture from the lab VM (tests/lab, scenario switch-pt): Soft-RoCE on an
    // e1000e behind a PCIe switch, a virtio GPU declared an accelerator.
    Case {
        name: "lab-switch-pt",
        config: Some("config.yaml"),
        exit: 0,
        statuses: [
            "pass", "skip", "unknown", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gdr-path-unknown", "unknown"),
            ("rdma-port-active", "pass"),
            ("roce-v2-ipv4", "pass"),
            ("iommu-passthrough", "pass"),
        ],
    },
    // Placement and ACS, one property at a time (fixtures/synth; FIXTURE.md gives the paths).
    Case {
        name: "placement-pix",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[
            ("gpu-nic-near", "pass"),
            ("acs-clear", "pass"),
            ("pcie-link-full", "pass"),
        ],
    },
    Case {
        name: "placement-pxb",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass")],
    },
    Case {
        name: "placement-phb",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "placement-node",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "placement-sys",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-too-far", "fail")],
    },
    Case {
        name: "acs-redirect-on-path",
        config: None,
        exit: 1,
        statuses: [
            "pass", "pass", "pass", "pass", "fail", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-redirect-on-path", "fail"), ("acs-clear", "pass")],
    },
    Case {
        name: "acs-redirect-off-path",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-clear", "pass")],
    },
    Case {
        name: "config-unprivileged",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "unknown", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass"), ("acs-unknown", "unknown")],
    },
    Case {
        name: "caplist-loop",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("acs-clear", "pass")],
    },
    Case {
        name: "placement-pileup",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-nic-near", "pass")],
    },
    Case {
        name: "link-downtrained",
        config: None,
        exit: 0,
        statuses: [
            "pass", "pass", "pass", "pass", "pass", "warn", "pass", "pass", "pass", "skip",
        ],
        codes: &[("pcie-link-narrow", "warn"), ("pcie-link-slow", "warn")],
    },
    Case {
        name: "gpu-no-driver",
        config: None,
        exit: 1,
        statuses: [
            "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-no-driver", "fail"), ("gpu-nouveau", "fail")],
    },
    // Workstation GPUs in display mode: BAR1 256 MiB.
    Case {
        name: "gpu-bar-small",
        config: None,
        exit: 1,
        statuses: [
            "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-bar-small", "fail"), ("gpu-probe-skipped", "skip")],
    },
    // An MI300X bound to amdgpu but missing from the KFD topology.
    Case {
        name: "amd-kfd-missing-gpu",
        config: None,
        exit: 1,
        statuses: [
            "pass", "fail", "pass", "pass", "pass", "pass", "pass", "pass", "pass", "skip",
        ],
        codes: &[("gpu-not-seen-by-driver", "fail"), ("gpu-ready", "pass")],
    },
];

fn run(case: &Case, format: &str) -> std::process::Output {
    let root = format!("fixtures/{}", case.name);
    let config = case.config.map(|c| format!("fixtures/{}/{c}", case.name));
    let mut args = vec!["--root", root.as_str()];
    if let Some(c) = &config {
        args.extend(["--config", c.as_str()]);
    }
    args.extend(["check", "--format", format]);
    gdrdoctor(&args)
}

#[test]
fn fixtures_give_their_verdicts() {
    let mut failures = Vec::new();
    for case in CASES {
        let out = run(case, "json");
        let c = code(&out);
        let report = json(&out);
        if c != case.exit {
            failures.push(format!("{}: exit {c}, expected {}", case.name, case.exit));
        }
        let got = statuses(&report);
        for (check, want) in CHECKS.iter().zip(case.statuses) {
            let have = got
                .iter()
                .find(|(id, _)| id == check)
                .map(|(_, s)| s.as_str())
                .unwrap_or("missing");
            if have != want {
                failures.push(format!("{}: {check} is {have}, expected {want}", case.name));
            }
        }
        let found = codes(&report);
        for (code, status) in case.codes {
            if !found.iter().any(|(c, s)| c == code && s == status) {
                failures.push(format!(
                    "{}: no {status} finding {code} (have {found:?})",
                    case.name
                ));
            }
        }
        assert_eq!(
            report["verdict"]["exit_code"].as_i64(),
            Some(i64::from(case.exit)),
            "{}",
            case.name
        );
        assert_eq!(report["root"]["live"], false);
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn reports_match_snapshots() {
    for case in CASES {
        let human = stdout(&run(case, "human"));
        insta::assert_snapshot!(format!("{}.human", case.name), human);
        let json = stdout(&run(case, "json"));
        insta::assert_snapshot!(format!("{}.json", case.name), json);
    }
}

/// The report at a glance (issue 15): a healthy 8-GPU, 8-NIC node is one line per check, and a
/// failing one shows its failure in full; `-v` keeps every finding with its evidence. Both
/// snapshotted for both.
#[test]
fn compact_and_verbose_reports() {
    for name in ["healthy-8gpu-roce", "acs-redirect-on-path"] {
        let root = format!("fixtures/{name}");
        let compact = stdout(&gdrdoctor(&["--root", &root, "check"]));
        let verbose = stdout(&gdrdoctor(&["--root", &root, "check", "-v"]));
        // Header, blank, a line per check (11), blank, verdict: the failing one adds its finding.
        if name == "healthy-8gpu-roce" {
            assert_eq!(compact.lines().count(), 16, "{compact}");
        }
        assert!(verbose.lines().count() > compact.lines().count());
        for line in compact.lines().filter(|l| l.starts_with("FAIL ")) {
            let id = line.split_whitespace().nth(1).unwrap();
            assert!(verbose.contains(&format!("FAIL    {id}")), "{id}");
        }
        insta::assert_snapshot!(format!("{name}.compact"), compact);
        insta::assert_snapshot!(format!("{name}.verbose"), verbose);
    }
}

/// Every fixture directory must be listed here or in the broken corpus: an unlisted fixture is
/// one nobody checks.
#[test]
fn every_fixture_is_listed() {
    let dir = crate_dir().join("fixtures");
    let mut unlisted = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if ["synth", "broken", "pciutils", "fleet", "nccl-logs"].contains(&name.as_str())
            || name.ends_with(".md")
        {
            continue;
        }
        if !CASES.iter().any(|c| c.name == name) && !EXTRA.contains(&name.as_str()) {
            unlisted.push(name);
        }
    }
    assert!(
        unlisted.is_empty(),
        "fixtures not covered by a test: {unlisted:?}"
    );
}

/// Fixtures covered by other test files.
const EXTRA: &[&str] = &[];

/// Every finding names what it judged, and every warning or failure says how to fix it.
#[test]
fn findings_carry_evidence_and_fixes() {
    let mut failures = Vec::new();
    for case in CASES {
        let report = json(&run(case, "json"));
        for check in report["checks"].as_array().unwrap() {
            for f in check["findings"].as_array().unwrap() {
                let what = format!("{} {} {}", case.name, f["code"], f["subject"]);
                if f["evidence"].as_array().is_none_or(|e| e.is_empty()) {
                    failures.push(format!("{what}: no evidence"));
                }
                let status = f["status"].as_str().unwrap();
                if (status == "fail" || status == "warn") && f["fix"].is_null() {
                    failures.push(format!("{what}: {status} without a fix"));
                }
                if let Some(fix) = f.get("fix").filter(|x| !x.is_null()) {
                    if fix["commands"].as_array().is_none_or(|c| c.is_empty())
                        || fix["safety"].as_str().is_none_or(str::is_empty)
                    {
                        failures.push(format!("{what}: fix without commands or safety note"));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn arm64_iommu_fix_upgrades_the_kernel_first() {
    let case = CASES
        .iter()
        .find(|c| c.name == "arm64-iommu-translated")
        .unwrap();
    let report = json(&run(case, "json"));
    let finding = check(&report, "iommu")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "iommu-translated")
        .unwrap();
    let fix = finding["fix"].to_string();
    assert!(fix.contains("6.11"), "{fix}");
    assert!(
        !fix.contains("update-grub"),
        "no command line edit before the kernel upgrade: {fix}"
    );
}

#[test]
fn lab_guest_finds_rxe_through_its_netdev() {
    let case = CASES.iter().find(|c| c.name == "lab-switch-pt").unwrap();
    let report = json(&run(case, "json"));
    let rxe = &report["inventory"]["rdma_devices"][0];
    assert_eq!(
        (
            rxe["name"].as_str(),
            rxe["pci"].as_str(),
            rxe["driver"].as_str()
        ),
        (Some("rxe0"), Some("0000:03:00.0"), Some("rxe"))
    );
    let gid = &rxe["ports"][0]["gids"][1];
    assert_eq!(
        (
            gid["index"].as_u64(),
            gid["type"].as_str(),
            gid["ndev"].as_str()
        ),
        (Some(1), Some("RoCE v2"), Some("eth0"))
    );
    assert_eq!(
        report["inventory"]["gpus"][0]["model"],
        "virtio-gpu (lab stand-in)"
    );
    // Without the config, the lab guest has no GPU.
    let out = gdrdoctor(&[
        "--root",
        "fixtures/lab-switch-pt",
        "check",
        "--format",
        "json",
    ]);
    assert_eq!(json(&out)["node"]["gpus"], 0);
}

/// Offline equals live on real-kernel data: the lab capture reports what gdrdoctor said live in
/// the guest just before capturing (reference/live.json), for every check that can run offline.
#[test]
fn lab_capture_reports_what_the_guest_saw_live() {
    let case = CASES.iter().find(|c| c.name == "lab-switch-pt").unwrap();
    let offline = json(&run(case, "json"));
    let live: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(crate_dir().join("fixtures/lab-switch-pt/reference/live.json"))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(live["root"]["live"], true);
    let checks = |r: &serde_json::Value| -> Vec<serde_json::Value> {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["id"] != "rdma-access" && c["id"] != "gdr-test")
            .map(|c| {
                // `summary` is derived from the findings and newer than this reference.
                let mut c = c.clone();
                c.as_object_mut().unwrap().remove("summary");
                c
            })
            .collect()
    };
    assert_eq!(checks(&offline), checks(&live));
    let inventory = |r: &serde_json::Value| {
        let mut i = r["inventory"].clone();
        i.as_object_mut().unwrap().remove("gdr_test");
        i
    };
    assert_eq!(inventory(&offline), inventory(&live));
    assert_eq!(offline["node"], live["node"]);
    // Live, the guest also passed rdma-access: uverbs0, memlock, libibverbs with the rxe provider.
    let access = live["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "rdma-access")
        .unwrap();
    assert_eq!(access["status"], "pass");
}

/// The same capture read twice gives the same report: no timestamps, no hash-map order.
#[test]
fn reports_are_deterministic() {
    let case = &CASES[1];
    assert_eq!(run(case, "json").stdout, run(case, "json").stdout);
}

/// Every field a JSON report can carry is documented in docs/report-json.md.
#[test]
fn json_fields_are_documented() {
    fn walk(v: &serde_json::Value, path: &str, out: &mut std::collections::BTreeSet<String>) {
        match v {
            serde_json::Value::Object(map) => {
                for (k, child) in map {
                    // Status-keyed maps (counts) are documented as "status -> number".
                    if ["pass", "warn", "fail", "unknown", "skip"].contains(&k.as_str())
                        && path.starts_with("counts")
                    {
                        continue;
                    }
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    out.insert(p.clone());
                    walk(child, &p, out);
                }
            }
            serde_json::Value::Array(items) => {
                for item in items {
                    walk(item, &format!("{path}[]"), out);
                }
            }
            _ => {}
        }
    }
    let doc = std::fs::read_to_string(crate_dir().join("docs/report-json.md")).unwrap();
    let mut fields = std::collections::BTreeSet::new();
    for case in CASES {
        walk(&json(&run(case, "json")), "", &mut fields);
    }
    // Fields that only appear in some reports.
    let cfg = crate_dir().join("tests/data/override.yaml");
    walk(
        &json(&gdrdoctor(&[
            "--config",
            cfg.to_str().unwrap(),
            "--root",
            "fixtures/h200x2-vm",
            "check",
            "--format",
            "json",
        ])),
        "",
        &mut fields,
    );
    walk(
        &json(&gdrdoctor(&[
            "--root",
            "fixtures/h200x2-vm",
            "check",
            "--format",
            "json",
            "--skip",
            "iommu",
        ])),
        "",
        &mut fields,
    );
    let checks_prefix = |f: &str| {
        f.replacen("checks[].findings[].", "", 1)
            .replacen("checks[].", "", 1)
    };
    let undocumented: Vec<&String> = fields
        .iter()
        .filter(|f| {
            let short = checks_prefix(f);
            !doc.contains(&format!("| `{f}` |")) && !doc.contains(&format!("| `{short}` |"))
        })
        .collect();
    assert!(
        undocumented.is_empty(),
        "fields missing from docs/report-json.md: {undocumented:?}"
    );
    assert!(
        fields.contains("checks[].findings[].original_status")
            && fields.contains("checks[].skipped")
    );
}
