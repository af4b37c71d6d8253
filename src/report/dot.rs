//! `topo --format dot`: the picture of the PCIe tree (picture.rs says what it shows) as Graphviz
//! DOT, for those who lay graphs out with Graphviz (`dot -Tsvg`): NUMA nodes and host bridges as
//! clusters, switches as dashed clusters inside them, the tree's edges, the GDR pairs as
//! coloured edges labelled with their level, ACS redirects in red, each NVLink group as a node
//! joined to its GPUs.

use super::picture::{Picture, What, level_colour};
use crate::placement::{Level, Role};
use crate::sanitize::cut as clean;
use std::io::{self, Write};

/// A DOT string: text from the node cleaned of control characters (the `\n` in our labels is
/// DOT's line break), then `\` and `"` escaped, so that nothing in it ends the string or reads
/// as one of DOT's own escapes (`\N`, `\G`).
fn q(s: &str) -> String {
    clean(s, 200).replace('\\', "\\\\").replace('"', "\\\"")
}

const FONT: &str = "DejaVu Sans Mono";

/// Writes the picture as DOT: the header, the clusters with their boxes, the tree's edges, the
/// GDR pairs, the NVLink groups and the legend.
pub fn write(p: &Picture, o: &mut dyn Write) -> io::Result<()> {
    header(o, p)?;
    clusters(o, p)?;
    tree_edges(o, p)?;
    pairs(o, p)?;
    nvlink_groups(o, p)?;
    writeln!(
        o,
        "  legend [shape=note, style=filled, fillcolor=\"#ffffff\", color=\"#6b7280\", label=\"{}\"];",
        legend(p)
    )?;
    writeln!(o, "}}")
}

/// The comment naming the tool, the graph's opening and title, and the default node and edge
/// attributes.
fn header(o: &mut dyn Write, p: &Picture) -> io::Result<()> {
    writeln!(
        o,
        "// gdrdoctor {} topo --format dot. Render it with: dot -Tsvg topo.dot > topo.svg",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(o, "graph \"gdrdoctor-topo\" {{")?;
    let title = format!(
        "PCIe tree of {}\\n{}root {} · {} GPUs, {} RDMA devices · coloured edges: GPU-NIC pairs within {}",
        q(p.title.hostname.as_deref().unwrap_or(&p.title.root)),
        p.title
            .product
            .as_deref()
            .map(|s| format!("{} · ", q(s)))
            .unwrap_or_default(),
        q(&p.title.root),
        p.gpus,
        p.nics,
        q(&p.judged_on())
    );
    writeln!(
        o,
        "  graph [rankdir=TB, fontname=\"{FONT}\", fontsize=12, labelloc=t, label=\"{title}\"];"
    )?;
    writeln!(
        o,
        "  node [shape=box, style=\"rounded,filled\", fontname=\"{FONT}\", fontsize=10, fillcolor=\"#f3f4f6\", color=\"#6b7280\"];"
    )?;
    writeln!(
        o,
        "  edge [color=\"#94a3b8\", fontname=\"{FONT}\", fontsize=9];"
    )
}

/// Which nodes a switch cluster holds besides its upstream port: the downstream ports.
fn in_switch(p: &Picture) -> Vec<bool> {
    let mut in_switch = vec![false; p.nodes.len()];
    for n in &p.nodes {
        if let What::Bridge {
            role: Role::SwitchUpstream,
            ..
        } = n.what
        {
            for &c in &n.children {
                if is_role(p, c, Role::SwitchDownstream) {
                    in_switch[c] = true;
                }
            }
        }
    }
    in_switch
}

/// The boxes, in clusters: one per run of host bridges on a NUMA node, one per host bridge
/// inside it, and one per switch inside that.
fn clusters(o: &mut dyn Write, p: &Picture) -> io::Result<()> {
    let in_switch = in_switch(p);
    let mut h = 0;
    while h < p.host_bridges.len() {
        let numa = &p.host_bridges[h].numa;
        let label = p.host_bridges[h].numa_label();
        writeln!(
            o,
            "  subgraph \"cluster_numa_{}\" {{",
            if numa.is_empty() {
                "unknown".to_owned()
            } else {
                crate::parse::cpulist::format(numa.clone())
            }
        )?;
        writeln!(
            o,
            "    label=\"{label}\"; style=filled; fillcolor=\"#f1f5f9\"; color=\"#cbd5e1\";"
        )?;
        while h < p.host_bridges.len() && &p.host_bridges[h].numa == numa {
            host_cluster(o, p, h, &in_switch)?;
            h += 1;
        }
        writeln!(o, "  }}")?;
    }
    Ok(())
}

/// Host bridge `h`'s cluster: its box, and every box below it, a switch's in a cluster of its
/// own.
fn host_cluster(o: &mut dyn Write, p: &Picture, h: usize, in_switch: &[bool]) -> io::Result<()> {
    let hb = &p.host_bridges[h];
    writeln!(o, "    subgraph \"cluster_host_{h}\" {{")?;
    writeln!(o, "      label=\"\"; style=invis;")?;
    writeln!(
        o,
        "      \"host{h}\" [label=\"{}\\nhost bridge\", fillcolor=\"#fef3c7\", color=\"#b45309\"];",
        q(&hb.name)
    )?;
    // Depth first, in address order, with an explicit stack: a crafted sysfs path can be deep.
    let mut stack: Vec<usize> = hb.children.iter().rev().copied().collect();
    while let Some(i) = stack.pop() {
        let n = &p.nodes[i];
        stack.extend(n.children.iter().rev().copied());
        if in_switch[i] {
            continue;
        }
        let downstream: Vec<usize> = n
            .children
            .iter()
            .copied()
            .filter(|&c| in_switch[c])
            .collect();
        if downstream.is_empty() {
            node(o, p, i, "      ")?;
        } else {
            writeln!(o, "      subgraph \"cluster_switch_{}\" {{", n.bdf)?;
            writeln!(
                o,
                "        label=\"switch\"; style=\"dashed,rounded\"; color=\"#64748b\";"
            )?;
            node(o, p, i, "        ")?;
            for c in downstream {
                node(o, p, c, "        ")?;
            }
            writeln!(o, "      }}")?;
        }
    }
    writeln!(o, "    }}")
}

/// The tree's edges: from each host bridge, then from each node, to its children.
fn tree_edges(o: &mut dyn Write, p: &Picture) -> io::Result<()> {
    for (h, hb) in p.host_bridges.iter().enumerate() {
        for &c in &hb.children {
            writeln!(o, "  \"host{h}\" -- \"{}\";", p.nodes[c].bdf)?;
        }
    }
    for n in &p.nodes {
        for &c in &n.children {
            writeln!(o, "  \"{}\" -- \"{}\";", n.bdf, p.nodes[c].bdf)?;
        }
    }
    Ok(())
}

/// The GDR pairs, coloured by level.
///
/// The pairs and the NVLink pairs that differ join boxes of one row, across clusters, without
/// moving them (constraint=false). Their words are `xlabel`s, placed after the layout: dot lays
/// out an edge `label` as a node of its own, on a rank of its own for an edge within a rank, and
/// with such edges between clusters Debian 12's Graphviz 2.43 gives up ("trouble in
/// init_rank", issue 25).
fn pairs(o: &mut dyn Write, p: &Picture) -> io::Result<()> {
    if !p.pairs.is_empty() {
        writeln!(
            o,
            "  // Each GPU and its nearest NIC(s) within {}: the pairs NCCL uses for GPUDirect RDMA.",
            clean(&p.judged_on(), 400)
        )?;
    }
    for pr in &p.pairs {
        let colour = level_colour(pr.level);
        let (label, style) = if pr.redirected {
            (format!("{} ACS redirect", pr.label()), "dashed")
        } else {
            (pr.label(), "solid")
        };
        writeln!(
            o,
            "  \"{}\" -- \"{}\" [xlabel=\"{label}\", color=\"{colour}\", fontcolor=\"{}\", penwidth=2.5, style={style}, constraint=false];",
            p.nodes[pr.gpu].bdf,
            p.nodes[pr.nic].bdf,
            if pr.redirected { "#dc2626" } else { colour }
        )?;
    }
    Ok(())
}

/// The NVLink groups: a node per group, joined to its GPUs, and the pairs that differ.
fn nvlink_groups(o: &mut dyn Write, p: &Picture) -> io::Result<()> {
    for (k, g) in p.nvlink_groups.iter().enumerate() {
        let label = match (g.gpus.len(), g.links, g.other.is_empty()) {
            (2, n, _) => format!("NV{n}"),
            (_, n, true) => format!("NV{n} between every pair"),
            (_, 0, false) => "only between the pairs drawn".to_owned(),
            (_, n, false) => format!("NV{n} between every other pair"),
        };
        writeln!(
            o,
            "  \"nvlink{k}\" [label=\"NVLink group\\n{label}\", fillcolor=\"#334155\", color=\"#334155\", fontcolor=\"#ffffff\"];"
        )?;
        for &i in &g.gpus {
            writeln!(
                o,
                "  \"nvlink{k}\" -- \"{}\" [color=\"#334155\", penwidth=3, constraint=false];",
                p.nodes[i].bdf
            )?;
        }
        for &(a, b, n) in &g.other {
            let (label, style) = if n == 0 {
                ("no NVLink".to_owned(), "dashed")
            } else {
                (format!("NV{n}"), "solid")
            };
            writeln!(
                o,
                "  \"{}\" -- \"{}\" [xlabel=\"{label}\", color=\"#334155\", fontcolor=\"{}\", penwidth=2, style={style}, constraint=false];",
                p.nodes[a].bdf,
                p.nodes[b].bdf,
                if n < g.links { "#dc2626" } else { "#334155" }
            )?;
        }
    }
    Ok(())
}

/// The legend's label (only what is drawn), and what the tree does not show: ACS redirects and
/// the picture's notes, at most 40.
fn legend(p: &Picture) -> String {
    let d = p.drawn();
    let boxes: Vec<&str> = [
        (d.gpu || d.gpu_no_gdr, "green: GPU"),
        (d.nic, "blue: RDMA NIC"),
        (d.bridge, "grey: PCIe bridge"),
        (d.host_bridge, "yellow: host bridge"),
    ]
    .into_iter()
    .filter_map(|(on, s)| on.then_some(s))
    .collect();
    let mut legend = format!("Legend\\l{}\\l", boxes.join("   "));
    if d.gpu_no_gdr {
        legend += &format!(
            "red GPU outline: NCCL runs it without GPUDirect RDMA (its nearest NIC beyond {}, or none)\\l",
            q(&p.judged_on())
        );
    }
    if d.switch {
        legend += "dashed frame: PCIe switch (counts as one bridge)\\l";
    }
    if d.redirect {
        legend += "red outline: ACS redirect on a GPU-NIC path (acs-redirect-on-path)\\l";
    }
    for l in Level::ALL.into_iter().filter(|l| d.levels.contains(l)) {
        legend += &format!("{l} edge: {}\\l", l.legend());
    }
    if d.c2c {
        legend += "C2C (sysfs NODE): NCCL reaches the NIC through the GPU's NVLink-C2C to its CPU (its P2C); nvidia-smi prints SYS there\\l";
    }
    if d.sysfs_differs {
        legend += "PIX (sysfs NODE): the level on NCCL's tree from its topology file, and the one sysfs gives beside it\\l";
    }
    if d.redirected_pair {
        legend += "dashed level edge: a GPU-NIC pair through an ACS redirect\\l";
    }
    if d.nvlink_group {
        legend += "NVLink group: GPUs joined by NVLink, directly or through NVSwitches (NVML); NV#: # links between each pair\\l";
    }
    if d.nvlink_other {
        legend += "NV# or no NVLink edge: a pair of the group with another count (red: fewer)\\l";
    }
    for (bdf, r) in p.redirects() {
        legend += &format!(
            "ACS redirect at {bdf}: ACSCtl {:#06x} has {} set, on the path of {}\\l",
            r.control,
            r.bits.join(", "),
            q(&r.pairs.join(", "))
        );
    }
    for n in p.notes.iter().take(40) {
        legend += &format!("{}\\l", q(n));
    }
    if p.notes.len() > 40 {
        legend += &format!(
            "... and {} more (gdrdoctor check lists every one)\\l",
            p.notes.len() - 40
        );
    }
    legend
}

fn is_role(p: &Picture, i: usize, role: Role) -> bool {
    matches!(p.nodes[i].what, What::Bridge { role: r, .. } if r == role)
}

/// One node's statement.
fn node(o: &mut dyn Write, p: &Picture, i: usize, indent: &str) -> io::Result<()> {
    let n = &p.nodes[i];
    let bdf = n.bdf;
    match &n.what {
        What::Gpu {
            name,
            model,
            no_gdr,
        } => {
            let model = model
                .as_deref()
                .map(|m| format!("\\n{}", q(m)))
                .unwrap_or_default();
            let (gdr, colour) = match no_gdr {
                Some(w) => (format!("\\nno GDR: {}", q(w)), "#dc2626"),
                None => (String::new(), "#15803d"),
            };
            writeln!(
                o,
                "{indent}\"{bdf}\" [label=\"{name}\\n{bdf}{model}{gdr}\", fillcolor=\"#dcfce7\", color=\"{colour}\"];"
            )
        }
        What::Nic { devices } => {
            let names: Vec<String> = devices
                .iter()
                .map(|(n, d)| format!("{n} {}", q(d)))
                .collect();
            writeln!(
                o,
                "{indent}\"{bdf}\" [label=\"{}\\n{bdf}\", fillcolor=\"#dbeafe\", color=\"#1d4ed8\"];",
                names.join("\\n")
            )
        }
        What::Bridge {
            role,
            redirect: None,
        } => writeln!(
            o,
            "{indent}\"{bdf}\" [label=\"{bdf}\\n{}\"];",
            role.as_str()
        ),
        What::Bridge {
            role,
            redirect: Some(r),
        } => writeln!(
            o,
            "{indent}\"{bdf}\" [label=\"{bdf}\\n{}\\nACS redirect: {}\", color=\"#dc2626\", fontcolor=\"#dc2626\", penwidth=3];",
            role.as_str(),
            r.bits.join(", ")
        ),
    }
}
