//! The files NCCL reads, and their lines that do not do what they seem to.

use super::{CONF_LINE_IGNORED, CONF_UNREADABLE, undo};
use crate::inventory::Inventory;
use crate::inventory::nccl::SourceState;
use crate::model::{Finding, Fix};

/// The files NCCL reads, and their lines that do not do what they seem to.
pub(super) fn judge(inv: &Inventory) -> Vec<Finding> {
    let n = &inv.nccl;
    let mut out = Vec::new();
    for s in &n.sources {
        if let SourceState::Unreadable(e) = &s.state {
            out.push(
                Finding::unknown(
                    CONF_UNREADABLE,
                    s.path.clone(),
                    format!(
                        "NCCL reads {}, and gdrdoctor cannot: {}",
                        s.path,
                        e.reason()
                    ),
                )
                .evidence(s.path.clone(), format!("<{}>", e.reason())),
            );
        }
        if let SourceState::NotRead(why) = &s.state {
            out.push(
                Finding::unknown(
                    CONF_UNREADABLE,
                    s.path.clone(),
                    format!(
                        "NCCL_CONF_FILE names {}: {why}; what it sets is unknown",
                        s.path
                    ),
                )
                .evidence(s.path.clone(), format!("<{why}>")),
            );
        }
    }
    for p in &n.problems {
        out.push(
            Finding::unknown(
                CONF_UNREADABLE,
                p.path.clone(),
                format!("{}: {}", p.path, p.message),
            )
            .evidence(p.path.clone(), format!("<{}>", p.message)),
        );
    }
    for (path, o) in &n.odd {
        let meant = o
            .meant
            .as_deref()
            .map(|m| format!(" (meant: {m})"))
            .unwrap_or_default();
        let fix = match (o.why, o.meant.as_deref()) {
            (_, Some(m)) if o.text.contains('=') => {
                let value = o.text.split_once('=').map(|(_, v)| v).unwrap_or("");
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                Fix::new(
                    format!("Write the line as NCCL reads it: {m}={value}"),
                    "Changes what every NCCL job on the node reads, as the line intended.",
                )
                .edit(crate::model::edit::Edit::Replace {
                    file: path.to_string(),
                    old: o.text.clone(),
                    new: format!("{m}={value}"),
                })
            }
            _ => Fix::new(
                "Write the line as NAME=value with no spaces, quotes or 'export', or remove it",
                "Changes what every NCCL job on the node reads.",
            )
            .manual(format!("sed -n '{}p' {}", o.line, crate::checks::sh(path))),
        };
        out.push(
            Finding::warn(
                CONF_LINE_IGNORED,
                format!("{path} line {}", o.line),
                format!(
                    "{}: {}{meant}",
                    crate::sanitize::quoted(&o.text),
                    o.why.explain()
                ),
            )
            .evidence(path.clone(), format!("line {}: {}", o.line, o.text))
            .fix(fix),
        );
    }
    // NCCL_CONF_FILE is read from the environment before any file: set in a file, it is inert.
    for s in n
        .settings
        .values()
        .chain(&n.shadowed)
        .filter(|s| s.name == "NCCL_CONF_FILE" && !s.origin.is_environment())
    {
        out.push(
            Finding::warn(
                CONF_LINE_IGNORED,
                format!("{}={}", s.name, s.value),
                format!(
                    "set in {}: NCCL reads NCCL_CONF_FILE from the environment only, before any file, so this line changes nothing",
                    s.origin.describe()
                ),
            )
            .with([s.evidence()])
            .fix(undo(s, "Set NCCL_CONF_FILE in the job environment instead (the Slurm TaskProlog, a module file), or remove the line".into(), "None.", None)),
        );
    }
    out
}
