//! The report: check results plus what an operator needs around them (which node, which root,
//! the verdict), rendered by one module per format.

pub mod dot;
pub mod format;
mod group;
pub mod human;
pub mod jobs;
pub mod json;
pub mod junit;
pub mod nccl;
pub mod nfd;
pub mod picture;
pub mod prometheus;
pub mod reason;
pub mod sample;
pub mod svg;
pub mod topo;
pub mod twonode;

pub use format::Format;

use crate::checks::CheckResult;
use crate::inventory::{GpuVendor, Inventory, Problem};
use crate::model::gdr::GdrTest;
use crate::model::{Runs, Status};
use crate::parse::pci::Bdf;
use serde::Serialize;
use std::collections::BTreeMap;

/// Bumped when a field changes meaning or disappears; adding fields keeps the version.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub schema_version: u32,
    pub gdrdoctor_version: &'static str,
    pub root: RootInfo,
    pub node: NodeInfo,
    pub verdict: Verdict,
    pub counts: Counts,
    pub checks: Vec<CheckResult>,
    pub inventory: InventorySummary,
}

#[derive(Debug, Serialize)]
pub struct RootInfo {
    /// The root as given (`/` when live).
    pub path: String,
    pub live: bool,
}

#[derive(Debug, Serialize)]
pub struct NodeInfo {
    pub hostname: Option<String>,
    /// DMI vendor and product (`Supermicro SYS-821GE-TNHR`); no serial numbers.
    pub product: Option<String>,
    pub board: Option<String>,
    pub kernel: Option<String>,
    pub gpus: usize,
    pub rdma_devices: usize,
}

#[derive(Debug, Serialize)]
pub struct Verdict {
    /// `ready`, `ready-unverified`, `not-ready` or `nothing-verified`: the one word for the
    /// run. `nothing-verified`: no check that ran passed (or warned), so there is nothing to
    /// stand a "ready" on (everything skipped or unknown, a root without a PCI tree); not ready.
    pub state: State,
    /// Some check failed is not the only way to be not ready: see `state`.
    pub ready: bool,
    /// Some check judged the node and none ended unknown. A ready but unverified node passed
    /// what could be read, and some of it could not be (no root, unreadable files); `--strict`
    /// fails it.
    pub verified: bool,
    /// Warnings and unknowns counted as failures (`--strict`).
    pub strict: bool,
    pub exit_code: u8,
    /// The checks that make the node not ready, with their worst codes.
    pub blocking: Vec<Blocking>,
    /// One line: what a scheduler's drain reason or a log line should say.
    pub summary: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Ready,
    ReadyUnverified,
    NotReady,
    NothingVerified,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Ready => "ready",
            State::ReadyUnverified => "ready-unverified",
            State::NotReady => "not-ready",
            State::NothingVerified => "nothing-verified",
        }
    }
}

/// What `--format reason`, JUnit and the fleet view call a run that verified nothing.
pub const NOTHING_VERIFIED: &str = "nothing-verified";

#[derive(Debug, Serialize)]
pub struct Blocking {
    pub check: &'static str,
    pub status: Status,
    pub codes: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct Counts {
    pub checks: BTreeMap<Status, usize>,
    pub findings: BTreeMap<Status, usize>,
}

#[derive(Debug, Serialize)]
pub struct InventorySummary {
    pub gpus: Vec<GpuSummary>,
    /// What the GPU libraries said (live), or why they were not asked.
    pub gpu_runtime: crate::model::gpu::Runtime,
    /// The GDR write test's pairs and what each child measured; null when it did not run.
    pub gdr_test: Option<Vec<GdrSummary>>,
    /// NCCL's own run (`--nccl-verify`); absent when it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_verify: Option<NcclVerifySummary>,
    pub rdma_devices: Vec<RdmaSummary>,
    /// The NCCL release the node's jobs run, as the site states it or the node's files say it
    /// (`inventory::nccl_release`); absent when nothing says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_release: Option<NcclRelease>,
    /// The sample window (`--sample`) or the last run's reading (`--baseline`) and what grew
    /// since; absent when neither was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample: Option<sample::SampleSummary>,
    /// Why a second reading that was asked for is not there (`--baseline` on a first run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub span_note: Option<String>,
    /// `--baseline FILE`: whether this run's reading was kept for the next run; absent without
    /// --baseline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_written: Option<bool>,
    /// Why it was not: the next run cannot judge what grew.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_error: Option<String>,
    /// Files and directories that could not be read or made no sense.
    pub problems: Vec<Problem>,
}

#[derive(Debug, Serialize)]
pub struct GpuSummary {
    pub bdf: Bdf,
    pub vendor: GpuVendor,
    pub ids: String,
    pub model: Option<String>,
    pub driver: Option<String>,
    pub numa_node: Option<i32>,
    pub link: Option<String>,
    /// The largest prefetchable BAR (NVIDIA's BAR1, AMD's VRAM BAR), from sysfs.
    pub bar1_bytes: Option<u64>,
    /// NVLink-C2C to its CPU (Grace superchips): `up` (NCCL reaches its CPU's NICs over it),
    /// `down` (NVML reports the links, none up); null when it has none. `c2c_from` says who
    /// said so: `nvml` or `pci-id` (the superchip's device ID). Both absent on other GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c2c: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c2c_from: Option<&'static str>,
}

/// The NCCL release and what said it.
#[derive(Debug, Serialize)]
pub struct NcclRelease {
    /// `2.27.3`.
    pub version: String,
    /// The file (or `config nccl.version`).
    pub path: String,
    /// What in it named the release.
    pub value: String,
}

/// What NCCL did in `--nccl-verify`; `gdrdoctor nccl verify --format json` has all of it.
#[derive(Debug, Serialize)]
pub struct NcclVerifySummary {
    /// Which library ran: `nccl`, or `rccl` on a node of AMD GPUs.
    pub collective: crate::parse::nccl_topo::Library,
    /// The file libnccl (librccl) was loaded from, links resolved.
    pub library: Option<String>,
    /// `candidates[].source` of docs/nccl-verify-json.md: `loader`, `rocm`, `pip-wheel`, ...
    pub library_source: Option<&'static str>,
    pub version: Option<String>,
    /// `one-rank` or `all-reduce`.
    pub mode: &'static str,
    pub gpus: Vec<String>,
    /// The network NCCL used (`IB`, `Socket`), from its log.
    pub network: Option<String>,
    /// The all-reduce's result (`ok`, `wrong`, `nccl-error`, ...), or null without an answer.
    pub result: Option<String>,
    /// Why the child gave no answer.
    pub error: Option<String>,
    /// The nccl-verify check's first finding: NCCL's answer in one line.
    pub answer: Option<String>,
    pub elapsed_ms: f64,
}

#[derive(Debug, Serialize)]
pub struct GdrSummary {
    pub gpu: Option<Bdf>,
    /// `mlx5_0 port 1`.
    pub nic: Option<String>,
    pub memory: crate::model::gdr::Memory,
    pub level: Option<crate::model::Level>,
    pub expected_gbps: Option<f64>,
    /// What the test child reported.
    pub result: Option<crate::model::gdr::PairResult>,
    /// Why the child reported nothing (killed at its deadline, crashed).
    pub error: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct RdmaSummary {
    pub name: String,
    pub pci: Option<Bdf>,
    /// Its PCI function's NUMA node (`-1` when the platform does not say).
    pub numa_node: Option<i32>,
    pub driver: Option<String>,
    pub fw_ver: Option<String>,
    pub ports: Vec<PortSummary>,
}

#[derive(Debug, Serialize)]
pub struct PortSummary {
    pub port: u32,
    pub state: Option<String>,
    pub phys_state: Option<String>,
    pub link_layer: Option<String>,
    pub rate_gbps: Option<f64>,
    pub netdev: Option<String>,
    pub mtu: Option<u32>,
    pub gids: Vec<GidSummary>,
}

#[derive(Debug, Serialize)]
pub struct GidSummary {
    pub index: u32,
    pub gid: String,
    #[serde(rename = "type")]
    pub gid_type: Option<String>,
    pub ndev: Option<String>,
}

pub struct Options {
    pub strict: bool,
    pub root_display: String,
}

pub fn build(inv: &Inventory, runs: &Runs, checks: Vec<CheckResult>, options: &Options) -> Report {
    let blocks = |s: Status| {
        s == Status::Fail || (options.strict && matches!(s, Status::Warn | Status::Unknown))
    };
    let blocking: Vec<Blocking> = checks
        .iter()
        .filter(|c| blocks(c.status))
        .map(|c| {
            let mut codes: Vec<&'static str> = c
                .findings
                .iter()
                .filter(|f| blocks(f.status))
                .map(|f| f.code)
                .collect();
            codes.dedup();
            Blocking {
                check: c.id,
                status: c.status,
                codes,
            }
        })
        .collect();
    // A verdict stands on at least one check that judged the node: pass or warn (a failure
    // blocks anyway). All skipped or unknown is not "ready", whatever else it is.
    let judged = checks
        .iter()
        .any(|c| matches!(c.status, Status::Pass | Status::Warn | Status::Fail));
    let ready = blocking.is_empty() && judged;
    let mut counts = Counts {
        checks: BTreeMap::new(),
        findings: BTreeMap::new(),
    };
    for s in Status::ALL {
        counts
            .checks
            .insert(s, checks.iter().filter(|c| c.status == s).count());
        counts.findings.insert(
            s,
            checks
                .iter()
                .flat_map(|c| &c.findings)
                .filter(|f| f.status == s)
                .count(),
        );
    }
    let verified = judged && !checks.iter().any(|c| c.status == Status::Unknown);
    let state = match (ready, verified, judged) {
        (true, true, _) => State::Ready,
        (true, false, _) => State::ReadyUnverified,
        (false, _, false) => State::NothingVerified,
        (false, _, true) => State::NotReady,
    };
    let summary = summary_line(state, &blocking, &checks, &counts);
    Report {
        schema: "gdrdoctor.report",
        schema_version: SCHEMA_VERSION,
        gdrdoctor_version: env!("CARGO_PKG_VERSION"),
        root: RootInfo {
            path: options.root_display.clone(),
            live: inv.live,
        },
        node: NodeInfo {
            hostname: inv.kernel.hostname.clone(),
            product: inv.kernel.product.clone(),
            board: inv.kernel.board.clone(),
            kernel: inv.kernel.release.value().cloned(),
            gpus: inv.gpus.len(),
            rdma_devices: inv.rdma.len(),
        },
        verdict: Verdict {
            state,
            ready,
            verified,
            strict: options.strict,
            exit_code: if ready { 0 } else { 1 },
            blocking,
            summary,
        },
        inventory: summarise(inv, runs, &checks),
        counts,
        checks,
    }
}

fn summary_line(
    state: State,
    blocking: &[Blocking],
    checks: &[CheckResult],
    counts: &Counts,
) -> String {
    let n = |s: Status| counts.checks.get(&s).copied().unwrap_or(0);
    let mut parts = Vec::new();
    for (s, word) in [
        (Status::Warn, "warned"),
        (Status::Unknown, "unknown"),
        (Status::Pass, "passed"),
        (Status::Skip, "skipped"),
    ] {
        if n(s) > 0 {
            parts.push(format!("{} {word}", n(s)));
        }
    }
    let tail = parts.join(", ");
    match state {
        State::Ready => format!("ready: {tail}"),
        State::ReadyUnverified => {
            format!("ready but unverified (nothing failed, some checks could not tell): {tail}")
        }
        State::NotReady => {
            let codes: Vec<String> = blocking
                .iter()
                .map(|b| {
                    let of = checks
                        .iter()
                        .find(|c| c.id == b.check)
                        .filter(|c| !c.prerequisite_of.is_empty())
                        .map(|c| format!("; prerequisite of {}", c.prerequisite_of.join(", ")))
                        .unwrap_or_default();
                    format!("{} ({}{of})", b.check, b.codes.join(", "))
                })
                .collect();
            format!("not ready: {}; {tail}", codes.join("; "))
        }
        State::NothingVerified => {
            // Why: the checks that could not tell, then the ones that did not run.
            let unknown: Vec<&str> = checks
                .iter()
                .filter(|c| c.status == Status::Unknown)
                .map(|c| c.id)
                .collect();
            let why = if checks.iter().all(|c| c.skipped.is_some()) {
                "no check ran".to_owned()
            } else if unknown.is_empty() {
                "every check that ran skipped".to_owned()
            } else {
                format!("could not tell: {}", unknown.join(", "))
            };
            format!("nothing verified: no check passed ({why}); {tail}")
        }
    }
}

fn summarise(inv: &Inventory, runs: &Runs, checks: &[CheckResult]) -> InventorySummary {
    let gpus = inv
        .gpus
        .iter()
        .map(|g| {
            let f = inv.function(g.bdf);
            let detail = f.and_then(|f| f.detail.as_ref());
            GpuSummary {
                bdf: g.bdf,
                vendor: g.vendor,
                ids: f.map(|f| f.ids()).unwrap_or_default(),
                model: g.model.clone(),
                driver: f.and_then(|f| f.driver.clone()),
                numa_node: detail.and_then(|d| d.numa_node.value().copied()),
                link: detail.and_then(|d| {
                    let l = &d.link;
                    Some(format!(
                        "{} GT/s x{} (max {} GT/s x{})",
                        l.current_speed.value()?,
                        l.current_width.value()?,
                        l.max_speed.value()?,
                        l.max_width.value()?
                    ))
                }),
                bar1_bytes: g.aperture.as_ref().and_then(|a| a.value()).map(|a| a.size),
                c2c: g.c2c.as_ref().map(|c| if c.active { "up" } else { "down" }),
                c2c_from: g
                    .c2c
                    .as_ref()
                    .map(|c| if c.from_nvml { "nvml" } else { "pci-id" }),
            }
        })
        .collect();
    let rdma_devices = inv
        .rdma
        .iter()
        .map(|d| RdmaSummary {
            name: d.name.clone(),
            pci: d.pci,
            numa_node: d
                .pci
                .and_then(|b| inv.function(b))
                .and_then(|f| f.detail.as_ref())
                .and_then(|d| d.numa_node.value().copied()),
            driver: d.driver.clone(),
            fw_ver: d.fw_ver.clone(),
            ports: d
                .ports
                .iter()
                .map(|p| PortSummary {
                    port: p.num,
                    state: p.state.value().map(|(_, n)| n.clone()),
                    phys_state: p.phys_state.value().map(|(_, n)| n.clone()),
                    link_layer: p.link_layer.value().map(|l| format!("{l:?}")),
                    rate_gbps: p.rate.value().copied(),
                    netdev: p.netdev.as_ref().map(|n| n.name.clone()),
                    mtu: p.netdev.as_ref().and_then(|n| n.mtu.value().copied()),
                    gids: p
                        .gids
                        .iter()
                        .map(|g| GidSummary {
                            index: g.index,
                            gid: g.gid.to_string(),
                            gid_type: g.gid_type.value().map(|t| {
                                serde_json::to_value(t)
                                    .ok()
                                    .and_then(|v| v.as_str().map(str::to_owned))
                                    .unwrap_or_default()
                            }),
                            ndev: g.ndev.value().cloned(),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    // One unreadable directory spoils every read below it; name it once.
    let problems = inv.all_problems();
    InventorySummary {
        sample: runs.sample.as_ref().map(|s| sample::summarise(inv, s)),
        span_note: runs.span_note.clone(),
        baseline_written: runs.baseline_saved.as_ref().map(Result::is_ok),
        baseline_error: runs
            .baseline_saved
            .as_ref()
            .and_then(|r| r.as_ref().err().cloned()),
        gpus,
        gpu_runtime: runs.gpu.clone(),
        gdr_test: match &runs.gdr_test {
            GdrTest::Skipped(_) => None,
            GdrTest::Ran { outcomes, .. } => Some(
                outcomes
                    .iter()
                    .map(|o| GdrSummary {
                        gpu: o.gpu,
                        nic: o.nic.clone(),
                        memory: o.memory,
                        level: o.level,
                        expected_gbps: o.expected.as_ref().map(|e| e.gbps),
                        result: o.result.as_ref().ok().cloned(),
                        error: o.result.as_ref().err().cloned(),
                    })
                    .collect(),
            ),
        },
        nccl_verify: runs.nccl_verify.run().map(|r| NcclVerifySummary {
            collective: r.library,
            library: r
                .library_file
                .clone()
                .or_else(|| r.answer.as_ref().and_then(|a| a.library.clone())),
            library_source: r.used().map(|c| c.source),
            version: r.answer.as_ref().and_then(|a| a.version.clone()),
            mode: r.mode,
            gpus: r.gpus.clone(),
            network: r
                .explanation
                .as_ref()
                .and_then(|e| e.nodes.first())
                .and_then(|n| n.networks.first().cloned()),
            result: r.answer.as_ref().map(|a| {
                serde_json::to_value(&a.outcome)
                    .ok()
                    .and_then(|v| v["result"].as_str().map(str::to_owned))
                    .unwrap_or_default()
            }),
            error: r.error.clone(),
            answer: checks
                .iter()
                .find(|c| c.id == "nccl-verify")
                .and_then(|c| c.findings.first())
                .map(|f| f.message.clone()),
            elapsed_ms: r.elapsed_ms,
        }),
        rdma_devices,
        nccl_release: inv.nccl.release.as_ref().map(|r| NcclRelease {
            version: r.version.to_string(),
            path: r.path.clone(),
            value: r.value.clone(),
        }),
        problems,
    }
}

/// One CSV field (`fleet`, `jobs`): text from a node escaped as the human output shows it,
/// a spreadsheet formula defused, quoted where it holds a separator.
pub fn csv_field(s: &str) -> String {
    // Text read off a capture (a firmware version, a hostname) never reaches a spreadsheet or
    // a terminal raw: control characters are escaped as the human output shows them
    // (`\u{1b}`); JSON escapes them its own way.
    let s = crate::sanitize::text(s).into_owned();
    // Formula injection in spreadsheets: a leading = + - @ is quoted with a tab-free apostrophe.
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}
