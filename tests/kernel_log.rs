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

/// `root`'s kernel log replaced by `records` (`/dev/kmsg` lines), the check run as JSON.
fn with_log(fixture: &str, records: &[&str], nvidia: Option<&str>) -> serde_json::Value {
    let (_dir, root) = fixture_copy(fixture);
    let body: String = records
        .iter()
        .enumerate()
        .map(|(i, r)| format!("4,{},{},-;{r}\n", 100 + i, 1_000_000 * (i + 1)))
        .collect();
    std::fs::write(
        root.join("gdrdoctor/kernel-log"),
        format!("{HEAD}# read: 200 records, last sequence 199\n{body}"),
    )
    .unwrap();
    if let Some(v) = nvidia {
        std::fs::write(root.join("proc/driver/nvidia/version"), v).unwrap();
    }
    json(&gdrdoctor(&[
        "--root",
        root.to_str().unwrap(),
        "check",
        "--select",
        "kernel-log",
        "--format",
        "json",
    ]))
}

/// Issue 40: an Xid from a MIG instance, in the form NVIDIA's A100 memory error management guide
/// prints it (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html:
/// `NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No,
/// D-RST: No`), the address changed to the fixture's GPU: it is the GPU's, with its instance
/// said, its fix names the GPU (never a `<bdf>` a script would run as a redirection), and the
/// check's JSON summary says it.
#[test]
fn an_xid_from_a_mig_instance_is_the_gpus() {
    let r = with_log(
        "healthy-8gpu-roce",
        &[
            "NVRM: Xid (PCI:0000:18:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No",
        ],
        None,
    );
    let f = &findings_with(&r, "kernel-log-xid")[0];
    assert!(
        f["subject"]
            .as_str()
            .unwrap()
            .starts_with("GPU 0000:18:00.0"),
        "{f}"
    );
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("Xid 94 (contained ECC error) in MIG instance GPU-I:05"),
        "{m}"
    );
    let fix = f["fix"].to_string();
    assert!(
        fix.contains("nvidia-smi -r -i 0000:18:00.0") && !fix.contains("<bdf>"),
        "{fix}"
    );
    let summary = check(&r, "kernel-log")["summary"].as_str().unwrap();
    assert!(summary.contains("Xid 94"), "summary: {summary:?}");
}

/// Issue 40: Blackwell's NVLink Xids (144-150) as gpud's tests quote GB200 records
/// (leptonai/gpud#1174, https://github.com/leptonai/gpud/pull/1174): `Xid 149, NETIR Fatal XC0
/// i0 Link -1 (...)` needs the GPU reset (a warning, action reset-gpu); `Xid 145, RLW_RXPIPE
/// Nonfatal ...` the link recovered from (history), neither an application fault.
#[test]
fn nvlink_xids_144_to_150_are_nvlink_errors() {
    let r = with_log(
        "healthy-8gpu-roce",
        &[
            "NVRM: Xid (PCI:0000:18:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
            "NVRM: Xid (PCI:0000:1a:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00100000 0x00000004)",
        ],
        None,
    );
    let f = &findings_with(&r, "kernel-log-xid")[0];
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("Xid 149 (NVLink error (NETIR))"),
        "{f}"
    );
    assert_eq!(f["action"], "reset-gpu", "{f}");
    let h = &findings_with(&r, "kernel-log-history")[0];
    let m = h["message"].as_str().unwrap();
    assert!(
        m.contains("Xid 145 (NVLink error (RLW), nonfatal)")
            && m.contains("nonfatal NVLink errors"),
        "{m}"
    );
    assert!(!m.contains("restarting the application"), "{m}");
}

/// Issue 40: a GPU that fell off the bus as the driver says it without an Xid, in the three
/// lines NVIDIA/NVSentinel#155 (https://github.com/NVIDIA/NVSentinel/issues/155) posted from an
/// on-prem fleet (`/dev/kmsg` gives them as one record, the newlines escaped), and an old
/// driver's `NVRM: RmInitAdapter failed!` without the GPU's address: neither passes.
#[test]
fn a_gpu_fallen_off_the_bus_without_an_xid_and_rm_init_adapter_fail_the_log() {
    let r = with_log(
        "healthy-8gpu-roce",
        &[
            "NVRM: The NVIDIA GPU 0000:3a:00.0\\x0aNVRM: (PCI ID: 10de:2330) installed in this system has\\x0aNVRM: fallen off the bus and is not responding to commands.",
        ],
        None,
    );
    let f = &findings_with(&r, "kernel-log-xid")[0];
    assert_eq!(f["status"], "warn", "{f}");
    assert!(
        f["subject"]
            .as_str()
            .unwrap()
            .starts_with("GPU 0000:3a:00.0"),
        "{f}"
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("GPU has fallen off the bus (the driver's own report, without an Xid)"),
        "{f}"
    );
    assert_eq!(f["action"], "reboot", "{f}");
    // Split into records by a syslog relay: the GPU the first line named.
    let r = with_log(
        "healthy-8gpu-roce",
        &[
            "NVRM: The NVIDIA GPU 0000:3a:00.0",
            "NVRM: (PCI ID: 10de:2330) installed in this system has",
            "NVRM: fallen off the bus and is not responding to commands.",
        ],
        None,
    );
    assert!(
        findings_with(&r, "kernel-log-xid")[0]["subject"]
            .as_str()
            .unwrap()
            .starts_with("GPU 0000:3a:00.0")
    );
    let r = with_log(
        "healthy-8gpu-roce",
        &[
            "NVRM: RmInitAdapter failed! (0x26:0xffff:1211)",
            "NVRM: rm_init_adapter failed for device bearing minor number 0",
        ],
        None,
    );
    let f = &findings_with(&r, "kernel-log-gpu-init-failed")[0];
    assert_eq!(f["status"], "fail", "{f}");
    let fix = f["fix"].to_string();
    assert!(!fix.contains('<') && fix.contains("dmesg -T"), "{fix}");
}

/// Issue 40: nvidia-peermem's `nv_get_p2p_free_callback:127 ERROR detected invalid context`,
/// as leptonai/gpud#46 quotes it, is harmless on drivers 535.129.03 up to R560 (NVIDIA on
/// Mellanox/nv_peer_memory#120, https://github.com/Mellanox/nv_peer_memory/issues/120: "That
/// diagnostic is harmless ... The full fix ... is present in R560TRD1 and newer"): history
/// there, a warning on R560 (where it should never appear) and on a driver before 535.129.03.
#[test]
fn peermem_invalid_context_is_harmless_on_535_to_560() {
    let line = "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing";
    let driver = |v: &str| {
        format!(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {v}  Release Build  (dvs-builder@U16-I3-B03-4-1)  Tue Dec 19 2023\n"
        )
    };
    let r = with_log("healthy-8gpu-roce", &[line], Some(&driver("550.54.15")));
    assert!(
        findings_with(&r, "kernel-log-peermem-errors").is_empty(),
        "{:?}",
        codes(&r)
    );
    let h = &findings_with(&r, "kernel-log-history")[0];
    assert!(
        h["message"]
            .as_str()
            .unwrap()
            .contains("harmless on drivers 535.129.03 up to R560"),
        "{h}"
    );
    for v in ["560.35.03", "535.104.05"] {
        let r = with_log("healthy-8gpu-roce", &[line], Some(&driver(v)));
        assert_eq!(
            findings_with(&r, "kernel-log-peermem-errors")[0]["status"],
            "warn",
            "{v}"
        );
    }
}

/// Issue 40: a captured node whose log holds Xid 79 since boot is READY with a warning; the
/// report says why it is only a warning (the log cannot tell whether the GPU was reset or the
/// node rebooted since; a capture ends when it was taken) and how the config makes it fail.
#[test]
fn a_captured_xid_says_why_it_only_warns() {
    let out = gdrdoctor(&[
        "--root",
        fixture("kernel-log-xid"),
        "check",
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["verdict"]["ready"], true);
    let f = &findings_with(&r, "kernel-log-xid")[0];
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("the log cannot tell whether that happened since (a captured root's log ends at the capture): a warning, not a failure")
            && m.contains("`severity: {kernel-log-xid: fail}`"),
        "{m}"
    );
}
