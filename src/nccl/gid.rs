//! The RoCE GID NCCL picks itself when `NCCL_IB_GID_INDEX` is unset, as NCCL 2.21 and later
//! pick it (src/transport/net_ib.cc in 2.21-2.27, src/transport/net_ib/connect.cc from 2.28:
//! `ncclIbGetGidIndex`, `ncclUpdateGidIndex`), replayed on the port's GID table as sysfs lists
//! it. Before 2.21 `NCCL_IB_GID_INDEX` defaulted to 0. From 2.21 NVIDIA advises leaving it unset
//! (NVIDIA/nccl issues 890, 1573), so `gdrdoctor nccl` pins it only where this pick is wrong.
//!
//! NCCL starts at index 0 and walks the table once. A candidate of the wanted address family
//! (`NCCL_IB_ADDR_FAMILY`, IPv4 by default; IPv4-mapped addresses are IPv4) inside
//! `NCCL_IB_ADDR_RANGE` replaces a current GID of the other family outright; one of the same
//! family replaces it when the candidate is valid (configured, not in fe80::/64) and of the
//! wanted RoCE version (`NCCL_IB_ROCE_VERSION_NUM`, 2 by default) while the current one is of
//! another version or not valid. So NCCL ends on the first RoCE v2 GID of the family, whichever
//! netdev it belongs to: with a vxlan stacked on the port's bond, that can be the vxlan's
//! (issue 16).

use super::transport;
use crate::inventory::nccl::Nccl;
use crate::inventory::rdma::GidEntry;
use crate::inventory::{Port, RdmaDevice};
use crate::parse::rdma::{Gid, GidType};
use std::net::{Ipv4Addr, Ipv6Addr};

/// The first release that picks the GID itself.
pub const SINCE: (u32, u32) = (2, 21);

/// What NCCL is asked for: the address family, the RoCE version, the address range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wants {
    pub ipv6: bool,
    pub version: i64,
    /// `NCCL_IB_ADDR_RANGE` as NCCL reads it: the prefix (IPv4 in the last 4 bytes) and its
    /// length; `None` when unset or not readable (NCCL then takes any address).
    pub range: Option<([u8; 16], u32)>,
}

impl Wants {
    /// From the settings NCCL reads on the node.
    pub fn of(nccl: &Nccl) -> Wants {
        let ipv6 = super::params::wants_ipv6(nccl.value("NCCL_IB_ADDR_FAMILY"));
        let version = nccl
            .value("NCCL_IB_ROCE_VERSION_NUM")
            .map(|v| transport::read(v, 2).value)
            .unwrap_or(2);
        let range = nccl
            .value("NCCL_IB_ADDR_RANGE")
            .and_then(|r| addr_range(r, ipv6));
        Wants {
            ipv6,
            version,
            range,
        }
    }

    pub fn family(&self) -> &'static str {
        if self.ipv6 { "IPv6" } else { "IPv4" }
    }
}

/// `NCCL_IB_ADDR_RANGE` (`envIbAddrRange`): `address/length`, the address in the wanted family,
/// the length at most 32 or 128; anything else is ignored.
fn addr_range(value: &str, ipv6: bool) -> Option<([u8; 16], u32)> {
    let (addr, len) = value.split_once('/')?;
    let len = u32::try_from(super::params::nccl_int(len).0).ok()?;
    if ipv6 {
        let a: Ipv6Addr = addr.parse().ok()?;
        (len <= 128).then_some((a.octets(), len))
    } else {
        let a: Ipv4Addr = addr.parse().ok()?;
        let mut b = [0u8; 16];
        b[12..].copy_from_slice(&a.octets());
        (len <= 32).then_some((b, len))
    }
}

/// `getGidAddrFamily`: IPv4-mapped (and the IPv4-mapped multicast ff0e::ffff:a.b.c.d) is IPv4.
fn is_ipv4(g: &Gid) -> bool {
    let b = &g.0;
    let mapped_tail = b[8..10] == [0, 0] && b[10..12] == [0xff, 0xff];
    mapped_tail && (b[..8] == [0; 8] || b[..8] == [0xff, 0x0e, 0, 0, 0, 0, 0, 0])
}

/// `matchGidAddrPrefix`: the candidate within the range (IPv4: its last 4 bytes).
fn in_range(g: &Gid, range: Option<([u8; 16], u32)>, ipv6: bool) -> bool {
    let Some((prefix, len)) = range else {
        return true;
    };
    if len == 0 {
        return true;
    }
    let (a, b, bits) = if ipv6 {
        (u128::from_be_bytes(g.0), u128::from_be_bytes(prefix), 128)
    } else {
        let tail = |x: &[u8; 16]| u128::from(u32::from_be_bytes([x[12], x[13], x[14], x[15]]));
        (tail(&g.0), tail(&prefix), 32)
    };
    let mask = if len >= bits {
        if bits == 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    } else {
        ((1u128 << len) - 1) << (bits - len)
    };
    a & mask == b & mask
}

/// The version NCCL reads from `gid_attrs/types/<i>` (`ncclIbRoceGetVersionNum`); `None` for an
/// empty slot or a type it cannot read.
fn version(e: Option<&GidEntry>) -> Option<i64> {
    e.and_then(|e| e.gid_type.value()).map(|t| match t {
        GidType::IbRoceV1 => 1,
        GidType::RoceV2 => 2,
    })
}

/// The index NCCL picks on a RoCE port.
pub fn pick(port: &Port, w: &Wants) -> u32 {
    let entry = |i: u32| port.gids.iter().find(|g| g.index == i);
    let gid = |i: u32| entry(i).map(|e| e.gid).unwrap_or_default();
    let slots = u32::try_from(port.gid_slots).unwrap_or(u32::MAX);
    let mut current = 0u32;
    for candidate in 1..slots {
        let (g, c) = (gid(current), gid(candidate));
        let c_v4 = is_ipv4(&c);
        let c_wanted = c_v4 != w.ipv6;
        let c_in = in_range(&c, w.range, w.ipv6);
        if c_v4 != is_ipv4(&g) && c_wanted && c_in {
            current = candidate;
            continue;
        }
        if !c_wanted || !c.nccl_valid() || !c_in {
            continue;
        }
        let (gv, cv) = (version(entry(current)), version(entry(candidate)));
        if (gv != cv || !g.nccl_valid()) && cv == Some(w.version) {
            current = candidate;
        }
    }
    current
}

/// NCCL's pick on one RoCE port, and what is wrong with it, if anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pick {
    pub index: u32,
    /// `index 3, RoCE v2 192.168.1.1 on ens1np0`.
    pub shown: String,
    /// Why jobs should not run on it: not the RoCE version asked, not routable, not the wanted
    /// family, or a netdev stacked on the port's own.
    pub wrong: Option<String>,
}

/// NCCL's pick on `port` of `dev`, judged.
pub fn judge(port: &Port, w: &Wants) -> Pick {
    let index = pick(port, w);
    let Some(e) = port.gids.iter().find(|g| g.index == index) else {
        return Pick {
            index,
            shown: format!("index {index}, an empty slot"),
            wrong: Some(format!(
                "no GID of the {} family and RoCE v{} is in the table, and slot {index} is empty",
                w.family(),
                w.version
            )),
        };
    };
    let kind = match version(Some(e)) {
        Some(1) => "RoCE v1".to_owned(),
        Some(2) => "RoCE v2".to_owned(),
        _ => "a GID of unknown type".to_owned(),
    };
    let ndev = e.ndev.value().cloned();
    let shown = format!(
        "index {index}, {kind} {}{}",
        e.gid.address(),
        ndev.as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    );
    let wrong = if !e.gid.nccl_valid() {
        Some(format!(
            "{} is link-local, which routers do not forward: the table has no routable {} GID",
            e.gid.address(),
            w.family()
        ))
    } else if version(Some(e)) != Some(w.version) {
        Some(format!(
            "it is {kind}, not RoCE v{} as NCCL is asked",
            w.version
        ))
    } else if is_ipv4(&e.gid) == w.ipv6 {
        Some(format!(
            "it is not of the {} family NCCL is set to",
            w.family()
        ))
    } else {
        stacked(port, e, w)
    };
    Pick {
        index,
        shown,
        wrong,
    }
}

/// The pick belongs to a netdev stacked on the port's own (a vxlan on a bond), while the port's
/// own netdev has a GID NCCL would take: its address differs from node to node.
fn stacked(port: &Port, e: &GidEntry, w: &Wants) -> Option<String> {
    let own = port.netdev.as_ref()?.name.as_str();
    let other = e.ndev.value()?;
    if other == own {
        return None;
    }
    let own_entry = port.gids.iter().find(|g| {
        g.ndev.value().map(String::as_str) == Some(own)
            && version(Some(g)) == Some(w.version)
            && g.gid.nccl_valid()
            && is_ipv4(&g.gid) != w.ipv6
    })?;
    Some(format!(
        "it belongs to {other}, stacked on the port's own netdev {own}, whose GID is at index {}",
        own_entry.index
    ))
}

/// The RoCE ports of `devices` that `NCCL_IB_HCA` selects, with NCCL's pick on each.
pub fn picks<'a>(
    ports: impl IntoIterator<Item = (&'a RdmaDevice, &'a Port)>,
    w: &Wants,
) -> Vec<(String, Pick)> {
    ports
        .into_iter()
        .filter(|(_, p)| p.is_ethernet())
        .map(|(d, p)| (p.subject(&d.name), judge(p, w)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::rdma::Netdev;
    use crate::model::Fact;

    fn fact<T>(value: Option<T>) -> Fact<T> {
        Fact {
            path: String::new(),
            raw: Ok(String::new()),
            value,
        }
    }

    fn entry(index: u32, gid: &str, ty: GidType, ndev: &str) -> GidEntry {
        GidEntry {
            index,
            gid: Gid::parse(gid).unwrap(),
            gid_type: fact(Some(ty)),
            ndev: fact(Some(ndev.to_owned())),
        }
    }

    const LLA: &str = "fe80:0000:0000:0000:ba3f:d2ff:fea1:b2c4";
    fn v4(tail: &str) -> String {
        format!("0000:0000:0000:0000:0000:ffff:{tail}")
    }

    fn port(entries: Vec<GidEntry>, own: &str) -> Port {
        Port {
            num: 1,
            dir: "/sys/class/infiniband/mlx5_0/ports/1".into(),
            state: fact(None),
            phys_state: fact(None),
            link_layer: fact(Some(crate::parse::rdma::LinkLayer::Ethernet)),
            rate: fact(None),
            lid: fact(None),
            sm_lid: fact(None),
            gids: entries,
            gid_slots: 16,
            netdev: Some(Netdev {
                name: own.into(),
                found_in: String::new(),
                mtu: fact(None),
                operstate: fact(None),
            }),
            stacked: Vec::new(),
            counters: crate::model::health::PortCounters {
                counters: Vec::new(),
            },
            ofed_qos: Default::default(),
            problems: Vec::new(),
        }
    }

    fn wants() -> Wants {
        Wants {
            ipv6: false,
            version: 2,
            range: None,
        }
    }

    /// The usual table: link-local v1, v2, then IPv4 v1, v2: NCCL ends on 3.
    #[test]
    fn usual_table() {
        use GidType::*;
        let p = port(
            vec![
                entry(0, LLA, IbRoceV1, "eth2"),
                entry(1, LLA, RoceV2, "eth2"),
                entry(2, &v4("c0a8:0101"), IbRoceV1, "eth2"),
                entry(3, &v4("c0a8:0101"), RoceV2, "eth2"),
            ],
            "eth2",
        );
        let j = judge(&p, &wants());
        assert_eq!(j.index, 3);
        assert_eq!(j.shown, "index 3, RoCE v2 192.168.1.1 on eth2");
        assert_eq!(j.wrong, None);
        // IPv6 asked, and none but link-local: NCCL keeps a link-local one.
        let w = Wants {
            ipv6: true,
            ..wants()
        };
        let j = judge(&p, &w);
        assert!(j.wrong.unwrap().contains("link-local"), "{}", j.shown);
    }

    /// The vxlan's IPv4 GID before the bond's: NCCL takes the vxlan's (issue 16).
    #[test]
    fn stacked_first() {
        use GidType::*;
        let p = port(
            vec![
                entry(0, LLA, IbRoceV1, "bond0"),
                entry(1, LLA, RoceV2, "bond0"),
                entry(2, &v4("0ac8:0005"), IbRoceV1, "vxlan100"),
                entry(3, &v4("0ac8:0005"), RoceV2, "vxlan100"),
                entry(4, &v4("c0a8:0101"), IbRoceV1, "bond0"),
                entry(5, &v4("c0a8:0101"), RoceV2, "bond0"),
            ],
            "bond0",
        );
        let j = judge(&p, &wants());
        assert_eq!(j.index, 3);
        let why = j.wrong.unwrap();
        assert!(why.contains("vxlan100") && why.contains("index 5"), "{why}");
        // NCCL_IB_ADDR_RANGE narrows it to the bond's subnet.
        let w = Wants {
            range: addr_range("192.168.1.0/24", false),
            ..wants()
        };
        assert_eq!(pick(&p, &w), 5);
    }

    /// Only RoCE v1 in the table: NCCL picks the IPv4 v1 GID, not what it is asked for.
    #[test]
    fn v1_only() {
        use GidType::*;
        let p = port(
            vec![
                entry(0, LLA, IbRoceV1, "eth2"),
                entry(1, &v4("c0a8:0101"), IbRoceV1, "eth2"),
            ],
            "eth2",
        );
        let j = judge(&p, &wants());
        assert_eq!(j.index, 1);
        assert!(j.wrong.unwrap().contains("RoCE v1"));
    }

    #[test]
    fn ranges() {
        let g = Gid::parse(&v4("c0a8:0101")).unwrap();
        assert!(in_range(&g, addr_range("192.168.0.0/16", false), false));
        assert!(!in_range(&g, addr_range("10.0.0.0/8", false), false));
        assert!(in_range(&g, addr_range("192.168.1.1/32", false), false));
        assert_eq!(addr_range("192.168.0.0/33", false), None);
        assert_eq!(addr_range("192.168.0.0", false), None);
        let g6 = Gid::parse("2001:0db8:0000:0000:0000:0000:0000:0001").unwrap();
        assert!(in_range(&g6, addr_range("2001:db8::/32", true), true));
        assert!(!in_range(&g6, addr_range("2001:db9::/32", true), true));
    }
}
