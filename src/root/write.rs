//! Writes to the root's files: the one place gdrdoctor changes a file (`gdrdoctor edit`, the
//! persistent part of `fix`). Paths resolve as reads do, inside the root: a captured tree or an
//! OS image's links cannot send a write outside it. A file is replaced whole (written beside it,
//! then renamed over it, its mode kept); the first change to a file keeps the original as
//! `FILE.gdrdoctor-orig`, never overwritten after, so that the file as it was before gdrdoctor
//! touched it can always be put back.

use super::{Kind, Root};
use std::io::{Error, ErrorKind, Write as _};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

/// The suffix of the one backup gdrdoctor keeps of a file it changed.
pub const BACKUP_SUFFIX: &str = ".gdrdoctor-orig";

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The file already held these bytes: nothing was written.
    Unchanged,
    /// A new file.
    Created,
    /// Replaced; the original kept at this node path (None: a backup was already there).
    Replaced { backup: Option<String> },
}

impl Root {
    /// The file's bytes, or None when it does not exist. An error: it exists and cannot be
    /// read, or is not a regular file.
    pub fn read_for_edit(&self, path: &str) -> std::io::Result<Option<Vec<u8>>> {
        match self.lookup(path) {
            Ok((_, Kind::File)) => self
                .read(path)
                .map(Some)
                .map_err(|e| Error::other(e.to_string())),
            Ok((p, _)) => Err(Error::other(format!("{p}: not a regular file"))),
            Err(crate::model::ReadError::NotFound { .. }) => Ok(None),
            Err(e) => Err(Error::other(e.to_string())),
        }
    }

    /// Writes `bytes` as the file at node path `path`, creating its directories, unless it
    /// holds them already; keeps the original once (see the module). Refused on an archive.
    pub fn write_file(&self, path: &str, bytes: &[u8]) -> std::io::Result<Written> {
        if self.tree.is_some() {
            return Err(Error::other(
                "a capture archive is read-only: unpack it and edit the directory",
            ));
        }
        let old = self.read_for_edit(path)?;
        if old.as_deref() == Some(bytes) {
            return Ok(Written::Unchanged);
        }
        let node = match &old {
            Some(_) => self
                .canonical(path)
                .map_err(|e| Error::other(e.to_string()))?,
            None => self.make_parent(path)?,
        };
        let host = self.host_path(&node);
        let mut backup = None;
        if let Some(old) = &old {
            let b = format!("{node}{BACKUP_SUFFIX}");
            if !self.exists(&b) {
                let hb = self.host_path(&b);
                replace(&hb, old, mode_of(&host))?;
                backup = Some(b);
            }
        }
        replace(&host, bytes, mode_of(&host))?;
        Ok(match old {
            None => Written::Created,
            Some(_) => Written::Replaced { backup },
        })
    }

    /// The node path a new file at `path` gets: its directory resolved inside the root and the
    /// missing directories made, one at a time.
    fn make_parent(&self, path: &str) -> std::io::Result<String> {
        let path = path.trim_end_matches('/');
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        if name.is_empty() || name == "." || name == ".." {
            return Err(Error::other(format!("{path}: not a file name")));
        }
        let mut dir = String::from("/");
        for c in parent.split('/').filter(|c| !c.is_empty()) {
            let next = super::join(&dir, c);
            match self.lookup(&next) {
                Ok((p, Kind::Dir)) => dir = p,
                Ok((p, _)) => return Err(Error::other(format!("{p}: not a directory"))),
                Err(crate::model::ReadError::NotFound { .. }) => {
                    let host = self.host_path(&dir).join(c);
                    match std::fs::create_dir(&host) {
                        Ok(()) => {}
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                        Err(e) => return Err(Error::new(e.kind(), format!("{next}: {e}"))),
                    }
                    dir = next;
                }
                Err(e) => return Err(Error::other(e.to_string())),
            }
        }
        Ok(super::join(&dir, name))
    }
}

fn mode_of(host: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(host)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644)
}

/// Writes beside `host`, then renames over it: a reader sees the old file or the new one.
fn replace(host: &std::path::Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let name = host
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp: PathBuf = host.with_file_name(format!(".{name}.gdrdoctor-new"));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, host)
}
