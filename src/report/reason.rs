//! `--format reason`: one line for a scheduler's drain reason or a log line.
//!
//! `gdrdoctor: reboot(iommu-translated) fix-in-place(acs-redirect-on-path,peermem-not-loaded)`
//! when the node is not ready: the blocking finding codes grouped by what they ask of the node
//! (docs/actions.md), the strongest action first, in check order within it, each code once (at
//! its strongest); `gdrdoctor: ready` when it is, and `gdrdoctor: ready (unverified: acs)` when
//! it is but some checks could not tell. Codes and actions are fixed identifiers, so the line
//! never carries text read off the node.

use super::Report;
use crate::model::{Action, Status};

/// Slurm keeps reasons of any length, but `sinfo` and dashboards show the first few dozen
/// characters; past this the line ends in `+N`, the number of codes left out.
pub const MAX_LEN: usize = 200;

pub fn line(report: &Report) -> String {
    let v = &report.verdict;
    if v.ready {
        let unknown: Vec<&str> = report
            .checks
            .iter()
            .filter(|c| c.status == Status::Unknown)
            .map(|c| c.id)
            .collect();
        return if unknown.is_empty() {
            "gdrdoctor: ready".to_owned()
        } else {
            bounded("gdrdoctor: ready (unverified: ", &unknown, ")")
        };
    }
    if v.state == super::State::NothingVerified {
        return format!("gdrdoctor: {}", super::NOTHING_VERIFIED);
    }
    let blocks =
        |s: Status| s == Status::Fail || (v.strict && matches!(s, Status::Warn | Status::Unknown));
    // Each blocking code once, at the strongest action its blocking findings ask.
    let mut codes: Vec<(&str, Action)> = Vec::new();
    for b in &v.blocking {
        let check = report.checks.iter().find(|c| c.id == b.check);
        let of_check: Vec<&str> = if b.codes.is_empty() {
            vec![b.check]
        } else {
            b.codes.clone()
        };
        for c in of_check {
            let action = check
                .into_iter()
                .flat_map(|r| r.findings.iter())
                .filter(|f| (f.code == c || b.codes.is_empty()) && blocks(f.status))
                .filter_map(|f| f.action)
                .max()
                .unwrap_or(Action::None);
            match codes.iter_mut().find(|(x, _)| *x == c) {
                Some((_, a)) => *a = (*a).max(action),
                None => codes.push((c, action)),
            }
        }
    }
    let groups: Vec<(Action, Vec<&str>)> = Action::ALL
        .iter()
        .rev()
        .map(|action| {
            let of = codes
                .iter()
                .filter(|(_, a)| a == action)
                .map(|(c, _)| *c)
                .collect();
            (*action, of)
        })
        .filter(|(_, of): &(Action, Vec<&str>)| !of.is_empty())
        .collect();
    by_action(&groups)
}

/// `gdrdoctor: reboot(a,b) fix-in-place(c)`, codes dropped from the end (and counted, ` +N`)
/// to stay within MAX_LEN.
fn by_action(groups: &[(Action, Vec<&str>)]) -> String {
    let total: usize = groups.iter().map(|(_, of)| of.len()).sum();
    for keep in (1..=total).rev() {
        let mut left = keep;
        let mut parts = Vec::new();
        for (action, of) in groups {
            if left == 0 {
                break;
            }
            let n = of.len().min(left);
            left -= n;
            parts.push(format!("{action}({})", of[..n].join(",")));
        }
        let mut s = format!("gdrdoctor: {}", parts.join(" "));
        if keep < total {
            s.push_str(&format!(" +{}", total - keep));
        }
        if s.len() <= MAX_LEN {
            return s;
        }
    }
    format!("gdrdoctor: +{total}")
}

pub fn render(report: &Report) -> String {
    line(report) + "\n"
}

/// `head` + items joined by commas + `tail`, dropping items from the end (and saying how many)
/// to stay within MAX_LEN.
fn bounded(head: &str, items: &[&str], tail: &str) -> String {
    for keep in (1..=items.len()).rev() {
        let dropped = items.len() - keep;
        let more = if dropped > 0 {
            format!(",+{dropped}")
        } else {
            String::new()
        };
        let s = format!("{head}{}{more}{tail}", items[..keep].join(","));
        if s.len() <= MAX_LEN {
            return s;
        }
    }
    format!("{head}+{}{tail}", items.len())
}

#[cfg(test)]
mod tests {
    use super::{Action, bounded, by_action};

    #[test]
    fn codes_are_grouped_by_action_and_cut_and_counted() {
        let groups = [
            (Action::Reboot, vec!["iommu-translated"]),
            (
                Action::FixInPlace,
                vec!["acs-redirect-on-path", "peermem-not-loaded"],
            ),
        ];
        assert_eq!(
            by_action(&groups),
            "gdrdoctor: reboot(iommu-translated) fix-in-place(acs-redirect-on-path,peermem-not-loaded)"
        );
        let items: Vec<String> = (0..40).map(|i| format!("some-long-code-{i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let s = by_action(&[(Action::ReplacePart, refs)]);
        assert!(s.len() <= super::MAX_LEN, "{s}");
        assert!(
            s.starts_with("gdrdoctor: replace-part(some-long-code-0,"),
            "{s}"
        );
        let shown = s.matches("some-long-code-").count();
        assert!(s.ends_with(&format!(") +{}", 40 - shown)), "{s}");
    }

    #[test]
    fn long_lists_are_cut_and_counted() {
        let items: Vec<String> = (0..40).map(|i| format!("some-long-code-{i}")).collect();
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let s = bounded("gdrdoctor: ", &refs, "");
        assert!(s.len() <= super::MAX_LEN, "{s}");
        assert!(s.starts_with("gdrdoctor: some-long-code-0,"));
        let shown = s.matches("some-long-code-").count();
        assert!(s.ends_with(&format!(",+{}", 40 - shown)), "{s}");
        assert_eq!(bounded("x: ", &["a", "b"], ""), "x: a,b");
    }
}
