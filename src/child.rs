//! Running this binary as a child with a deadline: the GPU probe and the GDR write test both
//! do work that can hang in a driver or crash in a vendor library, and neither may take the
//! report down with it.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
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
    let mut command = Command::new(exe);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in env_remove {
        command.env_remove(name);
    }
    // The child dies with this process: the --deadline watchdog may end it while a child is
    // still inside a driver call, and no orphan may keep the GPU or a NIC busy after that.
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl is async-signal-safe and touches nothing of the parent's state.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                Ok(())
            });
        }
    }
    // ETXTBSY: the program was just written and another thread's fork still holds the file
    // open for writing (it happens to freshly written test programs); it clears at once.
    let mut tries = 0;
    let mut child = loop {
        match command.spawn() {
            Ok(c) => break c,
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
    };
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
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                return Err(format!(
                    "{what} did not finish within {} s; it was killed",
                    timeout.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("cannot wait for {what}: {e}")),
        }
    };
    let grace = Duration::from_millis(500);
    let out = stdout.recv_timeout(grace).unwrap_or_default();
    let err = stderr.recv_timeout(grace).unwrap_or_default();
    let err_tail = tail(&String::from_utf8_lossy(&err));
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        let how = match status.signal() {
            Some(sig) => format!("was killed by signal {sig}{}", signal_name(sig)),
            None => format!("exited with status {}", status.code().unwrap_or(-1)),
        };
        return Err(format!("{what} {how}{err_tail}"));
    }
    let text = String::from_utf8_lossy(&out);
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .ok_or_else(|| format!("{what} printed nothing{err_tail}"))
}

fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let start = lines.len().saturating_sub(3);
    format!(
        "; it said: {}",
        crate::parse::shown(&lines[start..].join(" | "))
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
