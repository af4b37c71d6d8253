//! The SVG picture's NVLink groups: a bar below the GPUs with a drop to each, in lanes, and an
//! arc for each pair that differs from its group.

use super::{CHAR, Layout, arc_depth};
use crate::report::picture::{NvGroup, Picture, What};
use std::io::{self, Write};

/// The first NVLink bar below the GPUs' boxes (clear of the NUMA bands, which end 10 below),
/// and the room of each further lane.
pub(super) const NV_TOP: f64 = 30.0;
pub(super) const NV_LANE: f64 = 22.0;
/// A GPU's drop to its NVLink bar, left of its centre: the GDR arcs leave from the centre.
pub(super) const NV_DROP: f64 = 36.0;
const NV_COLOUR: &str = "#334155";

/// An NVLink group's bar: where it runs, its lane, and its label.
pub(super) struct Bar {
    /// The drops' x, one per GPU of the group.
    drops: Vec<f64>,
    pub(super) lane: usize,
    label: String,
}

impl Bar {
    fn label_width(&self) -> f64 {
        self.label.chars().count() as f64 * CHAR + 10.0
    }
    fn middle(&self) -> f64 {
        let (a, b) = self.span();
        (a + b) / 2.0
    }
    fn span(&self) -> (f64, f64) {
        let a = self.drops.iter().copied().fold(f64::INFINITY, f64::min);
        let b = self.drops.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (a, b)
    }
    /// What it takes horizontally, its label included.
    fn extent(&self) -> (f64, f64) {
        let (a, b) = self.span();
        let w = self.label_width() / 2.0;
        (a.min(self.middle() - w), b.max(self.middle() + w))
    }
}

/// What an NVLink group's bar says: its count, and whether every pair has it.
fn bar_label(g: &NvGroup) -> String {
    match (g.gpus.len(), g.links, g.other.is_empty()) {
        (2, n, _) => format!("NV{n}"),
        (_, n, true) => format!("NV{n} between every pair"),
        (_, 0, false) => "NVLink only between the pairs below".to_owned(),
        (_, n, false) => format!("NV{n} between every pair but those below"),
    }
}

/// The bars of the NVLink groups, each in the first lane where it overlaps no other.
pub(super) fn bars(p: &Picture, l: &Layout) -> Vec<Bar> {
    let mut bars: Vec<Bar> = p
        .nvlink_groups
        .iter()
        .map(|g| Bar {
            drops: g.gpus.iter().map(|&i| l.centre(i) - NV_DROP).collect(),
            lane: 0,
            label: bar_label(g),
        })
        .collect();
    // The right end of what each lane holds so far; groups come left to right.
    let mut lanes: Vec<f64> = Vec::new();
    for b in &mut bars {
        let (left, right) = b.extent();
        match lanes.iter().position(|&end| end + 12.0 < left) {
            Some(k) => {
                b.lane = k;
                lanes[k] = right;
            }
            None => {
                b.lane = lanes.len();
                lanes.push(right);
            }
        }
    }
    bars
}

/// An NVLink group: its bar at `y` with a drop from each GPU's box, its label on the bar, and
/// an arc hanging from the bar for each pair whose count differs from the group's.
pub(super) fn nvlink_group(
    o: &mut dyn Write,
    p: &Picture,
    l: &Layout,
    g: &NvGroup,
    b: &Bar,
    y: f64,
) -> io::Result<()> {
    let name = |i: usize| match &p.nodes[i].what {
        What::Gpu { name, .. } => name.clone(),
        _ => p.nodes[i].bdf.to_string(),
    };
    let names: Vec<String> = g.gpus.iter().map(|&i| name(i)).collect();
    let (left, right) = b.span();
    let mut d = format!("M{left:.1} {y:.1}H{right:.1}");
    let mut drops = String::new();
    for (&i, &dx) in g.gpus.iter().zip(&b.drops) {
        drops += &format!("M{dx:.1} {:.1}V{y:.1}", l.bottom(p, i));
    }
    if left == right {
        d.clear();
    }
    let w = b.label_width();
    writeln!(
        o,
        r#"<g class="nvlink"><title>NVLink group {}: {}</title><path class="drop" d="{drops}"/><path class="bar" d="{d}"/><g class="label"><rect x="{:.1}" y="{:.1}" width="{w:.1}" height="16" rx="3"/><text class="c b" x="{:.1}" y="{:.1}">{}</text></g></g>"#,
        names.join(", "),
        b.label,
        b.middle() - w / 2.0,
        y - 8.0,
        b.middle(),
        y + 4.0,
        b.label
    )?;
    for &(a, c, n) in &g.other {
        let (x1, x2) = (l.centre(a) - NV_DROP, l.centre(c) - NV_DROP);
        let depth = arc_depth(x1, x2);
        let (mx, my) = ((x1 + x2) / 2.0, y + 0.75 * depth);
        let label = if n == 0 {
            "none".to_owned()
        } else {
            format!("NV{n}")
        };
        let class = if n == 0 { "nvother nvnone" } else { "nvother" };
        let fill = if n < g.links { "#dc2626" } else { NV_COLOUR };
        let lw = label.len() as f64 * CHAR + 8.0;
        writeln!(
            o,
            r#"<g class="{class}"><title>{} - {}: {}{}</title><path d="M{x1:.1} {y:.1}C{x1:.1} {:.1} {x2:.1} {:.1} {x2:.1} {y:.1}"/><g class="label"><rect x="{:.1}" y="{:.1}" width="{lw:.1}" height="15" rx="3"/><text class="c b" x="{mx:.1}" y="{:.1}" style="fill:{fill}">{label}</text></g></g>"#,
            name(a),
            name(c),
            if n == 0 {
                "no NVLink".to_owned()
            } else {
                format!("NV{n}")
            },
            if g.links == 0 {
                String::new()
            } else {
                format!(" where the group's other pairs have NV{}", g.links)
            },
            y + depth,
            y + depth,
            mx - lw / 2.0,
            my - 8.0,
            my + 4.0,
        )?;
    }
    Ok(())
}
