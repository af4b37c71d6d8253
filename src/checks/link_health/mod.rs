//! `link-health`: the links NCCL's traffic crosses are not failing now: no flaps, no growing
//! link errors or transport retries on the RDMA ports, no PCIe AER errors on the GPU-NIC paths.
//!
//! Counters count since the driver loaded (AER: since boot). One reading is history: a clean
//! history passes, a history with errors is shown and not judged. A sample window (`check
//! --sample SECONDS`, a second reading in [`crate::model::Runs::sample`]) judges the growth.

use super::Rule;
use super::{Check, Context, Meta};
use crate::config::Thresholds;
use crate::inventory::rdma::CLASS_INFINIBAND;
use crate::inventory::{Inventory, Port, RdmaDevice};
use crate::model::Action;
use crate::model::health::{Aer, Counter, PortCounters, Sample, Sign, growth};
use crate::model::{Code, Evidence, Finding, Fix, Status};
use crate::parse::pci::Bdf;

mod nic;

use nic::{DROPS_GROWING, FEC_CORRECTED, PHY_ERRORS_GROWING, SATURATED};

pub struct LinkHealth;

const QUIET: Code = Code {
    id: "link-quiet",
    summary: "no counter of the port moved in the sample window",
};
const CLEAN: Code = Code {
    id: "link-clean",
    summary: "no flap, link error or transport retry counted since the driver loaded",
};
const HISTORY: Code = Code {
    id: "link-history",
    summary: "the port counted flaps, errors or retries since the driver loaded; one reading is history, not judged",
};
const FLAPPING: Code = Code {
    id: "link-flapping",
    summary: "the link went down and came back in the sample window (link_downed, carrier_changes)",
};
const ERRORS_GROWING: Code = Code {
    id: "link-errors-growing",
    summary: "link errors (symbol, receive, CRC, recovery) grew in the sample window",
};
const RETRIES_GROWING: Code = Code {
    id: "link-retries-growing",
    summary: "RDMA transport retries or sequence errors grew in the sample window",
};
const LIFETIME_OVER: Code = Code {
    id: "link-lifetime-over",
    summary: "a counter's total since the driver loaded is above the site's limit (thresholds.link_lifetime)",
};
const COUNTERS_NONE: Code = Code {
    id: "link-counters-none",
    summary: "the port's driver shows none of the link counters gdrdoctor reads",
};
const COUNTERS_UNREADABLE: Code = Code {
    id: "link-counters-unreadable",
    summary: "a link counter could not be read or parsed",
};
const PORT_NOT_ACTIVE: Code = Code {
    id: "link-port-not-active",
    summary: "the port is not ACTIVE: its counters are not judged (see rdma-link)",
};
const NO_PORTS: Code = Code {
    id: "link-no-ports",
    summary: "no RDMA port to judge",
};
const AER_CLEAN: Code = Code {
    id: "aer-clean",
    summary: "no PCIe AER error on the functions of the GPU-NIC paths since boot",
};
const AER_QUIET: Code = Code {
    id: "aer-quiet",
    summary: "no PCIe AER error on the GPU-NIC paths in the sample window",
};
const AER_HISTORY: Code = Code {
    id: "aer-history",
    summary: "a function of a GPU-NIC path counted AER errors since boot; one reading is history, not judged",
};
const AER_UNCORRECTABLE: Code = Code {
    id: "aer-uncorrectable-growing",
    summary: "fatal or non-fatal PCIe AER errors on a GPU-NIC path in the sample window",
};
const AER_CORRECTABLE: Code = Code {
    id: "aer-correctable-growing",
    summary: "correctable PCIe AER errors on a GPU-NIC path in the sample window",
};
const AER_NONE: Code = Code {
    id: "aer-none",
    summary: "no function of the GPU-NIC paths shows AER statistics (no AER capability, as in most VMs, or a kernel before 4.19)",
};
const AER_UNREADABLE: Code = Code {
    id: "aer-unreadable",
    summary: "a function's AER statistics could not be read or parsed",
};

const CODES: &[Code] = &[
    QUIET,
    CLEAN,
    HISTORY,
    FLAPPING,
    ERRORS_GROWING,
    RETRIES_GROWING,
    LIFETIME_OVER,
    SATURATED,
    DROPS_GROWING,
    PHY_ERRORS_GROWING,
    FEC_CORRECTED,
    COUNTERS_NONE,
    COUNTERS_UNREADABLE,
    PORT_NOT_ACTIVE,
    NO_PORTS,
    AER_CLEAN,
    AER_QUIET,
    AER_HISTORY,
    AER_UNCORRECTABLE,
    AER_CORRECTABLE,
    AER_NONE,
    AER_UNREADABLE,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(QUIET, Action::None),
    Rule::new(CLEAN, Action::None),
    Rule::new(HISTORY, Action::None),
    Rule::new(FLAPPING, Action::ReplacePart),
    Rule::new(ERRORS_GROWING, Action::ReplacePart),
    Rule::new(RETRIES_GROWING, Action::ReplacePart),
    Rule::new(LIFETIME_OVER, Action::ReplacePart),
    Rule::new(SATURATED, Action::None),
    Rule::new(DROPS_GROWING, Action::FixInPlace),
    Rule::new(PHY_ERRORS_GROWING, Action::ReplacePart),
    Rule::new(FEC_CORRECTED, Action::None),
    Rule::new(COUNTERS_NONE, Action::None),
    Rule::new(COUNTERS_UNREADABLE, Action::None),
    Rule::new(PORT_NOT_ACTIVE, Action::None),
    Rule::new(NO_PORTS, Action::None),
    Rule::new(AER_CLEAN, Action::None),
    Rule::new(AER_QUIET, Action::None),
    Rule::new(AER_HISTORY, Action::None),
    Rule::new(AER_UNCORRECTABLE, Action::ReplacePart),
    Rule::new(AER_CORRECTABLE, Action::ReplacePart),
    Rule::new(AER_NONE, Action::None),
    Rule::new(AER_UNREADABLE, Action::None),
];

const META: Meta = Meta {
    id: "link-health",
    title: "Links not failing now: no flaps, growing errors or retries, no PCIe AER errors",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/link-health/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for LinkHealth {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let sample = cx.runs.sample.as_ref();
        let mut out: Vec<Finding> = Vec::new();
        for d in &inv.rdma {
            for p in &d.ports {
                let mut found = judge_port(inv, d, p, sample, &cx.config.thresholds);
                if p.is_active() {
                    // The latest reading: the window's second, else this run's own.
                    let latest = sample
                        .and_then(|s| {
                            s.port(&d.name, p.num)
                                .map(|other| s.order(&p.counters, other).1)
                        })
                        .unwrap_or(&p.counters);
                    if let Some(sat) = nic::saturated(d, p, &latest.counters) {
                        // A quiet or clean port says what it could not see.
                        let names: Vec<&str> = nic::pinned(&latest.counters)
                            .iter()
                            .map(|(c, ..)| c.watched.name)
                            .collect();
                        for f in found
                            .iter_mut()
                            .filter(|f| f.code == QUIET.id || f.code == CLEAN.id)
                        {
                            f.message.push_str(&format!(
                                "; except {}, pinned at its maximum, on which nothing can show (link-counter-saturated)",
                                names.join(", ")
                            ));
                        }
                        found.push(sat);
                    }
                    let first = p
                        .netdev
                        .as_ref()
                        .and_then(|n| cx.runs.qos.netdev(&n.name))
                        .and_then(|a| a.ethtool.stats.as_ref().ok())
                        .map(Vec::as_slice);
                    found.extend(nic::judge_stats(d, p, first, sample));
                }
                out.extend(found);
            }
        }
        if out.is_empty() {
            out.push(
                Finding::skip(NO_PORTS, "node", "no RDMA port (see rdma-link)")
                    .evidence(CLASS_INFINIBAND, "<no RDMA port>")
                    .prerequisites(&["rdma-link"]),
            );
        }
        out.extend(judge_aer(inv, sample));
        out
    }
}

/// How long the counters have counted, to the hour (`up 3 d 4 h`, `up 5 h`, `up less than an
/// hour`): coarse on purpose, so that a capture taken seconds after a live run reads the same.
pub(super) fn uptime(inv: &Inventory) -> String {
    match inv.kernel.uptime.value() {
        Some(&s) => {
            let s = s as u64;
            let (d, h) = (s / 86_400, s / 3_600 % 24);
            match (d, h) {
                (0, 0) => "up less than an hour".into(),
                (0, h) => format!("up {h} h"),
                (d, h) => format!("up {d} d {h} h"),
            }
        }
        None => "uptime unknown".into(),
    }
}

fn evidence(c: &Counter) -> Evidence {
    Evidence {
        path: c.value.path.clone(),
        value: c.value.shown(),
    }
}

fn judge_port(
    inv: &Inventory,
    dev: &RdmaDevice,
    port: &Port,
    sample: Option<&Sample>,
    limits: &Thresholds,
) -> Vec<Finding> {
    let subject = port.subject(&dev.name);
    let state = &port.state;
    if !port.is_active() {
        return vec![
            Finding::skip(
                PORT_NOT_ACTIVE,
                subject,
                format!("{}: counters not judged (see rdma-link)", state.shown()),
            )
            .evidence(state.path.clone(), state.shown())
            .prerequisites(&["rdma-link"]),
        ];
    }
    let before = &port.counters;
    if before.counters.is_empty() {
        return vec![Finding::skip(
            COUNTERS_NONE,
            subject,
            format!(
                "{} shows none of the link counters gdrdoctor reads (counters/, hw_counters/, its netdev's carrier_changes)",
                dev.driver.as_deref().unwrap_or("its driver")
            ),
        )
        .evidence(format!("{}/counters", port.dir), "<none read>")];
    }
    let unreadable: Vec<&Counter> = before
        .counters
        .iter()
        .filter(|c| c.value.value().is_none())
        .collect();
    if !unreadable.is_empty() {
        return vec![
            Finding::unknown(
                COUNTERS_UNREADABLE,
                subject,
                format!(
                    "{} of {} link counters could not be read: {}",
                    unreadable.len(),
                    before.counters.len(),
                    unreadable
                        .iter()
                        .map(|c| format!("{} ({})", c.watched.name, c.value.shown()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with(unreadable.iter().map(|c| evidence(c))),
        ];
    }
    match sample.and_then(|s| s.port(&dev.name, port.num).map(|other| (s, other))) {
        Some((s, other)) => {
            let (before, after) = s.order(before, other);
            judge_growth(dev, port, subject, before, after, s, limits)
        }
        None => vec![judge_history(
            inv,
            dev,
            port,
            subject,
            before,
            sample.is_some(),
            limits,
        )],
    }
}

/// What a counter reads on a link that came up once and has not failed since: 0, but 2 for a
/// netdev's carrier_changes (the boot's down and up; the lab's rxe netdev reads 2 after boot).
fn boot_value(c: &Counter) -> u64 {
    if c.watched.name == "carrier_changes" {
        2
    } else {
        0
    }
}

/// One reading: a clean history passes; a history with errors is shown, not judged.
fn judge_history(
    inv: &Inventory,
    dev: &RdmaDevice,
    port: &Port,
    subject: String,
    counters: &PortCounters,
    sampled: bool,
    limits: &Thresholds,
) -> Finding {
    let counted: Vec<&Counter> = counters
        .counters
        .iter()
        .filter(|c| c.value.value().is_some_and(|v| *v > boot_value(c)))
        .collect();
    let uptime = uptime(inv);
    let uptime_evidence = Evidence {
        path: inv.kernel.uptime.path.clone(),
        value: match inv.kernel.uptime.value() {
            Some(_) => uptime.clone(),
            None => inv.kernel.uptime.shown(),
        },
    };
    if counted.is_empty() {
        return Finding::pass(
            CLEAN,
            subject,
            format!(
                "{} counters read, no flap, error or retry since the driver loaded ({uptime})",
                counters.counters.len()
            ),
        )
        .with(counters.counters.iter().map(evidence))
        .with([uptime_evidence]);
    }
    // A site's lifetime limits judge the totals even from one reading.
    let over: Vec<(&Counter, u64)> = counted
        .iter()
        .filter_map(|c| {
            let limit = *limits.link_lifetime.get(c.watched.name)?;
            c.value.value().filter(|v| **v > limit).map(|_| (*c, limit))
        })
        .collect();
    if !over.is_empty() {
        let netdev = port.netdev.as_ref().map(|n| n.name.as_str());
        return Finding::warn(
            LIFETIME_OVER,
            subject,
            format!(
                "since the driver loaded ({uptime}): {} (thresholds.link_lifetime)",
                over.iter()
                    .map(|(c, limit)| format!(
                        "{} {} > {limit}",
                        c.watched.name,
                        c.value.value().unwrap_or(&0)
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .with(over.iter().map(|(c, _)| evidence(c)))
        .with([uptime_evidence])
        .fix(cable_fix(dev, port.num, netdev));
    }
    let why = if sampled {
        "its second reading is missing"
    } else {
        "`check --sample 5` judges what grows now"
    };
    Finding::skip(
        HISTORY,
        subject,
        format!(
            "since the driver loaded ({uptime}): {}; one reading is history, not a verdict ({why})",
            counted
                .iter()
                .map(|c| format!("{} {}", c.watched.name, c.value.value().unwrap_or(&0)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )
    .with(counted.iter().map(|c| evidence(c)))
    .with([uptime_evidence])
    .evidence(port.dir.clone(), "one reading")
}

/// Two readings: what grew in the window, by what it says (a flap fails; errors and retries warn).
fn judge_growth(
    dev: &RdmaDevice,
    port: &Port,
    subject: String,
    before: &PortCounters,
    after: &PortCounters,
    sample: &Sample,
    limits: &Thresholds,
) -> Vec<Finding> {
    let grew = growth(before, after);
    // Errors and retries at or below the site's rate are tolerated; a flap never is.
    let minutes = (sample.seconds / 60.0).max(f64::MIN_POSITIVE);
    let rate = |sign: Sign| {
        grew.iter()
            .filter(|g| g.watched.sign == sign)
            .map(|g| g.by() as f64)
            .sum::<f64>()
            / minutes
    };
    let limit = |sign: Sign| match sign {
        Sign::Flap => 0.0,
        Sign::Wire => limits.link_errors_per_min,
        Sign::Retry => limits.link_retries_per_min,
    };
    let tolerated: Vec<String> = [Sign::Wire, Sign::Retry]
        .into_iter()
        .filter(|&sign| limit(sign) > 0.0 && rate(sign) > 0.0 && rate(sign) <= limit(sign))
        .map(|sign| {
            format!(
                "{} {:.1} a minute, at or below the site's {} ({})",
                sign.noun(),
                rate(sign),
                limit(sign),
                match sign {
                    Sign::Retry => "thresholds.link_retries_per_min",
                    _ => "thresholds.link_errors_per_min",
                }
            )
        })
        .collect();
    let grew: Vec<_> = grew
        .iter()
        .filter(|g| {
            let sign = g.watched.sign;
            sign == Sign::Flap || limit(sign) == 0.0 || rate(sign) > limit(sign)
        })
        .cloned()
        .collect();
    let window = window(sample);
    let netdev = port.netdev.as_ref().map(|n| n.name.as_str());
    let Some(worst) = grew.iter().map(|g| g.watched.sign).min() else {
        return vec![
            Finding::pass(
                QUIET,
                subject,
                if tolerated.is_empty() {
                    format!(
                        "no flap, link error or retry in {window} ({} counters)",
                        before.counters.len()
                    )
                } else {
                    format!("no flap in {window}; {}", tolerated.join("; "))
                },
            )
            .with(after.counters.iter().map(evidence)),
        ];
    };
    // One finding per kind that grew, most serious first: retries that grow beside a flap or a
    // few receive errors are still retries, with their own code and fix.
    let mut signs: Vec<Sign> = grew.iter().map(|g| g.watched.sign).collect();
    signs.sort();
    signs.dedup();
    debug_assert_eq!(signs.first(), Some(&worst));
    signs
        .into_iter()
        .map(|sign| {
            let these: Vec<_> = grew.iter().filter(|g| g.watched.sign == sign).collect();
            let what = these
                .iter()
                .map(|g| format!("{} +{} ({} -> {})", g.watched.name, g.by(), g.was, g.now))
                .collect::<Vec<_>>()
                .join(", ");
            let evidence = these.iter().map(|g| Evidence {
                path: g.path.clone(),
                value: format!("{} -> {}", g.was, g.now),
            });
            let (code, status) = match sign {
                Sign::Flap => (FLAPPING, Status::Fail),
                Sign::Wire => (ERRORS_GROWING, Status::Warn),
                Sign::Retry => (RETRIES_GROWING, Status::Warn),
            };
            let fix = match sign {
                Sign::Flap | Sign::Wire => cable_fix(dev, port.num, netdev),
                Sign::Retry => retry_fix(dev, port.num, netdev),
            };
            Finding::new(
                code,
                status,
                subject.clone(),
                format!("{} in {window}: {what}", sign.noun()),
            )
            .with(evidence)
            .fix(fix)
        })
        .collect()
}

pub(super) fn window(sample: &Sample) -> String {
    sample.span()
}

pub(super) fn cable_fix(dev: &RdmaDevice, port: u32, netdev: Option<&str>) -> Fix {
    let mut fix = Fix::new(
        format!(
            "Find the failing part of {} port {port}'s link (cable, transceiver, this port or the switch port) and reseat or replace it",
            dev.name
        ),
        "Reseating takes the link down: drain the node first.",
    );
    if dev.driver.as_deref() == Some("mlx5_core") {
        if let Some(bdf) = dev.pci {
            fix = fix.manual(format!(
                "mlxlink -d {bdf} -p {port} -c -e   # the cable's errors, BER and eye (MFT)"
            ));
        }
    }
    if let Some(n) = netdev {
        fix = fix.manual(format!(
            "ethtool -m {n}   # the transceiver's temperature, power and alarms"
        ));
    }
    fix.manual(format!(
        "rdma statistic show link {}/{port}   # watch it again after the swap",
        dev.name
    ))
}

fn retry_fix(dev: &RdmaDevice, port: u32, netdev: Option<&str>) -> Fix {
    if dev.is_efa() {
        // EFA's fabric is the provider's: nothing on the node to reseat or configure.
        return Fix::new(
            format!(
                "{} port {port} drops packets: EFA's network is AWS's; stop the instance and start it again (it moves to another host), or report the instance ID and these counters to AWS",
                dev.name
            ),
            "Stopping the instance ends every job on it.",
        )
        .manual(format!(
            "rdma statistic show link {}/{port}   # which counters grow",
            dev.name
        ));
    }
    let mut fix = Fix::new(
        format!(
            "Find where packets from {} port {port} are lost: a lossy queue (RoCE: PFC and DSCP trust on the NIC and every switch hop), a congested or failing link on the path",
            dev.name
        ),
        "Reading counters changes nothing.",
    );
    if let Some(n) = netdev {
        fix = fix.manual(format!(
            "ethtool -S {n} | grep -E 'pause|discard|out_of_buffer'   # drops and pauses at this NIC"
        ));
    }
    fix.manual(format!(
        "rdma statistic show link {}/{port}   # which retry counters grow",
        dev.name
    ))
}

/// What `bdf` is on the GPU-NIC paths, for a subject: `GPU ...`, `mlx5_0 (...)`, `bridge ...`,
/// or a function the node no longer has (named in the kernel's log).
pub(super) fn function_subject(inv: &Inventory, bdf: Bdf) -> String {
    if inv.gpus.iter().any(|g| g.bdf == bdf) {
        format!("GPU {bdf}")
    } else if let Some(d) = inv.rdma.iter().find(|d| d.pci == Some(bdf)) {
        format!("{} ({bdf})", d.name)
    } else if inv.function(bdf).is_some() {
        format!("bridge {bdf}")
    } else {
        format!("{bdf} (not on the node now)")
    }
}

fn aer_evidence(aer: &Aer) -> Vec<Evidence> {
    aer.tables()
        .iter()
        .filter(|(_, t)| !t.is_missing())
        .map(|(_, t)| Evidence {
            path: t.path.clone(),
            value: t
                .value()
                .map_or_else(|| t.shown(), |v| format!("total {}", v.total)),
        })
        .collect()
}

/// The AER statistics of every function on the GPU-NIC paths (the functions the inventory
/// details: GPUs, RDMA NICs and every bridge above them). Errors may be logged at the link
/// partner, so every function counts, not only the endpoints.
fn judge_aer(inv: &Inventory, sample: Option<&Sample>) -> Vec<Finding> {
    let functions: Vec<(Bdf, &Aer)> = inv
        .pci
        .values()
        .filter_map(|f| f.detail.as_ref().map(|d| (f.bdf, &d.aer)))
        .collect();
    if functions.is_empty() {
        return Vec::new();
    }
    let shown: Vec<(Bdf, &Aer)> = functions
        .iter()
        .copied()
        .filter(|(_, a)| !a.absent())
        .collect();
    if shown.is_empty() {
        let (bdf, aer) = functions[0];
        return vec![Finding::skip(
            AER_NONE,
            "node",
            format!(
                "none of the {} functions of the GPU-NIC paths shows AER statistics: {}",
                functions.len(),
                // The aer_dev_* files came with Linux 4.19: on a later kernel their absence is
                // the functions' (no AER capability, as a VM's emulated PCIe has), not the
                // kernel's (issue 40: "a kernel before 4.19" on 6.18).
                match inv.kernel.version {
                    Some(v) if v >= crate::parse::kernel::KernelVersion(4, 19, 0) => format!(
                        "they have no AER capability (kernel {v} shows the statistics of those that do; a VM's emulated PCIe usually has none)"
                    ),
                    Some(v) => format!("kernel {v} predates them (Linux 4.19)"),
                    None => "no AER capability, or a kernel before 4.19 (the kernel's release could not be read)".to_owned(),
                }
            ),
        )
        .evidence(aer.correctable.path.clone(), aer.correctable.shown())
        .evidence(format!("PCI {bdf}"), "no aer_dev_* files")];
    }
    let mut out = Vec::new();
    let mut clean = Vec::new();
    for (bdf, aer) in &shown {
        let subject = function_subject(inv, *bdf);
        let bad: Vec<_> = aer
            .tables()
            .into_iter()
            .filter(|(_, t)| !t.is_missing() && t.value().is_none())
            .collect();
        if !bad.is_empty() {
            out.push(
                Finding::unknown(
                    AER_UNREADABLE,
                    subject,
                    format!(
                        "AER statistics not readable: {}",
                        bad.iter()
                            .map(|(_, t)| format!("{} ({})", t.path, t.shown()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .with(bad.iter().map(|(_, t)| Evidence {
                    path: t.path.clone(),
                    value: t.shown(),
                })),
            );
            continue;
        }
        let found = match sample.and_then(|s| s.aer(*bdf).map(|a| (s, a))) {
            Some((s, other)) => {
                let (before, after) = s.order(*aer, other);
                aer_growth(inv, *bdf, before, after, s)
            }
            None => aer_history(aer, &subject),
        };
        match found {
            Some(f) => out.push(f),
            None => clean.push(*bdf),
        }
    }
    if !clean.is_empty() {
        let (code, when) = match sample {
            Some(s) => (AER_QUIET, format!("in {}", window(s))),
            None => (AER_CLEAN, "since boot".to_owned()),
        };
        let evidence = shown
            .iter()
            .filter(|(b, _)| clean.contains(b))
            .flat_map(|(_, a)| aer_evidence(a));
        out.push(
            Finding::pass(
                code,
                "node",
                format!(
                    "no AER error {when} on {} of the GPU-NIC paths",
                    super::counted(clean.len(), "function")
                ),
            )
            .with(evidence),
        );
    }
    out
}

fn aer_history(aer: &Aer, subject: &str) -> Option<Finding> {
    let counted: Vec<String> = aer
        .tables()
        .iter()
        .filter_map(|(severity, t)| {
            let t = t.value()?;
            (t.total > 0).then(|| format!("{severity} {} ({})", t.total, t.nonzero()))
        })
        .collect();
    if counted.is_empty() {
        return None;
    }
    Some(
        Finding::skip(
            AER_HISTORY,
            subject,
            format!(
                "since boot: {}; one reading is history, not a verdict (`check --sample 5` judges what grows now)",
                counted.join("; ")
            ),
        )
        .with(aer_evidence(aer)),
    )
}

fn aer_growth(inv: &Inventory, bdf: Bdf, before: &Aer, after: &Aer, s: &Sample) -> Option<Finding> {
    let mut grew = Vec::new();
    let mut evidence = Vec::new();
    let mut uncorrectable = false;
    for (severity, b, a, path) in before.grew(after) {
        grew.push(format!(
            "{severity} +{} ({})",
            a.total - b.total,
            a.growth(b)
        ));
        evidence.push(Evidence {
            path: path.to_owned(),
            value: format!("total {} -> {}", b.total, a.total),
        });
        uncorrectable |= severity != "correctable";
    }
    if grew.is_empty() {
        return None;
    }
    let (code, status) = if uncorrectable {
        (AER_UNCORRECTABLE, Status::Fail)
    } else {
        (AER_CORRECTABLE, Status::Warn)
    };
    let subject = function_subject(inv, bdf);
    Some(
        Finding::new(
            code,
            status,
            subject,
            format!("PCIe AER errors in {}: {}", window(s), grew.join("; ")),
        )
        .with(evidence)
        .fix(
            Fix::new(
                format!(
                    "Find the failing part of {bdf}'s PCIe link: the kernel log names each error and its source; reseat the card or its riser, and update the firmware if the vendor lists the error"
                ),
                "Reseating needs the node powered off: drain it first.",
            )
            .manual(format!("dmesg -T | grep -i -E 'AER|{bdf}'   # each error, its type and source"))
            .manual(format!("lspci -vvv -s {bdf} | grep -E 'UESta|CESta|LnkSta'   # the error status and the link")),
        ),
    )
}
