//! `fix --apply`: the commands of the fixes run now, each once, each behind its guard and
//! logged; then what changed, for the checks they fix. On the node: the runtime commands. On a
//! `--root` directory (an OS image, a copy): the persistent file edits, through that root, and
//! never a command that acts on the running system. Never disruptive or by-hand steps.

use super::Block;
use crate::checks::CheckResult;
use crate::model::{FixClass, FixCommand};
use std::collections::BTreeSet;

/// One runtime command, with the check and the finding code of the first block that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub check: &'static str,
    pub code: &'static str,
    pub command: FixCommand,
}

/// The commands of the blocks that `select` runs, of class `class`, in order, each once.
pub fn steps(blocks: &[Block], select: super::Select, class: FixClass) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    for b in blocks {
        for c in b.finding.fix.iter().flat_map(|f| &f.commands) {
            if c.class == class
                && select.runs(b.finding.status, c)
                && !steps.iter().any(|s| s.command.run == c.run)
            {
                steps.push(Step {
                    check: b.check,
                    code: b.finding.code,
                    command: c.clone(),
                });
            }
        }
    }
    steps
}

/// `[check/code] run`: a step as the list before the confirmation shows it.
pub fn describe(s: &Step) -> String {
    format!("[{}/{}] {}", s.check, s.code, s.command.run)
}

/// What running a step did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub ok: bool,
    pub exit: Option<i32>,
    /// Its standard output and standard error, trimmed, lines joined with ` | `.
    pub output: String,
}

/// Runs a step: an edit in-process through `root`; a command with bash (only on the node
/// itself), unless its guard says it is done already. An error: bash could not be started.
pub fn run(s: &Step, root: &crate::root::Root) -> std::io::Result<Ran> {
    let c = &s.command;
    if let Some(p) = &c.requires
        && !root.exists(p)
    {
        return Ok(Ran {
            ok: false,
            exit: None,
            output: format!("not run: {p} is not there yet (the by-hand step first)"),
        });
    }
    if let Some(e) = &c.edit {
        return Ok(match crate::edit::apply(root, e) {
            Ok(done) => Ran {
                ok: true,
                exit: None,
                output: done
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" | "),
            },
            Err(e) => Ran {
                ok: false,
                exit: None,
                output: format!("{e:#}"),
            },
        });
    }
    if !root.is_live() {
        return Ok(Ran {
            ok: false,
            exit: None,
            output: "not run: it acts on the running system, not on the files of a root".to_owned(),
        });
    }
    let snippet = match &c.guard {
        Some(g) => format!("if {g}; then echo 'already done'; else {}; fi", c.run),
        None => c.run.clone(),
    };
    let out = std::process::Command::new("bash")
        .args(["-c", &snippet])
        .output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(Ran {
        ok: out.status.success(),
        exit: out.status.code(),
        output: text.trim().replace('\n', " | "),
    })
}

/// `[check/code] $ run` and, below it, `  -> ok (exit 0): what it printed`.
pub fn log(s: &Step, r: &Ran) -> String {
    format!(
        "[{}/{}] $ {}\n  -> {}{}{}",
        s.check,
        s.code,
        s.command.run,
        if r.ok { "ok" } else { "FAILED" },
        r.exit.map(|n| format!(" (exit {n})")).unwrap_or_default(),
        if r.output.is_empty() {
            String::new()
        } else {
            format!(": {}", r.output)
        }
    )
}

/// `  check: before -> after` for each check the steps fix, in order of ID; and whether one
/// of them still fails.
pub fn compare(
    steps: &[Step],
    before: &[CheckResult],
    after: &[CheckResult],
) -> (Vec<String>, bool) {
    let affected: BTreeSet<&str> = steps.iter().map(|s| s.check).collect();
    let mut lines = Vec::new();
    let mut still_failing = false;
    for id in affected {
        let status = |r: &[CheckResult]| {
            r.iter()
                .find(|c| c.id == id)
                .map(|c| c.status.to_string())
                .unwrap_or_default()
        };
        let now = status(after);
        still_failing |= now == "fail";
        lines.push(format!("  {id}: {} -> {now}", status(before)));
    }
    (lines, still_failing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(run: &str, guard: Option<&str>) -> Step {
        Step {
            check: "peer-memory",
            code: "peermem-not-loaded",
            command: FixCommand {
                class: FixClass::Runtime,
                run: run.into(),
                guard: guard.map(Into::into),
                edit: None,
                requires: None,
            },
        }
    }

    #[test]
    fn a_step_runs_behind_its_guard_and_is_logged_on_one_line() {
        let live = crate::root::Root::live();
        let s = step("echo one; echo two >&2; exit 3", None);
        let r = run(&s, &live).unwrap();
        assert_eq!(
            log(&s, &r),
            "[peer-memory/peermem-not-loaded] $ echo one; echo two >&2; exit 3\n  -> FAILED (exit 3): one | two"
        );
        let s = step("exit 1", Some("true"));
        let r = run(&s, &live).unwrap();
        assert!(r.ok, "{r:?}");
        assert_eq!(r.output, "already done");
    }
}
