//! RDMA port attributes and GIDs as `/sys/class/infiniband/<dev>/ports/<n>/` shows them.
//! kernel: drivers/infiniband/core/sysfs.c (state_show, phys_state_show, rate_show,
//! show_port_gid, print_gid_type, print_ndev).

use serde::Serialize;
use std::net::{Ipv4Addr, Ipv6Addr};

/// `4: ACTIVE` -> (4, "ACTIVE"). The kernel prints the enum value and its name.
pub fn numbered_state(s: &str) -> Option<(u8, String)> {
    let (num, name) = s.trim().split_once(':')?;
    let num: u8 = num.trim().parse().ok()?;
    let name = name.trim();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
    {
        return None;
    }
    Some((num, name.to_owned()))
}

/// ib_port_state: 4 = ACTIVE.
pub const PORT_ACTIVE: u8 = 4;
/// ib_port_state: 2 = INIT (link trained, but no subnet manager has configured the port).
pub const PORT_INIT: u8 = 2;
/// ib_port_phys_state: 5 = LinkUp.
pub const PHYS_LINK_UP: u8 = 5;
/// ib_port_phys_state: 3 = Disabled (an administrator turned the port off; 2 = Polling is a
/// port looking for a link partner).
pub const PHYS_DISABLED: u8 = 3;

/// `400 Gb/sec (4X NDR)` -> 400.0; `2.5 Gb/sec (1X SDR)` -> 2.5.
pub fn rate_gbps(s: &str) -> Option<f64> {
    let num = s.split_whitespace().next()?;
    let v: f64 = num.parse().ok()?;
    (0.0..100_000.0).contains(&v).then_some(v)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    /// `Unknown`: what link_layer_show() prints for IB_LINK_LAYER_UNSPECIFIED, the link layer of
    /// a fabric that is neither (AWS EFA: efa_port_link_layer() in
    /// drivers/infiniband/hw/efa/efa_verbs.c returns it).
    Unknown,
}

pub fn link_layer(s: &str) -> Option<LinkLayer> {
    match s.trim() {
        "InfiniBand" => Some(LinkLayer::InfiniBand),
        "Ethernet" => Some(LinkLayer::Ethernet),
        "Unknown" => Some(LinkLayer::Unknown),
        _ => None,
    }
}

/// `0x1a` -> 26. LIDs are 16-bit.
pub fn lid(s: &str) -> Option<u16> {
    super::hex_u16(s)
}

/// A GID: 16 bytes, printed by the kernel as 8 groups of 4 hex digits. The one GID type of the
/// program: what sysfs lists and what libibverbs answers (`union ibv_gid`: 16 bytes, 8-aligned,
/// its `global` member being two `__be64`; tests/verbs_layout.rs checks the layout).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    pub fn parse(s: &str) -> Option<Gid> {
        let s = s.trim();
        let groups: Vec<&str> = s.split(':').collect();
        if groups.len() != 8 {
            return None;
        }
        let mut bytes = [0u8; 16];
        for (i, g) in groups.iter().enumerate() {
            if g.len() != 4 || !g.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            let v = u16::from_str_radix(g, 16).ok()?;
            bytes[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
        }
        Some(Gid(bytes))
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// The IPv4 address of a RoCE GID built from one (`::ffff:a.b.c.d`).
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// fe80::/10: the IPv6 link-local prefix (RFC 4291 section 2.4), which routers do not
    /// forward. The one rule for "link-local" in gdrdoctor (the rdma-gid check, the two-node
    /// test's GID families, the fleet).
    pub fn is_link_local(&self) -> bool {
        self.0[0] == 0xfe && self.0[1] & 0xc0 == 0x80
    }

    /// Whether NCCL takes this GID when it picks one itself (no NCCL_IB_GID_INDEX): NCCL's
    /// validGid() (src/transport/net_ib.cc) wants it configured (not all zeros, not bare fe80::)
    /// and not link-local by its own test, which is fe80::/64 only, as the kernel's
    /// rdma_link_local_addr() (include/rdma/ib_addr.h) tests it. A GID elsewhere in fe80::/10 is
    /// link-local by [`Gid::is_link_local`] and still one NCCL would take: gdrdoctor never
    /// proposes it, and says so where NCCL would pick it on its own.
    pub fn nccl_valid(&self) -> bool {
        !self.is_zero() && self.0[..8] != [0xfe, 0x80, 0, 0, 0, 0, 0, 0]
    }

    /// How an operator would name the address in it.
    pub fn family(&self) -> GidFamily {
        if self.is_zero() {
            GidFamily::Unused
        } else if self.ipv4().is_some() {
            GidFamily::Ipv4
        } else if self.is_link_local() {
            GidFamily::LinkLocal
        } else {
            GidFamily::Ipv6
        }
    }

    pub fn address(&self) -> String {
        match self.ipv4() {
            Some(v4) => v4.to_string(),
            None => Ipv6Addr::from(self.0).to_string(),
        }
    }
}

impl std::fmt::Display for Gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

impl Serialize for Gid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GidFamily {
    Unused,
    Ipv4,
    LinkLocal,
    Ipv6,
}

/// `gid_attrs/types/<i>`: `IB/RoCE v1` (IB ports and RoCE v1) or `RoCE v2`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GidType {
    #[serde(rename = "IB/RoCE v1")]
    IbRoceV1,
    #[serde(rename = "RoCE v2")]
    RoceV2,
}

pub fn gid_type(s: &str) -> Option<GidType> {
    match s.trim() {
        "IB/RoCE v1" | "RoCE v1" | "IB" => Some(GidType::IbRoceV1),
        "RoCE v2" => Some(GidType::RoceV2),
        _ => None,
    }
}

/// The IB MTU a RoCE port runs at for a netdev MTU: the largest of 256..4096 that fits in the
/// netdev MTU after the RoCE headers (GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4 =
/// 96). kernel: include/rdma/ib_addr.h iboe_get_mtu(). Seen in the lab: netdev 1500 -> active_mtu
/// 1024.
pub fn roce_active_mtu(netdev_mtu: u32) -> Option<u32> {
    let room = netdev_mtu.checked_sub(96)?;
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= room)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// EFA's link layer is printed as "Unknown" (IB_LINK_LAYER_UNSPECIFIED), a value of its own.
    #[test]
    fn link_layers() {
        assert_eq!(link_layer("InfiniBand\n"), Some(LinkLayer::InfiniBand));
        assert_eq!(link_layer("Ethernet"), Some(LinkLayer::Ethernet));
        assert_eq!(link_layer("Unknown"), Some(LinkLayer::Unknown));
        assert_eq!(link_layer("unknown"), None);
    }

    #[test]
    fn states() {
        // Lab, rxe0 port 1 (the lab guest, as fixtures/lab-switch-pt captured it).
        assert_eq!(numbered_state("4: ACTIVE"), Some((4, "ACTIVE".into())));
        assert_eq!(numbered_state("5: LinkUp"), Some((5, "LinkUp".into())));
        assert_eq!(
            numbered_state("3: Disabled\n"),
            Some((3, "Disabled".into()))
        );
        assert_eq!(numbered_state("ACTIVE"), None);
        assert_eq!(numbered_state("999: X"), None);
        assert_eq!(numbered_state("4: \u{1b}[31m"), None);
    }

    #[test]
    fn rates() {
        assert_eq!(rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(rate_gbps("fast"), None);
        assert_eq!(rate_gbps("1e309 Gb/sec"), None);
    }

    #[test]
    fn gids() {
        // Lab rxe0: gids/0 link-local, gids/1 = 192.0.2.1.
        let ll = Gid::parse("fe80:0000:0000:0000:5054:00ff:fe00:0001").unwrap();
        assert_eq!(ll.family(), GidFamily::LinkLocal);
        let v4 = Gid::parse("0000:0000:0000:0000:0000:ffff:c000:0201").unwrap();
        assert_eq!(v4.family(), GidFamily::Ipv4);
        assert_eq!(v4.address(), "192.0.2.1");
        assert_eq!(v4.to_string(), "0000:0000:0000:0000:0000:ffff:c000:0201");
        assert_eq!(
            Gid::parse("0000:0000:0000:0000:0000:0000:0000:0000")
                .unwrap()
                .family(),
            GidFamily::Unused
        );
        assert_eq!(
            Gid::parse("2001:0db8:0000:0000:0000:0000:0000:0001")
                .unwrap()
                .family(),
            GidFamily::Ipv6
        );
        assert_eq!(Gid::parse("fe80::1"), None);
        // fe80::/10 is link-local (RFC 4291), not only fe80::/64; NCCL's own test is the /64.
        for text in [
            "fe80:0000:0000:0001:0000:0000:0000:0001",
            "febf:ffff:0000:0000:0000:0000:0000:0001",
            "fea0:0000:0000:0000:0000:0000:0000:0001",
        ] {
            let g = Gid::parse(text).unwrap();
            assert_eq!(g.family(), GidFamily::LinkLocal, "{text}");
            assert!(g.nccl_valid(), "{text}: NCCL's validGid() takes it");
        }
        assert!(!ll.nccl_valid(), "fe80::/64 is what NCCL skips");
        assert!(!Gid::default().nccl_valid());
        assert_eq!(
            Gid::parse("fec0:0000:0000:0000:0000:0000:0000:0001")
                .unwrap()
                .family(),
            GidFamily::Ipv6,
            "fec0:: is past fe80::/10"
        );
        assert_eq!(Gid::parse("zzzz:0000:0000:0000:0000:0000:0000:0000"), None);
        assert_eq!(gid_type("RoCE v2"), Some(GidType::RoceV2));
        assert_eq!(gid_type("IB/RoCE v1"), Some(GidType::IbRoceV1));
        assert_eq!(gid_type("RoCE v3"), None);
    }

    #[test]
    fn active_mtu() {
        assert_eq!(roce_active_mtu(1500), Some(1024));
        assert_eq!(roce_active_mtu(9000), Some(4096));
        assert_eq!(roce_active_mtu(4200), Some(4096));
        assert_eq!(roce_active_mtu(4192), Some(4096));
        assert_eq!(roce_active_mtu(4191), Some(2048));
        assert_eq!(roce_active_mtu(68), None);
    }
}
