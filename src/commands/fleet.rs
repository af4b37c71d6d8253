//! `gdrdoctor fleet CAPTURE...`: many captures (and two-node reports), one report.

use super::{Formats, Global};
use crate::fleet;
use crate::report::Format;
use anyhow::{Context as _, bail};
use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// `.tar.gz` captures, capture directories, directories of captures, or globs.
    #[arg(required = true, value_name = "CAPTURE")]
    captures: Vec<PathBuf>,
    #[arg(long, default_value_t = Format::Human, value_parser = FORMATS)]
    format: Format,
    /// Captures analysed at once (default: one per CPU).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Write the picture of the first node of each model (DMI product name) into DIR, as
    /// DIR/<model>.svg (`topo --format svg`; docs/topo-svg.md).
    #[arg(long, value_name = "DIR")]
    pictures: Option<PathBuf>,
}

/// One line per node and a summary, for people; one JSON document; one CSV row per node.
const FORMATS: Formats = Formats(&[(Format::Human, ""), (Format::Json, ""), (Format::Csv, "")]);

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let format = args.format;
    let config = global.config()?;
    if global.root.is_some() {
        bail!("fleet takes the captures as arguments, not --root");
    }
    // Captures and the two-node test's reports (recognised by content, wherever they come
    // from) make one fleet report: one document per format, the worst verdict decides the exit
    // code (docs/fleet.md).
    let (captures, reports) = fleet::expand(&args.captures);
    let two = fleet::two_node::TwoNode::read(&reports);
    let with_captures = !captures.is_empty() || two.is_empty();
    let workers = args
        .jobs
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(2)
        .clamp(1, 256);
    let mut drawer =
        match &args.pictures {
            Some(dir) => Some(fleet::PictureWriter::new(dir).with_context(|| {
                format!("cannot create the pictures directory {}", dir.display())
            })?),
            None => None,
        };
    let mut picture_error = None;
    let mut out = std::io::BufWriter::new(crate::stdio::Stdout);
    fleet::write_header(&mut out, format, with_captures)?;
    let mut first = true;
    let tally = fleet::run(captures, &config, workers, drawer.is_some(), |r| {
        let _ = fleet::write_node(&mut out, format, first, r);
        first = false;
        if let (Some(d), Ok(n)) = (drawer.as_mut(), r) {
            if let Err(e) = d.write(n) {
                picture_error.get_or_insert(e);
            }
        }
    });
    fleet::write_summary(&mut out, format, &tally, with_captures, &two)?;
    out.flush()?;
    let clean = tally.ready == tally.nodes
        && tally.unreadable == 0
        && tally.cross().is_empty()
        && two.clean();
    // A picture not written is "could not run", as a report file is, but it never hides a
    // fleet that is not clean.
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
