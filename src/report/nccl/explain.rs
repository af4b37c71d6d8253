//! `gdrdoctor nccl explain` output: for people, and JSON (docs/nccl-explain-json.md).

use super::{plural, ranges, sees};
use crate::nccl::explain::{ConnGroup, Diagnosis, Explanation, GpuNic, Input, Nic, Node, Warning};
use std::fmt::Write;

/// The report for people: per node what NCCL decided, then why, then the verdict.
pub fn human(e: &Explanation) -> String {
    let mut o = String::new();
    for i in &e.inputs {
        input_line(&mut o, i);
    }
    if e.unrecognised.count > 0 {
        let _ = writeln!(
            o,
            "{} about GDR in no known wording, skipped; first: {}",
            plural(e.unrecognised.count, "line", "lines"),
            e.unrecognised
                .examples
                .iter()
                .map(|x| format!("`{x}`"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for n in &e.nodes {
        node(&mut o, n);
    }
    if !e.diagnoses.is_empty() {
        o.push_str("\nWhy GPUDirect RDMA was not used\n");
        for d in &e.diagnoses {
            diagnosis(&mut o, d);
        }
    }
    if !e.warnings.is_empty() {
        o.push_str("\nNCCL warnings\n");
        for w in &e.warnings {
            warning(&mut o, w);
        }
    }
    if !e.hints.is_empty() {
        o.push_str("\nTo learn more\n");
        for h in &e.hints {
            let _ = writeln!(o, "  - {h}");
        }
    }
    let _ = writeln!(o, "\n{}", e.verdict.summary);
    o
}

/// The whole explanation as JSON (docs/nccl-explain-json.md).
pub fn json(e: &Explanation) -> String {
    super::pretty_json(e)
}

/// `job.log: 1200 lines, 800 from NCCL, gzip`.
fn input_line(o: &mut String, i: &Input) {
    let name = if i.name.is_empty() {
        "(lines)"
    } else {
        i.name.as_str()
    };
    let _ = write!(
        o,
        "{name}: {}, {} from NCCL",
        plural(i.lines, "line", "lines"),
        i.nccl_lines
    );
    if i.unprefixed > 0 {
        let _ = write!(
            o,
            " ({} without NCCL's prefix: host and rank unknown)",
            i.unprefixed
        );
    }
    if i.gzip {
        o.push_str(", gzip");
    }
    if i.commented > 0 {
        let _ = write!(
            o,
            ", {} in `#` comments (skipped)",
            plural(i.commented, "line", "lines")
        );
    }
    if i.long_lines_skipped > 0 {
        let _ = write!(o, ", {} too long (skipped)", i.long_lines_skipped);
    }
    if let Some(err) = &i.error {
        let _ = write!(o, "; reading stopped: {err} (what came before counts)");
    }
    o.push('\n');
}

fn version_line(n: &Node) -> String {
    let v = &n.nccl;
    let lib = v.library;
    let mut s = match (v.version.as_deref(), v.source, v.range.as_deref()) {
        (Some(ver), "log", _) => format!("{lib} {ver}"),
        (Some(ver), _, _) => format!("{lib} {ver} (from a version line without a host)"),
        (None, _, Some(r)) => {
            format!("{lib} {r} (no version line; told by how the lines are worded)")
        }
        _ => format!("{lib} version not in the log"),
    };
    if !v.all.is_empty() {
        let _ = write!(s, "; several version lines: {}", v.all.join(", "));
    }
    s
}

/// One node: its NCCL and network, then each NIC, GPU-NIC decision, path and connection.
fn node(o: &mut String, n: &Node) {
    let _ = write!(o, "\nnode {}: {}", n.name, version_line(n));
    if !n.networks.is_empty() {
        let _ = write!(o, "; network {}", n.networks.join(", "));
    }
    if !n.plugins.is_empty() {
        let _ = write!(o, "; plugin {}", n.plugins.join(", "));
    }
    o.push('\n');
    for nic in &n.nics {
        let _ = writeln!(o, "  nic   {}", nic_line(nic));
    }
    for g in &n.gpu_nic {
        let _ = writeln!(o, "{}", gpu_nic_line(g));
    }
    for p in &n.paths {
        let _ = writeln!(
            o,
            "  path  GPU {} -> NET/{:<8} {:<4} ({} hops, {} GB/s)",
            p.bus_id.as_deref().unwrap_or(&p.gpu),
            p.net,
            p.path,
            p.hops,
            p.bandwidth
        );
    }
    if !n.env.is_empty() {
        let _ = writeln!(
            o,
            "  env   {}",
            n.env
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
    for note in &n.network_notes {
        let _ = writeln!(o, "  net   {note}");
    }
    if !n.dmabuf_gpus.is_empty() {
        let _ = writeln!(
            o,
            "  dmabuf GPUs (cuda) {} can export dma-bufs",
            ranges(&n.dmabuf_gpus)
        );
    }
    if !n.rings_gdr.is_empty() {
        let _ = writeln!(
            o,
            "  rings `use ring ... GDR {}`",
            n.rings_gdr
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    for c in &n.connections {
        let _ = writeln!(o, "  conn  {}", conn_line(c));
    }
    if n.intra_node_connections > 0 {
        let _ = writeln!(
            o,
            "  local {} inside the node (P2P, SHM){}",
            plural(n.intra_node_connections, "connection", "connections"),
            match n.communicator_nodes.as_slice() {
                [1] => "; nNodes 1",
                _ => "",
            }
        );
    } else if n.communicator_nodes == [1] {
        o.push_str("  local communicators of one node (nNodes 1)\n");
    }
    for r in &n.requirements {
        let _ = writeln!(o, "  needs {r}");
    }
    if n.nics.is_empty()
        && n.gpu_nic.is_empty()
        && n.paths.is_empty()
        && n.connections.is_empty()
        && n.network_notes.is_empty()
        && n.intra_node_connections == 0
    {
        o.push_str("  (no NIC, GDR decision or NET connection in this node's lines)\n");
    }
}

/// `NET/IB/0 mlx5_0 port 1 (IB)      GDR enabled (nvidia-peermem)`.
fn nic_line(nic: &Nic) -> String {
    let mut what = format!("NET/{}/{} {}", nic.net, nic.index, nic.name);
    if let Some(p) = nic.port {
        let _ = write!(what, " port {p}");
    }
    if let Some(l) = &nic.link {
        let _ = write!(what, " ({l})");
    }
    if let Some(g) = &nic.gpu {
        let _ = write!(what, " for GPU {g}");
    }
    let gdr = match (nic.gdr, &nic.reason) {
        ("not-printed", _) => "GDR not printed".to_owned(),
        (g, Some(r)) => format!("GDR {g} ({r})"),
        (g, None) => format!("GDR {g}"),
    };
    format!("{what:<44} {gdr}")
}

/// `  gpu   GPU 18000 -> NIC 0   GDR disabled  distance 5 (SYS) > level 4 (PHB, ...)`.
fn gpu_nic_line(g: &GpuNic) -> String {
    let level = match g.level_source {
        "default" => "NCCL's default",
        "environment" => "NCCL_NET_GDR_LEVEL",
        _ => "not the default",
    };
    let mut s = format!(
        "  gpu   GPU {} -> NIC {:<22} GDR {:<9} distance {} ({}) {} level {} ({}, {level})",
        g.gpu,
        g.nic,
        if g.gdr { "enabled" } else { "disabled" },
        g.distance,
        g.distance_name,
        if g.gdr {
            if g.comparison == ">=" { "<" } else { "<=" }
        } else {
            g.comparison
        },
        g.level,
        g.level_name
    );
    if let Some(r) = g.read {
        let _ = write!(s, ", read {}", u8::from(r));
    }
    if let Some(m) = &g.mode {
        let _ = write!(s, ", mode {m}");
    }
    if let Some(p) = &g.pxn_via {
        let _ = write!(s, ", PXN via GPU/{p}");
    }
    s
}

fn conn_line(c: &ConnGroup) -> String {
    let who = match (c.cuda_dev, &c.bus) {
        (Some(d), Some(b)) => format!("rank {} (cuda {d}, bus {b})", c.rank),
        (Some(d), None) => format!("rank {} (cuda {d})", c.rank),
        (None, Some(b)) => format!("rank {} (bus {b})", c.rank),
        (None, None) => format!("rank {}", c.rank),
    };
    let mut dirs = Vec::new();
    if c.sends > 0 {
        dirs.push(plural(c.sends, "send", "sends"));
    }
    if c.receives > 0 {
        dirs.push(plural(c.receives, "receive", "receives"));
    }
    let mut s = format!(
        "{who:<28} NET/{}/{:<3} {:<7} {:<22} channels {}  peers {}{}",
        c.net,
        c.nic,
        if c.gdr { "GDRDMA" } else { "no GDR" },
        dirs.join(", "),
        ranges(&c.channels),
        ranges(&c.peers),
        if c.more_peers { " and more" } else { "" }
    );
    if !c.proxies.is_empty() {
        let _ = write!(s, "  via PXN ranks {}", ranges(&c.proxies));
    }
    if c.pci {
        s.push_str("  (PCI)");
    }
    s
}

/// One cause: where, what NCCL printed and means, the checks that explain it, the fix.
fn diagnosis(o: &mut String, d: &Diagnosis) {
    let scope = if d.connections > 0 {
        let ranks = d
            .ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        format!(
            " ({}, rank{} {ranks})",
            plural(d.connections, "connection", "connections"),
            if d.ranks.len() == 1 { "" } else { "s" }
        )
    } else if d.cause == "plugin-failed" {
        // Not a decision of NCCL's: the plugin failed, and NCCL went on without it.
        " (its failure to initialize; no connection line for it)".to_owned()
    } else {
        " (NCCL's decision; no connection line for it)".to_owned()
    };
    let nodes = if d.nodes.len() > 6 {
        format!(
            "{} and {} more nodes",
            d.nodes[..3].join(", "),
            d.nodes.len() - 3
        )
    } else {
        d.nodes.join(", ")
    };
    let _ = writeln!(o, "  {nodes}: {}{scope}", d.subject);
    let _ = writeln!(o, "      {}", d.message);
    if d.see.is_empty() {
        let _ = writeln!(
            o,
            "      see: no gdrdoctor check (the job's or a plugin's own decision)"
        );
    } else {
        let _ = writeln!(o, "      see: {}", sees(&d.see));
    }
    let _ = writeln!(o, "      fix: {}", d.fix);
}

fn warning(o: &mut String, w: &Warning) {
    let _ = writeln!(o, "  {}x  {}  [{}]", w.count, w.text, w.nodes.join(", "));
    if let Some(m) = &w.meaning {
        let _ = writeln!(o, "      {m}");
    }
    if !w.see.is_empty() {
        let _ = writeln!(o, "      see: {}", sees(&w.see));
    }
}
