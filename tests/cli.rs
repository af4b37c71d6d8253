//! The command line's contract: subcommands, selection, config, exit codes, colour.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use std::io::Write;

/// The real 2x H200 capture.
fn h200() -> &'static str {
    fixture("h200x2-vm")
}

/// A node whose RoCE MTU is 1500 (a warning).
fn mtu() -> &'static str {
    fixture("roce-mtu-1500")
}

fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

#[test]
fn list_shows_every_check_in_order() {
    let out = gdrdoctor(&["list"]);
    assert_eq!(code(&out), 0);
    let ids: Vec<String> = stdout(&out)
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        [
            "gpu-driver",
            "gpu",
            "peer-memory",
            "pcie-placement",
            "acs",
            "pcie-link",
            "iommu",
            "rdma-link",
            "rdma-gid",
            "link-health",
            "kernel-log",
            "roce-lossless",
            "nccl-config",
            "rdma-access",
            "gdr-test",
            "nccl-verify",
            "job-history"
        ]
    );
    assert!(stdout(&out).contains("rdma-access") && stdout(&out).contains("(live only)"));
    let codes = stdout(&gdrdoctor(&["list", "--codes"]));
    assert!(codes.contains("    roce-gid-index-differs"), "{codes}");
}

#[test]
fn explain_prints_the_check_readme_by_id_or_code() {
    let by_id = gdrdoctor(&["explain", "iommu"]);
    assert_eq!(code(&by_id), 0);
    assert_eq!(
        stdout(&by_id),
        std::fs::read_to_string(crate_dir().join("checks/iommu/README.md")).unwrap()
    );
    let by_code = gdrdoctor(&["explain", "iommu-translated"]);
    assert_eq!(stdout(&by_code), stdout(&by_id));
    let unknown = gdrdoctor(&["explain", "nope"]);
    assert_eq!(code(&unknown), 2);
    assert!(
        stderr(&unknown).contains("no check or finding code named \"nope\""),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn select_and_skip() {
    let out = gdrdoctor(&[
        "--root",
        h200(),
        "check",
        "--select",
        "gpu-driver,iommu",
        "--format",
        "json",
    ]);
    assert_eq!(code(&out), 0, "rdma-link is not selected, so nothing fails");
    let report = json(&out);
    let s = statuses(&report);
    assert!(s.contains(&("gpu-driver".into(), "pass".into())));
    assert!(s.contains(&("rdma-link".into(), "skip".into())));
    let human = stdout(&gdrdoctor(&[
        "--root",
        h200(),
        "check",
        "--select",
        "iommu",
    ]));
    assert!(
        !human.contains("rdma-link"),
        "unselected checks stay out of human output:\n{human}"
    );

    let out = gdrdoctor(&[
        "--root",
        h200(),
        "check",
        "--skip",
        "rdma-link",
        "--format",
        "json",
    ]);
    // Skipping rdma-link does not make a node without an RDMA device ready: the checks that
    // skip for want of one (placement, GIDs) bring it back as their prerequisite (issue 14).
    assert_eq!(code(&out), 1);
    let rdma = json(&out)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "rdma-link")
        .cloned()
        .unwrap();
    assert_eq!(rdma["status"], "fail");
    assert_eq!(rdma["skipped"], serde_json::Value::Null);
    assert_eq!(
        rdma["prerequisite_of"],
        serde_json::json!(["pcie-placement", "rdma-gid", "link-health", "roce-lossless"])
    );
    // A check with no such prerequisite stays skipped.
    let out = gdrdoctor(&[
        "--root",
        h200(),
        "check",
        "--skip",
        "pcie-link",
        "--format",
        "json",
    ]);
    let link = json(&out)["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "pcie-link")
        .cloned()
        .unwrap();
    assert_eq!(link["skipped"], "skipped (--skip)");

    let bad = gdrdoctor(&["--root", h200(), "check", "--select", "acs-typo"]);
    assert_eq!(code(&bad), 2);
    assert!(
        stderr(&bad).contains("unknown check \"acs-typo\""),
        "{}",
        stderr(&bad)
    );
}

#[test]
fn strict_counts_warnings() {
    assert_eq!(code(&gdrdoctor(&["--root", mtu(), "check"])), 0);
    let out = gdrdoctor(&["--root", mtu(), "check", "--strict", "--format", "json"]);
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert_eq!(report["verdict"]["strict"], true);
    assert_eq!(
        report["verdict"]["blocking"][0]["codes"][0],
        "roce-mtu-small"
    );
}

#[test]
fn human_output_ends_with_the_verdict() {
    let out = stdout(&gdrdoctor(&["--root", h200(), "check"]));
    assert_eq!(
        out.lines().last().unwrap(),
        "NOT READY rdma-link (rdma-no-device); 6 passed, 9 skipped"
    );
    let ok = stdout(&gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "check",
    ]));
    assert!(ok.lines().last().unwrap().starts_with("READY "), "{ok}");
}

#[test]
fn verbose_shows_evidence() {
    let quiet = stdout(&gdrdoctor(&["--root", h200(), "check"]));
    let verbose = stdout(&gdrdoctor(&["--root", h200(), "check", "-v"]));
    assert!(!quiet.contains("/proc/sys/kernel/osrelease = "));
    assert!(
        verbose.contains("/proc/sys/kernel/osrelease = 6.18.44-fc-v657-gpu"),
        "{verbose}"
    );
}

#[test]
fn colour_follows_flag_and_no_color() {
    let plain = stdout(&gdrdoctor(&["--root", h200(), "check"]));
    assert!(!plain.contains('\u{1b}'), "NO_COLOR is set by the helper");
    let forced = stdout(&gdrdoctor(&[
        "--color",
        "always",
        "--root",
        h200(),
        "check",
    ]));
    assert!(
        forced.contains("\u{1b}["),
        "--color always forces ANSI colour"
    );
    let never = stdout(&gdrdoctor(&["--color", "never", "--root", h200(), "check"]));
    assert!(!never.contains('\u{1b}'));
    // JSON never carries colour.
    let json_out = stdout(&gdrdoctor(&[
        "--color",
        "always",
        "--root",
        h200(),
        "check",
        "--format",
        "json",
    ]));
    assert!(!json_out.contains('\u{1b}'));
}

#[test]
fn unusable_roots_exit_2() {
    let missing = gdrdoctor(&["--root", "fixtures/does-not-exist", "check"]);
    assert_eq!(code(&missing), 2);
    assert!(
        stderr(&missing).contains("fixtures/does-not-exist"),
        "{}",
        stderr(&missing)
    );
    let empty = tempfile::tempdir().unwrap();
    let out = gdrdoctor(&["--root", empty.path().to_str().unwrap(), "check"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("not a captured root: it has neither sys/ nor proc/"),
        "{}",
        stderr(&out)
    );
    let cargo_toml = crate_dir().join("Cargo.toml");
    let file = gdrdoctor(&["--root", cargo_toml.to_str().unwrap(), "check"]);
    assert_eq!(code(&file), 2);
    assert!(
        stderr(&file).contains("not a directory"),
        "{}",
        stderr(&file)
    );
}

#[test]
fn bad_arguments_exit_2() {
    assert_eq!(code(&gdrdoctor(&["check", "--format", "xml"])), 2);
    assert_eq!(code(&gdrdoctor(&["frobnicate"])), 2);
    assert_eq!(code(&gdrdoctor(&["--help"])), 0);
}

#[test]
fn bad_config_exits_2_with_line_and_column() {
    let cfg = config_file("expect:\n  gpus: eight\n");
    let out = gdrdoctor(&[
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        h200(),
        "check",
    ]);
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:2:9:", cfg.path().display())),
        "{err}"
    );
    let missing = gdrdoctor(&[
        "--config",
        "/nonexistent/gdrdoctor.yaml",
        "--root",
        h200(),
        "check",
    ]);
    assert_eq!(code(&missing), 2);
    assert!(
        stderr(&missing).contains("/nonexistent/gdrdoctor.yaml: cannot read config"),
        "{}",
        stderr(&missing)
    );
}

/// Runs `check` on `root` with a config file holding `config`, plus `extra` arguments.
fn with_config(config: &str, root: &str, extra: &[&str]) -> std::process::Output {
    let cfg = config_file(config);
    let mut args = vec![
        "--config",
        cfg.path().to_str().unwrap(),
        "--root",
        root,
        "check",
    ];
    args.extend(extra);
    gdrdoctor(&args)
}

const JSON: &[&str] = &["--format", "json"];

#[test]
fn severity_override_changes_the_verdict_and_says_so() {
    let overriding = "severity:\n  rdma-no-device: warn\n";
    let out = with_config(overriding, h200(), JSON);
    assert_eq!(code(&out), 0);
    let report = json(&out);
    let f = &check(&report, "rdma-link")["findings"][0];
    let got = (
        f["code"].as_str(),
        f["status"].as_str(),
        f["original_status"].as_str(),
    );
    assert_eq!(got, (Some("rdma-no-device"), Some("warn"), Some("fail")));
    let human = stdout(&with_config(overriding, h200(), &[]));
    assert!(
        human.contains("(severity fail overridden by config)"),
        "{human}"
    );

    let out = with_config("severity:\n  roce-mtu-small: fail\n", mtu(), &[]);
    assert_eq!(code(&out), 1);
}

#[test]
fn config_expectations_and_skips() {
    let out = with_config(
        "expect:\n  gpus: 4\n  rdma_devices: 2\nskip: [iommu]\n",
        h200(),
        JSON,
    );
    assert_eq!(code(&out), 1);
    let report = json(&out);
    assert!(
        codes(&report).contains(&("gpu-count-low".into(), "fail".into())),
        "{report}"
    );
    assert!(statuses(&report).contains(&("iommu".into(), "skip".into())));

    // 8 GPUs found, 8 expected; 8 RDMA devices found, 9 expected.
    let expect = "expect:\n  gpus: 8\n  rdma_devices: 9\n  port_rate_gbps: 800\n";
    let report = json(&with_config(expect, fixture("healthy-8gpu-roce"), JSON));
    let c = codes(&report);
    assert!(!c.iter().any(|(code, _)| code == "gpu-count-low"));
    assert!(c.contains(&("rdma-count-low".into(), "fail".into())));
    assert!(c.contains(&("rdma-rate-low".into(), "warn".into())));
}

#[test]
fn declared_accelerators_count_as_gpus() {
    // The lab's virtio-gpu (1af4:1050) stands in for a GPU when the config declares it. The
    // H200 VM has a virtio *net* device (class 0200), not a virtio GPU: the class must match.
    let by_class = "accelerators:\n  - vendor: \"1af4\"\n    class: \"0380\"\n    name: stand-in\n";
    assert_eq!(
        json(&with_config(by_class, h200(), JSON))["node"]["gpus"],
        2
    );
    let any = "accelerators:\n  - vendor: \"1af4\"\n    name: anything-virtio\n";
    let report = json(&with_config(any, h200(), JSON));
    assert!(
        report["node"]["gpus"].as_u64().unwrap() > 2,
        "{}",
        report["inventory"]["gpus"]
    );
    assert!(codes(&report).contains(&("gdr-path-unknown".into(), "unknown".into())));
}

#[test]
fn live_run_starts_and_reports() {
    // Whatever this machine is, a live run must produce a well-formed report and exit 0 or 1.
    let out = gdrdoctor(&["check", "--format", "json"]);
    let c = code(&out);
    assert!(c == 0 || c == 1, "exit {c}: {}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["root"]["live"], true);
    let access = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "rdma-access")
        .unwrap();
    assert_ne!(access["status"], "skip", "rdma-access runs on a live root");
}
