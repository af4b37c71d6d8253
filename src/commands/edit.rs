//! `gdrdoctor edit`: the file edits persistent fixes make (src/edit.rs), one per call, through
//! `--root` (`/`: this node; a directory: an OS image or a copy). Prints what happened to each
//! file; changes nothing when the file is already as it should be.

use super::Global;
use crate::edit::{self, Edit};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand, Debug)]
enum What {
    /// KEY=VALUE in a file NCCL reads (first definition wins): the first definition replaced in
    /// place, or the line appended.
    Set {
        file: String,
        #[arg(value_name = "KEY=VALUE")]
        setting: String,
    },
    /// Comment out every definition of KEY.
    Unset { file: String, key: String },
    /// The exact line present in FILE (appended when missing).
    Line { file: String, line: String },
    /// The first line that is exactly OLD becomes NEW.
    Replace {
        file: String,
        old: String,
        new: String,
    },
    /// FILE holds exactly these lines.
    Write {
        file: String,
        #[arg(required = true)]
        lines: Vec<String>,
    },
    /// The kernel command line, in /etc/default/grub (GRUB_CMDLINE_LINUX, conflicting words
    /// also taken out of GRUB_CMDLINE_LINUX_DEFAULT), BLS entries and /etc/kernel/cmdline; a
    /// word added replaces words that set the same parameter. Regenerate the boot loader's
    /// configuration afterwards (update-grub or grub2-mkconfig).
    KernelArgs {
        #[arg(long, value_name = "WORD")]
        add: Vec<String>,
        #[arg(long, value_name = "WORD")]
        remove: Vec<String>,
    },
}

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let e = match &args.what {
        What::Set { file, setting } => {
            let Some((key, value)) = setting.split_once('=') else {
                anyhow::bail!("{setting:?}: expected KEY=VALUE");
            };
            Edit::Set {
                file: file.clone(),
                key: key.to_owned(),
                value: value.to_owned(),
            }
        }
        What::Unset { file, key } => Edit::Unset {
            file: file.clone(),
            key: key.clone(),
        },
        What::Line { file, line } => Edit::Line {
            file: file.clone(),
            line: line.clone(),
        },
        What::Replace { file, old, new } => Edit::Replace {
            file: file.clone(),
            old: old.clone(),
            new: new.clone(),
        },
        What::Write { file, lines } => Edit::Write {
            file: file.clone(),
            lines: lines.clone(),
        },
        What::KernelArgs { add, remove } => Edit::KernelArgs {
            add: add.clone(),
            remove: remove.clone(),
        },
    };
    let file = match &e {
        Edit::Set { file, .. }
        | Edit::Unset { file, .. }
        | Edit::Line { file, .. }
        | Edit::Replace { file, .. }
        | Edit::Write { file, .. } => Some(file),
        Edit::KernelArgs { .. } => None,
    };
    if let Some(f) = file
        && !f.starts_with('/')
    {
        anyhow::bail!("{f}: the node's absolute path, please (with --root, inside that root)");
    }
    let (root, _) = global.root()?;
    for done in edit::apply(&root, &e)? {
        outln!("{done}");
    }
    Ok(ExitCode::SUCCESS)
}
