//! `gdrdoctor fix`: the fixes of the current warnings and failures as one bash script an operator
//! can review and run: every block says what it fixes and why, checks before it changes (run it
//! twice and the second run changes nothing), and leaves disruptive and manual steps as comments.
//!
//! The script is only written for a node whose names are all safe: a capture (or a node) with an
//! interface, device or PCI entry named like `x;rm -rf /` gets a refusal, never a script.
//!
//! `render` writes the script; `apply` runs its runtime part now (`fix --apply`).

pub mod apply;
mod render;

pub use render::{Header, Select, render, rooted};

use crate::checks::CheckResult;
use crate::inventory::{Inventory, Problem};
use crate::model::{Finding, FixClass, Status};

/// Which classes become commands; the others stay in the script as comments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Classes {
    /// Takes effect now, lost at reboot.
    Runtime,
    /// Survives a reboot.
    Persistent,
    /// Runtime and persistent (disruptive and manual steps are always comments).
    All,
    /// Everything that is a command, by-hand and disruptive ones too: what the fix harness
    /// (tests/fixes.rs) runs against a copy of a node, never for a node itself.
    #[value(hide = true)]
    Every,
}

impl Classes {
    pub fn runs(self, c: FixClass) -> bool {
        matches!(
            (self, c),
            (
                Classes::Runtime | Classes::All | Classes::Every,
                FixClass::Runtime
            ) | (
                Classes::Persistent | Classes::All | Classes::Every,
                FixClass::Persistent
            ) | (Classes::Every, FixClass::Disruptive | FixClass::Manual)
        )
    }
}

/// Why no script was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reasons: Vec<String>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "refusing to write a fix script:")?;
        for r in &self.reasons {
            writeln!(f, "  {r}")?;
        }
        write!(
            f,
            "Names like these would be shell syntax in a script; look at the node (or the capture's origin) first."
        )
    }
}

/// A finding that has something to run or do, with where it came from.
pub struct Block<'a> {
    pub check: &'static str,
    pub finding: &'a Finding,
}

/// The findings a script is for: warnings and failures with a fix, in report order.
pub fn blocks(results: &[CheckResult]) -> Vec<Block<'_>> {
    results
        .iter()
        .flat_map(|c| {
            c.findings
                .iter()
                .filter(|f| matches!(f.status, Status::Warn | Status::Fail) && f.fix.is_some())
                .map(move |f| Block {
                    check: c.id,
                    finding: f,
                })
        })
        .collect()
}

/// Refuses a node with unsafe names anywhere gdrdoctor looked, and any command a script could
/// not carry as it is (a newline or NUL in it).
pub fn vet(inv: &Inventory, blocks: &[Block]) -> Result<(), Refusal> {
    let mut reasons: Vec<String> = inv
        .all_problems()
        .iter()
        .filter(|p: &&Problem| p.is_unsafe_name())
        .map(|p| format!("{}: {}", comment(&p.path), p.message))
        .collect();
    for b in blocks {
        for c in b.finding.fix.iter().flat_map(|f| &f.commands) {
            let text = format!("{}{}", c.run, c.guard.as_deref().unwrap_or(""));
            if text.contains(['\n', '\r', '\0']) {
                reasons.push(format!(
                    "{} ({}): a fix command with a line break or NUL in it",
                    b.finding.code,
                    comment(&b.finding.subject)
                ));
            }
        }
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(Refusal { reasons })
    }
}

/// Text for a `#` comment: one line, every hostile character escaped by the one sanitizer.
pub use crate::sanitize::text as comment;
