//! The broken and hostile corpus (fixtures/broken/, each case with a FIXTURE.md), plus what git
//! cannot hold (FIFOs, device nodes, permissions, non-UTF-8 names), built at run time. Whatever
//! the input: exit 0 or 1 (never a panic, never 2 for a readable root), no host data in the
//! report, no raw control characters on the terminal, and the bad path named.
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

mod common;
use common::*;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const CASES: &[&str] = &[
    "absurd-values",
    "binary-garbage",
    "dangling-links",
    "empty-files",
    "escaping-links",
    "hostile-names",
    "link-loops",
    "non-utf8",
    "proc-only",
    "sys-only",
    "truncated-config",
];

/// Runs gdrdoctor on `root` with a watchdog: a hang (a FIFO read, a link loop) is a failure,
/// not a stuck test run.
fn run_on(root: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gdrdoctor"))
        .arg("--root")
        .arg(root)
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("gdrdoctor hung on {}", root.display());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.wait_with_output().unwrap()
}

fn case(name: &str) -> std::path::PathBuf {
    crate_dir().join("fixtures/broken").join(name)
}

fn problems(report: &serde_json::Value) -> Vec<(String, String)> {
    report["inventory"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap().to_owned(),
                p["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn has_problem(report: &serde_json::Value, path: &str, message: &str) -> bool {
    problems(report)
        .iter()
        .any(|(p, m)| p == path && m.contains(message))
}

fn finding<'a>(report: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap())
        .filter(|f| f["code"] == code)
        .collect()
}

fn status_of(report: &serde_json::Value, check: &str) -> String {
    statuses(report)
        .into_iter()
        .find(|(c, _)| c == check)
        .unwrap()
        .1
}

#[test]
fn every_case_reports_without_panic_leak_or_escape_codes() {
    let host_cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    for name in CASES {
        let root = case(name);
        // A distinctive word of this machine's own command line must never show up (one that
        // the capture's own command line does not happen to contain as well).
        let own = std::fs::read(root.join("proc/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let host_word = host_cmdline
            .split_whitespace()
            .filter(|w| !own.contains(w))
            .max_by_key(|w| w.len())
            .unwrap_or("")
            .to_owned();
        for format in ["human", "json"] {
            let out = run_on(&root, &["check", "-v", "--format", format]);
            let c = code(&out);
            assert!(
                c == 0 || c == 1,
                "{name} {format}: exit {c}\n{}",
                stderr(&out)
            );
            let text = stdout(&out);
            assert!(
                !text.contains("root:x:0:0"),
                "{name}: host /etc/passwd leaked"
            );
            assert!(
                host_word.len() < 8 || !text.contains(&host_word),
                "{name}: host /proc/cmdline leaked ({host_word})"
            );
            assert!(text.len() < 200_000, "{name}: a {} byte report", text.len());
            if format == "human" {
                let raw = text.chars().find(|c| c.is_control() && *c != '\n');
                assert!(
                    raw.is_none(),
                    "{name}: raw control character {raw:?} reaches the terminal"
                );
            } else {
                json(&out);
            }
        }
    }
}

#[test]
fn corpus_is_listed() {
    let mut on_disk: Vec<String> = std::fs::read_dir(crate_dir().join("fixtures/broken"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    assert_eq!(on_disk, CASES, "every broken case needs a test here");
    for name in CASES {
        assert!(
            case(name).join("FIXTURE.md").is_file(),
            "{name} has no FIXTURE.md"
        );
    }
}

#[test]
fn empty_files_are_unknown_not_absent() {
    let r = json(&run_on(
        &case("empty-files"),
        &["check", "--format", "json"],
    ));
    assert_eq!(
        status_of(&r, "gpu-driver"),
        "unknown",
        "no GPU identified is not no GPU"
    );
    assert!(finding(&r, "gpu-none").is_empty());
    assert!(!finding(&r, "pci-unidentified").is_empty());
    assert!(has_problem(
        &r,
        "/proc/sys/kernel/osrelease",
        "cannot parse \"\""
    ));
    assert_eq!(r["verdict"]["verified"], false);
    // Nothing could be judged: that is not a ready node (issue 14).
    assert_eq!(r["verdict"]["state"], "nothing-verified");
    assert_eq!(r["verdict"]["exit_code"], 1);
}

#[test]
fn binary_garbage_is_escaped() {
    let out = run_on(&case("binary-garbage"), &["check", "-v"]);
    let text = stdout(&out);
    assert!(
        text.contains("\\u{1b}"),
        "escape bytes are shown escaped: {text}"
    );
    let r = json(&run_on(
        &case("binary-garbage"),
        &["check", "--format", "json"],
    ));
    assert!(has_problem(&r, "/proc/config.gz", "cannot decompress"));
    assert!(problems(&r).iter().any(|(p, m)| {
        p.starts_with("/sys/class/infiniband/mlx5_0/ports/1/gids/") && m == "not UTF-8 text"
    }));
}

#[test]
fn non_utf8_files_are_named() {
    let r = json(&run_on(&case("non-utf8"), &["check", "--format", "json"]));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3",
        "not UTF-8"
    ));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0/ports/1/gids/1",
        "not UTF-8"
    ));
    let port = &finding(&r, "rdma-port-unreadable")[0];
    assert!(
        port["message"]
            .as_str()
            .unwrap()
            .contains("/sys/class/infiniband/mlx5_0/ports/1/state: not UTF-8 text"),
        "{port}"
    );
    assert_eq!(
        finding(&r, "gpu-driver-version-unknown")[0]["status"],
        "unknown"
    );
    // The command line is unreadable, and the IOMMU verdict must not pretend otherwise.
    let iommu = &check(&r, "iommu")["findings"][0];
    assert!(
        !iommu["message"]
            .as_str()
            .unwrap()
            .contains("no IOMMU words"),
        "{iommu}"
    );
}

#[test]
fn truncated_config_falls_back_to_attribute_files() {
    let r = json(&run_on(
        &case("truncated-config"),
        &["check", "--format", "json"],
    ));
    assert_eq!(r["node"]["gpus"], 1);
    assert_eq!(r["inventory"]["gpus"][0]["ids"], "10de:2330");
}

#[test]
fn proc_only_and_sys_only_are_incomplete_not_empty() {
    let r = json(&run_on(&case("proc-only"), &["check", "--format", "json"]));
    assert_eq!(status_of(&r, "gpu-driver"), "unknown");
    assert_eq!(
        finding(&r, "pci-unidentified")[0]["subject"],
        "/sys/bus/pci/devices"
    );
    assert_eq!(
        status_of(&r, "rdma-link"),
        "unknown",
        "no /sys at all says nothing about RDMA"
    );
    assert!(finding(&r, "rdma-no-device").is_empty());

    let r = json(&run_on(&case("sys-only"), &["check", "--format", "json"]));
    let f = &finding(&r, "gpu-driver-version-unknown")[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("/proc/driver/nvidia/version: not found"),
        "{f}"
    );
    assert_eq!(status_of(&r, "peer-memory"), "unknown");
}

#[test]
fn dangling_links_leave_devices_unidentified() {
    let r = json(&run_on(
        &case("dangling-links"),
        &["check", "--format", "json"],
    ));
    assert_eq!(finding(&r, "pci-unidentified").len(), 5);
    assert!(has_problem(&r, "/sys/class/infiniband/mlx5_0", "not found"));
    let dups = problems(&r).len() - {
        let mut p = problems(&r);
        p.dedup();
        p.len()
    };
    assert_eq!(dups, 0, "each problem once");
    assert!(finding(&r, "check-silent").is_empty());
}

#[test]
fn link_loops_end() {
    let r = json(&run_on(&case("link-loops"), &["check", "--format", "json"]));
    assert!(has_problem(
        &r,
        "/sys/bus/pci/devices/0000:01:00.0",
        "too many levels of symbolic links"
    ));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0",
        "too many levels of symbolic links"
    ));
    assert!(
        !finding(&r, "rdma-port-unreadable").is_empty(),
        "mlx5_1's looping port directory"
    );
}

#[test]
fn escaping_links_stay_inside() {
    let r = json(&run_on(
        &case("escaping-links"),
        &["check", "--format", "json"],
    ));
    // proc/cmdline -> /proc/cmdline resolves to itself inside the capture: a loop, not the host's.
    let cmdline = check(&r, "iommu")["findings"][0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/proc/cmdline")
        .cloned();
    if let Some(e) = cmdline {
        assert!(e["value"].as_str().unwrap().starts_with('<'), "{e}");
    }
    assert!(
        has_problem(
            &r,
            "/sys/class/infiniband/mlx5_0/ports/1/gids/3",
            "not found"
        ),
        "gids/3 -> /etc/passwd is not the host's"
    );
    assert!(
        problems(&r)
            .iter()
            .any(|(p, m)| p.ends_with("/driver") && m.contains("does not name one of drivers/"))
    );
    assert_eq!(
        r["inventory"]["rdma_devices"][0]["driver"],
        serde_json::Value::Null,
        "no driver named \"etc\""
    );
    let gid = &finding(&r, "rdma-gid-unreadable")[0];
    assert!(
        gid["message"]
            .as_str()
            .unwrap()
            .contains("not fully readable"),
        "{gid}"
    );
}

#[test]
fn absurd_values_are_bounded_and_named() {
    let r = json(&run_on(
        &case("absurd-values"),
        &["check", "--format", "json"],
    ));
    assert!(has_problem(&r, "/proc/config.gz", "more than 16 MiB"));
    assert!(has_problem(
        &r,
        "/proc/sys/kernel/osrelease",
        "cannot parse"
    ));
    assert!(problems(&r).iter().any(|(p, _)| p.ends_with("/numa_node")));
    assert!(
        problems(&r)
            .iter()
            .any(|(p, _)| p.ends_with("/current_link_width"))
    );
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0/ports/99999",
        "not a port number"
    ));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0/ports/1/gids/4294967296",
        "not a GID index"
    ));
    let f = &finding(&r, "gpu-driver-version-unknown")[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("larger than 1048576 bytes"),
        "{f}"
    );
    assert!(r["node"]["kernel"].as_str().unwrap().len() <= 64);
}

#[test]
fn hostile_names_are_refused_and_named() {
    let r = json(&run_on(
        &case("hostile-names"),
        &["check", "--format", "json"],
    ));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/x;rm -rf ~",
        "not a valid RDMA device name"
    ));
    assert!(has_problem(
        &r,
        "/sys/bus/pci/devices/0000:00:1f.7;reboot",
        "not a valid PCI address"
    ));
    assert!(has_problem(
        &r,
        "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/3",
        "eth0;reboot"
    ));
    let text = serde_json::to_string(&r["checks"]).unwrap();
    assert!(
        !text.contains("rm -rf") && !text.contains("(reboot)"),
        "hostile names reach no finding or fix"
    );
}

/// A small root to break at run time: the H200 capture, copied.
fn scratch() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(crate_dir().join("fixtures/h200x2-vm"))
            .arg(&root)
            .status()
            .unwrap()
            .success()
    );
    (dir, root)
}

#[test]
fn a_fifo_is_refused_without_blocking() {
    let (_d, root) = scratch();
    let target = root.join("proc/driver/nvidia/version");
    std::fs::remove_file(&target).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&target)
            .status()
            .unwrap()
            .success()
    );
    let r = json(&run_on(&root, &["check", "--format", "json"]));
    let f = &finding(&r, "gpu-driver-version-unknown")[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("not a regular file (FIFO)"),
        "{f}"
    );
}

#[test]
fn a_device_node_is_never_opened() {
    // mknod needs CAP_MKNOD; CI runs as root. Without it, the case cannot be built here.
    let (_d, root) = scratch();
    let target = root.join("proc/cmdline");
    std::fs::remove_file(&target).unwrap();
    let made = Command::new("mknod")
        .arg(&target)
        .args(["c", "1", "3"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !made {
        eprintln!("mknod not permitted here: device-node case not exercised");
        return;
    }
    let r = json(&run_on(&root, &["check", "--format", "json"]));
    let e = check(&r, "iommu")["findings"][0]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "/proc/cmdline")
        .cloned()
        .unwrap();
    assert_eq!(e["value"], "<not a regular file (character device)>");
}

#[test]
fn unreadable_files_are_named() {
    let (d, root) = scratch();
    let target = root.join("proc/driver/nvidia/version");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o000)).unwrap();
    let root_user = effective_uid() == 0;
    let out = if root_user {
        // Root reads anything: run as nobody, with the tree itself readable.
        for p in [d.path(), &root] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let bin = env!("CARGO_BIN_EXE_gdrdoctor");
        let o = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                bin,
                "--root",
            ])
            .arg(&root)
            .args(["check", "--format", "json"])
            .output();
        match o {
            Ok(o) if o.status.code().is_some() && !o.stdout.is_empty() => o,
            _ => {
                eprintln!("setpriv unavailable: permission case not exercised as root");
                return;
            }
        }
    } else {
        run_on(&root, &["check", "--format", "json"])
    };
    let r = json(&out);
    let f = &finding(&r, "gpu-driver-version-unknown")[0];
    assert!(
        f["message"].as_str().unwrap().contains("permission denied"),
        "{f}"
    );
}

/// The effective user, from /proc/self/status (no libc call needed in a test).
fn effective_uid() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    uid.split_whitespace().nth(2).unwrap().parse().unwrap()
}

#[test]
fn non_utf8_names_are_named() {
    use std::os::unix::ffi::OsStrExt;
    let (_d, root) = scratch();
    let bad = std::ffi::OsStr::from_bytes(b"mlx\xff5_0");
    std::fs::create_dir_all(root.join("sys/devices/virtual/infiniband").join(bad)).unwrap();
    std::fs::create_dir_all(root.join("sys/class/infiniband")).unwrap(); // git keeps no empty directory
    symlink(
        Path::new("../../devices/virtual/infiniband").join(bad),
        root.join("sys/class/infiniband").join(bad),
    )
    .unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:00:06.0",
        root.join("sys/bus/pci/devices")
            .join(std::ffi::OsStr::from_bytes(b"0000:00:\xfe.0")),
    )
    .unwrap();
    let r = json(&run_on(&root, &["check", "--format", "json"]));
    assert!(
        has_problem(&r, "/sys/class/infiniband/mlx\u{fffd}5_0", "not UTF-8"),
        "{:?}",
        problems(&r)
    );
    assert!(
        has_problem(&r, "/sys/bus/pci/devices/0000:00:\u{fffd}.0", "not UTF-8"),
        "{:?}",
        problems(&r)
    );
    assert_eq!(r["node"]["gpus"], 2);
}
