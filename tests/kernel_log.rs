//! kernel-log's branches the fixtures alone do not reach: what the kernel logged inside a
//! sample window that says nothing is broken (events-now), a capture of a capture keeping the
//! log, and the live node's own `/dev/kmsg`, read and carried into a capture so that the copy's
//! report says what the node's did.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;
use std::path::Path;

/// kernel-log's findings on `root` as (code, status, subject, evidence paths).
fn kernel_log(root: &Path, extra: &[&str]) -> Vec<(String, String, String, Vec<String>)> {
    let mut args = vec!["--root", root.to_str().unwrap(), "check"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--select", "kernel-log", "--format", "json"]);
    let out = gdrdoctor(&args);
    all_findings(&json(&out))
        .map(|f| {
            let text = |k: &str| f[k].as_str().unwrap().to_owned();
            let paths = f["evidence"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["path"].as_str().unwrap().to_owned())
                .collect();
            (text("code"), text("status"), text("subject"), paths)
        })
        .collect()
}

const HEAD: &str = "# gdrdoctor kernel-log: the records of /dev/kmsg that gdrdoctor judges\n";

#[test]
fn corrected_errors_and_application_xids_in_the_window_warn() {
    let (_dir, root) = fixture_copy("link-healthy-sampled");
    std::fs::create_dir_all(root.join("gdrdoctor/sample/gdrdoctor")).unwrap();
    std::fs::write(
        root.join("gdrdoctor/kernel-log"),
        format!("{HEAD}# read: 100 records, last sequence 99\n"),
    )
    .unwrap();
    // The second reading: a record the first already had (sequence 40, not the window's), then
    // two of the window's: a corrected error on GPU 0 and an application's Xid on GPU 1.
    std::fs::write(
        root.join("gdrdoctor/sample/gdrdoctor/kernel-log"),
        format!(
            "{HEAD}# read: 103 records, last sequence 102\n\
             3,40,500000000,-;nvidia 0000:18:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)\n\
             3,100,900000000,-;nvidia 0000:18:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n\
             3,101,900000010,-;nvidia 0000:18:00.0:    [ 0] RxErr                  (First)\n\
             4,102,901000000,-;NVRM: Xid (PCI:0000:1a:00): 13, pid=2795, name=python3, Graphics SM Warp Exception\n"
        ),
    )
    .unwrap();
    let found = kernel_log(&root, &[]);
    let now: Vec<_> = found
        .iter()
        .filter(|f| f.0 == "kernel-log-events-now")
        .collect();
    assert_eq!(now.len(), 2, "{found:?}");
    assert!(now.iter().all(|f| f.1 == "warn"), "{found:?}");
    assert!(now.iter().any(|f| f.2 == "GPU 0000:18:00.0"), "{found:?}");
    assert!(now.iter().any(|f| f.2 == "GPU 0000:1a:00.0"), "{found:?}");
    assert!(now.iter().all(|f| f.3 == ["/dev/kmsg"]), "{found:?}");
    // The fatal error at sequence 40 came before the window: not "now", and the first reading
    // does not hold it, so it is nowhere.
    assert!(
        !found.iter().any(|f| f.0 == "kernel-log-errors-now"),
        "{found:?}"
    );
    assert!(found.iter().any(|f| f.0 == "kernel-log-clean"), "{found:?}");
}

#[test]
fn a_capture_of_a_capture_keeps_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    let out = gdrdoctor(&[
        "--root",
        fixture("kernel-log-xid"),
        "capture",
        copy.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let before = kernel_log(Path::new(fixture("kernel-log-xid")), &[]);
    let after = kernel_log(&copy, &[]);
    assert_eq!(before, after);
    assert!(
        after
            .iter()
            .any(|f| f.0 == "kernel-log-xid" && f.1 == "warn")
    );
}

/// This machine's own log: read live (as root, or where kernel.dmesg_restrict is 0), judged, and
/// carried into a capture whose report says the same.
#[test]
fn the_live_log_is_read_and_captured() {
    let live = kernel_log(Path::new("/"), &[]);
    assert!(!live.is_empty());
    let readable = std::fs::File::open("/dev/kmsg").is_ok();
    if !readable {
        assert_eq!(live[0].0, "kernel-log-unreadable", "{live:?}");
        assert_eq!(live[0].1, "unknown", "{live:?}");
        return;
    }
    assert!(
        live.iter()
            .all(|f| f.1 != "unknown" && f.3.iter().all(|p| p == "/dev/kmsg")),
        "{live:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("copy");
    let out = gdrdoctor(&["capture", "--no-gpu-probe", copy.to_str().unwrap()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = std::fs::read_to_string(copy.join("gdrdoctor/kernel-log")).unwrap();
    assert!(text.starts_with(HEAD), "{text}");
    let offline: Vec<_> = kernel_log(&copy, &[])
        .into_iter()
        .map(|(c, s, subj, _)| (c, s, subj))
        .collect();
    let live: Vec<_> = live
        .into_iter()
        .map(|(c, s, subj, _)| (c, s, subj))
        .collect();
    assert_eq!(offline, live);
}

/// `check --baseline FILE` (what the metrics timer runs): the first run has nothing to compare
/// and writes FILE, a capture archive of what it read; the next compares with it; one from
/// another boot is not compared; FILE given as a link is replaced, never written through.
#[test]
fn the_baseline_is_kept_compared_and_never_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("baseline.tar.gz");
    let run = |f: &Path| {
        gdrdoctor(&[
            "check",
            "--select",
            "kernel-log",
            "--baseline",
            f.to_str().unwrap(),
            "--format",
            "json",
        ])
    };
    let first = run(&file);
    assert!(
        stderr(&first).contains("no baseline yet (the first run writes it)"),
        "{}",
        stderr(&first)
    );
    // A capture archive: a root of its own, with when and on which boot it was read.
    let meta = gdrdoctor(&[
        "--root",
        file.to_str().unwrap(),
        "check",
        "--select",
        "kernel-log",
    ]);
    assert_ne!(code(&meta), 2, "{}", stderr(&meta));
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let second = run(&file);
    assert!(
        !stderr(&second).contains("--baseline"),
        "{}",
        stderr(&second)
    );
    // Nothing the kernel logged between the two runs is a finding here (none is expected on a
    // test machine; if one came, it would be judged, not ignored).
    let report = json(&second);
    assert!(
        all_findings(&report).all(|f| f["code"] != "kernel-log-errors-now"),
        "{report}"
    );

    // Another boot: rewrite the boot_id in a copy of the archive.
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = std::process::Command::new("tar")
        .args([
            "xzf",
            file.to_str().unwrap(),
            "-C",
            unpacked.to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(tar.success());
    let meta_path = unpacked.join("gdrdoctor/baseline");
    let text = std::fs::read_to_string(&meta_path).unwrap();
    assert!(text.contains(&format!("boot_id={}", boot.trim())), "{text}");
    std::fs::write(
        &meta_path,
        text.replace(boot.trim(), "00000000-0000-0000-0000-000000000000"),
    )
    .unwrap();
    let other = dir.path().join("other-boot.tar.gz");
    let tar = std::process::Command::new("tar")
        .args([
            "czf",
            other.to_str().unwrap(),
            "-C",
            unpacked.to_str().unwrap(),
            ".",
        ])
        .status()
        .unwrap();
    assert!(tar.success());
    let out = run(&other);
    assert!(
        stderr(&out).contains("read on another boot"),
        "{}",
        stderr(&out)
    );

    // FILE is a link to a file elsewhere: neither read nor replaced (issue 41), its target left
    // as it was, and the run says so.
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "not yours\n").unwrap();
    let link = dir.path().join("link.tar.gz");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let out = run(&link);
    assert_ne!(code(&out), 2, "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "not yours\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        stderr(&out).contains("a symbolic link, not a baseline gdrdoctor wrote"),
        "{}",
        stderr(&out)
    );
    // A captured root has one reading: refused.
    let out = gdrdoctor(&[
        "--root",
        fixture("kernel-log-xid"),
        "check",
        "--baseline",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 2);
}
