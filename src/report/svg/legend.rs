//! The SVG picture's legend: a line for each kind of box and line the picture draws.

use super::{MARGIN, x};
use crate::placement::Level;
use crate::report::picture::{Picture, level_colour};
use std::io::{self, Write};

/// The lines of the legend: (what the swatch is, text).
pub(super) enum Swatch {
    Box(&'static str),
    Switch,
    Level(Level),
    Redirected,
    NvGroup,
    NvOther,
    /// Words only: a way of labelling, not a kind of line.
    Words,
}

/// The legend: a line for each kind of box and line the picture draws, and none for the rest
/// (issue 24).
pub(super) fn lines(p: &Picture) -> Vec<(Swatch, String)> {
    let d = p.drawn();
    let policy = p.judged_on();
    let mut v = Vec::new();
    let mut add = |on: bool, swatch: Swatch, text: String| {
        if on {
            v.push((swatch, text));
        }
    };
    add(
        d.gpu,
        Swatch::Box("dev gpu"),
        "GPU: its name in `gdrdoctor topo`, PCI address, model".to_owned(),
    );
    add(
        d.gpu_no_gdr,
        Swatch::Box("dev gpu nogdr"),
        format!(
            "GPU whose nearest NIC is beyond {policy} (or that has none NCCL can use): NCCL runs it without GPUDirect RDMA"
        ),
    );
    add(
        d.nic,
        Swatch::Box("dev nic"),
        "RDMA NIC: its name in `gdrdoctor topo`, RDMA device, PCI address".to_owned(),
    );
    add(
        d.bridge,
        Swatch::Box("dev bridge"),
        "PCIe bridge: root port, switch port or other bridge, with its PCI address".to_owned(),
    );
    add(
        d.host_bridge,
        Swatch::Box("dev host"),
        "PCIe host bridge (the CPU's root complex); shaded bands are NUMA nodes".to_owned(),
    );
    add(
        d.switch,
        Swatch::Switch,
        "PCIe switch: an upstream port and its downstream ports count as one bridge".to_owned(),
    );
    add(
        d.redirect,
        Swatch::Box("dev bridge redirect"),
        "ACS redirect on a GPU-NIC path: peer-to-peer traffic is sent up to the root complex (acs-redirect-on-path)".to_owned(),
    );
    for l in Level::ALL {
        add(
            d.levels.contains(&l),
            Swatch::Level(l),
            format!("{l}: {}", l.legend()),
        );
    }
    add(
        d.c2c,
        Swatch::Words,
        "C2C (sysfs NODE): NCCL reaches the NIC through the GPU's NVLink-C2C to its CPU (its P2C), whatever sysfs's level; nvidia-smi prints SYS there".to_owned(),
    );
    add(
        d.sysfs_differs,
        Swatch::Words,
        "PIX (sysfs NODE): the level on NCCL's tree from its topology file, with the level sysfs gives beside it".to_owned(),
    );
    add(
        d.redirected_pair,
        Swatch::Redirected,
        "a GPU-NIC pair whose path crosses an ACS redirect".to_owned(),
    );
    add(
        d.nvlink_group,
        Swatch::NvGroup,
        "NVLink group: GPUs joined by NVLink, directly or through NVSwitches (NVML); NV#: # links between each pair, as `nvidia-smi topo -m` counts them".to_owned(),
    );
    add(
        d.nvlink_other,
        Swatch::NvOther,
        "a pair of an NVLink group with another link count than the group's: NV# (red: fewer), none (dashed)".to_owned(),
    );
    v
}

/// Writes the legend's lines from `legend_top` down.
pub(super) fn write(
    o: &mut dyn Write,
    legend: &[(Swatch, String)],
    legend_top: f64,
) -> io::Result<()> {
    writeln!(
        o,
        r#"<g class="legend"><text class="b" x="{MARGIN}" y="{:.1}">Legend</text>"#,
        legend_top + 4.0
    )?;
    for (k, (swatch, text)) in legend.iter().enumerate() {
        let y = legend_top + 24.0 + k as f64 * 20.0;
        let sx = MARGIN;
        match swatch {
            Swatch::Box(class) => writeln!(
                o,
                r#"<g class="{class}"><rect x="{sx}" y="{:.1}" width="36" height="14" rx="3"/></g>"#,
                y - 11.0
            )?,
            Swatch::Switch => writeln!(
                o,
                r#"<rect class="switch" x="{sx}" y="{:.1}" width="36" height="14" rx="3"/>"#,
                y - 11.0
            )?,
            Swatch::Level(lv) => writeln!(
                o,
                r#"<g class="pair"><path d="M{sx} {:.1}h36" stroke="{}"/></g>"#,
                y - 4.0,
                level_colour(*lv)
            )?,
            Swatch::Redirected => writeln!(
                o,
                r##"<g class="pair acs"><path d="M{sx} {:.1}h36" stroke="#15803d"/></g>"##,
                y - 4.0
            )?,
            Swatch::NvGroup => writeln!(
                o,
                r#"<g class="nvlink"><path class="drop" d="M{:.1} {:.1}v9M{:.1} {:.1}v9"/><path class="bar" d="M{:.1} {:.1}h30"/></g>"#,
                sx + 3.0,
                y - 13.0,
                sx + 33.0,
                y - 13.0,
                sx + 3.0,
                y - 3.0
            )?,
            Swatch::Words => {}
            Swatch::NvOther => writeln!(
                o,
                r#"<g class="nvother"><path d="M{sx} {:.1}q18 12 36 0"/></g>"#,
                y - 10.0
            )?,
        }
        writeln!(
            o,
            r#"<text x="{:.1}" y="{y:.1}">{}</text>"#,
            sx + 48.0,
            x(text)
        )?;
    }
    writeln!(o, "</g>")?;
    Ok(())
}
