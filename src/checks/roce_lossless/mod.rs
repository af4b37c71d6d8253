//! `roce-lossless`: the traffic NCCL puts on each RoCE port it will use lands on a lossless
//! priority. The chain, link by link: the traffic class NCCL sets (`NCCL_IB_TC`, or MLNX_OFED's
//! verbs-wide override) -> DSCP (TC >> 2) -> the port's trust (DSCP or PCP) -> the priority
//! (the DSCP APP table, or the firmware's DSCP >> 3) -> PFC on that priority, 802.3x pause off,
//! the priority's buffer its own, ECN on it where MLNX_OFED shows it. A break anywhere is one
//! finding naming every link with its value and source.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::nccl::Setting;
use crate::inventory::ofed_qos::DscpMap;
use crate::inventory::{Inventory, Port, RdmaDevice};
use crate::model::Action;
use crate::model::health::Sample;
use crate::model::qos::{NetdevQos, Qos};
use crate::model::{Code, Evidence, Fact, Finding, Fix, FixClass, ReadError, Status};
use crate::parse::dcbnl::{Dcb, dcbx, selector};

mod fix;
mod judge;
use judge::*;

pub struct RoceLossless;

const OK: Code = Code {
    id: "roce-lossless-ok",
    summary: "NCCL's RoCE traffic lands on a priority with PFC on, global pause off",
};
const PFC_OFF: Code = Code {
    id: "roce-pfc-off",
    summary: "the priority NCCL's RoCE traffic lands on has no PFC: a lossy queue",
};
const TRUST_PCP: Code = Code {
    id: "roce-trust-pcp",
    summary: "the port trusts PCP and RoCE goes untagged: NCCL's traffic lands on priority 0 whatever NCCL_IB_TC says",
};
const TCLASS_OVERRIDE: Code = Code {
    id: "roce-tclass-override",
    summary: "MLNX_OFED's verbs-wide traffic class differs from NCCL_IB_TC: NCCL's QPs carry the override, GPU-initiated (DevX/DOCA) ones do not",
};
const GLOBAL_PAUSE: Code = Code {
    id: "roce-global-pause",
    summary: "802.3x global pause is on beside PFC: the link pauses every priority",
};
const BUFFER_SHARED: Code = Code {
    id: "roce-buffer-shared",
    summary: "the lossless priority's receive buffer is shared with a lossy priority",
};
const PRIORITY_SHARED: Code = Code {
    id: "roce-priority-shared",
    summary: "NCCL's lossless priority is the one untagged, DSCP 0 traffic (TCP, the node's own) lands on: PFC pauses it all",
};
const ECN_OFF: Code = Code {
    id: "roce-ecn-off",
    summary: "ECN (DCQCN) is off on the lossless priority (MLNX_OFED's ecn files)",
};
const FIFO_TC_LOSSY: Code = Code {
    id: "roce-fifo-tc-lossy",
    summary: "NCCL_IB_FIFO_TC puts NCCL's control messages on a priority without PFC",
};
const CNP_SHARED: Code = Code {
    id: "roce-cnp-shared",
    summary: "CNPs (MLNX_OFED's cnp_dscp / cnp_802p_prio) ride NCCL's own priority instead of one of their own",
};
const PAUSE_STORM: Code = Code {
    id: "roce-pause-storm",
    summary: "pause storms (fail) or pauses on a priority without PFC (warn) grew in the sample window or since the last run; one reading is history",
};
const QOS_UNKNOWN: Code = Code {
    id: "roce-qos-unknown",
    summary: "the port's DCB settings cannot be read (the driver has no DCB interface, or the query failed)",
};
const QOS_NOT_READ: Code = Code {
    id: "roce-qos-not-read",
    summary: "the DCB and ethtool answers were not read (a capture made before gdrdoctor recorded them)",
};
const NOT_APPLICABLE: Code = Code {
    id: "roce-qos-not-applicable",
    summary: "an InfiniBand port: lossless by credit-based flow control, no PFC or DSCP",
};
const NO_ROCE: Code = Code {
    id: "roce-no-port",
    summary: "no RoCE port NCCL will use",
};

const CODES: &[Code] = &[
    OK,
    PFC_OFF,
    TRUST_PCP,
    TCLASS_OVERRIDE,
    GLOBAL_PAUSE,
    BUFFER_SHARED,
    PRIORITY_SHARED,
    ECN_OFF,
    FIFO_TC_LOSSY,
    CNP_SHARED,
    PAUSE_STORM,
    QOS_UNKNOWN,
    QOS_NOT_READ,
    NOT_APPLICABLE,
    NO_ROCE,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(OK, Action::None),
    Rule::new(PFC_OFF, Action::FixInPlace),
    Rule::new(TRUST_PCP, Action::FixInPlace),
    Rule::new(TCLASS_OVERRIDE, Action::FixInPlace),
    Rule::new(GLOBAL_PAUSE, Action::FixInPlace),
    Rule::new(BUFFER_SHARED, Action::FixInPlace),
    Rule::new(PRIORITY_SHARED, Action::FixInPlace),
    Rule::new(ECN_OFF, Action::FixInPlace),
    Rule::new(FIFO_TC_LOSSY, Action::FixInPlace),
    Rule::new(CNP_SHARED, Action::FixInPlace),
    Rule::new(PAUSE_STORM, Action::ReplacePart),
    Rule::new(QOS_UNKNOWN, Action::None),
    Rule::new(QOS_NOT_READ, Action::None),
    Rule::new(NOT_APPLICABLE, Action::None),
    Rule::new(NO_ROCE, Action::None),
];

const META: Meta = Meta {
    id: "roce-lossless",
    title: "RoCE lossless chain: NCCL's traffic class lands on a priority with PFC",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/roce-lossless/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for RoceLossless {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let carrying = crate::nccl::effective::carrying(inv);
        let mut out = Vec::new();
        for &i in &carrying {
            let dev = &inv.rdma[i];
            for port in dev.ports.iter().filter(|p| p.is_active()) {
                if port.is_infiniband() {
                    out.push(
                        Finding::skip(
                            NOT_APPLICABLE,
                            port.subject(&dev.name),
                            "InfiniBand: the fabric is lossless by credit-based flow control; PFC, DSCP and NCCL_IB_TC do not apply (NCCL_IB_SL picks the service level)",
                        )
                        .evidence(port.link_layer.path.clone(), port.link_layer.shown()),
                    );
                } else if port.is_ethernet() {
                    out.extend(judge_port(
                        inv,
                        &cx.runs.qos,
                        cx.runs.sample.as_ref(),
                        dev,
                        port,
                    ));
                }
            }
        }
        if out.is_empty() {
            out.push(
                Finding::skip(
                    NO_ROCE,
                    "node",
                    "no ACTIVE RoCE port that NCCL will use (see rdma-link)",
                )
                .evidence(
                    crate::inventory::rdma::CLASS_INFINIBAND,
                    format!("{} RDMA devices carry NCCL's traffic", carrying.len()),
                )
                .prerequisites(&["rdma-link"]),
            );
        }
        out
    }
}

/// What NCCL's traffic class is on this port, and where it comes from.
struct TrafficClass {
    /// What NCCL sets (`NCCL_IB_TC`, default 0).
    nccl: u8,
    nccl_from: String,
    /// MLNX_OFED's verbs-wide override, when set.
    ofed: Option<u8>,
    ofed_path: String,
}

impl TrafficClass {
    /// What the kernel puts on NCCL's packets: the override rewrites the QPs the kernel creates
    /// (NCCL's verbs QPs among them).
    fn effective(&self) -> u8 {
        self.ofed.unwrap_or(self.nccl)
    }

    fn shown(&self) -> String {
        match self.ofed {
            Some(o) if o != self.nccl => format!(
                "traffic class {o} (MLNX_OFED's override {}, over NCCL_IB_TC={} from {})",
                self.ofed_path, self.nccl, self.nccl_from
            ),
            Some(o) => format!(
                "NCCL_IB_TC={o} ({}; MLNX_OFED's override the same)",
                self.nccl_from
            ),
            None => format!("NCCL_IB_TC={} ({})", self.nccl, self.nccl_from),
        }
    }
}

/// An 8-bit setting (`NCCL_IB_TC`, `NCCL_IB_FIFO_TC`, `NCCL_IB_SL`) as NCCL reads it
/// ([`crate::nccl::transport::read`]) and stores it (a `uint8_t`: 256 is 0); `None` when unset
/// or left at NCCL's default. nccl-config judges the values out of range.
fn nccl_u8<'a>(inv: &'a Inventory, name: &str) -> Option<(u8, &'a Setting)> {
    let s = inv.nccl.get(name)?;
    let r = crate::nccl::transport::read(s.value.trim(), crate::nccl::transport::UNSET);
    (!r.defaulted && r.value >= 0).then_some(((r.value & 0xff) as u8, s))
}

fn traffic_class(inv: &Inventory, dev: &RdmaDevice, port: &Port) -> TrafficClass {
    let (nccl, nccl_from) = match nccl_u8(inv, "NCCL_IB_TC") {
        Some((v, s)) => (v, s.origin.path()),
        None => (0, "NCCL's default".to_owned()),
    };
    let ofed = port
        .ofed_qos
        .tclass
        .as_ref()
        .and_then(|f| f.value().copied());
    TrafficClass {
        nccl,
        nccl_from,
        ofed,
        ofed_path: format!(
            "/sys/class/infiniband/{}/tc/{}/traffic_class",
            dev.name, port.num
        ),
    }
}

/// How the port classifies: DSCP or PCP, from what that was read, and MLNX_OFED's `qos/trust`
/// file when that is what decided.
fn trust<'a>(dcb: &Dcb, port: &'a Port) -> (bool, String, Option<&'a Fact<String>>) {
    if let Some(t) = &dcb.trust {
        let dscp = t.contains(&selector::DSCP);
        return (
            dscp,
            format!(
                "trust {} (dcbnl trust table)",
                if dscp { "dscp" } else { "pcp" }
            ),
            None,
        );
    }
    let dscp_entries = dcb
        .app
        .iter()
        .filter(|a| a.selector == selector::DSCP)
        .count();
    if dscp_entries > 0 {
        return (
            true,
            format!("trust dscp (APP table, {dscp_entries} DSCP entries)"),
            None,
        );
    }
    if let Some(f) = port.ofed_qos.trust.as_ref()
        && let Some(v) = f.value()
    {
        return (v == "dscp", format!("trust {v} ({})", f.path), Some(f));
    }
    (
        false,
        "trust pcp (no DSCP entry in the APP table: the driver's default)".into(),
        None,
    )
}

/// One RoCE port's chain, as far as it could be read: the traffic class, its DSCP, the trust
/// and the priority, with what each was read from.
struct Walk<'a> {
    subject: String,
    ifname: &'a str,
    port: &'a Port,
    answers: &'a NetdevQos,
    dcb: &'a Dcb,
    tc: TrafficClass,
    dscp: u8,
    dscp_trust: bool,
    trust_shown: String,
    /// Under PCP trust, the VLAN netdev NCCL's RoCE is tagged on (NCCL_IB_SL is its PCP).
    tagged: Option<String>,
    priority: u8,
    prio_shown: String,
    /// The files of the chain read beside dcbnl (MLNX_OFED's override, trust and DSCP map),
    /// where they decided a link of it.
    sources: Vec<Evidence>,
}

impl Walk<'_> {
    /// `NCCL_IB_TC=106 (/etc/nccl.conf) -> DSCP 26 -> trust dscp (...) -> priority 3 (...) -> PFC`.
    fn chain(&self, pfc: &str) -> String {
        format!(
            "{} -> DSCP {} -> {} -> {} -> {pfc}",
            self.tc.shown(),
            self.dscp,
            self.trust_shown,
            self.prio_shown
        )
    }

    fn evidence(&self, what: &str, value: String) -> Evidence {
        Evidence {
            path: format!("dcbnl {}", self.ifname),
            value: format!("{what}: {value}"),
        }
    }
}

fn judge_port(
    inv: &Inventory,
    qos: &Qos,
    sample: Option<&Sample>,
    dev: &RdmaDevice,
    port: &Port,
) -> Vec<Finding> {
    let w = match walk(inv, qos, dev, port) {
        Ok(w) => w,
        Err(f) => return vec![f],
    };
    let mut out: Vec<Finding> = tclass_override(inv, &w).into_iter().collect();
    let Some(pfc) = w.dcb.pfc.as_ref() else {
        out.push(
            Finding::unknown(
                QOS_UNKNOWN,
                w.subject.clone(),
                w.chain("PFC not reported by the driver"),
            )
            .evidence(
                format!("dcbnl {}", w.ifname),
                "no DCB_ATTR_IEEE_PFC in the reply",
            ),
        );
        return out;
    };
    if let Some(f) = pfc_broken(inv, &w, pfc) {
        out.push(f);
        return out;
    }
    out.extend(global_pause(&w));
    out.extend(priority_shared(inv, &w, pfc));
    out.extend(buffer_shared(&w, pfc));
    out.extend(fifo_tc_lossy(inv, &w, pfc));
    out.extend(ecn_off(&w));
    out.extend(cnp_shared(&w));
    out.extend(pause_counters(&w, pfc, sample));
    // The chain holds unless something above failed: a warning beside it (an override that
    // differs, a shared buffer) does not break it.
    if out.iter().all(|f| f.status != Status::Fail) {
        out.push(chain_holds(&w, pfc));
    }
    out
}

/// The priority a DSCP is given: the APP table's entry, else older OFED's `qos/dscp2prio`
/// (whose mlx5 kept the map out of the APP table), else the firmware's DSCP >> 3.
/// Returns OFED's `qos/dscp2prio` too when that is what decided.
fn dscp_priority<'a>(
    dcb: &Dcb,
    port: &'a Port,
    dscp: u8,
) -> (u8, String, Option<&'a Fact<DscpMap>>) {
    // The kernel keeps APP priorities within 0-7 (dcbnl checks them); a capture's qos.json
    // can say anything: an entry past 7 is no priority, and is passed over (issue 41).
    if let Some(a) = dcb
        .app
        .iter()
        .find(|a| a.selector == selector::DSCP && a.protocol == u16::from(dscp) && a.priority < 8)
    {
        return (
            a.priority,
            format!(
                "priority {} (APP table: dscp {dscp} -> {})",
                a.priority, a.priority
            ),
            None,
        );
    }
    let ofed = port.ofed_qos.dscp2prio.as_ref();
    if let Some((f, &(_, p))) =
        ofed.and_then(|f| Some((f, f.value()?.iter().find(|(d, _)| *d == dscp)?)))
    {
        return (
            p,
            format!("priority {p} ({}: dscp {dscp} -> {p})", f.path),
            Some(f),
        );
    }
    (
        dscp >> 3,
        format!(
            "priority {} (no APP entry for DSCP {dscp}: the firmware's DSCP >> 3)",
            dscp >> 3
        ),
        None,
    )
}

/// Under PCP trust: untagged RoCE is priority 0; RoCE over a VLAN (the RoCE v2 GID NCCL uses
/// belongs to a netdev the kernel calls a VLAN, whatever its name) carries NCCL_IB_SL as its PCP
/// (mlx5 keeps its low 3 bits on RoCE). The VLAN's netdev is returned where there is one.
fn pcp_priority(inv: &Inventory, port: &Port) -> (u8, String, Option<String>) {
    let ndev = port
        .roce_v2_gid_choice()
        .and_then(|c| port.gids.iter().find(|g| g.index == c.index))
        .and_then(|g| g.ndev.value().cloned());
    let vlan = ndev
        .as_ref()
        .and_then(|n| port.stacked.iter().find(|s| &s.name == n));
    match vlan {
        Some(v) if v.is_vlan() => {
            let (sl, from) = match nccl_u8(inv, "NCCL_IB_SL") {
                Some((v, s)) => (v, format!("NCCL_IB_SL={v} ({})", s.origin.path())),
                None => (0, "NCCL_IB_SL unset: 0".to_owned()),
            };
            let p = sl & 7;
            (
                p,
                format!(
                    "priority {p} (PCP trust, tagged over {}, {}: {from})",
                    v.name,
                    v.shown()
                ),
                Some(v.name.clone()),
            )
        }
        Some(v) => (
            0,
            format!(
                "priority 0 (untagged RoCE under PCP trust: NCCL's GID is on {}, {})",
                v.name,
                v.shown()
            ),
            None,
        ),
        None => (
            0,
            "priority 0 (untagged RoCE under PCP trust)".to_owned(),
            None,
        ),
    }
}

/// Follows the chain as far as the priority; a port whose answers are missing is its finding.
/// (The finding is the result either way, once per port: boxing it would buy nothing.)
#[allow(clippy::result_large_err)]
fn walk<'a>(
    inv: &Inventory,
    qos: &'a Qos,
    dev: &RdmaDevice,
    port: &'a Port,
) -> Result<Walk<'a>, Finding> {
    let subject = port.subject(&dev.name);
    let Some(netdev) = port.netdev.as_ref() else {
        return Err(Finding::unknown(
            QOS_UNKNOWN,
            subject,
            "the RoCE port has no netdev: its DCB settings cannot be asked",
        )
        .evidence(port.dir.clone(), "<no netdev>"));
    };
    let ifname = netdev.name.as_str();
    let answers: &NetdevQos = match qos {
        Qos::NotRead(why) => {
            return Err(
                Finding::skip(QOS_NOT_READ, subject, format!("not read: {why}"))
                    .evidence(crate::model::qos::RECORDED_QOS, "<absent>"),
            );
        }
        _ => match qos.netdev(ifname) {
            Some(a) => a,
            None => {
                return Err(Finding::unknown(
                    QOS_UNKNOWN,
                    subject,
                    format!("{ifname}: not asked (not among the answers)"),
                )
                .evidence(format!("/sys/class/net/{ifname}"), "<not asked>"));
            }
        },
    };
    let tc = traffic_class(inv, dev, port);
    let dcb = match &answers.dcb {
        Ok(d) => d,
        Err(e) => {
            let why = if e.not_supported() {
                format!(
                    "{ifname}'s driver has no DCB interface ({e}): the lossless chain cannot be read, so it is not known to hold"
                )
            } else {
                format!("{ifname}: the DCB query failed: {e}")
            };
            return Err(
                Finding::unknown(QOS_UNKNOWN, subject, format!("{}: {why}", tc.shown()))
                    .evidence(format!("dcbnl {ifname}"), e.to_string()),
            );
        }
    };
    let dscp = tc.effective() >> 2;
    let (dscp_trust, trust_shown, trust_file) = trust(dcb, port);
    let (priority, prio_shown, map_file, tagged) = if dscp_trust {
        let (p, shown, f) = dscp_priority(dcb, port, dscp);
        (p, shown, f, None)
    } else {
        let (p, shown, vlan) = pcp_priority(inv, port);
        (p, shown, None, vlan)
    };
    let ofed = &port.ofed_qos;
    let sources = [
        ofed.tclass.as_ref().map(Fact::evidence),
        trust_file.map(Fact::evidence),
        map_file.map(|f| Evidence {
            path: f.path.clone(),
            value: format!("dscp {dscp} -> priority {priority}"),
        }),
    ]
    .into_iter()
    .flatten()
    .collect();
    Ok(Walk {
        subject,
        ifname,
        port,
        answers,
        dcb,
        tc,
        dscp,
        dscp_trust,
        trust_shown,
        tagged,
        priority,
        prio_shown,
        sources,
    })
}

/// The chain holds: what it is, with the notes an operator needs.
fn chain_holds(w: &Walk, pfc: &crate::parse::dcbnl::Pfc) -> Finding {
    let pfc_ev = w.evidence("pfc_en", pfc.evidence());
    let mut notes = Vec::new();
    if w.dcb.dcbx.is_some_and(|d| d & dcbx::LLD_MANAGED != 0) {
        notes.push("DCBX in firmware/LLDP mode: the switch can change PFC after boot".to_owned());
    }
    let ofed = &w.port.ofed_qos;
    if ofed.ecn.is_empty() {
        notes.push("ECN not visible without MLNX_OFED".to_owned());
    }
    if let Some(f) = ofed.cc_cnp_dscp.as_ref().filter(|f| f.value().is_none()) {
        notes.push(match &f.raw {
            Err(ReadError::PermissionDenied { .. }) => {
                format!("the CNPs' priority not read: {} needs root", f.path)
            }
            _ => format!("the CNPs' priority not read: {}", f.shown()),
        });
    }
    let note = if notes.is_empty() {
        String::new()
    } else {
        format!("; {}", notes.join("; "))
    };
    Finding::pass(
        OK,
        w.subject.clone(),
        format!("{}{note}", w.chain(&format!("PFC on {}", w.priority))),
    )
    .with(w.sources.iter().cloned())
    .with([pfc_ev])
}

/// The QoS of the node's RoCE ports that NCCL will use, for comparing nodes of one model
/// (`fleet`): each distinct `trust dscp, PFC on 3` (or `no DCB`, `not read`), in port order;
/// `None` without a RoCE port.
pub fn node_summary(inv: &Inventory, qos: &Qos) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    for &i in &crate::nccl::effective::carrying(inv) {
        let dev = &inv.rdma[i];
        for port in dev
            .ports
            .iter()
            .filter(|p| p.is_active() && p.is_ethernet())
        {
            let what = match (qos, port.netdev.as_ref()) {
                (Qos::NotRead(_), _) => "not read".to_owned(),
                (_, None) => "no netdev".to_owned(),
                (_, Some(n)) => match qos.netdev(&n.name).map(|a| &a.dcb) {
                    Some(Ok(dcb)) => {
                        let (dscp, ..) = trust(dcb, port);
                        let pfc = match dcb.pfc.as_ref().map(|p| p.shown()) {
                            None => "PFC unknown".to_owned(),
                            Some(on) if on == "none" => "PFC off".to_owned(),
                            Some(on) => format!("PFC on {on}"),
                        };
                        format!("trust {}, {pfc}", if dscp { "dscp" } else { "pcp" })
                    }
                    Some(Err(_)) => "no DCB".to_owned(),
                    None => "not asked".to_owned(),
                },
            };
            if !seen.contains(&what) {
                seen.push(what);
            }
        }
    }
    (!seen.is_empty()).then(|| seen.join("; "))
}

fn on_off(v: Option<bool>) -> String {
    match v {
        Some(true) => "on".into(),
        Some(false) => "off".into(),
        None => "unknown".into(),
    }
}
