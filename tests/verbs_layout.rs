//! The verbs structures in src/ffi/ibverbs/ against the real <infiniband/verbs.h>, and libefa's
//! in src/ffi/efa.rs against the real <infiniband/efadv.h>: a C program per header
//! (tests/stubs/verbs_layout.c, tests/stubs/efa_layout.c) prints every size and offset the Rust
//! side relies on, compiled against the installed header (libibverbs-dev, which ships both;
//! tests/all.sh installs it).
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::crate_dir;

/// Compiles `tests/stubs/<program>.c`, runs it, and compares its `name value` lines with `rust`.
fn compare(header: &str, program: &str, rust: Vec<(&'static str, usize)>) {
    assert!(
        std::path::Path::new(header).exists(),
        "this test needs rdma-core's header {header}: apt-get install libibverbs-dev"
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join(program);
    let status = std::process::Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(crate_dir().join(format!("tests/stubs/{program}.c")))
        .status()
        .expect("cc");
    assert!(status.success());
    let out = std::process::Command::new(&exe).output().unwrap();
    let c: std::collections::BTreeMap<String, usize> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect();
    assert_eq!(
        rust.len(),
        c.len(),
        "the C program and layout() list different fields"
    );
    let mut wrong = Vec::new();
    for (name, value) in rust {
        match c.get(name) {
            Some(v) if *v == value => {}
            other => wrong.push(format!("{name}: Rust {value}, C {other:?}")),
        }
    }
    assert!(
        wrong.is_empty(),
        "layouts differ from {header}:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn layouts_match_the_header() {
    compare(
        "/usr/include/infiniband/verbs.h",
        "verbs_layout",
        gdrdoctor::ffi::ibverbs::layout(),
    );
}

#[test]
fn efa_layouts_match_the_header() {
    compare(
        "/usr/include/infiniband/efadv.h",
        "efa_layout",
        gdrdoctor::ffi::efa::layout(),
    );
}
