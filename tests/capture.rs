//! `gdrdoctor capture`: a copy of what the checks read gives the same report as the original,
//! as a directory and as a .tar.gz, for every fixture, broken ones included.
#![allow(clippy::disallowed_methods)] // tests read what they wrote, not a node

use crate::common::*;
use std::path::Path;
use std::process::Command;

/// Every fixture root, with the config it needs.
fn fixtures() -> Vec<(String, Option<String>)> {
    fixture_names()
        .iter()
        .map(|name| (fixture(name).to_owned(), fixture_config(name)))
        .collect()
}

/// Link targets a capture rewrites (they lead outside the root; see src/capture.rs), as the
/// reports quote them: on the original, and on the copy. Everything else reads the same.
const REWRITTEN: &[(&str, &str, &str)] = &[(
    "broken/escaping-links",
    "/sys/bus/pci/drivers/../../../../etc",
    "../../../../../etc",
)];

fn args<'a>(root: &'a str, cfg: &'a Option<String>, rest: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["--root", root];
    if let Some(c) = cfg {
        v.extend(["--config", c.as_str()]);
    }
    v.extend(rest);
    v
}

/// The report without the line that names the root.
fn report(root: &str, cfg: &Option<String>) -> serde_json::Value {
    let out = gdrdoctor(&args(root, cfg, &["check", "--format", "json"]));
    code(&out);
    let mut r = json(&out);
    r.as_object_mut().unwrap().remove("root");
    r
}

#[test]
fn copies_report_the_same() {
    let mut failures = Vec::new();
    for (root, cfg) in fixtures() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("copy");
        let tgz = tmp.path().join("copy.tar.gz");
        let unpacked = tmp.path().join("unpacked");
        for out in [&dir, &tgz] {
            let o = gdrdoctor(&args(&root, &cfg, &["capture", out.to_str().unwrap()]));
            assert_eq!(code(&o), 0, "{root}: {}", stderr(&o));
            assert!(stderr(&o).starts_with("captured "), "{}", stderr(&o));
        }
        std::fs::create_dir(&unpacked).unwrap();
        assert!(
            Command::new("tar")
                .arg("xzf")
                .arg(&tgz)
                .arg("-C")
                .arg(&unpacked)
                .status()
                .unwrap()
                .success()
        );
        let mut original = report(&root, &cfg);
        for (name, was, is) in REWRITTEN {
            if root == fixture(name) {
                let text = serde_json::to_string(&original).unwrap();
                assert!(text.contains(was), "{root}: {was} is not quoted");
                original = serde_json::from_str(&text.replace(was, is)).unwrap();
            }
        }
        // The archive read in place too: a capture must always be readable.
        for copy in [&dir, &unpacked, &tgz] {
            if report(copy.to_str().unwrap(), &cfg) != original {
                failures.push(format!(
                    "{root}: the copy in {} reports differently",
                    copy.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_copy_holds_only_what_was_read() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("copy");
    code(&gdrdoctor(&[
        "--root",
        fixture("h200x2-vm"),
        "capture",
        copy.to_str().unwrap(),
    ]));
    // Read: the GPUs' config space and driver links, the kernel's files. Not read: nvidia-smi's
    // reference output, the FIXTURE.md, attributes no check looks at.
    assert!(
        copy.join("sys/devices/pci0000:00/0000:00:06.0/config")
            .is_file()
    );
    assert!(copy.join("proc/driver/nvidia/version").is_file());
    // The BARs, for the gpu check's BAR1 size.
    assert!(
        copy.join("sys/devices/pci0000:00/0000:00:06.0/resource")
            .is_file()
    );
    assert!(
        std::fs::symlink_metadata(copy.join("sys/devices/pci0000:00/0000:00:06.0/driver"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    for absent in [
        "FIXTURE.md",
        "reference",
        "sys/devices/pci0000:00/0000:00:06.0/serial_number",
        "sys/devices/pci0000:00/0000:00:06.0/irq",
    ] {
        assert!(!copy.join(absent).exists(), "{absent} was copied");
    }
    // No GPU serial identity: the driver's information file keeps its model, loses its UUID.
    let info =
        std::fs::read_to_string(copy.join("proc/driver/nvidia/gpus/0000:00:06.0/information"))
            .unwrap();
    assert!(
        info.contains("NVIDIA H200") && !info.contains("GPU-c783c174"),
        "{info}"
    );
    // Links keep their relative targets.
    let link = std::fs::read_link(copy.join("sys/bus/pci/devices/0000:00:06.0")).unwrap();
    assert_eq!(link, Path::new("../../../devices/pci0000:00/0000:00:06.0"));
}

#[test]
fn archives_are_deterministic_and_refuse_to_overwrite() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a.tar.gz");
    let b = tmp.path().join("b.tar.gz");
    for out in [&a, &b] {
        code(&gdrdoctor(&[
            "--root",
            fixture("healthy-8gpu-roce"),
            "capture",
            out.to_str().unwrap(),
        ]));
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let again = gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "capture",
        a.to_str().unwrap(),
    ]);
    assert_eq!(code(&again), 2);
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    std::fs::write(tmp.path().join("x"), "").unwrap();
    let full = gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "capture",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(code(&full), 2, "a non-empty directory is refused");
}

#[test]
fn hostile_links_are_copied_as_links_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("copy");
    code(&gdrdoctor(&[
        "--root",
        fixture("broken/escaping-links"),
        "capture",
        copy.to_str().unwrap(),
    ]));
    // gids/3 -> /etc/passwd in the capture: copied as a link, not as the host's file, and
    // rewritten to where the capture's root resolves it (its own /etc/passwd, which it lacks),
    // so that the copy's links never lead out of it.
    let gid = copy
        .join("sys/devices/pci0000:00/0000:00:02.0/0000:02:00.0/infiniband/mlx5_0/ports/1/gids/3");
    let meta = std::fs::symlink_metadata(&gid).unwrap();
    assert!(meta.file_type().is_symlink());
    assert_eq!(
        std::fs::read_link(&gid).unwrap(),
        Path::new("../../../../../../../../../../etc/passwd")
    );
    let walk = Command::new("grep")
        .args(["-r", "root:x:0:0"])
        .arg(&copy)
        .output()
        .unwrap();
    assert!(walk.stdout.is_empty(), "host data in the copy");
}

/// Issue 25: `capture` without the rights to read part of the root said only "captured N
/// files", and a check of the copy said "not found" (or nothing: an empty RDMA class) where the
/// node said "permission denied". It lists what it could not read on standard error and records
/// it in the copy (gdrdoctor/unread.json), and a check of the copy reports as the check of the
/// node did, as the same user.
#[test]
fn what_capture_could_not_read_is_said_and_recorded() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, root) = fixture_copy("placement-pix");
    let mode =
        |p: &Path, m| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    mode(dir.path(), 0o755);
    let out = tempfile::tempdir().unwrap();
    mode(out.path(), 0o777);
    // Root reads anything: as root, run without capabilities; otherwise, as ourselves. Mode 000
    // binds both.
    let run = |args: &[&str]| Gdrdoctor::new().args(args).unprivileged().try_output();
    let denied = [
        (root.join("sys/class/infiniband"), "/sys/class/infiniband"),
        (root.join("proc/cmdline"), "/proc/cmdline"),
    ];
    for (path, _) in &denied {
        mode(path, 0o000);
    }
    let r = root.to_str().unwrap();
    let Some(live) = run(&["--root", r, "check", "--format", "json"]) else {
        return;
    };
    let mut live = json(&live);
    live.as_object_mut().unwrap().remove("root");
    assert!(live.to_string().contains("permission denied"), "{live:#}");
    for name in ["copy", "copy.tar.gz"] {
        let copy = out.path().join(name);
        let c = copy.to_str().unwrap();
        let o = run(&["--root", r, "capture", c]).unwrap();
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        let err = stderr(&o);
        for (_, node_path) in &denied {
            assert!(
                err.contains(&format!("  {node_path} (permission denied)")),
                "{node_path} not listed:\n{err}"
            );
        }
        let mut offline = json(&run(&["--root", c, "check", "--format", "json"]).unwrap());
        offline.as_object_mut().unwrap().remove("root");
        assert_eq!(offline, live, "{name}: the copy reports differently");
        // The record is in the copy, and `topo` of the copy names the class as it was.
        let t = run(&["--root", c, "topo", "--format", "json"]).unwrap();
        assert_eq!(code(&t), 1, "{}", stderr(&t));
        assert!(
            stderr(&t).contains("/sys/class/infiniband (permission denied)"),
            "{}",
            stderr(&t)
        );
    }
    let record = std::fs::read_to_string(out.path().join("copy/gdrdoctor/unread.json")).unwrap();
    assert!(record.contains("\"/sys/class/infiniband\""), "{record}");
    for (path, _) in &denied {
        mode(path, 0o755);
    }
}

/// A provider's topology file that is on the node but named nowhere (no NCCL_TOPO_FILE): the
/// fix says "point NCCL at it, it is here" live, and the capture keeps what made it say so.
#[test]
fn a_provider_file_only_present_is_kept() {
    let (_dir, root) = fixture_copy("azure-ndv4-vm-topo");
    std::fs::remove_file(root.join("etc/nccl.conf")).unwrap();
    let root = root.to_str().unwrap().to_owned();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("copy");
    let o = gdrdoctor(&["--root", &root, "capture", copy.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let live = report(&root, &None);
    assert!(
        live.to_string().contains("which is on this node"),
        "the fix should say the file is there"
    );
    assert_eq!(report(copy.to_str().unwrap(), &None), live);
}
