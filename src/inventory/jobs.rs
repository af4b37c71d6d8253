//! The node's last jobs as the Slurm Epilog kept them (`gdrdoctor jobs record --recent`,
//! docs/jobs.md): what the `job-history` check holds against the node's own verdict.

use crate::model::jobs::{History, RECENT_PATH, RECENT_SCHEMA, RecentFile};
use crate::root::Root;

/// The file is a few KiB (16 jobs); anything past this is not the Epilog's.
const LIMIT: u64 = 1 << 20;

pub fn load(root: &Root) -> History {
    let path = RECENT_PATH.to_owned();
    let bytes = match root.read_limited(RECENT_PATH, LIMIT) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return History::Absent { path },
        Err(e) => {
            return History::Unreadable {
                path,
                reason: e.to_string(),
            };
        }
    };
    match serde_json::from_slice::<RecentFile>(&bytes) {
        Ok(f) if f.schema == RECENT_SCHEMA => History::Read { path, jobs: f.jobs },
        Ok(f) => History::Unreadable {
            path,
            reason: format!(
                "schema {}, not {RECENT_SCHEMA}",
                crate::sanitize::quoted_max(&f.schema, 40)
            ),
        },
        Err(e) => History::Unreadable {
            path,
            reason: format!("not the Epilog's recent jobs: {e}"),
        },
    }
}
