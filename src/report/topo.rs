//! `gdrdoctor topo`: the GPU and NIC matrix in the shape of `nvidia-smi topo -m`, and as JSON
//! (docs/topo-json.md).

use crate::placement::{Kind, Level, Matrix};
use serde::Serialize;
use std::fmt::Write;

pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct TopoReport<'a> {
    pub schema: &'static str,
    pub schema_version: u32,
    pub gdrdoctor_version: &'static str,
    pub root: super::RootInfo,
    pub devices: &'a [crate::placement::Device],
    /// `matrix[row][column]` over `devices`: `X` on the diagonal, a level, or null when the
    /// route is unknown (a device without a PCI function).
    pub matrix: Vec<Vec<Option<String>>>,
    /// Pairs whose NUMA nodes are unknown across host bridges, where NODE was assumed.
    pub numa_assumed: Vec<[String; 2]>,
    pub legend: Vec<LegendEntry>,
}

#[derive(Debug, Serialize)]
pub struct LegendEntry {
    pub level: &'static str,
    pub meaning: &'static str,
}

/// What a cell shows: `X`, `NV18` between GPUs joined by NVLink (as nvidia-smi puts NVLink
/// before PCIe), else the PCIe level.
fn cell(m: &Matrix, i: usize, j: usize) -> Option<String> {
    if i == j {
        return Some("X".into());
    }
    if let Some(n) = m.nvlinks.get(i).and_then(|r| r.get(j)).copied().flatten() {
        return Some(format!("NV{n}"));
    }
    m.levels[i][j].as_ref().map(|r| r.level.as_str().to_owned())
}

const NVLINK_LEGEND: &str = "Connection traversing a bonded set of # NVLinks";

pub fn json(m: &Matrix, root: super::RootInfo) -> String {
    let n = m.devices.len();
    let mut numa_assumed = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if m.levels[i][j].as_ref().is_some_and(|r| r.numa_unknown) {
                numa_assumed.push([m.devices[i].name.clone(), m.devices[j].name.clone()]);
            }
        }
    }
    let report = TopoReport {
        schema: "gdrdoctor.topo",
        schema_version: SCHEMA_VERSION,
        gdrdoctor_version: env!("CARGO_PKG_VERSION"),
        root,
        devices: &m.devices,
        matrix: (0..n)
            .map(|i| (0..n).map(|j| cell(m, i, j)).collect())
            .collect(),
        numa_assumed,
        legend: std::iter::once(LegendEntry {
            level: "X",
            meaning: "Self",
        })
        .chain(Level::ALL.iter().rev().map(|l| LegendEntry {
            level: l.as_str(),
            meaning: l.legend(),
        }))
        .chain(std::iter::once(LegendEntry {
            level: "NV#",
            meaning: NVLINK_LEGEND,
        }))
        .collect(),
    };
    serde_json::to_string_pretty(&report).unwrap_or_default() + "\n"
}

/// Tab-separated like nvidia-smi's, so that scripts reading that read this.
pub fn human(m: &Matrix) -> String {
    let mut o = String::new();
    let n = m.devices.len();
    if n == 0 {
        return "no GPU and no RDMA device found\n".into();
    }
    o.push('\t');
    for d in &m.devices {
        let _ = write!(o, "{}\t", d.name);
    }
    o.push_str("CPU Affinity\tNUMA Affinity\n");
    for (i, d) in m.devices.iter().enumerate() {
        let _ = write!(o, "{}\t", d.name);
        for j in 0..n {
            let _ = write!(
                o,
                "{}\t",
                cell(m, i, j)
                    .map(|c| if c == "X" { " X ".to_owned() } else { c })
                    .unwrap_or_else(|| "N/A".into())
            );
        }
        let numa = d
            .numa_node
            .filter(|n| *n >= 0)
            .map(|n| n.to_string())
            .unwrap_or_else(|| "N/A".into());
        let _ = writeln!(
            o,
            "{}\t\t{numa}",
            d.cpu_affinity.as_deref().unwrap_or("N/A")
        );
    }
    o.push_str("\nLegend:\n\n  X    = Self\n");
    for l in Level::ALL.iter().rev() {
        let _ = writeln!(o, "  {:<4} = {}", l.as_str(), l.legend());
    }
    let _ = writeln!(o, "  NV#  = {NVLINK_LEGEND}");
    let nics: Vec<_> = m.devices.iter().filter(|d| d.kind == Kind::Nic).collect();
    if !nics.is_empty() {
        o.push_str("\nNIC Legend:\n\n");
        for d in nics {
            let pci = d.bdf.map(|b| format!(" ({b})")).unwrap_or_default();
            let _ = writeln!(
                o,
                "  {}: {}{pci}",
                d.name,
                d.rdma_device.as_deref().unwrap_or("?")
            );
        }
    }
    let gpus: Vec<_> = m.devices.iter().filter(|d| d.kind == Kind::Gpu).collect();
    if !gpus.is_empty() {
        o.push_str("\nGPU Legend:\n\n");
        for d in gpus {
            let model = d
                .model
                .as_deref()
                .map(|m| format!(" {m}"))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "  {}: {}{model}",
                d.name,
                d.bdf.map(|b| b.to_string()).unwrap_or_default()
            );
        }
    }
    let assumed: Vec<String> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .filter(|&(i, j)| m.levels[i][j].as_ref().is_some_and(|r| r.numa_unknown))
        .map(|(i, j)| format!("{}-{}", m.devices[i].name, m.devices[j].name))
        .collect();
    if !assumed.is_empty() {
        let _ = writeln!(
            o,
            "\nNUMA unknown across host bridges, NODE assumed: {}",
            assumed.join(", ")
        );
    }
    o
}
