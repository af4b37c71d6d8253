//! The script: a function per finding, each command behind its test, the rest as comments.
//!
//! What runs and what is only shown: the commands of `--class` for failures (a warning's fix
//! runs only with `--warnings`: a warning on a READY node never changes it by default);
//! disruptive, by-hand and read-only steps, and the alternatives to a fix, are comments. A
//! command that fails stops its own block, not the others; the script names the failed blocks
//! at the end and exits 1.
//!
//! The files: every path the script touches is under `$R` (`GDRDOCTOR_ROOT`, empty on the node
//! itself), and file edits are `gdrdoctor edit` calls with `--root`, so that the same script
//! runs against a copy of the node (tests/fixes.rs) or an OS image.

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

/// What the script runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Select {
    pub classes: Classes,
    /// The fixes of warnings too (by default only failures' fixes run).
    pub warnings: bool,
}

impl Select {
    /// Whether the script runs this command of a finding with this status.
    pub fn runs(self, status: Status, c: &FixCommand) -> bool {
        (status == Status::Fail || self.warnings)
            && self.classes.runs(c.class)
            && !c.run.starts_with('#')
    }
}

/// Directories whose paths a command reaches through `$R`.
const ROOTED: [&str; 6] = ["/sys/", "/proc/", "/etc/", "/boot/", "/run/", "/var/"];

/// The command with every node path outside single quotes put under `${R}`, and a
/// `gdrdoctor edit` given the root; as the script runs it.
pub fn rooted(run: &str) -> String {
    if let Some(rest) = run.strip_prefix("gdrdoctor edit ") {
        return format!("\"$GD\" --root \"${{R:-/}}\" edit {rest}");
    }
    let mut out = String::with_capacity(run.len() + 16);
    let (mut single, mut double) = (false, false);
    // The double-quote state outside each `$(` we are in.
    let mut outer: Vec<bool> = Vec::new();
    let mut prev = ' ';
    for (i, c) in run.char_indices() {
        match c {
            '\'' if !double && prev != '\\' => single = !single,
            '"' if !single && prev != '\\' => double = !double,
            '(' if !single && prev == '$' => {
                outer.push(double);
                double = false;
            }
            ')' if !single && !double && !outer.is_empty() => {
                double = outer.pop().unwrap_or(false);
            }
            _ => {}
        }
        if !single
            && c == '/'
            && " \t><(\";|&".contains(prev)
            && ROOTED.iter().any(|d| run[i..].starts_with(d))
        {
            out.push_str(if double { "${R}" } else { "\"${R}\"" });
        }
        out.push(c);
        prev = c;
    }
    out
}

/// Whether a `$` stands inside single quotes (on purpose: text for another shell to expand).
fn dollar_in_single_quotes(run: &str) -> bool {
    let mut single = false;
    for c in run.chars() {
        match c {
            '\'' => single = !single,
            '$' if single => return true,
            _ => {}
        }
    }
    false
}

/// Whether running the command again changes nothing more: it has a test, or is an edit.
fn repeatable(c: &FixCommand) -> bool {
    c.guard.is_some() || c.run.starts_with("gdrdoctor edit ")
}

fn escaped(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('$', "\\$")
        .replace('`', "\\`")
}

/// A command and its trailing `# comment` (outside quotes), apart: inside `{ ...; }` a comment
/// would swallow the closing brace.
pub fn split_comment(run: &str) -> (&str, Option<&str>) {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (i, c) in run.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single && prev != '\\' => double = !double,
            '#' if !single && !double && prev.is_whitespace() => {
                return (run[..i].trim_end(), Some(run[i + 1..].trim()));
            }
            _ => {}
        }
        prev = c;
    }
    (run, None)
}

fn guarded(c: &FixCommand, index: usize, indent: &str) -> String {
    let (command, note) = split_comment(&c.run);
    let run = rooted(command);
    let mut note = note.map_or(String::new(), |n| format!("{indent}# {}\n", comment(n)));
    if let Some(p) = &c.requires {
        let q = crate::checks::sh(p);
        note.push_str(&format!(
            "{indent}if [ ! -e \"${{R}}\"{} ]; then echo \"[{index}] not yet: {} is not there (the by-hand step first)\" >&2; return 1; fi\n",
            q,
            escaped(p)
        ));
    }
    if dollar_in_single_quotes(command) {
        note.push_str(&format!(
            "{indent}# shellcheck disable=SC2016 # the $ is for the file's reader\n"
        ));
    }
    note + &match &c.guard {
        Some(g) => format!(
            "{indent}if {}; then\n{indent}  echo \"[{index}] already done: {}\"\n{indent}else\n{indent}  {{ {run}; }} || return 1\n{indent}fi\n",
            rooted(g),
            escaped(&c.run),
        ),
        None => format!("{indent}{{ {run}; }} || return 1\n"),
    }
}

/// The script. `vet` first: this renders whatever it is given.
pub fn render(h: &Header, results: &[CheckResult], select: Select) -> String {
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
    // a node with nothing to fix (issue 25).
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
    // What runs, counted as the blocks below run it: each command once.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut count: BTreeMap<FixClass, usize> = BTreeMap::new();
    let mut every_time = 0;
    for b in &blocks {
        for c in b.finding.fix.iter().flat_map(|f| &f.commands) {
            if select.runs(b.finding.status, c) && !seen.contains_key(&c.run) {
                seen.insert(c.run.clone(), 0);
                *count.entry(c.class).or_default() += 1;
                every_time += usize::from(!repeatable(c));
            }
        }
    }
    let total: usize = count.values().sum();
    let warned = blocks
        .iter()
        .filter(|b| b.finding.status == Status::Warn)
        .count();
    let _ = writeln!(
        o,
        "# runs: {}",
        if total == 0 {
            "nothing (every step below is a comment)".to_owned()
        } else {
            format!(
                "{total} command(s): {}",
                count
                    .iter()
                    .map(|(c, n)| format!("{n} {}", c.words()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    let classes_text = match select.classes {
        Classes::Runtime => "runtime commands (persistent ones are comments)",
        Classes::Persistent => "persistent commands (runtime ones are comments)",
        Classes::All => "runtime and persistent commands",
        Classes::Every => {
            "every command, by-hand and disruptive ones too (a test harness's choice)"
        }
    };
    let _ = writeln!(
        o,
        "# of failures: {classes_text}{}; disruptive, by-hand and read-only steps and the\n# alternatives to a fix are comments.",
        if select.warnings {
            ", and of warnings"
        } else if warned > 0 {
            "; warnings' fixes are comments (gdrdoctor fix --warnings runs them)"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "# A command with a test runs only when the test says it is not done yet, an edit (gdrdoctor\n# edit) writes only what differs and keeps each file's original as FILE.gdrdoctor-orig{}.\n# A failed command stops its own block only; the failed blocks are named at the end (exit 1).",
        if every_time > 0 {
            format!("; {every_time} command(s) have no such test and run every time (marked below)")
        } else {
            ": running this twice changes nothing the second time".to_owned()
        }
    );
    let mut blocks_text = String::new();
    let (uses_gd, any_fn) = render_blocks(&mut blocks_text, &blocks, select);
    let _ = writeln!(o, "set -uo pipefail");
    let _ = writeln!(
        o,
        "R=\"${{GDRDOCTOR_ROOT:-}}\"   # the files' root: empty on the node itself, or a copy or an OS image"
    );
    let _ = writeln!(
        o,
        "case \"$R\" in *[!A-Za-z0-9_./+-]*) echo 'GDRDOCTOR_ROOT: only letters, digits and _./+- please' >&2; exit 2 ;; esac"
    );
    // With a root, the files go there but the node's commands would still act on this
    // machine: only a harness whose stand-ins take those commands may ask for that.
    let _ = writeln!(
        o,
        "if [ -n \"$R\" ] && [ \"${{GDRDOCTOR_STANDINS:-}}\" != 1 ]; then echo 'GDRDOCTOR_ROOT is for the test harness (its stand-ins take the commands); for an OS image: gdrdoctor --root DIR fix --apply --class persistent' >&2; exit 2; fi"
    );
    if uses_gd {
        let _ = writeln!(
            o,
            "GD=\"${{GDRDOCTOR:-$(command -v gdrdoctor || echo /usr/bin/gdrdoctor)}}\""
        );
    }
    let _ = writeln!(
        o,
        "if [ -z \"$R\" ] && [ \"$(id -u)\" -ne 0 ]; then echo 'run this as root' >&2; exit 1; fi"
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
    if any_fn {
        let _ = writeln!(o, "failed=()");
    }
    o.push_str(&blocks_text);
    if any_fn {
        let _ = writeln!(
            o,
            "\nif [ ${{#failed[@]}} -gt 0 ]; then\n  printf 'failed: %s\\n' \"${{failed[@]}}\" >&2\n  exit 1\nfi"
        );
    }
    let _ = writeln!(
        o,
        "echo 'done: run gdrdoctor check again to see the result'"
    );
    o
}

/// The blocks, one per finding, into `o`; whether an edit runs (the script needs `$GD`) and
/// whether any block runs a command (it needs `failed`).
fn render_blocks(o: &mut String, blocks: &[super::Block], select: Select) -> (bool, bool) {
    let (mut uses_gd, mut any_fn) = (false, false);
    // One cause, one block (issue 39): the findings of one check with the same code and status
    // (one per port, NIC or GPU) share a block; each member's own commands run in it.
    let mut groups: Vec<Vec<&super::Block>> = Vec::new();
    for b in blocks {
        match groups.iter_mut().find(|g| {
            g[0].check == b.check
                && g[0].finding.code == b.finding.code
                && g[0].finding.status == b.finding.status
        }) {
            Some(g) => g.push(b),
            None => groups.push(vec![b]),
        }
    }
    // The same command in several findings (one ACS unit for every bridge) runs once.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let n_blocks = groups.len();
    for (i, g) in groups.iter().enumerate() {
        let n = i + 1;
        let (b, f) = (g[0], g[0].finding);
        let _ = writeln!(o, "\n# {}", "-".repeat(94));
        let subjects: Vec<&str> = g.iter().map(|m| m.finding.subject.as_str()).collect();
        let _ = writeln!(
            o,
            "# [{n}/{n_blocks}] {} ({}) · check {} · {}",
            f.code,
            f.status,
            b.check,
            if subjects.len() == 1 {
                comment(subjects[0]).into_owned()
            } else {
                format!(
                    "{} of them: {}",
                    subjects.len(),
                    comment(&subjects.join(", "))
                )
            }
        );
        let mut said: Vec<&str> = Vec::new();
        let mut fixes_said: Vec<&str> = Vec::new();
        let mut alternatives_said: Vec<&str> = Vec::new();
        let mut body = String::new();
        let mut comments = String::new();
        let mut alternatives: Vec<String> = Vec::new();
        for m in g {
            let f = m.finding;
            let Some(fix) = &f.fix else { continue };
            if !said.contains(&f.message.as_str()) {
                said.push(&f.message);
                let _ = writeln!(o, "# {}", comment(&f.message));
            }
            for e in &f.evidence {
                let _ = writeln!(o, "#   {} = {}", comment(&e.path), comment(&e.value));
            }
            if fixes_said.is_empty() {
                fixes_said.push(&fix.summary);
                let _ = writeln!(
                    comments,
                    "# fix: {}{}",
                    comment(&fix.summary),
                    if g.len() > 1 {
                        " (each member: its own)"
                    } else {
                        ""
                    }
                );
                let _ = writeln!(comments, "# safety: {}", comment(&fix.safety));
            }
            for c in &fix.commands {
                let class = c.class.words();
                if select.runs(f.status, c) {
                    if let Some(first) = seen.get(&c.run) {
                        if *first != n {
                            let _ = writeln!(
                                body,
                                "  # ({class}, done in block [{first}]) {}",
                                comment(&c.run)
                            );
                        }
                        continue;
                    }
                    seen.insert(c.run.clone(), n);
                    if !repeatable(c) {
                        let _ = writeln!(body, "  # (no test: runs every time)");
                    }
                    let _ = writeln!(
                        body,
                        "  echo '[{n}] {class}: {} ({})'",
                        f.code,
                        comment(&f.subject).replace('\'', "'\\''")
                    );
                    body.push_str(&guarded(c, n, "  "));
                } else {
                    let label = match c.class {
                        FixClass::Disruptive => {
                            "disruptive, not run: do it by hand on a drained node".to_owned()
                        }
                        FixClass::Manual => "by hand".to_owned(),
                        FixClass::Inspect => "check".to_owned(),
                        _ if f.status == Status::Warn && !select.warnings => {
                            format!("{class}; a warning's fix: --warnings runs it")
                        }
                        _ => format!("{class}; not in --class"),
                    };
                    let line = format!("# ({label}) {}\n", comment(&c.run));
                    if !comments.contains(&line) {
                        comments.push_str(&line);
                    }
                }
            }
            for (k, a) in fix.alternatives.iter().enumerate() {
                if alternatives_said.len() <= k {
                    alternatives_said.push(&a.summary);
                    alternatives.push(format!(
                        "# or, instead (not run): {}{}\n",
                        comment(&a.summary),
                        if g.len() > 1 {
                            " (each member: its own)"
                        } else {
                            ""
                        }
                    ));
                }
                for c in &a.commands {
                    let line = format!("#   ({}) {}\n", c.class.words(), comment(&c.run));
                    if !alternatives[k].contains(&line) {
                        alternatives[k].push_str(&line);
                    }
                }
            }
        }
        o.push_str(&comments);
        for a in &alternatives {
            o.push_str(a);
        }
        if !body.contains("|| return 1") {
            o.push_str(&body);
            let _ = writeln!(o, "# (nothing in this block runs)");
        } else {
            uses_gd |= body.contains("\"$GD\"");
            any_fn = true;
            let _ = writeln!(o, "fix_{n}() {{");
            o.push_str(&body);
            let _ = writeln!(o, "}}");
            let _ = writeln!(o, "fix_{n} || failed+=('[{n}] {}')", f.code);
        }
    }
    (uses_gd, any_fn)
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
            edit: None,
            requires: None,
        };
        assert_eq!(
            guarded(&c, 3, ""),
            "if [ -d \"${R}\"/sys/module/nvidia_peermem ]; then\n  echo \"[3] already done: modprobe nvidia-peermem\"\nelse\n  { modprobe nvidia-peermem; } || return 1\nfi\n"
        );
        assert_eq!(comment("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
    }

    #[test]
    fn node_paths_go_under_the_root_outside_single_quotes() {
        assert_eq!(
            rooted("echo 1 > /sys/class/net/x/mtu"),
            "echo 1 > \"${R}\"/sys/class/net/x/mtu"
        );
        assert_eq!(
            rooted("[ \"$(cat /sys/a)\" = x ]"),
            "[ \"$(cat \"${R}\"/sys/a)\" = x ]"
        );
        assert_eq!(
            rooted("printf '/etc/x\\n' > /etc/y"),
            "printf '/etc/x\\n' > \"${R}\"/etc/y"
        );
        assert_eq!(
            rooted("gdrdoctor edit set /etc/nccl.conf A=1"),
            "\"$GD\" --root \"${R:-/}\" edit set /etc/nccl.conf A=1"
        );
        // Not a path of its own: a value; and /dev/null stays the node's.
        assert_eq!(rooted("echo X=/etc/y"), "echo X=/etc/y");
        assert_eq!(rooted("command -v x >/dev/null"), "command -v x >/dev/null");
        assert_eq!(
            split_comment("nvidia-smi -r -i 0000:3a:00.0   # after draining"),
            ("nvidia-smi -r -i 0000:3a:00.0", Some("after draining"))
        );
        assert_eq!(split_comment("grep '#x' f"), ("grep '#x' f", None));
    }
}
