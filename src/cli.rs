//! The command line: argument parsing and the wiring from arguments to a report.

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum};
use gdrdoctor::checks::{self, Selection};
use gdrdoctor::config::Config;
use gdrdoctor::inventory::{self, Inventory};
use gdrdoctor::report;
use gdrdoctor::root::Root;
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
    /// Read a captured copy of a node (a directory with sys/, proc/, dev/) instead of this one.
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Site policy (YAML). Default: /etc/gdrdoctor/config.yaml when it exists.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Colour in human output (NO_COLOR is honoured by `auto`).
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the checks and report.
    Check(CheckArgs),
    /// List the checks, in the order they run.
    List {
        /// Also list every finding code each check can report.
        #[arg(long)]
        codes: bool,
    },
    /// The GPU and NIC PCIe matrix, as `nvidia-smi topo -m` shows it (PIX, PXB, PHB, NODE, SYS).
    Topo {
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// Do not ask NVML for NVLinks (GPU x GPU then shows PCIe levels only).
        #[arg(long)]
        no_gpu_probe: bool,
    },
    /// Copy exactly what the checks read (files, links, directories) into OUT, a new directory
    /// or OUT.tar.gz, for `check --root` elsewhere.
    Capture {
        /// A directory to create, or a file ending in .tar.gz.
        out: PathBuf,
    },
    /// (internal) Ask the GPU libraries and print JSON: what `check` runs in a child process.
    #[command(name = "probe-gpu", hide = true)]
    ProbeGpu {
        #[arg(long)]
        nvml: bool,
        #[arg(long)]
        cuda: bool,
        #[arg(long)]
        hip: bool,
        #[arg(long)]
        export: bool,
    },
    /// Show what a check (or the check behind a finding code) looks at, and how to fix it.
    Explain {
        /// A check ID (`iommu`) or a finding code (`iommu-translated`).
        id: String,
    },
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Show the evidence (file and value) behind every finding.
    #[arg(short, long)]
    verbose: bool,
    /// Run only these checks (comma-separated IDs).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    select: Vec<String>,
    /// Do not run these checks (comma-separated IDs).
    #[arg(long, value_delimiter = ',', value_name = "IDS")]
    skip: Vec<String>,
    /// Count warnings and unknowns as failures in the exit code.
    #[arg(long)]
    strict: bool,
    /// Do not load NVML, CUDA or HIP (no dma-buf export probe, no driver view of the GPUs).
    #[arg(long, conflicts_with = "gpu_probe")]
    no_gpu_probe: bool,
    /// Ask this machine's GPU libraries even with --root: for a container that sees the host's
    /// root at DIR and the host's GPUs through the NVIDIA Container Toolkit (or /dev/kfd).
    #[arg(long)]
    gpu_probe: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.color {
        Color::Always => owo_colors::set_override(true),
        Color::Never => owo_colors::set_override(false),
        Color::Auto => {}
    }
    match &cli.command {
        Command::Check(args) => check(&cli, args),
        Command::Capture { out } => capture(&cli, out),
        Command::ProbeGpu {
            nvml,
            cuda,
            hip,
            export,
        } => {
            let ask = gdrdoctor::gpu::Ask {
                nvml: *nvml,
                cuda: *cuda,
                hip: *hip,
                export: *export,
            };
            println!("{}", gdrdoctor::gpu::child_main(ask));
            Ok(ExitCode::SUCCESS)
        }
        Command::Topo {
            format,
            no_gpu_probe,
        } => {
            let (config, _path) = Config::load(cli.config.as_deref())?;
            let (root, display) = open_root(&cli)?;
            let options = inventory::Options {
                access: false,
                gpu_probe: gpu_probe(&config, gdrdoctor::gpu::Ask::NVML, *no_gpu_probe),
                gpu_probe_on_root: false,
            };
            let inv = Inventory::load(&root, &config, options);
            let m = gdrdoctor::placement::matrix(&inv);
            match format {
                Format::Human => print!("{}", report::topo::human(&m)),
                Format::Json => print!(
                    "{}",
                    report::topo::json(
                        &m,
                        report::RootInfo {
                            path: display,
                            live: root.is_live()
                        }
                    )
                ),
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::List { codes } => {
            for c in checks::ALL {
                let live = if c.live_only() { "  (live only)" } else { "" };
                println!("{:<14} {}{live}", c.id(), c.title());
                if *codes {
                    for code in c.codes() {
                        println!("    {:<28} {}", code.id, code.summary);
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { id } => {
            let check = checks::find(id).or_else(|| checks::find_code(id).map(|(c, _)| c));
            match check {
                Some(c) => {
                    print!("{}", c.readme());
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    bail!("no check or finding code named {id:?} (see `gdrdoctor list --codes`)")
                }
            }
        }
    }
}

/// How to run the GPU probe: this very binary, with the config's deadline.
fn gpu_probe(
    config: &Config,
    ask: gdrdoctor::gpu::Ask,
    disabled: bool,
) -> Option<gdrdoctor::gpu::ProbeCommand> {
    if disabled {
        return None;
    }
    // GDRDOCTOR_PROBE_EXE replaces the probe program: the tests use it for a probe that hangs
    // or crashes.
    let exe = std::env::var_os("GDRDOCTOR_PROBE_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    Some(gdrdoctor::gpu::ProbeCommand {
        exe,
        timeout: config.timeouts.gpu_probe(),
        ask,
    })
}

/// The root to read: `--root DIR`, or the live system. Returns it with how reports name it.
fn open_root(cli: &Cli) -> anyhow::Result<(Root, String)> {
    Ok(match &cli.root {
        Some(dir) => (
            Root::captured(dir).context("cannot use --root")?,
            dir.display().to_string(),
        ),
        None => (Root::live(), "/".to_owned()),
    })
}

fn capture(cli: &Cli, out: &std::path::Path) -> anyhow::Result<ExitCode> {
    let (config, _path) = Config::load(cli.config.as_deref())?;
    let (root, display) = open_root(cli)?;
    let root = root.recording();
    // Everything the checks read is read here: checks never touch files. The live-only access
    // probes (device nodes, this process's limits) have no place in a copy.
    let _inventory = Inventory::load(&root, &config, inventory::Options::default());
    let summary = gdrdoctor::capture::write(&root.recorded(), &root, out)?;
    eprintln!(
        "captured {} files ({} bytes), {} links and {} directories from {display} into {}",
        summary.files,
        summary.bytes,
        summary.links,
        summary.dirs,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

fn check(cli: &Cli, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let selection = Selection {
        select: args.select.clone(),
        skip: args.skip.clone(),
    };
    selection.validate().map_err(anyhow::Error::msg)?;
    let (config, _path) = Config::load(cli.config.as_deref())?;
    let (root, display) = open_root(cli)?;
    // The probe feeds `gpu`, `peer-memory` (a verified DMA-BUF path) and nothing else.
    let wanted = selection.runs("gpu", &config) || selection.runs("peer-memory", &config);
    let options = inventory::Options {
        access: selection.runs("rdma-access", &config),
        gpu_probe: gpu_probe(
            &config,
            gdrdoctor::gpu::Ask::FULL,
            args.no_gpu_probe || !wanted,
        ),
        gpu_probe_on_root: args.gpu_probe,
    };
    let inv = Inventory::load(&root, &config, options);
    let results = checks::run(&inv, &config, &selection);
    let report = report::build(
        &inv,
        results,
        &report::Options {
            strict: args.strict,
            root_display: display,
        },
    );
    let text = match args.format {
        Format::Human => report::human::render(
            &report,
            &report::human::Style {
                verbose: args.verbose,
            },
        ),
        Format::Json => report::json::render(&report),
    };
    print!("{text}");
    Ok(ExitCode::from(report.verdict.exit_code))
}
