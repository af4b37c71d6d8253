//! What a capture records (every path a run looked at, [`Recording`]) and what a captured root
//! replays: the reads the node refused, kept in [`UNREAD`] so that they fail offline as they
//! failed live.

use super::path::normalise_slashes;
use super::{ReadError, Root};
use std::sync::Mutex;

/// Where a capture records what it could not read on the node (beside NVML's answer,
/// `/gdrdoctor/nvml.json`): a name of gdrdoctor's own, read only from captured roots. Without
/// it a path the capture could not read is simply absent from the copy, and offline reads
/// "not found" where the node said "permission denied" (issue 25).
pub const UNREAD: &str = "/gdrdoctor/unread.json";

/// How a path was being read when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    /// Looking it up (a stat, a link read): the directory above it could not be searched.
    Lookup,
    /// Listing it as a directory.
    List,
    /// Reading it as a file.
    Read,
}

/// One entry of [`UNREAD`].
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct UnreadEntry {
    /// The node path, links resolved.
    path: String,
    op: Op,
    /// `permission-denied`, `not-regular` (with `kind`), `io` (with `errno`).
    error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    errno: Option<i32>,
    /// The error as the node gave it.
    message: String,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct UnreadFile {
    schema: String,
    unread: Vec<UnreadEntry>,
}

const UNREAD_SCHEMA: &str = "gdrdoctor.unread";

/// Whether a failed read is one a copy would not reproduce by itself: what the node refused
/// (permissions, I/O errors) and what a copy never holds (FIFOs, devices). Absence, links
/// and sizes are in the copy as they were.
fn worth_recording(e: &ReadError) -> bool {
    matches!(
        e,
        ReadError::PermissionDenied { .. } | ReadError::NotRegular { .. } | ReadError::Io { .. }
    )
}

impl ReadError {
    /// The same error for another path.
    fn at(&self, path: &str) -> ReadError {
        let path = path.to_owned();
        match self {
            ReadError::NotFound { .. } => ReadError::NotFound { path },
            ReadError::PermissionDenied { .. } => ReadError::PermissionDenied { path },
            ReadError::Loop { .. } => ReadError::Loop { path },
            ReadError::NameTooLong { .. } => ReadError::NameTooLong { path },
            ReadError::NotRegular { kind, .. } => ReadError::NotRegular { path, kind },
            ReadError::NotDir { .. } => ReadError::NotDir { path },
            ReadError::TooLarge { limit, .. } => ReadError::TooLarge {
                path,
                limit: *limit,
            },
            ReadError::NotUtf8 { .. } => ReadError::NotUtf8 { path },
            ReadError::Io { errno, message, .. } => ReadError::Io {
                path,
                errno: *errno,
                message: message.clone(),
            },
        }
    }
}

impl Recording {
    /// [`UNREAD`]'s content for what this recording could not read; `None` when it read all.
    pub fn unread_json(&self) -> Option<String> {
        if self.unread.is_empty() {
            return None;
        }
        let unread = self
            .unread
            .iter()
            .map(|(path, (op, e))| {
                let (error, kind, errno) = match e {
                    ReadError::NotRegular { kind, .. } => {
                        ("not-regular", Some(kind.to_string()), None)
                    }
                    ReadError::Io { errno, .. } => ("io", None, *errno),
                    _ => ("permission-denied", None, None),
                };
                UnreadEntry {
                    path: path.clone(),
                    op: *op,
                    error: error.to_owned(),
                    kind,
                    errno,
                    message: e.reason(),
                }
            })
            .collect();
        let file = UnreadFile {
            schema: UNREAD_SCHEMA.to_owned(),
            unread,
        };
        serde_json::to_string_pretty(&file).ok().map(|s| s + "\n")
    }
}

/// Everything a run looked at, as the node has it: what `gdrdoctor capture` writes out, so that
/// a check on the copy reads exactly what the live check read.
#[derive(Debug, Default, Clone)]
pub struct Recording {
    /// Resolved directories walked through or listed.
    pub dirs: std::collections::BTreeSet<String>,
    /// Links followed or read: their path (with a resolved parent) and their target text.
    pub links: std::collections::BTreeMap<String, String>,
    /// Regular files read: resolved path and the bytes read (the longest read of each).
    pub files: std::collections::BTreeMap<String, Vec<u8>>,
    /// Listed directories: every entry, so a copy lists the same names. Entries never looked
    /// at otherwise are written empty (a directory, an empty file, or the link).
    pub listings: std::collections::BTreeMap<String, Vec<(String, Listed)>>,
    /// What could not be read and a copy would not reproduce by itself (permission denied, an
    /// I/O error, a FIFO or device): resolved path -> how and why. Written as [`UNREAD`].
    pub unread: std::collections::BTreeMap<String, (Op, ReadError)>,
}

/// What a listed entry is, for the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    Dir,
    File,
    Link,
    /// FIFOs, devices, sockets: never copied.
    Special,
}

impl Root {
    /// A captured root with what its capture could not read on the node ([`UNREAD`]) loaded,
    /// so that those reads fail here as they failed there. Read before any recording starts:
    /// a capture of this root writes its own.
    pub(super) fn with_unread(mut self) -> Root {
        let bytes = match self.read(UNREAD) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return self,
            Err(e) => {
                self.unread_problem = Some(e.reason());
                return self;
            }
        };
        let file: UnreadFile = match serde_json::from_slice(&bytes) {
            Ok(f) => f,
            Err(e) => {
                self.unread_problem = Some(format!("not what `gdrdoctor capture` writes ({e})"));
                return self;
            }
        };
        if file.schema != UNREAD_SCHEMA {
            self.unread_problem = Some(format!("schema {:?}, not {UNREAD_SCHEMA:?}", file.schema));
            return self;
        }
        // The error kinds a node gives, as `ReadError` names them; anything else is an I/O
        // error with the message recorded.
        const KINDS: &[&str] = &[
            "directory",
            "character device",
            "FIFO",
            "socket",
            "block device",
        ];
        for u in file.unread {
            let path = u.path.clone();
            let e = match (u.error.as_str(), u.kind.as_deref()) {
                ("permission-denied", _) => ReadError::PermissionDenied { path },
                ("not-regular", Some(k)) => ReadError::NotRegular {
                    path,
                    kind: KINDS
                        .iter()
                        .find(|x| **x == k)
                        .copied()
                        .unwrap_or("special file"),
                },
                _ => ReadError::Io {
                    path,
                    errno: u.errno,
                    message: u.message.chars().take(200).collect(),
                },
            };
            self.unread.insert(normalise_slashes(&u.path), (u.op, e));
        }
        self
    }

    /// Why the record of what the capture could not read ([`UNREAD`]) could not be used.
    pub fn unread_problem(&self) -> Option<&str> {
        self.unread_problem.as_deref()
    }

    /// The recorded failure of `resolved` by one of `ops`, as the error for `asked`; noted
    /// again when recording (a capture of a capture keeps it).
    pub(super) fn replay(&self, resolved: &str, ops: &[Op], asked: &str) -> Option<ReadError> {
        let (op, e) = self
            .unread
            .get(resolved)
            .filter(|(op, _)| ops.contains(op))?;
        let e = e.at(asked);
        self.note_unread(resolved, *op, &e);
        Some(e)
    }

    /// Remembers, when recording, a failure a copy would not reproduce.
    pub(super) fn note_unread(&self, resolved: &str, op: Op, e: &ReadError) {
        if worth_recording(e) {
            self.note(|r| {
                r.unread.insert(resolved.to_owned(), (op, e.clone()));
            });
        }
    }

    /// The same root, remembering everything it is asked to read from now on.
    pub fn recording(mut self) -> Root {
        self.recording = Some(Mutex::default());
        self
    }

    /// What was read since `recording()`; empty when not recording.
    pub fn recorded(&self) -> Recording {
        self.recording
            .as_ref()
            .map(|r| r.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .unwrap_or_default()
    }

    pub(super) fn note(&self, f: impl FnOnce(&mut Recording)) {
        if let Some(r) = &self.recording {
            f(&mut r.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }
}
