//! `topo --format svg`: the picture of the PCIe tree (picture.rs says what it shows) as one
//! self-contained SVG: no script, no external font, image or style sheet, nothing to install on
//! the node to make it.
//!
//! The layout is a plain tree, deterministic and linear in the boxes: host bridges in the top
//! row, each the head of a column group (grouped by NUMA node in shaded bands), every bridge in
//! the row of its depth above its children, the GPUs and NICs in the bottom row, one slot each,
//! left to right in address order. Below the bottom row, each NVLink group is a bar with a
//! drop to each of its GPUs, in lanes so that groups side by side do not overlap; the GDR pairs
//! (and the NVLink pairs that differ from their group) are arcs below, labelled with their
//! level (or link count). The legend (only what is drawn) and the notes follow.

mod legend;
mod nvlink;

use super::picture::{Pair, Picture, What, level_colour};
use crate::placement::Role;
use crate::sanitize::cut as clean;
use nvlink::{NV_DROP, NV_LANE, NV_TOP, bars, nvlink_group};
use std::io::{self, Write};

/// Horizontal room of one GPU or NIC.
const SLOT: f64 = 156.0;
const BOX_W: f64 = 140.0;
/// Bridges and host bridges: three lines.
const BOX_H: f64 = 50.0;
/// GPUs and NICs: four lines.
const LEAF_H: f64 = 64.0;
const ROW: f64 = 92.0;
const MARGIN: f64 = 20.0;
/// The title's height.
const HEAD: f64 = 56.0;
/// Room for the NUMA band's label above the host bridges.
const BAND: f64 = 24.0;
const LINE: f64 = 14.0;
/// The advance of one character of the 12 px monospace font (DejaVu Sans Mono: 0.602 em).
const CHAR: f64 = 7.3;
/// What fits in a box: 12 px text, and 10 px text.
const BOX_CHARS: usize = 18;
const SMALL_CHARS: usize = 22;
const NOTE_CHARS: usize = 160;
/// Notes shown; a node with thousands of GPUs beyond the policy gets a count for the rest.
const MAX_NOTES: usize = 40;
/// RDMA devices named in one NIC box.
const MAX_NIC_NAMES: usize = 2;
/// Pairs named in one ACS note.
const MAX_PAIRS_NAMED: usize = 3;

const STYLE: &str = "\
text{font-family:'DejaVu Sans Mono',Menlo,Consolas,monospace;font-size:12px;fill:#111827}
.c{text-anchor:middle}
.b{font-weight:bold}
.h{font-size:16px;font-weight:bold}
.s{font-size:10px;fill:#475569}
.warn{fill:#dc2626;font-weight:bold}
.dev rect{stroke-width:1.5}
.gpu rect{fill:#dcfce7;stroke:#15803d}
.nic rect{fill:#dbeafe;stroke:#1d4ed8}
.bridge rect{fill:#f3f4f6;stroke:#6b7280}
.host rect{fill:#fef3c7;stroke:#b45309}
.redirect rect{stroke:#dc2626;stroke-width:3.5}
.nogdr rect{stroke:#dc2626;stroke-dasharray:6 3}
.numa{fill:#f1f5f9;stroke:#cbd5e1}
.switch{fill:none;stroke:#64748b;stroke-width:1.2;stroke-dasharray:5 4}
.edge{fill:none;stroke:#94a3b8;stroke-width:1.5}
.pair path{fill:none;stroke-width:2.5}
.acs path{stroke-dasharray:8 5}
.label rect{fill:#ffffff;fill-opacity:0.9}
.nvlink path{fill:none;stroke:#334155;stroke-linecap:round}
.nvlink .bar{stroke-width:6}
.nvlink .drop{stroke-width:3}
.nvlink .label rect{stroke:#334155;stroke-width:1}
.nvother path{fill:none;stroke:#334155;stroke-width:2}
.nvnone path{stroke-dasharray:4 4}
";

/// Where everything goes: each node's slots, and the host bridges'.
struct Layout {
    /// First slot and width in slots, per node.
    start: Vec<usize>,
    width: Vec<usize>,
    /// First slot and width, per host bridge.
    host: Vec<(usize, usize)>,
    slots: usize,
    /// The bottom row, where the GPUs and NICs are.
    leaf_row: usize,
}

fn layout(p: &Picture) -> Layout {
    let n = p.nodes.len();
    // Parents come before their children in `nodes`: widths bottom up, starts top down.
    let mut width = vec![1usize; n];
    for i in (0..n).rev() {
        let w: usize = p.nodes[i].children.iter().map(|&c| width[c]).sum();
        width[i] = w.max(1);
    }
    let mut start = vec![0usize; n];
    let mut host = Vec::with_capacity(p.host_bridges.len());
    let mut cursor = 0;
    for h in &p.host_bridges {
        let first = cursor;
        for &c in &h.children {
            start[c] = cursor;
            cursor += width[c];
        }
        cursor = cursor.max(first + 1);
        host.push((first, cursor - first));
    }
    for i in 0..n {
        let mut s = start[i];
        for &c in &p.nodes[i].children {
            start[c] = s;
            s += width[c];
        }
    }
    Layout {
        start,
        width,
        host,
        slots: cursor,
        leaf_row: p.nodes.iter().map(|n| n.depth).max().unwrap_or(0),
    }
}

impl Layout {
    fn left(&self, slot: usize) -> f64 {
        MARGIN + slot as f64 * SLOT
    }
    fn centre(&self, i: usize) -> f64 {
        self.left(self.start[i]) + self.width[i] as f64 * SLOT / 2.0
    }
    fn row(&self, p: &Picture, i: usize) -> usize {
        if p.nodes[i].children.is_empty() {
            self.leaf_row
        } else {
            p.nodes[i].depth
        }
    }
    fn top(&self, row: usize) -> f64 {
        HEAD + BAND + row as f64 * ROW
    }
    fn height(p: &Picture, i: usize) -> f64 {
        match p.nodes[i].what {
            What::Bridge { .. } => BOX_H,
            _ => LEAF_H,
        }
    }
    /// The bottom of node `i`'s box.
    fn bottom(&self, p: &Picture, i: usize) -> f64 {
        self.top(self.row(p, i)) + Self::height(p, i)
    }
}

/// XML text: `&`, `<`, `>` and quotes as entities (after `clean`, no character is left that
/// XML forbids).
fn x(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c => o.push(c),
        }
    }
    o
}

/// Text from the node, cleaned, shortened to `max` characters and escaped.
fn t(s: &str, max: usize) -> String {
    x(&clean(s, max))
}

fn role(r: Role) -> &'static str {
    match r {
        Role::RootPort => "root port",
        Role::SwitchUpstream => "switch upstream",
        Role::SwitchDownstream => "switch downstream",
        Role::Bridge => "bridge",
    }
}

/// The arc between two boxes whose bottoms are at `(x1, y1)` and `(x2, y2)`: deeper the farther
/// apart they are, so that nested pairs do not cross. Returns its depth parameter.
fn arc_depth(x1: f64, x2: f64) -> f64 {
    let slots = ((x1 - x2).abs() / SLOT).min(12.0);
    30.0 + 22.0 * slots
}

/// Where the parts below the tree go, and what the header, legend and notes say: everything
/// the SVG's size depends on, worked out before the first line is written.
struct Frame {
    title: String,
    subtitle: String,
    legend: Vec<(legend::Swatch, String)>,
    notes: Vec<String>,
    /// The bottom of the GPUs' and NICs' boxes.
    tree_bottom: f64,
    /// The room the NVLink bars take below the tree: the GDR arcs go below it.
    nv_room: f64,
    legend_top: f64,
    notes_top: f64,
    width: f64,
    height: f64,
}

impl Frame {
    fn new(p: &Picture, l: &Layout, bars: &[nvlink::Bar]) -> Frame {
        let tree_bottom = l.top(l.leaf_row) + LEAF_H;
        let nv_room = bars
            .iter()
            .map(|b| NV_TOP + b.lane as f64 * NV_LANE + 8.0)
            .fold(0.0, f64::max);
        let arcs_bottom = arcs_bottom(p, l, bars, tree_bottom, nv_room);
        let title = format!(
            "PCIe tree of {}",
            clean(p.title.hostname.as_deref().unwrap_or(&p.title.root), 80)
        );
        let subtitle = subtitle(p);
        let legend = legend::lines(p);
        let notes = notes(p);
        let legend_top = arcs_bottom + 36.0;
        let notes_top = legend_top + 24.0 + legend.len() as f64 * 20.0 + 16.0;
        let height = notes_top
            + if notes.is_empty() {
                0.0
            } else {
                20.0 + notes.len() as f64 * 16.0
            }
            + MARGIN;
        let widest_text = std::iter::once(title.chars().count() as f64 * 9.8)
            .chain(std::iter::once(subtitle.chars().count() as f64 * CHAR))
            .chain(
                legend
                    .iter()
                    .map(|(_, s)| 48.0 + s.chars().count() as f64 * CHAR),
            )
            .chain(notes.iter().map(|s| s.chars().count() as f64 * CHAR))
            .fold(0.0, f64::max);
        let width = (l.slots as f64 * SLOT).max(widest_text) + 2.0 * MARGIN;
        Frame {
            title,
            subtitle,
            legend,
            notes,
            tree_bottom,
            nv_room,
            legend_top,
            notes_top,
            width,
            height,
        }
    }

    /// The y of an NVLink bar in `lane`.
    fn bar_y(&self, lane: usize) -> f64 {
        self.tree_bottom + NV_TOP + lane as f64 * NV_LANE
    }
}

/// How deep the deepest arc below the boxes goes, with its label: the GDR pairs' arcs, below
/// the NVLink bars, and the NVLink pairs' arcs hanging from their bars.
fn arcs_bottom(
    p: &Picture,
    l: &Layout,
    bars: &[nvlink::Bar],
    tree_bottom: f64,
    nv_room: f64,
) -> f64 {
    let bar_y = |lane: usize| tree_bottom + NV_TOP + lane as f64 * NV_LANE;
    p.pairs
        .iter()
        .map(|pr| {
            let (x1, x2) = (l.centre(pr.gpu), l.centre(pr.nic));
            let y = l.bottom(p, pr.gpu).max(l.bottom(p, pr.nic));
            y + 0.75 * (nv_room + arc_depth(x1, x2)) + 12.0
        })
        .chain(p.nvlink_groups.iter().zip(bars).flat_map(|(g, b)| {
            g.other.iter().map(move |&(x, y, _)| {
                let (x1, x2) = (l.centre(x) - NV_DROP, l.centre(y) - NV_DROP);
                bar_y(b.lane) + 0.75 * arc_depth(x1, x2) + 12.0
            })
        }))
        .fold(tree_bottom + nv_room, f64::max)
}

/// The line under the title: the product, the root, the counts, and what the lines mean.
fn subtitle(p: &Picture) -> String {
    format!(
        "{}root {} · {} GPU{}, {} RDMA device{}{}",
        p.title
            .product
            .as_deref()
            .map(|s| format!("{} · ", clean(s, 60)))
            .unwrap_or_default(),
        clean(&p.title.root, 80),
        p.gpus,
        if p.gpus == 1 { "" } else { "s" },
        p.nics,
        if p.nics == 1 { "" } else { "s" },
        if p.nics == 0 {
            String::new()
        } else {
            format!(" · lines: GPU-NIC pairs within {}", p.judged_on())
        }
    )
}

/// Writes the picture as SVG: the header, the NUMA bands and switch frames behind the tree, the
/// tree's edges and boxes, the GDR pairs' arcs, the NVLink groups over them, the legend and the
/// notes.
pub fn write(p: &Picture, o: &mut dyn Write) -> io::Result<()> {
    let l = layout(p);
    let bars = bars(p, &l);
    let f = Frame::new(p, &l, &bars);
    header(o, &f)?;
    numa_bands(o, p, &l, f.tree_bottom)?;
    switches(o, p, &l)?;
    edges(o, p, &l)?;
    host_boxes(o, p, &l)?;
    for i in 0..p.nodes.len() {
        node_box(o, p, &l, i)?;
    }
    for pr in &p.pairs {
        pair(o, p, &l, pr, f.nv_room)?;
    }
    // The NVLink groups: a bar with a drop to each GPU, and the pairs that differ as arcs
    // hanging from it. Over the GDR arcs, which cross the bar: its label stays whole.
    for (g, b) in p.nvlink_groups.iter().zip(&bars) {
        nvlink_group(o, p, &l, g, b, f.bar_y(b.lane))?;
    }
    legend::write(o, &f.legend, f.legend_top)?;
    notes_block(o, &f.notes, f.notes_top)?;
    writeln!(o, "</svg>")
}

/// The XML declaration, the `<svg>` element with its size, the title, description and style,
/// the white page, and the title and subtitle at the top.
fn header(o: &mut dyn Write, f: &Frame) -> io::Result<()> {
    let (width, height) = (f.width, f.height);
    writeln!(o, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}">"#
    )?;
    writeln!(o, "<title>{}</title>", x(&f.title))?;
    writeln!(
        o,
        "<desc>gdrdoctor {} topo --format svg: host bridges, switches and bridges down to every GPU and RDMA NIC; each GPU's nearest NIC(s) within the GDR level, with their level; bridges whose ACS redirects on a GPU-NIC path outlined red; GPUs joined by NVLink as groups, with their link count.</desc>",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(o, "<style>\n{STYLE}</style>")?;
    writeln!(
        o,
        r##"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="#ffffff"/>"##
    )?;
    writeln!(
        o,
        r#"<text class="h" x="{MARGIN}" y="26">{}</text>"#,
        x(&f.title)
    )?;
    writeln!(
        o,
        r#"<text class="s" x="{MARGIN}" y="44">{}</text>"#,
        x(&f.subtitle)
    )
}

/// The NUMA bands: runs of host bridges on one NUMA node, shaded down to the tree's bottom.
fn numa_bands(o: &mut dyn Write, p: &Picture, l: &Layout, tree_bottom: f64) -> io::Result<()> {
    let mut h = 0;
    while h < p.host_bridges.len() {
        let numa = &p.host_bridges[h].numa;
        let mut end = h;
        while end + 1 < p.host_bridges.len() && &p.host_bridges[end + 1].numa == numa {
            end += 1;
        }
        let x0 = l.left(l.host[h].0) + 3.0;
        let x1 = l.left(l.host[end].0 + l.host[end].1) - 3.0;
        let label = p.host_bridges[h].numa_label();
        writeln!(
            o,
            r#"<g><rect class="numa" x="{x0:.1}" y="{HEAD:.1}" width="{:.1}" height="{:.1}" rx="8"/><text class="s b" x="{:.1}" y="{:.1}">{label}</text></g>"#,
            x1 - x0,
            tree_bottom + 10.0 - HEAD,
            x0 + 8.0,
            HEAD + 16.0
        )?;
        h = end + 1;
    }
    Ok(())
}

/// The switches: a dashed frame around an upstream port and its downstream ports.
fn switches(o: &mut dyn Write, p: &Picture, l: &Layout) -> io::Result<()> {
    for i in p.switches() {
        let n = &p.nodes[i];
        let x0 = l.left(l.start[i]) + 4.0;
        let y0 = l.top(n.depth) - 10.0;
        let y1 = l.top(n.depth + 1) + BOX_H + 8.0;
        writeln!(
            o,
            r#"<g><rect class="switch" x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" rx="10"/><text class="s" x="{:.1}" y="{:.1}">switch</text></g>"#,
            l.width[i] as f64 * SLOT - 8.0,
            y1 - y0,
            x0 + 4.0,
            y0 - 3.0
        )?;
    }
    Ok(())
}

/// The tree's edges: down from the parent, across, down to the child; the host bridges' first.
fn edges(o: &mut dyn Write, p: &Picture, l: &Layout) -> io::Result<()> {
    let edge = |o: &mut dyn Write, (px, pb): (f64, f64), c: usize| -> io::Result<()> {
        let (cx, ct) = (l.centre(c), l.top(l.row(p, c)));
        writeln!(
            o,
            r#"<path class="edge" d="M{px:.1} {pb:.1}V{:.1}H{cx:.1}V{ct:.1}"/>"#,
            pb + 16.0
        )
    };
    for (h, hb) in p.host_bridges.iter().enumerate() {
        let px = l.left(l.host[h].0) + l.host[h].1 as f64 * SLOT / 2.0;
        for &c in &hb.children {
            edge(o, (px, l.top(0) + BOX_H), c)?;
        }
    }
    for (i, n) in p.nodes.iter().enumerate() {
        for &c in &n.children {
            edge(o, (l.centre(i), l.bottom(p, i)), c)?;
        }
    }
    Ok(())
}

/// The host bridges' boxes, in the top row.
fn host_boxes(o: &mut dyn Write, p: &Picture, l: &Layout) -> io::Result<()> {
    for (h, hb) in p.host_bridges.iter().enumerate() {
        let cx = l.left(l.host[h].0) + l.host[h].1 as f64 * SLOT / 2.0;
        let numa = hb.numa_short();
        let name = t(&hb.name, BOX_CHARS);
        dev(
            o,
            "dev host",
            &format!("host bridge {}", x(&clean(&hb.name, 200))),
            (cx, l.top(0), BOX_H),
            &[(&name, "b"), ("host bridge", ""), (&numa, "s")],
        )?;
    }
    Ok(())
}

/// The box of node `i`: a GPU, a NIC or a bridge.
fn node_box(o: &mut dyn Write, p: &Picture, l: &Layout, i: usize) -> io::Result<()> {
    let n = &p.nodes[i];
    let bdf = n.bdf.to_string();
    let place = (l.centre(i), l.top(l.row(p, i)), Layout::height(p, i));
    match &n.what {
        What::Gpu {
            name,
            model,
            no_gdr,
        } => gpu_box(o, &bdf, place, name, model.as_deref(), no_gdr.as_deref()),
        What::Nic { devices } => nic_box(o, &bdf, place, devices),
        What::Bridge { role: r, redirect } => {
            let what = role(*r);
            match redirect {
                None => dev(
                    o,
                    "dev bridge",
                    &format!("{bdf} {}", r.as_str()),
                    place,
                    &[(&bdf, ""), (what, "s")],
                ),
                Some(rd) => {
                    let tip = format!(
                        "{bdf} {}: ACSCtl {:#06x} has {} set: peer-to-peer traffic on the path of {} is sent up to the root complex",
                        r.as_str(),
                        rd.control,
                        rd.bits.join(", "),
                        x(&clean(&rd.pairs.join(", "), 400))
                    );
                    let acs = "ACS redirect";
                    dev(
                        o,
                        "dev bridge redirect",
                        &tip,
                        place,
                        &[(&bdf, ""), (what, "s"), (acs, "warn")],
                    )
                }
            }
        }
    }
}

/// A GPU's box: its name, address and model, and why it has no GPUDirect RDMA if it has none.
fn gpu_box(
    o: &mut dyn Write,
    bdf: &str,
    place: (f64, f64, f64),
    name: &str,
    model: Option<&str>,
    no_gdr: Option<&str>,
) -> io::Result<()> {
    let model_line = model.map(|m| t(m, SMALL_CHARS));
    let tip = format!(
        "{name} {bdf}{}{}",
        model
            .map(|m| format!(" {}", x(&clean(m, 200))))
            .unwrap_or_default(),
        no_gdr
            .map(|w| format!(": no GPUDirect RDMA ({})", x(w)))
            .unwrap_or_default()
    );
    let gdr = no_gdr.map(|w| t(&format!("no GDR: {w}"), BOX_CHARS));
    let mut lines: Vec<(&str, &str)> = vec![(name, "b"), (bdf, "")];
    if let Some(m) = &model_line {
        lines.push((m, "s"));
    }
    if let Some(g) = &gdr {
        lines.push((g, "warn"));
    }
    let class = if no_gdr.is_some() {
        "dev gpu nogdr"
    } else {
        "dev gpu"
    };
    dev(o, class, &tip, place, &lines)
}

/// A NIC's box: its first RDMA devices, its address, and how many more it has.
fn nic_box(
    o: &mut dyn Write,
    bdf: &str,
    place: (f64, f64, f64),
    devices: &[(String, String)],
) -> io::Result<()> {
    let named: Vec<String> = devices
        .iter()
        .take(MAX_NIC_NAMES)
        .map(|(n, d)| t(&format!("{n} {d}"), BOX_CHARS))
        .collect();
    let more =
        (devices.len() > MAX_NIC_NAMES).then(|| format!("+{} more", devices.len() - MAX_NIC_NAMES));
    let tip = format!(
        "{} {bdf}",
        devices
            .iter()
            .map(|(n, d)| format!("{n} {}", x(&clean(d, 200))))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut lines: Vec<(&str, &str)> = named.iter().map(|s| (s.as_str(), "b")).collect();
    lines.push((bdf, ""));
    if let Some(m) = &more {
        lines.push((m, "s"));
    }
    dev(o, "dev nic", &tip, place, &lines)
}

/// A GDR pair: an arc below the boxes, labelled with its level at its lowest point.
fn pair(o: &mut dyn Write, p: &Picture, l: &Layout, pr: &Pair, nv_room: f64) -> io::Result<()> {
    let (x1, x2) = (l.centre(pr.gpu), l.centre(pr.nic));
    let (y1, y2) = (l.bottom(p, pr.gpu), l.bottom(p, pr.nic));
    let d = nv_room + arc_depth(x1, x2);
    let colour = level_colour(pr.level);
    let (class, label) = if pr.redirected {
        ("pair acs", format!("{} ACS", pr.label()))
    } else {
        ("pair", pr.label())
    };
    let (mx, my) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0 + 0.75 * d);
    let w = label.len() as f64 * CHAR + 8.0;
    let names = |i: usize| match &p.nodes[i].what {
        What::Gpu { name, .. } => name.clone(),
        What::Nic { devices } => devices
            .iter()
            .map(|(n, d)| format!("{n} {}", x(&clean(d, 100))))
            .collect::<Vec<_>>()
            .join(", "),
        What::Bridge { .. } => String::new(),
    };
    writeln!(
        o,
        r#"<g class="{class}"><title>{} - {}: {}{}</title><path d="M{x1:.1} {y1:.1}C{x1:.1} {:.1} {x2:.1} {:.1} {x2:.1} {y2:.1}" stroke="{colour}"/><g class="label"><rect x="{:.1}" y="{:.1}" width="{w:.1}" height="15" rx="3"/><text class="c b" x="{mx:.1}" y="{:.1}" style="fill:{}">{label}</text></g></g>"#,
        names(pr.gpu),
        names(pr.nic),
        x(&pr.label()),
        if pr.redirected {
            ", through an ACS redirect"
        } else {
            ""
        },
        y1 + d,
        y2 + d,
        mx - w / 2.0,
        my - 8.0,
        my + 4.0,
        if pr.redirected { "#dc2626" } else { colour },
    )
}

/// The notes under the legend, if any, with their heading.
fn notes_block(o: &mut dyn Write, notes: &[String], notes_top: f64) -> io::Result<()> {
    if notes.is_empty() {
        return Ok(());
    }
    writeln!(
        o,
        r#"<text class="b" x="{MARGIN}" y="{:.1}">Notes</text>"#,
        notes_top + 4.0
    )?;
    for (k, n) in notes.iter().enumerate() {
        writeln!(
            o,
            r#"<text x="{MARGIN}" y="{:.1}">{}</text>"#,
            notes_top + 22.0 + k as f64 * 16.0,
            x(n)
        )?;
    }
    Ok(())
}

/// One box with its lines of text (already escaped), each with its class, and a tooltip.
fn dev(
    o: &mut dyn Write,
    class: &str,
    tip: &str,
    (cx, top, h): (f64, f64, f64),
    lines: &[(&str, &str)],
) -> io::Result<()> {
    write!(
        o,
        r#"<g class="{class}"><title>{tip}</title><rect x="{:.1}" y="{top:.1}" width="{BOX_W}" height="{h}" rx="6"/>"#,
        cx - BOX_W / 2.0
    )?;
    for (k, (text, c)) in lines.iter().enumerate() {
        let sep = if c.is_empty() { "" } else { " " };
        write!(
            o,
            r#"<text class="c{sep}{c}" x="{cx:.1}" y="{:.1}">{text}</text>"#,
            top + 15.0 + k as f64 * LINE
        )?;
    }
    writeln!(o, "</g>")
}

/// The notes under the legend, cleaned and shortened (not yet escaped): ACS redirects first,
/// then what the tree does not show, at most `MAX_NOTES`.
fn notes(p: &Picture) -> Vec<String> {
    let mut v: Vec<String> = p
        .redirects()
        .map(|(bdf, r)| {
            let named: Vec<&str> = r
                .pairs
                .iter()
                .take(MAX_PAIRS_NAMED)
                .map(String::as_str)
                .collect();
            let more = r.pairs.len().saturating_sub(MAX_PAIRS_NAMED);
            clean(
                &format!(
                    "ACS redirect at {bdf}: ACSCtl {:#06x} has {} set, on the path of {}{}",
                    r.control,
                    r.bits.join(", "),
                    named.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
                NOTE_CHARS,
            )
        })
        .collect();
    v.extend(p.notes.iter().map(|n| clean(n, NOTE_CHARS)));
    if v.len() > MAX_NOTES {
        let more = v.len() - (MAX_NOTES - 1);
        v.truncate(MAX_NOTES - 1);
        v.push(format!(
            "… and {more} more (gdrdoctor check lists every one)"
        ));
    }
    v
}
