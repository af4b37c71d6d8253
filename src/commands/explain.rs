//! `gdrdoctor explain ID`: what a check looks at, and how to fix it (its README).

use crate::checks;
use anyhow::bail;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A check ID (`iommu`) or a finding code (`iommu-translated`).
    id: String,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let id = &args.id;
    match checks::find(id).or_else(|| checks::find_code(id).map(|(c, _)| c)) {
        Some(c) => {
            out!("{}", c.meta().readme);
            Ok(ExitCode::SUCCESS)
        }
        None => bail!("no check or finding code named {id:?} (see `gdrdoctor list --codes`)"),
    }
}
