//! The root's reads: regular files (bounded), text, directory listings, link targets, and the
//! live root's device probe. Every path is resolved inside the root first (`resolve.rs`).

use super::recording::Op;
use super::resolve::{join, not_too_long, split_last};
use super::{
    DEFAULT_READ_LIMIT, Entry, Kind, Listed, Listing, ReadError, Root, SIZE_UNKNOWN, entry_of,
    tree_entry,
};
use foldhash::HashMap;
use std::io::{ErrorKind, Read};
use std::os::unix::fs::OpenOptionsExt;

impl Root {
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
        self.read_text_limited(path, DEFAULT_READ_LIMIT)
    }

    /// [`Root::read_text`] of a file that is at most `limit` bytes: a counter (a number), an
    /// AER table (a dozen lines). A longer one is an error, and its text is never kept: a
    /// capture's megabyte where a number belongs costs nothing (issue 41).
    pub fn read_text_limited(&self, path: &str, limit: u64) -> Result<String, ReadError> {
        let bytes = self.read_limited(path, limit)?;
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
        let mut kinds = HashMap::default();
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

    /// The records of a record device (`/dev/kmsg`): one read returns one record, reading stops
    /// where the device has no more (`EAGAIN`: it is opened non-blocking, so this never waits).
    /// Records overwritten while reading (`EPIPE`) are skipped. At most `limit` records, the
    /// oldest first. Live roots only; a capture keeps what was judged in a file of its own.
    pub fn read_records(&self, path: &str, limit: usize) -> Result<Vec<String>, ReadError> {
        let mut file = self.open_device(path, false)?;
        // A record is at most 8 KiB (printk's CONSOLE_EXT_LOG_MAX); a smaller buffer is EINVAL.
        let mut buf = vec![0u8; 16 * 1024];
        let mut out = Vec::new();
        while out.len() < limit {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
                Err(e) => return Err(ReadError::from_io(path, &e)),
            }
        }
        Ok(out)
    }

    /// Opens a character device read-write and closes it again: can this process use it?
    /// Live roots only; in a capture a device node is never opened.
    pub fn probe_device(&self, path: &str) -> Result<(), ReadError> {
        self.open_device(path, true).map(drop)
    }

    /// A character device of the live root, opened non-blocking and never through a link
    /// (`write`: read-write, else read-only).
    fn open_device(&self, path: &str, write: bool) -> Result<std::fs::File, ReadError> {
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
            .write(write)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(self.host_path(&resolved))
            .map_err(|e| ReadError::from_io(path, &e))
    }
}
