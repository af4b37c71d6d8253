//! `gdrdoctor nccl verify` output: for people, and JSON (docs/nccl-verify-json.md).

use super::plural;
use crate::model::nccl::{Library, Outcome, Run};
use crate::nccl::compare::{Comparison, NcclAnswer, Verification};
use crate::nccl::explain::Explanation;
use serde::Serialize;
use std::fmt::Write;

/// `1 GPU`, `2 GPUs`.
fn gpus(n: usize) -> String {
    plural(n as u64, "GPU", "GPUs")
}

/// The report of `nccl verify` for people: what ran, what NCCL said against what gdrdoctor sees,
/// the findings with their fixes, and NCCL's answer last.
pub fn human(run: &Run, v: &Verification, verbose: bool) -> String {
    let mut o = String::new();
    let name = run.library.name();
    what_ran(&mut o, run, v, verbose);
    comparisons(&mut o, v, verbose, name);
    if let Some(e) = &run.explanation {
        if !e.warnings.is_empty() {
            let _ = writeln!(o, "\n{name} warnings");
            for w in &e.warnings {
                let _ = writeln!(o, "  {}x  {}", w.count, w.text);
                if let Some(m) = &w.meaning {
                    let _ = writeln!(o, "      {m}");
                }
            }
        }
    }
    o.push_str("\nFindings\n");
    let style = crate::report::human::Style { verbose };
    for f in &v.findings {
        crate::report::human::finding(&mut o, f, &style);
    }
    let _ = writeln!(o, "\n{}", v.answer.text);
    o
}

/// What ran: NCCL's library and version, how the run ended, the libraries tried, the files kept.
fn what_ran(o: &mut String, run: &Run, v: &Verification, verbose: bool) {
    let a = run.answer.as_ref();
    let used = run.used();
    let name = run.library.name();
    let lib = match (&v.answer.library, used) {
        (Some(l), Some(c)) => format!("{l}; {}", source_words(c.source, &c.library, run.library)),
        (Some(l), None) => l.clone(),
        (None, _) => "no library loaded".into(),
    };
    let _ = writeln!(
        o,
        "{name} {} ({lib}) on {}: {}",
        v.answer.version.as_deref().unwrap_or("?"),
        gpus(run.gpus.len()),
        if run.mode == "one-rank" {
            "a one-rank communicator".to_owned()
        } else {
            format!(
                "one communicator over all of them, P2P and SHM off: the all-reduce goes through {name}'s network"
            )
        }
    );
    if let Some(a) = a {
        let result = match &a.outcome {
            Outcome::Ok { elements } => format!("all-reduce ok ({elements} int32 per rank)"),
            Outcome::Wrong { wrong, .. } => format!("all-reduce WRONG ({wrong} elements)"),
            Outcome::NcclError { call, .. } => format!("{call} failed"),
            Outcome::CudaError { call, .. } => format!("CUDA failed ({call})"),
            Outcome::HipError { call, .. } => format!("HIP failed ({call})"),
            Outcome::NoLibrary => "no library".into(),
            Outcome::MissingSymbol { symbol, .. } => format!("library lacks {symbol}"),
            Outcome::BadSpec { .. } => "bad spec".into(),
            Outcome::Loaded => "loaded only".into(),
        };
        let times = [("init", a.init_ms), ("all-reduce", a.all_reduce_ms)]
            .iter()
            .filter_map(|(w, t)| t.map(|t| format!("{w} {t:.0} ms")))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            o,
            "  {result}{}{}",
            if times.is_empty() { "" } else { "; " },
            times
        );
        for t in &a.tried {
            let _ = writeln!(o, "  not loaded: {}: {}", t.library, t.error);
        }
    }
    if let Some(e) = &run.error {
        let _ = writeln!(o, "  no answer: {e}");
    }
    if verbose || a.is_some_and(|a| a.library.is_none()) {
        let _ = writeln!(
            o,
            "  libraries tried in order: {}",
            run.search
                .candidates
                .iter()
                .map(|c| format!("{} ({})", c.library, c.source))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(o, "  {}", run.search.python);
    }
    let log = match (&run.log.path, &run.log.note) {
        (_, Some(note)) => format!("{name}'s log: {note}"),
        (Some(p), None) => format!(
            "{name}'s log: {p}, {} lines from {name}",
            run.log.nccl_lines
        ),
        (None, None) => format!("{name}'s log: {} lines from {name}", run.log.nccl_lines),
    };
    let topo = match &run.topology_dump {
        Some(t) => format!(
            "its topology dump: {}{} bytes",
            t.path
                .as_deref()
                .map(|p| format!("{p}, "))
                .unwrap_or_default(),
            t.bytes
        ),
        None => "no topology dump".into(),
    };
    let _ = writeln!(o, "  {log}; {topo}");
}

/// Each fact, NCCL's side against gdrdoctor's: the differences always, the rest with -v or when few.
fn comparisons(o: &mut String, v: &Verification, verbose: bool, name: &str) {
    if !v.comparisons.is_empty() {
        let differ = v
            .comparisons
            .iter()
            .filter(|c| c.agree == Some(false))
            .count();
        let same = v
            .comparisons
            .iter()
            .filter(|c| c.agree == Some(true))
            .count();
        let open = v.comparisons.len() - differ - same;
        let _ = writeln!(
            o,
            "\n{name} against gdrdoctor: {same} the same, {differ} different{}",
            if open > 0 {
                format!(", {open} not compared")
            } else {
                String::new()
            }
        );
        let small = v.comparisons.len() <= 6;
        for c in &v.comparisons {
            if !(verbose || small || c.agree != Some(true)) {
                continue;
            }
            let tag = match c.agree {
                Some(true) => "same",
                Some(false) => "DIFFERS",
                None => "open",
            };
            let _ = writeln!(o, "  {tag:<8}{}", c.subject);
            let _ = writeln!(o, "          {name}:      {}", c.nccl);
            let _ = writeln!(o, "          gdrdoctor: {}", c.gdrdoctor);
            if let Some(n) = &c.note {
                let _ = writeln!(o, "          ({n})");
            }
        }
        if !(verbose || small) && same > 0 {
            let _ = writeln!(o, "  (-v lists the {same} facts that are the same)");
        }
    }
}

/// `the dynamic loader's libnccl.so.2`, `the pip wheel of the python3 on PATH`.
fn source_words(source: &str, name: &str, which: Library) -> String {
    match (source, which) {
        ("loader", _) => format!("the dynamic loader's {name}"),
        ("pip-wheel", Library::Nccl) => "the NVIDIA pip wheel of the python3 on PATH".into(),
        ("pip-wheel", Library::Rccl) => "a pip wheel of the python3 on PATH".into(),
        ("rocm", _) => "ROCm's install directory".into(),
        ("environment", Library::Nccl) => "GDRDOCTOR_LIBNCCL".into(),
        ("environment", Library::Rccl) => "GDRDOCTOR_LIBRCCL".into(),
        ("option", _) => "--library".into(),
        (other, _) => other.into(),
    }
}

#[derive(Serialize)]
struct VerifyJson<'a> {
    schema: u32,
    root: &'a str,
    hostname: Option<&'a str>,
    answer: &'a NcclAnswer,
    exit_code: u8,
    run: &'a Run,
    comparisons: &'a [Comparison],
    findings: &'a [crate::model::Finding],
    explanation: Option<&'a Explanation>,
}

/// `nccl verify --format json` (docs/nccl-verify-json.md).
pub fn json(run: &Run, v: &Verification, root: &str, hostname: Option<&str>) -> String {
    let doc = VerifyJson {
        schema: 1,
        root,
        hostname,
        answer: &v.answer,
        exit_code: v.exit_code,
        run,
        comparisons: &v.comparisons,
        findings: &v.findings,
        explanation: run.explanation.as_ref(),
    };
    super::pretty_json(&doc)
}
