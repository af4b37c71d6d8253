//! link-health's branches the fixtures alone do not reach, each on a copy of a fixture with one
//! thing changed: retries in the window, a counter or an AER table that does not parse, an AER
//! history without a window, correctable AER growth; and a capture of a capture keeps its
//! recorded second reading, so offline still judges the growth.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::Path;

/// The findings of `check` on `root` as (code, status, subject).
fn findings(root: &Path) -> Vec<(String, String, String)> {
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--format",
        "json",
    ]);
    all_findings(&json(&out))
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap().to_owned();
            (text("code"), text("status"), text("subject"))
        })
        .collect()
}

fn has(found: &[(String, String, String)], code: &str, status: &str) -> bool {
    found.iter().any(|(c, s, _)| c == code && s == status)
}

#[test]
fn retries_growing_in_the_window_warn() {
    let (_dir, root) = fixture_copy("link-healthy-sampled");
    let second =
        "gdrdoctor/sample/sys/class/infiniband/mlx5_0/ports/1/hw_counters/local_ack_timeout_err";
    assert_eq!(
        std::fs::read_to_string(root.join(second)).unwrap().trim(),
        "0"
    );
    std::fs::write(root.join(second), "37\n").unwrap();
    let found = findings(&root);
    assert!(has(&found, "link-retries-growing", "warn"), "{found:?}");
    assert!(
        found
            .iter()
            .any(|(c, _, s)| c == "link-retries-growing" && s == "mlx5_0 port 1"),
        "{found:?}"
    );
}

#[test]
fn a_counter_that_does_not_parse_is_unknown() {
    let (_dir, root) = fixture_copy("link-history");
    std::fs::write(
        root.join("sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error"),
        "garbage\n",
    )
    .unwrap();
    let found = findings(&root);
    assert!(
        has(&found, "link-counters-unreadable", "unknown"),
        "{found:?}"
    );
}

#[test]
fn aer_without_a_window_is_history() {
    let (_dir, root) = fixture_copy("aer-nonfatal-switch-port");
    std::fs::remove_dir_all(root.join("gdrdoctor/sample")).unwrap();
    let found = findings(&root);
    assert!(has(&found, "aer-history", "skip"), "{found:?}");
    assert!(
        !has(&found, "aer-uncorrectable-growing", "fail"),
        "{found:?}"
    );
}

#[test]
fn correctable_aer_growth_warns_and_a_table_that_does_not_parse_is_unknown() {
    let (_dir, root) = fixture_copy("link-healthy-sampled");
    // GPU 0000:18:00.0, on a GPU-NIC path (the node's NVMe and NVSwitches have AER too).
    let gpu = "pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
    let second = root.join(format!(
        "gdrdoctor/sample/sys/devices/{gpu}/aer_dev_correctable"
    ));
    let text = std::fs::read_to_string(&second).unwrap();
    assert!(text.contains("TOTAL_ERR_COR 0"), "{text}");
    std::fs::write(
        &second,
        text.replace("RxErr 0", "RxErr 2")
            .replace("TOTAL_ERR_COR 0", "TOTAL_ERR_COR 2"),
    )
    .unwrap();
    let found = findings(&root);
    assert!(has(&found, "aer-correctable-growing", "warn"), "{found:?}");

    let first = root.join(format!("sys/devices/{gpu}/aer_dev_fatal"));
    std::fs::write(first, "not a table\n").unwrap();
    let found = findings(&root);
    assert!(has(&found, "aer-unreadable", "unknown"), "{found:?}");
}

#[test]
fn a_capture_keeps_the_recorded_second_reading() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    let out = gdrdoctor(&[
        "--root",
        fixture("link-flapping"),
        "capture",
        copy.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(copy.join("gdrdoctor/sample/window").is_file());
    let found = findings(&copy);
    assert!(has(&found, "link-flapping", "fail"), "{found:?}");
    // A captured root holds one reading: --sample cannot take a second one there.
    let out = gdrdoctor(&[
        "--root",
        fixture("link-flapping"),
        "capture",
        "--sample",
        "1",
        dir.path().join("again").to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("one reading"), "{}", stderr(&out));
}

#[test]
fn prometheus_names_the_flapping_port() {
    let out = gdrdoctor(&[
        "--root",
        fixture("link-flapping"),
        "check",
        "--format",
        "prometheus",
    ]);
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(
        text.contains(
            "gdrdoctor_link_port{device=\"mlx5_2\",port=\"1\",code=\"link-flapping\",status=\"fail\"} 1\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "gdrdoctor_link_port{device=\"mlx5_0\",port=\"1\",code=\"link-quiet\",status=\"pass\"} 1\n"
        ),
        "{text}"
    );
}

#[test]
fn the_fleet_ranks_links_by_their_growth_flaps_first() {
    let out = gdrdoctor(&[
        "fleet",
        fixture("link-symbol-errors"),
        fixture("link-flapping"),
        fixture("link-history"),
        "--format",
        "json",
    ]);
    let r = json(&out);
    let links = r["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{r}");
    // The flap first, though its counters grew less than the symbol errors.
    assert_eq!(links[0]["port"], "mlx5_2 port 1");
    assert_eq!(links[0]["kind"], "flaps");
    assert_eq!(links[0]["grew"], 6);
    assert_eq!(links[1]["kind"], "errors");
    assert_eq!(links[1]["grew"], 62);
    // One reading ranks nothing.
    assert!(r["nodes"][2].get("links").is_none(), "{r}");
    let human = stdout(&gdrdoctor(&[
        "fleet",
        fixture("link-symbol-errors"),
        fixture("link-flapping"),
    ]));
    assert!(
        human.contains("mlx5_2 port 1: flaps +6 in 5.0 s (link_downed +2, carrier_changes +4)"),
        "{human}"
    );
}

/// `check ARGS` on `root` with a config holding `yaml` (written beside the tree).
fn check_with_limits(root: &std::path::Path, yaml: &str, args: &[&str]) -> std::process::Output {
    let config = root.join("limits.yaml");
    std::fs::write(&config, yaml).unwrap();
    let mut all = vec![
        "--root",
        root.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "check",
    ];
    all.extend(args);
    gdrdoctor(&all)
}

/// A site's thresholds: a lifetime limit judges one reading (link-lifetime-over), and a rate
/// tolerates slow growth in the window (quiet, and said so) but never a flap.
#[test]
fn a_sites_lifetime_limits_and_rates() {
    let (_dir, root) = fixture_copy("link-history");
    let out = check_with_limits(
        &root,
        "thresholds:\n  link_lifetime: {symbol_error: 1000, link_downed: 10}\n",
        &["--format", "json"],
    );
    let report = json(&out);
    let over: Vec<_> = all_findings(&report)
        .filter(|f| f["code"] == "link-lifetime-over")
        .collect();
    assert_eq!(over.len(), 1, "{report}");
    assert_eq!(over[0]["status"], "warn");
    let message = over[0]["message"].as_str().unwrap();
    // symbol_error 65535 is over 1000; link_downed 2 is not over 10.
    assert!(message.contains("symbol_error 65535 > 1000"), "{message}");
    assert!(!message.contains("link_downed"), "{message}");

    // link-symbol-errors: symbol_error +41 and port_rcv_errors +7 (+ netdev errors) in 5 s.
    let (_dir, root) = fixture_copy("link-symbol-errors");
    let with = |rate: &str| {
        let yaml = format!("thresholds:\n  link_errors_per_min: {rate}\n");
        json(&check_with_limits(&root, &yaml, &["--format", "json"]))
    };
    // Below the growth's rate (62 in 5 s: 744 a minute): still a warning.
    let report = with("100");
    assert!(
        codes(&report).contains(&("link-errors-growing".into(), "warn".into())),
        "{report}"
    );
    // At or above it: quiet, saying which rate let it pass.
    let report = with("1000");
    assert!(
        !codes(&report)
            .iter()
            .any(|(c, _)| c == "link-errors-growing"),
        "{report}"
    );
    let quiet: Vec<_> = all_findings(&report)
        .filter(|f| f["code"] == "link-quiet" && f["subject"] == "mlx5_6 port 1")
        .collect();
    assert_eq!(quiet.len(), 1, "{report}");
    assert!(
        quiet[0]["message"]
            .as_str()
            .unwrap()
            .contains("at or below the site's 1000 (thresholds.link_errors_per_min)"),
        "{report}"
    );
    // A flap is never tolerated by a rate.
    let (_dir, root) = fixture_copy("link-flapping");
    let out = check_with_limits(
        &root,
        "thresholds:\n  link_errors_per_min: 100000\n  link_retries_per_min: 100000\n",
        &[],
    );
    assert_eq!(code(&out), 1, "{}", stdout(&out));
}
