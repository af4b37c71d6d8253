//! The verdict rule (issue 14; docs/report-json.md "The verdict rule"): a run in which no check
//! passed is never ready, and a check that skips for want of another check's subject brings that
//! check back when the selection left it out. Whole reports snapshotted for each case, in every
//! format that carries a verdict.
#![allow(clippy::disallowed_methods)] // tests build their own roots

use crate::common::*;

/// The real 2x H200 capture.
fn h200() -> &'static str {
    fixture("h200x2-vm")
}

const ALL_CHECKS: &str = "gpu-driver,gpu,peer-memory,pcie-placement,acs,pcie-link,iommu,rdma-link,rdma-gid,link-health,kernel-log,roce-lossless,nccl-config,rdma-access,gdr-test";

/// The same run in each verdict-carrying format: human, the JSON verdict, reason, the
/// Prometheus verdict gauges, NFD and JUnit, one text to snapshot.
fn every_format(root: &str, args: &[&str]) -> (i32, String) {
    let run = |format: &str| {
        let mut a = vec!["--root", root, "check"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["--format", format]);
        let out = gdrdoctor(&a);
        (code(&out), stdout(&out))
    };
    let (code, human) = run("human");
    let mut text = format!("exit {code}\n-- human\n{human}");
    let (c, json) = run("json");
    assert_eq!(c, code);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    text += &format!(
        "-- json verdict\n{}\n",
        serde_json::to_string_pretty(&report["verdict"]).unwrap()
    );
    let prerequisites: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("prerequisite_of").is_some())
        .map(|c| format!("{} <- {}", c["id"], c["prerequisite_of"]))
        .collect();
    text += &format!("-- json prerequisite_of\n{}\n", prerequisites.join("\n"));
    for format in ["reason", "nfd", "junit"] {
        let (c, out) = run(format);
        assert_eq!(c, code, "{format}");
        text += &format!("-- {format}\n{out}");
    }
    let (c, prom) = run("prometheus");
    assert_eq!(c, code);
    let gauges: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("gdrdoctor_ready ") || l.starts_with("gdrdoctor_verified "))
        .collect();
    text += &format!("-- prometheus\n{}\n", gauges.join("\n"));
    (code, text)
}

/// `--select acs,rdma-gid` on a node without an RDMA device: both skip for want of a NIC, and
/// `rdma-link` (through `pcie-placement` for acs) decides. Was READY, exit 0.
#[test]
fn a_prerequisite_left_out_still_decides() {
    let (code, text) = every_format(h200(), &["--select", "acs,rdma-gid"]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("gdrdoctor: provider(rdma-no-device)"),
        "{text}"
    );
    assert!(text.contains("prerequisite of rdma-gid"), "{text}");
    insta::assert_snapshot!("select-acs-rdma-gid", text);
}

/// Every check skipped: nothing was judged. Was READY, exit 0.
#[test]
fn nothing_selected_is_not_ready() {
    let (code, text) = every_format(h200(), &["--skip", ALL_CHECKS]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("\"state\": \"nothing-verified\""), "{text}");
    assert!(text.contains("gdrdoctor: nothing-verified\n"), "{text}");
    assert!(
        text.contains("gdrdoctor_ready 0\ngdrdoctor_verified 0"),
        "{text}"
    );
    assert!(text.contains("gdr.state=nothing-verified"), "{text}");
    assert!(text.contains("<error type=\"nothing-verified\""), "{text}");
    insta::assert_snapshot!("skip-everything", text);
}

/// A root without a PCI tree (no `sys/` at all): two unknowns and skips. Was "UNVERIFIED",
/// exit 0, and `fleet` counted it ready.
#[test]
fn a_root_without_sys_is_not_ready() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("proc")).unwrap();
    let root = dir.path().to_str().unwrap();
    let (code, text) = every_format(root, &[]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("NOT READY nothing verified"), "{text}");
    insta::assert_snapshot!("no-sys", text.replace(root, "<root>"));

    // The fleet view agrees.
    let out = gdrdoctor(&["fleet", root, "--format", "json"]);
    assert_eq!(code_of(&out), 1);
    let fleet = json(&out);
    assert_eq!(fleet["summary"]["ready"], 0, "{fleet}");
    assert_eq!(fleet["nodes"][0]["ready"], false, "{fleet}");
    assert_eq!(
        fleet["nodes"][0]["blocking"][0], "nothing-verified",
        "{fleet}"
    );
}

fn code_of(o: &std::process::Output) -> i32 {
    code(o)
}

/// A selection of checks that all pass is still ready: the rule only bites when nothing
/// passed.
#[test]
fn a_passing_selection_stays_ready() {
    let out = gdrdoctor(&[
        "--root",
        h200(),
        "check",
        "--select",
        "gpu-driver",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_eq!(json(&out)["verdict"]["state"], "ready");
}

/// The machine's own PCI functions, for the live cases below.
fn live_pci() -> Vec<(String, String)> {
    let Ok(dir) = std::fs::read_dir("/sys/bus/pci/devices") else {
        return Vec::new();
    };
    let mut out: Vec<(String, String)> = dir
        .filter_map(|e| {
            let p = e.ok()?.path();
            let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
            Some((
                read("vendor")?.trim().to_owned(),
                read("device")?.trim().to_owned(),
            ))
        })
        .collect();
    out.sort();
    out
}

fn machine_has(path: &str) -> bool {
    std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_some())
}

/// `gdrdoctor gdr-test` on a node without a testable pair exits 1 and names why: live, on a
/// machine without a GPU or an RDMA device (the CPU machines this runs on). Was READY, exit 0.
#[test]
fn gdr_test_without_a_pair_exits_1_and_names_why() {
    if machine_has("/sys/class/infiniband") {
        eprintln!("this machine has an RDMA device: the no-pair case cannot be shown here");
        return;
    }
    let out = gdrdoctor(&["gdr-test", "--format", "json"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let r = json(&out);
    let gdr = check(&r, "gdr-test");
    assert_eq!(gdr["status"], "skip");
    let f = &gdr["findings"][0];
    assert!(
        ["gdr-test-no-rdma-device", "gdr-test-no-gpu"].contains(&f["code"].as_str().unwrap()),
        "{f}"
    );
    assert!(
        f["prerequisites"]
            .as_array()
            .unwrap()
            .contains(&"rdma-link".into()),
        "{f}"
    );
    assert_eq!(check(&r, "rdma-link")["status"], "fail");
    assert_eq!(
        check(&r, "rdma-link")["prerequisite_of"],
        serde_json::json!(["gdr-test"])
    );
    let reason = stdout(&gdrdoctor(&["gdr-test", "--format", "reason"]));
    assert!(reason.contains("rdma-no-device"), "{reason}");

    // A declared accelerator without a memory API: the test has nothing to run on it; nothing
    // was verified, so still exit 1, saying why.
    let Some((vendor, device)) = live_pci().into_iter().next() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "accelerators:\n  - {{vendor: \"{}\", device: \"{}\", name: \"stand-in\"}}\n",
            vendor.trim_start_matches("0x"),
            device.trim_start_matches("0x")
        ),
    )
    .unwrap();
    let out = gdrdoctor(&[
        "--config",
        config.to_str().unwrap(),
        "gdr-test",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let r = json(&out);
    let codes: Vec<String> = codes(&r).into_iter().map(|(c, _)| c).collect();
    assert!(codes.contains(&"gdr-test-not-run".to_owned()), "{codes:?}");
    let not_run = check(&r, "gdr-test")["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "gdr-test-not-run")
        .unwrap()
        .clone();
    assert!(
        not_run["message"]
            .as_str()
            .unwrap()
            .contains("no GPU memory API"),
        "{not_run}"
    );
}
