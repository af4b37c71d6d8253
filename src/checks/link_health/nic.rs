//! What link-health reads beyond the port counters (issue 40): a PMA counter pinned at the most
//! its width holds, which can never show growth, and the NIC's own ethtool statistics under a
//! RoCE port: frames dropped at the port or for want of host buffers, and the PHY's symbol and
//! FEC counters.

use super::{cable_fix, window};
use crate::inventory::{Port, RdmaDevice};
use crate::model::health::{Counter, Place, Sample};
use crate::model::{Code, Evidence, Finding, Fix};

pub(super) const SATURATED: Code = Code {
    id: "link-counter-saturated",
    summary: "a port error counter reads the most its width holds (symbol_error at 65535): it stopped counting, so no growth can show on it",
};
pub(super) const DROPS_GROWING: Code = Code {
    id: "link-drops-growing",
    summary: "the NIC dropped received frames in the window: at the port for lack of buffer (rx_discards_phy), or for want of host receive buffers (rx_out_of_buffer)",
};
pub(super) const PHY_ERRORS_GROWING: Code = Code {
    id: "link-phy-errors-growing",
    summary: "the PHY's uncorrected symbol or FEC errors grew in the window: a marginal cable, transceiver or port",
};
pub(super) const FEC_CORRECTED: Code = Code {
    id: "link-fec-corrected",
    summary: "FEC corrected bits in the window, as it is designed to; said with the rate, not judged",
};

/// The width of a PMA error counter as the kernel reads it from PortCounters
/// (drivers/infiniband/core/sysfs.c `PORT_PMA_ATTR(symbol_error, 0, 16, 32)` and its
/// neighbours, the IBTA's PortCounters attribute): the counter stops at `2^bits - 1`.
fn pma_bits(name: &str) -> Option<u32> {
    Some(match name {
        "symbol_error"
        | "port_rcv_errors"
        | "port_rcv_remote_physical_errors"
        | "port_rcv_switch_relay_errors"
        | "port_xmit_discards"
        | "VL15_dropped" => 16,
        "link_error_recovery"
        | "link_downed"
        | "port_xmit_constraint_errors"
        | "port_rcv_constraint_errors" => 8,
        "local_link_integrity_errors" | "excessive_buffer_overrun_errors" => 4,
        _ => return None,
    })
}

/// The PMA counters of `counters` that read their maximum, with it.
pub(super) fn pinned(counters: &[Counter]) -> Vec<(&Counter, u64, u32)> {
    counters
        .iter()
        .filter(|c| c.watched.place == Place::Pma)
        .filter_map(|c| {
            let bits = pma_bits(c.watched.name)?;
            let max = (1u64 << bits) - 1;
            (*c.value.value()? >= max).then_some((c, max, bits))
        })
        .collect()
}

/// A warning for the pinned counters of a port's latest reading, with how to reset them.
pub(super) fn saturated(dev: &RdmaDevice, port: &Port, latest: &[Counter]) -> Option<Finding> {
    let pinned = pinned(latest);
    if pinned.is_empty() {
        return None;
    }
    let what = pinned
        .iter()
        .map(|(c, max, bits)| {
            format!(
                "{} reads {max}, the most its {bits}-bit counter holds",
                c.watched.name
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let fix = if port.is_infiniband() {
        Fix::new(
            format!(
                "Reset {} port {}'s counters, then judge the link again with `check --sample`",
                dev.name, port.num
            ),
            "Resetting the counters changes no traffic; it clears what other monitoring reads from them.",
        )
        .runtime(format!("perfquery -R -C {} -P {}", dev.name, port.num))
    } else {
        Fix::new(
            format!(
                "{} port {}'s PMA counters reset only when its driver reloads: do it in a maintenance window, and judge the link meanwhile by the 64-bit counters (`rdma statistic`, its netdev's `ethtool -S`)",
                dev.name, port.num
            ),
            "Reloading the driver takes every port of the NIC down: drain the node first.",
        )
        .by_hand(format!(
            "# reload {}'s driver in a maintenance window to reset its PMA counters",
            dev.driver.as_deref().unwrap_or("the NIC")
        ))
    };
    Some(
        Finding::warn(
            SATURATED,
            port.subject(&dev.name),
            format!("{what}: it has stopped counting, so no growth can show on it, in a window or since the last run; the link had that many errors since the counter was last cleared"),
        )
        .with(pinned.iter().map(|(c, max, _)| Evidence {
            path: c.value.path.clone(),
            value: format!("{max} (the maximum)"),
        }))
        .fix(fix),
    )
}

/// Which of the NIC's statistics a name is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stat {
    /// Dropped at the port for lack of receive buffer (mlx5 `rx_discards_phy`).
    DiscardsPhy,
    /// A receive queue had no host buffer (mlx5 `rx_out_of_buffer`).
    OutOfBuffer,
    /// Uncorrected symbol or FEC errors at the PHY.
    PhyErrors,
    /// Bits FEC corrected, per lane or in all.
    Corrected,
}

/// mlx5's names (drivers/net/ethernet/mellanox/mlx5/core/en_stats.c; NVIDIA's "Understanding
/// mlx5 ethtool Counters"): the physical port's discards and symbol errors, the per-lane raw
/// errors and corrected bits; FEC blocks where a driver names them.
fn stat(name: &str) -> Option<Stat> {
    Some(match name {
        "rx_discards_phy" => Stat::DiscardsPhy,
        "rx_out_of_buffer" => Stat::OutOfBuffer,
        "rx_symbol_err_phy" | "rx_pcs_symbol_err_phy" => Stat::PhyErrors,
        "rx_corrected_bits_phy" => Stat::Corrected,
        n if n.starts_with("rx_err_lane_") && n.ends_with("_phy") => Stat::Corrected,
        n if n.contains("fec") && n.contains("uncorrect") => Stat::PhyErrors,
        n if n.contains("fec") && n.contains("correct") => Stat::Corrected,
        _ => return None,
    })
}

/// The growth of the NIC's statistics under a RoCE port in the window (the QoS probe's first
/// answer against the sample's second reading, as roce-lossless reads its pause counters).
pub(super) fn judge_stats(
    dev: &RdmaDevice,
    port: &Port,
    first: Option<&[(String, u64)]>,
    sample: Option<&Sample>,
) -> Vec<Finding> {
    let (Some(netdev), Some(first), Some(s)) = (port.netdev.as_ref(), first, sample) else {
        return Vec::new();
    };
    let ifname = netdev.name.as_str();
    if !s.pause.contains_key(ifname) {
        return Vec::new();
    }
    let mut grew: Vec<(Stat, &str, u64, u64)> = first
        .iter()
        .filter_map(|(n, _)| {
            let kind = stat(n)?;
            let (a, b) = s.pause_growth(ifname, first, n)?;
            Some((kind, n.as_str(), a, b))
        })
        .collect();
    grew.sort_by_key(|g| g.0);
    let span = window(s);
    let subject = port.subject(&dev.name);
    let ev = |gs: &[&(Stat, &str, u64, u64)]| -> Vec<Evidence> {
        gs.iter()
            .map(|(_, n, a, b)| Evidence {
                path: format!("ethtool -S {ifname}"),
                value: format!("{n}: {a} -> {b}"),
            })
            .collect()
    };
    let shown = |gs: &[&(Stat, &str, u64, u64)]| {
        gs.iter()
            .map(|(_, n, a, b)| format!("{n} +{} ({a} -> {b})", b - a))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = Vec::new();
    let drops: Vec<_> = grew
        .iter()
        .filter(|g| matches!(g.0, Stat::DiscardsPhy | Stat::OutOfBuffer))
        .collect();
    if !drops.is_empty() {
        let mut why = Vec::new();
        if drops.iter().any(|g| g.0 == Stat::DiscardsPhy) {
            why.push("rx_discards_phy: the NIC dropped frames at the port for lack of receive buffer, so PFC is not holding the sender back (see roce-lossless) or the port is congested");
        }
        if drops.iter().any(|g| g.0 == Stat::OutOfBuffer) {
            why.push("rx_out_of_buffer: a receive queue had no host buffer posted, so the host (its CPU, or the consumer of the queue) did not keep up");
        }
        out.push(
            Finding::warn(
                DROPS_GROWING,
                subject.clone(),
                format!("in {span}: {}; {}", shown(&drops), why.join("; ")),
            )
            .with(ev(&drops))
            .fix(
                Fix::new(
                    format!("Find why {ifname} drops received frames: PFC on RoCE's priority end to end (roce-lossless, the switch) for discards at the port; the receive ring size and the interrupt and CPU load for out-of-buffer drops"),
                    "Reading counters and settings changes nothing; a larger ring (ethtool -G) briefly resets the queues.",
                )
                .manual(format!("ethtool -S {ifname} | grep -E 'discard|out_of_buffer|pause'"))
                .manual(format!("ethtool -g {ifname}   # the receive ring size, against its maximum"))
                .manual(format!("mlnx_qos -i {ifname}   # PFC on RoCE's priority")),
            ),
        );
    }
    let phy: Vec<_> = grew.iter().filter(|g| g.0 == Stat::PhyErrors).collect();
    if !phy.is_empty() {
        out.push(
            Finding::warn(
                PHY_ERRORS_GROWING,
                subject.clone(),
                format!(
                    "in {span}: {}: errors FEC could not correct reached the link layer, a marginal cable, transceiver or port",
                    shown(&phy)
                ),
            )
            .with(ev(&phy))
            .fix(cable_fix(dev, port.num, Some(ifname))),
        );
    }
    let corrected: Vec<_> = grew.iter().filter(|g| g.0 == Stat::Corrected).collect();
    if !corrected.is_empty() {
        let bits: u64 = corrected
            .iter()
            .filter(|g| g.1 == "rx_corrected_bits_phy")
            .map(|g| g.3 - g.2)
            .sum();
        let rate = if bits > 0 {
            format!(
                " ({:.1} corrected bits a second)",
                bits as f64 / s.seconds.max(f64::MIN_POSITIVE)
            )
        } else {
            String::new()
        };
        out.push(
            Finding::pass(
                FEC_CORRECTED,
                subject,
                format!(
                    "in {span}: {}{rate}: FEC corrects these by design; errors it could not correct would be link-phy-errors-growing",
                    shown(&corrected)
                ),
            )
            .with(ev(&corrected)),
        );
    }
    out
}
