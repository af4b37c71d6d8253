//! The fleet report in its formats (human, JSON, CSV), written as it comes: the header, a line
//! per node, then the summary with the two-node reports' part.

use super::{NodeResult, Tally, Unreadable, two_node};
use crate::report::Format;
use std::collections::BTreeMap;
use std::io::Write;

use crate::report::csv_field;

fn clean(s: &str) -> String {
    crate::sanitize::text(s).into_owned()
}

/// Writes one node's line as it arrives.
pub fn write_node(
    out: &mut dyn Write,
    format: Format,
    first: bool,
    r: &Result<NodeResult, Unreadable>,
) -> std::io::Result<()> {
    match (format, r) {
        (Format::Human, Ok(n)) => writeln!(
            out,
            "{:<10} {:<40} {:<20} {:<28} {}",
            if n.ready { "READY" } else { "NOT READY" },
            clean(&n.capture),
            clean(n.hostname.as_deref().unwrap_or("?")),
            clean(n.product.as_deref().unwrap_or("?")),
            clean(&n.blocking.join("; "))
        ),
        (Format::Human, Err(u)) => writeln!(
            out,
            "{:<10} {:<40} {}",
            "UNREADABLE",
            clean(&u.capture),
            clean(&u.reason)
        ),
        (Format::Json, r) => {
            let v = match r {
                Ok(n) => serde_json::to_value(n),
                Err(u) => serde_json::to_value(
                    serde_json::json!({"capture": u.capture, "unreadable": u.reason}),
                ),
            }
            .unwrap_or_default();
            write!(out, "{}\n    {}", if first { "" } else { "," }, v)
        }
        (Format::Csv, Ok(n)) => writeln!(
            out,
            "{}",
            [
                n.capture.clone(),
                n.hostname.clone().unwrap_or_default(),
                n.product.clone().unwrap_or_default(),
                n.board.clone().unwrap_or_default(),
                n.kernel.clone().unwrap_or_default(),
                n.gpu_driver.clone().unwrap_or_default(),
                n.nic_firmware.join("; "),
                n.gpus.to_string(),
                n.rdma_devices.to_string(),
                n.ready.to_string(),
                n.exit_code.to_string(),
                n.blocking.join("; "),
                n.gid_indices.join(";"),
                n.roce.clone().unwrap_or_default(),
                n.peermem.clone(),
                n.gdr_path.clone(),
                String::new(),
            ]
            .iter()
            .map(|s| csv_field(s))
            .collect::<Vec<_>>()
            .join(",")
        ),
        (Format::Csv, Err(u)) => writeln!(
            out,
            "{},,,,,,,,,,,,,,,,{}",
            csv_field(&u.capture),
            csv_field(&u.reason)
        ),
        (other, _) => Err(unsupported(other)),
    }
}

pub const CSV_HEADER: &str = "capture,hostname,product,board,kernel,gpu_driver,nic_firmware,gpus,rdma_devices,ready,exit_code,blocking,gid_indices,roce,peermem,gdr_path,unreadable";

/// The summary after every node line, and the two-node reports' part: one fleet report, one
/// document per format. The human report shows the captures' part only when there were
/// captures; JSON always has every member, `two_node` when there were reports; CSV gives each
/// report file a row of its own after the captures'.
pub fn write_summary(
    out: &mut dyn Write,
    format: Format,
    t: &Tally,
    captures: bool,
    two: &two_node::TwoNode,
) -> std::io::Result<()> {
    let cross = t.cross();
    match format {
        Format::Human => {
            if captures {
                writeln!(
                    out,
                    "\n{} captures: {} ready, {} not ready, {} unreadable",
                    t.nodes + t.unreadable,
                    t.ready,
                    t.nodes - t.ready,
                    t.unreadable
                )?;
                if !t.codes.is_empty() {
                    writeln!(
                        out,
                        "\nfindings (nodes with each warning, failure or unknown):"
                    )?;
                    for (code, by) in &t.codes {
                        let parts: Vec<String> =
                            by.iter().map(|(s, n)| format!("{n} {s}")).collect();
                        writeln!(out, "  {code:<30} {}", parts.join(", "))?;
                    }
                }
                if !t.worst_links.is_empty() {
                    writeln!(
                        out,
                        "\nlinks whose counters grew in their sample window, worst first:"
                    )?;
                    for (node, l) in &t.worst_links {
                        writeln!(
                            out,
                            "  {} {}: {} +{} in {:.1} s ({})",
                            clean(node),
                            clean(&l.port),
                            l.kind,
                            l.grew,
                            l.seconds,
                            clean(&l.counters)
                        )?;
                    }
                }
                if cross.is_empty() {
                    writeln!(out, "\nno differences between nodes of the same model")?;
                } else {
                    writeln!(out, "\ndifferences between nodes of the same model:")?;
                    for c in &cross {
                        writeln!(out, "  WARN {}: {}", c.code, clean(&c.message))?;
                    }
                }
            }
            if !two.is_empty() {
                if captures {
                    writeln!(out)?;
                }
                write!(out, "{}", two_node::human(two))?;
            }
            Ok(())
        }
        Format::Json => {
            let codes: BTreeMap<&String, BTreeMap<String, usize>> = t
                .codes
                .iter()
                .map(|(c, by)| (c, by.iter().map(|(s, n)| (s.to_string(), *n)).collect()))
                .collect();
            let links: Vec<serde_json::Value> = t
                .worst_links
                .iter()
                .map(|(node, l)| serde_json::json!({"node": node, "port": l.port, "kind": l.kind, "grew": l.grew, "counters": l.counters, "seconds": l.seconds}))
                .collect();
            let two = if two.is_empty() {
                String::new()
            } else {
                format!(
                    ",\n  \"two_node\": {}",
                    serde_json::to_string_pretty(&two_node::json(two))
                        .unwrap_or_default()
                        .replace('\n', "\n  ")
                )
            };
            write!(
                out,
                "\n  ],\n  \"summary\": {},\n  \"codes\": {},\n  \"links\": {},\n  \"cross\": {}{two}\n}}\n",
                serde_json::json!({"captures": t.nodes + t.unreadable, "ready": t.ready, "not_ready": t.nodes - t.ready, "unreadable": t.unreadable}),
                serde_json::to_string(&codes).unwrap_or_default(),
                serde_json::to_string(&links).unwrap_or_default(),
                serde_json::to_string_pretty(&cross)
                    .unwrap_or_default()
                    .replace('\n', "\n  ")
            )
        }
        Format::Csv => write_two_node_rows(out, two),
        other => Err(unsupported(other)),
    }
}

/// One CSV row per two-node report file, in the captures' columns: the file, its host(s),
/// whether every session passed, the worst session's exit code, and in `blocking` what the
/// judgement says about its host (else the directions that failed, or why the test could not
/// run); a file not read has its reason under `unreadable`.
fn write_two_node_rows(out: &mut dyn Write, two: &two_node::TwoNode) -> std::io::Result<()> {
    let about = two
        .verdict
        .as_ref()
        .map(two_node::about)
        .unwrap_or_default();
    // A file's sessions are next to each other (TwoNode::read keeps the order): one pass.
    for sessions in two.sessions.chunk_by(|a, b| a.file == b.file) {
        let file = sessions[0].file.as_str();
        let mut hosts: Vec<&str> = sessions.iter().map(|s| s.host.as_str()).collect();
        hosts.dedup();
        let mut blocking: Vec<String> = Vec::new();
        for h in &hosts {
            blocking.extend(about.get(h).into_iter().flatten().cloned());
        }
        for s in sessions {
            if let Some(e) = &s.error {
                blocking.push(format!("two-node: could not run: {e}"));
            } else if blocking.is_empty() && !s.failing.is_empty() {
                blocking.push(format!("two-node: {}", s.failing.join(", ")));
            }
        }
        let worst = sessions.iter().map(|s| s.exit_code).max().unwrap_or(2);
        let mut row = vec![String::new(); 17];
        row[0] = file.to_owned();
        row[1] = hosts.join("; ");
        row[9] = (worst == 0).to_string();
        row[10] = worst.to_string();
        row[11] = blocking.join("; ");
        writeln!(
            out,
            "{}",
            row.iter()
                .map(|f| csv_field(f))
                .collect::<Vec<_>>()
                .join(",")
        )?;
    }
    for u in &two.unreadable {
        writeln!(
            out,
            "{},,,,,,,,,,,,,,,,{}",
            csv_field(&u.file),
            csv_field(&u.reason)
        )?;
    }
    Ok(())
}

/// The header; the human one only over captures (a run of two-node reports alone has none).
pub fn write_header(out: &mut dyn Write, format: Format, captures: bool) -> std::io::Result<()> {
    match format {
        Format::Human if !captures => Ok(()),
        Format::Human => writeln!(
            out,
            "{:<10} {:<40} {:<20} {:<28} BLOCKING",
            "VERDICT", "CAPTURE", "HOSTNAME", "PRODUCT"
        ),
        Format::Json => write!(
            out,
            "{{\n  \"schema\": \"gdrdoctor.fleet\",\n  \"schema_version\": 1,\n  \"gdrdoctor_version\": \"{}\",\n  \"nodes\": [",
            env!("CARGO_PKG_VERSION")
        ),
        Format::Csv => writeln!(out, "{CSV_HEADER}"),
        other => Err(unsupported(other)),
    }
}

/// The fleet report is human, JSON or CSV (commands/fleet.rs offers only these).
fn unsupported(format: Format) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("the fleet report has no {format} format"),
    )
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("20.39\u{1b}[2J\r\n"), "20.39\\u{1b}[2J\\r\\n");
    }
}
