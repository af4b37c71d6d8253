//! The fixes of the lossless chain: NCCL_IB_TC where NCCL reads it, ECN on the priority NCCL
//! moves to, the PFC vector from the port's own, a buffer of its own, and the PFC fix with its
//! alternatives (the host side that keeps the fabric's settings first).

use super::*;

/// NCCL_IB_TC=value where NCCL reads it: the file of its first definition (/etc/nccl.conf when
/// unset), edited in place; the job environment, by hand.
pub(super) fn nccl_tc(inv: &Inventory, fix: Fix, value: u8) -> Fix {
    nccl_set(inv, fix, "NCCL_IB_TC", value)
}

/// `key=value` where NCCL reads it (see [`nccl_tc`]).
pub(super) fn nccl_set(inv: &Inventory, fix: Fix, key: &str, value: u8) -> Fix {
    use crate::inventory::nccl::Origin;
    match inv.nccl.get(key).map(|s| &s.origin) {
        None => fix.nccl_conf(key, value),
        Some(Origin::File { path, .. }) => fix.edit(crate::model::edit::Edit::Set {
            file: path.clone(),
            key: key.into(),
            value: value.to_string(),
        }),
        Some(o) => fix.manual(format!(
            "# set {key}={value} where it is set: {}",
            o.describe()
        )),
    }
}

/// ECN (DCQCN's reaction and notification points) turned on for `priority` where MLNX_OFED's
/// files say it is off: a fix that moves NCCL's traffic there brings its congestion control.
pub(super) fn ecn_on(fix: Fix, w: &Walk, priority: u8) -> Fix {
    let ifname = w.ifname;
    let Some((_, rp, np)) = w.port.ofed_qos.ecn.iter().find(|(p, _, _)| *p == priority) else {
        return fix;
    };
    let off: Vec<&str> = [("roce_rp", rp), ("roce_np", np)]
        .into_iter()
        .filter(|(_, on)| **on == Some(false))
        .map(|(point, _)| point)
        .collect();
    if off.is_empty() {
        return fix;
    }
    let file = |point: &str| format!("/sys/class/net/{ifname}/ecn/{point}/enable/{priority}");
    fix.guarded(
        FixClass::Runtime,
        off.iter()
            .map(|p| format!("echo 1 > {}", file(p)))
            .collect::<Vec<_>>()
            .join(" && "),
        off.iter()
            .map(|p| format!("[ \"$(cat {})\" = 1 ]", file(p)))
            .collect::<Vec<_>>()
            .join(" && "),
    )
}

/// The prio2buffer vector mlnx_qos takes, with `priority` moved to a buffer no other priority
/// uses (the lowest); None when every buffer serves one.
pub(super) fn own_buffer(prio2buffer: &[u8; 8], priority: u8) -> Option<String> {
    let free = (0..8u8).find(|b| !prio2buffer.contains(b))?;
    Some(
        (0..8u8)
            .map(|p| {
                if p == priority {
                    free.to_string()
                } else {
                    prio2buffer[p as usize].to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The eight-priority PFC vector mlnx_qos takes: the port's current one with `add` on, so that
/// adding a priority never turns another off (issue 39: `--pfc 0,0,0,1,0,0,0,0` on a port
/// with PFC on 4 took 4 away).
pub(super) fn pfc_vector(pfc: &crate::parse::dcbnl::Pfc, add: u8) -> String {
    (0..8u8)
        .map(|p| if pfc.on(p) || p == add { "1" } else { "0" })
        .collect::<Vec<_>>()
        .join(",")
}

/// PFC off on NCCL's priority. One fix, the host side that keeps the fabric's settings (its
/// PFC priority, and the DSCP it expects), the others as alternatives:
/// - the port's DSCP map moved NCCL's DSCP off the priority the standard map (DSCP >> 3) and
///   the fabric give it, and that priority has PFC: map it back (MLNX_OFED's dscp2prio, or the
///   APP table);
/// - else a DSCP the port maps to a priority with PFC: NCCL_IB_TC for it;
/// - else, and always as an alternative: PFC on NCCL's priority too, added to the port's vector
///   (the switch ports must match).
pub(super) fn pfc_fix(inv: &Inventory, w: &Walk, pfc: &crate::parse::dcbnl::Pfc) -> Fix {
    let (ifname, priority) = (w.ifname, w.priority);
    let enabled = pfc.priorities();
    let want = enabled.first().copied().unwrap_or(3);
    let safety = "PFC and DSCP map changes take the port's queues through a reconfiguration: drain first. NCCL_IB_TC takes effect for new jobs; the switch must treat the DSCP as lossless as it treats the priority.";
    let standard = w.dscp >> 3;
    let remap = w.dscp_trust && priority != standard && pfc.on(standard);
    // The lowest DSCP the port's own map puts on the priority that has PFC (under PCP trust
    // the firmware's DSCP >> 3, for when trust is moved to DSCP).
    let to_want = (0..64u8).find(|&d| {
        let p = if w.dscp_trust {
            dscp_priority(w.dcb, w.port, d).0
        } else {
            d >> 3
        };
        p == want
    });
    let add_pfc = |f: Fix| {
        f.disruptive(format!(
            "mlnx_qos -i {ifname} --pfc {}",
            pfc_vector(pfc, priority)
        ))
    };
    let add_pfc_summary = format!(
        "enable PFC on priority {priority} too on {ifname} (kept on {}), and on the switch ports",
        pfc.shown()
    );
    if remap {
        let ofed = w.port.ofed_qos.dscp2prio.is_some()
            && !w.dcb.app.iter().any(|a| a.selector == selector::DSCP);
        let fix = Fix::new(
            format!(
                "Map NCCL's DSCP {} back to priority {standard} on {ifname}, where the standard map (DSCP >> 3) and PFC put it",
                w.dscp
            ),
            safety,
        );
        let fix = if ofed {
            fix.disruptive(format!(
                "mlnx_qos -i {ifname} --dscp2prio set,{},{standard}",
                w.dscp
            ))
        } else {
            fix.disruptive(format!(
                "dcb app replace dev {ifname} dscp-prio {}:{standard}",
                w.dscp
            ))
        };
        return fix.or(add_pfc_summary, add_pfc);
    }
    match to_want {
        Some(d) if d << 2 != w.tc.effective() => ecn_on(
            nccl_tc(
                inv,
                Fix::new(
                    format!("Move NCCL's traffic to the fabric's lossless priority {want}: NCCL_IB_TC={} (DSCP {d}, which {ifname} maps to {want}), with ECN on there", d << 2),
                    safety,
                ),
                d << 2,
            ),
            w,
            want,
        )
        .or(add_pfc_summary, add_pfc),
        _ => add_pfc(Fix::new(
            format!("Enable PFC on priority {priority} on {ifname} (kept on {}), and on the switch ports", pfc.shown()),
            safety,
        ))
        .or(format!("dcb's form of the same on {ifname}"), |f| {
            f.disruptive(format!("dcb pfc set dev {ifname} prio-pfc {priority}:on"))
        }),
    }
}
