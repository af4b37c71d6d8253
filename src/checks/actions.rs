//! What to do with the node about each finding (issue 39): the rule per code that every check
//! keeps beside its codes (`Meta::actions`), and how the engine applies it. docs/actions.md
//! is the table in words, with the source of each rule.

use super::{CHECK_SILENT, Meta};
use crate::inventory::Inventory;
use crate::model::{Action, Code, Finding, Status};

/// One row of a check's action table: what a warn, fail or unknown finding of `code` asks of
/// the node (docs/actions.md). The table is the rule; a check overrides it for one finding
/// only where the finding itself says more (`Finding::action`: an Xid's own resolution).
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub code: Code,
    pub action: Action,
    /// In a cloud VM (the inventory's `virtual_pci`), where the guest cannot do it: what the
    /// provider's side must. `None`: as on bare metal, except that a part to replace is
    /// always the provider's there.
    pub in_vm: Option<Action>,
}

impl Rule {
    pub const fn new(code: Code, action: Action) -> Rule {
        Rule {
            code,
            action,
            in_vm: None,
        }
    }

    /// In a VM, `action` instead (`Action::Provider` for what only the host can change).
    pub const fn in_vm(self, action: Action) -> Rule {
        Rule {
            in_vm: Some(action),
            ..self
        }
    }
}

impl Meta {
    /// The rule for a code of this check.
    pub fn rule(&self, code: &str) -> Option<&'static Rule> {
        self.actions.iter().find(|r| r.code.id == code)
    }
}

/// What a finding asks of the node: the check's own word, else its code's rule; in a VM the
/// rule's VM action, and a part to replace is the provider's. Only warn, fail and unknown
/// findings carry one: a pass or a skip asks nothing.
fn decide(meta: &Meta, f: &Finding, vm: bool) -> Option<Action> {
    if !matches!(f.status, Status::Warn | Status::Fail | Status::Unknown) {
        return None;
    }
    let rule = meta.rule(f.code);
    debug_assert!(
        rule.is_some() || f.code == CHECK_SILENT.id,
        "{} has no action for {}",
        meta.id,
        f.code
    );
    let action = match (f.action, rule) {
        (Some(own), _) => own,
        (None, Some(r)) if vm => r.in_vm.unwrap_or(r.action),
        (None, Some(r)) => r.action,
        // The engine's own `check-silent`: a bug in gdrdoctor, nothing to do to the node.
        (None, None) => Action::None,
    };
    Some(if vm && action == Action::ReplacePart {
        Action::Provider
    } else {
        action
    })
}

/// Gives each finding its action ([`decide`]).
pub(crate) fn set_actions(meta: &Meta, inv: &Inventory, findings: &mut [Finding]) {
    let vm = inv.virtual_pci.is_some();
    for f in findings {
        f.action = decide(meta, f, vm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::ALL;

    /// Every code of every check has exactly one rule, and every rule is a code of its check:
    /// a new code without an action fails here.
    #[test]
    fn every_code_has_one_action() {
        for c in ALL.iter().map(|c| c.meta()) {
            for code in c.codes {
                let n = c.actions.iter().filter(|r| r.code.id == code.id).count();
                assert_eq!(n, 1, "{}: {} has {n} rules in its ACTIONS", c.id, code.id);
            }
            for r in c.actions {
                assert!(
                    c.codes.iter().any(|k| k.id == r.code.id),
                    "{}: a rule for {}, which is not one of its codes",
                    c.id,
                    r.code.id
                );
            }
        }
    }

    /// docs/actions.md has a row for every code with the table's action (and its VM action).
    #[test]
    fn the_document_is_the_table() {
        let doc = include_str!("../../docs/actions.md");
        for c in ALL.iter().map(|c| c.meta()) {
            for r in c.actions {
                let vm = match r.in_vm {
                    Some(a) => format!("`{a}`"),
                    None if r.action == Action::ReplacePart => "`provider`".to_owned(),
                    None => "same".to_owned(),
                };
                let row = format!("| `{}` | `{}` | {vm} |", r.code.id, r.action);
                assert!(
                    doc.contains(&row),
                    "docs/actions.md lacks the row {row} ({})",
                    c.id
                );
            }
        }
    }

    fn finding(status: Status) -> Finding {
        const X: Code = Code {
            id: "x",
            summary: "",
        };
        Finding::new(X, status, "node", "")
    }

    const X_RULES: &[Rule] = &[Rule::new(
        Code {
            id: "x",
            summary: "",
        },
        Action::ReplacePart,
    )];
    const META: Meta = Meta {
        id: "x",
        title: "",
        codes: &[],
        actions: X_RULES,
        readme: "",
        live_only: false,
        reads: &[],
    };

    /// Warn, fail and unknown carry an action, pass and skip none; a check's own word beats
    /// the table; in a VM a part to replace is the provider's, a rule's VM action applies.
    #[test]
    fn decisions() {
        assert_eq!(decide(&META, &finding(Status::Pass), false), None);
        assert_eq!(decide(&META, &finding(Status::Skip), false), None);
        for s in [Status::Warn, Status::Fail, Status::Unknown] {
            assert_eq!(decide(&META, &finding(s), false), Some(Action::ReplacePart));
            assert_eq!(decide(&META, &finding(s), true), Some(Action::Provider));
        }
        let own = finding(Status::Fail).action(Action::Reboot);
        assert_eq!(decide(&META, &own, false), Some(Action::Reboot));
        assert_eq!(decide(&META, &own, true), Some(Action::Reboot));
        let rule = Rule::new(META.actions[0].code, Action::FixInPlace).in_vm(Action::Provider);
        let vm = Meta {
            actions: std::slice::from_ref(Box::leak(Box::new(rule))),
            ..META
        };
        assert_eq!(
            decide(&vm, &finding(Status::Warn), false),
            Some(Action::FixInPlace)
        );
        assert_eq!(
            decide(&vm, &finding(Status::Warn), true),
            Some(Action::Provider)
        );
    }
}
