//! Network interfaces (`/sys/class/net`): for `gdrdoctor nccl`'s NCCL_SOCKET_IFNAME, and so that
//! a name no fix script may carry (`$(reboot)`) is seen and refused wherever it appears.

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
}

impl NetIf {
    pub fn is_up(&self) -> bool {
        self.operstate.value().is_some_and(|s| s == "up")
    }
}

pub fn load(root: &Root, problems: &mut Vec<Problem>) -> Vec<NetIf> {
    let mut out = Vec::new();
    for name in list(root, CLASS_NET, problems) {
        let path = format!("{CLASS_NET}/{name}");
        if !is_netdev_name(&name) {
            problems.push(Problem::unsafe_name(path, "interface name"));
            continue;
        }
        let operstate = Fact::read(root, format!("{path}/operstate"), |s| {
            let s = s.trim();
            (!s.is_empty() && s.len() < 32 && s.bytes().all(|b| b.is_ascii_lowercase()))
                .then(|| s.to_owned())
        });
        let kind = Fact::read(root, format!("{path}/type"), int::<u32>);
        let virtual_device = root
            .canonical(&path)
            .map(|real| real.starts_with("/sys/devices/virtual/"))
            .unwrap_or(false);
        out.push(NetIf {
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
