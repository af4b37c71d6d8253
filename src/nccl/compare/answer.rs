//! NCCL's answer, per GPU and in one line, and the findings: the answer itself
//! (`nccl-uses-gdr`, `nccl-no-gdr`, `nccl-gdr-unknown`), what both sides agree on
//! (`nccl-agrees`), and each difference (`nccl-disagrees`).

use super::codes;
use super::facts::check_of;
use super::sides::Sides;
use super::{Comparison, GpuUse, NcclAnswer, RunEvidence, SUBJECT, name_ranges};
use crate::model::nccl::{Library, Outcome, Run};
use crate::model::{Evidence, Finding, Fix};
use crate::nccl::explain::{ConnGroup, Node};

/// Per GPU: does NCCL use GDR? Its NET connections say so; failing those, its decisions for
/// the GPU's pairs; on sockets, never.
pub(super) fn gpu_uses(s: &Sides) -> Vec<GpuUse> {
    let Some((_, node)) = s.log else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (rank, bus) in &s.ranks {
        let use_ = if s.network.as_deref() == Some("Socket") {
            GpuUse {
                rank: *rank,
                bus_id: bus.clone(),
                gdr: Some(false),
                nics: Vec::new(),
                basis: "network",
            }
        } else {
            let groups: Vec<&ConnGroup> = node
                .connections
                .iter()
                .filter(|c| c.rank == *rank)
                .collect();
            if !groups.is_empty() {
                let mut nics: Vec<String> = groups
                    .iter()
                    .filter(|c| c.gdr)
                    .map(|c| {
                        s.rdma_nic(c.nic)
                            .map(|n| n.name.clone())
                            .unwrap_or_else(|| format!("NET/{}/{}", c.net, c.nic))
                    })
                    .collect();
                nics.sort();
                nics.dedup();
                GpuUse {
                    rank: *rank,
                    bus_id: bus.clone(),
                    gdr: Some(groups.iter().all(|c| c.gdr)),
                    nics,
                    basis: "connections",
                }
            } else {
                decided(s, node, *rank, bus)
            }
        };
        out.push(use_);
    }
    out
}

/// A GPU without NET connections in the log: NCCL's decisions for its pairs, or for the NICs.
fn decided(s: &Sides, node: &Node, rank: u32, bus: &str) -> GpuUse {
    let mine: Vec<(&str, Option<bool>)> = s
        .pairs
        .iter()
        .filter(|p| p.bus == bus)
        .map(|p| (p.nic.name.as_str(), p.gdr))
        .collect();
    let nics: Vec<String> = mine
        .iter()
        .filter(|(_, g)| *g == Some(true))
        .map(|(n, _)| (*n).to_owned())
        .collect();
    let gdr = if !nics.is_empty() {
        Some(true)
    } else if (!mine.is_empty() && mine.iter().all(|(_, g)| *g == Some(false)))
        || mine.is_empty()
            && node
                .nics
                .iter()
                .any(|n| n.net != "Socket" && n.gdr == "disabled")
            && !node
                .nics
                .iter()
                .any(|n| n.net != "Socket" && n.gdr == "enabled")
    {
        Some(false)
    } else {
        None
    };
    GpuUse {
        rank,
        bus_id: bus.to_owned(),
        gdr,
        nics,
        basis: "decision",
    }
}

/// The answer from the GPUs': whether NCCL uses GDR, on which NICs, and the line that says so
/// (`failed`: the text of a failed NCCL call, which is the answer then).
pub(super) fn conclude(answer: &mut NcclAnswer, s: &Sides, named: &str, failed: Option<&str>) {
    let gpus = &answer.gpus;
    answer.uses_gdr = if gpus.is_empty() {
        None
    } else if gpus.iter().all(|g| g.gdr == Some(true)) {
        Some(true)
    } else if gpus.iter().any(|g| g.gdr == Some(false)) {
        Some(false)
    } else {
        None
    };
    let mut gdr_nics: Vec<String> = gpus.iter().flat_map(|g| g.nics.iter().cloned()).collect();
    gdr_nics.sort_by_key(|a| natural(a));
    gdr_nics.dedup();
    answer.gdr_nics = gdr_nics;
    let without: Vec<&str> = gpus
        .iter()
        .filter(|g| g.gdr == Some(false))
        .map(|g| g.bus_id.as_str())
        .collect();
    let unsaid: Vec<&str> = gpus
        .iter()
        .filter(|g| g.gdr.is_none())
        .map(|g| g.bus_id.as_str())
        .collect();
    let first_cause = s
        .run
        .explanation
        .as_ref()
        .and_then(|e| e.diagnoses.first())
        .map(|d| format!("{}: {}", d.subject, d.message));
    let text = if let Some(text) = failed {
        text.to_owned()
    } else if let Some(why) = &s.socket_why {
        format!("{named} falls back to NET/Socket: {why}")
    } else if answer.uses_gdr == Some(true) {
        format!(
            "{named} on this node uses GDR on {}",
            name_ranges(&answer.gdr_nics)
        )
    } else if !without.is_empty() && without.len() == gpus.len() {
        format!(
            "{named} on this node does not use GDR: {}",
            first_cause
                .clone()
                .unwrap_or_else(|| format!("{} turned it off", s.run.library.name()))
        )
    } else if !without.is_empty() {
        format!(
            "{named} on this node uses GDR on {} for {} of {} GPUs, not for GPU {}: {}",
            name_ranges(&answer.gdr_nics),
            gpus.len() - without.len(),
            gpus.len(),
            without.join(", "),
            first_cause
                .clone()
                .unwrap_or_else(|| format!("{} turned it off", s.run.library.name()))
        )
    } else if s.log.is_none() {
        format!(
            "{named} ran, but its log says nothing: {}",
            s.run
                .log
                .note
                .clone()
                .unwrap_or_else(|| format!("no {} line", s.run.library.name()))
        )
    } else {
        format!(
            "{named} did not say whether it uses GDR for GPU {}",
            unsaid.join(", ")
        )
    };
    answer.text = text;
}

/// The answer as a finding: GDR on every GPU, not on some (with the cause `nccl explain`
/// found and its fix), or not said.
pub(super) fn finding(
    answer: &NcclAnswer,
    run: &Run,
    outcome: &Outcome,
    ranks: usize,
    ev: &RunEvidence,
) -> Finding {
    let all_reduce = match outcome {
        Outcome::Ok { elements } => {
            format!("; the all-reduce over {ranks} rank(s) summed right ({elements} int32 each)")
        }
        _ => String::new(),
    };
    let message = format!("{}{all_reduce}", answer.text);
    let mut evidence = ev.library.clone();
    evidence.extend(ev.warnings.iter().cloned());
    match answer.uses_gdr {
        Some(true) => Finding::pass(codes::USES_GDR, SUBJECT, message).with(evidence),
        Some(false) => no_gdr(message, evidence, run),
        None => Finding::unknown(codes::GDR_UNKNOWN, SUBJECT, message)
            .with(evidence)
            .fix(
                Fix::new(
                    match run.library {
                        Library::Nccl => "Rerun with --log-dir DIR and read NCCL's log: an NCCL newer than this gdrdoctor may word its decisions differently",
                        Library::Rccl => "Rerun with --log-dir DIR and read RCCL's log: an RCCL newer than this gdrdoctor may word its decisions differently",
                    },
                    "Reading only.",
                )
                .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify"),
            ),
    }
}

/// `nccl-no-gdr`, with the first cause `nccl explain` found in NCCL's log and its fix.
fn no_gdr(message: String, evidence: Vec<Evidence>, run: &Run) -> Finding {
    let d = run.explanation.as_ref().and_then(|e| e.diagnoses.first());
    let mut f = Finding::fail(codes::NO_GDR, SUBJECT, message).with(evidence);
    let fix = match d {
        Some(d) => {
            let mut fix = Fix::new(
                d.fix.clone(),
                "As the fix of the check named: `gdrdoctor explain CODE` says what it changes.",
            );
            for s in &d.see {
                fix = fix.manual(format!("gdrdoctor explain {}", s.code));
            }
            fix
        }
        None => Fix::new(
            format!(
                "Read {}'s log for why it turned GDR off (rerun with --log-dir DIR), and the checks that judge the GPU memory path and placement",
                run.library.name()
            ),
            "Reading only.",
        )
        .manual("gdrdoctor check --select peer-memory,pcie-placement -v"),
    };
    f = f.fix(fix);
    if let Some(d) = d {
        f = f.evidence(
            "gdrdoctor nccl explain",
            format!(
                "{}{}",
                d.cause,
                if d.see.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (see {})",
                        d.see
                            .iter()
                            .map(|s| format!("{}: {}", s.check, s.code))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
        );
    }
    f
}

/// `nccl-agrees`: what both sides see alike, counted by fact, when anything is.
pub(super) fn agreed(comparisons: &[Comparison], name: &str) -> Option<Finding> {
    let agreed: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| c.agree == Some(true))
        .collect();
    if agreed.is_empty() {
        return None;
    }
    let count = |fact: &str| agreed.iter().filter(|c| c.fact == fact).count();
    let mut what = Vec::new();
    if let Some(c) = agreed.iter().find(|c| c.fact == "network") {
        what.push(format!("the network ({})", c.nccl));
    }
    if let Some(c) = agreed.iter().find(|c| c.fact == "nics") {
        what.push(format!("the RDMA NICs ({})", c.nccl));
    }
    if count("hca-gdr") > 0 {
        what.push(format!("{} NIC GDR decision(s)", count("hca-gdr")));
    }
    let dumped = agreed
        .iter()
        .filter(|c| c.fact.starts_with("topo-"))
        .count();
    if dumped > 0 {
        what.push(format!("{dumped} fact(s) of its topology dump"));
    }
    if count("gpu-nic") > 0 {
        what.push(format!("{} GPU-NIC path(s)", count("gpu-nic")));
    }
    Some(
        Finding::pass(
            codes::AGREES,
            SUBJECT,
            format!("{name} agrees with gdrdoctor on {}", what.join(", ")),
        )
        .with(
            agreed
                .iter()
                .map(|c| Evidence {
                    path: c.subject.clone(),
                    value: format!("{name}: {}; gdrdoctor: {}", c.nccl, c.gdrdoctor),
                })
                .take(16),
        ),
    )
}

/// `nccl-disagrees`, one per fact the sides see differently, sending the operator to the
/// check that judges it.
pub(super) fn disagreements(comparisons: &[Comparison], name: &str) -> Vec<Finding> {
    comparisons
        .iter()
        .filter(|c| c.agree == Some(false))
        .map(|c| {
            let check = check_of(c.fact);
            Finding::warn(
                codes::DISAGREES,
                c.subject.clone(),
                format!(
                    "{name} and gdrdoctor differ on {}: {name}: {}; gdrdoctor: {}{}",
                    c.subject,
                    c.nccl,
                    c.gdrdoctor,
                    c.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
            )
            .with(c.evidence.iter().cloned())
            .fix(
                Fix::new(
                    format!(
                        "Find out which side is wrong: {name}'s own log and topology dump (--log-dir) against the {check} check's evidence; an NCCL_* setting in the environment or /etc/nccl.conf, an NCCL_TOPO_FILE, or a virtual PCI tree can make {name} see the node differently"
                    ),
                    "Reading only.",
                )
                .manual("gdrdoctor nccl verify -v --log-dir /tmp/nccl-verify")
                .manual(format!("gdrdoctor check --select {check} -v")),
            )
        })
        .collect()
}

/// `mlx5_10` after `mlx5_9`.
fn natural(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (p, d) = s.split_at(s.len() - digits);
    (p.to_owned(), d.parse().unwrap_or(0))
}
