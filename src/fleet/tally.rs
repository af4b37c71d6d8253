//! The running totals of a fleet run: per code, per status, and per model the values each
//! aspect took, so that nodes of one model that differ from their siblings are named.

use super::NodeResult;
use crate::model::Status;
use serde::Serialize;
use std::collections::BTreeMap;

/// Values seen for one aspect of one model, each with a count and a few example nodes.
const EXAMPLES: usize = 3;
/// Distinct values kept per aspect; more are counted together (memory stays bounded).
const MAX_VALUES: usize = 64;
const OTHER: &str = "(other values)";

#[derive(Debug, Default, Clone, Serialize)]
pub struct Seen {
    pub nodes: usize,
    pub examples: Vec<String>,
}

#[derive(Debug, Default)]
struct ModelTally {
    nodes: usize,
    aspects: BTreeMap<&'static str, BTreeMap<String, Seen>>,
}

/// A difference between nodes of one model.
#[derive(Debug, Clone, Serialize)]
pub struct CrossFinding {
    pub code: String,
    pub model: String,
    pub aspect: &'static str,
    /// Value -> how many nodes, with examples.
    pub values: BTreeMap<String, Seen>,
    pub message: String,
}

/// The running totals.
#[derive(Debug, Default)]
pub struct Tally {
    pub nodes: usize,
    pub ready: usize,
    pub unreadable: usize,
    /// code -> status -> nodes.
    pub codes: BTreeMap<String, BTreeMap<Status, usize>>,
    /// The links whose counters grew the most across the fleet, worst first, at most
    /// [`WORST_LINKS`]: (node, the port's growth).
    pub worst_links: Vec<(String, super::LinkGrowth)>,
    models: BTreeMap<String, ModelTally>,
}

/// How many of the worst links the fleet report lists.
pub const WORST_LINKS: usize = 20;

const ASPECTS: &[(&str, &str)] = &[
    // A pinned NCCL_IB_GID_INDEX counts as the index (`analyse`).
    ("gid-index", "the RoCE v2 GID index"),
    ("roce-version", "the RoCE version"),
    ("gpu-driver", "the GPU driver"),
    ("nic-firmware", "the NIC firmware"),
    ("kernel", "the kernel"),
    ("placement", "the GPU-NIC placement"),
    ("peermem", "nvidia_peermem"),
    (
        "roce-qos",
        "the RoCE QoS NCCL's traffic meets (trust, PFC priorities)",
    ),
];

impl Tally {
    pub fn add(&mut self, n: &NodeResult) {
        self.nodes += 1;
        let node = n.hostname.clone().unwrap_or_else(|| n.capture.clone());
        for l in &n.links {
            self.worst_links.push((node.clone(), l.clone()));
        }
        // Stable: of two links that rank alike, the one of the earlier capture stays first.
        self.worst_links.sort_by_key(|(_, l)| l.rank());
        self.worst_links.truncate(WORST_LINKS);
        self.ready += usize::from(n.ready);
        for (code, status) in &n.problems {
            *self
                .codes
                .entry(code.clone())
                .or_default()
                .entry(*status)
                .or_default() += 1;
        }
        let model = n
            .product
            .clone()
            .unwrap_or_else(|| "(model unknown)".into());
        let name = n.hostname.clone().unwrap_or_else(|| n.capture.clone());
        let t = self.models.entry(model).or_default();
        t.nodes += 1;
        let values: [(&str, Option<String>); 8] = [
            (
                "gid-index",
                (!n.gid_indices.is_empty()).then(|| n.gid_indices.join(",")),
            ),
            ("roce-version", n.roce.clone()),
            ("gpu-driver", n.gpu_driver.clone()),
            (
                "nic-firmware",
                (!n.nic_firmware.is_empty()).then(|| n.nic_firmware.join(", ")),
            ),
            ("kernel", n.kernel.clone()),
            ("placement", n.placement.clone()),
            ("peermem", Some(n.peermem.clone())),
            ("roce-qos", n.roce_qos.clone()),
        ];
        // NCCL's settings: every one of them, "(unset)" where a node does not set it, so that a
        // setting on some nodes only is a difference too.
        let nccl = crate::nccl::params::GDR_PARAMS
            .iter()
            .filter(|(name, _)| *name != "NCCL_IB_GID_INDEX")
            .map(|(name, _)| {
                (
                    *name,
                    Some(
                        n.nccl
                            .get(*name)
                            .cloned()
                            .unwrap_or_else(|| "(unset)".into()),
                    ),
                )
            });
        for (aspect, value) in values.into_iter().chain(nccl) {
            let value = value.unwrap_or_else(|| "(none)".into());
            let seen = t.aspects.entry(aspect).or_default();
            let key = if seen.contains_key(&value) || seen.len() < MAX_VALUES {
                value
            } else {
                OTHER.to_owned()
            };
            let s = seen.entry(key).or_default();
            s.nodes += 1;
            if s.examples.len() < EXAMPLES {
                s.examples.push(name.clone());
            }
        }
    }

    /// Every aspect on which the nodes of one model disagree.
    pub fn cross(&self) -> Vec<CrossFinding> {
        let mut out = Vec::new();
        for (model, t) in &self.models {
            if t.nodes < 2 {
                continue;
            }
            let nccl = crate::nccl::params::GDR_PARAMS
                .iter()
                .filter(|(name, _)| *name != "NCCL_IB_GID_INDEX")
                .map(|(name, _)| (*name, *name));
            for (aspect, what) in ASPECTS.iter().copied().chain(nccl) {
                let Some(values) = t.aspects.get(aspect) else {
                    continue;
                };
                if values.len() < 2 {
                    continue;
                }
                let (code, what) = if aspect.starts_with("NCCL_") {
                    (
                        "fleet-nccl-setting-differs".to_owned(),
                        format!("{what}, as NCCL reads it (nccl.conf, the declared environment)"),
                    )
                } else {
                    (format!("fleet-{aspect}-differs"), what.to_owned())
                };
                let parts: Vec<String> = values
                    .iter()
                    .map(|(v, s)| {
                        format!(
                            "{} on {} node(s) (e.g. {})",
                            if aspect == "placement" {
                                short_placement(v)
                            } else {
                                v.clone()
                            },
                            s.nodes,
                            s.examples.join(", ")
                        )
                    })
                    .collect();
                out.push(CrossFinding {
                    code,
                    model: model.clone(),
                    aspect,
                    values: values.clone(),
                    message: format!(
                        "{} nodes of {model} differ in {what}: {}",
                        t.nodes,
                        parts.join("; ")
                    ),
                });
            }
        }
        out
    }
}

/// A placement signature as a reader wants it: `8 GPUs x 8 NICs: 16 PIX, 16 NODE, 32 SYS
/// [3f2a]`, the tag telling apart matrices with the same counts.
fn short_placement(v: &str) -> String {
    if !v.contains(' ') && !v.contains('|') && v.starts_with('(') {
        return v.to_owned();
    }
    let rows: Vec<&str> = v.split('|').collect();
    let cols = rows.first().map(|r| r.split(' ').count()).unwrap_or(0);
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for cell in rows.iter().flat_map(|r| r.split(' ')) {
        *counts.entry(cell).or_default() += 1;
    }
    let order = ["PIX", "PXB", "PHB", "NODE", "SYS", "?"];
    let parts: Vec<String> = order
        .iter()
        .filter_map(|l| counts.get(l).map(|n| format!("{n} {l}")))
        .collect();
    // FNV-1a: a short, stable tag for the exact matrix.
    let tag = v.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!(
        "{} GPUs x {cols} NICs: {} [{:04x}]",
        rows.len(),
        parts.join(", "),
        tag & 0xffff
    )
}
