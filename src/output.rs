//! Writing a report file so that a reader never sees half of it: node_exporter's textfile
//! collector, an NFD worker or a prolog may read it at any moment.
//!
//! Only a regular file (or nothing) is replaced. gdrdoctor often runs as root, and renaming a
//! temporary file over `/dev/full` or `/dev/stdout` would silently put a regular file in place
//! of a device or a link; those are written in place instead, as a shell's `>` would.

use std::io::Write as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

/// [`write`] with mode 0644: a report file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write(path, bytes, 0o644)
}

/// Writes `bytes` to `path`:
///
/// - a regular file, or nothing: through a temporary file in the same directory (named so that
///   no collector picks it up: `.NAME.tmp.PID`), flushed to disk, given `mode`, then renamed
///   over `path`. The directory must exist.
/// - a symbolic link: the same, where the link ends (the link stays), when that is a regular
///   file or nothing; otherwise in place.
/// - a device, FIFO or socket: in place, neither created nor renamed nor given a mode. A FIFO
///   that no process reads is an error, never a wait.
/// - a directory: an error.
///
/// An error that concerns the link's target names it; the caller names `path`.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    match target(path)? {
        Target::Replace(p) if p == path => replace(path, bytes, mode),
        Target::Replace(p) => replace(&p, bytes, mode).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("{} (where the link points): {e}", p.display()),
            )
        }),
        Target::InPlace => in_place(path, bytes),
    }
}

enum Target {
    /// A regular file, or nothing, at this path: write a new file and rename it there.
    Replace(PathBuf),
    /// Something else: open it and write.
    InPlace,
}

fn is_a_directory() -> std::io::Error {
    std::io::Error::from_raw_os_error(libc::EISDIR)
}

#[allow(clippy::disallowed_methods)] // the operator's output path, not the node's
fn target(path: &Path) -> std::io::Result<Target> {
    let meta = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Target::Replace(path.to_owned()));
        }
        other => other?,
    };
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok(Target::Replace(path.to_owned()));
    }
    if ft.is_dir() {
        return Err(is_a_directory());
    }
    if !ft.is_symlink() {
        return Ok(Target::InPlace);
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(is_a_directory()),
        Ok(m) if m.is_file() => {
            // The file the link ends at, by name. /proc/self/fd/N links can name a file that
            // is not there any more ("x (deleted)"): unless the name leads to the very same
            // file, write through the link instead.
            let real = std::fs::canonicalize(path)?;
            Ok(match std::fs::symlink_metadata(&real) {
                Ok(r) if r.is_file() && (r.dev(), r.ino()) == (m.dev(), m.ino()) => {
                    Target::Replace(real)
                }
                _ => Target::InPlace,
            })
        }
        Ok(_) => Ok(Target::InPlace),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => dangling(path).map(Target::Replace),
        Err(e) => Err(e),
    }
}

/// Where a chain of links that ends at nothing ends: the file to create.
#[allow(clippy::disallowed_methods)] // the operator's output path, not the node's
fn dangling(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_owned();
    // The kernel's limit on links followed in one lookup (MAXSYMLINKS).
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)?;
                // A relative target is relative to the link's directory.
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            // Nothing there (or a missing directory on the way, which creating reports).
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

fn replace(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "the path names no file")
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)?;
        // The mode asked for, whatever the umask: a report a collector cannot read is lost.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes into what is at `path` (a device, a FIFO) without creating or replacing it.
fn in_place(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    // O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader, for ever; it
    // fails with ENXIO instead. A serial line would wait for its carrier.
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| {
            let fifo = std::fs::metadata(path).is_ok_and(|m| m.file_type().is_fifo());
            if fifo && e.raw_os_error() == Some(libc::ENXIO) {
                std::io::Error::new(e.kind(), "a FIFO that no process is reading (ENXIO)")
            } else {
                e
            }
        })?;
    // Written in the ordinary way: a FIFO's reader may be slower than us.
    crate::sys::fd::set_blocking(&f)?;
    f.write_all(bytes)?;
    f.flush()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a scratch directory, not a node
mod tests {
    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("gdrdoctor.prom");
        super::write_atomic(&p, b"a 1\n").unwrap();
        super::write_atomic(&p, b"a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("gdrdoctor.prom")]);
        let err = super::write_atomic(&dir.path().join("missing/x"), b"").unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn follows_links_and_keeps_them() {
        use std::os::unix::fs::{PermissionsExt as _, symlink};
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/x.json"), "old").unwrap();
        symlink("real/x.json", d.join("to-file")).unwrap();
        // A chain that ends at nothing: the file is created where it ends.
        symlink("real/../hop", d.join("to-nothing")).unwrap();
        symlink("real/y.json", d.join("hop")).unwrap();
        super::write(&d.join("to-file"), b"new", 0o755).unwrap();
        super::write(&d.join("to-nothing"), b"created", 0o644).unwrap();
        assert!(d.join("to-file").symlink_metadata().unwrap().is_symlink());
        assert!(
            d.join("to-nothing")
                .symlink_metadata()
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_to_string(d.join("real/x.json")).unwrap(),
            "new"
        );
        assert_eq!(
            std::fs::metadata(d.join("real/x.json"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o755
        );
        assert_eq!(
            std::fs::read_to_string(d.join("real/y.json")).unwrap(),
            "created"
        );
        // A directory, directly or through a link, is an error.
        symlink("real", d.join("to-dir")).unwrap();
        for p in [d.join("real"), d.join("to-dir")] {
            let e = super::write(&p, b"", 0o644).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EISDIR), "{}", p.display());
        }
        // A loop.
        symlink("loop-b", d.join("loop-a")).unwrap();
        symlink("loop-a", d.join("loop-b")).unwrap();
        assert!(super::write(&d.join("loop-a"), b"", 0o644).is_err());
    }
}
