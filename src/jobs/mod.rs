//! Production truth (issue 42): what a job's NCCL decided about GPUDirect RDMA on a node, from
//! the logs the Slurm TaskProlog had it write (packaging/slurm/task-prolog.sh), as one journal
//! line ([`record`]); the journal appended to safely by several Epilogs at once ([`journal`]);
//! and many journals ranked by node and NIC ([`rank`]).
//!
//! The Epilog runs as root over a directory the job's user owns: every entry is opened and
//! removed relative to the directory opened once without following links
//! (`sys::dir`), only regular files are read, and everything read is bounded ([`Limits`]).

pub mod journal;
pub mod rank;

use crate::model::jobs::{
    Cause, Connections, JobRecord, Logs, MAX_CAUSES, MAX_RANKS, Prediction, Rank, SCHEMA,
    SCHEMA_VERSION, Status,
};
use crate::nccl::explain::{Collector, Explanation};
use crate::sys::dir::Dir;
use std::ffi::OsStr;
use std::io::Read as _;
use std::path::Path;

/// Who and where: the job as Slurm names it.
#[derive(Debug, Clone, Default)]
pub struct Job {
    pub id: String,
    pub user: Option<String>,
    pub node: String,
    pub job_nodes: Option<String>,
}

/// How much of a job's directory is read: a job of thousands of ranks, a log of gigabytes, or a
/// directory filled on purpose costs the Epilog at most this.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub files: usize,
    pub file_bytes: u64,
    pub total_bytes: u64,
    /// Reading stops here (the rest of the logs unread, the line says cut): the line is
    /// written within the Epilog's time whatever the logs hold.
    pub until: Option<std::time::Instant>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            files: 4096,
            file_bytes: 64 << 20,
            total_bytes: 1 << 30,
            until: None,
        }
    }
}

/// The file the TaskProlog leaves where the job set its own NCCL_DEBUG or NCCL_DEBUG_FILE.
pub const NOT_RECORDED: &str = "not-recorded";
/// Entries not read listed per line.
const MAX_REFUSED: usize = 8;
/// The causes that are the job's own choice, not the node's: a stricter NCCL_NET_GDR_LEVEL, and
/// NCCL's GDR read policy.
const JOB_CAUSES: &[&str] = &["level-from-env", "gdr-read-off"];

/// The journal line for `job` from its directory `dir`; with `remove`, the directory's files
/// are removed after (and the directory, once empty). Never fails: what could not be read is
/// the line's status and summary.
pub fn record(
    dir: &Path,
    job: Job,
    limits: Limits,
    predicted: Option<Prediction>,
    remove: bool,
    now: u64,
) -> JobRecord {
    let mut r = JobRecord {
        schema: SCHEMA.to_owned(),
        schema_version: SCHEMA_VERSION,
        time: now,
        job: clean(&job.id),
        user: job.user.as_deref().map(clean),
        node: clean(&job.node),
        job_nodes: job.job_nodes.as_deref().map(clean),
        status: Status::Error,
        summary: String::new(),
        nccl: None,
        connections: Connections::default(),
        ranks: Vec::new(),
        ranks_more: 0,
        causes: Vec::new(),
        env: Default::default(),
        logs: Logs::default(),
        predicted,
        contradicted: false,
    };
    let shown = crate::sanitize::text(&dir.to_string_lossy()).into_owned();
    let d = match Dir::open(dir) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            r.status = Status::NotRecorded;
            r.summary = format!(
                "not recorded: no directory {shown} (the TaskProlog made none: not configured, the jobs directory missing or not writable, or no task ran here)"
            );
            return r;
        }
        Err(e) => {
            r.summary = format!(
                "{shown} not read: {e} (a job's directory is read only as a directory, never through a link)"
            );
            return r;
        }
    };
    let (names, more) = match d.names(limits.files) {
        Ok(x) => x,
        Err(e) => {
            r.summary = format!("{shown} not listed: {e}");
            return r;
        }
    };
    r.logs.cut = more;
    let mut not_recorded = None;
    let mut collector = Collector::new();
    let mut total = 0u64;
    for name in &names {
        let n = name.to_string_lossy();
        let is_log = n.starts_with("nccl.") && n.ends_with(".log");
        if n != NOT_RECORDED && !is_log {
            continue;
        }
        let file = match d.open_file(name) {
            Ok(f) => f,
            Err(e) => {
                refuse(&mut r.logs, &n, &e.to_string());
                continue;
            }
        };
        if n == NOT_RECORDED {
            let mut text = String::new();
            let _ = file.take(512).read_to_string(&mut text);
            let first = text.lines().next().unwrap_or("not recorded").trim();
            not_recorded = Some(crate::sanitize::cut(first, 200));
            continue;
        }
        let late = limits.until.is_some_and(|u| std::time::Instant::now() >= u);
        if total >= limits.total_bytes || late {
            r.logs.cut = true;
            continue;
        }
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let take = limits.file_bytes.min(limits.total_bytes - total);
        r.logs.cut |= len > take;
        total += len.min(take);
        r.logs.files += 1;
        let mut timed = Timed {
            inner: file.take(take),
            until: limits.until,
            cut: false,
        };
        collector.read(&n, &mut timed);
        r.logs.cut |= timed.cut;
    }
    let explained = collector.finish();
    match explained {
        Ok(e) => from_explanation(&mut r, &e),
        Err(not) => {
            r.logs.bytes = not.inputs.iter().map(|i| i.bytes).sum();
            r.logs.lines = not.inputs.iter().map(|i| i.lines).sum();
            r.status = Status::NoNccl;
            r.summary = if r.logs.files == 0 {
                "not exercised: NCCL wrote no log on this node (the job did not start NCCL here)"
                    .to_owned()
            } else {
                format!(
                    "not exercised: the job's {} log file(s) hold no NCCL line",
                    r.logs.files
                )
            };
        }
    }
    if let Some(why) = not_recorded {
        if r.logs.files == 0 || r.status == Status::NoNccl {
            r.status = Status::NotRecorded;
            r.summary = why;
        } else {
            r.summary.push_str(&format!(" (some tasks: {why})"));
        }
    }
    r.contradicted = contradicted(&r);
    if remove {
        r.logs.removed = empty(&d, &mut r.logs);
        if r.logs.removed {
            // By path, as the directory was opened: a link there is not a directory to remove.
            r.logs.removed = std::fs::remove_dir(dir).is_ok();
        }
    }
    r
}

/// A reader that ends at `until`, noting that it did.
struct Timed<R> {
    inner: R,
    until: Option<std::time::Instant>,
    cut: bool,
}

impl<R: std::io::Read> std::io::Read for Timed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.until.is_some_and(|u| std::time::Instant::now() >= u) {
            self.cut = true;
            return Ok(0);
        }
        self.inner.read(buf)
    }
}

/// Text from the job (its id, user, node names): hostile characters escaped, length bounded.
fn clean(s: &str) -> String {
    crate::sanitize::cut(s, 256)
}

fn refuse(logs: &mut Logs, name: &str, why: &str) {
    if logs.refused.len() < MAX_REFUSED {
        logs.refused
            .push(format!("{}: {why}", crate::sanitize::cut(name, 100)));
    } else {
        logs.cut = true;
    }
}

/// Removes every entry (a directory inside is not, and stays), listing again until none is left
/// (a job of more files than one listing takes); `true` when the directory is empty.
fn empty(d: &Dir, logs: &mut Logs) -> bool {
    // Each round removes up to a listing's worth; a million entries end it whatever they are.
    for _ in 0..256 {
        let (names, more) = match d.names(4096) {
            Ok(x) => x,
            Err(e) => {
                refuse(logs, ".", &format!("not listed again: {e}"));
                return false;
            }
        };
        if names.is_empty() {
            return true;
        }
        let mut removed = 0;
        for name in &names {
            match d.remove(OsStr::new(name)) {
                Ok(()) => removed += 1,
                Err(e) => refuse(logs, &name.to_string_lossy(), &format!("not removed: {e}")),
            }
        }
        if removed < names.len() && !more {
            return false;
        }
        if removed == 0 {
            return false;
        }
    }
    false
}

/// Whether the node's check said ready and the job went without GDR for a cause of the node's.
fn contradicted(r: &JobRecord) -> bool {
    let ready = r.predicted.as_ref().is_some_and(|p| p.ready);
    let node_cause = r.causes.is_empty() || r.causes.iter().any(|c| !c.job_setting);
    ready && r.status.without_gdr() && node_cause
}

fn from_explanation(r: &mut JobRecord, e: &Explanation) {
    r.logs.bytes = e.inputs.iter().map(|i| i.bytes).sum();
    r.logs.lines = e.inputs.iter().map(|i| i.lines).sum();
    r.logs.nccl_lines = e.inputs.iter().map(|i| i.nccl_lines).sum();
    let v = &e.verdict;
    r.connections = Connections {
        net: v.net_connections,
        gdr: v.with_gdr,
        no_gdr: v.without_gdr,
    };
    r.status = match (v.net_connections, v.with_gdr) {
        (0, _) => Status::NotExercised,
        (n, g) if g == n => Status::Gdr,
        (_, 0) => Status::NoGdr,
        _ => Status::Partial,
    };
    r.summary = match r.status {
        // A log without a NET connection: not exercised, whatever NCCL decided at init.
        Status::NotExercised if v.exit_code == 3 => v.summary.clone(),
        Status::NotExercised => format!(
            "GPUDirect RDMA not exercised: {}",
            v.summary.trim_start_matches("nothing verified: ")
        ),
        _ => v.summary.clone(),
    };
    r.nccl = e
        .nodes
        .iter()
        .find_map(|n| n.nccl.version.clone())
        .map(|s| clean(&s));
    for node in &e.nodes {
        for (k, val) in &node.env {
            r.env
                .entry(clean(k))
                .or_insert_with(|| crate::sanitize::cut(val, 200));
        }
    }
    let job_setting = |cause: &str| {
        JOB_CAUSES.contains(&cause)
            || (cause == "sockets"
                && (r.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1")
                    || r.env.get("NCCL_NET").is_some_and(|v| v == "Socket")))
    };
    for d in e.diagnoses.iter().take(MAX_CAUSES) {
        r.causes.push(Cause {
            cause: d.cause.to_owned(),
            subject: crate::sanitize::cut(&d.subject, 200),
            see: d
                .see
                .iter()
                .map(|s| format!("{}/{}", s.check, s.code))
                .collect(),
            job_setting: job_setting(d.cause),
            connections: d.connections,
        });
    }
    for node in &e.nodes {
        for c in &node.connections {
            if r.ranks.len() == MAX_RANKS {
                r.ranks_more += 1;
                continue;
            }
            let nic_name = node
                .nics
                .iter()
                .find(|n| n.net == c.net && n.index == c.nic)
                .map(|n| n.name.clone())
                .filter(|n| !n.is_empty());
            let cause = (!c.gdr)
                .then(|| {
                    e.diagnoses
                        .iter()
                        .find(|d| d.ranks.contains(&c.rank) && d.nodes.contains(&node.name))
                        .map(|d| d.cause.to_owned())
                })
                .flatten();
            r.ranks.push(Rank {
                host: node.name.clone(),
                rank: c.rank,
                gpu: c.bus.clone(),
                cuda_dev: c.cuda_dev,
                net: c.net.clone(),
                nic: c.nic,
                nic_name,
                gdr: c.gdr,
                cause,
            });
        }
    }
}

/// What the node's own check said: the `verdict` of a report written with `--output
/// json:FILE` (the Prolog's), read up to 16 MiB; `None` when there is none to read.
pub fn prediction(path: &Path) -> Option<Prediction> {
    let input = crate::input::open(path).ok()?;
    let time = input.modified().max(0) as u64;
    let bytes = input.read_all(16 << 20).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let verdict = v.get("verdict")?;
    Some(Prediction {
        report: crate::sanitize::text(&path.to_string_lossy()).into_owned(),
        ready: verdict.get("ready")?.as_bool()?,
        state: clean(verdict.get("state")?.as_str()?),
        summary: crate::sanitize::cut(verdict.get("summary")?.as_str().unwrap_or(""), 300),
        time,
    })
}
