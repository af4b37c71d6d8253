//! What every check returns: findings with a status, evidence and, for problems, a fix; and, in
//! the submodules, the answers of the runs the checks read (`gpu`: what the GPU libraries said;
//! `gdr`: the write test's pairs).

pub mod access;
mod action;
pub mod edit;
mod fact;
pub mod gdr;
pub mod gpu;
pub mod health;
pub mod jobs;
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
    /// A change a person makes by hand (a cable, a BIOS setting, the switch side, a package):
    /// shown, never run by the script.
    Manual,
    /// Read-only: a command that shows something (`dmesg`, `lspci -vv`, `ibstat`) and changes
    /// nothing. Every other class changes the node (or is work for a person).
    Inspect,
}

impl FixClass {
    /// The short label the report shows before a command (`[now    ]`).
    pub fn tag(self) -> &'static str {
        match self {
            FixClass::Runtime => "now",
            FixClass::Persistent => "persist",
            FixClass::Disruptive => "drain",
            FixClass::Manual => "by hand",
            FixClass::Inspect => "check",
        }
    }

    /// The words the fix script uses for it.
    pub fn words(self) -> &'static str {
        match self {
            FixClass::Runtime => "runtime",
            FixClass::Persistent => "persistent",
            FixClass::Disruptive => "disruptive",
            FixClass::Manual => "by hand",
            FixClass::Inspect => "read-only",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FixCommand {
    pub class: FixClass,
    pub run: String,
    /// A shell test that succeeds when the change is already in place: `gdrdoctor fix` runs
    /// `run` only when it fails, so that a script run twice changes nothing the second time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guard: Option<String>,
    /// For a file edit (`run` is its `gdrdoctor edit` command line): the edit itself, which
    /// `fix --apply` does in-process, on the node or on a `--root` directory.
    #[serde(skip)]
    pub edit: Option<crate::model::edit::Edit>,
    /// A node path that must exist before the command can do any good (the file a by-hand
    /// step installs): without it the command is not run, and says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires: Option<String>,
}

/// Commands a person runs that change the node (packages, services, firmware tools, config
/// space): `Fix::manual` makes them `Manual` ("by hand"), never `Inspect` ("check").
fn changes_by_hand(run: &str) -> bool {
    const CHANGES: [&str; 12] = [
        "apt-get install",
        "apt install",
        "dnf ",
        "yum ",
        "systemctl enable",
        "systemctl restart",
        "systemctl start",
        "mlxfwreset",
        "nvidia-smi -r",
        "setpci ",
        "mlnx_qos ",
        "modprobe",
    ];
    CHANGES.iter().any(|c| run.starts_with(c)) || (run.starts_with("setpci") && run.contains('='))
}

/// The boot loader's configuration made again from /etc/default/grub (Debian's update-grub,
/// the RHEL family's grub2-mkconfig; BLS entries were edited directly by `edit kernel-args`).
pub const UPDATE_GRUB: &str = "if command -v update-grub >/dev/null; then update-grub; elif command -v grub2-mkconfig >/dev/null; then grub2-mkconfig -o /boot/grub2/grub.cfg; else echo 'no update-grub or grub2-mkconfig here: regenerate the boot loader configuration by hand' >&2; fi";

/// How to make a warning or failure go away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Fix {
    /// One sentence: what the commands achieve.
    pub summary: String,
    pub commands: Vec<FixCommand>,
    /// One line: what could go wrong by applying it.
    pub safety: String,
    /// Other ways to the same end, instead of `commands` (never as well as them): shown with
    /// "or", never run by the script.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
}

/// Another way to fix the same finding: what it does and its commands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Alternative {
    pub summary: String,
    pub commands: Vec<FixCommand>,
}

impl Fix {
    pub fn new(summary: impl Into<String>, safety: impl Into<String>) -> Fix {
        Fix {
            summary: summary.into(),
            commands: Vec::new(),
            safety: safety.into(),
            alternatives: Vec::new(),
        }
    }

    /// Another way instead of this fix's commands: `build` adds its commands to an empty fix.
    pub fn or(mut self, summary: impl Into<String>, build: impl FnOnce(Fix) -> Fix) -> Fix {
        let commands = build(Fix::new("", "")).commands;
        self.alternatives.push(Alternative {
            summary: summary.into(),
            commands,
        });
        self
    }

    pub fn cmd(mut self, class: FixClass, run: impl Into<String>) -> Fix {
        self.commands.push(FixCommand {
            class,
            run: run.into(),
            guard: None,
            edit: None,
            requires: None,
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
            edit: None,
            requires: None,
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
        self.edit(crate::model::edit::Edit::Line {
            file: format!("/etc/modules-load.d/{module}.conf"),
            line: module.to_owned(),
        })
    }

    /// A file edit (persistent), done by `gdrdoctor edit`: in place, newline-safe, the original
    /// kept, nothing written when the file is already so.
    pub fn edit(mut self, edit: crate::model::edit::Edit) -> Fix {
        self.commands.push(FixCommand {
            class: FixClass::Persistent,
            run: edit.command(),
            guard: None,
            edit: Some(edit),
            requires: None,
        });
        self
    }

    /// The last command runs only once `path` exists on the node (see `FixCommand::requires`).
    pub fn requires(mut self, path: impl Into<String>) -> Fix {
        if let Some(c) = self.commands.last_mut() {
            c.requires = Some(path.into());
        }
        self
    }

    /// The edit, or (Err) a by-hand step where there is no file to edit.
    pub fn edit_or_manual(self, e: Result<crate::model::edit::Edit, String>) -> Fix {
        match e {
            Ok(e) => self.edit(e),
            Err(m) => self.manual(m),
        }
    }

    /// The command (its class and text), or (Err) a by-hand step where there is none.
    pub fn edit_or_manual_cmd(self, c: Result<(FixClass, String), String>) -> Fix {
        match c {
            Ok((class, run)) => self.cmd(class, run),
            Err(m) => self.manual(m),
        }
    }

    /// `KEY=VALUE` in /etc/nccl.conf, the first definition replaced where it stands.
    pub fn nccl_conf(self, key: &str, value: impl std::fmt::Display) -> Fix {
        self.edit(crate::model::edit::Edit::Set {
            file: "/etc/nccl.conf".into(),
            key: key.into(),
            value: value.to_string(),
        })
    }

    /// The kernel command line, through `gdrdoctor edit kernel-args`, then the boot loader's
    /// configuration made again from it.
    pub fn kernel_args(self, add: &[&str], remove: &[&str]) -> Fix {
        self.edit(crate::model::edit::Edit::KernelArgs {
            add: add.iter().map(|w| (*w).to_owned()).collect(),
            remove: remove.iter().map(|w| (*w).to_owned()).collect(),
        })
        .persistent(UPDATE_GRUB)
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

    /// A step for a person: a `# ...` instruction is `Manual`; a command is `Inspect`, and
    /// must only show things (tests/fixes.rs holds every such command to a read-only list).
    /// A command that changes the node is `runtime`, `persistent`, `disruptive` or `by_hand`.
    pub fn manual(self, run: impl Into<String>) -> Fix {
        let run = run.into();
        let class = if run.starts_with('#') || changes_by_hand(&run) {
            FixClass::Manual
        } else {
            FixClass::Inspect
        };
        self.cmd(class, run)
    }

    /// A change a person makes by hand, shown and never run by a script (installing packages,
    /// firmware tools).
    pub fn by_hand(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Manual, run)
    }

    /// A read-only command that shows something.
    pub fn inspect(self, run: impl Into<String>) -> Fix {
        self.cmd(FixClass::Inspect, run)
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
