//! Every finding code a check can report (`gdrdoctor list --codes`) is shown by a test that
//! runs anywhere, or is listed below with the live script that shows it, or with why nothing
//! does yet. A new code with none of these fails here: a code nobody has seen is a message
//! nobody has read.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use std::collections::BTreeSet;

/// Codes only a live node shows (a real RDMA device, its verbs node and provider), with the
/// script that shows them; each script names its code.
const LIVE_ONLY: &[(&str, &str)] = &[
    // rxe0's /dev/infiniband/uverbs0, opened in the guest.
    ("uverbs-ok", "tests/lab/scenarios/switch-pt.sh"),
];

/// Codes no test shows yet, and why; each is a gap to close, not a place to park a new code.
const NOT_COVERED: &[(&str, &str)] = &[
    (
        "rdma-provider-missing",
        "needs an RDMA device whose driver has no libibverbs provider: a lab scenario that \
         removes rxe's provider from the guest would show it",
    ),
    (
        "memlock-unknown",
        "needs a live run that cannot read its own locked-memory limit (no /proc)",
    ),
    (
        "nccl-gdr-unknown",
        "needs an NCCL log that names the GPUs and says nothing of GDR for them; the stand-in \
         libnccl always says it (its GDR lines, its channels, its topology dump)",
    ),
];

/// Every code `gdrdoctor list --codes` prints, in its order.
fn all_codes() -> Vec<String> {
    let out = gdrdoctor(&["list", "--codes"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .map(|l| l.split_whitespace().next().unwrap().to_owned())
        .collect()
}

/// `code` stands in `text` as a whole code: not as part of a longer one (`gpu-none` is not in
/// `gpu-none-x`).
fn names(text: &str, code: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-';
    text.match_indices(code)
        .any(|(i, _)| !text[..i].ends_with(part) && !text[i + code.len()..].starts_with(part))
}

/// What the tests that run anywhere show: every snapshot (each fixture's reports among them),
/// and the codes the test modules assert (`has(&r, "gpu", "gpu-runtime-error", "fail")`).
fn shown_offline() -> String {
    let mut text = String::new();
    let read_dir = |dir: &str| {
        let mut files: Vec<_> = std::fs::read_dir(crate_dir().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
    };
    for snap in read_dir("tests/snapshots") {
        text.push_str(&std::fs::read_to_string(snap).unwrap());
    }
    for module in read_dir("tests") {
        let name = module.file_name().unwrap().to_str().unwrap().to_owned();
        if name.ends_with(".rs") && name != "codes.rs" {
            // Code, not comments: a code a comment names is not a test of it.
            for line in std::fs::read_to_string(&module).unwrap().lines() {
                if !line.trim_start().starts_with("//") {
                    text.push_str(line);
                    text.push('\n');
                }
            }
        }
    }
    text
}

#[test]
fn every_code_is_shown_by_a_test_or_listed_live_only() {
    let codes = all_codes();
    assert!(codes.len() > 100, "{codes:?}");
    let known: BTreeSet<&str> = codes.iter().map(String::as_str).collect();
    let offline = shown_offline();
    let mut wrong = Vec::new();
    for (code, script) in LIVE_ONLY {
        let text = std::fs::read_to_string(crate_dir().join(script))
            .unwrap_or_else(|e| panic!("{script}: {e}"));
        if !names(&text, code) {
            wrong.push(format!("{code}: {script} does not name it"));
        }
    }
    let listed: Vec<&str> = LIVE_ONLY
        .iter()
        .chain(NOT_COVERED)
        .map(|(c, _)| *c)
        .collect();
    for code in &listed {
        if !known.contains(code) {
            wrong.push(format!("{code}: listed here, but no check reports it"));
        } else if names(&offline, code) {
            wrong.push(format!(
                "{code}: a test that runs anywhere shows it now; take it off the lists"
            ));
        }
    }
    for code in &codes {
        if !names(&offline, code) && !listed.contains(&code.as_str()) {
            wrong.push(format!(
                "{code}: no snapshot or test shows it; add a fixture or a case that does, or \
                 list it in tests/codes.rs with the live script that shows it"
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}
