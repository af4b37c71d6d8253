//! `kernel-log`: what the kernel logged about the GPUs, the RDMA NICs and the PCIe functions
//! between them: NVIDIA Xid reports, mlx5 firmware command timeouts and health reports, AER
//! errors, links that limit a device's bandwidth, peer-memory failures, and NVIDIA's driver
//! failing to initialise a GPU (`RmInitAdapter failed!`), among them the proprietary module's
//! refusal of a GPU that only the open kernel modules drive.
//!
//! The log holds everything since boot: an event there is shown with its time, and only the
//! kinds that leave a device needing a reset or a repair warn. A sample window (`check
//! --sample`) reads the log again: what the kernel logged inside the window is happening now.

use super::Rule;
use super::link_health::{function_subject, uptime};
use super::{Check, Context, Meta};
use crate::inventory::Inventory;
use crate::model::Action;
use crate::model::health::KernelLog;
use crate::model::{Code, Evidence, Finding, Fix, Status};
use crate::parse::kmsg::{Event, EventKind, PcieSeverity};
use crate::parse::pci::Bdf;
use std::collections::BTreeMap;

pub struct KernelLogCheck;

const CLEAN: Code = Code {
    id: "kernel-log-clean",
    summary: "the kernel logged no Xid, NIC firmware error, PCIe error or peer-memory failure on the GPU-NIC paths since boot",
};
const XID: Code = Code {
    id: "kernel-log-xid",
    summary: "a GPU reported an Xid that NVIDIA's catalog resolves with a GPU reset, a reboot or service, since boot",
};
const NIC_ERRORS: Code = Code {
    id: "kernel-log-nic-errors",
    summary: "an RDMA NIC's firmware timed out on commands or reported its health failing, since boot",
};
const PCIE_UNCORRECTED: Code = Code {
    id: "kernel-log-pcie-uncorrected",
    summary: "the kernel logged uncorrected PCIe errors on a function of the GPU-NIC paths since boot",
};
const PEERMEM_ERRORS: Code = Code {
    id: "kernel-log-peermem-errors",
    summary: "the peer-memory module failed to load or to pin GPU memory, since boot",
};
const HISTORY: Code = Code {
    id: "kernel-log-history",
    summary: "events that say nothing is broken now (corrected PCIe errors, application Xids, bandwidth notes at probe); shown, not judged",
};
const ERRORS_NOW: Code = Code {
    id: "kernel-log-errors-now",
    summary: "the kernel logged an Xid, NIC firmware error, uncorrected PCIe error or peer-memory failure inside the sample window",
};
const EVENTS_NOW: Code = Code {
    id: "kernel-log-events-now",
    summary: "the kernel logged corrected PCIe errors or application Xids inside the sample window",
};
const UNREADABLE: Code = Code {
    id: "kernel-log-unreadable",
    summary: "the kernel's log could not be read (reading it needs root or CAP_SYSLOG where kernel.dmesg_restrict=1)",
};
const NOT_CAPTURED: Code = Code {
    id: "kernel-log-not-captured",
    summary: "the captured root holds no kernel log (capture it again with this gdrdoctor, as root)",
};

const OPEN_MODULE: Code = Code {
    id: "kernel-log-gpu-needs-open-module",
    summary: "the proprietary NVIDIA module refused a GPU that only the open kernel modules drive (`requires use of the NVIDIA open kernel modules`, `RmInitAdapter failed! (0x22:0x56:...)`), since boot",
};
const GPU_INIT: Code = Code {
    id: "kernel-log-gpu-init-failed",
    summary: "NVIDIA's driver could not initialise a GPU (`RmInitAdapter failed!`), since boot",
};

const CODES: &[Code] = &[
    CLEAN,
    OPEN_MODULE,
    GPU_INIT,
    XID,
    NIC_ERRORS,
    PCIE_UNCORRECTED,
    PEERMEM_ERRORS,
    HISTORY,
    ERRORS_NOW,
    EVENTS_NOW,
    UNREADABLE,
    NOT_CAPTURED,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(CLEAN, Action::None),
    Rule::new(OPEN_MODULE, Action::Reboot),
    Rule::new(GPU_INIT, Action::Reboot),
    Rule::new(XID, Action::ResetGpu),
    Rule::new(NIC_ERRORS, Action::Reboot),
    Rule::new(PCIE_UNCORRECTED, Action::ReplacePart),
    Rule::new(PEERMEM_ERRORS, Action::FixInPlace),
    Rule::new(HISTORY, Action::None),
    Rule::new(ERRORS_NOW, Action::ResetGpu),
    Rule::new(EVENTS_NOW, Action::None),
    Rule::new(UNREADABLE, Action::None),
    Rule::new(NOT_CAPTURED, Action::None),
];

const META: Meta = Meta {
    id: "kernel-log",
    title: "Kernel log: no Xid, NIC firmware error, PCIe error or peer-memory failure on the GPU-NIC paths",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/kernel-log/README.md"),
    live_only: false,
    reads: &[],
};

/// The Xids that NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) resolves with a GPU
/// reset, a node reboot or service, not by restarting the application; with what each says,
/// and what it asks of the node: the catalog's "Resolution Bucket (Immediate Action)"
/// (RESET_GPU, RESTART_BM, the WORKFLOW_* that say "a GPU reset or node reboot") as one of
/// gdrdoctor's actions (docs/actions.md has the catalog's word for each).
const HARDWARE_XIDS: &[(u32, &str, Action)] = &[
    (48, "double-bit ECC error", Action::ResetGpu),
    (61, "internal micro-controller breakpoint", Action::ResetGpu),
    (62, "internal micro-controller halt", Action::ResetGpu),
    (
        63,
        "ECC page retirement or row remapping pending: reset to activate",
        Action::ResetGpu,
    ),
    (
        64,
        "ECC page retirement or row remapping failed",
        Action::ResetGpu,
    ),
    (74, "NVLink error", Action::ResetGpu),
    (79, "GPU has fallen off the bus", Action::Reboot),
    (92, "high single-bit ECC error rate", Action::ReplacePart),
    (94, "contained ECC error", Action::ResetGpu),
    (95, "uncontained ECC error", Action::ResetGpu),
    (119, "GSP RPC timeout", Action::ResetGpu),
    (120, "GSP error", Action::ResetGpu),
    (140, "unrecovered ECC error", Action::ResetGpu),
    (154, "GPU recovery action changed", Action::ResetGpu),
    // Blackwell's NVLink errors by the unit that saw them (NVIDIA's Xid catalog, r570 and
    // later: NVLINK_SAW/RLW/TLW/TREX/NVLPW_CTRL/NETIR/MSE_ERROR); the record says Fatal or
    // Nonfatal (`Xid 149, NETIR Fatal XC0 i0 Link -1 (...)`, leptonai/gpud#1174): a fatal one
    // needs the GPU reset, a nonfatal one the hardware recovered from ([`nvlink_nonfatal`]).
    (144, "NVLink error (SAW)", Action::ResetGpu),
    (145, "NVLink error (RLW)", Action::ResetGpu),
    (146, "NVLink error (TLW)", Action::ResetGpu),
    (147, "NVLink error (TREX)", Action::ResetGpu),
    (148, "NVLink error (NVLPW control)", Action::ResetGpu),
    (149, "NVLink error (NETIR)", Action::ResetGpu),
    (150, "NVLink error (MSE)", Action::ResetGpu),
];

/// An NVLink Xid (144-150) the record calls Nonfatal: the link recovered by itself.
fn nvlink_nonfatal(code: u32, text: &str) -> bool {
    (144..=150).contains(&code)
        && text
            .split_once("): ")
            .is_some_and(|(_, rest)| rest.split_whitespace().any(|w| w == "Nonfatal"))
}

/// The NVIDIA driver releases on which nvidia-peermem's `nv_get_p2p_free_callback ... ERROR
/// detected invalid context` is harmless: a mitigation for NVIDIA issue 4272659 that 535.129.03
/// brought, fully fixed in R560, where it should never appear (NVIDIA, on
/// Mellanox/nv_peer_memory#120).
fn peermem_context_harmless(inv: &Inventory, e: &Event) -> bool {
    if e.kind != EventKind::PeerMemory || !e.record.text.contains("detected invalid context") {
        return false;
    }
    let Some(v) = inv.kernel.nvidia.value() else {
        return false;
    };
    let n: Vec<u32> = v
        .version
        .split('.')
        .filter_map(|p| p.parse().ok())
        .collect();
    let at = (
        n.first().copied().unwrap_or(0),
        n.get(1).copied().unwrap_or(0),
        n.get(2).copied().unwrap_or(0),
    );
    ((535, 129, 3)..(560, 0, 0)).contains(&at)
}

fn hardware_xid(code: u32) -> Option<&'static str> {
    HARDWARE_XIDS
        .iter()
        .find(|(c, ..)| *c == code)
        .map(|(_, what, _)| *what)
}

/// What an Xid asks of the node. Xid 154 says it itself, in the words the catalog lists
/// (`GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)`; the others
/// are `GPU Reset Required`, `Drain and Reset`, `Drain P2P`, `None`): its new action decides.
fn xid_action(code: u32, text: &str) -> Action {
    if code == 154 {
        if let Some((_, to)) = text.rsplit_once(" to ") {
            if to.contains("Reboot") {
                return Action::Reboot;
            }
            if to.contains("(None)") {
                return Action::None;
            }
        }
    }
    HARDWARE_XIDS
        .iter()
        .find(|(c, ..)| *c == code)
        .map_or(Action::None, |(.., a)| *a)
}

/// What an event asks of the node, as its class's code does (the table `ACTIONS`), an Xid by
/// its own resolution.
fn event_action(inv: &Inventory, e: &Event) -> Action {
    match (Class::judged(inv, e), &e.kind) {
        (Class::Xid, EventKind::Xid(n)) => xid_action(*n, &e.record.text),
        // As Xid 79: the catalog's RESTART_BM.
        (Class::Xid, EventKind::FallenOffBus) => Action::Reboot,
        (class, _) => ACTIONS
            .iter()
            .find(|r| r.code.id == class.code().id)
            .map_or(Action::None, |r| r.action),
    }
}

/// What an event is judged as, most serious last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// Says nothing is broken now: shown, not judged.
    History,
    PeerMemory,
    Pcie,
    Nic,
    Xid,
    /// NVIDIA's driver could not initialise a GPU: the GPU is unusable until the cause goes.
    GpuInit,
    /// The proprietary module refused a GPU that needs the open kernel modules.
    OpenModule,
}

impl Class {
    fn of(e: &Event) -> Class {
        match &e.kind {
            EventKind::OpenModuleRequired { .. } => Class::OpenModule,
            EventKind::RmInitAdapter(s) | EventKind::RmInitAdapterMinor { status: Some(s) }
                if s.open_module_refusal() =>
            {
                Class::OpenModule
            }
            EventKind::RmInitAdapter(_) | EventKind::RmInitAdapterMinor { .. } => Class::GpuInit,
            EventKind::Xid(n) if nvlink_nonfatal(*n, &e.record.text) => Class::History,
            EventKind::Xid(n) if hardware_xid(*n).is_some() => Class::Xid,
            EventKind::FallenOffBus => Class::Xid,
            EventKind::NicCommandTimeout | EventKind::NicHealth | EventKind::NicTxTimeout => {
                Class::Nic
            }
            EventKind::Pcie(s, _) if *s != PcieSeverity::Corrected => Class::Pcie,
            EventKind::PeerMemory => Class::PeerMemory,
            _ => Class::History,
        }
    }

    fn code(self) -> Code {
        match self {
            Class::History => HISTORY,
            Class::PeerMemory => PEERMEM_ERRORS,
            Class::Pcie => PCIE_UNCORRECTED,
            Class::Nic => NIC_ERRORS,
            Class::Xid => XID,
            Class::GpuInit => GPU_INIT,
            Class::OpenModule => OPEN_MODULE,
        }
    }

    /// What this node makes of an event: the proprietary module's refusal is history once the
    /// module loaded now is the open one (`/proc/driver/nvidia/version`), since the refusal
    /// came from a module unloaded since.
    fn judged(inv: &Inventory, e: &Event) -> Class {
        match Class::of(e) {
            Class::OpenModule if inv.kernel.nvidia.value().is_some_and(|v| v.open) => {
                Class::History
            }
            Class::PeerMemory if peermem_context_harmless(inv, e) => Class::History,
            c => c,
        }
    }
}

impl Check for KernelLogCheck {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let log = &inv.kernel.log;
        let last_seq = match log {
            KernelLog::Read { last_seq, .. } => *last_seq,
            KernelLog::Unreadable {
                path,
                reason,
                needs_root,
            } => {
                let mut f = Finding::unknown(
                    UNREADABLE,
                    "node",
                    format!(
                        "the kernel's log could not be read{}: {reason}",
                        if *needs_root { " (needs root)" } else { "" }
                    ),
                )
                .evidence(path.clone(), reason.clone());
                if *needs_root {
                    f = f.fix(
                        Fix::new(
                            "Run gdrdoctor as root (or with CAP_SYSLOG) to read the kernel's log",
                            "Reading the log changes nothing.",
                        )
                        .manual("sudo gdrdoctor check"),
                    );
                }
                return vec![f];
            }
            KernelLog::NotCaptured { path } => {
                return vec![
                    Finding::skip(
                        NOT_CAPTURED,
                        "node",
                        "this capture holds no kernel log: capture the node again, as root, with this gdrdoctor",
                    )
                    .evidence(path.clone(), "<not captured>"),
                ];
            }
        };
        // Since the last run (a baseline), what came after its last record is judged as now.
        let before_baseline = match cx.runs.sample.as_ref().map(|s| &s.kind) {
            Some(crate::model::health::SampleKind::SinceLastRun {
                kernel_last_seq: Some(q),
                ..
            }) => Some(*q),
            _ => None,
        };
        let events: Vec<Event> = log
            .events()
            .into_iter()
            .filter(|e| relevant(inv, e))
            .filter(|e| before_baseline.is_none_or(|q| e.record.seq <= q))
            .collect();
        let mut out = Vec::new();
        // Since boot: one finding per class and device.
        let mut groups: BTreeMap<(Class, Option<Bdf>), Vec<&Event>> = BTreeMap::new();
        for e in &events {
            groups
                .entry((Class::judged(inv, e), e.device))
                .or_default()
                .push(e);
        }
        for ((class, device), evs) in groups.iter().rev() {
            out.push(since_boot(inv, log.path(), *class, *device, evs));
        }
        if out.is_empty() {
            out.push(
                Finding::pass(
                    CLEAN,
                    "node",
                    // The number of records read is left out: a capture read a second later
                    // may hold one more, and its report must equal the live one.
                    format!(
                        "{}: no Xid, NIC firmware error, PCIe error or peer-memory failure on the GPUs, the RDMA NICs or the PCIe functions between them",
                        judged_span(inv, cx.runs.sample.as_ref())
                    ),
                )
                .evidence(log.path(), "no record of these kinds"),
            );
        }
        if let Some(now) = cx.runs.sample.as_ref() {
            out.extend(in_window(inv, now, last_seq));
        }
        out
    }
}

/// What the log was judged over, as the clean finding says it: since boot, and the window or the
/// time since the last run where one was read (issue 40: "since boot" alone hid the span).
fn judged_span(inv: &Inventory, sample: Option<&crate::model::health::Sample>) -> String {
    match sample {
        None => format!("since boot ({})", uptime(inv)),
        // A window's records, or those since the last run, are judged as happening now.
        Some(s) => format!("since boot ({}; {} judged as new)", uptime(inv), s.span()),
    }
}

/// Whether an event is about what gdrdoctor judges: any GPU's Xid, the RDMA NICs, the PCI
/// functions of the GPU-NIC paths, the peer-memory module.
fn relevant(inv: &Inventory, e: &Event) -> bool {
    let Some(bdf) = e.device else {
        return true;
    };
    match e.kind {
        EventKind::Xid(_)
        | EventKind::PeerMemory
        | EventKind::OpenModuleRequired { .. }
        | EventKind::RmInitAdapter(_)
        | EventKind::RmInitAdapterMinor { .. }
        | EventKind::FallenOffBus => true,
        EventKind::NicCommandTimeout | EventKind::NicHealth | EventKind::NicTxTimeout => {
            inv.rdma.iter().any(|d| d.pci == Some(bdf)) || detailed(inv, bdf)
        }
        EventKind::Pcie(..) => detailed(inv, bdf),
        EventKind::BandwidthLimited { .. } => {
            inv.gpus.iter().any(|g| g.bdf == bdf) || inv.rdma.iter().any(|d| d.pci == Some(bdf))
        }
    }
}

fn detailed(inv: &Inventory, bdf: Bdf) -> bool {
    inv.function(bdf).is_some_and(|f| f.detail.is_some())
}

fn subject(inv: &Inventory, device: Option<Bdf>) -> String {
    device.map_or_else(|| "node".into(), |bdf| function_subject(inv, bdf))
}

/// What an event says, in a few words: `Xid 79 (GPU has fallen off the bus)`, `uncorrected
/// (non-fatal) PCIe error CmpltTO`.
fn what(e: &Event) -> String {
    match &e.kind {
        EventKind::Xid(n) => {
            let what = match hardware_xid(*n) {
                Some(w) if nvlink_nonfatal(*n, &e.record.text) => {
                    format!("Xid {n} ({w}, nonfatal)")
                }
                Some(w) => format!("Xid {n} ({w})"),
                None => format!("Xid {n}"),
            };
            match crate::parse::kmsg::xid_instance(&e.record.text) {
                Some(mig) => format!("{what} in MIG instance {mig}"),
                None => what,
            }
        }
        EventKind::FallenOffBus => {
            "GPU has fallen off the bus (the driver's own report, without an Xid)".into()
        }
        EventKind::NicCommandTimeout => "firmware command timeout".into(),
        EventKind::NicHealth => "firmware health report".into(),
        EventKind::NicTxTimeout => "transmit timeout".into(),
        EventKind::Pcie(s, names) if names.is_empty() => format!("{} PCIe error", s.noun()),
        EventKind::Pcie(s, names) => format!("{} PCIe error {}", s.noun(), names.join(" ")),
        EventKind::BandwidthLimited { at: Some(at) } => {
            format!("bandwidth limited by the link at {at} when its driver probed it")
        }
        EventKind::BandwidthLimited { at: None } => {
            "bandwidth limited by a slower link when its driver probed it".into()
        }
        EventKind::PeerMemory => "peer-memory failure".into(),
        EventKind::OpenModuleRequired { pci_id: Some(id) } => {
            format!(
                "refused by the proprietary NVIDIA module as needing the open kernel modules (PCI ID {id})"
            )
        }
        EventKind::OpenModuleRequired { pci_id: None } => {
            "a GPU refused by the proprietary NVIDIA module as needing the open kernel modules"
                .into()
        }
        EventKind::RmInitAdapter(s) => format!("RmInitAdapter failed ({s})"),
        EventKind::RmInitAdapterMinor { .. } => "rm_init_adapter failed".into(),
    }
}

/// The distinct things a group says, with their counts: `Xid 79 (...) x2, Xid 13`.
fn tally(evs: &[&Event]) -> String {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for e in evs {
        let w = what(e);
        match seen.iter_mut().find(|(s, _)| *s == w) {
            Some((_, n)) => *n += 1,
            None => seen.push((w, 1)),
        }
    }
    // One kind: the count is the message's "logged N times".
    let one = seen.len() == 1;
    seen.into_iter()
        .map(|(w, n)| {
            if n > 1 && !one {
                format!("{w} x{n}")
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn evidence(path: &str, e: &Event) -> Evidence {
    Evidence {
        path: path.to_owned(),
        value: format!("{} {}", e.record.stamp(), e.record.text),
    }
}

/// The first and the last record of a group as evidence (one when they are the same).
fn first_last(path: &str, evs: &[&Event]) -> Vec<Evidence> {
    let mut out = Vec::new();
    if let Some(first) = evs.first() {
        out.push(evidence(path, first));
    }
    if let Some(last) = evs.last().filter(|_| evs.len() > 1) {
        out.push(evidence(path, last));
    }
    out
}

fn since_boot(
    inv: &Inventory,
    path: &str,
    class: Class,
    device: Option<Bdf>,
    evs: &[&Event],
) -> Finding {
    let subject = subject(inv, device);
    let when = match (evs.first(), evs.last()) {
        (Some(f), Some(l)) if evs.len() > 1 => format!(
            "logged {} times, {} to {}",
            evs.len(),
            f.record.stamp(),
            l.record.stamp()
        ),
        (Some(f), _) => format!("logged at {}", f.record.stamp()),
        _ => String::new(),
    };
    let message = format!(
        "{}, {when} (seconds since boot; {})",
        tally(evs),
        uptime(inv)
    );
    // A GPU the driver could not initialise stays unusable until its cause is gone: that fails.
    // The other kinds say a device needed a reset or a repair, which the log cannot tell
    // whether it got: those warn.
    let status = match class {
        Class::History => Status::Skip,
        Class::GpuInit | Class::OpenModule => Status::Fail,
        _ => Status::Warn,
    };
    // Why a warning and not a failure, in the report itself (issue 40: a capture whose log held
    // Xid 79 read READY with a warning, and nothing said why).
    // The same words live and on a capture (offline must equal live on the same data): a
    // capture's log ends when it was captured, which the words cover.
    let why_warn = |asked: &str| {
        format!(
            "; {asked}, and the log cannot tell whether that happened since (a captured root's log ends at the capture): a warning, not a failure (the site's config fails it: `severity: {{{}: fail}}`)",
            class.code().id
        )
    };
    let message = match class {
        Class::History => format!("{message}; {}", history_note(evs)),
        Class::Xid => {
            message + &why_warn("NVIDIA's Xid catalog resolves it with a GPU reset or a reboot")
        }
        Class::Nic => message + &why_warn("the NIC needed a firmware reset or a reboot"),
        Class::Pcie => {
            message + &why_warn("the link lost transactions and may need its card reseated")
        }
        Class::PeerMemory => {
            message + &why_warn("the module needed reloading against the right stack")
        }
        Class::GpuInit | Class::OpenModule => message,
    };
    let f = Finding::new(class.code(), status, subject, message).with(first_last(path, evs));
    match class {
        Class::History => f,
        // An Xid's own resolution, the worst of the group's.
        Class::Xid => f.fix(fix(inv, class, device)).action(
            evs.iter()
                .map(|e| event_action(inv, e))
                .max()
                .unwrap_or(Action::ResetGpu),
        ),
        _ => f.fix(fix(inv, class, device)),
    }
}

/// Why a history group is not judged.
fn history_note(evs: &[&Event]) -> &'static str {
    match evs.first().map(|e| &e.kind) {
        Some(EventKind::BandwidthLimited { .. }) => {
            "printed once when the driver probed the device; a GPU's link often trains down while idle, so pcie-link judges the link as it is now"
        }
        Some(EventKind::Xid(n)) if (144..=150).contains(n) => {
            "nonfatal NVLink errors: the link recovered by itself; NVIDIA's catalog asks for a reset only for the fatal ones"
        }
        Some(EventKind::Xid(_)) => {
            "Xids that NVIDIA's catalog resolves by restarting the application, not the GPU"
        }
        Some(EventKind::PeerMemory) => {
            "nvidia-peermem's `detected invalid context`, which NVIDIA calls harmless on drivers 535.129.03 up to R560 (a mitigation for its issue 4272659, fixed in R560: Mellanox/nv_peer_memory#120), and this node's driver is one of them (/proc/driver/nvidia/version)"
        }
        Some(
            EventKind::OpenModuleRequired { .. }
            | EventKind::RmInitAdapter(_)
            | EventKind::RmInitAdapterMinor { .. },
        ) => {
            "the proprietary module's refusal, logged by a module unloaded since: the one loaded now is NVIDIA's open kernel module (/proc/driver/nvidia/version)"
        }
        _ => {
            "corrected errors: the hardware recovered; link-health's AER counters judge their growth"
        }
    }
}

fn fix(inv: &Inventory, class: Class, device: Option<Bdf>) -> Fix {
    // A record that names no device (an old driver's `NVRM: RmInitAdapter failed!`, a split
    // record): the fix finds it in the log, and never carries a placeholder a script would run
    // as a redirection (`-i <bdf>`).
    let Some(b) = device else {
        return unattributed_fix(class);
    };
    let dev = b.to_string();
    match class {
        Class::OpenModule => {
            super::gpu_driver::open_module_fix(inv.kernel.nvidia.value().map(|v| v.major))
        }
        // osinit.c's `rm_init_status` names the step (0x2x GPU attach and init, 0x6x GSP
        // firmware), nvstatuscodes.h the RM status; the messages around the line say more.
        Class::GpuInit => Fix::new(
            format!(
                "NVIDIA's driver could not initialise GPU {dev}: find why in the driver's messages around RmInitAdapter (its status names the failing step: 0x2x attaching the GPU, 0x6x its GSP firmware), then reboot; if it comes back, service the GPU"
            ),
            "Reading the log changes nothing; the reboot ends every process on the node: drain first.",
        )
        .manual("dmesg -T | grep -E 'NVRM|nvidia'")
        .manual("nvidia-bug-report.sh   # NVIDIA's report, for a support case")
        .disruptive("systemctl reboot"),
        Class::Xid => Fix::new(
            format!(
                "GPU {dev} needs what NVIDIA's Xid catalog says for this Xid: drain the node, then reset the GPU (or reboot); if it comes back, service"
            ),
            "A GPU reset ends every process on that GPU: drain first.",
        )
        .manual(format!(
            "nvidia-smi -q -i {dev} -d ECC,ROW_REMAPPER,PAGE_RETIREMENT   # what the GPU kept"
        ))
        .disruptive(format!("nvidia-smi -r -i {dev}   # after draining")),
        Class::Nic => Fix::new(
            format!(
                "NIC {dev}'s firmware is not answering or reports its health failing: check its health reporters, reset it (or reboot), update its firmware"
            ),
            "A firmware reset takes the NIC's links down: drain first.",
        )
        .manual(format!("devlink health show pci/{dev}"))
        .disruptive(format!("mlxfwreset -d {dev} reset   # MFT, after draining")),
        Class::Pcie => Fix::new(
            format!(
                "Find why {dev}'s PCIe link loses transactions: reseat the card or riser, check the slot, update the firmware"
            ),
            "Reseating needs the node powered off: drain first.",
        )
        .manual(format!(
            "lspci -vvv -s {dev} | grep -E 'UESta|CESta'   # the error bits now set"
        ))
        .manual("dmesg -T | grep -iE 'aer|pcie bus error'"),
        Class::PeerMemory | Class::History => Fix::new(
            "Make nvidia-peermem match the NVIDIA driver and the RDMA stack it was built against (an `Unknown symbol` means another ib_core: MLNX_OFED versus the kernel's own), then load it again",
            "Reloading the module affects only new registrations.",
        )
        .manual("dmesg -T | grep -iE 'peermem|peer_mem'")
        .manual("modinfo nvidia_peermem | grep -E 'version|depends'"),
    }
}

/// The fix of a group whose records name no device: find it in the log, then what the class asks
/// of the whole node.
fn unattributed_fix(class: Class) -> Fix {
    let find = "dmesg -T | grep -E 'NVRM|nvidia|mlx5|AER'   # which device the records are about";
    match class {
        Class::History | Class::PeerMemory => Fix::new(
            "Make nvidia-peermem match the NVIDIA driver and the RDMA stack it was built against, then load it again",
            "Reloading the module affects only new registrations.",
        )
        .manual("dmesg -T | grep -iE 'peermem|peer_mem'"),
        _ => Fix::new(
            "The records name no device: find it in the messages around them, then drain the node and reboot (a GPU reset needs the GPU's address); if it comes back, service that device",
            "The reboot ends every process on the node: drain first.",
        )
        .manual(find)
        .manual("nvidia-smi -q -d ECC,ROW_REMAPPER,PAGE_RETIREMENT   # what the GPUs kept")
        .disruptive("systemctl reboot"),
    }
}

/// What the kernel logged inside the sample window: records after the first reading's last.
fn in_window(
    inv: &Inventory,
    sample: &crate::model::health::Sample,
    last_seq: Option<u64>,
) -> Vec<Finding> {
    use crate::model::health::SampleKind;
    // A window: its second reading's records after the first's last. Since the last run: this
    // run's records after that run's last.
    let (log, last_seq) = match &sample.kind {
        SampleKind::Window => match sample.kernel_log.as_ref() {
            Some(log) => (log, last_seq),
            None => return Vec::new(),
        },
        SampleKind::SinceLastRun {
            kernel_last_seq, ..
        } => (&inv.kernel.log, *kernel_last_seq),
    };
    let path = log.path();
    let new: Vec<Event> = log
        .events()
        .into_iter()
        .filter(|e| last_seq.is_none_or(|q| e.record.seq > q))
        .filter(|e| relevant(inv, e))
        .collect();
    let window = sample.span();
    // One finding per device and weight: serious (a warn kind since boot) fails, minor warns.
    let mut groups: BTreeMap<(bool, Option<Bdf>), Vec<&Event>> = BTreeMap::new();
    for e in &new {
        groups
            .entry((Class::judged(inv, e) != Class::History, e.device))
            .or_default()
            .push(e);
    }
    let mut out = Vec::new();
    for ((serious, device), evs) in groups.iter().rev() {
        let times = if evs.len() > 1 {
            format!(" ({} records)", evs.len())
        } else {
            String::new()
        };
        let message = format!("in {window}: {}{times}", tally(evs));
        let f = if *serious {
            let worst = evs
                .iter()
                .map(|e| Class::judged(inv, e))
                .max()
                .unwrap_or(Class::Pcie);
            let action = evs
                .iter()
                .map(|e| event_action(inv, e))
                .max()
                .unwrap_or(Action::None);
            Finding::fail(ERRORS_NOW, subject(inv, *device), message)
                .fix(fix(inv, worst, *device))
                .action(action)
        } else {
            Finding::warn(EVENTS_NOW, subject(inv, *device), message).fix(
                Fix::new(
                    "Watch whether they keep coming: `check --sample` again; corrected errors that grow point at a marginal link (reseat, replace the riser or cable)",
                    "Reading the log changes nothing.",
                )
                .manual("dmesg -wT | grep -iE 'xid|aer|pcie bus error'"),
            )
        };
        out.push(f.with(evs.iter().map(|e| evidence(path, e))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each hardware Xid's action is its catalog resolution; Xid 154 says its own.
    #[test]
    fn xid_actions() {
        assert_eq!(
            xid_action(
                79,
                "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus."
            ),
            Action::Reboot
        );
        assert_eq!(xid_action(95, ""), Action::ResetGpu);
        assert_eq!(xid_action(92, ""), Action::ReplacePart);
        assert_eq!(xid_action(13, ""), Action::None);
        let changed = |to: &str| {
            xid_action(
                154,
                &format!(
                    "NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to {to}"
                ),
            )
        };
        assert_eq!(changed("0x2 (Node Reboot Required)"), Action::Reboot);
        assert_eq!(changed("0x1 (GPU Reset Required)"), Action::ResetGpu);
        assert_eq!(changed("0x4 (Drain and Reset)"), Action::ResetGpu);
        assert_eq!(changed("0x0 (None)"), Action::None);
        for (_, _, a) in HARDWARE_XIDS {
            assert_ne!(*a, Action::None, "a hardware Xid asks for something");
        }
    }
}
