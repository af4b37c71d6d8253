//! One capture, checked as `check --root` would, condensed to what the fleet view keeps of it.

use super::{NodeResult, Pictures, model_of};
use crate::archive;
use crate::checks::{self, Selection};
use crate::config::Config;
use crate::inventory::{GpuVendor, Inventory};
use crate::model::Status;
use crate::root::Root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

/// Checks one capture. Its archive's tree counts in the run's `budget` while it is held: when
/// the budget has no room, reading it waits for other captures to give theirs back.
/// With `draw`, the capture's index in the input and the run's `Pictures`: the picture of its
/// tree is drawn when it may be the first of its model.
pub fn analyse(
    path: &Path,
    config: &Config,
    budget: &Arc<archive::Budget>,
    draw: Option<(&Pictures, usize)>,
) -> Result<NodeResult, String> {
    let root = Root::open_within(path, Some(budget)).map_err(|e| e.to_string())?;
    if root.is_live() {
        return Err("/ is the live system, not a capture".into());
    }
    let (inv, runs) = crate::probe::load_captured(&root, config);
    let picture = draw
        .filter(|(p, index)| p.claim(&model_of(inv.kernel.product.as_deref()), *index))
        .map(|_| {
            let p = crate::report::picture::picture(
                &inv,
                &runs.gpu,
                config,
                &path.display().to_string(),
            );
            let mut svg = Vec::new();
            // Writing into memory cannot fail.
            let _ = crate::report::svg::write(&p, &mut svg);
            String::from_utf8_lossy(&svg).into_owned()
        });
    // Everything the checks need is in the inventory and the runs now. An archive's tree is the
    // biggest thing a job holds (up to `archive::MAX_TOTAL_BYTES`): it goes before the checks
    // run, so that a job never holds the tree, the inventory and the report at once (issue 14).
    drop(root);
    let results = checks::run(&inv, &runs, config, &Selection::default());
    let report = crate::report::build(
        &inv,
        &runs,
        results,
        &crate::report::Options {
            strict: false,
            root_display: path.display().to_string(),
        },
    );
    let problems = problems(&report);
    let gdr_path = crate::report::nfd::path(&report).to_owned();
    // Only the node's facts and the verdict are kept of the report; its findings (thousands on
    // a node with thousands of GPUs) go now.
    let crate::report::Report { node, verdict, .. } = report;
    let (gid_indices, roce) = roce(&inv);
    Ok(NodeResult {
        capture: path.display().to_string(),
        hostname: node.hostname,
        product: node.product,
        board: node.board,
        kernel: node.kernel,
        gpu_driver: gpu_driver(&inv),
        nic_firmware: nic_firmware(&inv),
        gpus: inv.gpus.len(),
        rdma_devices: inv.rdma.len(),
        ready: verdict.ready,
        exit_code: verdict.exit_code,
        blocking: if verdict.state == crate::report::State::NothingVerified {
            vec![crate::report::NOTHING_VERIFIED.to_owned()]
        } else {
            verdict
                .blocking
                .iter()
                .map(|b| format!("{} ({})", b.check, b.codes.join(", ")))
                .collect()
        },
        problems,
        gid_indices,
        roce,
        placement: placement(&inv, &runs.gpu),
        peermem: peermem(&inv).to_owned(),
        gdr_path,
        roce_qos: checks::roce_qos_summary(&inv, &runs.qos),
        links: links(&inv, runs.sample.as_ref()),
        nccl: nccl_settings(&inv.nccl),
        picture,
    })
}

/// The ACTIVE RDMA ports whose counters grew in the recorded sample window, worst first.
fn links(inv: &Inventory, sample: Option<&crate::model::health::Sample>) -> Vec<super::LinkGrowth> {
    use crate::model::health::{Sign, growth, growth_text};
    let Some(sample) = sample else {
        return Vec::new();
    };
    let mut out: Vec<super::LinkGrowth> = inv
        .rdma
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.is_active())
        .filter_map(|(d, p)| {
            let grew = growth(&p.counters, sample.port(&d.name, p.num)?);
            let worst = grew.iter().map(|g| g.watched.sign).min()?;
            Some(super::LinkGrowth {
                port: p.subject(&d.name),
                kind: match worst {
                    Sign::Flap => "flaps",
                    Sign::Wire => "errors",
                    Sign::Retry => "retries",
                },
                grew: grew.iter().map(|g| g.by()).sum(),
                counters: growth_text(&grew),
                seconds: sample.seconds,
            })
        })
        .collect();
    out.sort_by_key(super::LinkGrowth::rank);
    out
}

/// Every warning, failure and unknown code, with its worst status.
fn problems(report: &crate::report::Report) -> BTreeMap<String, Status> {
    let mut problems = BTreeMap::new();
    for c in &report.checks {
        for f in &c.findings {
            if matches!(f.status, Status::Warn | Status::Fail | Status::Unknown) {
                let e = problems.entry(f.code.to_owned()).or_insert(f.status);
                *e = (*e).max(f.status);
            }
        }
    }
    problems
}

/// The RoCE v2 GID indices the RoCE ports use (`none` for a port without one), and the RoCE
/// version: `v2`, `v1-only`, `none`, or no RoCE port at all.
fn roce(inv: &Inventory) -> (Vec<String>, Option<String>) {
    let mut gid_indices = BTreeSet::new();
    // A pinned NCCL_IB_GID_INDEX is the index NCCL uses on every RoCE port; without one, the
    // index `gdrdoctor nccl` would pin (the same rule): a pin and the rule that agree compare
    // equal, a pin that differs from a sibling's choice does not.
    let pinned = inv
        .nccl
        .value("NCCL_IB_GID_INDEX")
        .map(|v| crate::nccl::params::nccl_int(v).0)
        .filter(|&i| i >= 0);
    let mut roce_ports = 0;
    let mut v2 = 0;
    let mut v1_only = 0;
    for d in &inv.rdma {
        for p in d.ports.iter().filter(|p| p.is_ethernet()) {
            roce_ports += 1;
            if let Some(i) = pinned {
                gid_indices.insert(i.to_string());
            }
            match p.roce_v2_gid_index() {
                Some(_) if pinned.is_some() => v2 += 1,
                Some(i) => {
                    v2 += 1;
                    gid_indices.insert(i.to_string());
                }
                None => {
                    if pinned.is_none() {
                        gid_indices.insert("none".to_owned());
                    }
                    if p.gids.iter().any(|g| g.gid_type.value().is_some()) {
                        v1_only += 1;
                    }
                }
            }
        }
    }
    let roce = (roce_ports > 0).then(|| {
        if v2 == roce_ports {
            "v2"
        } else if v1_only > 0 {
            "v1-only"
        } else {
            "none"
        }
        .to_owned()
    });
    (gid_indices.into_iter().collect(), roce)
}

/// The GPU x NIC levels, row by row (`PIX PIX NODE ...|...`); none without GPUs or NICs.
fn placement(inv: &Inventory, gpu: &crate::model::gpu::Runtime) -> Option<String> {
    let m = crate::placement::matrix(inv, gpu);
    let gpu_rows: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].kind == crate::placement::Kind::Gpu)
        .collect();
    let nic_cols: Vec<usize> = (0..m.devices.len())
        .filter(|&i| m.devices[i].kind == crate::placement::Kind::Nic)
        .collect();
    (!gpu_rows.is_empty() && !nic_cols.is_empty()).then(|| {
        gpu_rows
            .iter()
            .map(|&r| {
                nic_cols
                    .iter()
                    .map(|&c| m.level(r, c).map(|(l, _)| l.as_str()).unwrap_or("?"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("|")
    })
}

/// `registered`, `loaded-unregistered` or `absent`.
fn peermem(inv: &Inventory) -> &'static str {
    if inv
        .kernel
        .memory_peers
        .keys()
        .any(|k| k.starts_with("nv_mem"))
    {
        "registered"
    } else if ["nvidia_peermem", "nv_peer_mem"]
        .iter()
        .any(|m| inv.kernel.module(m).is_some_and(|m| m.live()))
    {
        "loaded-unregistered"
    } else {
        "absent"
    }
}

/// `nvidia 580.159.04 (open)`, `amdgpu`.
fn gpu_driver(inv: &Inventory) -> Option<String> {
    match inv.kernel.nvidia.value() {
        Some(v) => Some(format!(
            "nvidia {}{}",
            v.version,
            if v.open { " (open)" } else { "" }
        )),
        None if inv.gpus.iter().any(|g| g.vendor == GpuVendor::Amd) => Some("amdgpu".to_owned()),
        None => None,
    }
}

/// The NICs' firmware versions, distinct, sorted (`mlx5 28.39.1002`).
fn nic_firmware(inv: &Inventory) -> Vec<String> {
    let versions: BTreeSet<String> = inv
        .rdma
        .iter()
        .filter_map(|d| {
            Some(format!(
                "{} {}",
                d.driver.as_deref().unwrap_or("?"),
                d.fw_ver.as_deref()?
            ))
        })
        .collect();
    versions.into_iter().collect()
}

/// The effective values of the settings that change GPUDirect RDMA (the GID index aside: see
/// `NodeResult::nccl`), and the topology file NCCL loads, with its state or content digest.
fn nccl_settings(n: &crate::inventory::nccl::Nccl) -> BTreeMap<String, String> {
    use crate::inventory::nccl::{SourceState, TopoState};
    // A file NCCL reads that could not be read may set any of them: what is not set elsewhere
    // is unknown on that node, not unset (issue 25: the same cause as `gdrdoctor nccl`
    // proposing settings as if an unreadable /etc/nccl.conf were not there).
    let unread = n.sources.iter().find_map(|s| match s.state {
        SourceState::Unreadable(_) | SourceState::NotRead(_) => Some(s.path.as_str()),
        SourceState::Absent | SourceState::Read(_) => None,
    });
    let mut out: BTreeMap<String, String> = crate::nccl::params::GDR_PARAMS
        .iter()
        .filter(|(name, _)| !matches!(*name, "NCCL_IB_GID_INDEX" | "NCCL_TOPO_FILE"))
        .filter_map(|(name, _)| {
            let value = match (n.value(name), unread) {
                (Some(v), _) => v.to_owned(),
                (None, Some(path)) => format!("(unknown: {path} could not be read)"),
                (None, None) => return None,
            };
            Some(((*name).to_owned(), value))
        })
        .collect();
    if let Some(t) = &n.topology {
        let state = match &t.state {
            TopoState::Missing => "not there".to_owned(),
            TopoState::Relative => "a relative path".to_owned(),
            TopoState::Unreadable(_) => "unreadable".to_owned(),
            TopoState::Invalid(_) => "cannot be parsed".to_owned(),
            TopoState::Parsed { digest, .. } => format!("content {digest:016x}"),
        };
        out.insert("NCCL_TOPO_FILE".into(), format!("{} ({state})", t.path));
    } else if let Some(v) = n.value("NCCL_TOPO_FILE") {
        out.insert("NCCL_TOPO_FILE".into(), v.to_owned());
    }
    out
}
