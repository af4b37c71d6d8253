//! What NCCL's settings on this node do to GPUDirect RDMA: the GDR level in force, the NICs it
//! uses, and where each GPU's nearest NICs are in the tree it builds. The checks, `gdrdoctor
//! nccl` and the fleet view all ask here, so that they agree.

use super::params::{self, GdrLimit, HcaList, LevelValue};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::inventory::nccl::{Setting, Topo};
use crate::model::Level;
use crate::parse::pci::Bdf;
use crate::placement::{Route, route};

/// The GDR level NCCL runs with on this node, and why.
#[derive(Debug, Clone)]
pub struct Policy {
    pub limit: GdrLimit,
    pub source: PolicySource,
}

#[derive(Debug, Clone)]
pub enum PolicySource {
    /// `thresholds.gdr_level` of the config (PXB, NCCL's default, unless the site changed it).
    Config,
    /// `NCCL_NET_GDR_LEVEL` as set on the node or in the declared environment.
    Nccl(Setting),
}

impl Policy {
    /// ` (NCCL_NET_GDR_LEVEL's default)`, ` (NCCL_NET_GDR_LEVEL=PHB from /etc/nccl.conf line 2)`.
    pub fn origin(&self) -> String {
        match &self.source {
            PolicySource::Config if self.limit == GdrLimit::Upto(Level::Pxb) => {
                "NCCL_NET_GDR_LEVEL's default".into()
            }
            PolicySource::Config => "NCCL_NET_GDR_LEVEL per the config".into(),
            PolicySource::Nccl(s) => format!(
                "NCCL_NET_GDR_LEVEL={} from {}",
                s.value,
                s.origin.describe()
            ),
        }
    }
}

/// The level in force: `NCCL_NET_GDR_LEVEL` when NCCL can read the value set, else the
/// config's `thresholds.gdr_level` (the level the site says it runs NCCL with).
pub fn policy(inv: &Inventory, config: &Config) -> Policy {
    if let Some(s) = inv.nccl.get("NCCL_NET_GDR_LEVEL") {
        if let LevelValue::Named(l) | LevelValue::Numbered(l) = params::gdr_level(&s.value) {
            return Policy {
                limit: l,
                source: PolicySource::Nccl(s.clone()),
            };
        }
    }
    Policy {
        limit: GdrLimit::Upto(config.thresholds.gdr_level),
        source: PolicySource::Config,
    }
}

/// The RDMA devices NCCL uses (indices into `inv.rdma`): those `NCCL_IB_HCA` selects, all
/// without it.
pub fn nics(inv: &Inventory) -> Vec<usize> {
    let list = inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse);
    (0..inv.rdma.len())
        .filter(|&i| {
            let d = &inv.rdma[i];
            list.as_ref().is_none_or(|l| {
                if d.ports.is_empty() {
                    l.selects(&d.name, None)
                } else {
                    d.ports.iter().any(|p| l.selects(&d.name, Some(p.num)))
                }
            })
        })
        .collect()
}

/// One NIC as a GPU's candidate.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Index into `inv.rdma`.
    pub nic: usize,
    /// The distance NCCL uses: on its tree when a topology file is in effect, else sysfs's.
    pub level: Level,
    /// The sysfs route, when both have PCI functions.
    pub sysfs: Option<Route>,
    /// The topology file's lines for the GPU and the NIC (`None`: placed from sysfs).
    pub lines: Option<(Option<usize>, Option<usize>)>,
}

/// A GPU and its nearest NICs as NCCL will see them.
#[derive(Debug, Clone)]
pub struct Nearest {
    pub gpu: Bdf,
    pub level: Level,
    pub nics: Vec<Candidate>,
}

/// What the placement is judged on.
#[derive(Debug, Clone, Copy)]
pub enum Basis<'a> {
    /// NCCL reads sysfs (no topology file, or one it cannot use).
    Sysfs,
    /// NCCL builds its tree from this file.
    File(&'a Topo),
}

/// Each GPU's nearest NICs among those NCCL uses; `None` for a GPU with no NIC it can place.
pub fn nearest(inv: &Inventory) -> (Basis<'_>, Vec<(Bdf, Option<Nearest>)>) {
    let nics = nics(inv);
    let Some((topo, topology)) = inv.nccl.topology() else {
        // sysfs: gdrdoctor's own places, among the NICs NCCL uses.
        let near = crate::placement::nearest_among(inv, &nics)
            .into_iter()
            .map(|(gpu, n)| {
                let n = n.map(|n| Nearest {
                    gpu,
                    level: n.level,
                    nics: n
                        .nics
                        .into_iter()
                        .map(|(i, r)| Candidate {
                            nic: i,
                            level: r.level,
                            sysfs: Some(r),
                            lines: None,
                        })
                        .collect(),
                });
                (gpu, n)
            })
            .collect();
        return (Basis::Sysfs, near);
    };
    let tree = super::tree::Tree::build(inv, topology, &nics);
    let out = inv
        .gpus
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let Some(gp) = tree.gpus[gi] else {
                return (g.bdf, None);
            };
            let all: Vec<Candidate> = nics
                .iter()
                .filter_map(|&i| {
                    let np = tree.nics[i]?;
                    Some(Candidate {
                        nic: i,
                        level: tree.level(gp, np),
                        sysfs: inv.rdma[i].pci.and_then(|b| route(inv, g.bdf, b)),
                        lines: Some((gp.line, np.line)),
                    })
                })
                .collect();
            let best = all.iter().map(|c| c.level).min();
            let near = best.map(|level| Nearest {
                gpu: g.bdf,
                level,
                nics: all.into_iter().filter(|c| c.level == level).collect(),
            });
            (g.bdf, near)
        })
        .collect();
    (Basis::File(topo), out)
}
