//! `rdma-gid`: every RoCE port has a RoCE v2 IPv4 GID (the `NCCL_IB_GID_INDEX` to use) and
//! every InfiniBand port a LID from a subnet manager.

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::Port;
use crate::inventory::rdma::{GidChoice, GidEntry};
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::rdma::{GidFamily, GidType};
use std::collections::BTreeMap;

pub struct RdmaGid;

const PORT_UNUSED: Code = Code {
    id: "rdma-gid-port-unused",
    summary: "the port is down and NCCL will not use it (see rdma-link): its GIDs are not judged",
};

const ROCE_V2_IPV4: Code = Code {
    id: "roce-v2-ipv4",
    summary: "the RoCE port has a RoCE v2 IPv4 GID; its index is what NCCL_IB_GID_INDEX names",
};

const EFA_ADDRESS: Code = Code {
    id: "efa-address",
    summary: "the EFA port's one GID slot holds the device's address; libfabric's efa provider addresses endpoints by it, no GID index applies",
};

const IB_LID_ASSIGNED: Code = Code {
    id: "ib-lid-assigned",
    summary: "the InfiniBand port has a LID and a subnet manager",
};

const ROCE_V1_ONLY: Code = Code {
    id: "roce-v1-only",
    summary: "the RoCE port has only RoCE v1 GIDs: not routable, and NCCL prefers v2",
};

const ROCE_NO_IPV4_GID: Code = Code {
    id: "roce-no-ipv4-gid",
    summary: "the RoCE port has RoCE v2 GIDs only for IPv6 addresses",
};

const ROCE_NO_IP_GID: Code = Code {
    id: "roce-no-ip-gid",
    summary: "the RoCE port has only link-local GIDs: its netdev has no IP address",
};

const ROCE_NO_GID: Code = Code {
    id: "roce-no-gid",
    summary: "the RoCE port's GID table is empty",
};

const ROCE_GID_INDEX_DIFFERS: Code = Code {
    id: "roce-gid-index-differs",
    summary: "the RoCE v2 IPv4 GID index differs between ports, so one NCCL_IB_GID_INDEX cannot fit all",
};

const IB_NO_LID: Code = Code {
    id: "ib-no-lid",
    summary: "the InfiniBand port has no LID (or no SM LID): no subnet manager configured it",
};

const UNREADABLE: Code = Code {
    id: "rdma-gid-unreadable",
    summary: "the port's link layer or GID table could not be read",
};

const NO_DEVICE: Code = Code {
    id: "rdma-gid-no-device",
    summary: "no RDMA device, so no GID table to judge",
};

const CODES: &[Code] = &[
    ROCE_V2_IPV4,
    IB_LID_ASSIGNED,
    EFA_ADDRESS,
    ROCE_V1_ONLY,
    ROCE_NO_IPV4_GID,
    ROCE_NO_IP_GID,
    ROCE_NO_GID,
    ROCE_GID_INDEX_DIFFERS,
    IB_NO_LID,
    UNREADABLE,
    NO_DEVICE,
    PORT_UNUSED,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(ROCE_V2_IPV4, Action::None),
    Rule::new(IB_LID_ASSIGNED, Action::None),
    Rule::new(EFA_ADDRESS, Action::None),
    Rule::new(ROCE_V1_ONLY, Action::FixInPlace),
    Rule::new(ROCE_NO_IPV4_GID, Action::FixInPlace),
    Rule::new(ROCE_NO_IP_GID, Action::FixInPlace),
    Rule::new(ROCE_NO_GID, Action::FixInPlace),
    Rule::new(ROCE_GID_INDEX_DIFFERS, Action::FixInPlace),
    Rule::new(IB_NO_LID, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(UNREADABLE, Action::None),
    Rule::new(NO_DEVICE, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(PORT_UNUSED, Action::None),
];

const META: Meta = Meta {
    id: "rdma-gid",
    title: "RoCE v2 GID index per port; InfiniBand LID and SM",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/rdma-gid/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for RdmaGid {
    fn meta(&self) -> &'static Meta {
        &META
    }

    /// `8 ports: RoCE v2 IPv4 GID at index 3 (NCCL_IB_GID_INDEX=3)`; InfiniBand ports counted
    /// apart.
    fn summary(&self, cx: &Context, passed: &[&Finding]) -> String {
        let ports = super::ports_of(cx.inv, passed);
        if ports.len() < 2 {
            return super::summarize(passed);
        }
        super::grouped(
            "port",
            ports
                .iter()
                .map(|(d, p)| match (p.is_infiniband(), p.roce_v2_gid_index()) {
                    _ if d.is_efa() => "EFA, the device address in its one GID slot".to_owned(),
                    (true, _) => "InfiniBand, LID assigned, subnet manager known".to_owned(),
                    (false, Some(i)) => {
                        format!("RoCE v2 IPv4 GID at index {i} (NCCL_IB_GID_INDEX={i})")
                    }
                    (false, None) => "passed".to_owned(),
                }),
        )
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        if inv.rdma.is_empty() {
            return vec![
                Finding::skip(NO_DEVICE, "node", "no RDMA device (see rdma-link)")
                    .evidence(crate::inventory::rdma::CLASS_INFINIBAND, "<empty>")
                    .prerequisites(&["rdma-link"]),
            ];
        }
        let mut out = Vec::new();
        // Port subject -> the RoCE v2 IPv4 index gdrdoctor would pick.
        let mut chosen: BTreeMap<String, (u32, Evidence)> = BTreeMap::new();
        for dev in &inv.rdma {
            if dev.ports.is_empty() {
                let why = dev
                    .problems
                    .first()
                    .map(|p| format!(": {}: {}", p.path, p.message))
                    .unwrap_or_default();
                out.push(
                    Finding::unknown(
                        UNREADABLE,
                        dev.name.clone(),
                        format!("{} shows no ports{why}", dev.name),
                    )
                    .evidence(format!("{}/ports", dev.class_path()), "<no ports>"),
                );
            }
            for port in &dev.ports {
                let subject = port.subject(&dev.name);
                if let Some((_, why, _)) = super::rdma_link::not_used(cx, dev, port) {
                    // Its GIDs matter to nobody while it is down and NCCL leaves it out.
                    out.push(
                        Finding::skip(
                            PORT_UNUSED,
                            subject,
                            format!("not used: {why} (see rdma-link)"),
                        )
                        .with([port.state.evidence()])
                        .prerequisites(&["rdma-link"]),
                    );
                } else if dev.is_efa() {
                    out.push(judge_efa(port, &subject));
                } else if port.is_ethernet() {
                    let (finding, index) = judge_roce(port, &subject);
                    if let Some(i) = index {
                        chosen.insert(subject, i);
                    }
                    out.push(finding);
                } else if port.is_infiniband() {
                    out.push(judge_ib(port, &subject));
                } else {
                    out.push(
                        Finding::unknown(
                            UNREADABLE,
                            subject,
                            format!(
                                "unknown link layer: {}",
                                port.link_layer.problem().unwrap_or_default()
                            ),
                        )
                        .with([port.link_layer.evidence()]),
                    );
                }
            }
        }
        let distinct: std::collections::BTreeSet<u32> = chosen.values().map(|(i, _)| *i).collect();
        if distinct.len() > 1 {
            let mut by_index: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
            for (subject, (i, _)) in &chosen {
                by_index.entry(*i).or_default().push(subject);
            }
            let summary: Vec<String> = by_index
                .iter()
                .map(|(i, ports)| format!("index {i} on {}", ports.join(", ")))
                .collect();
            out.push(
                Finding::warn(
                    ROCE_GID_INDEX_DIFFERS,
                    "RoCE ports",
                    format!(
                        "the RoCE v2 IPv4 GID sits at different indices ({}): a single NCCL_IB_GID_INDEX is wrong for some ports. Leave it unset (NCCL then picks the RoCE v2 IPv4 GID per port) or make the tables match",
                        summary.join("; ")
                    ),
                )
                .with(chosen.values().map(|(_, e)| e.clone()))
                .fix(
                    Fix::new("Do not pin NCCL_IB_GID_INDEX on this node; let NCCL choose per port (NCCL_IB_ROCE_VERSION_NUM=2, NCCL_IB_ADDR_FAMILY=AF_INET are the defaults)", "Only changes how jobs pick GIDs.")
                        .manual("grep -rs NCCL_IB_GID_INDEX /etc/nccl.conf ~/.nccl.conf /etc/environment"),
                ),
            );
        }
        out
    }
}

fn type_of(g: &GidEntry) -> Option<GidType> {
    g.gid_type.value().copied()
}

fn describe(g: &GidEntry) -> String {
    let ty = g.gid_type.value().map(|t| match t {
        GidType::RoceV2 => "RoCE v2",
        GidType::IbRoceV1 => "RoCE v1",
    });
    let ndev = g
        .ndev
        .value()
        .map(|n| format!(" on {n}"))
        .unwrap_or_default();
    format!(
        "index {} ({}, {}{ndev})",
        g.index,
        ty.unwrap_or("type unknown"),
        g.gid.address()
    )
}

fn gid_evidence(port: &Port, g: &GidEntry) -> Evidence {
    Evidence {
        path: g.path(&port.dir),
        value: format!("{} ({})", g.gid, g.gid_type.shown()),
    }
}

/// An EFA port: one GID slot (efa_query_port: gid_tbl_len = 1), holding the device's address
/// (efa_query_gid copies dev_attr.addr), with no type and no netdev (drivers/infiniband/hw/
/// efa/efa_verbs.c). Nothing for NCCL_IB_GID_INDEX: NCCL reaches EFA through aws-ofi-nccl, and
/// libfabric's efa provider takes the address as the endpoint's name.
fn judge_efa(port: &Port, subject: &str) -> Finding {
    let evidence = |g: &GidEntry| Evidence {
        path: g.path(&port.dir),
        value: g.gid.to_string(),
    };
    match port.gids.first() {
        Some(g) => Finding::pass(
            EFA_ADDRESS,
            subject.to_owned(),
            format!(
                "EFA: GID slot {} of {} holds the device address {}; libfabric's efa provider addresses endpoints by it (no NCCL_IB_GID_INDEX applies)",
                g.index, port.gid_slots, g.gid
            ),
        )
        .with([evidence(g)]),
        None => Finding::unknown(
            UNREADABLE,
            subject.to_owned(),
            format!(
                "EFA port with no address in its GID table ({} slots, all zero or unreadable): the device may not have finished initialising",
                port.gid_slots
            ),
        )
        .evidence(format!("{}/gids", port.dir), "<no non-zero GID>"),
    }
}

fn judge_roce(port: &Port, subject: &str) -> (Finding, Option<(u32, Evidence)>) {
    if port.gids.is_empty() {
        return (empty_table(port, subject), None);
    }
    let table_evidence: Vec<Evidence> = port.gids.iter().map(|g| gid_evidence(port, g)).collect();
    let v2: Vec<&GidEntry> = port
        .gids
        .iter()
        .filter(|g| type_of(g) == Some(GidType::RoceV2))
        .collect();
    let v2_ipv4: Vec<&&GidEntry> = v2
        .iter()
        .filter(|g| g.gid.family() == GidFamily::Ipv4)
        .collect();
    // The choice is the inventory's, so that `gdrdoctor nccl` and the fleet agree with it.
    if let Some(choice) = port.roce_v2_gid_choice().filter(|_| !v2_ipv4.is_empty()) {
        return chosen(port, subject, &choice, &v2_ipv4, table_evidence);
    }
    (lacking(port, subject, &v2, table_evidence), None)
}

/// A RoCE port whose GID table has no entry: all zero, or unreadable.
fn empty_table(port: &Port, subject: &str) -> Finding {
    let why = port
        .problems
        .first()
        .map(|p| format!(" ({}: {})", p.path, p.message))
        .unwrap_or_default();
    if port.problems.is_empty() {
        Finding::fail(ROCE_NO_GID, subject.to_owned(), format!("the GID table has no entries ({} slots, all zero): RoCE cannot address this port", port.gid_slots))
            .evidence(format!("{}/gids", port.dir), format!("{} slots, all zero", port.gid_slots))
            .fix(
                Fix::new("Bring the port's netdev up and give it an IP address; the kernel fills the GID table from it", "Bringing an interface up and addressing it changes this host's network configuration.")
                    .manual(format!("ip -br addr show {}", port.netdev.as_ref().map(|n| n.name.as_str()).unwrap_or(""))),
            )
    } else {
        Finding::unknown(
            UNREADABLE,
            subject.to_owned(),
            format!("cannot read the GID table{why}"),
        )
        .evidence(format!("{}/gids", port.dir), "<unreadable>")
    }
}

/// The RoCE v2 IPv4 GID the inventory chose for the port (the one NCCL takes), and the other
/// candidates.
fn chosen(
    port: &Port,
    subject: &str,
    choice: &GidChoice,
    v2_ipv4: &[&&GidEntry],
    table_evidence: Vec<Evidence>,
) -> (Finding, Option<(u32, Evidence)>) {
    let Some(best) = v2_ipv4.iter().find(|g| g.index == choice.index) else {
        return (
            Finding::unknown(
                UNREADABLE,
                subject.to_owned(),
                "the chosen GID is not in the table",
            )
            .with(table_evidence),
            None,
        );
    };
    let others = if choice.others.is_empty() {
        String::new()
    } else {
        let also: Vec<String> = v2_ipv4
            .iter()
            .filter(|g| g.index != best.index)
            .map(|g| describe(g))
            .collect();
        match &choice.why {
            Some(why) => format!(
                " ({} candidates; also {}; index {} because {why})",
                choice.others.len() + 1,
                also.join(", "),
                best.index
            ),
            None => format!(" (also {})", also.join(", ")),
        }
    };
    let finding = Finding::pass(
        ROCE_V2_IPV4,
        subject.to_owned(),
        format!(
            "RoCE v2 IPv4 GID at {}: NCCL_IB_GID_INDEX={}{others}",
            describe(best),
            best.index
        ),
    )
    .with(table_evidence);
    (finding, Some((best.index, gid_evidence(port, best))))
}

/// A RoCE port without a RoCE v2 IPv4 GID: what its table has instead (IPv6 only, RoCE v1
/// only, link-local only), or unknown where it could not be read whole.
fn lacking(port: &Port, subject: &str, v2: &[&GidEntry], table_evidence: Vec<Evidence>) -> Finding {
    // Every verdict here is about what the table lacks; a table that could not be read whole
    // cannot be said to lack anything.
    if let Some(p) = port.problems.first() {
        let readable: Vec<String> = port.gids.iter().map(describe).collect();
        return             Finding::unknown(
                UNREADABLE,
                subject.to_owned(),
                format!(
                    "no RoCE v2 IPv4 GID among the readable entries ({}), and the table is not fully readable: {}: {}",
                    if readable.is_empty() { "none".to_owned() } else { readable.join("; ") },
                    p.path,
                    p.message
                ),
            )
            .with(table_evidence)
            .evidence(p.path.clone(), format!("<{}>", p.message));
    }
    let v2_global6: Vec<&&GidEntry> = v2
        .iter()
        .filter(|g| g.gid.family() == GidFamily::Ipv6)
        .collect();
    if let Some(best) = v2_global6.first() {
        // What NCCL takes on its own with NCCL_IB_ADDR_FAMILY=AF_INET6: the first RoCE v2 IPv6
        // GID its validGid() passes, and that lets through link-local GIDs outside fe80::/64
        // (parse::rdma::Gid::nccl_valid). Where that is not the routable one, only the pin says
        // which GID to use.
        let nccl_pick = v2
            .iter()
            .find(|g| g.gid.ipv4().is_none() && g.gid.nccl_valid());
        let how = match nccl_pick {
            Some(p) if p.index != best.index => format!(
                "NCCL_IB_GID_INDEX={} here (NCCL_IB_ADDR_FAMILY=AF_INET6 alone would make NCCL take {}: link-local (fe80::/10, RFC 4291), though NCCL's own test, fe80::/64, lets it through)",
                best.index,
                describe(p)
            ),
            _ => format!(
                "NCCL_IB_ADDR_FAMILY=AF_INET6 (or NCCL_IB_GID_INDEX={}) here",
                best.index
            ),
        };
        return             Finding::warn(
                ROCE_NO_IPV4_GID,
                subject.to_owned(),
                format!("no RoCE v2 IPv4 GID; the RoCE v2 GIDs are IPv6: {}. NCCL needs {how}", describe(best)),
            )
            .with(table_evidence)
            .fix(Fix::new("Give the netdev an IPv4 address, or run NCCL with NCCL_IB_ADDR_FAMILY=AF_INET6 on this fabric", "Changes addressing or job environment only.").manual("ip -br addr"));
    }
    if v2.is_empty()
        && port
            .gids
            .iter()
            .any(|g| type_of(g) == Some(GidType::IbRoceV1))
    {
        let listed: Vec<String> = port.gids.iter().map(describe).collect();
        let device = crate::checks::sh(subject.split_whitespace().next().unwrap_or(""));
        return             Finding::fail(
                ROCE_V1_ONLY,
                subject.to_owned(),
                format!("only RoCE v1 GIDs ({}): RoCE v1 is not IP-routable and NCCL looks for v2; RoCE v2 is disabled in the NIC or its driver", listed.join("; ")),
            )
            .with(table_evidence)
            .fix(
                Fix::new("Enable RoCE v2 in the NIC (firmware or driver setting), then reload the driver", "Firmware changes on the NIC need a reset or reboot.")
                    .manual(format!("mlxconfig -d {device} query | grep -i roce   # ConnectX: update the firmware if RoCE v2 is missing"))
                    .manual(format!("cma_roce_mode -d {device} -p {}   # rdma_cm's default RoCE mode (show)", port.num)),
            );
    }
    if port
        .gids
        .iter()
        .all(|g| g.gid.family() == GidFamily::LinkLocal)
    {
        let netdev = port
            .netdev
            .as_ref()
            .map(|n| n.name.clone())
            .unwrap_or_else(|| "its netdev".into());
        return             Finding::fail(ROCE_NO_IP_GID, subject.to_owned(), format!("only link-local GIDs: {netdev} has no IP address, so there is no routable RoCE v2 GID"))
                .with(table_evidence)
                .fix(Fix::new(format!("Give {netdev} its IP address (netplan / NetworkManager / ifcfg)"), "Changes this host's network configuration.").manual(format!("ip -br addr show {netdev}")));
    }
    Finding::unknown(
        UNREADABLE,
        subject.to_owned(),
        format!(
            "GID entries whose types could not be read: {}",
            port.gids
                .iter()
                .map(describe)
                .collect::<Vec<_>>()
                .join("; ")
        ),
    )
    .with(table_evidence)
}

fn judge_ib(port: &Port, subject: &str) -> Finding {
    let evidence = [port.lid.evidence(), port.sm_lid.evidence()];
    match (port.lid.value(), port.sm_lid.value()) {
        (Some(&lid), Some(&sm)) if lid != 0 && sm != 0 => {
            Finding::pass(IB_LID_ASSIGNED, subject.to_owned(), format!("LID {lid:#x}, subnet manager at LID {sm:#x}")).with(evidence)
        }
        (Some(&lid), Some(&sm)) => Finding::fail(
            IB_NO_LID,
            subject.to_owned(),
            format!("LID {lid:#x}, SM LID {sm:#x}: no subnet manager has configured this port, so no InfiniBand traffic can reach it"),
        )
        .with(evidence)
        .fix(
            Fix::new("Make sure a subnet manager runs on the fabric (on a managed switch, or opensm on one host)", "Starting opensm on a fabric that already has an SM is harmless; it joins the election.")
                .manual("sminfo")
                .manual("systemctl enable --now opensm   # only if this fabric has no SM"),
        ),
        _ => Finding::unknown(UNREADABLE, subject.to_owned(), format!("cannot read the LID: {}", port.lid.problem().or_else(|| port.sm_lid.problem()).unwrap_or_default())).with(evidence),
    }
}
