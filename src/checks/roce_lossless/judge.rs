//! The findings along one port's chain, each from the walk (`super::Walk`): MLNX_OFED's
//! override, PFC on NCCL's priority, NCCL_IB_FIFO_TC, global pause, buffers, ECN, CNPs, pauses.

use super::fix::{nccl_set, nccl_tc, own_buffer, pfc_fix};
use super::*;

/// MLNX_OFED's override against NCCL_IB_TC.
pub(super) fn tclass_override(inv: &Inventory, w: &Walk) -> Option<Finding> {
    let tc = &w.tc;
    if let Some(o) = tc.ofed.filter(|&o| o != tc.nccl) {
        return Some(
            Finding::warn(
                TCLASS_OVERRIDE,
                w.subject.clone(),
                format!(
                    "MLNX_OFED's traffic class {o} ({}) overrides NCCL_IB_TC={} ({}) for the QPs the kernel creates; NCCL's GPU-initiated (DevX/DOCA) QPs keep {}: the two land on different priorities where the fabric does not map both",
                    tc.ofed_path, tc.nccl, tc.nccl_from, tc.nccl
                ),
            )
            .evidence(tc.ofed_path.clone(), format!("Global tclass={o}"))
            .fix(
                nccl_tc(
                    inv,
                    Fix::new(
                        format!("Make NCCL_IB_TC and the override say the same: NCCL_IB_TC={o} where NCCL reads it (the host side: the override the node's RDMA stack set is kept)"),
                        "The override applies to new QPs only; running jobs keep theirs.",
                    ),
                    o,
                )
                .or(
                    format!("or write NCCL's traffic class to the override: every QP the kernel creates on this port then uses NCCL_IB_TC={}", tc.nccl),
                    |f| f.runtime(format!("echo {} > {}", tc.nccl, tc.ofed_path)),
                )
            ),
        );
    }
    None
}

/// PFC off on the priority NCCL's traffic lands on (or PCP trust sending it to 0).
pub(super) fn pfc_broken(
    inv: &Inventory,
    w: &Walk,
    pfc: &crate::parse::dcbnl::Pfc,
) -> Option<Finding> {
    let (ifname, priority, dscp_trust) = (w.ifname, w.priority, w.dscp_trust);
    let enabled = pfc.priorities();
    let enabled_shown = pfc.shown();
    let pfc_ev = w.evidence("pfc_en", pfc.evidence());
    if !pfc.on(priority) {
        let want = enabled.iter().copied().find(|&p| p != 0);
        let (code, fix) = if let (false, Some(want), Some(vlan)) = (dscp_trust, want, &w.tagged) {
            // Tagged over a VLAN under PCP trust: NCCL_IB_SL is the PCP, so it is the setting
            // to change; the port's trust and PFC stay as the fabric has them.
            (
                PFC_OFF,
                nccl_set(
                    inv,
                    Fix::new(
                        format!(
                            "Set NCCL_IB_SL={want} where NCCL reads it: NCCL's RoCE is tagged over {vlan} and the port trusts PCP, so NCCL_IB_SL is the priority its frames carry, and {want} has PFC"
                        ),
                        "Jobs started after the change use it; running jobs keep their QPs' service level.",
                    ),
                    "NCCL_IB_SL",
                    want,
                ),
            )
        } else if let (false, Some(want)) = (dscp_trust, want) {
            // Under DSCP trust NCCL's own DSCP must reach the lossless priority: the map entry
            // for that DSCP, not the first of its octet (issue 39: `24:3` where NCCL's is 26).
            // NCCL_IB_TC unset (DSCP 0) would map DSCP 0, every untagged packet's (TCP's too),
            // to the lossless priority, or leave NCCL on 0: the fix gives NCCL a DSCP of its own,
            // RoCE's customary 26 (NCCL_IB_TC=106: DSCP 26, ECN capable).
            let (dscp, tc_fix) = if w.dscp == 0 {
                (26, Some(106))
            } else {
                (w.dscp, None)
            };
            let fix = Fix::new(
                format!("Trust DSCP on {ifname} and map NCCL's DSCP {dscp} to priority {want}, which has PFC, so that NCCL_IB_TC decides the priority"),
                "Changing trust reclassifies the port's traffic at once: drain the node first. The switch must trust DSCP too.",
            )
            .disruptive(format!("mlnx_qos -i {ifname} --trust dscp"))
            .disruptive(format!("dcb app replace dev {ifname} dscp-prio {dscp}:{want}"));
            (
                TRUST_PCP,
                match tc_fix {
                    Some(tc) => nccl_tc(inv, fix, tc),
                    None => fix,
                },
            )
        } else {
            (PFC_OFF, pfc_fix(inv, w, pfc))
        };
        return Some(
            Finding::fail(
                code,
                w.subject.clone(),
                w.chain(&format!("PFC off on {priority} (enabled: {enabled_shown})")),
            )
            .with(w.sources.iter().cloned())
            .with([pfc_ev])
            .fix(fix),
        );
    }
    None
}

/// `NCCL_IB_FIFO_TC`: the traffic class of NCCL's control messages (the receiver's writes into
/// the sender's FIFO) when it differs from the data's: its priority must be lossless too.
pub(super) fn fifo_tc_lossy(
    inv: &Inventory,
    w: &Walk,
    pfc: &crate::parse::dcbnl::Pfc,
) -> Option<Finding> {
    let (class, s) = nccl_u8(inv, "NCCL_IB_FIFO_TC")?;
    if !w.dscp_trust {
        return None;
    }
    let dscp = class >> 2;
    let (prio, shown, _) = dscp_priority(w.dcb, w.port, dscp);
    (!pfc.on(prio)).then(|| {
        Finding::warn(
            FIFO_TC_LOSSY,
            w.subject.clone(),
            format!(
                "NCCL_IB_FIFO_TC={class} ({}) -> DSCP {dscp} -> {} -> {shown} -> PFC off on {prio}: NCCL's control messages (the receiver's writes into the sender's FIFO) ride a lossy queue while its data rides priority {}",
                s.origin.path(),
                w.trust_shown,
                w.priority
            ),
        )
        .with([s.evidence()])
        .fix(
            Fix::new(
                format!("Put NCCL's control messages on a lossless priority too: NCCL_IB_FIFO_TC={} (the data's class), or unset it", w.tc.effective()),
                "Takes effect for new jobs.",
            )
            .edit_or_manual(match &s.origin {
                crate::inventory::nccl::Origin::File { path, .. } => Ok(crate::model::edit::Edit::Unset {
                    file: path.clone(),
                    key: "NCCL_IB_FIFO_TC".into(),
                }),
                other => Err(format!("# unset NCCL_IB_FIFO_TC in {}", other.path())),
            }),
        )
    })
}

/// 802.3x global pause beside PFC.
pub(super) fn global_pause(w: &Walk) -> Option<Finding> {
    let (ifname, priority) = (w.ifname, w.priority);
    if let Ok(p) = &w.answers.ethtool.pause {
        if p.rx || p.tx {
            return Some(
                Finding::fail(
                    GLOBAL_PAUSE,
                    w.subject.clone(),
                    format!(
                        "{}; but 802.3x global pause is on (rx {}, tx {}): a paused link stops every priority, and PFC and global pause together are undefined on most NICs",
                        w.chain(&format!("PFC on {priority}")),
                        if p.rx { "on" } else { "off" },
                        if p.tx { "on" } else { "off" }
                    ),
                )
                .evidence(format!("ethtool -a {ifname}"), format!("autoneg {} rx {} tx {}", p.autoneg, p.rx, p.tx))
                .fix(
                    Fix::new(
                        format!("Turn 802.3x pause off on {ifname}: PFC does the pausing, per priority"),
                        "Takes effect at once; the switch port should have global pause off too.",
                    )
                    .runtime(format!("ethtool -A {ifname} autoneg off rx off tx off")),
                ),
            );
        }
    }
    None
}

/// The lossless priority's buffer shared with lossy ones.
pub(super) fn buffer_shared(w: &Walk, pfc: &crate::parse::dcbnl::Pfc) -> Option<Finding> {
    let (ifname, priority) = (w.ifname, w.priority);
    if let Some(b) = &w.dcb.buffer {
        let &mine = b.prio2buffer.get(usize::from(priority))?;
        let lossy: Vec<u8> = (0..8u8)
            .filter(|&p| p != priority && b.prio2buffer[p as usize] == mine && !pfc.on(p))
            .collect();
        if !lossy.is_empty() {
            return Some(
                Finding::warn(
                    BUFFER_SHARED,
                    w.subject.clone(),
                    format!(
                        "priority {priority}'s receive buffer {mine} is shared with lossy priorities {}: their traffic can fill the headroom PFC needs",
                        lossy.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
                    ),
                )
                .with([w.evidence("prio2buffer", format!("{:?}", b.prio2buffer))])
                .fix(
                    Fix::new(
                        format!("Give priority {priority} a buffer of its own on {ifname}"),
                        "Buffer changes reconfigure the port's queues: drain first.",
                    )
                    .edit_or_manual_cmd(own_buffer(&b.prio2buffer, priority).map(|v| {
                        (FixClass::Disruptive, format!("mlnx_qos -i {ifname} --prio2buffer {v}"))
                    }).ok_or_else(|| format!("# every receive buffer of {ifname} serves a priority: give priority {priority} one of its own with mlnx_qos --prio2buffer and --buffer_size"))),
                ),
            );
        }
    }
    None
}

/// NCCL's lossless priority is where the node's other traffic lands too: untagged frames under
/// PCP trust (priority 0), DSCP 0 under DSCP trust (TCP's, and everything that sets none). PFC
/// then pauses TCP with RoCE, and TCP's bursts take the headroom PFC needs: the chain holds on
/// paper, yet the lossless class is not RoCE's own (NVIDIA's RoCE guides put RoCE on DSCP 26,
/// priority 3, and leave 0 lossy).
pub(super) fn priority_shared(
    inv: &Inventory,
    w: &Walk,
    pfc: &crate::parse::dcbnl::Pfc,
) -> Option<Finding> {
    let (ifname, priority) = (w.ifname, w.priority);
    let (default, how) = if w.dscp_trust {
        let (p, shown, _) = dscp_priority(w.dcb, w.port, 0);
        (
            p,
            format!("DSCP 0, which TCP and untagged traffic carry, lands on {shown}"),
        )
    } else {
        (
            0,
            "untagged traffic lands on priority 0 under PCP trust".to_owned(),
        )
    };
    if priority != default || !pfc.on(priority) {
        return None;
    }
    // RoCE's customary class: DSCP 26 on priority 3 (34 on 4 where 3 is the shared one).
    let want = if priority == 3 { 4 } else { 3 };
    let dscp = want << 3 | 2;
    let tc = (w.dscp != dscp).then_some(dscp << 2 | 2);
    let vector = (0..8u8)
        .map(|p| if p == want { "1" } else { "0" })
        .collect::<Vec<_>>()
        .join(",");
    let fix = Fix::new(
        format!(
            "Give NCCL a priority of its own on {ifname}: DSCP {dscp} on priority {want} with PFC, and priority {priority} lossy again (the switch ports must match)"
        ),
        "Trust, DSCP map and PFC changes reconfigure the port's queues: drain the node first. NCCL_IB_TC takes effect for new jobs.",
    );
    let fix = if w.dscp_trust {
        fix
    } else {
        fix.disruptive(format!("mlnx_qos -i {ifname} --trust dscp"))
    }
    .disruptive(format!(
        "dcb app replace dev {ifname} dscp-prio {dscp}:{want}"
    ))
    .disruptive(format!("mlnx_qos -i {ifname} --pfc {vector}"));
    let fix = match tc {
        Some(tc) => nccl_tc(inv, fix, tc),
        None => fix,
    };
    Some(
        Finding::warn(
            PRIORITY_SHARED,
            w.subject.clone(),
            format!(
                "{}: {how}, the same priority: PFC pauses TCP and the node's other traffic with NCCL's, and their bursts use the headroom PFC keeps for RoCE",
                w.chain(&format!("PFC on {priority}"))
            ),
        )
        .with(w.sources.iter().cloned())
        .with([w.evidence("pfc_en", pfc.evidence())])
        .fix(fix),
    )
}

/// ECN off on the lossless priority, where MLNX_OFED shows it.
pub(super) fn ecn_off(w: &Walk) -> Option<Finding> {
    let (ifname, priority) = (w.ifname, w.priority);
    let ecn = w.port.ofed_qos.ecn.iter().find(|(p, _, _)| *p == priority);
    if let Some((_, rp, np)) = ecn {
        if *rp == Some(false) || *np == Some(false) {
            return Some(
                Finding::warn(
                    ECN_OFF,
                    w.subject.clone(),
                    format!(
                        "ECN on priority {priority}: reaction point {}, notification point {}: without DCQCN, congestion is left to PFC alone (pause spreading, head-of-line blocking)",
                        on_off(*rp),
                        on_off(*np)
                    ),
                )
                .evidence(format!("/sys/class/net/{ifname}/ecn/roce_rp/enable/{priority}"), on_off(*rp))
                .evidence(format!("/sys/class/net/{ifname}/ecn/roce_np/enable/{priority}"), on_off(*np))
                .fix(
                    Fix::new(
                        format!("Enable ECN on priority {priority} of {ifname} (MLNX_OFED)"),
                        "Takes effect at once.",
                    )
                    .guarded(
                        FixClass::Runtime,
                        format!("echo 1 > /sys/class/net/{ifname}/ecn/roce_rp/enable/{priority}"),
                        format!("[ \"$(cat /sys/class/net/{ifname}/ecn/roce_rp/enable/{priority})\" = 1 ]"),
                    )
                    .guarded(
                        FixClass::Runtime,
                        format!("echo 1 > /sys/class/net/{ifname}/ecn/roce_np/enable/{priority}"),
                        format!("[ \"$(cat /sys/class/net/{ifname}/ecn/roce_np/enable/{priority})\" = 1 ]"),
                    ),
                ),
            );
        }
    }
    None
}

/// CNPs (DCQCN's congestion notifications, sent by the notification point) on NCCL's own
/// priority wait behind the data they are about: MLNX_OFED's `ecn/roce_np/cnp_dscp` (and
/// `cnp_802p_prio` under PCP trust) should put them on a priority of their own.
pub(super) fn cnp_shared(w: &Walk) -> Option<Finding> {
    let ofed = &w.port.ofed_qos;
    let (cnp_prio, shown, path) = if w.dscp_trust {
        let f = ofed.cnp_dscp.as_ref().or(ofed.cc_cnp_dscp.as_ref())?;
        let dscp = *f.value()?;
        let (prio, ..) = dscp_priority(w.dcb, w.port, dscp);
        (
            prio,
            format!("cnp_dscp {dscp} -> priority {prio}"),
            f.path.clone(),
        )
    } else {
        let f = ofed.cnp_prio.as_ref()?;
        let prio = *f.value()?;
        (prio, format!("cnp_802p_prio {prio}"), f.path.clone())
    };
    (cnp_prio == w.priority).then(|| {
        Finding::warn(
            CNP_SHARED,
            w.subject.clone(),
            format!(
                "CNPs ride NCCL's own priority {} ({shown}): congestion notifications queue behind the data they report, and DCQCN reacts late",
                w.priority
            ),
        )
        .evidence(path.clone(), shown.clone())
        .fix(
            Fix::new(
                format!("Give CNPs a priority of their own on {} (NVIDIA's RoCE guides use DSCP 48, priority 6)", w.ifname),
                "Takes effect at once; the switch must map that DSCP to a priority of its own too.",
            )
            .runtime(if path.starts_with("/sys/kernel/debug/") {
                format!("echo 48 > {path}")
            } else {
                format!("echo 48 > /sys/class/net/{}/ecn/roce_np/cnp_dscp", w.ifname)
            }),
        )
    })
}

/// Pause storms and pauses on a priority without PFC: one reading is history; a window or the
/// last run's reading judges their growth.
pub(super) fn pause_counters(
    w: &Walk,
    pfc: &crate::parse::dcbnl::Pfc,
    sample: Option<&Sample>,
) -> Option<Finding> {
    let ifname = w.ifname;
    if let Ok(stats) = &w.answers.ethtool.stats {
        let stray_name = |n: &str| {
            (0..8u8).any(|p| {
                !pfc.on(p) && (n == format!("rx_prio{p}_pause") || n == format!("tx_prio{p}_pause"))
            })
        };
        let watched: Vec<&(String, u64)> = stats
            .iter()
            .filter(|(n, _)| n.contains("pause_storm") || stray_name(n))
            .collect();
        let fix = Fix::new(
            format!("Find the receiver that cannot drain: a pause storm means a NIC (this one or a peer) stopped taking frames; pauses on a priority without PFC mean the switch and {ifname} disagree on the lossless priority"),
            "Reading counters changes nothing.",
        )
        .manual(format!("ethtool -S {ifname} | grep -E 'pause|storm'"))
        .manual(format!("mlnx_qos -i {ifname}"));
        match sample.filter(|s| s.pause.contains_key(ifname)) {
            Some(s) => {
                let grew: Vec<(&str, u64, u64)> = watched
                    .iter()
                    .filter_map(|(n, _)| {
                        s.pause_growth(ifname, stats, n)
                            .map(|(a, b)| (n.as_str(), a, b))
                    })
                    .collect();
                if !grew.is_empty() {
                    let storm = grew.iter().any(|(n, _, _)| n.contains("pause_storm"));
                    return Some(
                        Finding::new(
                            PAUSE_STORM,
                            if storm { Status::Fail } else { Status::Warn },
                            w.subject.clone(),
                            format!(
                                "in {}: {}",
                                s.span(),
                                grew.iter()
                                    .map(|(n, a, b)| format!("{n} +{} ({a} -> {b})", b - a))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                        .with(grew.iter().map(|(n, a, b)| Evidence {
                            path: format!("ethtool -S {ifname}"),
                            value: format!("{n}: {a} -> {b}"),
                        }))
                        .fix(fix),
                    );
                }
            }
            None => {
                let counted: Vec<&&(String, u64)> =
                    watched.iter().filter(|(_, v)| *v > 0).collect();
                if !counted.is_empty() {
                    return Some(
                        Finding::skip(
                            PAUSE_STORM,
                            w.subject.clone(),
                            format!(
                                "since the driver loaded: {}; one reading is history, not a verdict (`check --sample 5` judges what grows now)",
                                counted
                                    .iter()
                                    .map(|(n, v)| format!("{n} {v}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        )
                        .with(counted.iter().map(|(n, v)| Evidence {
                            path: format!("ethtool -S {ifname}"),
                            value: format!("{n}: {v}"),
                        })),
                    );
                }
            }
        }
    }
    None
}
