//! Roots read from a `.tar.gz` capture: the archive is read into memory whole, nothing is
//! extracted; its reads are answered from the tree in `read.rs` and `resolve.rs`.

use super::{Root, RootError};
use foldhash::HashMap;
use std::path::Path;
use std::sync::Mutex;

impl Root {
    /// A `.tar.gz` capture (what `gdrdoctor capture OUT.tar.gz` writes), read in place into
    /// memory: nothing is extracted. Refused whole when it holds anything a capture never does.
    pub fn archive(file: &Path) -> Result<Root, RootError> {
        Root::archive_within(file, None)
    }

    /// `archive`, its tree counted in a run's memory budget (`fleet`) for as long as it lives.
    /// Refused for the budget (others hold it), the archive is read again once there is room
    /// for what it is known to need: an honest capture is never refused because others were
    /// big.
    pub(super) fn archive_within(
        file: &Path,
        budget: Option<&std::sync::Arc<crate::archive::Budget>>,
    ) -> Result<Root, RootError> {
        use crate::archive::{BUDGET_STEP, MAX_TOTAL_BYTES, Refusal};
        let mut prepay = 0;
        let tree = loop {
            let f = std::fs::File::open(file).map_err(|e| RootError::Open(file.to_owned(), e))?;
            match crate::archive::read_within(std::io::BufReader::new(f), budget, prepay) {
                Ok(tree) => break tree,
                Err(Refusal::Capture(why)) => return Err(RootError::Archive(file.to_owned(), why)),
                Err(Refusal::OverBudget { had }) => {
                    // Twice what it had: retries cost at most twice the capture in all.
                    prepay = (2 * prepay)
                        .max(2 * had)
                        .clamp(BUDGET_STEP, MAX_TOTAL_BYTES + BUDGET_STEP);
                    if let Some(b) = budget {
                        b.wait_for_room(prepay);
                    }
                }
            }
        };
        Ok(Root {
            base: file.to_owned(),
            live: false,
            tree: Some(std::sync::Arc::new(tree)),
            dirs: Mutex::default(),
            missing: Mutex::default(),
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::default(),
            unread_problem: None,
        }
        .with_unread())
    }
}
