//! A directory another user owns (a job's log directory), read and emptied by root without
//! following a link anywhere: opened once with `O_NOFOLLOW`, its entries opened and removed
//! relative to that descriptor (`openat`, `unlinkat`), so that swapping the directory or an
//! entry for a link during the run reaches nothing outside it. And `flock(2)`, for a journal
//! that several Epilogs append to at once.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::Path;

pub struct Dir {
    fd: OwnedFd,
}

fn c_string(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

impl Dir {
    /// Opens the directory at `path`; a link there (the last component) is refused (ELOOP or
    /// ENOTDIR), as is anything that is not a directory.
    pub fn open(path: &Path) -> io::Result<Dir> {
        let p = c_string(path.as_os_str().as_bytes())?;
        // SAFETY: a NUL-terminated path; the descriptor returned is owned below.
        let fd = unsafe {
            libc::open(
                p.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(Dir {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The owner of the directory.
    pub fn owner(&self) -> io::Result<u32> {
        use std::os::unix::fs::MetadataExt as _;
        let f = std::fs::File::from(self.fd.try_clone()?);
        Ok(f.metadata()?.uid())
    }

    /// The names in the directory (not `.` or `..`), at most `max`; `true` when there were more.
    pub fn names(&self, max: usize) -> io::Result<(Vec<OsString>, bool)> {
        // fdopendir takes the descriptor it is given: a duplicate, closed by closedir.
        // SAFETY: dup of a descriptor this Dir keeps open.
        let dup = unsafe { libc::fcntl(self.fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(io::Error::last_os_error());
        }
        // The duplicate shares the offset: start at the beginning whatever read before.
        // SAFETY: lseek on the descriptor just made.
        unsafe { libc::lseek(dup, 0, libc::SEEK_SET) };
        // SAFETY: fdopendir takes ownership of `dup` on success.
        let d = unsafe { libc::fdopendir(dup) };
        if d.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `dup` is still ours to close.
            unsafe { libc::close(dup) };
            return Err(e);
        }
        let mut names = Vec::new();
        let mut more = false;
        loop {
            // SAFETY: `d` is an open DIR stream; the entry is valid until the next readdir.
            let ent = unsafe { libc::readdir(d) };
            if ent.is_null() {
                break;
            }
            // SAFETY: d_name is NUL-terminated within the entry readdir returned.
            let name = unsafe { CStr::from_ptr((*ent).d_name.as_ptr()) }.to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            if names.len() == max {
                more = true;
                break;
            }
            names.push(OsString::from_vec(name.to_vec()));
        }
        // SAFETY: `d` is open; closedir closes `dup` with it.
        unsafe { libc::closedir(d) };
        names.sort();
        Ok((names, more))
    }

    /// Opens the entry `name` for reading: a regular file, never through a link, never
    /// waiting on a FIFO; anything else is refused with what it is.
    pub fn open_file(&self, name: &OsStr) -> io::Result<std::fs::File> {
        let n = c_string(name.as_bytes())?;
        // SAFETY: a descriptor this Dir keeps open and a NUL-terminated name.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                n.as_ptr(),
                libc::O_RDONLY
                    | libc::O_NOFOLLOW
                    | libc::O_NONBLOCK
                    | libc::O_NOCTTY
                    | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::ELOOP) {
                return Err(io::Error::new(e.kind(), "a link, not followed"));
            }
            return Err(e);
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        let f = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let ft = f.metadata()?.file_type();
        if !ft.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}, not a regular file", super::fd::kind(&ft)),
            ));
        }
        super::fd::set_blocking(&f)?;
        Ok(f)
    }

    /// Removes the entry `name` (a link is removed, never followed).
    pub fn remove(&self, name: &OsStr) -> io::Result<()> {
        let n = c_string(name.as_bytes())?;
        // SAFETY: a descriptor this Dir keeps open and a NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), n.as_ptr(), 0) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Takes an exclusive `flock(2)` on `file`, waiting at most `wait`; `false` when another
/// holder kept it that long.
pub fn lock_exclusive(file: &std::fs::File, wait: std::time::Duration) -> io::Result<bool> {
    let start = std::time::Instant::now();
    loop {
        // SAFETY: flock on a descriptor `file` keeps open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) && e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
        if start.elapsed() >= wait {
            return Ok(false);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)] // a scratch directory, not a node
mod tests {
    use super::*;

    #[test]
    fn reads_and_empties_without_following_links() {
        let d = tempfile::tempdir().unwrap();
        let job = d.path().join("job");
        std::fs::create_dir(&job).unwrap();
        let outside = d.path().join("secret");
        std::fs::write(&outside, "keep").unwrap();
        std::fs::write(job.join("a.log"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, job.join("b.log")).unwrap();
        let dir = Dir::open(&job).unwrap();
        let (names, more) = dir.names(10).unwrap();
        assert_eq!(names, ["a.log", "b.log"]);
        assert!(!more);
        // At most `max`, in the directory's order: one of the two, and more said.
        let (one, more) = dir.names(1).unwrap();
        assert_eq!((one.len(), more), (1, true));
        assert!(dir.open_file(OsStr::new("a.log")).is_ok());
        assert!(dir.open_file(OsStr::new("b.log")).is_err());
        dir.remove(OsStr::new("b.log")).unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        // The directory as a link is refused.
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&job, &link).unwrap();
        assert!(Dir::open(&link).is_err());
        let f = std::fs::File::create(d.path().join("lock")).unwrap();
        assert!(lock_exclusive(&f, std::time::Duration::ZERO).unwrap());
    }
}
