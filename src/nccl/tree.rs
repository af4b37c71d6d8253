//! The PCI tree NCCL builds when a topology file is in effect: the file's tree, with every GPU
//! and NIC of the node the file does not name placed from sysfs the way NCCL places them, and
//! the GPU-NIC distance NCCL computes on it.
//!
//! From NCCL's sources (src/graph/xml.cc, topo.cc, paths.cc, 2.19 to 2.30):
//! - a GPU is looked up in the file by bus ID (exact string); a NIC by its `net` name first,
//!   then by bus ID (`ncclTopoFillGpu`, `ncclTopoFillNet`, `ncclTopoGetPciNode`);
//! - what is not in the file is hung under its sysfs ancestors two path components at a time
//!   (a switch's upstream port; the downstream port and the root port are skipped), reusing a
//!   `pci` of the same bus ID wherever it is in the file, and at the first component that is not
//!   a `DDDD:BB:DD.F` address under the `cpu` whose `numaid` is that node's `numa_node`, the
//!   file's if it has one (`ncclTopoGetXmlFromSys`);
//! - Broadcom PEX switches in base mode, two levels in the tree, count as one
//!   (`ncclTopoFlattenBcmSwitches`);
//! - the distance is the worst link on the path: a device to its switch PIX, switch to switch
//!   PXB, anything to a CPU PHB, CPU to CPU SYS (`ncclTopoSetPaths`). NCCL has no NODE.

use crate::inventory::Inventory;
use crate::model::Level;
use crate::parse::nccl_topo::{Parent, PciKind, Topology};
use crate::parse::pci::Bdf;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Cpu(String),
    Switch,
    Device,
}

#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    parent: Option<usize>,
    busid: Option<String>,
    /// The file's line; `None` for what was placed from sysfs.
    line: Option<usize>,
    id: u64,
    /// Merged into its parent (a Broadcom sub-switch).
    gone: bool,
}

/// Where a GPU or NIC sits in NCCL's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    node: usize,
    /// The line of the file that places it; `None`: placed from sysfs.
    pub line: Option<usize>,
}

/// NCCL's tree for this node and file.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    /// Per `inv.gpus` index.
    pub gpus: Vec<Option<Placed>>,
    /// Per `inv.rdma` index.
    pub nics: Vec<Option<Placed>>,
}

/// NCCL's `checkBDFFormat`: exactly `DDDD:BB:DD.F`, 12 characters of hex and separators.
fn bdf_format(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// NCCL's `getBcmGen`: the PEX generation of a Broadcom switch in base mode, at the upper
/// (`level` 0) or lower (1) of its two levels; 0 for anything else.
fn bcm_gen(id: u64, level: u64) -> u8 {
    if id & 0xffff_ffff_ffff_f000 == 0x1000_c010_1000_a000 {
        4
    } else if id & 0xffff_ffff_ffff_f000 == 0x1000_c030_1000_0000 | (level * 0x1000) {
        5
    } else {
        0
    }
}

impl Tree {
    fn find_busid(&self, busid: &str) -> Option<usize> {
        self.nodes
            .iter()
            .position(|n| !n.gone && n.busid.as_deref() == Some(busid))
    }

    fn cpu(&mut self, numaid: &str) -> usize {
        if let Some(i) = self
            .nodes
            .iter()
            .position(|n| n.kind == Kind::Cpu(numaid.to_owned()))
        {
            return i;
        }
        self.nodes.push(Node {
            kind: Kind::Cpu(numaid.to_owned()),
            parent: None,
            busid: None,
            line: None,
            id: 0,
            gone: false,
        });
        self.nodes.len() - 1
    }

    /// The node of function `bdf`, found by bus ID or placed from sysfs as NCCL places it.
    fn attach(&mut self, inv: &Inventory, bdf: Bdf, kind: Kind) -> usize {
        let busid = bdf.to_string();
        if let Some(i) = self.find_busid(&busid) {
            return i;
        }
        self.nodes.push(Node {
            kind,
            parent: None,
            busid: Some(busid),
            line: None,
            id: inv
                .function(bdf)
                .map(|f| (u64::from(f.vendor) << 48) | (u64::from(f.device) << 32))
                .unwrap_or(0),
            gone: false,
        });
        let node = self.nodes.len() - 1;
        let parent = self.sysfs_parent(inv, bdf);
        self.nodes[node].parent = Some(parent);
        node
    }

    /// `ncclTopoGetXmlFromSys`'s walk up the sysfs path of `bdf`.
    fn sysfs_parent(&mut self, inv: &Inventory, bdf: Bdf) -> usize {
        let Some(f) = inv.function(bdf) else {
            // No sysfs path: NCCL hangs it under an unknown CPU.
            return self.cpu("-1");
        };
        let numa = f
            .detail
            .as_ref()
            .and_then(|d| d.numa_node.raw.as_ref().ok())
            .map(|s| s.trim().to_owned())
            .unwrap_or_default();
        let comps: Vec<&str> = f.path.split('/').filter(|c| !c.is_empty()).collect();
        let mut up = 0;
        for i in (0..comps.len().saturating_sub(1)).rev() {
            up += 1;
            if !bdf_format(comps[i]) {
                return self.cpu(&numa);
            }
            if up == 2 {
                match Bdf::parse(comps[i]) {
                    Some(b) => return self.attach(inv, b, Kind::Switch),
                    None => return self.cpu(&numa),
                }
            }
        }
        self.cpu(&numa)
    }

    /// NCCL's tree: the file's, plus the GPUs and the NICs `nics` (indices into `inv.rdma`)
    /// of the node that the file does not name.
    pub fn build(inv: &Inventory, topo: &Topology, nics: &[usize]) -> Tree {
        let mut t = Tree {
            nodes: Vec::new(),
            gpus: vec![None; inv.gpus.len()],
            nics: vec![None; inv.rdma.len()],
        };
        for c in &topo.cpus {
            t.nodes.push(Node {
                kind: Kind::Cpu(c.numaid.clone().unwrap_or_default()),
                parent: None,
                busid: None,
                line: Some(c.line),
                id: 0,
                gone: false,
            });
        }
        let cpus = topo.cpus.len();
        for p in &topo.pcis {
            t.nodes.push(Node {
                kind: if p.kind == PciKind::Switch {
                    Kind::Switch
                } else {
                    Kind::Device
                },
                parent: Some(match p.parent {
                    Parent::Cpu(c) => c,
                    Parent::Pci(q) => cpus + q,
                }),
                busid: p.busid.clone(),
                line: Some(p.line),
                id: p.id,
                gone: false,
            });
        }
        t.flatten_bcm();
        for (i, g) in inv.gpus.iter().enumerate() {
            let line = t
                .find_busid(&g.bdf.to_string())
                .and_then(|n| t.nodes[n].line);
            let node = t.attach(inv, g.bdf, Kind::Device);
            t.gpus[i] = Some(Placed { node, line });
        }
        for &i in nics {
            let Some(d) = inv.rdma.get(i) else { continue };
            let placed = match topo.net_by_name(&d.name) {
                Some((Parent::Pci(p), net)) => Some(Placed {
                    node: cpus + p,
                    line: Some(net.line),
                }),
                Some((Parent::Cpu(c), net)) => {
                    t.nodes.push(Node {
                        kind: Kind::Device,
                        parent: Some(c),
                        busid: None,
                        line: Some(net.line),
                        id: 0,
                        gone: false,
                    });
                    Some(Placed {
                        node: t.nodes.len() - 1,
                        line: Some(net.line),
                    })
                }
                None => d.pci.map(|bdf| {
                    let line = t.find_busid(&bdf.to_string()).and_then(|n| t.nodes[n].line);
                    Placed {
                        node: t.attach(inv, bdf, Kind::Device),
                        line,
                    }
                }),
            };
            t.nics[i] = placed;
        }
        t
    }

    /// `ncclTopoFlattenBcmSwitches`: a Broadcom switch's lower level merged into its upper.
    fn flatten_bcm(&mut self) {
        for q in 0..self.nodes.len() {
            let generation = bcm_gen(self.nodes[q].id, 0);
            if generation == 0 || self.nodes[q].kind != Kind::Switch || self.nodes[q].gone {
                continue;
            }
            let subs: Vec<usize> = (0..self.nodes.len())
                .filter(|&p| {
                    self.nodes[p].parent == Some(q)
                        && self.nodes[p].kind == Kind::Switch
                        && bcm_gen(self.nodes[p].id, 1) == generation
                })
                .collect();
            for p in subs {
                for c in 0..self.nodes.len() {
                    if self.nodes[c].parent == Some(p) {
                        self.nodes[c].parent = Some(q);
                    }
                }
                self.nodes[p].gone = true;
            }
            // NCCL marks the switch so that it is not merged again.
            self.nodes[q].id |= 0xffff;
        }
    }

    fn ancestors(&self, mut n: usize) -> Vec<usize> {
        let mut out = vec![n];
        // A file cannot make a loop (it is a tree), but the bound costs nothing.
        while let Some(p) = self.nodes[n].parent {
            if out.len() > self.nodes.len() {
                break;
            }
            out.push(p);
            n = p;
        }
        out
    }

    /// The distance NCCL computes between two placed devices.
    pub fn level(&self, a: Placed, b: Placed) -> Level {
        let (up_a, up_b) = (self.ancestors(a.node), self.ancestors(b.node));
        let Some((ia, ib)) = up_a
            .iter()
            .enumerate()
            .find_map(|(i, n)| up_b.iter().position(|m| m == n).map(|j| (i, j)))
        else {
            return Level::Sys;
        };
        let mut worst = Level::Pix;
        for path in [&up_a[..=ia], &up_b[..=ib]] {
            for w in path.windows(2) {
                let (child, parent) = (&self.nodes[w[0]], &self.nodes[w[1]]);
                let l = match (&child.kind, &parent.kind) {
                    (_, Kind::Cpu(_)) | (Kind::Cpu(_), _) => Level::Phb,
                    (Kind::Switch, _) => Level::Pxb,
                    (Kind::Device, _) => Level::Pix,
                };
                worst = worst.max(l);
            }
        }
        worst
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdf_format_is_ncclss() {
        assert!(bdf_format("0001:00:00.0"));
        assert!(!bdf_format("pci0001:00"));
        assert!(!bdf_format("10000:00:00.0"));
        assert!(!bdf_format("47505500-0001-0000-3130-444531303244"));
    }

    #[test]
    fn broadcom_generations() {
        // PEX88000 (0x1000:0xc010, subsystem 0x1000:0xa096): both levels.
        let gen4 = 0x1000_c010_1000_a096;
        assert_eq!((bcm_gen(gen4, 0), bcm_gen(gen4, 1)), (4, 4));
        assert_eq!(bcm_gen(0x1000_c030_1000_0100, 0), 5);
        assert_eq!(bcm_gen(0x1000_c030_1000_1100, 1), 5);
        assert_eq!(bcm_gen(0x1000_c030_1000_1100, 0), 0);
        assert_eq!(bcm_gen(0x104c_8232_0000_0000, 0), 0);
    }
}
