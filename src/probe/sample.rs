//! The sample window (`check --sample SECONDS`): the link-health counters read again once the
//! window has passed since the inventory read them, so growth says what happens now, not what
//! happened since the driver loaded. The runs between the two readings (the GPU probe, the
//! write test) count toward the window; the wait is the only sleep, and `--deadline` bounds it.
//!
//! `capture --sample SECONDS` records the second reading in the copy ([`RECORDED`]): each file
//! at its own path below it, and the window's length in `window`. A check of the copy judges
//! the growth as the live check did.

use crate::deadline::Deadline;
use crate::inventory::Inventory;
use crate::inventory::kernel::{RECORDED_LOG, read_log};
use crate::inventory::pci::read_aer;
use crate::inventory::rdma::read_counters;
use crate::model::health::{Aer, KernelLog, PortCounters, RECORDED_PAUSE, Sample, SampleKind};
use crate::parse::pci::Bdf;
use crate::root::Root;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Where a capture keeps the second reading of a sample window.
pub const RECORDED: &str = "/gdrdoctor/sample";

/// Waits until `window` has passed since `read_at` (the inventory's reading), within what
/// `deadline` leaves, and reads every port's counters and every detailed PCI function's AER
/// tables again.
pub fn take(
    root: &Root,
    inv: &Inventory,
    read_at: Instant,
    window: Duration,
    deadline: &Deadline,
) -> Sample {
    let wait = window.saturating_sub(read_at.elapsed());
    let budget = deadline.budget(wait);
    std::thread::sleep(budget.limit);
    let (ports, aer) = read(root, inv, "");
    Sample {
        seconds: read_at.elapsed().as_secs_f64(),
        cut: budget.cut,
        ports,
        aer,
        kernel_log: Some(read_log(root, "")),
        kind: SampleKind::Window,
        pause: read_pause(inv),
    }
}

/// Whether a second reading could show anything: some RDMA port with a counter, some PCI
/// function of the GPU-NIC paths with AER statistics, or a kernel log that could be read. A node
/// with none of them waits for nothing.
pub fn worth_taking(inv: &Inventory) -> bool {
    matches!(inv.kernel.log, KernelLog::Read { .. })
        || !super::qos::roce_netdevs(inv).is_empty()
        || inv
            .rdma
            .iter()
            .flat_map(|d| &d.ports)
            .any(|p| !p.counters.counters.is_empty())
        || inv
            .pci
            .values()
            .filter_map(|f| f.detail.as_ref())
            .any(|d| !d.aer.absent())
}

/// The second reading a capture recorded, if it has one.
pub fn recorded(root: &Root, inv: &Inventory) -> Option<Sample> {
    let window = root.read_text(&format!("{RECORDED}/window")).ok()?;
    let seconds = window
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s > 0.0)?;
    let (ports, aer) = read(root, inv, RECORDED);
    let kernel_log =
        Some(read_log(root, RECORDED)).filter(|l| !matches!(l, KernelLog::NotCaptured { .. }));
    Some(Sample {
        seconds,
        cut: false,
        ports,
        aer,
        kernel_log,
        kind: SampleKind::Window,
        pause: recorded_pause(root, RECORDED),
    })
}

/// The files of `sample` for a capture, at their paths below [`RECORDED`].
pub fn record(sample: &Sample, files: &mut BTreeMap<String, Vec<u8>>) {
    files.insert(
        format!("{RECORDED}/window"),
        format!("{:.3}\n", sample.seconds).into_bytes(),
    );
    files_of(sample, RECORDED, files);
}

/// A reading's files at their node paths below `prefix`: every counter and AER table read, the
/// pause statistics, the kernel log's judged records. What a capture's sample and a baseline
/// keep, and what [`read`], [`recorded_pause`] and `read_log` read back.
pub fn files_of(sample: &Sample, prefix: &str, files: &mut BTreeMap<String, Vec<u8>>) {
    let counters = sample
        .ports
        .iter()
        .flat_map(|(_, _, c)| c.counters.iter().map(|c| (&c.value.path, &c.value.raw)));
    let aer = sample.aer.iter().flat_map(|(_, a)| {
        a.tables()
            .into_iter()
            .map(|(_, t)| (&t.path, &t.raw))
            .collect::<Vec<_>>()
    });
    for (path, raw) in counters.chain(aer) {
        if let Ok(text) = raw {
            files.insert(format!("{prefix}{path}"), format!("{text}\n").into_bytes());
        }
    }
    if !sample.pause.is_empty() {
        files.insert(
            format!("{prefix}{RECORDED_PAUSE}"),
            pause_json(&sample.pause).into_bytes(),
        );
    }
    if let Some(file) = sample.kernel_log.as_ref().and_then(KernelLog::file) {
        files.insert(
            format!("{prefix}{RECORDED_LOG}"),
            file.render().into_bytes(),
        );
    }
}

/// The inventory's own reading as a [`Sample`] (nothing is read again): the counters, AER
/// tables and kernel log it holds, and the pause statistics the QoS probe answered.
pub fn first_reading(inv: &Inventory, qos: &crate::model::qos::Qos) -> Sample {
    let ports = inv
        .rdma
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .map(|p| (d.name.clone(), p.num, p.counters.clone()))
        })
        .collect();
    let aer = inv
        .pci
        .values()
        .filter_map(|f| Some((f.bdf, f.detail.as_ref()?.aer.clone())))
        .collect();
    let pause = qos
        .answers()
        .map(|a| {
            a.netdevs
                .iter()
                .filter_map(|(n, q)| Some((n.clone(), q.ethtool.stats.as_ref().ok()?.clone())))
                .collect()
        })
        .unwrap_or_default();
    Sample {
        seconds: 0.0,
        cut: false,
        ports,
        aer,
        kernel_log: Some(inv.kernel.log.clone()),
        kind: SampleKind::Window,
        pause,
    }
}

/// The RoCE netdevs' pause statistics, read live (what the chain's counters are).
pub fn read_pause(inv: &Inventory) -> BTreeMap<String, Vec<(String, u64)>> {
    super::qos::roce_netdevs(inv)
        .into_iter()
        .filter_map(|n| {
            let stats = super::qos::ethtool(&n).stats.ok()?;
            Some((n, stats))
        })
        .collect()
}

/// The pause statistics as a capture's sample or a baseline keeps them: `{netdev: [[name,
/// value], ...]}`.
pub fn pause_json(pause: &BTreeMap<String, Vec<(String, u64)>>) -> String {
    serde_json::to_string(pause).unwrap_or_else(|_| "{}".into()) + "\n"
}

/// The pause statistics recorded below `prefix`; none when absent or not what
/// [`pause_json`] writes.
pub fn recorded_pause(root: &Root, prefix: &str) -> BTreeMap<String, Vec<(String, u64)>> {
    root.read_text(&format!("{prefix}{RECORDED_PAUSE}"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

pub type Reading = (Vec<(String, u32, PortCounters)>, Vec<(Bdf, Aer)>);

pub fn read(root: &Root, inv: &Inventory, prefix: &str) -> Reading {
    let ports = inv
        .rdma
        .iter()
        .flat_map(|d| {
            d.ports.iter().map(|p| {
                let netdev = p.netdev.as_ref().map(|n| n.name.as_str());
                let counters = read_counters(root, prefix, &p.dir, netdev);
                (d.name.clone(), p.num, counters)
            })
        })
        .collect();
    let aer = inv
        .pci
        .values()
        .filter(|f| f.detail.is_some())
        .map(|f| (f.bdf, read_aer(root, prefix, &f.path)))
        .collect();
    (ports, aer)
}
