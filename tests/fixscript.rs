//! `gdrdoctor fix` and `gdrdoctor nccl` on the fixtures: the whole script of every fixture that
//! fails, snapshotted and shellcheck-clean; refusals for hostile names; the NCCL settings of the
//! healthy and the mixed-GID nodes. Running the scripts for real happens in the lab
//! (tests/lab/scenarios/fix-*.sh).
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;

/// Fixtures whose `check` exits 1 (something fails), with their config if they have one.
fn failing() -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for name in fixture_names() {
        if name.starts_with("broken/") || name.starts_with("fleet/") {
            continue;
        }
        let config = fixture_config(&name);
        let mut args = vec!["--root", fixture(&name)];
        if let Some(c) = &config {
            args.extend(["--config", c.as_str()]);
        }
        args.push("check");
        if code(&gdrdoctor(&args)) == 1 {
            out.push((name, config));
        }
    }
    out.sort();
    out
}

fn fix(name: &str, config: Option<&str>, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--root", fixture(name)];
    if let Some(c) = config {
        args.extend(["--config", c]);
    }
    args.push("fix");
    args.extend(extra);
    gdrdoctor(&args)
}

fn shellcheck(script: &str, what: &str) {
    let mut child = std::process::Command::new("shellcheck")
        .args(["-s", "bash", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect(
            "shellcheck is needed for this test (apt-get install shellcheck; tests/all.sh installs it)",
        );
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "shellcheck on {what}:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn every_failing_fixture_gets_a_clean_script() {
    let failing = failing();
    assert!(failing.len() >= 15, "{failing:?}");
    for (name, config) in &failing {
        let out = fix(name, config.as_deref(), &[]);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        let script = stdout(&out);
        assert!(script.starts_with("#!/usr/bin/env bash\n"), "{name}");
        assert!(script.contains("set -uo pipefail"), "{name}");
        shellcheck(&script, name);
        insta::assert_snapshot!(format!("fix-{name}"), script);
        for class in ["runtime", "persistent"] {
            let s = stdout(&fix(name, config.as_deref(), &["--class", class]));
            shellcheck(&s, &format!("{name} --class {class}"));
        }
    }
}

#[test]
fn every_changing_command_is_guarded_or_idempotent() {
    // A runtime or persistent command either has a guard, or is a file edit (`gdrdoctor edit`:
    // it writes only what differs), or one of the forms that leave the node as they found it
    // when repeated: installing a package, a test-then-act one-liner, regenerating the boot
    // configuration, writing a fixed value. tests/fixes.rs runs every script twice against a
    // copy of the node and holds the second run to no change at all.
    let idempotent = |run: &str| {
        run.starts_with("gdrdoctor edit ")
            || run.starts_with("if command -v ")
            || run.starts_with("grep -q")
            || run.starts_with("echo 48 > ")
            || run.starts_with("ethtool -A ")
            || run.starts_with("chmod ")
    };
    for (name, config) in failing() {
        let mut args = vec!["--root", fixture(&name)];
        if let Some(c) = &config {
            args.extend(["--config", c.as_str()]);
        }
        args.extend(["check", "--format", "json"]);
        let report = json(&gdrdoctor(&args));
        for c in report["checks"].as_array().unwrap() {
            for f in c["findings"].as_array().unwrap() {
                for cmd in f["fix"]["commands"].as_array().into_iter().flatten() {
                    let class = cmd["class"].as_str().unwrap();
                    let run = cmd["run"].as_str().unwrap();
                    if (class == "runtime" || class == "persistent") && cmd["guard"].is_null() {
                        assert!(
                            idempotent(run),
                            "{name}: {}: unguarded {class} command: {run}",
                            f["code"]
                        );
                    }
                }
            }
        }
    }
}

/// Issue 39: a command that changes the node is never `inspect` (shown as `[check]`), and one
/// command has one class everywhere.
#[test]
fn classes_are_honest() {
    const READ_ONLY: &[&str] = &[
        "dmesg",
        "lspci",
        "ls ",
        "grep ",
        "cat ",
        "modinfo",
        "ibstat",
        "ibv_devices",
        "ibv_devinfo",
        "rdma link show",
        "rdma statistic show",
        "rdma dev show",
        "rdma dev;",
        "rdma link;",
        "sminfo",
        "ip -br",
        "ethtool -m",
        "ethtool -S",
        "ethtool -a",
        "nvidia-smi -q",
        "nvidia-smi nvlink -s",
        "nvidia-smi nvlink -e",
        "nvidia-smi topo",
        "devlink health show",
        "mlxlink",
        "gdrdoctor ",
        "sudo gdrdoctor ",
        "ldconfig -p",
        "ulimit",
        "sed -n",
        "journalctl",
        "systemctl status",
        "lsmod",
        "cma_roce_mode",
        "nvidia-bug-report.sh",
        "mlxconfig -d",
        "lspci -",
        "rdma dev show",
    ];
    let mut class_of: std::collections::BTreeMap<String, (String, String)> = Default::default();
    for name in fixture_names() {
        if name.starts_with("broken/") || name.starts_with("fleet/") {
            continue;
        }
        let config = fixture_config(&name);
        let mut args = vec!["--root", fixture(&name)];
        if let Some(c) = &config {
            args.extend(["--config", c.as_str()]);
        }
        args.extend(["check", "--format", "json"]);
        let report = json(&gdrdoctor(&args));
        for c in report["checks"].as_array().unwrap() {
            for f in c["findings"].as_array().unwrap() {
                let alternatives = f["fix"]["alternatives"].as_array().into_iter().flatten();
                let commands = f["fix"]["commands"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .chain(alternatives.flat_map(|a| a["commands"].as_array().unwrap()));
                for cmd in commands {
                    let class = cmd["class"].as_str().unwrap().to_owned();
                    let run = cmd["run"].as_str().unwrap().to_owned();
                    if class == "inspect" {
                        assert!(
                            READ_ONLY.iter().any(|r| run.starts_with(r)),
                            "{name}: {}: an `inspect` command that may change the node: {run}",
                            f["code"]
                        );
                        assert!(!run.contains(" > ") && !run.contains(">>"), "{name}: {run}");
                    }
                    let key = run.split("   #").next().unwrap().trim().to_owned();
                    if let Some((was, where_)) = class_of.get(&key) {
                        assert_eq!(was, &class, "{key}: {was} in {where_}, {class} in {name}");
                    } else {
                        class_of.insert(key, (class, name.clone()));
                    }
                }
            }
        }
    }
}

#[test]
fn hostile_names_get_a_refusal_not_a_script() {
    let out = fix("broken/hostile-names", None, &[]);
    assert_eq!(code(&out), 2);
    assert!(
        stdout(&out).is_empty(),
        "no script at all: {}",
        stdout(&out)
    );
    let err = stderr(&out);
    assert!(err.contains("refusing to write a fix script"), "{err}");
    for name in ["0000:00:1f.7;reboot", "x;rm -rf ~", "$(reboot)", "ndevs/3"] {
        assert!(err.contains(name), "{name} not named: {err}");
    }
    // The issue's own example: an interface named `x;rm -rf /`, which can only live in a file's
    // contents (a name cannot hold '/'): the GID table's ndev of a healthy node's port.
    let (_copy, node) = fixture_copy("rdma-port-down");
    let ndev = node.join("sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0");
    let real = std::fs::canonicalize(&ndev).unwrap();
    std::fs::write(&real, "x;rm -rf /\n").unwrap();
    let out = gdrdoctor(&["--root", node.to_str().unwrap(), "fix"]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(stdout(&out).is_empty());
    assert!(
        stderr(&out).contains("unsafe name: \"x;rm -rf /\" is not a valid interface name"),
        "{}",
        stderr(&out)
    );
    // check still reports the node; only the script is refused.
    assert_eq!(
        code(&gdrdoctor(&["--root", node.to_str().unwrap(), "check"])),
        1
    );
}

#[test]
fn a_healthy_node_gets_an_empty_script_and_apply_refuses_a_capture() {
    let out = fix("healthy-8gpu-roce", None, &[]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("echo 'gdrdoctor found nothing to fix'"));
    shellcheck(&stdout(&out), "healthy");
    let out = fix("acs-redirect-on-path", None, &["--apply", "--yes"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out)
            .contains("--apply with --root edits the files of that root: say --class persistent"),
        "{}",
        stderr(&out)
    );
    // -o writes an executable file.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fix.sh");
    let out = fix(
        "acs-redirect-on-path",
        None,
        &["-o", file.to_str().unwrap()],
    );
    assert_eq!(code(&out), 0);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o755
    );
    assert!(
        std::fs::read_to_string(&file)
            .unwrap()
            .contains("setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000:002c")
    );
}

#[test]
fn runtime_class_comments_out_the_rest() {
    let s = stdout(&fix("acs-redirect-on-path", None, &["--class", "runtime"]));
    assert!(
        s.contains("\n    { setpci -s 0000:02:01.0 ECAP_ACS+0x6.w=0000:002c; } || return 1\n"),
        "{s}"
    );
    assert!(
        s.contains("# (persistent; not in --class) gdrdoctor edit write /etc/systemd/system/gdrdoctor-acs.service '[Unit]'"),
        "{s}"
    );
    let s = stdout(&fix("iommu-translated", None, &[]));
    assert!(
        s.contains("# (disruptive, not run: do it by hand on a drained node) systemctl reboot")
    );
}

#[test]
fn nccl_settings() {
    for name in [
        "healthy-8gpu-roce",
        "roce-gid-index-differs",
        "placement-phb",
        "healthy-4gpu-ib-peermem",
    ] {
        let out = gdrdoctor(&["--root", fixture(name), "nccl"]);
        assert_eq!(code(&out), 0);
        insta::assert_snapshot!(format!("nccl-{name}"), stdout(&out));
    }
    let healthy = stdout(&gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "nccl",
    ]));
    assert!(healthy.contains("export NCCL_IB_HCA='=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1'"));
    assert!(healthy.contains("export NCCL_IB_GID_INDEX='3'"));
    assert!(healthy.contains("\nNCCL_IB_GID_INDEX=3\n"));
    assert!(!healthy.contains("export NCCL_NET_GDR_LEVEL"));
    let mixed = stdout(&gdrdoctor(&[
        "--root",
        fixture("roce-gid-index-differs"),
        "nccl",
    ]));
    assert!(mixed.contains("WARNING: not set: the RoCE v2 GID is not at the same index"));
    assert!(!mixed.contains("export NCCL_IB_GID_INDEX"));
    let phb = stdout(&gdrdoctor(&["--root", fixture("placement-phb"), "nccl"]));
    assert!(phb.contains("export NCCL_NET_GDR_LEVEL='PHB'"));
    assert!(phb.contains("Trade-off"));
    let ib = stdout(&gdrdoctor(&[
        "--root",
        fixture("healthy-4gpu-ib-peermem"),
        "nccl",
    ]));
    assert!(ib.contains("no RoCE port is used"));
}

/// Issue 25: with an /etc/nccl.conf that is there but cannot be read (a directory, a FIFO, over
/// the read limit), `gdrdoctor nccl` proposed exports and an /etc/nccl.conf body as if the node
/// had none. It says what it could not read, as nccl-config does, writes no body to replace
/// the file (the lines to add stay, commented out), and does not exit 0.
#[test]
fn nccl_settings_say_when_nccl_conf_cannot_be_read() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    let conf = root.join("etc/nccl.conf");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    let r = root.to_str().unwrap();
    let cases: [(&str, &dyn Fn()); 3] = [
        ("not a regular file (directory)", &|| {
            std::fs::create_dir(&conf).unwrap()
        }),
        ("not a regular file (FIFO)", &|| {
            let ok = std::process::Command::new("mkfifo")
                .arg(&conf)
                .status()
                .unwrap();
            assert!(ok.success());
        }),
        ("larger than 1048576 bytes", &|| {
            std::fs::write(&conf, "#".repeat(2 << 20)).unwrap()
        }),
    ];
    for (reason, make) in cases {
        let _ = std::fs::remove_dir(&conf);
        let _ = std::fs::remove_file(&conf);
        make();
        let out = gdrdoctor(&["--root", r, "nccl"]);
        let (text, err) = (stdout(&out), stderr(&out));
        assert_eq!(code(&out), 1, "{reason}: {err}");
        assert!(
            text.contains(&format!(
                "# WARNING: NCCL reads /etc/nccl.conf, and gdrdoctor cannot: {reason}."
            )),
            "{reason}:\n{text}"
        );
        assert!(err.contains(&format!("/etc/nccl.conf ({reason})")), "{err}");
        let body = text.split_once("# --- /etc/nccl.conf").unwrap().1;
        assert!(
            body.lines()
                .skip(1)
                .all(|l| l.is_empty() || l.starts_with('#')),
            "{reason}: a body to write as if the node had no nccl.conf:\n{body}"
        );
        assert!(body.contains("# NCCL_IB_GID_INDEX=3"), "{body}");
        // As nccl-config says it.
        let check = json(&gdrdoctor(&[
            "--root",
            r,
            "check",
            "--select",
            "nccl-config",
            "--format",
            "json",
        ]));
        assert!(
            check.to_string().contains(&format!(
                "NCCL reads /etc/nccl.conf, and gdrdoctor cannot: {reason}"
            )),
            "{check:#}"
        );
    }
}

/// The same cause as issue 25's `topo`: a script with nothing in it read as "nothing to fix"
/// where checks could not tell (ACS without root: config space is 64 bytes). It names them.
#[test]
fn a_script_says_which_checks_could_not_tell() {
    let out = fix("config-unprivileged", None, &[]);
    assert_eq!(code(&out), 0);
    let s = stdout(&out);
    assert!(
        s.contains("# could not tell: acs (unknown: what they would fix is not here"),
        "{s}"
    );
    assert!(
        s.contains(
            "echo 'gdrdoctor found nothing to fix, but could not tell for: acs (see gdrdoctor check)'"
        ),
        "{s}"
    );
    shellcheck(&s, "config-unprivileged");
}
