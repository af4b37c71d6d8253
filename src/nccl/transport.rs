//! What NCCL makes of the settings of its InfiniBand/RoCE transport and of its socket interface
//! list (issue 28), read from its sources (NVIDIA/nccl, the tags named at each item). Pure:
//! strings in, meanings out; `nccl-config` judges them against the node.
//!
//! Every one of them is an integer parameter (`NCCL_PARAM`, src/include/param.h) read once by
//! `ncclLoadParam` (src/misc/param.cc): `strtoll(value, NULL, 0)`, an empty value or one that
//! overflows (ERANGE) giving the default; text without digits reads as 0. NCCL checks none of
//! the ranges below itself: it hands the number to libibverbs as it is.

use super::params::nccl_int;

/// The transport settings shown and judged, in the order a report lists them, each with what
/// it does.
pub const PARAMS: &[(&str, &str)] = &[
    (
        "NCCL_SOCKET_IFNAME",
        "the IP interfaces NCCL bootstraps over and takes its InfiniBand/RoCE transport's address from",
    ),
    (
        "NCCL_IB_TIMEOUT",
        "the local ACK timeout of NCCL's queue pairs, 4.096 us * 2^N",
    ),
    (
        "NCCL_IB_RETRY_CNT",
        "how often a queue pair retransmits before it fails",
    ),
    (
        "NCCL_IB_QPS_PER_CONNECTION",
        "the queue pairs of each connection, per NIC",
    ),
    ("NCCL_IB_SL", "the service level of NCCL's queue pairs"),
    (
        "NCCL_IB_TC",
        "the traffic class of NCCL's RoCE packets (DSCP = TC >> 2)",
    ),
    (
        "NCCL_IB_FIFO_TC",
        "the traffic class of NCCL's RoCE control messages",
    ),
    (
        "NCCL_IB_ADAPTIVE_ROUTING",
        "NCCL's send mode for fabrics that route adaptively",
    ),
    (
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "PCIe Relaxed Ordering on the buffers NCCL registers with the verbs (IBV_ACCESS_RELAXED_ORDERING)",
    ),
    (
        "NCCL_P2P_LEVEL",
        "the farthest two GPUs of the node may be for NCCL to move data between them peer to peer",
    ),
];

/// NCCL_IB_PCI_RELAXED_ORDERING's default: 2, Relaxed Ordering where the verbs offer it.
pub const RELAXED_DEFAULT: i64 = 2;

/// `NCCL_IB_GDR_LEVEL`: read by NCCL 2.3 and earlier only (src/transport/net_ib.cu, v2.3.7-1);
/// from 2.4 `NCCL_NET_GDR_LEVEL` (src/transport/net.cu, v2.4.2-1) took its place.
pub const LEFTOVER_GDR_LEVEL: &str = "NCCL_IB_GDR_LEVEL";

/// One integer parameter as `ncclLoadParam` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reading {
    /// The number NCCL uses.
    pub value: i64,
    /// The whole text was that number (`7`, not `7 retries`, `seven` or `08`).
    pub whole: bool,
    /// NCCL keeps its default: the value is empty, or too large for strtoll (ERANGE).
    pub defaulted: bool,
}

/// `text` as NCCL reads an integer parameter whose default is `default`.
pub fn read(text: &str, default: i64) -> Reading {
    if text.is_empty() {
        return Reading {
            value: default,
            whole: false,
            defaulted: true,
        };
    }
    let (value, whole) = nccl_int(text);
    // strtoll saturates and sets ERANGE, and ncclLoadParam then keeps the default.
    if value == i64::MAX || value == -i64::MAX {
        return Reading {
            value: default,
            whole,
            defaulted: true,
        };
    }
    Reading {
        value,
        whole,
        defaulted: false,
    }
}

/// NCCL's default `NCCL_IB_TIMEOUT`: 20 since 2.23 (18 from 2.14, 14 before;
/// src/transport/net_ib/connect.cc `IbTimeout`).
pub const TIMEOUT_DEFAULT: i64 = 20;
/// NCCL's default `NCCL_IB_RETRY_CNT`, every release: 7, the most the field holds.
pub const RETRY_DEFAULT: i64 = 7;
/// `NCCL_IB_QPS_PER_CONNECTION`'s default, every release.
pub const QPS_DEFAULT: i64 = 1;
/// The queue pairs one connection holds: `NCCL_IB_MAX_QPS` (src/transport/net_ib/common.h),
/// the size of the fixed arrays NCCL fills without checking the count.
pub const MAX_QPS: i64 = 128;

/// What the verbs local ACK timeout does with `n`: the IBTA's 5-bit field (0-31, 4.096 us *
/// 2^n; 0 is "wait forever"), set by NCCL on every queue pair as it is
/// (`ncclIbQpRts`, `qpAttr.timeout`, an 8-bit field in libibverbs). mlx5 keeps the low 5 bits
/// (drivers/infiniband/hw/mlx5/qp.c `mlx5_set_path`: `ackto_lt = timeout << 3` in a byte,
/// later `MLX5_SET(ads, path, ack_timeout, ...)`), so 32 is 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timeout {
    /// 0: a queue pair never times out, so a lost packet or ACK is never retransmitted.
    Infinite,
    /// Outside 0-31: not a value of the field.
    OutOfRange,
    /// The time a queue pair waits for an ACK before it retransmits.
    Seconds(f64),
}

pub fn timeout(n: i64) -> Timeout {
    match n {
        0 => Timeout::Infinite,
        1..=31 => Timeout::Seconds(4.096e-6 * (1u64 << n) as f64),
        _ => Timeout::OutOfRange,
    }
}

/// A duration as a person reads it: `4.3 s`, `268 ms`, `17 us`, `2.4 h`.
pub fn duration(s: f64) -> String {
    if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else if s >= 1.0 {
        format!("{s:.1} s")
    } else if s >= 1e-3 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{:.0} us", s * 1e6)
    }
}

/// The IBTA's 3-bit retry count: 0-7 (`qpAttr.retry_cnt`).
pub fn retry_in_range(n: i64) -> bool {
    (0..=7).contains(&n)
}

/// The service levels a port's link layer has: InfiniBand's SL is 4 bits (0-15); on RoCE it is
/// the 802.1p priority (PCP) of VLAN-tagged frames, 3 bits (mlx5 keeps `sl & 7` for a RoCE
/// path, `sl & 0xf` for an InfiniBand one: drivers/infiniband/hw/mlx5/qp.c `mlx5_set_path`).
pub fn sl_max(infiniband: bool) -> i64 {
    if infiniband { 15 } else { 7 }
}

/// NCCL's "not set" for `NCCL_IB_SL`, `NCCL_IB_TC` and `NCCL_IB_FIFO_TC` since 2.26 (-1: the
/// communicator's traffic class if the application gave one, else 0); before 2.26 the default
/// of `NCCL_IB_SL` and `NCCL_IB_TC` was 0, and of `NCCL_IB_FIFO_TC` 0 in 2.22-2.23.
pub const UNSET: i64 = -1;

/// A traffic class NCCL stores: 8 bits (`uint8_t tc` of its connection metadata and
/// `grh.traffic_class`), -1 meaning unset.
pub fn tc_in_range(n: i64) -> bool {
    n == UNSET || (0..=255).contains(&n)
}

/// `NCCL_IB_ADAPTIVE_ROUTING` (src/transport/net_ib/init.cc): -2 (the default) leaves NCCL's own
/// choice, on for InfiniBand ports and off for RoCE ones; any other value is the setting for
/// every port, non-zero meaning on.
pub const AR_DEFAULT: i64 = -2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings_as_ncclloadparam_makes_them() {
        assert_eq!(read("22", TIMEOUT_DEFAULT).value, 22);
        assert_eq!(read("", TIMEOUT_DEFAULT).value, TIMEOUT_DEFAULT);
        let r = read("abc", TIMEOUT_DEFAULT);
        assert_eq!((r.value, r.whole, r.defaulted), (0, false, false));
        assert_eq!(read("0x10", 0).value, 16);
        let r = read("99999999999999999999", TIMEOUT_DEFAULT);
        assert_eq!((r.value, r.defaulted), (TIMEOUT_DEFAULT, true));
    }

    #[test]
    fn timeouts() {
        assert_eq!(timeout(0), Timeout::Infinite);
        assert_eq!(timeout(32), Timeout::OutOfRange);
        assert_eq!(timeout(-1), Timeout::OutOfRange);
        let Timeout::Seconds(s) = timeout(20) else {
            panic!()
        };
        assert_eq!(duration(s), "4.3 s");
        let Timeout::Seconds(s) = timeout(31) else {
            panic!()
        };
        assert_eq!(duration(s), "2.4 h");
        let Timeout::Seconds(s) = timeout(1) else {
            panic!()
        };
        assert_eq!(duration(s), "8 us");
        assert!(retry_in_range(0) && retry_in_range(7) && !retry_in_range(8));
        assert!(tc_in_range(-1) && tc_in_range(255) && !tc_in_range(256) && !tc_in_range(-2));
    }
}
