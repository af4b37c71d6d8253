//! Bad input found by fuzzing (issue 14, item 5), each case built here from a copy of a healthy
//! fixture: configuration space of devices that no longer answer, capture links that point
//! outside the node, archives that name a path twice, BARs that cannot be.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::{Path, PathBuf};

/// A copy of fixture `name` in a new temporary directory, to break.
fn copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    fixture_copy(name)
}

/// Every regular file named `config` under `dir`, links not followed: the real config spaces,
/// which `/sys/bus/pci/devices/*` reaches through links.
fn configs(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        if t.is_dir() {
            out.extend(configs(&e.path()));
        } else if t.is_file() && e.file_name() == "config" {
            out.push(e.path());
        }
    }
    out.sort();
    out
}

/// What a read of a function that fell off the bus gives: every byte 0xff, the length kept.
fn all_ones(config: &Path) {
    let len = std::fs::metadata(config).unwrap().len() as usize;
    std::fs::write(config, vec![0xffu8; len]).unwrap();
}

/// `check --format json` on a root: the exit code and the report.
fn report(root: &Path) -> (i32, serde_json::Value) {
    let out = gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--format",
        "json",
    ]);
    (code(&out), json(&out))
}

/// The findings of one check, by code.
fn findings<'a>(
    r: &'a serde_json::Value,
    check_id: &str,
    code: &str,
) -> Vec<&'a serde_json::Value> {
    check(r, check_id)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

fn evidence_has(f: &serde_json::Value, path_end: &str, value: &str) -> bool {
    f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["path"].as_str().unwrap().ends_with(path_end) && e["value"] == value)
}

/// Every config space all ones, as on a node whose PCIe devices stopped answering: not ready,
/// every GPU and NIC fails as not responding, every bridge's ACS is unknown, and no finding about
/// them passes. Before: ACS read "no ACS capability" and the node was READY.
#[test]
fn config_space_of_all_ones_is_not_responding() {
    let (_d, root) = copy("healthy-8gpu-roce");
    let (c, before) = report(&root);
    assert_eq!((c, &before["verdict"]["ready"]), (0, &true.into()));
    let spaces = configs(&root.join("sys/devices"));
    assert!(spaces.len() > 40, "{spaces:?}");
    let full = |p: &PathBuf| std::fs::metadata(p).unwrap().len() == 4096;
    assert!(spaces.iter().filter(|p| full(p)).count() > 40);
    for p in &spaces {
        all_ones(p);
    }
    let (c, r) = report(&root);
    assert_eq!(c, 1, "{}", r["verdict"]);
    assert_eq!(r["verdict"]["ready"], false);

    let gpus = findings(&r, "gpu", "gpu-not-responding");
    assert_eq!(gpus.len(), 8, "{}", check(&r, "gpu"));
    for f in &gpus {
        assert_eq!(f["status"], "fail");
        assert!(
            // A GPU's standard config space (256 bytes) is all the checks read of it
            // (inventory::pci::ConfigSpan, issue 43); the bridges above it are read whole.
            evidence_has(f, "/config", "256 bytes, all 0xff (vendor ID 0xffff)"),
            "{f}"
        );
        assert!(evidence_has(f, "/vendor", "0x10de"), "{f}");
        let runs: Vec<&str> = f["fix"]["commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["run"].as_str().unwrap())
            .collect();
        assert!(runs.iter().any(|r| r.contains("dmesg")), "{runs:?}");
        assert!(
            runs.iter()
                .any(|r| r.contains("/remove; echo 1 > /sys/bus/pci/rescan"))
        );
    }
    let nics = findings(&r, "rdma-link", "rdma-nic-not-responding");
    assert_eq!(nics.len(), 8, "{}", check(&r, "rdma-link"));
    for f in &nics {
        assert_eq!(f["status"], "fail");
        assert!(evidence_has(f, "/vendor", "0x15b3"), "{f}");
        assert!(f["fix"].is_object());
    }
    let bridges = findings(&r, "acs", "acs-bridge-not-responding");
    assert_eq!(bridges.len(), 16, "{}", check(&r, "acs"));
    assert!(bridges.iter().all(|f| f["status"] == "unknown"));
    assert_eq!(check(&r, "acs")["status"], "unknown");
    assert!(findings(&r, "acs", "acs-absent").is_empty());
    // Nothing about the dead devices' links passes either.
    assert!(findings(&r, "pcie-link", "pcie-link-full").is_empty());
    assert_eq!(check(&r, "pcie-link")["status"], "unknown");
    assert!(findings(&r, "rdma-link", "rdma-port-active").is_empty());
}

/// One GPU's config space all ones, and 64 bytes of it (what an unprivileged reader gets) are
/// no less dead: that GPU fails, the rest of the node is as it was.
#[test]
fn one_gpu_not_responding() {
    let (_d, root) = copy("healthy-8gpu-roce");
    let gpu = root
        .join("sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/config");
    std::fs::write(&gpu, [0xffu8; 64]).unwrap();
    let (c, r) = report(&root);
    assert_eq!(c, 1);
    let dead = findings(&r, "gpu", "gpu-not-responding");
    assert_eq!(dead.len(), 1, "{}", check(&r, "gpu"));
    assert_eq!(
        dead[0]["subject"].as_str().unwrap().split(' ').nth(1),
        Some("0000:18:00.0")
    );
    assert!(evidence_has(
        dead[0],
        "0000:18:00.0/config",
        "64 bytes, all 0xff (vendor ID 0xffff)"
    ));
    assert_eq!(findings(&r, "gpu", "gpu-ready").len(), 7);
    assert_eq!(
        r["verdict"]["blocking"].as_array().unwrap().len(),
        1,
        "{}",
        r["verdict"]
    );
    let link = findings(&r, "pcie-link", "pcie-link-unknown");
    assert_eq!(link.len(), 1);
    assert!(
        link[0]["subject"]
            .as_str()
            .unwrap()
            .contains("0000:18:00.0")
    );
    assert_eq!(check(&r, "acs")["status"], "pass");
    assert_eq!(check(&r, "rdma-link")["status"], "pass");
}

/// The report without the part that names the root.
fn report_of(root: &Path) -> serde_json::Value {
    let (_, mut r) = report(root);
    r.as_object_mut().unwrap().remove("root");
    r
}

/// A node whose links lead outside its root: an absolute `driver` link, and a class link that
/// climbs far above the root. The resolver reads both inside the root; the capture must write
/// them so that `check --root` reads the copy (a directory, and a .tar.gz, which refuses links
/// that leave it) the same way. Before: the links were copied verbatim and the archive refused.
#[test]
fn capture_rewrites_links_that_leave_the_root() {
    let (d, root) = copy("healthy-8gpu-roce");
    let gpu = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
    let driver = root.join(gpu).join("driver");
    std::fs::remove_file(&driver).unwrap();
    std::os::unix::fs::symlink("/sys/bus/pci/drivers/nvidia", &driver).unwrap();
    let class = root.join("sys/class/infiniband/mlx5_0");
    let real = std::fs::read_link(&class).unwrap();
    // Eight levels up from /sys/class/infiniband is far above the root, then down again.
    let climbing =
        Path::new("../../../../../../../../sys").join(real.strip_prefix("../..").unwrap());
    std::fs::remove_file(&class).unwrap();
    std::os::unix::fs::symlink(&climbing, &class).unwrap();

    let original = report_of(&root);
    assert_eq!(
        original["verdict"]["ready"], true,
        "{}",
        original["verdict"]
    );
    let dir = d.path().join("copy");
    let tgz = d.path().join("copy.tar.gz");
    for out in [&tgz, &dir] {
        let o = gdrdoctor(&[
            "--root",
            root.to_str().unwrap(),
            "capture",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let said = stderr(&o);
        let o = gdrdoctor(&["--root", out.to_str().unwrap(), "check", "--format", "json"]);
        assert_eq!(code(&o), 0, "{}: {}", out.display(), stderr(&o));
        assert_eq!(report_of(out), original, "{}", out.display());
        assert!(
            said.contains("(2 leading outside the root rewritten"),
            "{said}"
        );
    }
    // In the directory copy, both links are relative and stay inside.
    assert_eq!(
        std::fs::read_link(dir.join(gpu).join("driver")).unwrap(),
        Path::new("../../../../../../bus/pci/drivers/nvidia")
    );
    assert_eq!(
        std::fs::read_link(dir.join("sys/class/infiniband/mlx5_0")).unwrap(),
        real
    );
}

/// A capture archive that holds one path twice: a real capture, then `proc/cmdline` again with
/// other words. tar lets the last copy win, so the node read would be whichever came last;
/// the archive is refused, naming the path, by `check` and by `fleet`. Before: accepted.
#[test]
fn an_archive_holding_a_path_twice_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("copy");
    let o = gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "capture",
        copy.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let twice = d.path().join("twice.tar.gz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&twice).unwrap(),
        flate2::Compression::fast(),
    );
    let mut b = tar::Builder::new(gz);
    b.follow_symlinks(false);
    b.append_dir_all(".", &copy).unwrap();
    let cmdline = b"BOOT_IMAGE=/vmlinuz intel_iommu=on\n";
    let mut h = tar::Header::new_gnu();
    h.set_size(cmdline.len() as u64);
    h.set_mode(0o644);
    b.append_data(&mut h, "proc/cmdline", &cmdline[..]).unwrap();
    b.into_inner().unwrap().finish().unwrap();

    let o = gdrdoctor(&["--root", twice.to_str().unwrap(), "check"]);
    assert_eq!(code(&o), 2, "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.contains("capture refused"), "{err}");
    assert!(err.contains("member /proc/cmdline appears twice"), "{err}");

    let r = json(&gdrdoctor(&[
        "fleet",
        "--format",
        "json",
        twice.to_str().unwrap(),
    ]));
    assert_eq!(r["summary"]["unreadable"], 1, "{r}");
    let why = r["nodes"][0]["unreadable"].as_str().unwrap();
    assert!(why.contains("member /proc/cmdline appears twice"), "{why}");
}

/// A GPU `resource` whose BAR1 line cannot be a region (its start all ones, or its end below
/// its start): the BARs are unknown, naming the file and the line. Before: the line was
/// skipped, the 32 MiB region 3 was taken for BAR1, and `gpu-bar-small` failed the node.
#[test]
fn a_resource_line_that_cannot_be_a_bar_is_unknown() {
    let gpu = "sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0";
    let bar1 = "0x0002180000000000 0x0002181fffffffff 0x000000000014220c";
    for broken in [
        "0xffffffffffffffff 0x0002181fffffffff 0x000000000014220c",
        "0x0002181fffffffff 0x0002180000000000 0x000000000014220c",
    ] {
        let (_d, root) = copy("healthy-8gpu-roce");
        let resource = root.join(gpu).join("resource");
        let text = std::fs::read_to_string(&resource).unwrap();
        assert_eq!(text.lines().nth(1), Some(bar1));
        std::fs::write(&resource, text.replacen(bar1, broken, 1)).unwrap();
        let (c, r) = report(&root);
        assert!(
            findings(&r, "gpu", "gpu-bar-small").is_empty(),
            "{broken}: {}",
            check(&r, "gpu")
        );
        let unknown = findings(&r, "gpu", "gpu-bar-unknown");
        assert_eq!(unknown.len(), 1, "{broken}: {}", check(&r, "gpu"));
        let f = unknown[0];
        assert_eq!(f["status"], "unknown");
        assert!(
            f["subject"].as_str().unwrap().contains("0000:18:00.0"),
            "{f}"
        );
        let message = f["message"].as_str().unwrap();
        assert!(message.contains(&format!("/{gpu}/resource")), "{message}");
        assert!(
            message.contains("line 2 (region 1)") && message.contains(broken),
            "{message}"
        );
        let e = &f["evidence"][0];
        assert!(
            e["path"]
                .as_str()
                .unwrap()
                .ends_with("0000:18:00.0/resource"),
            "{e}"
        );
        assert!(e["value"].as_str().unwrap().contains(broken), "{e}");
        // Unknown is not a failure, and not a verified pass either.
        assert_eq!(c, 0, "{}", r["verdict"]);
        assert_eq!(check(&r, "gpu")["status"], "unknown");
    }
}
