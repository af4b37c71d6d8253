//! `gdrdoctor jobs`: journal lines over a time range, ranked by node and by NIC, worst first:
//! the jobs whose NCCL went without GPUDirect RDMA, the ones of them the node's check had said
//! ready for, and the cause that repeats.

use crate::model::jobs::{JobRecord, Ranking, Status, Tally};
use std::collections::{BTreeMap, HashMap};

/// Examples kept of lines that are not journal lines.
const MAX_EXAMPLES: usize = 5;

/// Builds the ranking from journal lines, one at a time.
#[derive(Default)]
pub struct Ranker {
    since: Option<u64>,
    until: Option<u64>,
    lines: u64,
    malformed: u64,
    examples: Vec<String>,
    /// The last line per (job, node): an Epilog run twice counts once.
    latest: HashMap<(String, String), JobRecord>,
}

impl Ranker {
    pub fn new(since: Option<u64>, until: Option<u64>) -> Self {
        Ranker {
            since,
            until,
            ..Default::default()
        }
    }

    pub fn add(&mut self, r: JobRecord) {
        self.lines += 1;
        if self.since.is_some_and(|s| r.time < s) || self.until.is_some_and(|u| r.time > u) {
            return;
        }
        let key = (r.job.clone(), r.node.clone());
        match self.latest.get(&key) {
            Some(old) if old.time > r.time => {}
            _ => {
                self.latest.insert(key, r);
            }
        }
    }

    pub fn malformed(&mut self, why: String) {
        self.lines += 1;
        self.malformed += 1;
        if self.examples.len() < MAX_EXAMPLES {
            self.examples.push(why);
        }
    }

    pub fn finish(self) -> Ranking {
        let mut nodes: BTreeMap<String, Acc> = BTreeMap::new();
        let mut nics: BTreeMap<(String, String), Acc> = BTreeMap::new();
        let mut jobs = std::collections::BTreeSet::new();
        let mut records: Vec<&JobRecord> = self.latest.values().collect();
        records.sort_by(|a, b| (a.time, &a.job, &a.node).cmp(&(b.time, &b.job, &b.node)));
        for r in &records {
            jobs.insert(r.job.as_str());
            let cause = main_cause(r);
            nodes
                .entry(r.node.clone())
                .or_default()
                .add(r, r.status, cause);
            // Per NIC: the job's ranks on it, GDR on all of them or not.
            let mut per_nic: BTreeMap<String, (bool, Option<&str>)> = BTreeMap::new();
            for k in &r.ranks {
                let name = k
                    .nic_name
                    .clone()
                    .unwrap_or_else(|| format!("{} {}", k.net, k.nic));
                let e = per_nic.entry(name).or_insert((true, None));
                if !k.gdr {
                    e.0 = false;
                    if e.1.is_none() {
                        e.1 = k.cause.as_deref();
                    }
                }
            }
            for (nic, (gdr, cause)) in per_nic {
                let status = if gdr { Status::Gdr } else { Status::NoGdr };
                let cause = cause.map(|c| (c, see_of(r, c)));
                nics.entry((r.node.clone(), nic))
                    .or_default()
                    .add(r, status, cause);
            }
        }
        let mut nodes: Vec<Tally> = nodes
            .into_iter()
            .map(|(node, acc)| acc.tally(node, None))
            .collect();
        let mut nics: Vec<Tally> = nics
            .into_iter()
            .map(|((node, nic), acc)| acc.tally(node, Some(nic)))
            .collect();
        let worst = |a: &Tally, b: &Tally| {
            (b.without_gdr, b.contradicted)
                .cmp(&(a.without_gdr, a.contradicted))
                .then_with(|| (&a.node, &a.nic).cmp(&(&b.node, &b.nic)))
        };
        nodes.sort_by(worst);
        nics.sort_by(worst);
        Ranking {
            schema: "gdrdoctor.jobs",
            schema_version: 1,
            since: self.since,
            until: self.until,
            lines: self.lines,
            taken: records.len() as u64,
            malformed: self.malformed,
            malformed_examples: self.examples,
            jobs: jobs.len() as u64,
            nodes,
            nics,
        }
    }
}

/// The cause of a line without GDR that counts: the first of the node's own, else the first.
fn main_cause(r: &JobRecord) -> Option<(&str, Vec<String>)> {
    r.causes
        .iter()
        .find(|c| !c.job_setting)
        .or(r.causes.first())
        .map(|c| (c.cause.as_str(), c.see.clone()))
}

fn see_of(r: &JobRecord, cause: &str) -> Vec<String> {
    r.causes
        .iter()
        .find(|c| c.cause == cause)
        .map(|c| c.see.clone())
        .unwrap_or_default()
}

#[derive(Default)]
struct Acc {
    t: Tally,
    causes: BTreeMap<String, (u64, Vec<String>)>,
}

impl Acc {
    fn add(&mut self, r: &JobRecord, status: Status, cause: Option<(&str, Vec<String>)>) {
        let t = &mut self.t;
        match status {
            Status::Gdr => t.with_gdr += 1,
            Status::Partial | Status::NoGdr => {
                t.without_gdr += 1;
                t.contradicted += u64::from(r.contradicted);
                t.last_job = Some(r.job.clone());
                t.last_time = Some(r.time);
                let (c, see) = cause.unwrap_or(("not-explained", Vec::new()));
                let e = self.causes.entry(c.to_owned()).or_insert((0, see));
                e.0 += 1;
            }
            Status::NotExercised | Status::NoNccl => t.not_exercised += 1,
            Status::NotRecorded | Status::Error => t.not_recorded += 1,
        }
        t.exercised += u64::from(status.exercised());
    }

    fn tally(mut self, node: String, nic: Option<String>) -> Tally {
        // The cause most jobs had; the first in name order among equals.
        if let Some((c, (n, see))) = self
            .causes
            .into_iter()
            .max_by(|a, b| a.1.0.cmp(&b.1.0).then_with(|| b.0.cmp(&a.0)))
        {
            self.t.top_cause = Some((c, n));
            self.t.see = see;
        }
        self.t.node = node;
        self.t.nic = nic;
        self.t
    }
}
