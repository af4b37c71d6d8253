//! `gdrdoctor nccl`: the settings that follow from the node (`nccl`, `nccl settings`), what a
//! job's NCCL log says (`nccl explain`), and NCCL run on the node (`nccl verify`).

use super::watchdog::{self, Stage, deadline, stage, stage_on};
use super::{Formats, Global, gpu_probe, load_node, this_exe, write_problems};
use crate::checks;
use crate::config::Config;
use crate::inventory::{self, Inventory};
use crate::model::nccl::{Library, NcclVerify};
use crate::probe;
use crate::report::Format;
use anyhow::bail;
use clap::Subcommand;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(flatten)]
    settings: SettingsArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(clap::Args, Debug, Clone)]
struct SettingsArgs {
    /// The NCCL release the node's jobs run (2.21, 2.28.9; on AMD GPUs, the NCCL release RCCL is
    /// built on, which RCCL's version repeats). From 2.21 NCCL picks the RoCE GID itself, and
    /// NCCL_IB_GID_INDEX is written only where its pick is wrong. Without it, gdrdoctor asks the
    /// libnccl (librccl on AMD GPUs) `nccl verify` would load for its version (ncclGetVersion,
    /// in a child); with --root it is not known.
    #[arg(long, value_name = "VERSION", value_parser = release_version)]
    nccl_version: Option<String>,
    /// Print the complete /etc/nccl.conf as it should be: the node's file with every line
    /// gdrdoctor does not manage kept as it is, each managed setting set where NCCL reads it
    /// (the first definition, in place; appended when absent), a `# gdrdoctor:` comment above
    /// each change saying old -> new and why; NCCL_IB_TC where roce-lossless knows the lossless
    /// priority. Install it over /etc/nccl.conf (or `gdrdoctor edit`).
    #[arg(long)]
    conf: bool,
}

/// `2.21` or `2.28.9`.
fn release_version(s: &str) -> Result<String, String> {
    let parts: Vec<&str> = s.split('.').collect();
    let ok = (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(s.to_owned())
    } else {
        Err("an NCCL release as MAJOR.MINOR or MAJOR.MINOR.PATCH (2.21, 2.28.9)".into())
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// The NCCL settings that follow from this node (what `gdrdoctor nccl` prints).
    Settings(SettingsArgs),
    /// Read NCCL_DEBUG=INFO logs (NCCL or RCCL) and tell, per node, rank and NIC, where
    /// GPUDirect RDMA was used and where not, and why, in terms of gdrdoctor's checks. Exit 0:
    /// every NET connection used GDR; 1: some did not; 3: not exercised (no NET connection, one
    /// node); 2: not an NCCL log.
    Explain(ExplainArgs),
    /// Run NCCL itself on this node's GPUs (RCCL on AMD GPUs; a one-rank communicator on one
    /// GPU; an all-reduce over its network on several) and say whether it uses GPUDirect RDMA,
    /// and where it sees the node differently from gdrdoctor. Exit 0: GDR on every GPU,
    /// agreeing; 1: not, or a disagreement, or NCCL failed; 2: NCCL could not be run.
    Verify(VerifyArgs),
}

#[derive(clap::Args, Debug)]
struct VerifyArgs {
    /// human, or json (docs/nccl-verify-json.md).
    #[arg(long, default_value_t = Format::Human, value_parser = FORMATS)]
    format: Format,
    /// Every fact compared, not only the differences.
    #[arg(short, long)]
    verbose: bool,
    /// The libnccl to run (default: the dynamic loader's libnccl.so.2, else the NVIDIA pip
    /// wheel's copy of the python3 on PATH); on AMD GPUs the librccl (default: the loader's
    /// librccl.so.1, ROCm's /opt/rocm*/lib, else PyTorch's ROCm wheel's copy).
    #[arg(long, value_name = "PATH")]
    library: Option<PathBuf>,
    /// Keep NCCL's log (DIR/nccl.log) and topology dump (DIR/topo.xml) in DIR: created new,
    /// never through a link; DIR must not be writable by others unless sticky and yours.
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Do not run the GPU probe before NCCL (peer-memory's DMA-BUF verdict is then inferred,
    /// not verified). NCCL itself still loads CUDA (RCCL, HIP).
    #[arg(long)]
    no_gpu_probe: bool,
}

#[derive(clap::Args, Debug)]
struct ExplainArgs {
    /// NCCL logs: files (gzip is recognised), or `-` for standard input. Lines of many ranks
    /// and nodes may be interleaved, with other output mixed in; message bodies quoted without
    /// NCCL's prefix are read too.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// human, or json (docs/nccl-explain-json.md).
    #[arg(long, default_value_t = Format::Human, value_parser = FORMATS)]
    format: Format,
    /// Follow growing files (a job's log, a pod's stdout): print each rank's transport to each
    /// NIC, with GDR or not, as soon as its lines arrive; end on a signal, or once no file has
    /// grown for --idle seconds, with the whole explanation.
    #[arg(long)]
    follow: bool,
    /// With --follow: end after this many seconds without a file growing.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, requires = "follow", value_parser = idle_seconds)]
    idle: f64,
}

fn idle_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.1..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{s:?} is not a number of seconds from 0.1 to 86400"
        )),
    }
}

/// The formats of `nccl explain` and `nccl verify`.
const FORMATS: Formats = Formats(&[(Format::Human, ""), (Format::Json, "")]);

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    match &args.command {
        Some(Command::Explain(args)) => explain(global, args),
        Some(Command::Verify(args)) => verify(global, args),
        Some(Command::Settings(a)) => settings(global, a),
        None => settings(global, &args.settings),
    }
}

/// The node's NCCL release: as stated, else `ncclGetVersion` of the library NCCL's run would
/// load (live only: a captured root holds no library to ask). On a node of AMD GPUs, the
/// library is RCCL, asked the same way.
fn release(
    args: &SettingsArgs,
    live: bool,
    which: Library,
    installed: Option<&crate::inventory::nccl_release::Installed>,
) -> crate::nccl::Release {
    use crate::nccl::Release;
    if let Some(v) = &args.nccl_version {
        return Release::Known {
            version: v.clone(),
            from: "--nccl-version".into(),
            library: which,
        };
    }
    let lib = match which {
        Library::Nccl => "libnccl",
        Library::Rccl => "librccl",
    };
    // What the node's files (or the site's config) name, where no library is asked: a
    // captured root, or the library's run failing.
    let from_files = |why: String| match installed.filter(|_| which == Library::Nccl) {
        Some(i) => Release::Known {
            version: i.version.to_string(),
            from: format!("{}: {}", i.path, i.value),
            library: which,
        },
        None => Release::Unknown {
            why,
            library: which,
        },
    };
    if installed.is_some_and(|i| i.path == crate::inventory::nccl_release::STATED) {
        return from_files(String::new());
    }
    if !live {
        return from_files(format!(
            "a captured root holds no {lib} to ask, and none of its files names the release (--nccl-version states it)"
        ));
    }
    stage(Stage::RunningNccl);
    let limit = deadline().budget(std::time::Duration::from_secs(20)).limit;
    match probe::nccl::version(&this_exe(), None, which, limit) {
        Ok((version, file)) => Release::Known {
            version,
            from: format!("ncclGetVersion of {file}"),
            library: which,
        },
        Err(e) => from_files(format!("{e} (--nccl-version states it)")),
    }
}

/// `gdrdoctor nccl`: the settings, and what they stand on that could not be read.
fn settings(global: &Global, args: &SettingsArgs) -> anyhow::Result<ExitCode> {
    let config = global.config()?;
    let (root, display) = global.root()?;
    let (inv, _) = load_node(&root, &config, probe::Options::default());
    let release = release(
        args,
        root.is_live(),
        inv.nccl.library,
        inv.nccl.release.as_ref(),
    );
    let settings = crate::nccl::settings(&inv, config.thresholds.gdr_level, &release);
    if args.conf {
        return conf(&root, &config, &inv, &settings);
    }
    out!(
        "{}",
        crate::report::nccl::settings::render(&inv, &settings, &release, &display)
    );
    // What the settings stand on and could not be read (the PCI tree, the RDMA devices and
    // their ports' GIDs, NCCL's own files) is said, and is not exit 0: the settings may miss or
    // contradict it (issue 25).
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

/// `nccl settings --conf`: the node's /etc/nccl.conf merged with what gdrdoctor manages (see
/// the flag's help). Exit 2 when the file is there and cannot be read: a merge needs it.
fn conf(
    root: &crate::root::Root,
    config: &crate::config::Config,
    inv: &crate::inventory::Inventory,
    settings: &[crate::nccl::Setting],
) -> anyhow::Result<ExitCode> {
    use crate::edit::{first_value, set_key};
    let path = crate::inventory::nccl::ETC_CONF;
    let old = match root.read_for_edit(path) {
        Ok(b) => String::from_utf8(b.unwrap_or_default())
            .map_err(|_| anyhow::anyhow!("{path}: not text: nothing merged"))?,
        Err(e) => bail!("cannot read {path} to merge with it: {e}"),
    };
    // Managed: what gdrdoctor computes, then the NCCL_IB_TC roce-lossless's fix names (the
    // traffic class whose DSCP the ports map to the priority with PFC).
    let mut managed: Vec<(String, String, String)> = settings
        .iter()
        .filter_map(|s| {
            let v = s.value.clone()?;
            let why = s.why.first().cloned().unwrap_or_default();
            Some((
                s.name.to_owned(),
                crate::sanitize::text(&v).into_owned(),
                why,
            ))
        })
        .collect();
    // NCCL_IB_HCA from the ports ACTIVE now, written into a file that outlives the outage,
    // would keep a repaired rail out for good (and turn a rail down into GPUs without a NIC):
    // while a port is down, the file's own NCCL_IB_HCA is kept.
    let down: Vec<String> = inv
        .rdma
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| !p.is_active())
        .map(|(d, p)| format!("{} port {}", d.name, p.num))
        .collect();
    // The GID index is computed over the same ports: it goes with the list.
    if !down.is_empty() {
        managed.retain(|(k, _, _)| k != "NCCL_IB_HCA" && k != "NCCL_IB_GID_INDEX");
        errln!(
            "gdrdoctor: NCCL_IB_HCA and NCCL_IB_GID_INDEX left as the file has them: {} not ACTIVE now (gdrdoctor nccl shows the settings for today)",
            down.join(", ")
        );
    }
    if let Some((tc, why)) = lossless_tc(root, config) {
        managed.retain(|(k, _, _)| k != "NCCL_IB_TC");
        managed.push(("NCCL_IB_TC".into(), tc, why));
    }
    let mut text = old.clone();
    for (key, value, why) in &managed {
        let was = first_value(&text, key).map(str::to_owned);
        if was.as_deref() == Some(value.as_str()) {
            continue;
        }
        let note = format!(
            "# gdrdoctor: {key} {} -> {value}: {}",
            was.as_deref().unwrap_or("(unset)"),
            crate::sanitize::text(why).replace('\n', " ")
        );
        let next = set_key(&text, key, value);
        // The note above the line that changed (or was added).
        let target = format!("{key}={value}");
        let mut lines: Vec<&str> = next.lines().collect();
        if let Some(i) = lines.iter().position(|l| *l == target) {
            lines.insert(i, &note);
        }
        text = lines.join("\n") + "\n";
    }
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The NCCL_IB_TC roce-lossless's fix sets (one value for every port), and why.
fn lossless_tc(
    root: &crate::root::Root,
    config: &crate::config::Config,
) -> Option<(String, String)> {
    let options = probe::Options {
        access: false,
        gpu_probe: None,
        gpu_probe_on_root: false,
        qos: true,
    };
    let (inv, runs) = load_node(root, config, options);
    let selection = crate::checks::Selection {
        select: vec!["roce-lossless".into()],
        skip: Vec::new(),
    };
    let results = crate::checks::run(&inv, &runs, config, &selection);
    let mut found: Option<(String, String)> = None;
    for f in results
        .iter()
        .filter(|r| r.id == "roce-lossless")
        .flat_map(|r| &r.findings)
    {
        for c in f.fix.iter().flat_map(|x| &x.commands) {
            if let Some(crate::model::edit::Edit::Set { key, value, .. }) = &c.edit
                && key == "NCCL_IB_TC"
            {
                match &found {
                    Some((v, _)) if v != value => return None,
                    _ => {
                        let rest = if f.fix.as_ref().is_some_and(|x| x.commands.len() > 1) {
                            "; the rest of that fix (ECN on the priority) is gdrdoctor fix's"
                        } else {
                            ""
                        };
                        found = Some((
                            value.clone(),
                            format!("{} ({}: {}){rest}", f.message, f.code, f.subject),
                        ))
                    }
                }
            }
        }
    }
    found
}

/// `gdrdoctor nccl explain`: the logs are read as streams, one after the other, into one
/// explanation (a job's log is often one file per node or per rank).
fn explain(global: &Global, args: &ExplainArgs) -> anyhow::Result<ExitCode> {
    use crate::nccl::explain;
    if global.root.is_some() {
        bail!("nccl explain reads NCCL logs, not a node: leave out --root");
    }
    let mut collector = explain::Collector::new();
    if args.follow {
        follow(&mut collector, args)?;
        return finish(collector, args);
    }
    // A log that is not a regular file (a FIFO, /dev/zero) is refused, as every input is: the
    // stream of a pipe is what `-` is for.
    let refused = |name: String, e: crate::input::InputError| {
        anyhow::anyhow!(
            "cannot read {name}: {e}; nccl explain reads log files, or standard input as `-` (`zcat job.log.gz | gdrdoctor nccl explain -`)"
        )
    };
    for path in &args.logs {
        if path.as_os_str() == "-" {
            stage_on(Stage::ReadingLogs, "from standard input".into());
            crate::input::check_stdin().map_err(|e| refused("standard input".into(), e))?;
            collector.read("-", std::io::stdin().lock());
        } else {
            stage_on(Stage::ReadingLogs, path.display().to_string());
            let file =
                crate::input::open(path).map_err(|e| refused(path.display().to_string(), e))?;
            collector.read(&path.display().to_string(), file);
        }
    }
    finish(collector, args)
}

/// The whole explanation of what was read.
fn finish(
    collector: crate::nccl::explain::Collector,
    args: &ExplainArgs,
) -> anyhow::Result<ExitCode> {
    use crate::report::nccl::explain as render;
    stage(Stage::Judging);
    match collector.finish() {
        Ok(e) => {
            let text = match args.format {
                Format::Human => render::human(&e),
                Format::Json => render::json(&e),
                other => bail!("nccl explain has no {other} format"),
            };
            out!("{text}");
            Ok(ExitCode::from(e.verdict.exit_code))
        }
        Err(not_nccl) => {
            errln!("gdrdoctor: {not_nccl}");
            Ok(ExitCode::from(2))
        }
    }
}

/// `nccl explain --follow`: each file read as it grows, its complete lines handed to the
/// collector; after each read that brought lines, every rank's transport to a NIC not printed
/// before is printed (`host rank 3 (GPU 2) -> NIC 0 over IB: GDR`). Ends once no file has grown
/// for `--idle` seconds (or on a signal, which ends the process as it always does).
fn follow(
    collector: &mut crate::nccl::explain::Collector,
    args: &ExplainArgs,
) -> anyhow::Result<()> {
    use std::collections::BTreeSet;
    use std::io::Read as _;
    let mut files = Vec::new();
    for path in &args.logs {
        if path.as_os_str() == "-" {
            bail!(
                "nccl explain --follow reads files that grow; standard input is read to its end without it"
            );
        }
        let input = crate::input::open(path).map_err(|e| {
            anyhow::anyhow!(
                "cannot read {}: {e}; --follow reads regular files",
                path.display()
            )
        })?;
        files.push((
            path.display().to_string(),
            input.into_file(),
            Vec::<u8>::new(),
        ));
    }
    let mut shown: BTreeSet<String> = BTreeSet::new();
    let idle = std::time::Duration::from_secs_f64(args.idle);
    let mut last_growth = std::time::Instant::now();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let mut grew = false;
        for (name, file, pending) in &mut files {
            loop {
                let n = match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => bail!("{name}: {e}"),
                };
                grew = true;
                pending.extend_from_slice(&buf[..n]);
                // Complete lines only: the rest waits for its newline.
                if let Some(end) = pending.iter().rposition(|&b| b == b'\n') {
                    collector.read_chunk(name, &pending[..=end]);
                    pending.drain(..=end);
                }
                // A line that never ends is not held whole (MAX_LINE): it is skipped.
                if pending.len() > crate::nccl::explain::MAX_LINE {
                    pending.clear();
                }
            }
        }
        if grew {
            last_growth = std::time::Instant::now();
            if let Ok(e) = collector.clone().finish() {
                for node in &e.nodes {
                    for c in &node.connections {
                        let gpu = match (c.cuda_dev, &c.bus) {
                            (_, Some(bus)) => format!(" (GPU {bus})"),
                            (Some(d), None) => format!(" (CUDA device {d})"),
                            _ => String::new(),
                        };
                        let line = format!(
                            "{} rank {}{gpu} -> NIC {} over {}: {}",
                            node.name,
                            c.rank,
                            c.nic,
                            c.net,
                            if c.gdr { "GDR" } else { "no GDR" }
                        );
                        if shown.insert(line.clone()) {
                            out!("{}\n", crate::sanitize::text(&line));
                        }
                    }
                }
            }
        } else if last_growth.elapsed() >= idle {
            return Ok(());
        } else {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// `gdrdoctor nccl verify`: the node read as `check` reads it (with the GPU probe, whose
/// workers end before NCCL starts), NCCL run on its GPUs, and the two compared.
fn verify(global: &Global, args: &VerifyArgs) -> anyhow::Result<ExitCode> {
    use crate::report::nccl::verify as render;
    let config = global.config()?;
    let (root, display) = global.root()?;
    // With --root, the root is this host's as a container sees it: NCCL and the probe run here.
    let options = probe::Options {
        access: false,
        gpu_probe: gpu_probe(&config, crate::probe::gpu::Ask::FULL, args.no_gpu_probe),
        gpu_probe_on_root: true,
        qos: false,
    };
    let (inv, mut runs) = load_node(&root, &config, options);
    runs.nccl_verify = run_nccl(&inv, &config, args.library.clone(), args.log_dir.clone());
    stage(Stage::Judging);
    let run = match &runs.nccl_verify {
        NcclVerify::Ran(run) => run,
        NcclVerify::NotRun { reason, .. } => {
            errln!("gdrdoctor: NCCL was not run: {reason}");
            return Ok(ExitCode::from(2));
        }
    };
    let v = checks::nccl_verification(&inv, &runs, &config, run);
    watchdog::writing_report();
    let text = match args.format {
        Format::Human => render::human(run, &v, args.verbose),
        Format::Json => render::json(run, &v, &display, inv.kernel.hostname.as_deref()),
        other => bail!("nccl verify has no {other} format"),
    };
    out!("{text}");
    Ok(ExitCode::from(v.exit_code))
}

/// Runs NCCL on the inventory's NVIDIA GPUs, in a child with the config's deadline; `check
/// --nccl-verify` runs it too. On a node of AMD GPUs (`inv.nccl.library`), RCCL on those.
pub(super) fn run_nccl(
    inv: &Inventory,
    config: &Config,
    library: Option<PathBuf>,
    log_dir: Option<PathBuf>,
) -> NcclVerify {
    use crate::probe::nccl;
    let which = inv.nccl.library;
    let vendor = match which {
        Library::Nccl => inventory::GpuVendor::Nvidia,
        Library::Rccl => inventory::GpuVendor::Amd,
    };
    let gpus: Vec<crate::parse::pci::Bdf> = inv
        .gpus
        .iter()
        .filter(|g| g.vendor == vendor)
        .map(|g| g.bdf)
        .collect();
    let d = deadline();
    let budget = d.budget(config.timeouts.nccl_verify());
    let opts = nccl::Options {
        exe: this_exe(),
        which,
        library,
        timeout: budget.limit,
        cut_by_deadline: budget.cut.then(|| d.seconds()),
        log_dir,
        elements: nccl::ELEMENTS,
    };
    stage(Stage::RunningNccl);
    nccl::run_on(&gpus, &opts)
}
