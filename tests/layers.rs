//! The floors of src/ and who may import whom (STYLE.md): each top-level module or folder of
//! src/ may import only the `crate::` modules listed for it here, and every module it lists
//! stands on a lower floor. So no import runs back up and no circle can form, and the rule is
//! kept by this test, not by memory.
//!
//! What counts as an import: every `crate::<module>` in the code of a file (comments and string
//! literals do not count), which covers `use crate::a::b;`, the grouped `use crate::{a, b::c};`
//! and inline paths such as `crate::a::f()`. src/main.rs is the binary: it reaches the library as
//! `gdrdoctor::<module>`.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::crate_dir;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Bottom to top: (module, floor, the `crate::` modules it may import). A module always may
/// import its own submodules. A new module of src/ needs a row; a new arrow needs a row that
/// allows it, on a lower floor.
const FLOORS: &[(&str, u8, &[&str])] = &[
    // The system calls std lacks, the text escaping, the clocks: they import nothing.
    ("sys", 1, &[]),
    ("sanitize", 1, &[]),
    ("deadline", 1, &[]),
    ("trace", 1, &[]),
    // Pure parsers, and the I/O plumbing on the system calls.
    ("parse", 2, &["sanitize"]),
    ("archive", 2, &["sys", "sanitize", "deadline"]),
    ("input", 2, &["sys", "sanitize"]),
    ("output", 2, &["sys", "sanitize"]),
    ("stdio", 2, &["sys", "sanitize"]),
    ("child", 2, &["sys", "sanitize", "deadline", "trace"]),
    // Status, Finding, Level, Gid and every result type the checks read.
    ("model", 3, &["parse", "sanitize"]),
    // The only file access: the live system or a capture.
    (
        "root",
        4,
        &["model", "parse", "archive", "sys", "sanitize", "deadline"],
    ),
    ("config", 5, &["model", "parse", "input", "sanitize"]),
    // The file edits of persistent fixes, through a root.
    ("edit", 5, &["model", "root"]),
    (
        "capture",
        5,
        &["root", "archive", "model", "parse", "sanitize", "sys"],
    ),
    // Run-time loaded libraries: they build model types, never read the inventory.
    (
        "ffi",
        6,
        &[
            "model", "parse", "root", "sanitize", "sys", "deadline", "trace",
        ],
    ),
    // Facts only: never a run, so no ffi, gdr or probe.
    (
        "inventory",
        6,
        &[
            "config", "model", "parse", "root", "sanitize", "input", "deadline", "trace",
        ],
    ),
    // How far a NIC is from a GPU, from the facts.
    ("placement", 7, &["inventory", "config", "model", "parse"]),
    // The write test on one pair and the two-node wire: primitives on the libraries.
    (
        "gdr",
        7,
        &[
            "ffi", "model", "parse", "input", "deadline", "sys", "sanitize", "trace",
        ],
    ),
    // NCCL's decision model, parameters and comparison: between the placement and the runs.
    (
        "nccl",
        8,
        &[
            "config",
            "inventory",
            "model",
            "parse",
            "placement",
            "sanitize",
        ],
    ),
    // The job journal: NCCL's own decisions per job, from the logs the TaskProlog kept.
    (
        "jobs",
        9,
        &["input", "model", "nccl", "output", "sanitize", "sys"],
    ),
    // The runs above the facts: GPU session and worker, access probe, write test, NCCL's run,
    // two-node session.
    (
        "probe",
        9,
        &[
            "capture",
            "child",
            "config",
            "deadline",
            "ffi",
            "gdr",
            "input",
            "inventory",
            "model",
            "nccl",
            "parse",
            "placement",
            "root",
            "sanitize",
            "sys",
            "trace",
        ],
    ),
    // The checks read the runs' results as model types from their context, never the probe.
    (
        "checks",
        10,
        &[
            "config",
            "gdr",
            "inventory",
            "model",
            "nccl",
            "parse",
            "placement",
            "root",
            "sanitize",
        ],
    ),
    (
        "fixscript",
        11,
        &[
            "checks",
            "config",
            "edit",
            "inventory",
            "model",
            "parse",
            "root",
            "sanitize",
            "output",
        ],
    ),
    // One file per format, over the model's types: never a run.
    (
        "report",
        12,
        &[
            "checks",
            "config",
            "fixscript",
            "gdr",
            "inventory",
            "model",
            "nccl",
            "parse",
            "placement",
            "sanitize",
        ],
    ),
    (
        "fleet",
        13,
        &[
            "archive",
            "checks",
            "config",
            "deadline",
            "gdr",
            "input",
            "inventory",
            "model",
            "nccl",
            "output",
            "parse",
            "placement",
            "probe",
            "report",
            "root",
            "sanitize",
            "sys",
            "trace",
        ],
    ),
    // One file per subcommand: the wiring, so everything below.
    (
        "commands",
        14,
        &[
            "archive",
            "capture",
            "checks",
            "child",
            "config",
            "deadline",
            "edit",
            "ffi",
            "fixscript",
            "fleet",
            "jobs",
            "gdr",
            "input",
            "inventory",
            "model",
            "nccl",
            "output",
            "parse",
            "placement",
            "probe",
            "report",
            "root",
            "sanitize",
            "stdio",
            "sys",
            "trace",
        ],
    ),
    // clap only: the subcommands, and the report formats it offers as values.
    ("cli", 15, &["commands", "report"]),
    ("main", 16, &["cli", "sanitize", "stdio", "trace"]),
];

/// What any module's unit tests may import: the fixtures they share with these tests
/// (src/lib.rs's `test_fixtures`, tests/common/fixtures.rs).
const EVERYWHERE: &[&str] = &["test_fixtures"];

/// `text` with every comment and the contents of every string and char literal blanked to
/// spaces, line breaks kept (so that line numbers stay true).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out: Vec<char> = b.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        let next = b.get(i + 1).copied();
        if b[i] == '/' && next == Some('/') {
            let end = (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len());
            blank(&mut out, i, end);
            i = end;
        } else if b[i] == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            blank(&mut out, i, j);
            i = j;
        } else if b[i] == '"' {
            // A raw string: r"..", r#".."#, br#".."#.
            let hashes = (0..i).rev().take_while(|&j| b[j] == '#').count();
            let r = i.checked_sub(hashes + 1);
            let raw = r.is_some_and(|r| {
                b[r] == 'r'
                    && (r == 0
                        || !ident(b[r - 1])
                        || (b[r - 1] == 'b' && (r == 1 || !ident(b[r - 2]))))
            });
            let mut j = i + 1;
            if raw {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
            } else {
                while j < b.len() && b[j] != '"' {
                    j += if b[j] == '\\' { 2 } else { 1 };
                }
            }
            blank(&mut out, i + 1, j.min(b.len()));
            i = j + 1;
        } else if b[i] == '\'' {
            // A char literal ('x', '\n', '\u{1F600}'), or a lifetime ('a), which is code.
            let end = if next == Some('\\') {
                (i + 3..b.len()).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    blank(&mut out, i + 1, end);
                    i = end + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// The modules `code` (see [`code_only`]) imports through `root::` (`crate` or `gdrdoctor`):
/// (line, module), for `root::a`, `root::{a, b::c}` and `$crate::a`.
fn imports(code: &str, root: &str) -> Vec<(usize, String)> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let at = |i: usize| code[..i].matches('\n').count() + 1;
    let lead = |s: &str| -> String { s.chars().take_while(|&c| ident(c)).collect() };
    let prefix = format!("{root}::");
    let mut found = Vec::new();
    for (i, _) in code.match_indices(&prefix) {
        if code[..i].ends_with(ident) {
            continue; // `mycrate::`, not `crate::`
        }
        let rest = &code[i + prefix.len()..];
        let skipped = rest.len() - rest.trim_start().len();
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            // The group's items at its top level: `a`, `b::{c, d}`, `self`.
            let mut depth = 0;
            let mut start = 0;
            let body_at = i + prefix.len() + skipped + 1;
            for (j, c) in group.char_indices() {
                let item_end = match c {
                    '{' => {
                        depth += 1;
                        false
                    }
                    '}' if depth == 0 => true,
                    '}' => {
                        depth -= 1;
                        false
                    }
                    ',' => depth == 0,
                    _ => false,
                };
                if item_end {
                    let item = &group[start..j];
                    let pad = item.len() - item.trim_start().len();
                    let name = lead(item.trim_start());
                    if !name.is_empty() && name != "self" {
                        found.push((at(body_at + start + pad), name));
                    }
                    start = j + 1;
                    if c == '}' {
                        break;
                    }
                }
            }
        } else {
            let name = lead(rest);
            if !name.is_empty() {
                found.push((at(i + prefix.len() + skipped), name));
            }
        }
    }
    found
}

/// Every .rs file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|x| x == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// The imports of src/ that no row of [`FLOORS`] allows: "file:line: crate::x (module may
/// import: ...)", and the files of src/ that belong to no row.
fn wrong_imports(src: &Path) -> Vec<String> {
    let rows: BTreeMap<&str, &[&str]> = FLOORS.iter().map(|(m, _, may)| (*m, *may)).collect();
    let mut wrong = Vec::new();
    for file in rust_files(src) {
        let rel = file.strip_prefix(src).unwrap();
        let first = rel.iter().next().unwrap().to_str().unwrap();
        let module = first.strip_suffix(".rs").unwrap_or(first);
        if module == "lib" {
            continue; // declares the modules; imports none
        }
        let shown = Path::new("src").join(rel);
        let Some(may) = rows.get(module) else {
            wrong.push(format!(
                "{}: module `{module}` stands on no floor: give it a row in tests/layers.rs",
                shown.display()
            ));
            continue;
        };
        let root = if module == "main" {
            "gdrdoctor"
        } else {
            "crate"
        };
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for (line, import) in imports(&code, root) {
            if import != module
                && !may.contains(&import.as_str())
                && !EVERYWHERE.contains(&&*import)
            {
                wrong.push(format!(
                    "{}:{line}: {root}::{import} ({module} may import: {})",
                    shown.display(),
                    may.join(", ")
                ));
            }
        }
    }
    wrong
}

#[test]
fn every_import_goes_down_a_floor() {
    let wrong = wrong_imports(&crate_dir().join("src"));
    assert!(
        wrong.is_empty(),
        "imports the floors do not allow (STYLE.md; the table is tests/layers.rs):\n{}",
        wrong.join("\n")
    );
}

/// The table itself: every module it allows stands on a lower floor, so that no allowed arrow
/// runs up or sideways and no circle can form.
#[test]
fn the_floors_run_one_way() {
    let floor: BTreeMap<&str, u8> = FLOORS.iter().map(|(m, f, _)| (*m, *f)).collect();
    assert_eq!(floor.len(), FLOORS.len(), "a module with two rows");
    let mut wrong = Vec::new();
    for (module, f, may) in FLOORS {
        for m in *may {
            match floor.get(m) {
                None => wrong.push(format!("{module} may import {m}, which has no row")),
                Some(g) if g >= f => wrong.push(format!(
                    "{module} (floor {f}) may import {m} (floor {g}): not below it"
                )),
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

/// What the parser counts: grouped and nested uses, inline paths, `$crate`; not comments,
/// strings, raw strings or other crates' `crate`-suffixed names.
#[test]
fn imports_are_read_in_every_form() {
    let text = r####"
use crate::a::b;
use crate::{c, d::e, self, f::{g, h}};
pub(crate) use crate::
    i;
fn x() { crate::j::k(); $crate::l::m!(); mycrate::n::o(); }
// crate::p in a comment
/* crate::q in a /* nested */ block */
/// crate::r in a doc comment
const S: &str = "crate::s \" crate::s2";
const T: &str = r#"crate::t " crate::t2"#;
const U: char = '"'; fn v<'w>() { crate::w::x(); }
"####;
    let got = imports(&code_only(text), "crate");
    let names: Vec<(usize, &str)> = got.iter().map(|(l, n)| (*l, n.as_str())).collect();
    assert_eq!(
        names,
        [
            (2, "a"),
            (3, "c"),
            (3, "d"),
            (3, "f"),
            (5, "i"),
            (6, "j"),
            (6, "l"),
            (12, "w"),
        ]
    );
}
