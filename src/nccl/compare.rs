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
//!   a difference.
//!
//! A difference is a finding of its own (`nccl-disagrees`) naming both sides' facts.

use super::explain::{ConnGroup, Explanation, Node, bus_id_of};
use super::verify::{Outcome, Run};
use crate::config::Config;
use crate::inventory::Inventory;
use crate::model::{Evidence, Finding, Fix, Status};
use crate::parse::pci::Bdf;
use crate::placement::Level;
use serde::Serialize;
use std::collections::BTreeSet;

/// gdrdoctor's own verdicts the comparison stands on: the findings of `rdma-link` and
/// `peer-memory` for the same inventory.
#[derive(Debug, Clone, Default)]
pub struct OwnView {
    pub rdma_link: Vec<Finding>,
    pub peer_memory: Vec<Finding>,
}

/// One fact, as each side has it.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// `network`, `nics`, `hca-gdr`, `gpu-nic`.
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

/// The packages that bring NCCL, for a node without it.
fn install_fix() -> Fix {
    Fix::new(
        "Install NCCL where jobs on this node find it (or rerun with --library PATH for the copy a job uses)",
        "Installing NCCL adds a library and changes nothing for jobs that bring their own (containers, conda environments).",
    )
    .manual("apt-get install libnccl2   # Debian, Ubuntu: from NVIDIA's CUDA repository")
    .manual("dnf install libnccl   # RHEL, Rocky, Alma: from NVIDIA's CUDA repository")
    .manual("python3 -m pip install nvidia-nccl-cu12   # the pip wheel, into the python3 on PATH (PyTorch's wheels bring it)")
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

/// `NCCL 2.28.9 (/usr/lib/.../libnccl.so.2.28.9)`.
fn nccl_named(run: &Run) -> String {
    let a = run.answer.as_ref();
    let version = a
        .and_then(|a| a.version.clone())
        .or_else(|| {
            run.explanation
                .as_ref()
                .and_then(|e| e.nodes.first())
                .and_then(|n| n.nccl.version.clone())
        })
        .map(|v| format!("NCCL {v}"))
        .unwrap_or_else(|| "NCCL".into());
    match run
        .library_file
        .as_deref()
        .or(a.and_then(|a| a.library.as_deref()))
    {
        Some(lib) => format!("{version} ({lib})"),
        None => version,
    }
}

/// The NCCL name of a placement level: NCCL has no NODE, a path between host bridges of one
/// NUMA node is PHB to it (its CPU nodes are NUMA domains, src/graph/topo.h).
fn nccl_level(l: Level) -> &'static str {
    match l {
        Level::Node => "PHB",
        other => other.as_str(),
    }
}

/// The GDR level of a run of NCCL: the `NCCL_NET_GDR_LEVEL` its log says it had, where NCCL
/// reads the value, else the level in force on the node (`effective::policy`).
fn run_policy(inv: &Inventory, config: &Config, node: &Node) -> super::effective::Policy {
    use super::params::{LevelValue, gdr_level};
    match node
        .env
        .get("NCCL_NET_GDR_LEVEL")
        .map(|v| (v, gdr_level(v)))
    {
        Some((v, LevelValue::Named(limit) | LevelValue::Numbered(limit))) => {
            super::effective::Policy {
                limit,
                source: super::effective::PolicySource::Run(v.clone()),
            }
        }
        _ => super::effective::policy(inv, config),
    }
}

/// The GPU at bus ID `bus` and the RDMA device `nic`, as `check` places the pair.
fn judged_pair(
    inv: &Inventory,
    judged: &super::effective::Judgement,
    bus: &str,
    nic: &str,
) -> Option<super::effective::Candidate> {
    let g = Bdf::parse(bus)?;
    let gi = inv.gpus.iter().position(|x| x.bdf == g)?;
    let ni = inv.rdma.iter().position(|d| d.name == nic)?;
    judged.pair(inv, gi, ni)
}

/// A pair's level as gdrdoctor states it against NCCL's: NCCL's own (`NODE (PHB to NCCL)`
/// from sysfs), with the sysfs level beside where a topology file makes them differ.
fn shown_level(c: &super::effective::Candidate) -> String {
    let sysfs = c.sysfs.as_ref().map(|r| r.level);
    match sysfs {
        Some(s) if c.lines.is_some() && s != c.level => {
            format!("{} in NCCL's topology file ({s} in sysfs)", c.level)
        }
        _ if c.level == Level::Node => format!("{} (PHB to NCCL)", c.level),
        _ => c.level.to_string(),
    }
}

/// NCCL's PCIe path types in its order (topoPathTypeStr, 2.26+ numbering without the others).
fn pcie_rank(path: &str) -> Option<u8> {
    match path {
        "PIX" => Some(0),
        "PXB" => Some(1),
        "PHB" => Some(2),
        "SYS" => Some(3),
        _ => None,
    }
}

/// The peer-memory verdict, per NIC.
struct PeerMemory {
    peermem: bool,
    dmabuf: bool,
    /// A finding that says there is no path at all.
    none: Option<String>,
    /// NICs that cannot register dma-bufs.
    no_dmabuf: Vec<String>,
}

impl PeerMemory {
    fn of(findings: &[Finding]) -> PeerMemory {
        let has = |code: &str| {
            findings
                .iter()
                .any(|f| f.code == code && f.status == Status::Pass)
        };
        let (peermem, dmabuf) = (has("gdr-path-peermem"), has("gdr-path-dmabuf"));
        let none = (!peermem && !dmabuf)
            .then(|| {
                findings
                    .iter()
                    .find(|f| {
                        matches!(
                            f.code,
                            "peermem-not-loaded" | "peermem-not-registered" | "amd-no-gdr-path"
                        )
                    })
                    .map(|f| f.code.to_owned())
            })
            .flatten();
        PeerMemory {
            peermem,
            dmabuf,
            none,
            no_dmabuf: findings
                .iter()
                .filter(|f| f.code == "nic-no-dmabuf")
                .map(|f| f.subject.clone())
                .collect(),
        }
    }

    /// Whether gdrdoctor expects NCCL to enable GDR on this NIC, and why.
    fn expect(&self, nic: &str) -> (Option<bool>, String) {
        if self.peermem {
            (
                Some(true),
                "the peer-memory path (peer-memory: gdr-path-peermem)".into(),
            )
        } else if self.dmabuf && self.no_dmabuf.iter().any(|n| n == nic) {
            (
                Some(false),
                format!(
                    "only the DMA-BUF path, which {nic}'s driver cannot register (peer-memory: nic-no-dmabuf)"
                ),
            )
        } else if self.dmabuf {
            (
                Some(true),
                "the DMA-BUF path (peer-memory: gdr-path-dmabuf)".into(),
            )
        } else if let Some(code) = &self.none {
            (
                Some(false),
                format!("no GPU memory path (peer-memory: {code})"),
            )
        } else {
            (None, "the GPU memory path is unknown (peer-memory)".into())
        }
    }
}

fn norm_bus(s: &str) -> Option<String> {
    Bdf::parse(s.trim()).map(|b| b.to_string())
}

/// The PCI address of a GPU as NCCL named it in a GDR decision: a bus id (`1a000`), a rank
/// (`3`, 2.24-2.28, mapped through the child's rank order), `0-1b000 (rank 3)` (2.29).
fn gpu_of(gpu: &str, ranks: &[(u32, String)]) -> Option<String> {
    if let Some((id, _)) = gpu.split_once(" (rank ") {
        return bus_id_of(id);
    }
    if gpu.len() >= 4 && gpu.ends_with("000") && gpu.bytes().all(|b| b.is_ascii_hexdigit()) {
        return bus_id_of(gpu);
    }
    let rank: u32 = gpu.parse().ok()?;
    ranks
        .iter()
        .find(|(r, _)| *r == rank)
        .map(|(_, b)| b.clone())
}

/// The NIC index of `0`, `1` (hex net ids) or `0-1`.
fn nic_index(nic: &str) -> Option<u32> {
    u32::from_str_radix(nic.rsplit('-').next().unwrap_or(nic), 16).ok()
}

/// The network NCCL used; failing a `Using network` line, sockets when every NIC it judged is one.
fn network_of(node: &Node) -> Option<String> {
    node.networks.first().cloned().or_else(|| {
        (!node.nics.is_empty() && node.nics.iter().all(|n| n.net == "Socket"))
            .then(|| "Socket".to_owned())
    })
}

/// Why NCCL used sockets, in its own terms.
fn socket_reason(node: &Node, e: &Explanation) -> String {
    if node.env.get("NCCL_IB_DISABLE").is_some_and(|v| v == "1") {
        return "NCCL_IB_DISABLE=1 in the environment".into();
    }
    if let Some(v) = node.env.get("NCCL_NET") {
        return format!("NCCL_NET={v} in the environment");
    }
    if node
        .network_notes
        .iter()
        .any(|n| n.contains("No device found"))
    {
        return "no RDMA device (NET/IB : No device found)".into();
    }
    if let Some(w) = e.warnings.iter().find(|w| w.text.contains("NET/IB")) {
        return format!("its IB transport could not be used ({})", w.text);
    }
    if node
        .network_notes
        .iter()
        .any(|n| n.starts_with("Failed to initialize NET plugin"))
    {
        return "its IB transport failed to initialise".into();
    }
    "NCCL chose sockets".into()
}

/// The whole comparison of one run.
pub fn verify(inv: &Inventory, config: &Config, own: &OwnView, run: &Run) -> Verification {
    let named = nccl_named(run);
    let mut findings = Vec::new();
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
    let lib_evidence: Vec<Evidence> = run
        .answer
        .as_ref()
        .and_then(|a| a.library.clone())
        .map(|l| Evidence {
            path: l,
            value: format!(
                "libnccl ({})",
                run.used()
                    .map(|c| c.source)
                    .unwrap_or("as found by the loader")
            ),
        })
        .into_iter()
        .collect();
    let warnings: Vec<Evidence> = run
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
        .unwrap_or_default();

    // No answer at all: the run says nothing about the node.
    let outcome = match (&run.error, &run.answer) {
        (Some(error), _) => {
            let cut =
                run.cut_by_deadline.is_some() && run.timed_out() || error.contains("left no time");
            answer.text = format!("NCCL could not be run: {error}");
            let code = if cut {
                "nccl-verify-cut-short"
            } else {
                "nccl-verify-failed"
            };
            let mut f = Finding::unknown(code, SUBJECT, answer.text.clone()).with(warnings);
            if let Some(n) = &run.log.note {
                f = f.evidence("NCCL_DEBUG_FILE", n.clone());
            } else if run.log.nccl_lines > 0 {
                f = f.evidence(
                    "NCCL_DEBUG_FILE",
                    format!("{} lines from NCCL before it stopped", run.log.nccl_lines),
                );
            }
            if !cut {
                f = f.fix(Fix::new(
                    "Find out where NCCL stops: rerun with --log-dir DIR and read DIR/nccl.log (the last lines say what it was doing)",
                    "Reading only.",
                )
                .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify")
                .manual("dmesg | grep -i -E 'xid|nvrm|mlx5' | tail -20"));
            }
            findings.push(f);
            return Verification {
                answer,
                comparisons: Vec::new(),
                findings,
                exit_code: 2,
            };
        }
        (None, None) => {
            answer.text = "NCCL could not be run: no answer".into();
            findings.push(Finding::unknown(
                "nccl-verify-failed",
                SUBJECT,
                answer.text.clone(),
            ));
            return Verification {
                answer,
                comparisons: Vec::new(),
                findings,
                exit_code: 2,
            };
        }
        (None, Some(a)) => &a.outcome,
    };
    let could_not = |text: String, code: &'static str, fix: Option<Fix>, ev: Vec<Evidence>| {
        let mut f = Finding::unknown(code, SUBJECT, text.clone()).with(ev);
        if let Some(fix) = fix {
            f = f.fix(fix);
        }
        (text, f)
    };
    let stop = match outcome {
        Outcome::NoLibrary => {
            let tried = run
                .answer
                .as_ref()
                .map(|a| {
                    a.tried
                        .iter()
                        .map(|t| Evidence {
                            path: t.library.clone(),
                            value: format!("<{}>", t.error),
                        })
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let names: Vec<String> = run
                .search
                .candidates
                .iter()
                .map(|c| format!("{} ({})", c.library, c.source))
                .collect();
            let mut ev = tried;
            ev.push(Evidence {
                path: "python3".into(),
                value: run.search.python.clone(),
            });
            Some(could_not(
                format!(
                    "no NCCL library could be loaded: tried {}; install NCCL (Debian/Ubuntu libnccl2, RHEL libnccl, or pip install nvidia-nccl-cu12)",
                    names.join(", ")
                ),
                "nccl-library-missing",
                Some(install_fix()),
                ev,
            ))
        }
        Outcome::MissingSymbol { library, symbol } => Some(could_not(
            format!(
                "{library} lacks {symbol}, which every NCCL since 2.4 exports: not an NCCL library gdrdoctor can run"
            ),
            "nccl-verify-failed",
            Some(install_fix()),
            lib_evidence.clone(),
        )),
        Outcome::CudaError { call, error } => Some(could_not(
            format!("{named} could not be run: CUDA: {call}: {error} (see the gpu check)"),
            "nccl-verify-failed",
            None,
            lib_evidence.clone(),
        )),
        Outcome::BadSpec { error } => Some(could_not(
            format!("NCCL could not be run: {error}"),
            "nccl-verify-failed",
            None,
            Vec::new(),
        )),
        _ => None,
    };
    if let Some((text, f)) = stop {
        answer.text = text;
        findings.push(f);
        return Verification {
            answer,
            comparisons: Vec::new(),
            findings,
            exit_code: 2,
        };
    }
    let mut exit_code = 0u8;
    let ranks: Vec<(u32, String)> = run
        .answer
        .as_ref()
        .map(|a| {
            a.gpus
                .iter()
                .map(|g| {
                    (
                        g.rank,
                        norm_bus(&g.bus_id).unwrap_or_else(|| g.bus_id.clone()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let failed = match outcome {
        Outcome::NcclError {
            call,
            code,
            error,
            detail,
        } => {
            exit_code = 1;
            let text = format!(
                "{named} failed: {call} returned {code} ({error}){}",
                detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            );
            findings.push(
                Finding::fail("nccl-error", SUBJECT, text.clone())
                    .with(lib_evidence.clone())
                    .with(warnings.clone())
                    .fix(
                        Fix::new(
                            "Read NCCL's own warnings (the evidence) and its log: they name what failed (a NIC that cannot be opened, a CUDA driver older than the library's CUDA, a network that does not answer)",
                            "Reading only.",
                        )
                        .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify   # then read /tmp/nccl-verify/nccl.log"),
                    ),
            );
            Some(text)
        }
        Outcome::Wrong {
            elements,
            wrong,
            rank,
            index,
            expected,
            got,
        } => {
            exit_code = 1;
            let text = format!(
                "{named}'s all-reduce over {} rank(s) summed wrong: {wrong} of {} int32 elements differ; the first, rank {rank} element {index}: {got} instead of {expected}",
                ranks.len(),
                elements * ranks.len().max(1) as u64
            );
            findings.push(
                Finding::fail("nccl-all-reduce-wrong", SUBJECT, text.clone())
                    .with(lib_evidence.clone())
                    .fix(
                        Fix::new(
                            "Data was corrupted between the GPUs: run the write test and NCCL's own tests with checking on, and look for PCIe and NIC errors; an ACS setting or IOMMU on the path can corrupt peer-to-peer traffic",
                            "Reading and testing only; the tests move bytes between GPUs and NICs.",
                        )
                        .manual("gdrdoctor gdr-test -v")
                        .manual("all_reduce_perf -b 8 -e 128M -f 2 -g 1 -c 1   # nccl-tests, one process per GPU")
                        .manual("dmesg | grep -i -E 'aer|xid|mlx5' | tail -30"),
                    ),
            );
            None
        }
        _ => None,
    };

    let explanation = run.explanation.as_ref();
    let node = explanation.and_then(|e| e.nodes.first());
    let mut comparisons = Vec::new();
    let pm = PeerMemory::of(&own.peer_memory);
    // The ports gdrdoctor sees up.
    let active: Vec<(String, u32)> = inv
        .rdma
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .filter(|p| p.is_active())
                .map(move |p| (d.name.clone(), p.num))
        })
        .collect();
    let why_none = if own.rdma_link.iter().any(|f| f.code == "rdma-no-device") {
        "no RDMA device (rdma-link: rdma-no-device)".to_owned()
    } else if inv.rdma.is_empty() {
        "no RDMA device".to_owned()
    } else {
        format!(
            "no ACTIVE RDMA port on {} (rdma-link)",
            inv.rdma
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let rdma_evidence: Vec<Evidence> = own
        .rdma_link
        .iter()
        .filter(|f| f.status != Status::Pass)
        .flat_map(|f| f.evidence.iter().take(2).cloned())
        .take(4)
        .collect();
    let mut socket_why = None;
    if let (Some(node), Some(e)) = (node, explanation) {
        let network = network_of(node);
        answer.network = network.clone();
        let rdma_net = network.as_deref().filter(|n| *n != "Socket");
        // The network.
        let nccl_side = match network.as_deref() {
            Some("Socket") => {
                let why = socket_reason(node, e);
                socket_why = Some(why.clone());
                format!("NET/Socket: {why}")
            }
            Some(n) => format!("NET/{n}"),
            None => "not in the log (no `Using network` line)".into(),
        };
        let ours = if active.is_empty() {
            format!("sockets: {why_none}")
        } else {
            format!(
                "RDMA: {} ACTIVE port(s): {}",
                active.len(),
                active
                    .iter()
                    .map(|(d, p)| format!("{d}:{p}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let agree = network
            .as_ref()
            .map(|n| (n != "Socket") != active.is_empty());
        let note = match (agree, network.as_deref()) {
            (Some(false), Some("Socket")) if node.env.contains_key("NCCL_IB_DISABLE") || node.env.contains_key("NCCL_NET") => {
                Some("the environment told NCCL to leave the RDMA devices alone".to_owned())
            }
            (Some(false), Some("Socket")) => Some(
                "NCCL could not use the RDMA ports gdrdoctor sees up: see rdma-access (the device files, libibverbs and its providers, the memlock limit) and NCCL's warnings".to_owned(),
            ),
            (Some(false), _) => Some(
                "NCCL found an RDMA network where gdrdoctor sees no ACTIVE port: a plugin network, or a device gdrdoctor does not read".to_owned(),
            ),
            (None, _) => Some("the log does not say which network NCCL used".to_owned()),
            _ => None,
        };
        let mut ev = vec![Evidence {
            path: "NCCL_DEBUG_FILE".into(),
            value: match network.as_deref() {
                Some(n) => format!("Using network {n}"),
                None => "no `Using network` line".into(),
            },
        }];
        ev.extend(node.network_notes.iter().map(|n| Evidence {
            path: "NCCL_DEBUG_FILE".into(),
            value: n.clone(),
        }));
        ev.extend(rdma_evidence.iter().cloned());
        comparisons.push(Comparison {
            fact: "network",
            subject: "network".into(),
            nccl: nccl_side,
            gdrdoctor: ours,
            agree,
            note,
            evidence: ev,
        });

        // The RDMA NICs each side sees.
        let listed: Vec<&super::explain::Nic> = node
            .nics
            .iter()
            .filter(|n| n.net != "Socket" && n.gpu.is_none())
            .collect();
        let with_ports = listed.iter().all(|n| n.port.is_some());
        let nccl_set: BTreeSet<String> = listed
            .iter()
            .map(|n| match (with_ports, n.port) {
                (true, Some(p)) => format!("{}:{p}", n.name),
                _ => n.name.clone(),
            })
            .collect();
        let ours_set: BTreeSet<String> = active
            .iter()
            .map(|(d, p)| {
                if with_ports {
                    format!("{d}:{p}")
                } else {
                    d.clone()
                }
            })
            .collect();
        let list = |s: &BTreeSet<String>| {
            if s.is_empty() {
                "none".to_owned()
            } else {
                s.iter().cloned().collect::<Vec<_>>().join(", ")
            }
        };
        let (agree, note) = match node.env.get("NCCL_IB_HCA") {
            Some(v) => (
                None,
                Some(format!(
                    "NCCL_IB_HCA={v} in the environment chooses NCCL's NICs: not compared"
                )),
            ),
            None => {
                let same = nccl_set == ours_set;
                let note = (!same).then(|| {
                    let only_nccl: Vec<&String> = nccl_set.difference(&ours_set).collect();
                    let only_ours: Vec<&String> = ours_set.difference(&nccl_set).collect();
                    let mut parts = Vec::new();
                    if !only_ours.is_empty() {
                        parts.push(format!(
                            "NCCL does not use {}",
                            only_ours
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    if !only_nccl.is_empty() {
                        parts.push(format!(
                            "gdrdoctor sees no ACTIVE port for {}",
                            only_nccl
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ));
                    }
                    parts.join("; ")
                });
                (Some(same), note)
            }
        };
        comparisons.push(Comparison {
            fact: "nics",
            subject: "RDMA NICs".into(),
            nccl: match (rdma_net, nccl_set.is_empty()) {
                (_, false) => list(&nccl_set),
                (Some(n), true) => format!("none listed (network {n})"),
                (None, true) => "none".into(),
            },
            gdrdoctor: if ours_set.is_empty() {
                format!("none: {why_none}")
            } else {
                format!("ACTIVE: {}", list(&ours_set))
            },
            agree,
            note,
            evidence: listed
                .iter()
                .map(|n| Evidence {
                    path: "NCCL_DEBUG_FILE".into(),
                    value: format!("NET/{}/{} {}", n.net, n.index, n.name),
                })
                .collect(),
        });

        // Each NIC's GDR decision.
        for nic in node
            .nics
            .iter()
            .filter(|n| n.gpu.is_none() && n.gdr != "not-printed")
        {
            let on = nic.gdr == "enabled";
            let (expected, ours, note) = if nic.net == "Socket" {
                (
                    Some(false),
                    "a socket interface: sockets never reach GPU memory".to_owned(),
                    None,
                )
            } else {
                let (e, why) = pm.expect(&nic.name);
                let note = match (e, node.env.get("NCCL_DMABUF_ENABLE")) {
                    (Some(true), Some(v)) if v == "0" && !pm.peermem => Some(
                        "NCCL_DMABUF_ENABLE=0 in the environment turns the DMA-BUF path off"
                            .to_owned(),
                    ),
                    _ => None,
                };
                (
                    e,
                    format!(
                        "{}: {why}",
                        match e {
                            Some(true) => "GDR expected",
                            Some(false) => "no GDR expected",
                            None => "not known",
                        }
                    ),
                    note,
                )
            };
            comparisons.push(Comparison {
                fact: "hca-gdr",
                subject: format!("{} GDR", nic.name),
                nccl: format!(
                    "GPU Direct RDMA {} for HCA {} '{}'",
                    if on { "Enabled" } else { "Disabled" },
                    nic.index,
                    nic.name
                ),
                gdrdoctor: ours,
                agree: expected.map(|e| e == on),
                note,
                evidence: vec![Evidence {
                    path: "NCCL_DEBUG_FILE".into(),
                    value: format!(
                        "NET/{} : GPU Direct RDMA {} for HCA {} '{}'",
                        nic.net,
                        if on { "Enabled" } else { "Disabled" },
                        nic.index,
                        nic.name
                    ),
                }],
            });
        }

        // Each GPU-NIC pair: NCCL's path and decision against placement.
        let rdma_nic = |idx: u32| {
            node.nics
                .iter()
                .find(|n| n.index == idx && n.net != "Socket" && n.gpu.is_none())
        };
        // gdrdoctor's side is the judgement `check` makes (`effective::judge`: NCCL's
        // topology file, the NICs NCCL_IB_HCA selects), under the level this run of NCCL says
        // it had, else the one in force on the node (issue 25).
        let env_set = node.env.contains_key("NCCL_NET_GDR_LEVEL");
        let judged = super::effective::judge_under(inv, run_policy(inv, config, node));
        let gdr_level = judged.policy.limit.describe();
        let mut pairs: Vec<(String, u32)> = Vec::new();
        for p in &node.paths {
            if let (Some(b), Some(i)) = (p.bus_id.as_deref().and_then(norm_bus), p.nic) {
                if rdma_nic(i).is_some() && !pairs.contains(&(b.clone(), i)) {
                    pairs.push((b, i));
                }
            }
        }
        for g in &node.gpu_nic {
            if let (Some(b), Some(i)) = (gpu_of(&g.gpu, &ranks), nic_index(&g.nic)) {
                if rdma_nic(i).is_some() && !pairs.contains(&(b.clone(), i)) {
                    pairs.push((b, i));
                }
            }
        }
        pairs.sort();
        let mut decided: Vec<(String, String, Option<bool>)> = Vec::new();
        for (bus, idx) in &pairs {
            let Some(nic) = rdma_nic(*idx) else { continue };
            let path = node.paths.iter().find(|p| {
                p.nic == Some(*idx) && p.bus_id.as_deref().and_then(norm_bus).as_ref() == Some(bus)
            });
            let line = node.gpu_nic.iter().find(|g| {
                nic_index(&g.nic) == Some(*idx) && gpu_of(&g.gpu, &ranks).as_ref() == Some(bus)
            });
            let rank = ranks.iter().find(|(_, b)| b == bus).map(|(r, _)| *r);
            let groups: Vec<&ConnGroup> = node
                .connections
                .iter()
                .filter(|c| Some(c.rank) == rank && c.nic == *idx && c.net != "Socket")
                .collect();
            let nccl_gdr = if let Some(l) = line {
                Some(l.gdr)
            } else if !groups.is_empty() {
                Some(groups.iter().any(|c| c.gdr))
            } else {
                path.and_then(|p| match p.path.as_str() {
                    "LOC" | "NVL" | "NVB" | "C2C" | "PIX" | "PXB" | "P2C" => Some(true),
                    "PHB" | "SYS" if !env_set => Some(false),
                    _ => None,
                })
            };
            decided.push((bus.clone(), nic.name.clone(), nccl_gdr));
            let pair = judged_pair(inv, &judged, bus, &nic.name);
            let route = pair.as_ref().and_then(|c| c.sysfs.clone());
            let (hca_expect, hca_why) = pm.expect(&nic.name);
            let beyond = pair
                .as_ref()
                .is_some_and(|c| judged.verdict(c.level) == super::effective::Verdict::NoGdr);
            let ours_gdr = match (hca_expect, &pair) {
                (Some(false), _) => Some(false),
                (_, Some(_)) if beyond => Some(false),
                (Some(true), Some(_)) => Some(true),
                _ => None,
            };
            let expected_path = pair.as_ref().map(|c| {
                let l = nccl_level(c.level);
                if ours_gdr == Some(false) && pcie_rank(l) < pcie_rank("PHB") {
                    "PHB"
                } else {
                    l
                }
            });
            let path_agree = match (path.map(|p| p.path.as_str()), expected_path) {
                (Some(p), Some(e)) if pcie_rank(p).is_some() => Some(p == e),
                _ => None,
            };
            let gdr_agree = match (nccl_gdr, ours_gdr) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            };
            let agree = match (path_agree, gdr_agree) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (None, None) => None,
                _ => Some(true),
            };
            let gdr_word = |g: Option<bool>| match g {
                Some(true) => "GDR",
                Some(false) => "no GDR",
                None => "GDR not said",
            };
            let nccl_side = format!(
                "{}, {}{}",
                path.map(|p| format!("{} (NET/{}, {} hops)", p.path, p.net, p.hops))
                    .unwrap_or_else(|| "no path line".into()),
                gdr_word(nccl_gdr),
                match line {
                    Some(l) => format!(
                        " (distance {} {} level {})",
                        l.distance_name,
                        if l.gdr { "within" } else { "beyond" },
                        l.level_name
                    ),
                    None if !groups.is_empty() => " (its NET connections)".into(),
                    None => String::new(),
                }
            );
            let ours_side = match &pair {
                Some(c) => format!(
                    "{}, {}: {}",
                    shown_level(c),
                    gdr_word(ours_gdr),
                    match (hca_expect, beyond) {
                        (Some(false), _) => hca_why.clone(),
                        (_, true) => format!("beyond the GDR level {gdr_level}"),
                        _ => format!("within the GDR level {gdr_level}, {hca_why}"),
                    }
                ),
                None => "no placement (gdrdoctor does not place this GPU or NIC)".into(),
            };
            let note = match (path.map(|p| p.path.as_str()), &pair) {
                (_, None) => Some("not compared: gdrdoctor has no route for the pair".to_owned()),
                (Some(p), _) if pcie_rank(p).is_none() => Some(format!(
                    "NCCL's path {p} is not a PCIe level (through another GPU or the CPU's fabric): only the GDR decision is compared"
                )),
                _ => None,
            };
            let mut ev = Vec::new();
            if let Some(p) = path {
                ev.push(Evidence {
                    path: "NCCL_DEBUG_FILE".into(),
                    value: format!(
                        "GPU/{} : ... NET/{} ({}/{}/{})",
                        p.gpu, p.net, p.hops, p.bandwidth, p.path
                    ),
                });
            }
            if let Some(l) = line {
                ev.push(Evidence {
                    path: "NCCL_DEBUG_FILE".into(),
                    value: format!(
                        "GPU Direct RDMA {} for GPU {} / HCA {} (distance {} {} {})",
                        if l.gdr { "Enabled" } else { "Disabled" },
                        l.gpu,
                        l.nic,
                        l.distance,
                        if l.gdr { "<=" } else { l.comparison },
                        l.level
                    ),
                });
            }
            if let Some(r) = &route {
                ev.push(Evidence {
                    path: format!("{} -> {}", bus, nic.name),
                    value: format!(
                        "{} via {}",
                        r.level,
                        if r.bridges.is_empty() {
                            "no bridge".to_owned()
                        } else {
                            r.bridges
                                .iter()
                                .map(|b| b.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                });
            }
            comparisons.push(Comparison {
                fact: "gpu-nic",
                subject: format!("GPU {bus} -> {}", nic.name),
                nccl: nccl_side,
                gdrdoctor: ours_side,
                agree,
                note,
                evidence: ev,
            });
        }

        // Per GPU: does NCCL use GDR?
        for (rank, bus) in &ranks {
            let use_ = if network.as_deref() == Some("Socket") {
                GpuUse {
                    rank: *rank,
                    bus_id: bus.clone(),
                    gdr: Some(false),
                    nics: Vec::new(),
                    basis: "network",
                }
            } else {
                let groups: Vec<&ConnGroup> = node
                    .connections
                    .iter()
                    .filter(|c| c.rank == *rank)
                    .collect();
                if !groups.is_empty() {
                    let mut nics: Vec<String> = groups
                        .iter()
                        .filter(|c| c.gdr)
                        .map(|c| {
                            rdma_nic(c.nic)
                                .map(|n| n.name.clone())
                                .unwrap_or_else(|| format!("NET/{}/{}", c.net, c.nic))
                        })
                        .collect();
                    nics.sort();
                    nics.dedup();
                    GpuUse {
                        rank: *rank,
                        bus_id: bus.clone(),
                        gdr: Some(groups.iter().all(|c| c.gdr)),
                        nics,
                        basis: "connections",
                    }
                } else {
                    let mine: Vec<&(String, String, Option<bool>)> =
                        decided.iter().filter(|(b, _, _)| b == bus).collect();
                    let nics: Vec<String> = mine
                        .iter()
                        .filter(|(_, _, g)| *g == Some(true))
                        .map(|(_, n, _)| n.clone())
                        .collect();
                    let gdr = if !nics.is_empty() {
                        Some(true)
                    } else if (!mine.is_empty() && mine.iter().all(|(_, _, g)| *g == Some(false)))
                        || mine.is_empty()
                            && node
                                .nics
                                .iter()
                                .any(|n| n.net != "Socket" && n.gdr == "disabled")
                            && !node
                                .nics
                                .iter()
                                .any(|n| n.net != "Socket" && n.gdr == "enabled")
                    {
                        Some(false)
                    } else {
                        None
                    };
                    GpuUse {
                        rank: *rank,
                        bus_id: bus.clone(),
                        gdr,
                        nics,
                        basis: "decision",
                    }
                }
            };
            answer.gpus.push(use_);
        }
    }

    if let Some(t) = &run.topology_dump {
        let judged = super::effective::judge(inv, config);
        comparisons.extend(topology(inv, &judged, run, answer.network.as_deref(), t));
    }

    // The answer.
    let gpus = &answer.gpus;
    answer.uses_gdr = if gpus.is_empty() {
        None
    } else if gpus.iter().all(|g| g.gdr == Some(true)) {
        Some(true)
    } else if gpus.iter().any(|g| g.gdr == Some(false)) {
        Some(false)
    } else {
        None
    };
    let mut gdr_nics: Vec<String> = gpus.iter().flat_map(|g| g.nics.iter().cloned()).collect();
    gdr_nics.sort_by_key(|a| natural(a));
    gdr_nics.dedup();
    answer.gdr_nics = gdr_nics;
    let without: Vec<&str> = gpus
        .iter()
        .filter(|g| g.gdr == Some(false))
        .map(|g| g.bus_id.as_str())
        .collect();
    let unsaid: Vec<&str> = gpus
        .iter()
        .filter(|g| g.gdr.is_none())
        .map(|g| g.bus_id.as_str())
        .collect();
    let first_cause = explanation
        .and_then(|e| e.diagnoses.first())
        .map(|d| format!("{}: {}", d.subject, d.message));
    answer.text = if let Some(text) = &failed {
        text.clone()
    } else if let Some(why) = &socket_why {
        format!("{named} falls back to NET/Socket: {why}")
    } else if answer.uses_gdr == Some(true) {
        format!(
            "{named} on this node uses GDR on {}",
            name_ranges(&answer.gdr_nics)
        )
    } else if !without.is_empty() && without.len() == gpus.len() {
        format!(
            "{named} on this node does not use GDR: {}",
            first_cause
                .clone()
                .unwrap_or_else(|| "NCCL turned it off".into())
        )
    } else if !without.is_empty() {
        format!(
            "{named} on this node uses GDR on {} for {} of {} GPUs, not for GPU {}: {}",
            name_ranges(&answer.gdr_nics),
            gpus.len() - without.len(),
            gpus.len(),
            without.join(", "),
            first_cause
                .clone()
                .unwrap_or_else(|| "NCCL turned it off".into())
        )
    } else if node.is_none() {
        format!(
            "{named} ran, but its log says nothing: {}",
            run.log.note.as_deref().unwrap_or("no NCCL line")
        )
    } else {
        format!(
            "{named} did not say whether it uses GDR for GPU {}",
            unsaid.join(", ")
        )
    };

    // The findings: the answer, then what the two sides agree and disagree on.
    if failed.is_none() {
        let all_reduce = match outcome {
            Outcome::Ok { elements } => format!(
                "; the all-reduce over {} rank(s) summed right ({elements} int32 each)",
                ranks.len()
            ),
            _ => String::new(),
        };
        let message = format!("{}{all_reduce}", answer.text);
        let mut ev = lib_evidence.clone();
        ev.extend(warnings.iter().cloned());
        let f = match answer.uses_gdr {
            Some(true) => Finding::pass("nccl-uses-gdr", SUBJECT, message).with(ev),
            Some(false) => {
                let d = explanation.and_then(|e| e.diagnoses.first());
                let mut f = Finding::fail("nccl-no-gdr", SUBJECT, message).with(ev);
                let fix = match d {
                    Some(d) => {
                        let mut fix = Fix::new(
                            d.fix.clone(),
                            "As the fix of the check named: `gdrdoctor explain CODE` says what it changes.",
                        );
                        for s in &d.see {
                            fix = fix.manual(format!("gdrdoctor explain {}", s.code));
                        }
                        fix
                    }
                    None => Fix::new(
                        "Read NCCL's log for why it turned GDR off (rerun with --log-dir DIR), and the checks that judge the GPU memory path and placement",
                        "Reading only.",
                    )
                    .manual("gdrdoctor check --select peer-memory,pcie-placement -v"),
                };
                f = f.fix(fix);
                if let Some(d) = d {
                    f = f.evidence(
                        "gdrdoctor nccl explain",
                        format!(
                            "{}{}",
                            d.cause,
                            if d.see.is_empty() {
                                String::new()
                            } else {
                                format!(
                                    " (see {})",
                                    d.see
                                        .iter()
                                        .map(|s| format!("{}: {}", s.check, s.code))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                )
                            }
                        ),
                    );
                }
                f
            }
            None => Finding::unknown("nccl-gdr-unknown", SUBJECT, message)
                .with(ev)
                .fix(
                    Fix::new(
                        "Rerun with --log-dir DIR and read NCCL's log: an NCCL newer than this gdrdoctor may word its decisions differently",
                        "Reading only.",
                    )
                    .manual("gdrdoctor nccl verify --log-dir /tmp/nccl-verify"),
                ),
        };
        if f.status != Status::Pass {
            exit_code = 1;
        }
        findings.push(f);
    }
    let agreed: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| c.agree == Some(true))
        .collect();
    if !agreed.is_empty() {
        let count = |fact: &str| agreed.iter().filter(|c| c.fact == fact).count();
        let mut what = Vec::new();
        if let Some(c) = agreed.iter().find(|c| c.fact == "network") {
            what.push(format!("the network ({})", c.nccl));
        }
        if let Some(c) = agreed.iter().find(|c| c.fact == "nics") {
            what.push(format!("the RDMA NICs ({})", c.nccl));
        }
        if count("hca-gdr") > 0 {
            what.push(format!("{} NIC GDR decision(s)", count("hca-gdr")));
        }
        let dumped = agreed
            .iter()
            .filter(|c| c.fact.starts_with("topo-"))
            .count();
        if dumped > 0 {
            what.push(format!("{dumped} fact(s) of its topology dump"));
        }
        if count("gpu-nic") > 0 {
            what.push(format!("{} GPU-NIC path(s)", count("gpu-nic")));
        }
        findings.push(
            Finding::pass(
                "nccl-agrees",
                SUBJECT,
                format!("NCCL agrees with gdrdoctor on {}", what.join(", ")),
            )
            .with(
                agreed
                    .iter()
                    .map(|c| Evidence {
                        path: c.subject.clone(),
                        value: format!("NCCL: {}; gdrdoctor: {}", c.nccl, c.gdrdoctor),
                    })
                    .take(16),
            ),
        );
    }
    for c in comparisons.iter().filter(|c| c.agree == Some(false)) {
        exit_code = exit_code.max(1);
        let check = match c.fact {
            "network" | "nics" => "rdma-link",
            "hca-gdr" => "peer-memory",
            "topo-gpus" => "gpu-driver",
            "topo-nics" => "rdma-link",
            _ => "pcie-placement",
        };
        findings.push(
            Finding::warn(
                "nccl-disagrees",
                c.subject.clone(),
                format!(
                    "NCCL and gdrdoctor differ on {}: NCCL: {}; gdrdoctor: {}{}",
                    c.subject,
                    c.nccl,
                    c.gdrdoctor,
                    c.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
            )
            .with(c.evidence.iter().cloned())
            .fix(
                Fix::new(
                    format!(
                        "Find out which side is wrong: NCCL's own log and topology dump (--log-dir) against the {check} check's evidence; an NCCL_* setting in the environment or /etc/nccl.conf, an NCCL_TOPO_FILE, or a virtual PCI tree can make NCCL see the node differently"
                    ),
                    "Reading only.",
                )
                .manual("gdrdoctor nccl verify -v --log-dir /tmp/nccl-verify")
                .manual(format!("gdrdoctor check --select {check} -v")),
            ),
        );
    }
    Verification {
        answer,
        comparisons,
        findings,
        exit_code,
    }
}

/// NCCL's dumped topology against gdrdoctor's view: the GPUs NCCL found against those it was
/// given, the RDMA NICs it found (and their PCI addresses) against the ACTIVE ports, and each
/// GPU-NIC distance its tree gives against placement's level.
fn topology(
    inv: &Inventory,
    judged: &super::effective::Judgement,
    run: &Run,
    network: Option<&str>,
    t: &super::verify::TopoDump,
) -> Vec<Comparison> {
    let path = t
        .path
        .clone()
        .unwrap_or_else(|| "NCCL_TOPO_DUMP_FILE".into());
    let Some(dump) = crate::parse::nccl_dump::parse(&t.text) else {
        return vec![Comparison {
            fact: "topo-gpus",
            subject: "topology dump".into(),
            nccl: format!("{} bytes without a <system> element", t.bytes),
            gdrdoctor: format!("{} GPU(s) given to NCCL", run.gpus.len()),
            agree: None,
            note: Some("NCCL's topology dump is unreadable: not compared".into()),
            evidence: Vec::new(),
        }];
    };
    let ev = |value: String| Evidence {
        path: path.clone(),
        value,
    };
    let mut out = Vec::new();
    // The GPUs.
    let ours: BTreeSet<String> = run.gpus.iter().filter_map(|g| norm_bus(g)).collect();
    let theirs: BTreeSet<String> = dump
        .gpus
        .iter()
        .filter_map(|g| g.bus_id.as_deref().and_then(norm_bus))
        .collect();
    let list = |s: &BTreeSet<String>| {
        if s.is_empty() {
            "none".to_owned()
        } else {
            s.iter().cloned().collect::<Vec<_>>().join(", ")
        }
    };
    out.push(Comparison {
        fact: "topo-gpus",
        subject: "GPUs in NCCL's topology".into(),
        nccl: list(&theirs),
        gdrdoctor: format!("given to NCCL: {}", list(&ours)),
        agree: Some(ours == theirs),
        note: (ours != theirs).then(|| {
            "NCCL's topology does not hold the GPUs it was given: an NCCL_TOPO_FILE, or GPUs it could not place".to_owned()
        }),
        evidence: dump
            .gpus
            .iter()
            .map(|g| {
                ev(format!(
                    "<gpu rank={} gdr={}> in <pci busid={}>",
                    g.rank.map_or("?".into(), |r| r.to_string()),
                    g.gdr.map_or("?", |b| if b { "1" } else { "0" }),
                    g.bus_id.as_deref().unwrap_or("?")
                ))
            })
            .collect(),
    });
    // The RDMA NICs: the dump's nets that are RDMA devices here, or all of them on an RDMA
    // network (a socket network's nets are netdevs).
    let rdma_names: BTreeSet<&str> = inv.rdma.iter().map(|d| d.name.as_str()).collect();
    let socket = network == Some("Socket");
    let rdma_nets: Vec<&crate::parse::nccl_dump::DumpNet> = dump
        .nets
        .iter()
        .filter(|n| rdma_names.contains(n.name.as_str()) || (!socket && network.is_some()))
        .collect();
    let theirs: BTreeSet<String> = rdma_nets.iter().map(|n| n.name.clone()).collect();
    let active: BTreeSet<String> = inv
        .rdma
        .iter()
        .filter(|d| d.ports.iter().any(|p| p.is_active()))
        .map(|d| d.name.clone())
        .collect();
    let mut moved = Vec::new();
    for n in &rdma_nets {
        let ours = inv
            .rdma
            .iter()
            .find(|d| d.name == n.name)
            .and_then(|d| d.pci)
            .map(|b| b.to_string());
        let theirs = n.bus_id.as_deref().and_then(norm_bus);
        if let (Some(o), Some(t)) = (&ours, &theirs) {
            if o != t {
                moved.push(format!("{} at {t} for NCCL, {o} in sysfs", n.name));
            }
        }
    }
    let same = theirs == active && moved.is_empty();
    let mut notes = Vec::new();
    if theirs != active {
        notes.push(format!(
            "NCCL's topology holds {}, gdrdoctor sees ACTIVE ports on {}",
            list(&theirs),
            list(&active)
        ));
    }
    notes.extend(moved);
    out.push(Comparison {
        fact: "topo-nics",
        subject: "RDMA NICs in NCCL's topology".into(),
        nccl: if theirs.is_empty() {
            format!(
                "none{}",
                if dump.nets.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (only {})",
                        dump.nets
                            .iter()
                            .map(|n| n.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )
        } else {
            list(&theirs)
        },
        gdrdoctor: format!("ACTIVE: {}", list(&active)),
        agree: if network.is_none() && theirs.is_empty() {
            None
        } else {
            Some(same)
        },
        note: (!notes.is_empty()).then(|| notes.join("; ")),
        evidence: dump
            .nets
            .iter()
            .map(|n| {
                ev(format!(
                    "<net name={} dev={} port={} gdr={}> in {}",
                    n.name,
                    n.dev.map_or("?".into(), |d| d.to_string()),
                    n.port.map_or("?".into(), |d| d.to_string()),
                    n.gdr.map_or("?", |b| if b { "1" } else { "0" }),
                    n.bus_id
                        .as_deref()
                        .map_or("no PCI device (on the CPU)".to_owned(), |b| format!(
                            "<pci busid={b}>"
                        ))
                ))
            })
            .collect(),
    });
    // Each GPU-NIC distance, NCCL's tree against placement.
    for g in &dump.gpus {
        let Some(gb) = g.bus_id.as_deref().and_then(Bdf::parse) else {
            continue;
        };
        for n in &rdma_nets {
            let Some(dev) = inv.rdma.iter().find(|d| d.name == n.name) else {
                continue;
            };
            // NCCL's tree as `check` builds it: from the topology file when one is in effect.
            let pair = judged_pair(inv, judged, &gb.to_string(), &dev.name);
            let route = pair.as_ref().and_then(|c| c.sysfs.clone());
            let theirs = crate::parse::nccl_dump::level(g, n);
            let ours = pair.as_ref().map(|c| nccl_level(c.level));
            out.push(Comparison {
                fact: "topo-gpu-nic",
                subject: format!("GPU {gb} -> {} in NCCL's topology", n.name),
                nccl: theirs.to_owned(),
                gdrdoctor: match &pair {
                    Some(c) => shown_level(c),
                    None => "no placement".into(),
                },
                agree: ours.map(|o| o == theirs),
                note: match ours {
                    None => Some("not compared: gdrdoctor has no route for the pair".into()),
                    Some(o) if o != theirs => Some(
                        "NCCL's PCI tree differs from the one gdrdoctor expects it to build (sysfs, or the topology file in effect): a virtual PCI tree, or switches NCCL merged".into(),
                    ),
                    _ => None,
                },
                evidence: vec![
                    ev(format!(
                        "<gpu> under {} ; <net name={}> under {}",
                        g.place.pci.join(" > "),
                        n.name,
                        if n.place.pci.is_empty() {
                            "the CPU".to_owned()
                        } else {
                            n.place.pci.join(" > ")
                        }
                    )),
                    Evidence {
                        path: format!("{gb} -> {}", n.name),
                        value: route
                            .as_ref()
                            .map_or("no route".into(), |r| r.level.to_string()),
                    },
                ],
            });
        }
    }
    out
}

/// `mlx5_10` after `mlx5_9`.
fn natural(s: &str) -> (String, u64) {
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (p, d) = s.split_at(s.len() - digits);
    (p.to_owned(), d.parse().unwrap_or(0))
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

    #[test]
    fn gpus_named_in_every_wording() {
        let ranks = vec![
            (0, "0000:18:00.0".to_owned()),
            (1, "0000:3b:00.0".to_owned()),
        ];
        assert_eq!(gpu_of("1", &ranks).as_deref(), Some("0000:3b:00.0"));
        assert_eq!(gpu_of("18000", &ranks).as_deref(), Some("0000:18:00.0"));
        assert_eq!(
            gpu_of("0-3b000 (rank 1)", &ranks).as_deref(),
            Some("0000:3b:00.0")
        );
        assert_eq!(gpu_of("7", &ranks), None);
    }
}
