//! Hostile peers, report files, token files and Slurm environments (issue 25): what the other
//! node of a two-node test, a report file handed to `fleet` or a scheduler's environment can
//! make gdrdoctor do. Each case runs the real binary under `prlimit` (an address-space limit)
//! and asserts its wall time and its peak RSS, so that a regression fails fast and says which
//! bound it broke instead of taking the machine's memory or hanging the suite.
//!
//! Kept apart from tests/hostile.rs (bad captures) so that the two grow without touching each
//! other.
#![allow(clippy::disallowed_methods)] // tests build their own files, they do not read a node

use crate::common::*;
use gdrdoctor::gdr::{Failure, FailureKind, Memory, NicSpec, PairResult};
use gdrdoctor::probe::twonode::{Direction, Rail, RailResult, Report, Role, Settings};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN: &str = "a-shared-token-for-hostile-tests";

/// A host name (or a reason, a NIC name) that forges a verdict line of its own, clears the
/// screen, colours the forgery green and reverses what follows.
const FORGED: &str = "evil\n\u{1b}[2J\u{1b}[32mREADY: every rail passes\u{1b}[0m\u{202e}";

/// The address space each run may take: far above what gdrdoctor needs (a debug build with its
/// threads reserves a few hundred MiB of it), far below what the hostile inputs grew to (4 to
/// 7 GB).
const ADDRESS_SPACE: u64 = 2 << 30;
/// The peak resident memory each run may reach.
const RSS_MIB: u64 = 256;

/// Runs gdrdoctor with `args` and `env` under the address-space bound, with the stand-in
/// libibverbs, and asserts that it ends within `wall`, on its own (not killed by a signal, no
/// panic), within [`RSS_MIB`]. A run past `wall` is killed and fails the test naming the bound.
fn bounded(args: &[&str], env: &[(&str, &str)], wall: Duration) -> Ran {
    Gdrdoctor::new()
        .args(args)
        // One malloc arena per thread would reserve 64 MiB of address space each.
        .env("MALLOC_ARENA_MAX", "2")
        .verbs()
        .env_remove("NCCL_IB_HCA")
        .envs(env.iter().copied())
        .within(wall, RSS_MIB)
        .address_space(ADDRESS_SPACE)
        .run()
}

fn tail(s: &str) -> &str {
    &s[s.len().saturating_sub(2000)..]
}

/// Asserts that nothing the other side wrote reaches the terminal raw: no ESC, no bidi
/// override, no line of its own that starts with the forged verdict; and that it is there,
/// escaped.
fn shown_escaped(text: &str) {
    never_raw(text);
    assert!(
        text.contains("evil\\n\\u{1b}[2J\\u{1b}[32mREADY"),
        "the escaped name is not shown in:\n{text}"
    );
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A token file as the docs make it: private to its owner.
fn token_file(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let f = dir.join("token");
    std::fs::write(&f, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
    f
}

fn rail(device: &str) -> Rail {
    Rail {
        nic: NicSpec {
            device: device.into(),
            port: 1,
            gid_index: None,
        },
        gpu: None,
        memory: Memory::Host,
        subject: "host memory".into(),
    }
}

/// Connects to a listener as a peer that holds the token, and says `hello` (JSON: what a
/// connector says first) once authenticated.
fn hostile_connector(port: u16, hello: serde_json::Value) -> gdrdoctor::gdr::wire::Channel {
    let t0 = Instant::now();
    let s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if t0.elapsed() < Duration::from_secs(20) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("the listener never came up: {e}"),
        }
    };
    let until = Instant::now() + Duration::from_secs(10);
    let mut ch = gdrdoctor::gdr::wire::connect(s, TOKEN.as_bytes(), until).unwrap();
    ch.send(&hello, until).unwrap();
    let _: serde_json::Value = ch.recv(until, "the listener's hello").unwrap();
    ch
}

/// A listener whose rails wait at most 3 s (`gdr_pair_s: 1`), with one stand-in rail.
fn listener_args(dir: &Path, port: u16, format: &str) -> Vec<String> {
    let config = dir.join("config.yaml");
    std::fs::write(&config, "timeouts:\n  gdr_pair_s: 1\n").unwrap();
    [
        "--config",
        config.to_str().unwrap(),
        "gdr-test",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--token-file",
        token_file(dir).to_str().unwrap(),
        "--rails",
        "fake0",
        "--memory",
        "host",
        "--size",
        "64K",
        "--wait",
        "20",
        "--format",
        format,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// Item 1: a peer that authenticates and asks for a rail timeout of eleven days, then says
/// nothing. The listener keeps its own (3 s here): the session's settings are the smaller of
/// the two sides', field by field. Before: the listener adopted the connector's settings and
/// waited for the peer's rail for as long as the peer asked.
#[test]
fn the_listener_keeps_its_own_limits_against_a_peers_huge_ones() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let args = listener_args(dir.path(), port, "json");
    let peer = std::thread::spawn(move || {
        let huge = Settings {
            rail_timeout_ms: 1_000_000_000,
            iters: u32::MAX,
            duration_ms: u64::MAX / 4,
            latency_iters: u32::MAX,
            size: 1 << 40,
        };
        let ch = hostile_connector(
            port,
            serde_json::json!({"host": "greedy", "rails": [rail("fake0")], "settings": huge}),
        );
        // Says nothing more, and keeps the connection open while the listener waits.
        std::thread::sleep(Duration::from_secs(25));
        drop(ch);
    });
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = bounded(&args, &[], Duration::from_secs(15));
    assert_eq!(run.code, 2, "{}", run.stderr);
    let r: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(r["settings"]["rail_timeout_ms"], 3000, "{r}");
    assert_eq!(r["settings"]["size"], 65536, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("the peer's rail"),
        "{r}"
    );
    assert!(run.took < Duration::from_secs(10), "{:?}", run.took);
    drop(peer);
}

/// Item 4: the connector's host name reaches the listener's report escaped.
#[test]
fn the_listener_shows_the_connectors_host_name_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let args = listener_args(dir.path(), port, "human");
    let peer = std::thread::spawn(move || {
        let ch = hostile_connector(
            port,
            serde_json::json!({"host": FORGED, "rails": [rail("fake0")], "settings": Settings::default()}),
        );
        // Leaves at once: the listener reports the lost connection, with the peer's name.
        drop(ch);
    });
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = bounded(&args, &[], Duration::from_secs(15));
    peer.join().unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    shown_escaped(&run.stdout);
    assert!(run.took < Duration::from_secs(10), "{:?}", run.took);
}

/// A frame of the control connection as wire.rs writes it: `GDRD`, version 1, kind, length.
fn frame(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut f = b"GDRD".to_vec();
    f.push(1);
    f.push(kind);
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

/// Item 4: a listener's `refused` reason reaches the connector's report and its error escaped.
#[test]
fn the_connector_shows_a_listeners_refusal_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut hello = [0u8; 10 + 32];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&frame(2, &[7u8; 32])).unwrap();
        let mut proof = [0u8; 10 + 32];
        s.read_exact(&mut proof).unwrap();
        s.write_all(&frame(5, FORGED.as_bytes())).unwrap();
    });
    let token = token_file(dir.path());
    let run = bounded(
        &[
            "gdr-test",
            "--peer",
            &format!("127.0.0.1:{port}"),
            "--token-file",
            token.to_str().unwrap(),
            "--rails",
            "fake0",
            "--memory",
            "host",
            "--wait",
            "10",
        ],
        &[],
        Duration::from_secs(15),
    );
    fake.join().unwrap();
    assert_eq!(run.code, 2, "{}", run.stderr);
    shown_escaped(&run.stdout);
}

/// Runs `gdr-test --peer` (nobody listens: a token accepted ends in a connect error) with
/// `--token-file path`.
fn with_token_file(path: &Path) -> Ran {
    bounded(
        &[
            "gdr-test",
            "--peer",
            &format!("127.0.0.1:{}", free_port()),
            "--token-file",
            path.to_str().unwrap(),
            "--rails",
            "fake0",
            "--memory",
            "host",
            "--wait",
            "1",
            "--format",
            "json",
        ],
        &[],
        Duration::from_secs(10),
    )
}

/// Item 2: a token file is a small regular file that only its owner can read. Before: read
/// whole (a 1 GiB file took 2.1 GB, /dev/zero all memory), a FIFO without a writer blocked for
/// ever, and a world-readable one was used without a word.
#[test]
fn token_files_that_are_not_small_private_regular_files_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).unwrap();
    let big = dir.path().join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(1 << 30).unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o600)).unwrap();
    for (path, want) in [
        (fifo.clone(), "a FIFO"),
        (PathBuf::from("/dev/zero"), "a character device"),
        (big.clone(), "1073741824 bytes"),
        (dir.path().to_owned(), "a directory"),
    ] {
        let run = with_token_file(&path);
        assert_eq!(run.code, 2, "{path:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{path:?}: {}", run.stderr);
        assert!(
            run.took < Duration::from_secs(5),
            "{path:?}: {:?}",
            run.took
        );
    }
    // Readable by group or others: refused as ssh refuses such a private key.
    let token = token_file(dir.path());
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let run = with_token_file(&token);
        assert_eq!(run.code, 2, "{mode:o}: {}", run.stderr);
        assert!(
            run.stderr.contains(&format!("mode {mode:04o}")) && run.stderr.contains("chmod 600"),
            "{mode:o}: {}",
            run.stderr
        );
    }
    // Private: accepted, and the run goes on to find nobody listening.
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = with_token_file(&token);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let j: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert!(j["error"].as_str().unwrap().contains("connect to"), "{j}");
}

/// `gdr-test --slurm` with Slurm's variables set to `env` (and a token, so that only the
/// pairing can refuse).
fn slurm(env: &[(&str, &str)]) -> Ran {
    bounded(
        &[
            "gdr-test", "--slurm", "--token", TOKEN, "--rails", "fake0", "--memory", "host",
            "--wait", "1", "--format", "json",
        ],
        env,
        Duration::from_secs(10),
    )
}

/// Item 3: node lists and task counts are bounded in total, not per range; error lines quote a
/// short prefix of what they refuse; a rank whose port would leave the TCP range is refused.
/// Before: `a[0-99999]b[0-99999]` or a thousand `n[0-99999]` grew to gigabytes, a task count
/// of 99999999999 made a host entry per task, and rank 70000 listened on port 22980, rank
/// 4464's.
#[test]
fn slurm_node_lists_counts_and_ports_are_bounded() {
    let thousand = vec!["n[0-99999]"; 1000].join(",");
    let long = format!("n[{}", "1".repeat(100_000));
    for (env, want) in [
        (
            vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", "a[0-99999]b[0-99999]"),
            ],
            "host names",
        ),
        (
            vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", thousand.as_str()),
            ],
            "host names",
        ),
        (
            vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_JOB_NODELIST", "a"),
                ("SLURM_TASKS_PER_NODE", "99999999999"),
            ],
            "65535",
        ),
        (
            vec![
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_JOB_NODELIST", long.as_str()),
            ],
            "'[' without ']'",
        ),
    ] {
        let run = slurm(&env);
        assert_eq!(run.code, 2, "{env:?}: {}", tail(&run.stderr));
        assert!(run.stderr.contains(want), "{}", tail(&run.stderr));
        assert!(
            run.stderr.lines().all(|l| l.len() < 400),
            "an error line quotes too much: {} bytes",
            run.stderr.len()
        );
        assert!(run.took < Duration::from_secs(5), "{:?}", run.took);
    }
    // The ports: 18516 + rank must stay within 65535 for every task of the ring.
    let run = slurm(&[
        ("SLURM_PROCID", "70000"),
        ("SLURM_NTASKS", "70001"),
        ("SLURM_JOB_NODELIST", "n[0-70000]"),
        ("SLURM_TASKS_PER_NODE", "1(x70001)"),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("65535") && run.stderr.contains("47020 tasks"),
        "{}",
        run.stderr
    );
    // A node list within the bounds still pairs: a ring of three, task 1 listening for task 0
    // and connecting to task 2, whose name does not resolve (nothing here is reached).
    let run = slurm(&[
        ("SLURM_PROCID", "1"),
        ("SLURM_NTASKS", "3"),
        ("SLURM_JOB_NODELIST", "nowhere[0-2].invalid"),
    ]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stdout.contains("\"role\""), "{}", run.stdout);
}

/// A two-node report of `host` with `peer`, `rails` rails, each passing or failing both ways.
fn two_node_report(host: &str, peer: &str, rails: usize, ok: bool) -> Report {
    let d = |ok: bool| Direction {
        from: String::new(),
        to: String::new(),
        verified_bytes: ok.then_some(4096),
        gbps: None,
        latency_us: None,
        failure: (!ok).then(|| Failure {
            kind: FailureKind::CompletionError,
            step: "RDMA WRITE".into(),
            message: "IBV_WC_RETRY_EXC_ERR".into(),
        }),
    };
    let mut r = Report::new(host, Role::Connector, Settings::default());
    r.peer = Some(peer.into());
    for i in 0..rails {
        let nic = format!("mlx5_{i}");
        r.rails.push(RailResult {
            index: i,
            local: rail(&nic),
            peer: Some(rail(&nic)),
            setup: PairResult::default(),
            peer_path: None,
            path_mtu: None,
            notes: vec![],
            outgoing: d(ok),
            incoming: d(ok),
        });
    }
    r
}

fn write_json(path: &Path, r: &Report) {
    std::fs::write(path, serde_json::to_vec(r).unwrap()).unwrap();
}

fn fleet(args: &[&str]) -> Ran {
    let mut a = vec!["fleet"];
    a.extend_from_slice(args);
    bounded(&a, &[], Duration::from_secs(20))
}

/// Item 5: a report file is read within a bound (before: a 4 GiB sparse `.json` took 4 GiB).
#[test]
fn fleet_refuses_a_huge_report_file_unread() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.json");
    let mut f = std::fs::File::create(&big).unwrap();
    f.write_all(br#"{"schema": "gdrdoctor.two-node", "host": ""#)
        .unwrap();
    f.set_len(4 << 30).unwrap();
    let run = fleet(&[big.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stdout.contains("4294967296 bytes"), "{}", run.stdout);
    assert!(run.took < Duration::from_secs(5), "{:?}", run.took);
}

/// Item 5: which rail fails is judged in near-linear time (before: quadratic in rails, 30,000
/// rails took over 20 s).
#[test]
fn fleet_judges_thirty_thousand_rails_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("c.json"),
    );
    // A ring of three whose every rail of b fails: b is named.
    write_json(&a, &two_node_report("a", "b", 10_000, false));
    write_json(&b, &two_node_report("b", "c", 10_000, false));
    write_json(&c, &two_node_report("c", "a", 10_000, true));
    let run = fleet(&[
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stdout.contains("node b: every rail fails"),
        "{}",
        tail(&run.stdout)
    );
    assert!(run.took < Duration::from_secs(10), "{:?}", run.took);
}

/// A capture that is ready on its own, and a pair of two-node reports whose directions fail.
fn ready_capture_and_failing_reports(dir: &Path) -> (String, PathBuf, PathBuf) {
    let capture = fixture("healthy-8gpu-roce").to_owned();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    write_json(&a, &two_node_report("node-a", "node-b", 2, false));
    let mut r = two_node_report("node-b", "node-a", 2, false);
    r.role = Role::Listener;
    write_json(&b, &r);
    (capture, a, b)
}

/// Item 5: captures and two-node reports together are one fleet report: one document per
/// format, the worst verdict decides the exit code. Before: exit 0 though a direction failed,
/// two JSON documents, CSV that started with human text.
#[test]
fn fleet_with_captures_and_two_node_reports_is_one_report() {
    let dir = tempfile::tempdir().unwrap();
    let (capture, a, b) = ready_capture_and_failing_reports(dir.path());
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    assert_eq!(fleet(&[&capture]).code, 0, "the capture alone is ready");
    let run = fleet(&[&capture, a, b]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains("direction(s) tested"), "{}", run.stdout);
    let run = fleet(&[&capture, a, b, "--format", "json"]);
    assert_eq!(run.code, 1);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{}", run.stdout));
    assert_eq!(doc["schema"], "gdrdoctor.fleet");
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 1, "{doc}");
    // Two rails, both ways, each seen by both nodes: four directions, all failed.
    assert_eq!(doc["two_node"]["failed"], 4, "{doc}");
    let run = fleet(&[&capture, a, b, "--format", "csv"]);
    assert_eq!(run.code, 1);
    let mut lines = run.stdout.lines();
    assert!(
        lines.next().unwrap().starts_with("capture,hostname,"),
        "{}",
        run.stdout
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3, "{}", run.stdout);
    assert!(
        rows.iter().all(|r| r.split(',').count() >= 17),
        "{}",
        run.stdout
    );
}

/// Item 5: two-node reports are recognised by what they hold, wherever they come from: in a
/// directory, through fleet's own glob, under any name. Before: passed over in a directory,
/// misread as captures through the glob.
#[test]
fn fleet_recognises_two_node_reports_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let (capture, a, b) = ready_capture_and_failing_reports(dir.path());
    let glob = format!("{}/*.json", dir.path().display());
    let renamed = dir.path().join("b-report.out");
    std::fs::copy(&b, &renamed).unwrap();
    for args in [
        vec![dir.path().to_str().unwrap().to_owned()],
        vec![glob],
        vec![
            a.to_str().unwrap().to_owned(),
            renamed.to_str().unwrap().to_owned(),
        ],
    ] {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.push(&capture);
        let run = fleet(&all);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stdout);
        assert!(
            run.stdout.contains("4 direction(s) tested, 4 failed"),
            "{args:?}: {}",
            run.stdout
        );
        assert!(
            !run.stdout.contains("UNREADABLE"),
            "{args:?}: {}",
            run.stdout
        );
    }
}

/// Item 4: host names from report files are shown escaped, in the human report and the CSV.
#[test]
fn fleet_shows_report_host_names_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    write_json(&a, &two_node_report(FORGED, "node-b", 1, false));
    write_json(&b, &two_node_report("node-b", "node-c", 1, true));
    let c = dir.path().join("c.json");
    write_json(&c, &two_node_report("node-c", FORGED, 1, false));
    let (a, b, c) = (
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        c.to_str().unwrap(),
    );
    let run = fleet(&[a, b, c]);
    assert_eq!(run.code, 1);
    shown_escaped(&run.stdout);
    let run = fleet(&[a, b, c, "--format", "csv"]);
    assert_eq!(run.code, 1);
    shown_escaped(&run.stdout);
}

/// Item 4, every path: a capture whose host name and GPU model are the forged line never
/// reaches the terminal raw from any command that reads it (the report, -v, the matrix, the
/// fleet view in human and CSV, the NCCL settings, the fix script); the host name is refused
/// as a name (`(hostname unknown)`), the model is shown escaped. Before, `topo` printed the
/// model raw.
#[test]
fn a_forged_name_in_a_capture_is_shown_escaped_on_every_path() {
    let (_dir, root) = fixture_copy("healthy-8gpu-roce");
    std::fs::write(root.join("proc/sys/kernel/hostname"), format!("{FORGED}\n")).unwrap();
    let info = root.join("proc/driver/nvidia/gpus/0000:18:00.0/information");
    let text = std::fs::read_to_string(&info).unwrap();
    let model = text.lines().find(|l| l.starts_with("Model:")).unwrap();
    // One line (the driver's file is read line by line): it retitles the window, clears the
    // screen and reverses what follows.
    const MODEL: &str = "H100\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}";
    std::fs::write(&info, text.replace(model, &format!("Model: \t\t {MODEL}"))).unwrap();
    let r = root.to_str().unwrap();
    for (args, shows_it) in [
        (vec!["--root", r, "check"], false),
        (vec!["--root", r, "check", "-v"], false),
        (vec!["--root", r, "topo", "--no-gpu-probe"], true),
        (vec!["--root", r, "nccl"], false),
        (vec!["--root", r, "fix"], false),
        (vec!["fleet", r], false),
        (vec!["fleet", r, "--format", "csv"], false),
    ] {
        let run = bounded(&args, &[], Duration::from_secs(20));
        assert!(run.code <= 1, "{args:?}: {}", run.stderr);
        never_raw(&run.stdout);
        never_raw(&run.stderr);
        if shows_it {
            assert!(
                run.stdout
                    .contains("H100\\u{1b}]0;pwned\\u{7}\\u{1b}[2J\\u{202e}"),
                "{args:?}: {}",
                run.stdout
            );
        }
    }
}

/// Nothing of the forged string raw: no ESC, no override, no forged line.
fn never_raw(text: &str) {
    assert!(
        !text.contains(['\u{1b}', '\u{202e}']),
        "raw escape or override in:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with("READY: every rail")),
        "a forged line in:\n{text}"
    );
}
