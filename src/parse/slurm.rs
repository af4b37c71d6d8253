//! `gdr-test --slurm`: the pairing of a two-node (or ring) test from the environment Slurm
//! gives each task, so that `srun -N2 --ntasks-per-node=1 gdrdoctor gdr-test --slurm` needs no
//! launcher of its own.
//!
//! Task r (SLURM_PROCID) runs on the node that Slurm's block distribution gives it
//! (SLURM_JOB_NODELIST expanded, SLURM_TASKS_PER_NODE). With two tasks, task 0 listens and
//! task 1 connects. With more, a ring: task r connects to task r+1 and listens for task r-1, so
//! that every node is tested as source and target in one step. Each task listens on the base
//! port plus its rank, so that two tasks on one node do not collide.

use crate::sanitize::quoted_max;

/// The most host names a node list may expand to, all items together: far more nodes than a
/// job has, far less memory than a list that names billions (`a[0-99999]b[0-99999]` once grew
/// to gigabytes; the bound was per range only).
pub const MAX_HOSTS: usize = 100_000;
/// The longest host name taken (a fully qualified one is at most 253 characters).
const MAX_NAME: usize = 255;
/// How much of a refused value an error line quotes.
const QUOTE: usize = 64;
/// The highest TCP port.
const MAX_PORT: u64 = 65_535;

/// Who this task talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    pub rank: usize,
    pub tasks: usize,
    /// The port this task listens on, when it does.
    pub listen: Option<u16>,
    /// The task this one connects to: its host and port.
    pub peer: Option<(String, u16)>,
}

/// A short, escaped quote of what an error refuses: never the whole of a variable that may be
/// a megabyte long.
fn q(s: &str) -> String {
    quoted_max(s, QUOTE)
}

/// One part of a hostlist item: text, or a bracket of ranges (`lo`, `hi`, the zero-padded
/// width).
enum Part<'a> {
    Text(&'a str),
    Ranges(Vec<(u64, u64, usize)>),
}

/// Expands a Slurm hostlist: `node[01-03,7],gpu-a1` -> node01, node02, node03, node7, gpu-a1.
/// At most [`MAX_HOSTS`] names in all, counted before any is made; each at most 255 characters.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    // Split on commas outside brackets.
    let (mut depth, mut start) = (0i32, 0usize);
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("{}: a ']' without '['", q(list)));
        }
    }
    if depth != 0 {
        return Err(format!("{}: a '[' without ']'", q(list)));
    }
    items.push(&list[start..]);
    let mut parsed = Vec::new();
    let mut total: usize = 0;
    for item in items.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        let (parts, count) = parse_item(item)?;
        total = total
            .checked_add(count)
            .filter(|&t| t <= MAX_HOSTS)
            .ok_or_else(|| {
                format!(
                    "{}: expands to more than {MAX_HOSTS} host names (a job's node list never does)",
                    q(list)
                )
            })?;
        parsed.push((item, parts));
    }
    if parsed.is_empty() {
        return Err(format!("{}: no host", q(list)));
    }
    let mut out = Vec::with_capacity(total);
    for (item, parts) in &parsed {
        expand_item(item, parts, &mut out)?;
    }
    Ok(out)
}

/// One hostlist item's parts and how many names it makes; brackets may repeat
/// (`rack[1-2]-n[1-2]`), never nest.
fn parse_item(item: &str) -> Result<(Vec<Part<'_>>, usize), String> {
    let mut parts = Vec::new();
    let mut count: usize = 1;
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| format!("{}: a '[' without ']'", q(item)))?;
        let inner = &rest[open + 1..close];
        if inner.contains('[') {
            return Err(format!("{}: brackets inside brackets", q(item)));
        }
        parts.push(Part::Text(&rest[..open]));
        let mut ranges = Vec::new();
        for r in inner.split(',') {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            let (lo, hi) = (lo.trim(), hi.trim());
            let (a, b): (u64, u64) = match (lo.parse(), hi.parse()) {
                (Ok(a), Ok(b)) if a <= b && lo.len() <= 19 && hi.len() <= 19 => (a, b),
                _ => {
                    return Err(format!(
                        "{}: {} is not a range such as 01-03",
                        q(item),
                        q(r)
                    ));
                }
            };
            // Slurm keeps the width of the lower bound's leading zeros.
            let width = if lo.starts_with('0') { lo.len() } else { 0 };
            count = (b - a)
                .checked_add(1)
                .and_then(|n| usize::try_from(n).ok())
                .and_then(|n| count.checked_mul(n))
                .filter(|&c| c <= MAX_HOSTS)
                .ok_or_else(|| {
                    format!(
                        "{}: expands to more than {MAX_HOSTS} host names (a job's node list never does)",
                        q(item)
                    )
                })?;
            ranges.push((a, b, width));
        }
        parts.push(Part::Ranges(ranges));
        rest = &rest[close + 1..];
    }
    parts.push(Part::Text(rest));
    Ok((parts, count))
}

/// The names of one parsed item, in Slurm's order (the last bracket varies fastest), made one
/// after the other like an odometer: no recursion, whatever the number of brackets.
fn expand_item(item: &str, parts: &[Part<'_>], out: &mut Vec<String>) -> Result<(), String> {
    // Per bracket: its values, in order.
    let values: Vec<Vec<(u64, usize)>> = parts
        .iter()
        .filter_map(|p| match p {
            Part::Ranges(r) => Some(
                r.iter()
                    .flat_map(|&(a, b, w)| (a..=b).map(move |n| (n, w)))
                    .collect(),
            ),
            Part::Text(_) => None,
        })
        .collect();
    let mut at = vec![0usize; values.len()];
    loop {
        let mut name = String::new();
        let mut k = 0;
        for p in parts {
            match p {
                Part::Text(t) => name.push_str(t),
                Part::Ranges(_) => {
                    let (n, width) = values[k][at[k]];
                    name.push_str(&format!("{n:0width$}"));
                    k += 1;
                }
            }
        }
        if name.chars().count() > MAX_NAME {
            return Err(format!(
                "{}: a host name of {} characters (at most {MAX_NAME})",
                q(item),
                name.chars().count()
            ));
        }
        out.push(name);
        // The next combination: the last bracket first.
        let mut i = values.len();
        loop {
            if i == 0 {
                return Ok(());
            }
            i -= 1;
            at[i] += 1;
            if at[i] < values[i].len() {
                break;
            }
            at[i] = 0;
        }
    }
}

/// Expands SLURM_TASKS_PER_NODE (`2(x3),1`) into a count per node: at most [`MAX_HOSTS`]
/// entries, as there are never more than nodes.
pub fn tasks_per_node(s: &str) -> Result<Vec<usize>, String> {
    let mut out: Vec<usize> = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (n, times) = match p.split_once("(x") {
            Some((n, t)) => (n, t.trim_end_matches(')')),
            None => (p, "1"),
        };
        match (n.parse::<usize>(), times.parse::<usize>()) {
            (Ok(n), Ok(t)) if out.len().saturating_add(t) <= MAX_HOSTS => {
                out.extend(std::iter::repeat_n(n, t))
            }
            (Ok(_), Ok(_)) => {
                return Err(format!(
                    "SLURM_TASKS_PER_NODE {}: more than {MAX_HOSTS} nodes",
                    q(s)
                ));
            }
            _ => {
                return Err(format!(
                    "SLURM_TASKS_PER_NODE {}: {} is not N or N(xM)",
                    q(s),
                    q(p)
                ));
            }
        }
    }
    Ok(out)
}

/// The pairing of task `rank` from Slurm's variables (`get` reads one; the environment in
/// use, a map in the tests).
pub fn pairing(get: &dyn Fn(&str) -> Option<String>, base_port: u16) -> Result<Pairing, String> {
    let need = |k: &str| {
        get(k).ok_or_else(|| {
            format!("{k} is not set: --slurm runs as a task of `srun` (see docs/two-node.md for mpirun and pdsh)")
        })
    };
    let procid = need("SLURM_PROCID")?;
    let rank: usize = procid
        .trim()
        .parse()
        .map_err(|_| format!("SLURM_PROCID {} is not a number", q(&procid)))?;
    let list = need("SLURM_JOB_NODELIST").or_else(|_| need("SLURM_NODELIST"))?;
    let nodes = expand(&list)?;
    let per_node = match get("SLURM_TASKS_PER_NODE") {
        Some(s) => tasks_per_node(&s)?,
        None => vec![1; nodes.len()],
    };
    // Block distribution: the first per_node[0] tasks on node 0, and so on. Counted, never
    // listed task by task (SLURM_TASKS_PER_NODE=99999999999 once made a host entry per task).
    let counts: Vec<usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, _)| per_node.get(i).copied().unwrap_or(0))
        .collect();
    let placed = counts.iter().fold(0usize, |a, &n| a.saturating_add(n));
    let tasks = get("SLURM_NTASKS")
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(placed);
    if tasks < 2 {
        return Err(format!(
            "{tasks} task(s): the two-node test needs two (srun -N2 --ntasks-per-node=1)"
        ));
    }
    if rank >= tasks || placed < tasks {
        return Err(format!(
            "task {rank} of {tasks}, but the node list {} ({} node(s)) and SLURM_TASKS_PER_NODE place only {placed} task(s)",
            q(&list),
            nodes.len()
        ));
    }
    // Task r listens on base + r: in a ring every task listens, and the last one's port must
    // still be a port (rank 70000 once listened on 22980, rank 4464's). Refused in every task,
    // so that the step ends at once rather than with tasks waiting for a peer that cannot be.
    let listening = if tasks == 2 { 1 } else { tasks };
    let highest = u64::from(base_port) + listening as u64 - 1;
    if highest > MAX_PORT {
        return Err(format!(
            "{tasks} tasks: task r listens on port {base_port} + r, and {MAX_PORT} is the highest TCP port, so a ring takes at most {} tasks (task {rank} would listen on {}); test the nodes in smaller steps",
            MAX_PORT - u64::from(base_port) + 1,
            u64::from(base_port) + rank as u64
        ));
    }
    let port = |r: usize| base_port + r as u16;
    let node_of = |r: usize| {
        let mut end = 0usize;
        counts
            .iter()
            .position(|&n| {
                end = end.saturating_add(n);
                r < end
            })
            .unwrap_or(0)
    };
    // A task on this same node is reached over loopback: its node's name need not resolve here
    // (a single-node allocation, a node whose own name is not in its hosts file).
    let host = |r: usize| {
        let (n, me) = (node_of(r), node_of(rank));
        if nodes[n] == nodes[me] {
            "127.0.0.1".to_owned()
        } else {
            nodes[n].clone()
        }
    };
    let next = (rank + 1) % tasks;
    Ok(if tasks == 2 {
        // One pair: task 0 listens, task 1 connects; both directions are tested on it.
        Pairing {
            rank,
            tasks,
            listen: (rank == 0).then(|| port(0)),
            peer: (rank == 1).then(|| (host(0), port(0))),
        }
    } else {
        Pairing {
            rank,
            tasks,
            listen: Some(port(rank)),
            peer: Some((host(next), port(next))),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn hostlists_expand_as_slurm_does() {
        assert_eq!(
            expand("node[01-03,7],gpu-a1").unwrap(),
            ["node01", "node02", "node03", "node7", "gpu-a1"]
        );
        assert_eq!(expand("n[8-10]").unwrap(), ["n8", "n9", "n10"]);
        assert_eq!(
            expand("r[1-2]-n[1-2]").unwrap(),
            ["r1-n1", "r1-n2", "r2-n1", "r2-n2"]
        );
        assert_eq!(expand("single").unwrap(), ["single"]);
        assert!(expand("n[1-").is_err());
        assert!(expand("n[3-1]").is_err());
        assert!(expand("n]1[").is_err());
        assert!(expand("").is_err());
        // 30,000 groups: a loop, not a recursion per group (issue 25: a stack overflow); the
        // name it makes is past a host name's 255 characters, so it is refused, not expanded.
        let many = expand(&"n[1]".repeat(30_000)).unwrap_err();
        assert!(many.len() < 400, "{many}");
        assert_eq!(expand(&"n[1]".repeat(100)).unwrap(), ["n1".repeat(100)]);
        assert_eq!(tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert!(tasks_per_node("x").is_err());
        assert_eq!(
            expand("a[1-2]b[0-1]c").unwrap(),
            ["a1b0c", "a1b1c", "a2b0c", "a2b1c"]
        );
        assert!(expand("n[1-[2]]").is_err());
    }

    /// The bound is on the total, counted before a name is made; errors quote a short prefix.
    #[test]
    fn node_lists_are_bounded_in_total() {
        let e = expand("a[0-99999]b[0-99999]").unwrap_err();
        assert!(e.contains("more than 100000 host names"), "{e}");
        let e = expand(&vec!["n[0-99999]"; 1000].join(",")).unwrap_err();
        assert!(e.contains("more than 100000 host names"), "{e}");
        assert!(e.len() < 200, "{e}");
        assert_eq!(expand("n[0-99999]").unwrap().len(), 100_000);
        let e = expand(&format!("n[{}", "1".repeat(1 << 20))).unwrap_err();
        assert!(e.len() < 200 && e.contains("without ']'"), "{e}");
        let e = expand(&"x".repeat(300)).unwrap_err();
        assert!(e.contains("a host name of 300 characters"), "{e}");
        let e = expand("n[0-9999999999999999999]").unwrap_err();
        assert!(e.contains("more than 100000"), "{e}");
        // Many brackets, no recursion.
        assert_eq!(expand(&"[1]".repeat(80)).unwrap(), ["1".repeat(80)]);
        let e = tasks_per_node("1(x99999999999)").unwrap_err();
        assert!(e.contains("more than 100000 nodes"), "{e}");
    }

    #[test]
    fn ranks_whose_port_would_leave_the_range_are_refused() {
        let vars = |r: &'static str, n: &'static str| {
            env(&[
                ("SLURM_PROCID", r),
                ("SLURM_JOB_NODELIST", "n[0-70000]"),
                ("SLURM_NTASKS", n),
            ])
        };
        let e = pairing(&vars("70000", "70001"), 18516).unwrap_err();
        assert!(
            e.contains("at most 47020 tasks") && e.contains("would listen on 88516"),
            "{e}"
        );
        // Every task of such a ring is refused, so that none waits for one that cannot be.
        assert!(pairing(&vars("0", "70001"), 18516).is_err());
        // The largest ring that fits.
        let p = pairing(&vars("47019", "47020"), 18516).unwrap();
        assert_eq!(p.listen, Some(65535));
        // A task count that would need one host entry per task is counted instead.
        let many = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_JOB_NODELIST", "a"),
            ("SLURM_TASKS_PER_NODE", "99999999999"),
        ]);
        assert!(pairing(&many, 18516).unwrap_err().contains("65535"));
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn two_tasks_pair_rank_0_listens() {
        let vars = |r| {
            env(&[
                ("SLURM_PROCID", r),
                ("SLURM_JOB_NODELIST", "gpu[07-08]"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_TASKS_PER_NODE", "1(x2)"),
            ])
        };
        let p0 = pairing(&vars("0"), 18516).unwrap();
        assert_eq!((p0.listen, p0.peer), (Some(18516), None));
        let p1 = pairing(&vars("1"), 18516).unwrap();
        assert_eq!((p1.listen, p1.peer), (None, Some(("gpu07".into(), 18516))));
    }

    #[test]
    fn more_tasks_make_a_ring_and_co_located_tasks_get_their_own_ports() {
        let vars = |r| {
            env(&[
                ("SLURM_PROCID", r),
                ("SLURM_JOB_NODELIST", "a,b[1-2]"),
                ("SLURM_NTASKS", "3"),
            ])
        };
        let p2 = pairing(&vars("2"), 100).unwrap();
        assert_eq!(p2.listen, Some(102));
        assert_eq!(p2.peer, Some(("a".into(), 100)));
        let p0 = pairing(&vars("0"), 100).unwrap();
        assert_eq!(p0.peer, Some(("b1".into(), 101)));
        // Two tasks on one node (the lab's single-node Slurm): block distribution.
        let one = |r| {
            env(&[
                ("SLURM_PROCID", r),
                ("SLURM_JOB_NODELIST", "lab"),
                ("SLURM_NTASKS", "2"),
                ("SLURM_TASKS_PER_NODE", "2"),
            ])
        };
        // ... and the peer on the same node is reached over loopback, not by the node's name
        // (seen in a fresh Debian chroot, whose hosts file does not name the node).
        assert_eq!(
            pairing(&one("1"), 100).unwrap().peer,
            Some(("127.0.0.1".into(), 100))
        );
    }

    #[test]
    fn what_is_missing_is_named() {
        let e = pairing(&env(&[]), 1).unwrap_err();
        assert!(e.contains("SLURM_PROCID is not set"), "{e}");
        let e = pairing(
            &env(&[
                ("SLURM_PROCID", "0"),
                ("SLURM_JOB_NODELIST", "a"),
                ("SLURM_NTASKS", "1"),
            ]),
            1,
        )
        .unwrap_err();
        assert!(e.contains("needs two"), "{e}");
        let e = pairing(
            &env(&[
                ("SLURM_PROCID", "3"),
                ("SLURM_JOB_NODELIST", "a,b"),
                ("SLURM_NTASKS", "4"),
            ]),
            1,
        )
        .unwrap_err();
        assert!(e.contains("place only 2"), "{e}");
    }
}
