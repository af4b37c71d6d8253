//! `gdrdoctor capture OUT`: a copy of exactly what the checks read, for `check --root`
//! elsewhere.

use super::{Global, gpu_probe};
use crate::config::Config;
use crate::inventory::{self, Inventory};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
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
    /// Read the link-health counters again SECONDS later and record that second reading too,
    /// so that `check` of the copy judges their growth (flaps, errors, retries, AER) as a live
    /// `check --sample` does. 0.1 to 3600; live roots only.
    #[arg(long, value_name = "SECONDS", value_parser = super::check::sample_seconds)]
    sample: Option<f64>,
}

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    // NVML is asked when the node's GPUs are here: a live root, or `--gpu-probe`.
    let ask_nvml = !args.no_gpu_probe && (global.root.is_none() || args.gpu_probe);
    let out = args.out.as_path();
    let config = global.config()?;
    let (root, display) = global.root()?;
    if args.sample.is_some() && !root.is_live() {
        anyhow::bail!(
            "--sample reads the live node's counters twice; a captured root holds one reading"
        );
    }
    let root = root.recording();
    // Everything the checks read is read here: checks never touch files. The live-only access
    // probes (device nodes, this process's limits) have no place in a copy; the kernel's QoS
    // answers on the RoCE netdevs do (below).
    let options = crate::probe::Options {
        qos: true,
        ..crate::probe::Options::default()
    };
    let (inv, runs) = crate::probe::load(&root, &config, options);
    let read_at = std::time::Instant::now();
    let mut recording = root.recorded();
    // As `check --sample`: a node with no counter to read again waits for nothing.
    if let Some(seconds) = args
        .sample
        .filter(|_| crate::probe::sample::worth_taking(&inv))
    {
        // Read through a root that records nothing: the copy keeps the first reading where the
        // node has it, and the second below the sample's own folder.
        let window = std::time::Duration::from_secs_f64(seconds);
        let sample = crate::probe::sample::take(
            &crate::root::Root::live(),
            &inv,
            read_at,
            window,
            &super::watchdog::deadline(),
        );
        crate::probe::sample::record(&sample, &mut recording.files);
    }
    // The kernel's log is no file the checks read through the root: its judged records are
    // kept in a file of their own, so that the copy's report says what the node's did.
    if let Some(file) = inv.kernel.log.file() {
        recording.files.insert(
            crate::inventory::kernel::RECORDED_LOG.to_owned(),
            file.render().into_bytes(),
        );
    }
    let qos = record_qos(&runs.qos, &mut recording.files);
    let nvml = if ask_nvml {
        record_nvml(&config, &inv, &mut recording.files)
    } else {
        String::new()
    };
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
            .insert(crate::root::UNREAD.to_owned(), text.into_bytes());
    }
    let summary = crate::capture::write(&recording, &root, out)?;
    // Say so when links were rewritten: the copy then differs from the node's text.
    let rewritten = match summary.rewritten {
        0 => String::new(),
        n => format!(" ({n} leading outside the root rewritten to stay inside it)"),
    };
    errln!(
        "captured {} files ({} bytes), {} links{rewritten} and {} directories from {display} into {}{qos}{nvml}",
        summary.files,
        summary.bytes,
        summary.links,
        summary.dirs,
        out.display()
    );
    write_unread(&unread);
    Ok(ExitCode::SUCCESS)
}

/// What only NVML knows (persistence mode, NVLinks, the fabric state), recorded too, from the
/// NVML-only probe child that `check` runs, so that a check of the copy judges it as the live
/// check did. CUDA is not: its probe allocates on the GPUs, and offline it is not asked.
/// Returns what the summary line says of it (`; NVML's answer (8 GPUs) in ...`).
fn record_nvml(
    config: &Config,
    inv: &Inventory,
    files: &mut std::collections::BTreeMap<String, Vec<u8>>,
) -> String {
    use crate::probe::gpu::model::Lib;
    let nvidia = inv
        .gpus
        .iter()
        .any(|g| g.vendor == inventory::GpuVendor::Nvidia);
    let mut nvml = String::new();
    if !nvidia {
        return nvml;
    }
    let Some(cmd) = gpu_probe(config, crate::probe::gpu::Ask::NVML, false) else {
        return nvml;
    };
    let answer = crate::probe::gpu::run(&cmd);
    let what = match answer.probe().and_then(|p| p.nvml.as_ref()) {
        // No libnvidia-ml where capture runs (a container without NVIDIA's libraries) says
        // nothing of the node: recorded, it would read as a node without them.
        Some(Lib::NotFound { message, .. }) => {
            nvml = format!("; NVML not recorded: it cannot be loaded here ({message})");
            None
        }
        Some(Lib::Ready(n)) => Some(format!("NVML's answer ({} GPUs)", n.devices.len())),
        Some(_) => Some("NVML's answer (it could not be used)".into()),
        None => Some("NVML's lack of an answer".into()),
    };
    if let (Some(what), Some(text)) = (what, crate::probe::gpu::Recorded::text(&answer)) {
        nvml = format!("; {what} in {}", crate::probe::gpu::RECORDED_NVML);
        files.insert(
            crate::probe::gpu::RECORDED_NVML.to_owned(),
            text.into_bytes(),
        );
    }
    nvml
}

/// What only the live kernel answers of the RoCE netdevs' QoS (dcbnl, ethtool), recorded in a
/// file of its own (docs/qos-json.md), even when there is no RoCE netdev: the copy then says
/// that none was asked, not that it was never recorded. A captured root's record was read
/// through the root, and is copied as it is. Returns what the summary line says of it.
fn record_qos(
    qos: &crate::model::qos::Qos,
    files: &mut std::collections::BTreeMap<String, Vec<u8>>,
) -> String {
    use crate::model::qos::{Qos, RECORDED_QOS};
    let Qos::Live(answers) = qos else {
        return String::new();
    };
    files.insert(RECORDED_QOS.to_owned(), answers.to_json().into_bytes());
    match answers.netdevs.len() {
        0 => String::new(),
        n => format!(
            "; the kernel's QoS answers for {n} netdev{} in {RECORDED_QOS}",
            if n == 1 { "" } else { "s" }
        ),
    }
}

/// The paths that could not be read, on standard error.
fn write_unread(unread: &[(String, String)]) {
    if unread.is_empty() {
        return;
    }
    let n = unread.len();
    errln!(
        "could not read {n} path{} (recorded in {}, so that a check of the capture says so):",
        if n == 1 { "" } else { "s" },
        crate::root::UNREAD.trim_start_matches('/')
    );
    for (path, why) in unread.iter().take(50) {
        errln!(
            "  {} ({})",
            crate::report::human::clean(path),
            crate::report::human::clean(why)
        );
    }
    if n > 50 {
        errln!("  ... and {} more", n - 50);
    }
}
