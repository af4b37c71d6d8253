//! The topology file (`NCCL_TOPO_FILE`): can NCCL load it, and does it describe this node?

use super::{
    TOPO_FILE_GDR_OFF, TOPO_FILE_INCOMPLETE, TOPO_FILE_INVALID, TOPO_FILE_MISSING, TOPO_FILE_OK,
    TOPO_FILE_STALE, TOPO_FILE_UNREADABLE,
};
use crate::inventory::Inventory;
use crate::inventory::nccl::{Setting, Topo, TopoState};
use crate::model::{Evidence, Finding, Fix};
use crate::nccl::params;
use crate::parse::nccl_topo::{BusidMatch, PciKind, Topology, busid_matches};

/// The topology file: can NCCL load it, and does it describe this node?
pub(super) fn judge(inv: &Inventory) -> Vec<Finding> {
    let Some(t) = &inv.nccl.topology else {
        return Vec::new();
    };
    let by = t.named();
    let mut named: Vec<Evidence> = t.named_by.iter().map(Setting::evidence).collect();
    let subject = t.path.clone();
    match &t.state {
        TopoState::Missing => vec![
            Finding::warn(
                TOPO_FILE_MISSING,
                subject,
                format!("{by} names {}, which is not there: NCCL logs that at INFO only and builds its tree from sysfs (see pcie-placement)", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), "<not found>")
            .fix(match &t.plugin {
                Some(p) => Fix::new(format!("Install aws-ofi-nccl's topology file for {} at {} ({}; the EFA installer's aws-ofi-nccl package has it)", p.platform, t.path, p.source), "Changes the tree every NCCL job builds."),
                None => Fix::new(format!("Install the file NCCL_TOPO_FILE names at {}, or remove the setting", t.path), "Changes the tree every NCCL job builds."),
            }.manual(format!("ls -l {}", crate::checks::sh(&t.path)))),
        ],
        TopoState::Relative => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names the relative path {}: NCCL opens it from each job's working directory, so what it reads is unknown", t.path),
            )
            .with(named),
        ],
        TopoState::Unreadable(e) => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names {}, which gdrdoctor cannot read: {}", t.path, e.reason()),
            )
            .with(named)
            .evidence(t.path.clone(), format!("<{}>", e.reason())),
        ],
        TopoState::Invalid(e) if e.nccl_refuses => vec![
            Finding::fail(
                TOPO_FILE_INVALID,
                subject,
                format!("{by} names {}, which NCCL cannot load ({e}): communicator initialisation fails, so every NCCL job on the node fails to start", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), format!("line {}: {}", e.line, e.message))
            .fix(Fix::new("Replace the file with the provider's (or a dump NCCL wrote with NCCL_TOPO_DUMP_FILE), or remove NCCL_TOPO_FILE", "Changes the tree every NCCL job builds.").manual(format!("sed -n '{}p' {}", e.line, crate::checks::sh(&t.path)))),
        ],
        TopoState::Invalid(e) => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names {}, which gdrdoctor will not judge ({e})", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), format!("line {}: {}", e.line, e.message)),
        ],
        TopoState::Parsed { topology, .. } => {
            let library = inv.nccl.library;
            let refusals = topology.refusals(library);
            if let Some((line, why)) = refusals.first() {
                let lib = library.name();
                named.push(Evidence {
                    path: t.path.clone(),
                    value: format!("line {line}: {why}"),
                });
                return vec![
                    Finding::fail(
                        TOPO_FILE_INVALID,
                        subject,
                        format!("{by} names {}, which {lib} refuses: {why}; communicator initialisation fails, so every {lib} job on the node fails to start", t.path),
                    )
                    .with(named)
                    .fix(Fix::new(format!("Replace the file with one for {lib} (version {}, as its NCCL_TOPO_DUMP_FILE writes it), or remove NCCL_TOPO_FILE", library.xml_version()), "Changes the tree every NCCL job builds.").manual(format!("head -3 {}", crate::checks::sh(&t.path)))),
                ];
            }
            matched(inv, t, topology, &by, named)
        }
    }
}
/// The file against the node: what it names that the node lacks, what it misses, GDR it turns
/// off.
fn matched(
    inv: &Inventory,
    t: &Topo,
    topo: &Topology,
    by: &str,
    named: Vec<Evidence>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let (stale, stale_ev) = stale(inv, t, topo);
    let used = crate::nccl::effective::nics(inv);
    let (missing, missing_ev) = missing(inv, topo, &used);
    let (off, off_ev) = gdr_off(t, topo);
    if !off.is_empty() {
        out.push(
            Finding::fail(
                TOPO_FILE_GDR_OFF,
                t.path.clone(),
                format!("the file says gdr=\"0\" for {}: NCCL keeps a value the file sets, so it never uses GPUDirect RDMA with them (a dump taken where peer memory was missing carries this)", off.join(", ")),
            )
            .with(named.clone())
            .with(off_ev)
            .fix(Fix::new("Remove the gdr attributes from the file (NCCL then detects GPUDirect RDMA itself), or use the provider's file", "Changes what every NCCL job on the node uses.").manual(format!("grep -n 'gdr=\"0\"' {}", crate::checks::sh(&t.path)))),
        );
    }
    if !stale.is_empty() {
        out.push(
            Finding::warn(
                TOPO_FILE_STALE,
                t.path.clone(),
                format!("the file names {} that this node does not have: it was written for another node or VM size (NCCL drops what it cannot find, and places this node's devices from sysfs)", stale.join(", ")),
            )
            .with(named.clone())
            .with(stale_ev)
            .fix(Fix::new("Use the topology file made for this node's model or VM size", "Changes the tree every NCCL job builds.").manual(format!("grep -n busid {}", crate::checks::sh(&t.path)))),
        );
    }
    if !missing.is_empty() {
        out.push(
            Finding::warn(
                TOPO_FILE_INCOMPLETE,
                t.path.clone(),
                format!("the file misses {}: NCCL places {} from sysfs (see pcie-placement for where that puts them)", missing.join(", "), if missing.len() == 1 { "it" } else { "them" }),
            )
            .with(named.clone())
            .with(missing_ev)
            .fix(Fix::new("Use a topology file that names every GPU and NIC of this node", "Changes the tree every NCCL job builds.").manual("gdrdoctor topo   # the node's GPUs and NICs")),
        );
    }
    if out.is_empty() {
        let gpus = inv.gpus.len();
        let nics = used.len();
        out.push(
            Finding::pass(
                TOPO_FILE_OK,
                t.path.clone(),
                format!(
                    "topology file {}: NCCL loads it ({by}) and finds {gpus} GPU{} and {nics} NIC{} of this node in it",
                    t.path,
                    if gpus == 1 { "" } else { "s" },
                    if nics == 1 { "" } else { "s" }
                ),
            )
            .with(named)
            .evidence(t.path.clone(), format!("{} cpu, {} pci elements", topo.cpus.len(), topo.pcis.len())),
        );
    }
    out
}

/// Evidence that points at a line of the file.
fn line_ev(t: &Topo, line: usize, what: String) -> Evidence {
    Evidence {
        path: t.path.clone(),
        value: format!("line {line}: {what}"),
    }
}

/// The GPUs and NICs the file names that this node lacks, by bus ID (a NIC also by its name).
fn stale(inv: &Inventory, t: &Topo, topo: &Topology) -> (Vec<String>, Vec<Evidence>) {
    let node_has = |busid: &str| {
        inv.pci
            .keys()
            .any(|b| busid_matches(busid, *b) == BusidMatch::Exact)
    };
    let mut stale = Vec::new();
    let mut stale_ev = Vec::new();
    for p in &topo.pcis {
        let Some(busid) = p.busid.as_deref() else {
            continue;
        };
        let named_nic = p.nets.iter().any(|n| {
            n.name
                .as_deref()
                .is_some_and(|name| inv.rdma.iter().any(|d| d.name == name))
        });
        let kind = match p.kind {
            PciKind::Gpu => "GPU",
            PciKind::Nic => "NIC",
            _ => continue,
        };
        if !node_has(busid) && !named_nic {
            stale.push(format!("{kind} {busid} (line {})", p.line));
            stale_ev.push(line_ev(
                t,
                p.line,
                format!("{kind} {busid}: not on this node"),
            ));
        }
    }
    (stale, stale_ev)
}

/// The node's GPUs and the NICs NCCL uses that the file does not name.
fn missing(inv: &Inventory, topo: &Topology, used: &[usize]) -> (Vec<String>, Vec<Evidence>) {
    let mut missing = Vec::new();
    let mut missing_ev = Vec::new();
    for g in &inv.gpus {
        if topo.pci_by_busid(&g.bdf.to_string()).is_none() {
            let case = topo.pcis.iter().find(|p| {
                p.busid
                    .as_deref()
                    .is_some_and(|b| busid_matches(b, g.bdf) == BusidMatch::Differently)
            });
            missing.push(match case {
                Some(p) => format!(
                    "GPU {} (line {} writes {}: NCCL compares bus IDs exactly, in lower case)",
                    g.bdf,
                    p.line,
                    p.busid.as_deref().unwrap_or("")
                ),
                None => format!("GPU {}", g.bdf),
            });
            if let Some(f) = inv.function(g.bdf) {
                missing_ev.push(Evidence {
                    path: f.path.clone(),
                    value: "GPU: not in the topology file".into(),
                });
            }
        }
    }
    for &i in used {
        let d = &inv.rdma[i];
        let by_name = topo.net_by_name(&d.name).is_some();
        let by_busid = d
            .pci
            .is_some_and(|b| topo.pci_by_busid(&b.to_string()).is_some());
        if !by_name && !by_busid {
            missing.push(format!(
                "NIC {}{}",
                d.name,
                d.pci.map(|b| format!(" {b}")).unwrap_or_default()
            ));
            missing_ev.push(Evidence {
                path: d.class_path(),
                value: "RDMA device: not in the topology file".into(),
            });
        }
    }
    (missing, missing_ev)
}

/// The GPUs and NICs the file marks gdr="0": NCCL sets the attribute only when it is absent
/// (src/graph/topo.cc xmlInitAttrInt), so the file's 0 stands.
fn gdr_off(t: &Topo, topo: &Topology) -> (Vec<String>, Vec<Evidence>) {
    let mut off = Vec::new();
    let mut off_ev = Vec::new();
    for p in &topo.pcis {
        if let Some((line, Some(g))) = &p.gpu {
            if params::nccl_int(g).0 == 0 {
                off.push(format!(
                    "GPU {} (line {line})",
                    p.busid.as_deref().unwrap_or("?")
                ));
                off_ev.push(line_ev(t, *line, format!("<gpu gdr=\"{g}\">")));
            }
        }
        for n in &p.nets {
            if let Some(g) = &n.gdr {
                if params::nccl_int(g).0 == 0 {
                    off.push(format!(
                        "NIC {} (line {})",
                        n.name.as_deref().unwrap_or("?"),
                        n.line
                    ));
                    off_ev.push(line_ev(t, n.line, format!("<net gdr=\"{g}\">")));
                }
            }
        }
    }
    (off, off_ev)
}
