use super::path::normalise_slashes;
use super::resolve::split_last;
use super::*;
use std::os::unix::fs::symlink;

fn tree() -> (tempfile::TempDir, Root) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys/devices/pci0000:00/0000:00:06.0")).unwrap();
    std::fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
    std::fs::write(
        dir.path()
            .join("sys/devices/pci0000:00/0000:00:06.0/vendor"),
        "0x10de\n",
    )
    .unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:06.0",
        dir.path().join("sys/bus/pci/devices/0000:00:06.0"),
    )
    .unwrap();
    let root = Root::captured(dir.path()).unwrap();
    (dir, root)
}

/// What a capture could not read on the node (`/gdrdoctor/unread.json`) fails here as it
/// failed there, with its kind, through links too; and a capture of this root records it
/// again (issue 25).
#[test]
fn recorded_failures_are_replayed() {
    let (dir, _) = tree();
    let base = dir.path();
    // The directories a capture walked through are in it, the failed entries are not.
    for d in ["sys/class/infiniband", "etc", "gdrdoctor"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    std::fs::write(
        base.join("gdrdoctor/unread.json"),
        r#"{"schema": "gdrdoctor.unread", "unread": [
            {"path": "/sys/devices/pci0000:00/0000:00:06.0/config", "op": "read",
             "error": "permission-denied", "message": "permission denied"},
            {"path": "/sys/class/infiniband", "op": "list",
             "error": "permission-denied", "message": "permission denied"},
            {"path": "/etc/nccl.conf", "op": "read", "error": "not-regular", "kind": "FIFO",
             "message": "not a regular file (FIFO)"},
            {"path": "/sys/kernel", "op": "lookup", "error": "io", "errno": 5,
             "message": "Input/output error (os error 5)"}]}"#,
    )
    .unwrap();
    let root = Root::captured(base).unwrap().recording();
    assert_eq!(root.unread_problem(), None);
    assert_eq!(
        root.read("/sys/bus/pci/devices/0000:00:06.0/config"),
        Err(ReadError::PermissionDenied {
            path: "/sys/bus/pci/devices/0000:00:06.0/config".into()
        })
    );
    assert_eq!(
        root.read_dir("/sys/class/infiniband").unwrap_err(),
        ReadError::PermissionDenied {
            path: "/sys/class/infiniband".into()
        }
    );
    assert!(
        root.is_dir("/sys/class/infiniband"),
        "listing, not lookup, failed"
    );
    assert_eq!(
        root.read("/etc/nccl.conf"),
        Err(ReadError::NotRegular {
            path: "/etc/nccl.conf".into(),
            kind: "FIFO"
        })
    );
    assert!(matches!(
        root.read("/sys/kernel/iommu_groups/0/type"),
        Err(ReadError::Io { errno: Some(5), .. })
    ));
    // What was read well still is.
    assert_eq!(
        root.read_text("/sys/bus/pci/devices/0000:00:06.0/vendor")
            .unwrap(),
        "0x10de"
    );
    let again = root.recorded();
    assert_eq!(again.unread.len(), 4, "{:?}", again.unread);
    assert!(again.unread_json().unwrap().contains("\"kind\": \"FIFO\""));
    // A record that is not one is a problem, and replays nothing.
    std::fs::write(base.join("gdrdoctor/unread.json"), "[]").unwrap();
    let root = Root::captured(base).unwrap();
    assert!(root.unread_problem().is_some());
    assert!(root.read("/etc/nccl.conf").unwrap_err().is_not_found());
}

/// A link read with `read_link` is recorded for `gdrdoctor capture` from a directory and from
/// an archive alike (an archive's links used to be read but not recorded, so a capture of an
/// archive lost every `driver` link, and the GPUs' drivers with them).
#[test]
fn read_links_are_recorded_from_archives_too() {
    let (d, dir_root) = tree();
    let archive = d.path().join("capture.tar.gz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&archive).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all("sys", d.path().join("sys")).unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let link = "/sys/bus/pci/devices/0000:00:06.0";
    for root in [dir_root, Root::archive(&archive).unwrap()] {
        let root = root.recording();
        let target = root.read_link(link).unwrap();
        assert_eq!(target, "../../../devices/pci0000:00/0000:00:06.0");
        assert_eq!(root.recorded().links.get(link), Some(&target), "{root:?}");
    }
}

#[test]
fn relative_links_resolve_inside() {
    let (_d, root) = tree();
    assert_eq!(
        root.read_text("/sys/bus/pci/devices/0000:00:06.0/vendor")
            .unwrap(),
        "0x10de"
    );
    assert_eq!(
        root.canonical("/sys/bus/pci/devices/0000:00:06.0").unwrap(),
        "/sys/devices/pci0000:00/0000:00:06.0"
    );
}

#[test]
fn absolute_link_stays_in_root() {
    let (d, root) = tree();
    // A capture's absolute link to the host's /etc/hostname must read the capture's copy.
    std::fs::create_dir_all(d.path().join("etc")).unwrap();
    std::fs::write(d.path().join("etc/hostname"), "captured\n").unwrap();
    symlink("/etc/hostname", d.path().join("sys/evil")).unwrap();
    assert_eq!(root.read_text("/sys/evil").unwrap(), "captured");
    symlink("/etc/passwd", d.path().join("sys/evil2")).unwrap();
    assert!(root.read_text("/sys/evil2").unwrap_err().is_not_found());
}

#[test]
fn dotdot_link_is_clamped_at_root() {
    let (d, root) = tree();
    symlink(
        "../../../../../../../../etc/passwd",
        d.path().join("sys/devices/up"),
    )
    .unwrap();
    let err = root.read_text("/sys/devices/up").unwrap_err();
    assert_eq!(
        err,
        ReadError::NotFound {
            path: "/sys/devices/up".into()
        }
    );
    // And a path with .. in it cannot climb out either.
    assert!(
        root.read_text("/../../../../etc/passwd")
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn loops_and_dangling_links_are_errors() {
    let (d, root) = tree();
    symlink("b", d.path().join("sys/a")).unwrap();
    symlink("a", d.path().join("sys/b")).unwrap();
    assert!(matches!(
        root.read_text("/sys/a"),
        Err(ReadError::Loop { .. })
    ));
    symlink("nowhere", d.path().join("sys/dangling")).unwrap();
    assert!(root.read_text("/sys/dangling").unwrap_err().is_not_found());
    assert_eq!(root.read_link("/sys/dangling").unwrap(), "nowhere");
}

/// Paths and link targets of thousands of components are refused as the kernel refuses
/// them, without recursion (issue 25: a stack overflow before); within PATH_MAX they resolve.
#[test]
fn long_paths_are_refused_and_long_targets_within_the_limit_resolve() {
    let (d, root) = tree();
    let long = format!("/sys{}", "/x".repeat(10_000));
    for e in [
        root.read_text(&long).unwrap_err(),
        root.read_link(&long).unwrap_err(),
        root.read_text(&format!("/sys/{}", "y".repeat(300)))
            .unwrap_err(),
    ] {
        assert!(matches!(e, ReadError::NameTooLong { .. }), "{e:?}");
        assert!(e.to_string().len() < 300, "{e}");
    }
    // 2,000 components, within PATH_MAX (a link on disk can hold no more).
    let target = format!("{}devices/pci0000:00/0000:00:06.0", "./".repeat(2_000));
    symlink(&target, d.path().join("sys/deep")).unwrap();
    assert_eq!(root.read_text("/sys/deep/vendor").unwrap(), "0x10de");
    assert_eq!(
        root.canonical("/sys/deep").unwrap(),
        "/sys/devices/pci0000:00/0000:00:06.0"
    );
}

/// MAXSYMLINKS counts every link of one lookup, as the kernel counts them: 40 pass, 41 are
/// a loop, however they nest.
#[test]
fn links_are_counted_over_the_whole_lookup() {
    let (d, root) = tree();
    symlink(
        "devices/pci0000:00/0000:00:06.0/vendor",
        d.path().join("sys/l40"),
    )
    .unwrap();
    for i in 0..40 {
        symlink(format!("l{}", i + 1), d.path().join(format!("sys/l{i}"))).unwrap();
    }
    assert_eq!(root.read_text("/sys/l1").unwrap(), "0x10de");
    assert!(matches!(
        root.read_text("/sys/l0"),
        Err(ReadError::Loop { path }) if path == "/sys/l0"
    ));
    // A link to the root itself, twice on the way: 2 + 38 links pass, 2 + 39 do not.
    symlink("/", d.path().join("sys/top")).unwrap();
    assert_eq!(root.canonical("/sys/top").unwrap(), "/");
    assert_eq!(root.read_text("/sys/top/sys/top/sys/l2").unwrap(), "0x10de");
    // (On a fresh root: a directory resolved once is remembered, its links not walked again.)
    let fresh = Root::captured(d.path()).unwrap();
    assert!(matches!(
        fresh.read_text("/sys/top/sys/top/sys/l1"),
        Err(ReadError::Loop { .. })
    ));
}

#[test]
fn fifo_is_refused_without_blocking() {
    let (d, root) = tree();
    let fifo = d.path().join("sys/fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    assert!(matches!(
        root.read("/sys/fifo"),
        Err(ReadError::NotRegular { kind: "FIFO", .. })
    ));
}

#[test]
fn oversized_file_is_an_error() {
    let (d, root) = tree();
    std::fs::write(d.path().join("sys/big"), vec![b'x'; 2048]).unwrap();
    assert!(matches!(
        root.read_limited("/sys/big", 1024),
        Err(ReadError::TooLarge { .. })
    ));
    assert_eq!(root.read_limited("/sys/big", 2048).unwrap().len(), 2048);
}

#[test]
fn listed_directories_answer_lookups() {
    let (d, root) = tree();
    let dir = d.path().join("sys/devices/pci0000:00/0000:00:06.0");
    std::fs::write(dir.join("big"), vec![b'y'; 10_000]).unwrap();
    symlink("big", dir.join("link")).unwrap();
    let listing = root.read_dir("/sys/bus/pci/devices/0000:00:06.0").unwrap();
    assert_eq!(listing.names, ["big", "link", "vendor"]);
    // Sizes are unknown after a listing: the read grows until a short read.
    assert_eq!(
        root.read("/sys/devices/pci0000:00/0000:00:06.0/big")
            .unwrap()
            .len(),
        10_000
    );
    assert_eq!(
        root.read("/sys/devices/pci0000:00/0000:00:06.0/link")
            .unwrap()
            .len(),
        10_000
    );
    assert_eq!(
        root.read_prefix("/sys/devices/pci0000:00/0000:00:06.0/big", 64)
            .unwrap()
            .len(),
        64
    );
    assert!(
        root.read("/sys/devices/pci0000:00/0000:00:06.0/absent")
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn not_a_root() {
    let d = tempfile::tempdir().unwrap();
    assert!(matches!(
        Root::captured(d.path()),
        Err(RootError::NotARoot(_))
    ));
    assert!(matches!(
        Root::captured(&d.path().join("missing")),
        Err(RootError::Open(..))
    ));
}

#[test]
fn split_and_normalise() {
    assert_eq!(split_last("/sys/class"), ("/sys", "class"));
    assert_eq!(split_last("/sys"), ("/", "sys"));
    assert_eq!(split_last("/"), ("/", ""));
    assert_eq!(normalise_slashes("//sys///class/"), "/sys/class");
}

/// A capture in memory answers a plain path without walking it (`Root::in_tree`, issue 43);
/// the walk (taken when recording) must say the same of every path: files, directories,
/// absent names, paths through relative, `..`, dangling and looping links (an archive refuses
/// absolute targets and targets out of it), a file
/// used as a directory, and paths that are not plain.
#[test]
fn paths_in_memory_resolve_as_the_walk_does() {
    let (d, _) = tree();
    let p = d.path();
    std::fs::create_dir_all(p.join("sys/class/infiniband")).unwrap();
    std::fs::create_dir_all(p.join("proc/driver/nvidia")).unwrap();
    std::fs::write(p.join("proc/driver/nvidia/version"), "NVRM 580\n").unwrap();
    let links = [
        (
            "sys/class/infiniband/mlx5_0",
            "../../devices/pci0000:00/0000:00:06.0",
        ),
        ("sys/class/up", "../.."),
        ("sys/class/dangling", "../nothing/here"),
        ("sys/class/loop", "loop"),
        ("sys/class/tofile", "../../proc/driver/nvidia/version"),
    ];
    for (at, to) in links {
        symlink(to, p.join(at)).unwrap();
    }
    let archive = p.join("capture.tar.gz");
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&archive).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    tar.follow_symlinks(false);
    tar.append_dir_all("sys", p.join("sys")).unwrap();
    tar.append_dir_all("proc", p.join("proc")).unwrap();
    tar.into_inner().unwrap().finish().unwrap();
    let fast = Root::archive(&archive).unwrap();
    let walk = Root::archive(&archive).unwrap().recording();
    let paths = [
        "/sys/devices/pci0000:00/0000:00:06.0/vendor",
        "/sys/devices/pci0000:00/0000:00:06.0",
        "/sys/devices/pci0000:00/0000:00:06.0/absent",
        "/sys/devices/pci0000:00/absent/vendor",
        "/sys/bus/pci/devices/0000:00:06.0/vendor",
        "/sys/class/infiniband/mlx5_0/vendor",
        "/sys/class/infiniband/mlx5_0/absent",
        "/sys/class/infiniband/mlx5_0/vendor",
        "/sys/bus/pci/devices/0000:00:06.0/absent",
        "/sys/class/up/proc/driver/nvidia/version",
        "/sys/class/dangling",
        "/sys/class/dangling/x",
        "/sys/class/loop/x",
        "/sys/class/tofile",
        "/sys/class/tofile/x",
        "/proc/driver/nvidia/version",
        "/proc/driver/nvidia/version/x",
        "/proc/driver/nvidia/version/x/y",
        "/proc//driver/nvidia/version",
        "/proc/./driver/nvidia/version",
        "/proc/driver/../driver/nvidia/version",
        "/proc/driver/nvidia/",
        "/",
        "",
        "/nothing",
        "/sys",
    ];
    let long = format!("/sys/{}", "x".repeat(300));
    for path in paths.iter().copied().chain([long.as_str()]) {
        let (a, b) = (fast.read_prefix(path, 4096), walk.read_prefix(path, 4096));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "read {path:?}");
        let (a, b) = (fast.kind(path), walk.kind(path));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "kind {path:?}");
        let (a, b) = (fast.canonical(path), walk.canonical(path));
        assert_eq!(format!("{a:?}"), format!("{b:?}"), "canonical {path:?}");
    }
    // The fast answers are not all errors: the test reads something.
    assert_eq!(
        fast.read_prefix("/sys/class/infiniband/mlx5_0/vendor", 64)
            .unwrap(),
        b"0x10de\n"
    );
    assert!(
        fast.read_prefix("/proc/driver/nvidia/absent", 64)
            .unwrap_err()
            .is_not_found()
    );
}

/// A directory the walk found missing, or found through a link, is not looked at again, and
/// every lookup through it answers as the walk did: the path asked in a not-found error, a
/// file below a directory found through a link (issue 43: the bench root looked at an absent
/// `hw_counters` once per counter, and at each PCI function's directory twice).
#[test]
fn directories_found_or_missing_answer_again_as_the_walk_did() {
    let (dir, _) = tree();
    std::fs::create_dir_all(dir.path().join("sys/class/infiniband")).unwrap();
    let root = Root::captured(dir.path()).unwrap();
    for name in ["a", "b", "c"] {
        assert_eq!(
            root.read(&format!("/sys/class/infiniband/hw_counters/{name}")),
            Err(ReadError::NotFound {
                path: format!("/sys/class/infiniband/hw_counters/{name}")
            })
        );
    }
    assert!(
        root.lock_missing()
            .contains("/sys/class/infiniband/hw_counters")
    );
    // The directory through a link, looked up as the last component, then a file in it.
    let (found, kind) = root.lookup("/sys/bus/pci/devices/0000:00:06.0").unwrap();
    assert_eq!(
        (found.as_str(), kind),
        ("/sys/devices/pci0000:00/0000:00:06.0", Kind::Dir)
    );
    assert_eq!(
        root.read_text("/sys/bus/pci/devices/0000:00:06.0/vendor")
            .as_deref(),
        Ok("0x10de")
    );
    // A root of the same tree that remembers nothing answers the same.
    let fresh = Root::captured(dir.path()).unwrap();
    assert_eq!(
        fresh.read("/sys/class/infiniband/hw_counters/a"),
        root.read("/sys/class/infiniband/hw_counters/a")
    );
    // A root that records keeps each failed lookup: it remembers none of them.
    let recording = Root::captured(dir.path()).unwrap().recording();
    for _ in 0..2 {
        assert!(
            recording
                .read("/sys/class/infiniband/hw_counters/a")
                .is_err()
        );
    }
    assert!(
        !recording
            .lock_missing()
            .contains("/sys/class/infiniband/hw_counters")
    );
}
