//! GPUs that only NVIDIA's open kernel modules drive (Blackwell and later, GH200) with the
//! proprietary module (issue 38): gpu-driver from the GPU's ID and /proc/driver/nvidia/version,
//! kernel-log from the proprietary module's refusal in the log, in the forms the log gives it,
//! and another GPU the driver could not initialise.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;

const HEAD: &str = "# gdrdoctor kernel-log: the records of /dev/kmsg that gdrdoctor judges\n";

/// The proprietary module's version file as it reads on aarch64 (a public Go test parses
/// `NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.120  Fri Sep 13 11:01:10 UTC 2024`;
/// the release and the date here are the GB200 fixture's).
const PROPRIETARY: &str = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  570.133.20  Fri Feb 21 21:24:52 UTC 2025\nGCC version:  gcc version 13.2.0 (Ubuntu 13.2.0-23ubuntu4) \n";
const VERSION: &str = "proc/driver/nvidia/version";

/// The GB200 tray's GPU 0 refused as /dev/kmsg gives the refusal (one record, its newline
/// escaped), GPU 2 as a relay that split it into two records gives it (the lines of the posts in
/// research notes grace.md 1.4, the GPUs' addresses and ID the tray's), and GPU 1 failing to
/// start its GSP firmware (NVIDIA/open-gpu-kernel-modules#789's status).
fn refusals() -> String {
    format!(
        "{HEAD}# read: 2154 records, last sequence 2153\n\
         3,700,9812004,-;NVRM: The NVIDIA GPU 0008:01:00.0 (PCI ID: 10de:2941)\\x0aNVRM: installed in this system requires use of the NVIDIA open kernel modules.\n\
         3,701,9812019,-;NVRM: GPU 0008:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\n\
         3,702,9812470,-;NVRM: GPU 0008:01:00.0: rm_init_adapter failed, device minor number 0\n\
         3,703,9830112,-;NVRM: The NVIDIA GPU 0018:01:00.0 (PCI ID: 10de:2941)\n\
         3,704,9830113,-;NVRM: installed in this system requires use of the NVIDIA open kernel modules.\n\
         3,705,9830127,-;NVRM: GPU 0018:01:00.0: RmInitAdapter failed! (0x22:0x56:884)\n\
         3,900,31200401,-;NVRM: GPU 0009:01:00.0: RmInitAdapter failed! (0x62:0x65:1792)\n\
         3,901,31200533,-;NVRM: GPU 0009:01:00.0: rm_init_adapter failed, device minor number 1\n"
    )
}

/// (code, status, subject) of every finding of `check`, and the findings themselves.
fn findings(report: &serde_json::Value, check: &str) -> Vec<(String, String, String)> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["id"] == check)
        .flat_map(|c| c["findings"].as_array().unwrap())
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_owned();
            (s("code"), s("status"), s("subject"))
        })
        .collect()
}

fn finding<'a>(report: &'a serde_json::Value, code: &str, subject: &str) -> &'a serde_json::Value {
    all_findings(report)
        .find(|f| f["code"] == code && f["subject"].as_str().unwrap().starts_with(subject))
        .unwrap_or_else(|| panic!("no {code} on {subject}: {report}"))
}

#[test]
fn the_refusal_fails_kernel_log_until_the_open_module_is_loaded() {
    let node = NodeCopy::of("gb200-tray");
    node.write("gdrdoctor/kernel-log", refusals())
        .write(VERSION, PROPRIETARY);
    let (_, r) = node.check(&[], &["--select", "kernel-log"]);
    let mut got = findings(&r, "kernel-log");
    got.sort();
    let want = |c: &str, g: &str| (c.to_owned(), "fail".to_owned(), format!("GPU {g}"));
    assert_eq!(
        got,
        vec![
            want("kernel-log-gpu-init-failed", "0009:01:00.0"),
            want("kernel-log-gpu-needs-open-module", "0008:01:00.0"),
            want("kernel-log-gpu-needs-open-module", "0018:01:00.0"),
        ]
    );
    let f = finding(&r, "kernel-log-gpu-needs-open-module", "GPU 0008:01:00.0");
    let text = f.to_string();
    assert!(text.contains("PCI ID 10de:2941"), "{text}");
    assert!(
        text.contains("RmInitAdapter failed (0x22:0x56:884)"),
        "{text}"
    );
    assert!(
        text.contains("requires use of the NVIDIA open kernel modules"),
        "{text}"
    );
    assert!(
        text.contains("apt-get install -y nvidia-driver-570-open"),
        "{text}"
    );
    assert!(text.contains("nvidia-driver:570-open"), "{text}");
    // The split record names its GPU through the line before it.
    let f = finding(&r, "kernel-log-gpu-needs-open-module", "GPU 0018:01:00.0");
    // Its own header line is no event: the refusal and the RmInitAdapter line are.
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("(PCI ID 10de:2941)"), "{f}");
    assert!(message.contains("logged 2 times"), "{f}");
    let f = finding(&r, "kernel-log-gpu-init-failed", "GPU 0009:01:00.0");
    assert!(
        f["message"].as_str().unwrap().contains("(0x62:0x65:1792)"),
        "{f}"
    );
    assert!(
        f["fix"]["summary"]
            .as_str()
            .unwrap()
            .contains("could not initialise GPU 0009:01:00.0")
    );

    // The open module loaded now: the refusals came from a module unloaded since.
    node.remove(VERSION);
    copy_version(&node, "gb200-tray");
    let (_, r) = node.check(&[], &["--select", "kernel-log"]);
    let got = findings(&r, "kernel-log");
    assert!(
        got.iter().any(|f| f.0 == "kernel-log-gpu-init-failed"),
        "{got:?}"
    );
    assert!(
        !got.iter()
            .any(|f| f.0 == "kernel-log-gpu-needs-open-module"),
        "{got:?}"
    );
    let f = finding(&r, "kernel-log-history", "GPU 0008:01:00.0");
    assert_eq!(f["status"], "skip");
    assert!(
        f["message"].as_str().unwrap().contains("unloaded since"),
        "{f}"
    );
}

/// The fixture's own version file, back in the copy.
fn copy_version(node: &NodeCopy, fixture: &str) {
    let text = std::fs::read(fixture_path(fixture).join(VERSION)).unwrap();
    node.write(VERSION, text);
}

#[test]
fn gpu_driver_fails_blackwell_and_gh200_on_the_proprietary_module() {
    let node = NodeCopy::of("gb200-tray");
    node.write(VERSION, PROPRIETARY)
        .write("gdrdoctor/kernel-log", refusals());
    let (_, r) = node.check(&[], &["--select", "gpu-driver"]);
    let got = findings(&r, "gpu-driver");
    assert_eq!(got.len(), 4, "{got:?}");
    assert!(
        got.iter()
            .all(|f| f.0 == "gpu-needs-open-module" && f.1 == "fail"),
        "{got:?}"
    );
    let f = finding(&r, "gpu-needs-open-module", "GPU 0008:01:00.0");
    let evidence: Vec<(&str, &str)> = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["path"].as_str().unwrap(), e["value"].as_str().unwrap()))
        .collect();
    assert!(
        evidence
            .iter()
            .any(|(p, v)| p.ends_with("0008:01:00.0/device") && *v == "0x2941"),
        "{evidence:?}"
    );
    assert!(
        evidence
            .iter()
            .any(|(p, v)| *p == "/proc/driver/nvidia/version"
                && v.contains("NVIDIA UNIX aarch64 Kernel Module")),
        "{evidence:?}"
    );
    assert!(
        evidence.iter().any(|(p, v)| *p == "/dev/kmsg"
            && v.contains("requires use of the NVIDIA open kernel modules")),
        "{evidence:?}"
    );
    assert!(
        evidence
            .iter()
            .any(|(p, v)| *p == "/dev/kmsg" && v.contains("RmInitAdapter failed! (0x22:0x56:884)")),
        "{evidence:?}"
    );
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("Blackwell or later"), "{message}");
    assert!(
        message.contains("proprietary nvidia 570.133.20"),
        "{message}"
    );
    // GPU 1's log holds another failure, not the refusal: its finding names no log line.
    let f = finding(&r, "gpu-needs-open-module", "GPU 0009:01:00.0");
    assert!(!f["evidence"].to_string().contains("/dev/kmsg"), "{f}");

    // The module unloaded and GPU 3 unbound: the refusal in the log is why.
    node.remove(VERSION);
    std::fs::remove_file(node.root.join("sys/bus/pci/devices/0019:01:00.0/driver")).unwrap();
    let log = refusals().replace("0018:01:00.0", "0019:01:00.0");
    node.write("gdrdoctor/kernel-log", log);
    let (_, r) = node.check(&[], &["--select", "gpu-driver"]);
    let f = finding(&r, "gpu-needs-open-module", "GPU 0019:01:00.0");
    assert_eq!(f["status"], "fail");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("no driver is bound"),
        "{f}"
    );
    // No version to name the branch: the packages are named, not installed.
    assert!(
        f["fix"]["commands"]
            .to_string()
            .contains("nvidia-driver-BRANCH-open"),
        "{f}"
    );
    // The other three, bound to nvidia with no version file: unknown as before.
    assert!(
        findings(&r, "gpu-driver")
            .iter()
            .filter(|f| f.0 == "gpu-driver-version-unknown")
            .count()
            == 3
    );

    // A GH200 (10de:2342) too; the open module passes.
    let gh = NodeCopy::of("arm64-iommu-translated");
    let (_, r) = gh.check(&[], &["--select", "gpu-driver"]);
    assert_eq!(findings(&r, "gpu-driver")[0].0, "gpu-driver-bound");
    gh.write(VERSION, PROPRIETARY);
    let (_, r) = gh.check(&[], &["--select", "gpu-driver"]);
    let f = finding(&r, "gpu-needs-open-module", "GPU 0009:01:00.0");
    assert!(f["message"].as_str().unwrap().contains("GH200"), "{f}");
}

/// Discrete Hopper and older on the proprietary module pass as before (an A100 node on 535).
#[test]
fn older_gpus_pass_on_the_proprietary_module() {
    let report = json(&gdrdoctor(&[
        "--root",
        fixture("healthy-4gpu-ib-peermem"),
        "check",
        "--select",
        "gpu-driver",
        "--format",
        "json",
    ]));
    let got = findings(&report, "gpu-driver");
    assert!(
        got.iter()
            .all(|f| f.0 == "gpu-driver-bound" && f.1 == "pass"),
        "{got:?}"
    );
    assert!(report.to_string().contains("proprietary kernel module"));
}
