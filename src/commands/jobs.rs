//! `gdrdoctor jobs JOURNAL...`: the job journal ranked by node and NIC; `gdrdoctor jobs record
//! DIR`: one job's NCCL logs made a journal line (what the Slurm Epilog runs; docs/jobs.md).

use super::{Formats, Global};
use crate::jobs::{self, Job, Limits, journal, rank};
use crate::report::Format;
use crate::report::jobs as render;
use anyhow::bail;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(flatten)]
    rank: RankArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Args, Debug)]
struct RankArgs {
    /// Journal files (`jobs record --journal`; FILE.1 is the one rotated before).
    #[arg(value_name = "JOURNAL")]
    journals: Vec<PathBuf>,
    /// Only jobs recorded at or after this time: seconds since the epoch, YYYY-MM-DD[THH:MM[:SS]]
    /// (UTC), or an age (90m, 24h, 7d).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Only jobs recorded at or before this time (the same forms).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    #[arg(long, default_value_t = Format::Human, value_parser = FORMATS)]
    format: Format,
}

/// A ranking for people, one JSON document, one CSV row per node and per NIC.
const FORMATS: Formats = Formats(&[(Format::Human, ""), (Format::Json, ""), (Format::Csv, "")]);

#[derive(Subcommand, Debug)]
enum Command {
    /// Read one job's NCCL logs (the files the TaskProlog had NCCL write in DIR), append one
    /// JSON line for the job on this node to the journal, and write the last job's metrics for
    /// node_exporter's textfile collector. Exit 0: the line was written (whatever the job did);
    /// 2: it could not be; 3: it was, but the textfile or the recent jobs' file was not.
    Record(RecordArgs),
}

#[derive(clap::Args, Debug)]
struct RecordArgs {
    /// The job's log directory (GDRDOCTOR_JOBS_DIR/JOBID).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// The journal to append to (JSON lines; docs/jobs.md).
    #[arg(long, value_name = "FILE")]
    journal: PathBuf,
    /// Move the journal to FILE.1 once it reaches this many MiB (so it takes at most twice
    /// that).
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    journal_max_mib: u64,
    /// Keep the node's last jobs in this file too, for the `job-history` check (it reads
    /// /var/lib/gdrdoctor/jobs-recent.json).
    #[arg(long, value_name = "FILE")]
    recent: Option<PathBuf>,
    /// Write the last job's metrics here (a .prom file in node_exporter's textfile directory).
    #[arg(long, value_name = "FILE")]
    textfile: Option<PathBuf>,
    /// The node's own check before the job (the Prolog's `--output json:FILE`): a job without
    /// GDR on a node it called ready is marked contradicted.
    #[arg(long, value_name = "REPORT")]
    predicted: Option<PathBuf>,
    /// Remove the logs and the directory after reading them.
    #[arg(long)]
    remove: bool,
    /// The job id (default: SLURM_JOB_ID).
    #[arg(long)]
    job: Option<String>,
    /// The job's user (default: SLURM_JOB_USER).
    #[arg(long)]
    user: Option<String>,
    /// This node's name (default: SLURMD_NODENAME, else the host name).
    #[arg(long)]
    node: Option<String>,
    /// The job's nodes (default: SLURM_JOB_NODELIST).
    #[arg(long)]
    job_nodes: Option<String>,
    /// Read at most this many MiB of each log (the verdict then stands on the start of the
    /// log, where NCCL writes its transport lines, and the line says it was cut).
    #[arg(long, value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=65536))]
    max_log_mib: u64,
    /// Stop reading the logs after this many seconds (the line is still written, marked cut).
    #[arg(long, value_name = "SECONDS", default_value_t = 20.0, value_parser = read_seconds)]
    read_seconds: f64,
}

fn read_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds from 0 to 86400")),
    }
}

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    if global.root.is_some() {
        bail!("jobs reads journals and job directories, not a node: leave out --root");
    }
    match &args.command {
        Some(Command::Record(a)) => record(a),
        None => ranking(&args.rank),
    }
}

fn now_secs() -> u64 {
    crate::deadline::unix_now() as u64
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The host name, as the kernel has it (read through the live root, as every read of the node).
fn hostname() -> String {
    crate::root::Root::live()
        .read_text("/proc/sys/kernel/hostname")
        .unwrap_or_default()
}

fn record(a: &RecordArgs) -> anyhow::Result<ExitCode> {
    let Some(id) = a.job.clone().or_else(|| env("SLURM_JOB_ID")) else {
        bail!("no job id: give --job, or run from a Slurm Epilog (SLURM_JOB_ID)");
    };
    let job = Job {
        id,
        user: a.user.clone().or_else(|| env("SLURM_JOB_USER")),
        node: a
            .node
            .clone()
            .or_else(|| env("SLURMD_NODENAME"))
            .unwrap_or_else(hostname),
        job_nodes: a.job_nodes.clone().or_else(|| env("SLURM_JOB_NODELIST")),
    };
    let limits = Limits {
        file_bytes: a.max_log_mib << 20,
        until: Some(std::time::Instant::now() + std::time::Duration::from_secs_f64(a.read_seconds)),
        ..Limits::default()
    };
    let predicted = a.predicted.as_deref().and_then(jobs::prediction);
    let r = jobs::record(&a.dir, job, limits, predicted, a.remove, now_secs());
    let mut partly = false;
    match journal::append(&a.journal, &r, a.journal_max_mib << 20, a.recent.as_deref()) {
        Err(e) => {
            errln!(
                "gdrdoctor: the journal {} was not written: {e}",
                crate::sanitize::text(&a.journal.to_string_lossy())
            );
            return Ok(ExitCode::from(2));
        }
        Ok(done) => {
            if let (Some(e), Some(p)) = (done.recent_error, &a.recent) {
                errln!(
                    "gdrdoctor: {} was not written: {e}",
                    crate::sanitize::text(&p.to_string_lossy())
                );
                partly = true;
            }
        }
    }
    if let Some(t) = &a.textfile {
        if let Err(e) = crate::output::write_atomic(t, render::textfile(&r).as_bytes()) {
            errln!(
                "gdrdoctor: the textfile {} was not written: {e}",
                crate::sanitize::text(&t.to_string_lossy())
            );
            out!("{}", render::one_line(&r));
            return Ok(ExitCode::from(3));
        }
    }
    out!("{}", render::one_line(&r));
    Ok(ExitCode::from(if partly { 3 } else { 0 }))
}

fn ranking(a: &RankArgs) -> anyhow::Result<ExitCode> {
    if a.journals.is_empty() {
        bail!("name the journal files to read (gdrdoctor jobs /var/lib/gdrdoctor/jobs.jsonl)");
    }
    let now = now_secs();
    let when = |s: &Option<String>| {
        s.as_deref()
            .map(|s| crate::parse::time::parse_time(s, now))
            .transpose()
            .map_err(anyhow::Error::msg)
    };
    let mut ranker = rank::Ranker::new(when(&a.since)?, when(&a.until)?);
    for path in &a.journals {
        journal::read(path, |line| match line {
            journal::Line::Record(r) => ranker.add(*r),
            journal::Line::Malformed(why) => ranker.malformed(why),
        })
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}",
                crate::sanitize::text(&path.to_string_lossy())
            )
        })?;
    }
    let r = ranker.finish();
    let text = match a.format {
        Format::Json => render::json(&r),
        Format::Csv => render::csv(&r),
        _ => render::human(&r),
    };
    out!("{text}");
    // 1: some job went without GDR; 0: none did.
    let without = r.nodes.iter().any(|t| t.without_gdr > 0);
    Ok(ExitCode::from(u8::from(without)))
}
