//! The script: a block per finding, each command behind its guard, the rest as comments.

use super::{Classes, blocks, comment};
use crate::checks::CheckResult;
use crate::model::{FixClass, FixCommand, Status};
use std::collections::BTreeMap;
use std::fmt::Write;

pub struct Header<'a> {
    pub host: Option<&'a str>,
    pub kernel: Option<&'a str>,
    pub root: &'a str,
    pub live: bool,
}

fn guarded(c: &FixCommand, index: usize, indent: &str) -> String {
    match &c.guard {
        Some(g) => format!(
            "{indent}if {g}; then\n{indent}  echo \"[{index}] already done: {}\"\n{indent}else\n{indent}  {}\n{indent}fi\n",
            c.run
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('$', "\\$")
                .replace('`', "\\`"),
            c.run
        ),
        None => format!("{indent}{}\n", c.run),
    }
}

/// The script. `vet` first: this renders whatever it is given.
pub fn render(h: &Header, results: &[CheckResult], classes: Classes) -> String {
    let blocks = blocks(results);
    let mut o = String::new();
    let _ = writeln!(o, "#!/usr/bin/env bash");
    let _ = writeln!(o, "# gdrdoctor {} fix script", env!("CARGO_PKG_VERSION"));
    let _ = writeln!(
        o,
        "# node: {} · kernel {} · {}",
        comment(h.host.unwrap_or("(hostname unknown)")),
        comment(h.kernel.unwrap_or("unknown")),
        if h.live {
            "written on the node itself".to_owned()
        } else {
            format!("written from the captured root {}", comment(h.root))
        }
    );
    let mut per_check: BTreeMap<&str, (usize, Status)> = BTreeMap::new();
    for b in &blocks {
        let e = per_check.entry(b.check).or_insert((0, Status::Skip));
        e.0 += 1;
        e.1 = e.1.max(b.finding.status);
    }
    let _ = writeln!(
        o,
        "# from: {}",
        if per_check.is_empty() {
            "no check warned or failed with a fix".to_owned()
        } else {
            per_check
                .iter()
                .map(|(c, (n, s))| format!("{c} ({s}, {n})"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    // Checks that could not tell have no fix here, and a script without them must not read as
    // a node with nothing to fix (issue 25: the same cause as `topo`'s "no GPU found" on a root
    // it could not read).
    let unknown: Vec<&str> = results
        .iter()
        .filter(|r| r.status == Status::Unknown)
        .map(|r| r.id)
        .collect();
    if !unknown.is_empty() {
        let _ = writeln!(
            o,
            "# could not tell: {} (unknown: what they would fix is not here; gdrdoctor check says why)",
            unknown.join(", ")
        );
    }
    let classes_text = match classes {
        Classes::Runtime => "runtime commands run; persistent ones are shown as comments",
        Classes::Persistent => "persistent commands run; runtime ones are shown as comments",
        Classes::All => "runtime and persistent commands run",
    };
    let _ = writeln!(
        o,
        "# {classes_text}; disruptive and by-hand steps are comments only."
    );
    let _ = writeln!(
        o,
        "# Every command that changes the node checks first: running this twice changes nothing the\n# second time. Review it, then run it as root."
    );
    let _ = writeln!(o, "set -euo pipefail");
    let _ = writeln!(
        o,
        "if [ \"$(id -u)\" -ne 0 ]; then echo 'run this as root' >&2; exit 1; fi"
    );
    if blocks.is_empty() {
        if unknown.is_empty() {
            let _ = writeln!(o, "echo 'gdrdoctor found nothing to fix'");
        } else {
            let _ = writeln!(
                o,
                "echo 'gdrdoctor found nothing to fix, but could not tell for: {} (see gdrdoctor check)'",
                unknown.join(", ")
            );
        }
        return o;
    }
    // The same command in several findings (one ACS unit for every bridge) runs once.
    let mut seen: BTreeMap<(FixClass, String), usize> = BTreeMap::new();
    let total = blocks.len();
    for (i, b) in blocks.iter().enumerate() {
        let n = i + 1;
        let f = b.finding;
        let Some(fix) = &f.fix else { continue };
        let _ = writeln!(o, "\n# {}", "-".repeat(94));
        let _ = writeln!(
            o,
            "# [{n}/{total}] {} ({}) · check {} · {}",
            f.code,
            f.status,
            b.check,
            comment(&f.subject)
        );
        let _ = writeln!(o, "# {}", comment(&f.message));
        for e in &f.evidence {
            let _ = writeln!(o, "#   {} = {}", comment(&e.path), comment(&e.value));
        }
        let _ = writeln!(o, "# fix: {}", comment(&fix.summary));
        let _ = writeln!(o, "# safety: {}", comment(&fix.safety));
        let mut ran = false;
        for c in &fix.commands {
            let key = (c.class, c.run.clone());
            let class = match c.class {
                FixClass::Runtime => "runtime",
                FixClass::Persistent => "persistent",
                FixClass::Disruptive => "disruptive",
                FixClass::Manual => "by hand",
            };
            if classes.runs(c.class) {
                if let Some(first) = seen.get(&key) {
                    let _ = writeln!(
                        o,
                        "# ({class}, done in block [{first}]) {}",
                        comment(&c.run)
                    );
                    continue;
                }
                seen.insert(key, n);
                let _ = writeln!(o, "echo '[{n}] {class}: {}'", f.code);
                o.push_str(&guarded(c, n, ""));
                ran = true;
            } else {
                let label = match c.class {
                    FixClass::Disruptive => {
                        "disruptive, not run: do it by hand on a drained node".to_owned()
                    }
                    FixClass::Manual => "by hand".to_owned(),
                    _ => format!("{class}; not in --class"),
                };
                let _ = writeln!(o, "# ({label}) {}", comment(&c.run));
            }
        }
        if !ran {
            let _ = writeln!(o, "# (nothing in this block runs with this --class)");
        }
    }
    let _ = writeln!(
        o,
        "\necho 'done: run gdrdoctor check again to see the result'"
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_and_comments() {
        let c = FixCommand {
            class: FixClass::Runtime,
            run: "modprobe nvidia-peermem".into(),
            guard: Some("[ -d /sys/module/nvidia_peermem ]".into()),
        };
        assert_eq!(
            guarded(&c, 3, ""),
            "if [ -d /sys/module/nvidia_peermem ]; then\n  echo \"[3] already done: modprobe nvidia-peermem\"\nelse\n  modprobe nvidia-peermem\nfi\n"
        );
        assert_eq!(comment("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
    }
}
