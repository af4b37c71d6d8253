//! How NCCL's run ended, as findings: a run that could not start or answer says nothing about
//! the node (exit 2); a failed NCCL call or a wrong sum is a finding of its own (exit 1).

use super::codes;
use super::{RunEvidence, SUBJECT, install_fix};
use crate::model::nccl::{Library, Outcome, Run};
use crate::model::{Code, Evidence, Finding, Fix};

/// A run that says nothing about the node: the answer's text, and the one finding.
pub(super) struct Stopped {
    pub text: String,
    pub finding: Finding,
}

fn stopped(text: String, finding: Finding) -> Box<Stopped> {
    Box::new(Stopped { text, finding })
}

/// The outcome of a run that answered and got as far as NCCL; otherwise what to say instead.
pub(super) fn answered<'r>(
    run: &'r Run,
    named: &str,
    ev: &RunEvidence,
) -> Result<&'r Outcome, Box<Stopped>> {
    let name = run.library.name();
    let outcome = match (&run.error, &run.answer) {
        (Some(error), _) => return Err(not_run(run, error, ev)),
        (None, None) => {
            let text = format!("{name} could not be run: no answer");
            let f = Finding::unknown(codes::VERIFY_FAILED, SUBJECT, text.clone());
            return Err(stopped(text, f));
        }
        (None, Some(a)) => &a.outcome,
    };
    let could_not = |text: String, code: Code, fix: Option<Fix>, ev: Vec<Evidence>| {
        let mut f = Finding::unknown(code, SUBJECT, text.clone()).with(ev);
        if let Some(fix) = fix {
            f = f.fix(fix);
        }
        Err(stopped(text, f))
    };
    match outcome {
        Outcome::NoLibrary => no_library(run),
        Outcome::MissingSymbol { library, symbol } => could_not(
            match run.library {
                Library::Nccl => format!(
                    "{library} lacks {symbol}, which every NCCL since 2.4 exports: not an NCCL library gdrdoctor can run"
                ),
                Library::Rccl => format!(
                    "{library} lacks {symbol}, which every RCCL exports: not an RCCL library gdrdoctor can run"
                ),
            },
            codes::VERIFY_FAILED,
            Some(install_fix(run.library)),
            ev.library.clone(),
        ),
        Outcome::CudaError { call, error } | Outcome::HipError { call, error } => could_not(
            format!(
                "{named} could not be run: {}: {call}: {error} (see the gpu check)",
                run.library.runtime()
            ),
            codes::VERIFY_FAILED,
            None,
            ev.library.clone(),
        ),
        Outcome::BadSpec { error } => could_not(
            format!("{name} could not be run: {error}"),
            codes::VERIFY_FAILED,
            None,
            Vec::new(),
        ),
        _ => Ok(outcome),
    }
}

/// The child gave no answer: it could not start, hung, crashed, or was cut by the deadline.
fn not_run(run: &Run, error: &str, ev: &RunEvidence) -> Box<Stopped> {
    let cut = run.cut_by_deadline.is_some() && run.timed_out() || error.contains("left no time");
    let name = run.library.name();
    let text = format!("{name} could not be run: {error}");
    let code = if cut {
        codes::VERIFY_CUT_SHORT
    } else {
        codes::VERIFY_FAILED
    };
    let mut f = Finding::unknown(code, SUBJECT, text.clone()).with(ev.warnings.clone());
    if let Some(n) = &run.log.note {
        f = f.evidence("NCCL_DEBUG_FILE", n.clone());
    } else if run.log.nccl_lines > 0 {
        f = f.evidence(
            "NCCL_DEBUG_FILE",
            format!("{} lines from {name} before it stopped", run.log.nccl_lines),
        );
    }
    if !cut {
        let dmesg = match run.library {
            Library::Nccl => "dmesg | grep -i -E 'xid|nvrm|mlx5' | tail -20",
            Library::Rccl => "dmesg | grep -i -E 'amdgpu|kfd|bnxt|mlx5' | tail -20",
        };
        f = f.fix(
            Fix::new(
                format!("Find out where {name} stops: rerun with --log-dir DIR and read DIR/nccl.log (the last lines say what it was doing)"),
                "Reading only.",
            )
            .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify")
            .manual(dmesg),
        );
    }
    stopped(text, f)
}

/// No candidate library loaded: each one tried, and how the pip wheel was looked for.
fn no_library(run: &Run) -> Result<&Outcome, Box<Stopped>> {
    let mut ev: Vec<Evidence> = run
        .answer
        .as_ref()
        .map(|a| {
            a.tried
                .iter()
                .map(|t| Evidence {
                    path: t.library.clone(),
                    value: format!("<{}>", t.error),
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let names: Vec<String> = run
        .search
        .candidates
        .iter()
        .map(|c| format!("{} ({})", c.library, c.source))
        .collect();
    ev.push(Evidence {
        path: "python3".into(),
        value: run.search.python.clone(),
    });
    let text = match run.library {
        Library::Nccl => format!(
            "no NCCL library could be loaded: tried {}; install NCCL (Debian/Ubuntu libnccl2, RHEL libnccl, or pip install nvidia-nccl-cu12)",
            names.join(", ")
        ),
        Library::Rccl => format!(
            "no RCCL library could be loaded: tried {}; install RCCL (ROCm's rccl package: apt-get install rccl, dnf install rccl; or PyTorch's ROCm wheel, which bundles it)",
            names.join(", ")
        ),
    };
    let f = Finding::unknown(codes::LIBRARY_MISSING, SUBJECT, text.clone())
        .with(ev)
        .fix(install_fix(run.library));
    Err(stopped(text, f))
}

/// An NCCL call that failed (with the text that becomes the answer), or an all-reduce that
/// summed wrong (NCCL's answer on GDR still stands).
pub(super) fn failure(
    outcome: &Outcome,
    which: Library,
    named: &str,
    ranks: usize,
    ev: &RunEvidence,
) -> Option<(Finding, Option<String>)> {
    match outcome {
        Outcome::NcclError {
            call,
            code,
            error,
            detail,
        } => {
            let text = format!(
                "{named} failed: {call} returned {code} ({error}){}",
                detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
            let f = Finding::fail(codes::ERROR, SUBJECT, text.clone())
                .with(ev.library.clone())
                .with(ev.warnings.clone())
                .fix(
                    Fix::new(
                        match which {
                            Library::Nccl => "Read NCCL's own warnings (the evidence) and its log: they name what failed (a NIC that cannot be opened, a CUDA driver older than the library's CUDA, a network that does not answer)",
                            Library::Rccl => "Read RCCL's own warnings (the evidence) and its log: they name what failed (a NIC that cannot be opened, a ROCm driver older than the library's HIP, a network that does not answer)",
                        },
                        "Reading only.",
                    )
                    .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify   # then read /tmp/nccl-verify/nccl.log"),
                );
            Some((f, Some(text)))
        }
        Outcome::Wrong {
            elements,
            wrong,
            rank,
            index,
            expected,
            got,
        } => {
            let text = format!(
                "{named}'s all-reduce over {ranks} rank(s) summed wrong: {wrong} of {} int32 elements differ; the first, rank {rank} element {index}: {got} instead of {expected}",
                elements * ranks.max(1) as u64
            );
            let f = Finding::fail(codes::ALL_REDUCE_WRONG, SUBJECT, text)
                .with(ev.library.clone())
                .fix(
                    Fix::new(
                        "Data was corrupted between the GPUs: run the write test and NCCL's own tests with checking on, and look for PCIe and NIC errors; an ACS setting or IOMMU on the path can corrupt peer-to-peer traffic",
                        "Reading and testing only; the tests move bytes between GPUs and NICs.",
                    )
                    .manual("gdrdoctor gdr-test -v")
                    .manual("all_reduce_perf -b 8 -e 128M -f 2 -g 1 -c 1   # nccl-tests, one process per GPU")
                    .manual("dmesg | grep -i -E 'aer|xid|mlx5' | tail -30"),
                );
            Some((f, None))
        }
        _ => None,
    }
}
