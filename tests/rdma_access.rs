//! The live-only rdma-access check, run live on this machine with what a test can set for it:
//! the locked-memory limit (RLIMIT_MEMLOCK, set by the bounded runner) and the libibverbs it
//! loads. The check opens `libibverbs.so.1` by its soname, as any process on the node would, so
//! the test puts its own first on LD_LIBRARY_PATH: the stand-in, one without
//! `ibv_reg_dmabuf_mr`, or a file that is no library. What needs a real RDMA device (its verbs
//! device node, its provider) is the lab's (tests/lab/scenarios/switch-pt.sh).
#![allow(clippy::disallowed_methods)] // tests build their own files, not a node's

use crate::common::*;
use std::path::Path;
use std::time::Duration;

/// `check --select rdma-access` live, with `verbs` found as libibverbs.so.1, RLIMIT_MEMLOCK set
/// to `memlock` when given (`Some(None)`: unlimited) and the config `config` (YAML, may be
/// empty): its `(code, status)`s.
fn access(verbs: &Path, memlock: Option<Option<u64>>, config: &str) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.yaml");
    std::fs::write(&cfg, config).unwrap();
    let libs = dir.path().join("lib");
    std::fs::create_dir(&libs).unwrap();
    std::os::unix::fs::symlink(verbs, libs.join("libibverbs.so.1")).unwrap();
    let mut run = Gdrdoctor::new()
        .arg("--config")
        .arg(&cfg)
        .args(["check", "--select", "rdma-access", "--format", "json"])
        .env("LD_LIBRARY_PATH", &libs)
        .within(Duration::from_secs(20), 200);
    if let Some(limit) = memlock {
        run = run.memlock(limit);
    }
    let ran = run.run();
    let r: serde_json::Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", ran.stdout, ran.stderr));
    codes(&r)
}

fn has(got: &[(String, String)], code: &str, status: &str) {
    assert!(
        got.iter().any(|(c, s)| c == code && s == status),
        "no {status} {code} in {got:?}"
    );
}

/// Whether this process may make RLIMIT_MEMLOCK unlimited: its hard limit already is (raising
/// it needs CAP_SYS_RESOURCE, which a container's root may lack).
fn memlock_may_be_unlimited() -> bool {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max locked memory"))
        .and_then(|l| l.split_whitespace().nth(4))
        == Some("unlimited")
}

#[test]
fn the_locked_memory_limit_is_judged() {
    let verbs = stub("ibverbs", &[]);
    // 1 MiB: below the 64 MiB registrations need.
    has(
        &access(&verbs, Some(Some(1 << 20)), ""),
        "memlock-low",
        "fail",
    );
    // 4 MiB against a threshold of 1 MiB: enough, but finite.
    let limited = access(
        &verbs,
        Some(Some(4 << 20)),
        "thresholds:\n  memlock_min_mib: 1\n",
    );
    has(&limited, "memlock-limited", "warn");
    if memlock_may_be_unlimited() {
        has(&access(&verbs, Some(None), ""), "memlock-ok", "pass");
    } else {
        eprintln!("RLIMIT_MEMLOCK's hard limit is finite here: memlock-ok is the lab's");
    }
}

#[test]
fn the_library_is_judged() {
    has(
        &access(&stub("ibverbs", &[]), None, ""),
        "libibverbs-ok",
        "pass",
    );
    let old = stub("ibverbs", &["ibv_reg_dmabuf_mr"]);
    has(&access(&old, None, ""), "libibverbs-no-dmabuf", "warn");
    // A file the loader finds first but cannot load: as if there were none.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.so");
    std::fs::write(&empty, "").unwrap();
    has(&access(&empty, None, ""), "libibverbs-missing", "fail");
}
