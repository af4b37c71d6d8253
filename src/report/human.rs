//! The report for a person at a terminal: grouped by check, problems with their fixes, evidence
//! with `-v`, and the verdict as the last line (what `tail -1` of a prolog log shows).

use super::Report;
use crate::model::{Finding, Status};
use owo_colors::{OwoColorize, Stream};
use std::fmt::Write;

pub struct Style {
    pub verbose: bool,
}

fn label(s: Status) -> String {
    let text = format!("{:<7}", s.as_str().to_uppercase());
    let out = Stream::Stdout;
    match s {
        Status::Pass => text.if_supports_color(out, |t| t.green()).to_string(),
        Status::Warn => text.if_supports_color(out, |t| t.yellow()).to_string(),
        Status::Fail => text.if_supports_color(out, |t| t.red()).to_string(),
        Status::Unknown => text.if_supports_color(out, |t| t.magenta()).to_string(),
        Status::Skip => text.if_supports_color(out, |t| t.dimmed()).to_string(),
    }
}

/// Text read off a node (a captured one is untrusted) never reaches the terminal raw: the one
/// sanitizer (crate::sanitize) escapes it, so a capture cannot clear the screen, retitle the
/// window or hide a line with a carriage return.
pub use crate::sanitize::text as clean;

fn bold(s: &str) -> String {
    s.if_supports_color(Stream::Stdout, |t| t.bold())
        .to_string()
}

fn dim(s: &str) -> String {
    s.if_supports_color(Stream::Stdout, |t| t.dimmed())
        .to_string()
}

pub fn render(report: &Report, style: &Style) -> String {
    let mut o = String::new();
    let root = if report.root.live {
        "live system".to_owned()
    } else {
        format!("captured root {}", clean(&report.root.path))
    };
    let _ = writeln!(
        o,
        "{} {} · {root}",
        bold("gdrdoctor"),
        report.gdrdoctor_version
    );
    let node = &report.node;
    let _ = writeln!(
        o,
        "node {} · kernel {} · {} GPU{} · {} RDMA device{}",
        clean(node.hostname.as_deref().unwrap_or("(hostname unknown)")),
        clean(node.kernel.as_deref().unwrap_or("unknown")),
        node.gpus,
        if node.gpus == 1 { "" } else { "s" },
        node.rdma_devices,
        if node.rdma_devices == 1 { "" } else { "s" },
    );
    // What the counters were judged over, when a run asked for more than one reading.
    if let Some(s) = &report.inventory.sample {
        let _ = writeln!(o, "{}", clean(&s.line()));
    } else if let Some(note) = &report.inventory.span_note {
        let _ = writeln!(o, "{}", clean(note));
    }
    if let Some(e) = &report.inventory.baseline_error {
        let _ = writeln!(
            o,
            "--baseline: not written: {}: the next run cannot judge what grew",
            clean(e)
        );
    }
    o.push('\n');

    // Checks left out by --select are noise here; JSON keeps them.
    for check in report
        .checks
        .iter()
        .filter(|c| c.skipped.as_deref() != Some(crate::checks::NOT_SELECTED))
    {
        let prerequisite = if check.prerequisite_of.is_empty() {
            String::new()
        } else {
            format!(
                "  (prerequisite of {}: left out, run for them)",
                check.prerequisite_of.join(", ")
            )
        };
        if !style.verbose {
            compact(&mut o, check, &prerequisite, style);
            continue;
        }
        let _ = writeln!(
            o,
            "{} {}  {}{}",
            label(check.status),
            bold(check.id),
            dim(check.title),
            prerequisite
        );
        if let Some(reason) = &check.skipped {
            let _ = writeln!(o, "        {}", dim(reason));
            continue;
        }
        for f in &check.findings {
            finding(&mut o, f, style);
        }
    }

    let problems = &report.inventory.problems;
    if style.verbose && !problems.is_empty() {
        let _ = writeln!(o, "\n{}", bold("unreadable or nonsensical"));
        for p in problems {
            let (path, message) = (clean(&p.path), clean(&p.message));
            let _ = writeln!(o, "        {path} {}", dim(&format!("({message})")));
        }
    } else if !problems.is_empty() {
        let n = problems.len();
        let s = if n == 1 { "" } else { "s" };
        let _ = writeln!(
            o,
            "\n{n} file{s} could not be read or made no sense; -v lists them"
        );
    }

    let v = &report.verdict;
    let headline = if v.ready && v.verified {
        "READY"
            .if_supports_color(Stream::Stdout, |t| t.green())
            .to_string()
    } else if v.ready {
        "UNVERIFIED"
            .if_supports_color(Stream::Stdout, |t| t.magenta())
            .to_string()
    } else {
        "NOT READY"
            .if_supports_color(Stream::Stdout, |t| t.red())
            .to_string()
    };
    // "nothing verified: ..." keeps its first words: they are the reason it is not ready.
    let detail = match v.state {
        super::State::NothingVerified => &v.summary,
        _ => v
            .summary
            .split_once(": ")
            .map(|(_, d)| d)
            .unwrap_or(&v.summary),
    };
    let _ = writeln!(o, "\n{} {detail}", bold(&headline));
    o
}

/// The default report: a check that passed (or did not run) is one line with its summary; one
/// with a warning, failure or unknown shows its title, each of those findings in full with its
/// fix, and a line for what passed. `-v` shows every finding and its evidence instead.
fn compact(o: &mut String, check: &crate::checks::CheckResult, prerequisite: &str, style: &Style) {
    let id = bold(&format!("{:<14}", check.id));
    if check.skipped.is_some() || check.status <= Status::Pass {
        let _ = writeln!(
            o,
            "{} {id} {}{}",
            label(check.status),
            clean(&check.summary),
            dim(prerequisite)
        );
        return;
    }
    let _ = writeln!(
        o,
        "{} {id} {}{}",
        label(check.status),
        dim(check.title),
        dim(prerequisite)
    );
    for g in super::group::groups(check.findings.iter().filter(|f| f.status > Status::Pass)) {
        if g.len() == 1 {
            finding(o, g[0], style);
        } else {
            group(o, &g);
        }
    }
    for f in check.findings.iter().filter(|f| f.status == Status::Skip) {
        let _ = writeln!(
            o,
            "        {}",
            dim(&format!("{}: {}", clean(&f.subject), clean(&f.message)))
        );
    }
    if check.findings.iter().any(|f| f.status == Status::Pass) {
        let _ = writeln!(
            o,
            "        {}",
            dim(&format!("passed: {}", clean(&check.summary)))
        );
    }
}

/// Findings of one cause (see `group`): one line with the members, the fix once, a command
/// that differs only by each member's name as a loop over the names.
fn group(o: &mut String, g: &[&Finding]) {
    use super::group::{command, members};
    let f = g[0];
    let _ = writeln!(
        o,
        "        {} {}: {}",
        label(f.status).trim_end(),
        clean(&members(g)),
        clean(&f.message)
    );
    let Some(fix) = &f.fix else { return };
    // The fix's own words about the first member, for all of them.
    let own = super::group::own_names(f);
    let mut summary = fix.summary.clone();
    for n in &own {
        summary = summary.replace(n.as_str(), "each");
    }
    let _ = writeln!(
        o,
        "          fix: {}{}",
        clean(&summary),
        alternatives_said(fix, &own)
    );
    let line = |o: &mut String, class: crate::model::FixClass, run: Option<String>, first: &str| {
        let tag = dim(&format!("[{:<7}]", class.tag()));
        let text = run.unwrap_or_else(|| format!("{first}   (and each other member's own: -v)"));
        let _ = writeln!(o, "            {tag} {}", clean(&text));
    };
    for (k, c) in fix.commands.iter().enumerate() {
        line(
            o,
            c.class,
            command(g, |m| m.fix.as_ref()?.commands.get(k)),
            &c.run,
        );
    }
    let _ = writeln!(
        o,
        "            {}",
        dim(&format!("safety: {}", clean(&fix.safety)))
    );
}

/// The default report names a fix's alternatives on its `fix:` line; `-v` (and `gdrdoctor
/// fix`, as comments) shows their commands.
fn alternatives_said(fix: &crate::model::Fix, each: &[String]) -> String {
    fix.alternatives
        .iter()
        .map(|a| {
            let mut text = a.summary.clone();
            for n in each {
                text = text.replace(n.as_str(), "each");
            }
            format!("; or: {} (-v shows how)", clean(&text))
        })
        .collect()
}

pub(crate) fn finding(o: &mut String, f: &Finding, style: &Style) {
    let problem = f.status > Status::Pass;
    let status = if problem {
        format!("{} ", label(f.status).trim_end())
    } else {
        String::new()
    };
    let overridden = f
        .original_status
        .map(|s| dim(&format!(" (severity {s} overridden by config)")))
        .unwrap_or_default();
    let line = format!(
        "{status}{}: {}{overridden}",
        clean(&f.subject),
        clean(&f.message)
    );
    let _ = writeln!(o, "        {}", if problem { line } else { dim(&line) });
    if style.verbose || problem {
        if style.verbose {
            for e in &f.evidence {
                let _ = writeln!(
                    o,
                    "          {} {}",
                    dim(&clean(&e.path)),
                    dim(&format!("= {}", clean(&e.value)))
                );
            }
        }
        if let Some(fix) = &f.fix {
            let _ = writeln!(
                o,
                "          fix: {}{}",
                clean(&fix.summary),
                if style.verbose {
                    String::new()
                } else {
                    alternatives_said(fix, &[])
                }
            );
            for c in &fix.commands {
                let tag = dim(&format!("[{:<7}]", c.class.tag()));
                let _ = writeln!(o, "            {tag} {}", clean(&c.run));
            }
            for a in fix.alternatives.iter().filter(|_| style.verbose) {
                let _ = writeln!(o, "          or: {}", clean(&a.summary));
                for c in &a.commands {
                    let tag = dim(&format!("[{:<7}]", c.class.tag()));
                    let _ = writeln!(o, "            {tag} {}", clean(&c.run));
                }
            }
            let _ = writeln!(
                o,
                "            {}",
                dim(&format!("safety: {}", clean(&fix.safety)))
            );
        }
    }
}
