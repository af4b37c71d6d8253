//! `gdrdoctor check`: read the node, run what the checks need (the GPU probe, the write test,
//! NCCL), judge, report.

use super::report::{self, OutputArgs};
use super::watchdog::{Stage, deadline, stage};
use super::{Global, gdr_test, gpu_probe, nccl};
use crate::checks::Selection;
use crate::model::gdr::GdrTest;
use crate::model::nccl::NcclVerify;
use crate::probe;
use crate::report::Format;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, default_value_t = Format::Human, value_parser = report::FORMATS)]
    pub format: Format,
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
    /// Read the link-health counters again SECONDS after the first reading and judge their
    /// growth (flaps, link errors, transport retries, PCIe AER) instead of lifetime totals.
    /// The GPU probe and the write test run inside the window. 0.1 to 3600; live roots only.
    #[arg(long, value_name = "SECONDS", value_parser = sample_seconds)]
    sample: Option<f64>,
    /// Judge the link-health counters and the kernel log against the reading the last run left
    /// in FILE (growth since then, with its span; not across a reboot), then leave this run's
    /// reading there. What the metrics timer keeps in its state directory. Live roots only;
    /// a --sample window, when asked, is judged instead and its later reading kept.
    #[arg(long, value_name = "FILE")]
    baseline: Option<std::path::PathBuf>,
}

pub(super) fn sample_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if (0.1..=3600.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: seconds from 0.1 to 3600")),
    }
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

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let selection = Selection {
        select: args.select.clone(),
        skip: args.skip.clone(),
    };
    selection.validate().map_err(anyhow::Error::msg)?;
    let config = global.config()?;
    let (root, display) = global.root()?;
    if args.sample.is_some() && !root.is_live() {
        anyhow::bail!(
            "--sample reads the live node's counters twice; a captured root holds the readings it was captured with (capture --sample records a window)"
        );
    }
    if args.baseline.is_some() && !root.is_live() {
        anyhow::bail!(
            "--baseline compares the live node's counters with its last run's; a captured root holds one reading"
        );
    }
    // The probe feeds `gpu` and `peer-memory` (a verified DMA-BUF path); the write test needs
    // the GPU workers too. `--no-gpu-probe` loads no GPU library at all, for either.
    let probe_wanted = selection.runs("gpu", &config) || selection.runs("peer-memory", &config);
    let gdr_wanted = root.is_live() && selection.runs("gdr-test", &config) && !args.no_gdr_test;
    let ask = if probe_wanted {
        crate::probe::gpu::Ask::FULL
    } else {
        crate::probe::gpu::Ask::default()
    };
    let options = probe::Options {
        access: selection.runs("rdma-access", &config),
        gpu_probe: gpu_probe(
            &config,
            ask,
            args.no_gpu_probe || !(probe_wanted || gdr_wanted),
        ),
        gpu_probe_on_root: args.gpu_probe,
        // The kernel's answers on the RoCE netdevs' QoS (dcbnl, ethtool): a few requests
        // per RoCE netdev, for the lossless chain (issue 28).
        qos: true,
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
    let (mut inv, mut runs, mut session) = probe::load_pending(&root, &config, options);
    let read_at = std::time::Instant::now();
    stage(Stage::GdrTest);
    if inv.live && selection.runs("gdr-test", &config) {
        runs.gdr_test = if args.no_gdr_test {
            GdrTest::Skipped("--no-gdr-test".into())
        } else if args.no_gpu_probe && !inv.gpus.is_empty() {
            GdrTest::Skipped(
                "--no-gpu-probe: the write test needs the GPU libraries too (`gdrdoctor gdr-test --memory host` tests the NICs alone)".into(),
            )
        } else {
            gdr_test::run_pairs(
                &inv,
                &config,
                crate::probe::gdr_test::Options::default(),
                session.as_mut(),
            )
        };
    }
    stage(Stage::GpuProbe);
    if let Some(mut s) = session {
        if probe_wanted {
            runs.gpu = s.probe();
        }
        // Within what the --deadline leaves: a worker slow to exit is killed, never waited for
        // past it (the report must still be written).
        s.finish(deadline().budget(crate::probe::gpu::FINISH_GRACE).limit);
        inv.learn(&runs.gpu);
    }
    // NCCL runs in its own child once the GPU workers have ended: it opens every GPU itself.
    if args.nccl_verify && selection.runs("nccl-verify", &config) {
        runs.nccl_verify = if !(root.is_live() || args.gpu_probe) {
            NcclVerify::not_run(
                "a captured root: NCCL runs on the live node (--gpu-probe runs it here, for a container that sees the host's root)",
            )
        } else if args.no_gpu_probe {
            NcclVerify::not_run("--no-gpu-probe: NCCL loads the GPU libraries too")
        } else {
            nccl::run_nccl(&inv, &config, None, None)
        };
    }
    let health = ["link-health", "kernel-log", "roce-lossless"]
        .iter()
        .any(|c| selection.runs(c, &config));
    // The last run's reading, before this run's replaces it.
    let baseline = args
        .baseline
        .as_deref()
        .filter(|_| inv.live && health)
        .map(|path| (path, probe::baseline::load(path, &root, &inv)));
    if let Some(seconds) = args.sample.filter(|_| inv.live) {
        if health && !probe::sample::worth_taking(&inv) {
            runs.span_note = Some(format!(
                "--sample {seconds}: not taken, the node has no link-health or AER counter to read twice"
            ));
        }
        if health && probe::sample::worth_taking(&inv) {
            stage(Stage::Sample);
            let window = std::time::Duration::from_secs_f64(seconds);
            runs.sample = Some(probe::sample::take(
                &root,
                &inv,
                read_at,
                window,
                &deadline(),
            ));
        }
    }
    if let Some((path, loaded)) = baseline {
        let saved = probe::baseline::save(path, &root, &inv, &runs.qos, runs.sample.as_ref());
        if let Err(e) = &saved {
            errln!("gdrdoctor: --baseline: not written: {e}");
        }
        runs.baseline_saved = Some(saved);
        match loaded {
            probe::baseline::Loaded::Found(last) if runs.sample.is_none() => {
                runs.sample = Some(last);
            }
            probe::baseline::Loaded::Found(_) => {}
            probe::baseline::Loaded::None(why) => {
                errln!("gdrdoctor: --baseline: {why}");
                if runs.sample.is_none() {
                    runs.span_note = Some(format!(
                        "--baseline: {why}: one reading judged (growth is judged from the next run on)"
                    ));
                }
            }
        }
    }
    report::write(&inv, &runs, &config, &selection, &args.wanted(), display)
}
