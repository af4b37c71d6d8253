//! Running this binary as a child with a deadline: the GPU probe and the GDR write test both
//! do work that can hang in a driver or crash in a vendor library, and neither may take the
//! report down with it.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs `exe args...` without the variables in `env_remove`, waits at most `timeout`, and
/// returns the last non-empty line of its stdout (a library may print before the answer).
/// `Err` says why there is no answer: it could not start, was killed at the deadline, exited
/// badly or died of a signal (with the tail of its stderr).
pub fn run(
    exe: &Path,
    args: &[&str],
    env_remove: &[&str],
    timeout: Duration,
    what: &str,
) -> Result<String, String> {
    let env: Vec<(&str, Option<&str>)> = env_remove.iter().map(|n| (*n, None)).collect();
    let done = run_env(exe, args, &env, timeout, what)?;
    done.stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} printed nothing{}", done.stderr_tail))
}

/// What a child that exited successfully printed.
pub struct Finished {
    /// All of its stdout (at most 16 MiB).
    pub stdout: String,
    /// `; it said: ...` with the last lines of its stderr, or empty.
    pub stderr_tail: String,
}

/// [`run`] with the environment changed: each `(name, Some(value))` set, each `(name, None)`
/// removed; returns the whole stdout.
pub fn run_env(
    exe: &Path,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    timeout: Duration,
    what: &str,
) -> Result<Finished, String> {
    let mut command = Command::new(exe);
    command.args(args).stdin(Stdio::null());
    for (name, value) in env {
        match value {
            Some(v) => command.env(name, v),
            None => command.env_remove(name),
        };
    }
    let mut child = spawn(command, exe, args)?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(mut pipe) = pipe {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.by_ref().take(16 << 20).read_to_end(&mut buf);
                let _ = tx.send(buf);
            });
        }
        rx
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = crate::deadline::later(Instant::now(), timeout);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                abandon(child);
                return Err(format!(
                    "{what} did not finish within {} s; it was killed",
                    seconds(timeout)
                ));
            }
            Err(e) => return Err(format!("cannot wait for {what}: {e}")),
        }
    };
    let grace = Duration::from_millis(500);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    let stderr_tail = tail(&String::from_utf8_lossy(&err));
    if !status.success() {
        return Err(format!("{what} {}{stderr_tail}", how_it_ended(status)));
    }
    Ok(Finished {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr_tail,
    })
}

/// Starts `command` with stdout and stderr piped, dying with this process.
fn spawn(mut command: Command, exe: &Path, args: &[&str]) -> Result<Child, String> {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    // The child dies with this process: the --deadline watchdog may end it while a child is
    // still inside a driver call, and no orphan may keep the GPU or a NIC busy after that.
    crate::sys::process::die_with_parent(&mut command);
    // ETXTBSY: the program was just written and another thread's fork still holds the file
    // open for writing (it happens to freshly written test programs); it clears at once.
    let mut tries = 0;
    loop {
        match command.spawn() {
            Ok(c) => return Ok(c),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => {
                return Err(format!(
                    "cannot start {} {}: {e}",
                    exe.display(),
                    args.first().unwrap_or(&"")
                ));
            }
        }
    }
}

/// Kills `child` and leaves its reaping to a thread of its own. A process killed inside a GPU
/// driver call is not gone when the signal is sent: on a 4-GPU H100 node a CUDA process killed
/// mid-start took up to 460 ms to be reaped, while the driver finished the call and tore its
/// contexts down behind the other GPUs' starts (issue 24). Waiting for that here made a
/// `--deadline` that cut the probe short overrun and lose the whole report.
pub fn abandon(mut child: Child) {
    let _ = child.kill();
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    // A thread that cannot be started leaves a zombie until this process exits; that is all.
    let _ = std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || {
            let _ = child.wait();
        });
}

/// How a child that ended badly ended: `exited with status 3`, `was killed by signal 11
/// (SIGSEGV)`.
fn how_it_ended(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => format!("was killed by signal {sig}{}", signal_name(sig)),
        None => format!("exited with status {}", status.code().unwrap_or(-1)),
    }
}

/// A child that answers several questions, one line each (the GPU workers): started once,
/// asked over its stdin, each answer awaited with a deadline. Answers are the lines that carry
/// [`ANSWER`]; whatever else a vendor library prints on stdout is passed over. Once it has
/// missed a deadline or died, every later question gets the same `Err`.
pub struct Conversation {
    /// `None` once it was killed and handed to [`abandon`].
    child: Option<Child>,
    stdin: Option<std::process::ChildStdin>,
    answers: Receiver<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    what: String,
    ended: Option<String>,
}

/// What marks an answer line: everything after it on the line is the answer.
pub const ANSWER: &str = "gdrdoctor-answer: ";

impl Conversation {
    pub fn start(
        exe: &Path,
        args: &[&str],
        env: &[(&str, Option<&str>)],
        what: &str,
    ) -> Result<Conversation, String> {
        let mut command = Command::new(exe);
        command.args(args).stdin(Stdio::piped());
        for (name, value) in env {
            match value {
                Some(v) => command.env(name, v),
                None => command.env_remove(name),
            };
        }
        let mut child = spawn(command, exe, args)?;
        let stdin = child.stdin.take();
        let (tx, answers) = std::sync::mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                use std::io::BufRead as _;
                // A line is at most what one answer needs; a library that prints endlessly
                // cannot make this process hold more.
                let mut reader = std::io::BufReader::new(out.take(64 << 20));
                let mut line = Vec::new();
                while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                    let text = String::from_utf8_lossy(&line);
                    if let Some(at) = text.find(ANSWER) {
                        if tx
                            .send(text[at + ANSWER.len()..].trim().to_owned())
                            .is_err()
                        {
                            return;
                        }
                    }
                    line.clear();
                }
            });
        }
        let stderr = Arc::new(Mutex::new(Vec::new()));
        if let Some(mut err) = child.stderr.take() {
            let keep = Arc::clone(&stderr);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut kept = keep.lock().unwrap_or_else(|e| e.into_inner());
                    kept.extend_from_slice(&buf[..n]);
                    // Only the tail is ever shown.
                    let len = kept.len();
                    if len > 64 << 10 {
                        kept.drain(..len - (16 << 10));
                    }
                }
            });
        }
        Ok(Conversation {
            child: Some(child),
            stdin,
            answers,
            stderr,
            what: what.to_owned(),
            ended: None,
        })
    }

    /// Sends one line and waits for the answer.
    pub fn ask(&mut self, question: &str, timeout: Duration) -> Result<String, String> {
        use std::io::Write as _;
        if let Some(e) = &self.ended {
            return Err(e.clone());
        }
        let sent = match self.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{question}").and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if sent.is_err() {
            // It is gone; the answer wait below says how it ended.
            self.stdin = None;
        }
        self.answer(timeout)
    }

    /// Waits for the next answer (the first one needs no question).
    pub fn answer(&mut self, timeout: Duration) -> Result<String, String> {
        if let Some(e) = &self.ended {
            return Err(e.clone());
        }
        match self.answers.recv_timeout(timeout) {
            Ok(line) => Ok(line),
            Err(RecvTimeoutError::Timeout) => {
                if let Some(child) = self.child.take() {
                    abandon(child);
                }
                let e = format!(
                    "{} did not finish within {} s; it was killed",
                    self.what,
                    seconds(timeout)
                );
                self.ended = Some(e.clone());
                Err(e)
            }
            Err(RecvTimeoutError::Disconnected) => {
                // Its stdout closed: it exited or died. Give the status a moment.
                let until = Instant::now() + Duration::from_millis(500);
                let status = loop {
                    let Some(child) = self.child.as_mut() else {
                        break None;
                    };
                    match child.try_wait() {
                        Ok(Some(s)) => break Some(s),
                        Ok(None) if Instant::now() < until => {
                            std::thread::sleep(Duration::from_millis(2))
                        }
                        _ => break None,
                    }
                };
                let how = match status {
                    Some(s) if !s.success() => how_it_ended(s),
                    _ => "ended without answering".to_owned(),
                };
                let e = format!("{} {how}{}", self.what, self.stderr_tail());
                self.ended = Some(e.clone());
                Err(e)
            }
        }
    }

    fn stderr_tail(&self) -> String {
        let kept = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        tail(&String::from_utf8_lossy(&kept))
    }

    /// No more questions: closes its stdin, so that it frees what it holds and exits, and
    /// waits for that at most `grace` before killing it.
    pub fn finish(mut self, grace: Duration) {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return;
        };
        let until = crate::deadline::later(Instant::now(), grace);
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(2)),
                Ok(None) => return abandon(child),
            }
        }
    }
}

impl Drop for Conversation {
    fn drop(&mut self) {
        // Never leave a worker behind (finish() has reaped it already when it was called).
        if let Some(child) = self.child.take() {
            abandon(child);
        }
    }
}

/// A time limit as people write it: `0.126`, `3.01`, `13` (milliseconds at most; a limit the
/// deadline computed is no rounder than that).
fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    let text = format!("{}.{:03}", ms / 1000, ms % 1000);
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(3);
    format!(
        "; it said: {}",
        crate::sanitize::quoted(&lines[start..].join(" | "))
    )
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => " (SIGSEGV)",
        libc::SIGABRT => " (SIGABRT)",
        libc::SIGBUS => " (SIGBUS)",
        libc::SIGKILL => " (SIGKILL)",
        libc::SIGILL => " (SIGILL)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn limits_read_as_people_write_them() {
        use std::time::Duration;
        assert_eq!(super::seconds(Duration::from_secs(13)), "13");
        assert_eq!(super::seconds(Duration::from_millis(3010)), "3.01");
        assert_eq!(super::seconds(Duration::from_nanos(125_927_344)), "0.125");
        assert_eq!(super::seconds(Duration::ZERO), "0");
    }
}
