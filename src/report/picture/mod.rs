//! What the pictures of a node (`topo --format svg` and `--format dot`, `fleet --pictures`) show:
//! the PCIe tree from the host bridges down to every GPU and RDMA NIC, the GPU-NIC pairs NCCL
//! uses for GPUDirect RDMA with their level, and the bridges whose ACS redirects peer-to-peer
//! traffic on a GPU-NIC path, and the GPUs joined by NVLink. It is worked out once here, from
//! the placement and the ACS judgement the checks use (`nccl::effective::judge`,
//! `placement::roles`, `acs::redirecting`, `placement::numa_affinity`, `Runtime::nvlinks`);
//! `svg/` lays it out and draws it, `dot.rs` writes it for Graphviz.
//!
//! It is linear in the devices: only the functions on a GPU's or NIC's sysfs path are in the
//! tree, and only each GPU's nearest NICs are looked at, never the N x N matrix (a node with
//! 5,000 GPUs is some 10,000 boxes). The NVLink groups are quadratic in a group's GPUs only,
//! and a group is what NVML sees of one node (8 GPUs on an HGX board).

use crate::checks::acs;
use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::gpu::Runtime;
use crate::nccl::effective::{self, Basis, Judgement, Nearest, Verdict};
use crate::nccl::params::GdrLimit;
use crate::parse::cpulist;
use crate::parse::pci::{Bdf, path_functions};
use crate::placement::{self, Level, Role};
use std::collections::{BTreeMap, BTreeSet};

/// The node's PCIe tree, its GDR pairs and its ACS redirects.
#[derive(Debug)]
pub struct Picture {
    pub title: Title,
    /// NCCL_NET_GDR_LEVEL as NCCL runs with it (`PXB`; the value the node's NCCL settings
    /// give, else the config's `thresholds.gdr_level`): the pairs within it are drawn.
    pub gdr_level: String,
    /// NCCL's topology file, when the levels are those of the tree NCCL builds from it.
    pub topology_file: Option<String>,
    /// Sorted by NUMA node (unknown last), then name, so that a NUMA node's host bridges sit
    /// side by side.
    pub host_bridges: Vec<HostBridge>,
    /// Every function on the sysfs path of a GPU or an RDMA NIC, each parent before its
    /// children (the layout relies on it); children sorted by address.
    pub nodes: Vec<Node>,
    /// Each GPU with its nearest NIC(s), where NCCL uses GPUDirect RDMA with them (as `check`
    /// judges it: `effective::judge`). Sorted by GPU, then NIC.
    pub pairs: Vec<Pair>,
    /// What the tree cannot show: GPUs whose nearest NIC is beyond the policy, devices without
    /// a place on the tree.
    pub notes: Vec<String>,
    /// The GPUs joined by NVLink, each connected set once, sorted by its first GPU.
    pub nvlink_groups: Vec<NvGroup>,
    pub gpus: usize,
    pub nics: usize,
}

/// What the picture is of. Every string here comes from the node: untrusted, escaped by each
/// writer.
#[derive(Debug)]
pub struct Title {
    /// The root as given (`/` when live).
    pub root: String,
    pub hostname: Option<String>,
    /// The DMI vendor and product.
    pub product: Option<String>,
}

/// A PCIe host bridge (`pci0000:17`): the top of one tree.
#[derive(Debug)]
pub struct HostBridge {
    pub name: String,
    /// The NUMA nodes of the devices below it (`placement::numa_affinity`, the rule of
    /// `topo`'s NUMA Affinity column), sorted; empty when unknown.
    pub numa: Vec<u32>,
    /// Indices into `Picture::nodes`.
    pub children: Vec<usize>,
}

#[derive(Debug)]
pub struct Node {
    pub bdf: Bdf,
    pub what: What,
    /// Indices into `Picture::nodes`, sorted by address.
    pub children: Vec<usize>,
    /// 1 right below the host bridge.
    pub depth: usize,
}

#[derive(Debug)]
pub enum What {
    Gpu {
        /// `GPU0`, as `topo` names it.
        name: String,
        model: Option<String>,
        /// Why NCCL runs this GPU without GPUDirect RDMA (`nearest NIC at SYS`), if it does.
        no_gdr: Option<String>,
    },
    /// One PCI function can be several RDMA devices: `(NIC0, mlx5_0)` each.
    Nic { devices: Vec<(String, String)> },
    Bridge {
        role: Role,
        redirect: Option<Redirect>,
    },
}

/// A bridge whose ACS redirects peer-to-peer traffic, on the path of some GPU-NIC pair.
#[derive(Debug)]
pub struct Redirect {
    /// ACS Control.
    pub control: u16,
    /// The redirecting bits set (`ReqRedir`, `CmpltRedir`, `EgressCtrl`).
    pub bits: Vec<&'static str>,
    /// The pairs whose path crosses it (`GPU 0000:03:00.0 - mlx5_0`).
    pub pairs: Vec<String>,
}

/// GPUs joined by NVLink, directly or through NVSwitches: one connected set of the picture's
/// GPUs, drawn as one group rather than a line per pair (4 GPUs make 6 pairs, 8 make 28).
#[derive(Debug, PartialEq, Eq)]
pub struct NvGroup {
    /// Indices into `Picture::nodes`, in address order; two or more.
    pub gpus: Vec<usize>,
    /// The link count (`NV18`) most of its pairs have, the larger on a tie; 0 when most pairs
    /// have no NVLink between them (a chain, a ring).
    pub links: u32,
    /// The pairs whose count is not `links` (0: no NVLink between them), as (GPU, GPU, count)
    /// with the GPUs in address order; empty when every pair has `links`.
    pub other: Vec<(usize, usize, u32)>,
}

/// A GPU and a nearest NIC NCCL uses GPUDirect RDMA with.
#[derive(Debug)]
pub struct Pair {
    /// Indices into `Picture::nodes`.
    pub gpu: usize,
    pub nic: usize,
    /// NCCL's level: on its tree when a topology file is in effect.
    pub level: Level,
    /// The sysfs level, where it differs from `level`.
    pub sysfs: Option<Level>,
    /// Its path crosses a bridge whose ACS redirects.
    pub redirected: bool,
    /// NCCL reaches the NIC through the GPU's NVLink-C2C (its P2C): `level` is sysfs's.
    pub c2c: bool,
}

impl Pair {
    /// `PIX`, `PIX (sysfs NODE)` where sysfs places the pair elsewhere than NCCL's tree, or
    /// `C2C (sysfs NODE)` where NCCL reaches the NIC over NVLink-C2C.
    pub fn label(&self) -> String {
        match (self.c2c, self.sysfs) {
            (true, _) => format!("C2C (sysfs {})", self.level),
            (false, Some(s)) => format!("{} (sysfs {s})", self.level),
            (false, None) => self.level.to_string(),
        }
    }
}

/// What kinds of thing a picture draws: its legend explains these and no others (issue 24: a
/// machine without a NIC had NIC, ACS and PIX..SYS entries).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Drawn {
    pub gpu: bool,
    pub gpu_no_gdr: bool,
    pub nic: bool,
    pub bridge: bool,
    pub host_bridge: bool,
    pub switch: bool,
    pub redirect: bool,
    /// The levels of the GPU-NIC pairs drawn.
    pub levels: BTreeSet<Level>,
    pub redirected_pair: bool,
    /// A pair whose sysfs level differs from NCCL's (a topology file in effect).
    pub sysfs_differs: bool,
    /// A pair NCCL reaches over NVLink-C2C.
    pub c2c: bool,
    pub nvlink_group: bool,
    /// A pair of an NVLink group with another count than the group's.
    pub nvlink_other: bool,
}

impl HostBridge {
    /// `NUMA node 0`, `NUMA nodes 0-1`, `NUMA node unknown`.
    pub fn numa_label(&self) -> String {
        match self.numa.len() {
            0 => "NUMA node unknown".into(),
            1 => format!("NUMA node {}", self.numa[0]),
            _ => format!("NUMA nodes {}", cpulist::format(self.numa.clone())),
        }
    }

    /// `NUMA 0`, `NUMA 0-1`, `NUMA ?`: for a box.
    pub fn numa_short(&self) -> String {
        if self.numa.is_empty() {
            "NUMA ?".into()
        } else {
            format!("NUMA {}", cpulist::format(self.numa.clone()))
        }
    }
}

impl Picture {
    /// `NCCL_NET_GDR_LEVEL=PXB`, and the topology file whose tree the levels are on.
    pub fn judged_on(&self) -> String {
        match &self.topology_file {
            Some(f) => format!(
                "NCCL_NET_GDR_LEVEL={} on the tree of NCCL's topology file {f}",
                self.gdr_level
            ),
            None => format!("NCCL_NET_GDR_LEVEL={}", self.gdr_level),
        }
    }

    /// The switches drawn as one: each upstream port (an index into `nodes`) with a downstream
    /// port below it.
    pub fn switches(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.iter().enumerate().filter_map(|(i, n)| {
            let upstream = matches!(
                n.what,
                What::Bridge {
                    role: Role::SwitchUpstream,
                    ..
                }
            );
            let downstream = n.children.iter().any(|&c| {
                matches!(
                    self.nodes[c].what,
                    What::Bridge {
                        role: Role::SwitchDownstream,
                        ..
                    }
                )
            });
            (upstream && downstream).then_some(i)
        })
    }

    /// What the picture draws, for its legend.
    pub fn drawn(&self) -> Drawn {
        let mut d = Drawn {
            host_bridge: !self.host_bridges.is_empty(),
            switch: self.switches().next().is_some(),
            redirect: self.redirects().next().is_some(),
            levels: self
                .pairs
                .iter()
                .filter(|p| !p.c2c)
                .map(|p| p.level)
                .collect(),
            redirected_pair: self.pairs.iter().any(|p| p.redirected),
            sysfs_differs: self.pairs.iter().any(|p| p.sysfs.is_some()),
            c2c: self.pairs.iter().any(|p| p.c2c),
            nvlink_group: !self.nvlink_groups.is_empty(),
            nvlink_other: self.nvlink_groups.iter().any(|g| !g.other.is_empty()),
            ..Drawn::default()
        };
        for n in &self.nodes {
            match &n.what {
                What::Gpu { no_gdr: None, .. } => d.gpu = true,
                What::Gpu {
                    no_gdr: Some(_), ..
                } => d.gpu_no_gdr = true,
                What::Nic { .. } => d.nic = true,
                What::Bridge { .. } => d.bridge = true,
            }
        }
        d
    }

    /// The ACS redirects on a GPU-NIC path, with their bridges, in address order.
    pub fn redirects(&self) -> impl Iterator<Item = (Bdf, &Redirect)> {
        self.nodes.iter().filter_map(|n| match &n.what {
            What::Bridge {
                redirect: Some(r), ..
            } => Some((n.bdf, r)),
            _ => None,
        })
    }
}

/// The picture of the node in `inv`, as NCCL runs it under `config` (the GDR level, unless the
/// node's NCCL settings name one), with the NVLinks the GPU probe (`gpu`) reported; `root` is
/// the root as the operator named it.
pub fn picture(inv: &Inventory, gpu: &Runtime, config: &Config, root: &str) -> Picture {
    let judged = effective::judge(inv, config);
    let mut b = Builder::default();
    b.place_devices(inv);
    let redirecting = redirecting(inv, &judged);
    let crossing = crossing(inv, &judged, &redirecting);
    let file = match judged.basis {
        Basis::File(t) => Some(t.path.clone()),
        Basis::Sysfs => None,
    };
    let pairs = b.judge_gpus(inv, &judged, &redirecting, file.as_deref());
    b.mark_redirects(redirecting, crossing);
    let notes = std::mem::take(&mut b.notes);
    let (nodes, host_bridges) = b.into_tree();
    let gpus: BTreeMap<Bdf, usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.what, What::Gpu { .. }))
        .map(|(i, n)| (n.bdf, i))
        .collect();
    let nvlink_groups = nvlink_groups(&gpus, &gpu.nvlinks());
    Picture {
        title: Title {
            root: root.to_owned(),
            hostname: inv.kernel.hostname.clone(),
            product: inv.kernel.product.clone(),
        },
        gdr_level: judged.policy.value(),
        topology_file: file,
        host_bridges,
        nodes,
        pairs: pairs
            .into_iter()
            .map(|(gpu, nic, level, sysfs, redirected, c2c)| Pair {
                gpu,
                nic,
                level,
                sysfs,
                redirected,
                c2c,
            })
            .collect(),
        notes,
        nvlink_groups,
        gpus: inv.gpus.len(),
        nics: inv.rdma.len(),
    }
}

/// The bridges whose ACS redirects, with their ACS control: of the bridges on the GPU-NIC
/// paths, those the acs check judges, every path of a pair NCCL uses (`Judgement::paths`),
/// within the level or not.
fn redirecting(inv: &Inventory, judged: &Judgement) -> BTreeMap<Bdf, u16> {
    judged
        .paths()
        .flat_map(|(_, _, r)| r.bridges.iter().copied())
        .collect::<BTreeSet<Bdf>>()
        .into_iter()
        .filter_map(|bdf| Some((bdf, acs::redirecting(inv, bdf)?.control)))
        .collect()
}

/// Each redirecting bridge with the GPU-NIC pairs whose path crosses it (`GPU <bdf> - mlx5_0`).
///
/// The pairs drawn and the GPUs marked are NCCL's, as `check` judges them (`effective::judge`):
/// on NCCL's tree when a topology file is in effect, under the GDR level in force, among the
/// NICs NCCL_IB_HCA selects (issue 25).
fn crossing(
    inv: &Inventory,
    judged: &Judgement,
    redirecting: &BTreeMap<Bdf, u16>,
) -> BTreeMap<Bdf, Vec<String>> {
    let mut crossing: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
    for (gpu, nic, r) in judged.paths() {
        for bdf in r.bridges.iter().filter(|b| redirecting.contains_key(b)) {
            crossing
                .entry(*bdf)
                .or_default()
                .push(format!("GPU {gpu} - {}", inv.rdma[nic].name));
        }
    }
    crossing
}

/// A GDR pair as the builder collects it: the GPU's and the NIC's node, NCCL's level, the sysfs
/// level where it differs, and whether its path crosses an ACS redirect.
type PairKey = (usize, usize, Level, Option<Level>, bool, bool);

#[derive(Default)]
struct Builder {
    nodes: Vec<Node>,
    index: BTreeMap<Bdf, usize>,
    host_bridges: BTreeMap<String, HostBridge>,
    notes: Vec<String>,
}

mod gdr;

impl Builder {
    /// Puts every GPU and every RDMA NIC with a PCI function on the tree; a NIC without one
    /// gets a note.
    fn place_devices(&mut self, inv: &Inventory) {
        for (i, g) in inv.gpus.iter().enumerate() {
            let what = What::Gpu {
                name: format!("GPU{i}"),
                model: g.model.clone(),
                no_gdr: None,
            };
            self.place(inv, g.bdf, what, &format!("GPU{i} {}", g.bdf));
        }
        for (i, d) in inv.rdma.iter().enumerate() {
            let name = format!("NIC{i}");
            let Some(bdf) = d.pci else {
                self.notes.push(format!(
                    "{name} {}: no PCI function, not on the tree",
                    d.name
                ));
                continue;
            };
            let what = What::Nic {
                devices: vec![(name.clone(), d.name.clone())],
            };
            self.place(inv, bdf, what, &format!("{name} {} {bdf}", d.name));
        }
    }

    /// Marks each redirecting bridge on the tree with its ACS control, the bits it has set and
    /// the pairs that cross it.
    fn mark_redirects(
        &mut self,
        redirecting: BTreeMap<Bdf, u16>,
        mut crossing: BTreeMap<Bdf, Vec<String>>,
    ) {
        for (bdf, control) in redirecting {
            if let Some(&i) = self.index.get(&bdf) {
                if let What::Bridge { redirect, .. } = &mut self.nodes[i].what {
                    *redirect = Some(Redirect {
                        control,
                        bits: acs::redirect_bits(control),
                        pairs: crossing.remove(&bdf).unwrap_or_default(),
                    });
                }
            }
        }
    }

    /// The tree in its order: each node's children by address; the host bridges by NUMA node
    /// (unknown last), then name, each with its children by address.
    fn into_tree(self) -> (Vec<Node>, Vec<HostBridge>) {
        let mut nodes = self.nodes;
        let order: Vec<Vec<usize>> = nodes
            .iter()
            .map(|n| {
                let mut c = n.children.clone();
                c.sort_by_key(|&i| nodes[i].bdf);
                c
            })
            .collect();
        for (n, c) in nodes.iter_mut().zip(order) {
            n.children = c;
        }
        let mut host_bridges: Vec<HostBridge> = self.host_bridges.into_values().collect();
        for h in &mut host_bridges {
            h.children.sort_by_key(|&i| nodes[i].bdf);
        }
        host_bridges.sort_by(|a, b| {
            (a.numa.is_empty(), &a.numa, &a.name).cmp(&(b.numa.is_empty(), &b.numa, &b.name))
        });
        (nodes, host_bridges)
    }

    /// Puts a GPU or NIC on the tree, with every bridge above it not there yet.
    fn place(&mut self, inv: &Inventory, bdf: Bdf, what: What, label: &str) {
        let Some(f) = inv.function(bdf) else {
            self.notes.push(format!(
                "{label}: not in the PCI inventory, not on the tree"
            ));
            return;
        };
        let path = path_functions(&f.path);
        let (Some(hb), Some(&last)) = (placement::host_bridge(&f.path), path.last()) else {
            self.notes.push(format!(
                "{label}: its sysfs path {} has no host bridge, not on the tree",
                f.path
            ));
            return;
        };
        if last != bdf {
            self.notes.push(format!(
                "{label}: its sysfs path {} ends in another function, not on the tree",
                f.path
            ));
            return;
        }
        let host = self
            .host_bridges
            .entry(hb.to_owned())
            .or_insert_with(|| HostBridge {
                name: hb.to_owned(),
                numa: Vec::new(),
                children: Vec::new(),
            });
        host.numa.extend(placement::numa_affinity(inv, bdf));
        host.numa.sort_unstable();
        host.numa.dedup();
        let (roles, _) = placement::roles(inv, &path[..path.len() - 1]);
        let mut parent: Option<usize> = None;
        for (k, p) in path.iter().enumerate() {
            let i = match self.index.get(p) {
                Some(&i) => i,
                None => {
                    let i = self.nodes.len();
                    self.nodes.push(Node {
                        bdf: *p,
                        what: What::Bridge {
                            role: roles.get(k).copied().unwrap_or(Role::Bridge),
                            redirect: None,
                        },
                        children: Vec::new(),
                        depth: k + 1,
                    });
                    self.index.insert(*p, i);
                    match parent {
                        Some(q) => self.nodes[q].children.push(i),
                        None => host.children.push(i),
                    }
                    i
                }
            };
            parent = Some(i);
        }
        if let Some(i) = parent {
            match (&mut self.nodes[i].what, what) {
                (What::Nic { devices }, What::Nic { devices: more }) => devices.extend(more),
                (slot, what) => *slot = what,
            }
        }
    }

    fn no_gdr(&mut self, gpu: Option<usize>, why: String) {
        if let Some(What::Gpu { no_gdr, .. }) = gpu.map(|g| &mut self.nodes[g].what) {
            *no_gdr = Some(why);
        }
    }
}

/// The GPUs joined by NVLink: the connected sets of `links` (NVLinks per pair of GPUs, by
/// address, as `Runtime::nvlinks` gives them) among the GPUs on the tree (`gpus`: address to
/// index into the nodes). A pair's count is the first GPU's view of it (the upper triangle of
/// `topo`'s matrix), or the second's where the first has none.
fn nvlink_groups(gpus: &BTreeMap<Bdf, usize>, links: &crate::model::gpu::NvLinks) -> Vec<NvGroup> {
    let count = |a: Bdf, b: Bdf| links.get(a, b).or_else(|| links.get(b, a)).unwrap_or(0);
    let all: Vec<Bdf> = gpus.keys().copied().collect();
    let mut peers: BTreeMap<Bdf, BTreeSet<Bdf>> = BTreeMap::new();
    for (a, bs) in links.peers(&all) {
        for b in bs {
            peers.entry(a).or_default().insert(b);
            peers.entry(b).or_default().insert(a);
        }
    }
    let mut seen = BTreeSet::new();
    let mut groups = Vec::new();
    for &start in peers.keys() {
        if !seen.insert(start) {
            continue;
        }
        let mut set = vec![start];
        let mut stack = vec![start];
        while let Some(g) = stack.pop() {
            for &p in &peers[&g] {
                if seen.insert(p) {
                    set.push(p);
                    stack.push(p);
                }
            }
        }
        set.sort();
        let pairs: Vec<(Bdf, Bdf, u32)> = set
            .iter()
            .enumerate()
            .flat_map(|(k, &a)| set[k + 1..].iter().map(move |&b| (a, b)))
            .map(|(a, b)| (a, b, count(a, b)))
            .collect();
        let mut tally: BTreeMap<u32, usize> = BTreeMap::new();
        for (_, _, n) in &pairs {
            *tally.entry(*n).or_default() += 1;
        }
        let common = tally
            .iter()
            .max_by_key(|(n, k)| (**k, **n))
            .map(|(n, _)| *n)
            .unwrap_or(0);
        groups.push(NvGroup {
            gpus: set.iter().map(|b| gpus[b]).collect(),
            links: common,
            other: pairs
                .into_iter()
                .filter(|(_, _, n)| *n != common)
                .map(|(a, b, n)| (gpus[&a], gpus[&b], n))
                .collect(),
        });
    }
    groups.sort_by_key(|g| g.gpus[0]);
    groups
}

/// The sysfs levels of a GPU's nearest NICs where they differ from NCCL's (`NODE`,
/// `NODE/SYS`); `None` where they agree.
fn sysfs_beside(n: &Nearest) -> Option<String> {
    let levels = n.sysfs_levels();
    (levels.iter().any(|l| *l != n.level)).then(|| {
        let names: Vec<&str> = levels.iter().map(|l| l.as_str()).collect();
        names.join("/")
    })
}

/// The colour of a level's line, in both pictures: green (one bridge) to red (across sockets).
pub fn level_colour(l: Level) -> &'static str {
    match l {
        Level::Pix => "#15803d",
        Level::Pxb => "#0369a1",
        Level::Phb => "#c2410c",
        Level::Node => "#b91c1c",
        Level::Sys => "#7e22ce",
    }
}

#[cfg(test)]
mod tests {
    use super::{NvGroup, nvlink_groups};
    use crate::parse::pci::Bdf;
    use std::collections::BTreeMap;

    /// GPUs `0000:00:0k.0` at node index `10 + k`, and NVLinks by position.
    fn groups(n: u8, links: &[(u8, u8, u32)]) -> Vec<NvGroup> {
        let bdf = |k: u8| Bdf::parse(&format!("0000:00:{k:02x}.0")).unwrap();
        let gpus = (0..n).map(|k| (bdf(k), 10 + usize::from(k))).collect();
        let links: BTreeMap<(Bdf, Bdf), u32> = links
            .iter()
            .flat_map(|&(a, b, c)| [((bdf(a), bdf(b)), c), ((bdf(b), bdf(a)), c)])
            .collect();
        nvlink_groups(&gpus, &crate::model::gpu::NvLinks::from_direct(links))
    }

    /// Every pair of `set` (positions) with `links` links.
    fn all_to_all(set: &[u8], links: u32) -> Vec<(u8, u8, u32)> {
        set.iter()
            .enumerate()
            .flat_map(|(k, &a)| set[k + 1..].iter().map(move |&b| (a, b, links)))
            .collect()
    }

    #[test]
    fn nvlink_all_to_all_is_one_uniform_group() {
        // The 4x H100 machine of issue 24: NV18 between every pair (through NVSwitches).
        assert_eq!(
            groups(4, &all_to_all(&[0, 1, 2, 3], 18)),
            vec![NvGroup {
                gpus: vec![10, 11, 12, 13],
                links: 18,
                other: vec![],
            }]
        );
        assert!(groups(4, &[]).is_empty(), "no NVLink, no group");
    }

    #[test]
    fn nvlink_pairs_that_differ_are_named() {
        // GPU3 with 12 of its 18 links up: its three pairs are NV12 (NVSwitch: the fewer of
        // the two GPUs' links).
        let mut links = all_to_all(&[0, 1, 2], 18);
        links.extend([(0, 3, 12), (1, 3, 12), (2, 3, 12)]);
        let g = groups(4, &links);
        assert_eq!(g.len(), 1);
        assert_eq!((g[0].links, g[0].gpus.len()), (18, 4));
        assert_eq!(g[0].other, vec![(10, 13, 12), (11, 13, 12), (12, 13, 12)]);
        // Two bridged pairs (PCIe cards with NVLink bridges): two groups, and a GPU alone.
        let g = groups(5, &[(0, 1, 4), (2, 3, 4)]);
        assert_eq!(
            g.iter()
                .map(|g| (g.gpus.clone(), g.links))
                .collect::<Vec<_>>(),
            vec![(vec![10, 11], 4), (vec![12, 13], 4)]
        );
        // A chain 0-1-2: one set, and the pair without a link of its own is named.
        let g = groups(3, &[(0, 1, 2), (1, 2, 2)]);
        assert_eq!((g[0].links, g[0].other.clone()), (2, vec![(10, 12, 0)]));
    }
}
