//! `gdrdoctor fix`: the fixes for the current warnings and failures as one reviewed bash
//! script, or, with `--apply`, their runtime part run now.

use super::{Global, gpu_probe, load_node};
use crate::checks::{self, Selection};
use crate::config::Config;
use crate::fixscript;
use crate::inventory::Inventory;
use crate::probe;
use crate::root::Root;
use anyhow::{Context as _, bail};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which commands the script runs (the rest stay as comments): runtime, persistent, all.
    #[arg(long, value_enum, default_value_t = fixscript::Classes::All)]
    class: fixscript::Classes,
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

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let config = global.config()?;
    let (root, display) = global.root()?;
    if args.apply && !root.is_live() {
        bail!("--apply changes this node; it cannot apply to a captured root (--root)");
    }
    let (inv, results) = judged(&root, &config);
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
                crate::output::write(path, script.as_bytes(), 0o755)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                errln!("wrote {} ({} findings)", path.display(), blocks.len());
            }
            None => out!("{script}"),
        }
        return Ok(ExitCode::SUCCESS);
    }
    apply(&root, &config, &results, &blocks, args.yes)
}

/// Everything `check` runs except the write test (it moves bytes, and fixes none of its own).
fn judged(root: &Root, config: &Config) -> (Inventory, Vec<checks::CheckResult>) {
    let selection = Selection {
        select: Vec::new(),
        skip: vec!["gdr-test".into()],
    };
    let options = probe::Options {
        access: root.is_live(),
        gpu_probe: gpu_probe(config, crate::probe::gpu::Ask::FULL, false),
        gpu_probe_on_root: false,
        qos: true,
    };
    let (inv, runs) = load_node(root, config, options);
    let results = checks::run(&inv, &runs, config, &selection);
    (inv, results)
}

/// `--apply`: the runtime commands, each once, after a confirmation unless `--yes`; then the
/// node checked again, and what changed for the checks that were fixed.
fn apply(
    root: &Root,
    config: &Config,
    results: &[checks::CheckResult],
    blocks: &[fixscript::Block],
    yes: bool,
) -> anyhow::Result<ExitCode> {
    use fixscript::apply;
    let steps = apply::steps(blocks);
    if steps.is_empty() {
        outln!("nothing to apply: no warning or failure has a runtime fix");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("gdrdoctor fix --apply: {} runtime command(s):", steps.len());
    for s in &steps {
        outln!("  {}", apply::describe(s));
    }
    if !yes {
        out!("apply them now? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer).ok();
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            outln!("nothing applied");
            return Ok(ExitCode::from(1));
        }
    }
    let mut failed = 0;
    for s in &steps {
        let ran = apply::run(s).with_context(|| "cannot run bash")?;
        failed += usize::from(!ran.ok);
        outln!("{}", apply::log(s, &ran));
    }
    // Check again, and show what changed for the checks that were fixed.
    let (_, after) = judged(root, config);
    let (lines, still_failing) = apply::compare(&steps, results, &after);
    outln!("\nbefore -> after:");
    for line in lines {
        outln!("{line}");
    }
    Ok(if failed > 0 || still_failing {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
