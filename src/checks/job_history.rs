//! `job-history`: what the node's last jobs' NCCL did about GPUDirect RDMA (the job journal the
//! Slurm Epilog keeps, docs/jobs.md), held against what the node's own check had said before
//! each: a node whose jobs ran without GDR though it was called ready is the prediction
//! contradicted, whatever this run finds.
//!
//! Judged on the newest job that used NCCL's network: an older contradiction that a later job
//! did not repeat is shown, not judged. Nothing here depends on the time of the run, so that a
//! capture is judged as the node was.

use super::Rule;
use super::{Check, Context, Meta};
use crate::model::Action;
use crate::model::jobs::{History, RecentJob, Status as JobStatus};
use crate::model::{Code, Finding, Fix};
use crate::parse::time::rfc3339;

pub struct JobHistory;

const AS_PREDICTED: Code = Code {
    id: "jobs-as-predicted",
    summary: "the newest job that used NCCL's network used GPUDirect RDMA, or went without it for a reason the node's check had named or the job had chosen",
};
const CONTRADICTED: Code = Code {
    id: "jobs-without-gdr",
    summary: "the newest job that used NCCL's network ran without GPUDirect RDMA on this node though the node's check had said ready before it",
};
const NONE: Code = Code {
    id: "jobs-none-recorded",
    summary: "no job recorded on this node used NCCL's network (or the Slurm Epilog keeps no journal here)",
};
const UNREADABLE: Code = Code {
    id: "jobs-journal-unreadable",
    summary: "the node's recent jobs' file could not be read",
};

const CODES: &[Code] = &[AS_PREDICTED, CONTRADICTED, NONE, UNREADABLE];

/// docs/actions.md says why.
const ACTIONS: &[Rule] = &[
    Rule::new(AS_PREDICTED, Action::None),
    Rule::new(CONTRADICTED, Action::FixInPlace),
    Rule::new(NONE, Action::None),
    Rule::new(UNREADABLE, Action::None),
];

const META: Meta = Meta {
    id: "job-history",
    title: "Jobs' NCCL used GPUDirect RDMA where this node's check said it would",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/job-history/README.md"),
    live_only: false,
    reads: &[],
};

const SUBJECT: &str = "jobs on this node";

impl Check for JobHistory {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let (path, jobs) = match &cx.inv.jobs {
            History::Absent { path } => {
                return vec![
                    Finding::skip(
                        NONE,
                        SUBJECT,
                        format!(
                            "no recent jobs' file ({path}): no job has ended here since the Slurm TaskProlog and Epilog were set up, or they are not (docs/jobs.md)"
                        ),
                    )
                    .evidence(path.clone(), "absent"),
                ];
            }
            History::Unreadable { path, reason } => {
                return vec![
                    Finding::unknown(
                        UNREADABLE,
                        SUBJECT,
                        format!("{path} could not be read: {reason}"),
                    )
                    .evidence(path.clone(), reason.clone()),
                ];
            }
            History::Read { path, jobs } => (path, jobs),
        };
        let exercised: Vec<&RecentJob> = jobs.iter().filter(|j| j.status.exercised()).collect();
        let Some(newest) = exercised.last() else {
            return vec![
                Finding::skip(
                    NONE,
                    SUBJECT,
                    format!(
                        "none of the {} jobs recorded here used NCCL's network (not exercised, or not recorded): nothing to hold against the check",
                        jobs.len()
                    ),
                )
                .evidence(path.clone(), format!("{} jobs", jobs.len())),
            ];
        };
        let earlier: Vec<&&RecentJob> = exercised
            .iter()
            .rev()
            .skip(1)
            .filter(|j| j.contradicted)
            .collect();
        let also = match earlier.len() {
            0 => String::new(),
            n => format!(
                "; {n} earlier of the last {} such jobs likewise (job {})",
                exercised.len(),
                ids(&earlier)
            ),
        };
        let at = format!("job {} at {}", newest.job, rfc3339(newest.time));
        let evidence = format!(
            "{at}: {} ({}); the check before it: {}",
            newest.status.as_str(),
            newest.summary,
            match newest.predicted_ready {
                Some(true) => "ready",
                Some(false) => "not ready",
                None => "not kept",
            }
        );
        if newest.contradicted {
            let causes = causes(newest);
            let checks = checks_of(newest);
            let fix = Fix::new(
                "Find what the node's check missed: run the checks the cause names, read the jobs, then fix what they find",
                "Reads only; the journal keeps every job's line",
            )
            .inspect(format!(
                "gdrdoctor check{}",
                if checks.is_empty() {
                    String::new()
                } else {
                    format!(" --select {}", checks.join(","))
                }
            ))
            .inspect("gdrdoctor jobs /var/lib/gdrdoctor/jobs.jsonl --since 7d");
            return vec![
                Finding::warn(
                    CONTRADICTED,
                    SUBJECT,
                    format!(
                        "{at} ran without GPUDirect RDMA here though the node's check had said ready: {}; {causes}{also}. The prediction is contradicted: what NCCL saw, the check did not (a peer-memory module unloaded since, a job environment or container the check does not see); warn by default, fail where the site sets `severity: {{jobs-without-gdr: fail}}`",
                        newest.summary
                    ),
                )
                .evidence(path.clone(), evidence)
                .fix(fix),
            ];
        }
        let why = match (newest.status, newest.predicted_ready) {
            (JobStatus::Gdr, _) => "used GPUDirect RDMA on every NET connection".to_owned(),
            (_, Some(false)) => format!(
                "ran without GPUDirect RDMA ({}), as the node's check had said it would: the check's own findings are the cause",
                newest.summary
            ),
            (_, None) => format!(
                "ran without GPUDirect RDMA ({}; {}); the node's check before it was not kept, so there is no prediction to hold it against",
                newest.summary,
                causes(newest)
            ),
            _ => format!(
                "ran without GPUDirect RDMA for the job's own setting ({}): not the node's",
                causes(newest)
            ),
        };
        let also = if earlier.is_empty() {
            String::new()
        } else {
            format!(
                " ({} earlier without GDR where the check had said ready: job {}; the newest did not repeat it)",
                earlier.len(),
                ids(&earlier)
            )
        };
        vec![
            Finding::pass(
                AS_PREDICTED,
                SUBJECT,
                format!("the newest job that used NCCL's network, {at}, {why}{also}"),
            )
            .evidence(path.clone(), evidence),
        ]
    }
}

/// `1002, job 1001`: the jobs' ids, for "job {ids}".
fn ids(jobs: &[&&RecentJob]) -> String {
    jobs.iter()
        .map(|j| j.job.as_str())
        .collect::<Vec<_>>()
        .join(", job ")
}

/// `cause no-peer-memory (see peer-memory/peermem-not-loaded)`, each cause once.
fn causes(j: &RecentJob) -> String {
    if j.causes.is_empty() {
        return "no cause the log names".to_owned();
    }
    let all: Vec<String> = j
        .causes
        .iter()
        .map(|c| {
            let own = if c.job_setting { ", the job's own" } else { "" };
            if c.see.is_empty() {
                format!("cause {}{own}", c.cause)
            } else {
                format!("cause {}{own} (see {})", c.cause, c.see.join(", "))
            }
        })
        .collect();
    all.join("; ")
}

/// The gdrdoctor checks the newest job's causes name, once each, in their order.
fn checks_of(j: &RecentJob) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &j.causes {
        for s in &c.see {
            let check = s.split('/').next().unwrap_or(s).to_owned();
            if !out.contains(&check) {
                out.push(check);
            }
        }
    }
    out
}
