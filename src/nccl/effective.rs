//! What NCCL's settings on this node do to GPUDirect RDMA: the GDR level in force, the NICs it
//! uses, and where each GPU's nearest NICs are in the tree it builds. The checks, `gdrdoctor
//! nccl` and the fleet view all ask here, so that they agree.

use super::c2c;
use super::params::{self, GdrLimit, HcaList, LevelValue};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::inventory::nccl::{Setting, Topo};
use crate::model::Level;
use crate::parse::nccl_log::Version;
use crate::parse::pci::Bdf;
use crate::placement::{Route, route};
use serde::Serialize;

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
    /// `NCCL_NET_GDR_LEVEL` as a run of NCCL says it had it (`nccl verify`'s log).
    Run(String),
}

impl Policy {
    /// The value NCCL_NET_GDR_LEVEL has in force: `PXB`, or as the node's settings write it.
    pub fn value(&self) -> String {
        match (&self.source, self.limit) {
            (PolicySource::Nccl(s), _) => s.value.clone(),
            (PolicySource::Run(v), _) => v.clone(),
            (PolicySource::Config, GdrLimit::Upto(l)) => l.as_str().to_owned(),
            (PolicySource::Config, GdrLimit::Never) => "LOC".to_owned(),
        }
    }

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
            PolicySource::Run(v) => format!("NCCL_NET_GDR_LEVEL={v} in NCCL's environment"),
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

/// Which network carries NCCL's traffic on this node: aws-ofi-nccl (EFA devices, NCCL_IB_HCA
/// does not apply), or NCCL's own InfiniBand/RoCE transport (or a plugin of the same devices,
/// IBext), which skips EFA: net_ib opens InfiniBand and Ethernet ports only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Network {
    AwsOfi,
    Ib,
}

/// The network NCCL uses here: aws-ofi-nccl when NCCL loads it and the node has EFA devices.
pub fn network(inv: &Inventory) -> Network {
    if inv.nccl.plugin.aws_ofi().is_some() && inv.rdma.iter().any(|d| d.is_efa()) {
        Network::AwsOfi
    } else {
        Network::Ib
    }
}

/// Whether NCCL's network reaches device `d` at all.
fn reaches(net: Network, d: &crate::inventory::RdmaDevice) -> bool {
    match net {
        Network::AwsOfi => d.is_efa(),
        Network::Ib => !d.is_efa(),
    }
}

/// The RDMA devices NCCL's network can open at all (indices into `inv.rdma`), whatever
/// `NCCL_IB_HCA` and their ports' state say: the EFA devices for aws-ofi-nccl, the others for
/// NCCL's own transport.
pub fn reachable(inv: &Inventory) -> Vec<usize> {
    let net = network(inv);
    (0..inv.rdma.len())
        .filter(|&i| reaches(net, &inv.rdma[i]))
        .collect()
}

/// The RDMA devices NCCL uses (indices into `inv.rdma`): aws-ofi-nccl's EFA devices, or those
/// `NCCL_IB_HCA` selects among the ones NCCL's transport opens (all without it).
pub fn nics(inv: &Inventory) -> Vec<usize> {
    let net = network(inv);
    let list = (net == Network::Ib)
        .then(|| inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse))
        .flatten();
    (0..inv.rdma.len())
        .filter(|&i| {
            let d = &inv.rdma[i];
            reaches(net, d)
                && (d.ports.is_empty() && list.as_ref().is_none_or(|l| l.selects(&d.name, None))
                    || d.ports
                        .iter()
                        .any(|p| selected(list.as_ref(), &d.name, p.num)))
        })
        .collect()
}

/// The RDMA devices NCCL's traffic can go through now (indices into `inv.rdma`): an ACTIVE
/// port that NCCL uses ([`nics`]). NCCL opens ACTIVE ports only.
pub fn carrying(inv: &Inventory) -> Vec<usize> {
    let net = network(inv);
    let list = (net == Network::Ib)
        .then(|| inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse))
        .flatten();
    (0..inv.rdma.len())
        .filter(|&i| {
            let d = &inv.rdma[i];
            reaches(net, d)
                && d.ports
                    .iter()
                    .any(|p| p.is_active() && selected(list.as_ref(), &d.name, p.num))
        })
        .collect()
}

/// Whether `NCCL_IB_HCA` (`list`, when set) selects port `port` of `device`.
fn selected(list: Option<&HcaList>, device: &str, port: u32) -> bool {
    list.is_none_or(|l| l.selects(device, Some(port)))
}

/// How NCCL's path from a GPU to a NIC runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Via {
    /// PCIe all the way (through the CPU when they share no switch).
    Pcie,
    /// NVLink-C2C from the GPU to its CPU, then the CPU's PCIe to the NIC: NCCL's P2C (2.27
    /// and later; PHB before), judged by NCCL's C2C rule (`super::c2c`).
    C2c,
}

/// One NIC as a GPU's candidate.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Index into `inv.rdma`.
    pub nic: usize,
    /// The distance NCCL uses: on its tree when a topology file is in effect, else sysfs's.
    pub level: Level,
    /// Whether NCCL reaches the NIC through the GPU's NVLink-C2C.
    pub via: Via,
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

impl Nearest {
    /// The sysfs levels of the nearest NICs, nearest first, each once: beside NCCL's level
    /// where a topology file makes them differ.
    pub fn sysfs_levels(&self) -> Vec<Level> {
        let mut levels: Vec<Level> = self
            .nics
            .iter()
            .filter_map(|c| c.sysfs.as_ref().map(|r| r.level))
            .collect();
        levels.sort();
        levels.dedup();
        levels
    }
}

/// What the placement is judged on.
#[derive(Debug, Clone, Copy)]
pub enum Basis<'a> {
    /// NCCL reads sysfs (no topology file, or one it cannot use).
    Sysfs,
    /// NCCL builds its tree from this file.
    File(&'a Topo),
}

/// Whether NCCL uses GPUDirect RDMA for a GPU (with its nearest NICs) or for one GPU-NIC pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Within the GDR level in force: NCCL uses GPUDirect RDMA.
    Gdr,
    /// Beyond it, or the level turns GDR off: NCCL stages through host memory.
    NoGdr,
    /// No NIC NCCL uses has a known place relative to the GPU.
    Unknown,
    /// NCCL uses no RDMA NIC on this node (there is none, or `NCCL_IB_HCA` selects none).
    NoNic,
}

/// One GPU as NCCL runs it.
#[derive(Debug, Clone)]
pub struct GpuGdr {
    pub gpu: Bdf,
    /// Its nearest NICs among those NCCL uses, at NCCL's level; `None` when none can be placed.
    pub nearest: Option<Nearest>,
    pub verdict: Verdict,
    /// Where the nearest NICs are reached through NVLink-C2C: NCCL's C2C rule for the node's
    /// release (`Err`: the release is not known and the releases decide differently).
    pub c2c: Option<Result<c2c::Decision, Vec<c2c::Decision>>>,
    /// How NCCL moves the data under GDR on a C2C system (2.26 and later): over C2C, or forced
    /// through PCIe (a C2C GPU and a NIC under one switch).
    pub mode: Option<c2c::Mode>,
}

/// What NCCL does about GPUDirect RDMA on this node: the one judgement `pcie-placement`,
/// `topo` (every format), the pictures, `fleet --pictures`, `gdrdoctor nccl` and `nccl verify`
/// all read (issue 25: the pictures judged on sysfs and the config's level while the check
/// judged on NCCL's topology file, and said "no GDR" for pairs the check passed).
#[derive(Debug, Clone)]
pub struct Judgement<'a> {
    pub policy: Policy,
    pub basis: Basis<'a>,
    /// The RDMA devices NCCL uses (indices into `inv.rdma`).
    pub nics: Vec<usize>,
    /// Per `inv.gpus`, in its order.
    pub gpus: Vec<GpuGdr>,
    /// NCCL's tree, when a topology file is in effect.
    tree: Option<super::tree::Tree>,
    /// The NCCL release the decision is for (`None`: not known).
    pub release: Option<Version>,
    /// `NCCL_NET_GDR_C2C` and the level, as NCCL's C2C rule reads them.
    pub c2c_input: c2c::Input,
}

impl Judgement<'_> {
    /// The one rule: NCCL uses GPUDirect RDMA between a GPU and a NIC at `level` (NCCL's level,
    /// from its tree or from sysfs) when the GDR level in force admits it.
    pub fn verdict(&self, level: Level) -> Verdict {
        if self.policy.limit.admits(level) {
            Verdict::Gdr
        } else {
            Verdict::NoGdr
        }
    }

    /// NCCL's decision for one pair as placed ([`Judgement::pair`]): NCCL's C2C rule for the
    /// node's release where it reaches the NIC over NVLink-C2C (unknown where the release is not
    /// known and the releases differ), else the GDR level in force.
    pub fn pair_verdict(&self, c: &Candidate) -> Verdict {
        match c.via {
            Via::C2c => match c2c::decide_for(self.release, &self.c2c_input) {
                Ok(d) if d.gdr => Verdict::Gdr,
                Ok(_) => Verdict::NoGdr,
                Err(_) => Verdict::Unknown,
            },
            Via::Pcie => self.verdict(c.level),
        }
    }

    /// One GPU-NIC pair (indices into `inv.gpus` and `inv.rdma`) as NCCL places it, whether or
    /// not the NIC is the GPU's nearest; `None` when either has no place, or NCCL does not use
    /// the NIC.
    pub fn pair(&self, inv: &Inventory, gpu: usize, nic: usize) -> Option<Candidate> {
        if !self.nics.contains(&nic) {
            return None;
        }
        let g = inv.gpus.get(gpu)?;
        let sysfs = inv.rdma.get(nic)?.pci.and_then(|b| route(inv, g.bdf, b));
        match &self.tree {
            Some(tree) => {
                let (gp, np) = (tree.gpus.get(gpu).copied()??, tree.nics.get(nic).copied()??);
                let level = tree.level(gp, np);
                Some(Candidate {
                    nic,
                    level,
                    via: via(g, level),
                    sysfs,
                    lines: Some((gp.line, np.line)),
                })
            }
            None => {
                let level = sysfs.as_ref()?.level;
                Some(Candidate {
                    nic,
                    level,
                    via: via(g, level),
                    sysfs,
                    lines: None,
                })
            }
        }
    }

    /// Each GPU with each of its nearest NICs, and the sysfs route between them: the PCIe
    /// paths the traffic of the pairs NCCL uses crosses (the acs check judges their bridges,
    /// the pictures mark them). A NIC without a PCI function has no route and is left out; so
    /// is a NIC reached over NVLink-C2C, whose traffic goes to the CPU, not peer to peer across
    /// the bridges between them ([`Judgement::c2c_pairs`]).
    pub fn paths(&self) -> impl Iterator<Item = (Bdf, usize, &Route)> + '_ {
        self.gpus.iter().flat_map(|g| {
            g.nearest
                .iter()
                .flat_map(|n| &n.nics)
                .filter(|c| c.via == Via::Pcie)
                .filter_map(move |c| Some((g.gpu, c.nic, c.sysfs.as_ref()?)))
        })
    }

    /// Each GPU with each of its nearest NICs reached over NVLink-C2C, and the sysfs route.
    pub fn c2c_pairs(&self) -> impl Iterator<Item = (Bdf, usize, Option<&Route>)> + '_ {
        self.gpus.iter().flat_map(|g| {
            g.nearest
                .iter()
                .flat_map(|n| &n.nics)
                .filter(|c| c.via == Via::C2c)
                .map(move |c| (g.gpu, c.nic, c.sysfs.as_ref()))
        })
    }
}

/// The way NCCL's path from GPU `g` runs to a NIC at `level` (NCCL's): through the GPU's C2C
/// link when it has one up and the pair meets only in the CPU (PHB to NCCL: one CPU per NUMA
/// node, so sysfs's NODE too), where NCCL's P2C rule applies.
fn via(g: &crate::inventory::Gpu, level: Level) -> Via {
    let c2c = g.c2c.as_ref().is_some_and(|c| c.active);
    if c2c && params::nccl_view(level) == Level::Phb {
        Via::C2c
    } else {
        Via::Pcie
    }
}

/// What NCCL's C2C rule reads of the settings in force: `NCCL_NET_GDR_C2C`, and the level
/// (`None` where it is NCCL's default: the config's PXB stands for it).
fn c2c_input(inv: &Inventory, policy: &Policy) -> c2c::Input {
    let level = match (&policy.source, policy.limit) {
        (PolicySource::Nccl(s), _) => Some(s.value.clone()),
        (PolicySource::Run(v), _) => Some(v.clone()),
        (PolicySource::Config, GdrLimit::Upto(Level::Pxb)) => None,
        (PolicySource::Config, _) => Some(policy.value()),
    };
    c2c::Input {
        value: inv.nccl.value("NCCL_NET_GDR_C2C").map(str::to_owned),
        level,
    }
}

/// NCCL's judgement on this node under the GDR level in force ([`policy`]).
pub fn judge<'a>(inv: &'a Inventory, config: &Config) -> Judgement<'a> {
    judge_under(inv, policy(inv, config))
}

/// NCCL's judgement under `policy`: `gdrdoctor nccl` asks what NCCL's default does, `nccl
/// verify` what the level of the run it made does. The release is the node's
/// (`inv.nccl.release`).
pub fn judge_under(inv: &Inventory, policy: Policy) -> Judgement<'_> {
    let release = inv.nccl.release.as_ref().map(|r| r.version);
    judge_release(inv, policy, release)
}

/// [`judge_under`] for a release known otherwise (`gdrdoctor nccl` asks the library,
/// `nccl verify` reads its run's log).
pub fn judge_release(inv: &Inventory, policy: Policy, release: Option<Version>) -> Judgement<'_> {
    let c2c_input = c2c_input(inv, &policy);
    let nics = nics(inv);
    let (basis, tree, near) = match inv.nccl.topology() {
        None => (Basis::Sysfs, None, sysfs_nearest(inv, &nics)),
        Some((topo, topology)) => {
            let tree = super::tree::Tree::build(inv, topology, &nics);
            let near = file_nearest(inv, &tree, &nics);
            (Basis::File(topo), Some(tree), near)
        }
    };
    let mut j = Judgement {
        policy,
        basis,
        nics,
        gpus: Vec::new(),
        tree,
        release,
        c2c_input,
    };
    let none = j.nics.is_empty();
    j.gpus = near
        .into_iter()
        .map(|(gpu, nearest)| {
            let c2c_gpu = inv
                .gpus
                .iter()
                .find(|g| g.bdf == gpu)
                .and_then(|g| g.c2c.as_ref())
                .is_some_and(|c| c.active);
            let over_c2c = nearest
                .as_ref()
                .is_some_and(|n| n.nics.iter().any(|c| c.via == Via::C2c));
            let c2c = over_c2c.then(|| c2c::decide_for(j.release, &j.c2c_input));
            let verdict = match (&nearest, &c2c) {
                _ if none => Verdict::NoNic,
                (None, _) => Verdict::Unknown,
                (Some(_), Some(Ok(d))) if d.gdr => Verdict::Gdr,
                (Some(_), Some(Ok(_))) => Verdict::NoGdr,
                (Some(_), Some(Err(_))) => Verdict::Unknown,
                (Some(n), None) => j.verdict(n.level),
            };
            let mode = match (&c2c, verdict) {
                (_, v) if v != Verdict::Gdr => None,
                (Some(Ok(d)), _) => d.mode,
                // A C2C GPU's GDR over PCIe alone (a NIC under its own switch): mode PCI.
                (None, _) if c2c_gpu => c2c::pcie_mode(j.release),
                _ => None,
            };
            GpuGdr {
                gpu,
                nearest,
                verdict,
                c2c,
                mode,
            }
        })
        .collect();
    j
}

/// sysfs: gdrdoctor's own places, among the NICs NCCL uses.
fn sysfs_nearest(inv: &Inventory, nics: &[usize]) -> Vec<(Bdf, Option<Nearest>)> {
    crate::placement::nearest_among(inv, nics)
        .into_iter()
        .zip(&inv.gpus)
        .map(|((gpu, n), g)| {
            let n = n.map(|n| Nearest {
                gpu,
                level: n.level,
                nics: n
                    .nics
                    .into_iter()
                    .map(|(i, r)| Candidate {
                        nic: i,
                        level: r.level,
                        via: via(g, r.level),
                        sysfs: Some(r),
                        lines: None,
                    })
                    .collect(),
            });
            (gpu, n)
        })
        .collect()
}

/// NCCL's tree from a topology file.
fn file_nearest(
    inv: &Inventory,
    tree: &super::tree::Tree,
    nics: &[usize],
) -> Vec<(Bdf, Option<Nearest>)> {
    inv.gpus
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
                    let level = tree.level(gp, np);
                    Some(Candidate {
                        nic: i,
                        level,
                        via: via(g, level),
                        sysfs: inv.rdma[i].pci.and_then(|b| route(inv, g.bdf, b)),
                        lines: Some((gp.line, np.line)),
                    })
                })
                .collect();
            // NCCL's local NICs on its tree: the most bandwidth, then the shortest path.
            let ranked: Vec<(usize, Option<f64>, Level)> = all
                .iter()
                .map(|c| {
                    let bw = crate::placement::gpu_nic_bandwidth(inv, g.bdf, c.nic);
                    (c.nic, bw, c.level)
                })
                .collect();
            let best = crate::placement::local(&ranked);
            let near = best.first().map(|&(_, level)| Nearest {
                gpu: g.bdf,
                level,
                nics: all
                    .into_iter()
                    .filter(|c| best.iter().any(|(i, _)| *i == c.nic))
                    .collect(),
            });
            (g.bdf, near)
        })
        .collect()
}
