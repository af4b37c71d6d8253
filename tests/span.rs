//! What a run judged over, said in the human report (issue 40: on a 2x H200, `--sample` and
//! `--baseline` left the report byte-identical to a plain check).
#![allow(clippy::disallowed_methods)] // tests build trees, they do not read a node

use crate::common::*;

/// A captured window (the fixture's recorded second reading, 5.0 s after the first) opens the
/// report with its span and what grew; a capture without one says nothing of a window.
#[test]
fn a_window_states_its_span() {
    let out = stdout(&gdrdoctor(&[
        "--root",
        fixture("link-symbol-errors"),
        "check",
    ]));
    let second = out.lines().nth(2).unwrap_or_default();
    assert_eq!(
        second, "counters judged over a 5.0 s window (--sample: read twice): 4 counters grew",
        "{out}"
    );
    let plain = stdout(&gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "check",
    ]));
    assert!(!plain.contains("judged over"), "{plain}");
}

/// `--baseline` on the live node: the first run says it judged one reading, the next how long
/// ago the last run read the counters and the kernel log.
#[test]
fn a_baseline_states_its_span() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("baseline.tar.gz");
    let run = || {
        stdout(&gdrdoctor(&[
            "check",
            "--select",
            "kernel-log",
            "--baseline",
            file.to_str().unwrap(),
        ]))
    };
    let first = run();
    assert!(
        first.contains("no baseline yet (the first run writes it): one reading judged")
            && first.contains("--baseline: "),
        "{first}"
    );
    let second = run();
    let line = second
        .lines()
        .find(|l| l.starts_with("counters and the kernel log judged since the last run, "))
        .unwrap_or_else(|| panic!("{second}"));
    assert!(
        line.contains(" s ago (--baseline ") && line.contains("baseline.tar.gz)"),
        "{line}"
    );
}
