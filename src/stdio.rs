//! Standard output and standard error, for the commands and `main`. Everything gdrdoctor
//! prints goes through here, so that no write can panic (`print!` does, on any error) and no
//! error is lost.
//!
//! Standard output: each block of text is written whole. A reader that went away (EPIPE, as
//! with `| head`) ends the output quietly, as a pipe's reader expects, and the run keeps its
//! exit code: a gate reading only the first line still gets the verdict. Any other error (a
//! full disk, a closed descriptor) stops the output and is reported once, by `main`, when the
//! run is over ([`failure`]).
//!
//! Standard error: written when it can be; a failure there has nowhere to be reported.

use std::io::Write as _;
use std::sync::Mutex;

enum State {
    /// Nothing failed yet; the descriptor is opened on first use.
    Open(Option<std::fs::File>),
    /// The reader went away: the rest of the output is dropped, silently.
    Broken,
    /// Writing failed: the rest is dropped, and `main` reports the error.
    Failed(std::io::Error),
}

static STDOUT: Mutex<State> = Mutex::new(State::Open(None));

/// Writes `text` to standard output, whole.
pub fn print(text: &str) {
    print_bytes(text.as_bytes());
}

/// Writes `bytes` to standard output, whole.
pub fn print_bytes(bytes: &[u8]) {
    let mut state = STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    let State::Open(file) = &mut *state else {
        return;
    };
    let result = match file {
        Some(f) => f.write_all(bytes),
        None => match open() {
            Ok(f) => file.insert(f).write_all(bytes),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => *state = State::Broken,
        Err(e) => *state = State::Failed(e),
    }
}

/// Standard output as a `File` of its own (a duplicate of descriptor 1): unbuffered, so each
/// block is written when it is printed, and every error comes back (Rust's `Stdout` buffers
/// lines and takes EBADF for success).
fn open() -> std::io::Result<std::fs::File> {
    use std::os::fd::AsFd as _;
    if crate::sys::fd::stdout_closed_at_start() {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(std::io::stdout().as_fd().try_clone_to_owned()?.into())
}

/// Whether an error stopped standard output (a reader that went away is none); unlike
/// [`failure`], it leaves the error for `main` to report.
pub fn failed() -> bool {
    matches!(
        &*STDOUT.lock().unwrap_or_else(|e| e.into_inner()),
        State::Failed(_)
    )
}

/// The error that stopped standard output, if one did (a reader that went away is none).
pub fn failure() -> Option<std::io::Error> {
    let mut state = STDOUT.lock().unwrap_or_else(|e| e.into_inner());
    match std::mem::replace(&mut *state, State::Broken) {
        State::Failed(e) => Some(e),
        other => {
            *state = other;
            None
        }
    }
}

/// Standard output for code that writes through `std::io::Write` (fleet's streamed lines): the
/// writes always "succeed", and what happened is in [`failure`].
pub struct Stdout;

impl std::io::Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        print_bytes(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes one line (or the lines of a message made of several) to standard error, or nothing
/// when it cannot (`2>/dev/full`). A person reads it: each line goes through the one sanitizer
/// (crate::sanitize), so that a name inside a message cannot drive the terminal.
pub fn eprintln(text: &str) {
    let mut out = String::with_capacity(text.len() + 1);
    for line in text.split('\n') {
        out.push_str(&crate::sanitize::text(line));
        out.push('\n');
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
}

/// `print!` through [`print`]: never panics.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::stdio::print(&format!($($arg)*))
    };
}

/// `println!` through [`print`]: never panics.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdio::print(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` through [`eprintln`]: never panics.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::stdio::eprintln(&format!($($arg)*))
    };
}
