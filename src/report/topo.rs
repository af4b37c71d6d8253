//! `gdrdoctor topo`: the GPU and NIC matrix in the shape of `nvidia-smi topo -m`, and as JSON
//! (docs/topo-json.md).

use crate::inventory::Inventory;
use crate::nccl::effective::{Basis, Judgement, Verdict};
use crate::parse::pci::Bdf;
use crate::placement::{Kind, Level, Matrix};
use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};
use std::fmt;
use std::io::{self, Write};

pub const SCHEMA_VERSION: u32 = 1;

/// The report as serialized. The matrix and the NUMA pairs are written as they are computed,
/// never held: a node with 5,000 GPUs has 25 million cells (issue 14).
#[derive(Serialize)]
struct TopoReport<'a> {
    schema: &'static str,
    schema_version: u32,
    gdrdoctor_version: &'static str,
    root: super::RootInfo,
    devices: &'a [crate::placement::Device],
    /// Whether NCCL uses GPUDirect RDMA for each GPU, as `check` judges it.
    gdr: Gdr,
    /// `matrix[row][column]` over `devices`: `X` on the diagonal, a level, or null when the
    /// route is unknown (a device without a PCI function).
    matrix: Rows<'a>,
    /// Pairs whose NUMA nodes are unknown across host bridges, where NODE was assumed.
    numa_assumed: NumaAssumed<'a>,
    /// What the matrix and the decision stand on and could not be read.
    problems: &'a [crate::inventory::Problem],
    legend: Vec<LegendEntry>,
}

/// NCCL's GPUDirect RDMA decision per GPU (docs/topo-json.md): the same judgement as
/// `pcie-placement`'s (`effective::judge`), so that the matrix's sysfs levels and NCCL's
/// decision are never read as one (issue 25).
#[derive(Debug, Serialize)]
pub struct Gdr {
    /// NCCL_NET_GDR_LEVEL in force: as the node's NCCL settings give it, else the config's.
    gdr_level: String,
    /// Where it comes from: `NCCL_NET_GDR_LEVEL's default`, `NCCL_NET_GDR_LEVEL=PHB from
    /// /etc/nccl.conf line 2`.
    gdr_level_origin: String,
    /// `sysfs`, or `topology-file`: the levels are on the tree NCCL builds from it.
    basis: &'static str,
    topology_file: Option<String>,
    gpus: Vec<GdrGpu>,
}

#[derive(Debug, Serialize)]
struct GdrGpu {
    /// `GPU0`, as in `devices`.
    name: String,
    bdf: Bdf,
    /// `gdr`, `no-gdr`, `unknown` (no NIC NCCL uses has a known place), `no-nic` (NCCL uses no
    /// RDMA NIC on the node).
    verdict: Verdict,
    /// NCCL's level to its nearest NIC(s): the topology file's tree's, else sysfs's.
    level: Option<Level>,
    /// The sysfs level to the same NICs (the farthest of them, where they differ).
    sysfs_level: Option<Level>,
    /// Its nearest NICs among those NCCL uses.
    nics: Vec<GdrNic>,
    /// `c2c` where NCCL reaches them through the GPU's NVLink-C2C (its P2C), else `pcie`.
    via: Option<crate::nccl::effective::Via>,
    /// Under GDR on a C2C system (NCCL 2.26 and later): `default` (over C2C) or `pci` (forced
    /// through PCIe), as NCCL logs `mode`.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<crate::nccl::c2c::Mode>,
}

#[derive(Debug, Serialize)]
struct GdrNic {
    /// `NIC0`, as in `devices`.
    name: String,
    rdma_device: String,
    level: Level,
    sysfs_level: Option<Level>,
}

/// The decision as `topo` writes it: GPUs and NICs named as in the matrix.
pub fn gdr(inv: &Inventory, j: &Judgement) -> Gdr {
    let gpus = j
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let nics: Vec<GdrNic> = g
                .nearest
                .iter()
                .flat_map(|n| &n.nics)
                .map(|c| GdrNic {
                    name: format!("NIC{}", c.nic),
                    rdma_device: inv.rdma[c.nic].name.clone(),
                    level: c.level,
                    sysfs_level: c.sysfs.as_ref().map(|r| r.level),
                })
                .collect();
            GdrGpu {
                name: format!("GPU{i}"),
                bdf: g.gpu,
                verdict: g.verdict,
                level: g.nearest.as_ref().map(|n| n.level),
                sysfs_level: nics.iter().filter_map(|n| n.sysfs_level).max(),
                nics,
                via: g
                    .nearest
                    .as_ref()
                    .and_then(|n| n.nics.first())
                    .map(|c| c.via),
                mode: g.mode,
            }
        })
        .collect();
    Gdr {
        gdr_level: j.policy.value(),
        gdr_level_origin: j.policy.origin(),
        basis: match j.basis {
            Basis::Sysfs => "sysfs",
            Basis::File(_) => "topology-file",
        },
        topology_file: match j.basis {
            Basis::File(t) => Some(t.path.clone()),
            Basis::Sysfs => None,
        },
        gpus,
    }
}

#[derive(Debug, Serialize)]
struct LegendEntry {
    level: &'static str,
    meaning: &'static str,
}

/// What a cell shows: `X`, `NV18` between GPUs joined by NVLink (as nvidia-smi puts NVLink
/// before PCIe), else the PCIe level; `None` when the route is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Me,
    NvLink(u32),
    /// NVLink-C2C to the GPU's CPU, then the CPU's PCIe to the NIC (NCCL's P2C).
    C2c,
    Pcie(Level),
}

impl fmt::Display for Cell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Me => f.write_str("X"),
            Cell::NvLink(n) => write!(f, "NV{n}"),
            Cell::C2c => f.write_str("C2C"),
            Cell::Pcie(l) => f.write_str(l.as_str()),
        }
    }
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The fixed names without the formatting machinery: this runs for every cell.
        match self {
            Cell::Me => s.serialize_str("X"),
            Cell::C2c => s.serialize_str("C2C"),
            Cell::Pcie(l) => s.serialize_str(l.as_str()),
            Cell::NvLink(_) => s.collect_str(self),
        }
    }
}

fn cell(m: &Matrix, i: usize, j: usize) -> Option<Cell> {
    if i == j {
        return Some(Cell::Me);
    }
    if let Some(n) = m.nvlinks(i, j) {
        return Some(Cell::NvLink(n));
    }
    if m.c2c(i, j) {
        return Some(Cell::C2c);
    }
    m.level(i, j).map(|(l, _)| Cell::Pcie(l))
}

/// Every row of the matrix, computed while it is serialized.
struct Rows<'a>(&'a Matrix);

/// One row of the matrix, computed while it is serialized.
struct Row<'a>(&'a Matrix, usize);

impl Serialize for Rows<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.0.devices.len();
        let mut seq = s.serialize_seq(Some(n))?;
        for i in 0..n {
            seq.serialize_element(&Row(self.0, i))?;
        }
        seq.end()
    }
}

impl Serialize for Row<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let n = self.0.devices.len();
        let mut seq = s.serialize_seq(Some(n))?;
        for j in 0..n {
            seq.serialize_element(&cell(self.0, self.1, j))?;
        }
        seq.end()
    }
}

/// The pairs (i < j) across host bridges whose NUMA nodes are unknown.
fn numa_assumed(m: &Matrix) -> impl Iterator<Item = (usize, usize)> + '_ {
    let n = m.devices.len();
    (0..n)
        .flat_map(move |i| (i + 1..n).map(move |j| (i, j)))
        .filter(|&(i, j)| m.level(i, j).is_some_and(|(_, assumed)| assumed))
}

/// `numa_assumed` as `[name, name]` pairs, computed while serialized (all N^2/2 pairs on a
/// node whose kernel gives no NUMA node).
struct NumaAssumed<'a>(&'a Matrix);

impl Serialize for NumaAssumed<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.0;
        let mut seq = s.serialize_seq(None)?;
        for (i, j) in numa_assumed(m) {
            seq.serialize_element(&[&m.devices[i].name, &m.devices[j].name])?;
        }
        seq.end()
    }
}

const NVLINK_LEGEND: &str = "Connection traversing a bonded set of # NVLinks";
const C2C_LEGEND: &str = "Connection traversing the GPU's NVLink-C2C to its CPU, then the CPU's PCIe (NCCL's P2C; nvidia-smi prints SYS or NODE)";

/// Writes the JSON report (docs/topo-json.md) to `out`, row by row.
pub fn write_json(
    m: &Matrix,
    gdr: Gdr,
    problems: &[crate::inventory::Problem],
    root: super::RootInfo,
    out: &mut dyn Write,
) -> io::Result<()> {
    let report = TopoReport {
        schema: "gdrdoctor.topo",
        schema_version: SCHEMA_VERSION,
        gdrdoctor_version: env!("CARGO_PKG_VERSION"),
        root,
        devices: &m.devices,
        gdr,
        matrix: Rows(m),
        numa_assumed: NumaAssumed(m),
        problems,
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
        .chain(
            (0..m.devices.len())
                .any(|i| (0..m.devices.len()).any(|j| m.c2c(i, j)))
                .then_some(LegendEntry {
                    level: "C2C",
                    meaning: C2C_LEGEND,
                }),
        )
        .collect(),
    };
    let mut ser = serde_json::Serializer::pretty(&mut *out);
    report.serialize(&mut ser).map_err(io::Error::from)?;
    out.write_all(b"\n")
}

/// The JSON report as a string (tests, small nodes).
pub fn json(m: &Matrix, gdr: Gdr, root: super::RootInfo) -> String {
    let mut out = Vec::new();
    let _ = write_json(m, gdr, &[], root, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// The human matrix as a string (tests, small nodes).
pub fn human(m: &Matrix, gdr: &Gdr) -> String {
    let mut out = Vec::new();
    let _ = write_human(m, gdr, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Tab-separated like nvidia-smi's, so that scripts reading that read this; written row by
/// row.
///
/// Names and values read off the node (an RDMA device's name, a GPU's model, the affinities)
/// go through the one sanitizer (crate::sanitize): a capture cannot drive the terminal.
pub fn write_human(m: &Matrix, gdr: &Gdr, o: &mut dyn Write) -> io::Result<()> {
    use crate::sanitize::text as t;
    let n = m.devices.len();
    if n == 0 {
        return o.write_all(b"no GPU and no RDMA device found\n");
    }
    o.write_all(b"\t")?;
    for d in &m.devices {
        write!(o, "{}\t", t(&d.name))?;
    }
    o.write_all(b"CPU Affinity\tNUMA Affinity\n")?;
    for (i, d) in m.devices.iter().enumerate() {
        write!(o, "{}\t", t(&d.name))?;
        for j in 0..n {
            match cell(m, i, j) {
                Some(Cell::Me) => o.write_all(b" X \t")?,
                Some(c) => write!(o, "{c}\t")?,
                None => o.write_all(b"N/A\t")?,
            }
        }
        writeln!(
            o,
            "{}\t{}",
            t(d.cpu_affinity.as_deref().unwrap_or("N/A")),
            t(d.numa_affinity.as_deref().unwrap_or("N/A"))
        )?;
    }
    o.write_all(b"\nLegend:\n\n  X    = Self\n")?;
    for l in Level::ALL.iter().rev() {
        writeln!(o, "  {:<4} = {}", l.as_str(), l.legend())?;
    }
    writeln!(o, "  NV#  = {NVLINK_LEGEND}")?;
    if m.devices
        .iter()
        .enumerate()
        .any(|(i, _)| (0..n).any(|j| m.c2c(i, j)))
    {
        writeln!(o, "  C2C  = {C2C_LEGEND}")?;
    }
    let nics: Vec<_> = m.devices.iter().filter(|d| d.kind == Kind::Nic).collect();
    if !nics.is_empty() {
        o.write_all(b"\nNIC Legend:\n\n")?;
        for d in nics {
            let pci = d.bdf.map(|b| format!(" ({b})")).unwrap_or_default();
            writeln!(
                o,
                "  {}: {}{pci}",
                t(&d.name),
                t(d.rdma_device.as_deref().unwrap_or("?"))
            )?;
        }
    }
    let gpus: Vec<_> = m.devices.iter().filter(|d| d.kind == Kind::Gpu).collect();
    if !gpus.is_empty() {
        o.write_all(b"\nGPU Legend:\n\n")?;
        for d in gpus {
            let model = d
                .model
                .as_deref()
                .map(|m| format!(" {}", t(m)))
                .unwrap_or_default();
            writeln!(
                o,
                "  {}: {}{model}",
                t(&d.name),
                d.bdf.map(|b| b.to_string()).unwrap_or_default()
            )?;
        }
    }
    let mut assumed = numa_assumed(m).peekable();
    if assumed.peek().is_some() {
        o.write_all(b"\nNUMA unknown across host bridges, NODE assumed: ")?;
        for (k, (i, j)) in assumed.enumerate() {
            let sep = if k == 0 { "" } else { ", " };
            write!(
                o,
                "{sep}{}-{}",
                t(&m.devices[i].name),
                t(&m.devices[j].name)
            )?;
        }
        o.write_all(b"\n")?;
    }
    write_gdr(gdr, o)
}

/// The GDR section of the human output: what NCCL does with each GPU, as `check` judges it,
/// with the sysfs level beside NCCL's where a topology file makes them differ.
fn write_gdr(gdr: &Gdr, o: &mut dyn Write) -> io::Result<()> {
    if gdr.gpus.is_empty() || gdr.gpus.iter().all(|g| g.verdict == Verdict::NoNic) {
        return Ok(());
    }
    let on = match &gdr.topology_file {
        Some(f) => format!(
            ", on the tree of its topology file {}",
            crate::sanitize::cut(f, 400)
        ),
        None => String::new(),
    };
    writeln!(
        o,
        "\nGPUDirect RDMA as NCCL decides it (NCCL_NET_GDR_LEVEL={}: {}{on}):\n",
        crate::sanitize::cut(&gdr.gdr_level, 100),
        crate::sanitize::cut(&gdr.gdr_level_origin, 400)
    )?;
    for g in &gdr.gpus {
        let nics: Vec<&str> = g.nics.iter().map(|n| n.name.as_str()).collect();
        let at = match (g.via, g.level, g.sysfs_level) {
            (Some(crate::nccl::effective::Via::C2c), _, Some(s)) => {
                format!(" over C2C (NCCL's P2C; sysfs {s})")
            }
            (_, Some(l), Some(s)) if s != l => format!(" at {l} (sysfs {s})"),
            (_, Some(l), _) => format!(" at {l}"),
            (_, None, _) => String::new(),
        };
        let at = match g.mode {
            Some(crate::nccl::c2c::Mode::Default) => format!("{at}, mode Default"),
            Some(crate::nccl::c2c::Mode::Pci) => format!("{at}, mode PCI"),
            None => at,
        };
        let (what, near) = match g.verdict {
            Verdict::Gdr => ("GDR", format!("{}{at}", nics.join(", "))),
            Verdict::NoGdr => ("no GDR", format!("{}{at}", nics.join(", "))),
            Verdict::Unknown if !nics.is_empty() => (
                "unknown",
                format!(
                    "{}{at}: NCCL's releases decide differently, and the node's is not known",
                    nics.join(", ")
                ),
            ),
            Verdict::Unknown => ("unknown", "no NIC with a known place".to_owned()),
            Verdict::NoNic => ("no GDR", "NCCL uses no RDMA NIC".to_owned()),
        };
        writeln!(o, "  {}: {what}: {near}", g.name)?;
    }
    Ok(())
}
