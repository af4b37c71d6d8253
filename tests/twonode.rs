//! `gdr-test --listen` / `--peer` as two real processes on loopback TCP: the control
//! connection, the token, the listener that takes one peer, and the verbs path over the
//! stand-in libibverbs (tests/stubs/ibverbs.c). The stand-in's WRITEs are memcpy inside one
//! process, so between two processes the writer's NIC cannot find the peer's registration: the
//! remote access error, explained, is what this test can show of the RDMA part. Data verified
//! both ways is shown by the unit tests (src/gdr/twonode/tests.rs, a stand-in fabric) and the lab.
#![allow(clippy::disallowed_methods)] // tests read their own files, not a node

use crate::common::*;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "a-shared-token-for-tests";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn side(args: &[&str]) -> Child {
    Gdrdoctor::new()
        .arg("gdr-test")
        .args(args)
        .verbs()
        .env_remove("NCCL_IB_HCA")
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(c: Child) -> (i32, serde_json::Value, String) {
    let out = c.wait_with_output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        format!("{}{}", stdout(&out), stderr(&out)),
    )
}

fn pair(
    listen: &[&str],
    peer: &[&str],
) -> (
    (i32, serde_json::Value, String),
    (i32, serde_json::Value, String),
) {
    let port = free_port().to_string();
    let addr = format!("127.0.0.1:{port}");
    let mut l_args = vec!["--listen", &addr, "--format", "json", "--wait", "20"];
    l_args.extend_from_slice(listen);
    let l = side(&l_args);
    let mut p_args = vec!["--peer", &addr, "--format", "json", "--wait", "20"];
    p_args.extend_from_slice(peer);
    let p = side(&p_args);
    (finish(l), finish(p))
}

#[test]
fn a_wrong_token_is_refused_and_the_listener_ends() {
    let t0 = Instant::now();
    let ((lc, lj, lo), (pc, pj, po)) = pair(
        &["--token", TOKEN, "--rails", "fake0", "--memory", "host"],
        &[
            "--token",
            "another-token-entirely",
            "--rails",
            "fake0",
            "--memory",
            "host",
        ],
    );
    assert_eq!((lc, pc), (2, 2), "{lo}\n{po}");
    assert_eq!(lj["error_class"], "auth", "{lo}");
    assert_eq!(pj["error_class"], "auth", "{po}");
    assert!(
        pj["error"].as_str().unwrap().contains("different tokens"),
        "{po}"
    );
    assert_eq!(lj["rails"].as_array().unwrap().len(), 0);
    // One peer, then the end: the listener did not wait for another.
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}

#[test]
fn the_token_is_required_and_must_be_long_enough() {
    let out = gdrdoctor(&["gdr-test", "--peer", "127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--token-file FILE"),
        "{}",
        stderr(&out)
    );
    let out = gdrdoctor(&["gdr-test", "--peer", "127.0.0.1:1", "--token", "short"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("at least 16"), "{}", stderr(&out));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("token");
    std::fs::write(&f, format!("{TOKEN}\n")).unwrap();
    // Its owner's alone, as docs/two-node.md makes it (one others can read is refused).
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    // A token file read, then nobody listening: named, within the wait.
    let port = free_port().to_string();
    let out = gdrdoctor(&[
        "gdr-test",
        "--peer",
        &format!("127.0.0.1:{port}"),
        "--token-file",
        f.to_str().unwrap(),
        "--wait",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        j["error"]
            .as_str()
            .unwrap()
            .contains("is `gdrdoctor gdr-test --listen` running there"),
        "{j}"
    );
}

/// The real verbs path in both processes, over the stand-in: both open fake0, exchange their
/// queue pairs, connect; the writer's completion is a remote access error (the stand-in cannot
/// reach another process's memory), explained on the writer and named on the target.
#[test]
fn the_verbs_path_runs_in_both_processes_and_explains_a_remote_access_error() {
    let ((lc, lj, lo), (pc, pj, po)) = pair(
        &[
            "--token", TOKEN, "--rails", "fake0", "--memory", "host", "--size", "64K",
        ],
        &[
            "--token", TOKEN, "--rails", "fake0", "--memory", "host", "--size", "64K",
        ],
    );
    assert_eq!((lc, pc), (1, 1), "{lo}\n{po}");
    let rail = &pj["rails"][0];
    assert_eq!(rail["setup"]["path"], "host", "{po}");
    assert_eq!(rail["peer_path"], "host", "{po}");
    assert_eq!(rail["path_mtu"], 4096, "{po}");
    let f = &rail["outgoing"]["failure"];
    assert_eq!(f["kind"], "completion-error", "{po}");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("IBV_WC_REM_ACCESS_ERR"),
        "{po}"
    );
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .contains("refused the WRITE into its buffer"),
        "{po}"
    );
    let f = &lj["rails"][0]["incoming"]["failure"];
    assert!(f["step"].as_str().unwrap().contains("(on "), "{lo}");
    assert_eq!(lj["role"], "listener");
    assert_eq!(pj["role"], "connector");
    // fleet reads both reports and says what it can tell: the pair fails, no third node.
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    std::fs::write(&a, lj.to_string()).unwrap();
    std::fs::write(&b, pj.to_string()).unwrap();
    let out = gdrdoctor(&["fleet", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    // Both processes are this host with the same NIC: its two directions are one end pair.
    assert!(text.contains("direction(s) tested, 1 failed"), "{text}");
    assert!(
        text.contains("neither was tested with a third node"),
        "{text}"
    );
}

#[test]
fn slurm_mode_pairs_two_tasks_from_the_environment() {
    // Two tasks of one step on this node (as the lab's single-node Slurm runs them): the
    // pairing from SLURM_* alone; the RDMA part is the stand-in, as above.
    let run = |rank: &str| {
        Gdrdoctor::new()
            .args([
                "gdr-test", "--slurm", "--token", TOKEN, "--rails", "fake0", "--memory", "host",
                "--format", "json", "--wait", "20",
            ])
            .verbs()
            .env("SLURM_PROCID", rank)
            .env("SLURM_JOB_NODELIST", "localhost")
            .env("SLURM_NTASKS", "2")
            .env("SLURM_TASKS_PER_NODE", "2")
            .command()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (run("0"), run("1"));
    let ((ac, aj, ao), (bc, bj, bo)) = (finish(a), finish(b));
    assert_eq!(aj["role"], "listener", "{ao}");
    assert_eq!(bj["role"], "connector", "{bo}");
    assert_eq!(aj["error"], serde_json::Value::Null, "{ao}");
    assert_eq!(bj["rails"].as_array().unwrap().len(), 1, "{bo}");
    // The worst of the two is the step's exit code: the stand-in's remote access error.
    assert_eq!((ac, bc), (1, 1));
}
