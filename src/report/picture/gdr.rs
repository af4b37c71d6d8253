//! The GPUs' GDR decision on the picture: the pairs NCCL uses GPUDirect RDMA with, drawn, and
//! the GPUs it does not, marked with why (beyond the level, over NVLink-C2C without GDR, no
//! NIC). Split from mod.rs, which holds the tree and its builder.

use super::*;

impl Builder {
    /// Each GPU as NCCL runs it: the pairs with its nearest NICs where it uses GPUDirect RDMA;
    /// else the GPU marked, with a note that says why not. `file` is NCCL's topology file in
    /// effect.
    pub(super) fn judge_gpus(
        &mut self,
        inv: &Inventory,
        judged: &Judgement,
        redirecting: &BTreeMap<Bdf, u16>,
        file: Option<&str>,
    ) -> BTreeSet<PairKey> {
        let mut pairs = BTreeSet::new();
        let no_nic = judged.nics.is_empty() && !inv.rdma.is_empty() && !inv.gpus.is_empty();
        if no_nic {
            self.notes.push(format!(
                "NCCL_IB_HCA={} selects none of the {} RDMA devices: NCCL runs every GPU without GPUDirect RDMA",
                inv.nccl.value("NCCL_IB_HCA").unwrap_or_default(),
                inv.rdma.len()
            ));
        }
        for g in &judged.gpus {
            let gpu = g.gpu;
            let gi = self.index.get(&gpu).copied();
            let n = match (&g.nearest, g.verdict) {
                (_, Verdict::NoNic) => {
                    if no_nic {
                        self.no_gdr(gi, "no NIC selected".into());
                    }
                    continue;
                }
                (Some(n), _) => n,
                (None, _) => {
                    self.notes.push(format!(
                        "GPU {gpu}: no NIC with a known route: NCCL runs it without GPUDirect RDMA"
                    ));
                    self.no_gdr(gi, "no NIC route".into());
                    continue;
                }
            };
            if let (Some(d), true) = (&g.c2c, g.verdict != Verdict::Gdr) {
                self.c2c_without_gdr(inv, judged, gpu, gi, n, d);
                continue;
            }
            if g.verdict != Verdict::Gdr {
                self.beyond_level(inv, judged, gpu, gi, n, file);
                continue;
            }
            for c in &n.nics {
                let redirected = c
                    .sysfs
                    .as_ref()
                    .is_some_and(|r| r.bridges.iter().any(|b| redirecting.contains_key(b)));
                let sysfs = c.sysfs.as_ref().map(|r| r.level).filter(|l| *l != c.level);
                let nic = inv.rdma[c.nic]
                    .pci
                    .and_then(|p| self.index.get(&p).copied());
                if let (Some(gi), Some(nic)) = (gi, nic) {
                    let c2c = c.via == effective::Via::C2c;
                    pairs.insert((gi, nic, c.level, sysfs, redirected, c2c));
                }
            }
        }
        pairs
    }

    /// GPU `gpu` (node `gi`), which reaches its nearest NICs `n` over NVLink-C2C where NCCL of
    /// the node's release does not use GPUDirect RDMA (or the release is not known and the
    /// releases differ): a note with NCCL's rule, and the GPU marked.
    fn c2c_without_gdr(
        &mut self,
        inv: &Inventory,
        judged: &Judgement,
        gpu: Bdf,
        gi: Option<usize>,
        n: &Nearest,
        d: &Result<crate::nccl::c2c::Decision, Vec<crate::nccl::c2c::Decision>>,
    ) {
        let names: Vec<&str> = n
            .nics
            .iter()
            .map(|c| inv.rdma[c.nic].name.as_str())
            .collect();
        let (why, mark) = match d {
            Ok(d) => (d.describe(&judged.c2c_input), "C2C: no GDR".to_owned()),
            Err(_) => (
                "NCCL's releases decide differently, and the node's is not known".to_owned(),
                "C2C: NCCL release unknown".to_owned(),
            ),
        };
        self.notes.push(format!(
            "GPU {gpu}: nearest NIC {} over NVLink-C2C ({} in sysfs): {why}",
            names.join(", "),
            n.level
        ));
        self.no_gdr(gi, mark);
    }

    /// GPU `gpu` (node `gi`), whose nearest NICs `n` are beyond the GDR level in force: a note
    /// that says so, and the GPU marked.
    fn beyond_level(
        &mut self,
        inv: &Inventory,
        judged: &Judgement,
        gpu: Bdf,
        gi: Option<usize>,
        n: &Nearest,
        file: Option<&str>,
    ) {
        let gdr_level = judged.policy.value();
        let in_file = file
            .map(|f| format!(" in the topology file NCCL reads ({f})"))
            .unwrap_or_default();
        let sysfs = sysfs_beside(n);
        let names: Vec<&str> = n
            .nics
            .iter()
            .map(|c| inv.rdma[c.nic].name.as_str())
            .collect();
        let beyond = match judged.policy.limit {
            GdrLimit::Never => format!(
                "and NCCL_NET_GDR_LEVEL={gdr_level} ({}) turns GPUDirect RDMA off",
                judged.policy.origin()
            ),
            GdrLimit::Upto(_) => format!(
                "beyond NCCL_NET_GDR_LEVEL={gdr_level} ({})",
                judged.policy.origin()
            ),
        };
        self.notes.push(format!(
            "GPU {gpu}: nearest NIC {} at {}{in_file}{}, {beyond}: NCCL runs it without GPUDirect RDMA",
            names.join(", "),
            n.level,
            sysfs.as_deref().map(|s| format!(", {s} in sysfs")).unwrap_or_default(),
        ));
        self.no_gdr(
            gi,
            match &sysfs {
                Some(s) => format!("NIC at {} (sysfs {s})", n.level),
                None => format!("NIC at {}", n.level),
            },
        );
    }
}
