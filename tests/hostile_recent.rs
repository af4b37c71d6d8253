//! Hostile input on the surfaces added since the last review (issue 41): netlink QoS answers,
//! counter and AER files, the kernel log, the loader's configuration, NVML's recorded answer and
//! the baseline archive, as a hostile or broken node would present them. Each case runs the real
//! binary bounded as tests/hostile_inputs.rs does (prlimit's address space and CPU time, a wall
//! clock and a peak RSS asserted), so that a regression fails in seconds.
#![allow(clippy::disallowed_methods)] // tests build inputs, they do not read a node

use crate::common::*;
use std::time::Duration;

// A bounded run: the same bounds as tests/hostile_inputs.rs's cases.
use crate::hostile_inputs::case;

/// Item 1: A capture's qos.json whose APP table maps NCCL's DSCP to priority 9: the 8-entry PFC and
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
    let ran = case([
        "--root",
        r,
        "check",
        "--select",
        "roce-lossless",
        "--format",
        "json",
    ])
    .run();
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

/// Item 2 and 3: /etc/ld.so.conf's includes: 30 files that all include each other (followed four
/// deep without remembering what was read: 35 s), and 3,000 includes of one 20,000-line file
/// (its lines kept per visit: gigabytes). Each file is read once now; the directories are taken
/// each once.
#[test]
fn ld_so_conf_includes_that_loop_or_repeat() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    let conf_d = root.join("etc/ld.so.conf.d");
    std::fs::create_dir_all(&conf_d).unwrap();
    std::fs::write(
        root.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/*.conf\n",
    )
    .unwrap();
    for i in 0..30 {
        std::fs::write(
            conf_d.join(format!("{i:02}.conf")),
            format!("/opt/lib{i}\ninclude /etc/ld.so.conf.d/*.conf\n"),
        )
        .unwrap();
    }
    let r = root.to_str().unwrap().to_owned();
    let ran = case(["--root", &r, "check", "--select", "nccl-config"])
        .within(Duration::from_secs(10), 200)
        .run();
    assert_ne!(ran.code, 2, "{}", ran.stderr);
    // One file whose 3,000 lines include a file of 20,000 directories.
    for e in std::fs::read_dir(&conf_d).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let big: String = (0..20_000).map(|i| format!("/opt/many/{i}\n")).collect();
    std::fs::write(conf_d.join("big.conf"), big).unwrap();
    std::fs::write(
        root.join("etc/ld.so.conf"),
        "include /etc/ld.so.conf.d/big.conf\n".repeat(3000),
    )
    .unwrap();
    let ran = case(["--root", &r, "check", "--select", "nccl-config"])
        .within(Duration::from_secs(10), 200)
        .run();
    assert_ne!(ran.code, 2, "{}", ran.stderr);
}

/// Item 9: NCCL_NET_PLUGIN naming 40,000 plugins with an LD_LIBRARY_PATH of 20,000 directories: every
/// name was looked for in every directory (past 60 s). At most 16 names, each once, in at most
/// 1,024 directories.
#[test]
fn plugin_names_times_library_directories_are_bounded() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    let env = root.join("job.env");
    let names: Vec<String> = (0..40_000).map(|i| format!("p{i}")).collect();
    let dirs: Vec<String> = (0..20_000).map(|i| format!("/opt/d{i}")).collect();
    std::fs::write(
        &env,
        format!(
            "export NCCL_NET_PLUGIN={}\nexport LD_LIBRARY_PATH={}\n",
            names.join(","),
            dirs.join(":")
        ),
    )
    .unwrap();
    let r = root.to_str().unwrap();
    let ran = case([
        "--root",
        r,
        "check",
        "--nccl-env",
        env.to_str().unwrap(),
        "--select",
        "nccl-config",
    ])
    .within(Duration::from_secs(10), 200)
    .run();
    assert_ne!(ran.code, 2, "{}", ran.stderr);
}

/// Item 15: Text from captures and the environment was escaped but never shortened: a 900 KB
/// NCCL_IB_HCA printed 5.4 MB (in the subject, the message and the evidence of several
/// findings). Every finding's text is bounded now, and says where it was cut.
#[test]
fn text_from_the_node_is_bounded() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    let hca: Vec<String> = (0..100_000).map(|i| format!("mlx{i}")).collect();
    let hca = hca.join(",");
    assert!(hca.len() > 800_000);
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/nccl.conf"), format!("NCCL_IB_HCA={hca}\n")).unwrap();
    let r = root.to_str().unwrap();
    for (args, most) in [
        (vec!["--root", r, "check"], 64 << 10),
        (vec!["--root", r, "check", "-v"], 256 << 10),
        (vec!["--root", r, "check", "--format", "json"], 256 << 10),
    ] {
        let ran = case(&args).run();
        assert_ne!(ran.code, 2, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stdout.len() < most,
            "{args:?}: {} bytes of report",
            ran.stdout.len()
        );
        assert!(ran.stdout.contains("bytes more, cut)"), "{args:?}");
    }
}

/// Item 4: NVML's recorded answer (`gdrdoctor/nvml.json`) of 4,600 devices, each with a link to an
/// NVSwitch (under 1 MiB): the NVLink map held every pair (880 MB and 8 s for topo). It holds links per GPU
/// now, and the pairs of the GPUs sysfs has are asked of it.
#[test]
fn a_recorded_nvml_answer_of_thousands_of_devices() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let status = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(crate_dir().join("fixtures/h100x4-vm/capture.tar.gz"))
        .arg("-C")
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success());
    let path = root.join("gdrdoctor/nvml.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let devices: Vec<serde_json::Value> = (0..4600u32)
        .map(|i| {
            let mut d = serde_json::json!({
                "nvlinks": [{"link": 0, "remote_type": "switch"}],
            });
            d["index"] = serde_json::json!(i);
            d["bus_id"] =
                serde_json::json!(format!("00000000:{:02X}:{:02X}.0", 1 + i / 32, i % 32));
            d
        })
        .chain(v["nvml"]["devices"].as_array().unwrap().iter().cloned())
        .collect();
    v["nvml"]["devices"] = serde_json::json!(devices);
    let text = serde_json::to_string(&v).unwrap();
    assert!(text.len() < 1 << 20, "{} bytes", text.len());
    std::fs::write(&path, text).unwrap();
    let r = root.to_str().unwrap();
    for args in [vec!["--root", r, "topo"], vec!["--root", r, "check"]] {
        let ran = case(&args).within(Duration::from_secs(10), 200).run();
        assert_ne!(ran.code, 2, "{args:?}: {}", ran.stderr);
    }
    let ran = case(["--root", r, "topo"]).run();
    assert!(ran.stdout.contains("NV18"), "{}", ran.stdout);
}

/// Item 5 and 6: Counter and AER files of a sampled capture as a hostile one holds them: every
/// counter file a megabyte of digits, every AER table 50,000 error types, in both readings. Each
/// was read up to 1 MiB, kept and printed whole, twice (378 MB RSS, a 91 MB JSON report), and the
/// AER growth text was quadratic in the types (past 60 s). A counter is read up to 64 bytes and
/// an AER table up to 4 KiB (128 types) now: a longer file is not one, and says so.
#[test]
fn counter_and_aer_files_of_megabytes() {
    let (_dir, root) = fixture_copy("aer-nonfatal-switch-port");
    let digits = "1".repeat(1 << 20);
    let types: String = (0..50_000).map(|i| format!("ERR_{i} {i}\n")).collect();
    let mut counters = 0;
    let mut tables = 0;
    let mut stack = vec![root.join("sys"), root.join("gdrdoctor/sample")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let name = p.file_name().unwrap().to_str().unwrap().to_owned();
                let parent = p
                    .parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                if name.starts_with("aer_dev_") {
                    std::fs::write(&p, &types).unwrap();
                    tables += 1;
                } else if parent == "counters" || parent == "hw_counters" {
                    std::fs::write(&p, &digits).unwrap();
                    counters += 1;
                }
            }
        }
    }
    assert!(
        counters > 8 && tables > 3,
        "{counters} counters, {tables} tables"
    );
    let r = root.to_str().unwrap();
    for (args, most) in [
        (vec!["--root", r, "check"], 64usize << 10),
        (vec!["--root", r, "check", "--format", "json"], 1 << 20),
    ] {
        let ran = case(&args).within(Duration::from_secs(10), 200).run();
        assert_ne!(ran.code, 2, "{args:?}: {}", ran.stderr);
        assert!(
            ran.stdout.len() < most,
            "{args:?}: {} bytes",
            ran.stdout.len()
        );
    }
}

fn baseline_run(file: &std::path::Path, extra: &[&str]) -> Ran {
    let mut args = vec![
        "check",
        "--select",
        "kernel-log",
        "--baseline",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    case(&args).within(Duration::from_secs(10), 200).run()
}

/// Item 7 and 8: `--baseline FILE` renamed its new archive over whatever FILE was (as root, a device
/// node was replaced) and opened a FIFO for ever. Anything but a regular file of the caller's,
/// in a directory others cannot write, is refused now, untouched, within the run's time.
#[test]
fn a_baseline_that_is_not_a_regular_file_of_ours_is_refused() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let d = tempfile::tempdir().unwrap();
    // A FIFO: refused at once, never opened.
    let fifo = d.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let ran = baseline_run(&fifo, &["--deadline", "5"]);
    assert!(
        ran.stderr
            .contains("a FIFO, not a baseline gdrdoctor wrote"),
        "{}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("GPU probe"), "{}", ran.stderr);
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    // A device node (as root: a character device made for the test, never /dev/null itself).
    let node = d.path().join("null");
    if std::process::Command::new("mknod")
        .arg(&node)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|s| s.success())
    {
        let ran = baseline_run(&node, &[]);
        assert!(ran.stderr.contains("a device node"), "{}", ran.stderr);
        assert!(
            std::fs::symlink_metadata(&node)
                .unwrap()
                .file_type()
                .is_char_device()
        );
    }
    // A directory others can write (no sticky bit): refused, nothing written there.
    let open = d.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let ran = baseline_run(&open.join("b.tar.gz"), &[]);
    assert!(
        ran.stderr.contains("a directory others can write"),
        "{}",
        ran.stderr
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
}

/// Item 11: A baseline that cannot be written left a ready node at exit 0 with one stderr line: the
/// metrics timer never learnt that growth was no longer judged. The report and the metric say it.
#[test]
fn a_baseline_not_written_is_said_in_the_report_and_the_metric() {
    let d = tempfile::tempdir().unwrap();
    let not_a_dir = d.path().join("file");
    std::fs::write(&not_a_dir, "x").unwrap();
    let file = not_a_dir.join("baseline.tar.gz");
    let human = baseline_run(&file, &[]);
    assert!(
        human.stdout.contains("--baseline: not written: ")
            && human.stdout.contains("the next run cannot judge what grew"),
        "{}",
        human.stdout
    );
    let metrics = baseline_run(&file, &["--format", "prometheus"]);
    assert!(
        metrics.stdout.contains("\ngdrdoctor_baseline_written 0\n"),
        "{}",
        metrics.stdout
    );
    let good = d.path().join("good.tar.gz");
    let metrics = baseline_run(&good, &["--format", "prometheus"]);
    assert!(
        metrics.stdout.contains("\ngdrdoctor_baseline_written 1\n"),
        "{}",
        metrics.stdout
    );
}

/// Item 16: A baseline's `taken_at` was trusted: one before 1970 gave a span of 1e300 s and every rate
/// about 0. A reading of this boot cannot predate it: not compared.
#[test]
fn a_baseline_older_than_the_boot_is_not_compared() {
    let d = tempfile::tempdir().unwrap();
    let file = d.path().join("b.tar.gz");
    baseline_run(&file, &[]);
    let unpacked = d.path().join("u");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = |args: &[&str]| {
        assert!(
            std::process::Command::new("tar")
                .args(args)
                .status()
                .unwrap()
                .success()
        )
    };
    tar(&[
        "xzf",
        file.to_str().unwrap(),
        "-C",
        unpacked.to_str().unwrap(),
    ]);
    let meta = unpacked.join("gdrdoctor/baseline");
    let text = std::fs::read_to_string(&meta).unwrap();
    let forged: String = text
        .lines()
        .map(|l| {
            if l.starts_with("taken_at=") {
                "taken_at=-1e300".to_owned()
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&meta, forged + "\n").unwrap();
    tar(&[
        "czf",
        file.to_str().unwrap(),
        "-C",
        unpacked.to_str().unwrap(),
        ".",
    ]);
    let ran = baseline_run(&file, &[]);
    assert!(ran.stderr.contains("before this boot"), "{}", ran.stderr);
    assert!(
        !ran.stdout.contains("judged since the last run"),
        "{}",
        ran.stdout
    );
}

/// Item 10: `capture` kept up to 64 MiB of a libnccl-net.so (its scan for the version grew 256 KiB x
/// 4 past its own 32 MiB limit), and gdrdoctor then refused its own archive ("over the read
/// limit"). The scan stops at 32 MiB, and an archive takes an ELF library's prefix up to that:
/// the copy is read, and finds the same plugin, as the node did.
#[test]
fn a_large_plugin_library_is_captured_and_read_back() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    let dir = root.join("opt/plug");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/ld.so.conf"), "/opt/plug\n").unwrap();
    let mut lib = vec![0u8; 40 << 20];
    lib[..4].copy_from_slice(b"\x7fELF");
    let marker = b"aws-ofi-nccl 1.14.0\0";
    let at = 30 << 20;
    lib[at..at + marker.len()].copy_from_slice(marker);
    std::fs::write(dir.join("libnccl-net.so"), &lib).unwrap();
    let r = root.to_str().unwrap();
    let plugin_line = |out: &str| {
        out.lines()
            .find(|l| l.contains("nccl-config"))
            .unwrap_or_default()
            .to_owned()
    };
    let live = case(["--root", r, "check", "--select", "nccl-config", "-v"])
        .within(Duration::from_secs(20), 400)
        .run();
    assert!(
        live.stdout.contains("aws-ofi-nccl 1.14.0"),
        "{}",
        live.stdout
    );
    let out = tempfile::tempdir().unwrap();
    let archive = out.path().join("c.tar.gz");
    let ran = case([
        "--root",
        r,
        "capture",
        "--no-gpu-probe",
        archive.to_str().unwrap(),
    ])
    .within(Duration::from_secs(30), 600)
    .run();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let copy = case([
        "--root",
        archive.to_str().unwrap(),
        "check",
        "--select",
        "nccl-config",
        "-v",
    ])
    .within(Duration::from_secs(20), 400)
    .run();
    assert_ne!(copy.code, 2, "{}", copy.stderr);
    assert!(
        copy.stdout.contains("aws-ofi-nccl 1.14.0"),
        "{}",
        copy.stdout
    );
    assert_eq!(plugin_line(&copy.stdout), plugin_line(&live.stdout));
}

/// Item 12: `thresholds.link_lifetime` took any key: a misspelt counter was accepted and never
/// matched, though the README says the config is checked. 13. `check --root DIR --sample N`
/// ignored --sample without a word. Both are refused, saying why.
#[test]
fn a_misspelt_lifetime_counter_and_sample_on_a_capture_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("c.yaml");
    let root = fixture("link-symbol-errors");
    let with_lifetime = |counter: &str| {
        std::fs::write(
            &config,
            format!("thresholds:\n  link_lifetime: {{{counter}: 1000}}\n"),
        )
        .unwrap();
        case([
            "--root",
            root,
            "--config",
            config.to_str().unwrap(),
            "check",
        ])
        .run()
    };
    let ran = with_lifetime("symbol_eror");
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains("thresholds.link_lifetime: unknown counter \"symbol_eror\""),
        "{}",
        ran.stderr
    );
    let ran = with_lifetime("symbol_error");
    assert_ne!(ran.code, 2, "{}", ran.stderr);
    let ran = case(["--root", root, "check", "--sample", "1"]).run();
    assert_eq!(ran.code, 2, "{}", ran.stdout);
    assert!(
        ran.stderr
            .contains("--sample reads the live node's counters twice"),
        "{}",
        ran.stderr
    );
}
