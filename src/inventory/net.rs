//! Network interfaces (`/sys/class/net`): for `gdrdoctor nccl`'s NCCL_SOCKET_IFNAME, and so that
//! a name no fix script may carry (`$(reboot)`) is seen and refused wherever it appears.

use super::rdma::RdmaDevice;
use super::{Fact, Problem, list};
use crate::parse::int;
use crate::root::Root;

pub const CLASS_NET: &str = "/sys/class/net";

#[derive(Debug, Clone)]
pub struct NetIf {
    pub name: String,
    /// `up`, `down`, `unknown` (loopback and some virtual interfaces).
    pub operstate: Fact<String>,
    /// ARPHRD type: 1 Ethernet, 32 InfiniBand (IPoIB), 772 loopback.
    pub kind: Fact<u32>,
    /// Under /sys/devices/virtual: a bridge, bond, veth, tunnel or loopback, not a NIC port.
    pub virtual_device: bool,
    /// What /proc/net says of its addresses; `None` where neither file could be read.
    pub addressed: Option<Addressed>,
}

/// An interface's addresses as far as the root's /proc/net tells them (addresses are not in
/// sysfs): IPv4 by the main table's routes through it (`/proc/net/route`: an address of prefix
/// /N puts its subnet's route there), IPv6 by `/proc/net/if_inet6` (one line an address, its
/// scope: 0x00 global, 0x20 link, 0x10 host). NCCL lists the interfaces that have an address
/// (getifaddrs, src/misc/socket.cc `findInterfaces`): one with none is never taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addressed {
    pub ipv4_routes: usize,
    pub ipv6_global: usize,
    pub ipv6_link: usize,
}

impl Addressed {
    pub fn any(&self) -> bool {
        self.ipv4_routes + self.ipv6_global + self.ipv6_link > 0
    }

    pub fn shown(&self) -> String {
        if !self.any() {
            return format!("no IPv4 route in {PROC_ROUTE} and no IPv6 address in {PROC_INET6}");
        }
        let mut parts = Vec::new();
        if self.ipv4_routes > 0 {
            parts.push(format!(
                "{} IPv4 route(s) in {PROC_ROUTE}",
                self.ipv4_routes
            ));
        }
        if self.ipv6_global > 0 {
            parts.push(format!("{} global IPv6 address(es)", self.ipv6_global));
        }
        if self.ipv6_link > 0 {
            parts.push(format!("{} link-local IPv6 address(es)", self.ipv6_link));
        }
        parts.join(", ")
    }
}

pub const PROC_ROUTE: &str = "/proc/net/route";
pub const PROC_INET6: &str = "/proc/net/if_inet6";

/// `/proc/net/route`'s interface column, a line a route under its header line.
fn route_ifaces(text: &str) -> Vec<&str> {
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

/// `/proc/net/if_inet6`: `(interface, scope)` a line (address, index, prefix, scope, flags, name).
fn inet6(text: &str) -> Vec<(&str, u32)> {
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let [addr, _, _, scope, _, name] = cols[..] else {
                return None;
            };
            (addr.len() == 32).then_some(())?;
            Some((name, u32::from_str_radix(scope, 16).ok()?))
        })
        .collect()
}

impl NetIf {
    pub fn is_up(&self) -> bool {
        self.operstate.value().is_some_and(|s| s == "up")
    }
}

/// Every interface of /sys/class/net. An RDMA port's netdev was read already
/// ([`super::rdma::Netdev`]): its `operstate` is taken from there, so the file is read once.
pub fn load(root: &Root, problems: &mut Vec<Problem>, rdma: &[RdmaDevice]) -> Vec<NetIf> {
    let mut out = Vec::new();
    let route = root.read_text(PROC_ROUTE).ok();
    let v6 = root.read_text(PROC_INET6).ok();
    let routes = route.as_deref().map(route_ifaces);
    let v6 = v6.as_deref().map(inet6);
    let addressed = |name: &str| {
        (routes.is_some() || v6.is_some()).then(|| {
            let on = |scope: u32| {
                v6.iter()
                    .flatten()
                    .filter(|(n, s)| *n == name && *s == scope)
                    .count()
            };
            Addressed {
                ipv4_routes: routes.iter().flatten().filter(|n| **n == name).count(),
                ipv6_global: on(0),
                ipv6_link: on(0x20),
            }
        })
    };
    for name in list(root, CLASS_NET, problems) {
        let path = format!("{CLASS_NET}/{name}");
        if !is_netdev_name(&name) {
            problems.push(Problem::unsafe_name(path, "interface name"));
            continue;
        }
        let parse = |s: &str| {
            let s = s.trim();
            (!s.is_empty() && s.len() < 32 && s.bytes().all(|b| b.is_ascii_lowercase()))
                .then(|| s.to_owned())
        };
        let read = format!("{path}/operstate");
        let known = rdma
            .iter()
            .flat_map(|d| &d.ports)
            .filter_map(|p| p.netdev.as_ref())
            .find(|n| n.operstate.path == read);
        let operstate = match known {
            Some(n) => Fact {
                value: n.operstate.raw.as_deref().ok().and_then(parse),
                raw: n.operstate.raw.clone(),
                path: read,
            },
            None => Fact::read(root, read, parse),
        };
        let kind = Fact::read(root, format!("{path}/type"), int::<u32>);
        let virtual_device = root
            .canonical(&path)
            .map(|real| real.starts_with("/sys/devices/virtual/"))
            .unwrap_or(false);
        out.push(NetIf {
            addressed: addressed(&name),
            name,
            operstate,
            kind,
            virtual_device,
        });
    }
    out
}

/// Interface names: at most 15 bytes, no `/`, no whitespace (kernel: dev_valid_name()). We are
/// stricter, since names end up in paths and fix commands.
pub fn is_netdev_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.@:".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layouts the kernel writes: net/ipv4/fib_trie.c `fib_route_seq_show` (a header, then
    /// `Iface Destination Gateway ...` in hex) and net/ipv6/addrconf.c `if6_seq_show`
    /// (`%pi6 %02x %02x %02x %02x %8s`).
    #[test]
    fn routes_and_ipv6_addresses_by_interface() {
        let route = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
ens3\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
ens3\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(route_ifaces(route), vec!["ens3", "ens3"]);
        let v6 = "fe80000000000000505400fffe123456 02 40 20 80     ens3\n00000000000000000000000000000001 01 80 10 80       lo\nshort 01 80 10 80 lo\n";
        assert_eq!(inet6(v6), vec![("ens3", 0x20), ("lo", 0x10)]);
    }
}
