//! The two-node test's reports among fleet's inputs (`gdr-test --format json` files, a ring
//! task's holding both of its sessions): which node or rail fails, as part of the one fleet
//! report (docs/two-node.md, "Many nodes: which one fails").
//!
//! A report is recognised by what it holds, wherever it comes from (named, in a directory,
//! through fleet's glob, under any name), read within [`MAX_REPORT_BYTES`], and condensed at
//! once to its sessions and the directions the judgement needs; the judgement is near-linear in
//! directions (issue 25: 30,000 rails once took over 20 s).

use crate::model::twonode::{Report, Role};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Read as _;
use std::path::Path;

/// The schema of a two-node report (`gdrdoctor::probe::twonode::Report::schema`).
pub const SCHEMA: &str = "gdrdoctor.two-node";
/// The largest report file read. A report is a few KiB per rail and a hello carries at most a
/// few thousand rails (256 KiB), so a real one stays far below; a bigger file is refused by its
/// size, unread (a 4 GiB sparse `.json` once took 4 GiB).
pub const MAX_REPORT_BYTES: u64 = 32 << 20;
/// How much of a file is looked at to recognise a report in a directory: its start names the
/// schema (`schema` is a report's first field).
const SNIFF_BYTES: usize = 4096;

/// What a file's first bytes say it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looks {
    /// JSON that names the two-node schema near its start: a report.
    Report,
    /// JSON, but no schema of ours at its start.
    Json,
    /// Anything else (a capture archive, a file of another kind, one that cannot be read).
    Other,
}

/// Looks at the first 4 KiB of a regular file (opened as the operator's inputs are, with
/// O_NONBLOCK: a FIFO or a device among the captures is never waited on, nor read).
pub fn sniff(path: &Path) -> Looks {
    let Ok(file) = crate::input::open(path) else {
        return Looks::Other;
    };
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    if file
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .is_err()
    {
        return Looks::Other;
    }
    match head.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{' | b'[') => {
            if memchr::memmem::find(&head, format!("\"{SCHEMA}\"").as_bytes()).is_some() {
                Looks::Report
            } else {
                Looks::Json
            }
        }
        _ => Looks::Other,
    }
}

/// One end of a rail: a node's NIC.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct End {
    pub host: String,
    pub rail: usize,
    pub nic: String,
}

/// One session of a report file, as the fleet report lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    pub file: String,
    pub host: String,
    pub peer: Option<String>,
    pub role: Role,
    /// The session's own exit code: 0 every rail passed both ways, 1 one failed, 2 the test
    /// could not run.
    pub exit_code: u8,
    /// Why the test could not run (the control connection), when it could not.
    pub error: Option<String>,
    /// The directions that failed: `rail 1 out`, `rail 0 in`.
    #[serde(skip)]
    pub failing: Vec<String>,
}

/// A report file that could not be read or is not a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unreadable {
    pub file: String,
    pub reason: String,
}

/// What the reports together say.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Ends that fail with every peer they were tested with while those peers pass with
    /// others: the rail to look at.
    pub failing_rails: Vec<End>,
    /// Nodes every one of whose rails is a failing rail.
    pub failing_nodes: Vec<String>,
    /// Failing pairs that cannot be blamed on one side (only tested with each other).
    pub ambiguous: Vec<(End, End)>,
    pub directions: usize,
    pub failed: usize,
}

/// The directions of many reports, each end interned once: a direction is seen by both of its
/// nodes, and counts once whichever reported it.
#[derive(Debug, Default)]
pub struct Judge {
    ids: HashMap<End, usize>,
    ends: Vec<End>,
    /// (source, target) -> passed (a direction two reports disagree on failed).
    dirs: HashMap<(usize, usize), bool>,
}

impl Judge {
    fn id(&mut self, e: End) -> usize {
        if let Some(&i) = self.ids.get(&e) {
            return i;
        }
        let i = self.ends.len();
        self.ends.push(e.clone());
        self.ids.insert(e, i);
        i
    }

    /// Adds one report's directions (both of every rail).
    pub fn add(&mut self, r: &Report) {
        let peer = r.peer.clone().unwrap_or_default();
        for rail in &r.rails {
            let me = self.id(End {
                host: r.host.clone(),
                rail: rail.index,
                nic: rail.local.nic.device.clone(),
            });
            let them = self.id(End {
                host: peer.clone(),
                rail: rail.index,
                nic: rail
                    .peer
                    .as_ref()
                    .map(|p| p.nic.device.clone())
                    .unwrap_or_default(),
            });
            for (k, d) in [((me, them), &rail.outgoing), ((them, me), &rail.incoming)] {
                let ok = d.passed();
                self.dirs.entry(k).and_modify(|p| *p &= ok).or_insert(ok);
            }
        }
    }

    /// Names the node or rail that fails: an end all of whose directions failed is blamed when
    /// some partner of it passes with another node; else each of its failing pairs is
    /// ambiguous. One pass over the directions for the counts and the partners, one over the
    /// ends.
    pub fn verdict(&self) -> Verdict {
        let n = self.ends.len();
        // Per end: directions passed and failed, and the ends it was tested with.
        let mut pass = vec![0usize; n];
        let mut fail = vec![0usize; n];
        let mut partners: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (&(a, b), &ok) in &self.dirs {
            for (e, p) in [(a, b), (b, a)] {
                if ok {
                    pass[e] += 1;
                } else {
                    fail[e] += 1;
                }
                partners[e].push(p);
            }
        }
        let mut failing_rails = BTreeSet::new();
        let mut ambiguous = BTreeSet::new();
        for e in 0..n {
            if fail[e] == 0 || pass[e] > 0 {
                continue;
            }
            if partners[e].iter().any(|&p| pass[p] > 0) {
                failing_rails.insert(self.ends[e].clone());
            } else {
                for &p in &partners[e] {
                    let (x, y) = (&self.ends[e], &self.ends[p]);
                    ambiguous.insert(if x < y {
                        (x.clone(), y.clone())
                    } else {
                        (y.clone(), x.clone())
                    });
                }
            }
        }
        // Per host: its rails, and how many of them fail.
        let mut rails_of: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for e in &self.ends {
            rails_of.entry(&e.host).or_default().0 += 1;
        }
        for e in &failing_rails {
            rails_of.entry(&e.host).or_default().1 += 1;
        }
        let failing_nodes = rails_of
            .into_iter()
            .filter(|(_, (all, bad))| *bad > 0 && bad == all)
            .map(|(h, _)| h.to_owned())
            .collect();
        Verdict {
            failing_rails: failing_rails.into_iter().collect(),
            failing_nodes,
            ambiguous: ambiguous.into_iter().collect(),
            directions: self.dirs.len(),
            failed: self.dirs.values().filter(|ok| !**ok).count(),
        }
    }
}

/// Names the node or rail that fails, from whole reports.
pub fn judge(reports: &[Report]) -> Verdict {
    let mut j = Judge::default();
    for r in reports {
        j.add(r);
    }
    j.verdict()
}

/// Every two-node input of a fleet run, read and judged.
#[derive(Debug, Default)]
pub struct TwoNode {
    pub sessions: Vec<Session>,
    pub unreadable: Vec<Unreadable>,
    pub verdict: Option<Verdict>,
}

impl TwoNode {
    /// Reads the report files in order, each within [`MAX_REPORT_BYTES`], and judges them.
    /// A file that cannot be read, or is not a report, is listed with why.
    pub fn read(paths: &[std::path::PathBuf]) -> TwoNode {
        let mut out = TwoNode::default();
        let mut judge = Judge::default();
        for p in paths {
            let file = p.display().to_string();
            match read(p) {
                Ok(reports) => {
                    for r in &reports {
                        judge.add(r);
                        out.sessions.push(session(&file, r));
                    }
                }
                Err(reason) => out.unreadable.push(Unreadable { file, reason }),
            }
        }
        out.verdict = Some(judge.verdict());
        out
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty() && self.unreadable.is_empty()
    }

    /// Whether every direction of every session passed and every file was read: anything
    /// else (a direction failed, a test that could not run, a file not read) is not clean.
    pub fn clean(&self) -> bool {
        self.unreadable.is_empty()
            && self.sessions.iter().all(|s| s.exit_code == 0)
            && self.verdict.as_ref().is_none_or(|v| v.failed == 0)
    }
}

fn session(file: &str, r: &Report) -> Session {
    Session {
        file: file.to_owned(),
        host: r.host.clone(),
        peer: r.peer.clone(),
        role: r.role,
        exit_code: r.exit_code(),
        error: r.error.clone(),
        failing: r
            .rails
            .iter()
            .flat_map(|x| {
                [("out", &x.outgoing), ("in", &x.incoming)]
                    .into_iter()
                    .filter(|(_, d)| !d.passed())
                    .map(move |(w, _)| format!("rail {} {w}", x.index))
            })
            .collect(),
    }
}

/// A report file's report(s): one object, or a ring task's array of two. Within
/// [`MAX_REPORT_BYTES`], regular files only; a JSON document of another schema is named as such.
pub fn read(path: &Path) -> Result<Vec<Report>, String> {
    use crate::input::InputError;
    let bytes = crate::input::read(path, MAX_REPORT_BYTES).map_err(|e| match e {
        InputError::TooLarge { len, .. } => format!(
            "cannot read two-node report: {len} bytes; a two-node report never needs more than {}",
            crate::parse::bytes(MAX_REPORT_BYTES)
        ),
        other => format!("cannot read two-node report: {other}"),
    })?;
    // The schema first, without building the document: another JSON file is named as such.
    #[derive(serde::Deserialize)]
    struct Head {
        schema: Option<String>,
    }
    let array = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    let schemas: Vec<Option<String>> = if array {
        serde_json::from_slice::<Vec<Head>>(&bytes)
            .map(|v| v.into_iter().map(|h| h.schema).collect())
    } else {
        serde_json::from_slice::<Head>(&bytes).map(|h| vec![h.schema])
    }
    .map_err(|e| format!("not a two-node report: not JSON of its shape: {e}"))?;
    if let Some(other) = schemas.iter().find(|s| s.as_deref() != Some(SCHEMA)) {
        return Err(format!(
            "JSON, but not a two-node report (schema {}, not {SCHEMA})",
            crate::sanitize::quoted(other.as_deref().unwrap_or("none"))
        ));
    }
    if schemas.is_empty() {
        return Err("an empty array, not a two-node report".into());
    }
    if array {
        serde_json::from_slice::<Vec<Report>>(&bytes)
    } else {
        serde_json::from_slice::<Report>(&bytes).map(|r| vec![r])
    }
    .map_err(|e| format!("not a two-node report: {e}"))
}

/// `node-b rail 1 (mlx5_1)`, escaped.
fn end(e: &End) -> String {
    use crate::sanitize::text as t;
    format!("{} rail {} ({})", t(&e.host), e.rail, t(&e.nic))
}

/// What the judgement says about each host, for the rows of the CSV: built once, so that a
/// fleet of many report files is not a scan of every rail per file.
pub fn about(v: &Verdict) -> HashMap<&str, Vec<String>> {
    let mut out: HashMap<&str, Vec<String>> = HashMap::new();
    let failing: BTreeSet<&str> = v.failing_nodes.iter().map(String::as_str).collect();
    for h in &failing {
        out.entry(h).or_default().push(
            "two-node: every rail fails with every peer, and its peers pass with others".into(),
        );
    }
    for e in v
        .failing_rails
        .iter()
        .filter(|e| !failing.contains(e.host.as_str()))
    {
        out.entry(&e.host).or_default().push(format!(
            "two-node: rail {} ({}) fails with every peer, and those peers pass with others",
            e.rail, e.nic
        ));
    }
    for (a, b) in &v.ambiguous {
        let line = format!(
            "two-node: {} <-> {} fails, tested only with each other",
            end(a),
            end(b)
        );
        out.entry(&a.host).or_default().push(line.clone());
        if b.host != a.host {
            out.entry(&b.host).or_default().push(line);
        }
    }
    out
}

/// The two-node section of the human report: every name in it came from a report file and
/// goes through the one sanitizer.
pub fn human(t: &TwoNode) -> String {
    use crate::sanitize::text;
    let Some(v) = &t.verdict else {
        return String::new();
    };
    let mut o = format!(
        "two-node: {} report(s), {} direction(s) tested, {} failed\n",
        t.sessions.len(),
        v.directions,
        v.failed
    );
    let failing: BTreeSet<&str> = v.failing_nodes.iter().map(String::as_str).collect();
    for n in &v.failing_nodes {
        o += &format!(
            "  node {}: every rail fails with every peer, and its peers pass with others\n",
            text(n)
        );
    }
    for e in &v.failing_rails {
        if !failing.contains(e.host.as_str()) {
            o += &format!(
                "  {}: fails with every peer, and those peers pass with others\n",
                end(e)
            );
        }
    }
    for (a, b) in &v.ambiguous {
        o += &format!(
            "  {} <-> {}: fails, and neither was tested with a third node (a ring of three or more names the side)\n",
            end(a),
            end(b)
        );
    }
    for s in t.sessions.iter().filter(|s| s.error.is_some()) {
        o += &format!(
            "  {} ({}): the test could not run: {}\n",
            text(&s.host),
            text(&s.file),
            text(s.error.as_deref().unwrap_or(""))
        );
    }
    for u in &t.unreadable {
        o += &format!("  unreadable: {}: {}\n", text(&u.file), text(&u.reason));
    }
    o
}

/// The `two_node` member of the fleet JSON.
pub fn json(t: &TwoNode) -> serde_json::Value {
    let v = t.verdict.clone().unwrap_or(Verdict {
        failing_rails: Vec::new(),
        failing_nodes: Vec::new(),
        ambiguous: Vec::new(),
        directions: 0,
        failed: 0,
    });
    serde_json::json!({
        "reports": t.sessions,
        "unreadable": t.unreadable,
        "directions": v.directions,
        "failed": v.failed,
        "failing_nodes": v.failing_nodes,
        "failing_rails": v.failing_rails,
        "ambiguous": v.ambiguous,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gdr::{Failure, FailureKind, Memory, NicSpec, PairResult};
    use crate::model::twonode::{Direction, Rail, RailResult, Settings};

    fn rail(nic: &str) -> Rail {
        Rail {
            nic: NicSpec {
                device: nic.into(),
                port: 1,
                gid_index: None,
            },
            gpu: None,
            memory: Memory::Host,
            subject: "host memory".into(),
        }
    }

    /// `host` as connector with `peer`: `rails` rails, each passing or failing both ways.
    fn session(host: &str, peer: &str, rails: usize, ok: bool) -> Report {
        let d = |ok: bool| Direction {
            from: String::new(),
            to: String::new(),
            verified_bytes: ok.then_some(4096),
            gbps: None,
            latency_us: None,
            failure: (!ok).then(|| Failure {
                kind: FailureKind::CompletionError,
                step: "w".into(),
                message: "IBV_WC_RETRY_EXC_ERR".into(),
            }),
        };
        let mut r = Report::new(host, Role::Connector, Settings::default());
        r.peer = Some(peer.into());
        for i in 0..rails {
            let nic = format!("mlx5_{i}");
            r.rails.push(RailResult {
                index: i,
                local: rail(&nic),
                peer: Some(rail(&nic)),
                setup: PairResult::default(),
                peer_path: None,
                path_mtu: None,
                notes: vec![],
                outgoing: d(ok),
                incoming: d(ok),
            });
        }
        r
    }

    fn with(v: Verdict) -> TwoNode {
        TwoNode {
            sessions: Vec::new(),
            unreadable: Vec::new(),
            verdict: Some(v),
        }
    }

    #[test]
    fn a_ring_names_the_node_that_fails_with_both_neighbours() {
        // a -> b fails, b -> c fails, c -> a passes: b is the one.
        let v = judge(&[
            session("a", "b", 1, false),
            session("b", "c", 1, false),
            session("c", "a", 1, true),
        ]);
        assert_eq!(v.failed, 4);
        assert_eq!(v.failing_nodes, ["b"]);
        assert_eq!(v.failing_rails.len(), 1);
        assert!(v.ambiguous.is_empty());
        assert!(human(&with(v)).contains("node b: every rail fails"));
    }

    #[test]
    fn two_nodes_alone_cannot_say_which_side() {
        let v = judge(&[session("a", "b", 1, false)]);
        assert!(v.failing_nodes.is_empty() && v.failing_rails.is_empty());
        assert_eq!(v.ambiguous.len(), 1);
        assert!(human(&with(v)).contains("a third node"));
    }

    /// One pass over the directions, not one per failing end: 30,000 rails of a ring of three,
    /// every rail of one node failing, well within a second (it took over 20 s).
    #[test]
    fn many_rails_are_judged_in_near_linear_time() {
        let reports = [
            session("a", "b", 10_000, false),
            session("b", "c", 10_000, false),
            session("c", "a", 10_000, true),
        ];
        let t0 = std::time::Instant::now();
        let v = judge(&reports);
        assert_eq!(v.failing_nodes, ["b"]);
        assert_eq!(v.failing_rails.len(), 10_000);
        assert_eq!(v.failed, 40_000);
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t0.elapsed()
        );
        // Many pairs tested only with each other: each pair named once, in order.
        let v = judge(&[session("a", "b", 20_000, false)]);
        assert_eq!(v.ambiguous.len(), 20_000);
        assert!(v.ambiguous.windows(2).all(|w| w[0] < w[1]));
    }
}
