//! The commands: one file per subcommand, with its arguments and the wiring from them to a
//! report. `cli.rs` holds the command line's root (the global flags, the list of subcommands)
//! and says which one runs; what the commands share is here: where the node and the policy
//! come from ([`Global`]), reading the node with the watchdog told, and how the probe and test
//! children are started.
//!
//! What a subcommand is, its help's first line, is its variant's doc comment in cli.rs; the
//! `Args` struct of each subcommand has none, since clap reads a struct's doc comment as a
//! description too.

pub mod capture;
pub mod check;
pub mod edit;
pub mod explain;
pub mod fix;
pub mod fleet;
pub mod gdr_test;
pub mod internal;
pub mod jobs;
pub mod list;
pub mod man;
pub mod nccl;
pub mod report;
pub mod topo;
pub mod two_node;
pub mod watchdog;

use crate::checks;
use crate::config::Config;
use crate::inventory::{self, Inventory};
use crate::model::Runs;
use crate::probe;
use crate::report::Format;
use crate::root::Root;
use anyhow::Context as _;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;
use watchdog::{Stage, deadline, stage};

/// The global flags the commands read: where the node and the policy come from.
#[derive(Debug, Clone, Default)]
pub struct Global {
    /// `--root DIR`: a captured copy of a node; none is the live one.
    pub root: Option<PathBuf>,
    /// `--config FILE`.
    pub config: Option<PathBuf>,
    /// `--nccl-env FILE`.
    pub nccl_env: Option<PathBuf>,
}

impl Global {
    /// The site config, with the job environment of `--nccl-env` in it.
    pub fn config(&self) -> anyhow::Result<Config> {
        let (mut config, _path) = Config::load(self.config.as_deref(), &checks::NAMES)?;
        if let Some(file) = &self.nccl_env {
            config.nccl.env_file = Some(crate::config::load_nccl_env(file)?);
        }
        Ok(config)
    }

    /// The root to read: `--root DIR`, or the live system. Returns it with how reports name it.
    pub fn root(&self) -> anyhow::Result<(Root, String)> {
        Ok(match &self.root {
            Some(dir) => (
                Root::open(dir).context("cannot use --root")?,
                dir.display().to_string(),
            ),
            None => (Root::live(), "/".to_owned()),
        })
    }
}

/// The node read and the runs `options` asks (`probe::load`), its stages told to the watchdog:
/// reading the node, then waiting for the GPU probe (whose limit follows the deadline), not
/// one for both.
fn load_node(root: &Root, config: &Config, options: probe::Options) -> (Inventory, Runs) {
    stage(Stage::ReadingNode {
        live: root.is_live(),
    });
    let (mut inv, mut runs, session) = probe::load_pending(root, config, options);
    if let Some(mut s) = session {
        stage(Stage::GpuProbe);
        runs.gpu = s.probe();
        s.finish(crate::probe::gpu::FINISH_GRACE);
        inv.learn(&runs.gpu);
    }
    (inv, runs)
}

/// How to run the GPU probe: this very binary, with the config's deadline.
fn gpu_probe(
    config: &Config,
    ask: crate::probe::gpu::Ask,
    disabled: bool,
) -> Option<crate::probe::gpu::ProbeCommand> {
    if disabled {
        return None;
    }
    let d = deadline();
    let budget = d.budget(config.timeouts.gpu_probe());
    Some(crate::probe::gpu::ProbeCommand {
        exe: this_exe(),
        timeout: budget.limit,
        ask,
        cut_by_deadline: budget.cut.then(|| d.seconds()),
    })
}

/// This binary, for the probe and test children. GDRDOCTOR_PROBE_EXE replaces it: the tests use
/// it for a child that hangs or crashes.
fn this_exe() -> PathBuf {
    std::env::var_os("GDRDOCTOR_PROBE_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
}

/// What a command could not read, on standard error: each path with why, as `check -v` lists
/// them under "unreadable or nonsensical".
fn write_problems(problems: &[inventory::Problem]) {
    let n = problems.len();
    errln!(
        "gdrdoctor: {n} file{} could not be read or made no sense; what is shown may leave out what they hold:",
        if n == 1 { "" } else { "s" }
    );
    for p in problems.iter().take(50) {
        errln!(
            "  {} ({})",
            crate::report::human::clean(&p.path),
            crate::report::human::clean(&p.message)
        );
    }
    if n > 50 {
        errln!("  ... and {} more (gdrdoctor check -v lists them)", n - 50);
    }
}

/// The `--format` values of a command: the formats it has, in the order its help lists them,
/// each with the line its help gives it ("" for none). The one [`Format`] stands behind every
/// command's list; a command that has only some says which here.
#[derive(Debug, Clone, Copy)]
pub struct Formats(pub &'static [(Format, &'static str)]);

impl Formats {
    fn values(&self) -> impl Iterator<Item = PossibleValue> + '_ {
        self.0.iter().map(|&(format, help)| {
            let value = PossibleValue::new(format.name());
            if help.is_empty() {
                value
            } else {
                value.help(help)
            }
        })
    }

    /// The format named `name` among these (`--output json:PATH`, where case does not count).
    pub fn find(&self, name: &str, ignore_case: bool) -> Option<Format> {
        self.0
            .iter()
            .map(|&(format, _)| format)
            .find(|f| PossibleValue::new(f.name()).matches(name, ignore_case))
    }

    /// `human, json, ...`.
    pub fn names(&self) -> String {
        let names: Vec<&str> = self.0.iter().map(|(f, _)| f.name()).collect();
        names.join(", ")
    }
}

/// clap's own parser over the names (its errors and suggestions: `a similar value exists`),
/// then the format named.
impl TypedValueParser for Formats {
    type Value = Format;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Format, clap::Error> {
        let name = PossibleValuesParser::new(self.values()).parse_ref(cmd, arg, value)?;
        let ignore_case = arg.is_some_and(|a| a.is_ignore_case_set());
        // PossibleValuesParser took it, so it is one of ours.
        self.find(&name, ignore_case)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidValue).with_cmd(cmd))
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.values()))
    }
}
