//! `gdrdoctor fix`: the fixes for the current warnings and failures as one reviewed bash
//! script, or, with `--apply`, part of them run now: the runtime commands on the node, or the
//! persistent file edits on a `--root` directory (an OS image being built, or a copy).

use super::{Global, gpu_probe, load_node};
use crate::checks::{self, Selection};
use crate::config::Config;
use crate::fixscript::{self, Classes, Select};
use crate::inventory::Inventory;
use crate::model::FixClass;
use crate::probe;
use crate::root::Root;
use anyhow::{Context as _, bail};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which commands the script runs (the rest stay as comments): runtime, persistent, all
    /// (the default). With --apply: runtime on the node (the default there), persistent on a
    /// --root directory (the only class that applies to one).
    #[arg(long, value_enum)]
    class: Option<Classes>,
    /// Run the fixes of warnings too. By default only failures' fixes run: a warning (on a
    /// READY node, say) never changes the node unless asked.
    #[arg(long)]
    warnings: bool,
    /// Write the script to FILE (replaced whole, mode 0755) instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Apply now, logging each command, then check again and show what changed. On the node:
    /// the runtime commands (never persistent or disruptive ones). With --root DIR and --class
    /// persistent: the file edits of the persistent fixes, made in DIR (never the running
    /// node), each file's original kept as FILE.gdrdoctor-orig.
    #[arg(long)]
    apply: bool,
    /// With --apply: do not ask for confirmation.
    #[arg(long, requires = "apply")]
    yes: bool,
}

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let config = global.config()?;
    let (root, display) = global.root()?;
    let apply_class = match (args.apply, root.is_live(), args.class) {
        (false, _, _) => None,
        (true, true, None | Some(Classes::Runtime)) => Some(FixClass::Runtime),
        (true, true, Some(_)) => bail!(
            "--apply on the node runs the runtime commands only (--class runtime); persistent ones are in the script (gdrdoctor fix), or run them on an image with --root DIR --class persistent"
        ),
        (true, false, Some(Classes::Persistent)) => Some(FixClass::Persistent),
        (true, false, _) => bail!(
            "--apply with --root edits the files of that root: say --class persistent (its runtime state is not a running node's)"
        ),
    };
    let (inv, results) = judged(&root, &config);
    let blocks = fixscript::blocks(&results);
    if let Err(refusal) = fixscript::vet(&inv, &blocks) {
        errln!("gdrdoctor: {refusal}");
        return Ok(ExitCode::from(2));
    }
    let select = Select {
        classes: args.class.unwrap_or(Classes::All),
        warnings: args.warnings,
    };
    let Some(class) = apply_class else {
        let header = fixscript::Header {
            host: inv.kernel.hostname.as_deref(),
            kernel: inv.kernel.release.value().map(String::as_str),
            root: &display,
            live: root.is_live(),
        };
        let script = fixscript::render(&header, &results, select);
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
    };
    apply(&root, &config, &results, &blocks, select, class, args.yes)
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

/// `--apply`: the commands of `class`, each once, after a confirmation unless `--yes`; then the
/// node (or root) checked again, and what changed for the checks that were fixed. On a root,
/// a persistent command that is not a file edit (update-grub, systemctl) is listed for the
/// image, never run here.
fn apply(
    root: &Root,
    config: &Config,
    results: &[checks::CheckResult],
    blocks: &[fixscript::Block],
    select: Select,
    class: FixClass,
    yes: bool,
) -> anyhow::Result<ExitCode> {
    use fixscript::apply;
    let all = apply::steps(blocks, select, class);
    let (steps, elsewhere): (Vec<_>, Vec<_>) = all
        .into_iter()
        .partition(|s| root.is_live() || s.command.edit.is_some());
    let what = if root.is_live() {
        "runtime command(s)"
    } else {
        "file edit(s) in this root"
    };
    if steps.is_empty() && elsewhere.is_empty() {
        outln!(
            "nothing to apply: no {} fix for a failure{}",
            class.words(),
            if select.warnings { " or warning" } else { "" }
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!("gdrdoctor fix --apply: {} {what}:", steps.len());
    for s in &steps {
        outln!("  {}", apply::describe(s));
    }
    if !elsewhere.is_empty() {
        outln!(
            "not run here (they act on the running system; in the image, run them under chroot {}):",
            root.base().display()
        );
        for s in &elsewhere {
            outln!("  {}", apply::describe(s));
        }
    }
    if steps.is_empty() {
        return Ok(ExitCode::from(1));
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
        let ran = apply::run(s, root).with_context(|| "cannot run bash")?;
        failed += usize::from(!ran.ok);
        outln!("{}", apply::log(s, &ran));
    }
    // A link brought up or given a new MTU goes through its training again: RDMA ports report
    // DOWN for a moment (rxe, mlx5). Checking at once would judge that moment.
    if root.is_live()
        && steps
            .iter()
            .any(|s| s.command.run.starts_with("ip link set"))
    {
        outln!("(waiting 3 s for the links to come back)");
        std::thread::sleep(std::time::Duration::from_secs(3));
    }
    // Check again (a root: opened afresh, so that nothing read before the edits is reused),
    // and show what changed for the checks that were fixed.
    let again = if root.is_live() {
        Root::live()
    } else {
        Root::open(root.base()).context("cannot open the root again")?
    };
    let (_, after) = judged(&again, config);
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
