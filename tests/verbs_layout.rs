//! The verbs structures in src/ffi/ibverbs.rs against the real <infiniband/verbs.h>: a C program
//! (tests/stubs/verbs_layout.c) prints every size and offset the Rust side relies on, compiled
//! against the installed header (libibverbs-dev; tests/all.sh installs it).
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::crate_dir;

#[test]
fn layouts_match_the_header() {
    assert!(
        std::path::Path::new("/usr/include/infiniband/verbs.h").exists(),
        "this test needs rdma-core's header: apt-get install libibverbs-dev"
    );
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("verbs_layout");
    let status = std::process::Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(crate_dir().join("tests/stubs/verbs_layout.c"))
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
    let rust = gdrdoctor::ffi::ibverbs::layout();
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
        "layouts differ from verbs.h:\n{}",
        wrong.join("\n")
    );
}
