//! Hostile input on the surfaces added since the last review (issue 41): netlink QoS answers,
//! counter and AER files, the kernel log, the loader's configuration, NVML's recorded answer and
//! the baseline archive, as a hostile or broken node would present them. Each case runs the real
//! binary bounded as tests/hostile_inputs.rs does (prlimit's address space and CPU time, a wall
//! clock and a peak RSS asserted), so that a regression fails in seconds.
#![allow(clippy::disallowed_methods)] // tests build inputs, they do not read a node

use crate::common::*;
use std::time::Duration;

/// The address space a run may map: far above what a case needs, far below what hurts.
const ADDRESS_SPACE: u64 = 2 << 30;

fn case<A: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = A>) -> Gdrdoctor {
    Gdrdoctor::new()
        .args(args)
        .within(Duration::from_secs(20), 200)
        .address_space(ADDRESS_SPACE)
        .cpu_limit()
}

/// 1. A capture's qos.json whose APP table maps NCCL's DSCP to priority 9: the 8-entry PFC and
/// buffer lists were indexed with it (a panic that killed check, fix and a whole fleet). The
/// entry is no priority: passed over, and the chain judged as the firmware's DSCP >> 3 says.
#[test]
fn an_app_priority_past_seven_is_no_priority() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    let path = root.join("gdrdoctor/qos.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (_, nd) in v["netdevs"].as_object_mut().unwrap().iter_mut() {
        for a in nd["dcb"]["ok"]["app"].as_array_mut().unwrap() {
            if a["protocol"] == 26 {
                a["priority"] = serde_json::json!(9);
            }
        }
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    let r = root.to_str().unwrap();
    for args in [
        vec!["--root", r, "check", "--format", "json"],
        vec!["--root", r, "fix"],
    ] {
        let ran = case(&args).run();
        assert_ne!(ran.code, 2, "{args:?}: {}", ran.stderr);
    }
    let ran = case(["--root", r, "check", "--select", "roce-lossless", "--format", "json"]).run();
    let report = serde_json::from_str::<serde_json::Value>(&ran.stdout).unwrap();
    let ok = findings_with(&report, "roce-lossless-ok");
    assert_eq!(ok.len(), 8, "{:?}", codes(&report));
    assert!(
        ok[0]["message"]
            .as_str()
            .unwrap()
            .contains("priority 3 (no APP entry for DSCP 26: the firmware's DSCP >> 3)"),
        "{}",
        ok[0]["message"]
    );
    // And a fleet of it.
    let fleet = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&root, fleet.path().join("node01")).unwrap();
    let ran = case(["fleet", fleet.path().to_str().unwrap()]).run();
    assert_ne!(ran.code, 2, "{}", ran.stderr);
}
