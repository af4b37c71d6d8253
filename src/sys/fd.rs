//! Two things about file descriptors that the standard library does not offer: whether standard
//! output was open when the process started, and clearing `O_NONBLOCK` on an open file.

use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether file descriptor 1 was closed when the process started (`gdrdoctor list >&-`).
///
/// The Rust runtime reopens a closed standard descriptor on `/dev/null` before `main` runs, so
/// that writes to it succeed and vanish: a report written there is lost without a word. This is
/// noted before the runtime starts, by a constructor in `.init_array` (the C runtime calls those
/// before it calls the Rust runtime's `main`).
pub fn stdout_closed_at_start() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

#[cfg(target_os = "linux")]
extern "C" fn note_closed_stdout() {
    // SAFETY: F_GETFD only reads the descriptor's flags, and fails with EBADF on a closed one.
    let flags = unsafe { libc::fcntl(libc::STDOUT_FILENO, libc::F_GETFD) };
    if flags == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EBADF) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
    }
}

// glibc and musl call the functions in .init_array before main; one that ignores the arguments
// glibc passes (argc, argv, envp) is called correctly under the C calling convention.
#[cfg(target_os = "linux")]
#[used]
// SAFETY: the function only calls fcntl and stores to an atomic; it needs nothing initialised.
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

/// Clears `O_NONBLOCK` on `file`: opened non-blocking so that opening a FIFO or a device cannot
/// hang, it is then written in the ordinary, blocking way.
pub fn set_blocking(file: &std::fs::File) -> std::io::Result<()> {
    let fd = file.as_raw_fd();
    // SAFETY: F_GETFL and F_SETFL on a descriptor that `file` keeps open for the call.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags == -1 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) == -1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// What a file that is not a regular one is, in words (`a FIFO`): for the messages that refuse it.
pub fn kind(ft: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "something"
    }
}

/// The effective user id of this process (who owns what it creates).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no argument, cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    #[test]
    fn clears_nonblocking() {
        use std::os::unix::fs::OpenOptionsExt as _;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/null")
            .unwrap();
        super::set_blocking(&f).unwrap();
        // SAFETY: reads the flags of a descriptor `f` keeps open.
        let flags = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&f), libc::F_GETFL) };
        assert_eq!(flags & libc::O_NONBLOCK, 0);
        // The test binary's own stdout is open.
        assert!(!super::stdout_closed_at_start());
    }
}
