//! `--format nfd`: a Node Feature Discovery feature file (its `local` source reads
//! `/etc/kubernetes/node-feature-discovery/features.d/*`; each `name=value` line becomes the
//! node label `feature.node.kubernetes.io/name=value`).
//!
//! Only fixed vocabulary goes into names and values (check IDs, statuses, `dmabuf`/`peermem`),
//! so every line is a valid label whatever the node holds.

use super::Report;
use crate::model::Status;

pub fn render(report: &Report) -> String {
    let v = &report.verdict;
    let mut out = String::new();
    out.push_str("# gdrdoctor: GPUDirect RDMA readiness (gdrdoctor check --format nfd)\n");
    out.push_str(&format!("gdr.ready={}\n", v.ready));
    out.push_str(&format!("gdr.verified={}\n", v.verified));
    out.push_str(&format!("gdr.path={}\n", path(report)));
    for c in &report.checks {
        out.push_str(&format!("gdr.check.{}={}\n", c.id, c.status));
    }
    out
}

/// Which GPUDirect RDMA path NCCL can use, as the peer-memory check found it: `dmabuf`,
/// `peermem`, `mixed` (GPUs differ), `none` (the check failed), `unknown`.
pub fn path(report: &Report) -> &'static str {
    let Some(c) = report.checks.iter().find(|c| c.id == "peer-memory") else {
        return "unknown";
    };
    let has = |code: &str| {
        c.findings
            .iter()
            .any(|f| f.code == code && !matches!(f.status, Status::Fail | Status::Skip))
    };
    match (has("gdr-path-dmabuf"), has("gdr-path-peermem")) {
        (true, true) => "mixed",
        (true, false) => "dmabuf",
        (false, true) => "peermem",
        (false, false) if c.status == Status::Fail => "none",
        (false, false) => "unknown",
    }
}
