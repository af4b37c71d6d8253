//! The operator's own input files, named on the command line or in the config (`--config`,
//! `--nccl-env`, the logs `nccl explain` reads, the log NCCL leaves in `nccl verify --log-dir`):
//! not the node's files, which only Root reads, but as untrusted. Every one is opened here, the
//! one way: without blocking (O_NONBLOCK: a FIFO with no writer would hold the run for ever, and
//! the open happens before any --deadline can say so), refused unless it is a regular file (a
//! FIFO, a device such as /dev/zero that never ends, a directory, a socket), and read no further
//! than its size when it was opened, or than the caller's limit.

// The one module besides root/ that opens files to read: the operator's, never the node's.
#![allow(clippy::disallowed_methods)]

use std::io::Read as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Why an input was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{0}")]
    Open(std::io::Error),
    /// What it is instead: `a FIFO`, `a character device`, ...
    #[error("{0}, not a regular file")]
    NotRegular(&'static str),
    #[error("{len} bytes, over the {limit}-byte limit")]
    TooLarge { len: u64, limit: u64 },
    #[error("{0}")]
    Read(std::io::Error),
}

/// An input file, open: reads end at the size it had when opened (a file that grows while it is
/// read, or a special file that claims a size, gives no more than that).
#[derive(Debug)]
pub struct Input {
    file: std::io::Take<std::fs::File>,
    len: u64,
    mode: u32,
    /// Modification time, seconds since the epoch.
    mtime: i64,
}

impl Input {
    /// Its size when it was opened: what reading it gives at most.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// When it was last modified, seconds since the epoch (from the open file, not its path).
    pub fn modified(&self) -> i64 {
        self.mtime
    }

    /// Its permission bits (`0o600`), for inputs that must be private (a token).
    pub fn mode(&self) -> u32 {
        self.mode & 0o7777
    }

    /// Reads it whole, refused when over `limit` bytes (a file that grew past it since it was
    /// opened too).
    pub fn read_all(self, limit: u64) -> Result<Vec<u8>, InputError> {
        if self.len > limit {
            return Err(InputError::TooLarge {
                len: self.len,
                limit,
            });
        }
        let mut bytes = Vec::with_capacity(self.len as usize);
        self.file
            .into_inner()
            .take(limit + 1)
            .read_to_end(&mut bytes)
            .map_err(InputError::Read)?;
        if bytes.len() as u64 > limit {
            return Err(InputError::TooLarge {
                len: bytes.len() as u64,
                limit,
            });
        }
        Ok(bytes)
    }

    /// The open file itself, to read past the length it had when opened (a log that grows:
    /// `nccl explain --follow`). Only a regular file was opened, so reads never block.
    pub fn into_file(self) -> std::fs::File {
        self.file.into_inner()
    }
}

impl std::io::Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.file.read(buf)
    }
}

/// Opens the input at `path`: a regular file, or `/dev/null` (the usual way to say "none"),
/// which reads as empty.
pub fn open(path: &Path) -> Result<Input, InputError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(InputError::Open)?;
    let meta = file.metadata().map_err(InputError::Open)?;
    let ft = meta.file_type();
    // devices.txt: char 1:3 is /dev/null.
    let len = if ft.is_char_device() && meta.rdev() == libc::makedev(1, 3) {
        0
    } else if ft.is_file() {
        meta.len()
    } else {
        return Err(InputError::NotRegular(kind_of(&ft)));
    };
    // A regular file never blocks: reads are the ordinary kind again.
    crate::sys::fd::set_blocking(&file).map_err(InputError::Open)?;
    Ok(Input {
        file: file.take(len),
        len,
        mode: meta.mode(),
        mtime: meta.mtime(),
    })
}

/// Reads the input at `path` whole, refused when over `limit` bytes (a file that grew past
/// it since it was opened too).
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, InputError> {
    open(path)?.read_all(limit)
}

/// Standard input as an input stream (`nccl explain -`): a pipe, a socket, a terminal or a
/// regular file is read as it comes; a device that is none of these (`< /dev/zero`, which never
/// ends) or a directory is refused. `/dev/null` reads as empty.
pub fn check_stdin() -> Result<(), InputError> {
    use std::os::fd::AsFd as _;
    let stdin = std::io::stdin();
    let meta = stdin
        .as_fd()
        .try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
        .map_err(InputError::Open)?;
    let ft = meta.file_type();
    let null = ft.is_char_device() && meta.rdev() == libc::makedev(1, 3);
    let terminal = std::io::IsTerminal::is_terminal(&stdin);
    if ft.is_file() || ft.is_fifo() || ft.is_socket() || null || terminal {
        return Ok(());
    }
    Err(InputError::NotRegular(kind_of(&ft)))
}

/// What a file that is not a regular one is, in words (`a FIFO`, `a directory`).
pub fn kind_of(ft: &std::fs::FileType) -> &'static str {
    crate::sys::fd::kind(ft)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_only_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, "abc").unwrap();
        assert_eq!(read(&f, 3).unwrap(), b"abc");
        assert!(matches!(
            read(&f, 2),
            Err(InputError::TooLarge { len: 3, limit: 2 })
        ));
        assert_eq!(read(Path::new("/dev/null"), 10).unwrap(), b"");
        let fifo = d.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        // Opening a FIFO with no writer would block without O_NONBLOCK.
        for (p, what) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a character device"),
            (d.path(), "a directory"),
        ] {
            let e = open(p).unwrap_err();
            assert!(matches!(e, InputError::NotRegular(k) if k == what), "{e:?}");
            assert_eq!(e.to_string(), format!("{what}, not a regular file"));
        }
        // Read up to the size it had when opened, not what was appended since.
        let mut input = open(&f).unwrap();
        std::fs::write(&f, "abcdef").unwrap();
        let mut got = String::new();
        input.read_to_string(&mut got).unwrap();
        assert_eq!(got, "abc");
    }
}
