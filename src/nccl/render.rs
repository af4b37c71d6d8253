//! `gdrdoctor nccl explain` output: for people, and JSON (docs/nccl-explain-json.md).

use super::compare::{Comparison, NcclAnswer, Verification};
use super::explain::{ConnGroup, Explanation, Node, See};
use super::verify::{Outcome, Run};
use serde::Serialize;
use std::fmt::Write;

/// `0-3,8,10-11`.
fn ranges(v: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        if !out.is_empty() {
            out.push(',');
        }
        if end == start {
            let _ = write!(out, "{start}");
        } else {
            let _ = write!(out, "{start}-{end}");
        }
        i += 1;
    }
    out
}

fn sees(s: &[See]) -> String {
    s.iter()
        .map(|x| format!("{} ({})", x.check, x.code))
        .collect::<Vec<_>>()
        .join(", ")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn version_line(n: &Node) -> String {
    let v = &n.nccl;
    let mut s = match (v.version.as_deref(), v.source, v.range.as_deref()) {
        (Some(ver), "log", _) => format!("NCCL {ver}"),
        (Some(ver), _, _) => format!("NCCL {ver} (from a version line without a host)"),
        (None, _, Some(r)) => {
            format!("NCCL {r} (no version line; told by how the lines are worded)")
        }
        _ => "NCCL version not in the log".to_owned(),
    };
    if !v.all.is_empty() {
        let _ = write!(s, "; several version lines: {}", v.all.join(", "));
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

/// The report for people: per node what NCCL decided, then why, then the verdict.
pub fn human(e: &Explanation) -> String {
    let mut o = String::new();
    for i in &e.inputs {
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
        if i.gzip {
            o.push_str(", gzip");
        }
        if i.long_lines_skipped > 0 {
            let _ = write!(o, ", {} too long (skipped)", i.long_lines_skipped);
        }
        if let Some(err) = &i.error {
            let _ = write!(o, "; reading stopped: {err} (what came before counts)");
        }
        o.push('\n');
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
        let _ = write!(o, "\nnode {}: {}", n.name, version_line(n));
        if !n.networks.is_empty() {
            let _ = write!(o, "; network {}", n.networks.join(", "));
        }
        if !n.plugins.is_empty() {
            let _ = write!(o, "; plugin {}", n.plugins.join(", "));
        }
        o.push('\n');
        for nic in &n.nics {
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
            let _ = writeln!(o, "  nic   {what:<44} {gdr}");
        }
        for g in &n.gpu_nic {
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
            let _ = writeln!(o, "{s}");
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
        if n.nics.is_empty()
            && n.gpu_nic.is_empty()
            && n.paths.is_empty()
            && n.connections.is_empty()
            && n.network_notes.is_empty()
        {
            o.push_str("  (no NIC, GDR decision or NET connection in this node's lines)\n");
        }
    }
    if !e.diagnoses.is_empty() {
        o.push_str("\nWhy GPUDirect RDMA was not used\n");
        for d in &e.diagnoses {
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
    }
    if !e.warnings.is_empty() {
        o.push_str("\nNCCL warnings\n");
        for w in &e.warnings {
            let _ = writeln!(o, "  {}x  {}  [{}]", w.count, w.text, w.nodes.join(", "));
            if let Some(m) = &w.meaning {
                let _ = writeln!(o, "      {m}");
            }
            if !w.see.is_empty() {
                let _ = writeln!(o, "      see: {}", sees(&w.see));
            }
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
    let mut s = serde_json::to_string_pretty(e).unwrap_or_else(|err| {
        format!(
            "{{\"error\": {}}}",
            serde_json::Value::String(err.to_string())
        )
    });
    s.push('\n');
    s
}

// ---------------------------------------------------------------------------------------------
// `nccl verify`

/// `1 GPU`, `2 GPUs`.
fn gpus(n: usize) -> String {
    plural(n as u64, "GPU", "GPUs")
}

/// The report of `nccl verify` for people: what ran, what NCCL said against what gdrdoctor sees,
/// the findings with their fixes, and NCCL's answer last.
pub fn verify_human(run: &Run, v: &Verification, verbose: bool) -> String {
    let mut o = String::new();
    let a = run.answer.as_ref();
    let used = run.used();
    let lib = match (&v.answer.library, used) {
        (Some(l), Some(c)) => format!("{l}; {}", source_words(c.source, &c.library)),
        (Some(l), None) => l.clone(),
        (None, _) => "no library loaded".into(),
    };
    let _ = writeln!(
        o,
        "NCCL {} ({lib}) on {}: {}",
        v.answer.version.as_deref().unwrap_or("?"),
        gpus(run.gpus.len()),
        if run.mode == "one-rank" {
            "a one-rank communicator"
        } else {
            "one communicator over all of them, P2P and SHM off: the all-reduce goes through NCCL's network"
        }
    );
    if let Some(a) = a {
        let result = match &a.outcome {
            Outcome::Ok { elements } => format!("all-reduce ok ({elements} int32 per rank)"),
            Outcome::Wrong { wrong, .. } => format!("all-reduce WRONG ({wrong} elements)"),
            Outcome::NcclError { call, .. } => format!("{call} failed"),
            Outcome::CudaError { call, .. } => format!("CUDA failed ({call})"),
            Outcome::NoLibrary => "no library".into(),
            Outcome::MissingSymbol { symbol, .. } => format!("library lacks {symbol}"),
            Outcome::BadSpec { .. } => "bad spec".into(),
        };
        let times = [("init", a.init_ms), ("all-reduce", a.all_reduce_ms)]
            .iter()
            .filter_map(|(w, t)| t.map(|t| format!("{w} {t:.0} ms")))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            o,
            "  {result}{}{}",
            if times.is_empty() { "" } else { "; " },
            times
        );
        for t in &a.tried {
            let _ = writeln!(o, "  not loaded: {}: {}", t.library, t.error);
        }
    }
    if let Some(e) = &run.error {
        let _ = writeln!(o, "  no answer: {e}");
    }
    if verbose || a.is_some_and(|a| a.library.is_none()) {
        let _ = writeln!(
            o,
            "  libraries tried in order: {}",
            run.search
                .candidates
                .iter()
                .map(|c| format!("{} ({})", c.library, c.source))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(o, "  {}", run.search.python);
    }
    let log = match (&run.log.path, &run.log.note) {
        (_, Some(note)) => format!("NCCL's log: {note}"),
        (Some(p), None) => format!("NCCL's log: {p}, {} lines from NCCL", run.log.nccl_lines),
        (None, None) => format!("NCCL's log: {} lines from NCCL", run.log.nccl_lines),
    };
    let topo = match &run.topology_dump {
        Some(t) => format!(
            "its topology dump: {}{} bytes",
            t.path
                .as_deref()
                .map(|p| format!("{p}, "))
                .unwrap_or_default(),
            t.bytes
        ),
        None => "no topology dump".into(),
    };
    let _ = writeln!(o, "  {log}; {topo}");

    if !v.comparisons.is_empty() {
        let differ = v
            .comparisons
            .iter()
            .filter(|c| c.agree == Some(false))
            .count();
        let same = v
            .comparisons
            .iter()
            .filter(|c| c.agree == Some(true))
            .count();
        let open = v.comparisons.len() - differ - same;
        let _ = writeln!(
            o,
            "\nNCCL against gdrdoctor: {same} the same, {differ} different{}",
            if open > 0 {
                format!(", {open} not compared")
            } else {
                String::new()
            }
        );
        let small = v.comparisons.len() <= 6;
        for c in &v.comparisons {
            if !(verbose || small || c.agree != Some(true)) {
                continue;
            }
            let tag = match c.agree {
                Some(true) => "same",
                Some(false) => "DIFFERS",
                None => "open",
            };
            let _ = writeln!(o, "  {tag:<8}{}", c.subject);
            let _ = writeln!(o, "          NCCL:      {}", c.nccl);
            let _ = writeln!(o, "          gdrdoctor: {}", c.gdrdoctor);
            if let Some(n) = &c.note {
                let _ = writeln!(o, "          ({n})");
            }
        }
        if !(verbose || small) && same > 0 {
            let _ = writeln!(o, "  (-v lists the {same} facts that are the same)");
        }
    }
    if let Some(e) = &run.explanation {
        if !e.warnings.is_empty() {
            o.push_str("\nNCCL warnings\n");
            for w in &e.warnings {
                let _ = writeln!(o, "  {}x  {}", w.count, w.text);
                if let Some(m) = &w.meaning {
                    let _ = writeln!(o, "      {m}");
                }
            }
        }
    }
    o.push_str("\nFindings\n");
    let style = crate::report::human::Style { verbose };
    for f in &v.findings {
        crate::report::human::finding(&mut o, f, &style);
    }
    let _ = writeln!(o, "\n{}", v.answer.text);
    o
}

/// `the dynamic loader's libnccl.so.2`, `the pip wheel of the python3 on PATH`.
fn source_words(source: &str, name: &str) -> String {
    match source {
        "loader" => format!("the dynamic loader's {name}"),
        "pip-wheel" => "the NVIDIA pip wheel of the python3 on PATH".into(),
        "environment" => "GDRDOCTOR_LIBNCCL".into(),
        "option" => "--library".into(),
        other => other.into(),
    }
}

#[derive(Serialize)]
struct VerifyJson<'a> {
    schema: u32,
    root: &'a str,
    hostname: Option<&'a str>,
    answer: &'a NcclAnswer,
    exit_code: u8,
    run: &'a Run,
    comparisons: &'a [Comparison],
    findings: &'a [crate::model::Finding],
    explanation: Option<&'a Explanation>,
}

/// `nccl verify --format json` (docs/nccl-verify-json.md).
pub fn verify_json(run: &Run, v: &Verification, root: &str, hostname: Option<&str>) -> String {
    let doc = VerifyJson {
        schema: 1,
        root,
        hostname,
        answer: &v.answer,
        exit_code: v.exit_code,
        run,
        comparisons: &v.comparisons,
        findings: &v.findings,
        explanation: run.explanation.as_ref(),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|err| {
        format!(
            "{{\"error\": {}}}",
            serde_json::Value::String(err.to_string())
        )
    });
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(ranges(&[]), "");
        assert_eq!(ranges(&[5]), "5");
    }
}
