//! A pinned `NCCL_IB_GID_INDEX` against the GID table of every RoCE port NCCL uses.

use super::{GID_INDEX_BAD, GID_INDEX_OK, GID_INDEX_STACKED, undo};
use crate::inventory::nccl::Setting;
use crate::inventory::rdma::GidEntry;
use crate::inventory::{Inventory, Port, RdmaDevice};
use crate::model::{Evidence, Finding};
use crate::nccl::params::{self, HcaList};
use crate::parse::rdma::{GidFamily, GidType};

/// A pinned `NCCL_IB_GID_INDEX` against the GID table of every RoCE port NCCL uses.
pub(super) fn judge(inv: &Inventory) -> Vec<Finding> {
    let Some(s) = inv.nccl.get("NCCL_IB_GID_INDEX") else {
        return Vec::new();
    };
    let (index, _) = params::nccl_int(&s.value);
    if index < 0 {
        // NCCL's default: its own pick per port.
        return Vec::new();
    }
    let survey = survey(inv, s, index);
    let subject = format!("{}={}", s.name, s.value);
    if !survey.bad.is_empty() {
        return bad(s, index, subject, survey);
    }
    if !survey.stacked.is_empty() {
        return on_stacked(s, index, subject, survey);
    }
    if survey.good.is_empty() {
        return Vec::new();
    }
    let Survey { good, ev, .. } = survey;
    vec![
        Finding::pass(
            GID_INDEX_OK,
            subject,
            format!(
                "GID {index} is RoCE v2 on every RoCE port NCCL uses: {}",
                good.join("; ")
            ),
        )
        .with(ev),
    ]
}

/// The pinned index, port by port.
struct Survey {
    /// Ports where it is not a RoCE v2 GID: beyond the table, empty, RoCE v1 or unknown.
    bad: Vec<String>,
    /// Ports where it is a RoCE v2 GID.
    good: Vec<String>,
    /// Ports where it is a RoCE v2 GID, but of a netdev stacked on the port's own: the port's
    /// own index, when it has one.
    stacked: Vec<(String, Option<u32>)>,
    /// The index `gdrdoctor nccl` would pin on each port (the port's own netdev first).
    chosen: std::collections::BTreeSet<Option<u32>>,
    ev: Vec<Evidence>,
}

/// What the pin is on every RoCE port NCCL uses (those `NCCL_IB_HCA` selects).
fn survey(inv: &Inventory, s: &Setting, index: i64) -> Survey {
    let list = inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse);
    let v6 = params::wants_ipv6(inv.nccl.value("NCCL_IB_ADDR_FAMILY"));
    let mut survey = Survey {
        bad: Vec::new(),
        good: Vec::new(),
        stacked: Vec::new(),
        chosen: std::collections::BTreeSet::new(),
        ev: vec![s.evidence()],
    };
    for d in &inv.rdma {
        for p in d.ports.iter().filter(|p| p.is_ethernet()) {
            if list
                .as_ref()
                .is_some_and(|l| !l.selects(&d.name, Some(p.num)))
            {
                continue;
            }
            port(&mut survey, d, p, index, v6);
        }
    }
    survey
}

/// The pin on one RoCE port.
fn port(survey: &mut Survey, d: &RdmaDevice, p: &Port, index: i64, v6: bool) {
    let subject = p.subject(&d.name);
    survey.chosen.insert(p.roce_v2_gid_index());
    let slot = format!("{}/gids/{index}", p.dir);
    if index as u64 >= p.gid_slots as u64 {
        survey.bad.push(format!(
            "{subject}: beyond its table of {} slots",
            p.gid_slots
        ));
        survey.ev.push(Evidence {
            path: format!("{}/gids", p.dir),
            value: format!("{} slots", p.gid_slots),
        });
        return;
    }
    match p.gids.iter().find(|g| u64::from(g.index) == index as u64) {
        None => {
            survey.bad.push(format!("{subject}: slot {index} is empty"));
            survey.ev.push(Evidence {
                path: slot,
                value: "0000:0000:0000:0000:0000:0000:0000:0000".into(),
            });
        }
        Some(g) if g.gid_type.value() != Some(&GidType::RoceV2) => {
            survey.bad.push(format!(
                "{subject}: slot {index} is {} ({})",
                g.gid_type
                    .value()
                    .map(|_| "RoCE v1")
                    .unwrap_or("of unknown type"),
                g.gid.address()
            ));
            survey.ev.push(Evidence {
                path: slot,
                value: format!("{} ({})", g.gid, g.gid_type.shown()),
            });
        }
        Some(g) => {
            let family_ok = match g.gid.family() {
                GidFamily::Ipv4 => !v6,
                GidFamily::Ipv6 | GidFamily::LinkLocal => v6,
                GidFamily::Unused => false,
            };
            let on = g
                .ndev
                .value()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default();
            // The pin lands on another netdev's GID (a vxlan or macvlan stacked on the port's
            // bond): valid here, but its address is that netdev's, which differs from node to
            // node, and the port's own is elsewhere (issue 16).
            survey.stacked.extend(stacked(p, g, &subject, index, v6));
            survey.good.push(format!(
                "{subject}: RoCE v2 {}{on}{}",
                g.gid.address(),
                if family_ok {
                    ""
                } else {
                    " (not the address family NCCL is set to)"
                }
            ));
            survey.ev.push(Evidence {
                path: slot,
                value: format!("{} ({})", g.gid, g.gid_type.shown()),
            });
        }
    }
}

/// The pinned GID when it belongs to a netdev stacked on the port's own, and the port's own
/// RoCE v2 index, if it has one.
fn stacked(
    p: &Port,
    g: &GidEntry,
    subject: &str,
    index: i64,
    v6: bool,
) -> Option<(String, Option<u32>)> {
    let own = p.netdev.as_ref().map(|n| n.name.as_str())?;
    let other = g.ndev.value()?;
    if other == own {
        return None;
    }
    let own_index = p
        .gids
        .iter()
        .find(|e| {
            e.gid_type.value() == Some(&GidType::RoceV2)
                && e.ndev.value().map(String::as_str) == Some(own)
                && (e.gid.family() == GidFamily::Ipv4) != v6
        })
        .map(|e| e.index);
    // RoCE over a VLAN: the port's own netdev carries no RoCE v2 GID, the VLAN's (a VLAN as the
    // kernel tells it, whatever its name) is where RoCE runs, as on every node of that fabric.
    if own_index.is_none() && p.stacked.iter().any(|s| &s.name == other && s.is_vlan()) {
        return None;
    }
    Some((
        format!(
            "{subject}: GID {index} is RoCE v2 {} on {other}, not on the port's own netdev {own}; {}",
            g.gid.address(),
            match own_index {
                Some(i) => format!("{own}'s own RoCE v2 GID is at index {i}"),
                None => format!("{own} has no RoCE v2 GID of its own"),
            }
        ),
        own_index,
    ))
}

/// The pin is not a RoCE v2 GID on some port.
fn bad(s: &Setting, index: i64, subject: String, survey: Survey) -> Vec<Finding> {
    let Survey { bad, ev, .. } = survey;
    vec![
        Finding::fail(
            GID_INDEX_BAD,
            subject,
            format!(
                "NCCL uses GID {index} on every RoCE port ({}), and it is not a RoCE v2 GID on {} of them: {}. NCCL's queue pairs there fail to connect or go unrouted",
                s.origin.describe(),
                bad.len(),
                bad.join("; ")
            ),
        )
        .with(ev)
        .fix(undo(
            s,
            format!("Remove {} (NCCL then picks the RoCE v2 GID per port; `gdrdoctor nccl` says whether one index fits every port)", s.name),
            "Changes the GID jobs use on every port; jobs across nodes must agree on RoCE v2.",
            None,
        )),
    ]
}

/// The pin is a stacked netdev's GID on some port: the port's own index instead, when one fits
/// every port.
fn on_stacked(s: &Setting, index: i64, subject: String, survey: Survey) -> Vec<Finding> {
    let Survey {
        stacked,
        chosen,
        ev,
        ..
    } = survey;
    // One index that every port NCCL uses would get by the rule: the pin to write instead.
    let replacement = match (chosen.len(), chosen.iter().next()) {
        (1, Some(Some(i))) => Some(i.to_string()),
        _ => None,
    };
    let summary = match &replacement {
        Some(i) => format!(
            "Pin the port's own GID instead: {}={i} (or remove the pin; `gdrdoctor nccl` says whether one index fits every port)",
            s.name
        ),
        None => format!(
            "Remove {} (the ports' own GIDs are not at one index, so no pin fits every port; NCCL then picks per port, and `gdrdoctor nccl` says which index each port's own netdev has)",
            s.name
        ),
    };
    vec![
        Finding::warn(
            GID_INDEX_STACKED,
            subject,
            format!(
                "NCCL uses GID {index} on every RoCE port ({}); on {} of them it belongs to a netdev stacked on the port's own, whose address differs from node to node, so jobs across nodes may not agree on it: {}",
                s.origin.describe(),
                stacked.len(),
                stacked
                    .iter()
                    .map(|(m, _)| m.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
        .with(ev)
        .fix(undo(
            s,
            summary,
            "Changes the GID jobs use on every port; jobs across nodes must agree on RoCE v2.",
            replacement.as_deref(),
        )),
    ]
}
