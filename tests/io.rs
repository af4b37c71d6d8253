//! Bad input and output (issue 14, item 5, from a fuzz run): standard output that is full,
//! closed or has no reader, standard error that is full, `--output` paths that are devices,
//! links or FIFOs, `--config` files that never end, out-of-range numbers, and control bytes
//! in a capture's values reaching a CSV.
#![allow(clippy::disallowed_methods)] // tests build their own files, not a node's

mod common;
use common::*;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Output, Stdio};

const ROOT: &str = "fixtures/h200x2-vm";

/// Every command that writes to standard output, with the exit code it has on `ROOT`.
fn commands() -> Vec<(Vec<&'static str>, i32)> {
    vec![
        (vec!["--root", ROOT, "check"], 1),
        (vec!["--root", ROOT, "check", "--format", "json"], 1),
        (vec!["--root", ROOT, "topo", "--no-gpu-probe"], 0),
        (vec!["--root", ROOT, "fix"], 0),
        (vec!["--root", ROOT, "nccl"], 0),
        (vec!["fleet", ROOT], 1),
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

/// gdrdoctor with `args`, its standard output `out`, from the crate root.
fn run_with_stdout(args: &[&str], out: Stdio) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gdrdoctor"))
        .args(args)
        .current_dir(crate_dir())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(Stdio::piped())
        .output()
        .expect("run gdrdoctor")
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
        let o = run_with_stdout(&args, full.into());
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
        let o = run_with_stdout(&args, pipe_without_reader(dir.path()).into());
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
        .arg(ROOT)
        .current_dir(crate_dir())
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
            .current_dir(crate_dir())
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
        (vec!["--root", ROOT, "check", "--format", "reason"], 1),
        (vec!["bogus-subcommand"], 2),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_gdrdoctor"))
            .args(&args)
            .current_dir(crate_dir())
            .stdout(Stdio::null())
            .stderr(full())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(rc), "{}", args.join(" "));
    }
}
