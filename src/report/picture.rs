//! What the pictures of a node (`topo --format svg` and `--format dot`, `fleet --pictures`) show:
//! the PCIe tree from the host bridges down to every GPU and RDMA NIC, the GPU-NIC pairs NCCL
//! uses for GPUDirect RDMA with their level, and the bridges whose ACS redirects peer-to-peer
//! traffic on a GPU-NIC path. It is worked out once here, from the placement and the ACS
//! judgement the checks use (`placement::nearest`, `placement::roles`, `acs::redirecting`);
//! `svg.rs` lays it out and draws it, `dot.rs` writes it for Graphviz.
//!
//! It is linear in the devices: only the functions on a GPU's or NIC's sysfs path are in the
//! tree, and only each GPU's nearest NICs are looked at, never the N x N matrix (a node with
//! 5,000 GPUs is some 10,000 boxes).

use crate::checks::acs;
use crate::inventory::Inventory;
use crate::parse::pci::{Bdf, path_functions};
use crate::placement::{self, Level, Role};
use std::collections::{BTreeMap, BTreeSet};

/// The node's PCIe tree, its GDR pairs and its ACS redirects.
#[derive(Debug)]
pub struct Picture {
    pub title: Title,
    /// NCCL_NET_GDR_LEVEL as the site's policy sets it (`thresholds.gdr_level`): the pairs
    /// within it are drawn.
    pub policy: Level,
    /// Sorted by NUMA node (unknown last), then name, so that a NUMA node's host bridges sit
    /// side by side.
    pub host_bridges: Vec<HostBridge>,
    /// Every function on the sysfs path of a GPU or an RDMA NIC, each parent before its
    /// children (the layout relies on it); children sorted by address.
    pub nodes: Vec<Node>,
    /// Each GPU with its nearest NIC(s), where they are within `policy`: the pairs NCCL uses
    /// for GPUDirect RDMA. Sorted by GPU, then NIC.
    pub pairs: Vec<Pair>,
    /// What the tree cannot show: GPUs whose nearest NIC is beyond the policy, devices without
    /// a place on the tree.
    pub notes: Vec<String>,
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
    /// The smallest NUMA node of the devices below it, when the kernel gives one.
    pub numa: Option<i32>,
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

/// A GPU and a nearest NIC within the policy.
#[derive(Debug)]
pub struct Pair {
    /// Indices into `Picture::nodes`.
    pub gpu: usize,
    pub nic: usize,
    pub level: Level,
    /// Its path crosses a bridge whose ACS redirects.
    pub redirected: bool,
}

impl Picture {
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

/// The picture of the node in `inv`, under the GDR level `policy`; `root` is the root as the
/// operator named it.
pub fn picture(inv: &Inventory, policy: Level, root: &str) -> Picture {
    let mut b = Builder::default();
    for (i, g) in inv.gpus.iter().enumerate() {
        let what = What::Gpu {
            name: format!("GPU{i}"),
            model: g.model.clone(),
            no_gdr: None,
        };
        b.place(inv, g.bdf, what, &format!("GPU{i} {}", g.bdf));
    }
    for (i, d) in inv.rdma.iter().enumerate() {
        let name = format!("NIC{i}");
        let Some(bdf) = d.pci else {
            b.notes.push(format!(
                "{name} {}: no PCI function, not on the tree",
                d.name
            ));
            continue;
        };
        let what = What::Nic {
            devices: vec![(name.clone(), d.name.clone())],
        };
        b.place(inv, bdf, what, &format!("{name} {} {bdf}", d.name));
    }

    // The bridges on the GPU-NIC paths are those the acs check judges: every nearest pair's,
    // within the policy or not.
    let nearest = placement::nearest(inv);
    let on_path: BTreeSet<Bdf> = nearest
        .iter()
        .filter_map(|(_, n)| n.as_ref())
        .flat_map(|n| n.nics.iter().flat_map(|(_, r)| r.bridges.iter().copied()))
        .collect();
    let redirecting: BTreeMap<Bdf, u16> = on_path
        .into_iter()
        .filter_map(|bdf| Some((bdf, acs::redirecting(inv, bdf)?.control)))
        .collect();
    let mut pairs = BTreeSet::new();
    let mut crossing: BTreeMap<Bdf, Vec<String>> = BTreeMap::new();
    for (gpu, n) in &nearest {
        let g = b.index.get(gpu).copied();
        let Some(n) = n else {
            if !inv.rdma.is_empty() {
                b.notes.push(format!(
                    "GPU {gpu}: no NIC with a known route: NCCL runs it without GPUDirect RDMA"
                ));
                b.no_gdr(g, "no NIC route".into());
            }
            continue;
        };
        for (i, r) in &n.nics {
            let redirected: Vec<Bdf> = r
                .bridges
                .iter()
                .copied()
                .filter(|bdf| redirecting.contains_key(bdf))
                .collect();
            for bdf in &redirected {
                crossing
                    .entry(*bdf)
                    .or_default()
                    .push(format!("GPU {gpu} - {}", inv.rdma[*i].name));
            }
            let nic = inv.rdma[*i].pci.and_then(|p| b.index.get(&p).copied());
            if let (Some(g), Some(nic), true) = (g, nic, n.level <= policy) {
                pairs.insert((g, nic, n.level, !redirected.is_empty()));
            }
        }
        if n.level > policy {
            let names: Vec<&str> = n
                .nics
                .iter()
                .map(|(i, _)| inv.rdma[*i].name.as_str())
                .collect();
            b.notes.push(format!(
                "GPU {gpu}: nearest NIC {} at {}, beyond NCCL_NET_GDR_LEVEL={policy}: NCCL runs it without GPUDirect RDMA",
                names.join(", "),
                n.level
            ));
            b.no_gdr(g, format!("NIC at {}", n.level));
        }
    }
    for (bdf, control) in redirecting {
        if let Some(&i) = b.index.get(&bdf) {
            if let What::Bridge { redirect, .. } = &mut b.nodes[i].what {
                *redirect = Some(Redirect {
                    control,
                    bits: acs::redirect_bits(control),
                    pairs: crossing.remove(&bdf).unwrap_or_default(),
                });
            }
        }
    }

    let mut nodes = b.nodes;
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
    let mut host_bridges: Vec<HostBridge> = b.host_bridges.into_values().collect();
    for h in &mut host_bridges {
        h.children.sort_by_key(|&i| nodes[i].bdf);
    }
    host_bridges.sort_by(|a, b| {
        (a.numa.is_none(), a.numa, &a.name).cmp(&(b.numa.is_none(), b.numa, &b.name))
    });
    Picture {
        title: Title {
            root: root.to_owned(),
            hostname: inv.kernel.hostname.clone(),
            product: inv.kernel.product.clone(),
        },
        policy,
        host_bridges,
        nodes,
        pairs: pairs
            .into_iter()
            .map(|(gpu, nic, level, redirected)| Pair {
                gpu,
                nic,
                level,
                redirected,
            })
            .collect(),
        notes: b.notes,
        gpus: inv.gpus.len(),
        nics: inv.rdma.len(),
    }
}

#[derive(Default)]
struct Builder {
    nodes: Vec<Node>,
    index: BTreeMap<Bdf, usize>,
    host_bridges: BTreeMap<String, HostBridge>,
    notes: Vec<String>,
}

impl Builder {
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
        let numa = f
            .detail
            .as_ref()
            .and_then(|d| d.numa_node.value().copied())
            .filter(|n| *n >= 0);
        let host = self
            .host_bridges
            .entry(hb.to_owned())
            .or_insert_with(|| HostBridge {
                name: hb.to_owned(),
                numa: None,
                children: Vec::new(),
            });
        host.numa = match (host.numa, numa) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
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

/// Text from the node for a picture: control characters escaped as the human report shows
/// them (`\u{1b}`), so that a name cannot hide or break a line, and at most `max` characters
/// (the rest as `…`), so that a long name cannot stretch the layout.
pub fn clean(s: &str, max: usize) -> String {
    let s: String = s
        .chars()
        .map(|c| {
            // XML 1.0 allows neither control characters nor U+FFFE/U+FFFF, even as references.
            if c.is_control() || c == '\u{fffe}' || c == '\u{ffff}' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if s.chars().count() <= max {
        s
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
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
    use super::clean;

    #[test]
    fn clean_escapes_and_shortens() {
        assert_eq!(clean("mlx5_0", 10), "mlx5_0");
        assert_eq!(clean("a\u{1b}[2Jb", 20), "a\\u{1b}[2Jb");
        assert_eq!(clean("x\u{ffff}", 20), "x\\u{ffff}");
        assert_eq!(clean("abcdefghij", 5), "abcd…");
    }
}
