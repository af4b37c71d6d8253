//! The run's `--deadline` and its watchdog: what the run is doing (its stage, and on what), so
//! that a run past its deadline says where it was and exits 2, and never cuts a report in half.

use crate::deadline::Deadline;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

static STARTED: OnceLock<(Instant, SystemTime)> = OnceLock::new();
static DEADLINE: OnceLock<Deadline> = OnceLock::new();
/// What the run is doing, and on what (a path, an address), for the watchdog's message.
static STAGE: Mutex<(Stage, String)> = Mutex::new((Stage::Starting, String::new()));
/// Held by the thread that writes the report: the watchdog never cuts a report in half.
static FINISHING: Mutex<()> = Mutex::new(());
/// The watchdog also prints `gdrdoctor: deadline-exceeded` on stdout (--format reason).
static REASON_ON_STDOUT: AtomicBool = AtomicBool::new(false);

/// How a run starts, as the command line says.
#[derive(Debug, Clone, Copy)]
pub struct Start {
    /// `--deadline`, in seconds.
    pub deadline: Option<f64>,
    /// Whether the watchdog runs: never in the middle of `fix --apply`, where a half-applied
    /// fix is worse than a late one (the probe's and the pairs' budgets still follow the
    /// deadline there).
    pub watchdog: bool,
    /// The report goes to stdout as `--format reason`: the watchdog's verdict goes there too.
    pub reason_on_stdout: bool,
    /// The first stage.
    pub stage: Stage,
}

/// Notes when the run started and its deadline, and starts the watchdog.
pub fn start(s: Start) {
    let started = (Instant::now(), SystemTime::now());
    let d = s.deadline.map(Deadline::after).unwrap_or_default();
    let _ = DEADLINE.set(d);
    let _ = STARTED.set(started);
    REASON_ON_STDOUT.store(s.reason_on_stdout, Ordering::SeqCst);
    if s.watchdog {
        start_watchdog(d);
    }
    stage(s.stage);
}

/// The run's deadline (none when `start` was not called).
pub fn deadline() -> Deadline {
    DEADLINE.get().copied().unwrap_or_default()
}

/// When the run started: for the clock and for the wall (Prometheus' run metrics).
pub fn started() -> (Instant, SystemTime) {
    STARTED
        .get()
        .copied()
        .unwrap_or((Instant::now(), SystemTime::now()))
}

/// From here the watchdog waits: the report that is being written is never cut in half. Once
/// per run; the watchdog stays off until the process ends.
pub fn writing_report() {
    std::mem::forget(FINISHING.lock().unwrap_or_else(|e| e.into_inner()));
}

/// What the run waits on, for the message at the deadline: each stage says what it was doing
/// and what an overrun there points at (issue 25: every overrun used to blame sysfs, a log
/// read from a pipe or a peer that never came included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Starting,
    /// The node's files: sysfs and procfs when live, the files under --root otherwise.
    ReadingNode {
        live: bool,
    },
    CopyingNode {
        live: bool,
    },
    AnalysingCaptures,
    /// `nccl explain`: one log, a file or standard input.
    ReadingLogs,
    ReadingTokenFile,
    /// The two-node test before its channel is up: listening, or connecting.
    WaitingForPeer,
    TwoNodeTest,
    GdrTest,
    GpuProbe,
    RunningNccl,
    /// The link-health sample window: its wait, then the counters read again.
    Sample,
    Judging,
}

impl Stage {
    /// `the --deadline of N s passed while {doing}`.
    fn doing(self) -> &'static str {
        match self {
            Stage::Starting => "starting",
            Stage::ReadingNode { .. } => "reading the node",
            Stage::CopyingNode { .. } => "copying the node",
            Stage::AnalysingCaptures => "analysing the captures",
            Stage::ReadingLogs => "reading the NCCL log",
            Stage::ReadingTokenFile => "reading the token file",
            Stage::WaitingForPeer => "waiting for the peer",
            Stage::TwoNodeTest => "running the two-node write test",
            Stage::GdrTest => "running the GDR write test",
            Stage::GpuProbe => "waiting for the GPU probe",
            Stage::RunningNccl => "running NCCL",
            Stage::Sample => "reading the link counters again (--sample)",
            Stage::Judging => "judging",
        }
    }

    /// What an overrun here points at. Only reading a live node can block in sysfs; the
    /// children (GPU probe, write test, NCCL) are killed at their own limits, which the
    /// deadline shortens, so an overrun there is gdrdoctor's own fault and says so.
    fn hint(self) -> &'static str {
        match self {
            Stage::ReadingNode { live: true }
            | Stage::CopyingNode { live: true }
            | Stage::Sample => {
                "a read that blocks in sysfs points at a device or driver that stopped answering"
            }
            Stage::ReadingNode { live: false } | Stage::CopyingNode { live: false } => {
                "reading the files under --root was slow or blocked: their file system stopped answering (or, for a live node's /sys mounted there, a device or driver)"
            }
            Stage::AnalysingCaptures => "the captures took longer than the deadline to read",
            Stage::ReadingLogs => {
                "a log that does not end, as standard input or a pipe whose writer keeps it open; a file system that stopped answering; or more log than the deadline leaves time to read"
            }
            Stage::ReadingTokenFile => {
                "the token file did not give its bytes: a FIFO with no writer, or a file system that stopped answering"
            }
            Stage::WaitingForPeer => {
                "the other node did not connect or answer: is `gdrdoctor gdr-test` running there, and is the port open between the two? --wait bounds this wait, and the deadline came first"
            }
            Stage::TwoNodeTest => {
                "a rail or the peer stopped answering: each rail may take up to 3 x timeouts.gdr_pair_s, which the deadline does not shorten"
            }
            Stage::Starting
            | Stage::GdrTest
            | Stage::GpuProbe
            | Stage::RunningNccl
            | Stage::Judging => {
                "the children it runs are cut short before the deadline, so this is a gdrdoctor bug: please report it"
            }
        }
    }
}

pub fn stage(s: Stage) {
    stage_on(s, String::new());
}

/// `stage`, naming what it waits on: `job.log`, `at node-b:18516`.
pub fn stage_on(s: Stage, on: String) {
    crate::trace::mark(|| format!("{} {on}", s.doing()));
    *STAGE.lock().unwrap_or_else(|e| e.into_inner()) = (s, on);
}

/// At the deadline, unless the report is being written already: say what overran and exit 2.
/// The children (GPU probe, GDR pairs) have shorter limits of their own, and die with this
/// process (PR_SET_PDEATHSIG); what is left to overrun is a read or a wait, which the stage
/// names.
fn start_watchdog(d: Deadline) {
    let Some(end) = d.end() else { return };
    std::thread::spawn(move || {
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        let Ok(_writing) = FINISHING.try_lock() else {
            return;
        };
        let (what, on) = STAGE.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if REASON_ON_STDOUT.load(Ordering::SeqCst) {
            outln!("gdrdoctor: deadline-exceeded");
        }
        let on = if on.is_empty() { on } else { format!(" {on}") };
        errln!(
            "gdrdoctor: error: the --deadline of {} s passed while {}{on}; no report ({})",
            d.seconds(),
            what.doing(),
            what.hint()
        );
        std::process::exit(2);
    });
}
