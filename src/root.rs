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

// The one module allowed to touch the file system (clippy.toml forbids it elsewhere).
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Linux's limit on symbolic links followed in one lookup (MAXSYMLINKS, include/linux/namei.h),
/// counted over the whole lookup as the kernel counts them.
const MAX_LINKS: u32 = 40;
// Longer than PATH_MAX, or a component longer than NAME_MAX, is refused as the kernel refuses it
// (ENAMETOOLONG). With MAX_LINKS, this bounds what one lookup can cost, whatever a capture's
// links or a path from a config or /etc/passwd say. The archive holds its members to the same.
use crate::sys::{NAME_MAX, PATH_MAX};
/// Default cap on one file read: the limit a capture archive is held to as well.
pub const DEFAULT_READ_LIMIT: u64 = crate::archive::FILE_READ_LIMIT;

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
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::new(),
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
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::new(),
            unread_problem: None,
        }
        .with_unread())
    }

    /// A `.tar.gz` capture (what `gdrdoctor capture OUT.tar.gz` writes), read in place into
    /// memory: nothing is extracted. Refused whole when it holds anything a capture never does.
    pub fn archive(file: &Path) -> Result<Root, RootError> {
        Root::archive_within(file, None)
    }

    /// `archive`, its tree counted in a run's memory budget (`fleet`) for as long as it lives.
    /// Refused for the budget (others hold it), the archive is read again once there is room
    /// for what it is known to need: an honest capture is never refused because others were
    /// big.
    fn archive_within(
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
            listed: Mutex::default(),
            recording: None,
            unread: HashMap::new(),
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

    /// A captured root with what its capture could not read on the node ([`UNREAD`]) loaded,
    /// so that those reads fail here as they failed there. Read before any recording starts:
    /// a capture of this root writes its own.
    fn with_unread(mut self) -> Root {
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
    fn replay(&self, resolved: &str, ops: &[Op], asked: &str) -> Option<ReadError> {
        let (op, e) = self
            .unread
            .get(resolved)
            .filter(|(op, _)| ops.contains(op))?;
        let e = e.at(asked);
        self.note_unread(resolved, *op, &e);
        Some(e)
    }

    /// Remembers, when recording, a failure a copy would not reproduce.
    fn note_unread(&self, resolved: &str, op: Op, e: &ReadError) {
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

    fn note(&self, f: impl FnOnce(&mut Recording)) {
        if let Some(r) = &self.recording {
            f(&mut r.lock().unwrap_or_else(|p| p.into_inner()));
        }
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
        self.lookup(path).map(|(p, _)| p)
    }

    pub fn kind(&self, path: &str) -> Result<Kind, ReadError> {
        self.lookup(path).map(|(_, k)| k)
    }

    pub fn exists(&self, path: &str) -> bool {
        self.lookup(path).is_ok()
    }

    pub fn is_dir(&self, path: &str) -> bool {
        matches!(self.lookup(path), Ok((_, Kind::Dir)))
    }

    /// Reads a regular file, at most `DEFAULT_READ_LIMIT` bytes.
    pub fn read(&self, path: &str) -> Result<Vec<u8>, ReadError> {
        self.read_limited(path, DEFAULT_READ_LIMIT)
    }

    /// Reads a regular file of at most `limit` bytes; a longer one is an error, not a truncation.
    pub fn read_limited(&self, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        let buf = self.read_upto(path, limit + 1)?;
        if buf.len() as u64 > limit {
            return Err(ReadError::TooLarge {
                path: path.to_owned(),
                limit,
            });
        }
        Ok(buf)
    }

    /// Reads the first `n` bytes of a regular file (fewer if it is shorter, or if the kernel
    /// gives fewer: config space yields 64 bytes to an unprivileged reader).
    pub fn read_prefix(&self, path: &str, n: u64) -> Result<Vec<u8>, ReadError> {
        self.read_upto(path, n)
    }

    fn read_upto(&self, path: &str, n: u64) -> Result<Vec<u8>, ReadError> {
        let (resolved, kind, size) = self.lookup_sized(path)?;
        if let Some(e) = self.replay(&resolved, &[Op::Read], path) {
            return Err(e);
        }
        let buf = self
            .read_resolved(path, &resolved, kind, size, n)
            .inspect_err(|e| self.note_unread(&resolved, Op::Read, e))?;
        self.note(|r| {
            let kept = r.files.entry(resolved).or_default();
            if buf.len() >= kept.len() {
                kept.clone_from(&buf);
            }
        });
        Ok(buf)
    }

    fn read_resolved(
        &self,
        path: &str,
        resolved: &str,
        kind: Kind,
        size: u64,
        n: u64,
    ) -> Result<Vec<u8>, ReadError> {
        match kind {
            Kind::File => {}
            Kind::Dir => {
                return Err(ReadError::NotRegular {
                    path: path.to_owned(),
                    kind: "directory",
                });
            }
            Kind::CharDevice => {
                return Err(ReadError::NotRegular {
                    path: path.to_owned(),
                    kind: "character device",
                });
            }
            Kind::Other(k) => {
                return Err(ReadError::NotRegular {
                    path: path.to_owned(),
                    kind: k,
                });
            }
        }
        if let Some(tree) = &self.tree {
            return match tree.get(resolved) {
                Some(crate::archive::Node::File(data)) => {
                    Ok(data[..data.len().min(n as usize)].to_vec())
                }
                _ => Err(ReadError::NotFound {
                    path: path.to_owned(),
                }),
            };
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            // O_NOFOLLOW | O_NONBLOCK: even if the tree changed since we looked, never follow a
            // link out of it and never block on a FIFO.
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.host_path(resolved))
            .map_err(|e| ReadError::from_io(path, &e))?;
        let mut buf = Vec::new();
        if !self.live {
            // A capture is regular files on an ordinary file system, where a read returns less
            // than asked only at EOF: stop at the first short read, so an attribute takes one
            // read (system calls are most of a check's time).
            let mut file = file;
            let mut chunk = if size == SIZE_UNKNOWN {
                4096
            } else {
                size.saturating_add(1)
            };
            loop {
                let start = buf.len();
                let want = chunk.min(n - start as u64) as usize;
                if want == 0 {
                    break;
                }
                buf.resize(start + want, 0);
                let got = loop {
                    match file.read(&mut buf[start..]) {
                        Ok(k) => break k,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(ReadError::from_io(path, &e)),
                    }
                };
                buf.truncate(start + got);
                if got < want {
                    break;
                }
                chunk = chunk.saturating_mul(2);
            }
            return Ok(buf);
        }
        // Sysfs reports 4096 for every attribute whatever it holds, procfs 0: read to EOF, bounded.
        file.take(n)
            .read_to_end(&mut buf)
            .map_err(|e| ReadError::from_io(path, &e))?;
        Ok(buf)
    }

    /// Reads a file as UTF-8 text, with trailing whitespace (the kernel's newline) removed.
    pub fn read_text(&self, path: &str) -> Result<String, ReadError> {
        let bytes = self.read(path)?;
        let mut s = String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8 {
            path: path.to_owned(),
        })?;
        let trimmed = s.trim_end().len();
        s.truncate(trimmed);
        Ok(s)
    }

    /// Lists a directory (after resolving links to it), sorted by name.
    pub fn read_dir(&self, path: &str) -> Result<Listing, ReadError> {
        let (resolved, kind) = self.lookup(path)?;
        if kind != Kind::Dir {
            return Err(ReadError::NotDir {
                path: path.to_owned(),
            });
        }
        if let Some(e) = self.replay(&resolved, &[Op::List], path) {
            return Err(e);
        }
        let mut listing = Listing::default();
        let mut kinds = HashMap::new();
        if let Some(tree) = &self.tree {
            let Some(crate::archive::Node::Dir(entries)) = tree.get(&resolved) else {
                return Err(ReadError::NotDir {
                    path: path.to_owned(),
                });
            };
            for (name, kind) in entries {
                kinds.insert(name.clone(), tree_entry(*kind));
                listing.names.push(name.clone());
            }
            self.note(|r| {
                let entries = entries
                    .iter()
                    .map(|(n, k)| {
                        let kind = match k {
                            crate::archive::EntryKind::Dir => Listed::Dir,
                            crate::archive::EntryKind::File => Listed::File,
                            crate::archive::EntryKind::Link => Listed::Link,
                        };
                        (n.clone(), kind)
                    })
                    .collect();
                r.dirs.insert(resolved.clone());
                r.listings.insert(resolved.clone(), entries);
            });
            self.listed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(resolved, kinds);
            return Ok(listing);
        }
        let failed = |e: std::io::Error| {
            let e = ReadError::from_io(path, &e);
            self.note_unread(&resolved, Op::List, &e);
            e
        };
        let entries = std::fs::read_dir(self.host_path(&resolved)).map_err(failed)?;
        for entry in entries {
            let entry = entry.map_err(failed)?;
            // getdents' d_type: known without a stat on the file systems sysfs and captures use.
            let kind = entry.file_type().map(entry_of).ok();
            match entry.file_name().into_string() {
                Ok(name) => {
                    if let Some(k) = kind {
                        kinds.insert(name.clone(), k);
                    }
                    listing.names.push(name);
                }
                Err(raw) => listing.invalid.push(raw.to_string_lossy().into_owned()),
            }
        }
        self.note(|r| {
            let entries = listing
                .names
                .iter()
                .map(|n| {
                    let kind = match kinds.get(n) {
                        Some(Entry::Link) => Listed::Link,
                        Some(Entry::Is(Kind::File)) => Listed::File,
                        Some(Entry::Is(Kind::Dir)) => Listed::Dir,
                        _ => Listed::Special,
                    };
                    (n.clone(), kind)
                })
                .collect();
            r.dirs.insert(resolved.clone());
            r.listings.insert(resolved.clone(), entries);
        });
        if kinds.len() == listing.names.len() {
            self.listed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(resolved, kinds);
        }
        listing.names.sort();
        listing.invalid.sort();
        Ok(listing)
    }

    /// The target text of the link at `path` (not followed). Links in its parent are resolved.
    pub fn read_link(&self, path: &str) -> Result<String, ReadError> {
        not_too_long(path)?;
        let (parent, name) = split_last(path);
        let dir = self
            .resolve_dir(parent, &mut 0)
            .map_err(|e| e.asked(path))?;
        let not_a_link = || ReadError::Io {
            path: path.to_owned(),
            errno: Some(22),
            message: "not a symbolic link".into(),
        };
        let target = if let Some(tree) = &self.tree {
            match tree.get(&join(&dir, name)) {
                Some(crate::archive::Node::Link(t)) => t.clone(),
                Some(_) => return Err(not_a_link()),
                None => {
                    return Err(ReadError::NotFound {
                        path: path.to_owned(),
                    });
                }
            }
        } else {
            let target =
                std::fs::read_link(self.host_path(&join(&dir, name))).map_err(|e| {
                    match e.raw_os_error() {
                        Some(libc::EINVAL) => not_a_link(),
                        _ => ReadError::from_io(path, &e),
                    }
                })?;
            target
                .into_os_string()
                .into_string()
                .map_err(|_| ReadError::NotUtf8 {
                    path: path.to_owned(),
                })?
        };
        // Recorded whichever the root is: a capture of an archive keeps its links too.
        self.note(|r| {
            r.dirs.insert(dir.clone());
            r.links.insert(join(&dir, name), target.clone());
        });
        Ok(target)
    }

    /// Opens a character device read-write and closes it again: can this process use it?
    /// Live roots only; in a capture a device node is never opened.
    pub fn probe_device(&self, path: &str) -> Result<(), ReadError> {
        if !self.live {
            return Err(ReadError::Io {
                path: path.to_owned(),
                errno: None,
                message: "device nodes are not opened in a captured root".into(),
            });
        }
        let (resolved, kind) = self.lookup(path)?;
        if kind != Kind::CharDevice {
            return Err(ReadError::NotRegular {
                path: path.to_owned(),
                kind: "not a character device",
            });
        }
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.host_path(&resolved))
            .map(drop)
            .map_err(|e| ReadError::from_io(path, &e))
    }

    /// `resolve` for a caller's path: a missing intermediate directory is reported as the path
    /// asked for (`/proc/driver/nvidia/version: not found`, not `/proc: not found`); a link
    /// loop or a permission error keeps the path where it happened, since that is the cause.
    fn lookup(&self, path: &str) -> Result<(String, Kind), ReadError> {
        self.lookup_sized(path).map(|(p, k, _)| (p, k))
    }

    fn lookup_sized(&self, path: &str) -> Result<(String, Kind, u64), ReadError> {
        let mut links = 0;
        self.resolve_sized(path, &mut links)
            .map_err(|e| e.asked(path))
    }

    /// Resolves `path` fully: the link-free node path, what it is, and the size a regular file
    /// had when it was looked at.
    fn resolve_sized(&self, path: &str, links: &mut u32) -> Result<(String, Kind, u64), ReadError> {
        not_too_long(path)?;
        let (parent, name) = split_last(path);
        let dir = self.resolve_dir(parent, links)?;
        self.follow(&dir, name, path, false, links)
    }

    /// Resolves a directory path, memoised: sysfs lookups share long prefixes. A loop over the
    /// components, never a recursion: a path of thousands of components (from a capture, a
    /// config, /etc/passwd) once overflowed the stack here (issue 25).
    fn resolve_dir(&self, path: &str, links: &mut u32) -> Result<String, ReadError> {
        not_too_long(path)?;
        let key = normalise_slashes(path);
        if key == "/" {
            return Ok(key);
        }
        // The longest prefix already resolved, then the rest one component at a time, each
        // prefix remembered.
        let (mut dir, mut at) = {
            let dirs = self.dirs.lock().unwrap_or_else(|p| p.into_inner());
            let mut end = key.len();
            loop {
                if let Some(hit) = dirs.get(&key[..end]) {
                    break (hit.clone(), end);
                }
                match key[..end].rfind('/') {
                    Some(i) if i > 0 => end = i,
                    _ => break ("/".to_owned(), 0),
                }
            }
        };
        while at < key.len() {
            let next = key[at + 1..].find('/').map_or(key.len(), |i| at + 1 + i);
            let prefix = &key[..next];
            dir = self
                .follow(&dir, &key[at + 1..next], prefix, true, links)?
                .0;
            self.dirs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(prefix.to_owned(), dir.clone());
            at = next;
        }
        Ok(dir)
    }

    fn cached(&self, key: &str) -> Option<String> {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned()
    }

    /// Resolves the component `name` inside the resolved directory `dir`, following links: a
    /// link's target takes its place among the components still to walk (a loop, not a
    /// recursion). `links` counts the links of the whole lookup, as the kernel does; `key` is the
    /// path asked for up to this component, named in errors. With `want_dir`, the result must be
    /// a directory.
    fn follow(
        &self,
        dir: &str,
        name: &str,
        key: &str,
        want_dir: bool,
        links: &mut u32,
    ) -> Result<(String, Kind, u64), ReadError> {
        /// What is left to do: a component to walk, or, once a link's target has been walked,
        /// remembering where the link led.
        enum Todo {
            Name(String),
            Led(String),
        }
        let mut dir = dir.to_owned();
        let mut todo = vec![Todo::Name(name.to_owned())];
        while let Some(next) = todo.pop() {
            let name = match next {
                Todo::Name(n) => n,
                Todo::Led(link) => {
                    self.dirs
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(link, dir.clone());
                    continue;
                }
            };
            // Anything still to walk after this component walks inside it.
            let dir_needed = want_dir || !todo.is_empty();
            // Also memoised by the physical path: `/sys/bus/pci/devices/../../../devices/pci0000:15`
            // and `/sys/devices/pci0000:15` are one directory, looked at once.
            let physical = (dir_needed && !matches!(name.as_str(), "" | "." | ".."))
                .then(|| join(&dir, &name));
            if let Some(hit) = physical.as_deref().and_then(|p| self.cached(p)) {
                dir = hit;
                continue;
            }
            match self.step(&dir, &name, key)? {
                Step::Found(here, kind, size) => {
                    if !dir_needed {
                        return Ok((here, kind, size));
                    }
                    if kind != Kind::Dir {
                        return Err(ReadError::NotDir {
                            path: key.to_owned(),
                        });
                    }
                    if let Some(p) = physical {
                        self.dirs
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .insert(p, here.clone());
                    }
                    dir = here;
                }
                Step::Link(here, target) => {
                    *links += 1;
                    if *links > MAX_LINKS {
                        return Err(ReadError::Loop {
                            path: key.to_owned(),
                        });
                    }
                    if target.len() > PATH_MAX {
                        return Err(ReadError::NameTooLong {
                            path: shortened(&here),
                        });
                    }
                    // An empty target names nothing (the kernel says ENOENT).
                    if target.is_empty() {
                        return Err(ReadError::NotFound {
                            path: key.to_owned(),
                        });
                    }
                    if target.starts_with('/') {
                        dir = "/".to_owned();
                    }
                    if let Some(p) = physical {
                        todo.push(Todo::Led(p));
                    }
                    todo.extend(
                        target
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .rev()
                            .map(|c| Todo::Name(c.to_owned())),
                    );
                }
            }
        }
        // Only a link to `/` (or `.`) ends here: the directory it led to.
        Ok((dir, Kind::Dir, 0))
    }

    /// One component `name` inside the already resolved directory `dir`, links not followed.
    fn step(&self, dir: &str, name: &str, key: &str) -> Result<Step, ReadError> {
        match name {
            "" | "." => return Ok(Step::Found(dir.to_owned(), Kind::Dir, 0)),
            // Clamped at the root, as RESOLVE_IN_ROOT does.
            ".." => return Ok(Step::Found(split_last(dir).0.to_owned(), Kind::Dir, 0)),
            _ => {}
        }
        if name.len() > NAME_MAX || dir.len() + 1 + name.len() > PATH_MAX {
            return Err(ReadError::NameTooLong {
                path: shortened(key),
            });
        }
        let here = join(dir, name);
        if let Some(e) = self.replay(&here, &[Op::Lookup, Op::Read], key) {
            return Err(e);
        }
        let known = self
            .listed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(dir)
            .map(|l| l.get(name).copied());
        let (entry, size) = match known {
            // The directory was listed: its entries are known without a stat.
            Some(Some(entry)) => (entry, SIZE_UNKNOWN),
            Some(None) => {
                return Err(ReadError::NotFound {
                    path: key.to_owned(),
                });
            }
            None => match &self.tree {
                Some(tree) => match tree.get(&here) {
                    Some(crate::archive::Node::Dir(_)) => (Entry::Is(Kind::Dir), 0),
                    Some(crate::archive::Node::File(d)) => (Entry::Is(Kind::File), d.len() as u64),
                    Some(crate::archive::Node::Link(_)) => (Entry::Link, 0),
                    None => {
                        return Err(ReadError::NotFound {
                            path: key.to_owned(),
                        });
                    }
                },
                None => {
                    let meta = std::fs::symlink_metadata(self.host_path(&here)).map_err(|e| {
                        let e = ReadError::from_io(&here, &e);
                        self.note_unread(&here, Op::Lookup, &e);
                        e.asked(key)
                    })?;
                    (entry_of(meta.file_type()), meta.len())
                }
            },
        };
        if entry == Entry::Link {
            let target = match &self.tree {
                Some(tree) => match tree.get(&here) {
                    Some(crate::archive::Node::Link(t)) => t.clone(),
                    _ => {
                        return Err(ReadError::NotFound {
                            path: key.to_owned(),
                        });
                    }
                },
                None => std::fs::read_link(self.host_path(&here))
                    .map_err(|e| {
                        let e = ReadError::from_io(&here, &e);
                        self.note_unread(&here, Op::Lookup, &e);
                        e.asked(key)
                    })?
                    .into_os_string()
                    .into_string()
                    .map_err(|_| ReadError::NotUtf8 {
                        path: key.to_owned(),
                    })?,
            };
            self.note(|r| {
                r.dirs.insert(dir.to_owned());
                r.links.insert(here.clone(), target.clone());
            });
            return Ok(Step::Link(here, target));
        }
        let Entry::Is(kind) = entry else {
            unreachable!("links are returned above")
        };
        if kind == Kind::Dir {
            self.note(|r| {
                r.dirs.insert(here.clone());
            });
        }
        Ok(Step::Found(here, kind, size))
    }
}

/// One component looked at: what it is, or the link it is and its target.
enum Step {
    Found(String, Kind, u64),
    Link(String, String),
}

/// Refuses a path longer than the kernel takes (ENAMETOOLONG).
fn not_too_long(path: &str) -> Result<(), ReadError> {
    if path.len() > PATH_MAX {
        return Err(ReadError::NameTooLong {
            path: shortened(path),
        });
    }
    Ok(())
}

/// A path short enough to show: a hostile one can be megabytes long.
fn shortened(path: &str) -> String {
    const SHOWN: usize = 120;
    if path.len() <= 2 * SHOWN {
        return path.to_owned();
    }
    let mut cut = SHOWN;
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes)", &path[..cut], path.len())
}

/// `a` joined with `b` using `/`; `a` is a node path.
pub fn join(a: &str, b: &str) -> String {
    if a.ends_with('/') {
        format!("{a}{b}")
    } else {
        format!("{a}/{b}")
    }
}

/// Splits a node path into its parent and last component: `/sys/class` -> (`/sys`, `class`).
fn split_last(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    match trimmed.rfind('/') {
        Some(0) => ("/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None if trimmed.is_empty() => ("/", ""),
        None => ("/", trimmed),
    }
}

fn normalise_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len() + 1);
    for part in path.split('/').filter(|p| !p.is_empty()) {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/devices/pci0000:00/0000:00:06.0")).unwrap();
        std::fs::create_dir_all(dir.path().join("sys/bus/pci/devices")).unwrap();
        std::fs::write(
            dir.path()
                .join("sys/devices/pci0000:00/0000:00:06.0/vendor"),
            "0x10de\n",
        )
        .unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:00:06.0",
            dir.path().join("sys/bus/pci/devices/0000:00:06.0"),
        )
        .unwrap();
        let root = Root::captured(dir.path()).unwrap();
        (dir, root)
    }

    /// What a capture could not read on the node (`/gdrdoctor/unread.json`) fails here as it
    /// failed there, with its kind, through links too; and a capture of this root records it
    /// again (issue 25).
    #[test]
    fn recorded_failures_are_replayed() {
        let (dir, _) = tree();
        let base = dir.path();
        // The directories a capture walked through are in it, the failed entries are not.
        for d in ["sys/class/infiniband", "etc", "gdrdoctor"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(
            base.join("gdrdoctor/unread.json"),
            r#"{"schema": "gdrdoctor.unread", "unread": [
                {"path": "/sys/devices/pci0000:00/0000:00:06.0/config", "op": "read",
                 "error": "permission-denied", "message": "permission denied"},
                {"path": "/sys/class/infiniband", "op": "list",
                 "error": "permission-denied", "message": "permission denied"},
                {"path": "/etc/nccl.conf", "op": "read", "error": "not-regular", "kind": "FIFO",
                 "message": "not a regular file (FIFO)"},
                {"path": "/sys/kernel", "op": "lookup", "error": "io", "errno": 5,
                 "message": "Input/output error (os error 5)"}]}"#,
        )
        .unwrap();
        let root = Root::captured(base).unwrap().recording();
        assert_eq!(root.unread_problem(), None);
        assert_eq!(
            root.read("/sys/bus/pci/devices/0000:00:06.0/config"),
            Err(ReadError::PermissionDenied {
                path: "/sys/bus/pci/devices/0000:00:06.0/config".into()
            })
        );
        assert_eq!(
            root.read_dir("/sys/class/infiniband").unwrap_err(),
            ReadError::PermissionDenied {
                path: "/sys/class/infiniband".into()
            }
        );
        assert!(
            root.is_dir("/sys/class/infiniband"),
            "listing, not lookup, failed"
        );
        assert_eq!(
            root.read("/etc/nccl.conf"),
            Err(ReadError::NotRegular {
                path: "/etc/nccl.conf".into(),
                kind: "FIFO"
            })
        );
        assert!(matches!(
            root.read("/sys/kernel/iommu_groups/0/type"),
            Err(ReadError::Io { errno: Some(5), .. })
        ));
        // What was read well still is.
        assert_eq!(
            root.read_text("/sys/bus/pci/devices/0000:00:06.0/vendor")
                .unwrap(),
            "0x10de"
        );
        let again = root.recorded();
        assert_eq!(again.unread.len(), 4, "{:?}", again.unread);
        assert!(again.unread_json().unwrap().contains("\"kind\": \"FIFO\""));
        // A record that is not one is a problem, and replays nothing.
        std::fs::write(base.join("gdrdoctor/unread.json"), "[]").unwrap();
        let root = Root::captured(base).unwrap();
        assert!(root.unread_problem().is_some());
        assert!(root.read("/etc/nccl.conf").unwrap_err().is_not_found());
    }

    /// A link read with `read_link` is recorded for `gdrdoctor capture` from a directory and from
    /// an archive alike (an archive's links used to be read but not recorded, so a capture of an
    /// archive lost every `driver` link, and the GPUs' drivers with them).
    #[test]
    fn read_links_are_recorded_from_archives_too() {
        let (d, dir_root) = tree();
        let archive = d.path().join("capture.tar.gz");
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&archive).unwrap(),
            flate2::Compression::fast(),
        );
        let mut tar = tar::Builder::new(gz);
        tar.follow_symlinks(false);
        tar.append_dir_all("sys", d.path().join("sys")).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
        let link = "/sys/bus/pci/devices/0000:00:06.0";
        for root in [dir_root, Root::archive(&archive).unwrap()] {
            let root = root.recording();
            let target = root.read_link(link).unwrap();
            assert_eq!(target, "../../../devices/pci0000:00/0000:00:06.0");
            assert_eq!(root.recorded().links.get(link), Some(&target), "{root:?}");
        }
    }

    #[test]
    fn relative_links_resolve_inside() {
        let (_d, root) = tree();
        assert_eq!(
            root.read_text("/sys/bus/pci/devices/0000:00:06.0/vendor")
                .unwrap(),
            "0x10de"
        );
        assert_eq!(
            root.canonical("/sys/bus/pci/devices/0000:00:06.0").unwrap(),
            "/sys/devices/pci0000:00/0000:00:06.0"
        );
    }

    #[test]
    fn absolute_link_stays_in_root() {
        let (d, root) = tree();
        // A capture's absolute link to the host's /etc/hostname must read the capture's copy.
        std::fs::create_dir_all(d.path().join("etc")).unwrap();
        std::fs::write(d.path().join("etc/hostname"), "captured\n").unwrap();
        symlink("/etc/hostname", d.path().join("sys/evil")).unwrap();
        assert_eq!(root.read_text("/sys/evil").unwrap(), "captured");
        symlink("/etc/passwd", d.path().join("sys/evil2")).unwrap();
        assert!(root.read_text("/sys/evil2").unwrap_err().is_not_found());
    }

    #[test]
    fn dotdot_link_is_clamped_at_root() {
        let (d, root) = tree();
        symlink(
            "../../../../../../../../etc/passwd",
            d.path().join("sys/devices/up"),
        )
        .unwrap();
        let err = root.read_text("/sys/devices/up").unwrap_err();
        assert_eq!(
            err,
            ReadError::NotFound {
                path: "/sys/devices/up".into()
            }
        );
        // And a path with .. in it cannot climb out either.
        assert!(
            root.read_text("/../../../../etc/passwd")
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn loops_and_dangling_links_are_errors() {
        let (d, root) = tree();
        symlink("b", d.path().join("sys/a")).unwrap();
        symlink("a", d.path().join("sys/b")).unwrap();
        assert!(matches!(
            root.read_text("/sys/a"),
            Err(ReadError::Loop { .. })
        ));
        symlink("nowhere", d.path().join("sys/dangling")).unwrap();
        assert!(root.read_text("/sys/dangling").unwrap_err().is_not_found());
        assert_eq!(root.read_link("/sys/dangling").unwrap(), "nowhere");
    }

    /// Paths and link targets of thousands of components are refused as the kernel refuses
    /// them, without recursion (issue 25: a stack overflow before); within PATH_MAX they resolve.
    #[test]
    fn long_paths_are_refused_and_long_targets_within_the_limit_resolve() {
        let (d, root) = tree();
        let long = format!("/sys{}", "/x".repeat(10_000));
        for e in [
            root.read_text(&long).unwrap_err(),
            root.read_link(&long).unwrap_err(),
            root.read_text(&format!("/sys/{}", "y".repeat(300)))
                .unwrap_err(),
        ] {
            assert!(matches!(e, ReadError::NameTooLong { .. }), "{e:?}");
            assert!(e.to_string().len() < 300, "{e}");
        }
        // 2,000 components, within PATH_MAX (a link on disk can hold no more).
        let target = format!("{}devices/pci0000:00/0000:00:06.0", "./".repeat(2_000));
        symlink(&target, d.path().join("sys/deep")).unwrap();
        assert_eq!(root.read_text("/sys/deep/vendor").unwrap(), "0x10de");
        assert_eq!(
            root.canonical("/sys/deep").unwrap(),
            "/sys/devices/pci0000:00/0000:00:06.0"
        );
    }

    /// MAXSYMLINKS counts every link of one lookup, as the kernel counts them: 40 pass, 41 are
    /// a loop, however they nest.
    #[test]
    fn links_are_counted_over_the_whole_lookup() {
        let (d, root) = tree();
        symlink(
            "devices/pci0000:00/0000:00:06.0/vendor",
            d.path().join("sys/l40"),
        )
        .unwrap();
        for i in 0..40 {
            symlink(format!("l{}", i + 1), d.path().join(format!("sys/l{i}"))).unwrap();
        }
        assert_eq!(root.read_text("/sys/l1").unwrap(), "0x10de");
        assert!(matches!(
            root.read_text("/sys/l0"),
            Err(ReadError::Loop { path }) if path == "/sys/l0"
        ));
        // A link to the root itself, twice on the way: 2 + 38 links pass, 2 + 39 do not.
        symlink("/", d.path().join("sys/top")).unwrap();
        assert_eq!(root.canonical("/sys/top").unwrap(), "/");
        assert_eq!(root.read_text("/sys/top/sys/top/sys/l2").unwrap(), "0x10de");
        // (On a fresh root: a directory resolved once is remembered, its links not walked again.)
        let fresh = Root::captured(d.path()).unwrap();
        assert!(matches!(
            fresh.read_text("/sys/top/sys/top/sys/l1"),
            Err(ReadError::Loop { .. })
        ));
    }

    #[test]
    fn fifo_is_refused_without_blocking() {
        let (d, root) = tree();
        let fifo = d.path().join("sys/fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(matches!(
            root.read("/sys/fifo"),
            Err(ReadError::NotRegular { kind: "FIFO", .. })
        ));
    }

    #[test]
    fn oversized_file_is_an_error() {
        let (d, root) = tree();
        std::fs::write(d.path().join("sys/big"), vec![b'x'; 2048]).unwrap();
        assert!(matches!(
            root.read_limited("/sys/big", 1024),
            Err(ReadError::TooLarge { .. })
        ));
        assert_eq!(root.read_limited("/sys/big", 2048).unwrap().len(), 2048);
    }

    #[test]
    fn listed_directories_answer_lookups() {
        let (d, root) = tree();
        let dir = d.path().join("sys/devices/pci0000:00/0000:00:06.0");
        std::fs::write(dir.join("big"), vec![b'y'; 10_000]).unwrap();
        symlink("big", dir.join("link")).unwrap();
        let listing = root.read_dir("/sys/bus/pci/devices/0000:00:06.0").unwrap();
        assert_eq!(listing.names, ["big", "link", "vendor"]);
        // Sizes are unknown after a listing: the read grows until a short read.
        assert_eq!(
            root.read("/sys/devices/pci0000:00/0000:00:06.0/big")
                .unwrap()
                .len(),
            10_000
        );
        assert_eq!(
            root.read("/sys/devices/pci0000:00/0000:00:06.0/link")
                .unwrap()
                .len(),
            10_000
        );
        assert_eq!(
            root.read_prefix("/sys/devices/pci0000:00/0000:00:06.0/big", 64)
                .unwrap()
                .len(),
            64
        );
        assert!(
            root.read("/sys/devices/pci0000:00/0000:00:06.0/absent")
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn not_a_root() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            Root::captured(d.path()),
            Err(RootError::NotARoot(_))
        ));
        assert!(matches!(
            Root::captured(&d.path().join("missing")),
            Err(RootError::Open(..))
        ));
    }

    #[test]
    fn split_and_normalise() {
        assert_eq!(split_last("/sys/class"), ("/sys", "class"));
        assert_eq!(split_last("/sys"), ("/", "sys"));
        assert_eq!(split_last("/"), ("/", ""));
        assert_eq!(normalise_slashes("//sys///class/"), "/sys/class");
    }
}
