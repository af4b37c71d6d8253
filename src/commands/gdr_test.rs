//! `gdrdoctor gdr-test`: the GPUDirect RDMA write test alone, with its options; between two
//! nodes with `--listen`, `--peer` or `--slurm` (`two_node.rs`).

use super::report::{self, OutputArgs};
use super::watchdog::{Stage, deadline, stage};
use super::{Global, gpu_probe, this_exe, two_node};
use crate::checks::Selection;
use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::gdr::GdrTest;
use crate::probe;
use crate::report::Format;
use anyhow::bail;
use clap::ValueEnum;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, default_value_t = Format::Human, value_parser = report::FORMATS)]
    pub format: Format,
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
    memory: Option<crate::gdr::Memory>,
    /// nearest: each GPU with its nearest NIC(s); all: every GPU with every NIC.
    #[arg(long, value_enum, default_value_t = Pairs::Nearest)]
    pairs: Pairs,
    /// Only these GPUs (PCI addresses; repeatable).
    #[arg(long = "gpu", value_name = "BDF")]
    gpus: Vec<String>,
    /// Only these NICs, optionally a port (`mlx5_0`, `mlx5_0:1`; repeatable).
    #[arg(long = "nic", value_name = "NAME[:PORT]")]
    nics: Vec<crate::probe::gdr_test::NicArg>,
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
    two_node: two_node::TwoNodeArgs,
}

impl Args {
    fn wanted(&self) -> report::Wanted<'_> {
        report::Wanted {
            format: self.format,
            output: &self.output,
            verbose: self.verbose,
            strict: self.strict,
        }
    }
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

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let config = global.config()?;
    let (root, display) = global.root()?;
    if !root.is_live() {
        bail!("gdr-test moves bytes on this node; it cannot run on a captured root (--root)");
    }
    let t = &args.two_node;
    if t.listen.is_some() || t.peer.is_some() || t.slurm {
        let request = two_node::Request {
            two_node: t,
            memory: args.memory,
            nics: args.nics.clone(),
            gid_index: args.gid_index,
            size: args.size,
            iters: args.iters,
            duration_ms: args.duration_ms,
            format: args.format,
            output: &args.output,
        };
        return two_node::run(&config, &root, &request);
    }
    let mut gpus = Vec::new();
    for g in &args.gpus {
        gpus.push(crate::parse::pci::Bdf::parse(g).ok_or_else(|| {
            anyhow::anyhow!("--gpu {g:?} is not a PCI address such as 0000:3b:00.0")
        })?);
    }
    let selection = Selection {
        select: vec!["gdr-test".into()],
        skip: Vec::new(),
    };
    // GPU workers only for the GPUs a pair needs, started when it does.
    let options = probe::Options {
        gpu_probe: gpu_probe(&config, crate::probe::gpu::Ask::default(), false),
        ..probe::Options::default()
    };
    let (inv, mut runs, mut session) = probe::load_pending(&root, &config, options);
    let opts = crate::probe::gdr_test::Options {
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
    runs.gdr_test = run_pairs(&inv, &config, opts, session.as_mut());
    if let Some(s) = session {
        // Within what the --deadline leaves: a worker slow to exit is killed, never waited for
        // past it (the report must still be written).
        s.finish(deadline().budget(crate::probe::gpu::FINISH_GRACE).limit);
    }
    report::write(&inv, &runs, &config, &selection, &args.wanted(), display)
}

/// The write test on the planned pairs, with the config's limit per pair and the run's
/// deadline; `check` runs it too.
pub(super) fn run_pairs(
    inv: &Inventory,
    config: &Config,
    mut opts: crate::probe::gdr_test::Options,
    mut session: Option<&mut crate::probe::gpu::GpuSession>,
) -> GdrTest {
    opts.deadline_ms = (config.timeouts.gdr_pair_s * 1000.0) as u64;
    let (planned, not_planned) = crate::probe::gdr_test::plan(inv, &opts);
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
        .map(|s| s as &(dyn crate::gdr::PairRunner + Sync));
    let outcomes = crate::probe::gdr_test::run(planned, &this_exe(), deadline(), gpus);
    GdrTest::Ran {
        outcomes,
        not_planned,
    }
}
