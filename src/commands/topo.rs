//! `gdrdoctor topo`: the GPU and NIC PCIe matrix (`nvidia-smi topo -m`'s), or the PCIe tree as
//! a picture.

use super::{Formats, Global, gpu_probe, load_node, write_problems};
use crate::probe;
use crate::report::{self, Format};
use anyhow::bail;
use std::io::Write as _;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, default_value_t = Format::Human, value_parser = FORMATS)]
    format: Format,
    /// Do not ask NVML for NVLinks (GPU x GPU then shows PCIe levels only).
    #[arg(long)]
    no_gpu_probe: bool,
}

/// The matrix, for people or as JSON; the tree as a picture.
const FORMATS: Formats = Formats(&[
    (Format::Human, ""),
    (Format::Json, ""),
    (
        Format::Svg,
        "The PCIe tree as one self-contained SVG picture (docs/topo-svg.md)",
    ),
    (Format::Dot, "The same picture as Graphviz DOT"),
]);

pub fn run(global: &Global, args: &Args) -> anyhow::Result<ExitCode> {
    let config = global.config()?;
    let (root, display) = global.root()?;
    let options = probe::Options {
        access: false,
        gpu_probe: gpu_probe(&config, crate::probe::gpu::Ask::NVML, args.no_gpu_probe),
        gpu_probe_on_root: false,
        qos: false,
    };
    let (inv, runs) = load_node(&root, &config, options);
    // What the matrix and the pictures stand on and could not be read: said, as `check` says
    // it, and never exit 0 on a picture that may leave things out (issue 25: a user who cannot
    // read sys/ got "no GPU and no RDMA device found").
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
    let gdr = || report::topo::gdr(&inv, &crate::nccl::effective::judge(&inv, &config));
    match args.format {
        Format::Human => {
            let m = crate::placement::matrix(&inv, &runs.gpu);
            report::topo::write_human(&m, &gdr(), &mut out)?
        }
        Format::Json => {
            let m = crate::placement::matrix(&inv, &runs.gpu);
            let info = report::RootInfo {
                path: display,
                live: root.is_live(),
            };
            report::topo::write_json(&m, gdr(), &problems, info, &mut out)?
        }
        // The pictures need the tree and each GPU's nearest NICs, not the matrix.
        Format::Svg | Format::Dot => {
            let p = report::picture::picture(&inv, &runs.gpu, &config, &display);
            if args.format == Format::Svg {
                report::svg::write(&p, &mut out)?
            } else {
                report::dot::write(&p, &mut out)?
            }
        }
        other => bail!("topo has no {other} format"),
    }
    out.flush()?;
    if problems.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    write_problems(&problems);
    Ok(ExitCode::from(1))
}
