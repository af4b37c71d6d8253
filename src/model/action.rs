//! What to do with the node about a finding: the one word a scheduler, a dashboard or an
//! operator acts on (issue 39). docs/actions.md gives each code's action and where it comes from.

use serde::{Deserialize, Serialize};

/// What a warning or failure asks of the node, ordered by how much of the node it takes: each
/// covers those before it (a reboot resets the GPUs; a part is replaced on a node powered off).
/// `Provider` comes last: on a cloud VM nothing the guest does helps, so it decides the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Nothing to do to the node: a note, history, or a question gdrdoctor could not answer.
    None,
    /// A change on the running node (a module, a setting, a file): no reboot, no part.
    FixInPlace,
    /// Reset a GPU (`nvidia-smi -r`), the node otherwise left running.
    ResetGpu,
    /// Reboot the node: a kernel command line, a driver swap, a device that a reset does not
    /// bring back.
    Reboot,
    /// A part to reseat or replace (a cable, a riser, a card): a person at the node.
    ReplacePart,
    /// A cloud VM: the provider's side must act (its host, its PCI layout, its hardware).
    Provider,
}

impl Action {
    pub const ALL: [Action; 6] = [
        Action::None,
        Action::FixInPlace,
        Action::ResetGpu,
        Action::Reboot,
        Action::ReplacePart,
        Action::Provider,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::None => "none",
            Action::FixInPlace => "fix-in-place",
            Action::ResetGpu => "reset-gpu",
            Action::Reboot => "reboot",
            Action::ReplacePart => "replace-part",
            Action::Provider => "provider",
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Action;

    /// The JSON word is the displayed one, and each covers those before it.
    #[test]
    fn words_and_order() {
        for a in Action::ALL {
            assert_eq!(
                serde_json::to_string(&a).unwrap(),
                format!("\"{}\"", a.as_str())
            );
        }
        let mut sorted = Action::ALL;
        sorted.sort();
        assert_eq!(sorted, Action::ALL);
        assert!(Action::Reboot > Action::ResetGpu);
    }
}
