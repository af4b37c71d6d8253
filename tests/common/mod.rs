//! Helpers shared by the integration tests: the fixtures (fixtures.rs), the built binary run
//! where they are (command.rs), the check that JSON fields are documented (documented.rs), and
//! what a JSON report says.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node
#![allow(dead_code)]

mod command;
mod documented;
mod fixtures;
pub use command::*;
pub use documented::*;
pub use fixtures::*;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `run` until it finishes within `bound`, at most three times; returns the last result and
/// the time each attempt took. For the assertions on how long gdrdoctor takes (a deadline kept,
/// a child killed in time): the bound stays what gdrdoctor promises, but on a loaded machine one
/// run can lose hundreds of milliseconds to the scheduler (starting the process, reaping a
/// child), while a gdrdoctor that overruns its deadline does so on every attempt.
pub fn in_time<T>(bound: Duration, mut run: impl FnMut() -> T) -> (T, Vec<Duration>) {
    let mut took = Vec::new();
    loop {
        let start = Instant::now();
        let out = run();
        took.push(start.elapsed());
        if took[took.len() - 1] < bound || took.len() == 3 {
            return (out, took);
        }
    }
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The exit code; a signal or a panic (101) fails the test with the output shown.
pub fn code(o: &Output) -> i32 {
    let c = o
        .status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal\nstderr:\n{}", stderr(o)));
    assert_ne!(c, 101, "gdrdoctor panicked:\n{}", stderr(o));
    assert!(
        !stderr(o).contains("panicked at"),
        "gdrdoctor panicked:\n{}",
        stderr(o)
    );
    c
}

pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}\nstderr:\n{}", stdout(o), stderr(o)))
}

/// `check id -> status` from a JSON report.
pub fn statuses(report: &serde_json::Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Every finding of every check in a JSON report.
pub fn all_findings(report: &serde_json::Value) -> impl Iterator<Item = &serde_json::Value> {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .flat_map(|c| c["findings"].as_array().unwrap())
}

/// Every finding code in a JSON report, with its status.
pub fn codes(report: &serde_json::Value) -> Vec<(String, String)> {
    all_findings(report)
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The findings with `code` in a JSON report, of whichever check.
pub fn findings_with<'a>(report: &'a serde_json::Value, code: &str) -> Vec<&'a serde_json::Value> {
    all_findings(report).filter(|f| f["code"] == code).collect()
}

/// A check's object in a JSON report, by ID.
pub fn check<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .expect("checks array")
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}"))
}

/// Builds one stand-in library: `tests/stubs/<src>.c` with `-DOMIT_<symbol>` for each omitted
/// symbol. Cached per variant for the whole test binary.
pub fn stub(src: &str, omit: &[&str]) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().unwrap());
    let name = format!(
        "lib{src}{}.so",
        omit.iter().map(|o| format!("-no-{o}")).collect::<String>()
    );
    let out = dir.path().join(&name);
    // One build at a time, and under a temporary name renamed into place: a test on another
    // thread must never load a library that cc is still writing.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _building = BUILDING.lock().unwrap_or_else(|e| e.into_inner());
    if !out.exists() {
        let partial = dir.path().join(format!("{name}.partial"));
        let mut cc = Command::new("cc");
        cc.args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(&partial)
            .arg(crate_dir().join(format!("tests/stubs/{src}.c")));
        for o in omit {
            cc.arg(format!("-DOMIT_{o}"));
        }
        let status = cc
            .status()
            .expect("cc (the C compiler) is needed for these tests");
        assert!(status.success(), "building {name} failed");
        std::fs::rename(&partial, &out).unwrap();
    }
    out
}

/// An executable `/bin/sh` script with `body`, standing in for a child (a probe that hangs,
/// crashes or prints garbage). Keep the directory alive as long as the script is used.
pub fn script(body: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fake-child");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    (dir, path)
}

/// A writable copy of a fixture ([`fixture_copy`]), to change and run gdrdoctor on; the copy
/// lives as long as the value.
pub struct NodeCopy {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
}

impl NodeCopy {
    pub fn of(name: &str) -> NodeCopy {
        let (dir, root) = fixture_copy(name);
        NodeCopy { _dir: dir, root }
    }

    /// Writes `content` at `p` (relative to the root), replacing what was there (a link
    /// included: the copy's files are its own).
    pub fn write(&self, p: &str, content: impl AsRef<[u8]>) -> &Self {
        let path = self.root.join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&path);
        std::fs::write(path, content).unwrap();
        self
    }

    /// mlx5_0 port 1's GID table with a vxlan stacked on the port's bond: link-local v1/v2 on
    /// bond0 (0, 1), the vxlan's IPv4 10.200.0.5 v1/v2 (2, 3), then the bond's own 192.168.1.1
    /// v1/v2 (4, 5): NCCL's own pick (the first IPv4 v2) is the vxlan's.
    pub fn vxlan_stacked_on_bond(&self) -> &Self {
        let port = "sys/class/infiniband/mlx5_0/ports/1";
        let v4 = |ip: &str| format!("0000:0000:0000:0000:0000:ffff:{ip}");
        let lla = "fe80:0000:0000:0000:ba3f:d2ff:fea1:b2c4".to_owned();
        let table = [
            (lla.clone(), "IB/RoCE v1", "bond0"),
            (lla, "RoCE v2", "bond0"),
            (v4("0ac8:0005"), "IB/RoCE v1", "vxlan100"),
            (v4("0ac8:0005"), "RoCE v2", "vxlan100"),
            (v4("c0a8:0101"), "IB/RoCE v1", "bond0"),
            (v4("c0a8:0101"), "RoCE v2", "bond0"),
        ];
        for (i, (gid, ty, ndev)) in table.iter().enumerate() {
            self.write(&format!("{port}/gids/{i}"), format!("{gid}\n"));
            self.write(&format!("{port}/gid_attrs/types/{i}"), format!("{ty}\n"));
            self.write(&format!("{port}/gid_attrs/ndevs/{i}"), format!("{ndev}\n"));
        }
        self
    }

    /// Removes the file or directory at `p`.
    pub fn remove(&self, p: &str) -> &Self {
        let path = self.root.join(p);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
        self
    }

    /// `gdrdoctor --root COPY ARGS...`, which must not panic.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        let mut all = vec!["--root", self.root.to_str().unwrap()];
        all.extend(args);
        let out = gdrdoctor(&all);
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        out
    }

    /// `gdrdoctor --root COPY GLOBAL... check CHECK_ARGS... --format json`: the exit code and
    /// the report.
    pub fn check(&self, global: &[&str], check_args: &[&str]) -> (i32, serde_json::Value) {
        let mut args = global.to_vec();
        args.push("check");
        args.extend(check_args);
        args.extend(["--format", "json"]);
        let out = self.run(&args);
        (code(&out), json(&out))
    }
}
