//! MLNX_OFED's QoS files for a RoCE port, where the driver has them (the upstream mlx5 driver
//! has none: there, dcbnl's answer is the whole story):
//! - `/sys/class/infiniband/DEV/tc/PORT/traffic_class`: the verbs-wide traffic class override,
//!   `Global tclass=106` once set (empty, or absent, when not); it rewrites the traffic class of
//!   QPs the kernel creates, not of DevX/DOCA ones;
//! - `/sys/class/net/IF/qos/trust`: `pcp` or `dscp` (older OFED);
//! - `/sys/class/net/IF/qos/dscp2prio`: the DSCP -> priority map of older OFED, whose mlx5 put no
//!   DSCP entries in dcbnl's APP table; read in the lines `mlnx_qos -i IF` prints it with
//!   (`prio:3 dscp:31,30,29,28,27,26,25,24,`, under a `dscp2prio mapping:` header), the only
//!   published form of it found; a file in another form is unknown, named, never guessed at.
//!   (OFED's `qos/prio2buffer` is not read: the same map is in dcbnl's buffer reply, which
//!   MLNX_OFED's mlx5 answers as the upstream one does.)
//! - `/sys/class/net/IF/ecn/roce_rp/enable/P` and `ecn/roce_np/enable/P`: ECN reaction and
//!   notification per priority (`0`/`1`); `ecn/roce_np/cnp_dscp`, `ecn/roce_np/cnp_802p_prio`.
//!
//!
//! The upstream mlx5 driver has no such files; the CNPs' DSCP is in its root-only debugfs,
//! `/sys/kernel/debug/mlx5/PCI/cc_params/np_cnp_dscp` (drivers/infiniband/hw/mlx5/cong.c: one
//! decimal number), read where MLNX_OFED's `cnp_dscp` is absent. A run as another user reads
//! "permission denied" there: the CNPs' priority is then unknown, and said so.
//!
//! Sources: Mellanox/network-operator#269 (the commands an operator ran: `mlnx_qos --trust=dscp
//! --pfc=0,0,0,1,0,0,0,0`, `echo 106 > /sys/class/infiniband/mlx5_0/tc/1/traffic_class`,
//! `echo 1 > /sys/class/net/IF/ecn/roce_np/enable/3`, `echo 48 > .../ecn/roce_np/cnp_dscp`),
//! NVIDIA's RoCE configuration guides for MLNX_OFED.

use crate::model::Fact;
use crate::root::Root;

/// `(dscp, priority)` pairs, by DSCP.
pub type DscpMap = Vec<(u8, u8)>;

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
    /// Older OFED's DSCP -> priority map.
    pub dscp2prio: Option<Fact<DscpMap>>,
    /// The upstream mlx5 driver's CNP DSCP (debugfs `cc_params/np_cnp_dscp`), read only where
    /// OFED's `cnp_dscp` is absent; `None` when the file is absent too (debugfs not mounted, not
    /// mlx5).
    pub cc_cnp_dscp: Option<Fact<u8>>,
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

/// `dscp2prio mapping:` then `prio:P dscp:D,D,...,` lines -> `(dscp, priority)` pairs by DSCP.
/// Any other line, a DSCP over 63, a priority over 7, a DSCP given twice or no pair at all is
/// not the map: `None`.
pub fn parse_dscp2prio(s: &str) -> Option<DscpMap> {
    let mut pairs: Vec<(u8, u8)> = Vec::new();
    for line in s.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line == "dscp2prio mapping:" || line == "dscp2prio:" {
            continue;
        }
        let (prio, dscps) = line.strip_prefix("prio:")?.split_once(" dscp:")?;
        let prio: u8 = prio.trim().parse().ok().filter(|p| *p < 8)?;
        // A priority no DSCP maps to is listed with nothing after `dscp:`.
        let dscps = dscps.trim().trim_end_matches(',');
        for d in dscps.split(',').filter(|_| !dscps.is_empty()) {
            let d: u8 = d.trim().parse().ok().filter(|d| *d < 64)?;
            if pairs.iter().any(|(x, _)| *x == d) {
                return None;
            }
            pairs.push((d, prio));
        }
    }
    pairs.sort_unstable();
    (!pairs.is_empty()).then_some(pairs)
}

/// `Global tclass=106` -> 106. An empty file (no override) is `None`.
pub fn parse_tclass(s: &str) -> Option<u8> {
    let t = s.trim();
    let v = t.strip_prefix("Global tclass=").unwrap_or(t);
    v.trim().parse().ok()
}

/// `mlx5_pci`: the PCI function of an mlx5 device, whose debugfs may hold `cc_params`.
pub fn read(
    root: &Root,
    device: &str,
    port: u32,
    netdev: Option<&str>,
    mlx5_pci: Option<&str>,
) -> OfedQos {
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
    let cnp_dscp = optional(root, format!("{net}/ecn/roce_np/cnp_dscp"), number);
    let cc_cnp_dscp = match (&cnp_dscp, mlx5_pci) {
        (None, Some(pci)) => optional(
            root,
            format!("/sys/kernel/debug/mlx5/{pci}/cc_params/np_cnp_dscp"),
            |s| number(s).filter(|d| *d < 64),
        ),
        _ => None,
    };
    OfedQos {
        tclass,
        trust,
        ecn,
        cnp_dscp,
        cnp_prio: optional(root, format!("{net}/ecn/roce_np/cnp_802p_prio"), number),
        dscp2prio: optional(root, format!("{net}/qos/dscp2prio"), parse_dscp2prio),
        cc_cnp_dscp,
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

    /// The map in the lines `mlnx_qos -i eth4 --trust dscp` printed in att/netarbiter's
    /// nvmf/OUTPUTSAMPLE.setup-nic-lossless-layer3.sh.md (the firmware default, DSCP >> 3).
    #[test]
    fn the_dscp_map_as_mlnx_qos_prints_it() {
        let text = "dscp2prio mapping:\n\tprio:0 dscp:07,06,05,04,03,02,01,00,\n\tprio:1 dscp:15,14,13,12,11,10,09,08,\n\tprio:2 dscp:23,22,21,20,19,18,17,16,\n\tprio:3 dscp:31,30,29,28,27,26,25,24,\n\tprio:4 dscp:39,38,37,36,35,34,33,32,\n\tprio:5 dscp:47,46,45,44,43,42,41,40,\n\tprio:6 dscp:55,54,53,52,51,50,49,48,\n\tprio:7 dscp:63,62,61,60,59,58,57,56,\n";
        let map = super::parse_dscp2prio(text).unwrap();
        assert_eq!(map.len(), 64);
        assert!(map.iter().all(|(d, p)| *p == d >> 3), "{map:?}");
        assert_eq!(map[26], (26, 3));
        let moved = super::parse_dscp2prio("prio:3 dscp:\nprio:4 dscp:26,\n").unwrap();
        assert_eq!(moved, vec![(26, 4)]);
        // Not the map: another layout, out of range, twice, nothing.
        for bad in [
            "",
            "dscp2prio mapping:\n",
            "{26,3}\n",
            "prio:8 dscp:26,\n",
            "prio:3 dscp:64,\n",
            "prio:3 dscp:26,\nprio:4 dscp:26,\n",
            "prio:3 dscp:2x,\n",
        ] {
            assert_eq!(super::parse_dscp2prio(bad), None, "{bad:?}");
        }
    }
}
