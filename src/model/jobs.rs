//! The job journal (issue 42): one line of JSON per job and node, written by the Slurm Epilog
//! through `gdrdoctor jobs record`, saying what NCCL itself decided about GPUDirect RDMA for the
//! job's ranks on the node; and what `gdrdoctor jobs` makes of many such lines. The fields are
//! documented, with their version, in docs/jobs.md.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: &str = "gdrdoctor.job";
pub const SCHEMA_VERSION: u32 = 1;

/// What a job's NCCL did about GDR on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Every NET connection of the node's ranks used GPUDirect RDMA.
    Gdr,
    /// Some did, some did not.
    Partial,
    /// None did.
    NoGdr,
    /// NCCL ran without a NET connection (one node: P2P and shared memory): GDR not exercised.
    NotExercised,
    /// No NCCL log was written: the job did not start NCCL on this node.
    NoNccl,
    /// The job set NCCL_DEBUG or NCCL_DEBUG_FILE itself: nothing was recorded.
    NotRecorded,
    /// The logs could not be read (the reason is in `summary`).
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Gdr => "gdr",
            Status::Partial => "partial",
            Status::NoGdr => "no-gdr",
            Status::NotExercised => "not-exercised",
            Status::NoNccl => "no-nccl",
            Status::NotRecorded => "not-recorded",
            Status::Error => "error",
        }
    }

    /// Whether the job's NCCL used the network between nodes: only then does it say anything
    /// about GDR.
    pub fn exercised(self) -> bool {
        matches!(self, Status::Gdr | Status::Partial | Status::NoGdr)
    }

    /// Whether some NET connection went without GDR.
    pub fn without_gdr(self) -> bool {
        matches!(self, Status::Partial | Status::NoGdr)
    }
}

/// One journal line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobRecord {
    /// Always `gdrdoctor.job`.
    pub schema: String,
    pub schema_version: u32,
    /// When the line was written (the job's end), seconds since the epoch.
    pub time: u64,
    pub job: String,
    pub user: Option<String>,
    /// The node this line is about (the Epilog's node).
    pub node: String,
    /// Every node of the job, as Slurm wrote them (a host list: `node[17-18]`).
    pub job_nodes: Option<String>,
    pub status: Status,
    /// One line: what was decided, or why nothing was.
    pub summary: String,
    /// The NCCL (or RCCL) release the log names.
    pub nccl: Option<String>,
    pub connections: Connections,
    /// Each rank's NET connections to one NIC, at most [`MAX_RANKS`].
    pub ranks: Vec<Rank>,
    /// Ranks left out past [`MAX_RANKS`].
    pub ranks_more: u64,
    /// Why GDR was not used, per cause (gdrdoctor's `nccl explain` causes).
    pub causes: Vec<Cause>,
    /// The NCCL settings the log shows that change GDR decisions (NCCL_NET_GDR_LEVEL, ...).
    pub env: BTreeMap<String, String>,
    pub logs: Logs,
    /// What the node's own check said before the job (the Prolog's report), when it was kept.
    pub predicted: Option<Prediction>,
    /// The check said ready, and the job's NCCL went without GDR for a cause that is not the
    /// job's own setting.
    pub contradicted: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Connections {
    pub net: u64,
    pub gdr: u64,
    pub no_gdr: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rank {
    /// The host NCCL printed in the line's prefix.
    pub host: String,
    pub rank: u32,
    /// The GPU's PCI bus id, where the log names it.
    pub gpu: Option<String>,
    pub cuda_dev: Option<u32>,
    /// `IB`, `Socket`, a plugin's name.
    pub net: String,
    pub nic: u32,
    /// The NIC's device name (`mlx5_0`), where the log names it.
    pub nic_name: Option<String>,
    pub gdr: bool,
    /// The cause, where GDR was not used and one is known.
    pub cause: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cause {
    pub cause: String,
    /// What it is about (`GPU 18000 -> NIC 0`).
    pub subject: String,
    /// The gdrdoctor checks and codes that explain it (`pcie-placement/gpu-nic-too-far`); empty
    /// where the cause is the job's own setting.
    pub see: Vec<String>,
    /// Whether the cause is the job's own choice (NCCL_NET_GDR_LEVEL stricter than the default,
    /// NCCL's read policy), not the node's.
    pub job_setting: bool,
    pub connections: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Logs {
    /// Files read.
    pub files: u64,
    pub bytes: u64,
    pub lines: u64,
    pub nccl_lines: u64,
    /// Files, or bytes of them, left unread past the limits (so the verdict stands on a part).
    pub cut: bool,
    /// Entries not read and why (`x.log: a FIFO, not a regular file`), at most a few.
    pub refused: Vec<String>,
    /// Whether the raw files were removed after.
    pub removed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prediction {
    /// The report read (the Prolog's `--output json:FILE`).
    pub report: String,
    pub ready: bool,
    pub state: String,
    pub summary: String,
    /// The report's modification time, seconds since the epoch.
    pub time: u64,
}

/// Ranks kept per line.
pub const MAX_RANKS: usize = 1024;
/// Causes kept per line.
pub const MAX_CAUSES: usize = 32;

/// One node, or one NIC of a node, across the journal: how its jobs went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Tally {
    pub node: String,
    /// The NIC (`mlx5_0`, or `NIC 0` where the log gave no name); absent for a node's row.
    pub nic: Option<String>,
    /// Jobs whose NCCL used the network.
    pub exercised: u64,
    pub with_gdr: u64,
    /// Jobs with a NET connection without GDR.
    pub without_gdr: u64,
    /// Of those, the ones where the node's check had said ready (and the cause was not the job's).
    pub contradicted: u64,
    pub not_exercised: u64,
    pub not_recorded: u64,
    /// The cause that repeats most among the jobs without GDR, and how many jobs had it.
    pub top_cause: Option<(String, u64)>,
    /// The gdrdoctor check/code of that cause.
    pub see: Vec<String>,
    /// The last job without GDR.
    pub last_job: Option<String>,
    pub last_time: Option<u64>,
}

/// What `gdrdoctor jobs` answers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Ranking {
    pub schema: &'static str,
    pub schema_version: u32,
    /// The time range the lines were taken from (seconds since the epoch), as asked.
    pub since: Option<u64>,
    pub until: Option<u64>,
    /// Lines read, lines taken (in the range), lines that were not journal lines.
    pub lines: u64,
    pub taken: u64,
    pub malformed: u64,
    /// The first lines that were not journal lines: `FILE:LINE: why`.
    pub malformed_examples: Vec<String>,
    pub jobs: u64,
    /// Nodes, worst first (most jobs without GDR, then contradicted, then name).
    pub nodes: Vec<Tally>,
    /// NICs, worst first.
    pub nics: Vec<Tally>,
}

/// The node's last jobs, as the Epilog keeps them for the `job-history` check: a small file
/// rewritten with each journal line (`jobs record --recent`), read through the root like every
/// other file, so that a capture carries it.
pub const RECENT_PATH: &str = "/var/lib/gdrdoctor/jobs-recent.json";
pub const RECENT_SCHEMA: &str = "gdrdoctor.jobs-recent";
/// Jobs kept in it, newest last.
pub const RECENT_MAX: usize = 16;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecentFile {
    pub schema: String,
    pub schema_version: u32,
    pub jobs: Vec<RecentJob>,
}

/// A journal line, without its ranks.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecentJob {
    pub job: String,
    pub time: u64,
    pub status: Status,
    pub summary: String,
    pub connections: Connections,
    pub causes: Vec<Cause>,
    /// What the node's check said before the job, where it was kept.
    pub predicted_ready: Option<bool>,
    pub contradicted: bool,
}

impl From<&JobRecord> for RecentJob {
    fn from(r: &JobRecord) -> Self {
        RecentJob {
            job: r.job.clone(),
            time: r.time,
            status: r.status,
            summary: r.summary.clone(),
            connections: r.connections.clone(),
            causes: r.causes.clone(),
            predicted_ready: r.predicted.as_ref().map(|p| p.ready),
            contradicted: r.contradicted,
        }
    }
}

/// What the `job-history` check reads.
#[derive(Debug, Clone)]
pub enum History {
    /// No file: no job recorded here (or the Epilog is not set up).
    Absent {
        path: String,
    },
    Unreadable {
        path: String,
        reason: String,
    },
    Read {
        path: String,
        jobs: Vec<RecentJob>,
    },
}
