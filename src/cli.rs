//! The command line: the global flags, the subcommands (each one's arguments are in its file
//! under `commands/`, beside its wiring), and which one runs.

use crate::commands::{self, watchdog};
use crate::report::Format;
use clap::{CommandFactory as _, Parser, Subcommand, ValueEnum, error::ErrorKind};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "gdrdoctor",
    version,
    about = "Is this GPU node ready for GPUDirect RDMA? What is wrong, and what fixes it."
)]
#[command(
    after_help = "Exit codes: 0 ready, 1 not ready (a check failed; with --strict also a warning or unknown), 2 could not run."
)]
pub struct Cli {
    /// Read a captured copy of a node (a directory with sys/, proc/, dev/, or its .tar.gz)
    /// instead of this one.
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Site policy (YAML). Default: /etc/gdrdoctor/config.yaml when it exists.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The job environment NCCL runs with (`export NAME=value` lines, as a Slurm TaskProlog
    /// prints them): read before the node's nccl.conf files, as NCCL reads the environment
    /// first. Overrides the config's `nccl.env`.
    #[arg(long, global = true, value_name = "FILE")]
    nccl_env: Option<PathBuf>,
    /// Colour in human output (NO_COLOR is honoured by `auto`).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    color: Color,
    /// End the whole run within SECONDS: the GPU probe and the GDR write test get what is left
    /// and are reported unknown when cut short; if reading the node itself overruns, gdrdoctor
    /// exits 2 at the deadline (never in the middle of `fix --apply`). For prologs and boot
    /// units with hard limits.
    #[arg(long, global = true, value_name = "SECONDS", value_parser = parse_deadline)]
    deadline: Option<f64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the checks and report.
    Check(commands::check::Args),
    /// List the checks, in the order they run.
    List(commands::list::Args),
    /// The GPU and NIC PCIe matrix, as `nvidia-smi topo -m` shows it (PIX, PXB, PHB, NODE, SYS).
    Topo(commands::topo::Args),
    /// Copy exactly what the checks read (files, links, directories) into OUT, a new directory
    /// or OUT.tar.gz, for `check --root` elsewhere.
    Capture(commands::capture::Args),
    /// Write the fixes for the current warnings and failures as one reviewed bash script (or,
    /// with --apply, run its runtime part now).
    Fix(commands::fix::Args),
    /// Edit a file as a persistent fix does (nccl.conf settings, lines, whole files, the kernel
    /// command line): in place, newline-safe, the original kept as FILE.gdrdoctor-orig, nothing
    /// written when it is already so. With --root DIR, the files of DIR (an OS image).
    Edit(commands::edit::Args),
    /// NCCL: the settings that follow from this node (environment exports and /etc/nccl.conf),
    /// or, with `explain`, what a job's NCCL log says about GPUDirect RDMA and why.
    Nccl(commands::nccl::Args),
    /// What jobs' NCCL did about GPUDirect RDMA: the journal the Slurm Epilog writes
    /// (`jobs record`), ranked by node and NIC over a time range (docs/jobs.md).
    Jobs(commands::jobs::Args),
    /// Check many captures (files, directories, globs) and compare nodes of the same model.
    Fleet(commands::fleet::Args),
    /// Run the GPUDirect RDMA write test alone, with its options (the gdr-test check).
    #[command(name = "gdr-test")]
    GdrTest(commands::gdr_test::Args),
    /// (internal) Test one GPU-NIC pair and print JSON: what gdr-test runs in a child process.
    #[command(name = "gdr-pair", hide = true)]
    GdrPair(commands::internal::SpecArgs),
    /// (internal) Run NCCL on the GPUs of the spec and print JSON: what `nccl verify` runs in a
    /// child process (src/nccl/verify.rs).
    #[command(name = "nccl-child", hide = true)]
    NcclChild(commands::internal::SpecArgs),
    /// (internal) One GPU's worker: starts CUDA or HIP once, answers the probe, then runs the
    /// pairs it is sent on stdin (src/gpu/worker.rs).
    #[command(name = "gpu-worker", hide = true)]
    GpuWorker(commands::internal::SpecArgs),
    /// (internal) Ask the GPU libraries about every GPU in one process and print JSON (what
    /// `check` asks NVML in a child; the whole-node probe, for comparison and diagnosis).
    #[command(name = "probe-gpu", hide = true)]
    ProbeGpu(commands::internal::ProbeArgs),
    /// Show what a check (or the check behind a finding code) looks at, and how to fix it.
    Explain(commands::explain::Args),
    /// (packaging) Write the man pages, generated from this command line, into DIR.
    #[command(hide = true)]
    Man(commands::man::ManArgs),
    /// (packaging) Print the shell completion script for SHELL.
    #[command(hide = true)]
    Completions(commands::man::CompletionsArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

fn parse_deadline(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "{s:?}: the deadline is a number of seconds, above 0 and at most 86400"
        )),
    }
}

/// Parses the command line and runs the command it names.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version go to standard output through the checked path, so that
        // `--version > /dev/full` does not exit 0; clap's own printing ignores write errors.
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            use std::io::IsTerminal as _;
            let styled = e.render();
            if std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() {
                out!("{}", styled.ansi());
            } else {
                out!("{styled}");
            }
            return Ok(ExitCode::SUCCESS);
        }
        // Usage errors: clap prints them on standard error and exits 2.
        Err(e) => e.exit(),
    };
    // `--root /` is the live node too.
    let live = cli.root.as_ref().is_none_or(|r| r.as_os_str() == "/");
    watchdog::start(watchdog::Start {
        deadline: cli.deadline,
        watchdog: !matches!(cli.command, Command::Fix(_) | Command::Edit(_)),
        reason_on_stdout: match &cli.command {
            Command::Check(a) => a.format == Format::Reason,
            Command::GdrTest(a) => a.format == Format::Reason,
            _ => false,
        },
        stage: match &cli.command {
            Command::Fleet(_) => watchdog::Stage::AnalysingCaptures,
            Command::Jobs(_) => watchdog::Stage::ReadingLogs,
            Command::Capture(_) => watchdog::Stage::CopyingNode { live },
            _ => watchdog::Stage::ReadingNode { live },
        },
    });
    match cli.color {
        Color::Always => owo_colors::set_override(true),
        Color::Never => owo_colors::set_override(false),
        Color::Auto => {}
    }
    let global = commands::Global {
        root: cli.root,
        config: cli.config,
        nccl_env: cli.nccl_env,
    };
    match &cli.command {
        Command::Check(args) => commands::check::run(&global, args),
        Command::List(args) => Ok(commands::list::run(args)),
        Command::Topo(args) => commands::topo::run(&global, args),
        Command::Capture(args) => commands::capture::run(&global, args),
        Command::Fix(args) => commands::fix::run(&global, args),
        Command::Edit(args) => commands::edit::run(&global, args),
        Command::Nccl(args) => commands::nccl::run(&global, args),
        Command::Fleet(args) => commands::fleet::run(&global, args),
        Command::Jobs(args) => commands::jobs::run(&global, args),
        Command::GdrTest(args) => commands::gdr_test::run(&global, args),
        Command::GdrPair(args) => Ok(commands::internal::gdr_pair(args)),
        Command::NcclChild(args) => Ok(commands::internal::nccl_child(args)),
        Command::GpuWorker(args) => Ok(commands::internal::gpu_worker(args)),
        Command::ProbeGpu(args) => Ok(commands::internal::probe_gpu(args)),
        Command::Explain(args) => commands::explain::run(args),
        Command::Man(args) => commands::man::man(Cli::command(), args),
        Command::Completions(args) => Ok(commands::man::completions(Cli::command(), args)),
    }
}
