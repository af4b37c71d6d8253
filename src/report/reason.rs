//! `--format reason`: one line for a scheduler's drain reason or a log line.
//!
//! `gdrdoctor: acs-redirect-on-path,peermem-not-loaded` when the node is not ready (the blocking
//! finding codes, in check order, each once), `gdrdoctor: ready` when it is, and
//! `gdrdoctor: ready (unverified: acs)` when it is but some checks could not tell. Codes are
//! fixed identifiers, so the line never carries text read off the node.

use super::Report;
use crate::model::Status;

/// Slurm keeps reasons of any length, but `sinfo` and dashboards show the first few dozen
/// characters; past this the line ends in `,+N`.
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
    let mut codes: Vec<&str> = Vec::new();
    for b in &v.blocking {
        let of_check: Vec<&str> = if b.codes.is_empty() {
            vec![b.check]
        } else {
            b.codes.clone()
        };
        for c in of_check {
            if !codes.contains(&c) {
                codes.push(c);
            }
        }
    }
    bounded("gdrdoctor: ", &codes, "")
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
    use super::bounded;

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
