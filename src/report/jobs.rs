//! The job journal's views: `gdrdoctor jobs` in human, JSON and CSV (one row per node and per
//! NIC), and the node_exporter textfile `jobs record --textfile` writes for the last job.

use super::csv_field;
use super::prometheus::escape_label;
use crate::model::jobs::{JobRecord, Ranking, Tally};
use crate::sanitize::text;
use std::fmt::Write as _;

pub fn json(r: &Ranking) -> String {
    super::nccl::pretty_json(r)
}

fn plural(n: u64, one: &str) -> String {
    super::nccl::plural(n, one, &format!("{one}s"))
}

fn row(t: &Tally) -> String {
    let who = match &t.nic {
        Some(nic) => format!("{} {}", t.node, nic),
        None => t.node.clone(),
    };
    if t.exercised == 0 {
        return format!("  {}  no job used NCCL's network", text(&who));
    }
    let mut s = format!(
        "  {}  {} of {} without GDR",
        text(&who),
        t.without_gdr,
        plural(t.exercised, "job")
    );
    if t.contradicted > 0 {
        let _ = write!(s, ", {} where the node's check said ready", t.contradicted);
    }
    if let Some((cause, n)) = &t.top_cause {
        let _ = write!(s, "; cause {cause} ({})", plural(*n, "job"));
        if !t.see.is_empty() {
            let _ = write!(s, ", see {}", t.see.join(", "));
        }
    }
    if let Some(j) = &t.last_job {
        let _ = write!(s, "; last: job {j}");
        if let Some(at) = t.last_time {
            let _ = write!(s, " at {}", crate::parse::time::rfc3339(at));
        }
    }
    s
}

pub fn human(r: &Ranking) -> String {
    let mut s = String::new();
    let without: u64 = r.nodes.iter().map(|t| t.without_gdr).sum();
    let exercised: u64 = r.nodes.iter().map(|t| t.exercised).sum();
    let contradicted: u64 = r.nodes.iter().map(|t| t.contradicted).sum();
    let range = match (r.since, r.until) {
        (None, None) => String::new(),
        (a, b) => format!(
            ", {} to {}",
            a.map(crate::parse::time::rfc3339)
                .unwrap_or_else(|| "the start".into()),
            b.map(crate::parse::time::rfc3339)
                .unwrap_or_else(|| "now".into())
        ),
    };
    let _ = writeln!(
        s,
        "gdrdoctor jobs: {} on {} ({} of {}{range})",
        plural(r.jobs, "job"),
        plural(r.nodes.len() as u64, "node"),
        plural(r.taken, "journal line"),
        r.lines
    );
    let _ = writeln!(
        s,
        "{without} of {exercised} node-jobs that used NCCL's network went without GPUDirect RDMA{}",
        if contradicted > 0 {
            format!(
                "; {contradicted} where the node's own check had said ready (the prediction contradicted)"
            )
        } else {
            String::new()
        }
    );
    if !r.nodes.is_empty() {
        let _ = writeln!(s, "\nNodes, most jobs without GDR first:");
        for t in &r.nodes {
            let _ = writeln!(s, "{}", row(t));
        }
    }
    let bad_nics: Vec<&Tally> = r.nics.iter().filter(|t| t.without_gdr > 0).collect();
    if !bad_nics.is_empty() {
        let _ = writeln!(s, "\nNICs with jobs without GDR:");
        for t in bad_nics {
            let _ = writeln!(s, "{}", row(t));
        }
    }
    let not_ex: u64 = r.nodes.iter().map(|t| t.not_exercised).sum();
    let not_rec: u64 = r.nodes.iter().map(|t| t.not_recorded).sum();
    if not_ex + not_rec > 0 {
        let _ = writeln!(
            s,
            "\nNot counted: {} not exercised (no NCCL, or no NET connection), {} not recorded (the job set its own NCCL_DEBUG or NCCL_DEBUG_FILE, or nothing was kept)",
            not_ex, not_rec
        );
    }
    if r.malformed > 0 {
        let what = if r.malformed == 1 {
            "1 line was not a journal line".to_owned()
        } else {
            format!("{} lines were not journal lines", r.malformed)
        };
        let _ = writeln!(s, "\n{what}, skipped:");
        for e in &r.malformed_examples {
            let _ = writeln!(s, "  {}", text(e));
        }
    }
    s
}

pub fn csv(r: &Ranking) -> String {
    let mut s = String::from(
        "kind,node,nic,exercised,with_gdr,without_gdr,contradicted,not_exercised,not_recorded,top_cause,top_cause_jobs,see,last_job,last_time\n",
    );
    for (kind, rows) in [("node", &r.nodes), ("nic", &r.nics)] {
        for t in rows {
            let (cause, n) = t
                .top_cause
                .as_ref()
                .map(|(c, n)| (c.as_str(), n.to_string()))
                .unwrap_or(("", String::new()));
            let _ = writeln!(
                s,
                "{kind},{},{},{},{},{},{},{},{},{},{n},{},{},{}",
                csv_field(&t.node),
                csv_field(t.nic.as_deref().unwrap_or("")),
                t.exercised,
                t.with_gdr,
                t.without_gdr,
                t.contradicted,
                t.not_exercised,
                t.not_recorded,
                csv_field(cause),
                csv_field(&t.see.join(" ")),
                csv_field(t.last_job.as_deref().unwrap_or("")),
                t.last_time.map(|x| x.to_string()).unwrap_or_default()
            );
        }
    }
    s
}

/// The node_exporter textfile for the last job recorded on this node: its status, and each
/// rank's connection to a NIC with GDR (1) or without (0).
pub fn textfile(r: &JobRecord) -> String {
    let mut s = String::new();
    let job = escape_label(&r.job);
    let user = escape_label(r.user.as_deref().unwrap_or(""));
    s.push_str("# HELP gdrdoctor_job_gdr Whether the last job's NCCL used GPUDirect RDMA for a rank's NET connections to a NIC (1) or not (0).\n# TYPE gdrdoctor_job_gdr gauge\n");
    let mut seen = std::collections::BTreeSet::new();
    for k in &r.ranks {
        let nic = k
            .nic_name
            .clone()
            .unwrap_or_else(|| format!("{} {}", k.net, k.nic));
        let line = format!(
            "gdrdoctor_job_gdr{{job=\"{job}\",user=\"{user}\",host=\"{}\",rank=\"{}\",gpu=\"{}\",nic=\"{}\",net=\"{}\",cause=\"{}\"}} {}\n",
            escape_label(&k.host),
            k.rank,
            escape_label(k.gpu.as_deref().unwrap_or("")),
            escape_label(&nic),
            escape_label(&k.net),
            escape_label(k.cause.as_deref().unwrap_or("")),
            u8::from(k.gdr)
        );
        if seen.insert(line.clone()) {
            s.push_str(&line);
        }
    }
    s.push_str("# HELP gdrdoctor_last_job_info The last job recorded on this node: what its NCCL did about GPUDirect RDMA (status: gdr, partial, no-gdr, not-exercised, no-nccl, not-recorded, error).\n# TYPE gdrdoctor_last_job_info gauge\n");
    let _ = writeln!(
        s,
        "gdrdoctor_last_job_info{{job=\"{job}\",user=\"{user}\",status=\"{}\",nccl=\"{}\"}} 1",
        r.status.as_str(),
        escape_label(r.nccl.as_deref().unwrap_or(""))
    );
    s.push_str("# HELP gdrdoctor_last_job_timestamp_seconds When the last job's line was written.\n# TYPE gdrdoctor_last_job_timestamp_seconds gauge\n");
    let _ = writeln!(s, "gdrdoctor_last_job_timestamp_seconds {}", r.time);
    s.push_str("# HELP gdrdoctor_last_job_connections The last job's NET connections on this node, with and without GPUDirect RDMA.\n# TYPE gdrdoctor_last_job_connections gauge\n");
    let _ = writeln!(
        s,
        "gdrdoctor_last_job_connections{{gdr=\"true\"}} {}",
        r.connections.gdr
    );
    let _ = writeln!(
        s,
        "gdrdoctor_last_job_connections{{gdr=\"false\"}} {}",
        r.connections.no_gdr
    );
    s.push_str("# HELP gdrdoctor_last_job_contradicted 1 when the node's check said ready and the last job's NCCL went without GPUDirect RDMA for a cause of the node's.\n# TYPE gdrdoctor_last_job_contradicted gauge\n");
    let _ = writeln!(
        s,
        "gdrdoctor_last_job_contradicted {}",
        u8::from(r.contradicted)
    );
    s
}

/// The line `jobs record` prints: `job 4242 on node17: gdr: all 8 NET connections used ...`.
pub fn one_line(r: &JobRecord) -> String {
    let mut s = format!(
        "job {} on {} [{}]: {}",
        r.job,
        r.node,
        r.status.as_str(),
        r.summary
    );
    if r.contradicted {
        s.push_str(" (the node's check had said ready: the prediction contradicted)");
    }
    for why in &r.logs.refused {
        let _ = write!(s, "; {why}");
    }
    let mut s = text(&s).into_owned();
    s.push('\n');
    s
}
