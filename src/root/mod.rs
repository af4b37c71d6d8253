//! The one door to the node's files: the live system (`/`) or a captured copy of it.
//!
//! Every read in gdrdoctor goes through a [`Root`]. Paths are always the node's own absolute
//! paths (`/sys/class/infiniband`), whichever root they are read from, so evidence in a report
//! reads the same live and offline.
//!
//! A captured root is untrusted input: it may come from a ticket or from a node that was tampered
//! with. Symbolic links inside it are therefore resolved by us, one component at a time, with the
//! semantics of `openat2(RESOLVE_IN_ROOT)`: an absolute target starts again at the root of the
//! capture, and `..` never climbs above it. No read can leave the captured tree, whatever its
//! links say. Only regular files are opened (a FIFO or device node in a capture would block or
//! have side effects), and every read is bounded. The live root uses the same resolver, so the
//! two modes differ only in where the tree is.
//!
//! The folder: this file holds the [`Root`] and how one is opened; `read.rs` its reads (files,
//! directories, links, devices); `resolve.rs` the walk of a path through the links inside the
//! root, bounded as the kernel bounds it; `archive.rs` the roots read from a `.tar.gz` capture;
//! `recording.rs` what a capture records and what a captured root replays ([`UNREAD`]).

// The one module allowed to touch the file system (clippy.toml forbids it elsewhere).
#![allow(clippy::disallowed_methods)]

mod archive;
mod path;
mod read;
mod recording;
mod resolve;
#[cfg(test)]
mod tests;
mod write;

// Lookups are most of a capture's cost in the fleet: foldhash's seeded hash, not SipHash (issue 43).
use foldhash::HashMap;
use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub use recording::{Listed, Op, Recording, UNREAD};
pub use resolve::join;
use resolve::shortened;
pub use write::{BACKUP_SUFFIX, Written};

/// Default cap on one file read: the limit a capture archive is held to as well.
pub const DEFAULT_READ_LIMIT: u64 = crate::archive::FILE_READ_LIMIT;

/// The most of a library's prefix read for a version string: what a capture archive takes of an
/// ELF file (issue 41).
pub const LIBRARY_PREFIX_LIMIT: u64 = crate::archive::MAX_LIBRARY_MEMBER_BYTES;

// What a read error is lives with the other model types (crate::model::ReadError): the facts
// that keep one are model types too. How an I/O error becomes one is the root's.
pub use crate::model::ReadError;

impl ReadError {
    /// The same error, reported for the path a caller asked about when the cause is absence.
    fn asked(self, path: &str) -> ReadError {
        match self {
            ReadError::NotFound { .. } => ReadError::NotFound {
                path: path.to_owned(),
            },
            ReadError::NotDir { .. } => ReadError::NotDir {
                path: path.to_owned(),
            },
            other => other,
        }
    }

    fn from_io(path: &str, e: &std::io::Error) -> ReadError {
        let path = path.to_owned();
        match e.kind() {
            ErrorKind::NotFound => ReadError::NotFound { path },
            ErrorKind::PermissionDenied => ReadError::PermissionDenied { path },
            ErrorKind::NotADirectory => ReadError::NotDir { path },
            _ if e.raw_os_error() == Some(libc::ELOOP) => ReadError::Loop { path },
            _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => ReadError::NameTooLong {
                path: shortened(&path),
            },
            _ => ReadError::Io {
                path,
                errno: e.raw_os_error(),
                message: e.to_string(),
            },
        }
    }
}

/// A directory listing: the names that are valid UTF-8, sorted, and the ones that were not.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    pub names: Vec<String>,
    /// Entries whose names are not UTF-8 (shown lossily). Sysfs never makes these; a capture can.
    pub invalid: Vec<String>,
}

/// The kind of a path's target, as far as a read needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    CharDevice,
    Other(&'static str),
}

pub struct Root {
    base: PathBuf,
    live: bool,
    /// A `.tar.gz` capture read into memory: every lookup and read goes to it, none to disk.
    tree: Option<std::sync::Arc<crate::archive::Tree>>,
    /// Node directory path -> resolved node directory path (no links left in it).
    dirs: Mutex<HashMap<String, String>>,
    /// Node directory paths found missing, as the walk found them (their last component not
    /// there): the counters a port does not have are asked one by one, each below the same
    /// absent `hw_counters` (the bench root looked at each such directory 14 times).
    missing: Mutex<foldhash::HashSet<String>>,
    /// Resolved directory -> what each of its entries is, for directories already listed (GID
    /// tables, /sys/bus/pci/devices): a lookup in them needs no stat.
    listed: Mutex<HashMap<String, HashMap<String, Entry>>>,
    /// What was looked at, when recording for `gdrdoctor capture`.
    recording: Option<Mutex<Recording>>,
    /// What the capture this root is could not read on the node ([`UNREAD`]): resolved node
    /// path -> how it was read and why it failed. A read of one fails the same way here.
    unread: HashMap<String, (Op, ReadError)>,
    /// Why [`UNREAD`] itself could not be used, if it could not.
    unread_problem: Option<String>,
}

/// A directory entry's type, as `getdents` or `stat` report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Link,
    Is(Kind),
}

/// A file's size when a lookup did not stat it.
const SIZE_UNKNOWN: u64 = u64::MAX;

fn tree_entry(k: crate::archive::EntryKind) -> Entry {
    match k {
        crate::archive::EntryKind::Dir => Entry::Is(Kind::Dir),
        crate::archive::EntryKind::File => Entry::Is(Kind::File),
        crate::archive::EntryKind::Link => Entry::Link,
    }
}

fn entry_of(ft: std::fs::FileType) -> Entry {
    if ft.is_symlink() {
        Entry::Link
    } else if ft.is_file() {
        Entry::Is(Kind::File)
    } else if ft.is_dir() {
        Entry::Is(Kind::Dir)
    } else if ft.is_char_device() {
        Entry::Is(Kind::CharDevice)
    } else if ft.is_fifo() {
        Entry::Is(Kind::Other("FIFO"))
    } else if ft.is_socket() {
        Entry::Is(Kind::Other("socket"))
    } else {
        Entry::Is(Kind::Other("block device"))
    }
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("base", &self.base)
            .field("live", &self.live)
            .finish()
    }
}

/// Opening a root failed: the directory is not usable as a root at all.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    #[error("{0}: cannot open root: {1}")]
    Open(PathBuf, std::io::Error),
    #[error("{0}: not a directory")]
    NotDir(PathBuf),
    #[error("{0}: not a captured root: it has neither sys/ nor proc/")]
    NotARoot(PathBuf),
    #[error("{0}: capture refused: {1}")]
    Archive(PathBuf, String),
}

impl Root {
    /// The running system.
    pub fn live() -> Root {
        Root {
            base: PathBuf::from("/"),
            live: true,
            tree: None,
            dirs: Mutex::default(),
            missing: Mutex::default(),
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::default(),
            unread_problem: None,
        }
    }

    /// A captured tree (with `sys/`, `proc/`, `dev/`). `/` itself means the live system.
    pub fn captured(dir: &Path) -> Result<Root, RootError> {
        let meta = std::fs::metadata(dir).map_err(|e| RootError::Open(dir.to_owned(), e))?;
        if !meta.is_dir() {
            return Err(RootError::NotDir(dir.to_owned()));
        }
        let canon = std::fs::canonicalize(dir).map_err(|e| RootError::Open(dir.to_owned(), e))?;
        if canon == Path::new("/") {
            return Ok(Root::live());
        }
        if !canon.join("sys").is_dir() && !canon.join("proc").is_dir() {
            return Err(RootError::NotARoot(dir.to_owned()));
        }
        Ok(Root {
            base: canon,
            live: false,
            tree: None,
            dirs: Mutex::default(),
            missing: Mutex::default(),
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::default(),
            unread_problem: None,
        }
        .with_unread())
    }
    /// `--root PATH`: a capture directory, or a `.tar.gz` / `.tgz` capture file.
    pub fn open(path: &Path) -> Result<Root, RootError> {
        Root::open_within(path, None)
    }

    /// `open`, an archive's tree counted in a run's memory budget (`fleet`).
    pub fn open_within(
        path: &Path,
        budget: Option<&std::sync::Arc<crate::archive::Budget>>,
    ) -> Result<Root, RootError> {
        let name = path.to_string_lossy();
        if (name.ends_with(".tar.gz") || name.ends_with(".tgz")) && path.is_file() {
            Root::archive_within(path, budget)
        } else {
            Root::captured(path)
        }
    }

    pub fn is_live(&self) -> bool {
        self.live
    }
    /// Where the tree is on this machine (`/` when live).
    pub fn base(&self) -> &Path {
        &self.base
    }

    fn host_path(&self, node_path: &str) -> PathBuf {
        self.base.join(node_path.trim_start_matches('/'))
    }

    /// Resolves every link in `path`, inside the root. Returns the node path with no links left.
    pub fn canonical(&self, path: &str) -> Result<String, ReadError> {
        self.looked_up(path).map(|(p, _)| p)
    }

    pub fn kind(&self, path: &str) -> Result<Kind, ReadError> {
        self.looked_up(path).map(|(_, k)| k)
    }

    pub fn exists(&self, path: &str) -> bool {
        self.looked_up(path).is_ok()
    }

    pub fn is_dir(&self, path: &str) -> bool {
        matches!(self.looked_up(path), Ok((_, Kind::Dir)))
    }

    /// A caller's lookup, remembered when recording: a directory found is kept, a regular file
    /// found is kept empty where nothing read it (a read keeps its bytes), so that a copy
    /// answers "is it there" as the node did, whatever asked.
    fn looked_up(&self, path: &str) -> Result<(String, Kind), ReadError> {
        let found = self.lookup(path)?;
        self.note(|r| match found.1 {
            Kind::Dir => {
                r.dirs.insert(found.0.clone());
            }
            Kind::File => {
                r.files.entry(found.0.clone()).or_default();
            }
            _ => {}
        });
        Ok(found)
    }
}
