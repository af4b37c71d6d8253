//! Bad input and output (issue 14, item 5, from a fuzz run): standard output that is full,
//! closed or has no reader, standard error that is full, `--output` paths that are devices,
//! links or FIFOs, `--config` files that never end, out-of-range numbers, and control bytes
//! in a capture's values reaching a CSV.
#![allow(clippy::disallowed_methods)] // tests build their own files, not a node's

use crate::common::*;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// The real 2x H200 capture.
fn h200() -> &'static str {
    fixture("h200x2-vm")
}

/// Every command that writes to standard output, with the exit code it has on `ROOT`.
fn commands() -> Vec<(Vec<&'static str>, i32)> {
    vec![
        (vec!["--root", h200(), "check"], 1),
        (vec!["--root", h200(), "check", "--format", "json"], 1),
        (vec!["--root", h200(), "topo", "--no-gpu-probe"], 0),
        (vec!["--root", h200(), "fix"], 0),
        (vec!["--root", h200(), "nccl"], 0),
        (
            vec![
                "nccl",
                "explain",
                "fixtures/nccl-logs/nv_peer_memory-56-distance.log",
            ],
            1,
        ),
        (vec!["fleet", h200()], 1),
        (vec!["list", "--codes"], 0),
        (vec!["explain", "acs"], 0),
        (vec!["--help"], 0),
        (vec!["check", "--help"], 0),
        (vec!["--version"], 0),
        (vec!["completions", "bash"], 0),
        // The hidden children print JSON for their parent.
        (vec!["probe-gpu"], 0),
        (vec!["gdr-pair", "--spec", "{}"], 0),
    ]
}

/// The write end of a pipe whose read end is already closed: every write gets EPIPE, with no
/// race against a reader that has yet to exit. A FIFO opened read-write (so that opening it
/// does not wait), then for writing, then the read-write end closed.
fn pipe_without_reader(dir: &Path) -> File {
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let both = File::options().read(true).write(true).open(&fifo).unwrap();
    let writer = File::options().write(true).open(&fifo).unwrap();
    drop(both);
    writer
}

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(status.success());
}

fn no_panic(o: &Output, what: &str) {
    let err = stderr(o);
    assert!(!err.contains("panicked"), "{what}: {err}");
    assert_ne!(o.status.code(), Some(101), "{what}: {err}");
}

#[test]
fn a_full_standard_output_is_an_error_that_never_hides_not_ready() {
    for (args, rc) in commands() {
        let full = File::options().write(true).open("/dev/full").unwrap();
        let o = Gdrdoctor::new().args(&args).stdout(full).output();
        let what = args.join(" ");
        no_panic(&o, &what);
        // A lost report is exit 2, except where the run found the node not ready: like a
        // report file that cannot be written, it never hides exit 1.
        assert_eq!(o.status.code(), Some(if rc == 1 { 1 } else { 2 }), "{what}");
        assert!(
            stderr(&o).contains(
                "gdrdoctor: error: cannot write to standard output: No space left on device"
            ),
            "{what}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_reader_that_went_away_ends_the_output_quietly_with_the_run_s_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    for (args, rc) in commands() {
        let o = Gdrdoctor::new()
            .args(&args)
            .stdout(pipe_without_reader(dir.path()))
            .output();
        let what = args.join(" ");
        no_panic(&o, &what);
        assert_eq!(o.status.code(), Some(rc), "{what}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{what}");
        std::fs::remove_file(dir.path().join("fifo")).unwrap();
    }
    // The same through a shell pipeline, as people write it.
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#""$0" --root "$1" check | head -c 0"#)
        .arg(env!("CARGO_BIN_EXE_gdrdoctor"))
        .arg(h200())
        .current_dir(home())
        .output()
        .unwrap();
    no_panic(&o, "check | head -c 0");
}

#[test]
fn a_closed_standard_output_is_an_error() {
    for (args, rc) in commands() {
        // The Rust runtime puts /dev/null on a closed descriptor 1; gdrdoctor notices anyway.
        let o = Command::new("sh")
            .arg("-c")
            .arg(r#"exec >&-; exec "$0" "$@""#)
            .arg(env!("CARGO_BIN_EXE_gdrdoctor"))
            .args(&args)
            .current_dir(home())
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        let what = args.join(" ");
        no_panic(&o, &what);
        assert_eq!(o.status.code(), Some(if rc == 1 { 1 } else { 2 }), "{what}");
        assert!(
            stderr(&o).contains("cannot write to standard output: Bad file descriptor"),
            "{what}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_full_standard_error_never_panics() {
    let full = || Stdio::from(File::options().write(true).open("/dev/full").unwrap());
    for (args, rc) in [
        (vec!["--root", "/nonexistent-gdrdoctor-root", "check"], 2),
        (vec!["explain", "no-such-check"], 2),
        (vec!["--root", h200(), "check", "--format", "reason"], 1),
        (vec!["bogus-subcommand"], 2),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_gdrdoctor"))
            .args(&args)
            .current_dir(home())
            .stdout(Stdio::null())
            .stderr(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(rc), "{}", args.join(" "));
    }
}

/// gdrdoctor with `args`, killed if it runs past `secs` (a wait on a FIFO must fail the test,
/// not hang it).
fn run_within<A: AsRef<std::ffi::OsStr>>(secs: u64, args: impl IntoIterator<Item = A>) -> Output {
    Gdrdoctor::new()
        .args(args)
        .wall(std::time::Duration::from_secs(secs))
        .output()
}

fn check_with_output(path: &Path, spec: &str) -> Output {
    let spec = format!("{spec}:{}", path.display());
    run_within(
        20,
        [
            "--root",
            fixture("healthy-8gpu-roce"),
            "check",
            "--format",
            "reason",
            "--output",
            &spec,
        ],
    )
}

fn is_link(p: &Path) -> bool {
    p.symlink_metadata().unwrap().file_type().is_symlink()
}

// No test here names /dev/full or /dev/stdout itself as the output: the code before this fix
// would have replaced them (the tests may run as root). Links to them in a scratch directory
// are enough, and harmless to the machine either way.
#[test]
fn output_replaces_only_regular_files_and_writes_devices_in_place() {
    use std::os::unix::fs::{FileTypeExt as _, symlink};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // A link to a device: written in place, so /dev/full's ENOSPC is the error, named with
    // the path; the ready node's run exits 2; the link is still a link.
    symlink("/dev/full", d.join("full")).unwrap();
    let o = check_with_output(&d.join("full"), "json");
    no_panic(&o, "full");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!(
        "cannot write {}: No space left on device",
        d.join("full").display()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    assert!(is_link(&d.join("full")));

    // A link to /dev/stdout, a pipe: the report goes into this run's standard output.
    symlink("/dev/stdout", d.join("stdout")).unwrap();
    let spec = format!("reason:{}", d.join("stdout").display());
    let o = gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "check",
        "--format",
        "reason",
        "--output",
        &spec,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "gdrdoctor: ready\ngdrdoctor: ready\n");
    assert!(is_link(&d.join("stdout")));

    // A FIFO that no process reads: an error at once, never a wait; still a FIFO.
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let o = check_with_output(&fifo, "reason");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "cannot write {}: a FIFO that no process is reading",
            fifo.display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(fifo.metadata().unwrap().file_type().is_fifo());

    // A FIFO with a reader gets the report.
    let mut reader = reader_of(&fifo);
    let o = check_with_output(&fifo, "reason");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read_all(&mut reader), "gdrdoctor: ready\n");
    assert!(fifo.metadata().unwrap().file_type().is_fifo());

    // A link to a regular file, and a link to nothing: the file where the link ends is
    // written (created), and the link stays.
    std::fs::write(d.join("real.json"), "old").unwrap();
    symlink("real.json", d.join("to-file")).unwrap();
    symlink("new.json", d.join("to-nothing")).unwrap();
    for link in ["to-file", "to-nothing"] {
        let o = check_with_output(&d.join(link), "json");
        assert_eq!(o.status.code(), Some(0), "{link}: {}", stderr(&o));
        assert!(is_link(&d.join(link)), "{link}");
    }
    for file in ["real.json", "new.json"] {
        let text = std::fs::read_to_string(d.join(file)).unwrap();
        assert!(text.starts_with('{'), "{file}: {text}");
    }

    // A directory: an error naming it.
    std::fs::create_dir(d.join("dir")).unwrap();
    let o = check_with_output(&d.join("dir"), "json");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(&format!(
            "cannot write {}: Is a directory",
            d.join("dir").display()
        )),
        "{}",
        stderr(&o)
    );

    // --textfile-dir: DIR/gdrdoctor.prom, the same rules.
    let textfile = d.join("textfile");
    std::fs::create_dir(&textfile).unwrap();
    symlink("/dev/full", textfile.join("gdrdoctor.prom")).unwrap();
    let o = run_within(
        20,
        [
            "--root".as_ref(),
            fixture("healthy-8gpu-roce").as_ref(),
            "check".as_ref(),
            "--textfile-dir".as_ref(),
            textfile.as_os_str(),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("gdrdoctor.prom: No space left on device"));
    assert!(is_link(&textfile.join("gdrdoctor.prom")));
}

/// A reader of `fifo` that is there before any writer: opened non-blocking, which needs no
/// writer, then read after the writer is gone.
fn reader_of(fifo: &Path) -> File {
    use std::os::unix::fs::OpenOptionsExt as _;
    File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo)
        .unwrap()
}

fn read_all(reader: &mut File) -> String {
    use std::io::Read as _;
    let mut text = String::new();
    reader.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn fix_o_writes_a_fifo_in_place_and_never_waits_or_chmods_it() {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fix.fifo");
    mkfifo(&fifo);
    let mode = || fifo.metadata().unwrap().permissions().mode() & 0o777;
    let before = mode();
    let run = |p: &Path| {
        Gdrdoctor::new()
            .root("acs-redirect-on-path")
            .args(["fix", "-o"])
            .arg(p)
            .wall(std::time::Duration::from_secs(20))
            .output()
    };
    // No reader: an error at once (before, the open waited for ever).
    let o = run(&fifo);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a FIFO that no process is reading"));
    // A reader: it gets the script, and the FIFO keeps its mode (before: chmod 0755).
    let mut reader = reader_of(&fifo);
    let o = run(&fifo);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(read_all(&mut reader).starts_with("#!/"));
    assert!(fifo.metadata().unwrap().file_type().is_fifo());
    assert_eq!(mode(), before);
    // A regular file is still replaced whole, mode 0755 (tests/fixscript.rs has the rest).
    let file = dir.path().join("fix.sh");
    std::fs::write(&file, "old").unwrap();
    let o = run(&file);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(file.metadata().unwrap().permissions().mode() & 0o777, 0o755);
}

fn check_with_config(config: &Path) -> Output {
    Gdrdoctor::new()
        .args(["--root", h200(), "check", "--format", "reason", "--config"])
        .arg(config)
        .wall(std::time::Duration::from_secs(20))
        .output()
}

#[test]
fn config_must_be_a_regular_file_of_at_most_one_mib() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A FIFO: refused at once (before, the run waited for a writer, for ever).
    let fifo = d.join("config.fifo");
    mkfifo(&fifo);
    let o = check_with_config(&fifo);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!("{}: cannot read config: a FIFO", fifo.display());
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    // /dev/zero never ends: refused, not read. Under a 1 GiB address-space limit, so that the
    // code before this fix (which read it into memory until none was left) fails the test by
    // running out of it instead of taking the machine's memory.
    let ran = Gdrdoctor::new()
        .args([
            "--root",
            h200(),
            "check",
            "--no-gpu-probe",
            "--config",
            "/dev/zero",
        ])
        .within(std::time::Duration::from_secs(20), 1024)
        .address_space(1 << 30)
        .run();
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("/dev/zero: cannot read config: a character device"),
        "{}",
        ran.stderr
    );
    // Over 1 MiB, even of comments: refused with its size.
    let big = d.join("big.yaml");
    let mut text = "severity:\n  rdma-no-device: warn\n".to_owned();
    while text.len() <= 2 << 20 {
        text.push_str("# a comment line, repeated to make the file large\n");
    }
    std::fs::write(&big, &text).unwrap();
    let o = check_with_config(&big);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let want = format!(
        "{}: cannot read config: {} bytes; a policy file never needs more than 1 MiB",
        big.display(),
        text.len()
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    // The same policy in a small file still works (rdma-no-device, warned down: exit 0), and
    // /dev/null still means "no policy".
    let small = d.join("small.yaml");
    std::fs::write(&small, "severity:\n  rdma-no-device: warn\n").unwrap();
    let o = check_with_config(&small);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = check_with_config(Path::new("/dev/null"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "gdrdoctor: provider(rdma-no-device)\n");
}

#[test]
fn nfd_expiry_is_bounded_and_lies_in_the_future() {
    let nfd = |seconds: &str| {
        gdrdoctor(&[
            "--root",
            h200(),
            "check",
            "--format",
            "nfd",
            "--nfd-expiry",
            seconds,
        ])
    };
    // 2^64-1 wrapped to one second before the run (or panicked, in a debug build).
    for bad in ["18446744073709551615", "31536001", "0", "-1"] {
        let o = nfd(bad);
        no_panic(&o, bad);
        assert_eq!(o.status.code(), Some(2), "{bad}");
        assert_eq!(stdout(&o), "", "{bad}");
    }
    let unix = |plus: u64| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        gdrdoctor::parse::time::rfc3339(now + plus)
    };
    for (seconds, plus) in [("3600", 3600), ("31536000", 31_536_000)] {
        let before = unix(plus);
        let o = nfd(seconds);
        let after = unix(plus);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let text = stdout(&o);
        let when = text
            .lines()
            .find_map(|l| l.strip_prefix("# +expiry-time="))
            .unwrap_or_else(|| panic!("no expiry:\n{text}"));
        // RFC 3339 in UTC, fixed width: the strings order as the times do.
        assert!(
            before.as_str() <= when && when <= after.as_str(),
            "{before} <= {when} <= {after}"
        );
    }
}

#[test]
fn fleet_csv_escapes_control_characters_from_a_capture() {
    // A copy of a capture whose NIC firmware version and directory name carry escape
    // sequences (clear screen, red), as a hostile or broken node could.
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("node-\u{1b}[2J");
    copy_to("healthy-4gpu-ib-peermem", &capture);
    let fw = capture.join("sys/class/infiniband/mlx5_0/fw_ver");
    std::fs::write(&fw, "20.39.1002\u{1b}[31m\u{7}\n").unwrap();
    let o = gdrdoctor(&["fleet", "--format", "csv", capture.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        !text.bytes().any(|b| b < 0x20 && b != b'\n'),
        "a control byte in the CSV:\n{text:?}"
    );
    // Shown as the human report shows them.
    assert!(text.contains("20.39.1002\\u{1b}[31m\\u{7}"), "{text}");
    assert!(text.contains("node-\\u{1b}[2J"), "{text}");
    assert_eq!(text.lines().count(), 2, "{text}");
}
