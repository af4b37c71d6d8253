//! `--format nfd`: a Node Feature Discovery feature file (its `local` source reads
//! `/etc/kubernetes/node-feature-discovery/features.d/*`; each `name=value` line becomes a node
//! label).
//!
//! Only fixed vocabulary goes into names and values (check IDs, statuses, `dmabuf`/`peermem`),
//! so every line is a valid label whatever the node holds.

use super::Report;
use crate::model::Status;

/// Names carry NFD's default namespace in full: NFD adds it to bare names today, and refuses
/// bare names once its `DisableAutoPrefix` gate is on; written out, the label is the same both
/// ways.
pub const PREFIX: &str = "feature.node.kubernetes.io/";

/// `expires`: Unix seconds after which NFD drops the labels (`# +expiry-time=`, NFD 0.14 and
/// later), so that a node whose checker stopped does not keep its last verdict forever.
pub fn render(report: &Report, expires: Option<u64>) -> String {
    let v = &report.verdict;
    let mut out = String::new();
    out.push_str("# gdrdoctor: GPUDirect RDMA readiness (gdrdoctor check --format nfd)\n");
    if let Some(t) = expires {
        out.push_str(&format!(
            "# +expiry-time={}\n",
            crate::parse::time::rfc3339(t)
        ));
    }
    out.push_str(&format!("{PREFIX}gdr.ready={}\n", v.ready));
    out.push_str(&format!("{PREFIX}gdr.verified={}\n", v.verified));
    out.push_str(&format!("{PREFIX}gdr.state={}\n", v.state.as_str()));
    out.push_str(&format!("{PREFIX}gdr.path={}\n", path(report)));
    for c in &report.checks {
        out.push_str(&format!("{PREFIX}gdr.check.{}={}\n", c.id, c.status));
    }
    out
}

/// Which GPUDirect RDMA path NCCL can use, as the peer-memory check found it: `dmabuf`,
/// `peermem`, `mixed` (GPUs differ), `none` (no path), `no-gpu`, `unknown` (not judged). The
/// fleet view uses the same words.
pub fn path(report: &Report) -> &'static str {
    let Some(c) = report.checks.iter().find(|c| c.id == "peer-memory") else {
        return "unknown";
    };
    // "No GPU" only when the GPUs could be looked for.
    let gpus_unknown = report
        .checks
        .iter()
        .any(|c| c.id == "gpu-driver" && c.status == Status::Unknown);
    let has = |code: &str| {
        c.findings
            .iter()
            .any(|f| f.code == code && !matches!(f.status, Status::Fail | Status::Skip))
    };
    let none = [
        "peermem-not-loaded",
        "peermem-not-registered",
        "amd-no-gdr-path",
    ];
    match (has("gdr-path-dmabuf"), has("gdr-path-peermem")) {
        (true, true) => "mixed",
        (true, false) => "dmabuf",
        (false, true) => "peermem",
        (false, false) if c.findings.iter().any(|f| none.contains(&f.code)) => "none",
        (false, false) if gpus_unknown => "unknown",
        (false, false) if c.findings.iter().any(|f| f.code == "peer-memory-no-gpu") => "no-gpu",
        (false, false) if c.status == Status::Fail => "none",
        (false, false) => "unknown",
    }
}
