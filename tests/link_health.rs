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

/// Issue 40: `symbol_error`, a 16-bit counter (the kernel's drivers/infiniband/core/sysfs.c
/// `PORT_PMA_ATTR(symbol_error, 0, 16, 32)`), pinned at 65535 in both readings, as the
/// ibqueryerrors report posted to linux-rdma (2021-03-16, "opensm + ceph RDMA = Down OSDs",
/// https://lore.kernel.org/linux-rdma/CAMCTd2ncDaqfgSOov67rAX6-YekFwe_eME-t62ERHiFAEPZ7EA@mail.gmail.com/,
/// the `link-history` fixture's source) shows ports (`[SymbolErrorCounter == 65535]`): it
/// can never show growth, so "no link error in the window" would be a claim it cannot make. A
/// warning says it, with how to reset the counter; the quiet finding says what it could not see.
#[test]
fn a_counter_pinned_at_its_maximum_is_said() {
    let (_dir, root) = fixture_copy("link-healthy-sampled");
    let first = "sys/class/infiniband/mlx5_2/ports/1/counters/symbol_error";
    for p in [first.to_owned(), format!("gdrdoctor/sample/{first}")] {
        std::fs::write(root.join(&p), "65535\n").unwrap();
    }
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let sat = findings_with(&r, "link-counter-saturated");
    assert_eq!(sat.len(), 1, "{:?}", codes(&r));
    let f = sat[0];
    assert_eq!(
        (f["status"].as_str(), f["subject"].as_str()),
        (Some("warn"), Some("mlx5_2 port 1"))
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("symbol_error reads 65535, the most its 16-bit counter holds"),
        "{f}"
    );
    assert!(
        f["fix"]["summary"]
            .as_str()
            .unwrap()
            .contains("reset only when its driver reloads"),
        "{f}"
    );
    let quiet: Vec<_> = findings_with(&r, "link-quiet")
        .into_iter()
        .filter(|q| q["subject"] == "mlx5_2 port 1")
        .collect();
    assert!(
        quiet[0]["message"]
            .as_str()
            .unwrap()
            .contains("except symbol_error, pinned at its maximum"),
        "{}",
        quiet[0]
    );
}

/// Issue 40: the NIC's own drops in a window, both recorded: `rx_discards_phy` +5000 (NVIDIA's
/// "Understanding mlx5 ethtool Counters": received packets dropped for lack of buffer at the
/// physical port, the adapter congested) and `rx_out_of_buffer` +777 (the receive queue had no
/// software buffer: luigirizzo/netmap#649, https://github.com/luigirizzo/netmap/issues/649, found
/// its ConnectX drops there), a warning each port; uncorrected PHY symbol errors warn too; the
/// bits FEC corrected are said with their rate, not judged.
#[test]
fn nic_drops_and_phy_counters_in_the_window() {
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    let path = root.join("gdrdoctor/qos.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for (_, nd) in v["netdevs"].as_object_mut().unwrap().iter_mut() {
        nd["ethtool"]["stats"]["ok"] = serde_json::json!([
            ["rx_discards_phy", 120],
            ["rx_out_of_buffer", 3],
            ["rx_symbol_err_phy", 0],
            ["rx_corrected_bits_phy", 100]
        ]);
    }
    std::fs::write(&path, serde_json::to_string(&v).unwrap()).unwrap();
    std::fs::create_dir_all(root.join("gdrdoctor/sample/gdrdoctor")).unwrap();
    std::fs::write(root.join("gdrdoctor/sample/window"), "5.0\n").unwrap();
    std::fs::write(
        root.join("gdrdoctor/sample/gdrdoctor/pause.json"),
        r#"{"ens1np0":[["rx_discards_phy",5120],["rx_out_of_buffer",780],["rx_symbol_err_phy",3],["rx_corrected_bits_phy",600]],
            "ens2np0":[["rx_discards_phy",120],["rx_out_of_buffer",3],["rx_symbol_err_phy",0],["rx_corrected_bits_phy",100]]}"#,
    )
    .unwrap();
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let drops = findings_with(&r, "link-drops-growing");
    assert_eq!(drops.len(), 1, "{:?}", codes(&r));
    let m = drops[0]["message"].as_str().unwrap();
    assert!(
        m.contains("rx_discards_phy +5000 (120 -> 5120), rx_out_of_buffer +777 (3 -> 780)")
            && m.contains("PFC is not holding the sender back")
            && m.contains("did not keep up"),
        "{m}"
    );
    assert_eq!(drops[0]["subject"], "mlx5_0 port 1");
    assert_eq!(drops[0]["status"], "warn");
    let phy = findings_with(&r, "link-phy-errors-growing");
    assert_eq!(phy.len(), 1, "{:?}", codes(&r));
    assert!(
        phy[0]["message"]
            .as_str()
            .unwrap()
            .contains("rx_symbol_err_phy +3")
    );
    let fec = findings_with(&r, "link-fec-corrected");
    assert_eq!(fec.len(), 1);
    assert_eq!(fec[0]["status"], "pass");
    assert!(
        fec[0]["message"]
            .as_str()
            .unwrap()
            .contains("(100.0 corrected bits a second)"),
        "{}",
        fec[0]
    );
}

/// Issue 40: "a kernel before 4.19" was said of functions without AER on Linux 6.18 (a VM's
/// emulated PCIe): on 4.19 and later the absence is the functions'.
#[test]
fn no_aer_on_a_new_kernel_is_the_functions() {
    let out = gdrdoctor(&["--root", fixture("h200x2-vm"), "check", "--format", "json"]);
    let r = json(&out);
    let f = findings_with(&r, "aer-none");
    assert_eq!(f.len(), 1, "{:?}", codes(&r));
    let m = f[0]["message"].as_str().unwrap();
    assert!(
        m.contains("they have no AER capability") && !m.contains("before 4.19"),
        "{m}"
    );
}
