//! A path's walk through the links inside the root, one component at a time, with the semantics
//! of `openat2(RESOLVE_IN_ROOT)`: an absolute target starts again at the root, `..` never climbs
//! above it, and one lookup follows at most [`MAX_LINKS`] links through at most `PATH_MAX`
//! bytes. Directories resolved once are remembered.

use super::path::normalise_slashes;
use super::recording::Op;
use super::{Entry, Kind, ReadError, Root, SIZE_UNKNOWN, entry_of};

/// Linux's limit on symbolic links followed in one lookup (MAXSYMLINKS, include/linux/namei.h),
/// counted over the whole lookup as the kernel counts them.
const MAX_LINKS: u32 = 40;
// Longer than PATH_MAX, or a component longer than NAME_MAX, is refused as the kernel refuses it
// (ENAMETOOLONG). With MAX_LINKS, this bounds what one lookup can cost, whatever a capture's
// links or a path from a config or /etc/passwd say. The archive holds its members to the same.
use crate::sys::{NAME_MAX, PATH_MAX};

impl Root {
    /// `resolve` for a caller's path: a missing intermediate directory is reported as the path
    /// asked for (`/proc/driver/nvidia/version: not found`, not `/proc: not found`); a link
    /// loop or a permission error keeps the path where it happened, since that is the cause.
    pub(super) fn lookup(&self, path: &str) -> Result<(String, Kind), ReadError> {
        self.lookup_sized(path).map(|(p, k, _)| (p, k))
    }

    pub(super) fn lookup_sized(&self, path: &str) -> Result<(String, Kind, u64), ReadError> {
        if let Some(found) = self.in_tree(path) {
            return found;
        }
        let mut links = 0;
        self.resolve_sized(path, &mut links)
            .map_err(|e| e.asked(path))
    }

    /// The answer for a capture read into memory without walking the path: a tree holds a node
    /// only below directories (`archive::Tree` refuses a member under a link or a file), so a
    /// plain path (absolute, no empty, `.` or `..` component) that is a file or directory
    /// there, or names no entry of a directory there, resolves to exactly what the walk would
    /// find; so does a name in a parent directory the walk resolved before (the memo of
    /// [`Root::resolve_dir`]). A link as the last component, and roots that record or replay,
    /// take the walk. The fleet looks up thousands of paths per capture (issue 43).
    fn in_tree(&self, path: &str) -> Option<Result<(String, Kind, u64), ReadError>> {
        use crate::archive::{EntryKind, Node};
        let tree = self.tree.as_ref()?;
        if !plain(path) || self.recording.is_some() || !self.unread.is_empty() {
            return None;
        }
        match tree.get(path) {
            Some(Node::File(d)) => return Some(Ok((path.to_owned(), Kind::File, d.len() as u64))),
            Some(Node::Dir(_)) => return Some(Ok((path.to_owned(), Kind::Dir, 0))),
            Some(Node::Link(_)) => return None,
            None => {}
        }
        // Not a node as written: a link may be on the way (`/sys/class/infiniband/mlx5_0/...`).
        // The parent as the walk resolved it before, if it did; else the parent as written.
        let (parent, name) = split_last(path);
        let resolved = self.cached(parent);
        let parent = resolved.as_deref().unwrap_or(parent);
        let Some(Node::Dir(entries)) = tree.get(parent) else {
            return None;
        };
        match entries.get(name) {
            None => Some(Err(ReadError::NotFound {
                path: path.to_owned(),
            })),
            Some(EntryKind::Link) => None,
            Some(EntryKind::Dir) => Some(Ok((join(parent, name), Kind::Dir, 0))),
            Some(EntryKind::File) => {
                let here = join(parent, name);
                match tree.get(&here) {
                    Some(Node::File(d)) => {
                        let size = d.len() as u64;
                        Some(Ok((here, Kind::File, size)))
                    }
                    _ => None,
                }
            }
        }
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
    pub(super) fn resolve_dir(&self, path: &str, links: &mut u32) -> Result<String, ReadError> {
        not_too_long(path)?;
        let key = normalise_slashes(path);
        if key == "/" {
            return Ok(key);
        }
        // Found missing before: the walk would fail here again, the same way. Not for roots
        // that record (each failed lookup is kept) or replay (a path may fail otherwise).
        let remember = self.recording.is_none() && self.unread.is_empty();
        if remember && self.lock_missing().contains(key.as_str()) {
            return Err(ReadError::NotFound { path: key });
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
            dir = match self.follow(&dir, &key[at + 1..next], prefix, true, links) {
                Ok(found) => found.0,
                Err(e) => {
                    // Its last component is not there: every error of the walk names the
                    // prefix it was resolving, here the whole path.
                    if remember
                        && next == key.len()
                        && matches!(&e, ReadError::NotFound { path } if *path == key)
                    {
                        self.lock_missing().insert(key.clone());
                    }
                    return Err(e);
                }
            };
            self.remember_dir(prefix.to_owned(), dir.clone());
            at = next;
        }
        Ok(dir)
    }

    /// Remembers that node directory path `key` resolves to `dir`.
    fn remember_dir(&self, key: String, dir: String) {
        self.dirs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, dir);
    }

    pub(super) fn lock_missing(&self) -> std::sync::MutexGuard<'_, foldhash::HashSet<String>> {
        self.missing.lock().unwrap_or_else(|p| p.into_inner())
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
                    self.remember_dir(link, dir.clone());
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
                        // A directory found as the last component is remembered by its physical
                        // path too: the files in it are asked next (a PCI function's directory,
                        // found through its /sys/bus/pci/devices link, was looked at twice).
                        if kind == Kind::Dir && !matches!(name.as_str(), "" | "." | "..") {
                            self.remember_dir(here.clone(), here.clone());
                        }
                        return Ok((here, kind, size));
                    }
                    if kind != Kind::Dir {
                        return Err(ReadError::NotDir {
                            path: key.to_owned(),
                        });
                    }
                    if let Some(p) = physical {
                        self.remember_dir(p, here.clone());
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
pub(super) fn not_too_long(path: &str) -> Result<(), ReadError> {
    if path.len() > PATH_MAX {
        return Err(ReadError::NameTooLong {
            path: shortened(path),
        });
    }
    Ok(())
}

/// A path short enough to show: a hostile one can be megabytes long.
pub(super) fn shortened(path: &str) -> String {
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
    // Pushed, not formatted: the walk joins a path per component it looks at.
    let mut p = String::with_capacity(a.len() + 1 + b.len());
    p.push_str(a);
    if !a.ends_with('/') {
        p.push('/');
    }
    p.push_str(b);
    p
}

/// An absolute path with no empty, `.` or `..` component, within PATH_MAX and NAME_MAX: one
/// that names a tree's node as written. Split with `slash_parts` (split as a `str`, a search
/// per component, it was 4% of a fleet run's instructions).
fn plain(path: &str) -> bool {
    path.len() <= PATH_MAX
        && path.len() > 1
        && path.starts_with('/')
        && crate::archive::slash_parts(&path[1..])
            .all(|c| !c.is_empty() && c != "." && c != ".." && c.len() <= NAME_MAX)
}

/// Splits a node path into its parent and last component: `/sys/class` -> (`/sys`, `class`).
pub(super) fn split_last(path: &str) -> (&str, &str) {
    let trimmed = path.trim_end_matches('/');
    match memchr::memrchr(b'/', trimmed.as_bytes()) {
        Some(0) => ("/", &trimmed[1..]),
        Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
        None if trimmed.is_empty() => ("/", ""),
        None => ("/", trimmed),
    }
}
