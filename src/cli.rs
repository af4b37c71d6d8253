//! The command line: argument parsing and the wiring from arguments to a report.

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand, ValueEnum, error::ErrorKind};
use gdrdoctor::checks::{self, Selection};
use gdrdoctor::config::Config;
use gdrdoctor::deadline::Deadline;
use gdrdoctor::inventory::{self, Inventory};
use gdrdoctor::report;
use gdrdoctor::root::Root;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime};

static STARTED: OnceLock<(Instant, SystemTime)> = OnceLock::new();

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
        /// Do not ask NVML: the capture then holds no NVML answer, and offline the GPUs'
        /// persistence mode, NVLinks and fabric state are not judged.
        #[arg(long, conflicts_with = "gpu_probe")]
        no_gpu_probe: bool,
        /// Ask this machine's NVML even with --root: for a container that sees the host's root
        /// at DIR and the host's GPUs through the NVIDIA Container Toolkit.
        #[arg(long)]
        gpu_probe: bool,
    },
    /// Write the fixes for the current warnings and failures as one reviewed bash script (or,
    /// with --apply, run its runtime part now).
    Fix(FixArgs),
    /// NCCL: the settings that follow from this node (environment exports and /etc/nccl.conf),
    /// or, with `explain`, what a job's NCCL log says about GPUDirect RDMA and why.
    Nccl(NcclArgs),
    /// Check many captures (files, directories, globs) and compare nodes of the same model.
    Fleet {
        /// `.tar.gz` captures, capture directories, directories of captures, or globs.
        #[arg(required = true, value_name = "CAPTURE")]
        captures: Vec<PathBuf>,
        #[arg(long, value_enum, default_value_t = gdrdoctor::fleet::Format::Human)]
        format: gdrdoctor::fleet::Format,
        /// Captures analysed at once (default: one per CPU).
        #[arg(long, short)]
        jobs: Option<usize>,
        /// Write the picture of the first node of each model (DMI product name) into DIR, as
        /// DIR/<model>.svg (`topo --format svg`; docs/topo-svg.md).
        #[arg(long, value_name = "DIR")]
        pictures: Option<PathBuf>,
    },
    /// Run the GPUDirect RDMA write test alone, with its options (the gdr-test check).
    #[command(name = "gdr-test")]
    GdrTest(GdrTestArgs),
    /// (internal) Test one GPU-NIC pair and print JSON: what gdr-test runs in a child process.
    #[command(name = "gdr-pair", hide = true)]
    GdrPair {
        #[arg(long)]
        spec: String,
    },
    /// (internal) Run NCCL on the GPUs of the spec and print JSON: what `nccl verify` runs in a
    /// child process (src/nccl/verify.rs).
    #[command(name = "nccl-child", hide = true)]
    NcclChild {
        #[arg(long)]
        spec: String,
    },
    /// (internal) One GPU's worker: starts CUDA or HIP once, answers the probe, then runs the
    /// pairs it is sent on stdin (src/gpu/worker.rs).
    #[command(name = "gpu-worker", hide = true)]
    GpuWorker {
        #[arg(long)]
        spec: String,
    },
    /// (internal) Ask the GPU libraries about every GPU in one process and print JSON (what
    /// `check` asks NVML in a child; the whole-node probe, for comparison and diagnosis).
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
    /// (packaging) Write the man pages, generated from this command line, into DIR.
    #[command(hide = true)]
    Man {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// (packaging) Print the shell completion script for SHELL.
    #[command(hide = true)]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
struct NcclArgs {
    #[command(subcommand)]
    command: Option<NcclCommand>,
}

#[derive(Subcommand, Debug)]
enum NcclCommand {
    /// The NCCL settings that follow from this node (what `gdrdoctor nccl` prints).
    Settings,
    /// Read NCCL_DEBUG=INFO logs and tell, per node, rank and NIC, where GPUDirect RDMA was
    /// used and where not, and why, in terms of gdrdoctor's checks. Exit 0: every NET
    /// connection used GDR; 1: some did not; 2: not an NCCL log.
    Explain(ExplainArgs),
    /// Run NCCL itself on this node's GPUs (a one-rank communicator on one GPU; an all-reduce
    /// over its network on several) and say whether it uses GPUDirect RDMA, and where it sees
    /// the node differently from gdrdoctor. Exit 0: GDR on every GPU, agreeing; 1: not, or a
    /// disagreement, or NCCL failed; 2: NCCL could not be run.
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
struct VerifyArgs {
    /// human, or json (docs/nccl-verify-json.md).
    #[arg(long, value_enum, default_value_t = ExplainFormat::Human)]
    format: ExplainFormat,
    /// Every fact compared, not only the differences.
    #[arg(short, long)]
    verbose: bool,
    /// The libnccl to run (default: the dynamic loader's libnccl.so.2, else the NVIDIA pip
    /// wheel's copy of the python3 on PATH).
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// Keep NCCL's log (DIR/nccl.log) and topology dump (DIR/topo.xml) in DIR: created new,
    /// never through a link; DIR must not be writable by others unless sticky and yours.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Do not run the GPU probe before NCCL (peer-memory's DMA-BUF verdict is then inferred,
    /// not verified). NCCL itself still loads CUDA.
    #[arg(long)]
    no_gpu_probe: bool,
}

#[derive(clap::Args, Debug)]
struct ExplainArgs {
    /// NCCL logs: files (gzip is recognised), or `-` for standard input. Lines of many ranks
    /// and nodes may be interleaved, with other output mixed in.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// human, or json (docs/nccl-explain-json.md).
    #[arg(long, value_enum, default_value_t = ExplainFormat::Human)]
    format: ExplainFormat,
}

/// Where a report goes besides standard output.
#[derive(clap::Args, Debug)]
struct OutputArgs {
    /// Also write the report in FORMAT to PATH, atomically (a temporary file in the same
    /// directory, then renamed; a device or FIFO is written in place), e.g.
    /// `json:/run/gdrdoctor/report.json`. Repeatable.
    #[arg(long = "output", value_name = "FORMAT:PATH", value_parser = parse_output)]
    outputs: Vec<(ReportFormat, PathBuf)>,
    /// Also write the Prometheus metrics to DIR/gdrdoctor.prom, atomically, for
    /// node_exporter's textfile collector (--collector.textfile.directory).
    #[arg(long, value_name = "DIR")]
    textfile_dir: Option<PathBuf>,
    /// NFD output: labels expire SECONDS after the run (`# +expiry-time=`), so a node whose
    /// checker stopped does not keep its last verdict. 1 to 31536000 (a year).
    // Bounded: 2^64-1 used to wrap around to a time before the run.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    nfd_expiry: Option<u64>,
}

/// The formats of a check report.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ReportFormat {
    /// For people: findings, fixes, the verdict last.
    Human,
    /// Everything, as documented in docs/report-json.md.
    Json,
    /// JUnit XML: a testcase per finding, a testsuite per check.
    Junit,
    /// Prometheus text exposition: gdrdoctor_* gauges.
    Prometheus,
    /// Node Feature Discovery feature file: gdr.ready=true, gdr.path=dmabuf, ...
    Nfd,
    /// One line: `gdrdoctor: ready` or `gdrdoctor: <blocking codes>` (a drain reason).
    Reason,
}

fn parse_output(s: &str) -> Result<(ReportFormat, PathBuf), String> {
    let (format, path) = s.split_once(':').ok_or_else(|| {
        format!("{s:?}: expected FORMAT:PATH, such as json:/run/gdrdoctor/report.json")
    })?;
    let format = ReportFormat::from_str(format, true).map_err(|_| {
        format!("{format:?} is not a format (human, json, junit, prometheus, nfd, reason)")
    })?;
    if path.is_empty() {
        return Err(format!("{s:?}: no path after the format"));
    }
    Ok((format, PathBuf::from(path)))
}

fn parse_deadline(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!(
            "{s:?}: the deadline is a number of seconds, above 0 and at most 86400"
        )),
    }
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    format: ReportFormat,
    #[command(flatten)]
    output: OutputArgs,
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
    /// Do not run the GDR write test (it moves bytes between GPU memory and the NICs).
    #[arg(long)]
    no_gdr_test: bool,
    /// Also run NCCL itself on the GPUs (the nccl-verify check; it takes seconds): does it use
    /// GPUDirect RDMA, and does it see the node as gdrdoctor does?
    #[arg(long)]
    nccl_verify: bool,
}

#[derive(clap::Args, Debug)]
struct FixArgs {
    /// Which commands the script runs (the rest stay as comments): runtime, persistent, all.
    #[arg(long, value_enum, default_value_t = gdrdoctor::fixscript::Classes::All)]
    class: gdrdoctor::fixscript::Classes,
    /// Write the script to FILE (replaced whole, mode 0755) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Run the runtime commands now (never persistent or disruptive ones), logging each, then
    /// check again and show what changed. Live only.
    #[arg(long)]
    apply: bool,
    /// With --apply: do not ask for confirmation.
    #[arg(long, requires = "apply")]
    yes: bool,
}

#[derive(clap::Args, Debug)]
struct GdrTestArgs {
    #[arg(long, value_enum, default_value_t = ReportFormat::Human)]
    format: ReportFormat,
    #[command(flatten)]
    output: OutputArgs,
    #[arg(short, long)]
    verbose: bool,
    /// Count warnings and unknowns as failures in the exit code.
    #[arg(long)]
    strict: bool,
    /// The buffer under test: each GPU's own (default), host (the NIC's baseline), host-dmabuf
    /// (host memory as a dma-buf, via /dev/udmabuf), cuda, hip.
    #[arg(long, value_enum)]
    memory: Option<gdrdoctor::gdr::Memory>,
    /// nearest: each GPU with its nearest NIC(s); all: every GPU with every NIC.
    #[arg(long, value_enum, default_value_t = Pairs::Nearest)]
    pairs: Pairs,
    /// Only these GPUs (PCI addresses; repeatable).
    #[arg(long = "gpu", value_name = "BDF")]
    gpus: Vec<String>,
    /// Only these NICs, optionally a port (`mlx5_0`, `mlx5_0:1`; repeatable).
    #[arg(long = "nic", value_name = "NAME[:PORT]")]
    nics: Vec<gdrdoctor::gdr::plan::NicArg>,
    /// The GID index to use on RoCE ports (default: the RoCE v2 IPv4 one).
    #[arg(long)]
    gid_index: Option<u32>,
    /// Buffer and message size in bytes (suffixes K, M).
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    size: u64,
    /// Most WRITEs per direction in the bandwidth run.
    #[arg(long, default_value_t = 5000)]
    iters: u32,
    /// Longest bandwidth run, both directions together, in milliseconds (1 to 3600000).
    // Bounded as the config's timeouts are (an hour): a duration is never taken unchecked.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    duration_ms: u64,
    #[command(flatten)]
    two_node: TwoNodeArgs,
}

/// Between two nodes (docs/two-node.md): one side `--listen`, the other `--peer`, or both
/// `--slurm` under srun.
#[derive(clap::Args, Debug)]
struct TwoNodeArgs {
    /// Wait for one peer on ADDR:PORT (default 0.0.0.0:18516), test with it, and end.
    #[arg(long, value_name = "ADDR:PORT", num_args = 0..=1, default_missing_value = "", conflicts_with_all = ["peer", "slurm"])]
    listen: Option<String>,
    /// Test with the node listening at HOST[:PORT].
    #[arg(long, value_name = "HOST[:PORT]", conflicts_with = "slurm")]
    peer: Option<String>,
    /// Pair the tasks of a Slurm step (SLURM_PROCID, SLURM_JOB_NODELIST): task 0 listens,
    /// task 1 connects; with more tasks, a ring.
    #[arg(long)]
    slurm: bool,
    /// The shared secret, the same file on both nodes (at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The shared secret on the command line (visible in ps: for tests).
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    token: Option<String>,
    /// The rails in order, this node's NICs (default: NCCL_IB_HCA's order, else by name);
    /// rail i is paired with the peer's rail i.
    #[arg(long, value_name = "NIC[:PORT],...", value_delimiter = ',')]
    rails: Vec<gdrdoctor::gdr::plan::NicArg>,
    /// How long to wait for the peer to connect or to listen, seconds (0 to 86400).
    // Bounded like --deadline: 2^64-1 used to panic adding it to the clock (issue 25).
    #[arg(long, value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    wait: u64,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Pairs {
    Nearest,
    All,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (num, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or with K, M, G)"))?;
    let bytes = n.checked_mul(mult).ok_or("size too large")?;
    if !(4096..=(1 << 30)).contains(&bytes) || bytes % 4096 != 0 {
        return Err(format!(
            "{s}: the size must be a multiple of 4 KiB between 4K and 1G"
        ));
    }
    Ok(bytes)
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
    /// The PCIe tree as one self-contained SVG picture (docs/topo-svg.md).
    Svg,
    /// The same picture as Graphviz DOT.
    Dot,
}

/// The formats of `nccl explain`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ExplainFormat {
    Human,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

static DEADLINE: OnceLock<Deadline> = OnceLock::new();
/// What the run is doing, and on what (a path, an address), for the watchdog's message.
static STAGE: Mutex<(Stage, String)> = Mutex::new((Stage::Starting, String::new()));
/// Held by the thread that writes the report: the watchdog never cuts a report in half.
static FINISHING: Mutex<()> = Mutex::new(());
/// The watchdog also prints `gdrdoctor: deadline-exceeded` on stdout (--format reason).
static REASON_ON_STDOUT: AtomicBool = AtomicBool::new(false);

fn deadline() -> Deadline {
    DEADLINE.get().copied().unwrap_or_default()
}

/// What the run waits on, for the message at the deadline: each stage says what it was doing
/// and what an overrun there points at (issue 25: every overrun used to blame sysfs, a log
/// read from a pipe or a peer that never came included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
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
            Stage::Judging => "judging",
        }
    }

    /// What an overrun here points at. Only reading a live node can block in sysfs; the
    /// children (GPU probe, write test, NCCL) are killed at their own limits, which the
    /// deadline shortens, so an overrun there is gdrdoctor's own fault and says so.
    fn hint(self) -> &'static str {
        match self {
            Stage::ReadingNode { live: true } | Stage::CopyingNode { live: true } => {
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

fn stage(s: Stage) {
    stage_on(s, String::new());
}

/// `stage`, naming what it waits on: `job.log`, `at node-b:18516`.
fn stage_on(s: Stage, on: String) {
    gdrdoctor::trace::mark(|| format!("{} {on}", s.doing()));
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
    let started = (Instant::now(), SystemTime::now());
    let d = cli.deadline.map(Deadline::after).unwrap_or_default();
    let _ = DEADLINE.set(d);
    let _ = STARTED.set(started);
    if let Command::Check(CheckArgs { format, .. }) | Command::GdrTest(GdrTestArgs { format, .. }) =
        &cli.command
    {
        REASON_ON_STDOUT.store(*format == ReportFormat::Reason, Ordering::SeqCst);
    }
    // Never in the middle of `fix --apply`: a half-applied fix is worse than a late one (the
    // probe's and the pairs' budgets still follow the deadline there).
    if !matches!(cli.command, Command::Fix(_)) {
        start_watchdog(d);
    }
    // `--root /` is the live node too.
    let live = cli.root.as_ref().is_none_or(|r| r.as_os_str() == "/");
    stage(match &cli.command {
        Command::Fleet { .. } => Stage::AnalysingCaptures,
        Command::Capture { .. } => Stage::CopyingNode { live },
        _ => Stage::ReadingNode { live },
    });
    match cli.color {
        Color::Always => owo_colors::set_override(true),
        Color::Never => owo_colors::set_override(false),
        Color::Auto => {}
    }
    match &cli.command {
        Command::Check(args) => check(&cli, args),
        Command::Capture {
            out,
            no_gpu_probe,
            gpu_probe,
        } => capture(
            &cli,
            out,
            !*no_gpu_probe && (cli.root.is_none() || *gpu_probe),
        ),
        Command::GdrPair { spec } => {
            outln!("{}", gdrdoctor::gdr::child_main(spec));
            Ok(ExitCode::SUCCESS)
        }
        Command::GdrTest(args) => gdr_test(&cli, args),
        Command::NcclChild { spec } => {
            outln!("{}", gdrdoctor::nccl::verify::child_main(spec));
            Ok(ExitCode::SUCCESS)
        }
        Command::GpuWorker { spec } => {
            let stdin = std::io::stdin();
            let mut input = stdin.lock();
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            gdrdoctor::gpu::worker::worker_main(spec, &mut input, &mut out);
            // Its answers are written and flushed (a parent that is gone ends it the same way):
            // the kernel frees the GPU faster than the libraries' teardown would.
            use std::io::Write as _;
            let flushed = out.flush().is_ok();
            gdrdoctor::ffi::process::exit_without_teardown(if flushed { 0 } else { 2 })
        }
        Command::Fix(args) => fix(&cli, args),
        Command::Fleet {
            captures,
            format,
            jobs,
            pictures,
        } => {
            use gdrdoctor::fleet;
            let (config, _path) = load_config(&cli)?;
            if cli.root.is_some() {
                bail!("fleet takes the captures as arguments, not --root");
            }
            // Captures and the two-node test's reports (recognised by content, wherever they
            // come from) make one fleet report: one document per format, the worst verdict
            // decides the exit code (docs/fleet.md).
            let (captures, reports) = fleet::split(fleet::expand(captures));
            let two = fleet::two_node::TwoNode::read(&reports);
            let with_captures = !captures.is_empty() || two.is_empty();
            let workers = jobs
                .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
                .unwrap_or(2)
                .clamp(1, 256);
            let mut drawer = match pictures {
                Some(dir) => Some(fleet::PictureWriter::new(dir).with_context(|| {
                    format!("cannot create the pictures directory {}", dir.display())
                })?),
                None => None,
            };
            let mut picture_error = None;
            let mut out = std::io::BufWriter::new(crate::stdio::Stdout);
            fleet::write_header(&mut out, *format, with_captures)?;
            let mut first = true;
            let tally = fleet::run(captures, &config, workers, drawer.is_some(), |r| {
                let _ = fleet::write_node(&mut out, *format, first, r);
                first = false;
                if let (Some(d), Ok(n)) = (drawer.as_mut(), r) {
                    if let Err(e) = d.write(n) {
                        picture_error.get_or_insert(e);
                    }
                }
            });
            fleet::write_summary(&mut out, *format, &tally, with_captures, &two)?;
            use std::io::Write as _;
            out.flush()?;
            let clean = tally.ready == tally.nodes
                && tally.unreadable == 0
                && tally.cross().is_empty()
                && two.clean();
            // A picture not written is "could not run", as a report file is, but it never
            // hides a fleet that is not clean.
            if let Some(e) = picture_error {
                errln!("gdrdoctor: error: {e}");
                return Ok(ExitCode::from(if clean { 2 } else { 1 }));
            }
            Ok(if clean {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Nccl(NcclArgs {
            command: Some(NcclCommand::Explain(args)),
        }) => nccl_explain(&cli, args),
        Command::Nccl(NcclArgs {
            command: Some(NcclCommand::Verify(args)),
        }) => nccl_verify(&cli, args),
        Command::Nccl(NcclArgs {
            command: None | Some(NcclCommand::Settings),
        }) => {
            let (config, _path) = load_config(&cli)?;
            let (root, display) = open_root(&cli)?;
            let inv = load_inventory(&root, &config, inventory::Options::default());
            let settings = gdrdoctor::nccl::settings(&inv, config.thresholds.gdr_level);
            out!("{}", gdrdoctor::nccl::render(&inv, &settings, &display));
            // What the settings stand on and could not be read (the PCI tree, the RDMA
            // devices and their ports' GIDs, NCCL's own files) is said, and is not exit 0: the
            // settings may miss or contradict it (issue 25).
            let mut problems = inv.placement_problems();
            problems.extend(
                inv.rdma
                    .iter()
                    .flat_map(|d| &d.ports)
                    .flat_map(|p| p.problems.iter().cloned()),
            );
            if problems.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            write_problems(&problems);
            Ok(ExitCode::from(1))
        }
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
            outln!("{}", gdrdoctor::gpu::child_main(ask));
            // Standard output is written unbuffered: the answer is out. NVML's shutdown and
            // CUDA's exit handlers would only delay the parent's report. (An answer that could
            // not be written goes the usual way, so that `main` says why.)
            if crate::stdio::failed() {
                return Ok(ExitCode::SUCCESS);
            }
            gdrdoctor::ffi::process::exit_without_teardown(0)
        }
        Command::Topo {
            format,
            no_gpu_probe,
        } => {
            let (config, _path) = load_config(&cli)?;
            let (root, display) = open_root(&cli)?;
            let options = inventory::Options {
                access: false,
                gpu_probe: gpu_probe(&config, gdrdoctor::gpu::Ask::NVML, *no_gpu_probe),
                gpu_probe_on_root: false,
            };
            let inv = load_inventory(&root, &config, options);
            // What the matrix and the pictures stand on and could not be read: said, as
            // `check` says it, and never exit 0 on a picture that may leave things out
            // (issue 25: a user who cannot read sys/ got "no GPU and no RDMA device found").
            let problems = inv.placement_problems();
            if !problems.is_empty() && inv.gpus.is_empty() && inv.rdma.is_empty() {
                write_problems(&problems);
                errln!(
                    "gdrdoctor: error: no GPU or RDMA device could be read, so there is nothing to show"
                );
                return Ok(ExitCode::from(2));
            }
            // Written row by row as computed: the matrix is N x N (issue 14).
            let mut out = std::io::BufWriter::new(crate::stdio::Stdout);
            // NCCL's GDR decision beside the matrix: the judgement `check` makes (issue 25).
            let gdr = || report::topo::gdr(&inv, &gdrdoctor::nccl::effective::judge(&inv, &config));
            match format {
                Format::Human => {
                    let m = gdrdoctor::placement::matrix(&inv);
                    report::topo::write_human(&m, &gdr(), &mut out)?
                }
                Format::Json => {
                    let m = gdrdoctor::placement::matrix(&inv);
                    let info = report::RootInfo {
                        path: display,
                        live: root.is_live(),
                    };
                    report::topo::write_json(&m, gdr(), &problems, info, &mut out)?
                }
                // The pictures need the tree and each GPU's nearest NICs, not the matrix.
                Format::Svg | Format::Dot => {
                    let p = report::picture::picture(&inv, &config, &display);
                    if *format == Format::Svg {
                        report::svg::write(&p, &mut out)?
                    } else {
                        report::dot::write(&p, &mut out)?
                    }
                }
            }
            use std::io::Write as _;
            out.flush()?;
            if problems.is_empty() {
                return Ok(ExitCode::SUCCESS);
            }
            write_problems(&problems);
            Ok(ExitCode::from(1))
        }
        Command::List { codes } => {
            let mut text = String::new();
            for c in checks::ALL {
                let live = if c.live_only() { "  (live only)" } else { "" };
                text += &format!("{:<14} {}{live}\n", c.id(), c.title());
                if *codes {
                    for code in c.codes() {
                        text += &format!("    {:<28} {}\n", code.id, code.summary);
                    }
                }
            }
            out!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Man { dir } => {
            use clap::CommandFactory as _;
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let cmd = Cli::command();
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            // clap_complete offers hidden subcommands too; complete only what people type.
            let full = Cli::command();
            let mut cmd = clap::Command::new("gdrdoctor")
                .version(env!("CARGO_PKG_VERSION"))
                .args(full.get_arguments().cloned())
                .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut cmd, "gdrdoctor", &mut script);
            crate::stdio::print_bytes(&script);
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain { id } => {
            let check = checks::find(id).or_else(|| checks::find_code(id).map(|(c, _)| c));
            match check {
                Some(c) => {
                    out!("{}", c.readme());
                    Ok(ExitCode::SUCCESS)
                }
                None => {
                    bail!("no check or finding code named {id:?} (see `gdrdoctor list --codes`)")
                }
            }
        }
    }
}

/// What a command could not read, on standard error: each path with why, as `check -v` lists
/// them under "unreadable or nonsensical".
fn write_problems(problems: &[gdrdoctor::inventory::Problem]) {
    let n = problems.len();
    errln!(
        "gdrdoctor: {n} file{} could not be read or made no sense; what is shown may leave out what they hold:",
        if n == 1 { "" } else { "s" }
    );
    for p in problems.iter().take(50) {
        errln!(
            "  {} ({})",
            report::human::clean(&p.path),
            report::human::clean(&p.message)
        );
    }
    if n > 50 {
        errln!("  ... and {} more (gdrdoctor check -v lists them)", n - 50);
    }
}

/// `gdrdoctor nccl explain`: the logs are read as streams, one after the other, into one
/// explanation (a job's log is often one file per node or per rank).
fn nccl_explain(cli: &Cli, args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    use gdrdoctor::nccl::{explain, render};
    if cli.root.is_some() {
        bail!("nccl explain reads NCCL logs, not a node: leave out --root");
    }
    let mut collector = explain::Collector::new();
    // A log that is not a regular file (a FIFO, /dev/zero) is refused, as every input is: the
    // stream of a pipe is what `-` is for.
    let refused = |name: String, e: gdrdoctor::input::InputError| {
        anyhow::anyhow!(
            "cannot read {name}: {e}; nccl explain reads log files, or standard input as `-` (`zcat job.log.gz | gdrdoctor nccl explain -`)"
        )
    };
    for path in &args.logs {
        if path.as_os_str() == "-" {
            stage_on(Stage::ReadingLogs, "from standard input".into());
            gdrdoctor::input::check_stdin().map_err(|e| refused("standard input".into(), e))?;
            collector.read("-", std::io::stdin().lock());
        } else {
            stage_on(Stage::ReadingLogs, path.display().to_string());
            let file =
                gdrdoctor::input::open(path).map_err(|e| refused(path.display().to_string(), e))?;
            collector.read(&path.display().to_string(), file);
        }
    }
    stage(Stage::Judging);
    match collector.finish() {
        Ok(e) => {
            out!(
                "{}",
                match args.format {
                    ExplainFormat::Human => render::human(&e),
                    ExplainFormat::Json => render::json(&e),
                }
            );
            Ok(ExitCode::from(e.verdict.exit_code))
        }
        Err(not_nccl) => {
            errln!("gdrdoctor: {not_nccl}");
            Ok(ExitCode::from(2))
        }
    }
}

/// The site config, with the job environment of `--nccl-env` in it.
fn load_config(cli: &Cli) -> anyhow::Result<(Config, Option<PathBuf>)> {
    let (mut config, path) = Config::load(cli.config.as_deref(), &checks::NAMES)?;
    if let Some(file) = &cli.nccl_env {
        config.nccl.env_file = Some(gdrdoctor::config::load_nccl_env(file)?);
    }
    Ok((config, path))
}

/// Runs NCCL on the inventory's NVIDIA GPUs, in a child with the config's deadline.
fn run_nccl(
    inv: &Inventory,
    config: &Config,
    library: Option<PathBuf>,
    log_dir: Option<PathBuf>,
) -> gdrdoctor::nccl::verify::NcclVerify {
    use gdrdoctor::nccl::verify;
    let gpus: Vec<gdrdoctor::parse::pci::Bdf> = inv
        .gpus
        .iter()
        .filter(|g| g.vendor == inventory::GpuVendor::Nvidia)
        .map(|g| g.bdf)
        .collect();
    let d = deadline();
    let budget = d.budget(config.timeouts.nccl_verify());
    let opts = verify::Options {
        exe: this_exe(),
        library,
        timeout: budget.limit,
        cut_by_deadline: budget.cut.then(|| d.seconds()),
        log_dir,
        elements: verify::ELEMENTS,
    };
    stage(Stage::RunningNccl);
    verify::run_on(&gpus, &opts)
}

/// `gdrdoctor nccl verify`: the node read as `check` reads it (with the GPU probe, whose
/// workers end before NCCL starts), NCCL run on its GPUs, and the two compared.
fn nccl_verify(cli: &Cli, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    use gdrdoctor::nccl::{render, verify::NcclVerify};
    let (config, _path) = load_config(cli)?;
    let (root, display) = open_root(cli)?;
    // With --root, the root is this host's as a container sees it: NCCL and the probe run here.
    let options = inventory::Options {
        access: false,
        gpu_probe: gpu_probe(&config, gdrdoctor::gpu::Ask::FULL, args.no_gpu_probe),
        gpu_probe_on_root: true,
    };
    let mut inv = load_inventory(&root, &config, options);
    inv.nccl_verify = run_nccl(&inv, &config, args.library.clone(), args.log_dir.clone());
    stage(Stage::Judging);
    let run = match &inv.nccl_verify {
        NcclVerify::Ran(run) => run,
        NcclVerify::NotRun { reason, .. } => {
            errln!("gdrdoctor: NCCL was not run: {reason}");
            return Ok(ExitCode::from(2));
        }
    };
    let v = checks::nccl_verification(&inv, &config, run);
    // From here the watchdog waits: a report is never cut in half.
    let writing = FINISHING.lock().unwrap_or_else(|e| e.into_inner());
    match args.format {
        ExplainFormat::Human => out!("{}", render::verify_human(run, &v, args.verbose)),
        ExplainFormat::Json => out!(
            "{}",
            render::verify_json(run, &v, &display, inv.kernel.hostname.as_deref())
        ),
    }
    std::mem::forget(writing);
    Ok(ExitCode::from(v.exit_code))
}

/// How to run the GPU probe: this very binary, with the config's deadline.
/// `Inventory::load`, its stages told to the watchdog: reading the node, then waiting for the
/// GPU probe (whose limit follows the deadline), not one for both.
fn load_inventory(root: &Root, config: &Config, options: inventory::Options) -> Inventory {
    stage(Stage::ReadingNode {
        live: root.is_live(),
    });
    let (mut inv, session) = Inventory::load_pending(root, config, options);
    if let Some(mut s) = session {
        stage(Stage::GpuProbe);
        inv.gpu_runtime = s.probe();
        s.finish(gdrdoctor::gpu::FINISH_GRACE);
    }
    inv
}

fn gpu_probe(
    config: &Config,
    ask: gdrdoctor::gpu::Ask,
    disabled: bool,
) -> Option<gdrdoctor::gpu::ProbeCommand> {
    if disabled {
        return None;
    }
    let d = deadline();
    let budget = d.budget(config.timeouts.gpu_probe());
    Some(gdrdoctor::gpu::ProbeCommand {
        exe: this_exe(),
        timeout: budget.limit,
        ask,
        cut_by_deadline: budget.cut.then(|| d.seconds()),
    })
}

/// The root to read: `--root DIR`, or the live system. Returns it with how reports name it.
fn open_root(cli: &Cli) -> anyhow::Result<(Root, String)> {
    Ok(match &cli.root {
        Some(dir) => (
            Root::open(dir).context("cannot use --root")?,
            dir.display().to_string(),
        ),
        None => (Root::live(), "/".to_owned()),
    })
}

/// `ask_nvml`: the node's GPUs are here (a live root, or `--gpu-probe`), and NVML may be asked.
fn capture(cli: &Cli, out: &std::path::Path, ask_nvml: bool) -> anyhow::Result<ExitCode> {
    let (config, _path) = load_config(cli)?;
    let (root, display) = open_root(cli)?;
    let root = root.recording();
    // Everything the checks read is read here: checks never touch files. The live-only access
    // probes (device nodes, this process's limits) have no place in a copy.
    let inv = Inventory::load(&root, &config, inventory::Options::default());
    let mut recording = root.recorded();
    // What only NVML knows (persistence mode, NVLinks, the fabric state) is recorded too, from
    // the NVML-only probe child that `check` runs, so that a check of the copy judges it as the
    // live check did. CUDA is not: its probe allocates on the GPUs, and offline it is not asked.
    let nvidia = inv
        .gpus
        .iter()
        .any(|g| g.vendor == inventory::GpuVendor::Nvidia);
    let mut nvml = String::new();
    if ask_nvml && nvidia {
        if let Some(cmd) = gpu_probe(&config, gdrdoctor::gpu::Ask::NVML, false) {
            use gdrdoctor::gpu::model::Lib;
            let answer = gdrdoctor::gpu::run(&cmd);
            let what = match answer.probe().and_then(|p| p.nvml.as_ref()) {
                // No libnvidia-ml where capture runs (a container without NVIDIA's libraries)
                // says nothing of the node: recorded, it would read as a node without them.
                Some(Lib::NotFound { message, .. }) => {
                    nvml = format!("; NVML not recorded: it cannot be loaded here ({message})");
                    None
                }
                Some(Lib::Ready(n)) => Some(format!("NVML's answer ({} GPUs)", n.devices.len())),
                Some(_) => Some("NVML's answer (it could not be used)".into()),
                None => Some("NVML's lack of an answer".into()),
            };
            if let (Some(what), Some(text)) = (what, gdrdoctor::gpu::Recorded::text(&answer)) {
                nvml = format!("; {what} in {}", gdrdoctor::gpu::RECORDED_NVML);
                recording
                    .files
                    .insert(gdrdoctor::gpu::RECORDED_NVML.to_owned(), text.into_bytes());
            }
        }
    }
    // What could not be read is recorded in the copy too, so that a check of it says
    // "permission denied" where the node did, not "not found" (issue 25).
    let unread: Vec<(String, String)> = recording
        .unread
        .iter()
        .map(|(path, (_, e))| (path.clone(), e.reason()))
        .collect();
    if let Some(text) = recording.unread_json() {
        recording
            .files
            .insert(gdrdoctor::root::UNREAD.to_owned(), text.into_bytes());
    }
    let summary = gdrdoctor::capture::write(&recording, &root, out)?;
    // Say so when links were rewritten: the copy then differs from the node's text.
    let rewritten = match summary.rewritten {
        0 => String::new(),
        n => format!(" ({n} leading outside the root rewritten to stay inside it)"),
    };
    errln!(
        "captured {} files ({} bytes), {} links{rewritten} and {} directories from {display} into {}{nvml}",
        summary.files,
        summary.bytes,
        summary.links,
        summary.dirs,
        out.display()
    );
    if !unread.is_empty() {
        let n = unread.len();
        errln!(
            "could not read {n} path{} (recorded in {}, so that a check of the capture says so):",
            if n == 1 { "" } else { "s" },
            gdrdoctor::root::UNREAD.trim_start_matches('/')
        );
        for (path, why) in unread.iter().take(50) {
            errln!(
                "  {} ({})",
                report::human::clean(path),
                report::human::clean(why)
            );
        }
        if n > 50 {
            errln!("  ... and {} more", n - 50);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn check(cli: &Cli, args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let selection = Selection {
        select: args.select.clone(),
        skip: args.skip.clone(),
    };
    selection.validate().map_err(anyhow::Error::msg)?;
    let (config, _path) = load_config(cli)?;
    let (root, display) = open_root(cli)?;
    // The probe feeds `gpu` and `peer-memory` (a verified DMA-BUF path); the write test needs
    // the GPU workers too. `--no-gpu-probe` loads no GPU library at all, for either.
    let probe_wanted = selection.runs("gpu", &config) || selection.runs("peer-memory", &config);
    let gdr_wanted = root.is_live() && selection.runs("gdr-test", &config) && !args.no_gdr_test;
    let ask = if probe_wanted {
        gdrdoctor::gpu::Ask::FULL
    } else {
        gdrdoctor::gpu::Ask::default()
    };
    let options = inventory::Options {
        access: selection.runs("rdma-access", &config),
        gpu_probe: gpu_probe(
            &config,
            ask,
            args.no_gpu_probe || !(probe_wanted || gdr_wanted),
        ),
        gpu_probe_on_root: args.gpu_probe,
    };
    stage(Stage::ReadingNode {
        live: root.is_live(),
    });
    // A test seam for the watchdog (tests/formats.rs): stand in for a sysfs read that blocks.
    if let Some(ms) = std::env::var("GDRDOCTOR_TEST_STALL_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    // The GPU workers start as soon as the GPUs are known, while the rest is read.
    let (mut inv, mut session) = Inventory::load_pending(&root, &config, options);
    stage(Stage::GdrTest);
    if inv.live && selection.runs("gdr-test", &config) {
        inv.gdr_test = if args.no_gdr_test {
            inventory::GdrTest::Skipped("--no-gdr-test".into())
        } else if args.no_gpu_probe && !inv.gpus.is_empty() {
            inventory::GdrTest::Skipped(
                "--no-gpu-probe: the write test needs the GPU libraries too (`gdrdoctor gdr-test --memory host` tests the NICs alone)".into(),
            )
        } else {
            run_gdr(
                &inv,
                &config,
                gdrdoctor::gdr::plan::Options::default(),
                session.as_mut(),
            )
        };
    }
    stage(Stage::GpuProbe);
    if let Some(mut s) = session {
        if probe_wanted {
            inv.gpu_runtime = s.probe();
        }
        // Within what the --deadline leaves: a worker slow to exit is killed, never waited for
        // past it (the report must still be written).
        s.finish(deadline().budget(gdrdoctor::gpu::FINISH_GRACE).limit);
    }
    // NCCL runs in its own child once the GPU workers have ended: it opens every GPU itself.
    if args.nccl_verify && selection.runs("nccl-verify", &config) {
        use gdrdoctor::nccl::verify::NcclVerify;
        inv.nccl_verify = if !(root.is_live() || args.gpu_probe) {
            NcclVerify::not_run(
                "a captured root: NCCL runs on the live node (--gpu-probe runs it here, for a container that sees the host's root)",
            )
        } else if args.no_gpu_probe {
            NcclVerify::not_run("--no-gpu-probe: NCCL loads the GPU libraries too")
        } else {
            run_nccl(&inv, &config, None, None)
        };
    }
    render(
        &inv,
        &config,
        &selection,
        (args.format, &args.output),
        args.verbose,
        args.strict,
        display,
    )
}

fn render(
    inv: &Inventory,
    config: &Config,
    selection: &Selection,
    (format, output): (ReportFormat, &OutputArgs),
    verbose: bool,
    strict: bool,
    display: String,
) -> anyhow::Result<ExitCode> {
    stage(Stage::Judging);
    let results = checks::run(inv, config, selection);
    let report = report::build(
        inv,
        results,
        &report::Options {
            strict,
            root_display: display,
        },
    );
    let (t0, wall) = STARTED
        .get()
        .copied()
        .unwrap_or((Instant::now(), SystemTime::now()));
    let run = report::prometheus::Run {
        started_unix_s: wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0),
        duration_s: t0.elapsed().as_secs_f64(),
    };
    let text = |f: ReportFormat| match f {
        ReportFormat::Human => report::human::render(&report, &report::human::Style { verbose }),
        ReportFormat::Json => report::json::render(&report),
        ReportFormat::Junit => report::junit::render(&report),
        ReportFormat::Prometheus => report::prometheus::render(&report, Some(run)),
        ReportFormat::Nfd => report::nfd::render(
            &report,
            output
                .nfd_expiry
                .map(|s| (run.started_unix_s as u64).saturating_add(s)),
        ),
        ReportFormat::Reason => report::reason::render(&report),
    };
    let mut files: Vec<(ReportFormat, PathBuf)> = output.outputs.clone();
    if let Some(dir) = &output.textfile_dir {
        files.push((ReportFormat::Prometheus, dir.join("gdrdoctor.prom")));
    }
    // From here the watchdog waits: a report is never cut in half.
    let writing = FINISHING.lock().unwrap_or_else(|e| e.into_inner());
    let mut failed = false;
    for (f, path) in &files {
        if let Err(e) = gdrdoctor::output::write_atomic(path, text(*f).as_bytes()) {
            errln!("gdrdoctor: error: cannot write {}: {e}", path.display());
            failed = true;
        }
    }
    out!("{}", text(format));
    gdrdoctor::trace::mark(|| "report written".into());
    // A file that could not be written never hides "not ready" (a prolog must still drain);
    // on a ready node it is exit 2, so that a unit or a cron job notices the missing file.
    let code = match (failed, report.verdict.exit_code) {
        (true, 0) => {
            errln!(
                "gdrdoctor: the report above is complete; the exit code is 2 because an output file could not be written"
            );
            2
        }
        (_, c) => c,
    };
    std::mem::forget(writing);
    Ok(ExitCode::from(code))
}

/// This binary, for the probe and test children. GDRDOCTOR_PROBE_EXE replaces it: the tests use
/// it for a child that hangs or crashes.
fn this_exe() -> PathBuf {
    std::env::var_os("GDRDOCTOR_PROBE_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"))
}

fn run_gdr(
    inv: &Inventory,
    config: &Config,
    mut opts: gdrdoctor::gdr::plan::Options,
    mut session: Option<&mut gdrdoctor::gpu::GpuSession>,
) -> inventory::GdrTest {
    opts.deadline_ms = (config.timeouts.gdr_pair_s * 1000.0) as u64;
    let (planned, not_planned) = gdrdoctor::gdr::plan::plan(inv, &opts);
    // A worker for each GPU a pair needs (the probe started the rest already).
    if let Some(s) = session.as_deref_mut() {
        for p in planned.iter().filter(|p| p.spec.memory.is_gpu()) {
            if let Some(gpu) = p.gpu {
                s.ensure(gpu);
            }
        }
    }
    let gpus = session
        .as_deref()
        .map(|s| s as &(dyn gdrdoctor::gdr::PairRunner + Sync));
    let outcomes = gdrdoctor::gdr::plan::run(planned, &this_exe(), deadline(), gpus);
    inventory::GdrTest::Ran {
        outcomes,
        not_planned,
    }
}

fn gdr_test(cli: &Cli, args: &GdrTestArgs) -> anyhow::Result<ExitCode> {
    let (config, _path) = load_config(cli)?;
    let (root, display) = open_root(cli)?;
    if !root.is_live() {
        bail!("gdr-test moves bytes on this node; it cannot run on a captured root (--root)");
    }
    let t = &args.two_node;
    if t.listen.is_some() || t.peer.is_some() || t.slurm {
        return two_node(&config, &root, args);
    }
    let mut gpus = Vec::new();
    for g in &args.gpus {
        gpus.push(gdrdoctor::parse::pci::Bdf::parse(g).ok_or_else(|| {
            anyhow::anyhow!("--gpu {g:?} is not a PCI address such as 0000:3b:00.0")
        })?);
    }
    let selection = Selection {
        select: vec!["gdr-test".into()],
        skip: Vec::new(),
    };
    // GPU workers only for the GPUs a pair needs, started when it does.
    let options = inventory::Options {
        gpu_probe: gpu_probe(&config, gdrdoctor::gpu::Ask::default(), false),
        ..inventory::Options::default()
    };
    let (mut inv, mut session) = Inventory::load_pending(&root, &config, options);
    let opts = gdrdoctor::gdr::plan::Options {
        memory: args.memory,
        all_pairs: args.pairs == Pairs::All,
        gpus,
        nics: args.nics.clone(),
        gid_index: args.gid_index,
        size: args.size,
        iters: args.iters,
        duration_ms: args.duration_ms,
        deadline_ms: 0,
    };
    stage(Stage::GdrTest);
    inv.gdr_test = run_gdr(&inv, &config, opts, session.as_mut());
    if let Some(s) = session {
        // Within what the --deadline leaves: a worker slow to exit is killed, never waited for
        // past it (the report must still be written).
        s.finish(deadline().budget(gdrdoctor::gpu::FINISH_GRACE).limit);
    }
    render(
        &inv,
        &config,
        &selection,
        (args.format, &args.output),
        args.verbose,
        args.strict,
        display,
    )
}

/// `gdr-test --listen | --peer | --slurm`: the write test between two nodes.
fn two_node(config: &Config, root: &Root, args: &GdrTestArgs) -> anyhow::Result<ExitCode> {
    use gdrdoctor::gdr::{slurm, twonode, wire};
    let t = &args.two_node;
    let token = match (&t.token_file, &t.token) {
        // A small private regular file, read within a bound (wire::token_file).
        (Some(path), _) => {
            stage_on(Stage::ReadingTokenFile, path.display().to_string());
            wire::token_file(path)
                .map_err(|e| anyhow::anyhow!("--token-file {}: {e}", path.display()))?
        }
        (None, Some(tok)) => {
            wire::token(tok.as_bytes()).map_err(|e| anyhow::anyhow!("--token: {e}"))?
        }
        (None, None) => bail!(
            "the two-node test needs the token both nodes share: --token-file FILE, readable by its owner only (e.g. `(umask 077; head -c 32 /dev/urandom | base64 > FILE)` on a shared filesystem)"
        ),
    };
    // Who to talk to: (role, address) per session; a ring has two.
    let mut sessions = Vec::new();
    if t.slurm {
        let p = slurm::pairing(&|k| std::env::var(k).ok(), twonode::DEFAULT_PORT)
            .map_err(|e| anyhow::anyhow!("--slurm: {e}"))?;
        if let Some(port) = p.listen {
            sessions.push((twonode::Role::Listener, format!("0.0.0.0:{port}")));
        }
        if let Some((host, port)) = p.peer {
            sessions.push((twonode::Role::Connector, format!("{host}:{port}")));
        }
    } else if let Some(l) = &t.listen {
        sessions.push((twonode::Role::Listener, twonode::listen_addr(Some(l))));
    } else if let Some(p) = &t.peer {
        sessions.push((twonode::Role::Connector, twonode::peer_addr(p)));
    }
    let inv = load_inventory(root, config, inventory::Options::default());
    let opts = gdrdoctor::gdr::plan::Options {
        memory: args.memory,
        nics: args.nics.clone(),
        gid_index: args.gid_index,
        ..gdrdoctor::gdr::plan::Options::default()
    };
    let order = if t.rails.is_empty() {
        twonode::nccl_order(std::env::var("NCCL_IB_HCA").ok().as_deref())
            .map_err(|e| anyhow::anyhow!(e))?
    } else {
        t.rails.clone()
    };
    let rails = twonode::rails(&inv, &opts, &order);
    let settings = twonode::Settings {
        size: args.size,
        iters: args.iters,
        duration_ms: args.duration_ms,
        rail_timeout_ms: (config.timeouts.gdr_pair_s * 3000.0) as u64,
        ..twonode::Settings::default()
    };
    let host = inv
        .kernel
        .hostname
        .clone()
        .unwrap_or_else(|| "this node".into());
    let wait = std::time::Duration::from_secs(t.wait);
    // Waiting for the peer, named (`to connect to 0.0.0.0:18516`, `at node-b:18516`), until
    // every session has its channel (or gave up): then the test itself.
    let on: Vec<String> = sessions
        .iter()
        .map(|(role, addr)| match role {
            twonode::Role::Listener => format!("to connect to {addr}"),
            twonode::Role::Connector => format!("at {addr}"),
        })
        .collect();
    stage_on(Stage::WaitingForPeer, on.join(" and "));
    let waiting = std::sync::atomic::AtomicUsize::new(sessions.len());
    // The sessions of a ring run at the same time: each waits for the other node's.
    let reports: Vec<twonode::Report> = std::thread::scope(|scope| {
        let handles: Vec<_> = sessions
            .iter()
            .map(|(role, addr)| {
                let (rails, settings, host, token) = (&rails, settings.clone(), &host, &token);
                let waiting = &waiting;
                scope.spawn(move || {
                    let ch = match role {
                        twonode::Role::Listener => twonode::listen(addr, token, wait),
                        twonode::Role::Connector => twonode::connect(addr, token, wait),
                    };
                    if waiting.fetch_sub(1, Ordering::SeqCst) == 1 {
                        stage(Stage::TwoNodeTest);
                    }
                    match ch {
                        Ok(mut ch) => {
                            twonode::run(&mut ch, *role, host, rails, settings, &twonode::Verbs)
                        }
                        Err(e) => twonode::Report::failed(host, *role, settings, addr, &e),
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    let text = |f: ReportFormat| -> anyhow::Result<String> {
        use gdrdoctor::report::twonode as r;
        Ok(match f {
            ReportFormat::Human => r::human(&reports),
            ReportFormat::Json => r::json(&reports),
            ReportFormat::Junit => r::junit(&reports),
            ReportFormat::Prometheus => r::prometheus(&reports),
            ReportFormat::Reason => r::reason(&reports),
            ReportFormat::Nfd => {
                bail!("the two-node test has no NFD format (use json, junit or prometheus)")
            }
        })
    };
    out!("{}", text(args.format)?);
    for (f, path) in &args.output.outputs {
        if let Err(e) = gdrdoctor::output::write_atomic(path, text(*f)?.as_bytes()) {
            errln!("gdrdoctor: error: cannot write {}: {e}", path.display());
            return Ok(ExitCode::from(2));
        }
    }
    let worst = reports.iter().map(|r| r.exit_code()).max().unwrap_or(2);
    Ok(ExitCode::from(worst))
}

/// Everything `check` runs except the write test (it moves bytes, and fixes none of its own).
fn fix_inventory(root: &Root, config: &Config) -> (Inventory, Vec<checks::CheckResult>) {
    let selection = Selection {
        select: Vec::new(),
        skip: vec!["gdr-test".into()],
    };
    let options = inventory::Options {
        access: root.is_live(),
        gpu_probe: gpu_probe(config, gdrdoctor::gpu::Ask::FULL, false),
        gpu_probe_on_root: false,
    };
    let inv = load_inventory(root, config, options);
    let results = checks::run(&inv, config, &selection);
    (inv, results)
}

fn fix(cli: &Cli, args: &FixArgs) -> anyhow::Result<ExitCode> {
    use gdrdoctor::fixscript;
    let (config, _path) = load_config(cli)?;
    let (root, display) = open_root(cli)?;
    if args.apply && !root.is_live() {
        bail!("--apply changes this node; it cannot apply to a captured root (--root)");
    }
    let (inv, results) = fix_inventory(&root, &config);
    let blocks = fixscript::blocks(&results);
    if let Err(refusal) = fixscript::vet(&inv, &blocks) {
        errln!("gdrdoctor: {refusal}");
        return Ok(ExitCode::from(2));
    }
    if !args.apply {
        let header = fixscript::Header {
            host: inv.kernel.hostname.as_deref(),
            kernel: inv.kernel.release.value().map(String::as_str),
            root: &display,
            live: root.is_live(),
        };
        let script = fixscript::render(&header, &results, args.class);
        match &args.output {
            Some(path) => {
                // Like a report file: a regular file is replaced (mode 0755), a device or FIFO
                // written in place and never chmod-ed.
                gdrdoctor::output::write(path, script.as_bytes(), 0o755)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                errln!("wrote {} ({} findings)", path.display(), blocks.len());
            }
            None => out!("{script}"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    // --apply: the runtime commands, each once.
    let mut commands: Vec<(String, String, gdrdoctor::model::FixCommand)> = Vec::new();
    for b in &blocks {
        for c in b.finding.fix.iter().flat_map(|f| &f.commands) {
            if c.class == gdrdoctor::model::FixClass::Runtime
                && !commands.iter().any(|(_, _, x)| x.run == c.run)
            {
                commands.push((b.check.to_owned(), b.finding.code.to_owned(), c.clone()));
            }
        }
    }
    if commands.is_empty() {
        outln!("nothing to apply: no warning or failure has a runtime fix");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "gdrdoctor fix --apply: {} runtime command(s):",
        commands.len()
    );
    for (check, code, c) in &commands {
        outln!("  [{check}/{code}] {}", c.run);
    }
    if !args.yes {
        out!("apply them now? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).ok();
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            outln!("nothing applied");
            return Ok(ExitCode::from(1));
        }
    }
    let mut failed = 0;
    for (check, code, c) in &commands {
        let snippet = match &c.guard {
            Some(g) => format!("if {g}; then echo 'already done'; else {}; fi", c.run),
            None => c.run.clone(),
        };
        let out = std::process::Command::new("bash")
            .args(["-c", &snippet])
            .output()
            .with_context(|| "cannot run bash")?;
        let ok = out.status.success();
        failed += usize::from(!ok);
        outln!(
            "[{check}/{code}] $ {}\n  -> {}{}{}",
            c.run,
            if ok { "ok" } else { "FAILED" },
            out.status
                .code()
                .map(|n| format!(" (exit {n})"))
                .unwrap_or_default(),
            {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                let text = text.trim();
                if text.is_empty() {
                    String::new()
                } else {
                    format!(": {}", text.replace('\n', " | "))
                }
            }
        );
    }
    // Check again, and show what changed for the checks that were fixed.
    let (_, after) = fix_inventory(&root, &config);
    let affected: std::collections::BTreeSet<&str> =
        commands.iter().map(|(c, _, _)| c.as_str()).collect();
    outln!("\nbefore -> after:");
    let mut still_failing = false;
    for id in affected {
        let status = |r: &[checks::CheckResult]| {
            r.iter()
                .find(|c| c.id == id)
                .map(|c| c.status.to_string())
                .unwrap_or_default()
        };
        let now = status(&after);
        still_failing |= now == "fail";
        outln!("  {id}: {} -> {now}", status(&results));
    }
    Ok(if failed > 0 || still_failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
