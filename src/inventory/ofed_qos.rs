//! MLNX_OFED's QoS files for a RoCE port, where the driver has them (the upstream mlx5 driver
//! has none: there, dcbnl's answer is the whole story):
//! - `/sys/class/infiniband/DEV/tc/PORT/traffic_class`: the verbs-wide traffic class override,
//!   `Global tclass=106` once set (empty, or absent, when not); it rewrites the traffic class of
//!   QPs the kernel creates, not of DevX/DOCA ones;
//! - `/sys/class/net/IF/qos/trust`: `pcp` or `dscp` (older OFED);
//! - `/sys/class/net/IF/ecn/roce_rp/enable/P` and `ecn/roce_np/enable/P`: ECN reaction and
//!   notification per priority (`0`/`1`); `ecn/roce_np/cnp_dscp`, `ecn/roce_np/cnp_802p_prio`.
//!
//! Sources: Mellanox/network-operator#269 (the commands an operator ran: `mlnx_qos --trust=dscp
//! --pfc=0,0,0,1,0,0,0,0`, `echo 106 > /sys/class/infiniband/mlx5_0/tc/1/traffic_class`,
//! `echo 1 > /sys/class/net/IF/ecn/roce_np/enable/3`, `echo 48 > .../ecn/roce_np/cnp_dscp`),
//! NVIDIA's RoCE configuration guides for MLNX_OFED.

use crate::model::Fact;
use crate::root::Root;

#[derive(Debug, Clone, Default)]
pub struct OfedQos {
    /// The override's value, when the file says `Global tclass=N`; `None` with the file absent
    /// or saying nothing.
    pub tclass: Option<Fact<u8>>,
    pub trust: Option<Fact<String>>,
    /// ECN per priority, where the files exist: (reaction point, notification point).
    pub ecn: Vec<(u8, Option<bool>, Option<bool>)>,
    pub cnp_dscp: Option<Fact<u8>>,
    pub cnp_prio: Option<Fact<u8>>,
}

impl OfedQos {
    /// Whether any OFED file was found.
    pub fn present(&self) -> bool {
        self.tclass.is_some() || self.trust.is_some() || !self.ecn.is_empty()
    }
}

/// A file that exists, read and parsed; `None` when it does not exist.
fn optional<T>(root: &Root, path: String, parse: impl Fn(&str) -> Option<T>) -> Option<Fact<T>> {
    let f = Fact::read(root, path, parse);
    (!f.is_missing()).then_some(f)
}

/// `Global tclass=106` -> 106. An empty file (no override) is `None`.
pub fn parse_tclass(s: &str) -> Option<u8> {
    let t = s.trim();
    let v = t.strip_prefix("Global tclass=").unwrap_or(t);
    v.trim().parse().ok()
}

pub fn read(root: &Root, device: &str, port: u32, netdev: Option<&str>) -> OfedQos {
    let tclass = optional(
        root,
        format!("/sys/class/infiniband/{device}/tc/{port}/traffic_class"),
        parse_tclass,
    )
    .filter(|f| f.value().is_some() || f.raw.as_ref().is_ok_and(|r| !r.trim().is_empty()));
    let Some(ifname) = netdev else {
        return OfedQos {
            tclass,
            ..OfedQos::default()
        };
    };
    let net = format!("/sys/class/net/{ifname}");
    let trust = optional(root, format!("{net}/qos/trust"), |s| {
        let t = s.trim();
        matches!(t, "pcp" | "dscp").then(|| t.to_owned())
    });
    let ecn = if root.is_dir(&format!("{net}/ecn/roce_rp/enable")) {
        let flag = |path: String| {
            root.read_text(&path).ok().and_then(|s| match s.trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            })
        };
        (0..8u8)
            .map(|p| {
                (
                    p,
                    flag(format!("{net}/ecn/roce_rp/enable/{p}")),
                    flag(format!("{net}/ecn/roce_np/enable/{p}")),
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    let number = |s: &str| s.trim().parse::<u8>().ok();
    OfedQos {
        tclass,
        trust,
        ecn,
        cnp_dscp: optional(root, format!("{net}/ecn/roce_np/cnp_dscp"), number),
        cnp_prio: optional(root, format!("{net}/ecn/roce_np/cnp_802p_prio"), number),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_override_as_the_driver_prints_it() {
        assert_eq!(super::parse_tclass("Global tclass=106\n"), Some(106));
        assert_eq!(super::parse_tclass("106"), Some(106));
        assert_eq!(super::parse_tclass(""), None);
        assert_eq!(super::parse_tclass("Global tclass=999"), None);
    }
}
