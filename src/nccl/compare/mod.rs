//! What NCCL said in `nccl verify`, held against what gdrdoctor sees on the same node: the
//! answer ("NCCL 2.28.9 on this node uses GDR on mlx5_0..7", "falls back to NET/Socket: no RDMA
//! device"), and every fact both sides have an opinion on:
//!
//! - the network: NCCL's `Using network X` against `rdma-link` (an ACTIVE RDMA port or not);
//! - the NICs: the RDMA devices NCCL lists against the ACTIVE ports gdrdoctor sees;
//! - each NIC's GDR decision (`GPU Direct RDMA Enabled|Disabled for HCA`) against
//!   `peer-memory`'s GPU memory path (sockets never do GDR);
//! - each GPU-NIC pair: NCCL's path type (its GRAPH lines) and its GDR decision, against
//!   gdrdoctor's placement level and GDR level. NCCL routes a pair without GDR through the CPU,
//!   so its path then reads PHB (or farther) whatever the PCIe placement: that is expected, not
//!   a difference;
//! - NCCL's topology dump: its GPUs, its RDMA NICs, and each GPU-NIC distance of its tree.
//!
//! A difference is a finding of its own (`nccl-disagrees`) naming both sides' facts.
//!
//! [`verify`] is the run of the comparison: how NCCL's run ended ([`outcome`]), both sides read
//! once ([`sides`]: gdrdoctor's is the findings `rdma-link` and `peer-memory` already produced,
//! handed in as an [`OwnView`]), one function per fact in an ordered slice ([`facts`],
//! [`topology`]), then the answer and the findings ([`answer`]).

mod answer;
pub(crate) mod codes;
mod facts;
mod outcome;
mod sides;
mod topology;

use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::nccl::{Library, Run};
use crate::model::{Evidence, Finding, Fix};
use serde::Serialize;
use std::collections::BTreeSet;

/// gdrdoctor's own verdicts the comparison stands on: the findings `rdma-link` and
/// `peer-memory` produced for the same inventory.
#[derive(Debug, Clone, Default)]
pub struct OwnView {
    pub rdma_link: Vec<Finding>,
    pub peer_memory: Vec<Finding>,
}

/// One fact, as each side has it.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `network`, `nics`, `hca-gdr`, `gpu-nic`, `topo-gpus`, `topo-nics`, `topo-gpu-nic`.
    pub fact: &'static str,
    pub subject: String,
    pub nccl: String,
    pub gdrdoctor: String,
    /// true: the same; false: they differ; null: not compared (`note` says why).
    pub agree: Option<bool>,
    pub note: Option<String>,
    #[serde(skip)]
    evidence: Vec<Evidence>,
}

/// Whether NCCL uses GDR for one GPU.
#[derive(Debug, Clone, Serialize)]
pub struct GpuUse {
    pub rank: u32,
    pub bus_id: String,
    /// null: NCCL did not say.
    pub gdr: Option<bool>,
    /// The NICs it uses GDR with.
    pub nics: Vec<String>,
    /// What says so: `connections` (the all-reduce's NET connections, `/GDRDMA` or not),
    /// `decision` (NCCL's GPU-NIC GDR line, or its path through the CPU), `network` (sockets).
    pub basis: &'static str,
}

/// NCCL's answer.
#[derive(Debug, Clone, Serialize)]
pub struct NcclAnswer {
    /// One line: `NCCL 2.28.9 (/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9) on this node uses
    /// GDR on mlx5_0..7`.
    pub text: String,
    pub version: Option<String>,
    pub library: Option<String>,
    pub network: Option<String>,
    /// true: every GPU; false: some GPU not; null: NCCL did not say (or did not run).
    pub uses_gdr: Option<bool>,
    pub gdr_nics: Vec<String>,
    pub gpus: Vec<GpuUse>,
}

/// The whole verdict of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    pub answer: NcclAnswer,
    pub comparisons: Vec<Comparison>,
    pub findings: Vec<Finding>,
    /// 0: NCCL uses GDR on every GPU and agrees with gdrdoctor; 1: it does not, or they
    /// disagree, or NCCL failed; 2: NCCL could not be run.
    pub exit_code: u8,
}

const SUBJECT: &str = "node";

/// What the findings of a run cite besides their own facts: the library NCCL was loaded from,
/// and NCCL's warnings.
struct RunEvidence {
    library: Vec<Evidence>,
    warnings: Vec<Evidence>,
}

impl RunEvidence {
    fn of(run: &Run) -> RunEvidence {
        RunEvidence {
            library: run
                .answer
                .as_ref()
                .and_then(|a| a.library.clone())
                .map(|l| Evidence {
                    path: l,
                    value: format!(
                        "{} ({})",
                        match run.library {
                            Library::Nccl => "libnccl",
                            Library::Rccl => "librccl",
                        },
                        run.used()
                            .map(|c| c.source)
                            .unwrap_or("as found by the loader")
                    ),
                })
                .into_iter()
                .collect(),
            warnings: run
                .explanation
                .as_ref()
                .map(|e| {
                    e.warnings
                        .iter()
                        .map(|w| Evidence {
                            path: "NCCL WARN".into(),
                            value: format!("{}x {}", w.count, w.text),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The whole comparison of one run, against the findings the checks produced (`own`).
pub fn verify(inv: &Inventory, config: &Config, own: &OwnView, run: &Run) -> Verification {
    let named = sides::nccl_named(run);
    let mut answer = NcclAnswer {
        text: String::new(),
        version: run.answer.as_ref().and_then(|a| a.version.clone()),
        library: run
            .library_file
            .clone()
            .or_else(|| run.answer.as_ref().and_then(|a| a.library.clone())),
        network: None,
        uses_gdr: None,
        gdr_nics: Vec::new(),
        gpus: Vec::new(),
    };
    let ev = RunEvidence::of(run);
    // No answer, or one that says nothing about the node: the run is all there is to report.
    let outcome = match outcome::answered(run, &named, &ev) {
        Ok(o) => o,
        Err(stopped) => {
            answer.text = stopped.text;
            return Verification {
                answer,
                comparisons: Vec::new(),
                findings: vec![stopped.finding],
                exit_code: 2,
            };
        }
    };
    let ranks: Vec<(u32, String)> = run
        .answer
        .as_ref()
        .map(|a| {
            a.gpus
                .iter()
                .map(|g| {
                    (
                        g.rank,
                        sides::norm_bus(&g.bus_id).unwrap_or_else(|| g.bus_id.clone()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    // NCCL failed, or its all-reduce summed wrong: a finding first, whatever else it said.
    let mut findings = Vec::new();
    let mut exit_code = 0;
    let failed = match outcome::failure(outcome, run.library, &named, ranks.len(), &ev) {
        Some((finding, text)) => {
            exit_code = 1;
            findings.push(finding);
            text
        }
        None => None,
    };
    let sides = sides::Sides::new(inv, config, own, run, ranks);
    let comparisons: Vec<Comparison> = facts::FACTS
        .iter()
        .flat_map(|f| (f.compare)(&sides))
        .collect();
    answer.network = sides.network.clone();
    answer.gpus = answer::gpu_uses(&sides);
    answer::conclude(&mut answer, &sides, &named, failed.as_deref());
    if failed.is_none() {
        let f = answer::finding(&answer, run, outcome, sides.ranks.len(), &ev);
        if f.status != crate::model::Status::Pass {
            exit_code = 1;
        }
        findings.push(f);
    }
    findings.extend(answer::agreed(&comparisons, run.library.name()));
    for f in answer::disagreements(&comparisons, run.library.name()) {
        exit_code = exit_code.max(1);
        findings.push(f);
    }
    Verification {
        answer,
        comparisons,
        findings,
        exit_code,
    }
}

/// The packages that bring NCCL (RCCL on a node of AMD GPUs), for a node without it.
fn install_fix(which: Library) -> Fix {
    match which {
        Library::Nccl => Fix::new(
            "Install NCCL where jobs on this node find it (or rerun with --library PATH for the copy a job uses)",
            "Installing NCCL adds a library and changes nothing for jobs that bring their own (containers, conda environments).",
        )
        .manual("apt-get install libnccl2   # Debian, Ubuntu: from NVIDIA's CUDA repository")
        .manual("dnf install libnccl   # RHEL, Rocky, Alma: from NVIDIA's CUDA repository")
        .manual("python3 -m pip install nvidia-nccl-cu12   # the pip wheel, into the python3 on PATH (PyTorch's wheels bring it)"),
        Library::Rccl => Fix::new(
            "Install RCCL, ROCm's package, where jobs on this node find it (or rerun with --library PATH for the copy a job uses: PyTorch's ROCm wheel bundles one in site-packages/torch/lib)",
            "Installing RCCL adds a library and changes nothing for jobs that bring their own (containers, PyTorch's ROCm wheels).",
        )
        .manual("apt-get install rccl   # Debian, Ubuntu: from AMD's ROCm repository (repo.radeon.com); it installs /opt/rocm/lib/librccl.so.1")
        .manual("dnf install rccl   # RHEL, Rocky, Alma (zypper on SLES): from AMD's ROCm repository")
        .manual("gdrdoctor nccl verify --library /opt/rocm/lib/librccl.so.1   # or the copy a job loads"),
    }
}

/// `a, b, c`, or `none`.
fn list(s: &BTreeSet<String>) -> String {
    if s.is_empty() {
        "none".to_owned()
    } else {
        s.iter().cloned().collect::<Vec<_>>().join(", ")
    }
}

/// `mlx5_0..7` for `mlx5_0`, ..., `mlx5_7`; otherwise the names joined.
pub fn name_ranges(names: &[String]) -> String {
    let mut out: Vec<String> = Vec::new();
    let split = |n: &str| {
        let digits = n.len() - n.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (p, d) = n.split_at(n.len() - digits);
        d.parse::<u32>().ok().map(|d| (p.to_owned(), d))
    };
    let mut i = 0;
    while i < names.len() {
        let Some((prefix, start)) = split(&names[i]) else {
            out.push(names[i].clone());
            i += 1;
            continue;
        };
        let mut end = start;
        let mut j = i + 1;
        while j < names.len() {
            match split(&names[j]) {
                Some((p, d)) if p == prefix && d == end + 1 => {
                    end = d;
                    j += 1;
                }
                _ => break,
            }
        }
        out.push(if end >= start + 2 {
            format!("{prefix}{start}..{end}")
        } else if end == start + 1 {
            format!("{prefix}{start}, {prefix}{end}")
        } else {
            format!("{prefix}{start}")
        });
        i = j;
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_ranges() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            name_ranges(&names(&[
                "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"
            ])),
            "mlx5_0..7"
        );
        assert_eq!(
            name_ranges(&names(&["mlx5_0", "mlx5_1", "mlx5_3", "ib0"])),
            "mlx5_0, mlx5_1, mlx5_3, ib0"
        );
        assert_eq!(name_ranges(&names(&["eth"])), "eth");
        assert_eq!(name_ranges(&[]), "");
    }
}
