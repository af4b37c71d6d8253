//! `gdr-test --slurm`: the pairing of a two-node (or ring) test from the environment Slurm
//! gives each task, so that `srun -N2 --ntasks-per-node=1 gdrdoctor gdr-test --slurm` needs no
//! launcher of its own.
//!
//! Task r (SLURM_PROCID) runs on the node that Slurm's block distribution gives it
//! (SLURM_JOB_NODELIST expanded, SLURM_TASKS_PER_NODE). With two tasks, task 0 listens and
//! task 1 connects. With more, a ring: task r connects to task r+1 and listens for task r-1, so
//! that every node is tested as source and target in one step. Each task listens on the base
//! port plus its rank, so that two tasks on one node do not collide.

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

/// Expands a Slurm hostlist: `node[01-03,7],gpu-a1` -> node01, node02, node03, node7, gpu-a1.
pub fn expand(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let (mut depth, mut start) = (0i32, 0usize);
    let mut parts = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("{list:?}: a ']' without '['"));
        }
    }
    if depth != 0 {
        return Err(format!("{list:?}: a '[' without ']'"));
    }
    parts.push(&list[start..]);
    for p in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
        expand_one(p, &mut out)?;
    }
    if out.is_empty() {
        return Err(format!("{list:?}: no host"));
    }
    Ok(out)
}

/// One hostlist item; brackets may repeat (`rack[1-2]-n[1-2]`): each group of brackets
/// multiplies the names so far, in a loop. The recursion per group it replaces overflowed the
/// stack on 30,000 groups (`n[1]n[1]...`), holding a copy of the rest of the item per level
/// (issue 25).
fn expand_one(item: &str, out: &mut Vec<String>) -> Result<(), String> {
    let mut names = vec![String::new()];
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = rest[open..]
            .find(']')
            .map(|c| open + c)
            .ok_or_else(|| format!("{item:?}: a '[' without ']'"))?;
        let (prefix, ranges) = (&rest[..open], &rest[open + 1..close]);
        let mut values = Vec::new();
        for r in ranges.split(',') {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            let (a, b): (u64, u64) = match (lo.trim().parse(), hi.trim().parse()) {
                (Ok(a), Ok(b)) if a <= b && b - a < 100_000 => (a, b),
                _ => return Err(format!("{item:?}: {r:?} is not a range such as 01-03")),
            };
            // Slurm keeps the width of the lower bound's leading zeros.
            let width = if lo.trim().starts_with('0') {
                lo.trim().len()
            } else {
                0
            };
            values.extend((a..=b).map(|n| format!("{prefix}{n:0width$}")));
        }
        if let [one] = values.as_slice() {
            // One value: appended in place, so that many groups of one cost what they hold.
            for name in &mut names {
                name.push_str(one);
            }
        } else {
            names = names
                .iter()
                .flat_map(|name| values.iter().map(move |v| format!("{name}{v}")))
                .collect();
        }
        rest = &rest[close + 1..];
    }
    out.extend(names.into_iter().map(|mut name| {
        name.push_str(rest);
        name
    }));
    Ok(())
}

/// Expands SLURM_TASKS_PER_NODE (`2(x3),1`) into a count per node.
pub fn tasks_per_node(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (n, times) = match p.split_once("(x") {
            Some((n, t)) => (n, t.trim_end_matches(')')),
            None => (p, "1"),
        };
        match (n.parse::<usize>(), times.parse::<usize>()) {
            (Ok(n), Ok(t)) if t <= 100_000 => out.extend(std::iter::repeat_n(n, t)),
            _ => {
                return Err(format!(
                    "SLURM_TASKS_PER_NODE {s:?}: {p:?} is not N or N(xM)"
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
    let rank: usize = need("SLURM_PROCID")?
        .parse()
        .map_err(|_| "SLURM_PROCID is not a number".to_owned())?;
    let nodes = expand(&need("SLURM_JOB_NODELIST").or_else(|_| need("SLURM_NODELIST"))?)?;
    let per_node = match get("SLURM_TASKS_PER_NODE") {
        Some(s) => tasks_per_node(&s)?,
        None => vec![1; nodes.len()],
    };
    // Task r's node under block distribution: the first tasks_per_node[0] tasks on node 0...
    let mut hosts = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for _ in 0..per_node.get(i).copied().unwrap_or(0) {
            hosts.push(n.clone());
        }
    }
    let tasks = get("SLURM_NTASKS")
        .and_then(|s| s.parse().ok())
        .unwrap_or(hosts.len());
    if tasks < 2 {
        return Err(format!(
            "{tasks} task(s): the two-node test needs two (srun -N2 --ntasks-per-node=1)"
        ));
    }
    if rank >= tasks || hosts.len() < tasks {
        return Err(format!(
            "task {rank} of {tasks}, but the node list {nodes:?} and SLURM_TASKS_PER_NODE place only {} task(s)",
            hosts.len()
        ));
    }
    let port = |r: usize| base_port.saturating_add(r as u16);
    // A task on this same node is reached over loopback: its node's name need not resolve here
    // (a single-node allocation, a node whose own name is not in its hosts file).
    let host = |r: usize| {
        if hosts[r] == hosts[rank] {
            "127.0.0.1".to_owned()
        } else {
            hosts[r].clone()
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
        // 30,000 groups: a loop, not a recursion per group (issue 25: a stack overflow).
        let many = expand(&"n[1]".repeat(30_000)).unwrap();
        assert_eq!(many, ["n1".repeat(30_000)]);
        assert_eq!(tasks_per_node("2(x3),1").unwrap(), [2, 2, 2, 1]);
        assert!(tasks_per_node("x").is_err());
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
