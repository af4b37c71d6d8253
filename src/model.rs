//! What every check returns: findings with a status, evidence and, for problems, a fix; and, in
//! the submodules, the answers of the runs the checks read (`gpu`: what the GPU libraries said;
//! `gdr`: the write test's pairs).

pub mod access;
mod action;
mod fact;
pub mod gdr;
pub mod gpu;
pub mod health;
pub mod nccl;
pub mod qos;
mod runs;
pub mod twonode;

pub use action::Action;
pub use fact::{Fact, Problem, ReadError, UNSAFE_NAME};
pub use runs::Runs;

use serde::{Deserialize, Serialize};

/// The verdict on one finding or one check.
///
/// Ordered by how much it should worry an operator, so that the worst finding of a check is its
/// maximum: skip < pass < unknown < warn < fail. `Unknown` ranks above `Pass` because it is not a
/// pass: it means gdrdoctor could not tell (say, ACS without root), and must never read as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Skip,
    Pass,
    Unknown,
    Warn,
    Fail,
}

impl Status {
    pub const ALL: [Status; 5] = [
        Status::Pass,
        Status::Warn,
        Status::Fail,
        Status::Unknown,
        Status::Skip,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Skip => "skip",
            Status::Pass => "pass",
            Status::Unknown => "unknown",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable, documented finding code. Codes name the problem (or, for a pass, the fact), never
/// the fix: `rdma-port-down`, not `bring-port-up`. Each check names its codes as constants and
/// builds its findings from them, so a misspelt code does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    pub id: &'static str,
    pub summary: &'static str,
}

/// One thing read off the node that a finding stands on: the path and what it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub path: String,
    pub value: String,
}

/// When a fix command takes effect, and what it costs. `gdrdoctor fix --apply` only ever runs
/// `Runtime` commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FixClass {
    /// Takes effect now, lost at reboot (`modprobe`, `setpci`).
    Runtime,
    /// Survives a reboot (a file under /etc, a kernel command line edit); often needs one.
    Persistent,
    /// Needs a driver reload or a reboot; never applied automatically.
    Disruptive,
    /// Work for a person (a cable, a BIOS setting, a switch port); shown as a comment.
    Manual,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FixCommand {
    pub class: FixClass,
    pub run: String,
    /// A shell test that succeeds when the change is already in place: `gdrdoctor fix` runs
    /// `run` only when it fails, so that a script run twice changes nothing the second time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
}

/// How to make a warning or failure go away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// One sentence: what the commands achieve.
    pub summary: String,
    pub commands: Vec<FixCommand>,
    /// One line: what could go wrong by applying it.
    pub safety: String,
}

impl Fix {
    pub fn new(summary: impl Into<String>, safety: impl Into<String>) -> Fix {
        Fix {
            summary: summary.into(),
            commands: Vec::new(),
            safety: safety.into(),
        }
    }

    pub fn cmd(mut self, class: FixClass, run: impl Into<String>) -> Fix {
        self.commands.push(FixCommand {
            class,
            run: run.into(),
            guard: None,
        });
        self
    }

    /// A command that runs only when `guard` (a shell test for "already done") fails.
    pub fn guarded(
        mut self,
        class: FixClass,
        run: impl Into<String>,
        guard: impl Into<String>,
    ) -> Fix {
        self.commands.push(FixCommand {
            class,
            run: run.into(),
            guard: Some(guard.into()),
        });
        self
    }

    /// `modprobe` now, skipped when the module is already there (built in or loaded).
    pub fn modprobe(self, module: &str) -> Fix {
        let sysfs = module.replace('-', "_");
        self.guarded(
            FixClass::Runtime,
            format!("modprobe {module}"),
            format!("[ -d /sys/module/{sysfs} ]"),
        )
    }

    /// Load a module at every boot (systemd's modules-load.d).
    pub fn load_at_boot(self, module: &str) -> Fix {
        let file = format!("/etc/modules-load.d/{module}.conf");
        self.guarded(
            FixClass::Persistent,
            format!("echo {module} > {file}"),
            format!("grep -qx {module} {file} 2>/dev/null"),
        )
    }

    pub fn runtime(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Runtime, run)
    }

    pub fn persistent(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Persistent, run)
    }

    pub fn disruptive(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Disruptive, run)
    }

    pub fn manual(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Manual, run)
    }
}

/// One judgement about one subject (a GPU, a port, the node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The id of the [`Code`] it was built from (`rdma-port-down`).
    pub code: &'static str,
    pub status: Status,
    /// What it is about: `GPU 0000:3b:00.0`, `mlx5_0 port 1`, `node`.
    pub subject: String,
    pub message: String,
    pub evidence: Vec<Evidence>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
    /// What to do with the node (docs/actions.md): on every warn, fail and unknown finding,
    /// from its check's table (`checks::Rule`) unless the check decided it (a Xid's own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<Action>,
    /// Set when a severity override from the config changed the status; the check's own verdict.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original_status: Option<Status>,
    /// For a skip: the checks whose findings make this one moot (`rdma-gid` has nothing to
    /// judge without an RDMA device: `rdma-link`). When `--select` or `--skip` leaves them
    /// out, they run anyway and decide the verdict (see `checks::run`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub prerequisites: Vec<&'static str>,
}

impl Finding {
    pub fn new(
        code: Code,
        status: Status,
        subject: impl Into<String>,
        message: impl Into<String>,
    ) -> Finding {
        Finding {
            code: code.id,
            status,
            subject: subject.into(),
            message: message.into(),
            evidence: Vec::new(),
            fix: None,
            action: None,
            original_status: None,
            prerequisites: Vec::new(),
        }
    }

    pub fn pass(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding::new(code, Status::Pass, subject, message)
    }

    pub fn warn(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding::new(code, Status::Warn, subject, message)
    }

    pub fn fail(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding::new(code, Status::Fail, subject, message)
    }

    pub fn unknown(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding::new(code, Status::Unknown, subject, message)
    }

    pub fn skip(code: Code, subject: impl Into<String>, message: impl Into<String>) -> Finding {
        Finding::new(code, Status::Skip, subject, message)
    }

    pub fn evidence(mut self, path: impl Into<String>, value: impl Into<String>) -> Finding {
        self.evidence.push(Evidence {
            path: path.into(),
            value: value.into(),
        });
        self
    }

    pub fn with(mut self, evidence: impl IntoIterator<Item = Evidence>) -> Finding {
        self.evidence.extend(evidence);
        self
    }

    pub fn fix(mut self, fix: Fix) -> Finding {
        self.fix = Some(fix);
        self
    }

    /// What to do with the node, where the check knows better than its code's table.
    pub fn action(mut self, action: Action) -> Finding {
        self.action = Some(action);
        self
    }

    /// The checks whose findings this one stands on ("see rdma-link").
    pub fn prerequisites(mut self, checks: &[&'static str]) -> Finding {
        self.prerequisites.extend_from_slice(checks);
        self
    }
}

/// The distance between a GPU and a NIC on the PCIe tree, in the words `nvidia-smi topo -m` and
/// NCCL use (src/placement.rs works it out). Here, with the other shared vocabulary, because the
/// config, the inventory and the reports all name it.
/// Ordered from nearest to farthest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    #[serde(rename = "PIX", alias = "pix")]
    Pix,
    #[serde(rename = "PXB", alias = "pxb")]
    Pxb,
    #[serde(rename = "PHB", alias = "phb")]
    Phb,
    #[serde(rename = "NODE", alias = "node")]
    Node,
    #[serde(rename = "SYS", alias = "sys")]
    Sys,
}

impl Level {
    pub const ALL: [Level; 5] = [Level::Pix, Level::Pxb, Level::Phb, Level::Node, Level::Sys];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Pix => "PIX",
            Level::Pxb => "PXB",
            Level::Phb => "PHB",
            Level::Node => "NODE",
            Level::Sys => "SYS",
        }
    }

    pub fn parse(s: &str) -> Option<Level> {
        Level::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s.trim()))
    }

    /// nvidia-smi's legend line.
    pub fn legend(self) -> &'static str {
        match self {
            Level::Sys => {
                "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"
            }
            Level::Node => {
                "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node"
            }
            Level::Phb => {
                "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)"
            }
            Level::Pxb => {
                "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)"
            }
            Level::Pix => "Connection traversing at most a single PCIe bridge",
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
