//! `rdma-link`: RDMA devices exist and every port is up, at its rate, with a RoCE MTU that fits.

use super::Rule;
use super::{Check, Context, Meta, sh};
use crate::inventory::rdma::CLASS_INFINIBAND;
use crate::inventory::{Inventory, Port, RdmaDevice};
use crate::model::Action;
use crate::model::{Code, Evidence, Finding, Fix};
use crate::nccl::params::HcaList;
use crate::parse::rdma::{self, PHYS_LINK_UP, roce_active_mtu};

pub struct RdmaLink;

const PORT_ACTIVE: Code = Code {
    id: "rdma-port-active",
    summary: "the port is ACTIVE and LinkUp",
};

const NO_DEVICE: Code = Code {
    id: "rdma-no-device",
    summary: "there is no RDMA device at all",
};

const CLASS_UNREADABLE: Code = Code {
    id: "rdma-class-unreadable",
    summary: "/sys/class/infiniband could not be read",
};

const COUNT_LOW: Code = Code {
    id: "rdma-count-low",
    summary: "fewer RDMA devices than the config expects",
};

const NIC_NOT_RESPONDING: Code = Code {
    id: "rdma-nic-not-responding",
    summary: "the NIC's config space reads all ones (vendor ID 0xffff): it does not answer on the PCIe bus",
};

const NO_PORTS: Code = Code {
    id: "rdma-no-ports",
    summary: "an RDMA device shows no ports",
};

const PORT_DOWN: Code = Code {
    id: "rdma-port-down",
    summary: "the port is not ACTIVE (DOWN, ARMED, or its physical link is not up)",
};

const PORT_UNUSED_DOWN: Code = Code {
    id: "rdma-port-unused-down",
    summary: "the port is not ACTIVE, and NCCL_IB_HCA leaves it out: NCCL will not use it",
};

const RAIL_DOWN: Code = Code {
    id: "rdma-rail-down",
    summary: "a GPU's nearest NIC carries no traffic while a farther one does: NCCL runs the GPU over the farther NIC",
};

const PORT_DISABLED: Code = Code {
    id: "rdma-port-disabled",
    summary: "the port is Disabled (down on purpose) beside an ACTIVE port of the same NIC, and no NCCL_IB_HCA names it",
};

const PORT_INIT: Code = Code {
    id: "rdma-port-init",
    summary: "an InfiniBand port is stuck in INIT: the link is up but no subnet manager configured it",
};

const PORT_UNREADABLE: Code = Code {
    id: "rdma-port-unreadable",
    summary: "the port's state could not be read or parsed",
};

const RATE_LOW: Code = Code {
    id: "rdma-rate-low",
    summary: "the port runs below the rate the config expects",
};

const ROCE_MTU_SMALL: Code = Code {
    id: "roce-mtu-small",
    summary: "the RoCE netdev MTU caps the RDMA MTU below the threshold (4096 by default)",
};

const ROCE_NETDEV_UNKNOWN: Code = Code {
    id: "roce-netdev-unknown",
    summary: "the netdev under a RoCE port, or its MTU, could not be found",
};

const CODES: &[Code] = &[
    PORT_ACTIVE,
    NO_DEVICE,
    CLASS_UNREADABLE,
    COUNT_LOW,
    NIC_NOT_RESPONDING,
    NO_PORTS,
    PORT_DOWN,
    PORT_UNUSED_DOWN,
    PORT_DISABLED,
    RAIL_DOWN,
    PORT_INIT,
    PORT_UNREADABLE,
    RATE_LOW,
    ROCE_MTU_SMALL,
    ROCE_NETDEV_UNKNOWN,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(PORT_ACTIVE, Action::None),
    Rule::new(NO_DEVICE, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(CLASS_UNREADABLE, Action::None),
    Rule::new(COUNT_LOW, Action::ReplacePart),
    Rule::new(NIC_NOT_RESPONDING, Action::Reboot).in_vm(Action::Provider),
    Rule::new(NO_PORTS, Action::None),
    Rule::new(PORT_DOWN, Action::ReplacePart),
    Rule::new(PORT_UNUSED_DOWN, Action::None),
    Rule::new(PORT_DISABLED, Action::None),
    Rule::new(RAIL_DOWN, Action::ReplacePart),
    Rule::new(PORT_INIT, Action::FixInPlace).in_vm(Action::Provider),
    Rule::new(PORT_UNREADABLE, Action::None),
    Rule::new(RATE_LOW, Action::ReplacePart),
    Rule::new(ROCE_MTU_SMALL, Action::FixInPlace),
    Rule::new(ROCE_NETDEV_UNKNOWN, Action::None),
];

const META: Meta = Meta {
    id: "rdma-link",
    title: "RDMA devices present, ports ACTIVE, RoCE MTU",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/rdma-link/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for RdmaLink {
    fn meta(&self) -> &'static Meta {
        &META
    }

    /// `8 ports: ACTIVE, LinkUp, 400 Gb/s, RoCE`: what the passing ports share.
    fn summary(&self, cx: &Context, passed: &[&Finding]) -> String {
        let ports = super::ports_of(cx.inv, passed);
        if ports.len() < 2 {
            return super::summarize(passed);
        }
        super::grouped(
            "port",
            ports.iter().map(|(d, p)| {
                let layer = match (d.fabric(), p.is_infiniband()) {
                    (crate::inventory::rdma::Fabric::Efa, _) => "EFA",
                    (_, true) => "InfiniBand",
                    _ => "RoCE",
                };
                let rate = p
                    .rate
                    .value()
                    .map(|r| format!("{r} Gb/s"))
                    .unwrap_or_else(|| p.rate.shown());
                format!("ACTIVE, LinkUp, {rate}, {layer}")
            }),
        )
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        let mut out = Vec::new();
        if let Err(p) = &inv.rdma_class {
            return vec![
                Finding::unknown(
                    CLASS_UNREADABLE,
                    "node",
                    format!("cannot list RDMA devices: {}", p.message),
                )
                .evidence(p.path.clone(), format!("<{}>", p.message)),
            ];
        }
        if inv.rdma.is_empty() {
            out.push(no_device(inv));
        }
        if let Some(want) = cx.config.expect.rdma_devices {
            if inv.rdma.len() < want && !inv.rdma.is_empty() {
                let names: Vec<&str> = inv.rdma.iter().map(|d| d.name.as_str()).collect();
                out.push(
                    Finding::fail(COUNT_LOW, "node", format!("{} RDMA devices found, the config expects {want}", inv.rdma.len()))
                        .evidence(CLASS_INFINIBAND, names.join(" "))
                        .fix(Fix::new("Find the missing RDMA device: a NIC without its RDMA driver, or off the bus", "Read-only commands.").manual("rdma link show; lspci -nn -D | grep -Ei 'mellanox|infiniband|ethernet'")),
                );
            }
        }
        for dev in &inv.rdma {
            // A NIC that does not answer config reads carries nothing, whatever its port files
            // say: the driver keeps the last state it saw. Its ports are not judged.
            let dead = dev
                .pci
                .and_then(|b| Some((b, inv.function(b)?.not_responding()?)));
            if let Some((bdf, evidence)) = dead {
                out.push(
                    Finding::fail(
                        NIC_NOT_RESPONDING,
                        dev.name.clone(),
                        format!("{} ({bdf}): its config space reads all ones (vendor ID 0xffff) while sysfs still lists it: the NIC does not answer on the PCIe bus (fell off the bus, or held in reset), so its ports carry no RDMA traffic whatever their state files say", dev.name),
                    )
                    .with(evidence)
                    .fix(super::not_responding_fix(bdf, "NIC")),
                );
                continue;
            }
            if dev.ports.is_empty() {
                let why = dev
                    .problems
                    .first()
                    .map(|p| format!(": {}", p.message))
                    .unwrap_or_default();
                out.push(
                    Finding::unknown(
                        NO_PORTS,
                        dev.name.clone(),
                        format!("{} shows no ports{why}", dev.name),
                    )
                    .evidence(format!("{}/ports", dev.class_path()), "<no ports>"),
                );
            }
            for port in &dev.ports {
                out.extend(judge_port(cx, dev, port));
            }
        }
        out.extend(rails_down(cx));
        out
    }
}

/// A GPU whose nearest NICs (its rail) are all down while a farther NIC is up: NCCL runs that
/// GPU over the farther one, across more of the PCIe tree (and, past PHB, without GPUDirect
/// RDMA). The down ports fail on their own; this names what it costs the GPU.
fn rails_down(cx: &Context) -> Vec<Finding> {
    let inv = cx.inv;
    let up = crate::nccl::effective::carrying(inv);
    // The NICs NCCL's network could use: a down one among them is a rail lost; a NIC it cannot
    // open at all (EFA without aws-ofi-nccl) is nccl-config's to say.
    let reachable = crate::nccl::effective::reachable(inv);
    if up.is_empty() || up.len() == reachable.len() {
        return Vec::new();
    }
    let instead = crate::placement::nearest_among(inv, &up);
    crate::placement::nearest_among(inv, &reachable)
        .into_iter()
        .zip(instead)
        .filter_map(|((gpu, near), (_, other))| {
            let (near, other) = (near?, other?);
            if near.nics.iter().any(|(i, _)| up.contains(i)) {
                return None;
            }
            let names = |n: &crate::placement::Nearest| {
                n.nics
                    .iter()
                    .map(|(i, _)| inv.rdma[*i].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let evidence = near.nics.iter().flat_map(|(i, _)| {
                inv.rdma[*i].ports.iter().map(|p| p.state.evidence())
            });
            Some(
                Finding::warn(
                    RAIL_DOWN,
                    format!("GPU {gpu}"),
                    format!(
                        "its nearest NIC ({}, {}) carries no traffic: NCCL runs this GPU over {} at {} instead",
                        names(&near),
                        near.level.as_str(),
                        names(&other),
                        other.level.as_str()
                    ),
                )
                .with(evidence)
                .fix(Fix::new(
                    format!("Bring {}'s port up (see its rdma-port-down finding)", names(&near)),
                    "Cable and switch work needs a person.",
                )
                .manual(format!("rdma link show {}   # its ports' state", names(&near)))),
            )
        })
        .collect()
}

/// The RDMA driver module for a NIC's PCI driver.
fn rdma_module(pci_driver: &str) -> Option<&'static str> {
    Some(match pci_driver {
        "mlx5_core" => "mlx5_ib",
        "mlx4_core" | "mlx4_en" => "mlx4_ib",
        "bnxt_en" => "bnxt_re",
        "ice" | "i40e" => "irdma",
        "qede" => "qedr",
        "hns3" => "hns_roce_hw_v2",
        "mana" => "mana_ib",
        "efa" => "efa",
        _ => return None,
    })
}

fn no_device(inv: &Inventory) -> Finding {
    // NICs on the bus whose RDMA half is missing: name them and the module that would add it.
    let candidates: Vec<(String, &'static str)> = inv
        .pci
        .values()
        .filter(|f| f.class >> 16 == 0x02)
        .filter_map(|f| {
            f.driver.as_deref().and_then(rdma_module).map(|m| {
                (
                    format!(
                        "{} ({}, driver {})",
                        f.bdf,
                        f.ids(),
                        f.driver.as_deref().unwrap_or("")
                    ),
                    m,
                )
            })
        })
        .collect();
    let unbound_ib: Vec<String> = inv
        .pci
        .values()
        .filter(|f| f.class >> 8 == 0x0207 && f.driver.is_none())
        .map(|f| format!("{} ({})", f.bdf, f.ids()))
        .collect();
    let mut message = format!(
        "no RDMA device: {CLASS_INFINIBAND} is empty, so there is nothing for GPUDirect RDMA to use"
    );
    let mut fix = Fix::new(
        "Load the RDMA driver for the node's NICs (and install rdma-core)",
        "Loading an RDMA driver module does not disturb the Ethernet side of the NIC.",
    );
    let mut modules: Vec<&str> = candidates.iter().map(|(_, m)| *m).collect();
    modules.sort_unstable();
    modules.dedup();
    if !candidates.is_empty() {
        message.push_str(&format!(
            "; RDMA-capable NICs without an RDMA device: {}",
            candidates
                .iter()
                .map(|(c, _)| c.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        for m in &modules {
            fix = fix.modprobe(m);
        }
        fix = fix.edit(crate::model::edit::Edit::Write {
            file: "/etc/modules-load.d/rdma-nics.conf".into(),
            lines: modules.iter().map(|m| m.to_string()).collect(),
        });
    } else if !unbound_ib.is_empty() {
        message.push_str(&format!(
            "; InfiniBand controllers with no driver: {}",
            unbound_ib.join(", ")
        ));
        fix = fix.modprobe("mlx5_ib");
    } else {
        message.push_str("; no RDMA-capable NIC was recognised on the PCI bus either");
        fix = fix.manual("lspci -nn -D | grep -Ei 'mellanox|infiniband|broadcom|ethernet'");
    }
    Finding::fail(NO_DEVICE, "node", message)
        .evidence(CLASS_INFINIBAND, "<empty>")
        .fix(fix)
}

fn judge_port(cx: &Context, dev: &RdmaDevice, port: &Port) -> Vec<Finding> {
    let subject = port.subject(&dev.name);
    let mut out = Vec::new();
    let evidence = [
        port.state.evidence(),
        port.phys_state.evidence(),
        port.link_layer.evidence(),
        port.rate.evidence(),
    ];
    let (Some((state, state_name)), Some((phys, phys_name))) =
        (port.state.value(), port.phys_state.value())
    else {
        let why = port
            .state
            .problem()
            .or_else(|| port.phys_state.problem())
            .unwrap_or_default();
        out.push(
            Finding::unknown(
                PORT_UNREADABLE,
                subject,
                format!("cannot read the port state: {why}"),
            )
            .with(evidence),
        );
        return out;
    };
    // EFA's link layer reads "Unknown" (IB_LINK_LAYER_UNSPECIFIED): the fabric is the driver's.
    let layer = match (dev.is_efa(), port.is_ethernet(), port.is_infiniband()) {
        (true, ..) => "EFA",
        (_, true, _) => "RoCE",
        (_, _, true) => "InfiniBand",
        _ => "link layer unknown",
    };
    let rate = port
        .rate
        .value()
        .map(|r| format!("{r} Gb/s"))
        .unwrap_or_else(|| port.rate.shown());
    let netdev = port.netdev.as_ref();
    let netdev_desc = netdev
        .map(|n| format!(", {} {}", n.name, n.operstate.shown()))
        .unwrap_or_default();

    if *state == rdma::PORT_ACTIVE && *phys == PHYS_LINK_UP {
        out.push(
            Finding::pass(
                PORT_ACTIVE,
                subject.clone(),
                format!("ACTIVE, LinkUp, {rate}, {layer}{netdev_desc}"),
            )
            .with(evidence),
        );
    } else if *state == rdma::PORT_INIT && *phys == PHYS_LINK_UP && port.is_infiniband() {
        out.push(
            Finding::fail(PORT_INIT, subject.clone(), format!("{state_name} with the physical link up: no subnet manager has configured this InfiniBand port ({rate})"))
                .with(evidence)
                .fix(
                    Fix::new("Make sure a subnet manager runs on the fabric (on a switch, or opensm on one host)", "Starting a second SM on a fabric that has one is harmless (they elect a master); restarting the master SM briefly disturbs the fabric.")
                        .manual("sminfo   # which SM answers on this port")
                        .manual("systemctl enable --now opensm   # only if this fabric has no SM"),
                ),
        );
    } else if let Some((code, why, setting)) = not_used(cx, dev, port) {
        // A port NCCL will not use is down on purpose, or no matter: said, never a failure.
        out.push(
            Finding::skip(
                code,
                subject.clone(),
                format!("{state_name} (physical state {phys_name}), not used: {why}"),
            )
            .with(evidence)
            .with(setting),
        );
    } else {
        let mut fix = Fix::new(
            "Bring the link up: check the cable and the switch port, then the port's netdev",
            "Bringing an interface up changes nothing else; cable and switch work needs a person.",
        );
        if let Some(n) = netdev.filter(|n| n.operstate.value().is_some_and(|s| s == "down")) {
            fix = fix.guarded(
                crate::model::FixClass::Runtime,
                format!("ip link set dev {} up", sh(&n.name)),
                // What `ip link set up` changes: IFF_UP (without a link partner operstate stays
                // down, and bringing it up again would be a test of a proxy).
                format!(
                    "[ $(( $(cat /sys/class/net/{}/flags 2>/dev/null || echo 0) & 1 )) -eq 1 ]",
                    sh(&n.name)
                ),
            );
        }
        let where_ = dev
            .pci
            .map(|b| b.to_string())
            .unwrap_or_else(|| dev.name.clone());
        fix = fix.manual(format!("# check the cable and the switch port of {where_}; mlxlink -d {} shows the link's view on ConnectX", sh(&where_)));
        out.push(
            Finding::fail(PORT_DOWN, subject.clone(), format!("{state_name} (physical state {phys_name}): this port carries no RDMA traffic{netdev_desc}"))
                .with(evidence)
                .with(netdev.map(|n| n.operstate.evidence()))
                .fix(fix),
        );
    }

    if let (Some(want), Some(have)) = (cx.config.expect.port_rate_gbps, port.rate.value()) {
        if *have < want && *state == rdma::PORT_ACTIVE {
            out.push(
                Finding::warn(RATE_LOW, subject.clone(), format!("runs at {have} Gb/s, the config expects {want} Gb/s: a degraded link (lanes down, wrong cable, speed forced) caps GDR bandwidth"))
                    .with([port.rate.evidence()])
                    .fix(Fix::new("Find why the link trained low", "Read-only commands.").manual(format!("ethtool {} | grep -i -e speed -e lanes", netdev.map(|n| sh(&n.name)).unwrap_or_default()))),
            );
        }
    }

    if port.is_ethernet() {
        out.extend(judge_roce_mtu(cx, dev, port, &subject));
    }
    out
}

/// Why NCCL will not use a port that is not ACTIVE, if it will not: `NCCL_IB_HCA` leaves it out
/// (as NCCL parses the list: a prefix, `=` exact, `^` exclude, `:port`), or, with no list, its
/// physical state is Disabled while another port of the NIC is ACTIVE (an administrator's
/// choice: NCCL's default takes the ACTIVE ports only). A Disabled port that the list names is
/// a failure (the site asked NCCL to use it), and so is a NIC with no ACTIVE port.
pub(super) fn not_used(
    cx: &Context,
    dev: &RdmaDevice,
    port: &Port,
) -> Option<(Code, String, Option<crate::model::Evidence>)> {
    let (state, phys) = (port.state.value()?.0, port.phys_state.value()?.0);
    if state == rdma::PORT_ACTIVE && phys == PHYS_LINK_UP {
        return None;
    }
    match cx.inv.nccl.get("NCCL_IB_HCA") {
        Some(s) => {
            let list = HcaList::parse(&s.value);
            (!list.selects(&dev.name, Some(port.num))).then(|| {
                (
                    PORT_UNUSED_DOWN,
                    format!(
                        "NCCL_IB_HCA={} leaves it out ({})",
                        s.value,
                        s.origin.short()
                    ),
                    Some(s.evidence()),
                )
            })
        }
        None => {
            // The NIC's other port carries the traffic: the disabled second port of a dual-port
            // NIC. A NIC with no ACTIVE port at all is a rail lost, whatever its state says.
            let active = dev
                .ports
                .iter()
                .find(|p| p.num != port.num && p.is_active())?;
            (phys == rdma::PHYS_DISABLED).then(|| {
                (
                    PORT_DISABLED,
                    format!(
                        "disabled on purpose beside port {} (ACTIVE), and NCCL uses only ACTIVE ports (no NCCL_IB_HCA names it)",
                        active.num
                    ),
                    None,
                )
            })
        }
    }
}

fn judge_roce_mtu(cx: &Context, dev: &RdmaDevice, port: &Port, subject: &str) -> Option<Finding> {
    let Some(netdev) = &port.netdev else {
        return Some(
            Finding::unknown(ROCE_NETDEV_UNKNOWN, subject.to_owned(), format!("no netdev found for this RoCE port (no ndev in its GID table, no netdev under {})", dev.name))
                .evidence(format!("{}/gid_attrs/ndevs", port.dir), "<none>"),
        );
    };
    let Some(mtu) = netdev.mtu.value() else {
        return Some(
            Finding::unknown(
                ROCE_NETDEV_UNKNOWN,
                subject.to_owned(),
                format!(
                    "cannot read the MTU of {}: {}",
                    netdev.name,
                    netdev.mtu.problem().unwrap_or_default()
                ),
            )
            .with([netdev.mtu.evidence()]),
        );
    };
    let active = roce_active_mtu(*mtu).unwrap_or(0);
    let want = cx.config.thresholds.roce_min_active_mtu;
    (active < want).then(|| {
        Finding::warn(
            ROCE_MTU_SMALL,
            subject.to_owned(),
            format!("{} has MTU {mtu}, so RoCE runs with an RDMA MTU of {active} (below {want}): more packets and headers per byte, lower GDR bandwidth", netdev.name),
        )
        .with([netdev.mtu.evidence(), Evidence { path: netdev.found_in.clone(), value: netdev.name.clone() }])
        .fix(
            Fix::new(format!("Raise the MTU of {} to 9000 (jumbo frames) now, and in the network configuration", netdev.name), "Every hop (switch ports, the peers) must carry the larger MTU, or large packets are dropped.")
                .guarded(
                    crate::model::FixClass::Runtime,
                    format!("ip link set dev {} mtu 9000", sh(&netdev.name)),
                    format!("[ \"$(cat /sys/class/net/{}/mtu)\" -ge 9000 ]", sh(&netdev.name)),
                )
                .manual("# persist it in netplan / NetworkManager / ifcfg (mtu: 9000)"),
        )
    })
}
