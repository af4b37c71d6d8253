//! One cause, one finding (issue 39): in the default report, the findings of a check that say
//! the same thing about several ports, NICs or GPUs are shown once with their members. Two
//! findings are the same cause when their code, status, message and fix are equal once each
//! one's own names (its subject's words, the device, interface and PCI names in its evidence)
//! are taken out; a real value that differs (PFC off on 3 against 4, another DSCP) keeps them
//! apart. `-v` and the machine formats keep every finding.

use crate::model::{Finding, FixCommand};

/// A finding's own names: the words of its subject and the names in its evidence paths that
/// carry a digit (`mlx5_0`, `ens1np0`, `0000:19:00.0`), longest first.
pub fn own_names(f: &Finding) -> Vec<String> {
    names(f)
}

const MAX_NAMES: usize = 64;

fn names(f: &Finding) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let words = f
        .subject
        .split(|c: char| c.is_whitespace() || "(),".contains(c))
        .chain(
            f.evidence
                .iter()
                .flat_map(|e| e.path.split(|c: char| c.is_whitespace() || c == '/')),
        );
    // Each name once (a set, not a scan of the list: a subject of thousands of words), and at
    // most MAX_NAMES of them: a finding's own names are a few.
    let mut seen = std::collections::HashSet::new();
    for w in words {
        if out.len() >= MAX_NAMES {
            break;
        }
        if w.len() >= 3 && w.chars().any(|c| c.is_ascii_digit()) && seen.insert(w) {
            out.push(w.to_owned());
        }
    }
    out.sort_by_key(|w| std::cmp::Reverse(w.len()));
    out
}

fn masked(text: &str, names: &[String]) -> String {
    let mut t = text.to_owned();
    for n in names {
        t = t.replace(n.as_str(), "\u{1}");
    }
    t
}

/// What must be equal for two findings to be one cause.
fn shape(f: &Finding) -> String {
    let n = names(f);
    let mut s = format!("{}\u{0}{}\u{0}{}", f.code, f.status, masked(&f.message, &n));
    if let Some(fix) = &f.fix {
        s.push('\u{0}');
        s.push_str(&masked(&fix.summary, &n));
        for c in fix
            .commands
            .iter()
            .chain(fix.alternatives.iter().flat_map(|a| &a.commands))
        {
            s.push('\u{0}');
            s.push_str(&masked(&c.run, &n));
        }
    }
    s
}

/// The findings in groups of one cause, in the order of their first member.
pub fn groups<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Vec<Vec<&'a Finding>> {
    let mut out: Vec<(String, Vec<&Finding>)> = Vec::new();
    for f in findings {
        let s = shape(f);
        match out.iter_mut().find(|(k, _)| *k == s) {
            Some((_, g)) => g.push(f),
            None => out.push((s, vec![f])),
        }
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// `8 ports (mlx5_0 port 1 ... mlx5_7 port 1)`: a group's members as its line says them.
pub fn members(g: &[&Finding]) -> String {
    let first = &g[0].subject;
    let kind = if g.iter().all(|f| f.subject.contains(" port ")) {
        "ports"
    } else if g.iter().all(|f| f.subject.starts_with("GPU ")) {
        "GPUs"
    } else if g.iter().all(|f| f.subject.starts_with("bridge ")) {
        "bridges"
    } else {
        "subjects"
    };
    let last = &g[g.len() - 1].subject;
    if g.len() == 2 {
        format!("2 {kind} ({first}, {last})")
    } else {
        format!("{} {kind} ({first} ... {last})", g.len())
    }
}

/// One command for every member: the command itself when they all have it, a loop over the
/// one name that differs (`for x in ens1np0 ens2np0; do mlnx_qos -i $x ...; done`), or None.
pub fn command(g: &[&Finding], pick: impl Fn(&Finding) -> Option<&FixCommand>) -> Option<String> {
    let runs: Vec<&str> = g
        .iter()
        .map(|f| pick(f).map(|c| c.run.as_str()))
        .collect::<Option<_>>()?;
    if runs.iter().all(|r| *r == runs[0]) {
        return Some(runs[0].to_owned());
    }
    let own: Vec<Vec<String>> = g.iter().map(|f| names(f)).collect();
    for t in own[0].iter().filter(|t| runs[0].contains(t.as_str())) {
        let mut values = vec![t.clone()];
        let fits = g.iter().enumerate().skip(1).all(|(i, _)| {
            match own[i]
                .iter()
                .find(|u| runs[0].replace(t.as_str(), u) == runs[i])
            {
                Some(u) => {
                    values.push(u.clone());
                    true
                }
                None => false,
            }
        });
        if fits && !runs[0].contains('$') {
            let (command, note) = match runs[0].split_once("   #") {
                Some((c, n)) => (c, format!("   #{n}")),
                None => (runs[0], String::new()),
            };
            return Some(format!(
                "for x in {}; do {}; done{note}",
                values.join(" "),
                command.replace(t.as_str(), "$x")
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Code, Fix};

    const C: Code = Code {
        id: "roce-pfc-off",
        summary: "",
    };

    fn port(n: u8, off: u8) -> Finding {
        Finding::fail(C, format!("mlx5_{n} port 1"), format!("PFC off on {off}"))
            .evidence(format!("dcbnl ens{}np0", n + 1), "pfc_en: 0x10")
            .fix(
                Fix::new(format!("enable PFC on ens{}np0", n + 1), "drain")
                    .nccl_conf("NCCL_IB_TC", 128)
                    .runtime(format!("mlnx_qos -i ens{}np0 --pfc 0,0,0,1,1,0,0,0", n + 1)),
            )
    }

    #[test]
    fn one_cause_one_group_and_a_real_difference_apart() {
        let f = [port(0, 3), port(1, 3), port(2, 3), port(3, 4)];
        let g = groups(f.iter());
        assert_eq!(g.len(), 2, "PFC off on 3 and on 4 are two causes");
        assert_eq!(g[0].len(), 3);
        assert_eq!(members(&g[0]), "3 ports (mlx5_0 port 1 ... mlx5_2 port 1)");
        assert_eq!(
            command(&g[0], |f| f.fix.as_ref().map(|x| &x.commands[0])).unwrap(),
            "gdrdoctor edit set /etc/nccl.conf NCCL_IB_TC=128"
        );
        assert_eq!(
            command(&g[0], |f| f.fix.as_ref().map(|x| &x.commands[1])).unwrap(),
            "for x in ens1np0 ens2np0 ens3np0; do mlnx_qos -i $x --pfc 0,0,0,1,1,0,0,0; done"
        );
    }
}
