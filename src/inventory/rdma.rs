//! RDMA devices from `/sys/class/infiniband`: their PCI function, ports, GID tables, netdevs.

use super::net::{CLASS_NET, is_netdev_name};
use super::{Fact, Problem};
use crate::model::health::{Counter, Place, PortCounters, WATCHED};
use crate::parse::counters::counter;
use crate::parse::int;
use crate::parse::pci::{Bdf, path_functions};
use crate::parse::rdma::{self as pr, Gid, GidType, LinkLayer};
use crate::root::Root;
use crate::sanitize::quoted;

pub const CLASS_INFINIBAND: &str = "/sys/class/infiniband";

/// How the RDMA device reaches a PCI function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attachment {
    /// `device` link to the PCI function (hardware NICs).
    Pci,
    /// Software device (rxe, siw) on a netdev, from the `parent` file; the PCI function, if any,
    /// is the netdev's.
    Netdev(String),
    /// Neither could be followed.
    None,
}

#[derive(Debug, Clone)]
pub struct RdmaDevice {
    pub name: String,
    /// The device's real sysfs directory.
    pub path: String,
    pub attachment: Attachment,
    pub pci: Option<Bdf>,
    /// The PCI function's driver (`mlx5_core`, `bnxt_en`, ...) or, for software devices, the name
    /// of the RDMA driver guessed from the device name (`rxe`).
    pub driver: Option<String>,
    pub node_type: Option<String>,
    pub fw_ver: Option<String>,
    pub hca_type: Option<String>,
    pub ports: Vec<Port>,
    /// What the efa driver says about GPU memory, on an EFA device.
    pub efa: Option<Efa>,
    pub problems: Vec<Problem>,
}

/// The RDMA fabric a device belongs to: what decides who reaches it (NCCL's own InfiniBand/RoCE
/// transport, or a network plugin) and which checks apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fabric {
    InfiniBand,
    Roce,
    /// AWS Elastic Fabric Adapter: SRD datagrams, no InfiniBand or Ethernet link layer; NCCL's
    /// own transport skips it (net_ib takes InfiniBand and Ethernet ports only) and reaches it
    /// through the aws-ofi-nccl plugin over libfabric's efa provider.
    Efa,
    /// Neither link layer could be read or told.
    Unknown,
}

impl Fabric {
    pub fn as_str(self) -> &'static str {
        match self {
            Fabric::InfiniBand => "InfiniBand",
            Fabric::Roce => "RoCE",
            Fabric::Efa => "EFA",
            Fabric::Unknown => "link layer unknown",
        }
    }
}

/// The efa driver's own files under the PCI function. AWS's driver (amzn-drivers
/// kernel/linux/efa, what the EFA installer builds) writes `p2p`, the first peer-memory provider
/// it finds (efa_sysfs.c p2p_show(): "NVIDIA", "NVIDIA peermem", "" when none; efa_nvmem_impl.h
/// nvmem_provider_string()); its releases before the p2p framework wrote `gdr` ("1") when built
/// with GPUDirect support. The upstream driver writes neither: there GPU memory is registered
/// through DMA-BUF only (Linux 5.16, "RDMA/efa: Add support for dmabuf memory regions").
#[derive(Debug, Clone)]
pub struct Efa {
    pub p2p: Fact<String>,
    pub gdr: Fact<String>,
}

impl RdmaDevice {
    pub fn class_path(&self) -> String {
        format!("{CLASS_INFINIBAND}/{}", self.name)
    }

    pub fn is_software(&self) -> bool {
        matches!(self.attachment, Attachment::Netdev(_))
    }

    /// An AWS EFA device: bound to the efa driver (the RDMA device exists only then).
    pub fn is_efa(&self) -> bool {
        self.driver.as_deref() == Some("efa")
    }

    /// The device's fabric: EFA by its driver, else its first port's link layer.
    pub fn fabric(&self) -> Fabric {
        if self.is_efa() {
            return Fabric::Efa;
        }
        match self.ports.first().and_then(|p| p.link_layer.value()) {
            Some(LinkLayer::InfiniBand) => Fabric::InfiniBand,
            Some(LinkLayer::Ethernet) => Fabric::Roce,
            _ => Fabric::Unknown,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Netdev {
    pub name: String,
    /// Where the name came from (`gid_attrs/ndevs/3`, `parent`, the PCI function's `net/`).
    pub found_in: String,
    pub mtu: Fact<u32>,
    pub operstate: Fact<String>,
}

#[derive(Debug, Clone)]
pub struct GidEntry {
    pub index: u32,
    pub gid: Gid,
    pub gid_type: Fact<GidType>,
    /// `gid_attrs/ndevs/<i>`; absent on IB ports.
    pub ndev: Fact<String>,
}

impl GidEntry {
    pub fn path(&self, port_dir: &str) -> String {
        format!("{port_dir}/gids/{}", self.index)
    }
}

/// The RoCE v2 GID chosen for a port, and the other candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GidChoice {
    pub index: u32,
    /// The other RoCE v2 IPv4 entries.
    pub others: Vec<u32>,
    /// Why this one, when there were several.
    pub why: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Port {
    pub num: u32,
    /// `/sys/class/infiniband/<dev>/ports/<n>`.
    pub dir: String,
    pub state: Fact<(u8, String)>,
    pub phys_state: Fact<(u8, String)>,
    pub link_layer: Fact<LinkLayer>,
    pub rate: Fact<f64>,
    pub lid: Fact<u16>,
    pub sm_lid: Fact<u16>,
    /// The used (non-zero) GID entries, by index.
    pub gids: Vec<GidEntry>,
    /// Slots in the table, used or not.
    pub gid_slots: usize,
    pub netdev: Option<Netdev>,
    /// The other netdevs the GID table names (a VLAN, a macvlan, a bond on the port), each with
    /// what the kernel says it is.
    pub stacked: Vec<super::vlan::Stacked>,
    /// MLNX_OFED's QoS files of a RoCE port (none on the upstream driver).
    pub ofed_qos: super::ofed_qos::OfedQos,
    /// The link-health counters read (an IB port's PMA and transport counters, a RoCE port's
    /// netdev carrier changes and errors).
    pub counters: PortCounters,
    pub problems: Vec<Problem>,
}

impl Port {
    pub fn subject(&self, dev: &str) -> String {
        format!("{dev} port {}", self.num)
    }

    pub fn is_ethernet(&self) -> bool {
        self.link_layer.value() == Some(&LinkLayer::Ethernet)
    }

    pub fn is_infiniband(&self) -> bool {
        self.link_layer.value() == Some(&LinkLayer::InfiniBand)
    }

    /// The RoCE v2 GID to pin for this port: the first RoCE v2 IPv4 entry whose netdev is the
    /// port's own (the one rdma-link names), then any RoCE v2 IPv4 entry, then the first RoCE v2
    /// entry with a routable IPv6 address. The port's own netdev comes first because a netdev
    /// stacked on it (a vxlan on a bond, a macvlan, a VLAN) adds GIDs for its own addresses,
    /// which differ from node to node; NCCL itself takes the first RoCE v2 IPv4 entry
    /// (src/transport/net_ib `ncclIbGetGidIndex`), which can be the stacked one (issue 16).
    pub fn roce_v2_gid_index(&self) -> Option<u32> {
        self.roce_v2_gid_choice().map(|c| c.index)
    }

    /// [`Port::roce_v2_gid_index`] with the other candidates and why this one was chosen.
    pub fn roce_v2_gid_choice(&self) -> Option<GidChoice> {
        let v2 = |g: &&GidEntry| g.gid_type.value() == Some(&GidType::RoceV2);
        let ipv4: Vec<&GidEntry> = self
            .gids
            .iter()
            .filter(v2)
            .filter(|g| g.gid.family() == pr::GidFamily::Ipv4)
            .collect();
        let own = self.netdev.as_ref().map(|n| n.name.as_str());
        let on_own = ipv4
            .iter()
            .find(|g| own.is_some() && g.ndev.value().map(String::as_str) == own);
        let (chosen, why) = match (on_own, ipv4.first()) {
            (Some(g), _) if ipv4.len() > 1 => (
                *g,
                Some(format!(
                    "its netdev {} is the port's own; the others belong to netdevs stacked on it, whose addresses differ from node to node",
                    own.unwrap_or_default()
                )),
            ),
            (Some(g), _) => (*g, None),
            (None, Some(g)) if ipv4.len() > 1 => (
                *g,
                Some("the first RoCE v2 IPv4 entry, as NCCL picks it".to_owned()),
            ),
            (None, Some(g)) => (*g, None),
            (None, None) => self
                .gids
                .iter()
                .filter(v2)
                .find(|g| g.gid.family() == pr::GidFamily::Ipv6)
                .map(|g| (g, None))?,
        };
        Some(GidChoice {
            index: chosen.index,
            others: ipv4
                .iter()
                .filter(|g| g.index != chosen.index)
                .map(|g| g.index)
                .collect(),
            why,
        })
    }

    /// `4: ACTIVE` (whatever the physical state).
    pub fn is_active(&self) -> bool {
        self.state
            .value()
            .is_some_and(|(n, _)| *n == pr::PORT_ACTIVE)
    }
}

/// Reads every RDMA device. `Err` when the class directory itself could not be read (missing
/// is fine: it means no RDMA device, which the checks say). Entries whose names no kernel would
/// give a device are left out and reported as problems.
pub fn load(root: &Root, problems: &mut Vec<Problem>) -> (Vec<RdmaDevice>, Result<(), Problem>) {
    let listing = match root.read_dir(CLASS_INFINIBAND) {
        Ok(l) => l,
        // No class directory is what a live node without any RDMA driver shows; a root with no
        // /sys/class at all is a capture that left sysfs out, which says nothing about RDMA.
        Err(e) if e.is_not_found() && !root.is_dir("/sys/class") => {
            return (Vec::new(), Err(Problem { path: "/sys/class".into(), message: "not found: this root has no sysfs classes, so its RDMA devices cannot be listed".into() }));
        }
        Err(e) if e.is_not_found() => return (Vec::new(), Ok(())),
        Err(e) => return (Vec::new(), Err(Problem::from_error(&e))),
    };
    let mut devices = Vec::new();
    for name in listing.names {
        if is_device_name(&name) {
            devices.push(device(root, name));
        } else {
            problems.push(Problem::unsafe_name(
                format!("{CLASS_INFINIBAND}/{name}"),
                "RDMA device name",
            ));
        }
    }
    for bad in listing.invalid {
        problems.push(Problem::unsafe_name(
            format!("{CLASS_INFINIBAND}/{bad}"),
            "RDMA device name (not UTF-8)",
        ));
    }
    (devices, Ok(()))
}

/// RDMA device names are short kernel names (`mlx5_0`, `rocep1s0f0`, `rxe0`); anything else in
/// a capture is not a device and must not reach a path or a script.
fn is_device_name(s: &str) -> bool {
    if s.starts_with('.') {
        return false;
    }
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && s != "."
        && s != ".."
}

fn device(root: &Root, name: String) -> RdmaDevice {
    let class_path = format!("{CLASS_INFINIBAND}/{name}");
    let mut problems = Vec::new();
    let path = match root.canonical(&class_path) {
        Ok(p) => p,
        Err(e) => {
            // Dangling, looping or escaping: nothing below it can be read either.
            problems.push(Problem::from_error(&e));
            return RdmaDevice {
                name,
                path: class_path,
                attachment: Attachment::None,
                pci: None,
                driver: None,
                node_type: None,
                fw_ver: None,
                hca_type: None,
                ports: Vec::new(),
                efa: None,
                problems,
            };
        }
    };
    let text = |attr: &str| {
        root.read_text(&format!("{path}/{attr}"))
            .ok()
            .filter(|s| !s.is_empty() && s.len() < 256)
    };

    let mut attachment = Attachment::None;
    let mut pci = None;
    match root.canonical(&format!("{path}/device")) {
        Ok(dev) => {
            attachment = Attachment::Pci;
            pci = dev.rsplit('/').next().and_then(Bdf::parse);
        }
        Err(e) if e.is_not_found() => {
            // Soft-RoCE and siw have no `device` link; their `parent` file names the netdev
            // (seen in the lab: /sys/class/infiniband/rxe0/parent = eth0).
            // The netdev's real path runs through its PCI function, possibly with a bus device
            // in between (virtio: .../0000:00:03.0/virtio2/net/eth0).
            let parent = text("parent");
            if let Some(bad) = parent.as_ref().filter(|p| !is_netdev_name(p)) {
                problems.push(Problem::unsafe_value(
                    format!("{path}/parent"),
                    "interface name",
                    bad,
                ));
            }
            if let Some(parent) = parent.filter(|p| is_netdev_name(p)) {
                pci = root
                    .canonical(&format!("/sys/class/net/{parent}"))
                    .ok()
                    .and_then(|d| path_functions(&d).last().copied());
                attachment = Attachment::Netdev(parent);
            }
        }
        Err(e) => problems.push(Problem::from_error(&e)),
    }
    let driver = match &attachment {
        Attachment::Pci => super::pci::driver_of(root, &format!("{path}/device"), &mut problems),
        // Software devices have no driver link; `rdma link add NAME type rxe` names them, so the
        // name is only a hint, trusted for the usual prefixes.
        _ => ["rxe", "siw"]
            .into_iter()
            .find(|p| name.starts_with(p))
            .map(str::to_owned),
    };

    let mlx5_pci = pci
        .filter(|_| driver.as_deref() == Some("mlx5_core"))
        .map(|b| b.to_string());
    let ports_dir = format!("{path}/ports");
    let mut port_nums: Vec<u32> = Vec::new();
    match root.read_dir(&ports_dir) {
        Ok(l) => {
            for n in &l.names {
                // Port numbers are u8 in the verbs ABI; port 0 is a switch's management port.
                match int::<u32>(n).filter(|p| *p > 0 && *p < 256) {
                    Some(p) => port_nums.push(p),
                    None => problems.push(Problem {
                        path: format!("{class_path}/ports/{n}"),
                        message: "not a port number; ignored".into(),
                    }),
                }
            }
        }
        Err(e) => problems.push(Problem::from_error(&e)),
    }
    port_nums.sort_unstable();
    let ports = port_nums
        .into_iter()
        .map(|n| port(root, &class_path, n, &attachment, mlx5_pci.as_deref()))
        .collect();

    let efa = (driver.as_deref() == Some("efa")).then(|| {
        // Absent on the upstream driver: read, never required.
        let attr = |name: &str| {
            Fact::read(root, format!("{class_path}/device/{name}"), |s| {
                (s.len() < 64 && s.chars().all(|c| !c.is_control())).then(|| s.to_owned())
            })
        };
        Efa {
            p2p: attr("p2p"),
            gdr: attr("gdr"),
        }
    });
    RdmaDevice {
        efa,
        node_type: text("node_type"),
        fw_ver: text("fw_ver"),
        hca_type: text("hca_type"),
        name,
        path,
        attachment,
        pci,
        driver,
        ports,
        problems,
    }
}

/// `mlx5_pci`: the device's PCI function when its driver is mlx5 (whose debugfs has the
/// congestion-control parameters).
fn port(
    root: &Root,
    class_path: &str,
    num: u32,
    attachment: &Attachment,
    mlx5_pci: Option<&str>,
) -> Port {
    // Read through the class path operators type (`/sys/class/infiniband/mlx5_0/ports/1/state`),
    // so evidence names it; the resolver caches the link, so this costs nothing extra.
    let dir = format!("{class_path}/ports/{num}");
    let at = |attr: &str| format!("{dir}/{attr}");
    let mut problems = Vec::new();
    let state = Fact::read(root, at("state"), pr::numbered_state);
    let phys_state = Fact::read(root, at("phys_state"), pr::numbered_state);
    let link_layer = Fact::read(root, at("link_layer"), pr::link_layer);
    let rate = Fact::read(root, at("rate"), pr::rate_gbps);
    let lid = Fact::read(root, at("lid"), pr::lid);
    let sm_lid = Fact::read(root, at("sm_lid"), pr::lid);

    // The GID table: every slot exists; unused ones read as zeros, and reading their types or
    // ndevs fails with EINVAL (seen in the lab), so only used slots are asked about.
    let mut gids = Vec::new();
    let mut slots: Vec<u32> = Vec::new();
    match root.read_dir(&at("gids")) {
        Ok(l) => {
            for n in &l.names {
                // gid_tbl_len is an int, but no device has more than a few thousand slots.
                match int::<u32>(n).filter(|i| *i < 65536) {
                    Some(i) => slots.push(i),
                    None => problems.push(Problem {
                        path: at(&format!("gids/{n}")),
                        message: "not a GID index; ignored".into(),
                    }),
                }
            }
        }
        Err(e) if e.is_not_found() => {}
        Err(e) => problems.push(Problem::from_error(&e)),
    }
    slots.sort_unstable();
    for &index in &slots {
        let path = at(&format!("gids/{index}"));
        let gid = match root.read_text(&path) {
            Ok(text) => match Gid::parse(&text) {
                Some(g) => g,
                None => {
                    problems.push(Problem {
                        path,
                        message: format!("not a GID: {}", quoted(&text)),
                    });
                    continue;
                }
            },
            Err(e) => {
                problems.push(Problem::from_error(&e));
                continue;
            }
        };
        if gid.is_zero() {
            continue;
        }
        let gid_type = Fact::read(root, at(&format!("gid_attrs/types/{index}")), pr::gid_type);
        let ndev = Fact::read(root, at(&format!("gid_attrs/ndevs/{index}")), |s| {
            is_netdev_name(s).then(|| s.to_owned())
        });
        // A used slot's type must read; its ndev may be absent (IB ports), but never nonsense.
        problems.extend(gid_type.as_problem(false));
        match (&ndev.raw, &ndev.value) {
            // Text that is not an interface name: refused, never parsed around.
            (Ok(raw), None) => problems.push(Problem::unsafe_value(
                ndev.path.clone(),
                "interface name",
                raw,
            )),
            _ => problems.extend(ndev.as_problem(true)),
        }
        gids.push(GidEntry {
            index,
            gid,
            gid_type,
            ndev,
        });
    }

    let netdev = port_netdev(root, &gids, class_path, num, attachment, &mut problems);
    let ndevs: Vec<&str> = gids
        .iter()
        .filter_map(|g| g.ndev.value().map(String::as_str))
        .collect();
    let stacked = super::vlan::stacked(
        root,
        netdev.as_ref().map(|n| n.name.as_str()),
        &ndevs,
        &mut None,
    );
    let counters = read_counters(root, "", &dir, netdev.as_ref().map(|n| n.name.as_str()));
    // MLNX_OFED's QoS files: RoCE ports only (the files are per netdev and per RoCE port).
    let ofed_qos = if link_layer.value() == Some(&LinkLayer::Ethernet) {
        let device = class_path.rsplit('/').next().unwrap_or("");
        super::ofed_qos::read(
            root,
            device,
            num,
            netdev.as_ref().map(|n| n.name.as_str()),
            mlx5_pci,
        )
    } else {
        super::ofed_qos::OfedQos::default()
    };
    Port {
        ofed_qos,
        num,
        dir,
        state,
        phys_state,
        link_layer,
        rate,
        lid,
        sm_lid,
        gids,
        gid_slots: slots.len(),
        netdev,
        stacked,
        counters,
        problems,
    }
}

/// The port's link-health counters ([`WATCHED`]), each file read once; a file its driver does
/// not have is left out. `netdev`: the interface under a RoCE port. A sample window calls this
/// again for the second reading; `prefix` is where a capture recorded that reading (empty: the
/// node's own files).
pub fn read_counters(
    root: &Root,
    prefix: &str,
    port_dir: &str,
    netdev: Option<&str>,
) -> PortCounters {
    let counters = WATCHED
        .iter()
        .filter_map(|w| {
            let path = match (w.place, netdev) {
                (Place::Pma | Place::Hw, _) => format!("{port_dir}/{}/{}", w.place.dir(), w.name),
                (Place::Netdev, Some(n)) => format!("{CLASS_NET}/{n}/{}", w.name),
                (Place::NetdevStats, Some(n)) => format!("{CLASS_NET}/{n}/statistics/{}", w.name),
                (_, None) => return None,
            };
            // Read below `prefix`, shown at the node's own path: a capture's recorded reading
            // reads as the live one did.
            let mut value = Fact::read_small(
                root,
                format!("{prefix}{path}"),
                super::COUNTER_LIMIT,
                counter,
            );
            value.path = path;
            (!value.is_missing()).then_some(Counter { watched: *w, value })
        })
        .collect();
    PortCounters { counters }
}

/// The netdev a RoCE port runs on: named in its GID table, else the software device's parent,
/// else the single netdev of its PCI function (or the one whose `dev_port` matches the port).
fn port_netdev(
    root: &Root,
    gids: &[GidEntry],
    class_path: &str,
    num: u32,
    attachment: &Attachment,
    problems: &mut Vec<Problem>,
) -> Option<Netdev> {
    let (name, found_in) =
        if let Some((g, name)) = gids.iter().find_map(|g| g.ndev.value().map(|n| (g, n))) {
            (name.clone(), g.ndev.path.clone())
        } else if let Attachment::Netdev(parent) = attachment {
            (parent.clone(), format!("{class_path}/parent"))
        } else if *attachment == Attachment::Pci {
            let net = format!("{class_path}/device/net");
            let (names, bad): (Vec<String>, Vec<String>) = root
                .read_dir(&net)
                .map(|l| l.names)
                .unwrap_or_default()
                .into_iter()
                .partition(|n| is_netdev_name(n));
            for b in bad {
                problems.push(Problem::unsafe_name(format!("{net}/{b}"), "interface name"));
            }
            let pick = if names.len() == 1 {
                names.into_iter().next()
            } else {
                names.into_iter().find(|n| {
                    root.read_text(&format!("{net}/{n}/dev_port"))
                        .ok()
                        .and_then(|s| int::<u32>(&s))
                        == Some(num - 1)
                })
            }?;
            (pick, net)
        } else {
            return None;
        };
    let base = format!("/sys/class/net/{name}");
    Some(Netdev {
        mtu: Fact::read(root, format!("{base}/mtu"), |s| {
            int::<u32>(s).filter(|m| *m > 0 && *m <= 1 << 20)
        }),
        operstate: Fact::read(root, format!("{base}/operstate"), |s| {
            (s.len() < 32).then(|| s.to_owned())
        }),
        name,
        found_in,
    })
}
