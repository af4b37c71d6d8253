//! Fixes proven (issue 39): for every fixture with a fix, the script `gdrdoctor fix` writes is
//! run against a copy of the root, each command that would change a live kernel, firmware or
//! daemon replaced by a stand-in that writes its documented effect into the copy
//! (tests/fixes/standin.py, its README cites each effect), then the copy is checked again:
//!
//! - no new warning or failure may appear, and no check may get worse (asserted, always);
//! - run a second time, the script changes no byte of the copy (asserted, always);
//! - which findings cleared and which remain (a fix by hand, a part to replace, the fabric's
//!   side) is the table in docs/fixes.md, which this test regenerates and compares: a fix that
//!   stops clearing its finding, or starts to, changes the table. `GDRDOCTOR_BLESS=1` rewrites
//!   it.
//!
//! The script runs with `--class every --warnings`: by-hand and disruptive commands too (an
//! operator runs them), and warnings' fixes. A reboot is the stand-in's: the kernel command
//! line grub would boot, the modules of modules-load.d loaded, the enabled units started.

#![allow(clippy::disallowed_methods)] // the harness reads its copies and the repository, not a node

use crate::common::{Gdrdoctor, crate_dir, fixture_config, fixture_copy, fixture_names};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A finding as the harness compares it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    check: String,
    code: String,
    subject: String,
    status: String,
}

fn rank(s: &str) -> u8 {
    match s {
        "fail" => 4,
        "warn" => 3,
        "unknown" => 2,
        "pass" => 1,
        _ => 0,
    }
}

fn check_json(root: &Path, config: Option<&str>) -> Value {
    let mut g = Gdrdoctor::new().arg("--root").arg(root);
    if let Some(c) = config {
        g = g.arg("--config").arg(crate_dir().join(c));
    }
    let out = g.args(["check", "--format", "json"]).output();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{}: check JSON: {e}\n{}",
            root.display(),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Every warn/fail finding, and each check's status.
fn judged(v: &Value) -> (Vec<Seen>, BTreeMap<String, String>, bool) {
    let mut seen = Vec::new();
    let mut checks = BTreeMap::new();
    let mut any_fix = false;
    for c in v["checks"].as_array().unwrap() {
        let id = c["id"].as_str().unwrap().to_owned();
        checks.insert(id.clone(), c["status"].as_str().unwrap().to_owned());
        for f in c["findings"].as_array().unwrap() {
            let status = f["status"].as_str().unwrap();
            if status == "warn" || status == "fail" {
                any_fix |= f.get("fix").is_some();
                seen.push(Seen {
                    check: id.clone(),
                    code: f["code"].as_str().unwrap().to_owned(),
                    subject: f["subject"].as_str().unwrap().to_owned(),
                    status: status.to_owned(),
                });
            }
        }
    }
    (seen, checks, any_fix)
}

/// The stand-ins as commands: a directory of links named after the tools, to standin.py.
fn standins() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let script = crate_dir().join("tests/fixes/standin.py");
        let out = Command::new("python3")
            .arg(&script)
            .arg("--names")
            .output()
            .expect("python3 runs tests/fixes/standin.py");
        assert!(out.status.success());
        let dir = std::env::temp_dir().join(format!("gdrdoctor-standins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in String::from_utf8(out.stdout).unwrap().lines() {
            let link = dir.join(name);
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&script, &link).unwrap();
        }
        dir
    })
}

fn run_script(script: &Path, root: &Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(script)
        .env("GDRDOCTOR_ROOT", root)
        .env("GDRDOCTOR_STANDINS", "1")
        .env("GDRDOCTOR", env!("CARGO_BIN_EXE_gdrdoctor"))
        .env("PATH", format!("{}:/usr/bin:/bin", standins().display()))
        .env("NO_COLOR", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Every file of the tree and its bytes (links: their target), for the second run's compare.
fn tree(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let t = e.file_type().unwrap();
            let rel = p.strip_prefix(root).unwrap().to_owned();
            if t.is_dir() {
                stack.push(p);
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p)
                        .unwrap()
                        .into_os_string()
                        .into_encoded_bytes(),
                );
            } else if t.is_file() {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// A node boots from a boot loader configuration a capture does not hold: the copy gets the
/// /etc/default/grub such a node has, its GRUB_CMDLINE_LINUX the captured command line less
/// what the boot loader adds itself (BOOT_IMAGE, root, ro/rw, initrd).
fn seed_grub(root: &Path) {
    let grub = root.join("etc/default/grub");
    if grub.exists() {
        return;
    }
    let Ok(cmdline) = std::fs::read_to_string(root.join("proc/cmdline")) else {
        return;
    };
    let words: Vec<&str> = cmdline
        .split_whitespace()
        .filter(|w| {
            !(w.starts_with("BOOT_IMAGE=")
                || w.starts_with("root=")
                || w.starts_with("initrd=")
                || *w == "ro"
                || *w == "rw")
        })
        .collect();
    write(
        &grub,
        format!(
            "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"{}\"\n",
            words.join(" ")
        )
        .as_bytes(),
    );
}

/// One fixture's proof: what cleared, what remains.
struct Proof {
    name: String,
    before: Vec<Seen>,
    remaining: Vec<Seen>,
    failed_blocks: Vec<String>,
}

fn prove(name: &str) -> Option<Proof> {
    let config = fixture_config(name);
    let (_dir, root) = fixture_copy(name);
    seed_grub(&root);
    let before_json = check_json(&root, config.as_deref());
    let (before, checks_before, any_fix) = judged(&before_json);
    if !any_fix {
        return None;
    }
    let mut g = Gdrdoctor::new().arg("--root").arg(&root);
    if let Some(c) = &config {
        g = g.arg("--config").arg(crate_dir().join(c));
    }
    let out = g.args(["fix", "--class", "every", "--warnings"]).output();
    assert!(
        out.status.success(),
        "{name}: fix: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script_path = _dir.path().join("fix.sh");
    std::fs::write(&script_path, &out.stdout).unwrap();
    let (_, log) = run_script(&script_path, &root);
    let failed_blocks: Vec<String> = log
        .lines()
        .filter_map(|l| l.strip_prefix("failed: "))
        .map(str::to_owned)
        .collect();
    let (after, checks_after, _) = judged(&check_json(&root, config.as_deref()));
    // Nothing new, nothing worse.
    let key = |s: &Seen| (s.check.clone(), s.code.clone(), s.subject.clone());
    let before_keys: BTreeMap<_, _> = before.iter().map(|s| (key(s), s.status.clone())).collect();
    for s in &after {
        match before_keys.get(&key(s)) {
            None => {
                panic!("{name}: the fix script raised a new finding: {s:?}\nscript log:\n{log}")
            }
            Some(was) => assert!(
                rank(&s.status) <= rank(was),
                "{name}: {s:?} got worse (was {was})\n{log}"
            ),
        }
    }
    for (id, was) in &checks_before {
        let now = checks_after.get(id).map(String::as_str).unwrap_or("skip");
        assert!(
            rank(now) <= rank(was) || (was == "pass" && now == "skip"),
            "{name}: check {id} went from {was} to {now}\n{log}"
        );
    }
    // A second run changes no byte.
    let first = tree(&root);
    let (_, log2) = run_script(&script_path, &root);
    let second = tree(&root);
    if first != second {
        let changed: Vec<String> = first
            .keys()
            .chain(second.keys())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .filter(|k| first.get(*k) != second.get(*k))
            .map(|k| k.display().to_string())
            .collect();
        panic!("{name}: the second run changed {changed:?}\n{log2}");
    }
    Some(Proof {
        name: name.to_owned(),
        before,
        remaining: after,
        failed_blocks,
    })
}

/// The table docs/fixes.md holds between its markers.
fn table(proofs: &[Proof]) -> String {
    // Per code: the fixtures where it cleared, and where it remained.
    let mut cleared: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let mut remained: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    let (mut n_before, mut n_cleared) = (0, 0);
    for p in proofs {
        for s in &p.before {
            n_before += 1;
            let still = p
                .remaining
                .iter()
                .any(|r| r.code == s.code && r.subject == s.subject);
            if still {
                remained.entry(&s.code).or_default().insert(&p.name);
            } else {
                n_cleared += 1;
                cleared.entry(&s.code).or_default().insert(&p.name);
            }
        }
    }
    let mut o = format!(
        "{} fixtures with a fix; {n_before} warn/fail findings; {n_cleared} cleared by their fix in the harness, {} remain (see why below); no fix raised a new finding or made a check worse, and a second run changed no byte on any of them.\n\n| code | cleared in (harness) | remains in |\n|---|---|---|\n",
        proofs.len(),
        n_before - n_cleared
    );
    let codes: BTreeSet<&str> = cleared.keys().chain(remained.keys()).copied().collect();
    let list = |m: &BTreeMap<&str, BTreeSet<&str>>, c: &str| {
        m.get(c)
            .map(|s| s.iter().copied().collect::<Vec<_>>().join(", "))
            .unwrap_or_else(|| "-".into())
    };
    for c in codes {
        o.push_str(&format!(
            "| `{c}` | {} | {} |\n",
            list(&cleared, c),
            list(&remained, c)
        ));
    }
    o.push_str("\nBlocks whose commands failed (a by-hand tool without a stand-in, or a guard that refused):\n\n");
    for p in proofs {
        if !p.failed_blocks.is_empty() {
            o.push_str(&format!("- {}: {}\n", p.name, p.failed_blocks.join(", ")));
        }
    }
    o
}

const BEGIN: &str = "<!-- fixes-harness: begin (tests/fixes.rs writes this part) -->\n";
const END: &str = "<!-- fixes-harness: end -->\n";

#[test]
fn every_fix_clears_its_finding_and_breaks_nothing() {
    let names: Vec<String> = fixture_names()
        .into_iter()
        .filter(|n| !n.starts_with("broken/") && !n.starts_with("fleet/"))
        .collect();
    let proofs: Vec<Proof> = std::thread::scope(|s| {
        let chunks: Vec<Vec<String>> = names
            .chunks(names.len().div_ceil(4))
            .map(<[String]>::to_vec)
            .collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| s.spawn(move || chunk.iter().filter_map(|n| prove(n)).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        proofs.len() >= 30,
        "only {} fixtures with a fix",
        proofs.len()
    );
    let mut proofs = proofs;
    proofs.sort_by(|a, b| a.name.cmp(&b.name));
    let table = table(&proofs);
    let doc_path = crate_dir().join("docs/fixes.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap_or_default();
    let (head, rest) = doc.split_once(BEGIN).unwrap_or((&doc, ""));
    let tail = rest.split_once(END).map(|(_, t)| t).unwrap_or("");
    let want = format!("{head}{BEGIN}{table}{END}{tail}");
    if std::env::var_os("GDRDOCTOR_BLESS").is_some() {
        std::fs::write(&doc_path, &want).unwrap();
    } else {
        assert!(
            doc == want,
            "docs/fixes.md's harness table is not what the harness found (GDRDOCTOR_BLESS=1 rewrites it):\n{table}"
        );
    }
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Issue 39: on azure-ndv4-vm whose /etc/nccl.conf is one line without a final newline, the
/// persistent fix applied to a copy (`--root COPY fix --apply --class persistent --yes`)
/// leaves check without a new failure, that line intact, and a second run changes no byte.
/// The fix needs the provider's file first (a by-hand step): without it the edit is not made
/// and says why; with it, the line is added on a line of its own and placement passes.
#[test]
fn persistent_fixes_apply_to_a_root_newline_safe_and_once() {
    let (_dir, root) = fixture_copy("azure-ndv4-vm");
    let conf = root.join("etc/nccl.conf");
    write(&conf, b"NCCL_SOCKET_IFNAME=ib0");
    let apply = || {
        Gdrdoctor::new()
            .arg("--root")
            .arg(&root)
            .args(["fix", "--apply", "--class", "persistent", "--yes"])
            .output()
    };
    let fails = |root: &Path| -> BTreeSet<String> {
        let (seen, ..) = judged(&check_json(root, None));
        seen.into_iter()
            .filter(|s| s.status == "fail")
            .map(|s| format!("{} {}", s.code, s.subject))
            .collect()
    };
    let before = fails(&root);
    assert!(
        before.iter().any(|f| f.starts_with("gpu-nic-too-far")),
        "{before:?}"
    );
    // The topology file is not there: nothing is written, and the output says why.
    let out = apply();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("/opt/microsoft/ndv4/topo.xml is not there yet"),
        "{text}"
    );
    assert_eq!(std::fs::read(&conf).unwrap(), b"NCCL_SOCKET_IFNAME=ib0");
    assert!(fails(&root).is_subset(&before));
    // The by-hand step done (Azure's file, from fixtures/nccl-topo): the edit is made.
    std::fs::create_dir_all(root.join("opt/microsoft/ndv4")).unwrap();
    std::fs::copy(
        crate_dir().join("fixtures/nccl-topo/ndv4-topo.xml"),
        root.join("opt/microsoft/ndv4/topo.xml"),
    )
    .unwrap();
    let out = apply();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(&conf).unwrap(),
        "NCCL_SOCKET_IFNAME=ib0\nNCCL_TOPO_FILE=/opt/microsoft/ndv4/topo.xml\n"
    );
    assert_eq!(
        std::fs::read(root.join("etc/nccl.conf.gdrdoctor-orig")).unwrap(),
        b"NCCL_SOCKET_IFNAME=ib0",
        "the original is kept"
    );
    let after = fails(&root);
    assert!(after.is_empty(), "{after:?}");
    let first = tree(&root);
    let out = apply();
    assert!(out.status.success());
    assert_eq!(tree(&root), first, "the second run changed the copy");
}

/// `--apply` on a root never runs a command on this machine: only file edits, the rest listed.
#[test]
fn apply_on_a_root_runs_no_command() {
    let (_dir, root) = fixture_copy("iommu-translated");
    let out = Gdrdoctor::new()
        .arg("--root")
        .arg(&root)
        .args(["fix", "--apply", "--class", "persistent", "--yes"])
        .output();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("not run here (they act on the running system"),
        "{text}"
    );
    assert!(text.contains("update-grub"), "{text}");
    // Runtime commands are refused on a root.
    let out = Gdrdoctor::new()
        .arg("--root")
        .arg(&root)
        .args(["fix", "--apply", "--yes"])
        .output();
    assert!(!out.status.success());
}

/// Issue 39: PFC vectors come from the port's current bitmap: on roce-pfc-off-on-nccl-priority
/// (PFC on 4, NCCL on 3) no printed `--pfc` vector turns 4 off; on roce-ofed-dscp2prio (PFC on
/// 3, the OFED map sending NCCL's DSCP to 4) none turns 3 off, and the fix is the map.
#[test]
fn pfc_vectors_never_remove_a_priority() {
    for (name, keep) in [
        ("roce-pfc-off-on-nccl-priority", 4),
        ("roce-ofed-dscp2prio", 3),
    ] {
        let (_dir, root) = fixture_copy(name);
        let json = check_json(&root, None).to_string();
        let script = String::from_utf8(
            Gdrdoctor::new()
                .arg("--root")
                .arg(&root)
                .args(["fix", "--warnings"])
                .output()
                .stdout,
        )
        .unwrap();
        let mut vectors = 0;
        for text in [&json, &script] {
            for (i, _) in text.match_indices("--pfc ") {
                let v: Vec<&str> = text[i + 6..i + 21].split(',').collect();
                assert_eq!(v.len(), 8, "{name}: {}", &text[i..i + 21]);
                assert_eq!(
                    v[keep],
                    "1",
                    "{name}: {} turns {keep} off",
                    &text[i..i + 21]
                );
                vectors += 1;
            }
        }
        assert!(vectors > 0, "{name}: no --pfc vector printed");
    }
    // The map, not a vector, is roce-ofed-dscp2prio's fix.
    let (_dir, root) = fixture_copy("roce-ofed-dscp2prio");
    let script = String::from_utf8(
        Gdrdoctor::new()
            .arg("--root")
            .arg(&root)
            .args(["fix"])
            .output()
            .stdout,
    )
    .unwrap();
    assert!(
        script.contains("mlnx_qos -i ens1np0 --dscp2prio set,26,3"),
        "{script}"
    );
    // roce-pfc-off-on-nccl-priority: the host side that keeps the fabric's PFC: NCCL_IB_TC=128
    // in place of the first definition, the PFC change an alternative.
    let (_dir, root) = fixture_copy("roce-pfc-off-on-nccl-priority");
    let script = String::from_utf8(
        Gdrdoctor::new()
            .arg("--root")
            .arg(&root)
            .args(["fix"])
            .output()
            .stdout,
    )
    .unwrap();
    assert!(
        script.contains("edit set /etc/nccl.conf NCCL_IB_TC=128"),
        "{script}"
    );
    assert!(
        script.contains("# or, instead (not run): enable PFC on priority 3 too"),
        "{script}"
    );
}

/// Issue 39: one cause, one finding: the default report of roce-pfc-off-on-nccl-priority (one
/// cause on 8 ports) fits in 25 lines, a healthy 8-GPU 8-NIC node in 20, kvm-h200x8-rootports
/// says its node-wide cause once; -v keeps every member. Each check added since takes its one
/// line on top (job-history, issue 42: 26 and 21).
#[test]
fn one_cause_one_finding() {
    let lines = |name: &str, extra: &[&str]| {
        let out = Gdrdoctor::new()
            .root(name)
            .arg("check")
            .args(extra)
            .output();
        String::from_utf8(out.stdout).unwrap()
    };
    let r = lines("roce-pfc-off-on-nccl-priority", &[]);
    assert!(r.lines().count() <= 26, "{} lines:\n{r}", r.lines().count());
    assert!(
        r.contains("FAIL 8 ports (mlx5_0 port 1 ... mlx5_7 port 1):"),
        "{r}"
    );
    assert!(
        r.contains("for x in ens1np0 ens2np0 ens3np0 ens4np0 ens5np0 ens6np0 ens7np0 ens8np0; do"),
        "{r}"
    );
    let healthy = lines("healthy-8gpu-roce", &[]);
    assert!(healthy.lines().count() <= 21, "{healthy}");
    let kvm = lines("kvm-h200x8-rootports", &[]);
    assert_eq!(
        kvm.matches("This is a VM, and placement seen from inside it")
            .count(),
        1,
        "{kvm}"
    );
    assert!(kvm.contains("FAIL 8 GPUs (GPU 0000:01:00.0"), "{kvm}");
    let verbose = lines("roce-pfc-off-on-nccl-priority", &["-v"]);
    for n in 0..8 {
        assert!(
            verbose.contains(&format!("FAIL mlx5_{n} port 1:")),
            "{verbose}"
        );
    }
}

fn conf_of(root: &Path, config: Option<&str>) -> Option<String> {
    let mut g = Gdrdoctor::new().arg("--root").arg(root);
    if let Some(c) = config {
        g = g.arg("--config").arg(crate_dir().join(c));
    }
    let out = g.args(["nccl", "settings", "--conf"]).output();
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).unwrap())
}

/// Issue 39: `gdrdoctor nccl settings --conf` is the node's /etc/nccl.conf merged, and
/// installing it never makes a check worse, on any fixture.
#[test]
fn nccl_conf_merged_never_makes_a_check_worse() {
    let names: Vec<String> = fixture_names()
        .into_iter()
        .filter(|n| !n.starts_with("broken/") && !n.starts_with("fleet/"))
        .collect();
    let mut tried = 0;
    for name in &names {
        let config = fixture_config(name);
        let (_dir, root) = fixture_copy(name);
        let Some(conf) = conf_of(&root, config.as_deref()) else {
            continue;
        };
        tried += 1;
        let (before, checks_before, _) = judged(&check_json(&root, config.as_deref()));
        write(&root.join("etc/nccl.conf"), conf.as_bytes());
        let (after, checks_after, _) = judged(&check_json(&root, config.as_deref()));
        for (id, was) in &checks_before {
            let now = checks_after.get(id).map(String::as_str).unwrap_or("skip");
            assert!(
                rank(now) <= rank(was) || (was == "pass" && now == "skip"),
                "{name}: {id} went from {was} to {now} with:\n{conf}"
            );
        }
        // A new failure never; a new warning only where its check got better (roce-pfc-off's
        // NCCL_IB_TC moves NCCL to the lossless priority, whose ECN is the rest of its fix).
        for s in &after {
            let new = !before
                .iter()
                .any(|b| b.code == s.code && b.subject == s.subject);
            let better = rank(&checks_after[&s.check]) < rank(&checks_before[&s.check]);
            assert!(
                !new || (s.status == "warn" && better),
                "{name}: new finding {s:?} with:\n{conf}"
            );
        }
        // Installed, it is what --conf says again: nothing more to change.
        assert_eq!(conf_of(&root, config.as_deref()).unwrap(), conf, "{name}");
    }
    assert!(tried >= 40, "{tried}");
}

#[test]
fn nccl_conf_keeps_what_gdrdoctor_does_not_manage() {
    // roce-lossless-ok: NCCL_IB_TC=106 is the lossless class: kept, the node READY.
    let (_dir, root) = fixture_copy("roce-lossless-ok");
    let conf = conf_of(&root, None).unwrap();
    assert!(conf.starts_with("NCCL_IB_TC=106\n"), "{conf}");
    write(&root.join("etc/nccl.conf"), conf.as_bytes());
    let out = Gdrdoctor::new()
        .arg("--root")
        .arg(&root)
        .arg("check")
        .output();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // nccl-transport-misset: NCCL_IB_QPS_PER_CONNECTION and NCCL_IB_TC kept.
    let (_dir, root) = fixture_copy("nccl-transport-misset");
    let conf = conf_of(&root, None).unwrap();
    assert!(conf.contains("\nNCCL_IB_QPS_PER_CONNECTION=4\n"), "{conf}");
    assert!(conf.contains("\nNCCL_IB_TC=106\n"), "{conf}");
    // A line gdrdoctor does not manage, a comment, no final newline: kept byte for byte.
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    write(
        &root.join("etc/nccl.conf"),
        b"# site settings\nNCCL_NVLS_ENABLE=0\nNCCL_DEBUG=WARN",
    );
    let conf = conf_of(&root, None).unwrap();
    assert!(
        conf.starts_with("# site settings\nNCCL_NVLS_ENABLE=0\nNCCL_DEBUG=WARN\n"),
        "{conf}"
    );
    // roce-pfc-off-on-nccl-priority: NCCL_IB_TC moved to the priority with PFC, with why.
    let (_dir, root) = fixture_copy("roce-pfc-off-on-nccl-priority");
    let conf = conf_of(&root, None).unwrap();
    assert!(
        conf.contains("# gdrdoctor: NCCL_IB_TC 106 -> 128: "),
        "{conf}"
    );
    assert!(conf.contains("\nNCCL_IB_TC=128\n"), "{conf}");
    assert!(
        !conf.contains("\nNCCL_IB_TC=106\n") && !conf.starts_with("NCCL_IB_TC=106"),
        "{conf}"
    );
}
