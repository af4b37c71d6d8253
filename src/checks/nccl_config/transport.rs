//! The settings of NCCL's InfiniBand/RoCE transport (issue 28): each shown with its value, where
//! NCCL reads it and what NCCL does with it, or judged where NCCL's reading of it breaks or
//! slows the job. NCCL checks none of these ranges itself (`crate::nccl::transport`): the
//! number goes to libibverbs as it is.

use super::{
    CONF_LINE_IGNORED, IB_GDR_LEVEL_LEFTOVER, IB_QPS_BAD, IB_RELAXED_ORDERING_OFF,
    IB_RETRY_CNT_BAD, IB_SL_BAD, IB_TC_BAD, IB_TIMEOUT_BAD, Judged, P2P_OFF, TRANSPORT_SETTING,
    shown_as, undo,
};
use crate::inventory::nccl::Setting;
use crate::inventory::{Inventory, Port, RdmaDevice};
use crate::model::{Code, Finding};
use crate::nccl::params::HcaList;
use crate::nccl::transport::{self as t, Reading, Timeout};

/// Every transport setting NCCL reads on the node, and a leftover `NCCL_IB_GDR_LEVEL`.
pub(super) fn judge(inv: &Inventory) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, what) in t::PARAMS {
        let Some(s) = inv.nccl.get(name) else {
            continue;
        };
        let judged = match *name {
            "NCCL_SOCKET_IFNAME" => super::ifname::judge(s, inv),
            "NCCL_IB_TIMEOUT" => number(s, t::TIMEOUT_DEFAULT, |n| ib_timeout(s, n, inv)),
            "NCCL_IB_RETRY_CNT" => number(s, t::RETRY_DEFAULT, |n| retry_cnt(s, n)),
            "NCCL_IB_QPS_PER_CONNECTION" => number(s, t::QPS_DEFAULT, |n| qps(s, n)),
            "NCCL_IB_SL" => number(s, t::UNSET, |n| service_level(s, n, inv)),
            "NCCL_IB_TC" | "NCCL_IB_FIFO_TC" => number(s, t::UNSET, |n| traffic_class(s, n, inv)),
            "NCCL_IB_ADAPTIVE_ROUTING" => number(s, t::AR_DEFAULT, adaptive_routing),
            "NCCL_IB_PCI_RELAXED_ORDERING" => {
                number(s, t::RELAXED_DEFAULT, |n| relaxed_ordering(s, n, inv))
            }
            "NCCL_P2P_LEVEL" => p2p_level(s),
            _ => continue,
        };
        match judged {
            Judged::Means(m) => {
                out.push(shown_as(TRANSPORT_SETTING, s, &format!("{what}: {m}"), inv))
            }
            Judged::Problems(p) => out.extend(p),
        }
    }
    if let Some(s) = inv.nccl.get(t::LEFTOVER_GDR_LEVEL) {
        out.push(leftover_gdr_level(s, inv));
    }
    out
}

/// `NAME=value from ORIGIN`, the opening of every message here.
fn from(s: &Setting) -> String {
    format!("{}={} from {}", s.name, s.value, s.origin.describe())
}

fn subject(s: &Setting) -> String {
    format!("{}={}", s.name, s.value)
}

/// An integer setting: `judge` on the number NCCL reads; a text that is not that number whole
/// (`7 retries`, `yes`) is said, with what NCCL makes of it.
fn number(s: &Setting, default: i64, judge: impl FnOnce(i64) -> Judged) -> Judged {
    let r: Reading = t::read(&s.value, default);
    let judged = judge(r.value);
    if r.whole {
        return judged;
    }
    let reads = if r.defaulted {
        format!(
            "NCCL cannot read {:?} as a number and keeps its default, {}",
            s.value, r.value
        )
    } else {
        format!(
            "NCCL reads {:?} as the number {} (strtoll: the digits it starts with, 0 if none)",
            s.value, r.value
        )
    };
    let mut problems = match judged {
        Judged::Means(m) => vec![
            Finding::warn(
                CONF_LINE_IGNORED,
                subject(s),
                format!("{}: {reads}: {m}", from(s)),
            )
            .with([s.evidence()])
            .fix(undo(
                s,
                format!("Write {} as the number NCCL reads: {}", s.name, r.value),
                "None: it states what NCCL already does.",
                Some(&r.value.to_string()),
            )),
        ],
        Judged::Problems(p) => p,
    };
    if let Some(first) = problems.first_mut() {
        if first.code != CONF_LINE_IGNORED.id {
            first.message = format!("{} ({reads})", first.message);
        }
    }
    Judged::Problems(problems)
}

/// A finding about a setting, with its evidence and a fix that removes or rewrites its line.
fn problem(
    code: Code,
    fail: bool,
    s: &Setting,
    message: String,
    fix: &str,
    replacement: Option<&str>,
) -> Judged {
    let f = if fail {
        Finding::fail(code, subject(s), message)
    } else {
        Finding::warn(code, subject(s), message)
    };
    Judged::Problems(vec![f.with([s.evidence()]).fix(undo(
        s,
        fix.to_owned(),
        "Changes how every NCCL job on the node sets up its queue pairs; jobs across nodes should agree on it.",
        replacement,
    ))])
}

/// The smallest NCCL_IB_TIMEOUT taken without a warning: 12, 16.8 ms a try (4.096 us * 2^12).
const SHORT_TIMEOUT: i64 = 12;

fn ib_timeout(s: &Setting, n: i64, inv: &Inventory) -> Judged {
    let fix = "Remove NCCL_IB_TIMEOUT (NCCL's default, 20, waits 4.3 s per try), or set a value from 1 to 31 that fits the fabric's size";
    match t::timeout(n) {
        Timeout::Infinite => problem(
            IB_TIMEOUT_BAD,
            true,
            s,
            format!(
                "{}: NCCL sets a local ACK timeout of 0 on every queue pair, which the verbs read as no timeout at all: a lost packet or ACK is never retransmitted, and a job whose peer is gone hangs instead of failing",
                from(s)
            ),
            fix,
            None,
        ),
        Timeout::OutOfRange => problem(
            IB_TIMEOUT_BAD,
            true,
            s,
            format!(
                "{}: the verbs local ACK timeout is a 5-bit field, 0-31 (4.096 us * 2^N), and NCCL passes {n} to every queue pair unchecked: the driver keeps what fits (mlx5 keeps the low 5 bits, {}{})",
                from(s),
                (n as u8) & 31,
                if (n as u8) & 31 == 0 {
                    ": no timeout at all, so a lost packet hangs the job"
                } else {
                    ""
                }
            ),
            fix,
            None,
        ),
        Timeout::Seconds(wait) => {
            let retry = inv
                .nccl
                .value("NCCL_IB_RETRY_CNT")
                .map(|v| t::read(v, t::RETRY_DEFAULT).value)
                .filter(|r| t::retry_in_range(*r))
                .unwrap_or(t::RETRY_DEFAULT);
            // Under 10 ms a try: a congested or PFC-paused fabric delays an ACK that long, the
            // retries run out, and the job dies with `NET/IB : Got completion ... error 12`
            // (IBV_WC_RETRY_EXC_ERR; NVIDIA/nccl#902 reproduced it by lowering the timeout).
            if n < SHORT_TIMEOUT {
                return problem(
                    IB_TIMEOUT_BAD,
                    false,
                    s,
                    format!(
                        "{}: each try waits only {} for an ACK, and with {retry} retries a queue pair gives up after about {}: a congested or PFC-paused fabric delays ACKs longer than that, so queue pairs run out of retries and jobs fail with \"NET/IB : Got completion ... error 12\" (retry count exceeded) under load (NCCL's default, 20, waits 4.3 s per try)",
                        from(s),
                        t::duration(wait),
                        t::duration(wait * (retry + 1) as f64)
                    ),
                    fix,
                    None,
                );
            }
            Judged::Means(format!(
                "each try waits {} for an ACK, and with {retry} retries a queue pair gives up on a lost peer after about {} (NCCL's default, 20, waits 4.3 s per try)",
                t::duration(wait),
                t::duration(wait * (retry + 1) as f64)
            ))
        }
    }
}

fn retry_cnt(s: &Setting, n: i64) -> Judged {
    let fix = "Remove NCCL_IB_RETRY_CNT (NCCL's default is 7, the most the field holds)";
    if !t::retry_in_range(n) {
        return problem(
            IB_RETRY_CNT_BAD,
            true,
            s,
            format!(
                "{}: the verbs retry count is a 3-bit field, 0-7, and NCCL passes {n} to every queue pair unchecked: what the NIC gets is the driver's cut of it",
                from(s)
            ),
            fix,
            None,
        );
    }
    if n == 0 {
        return problem(
            IB_RETRY_CNT_BAD,
            false,
            s,
            format!(
                "{}: NCCL's queue pairs never retransmit: the first lost packet fails the queue pair (transport retry counter exceeded) and the job with it",
                from(s)
            ),
            fix,
            None,
        );
    }
    Judged::Means(format!(
        "a queue pair retransmits up to {n} time{} before it fails (NCCL's default is 7, the most)",
        if n == 1 { "" } else { "s" }
    ))
}

fn qps(s: &Setting, n: i64) -> Judged {
    let fix =
        "Remove NCCL_IB_QPS_PER_CONNECTION (NCCL's default is 1), or set a value from 1 to 128";
    if n < 1 {
        return problem(
            IB_QPS_BAD,
            true,
            s,
            format!(
                "{}: NCCL creates {n} queue pairs per NIC for each connection and does not check the value: with none it posts to a queue pair that does not exist, and jobs crash or hang",
                from(s)
            ),
            fix,
            None,
        );
    }
    if n > t::MAX_QPS {
        return problem(
            IB_QPS_BAD,
            true,
            s,
            format!(
                "{}: a connection holds at most {} queue pairs (NCCL_IB_MAX_QPS), in arrays NCCL fills without checking the count: {n} writes past their end",
                from(s),
                t::MAX_QPS
            ),
            fix,
            None,
        );
    }
    Judged::Means(format!(
        "each connection uses {n} queue pair{} per NIC, its messages spread over them (more flows for the fabric's ECMP hashing on RoCE; NCCL's default is 1; a NIC NCCL merges from several ports multiplies it, up to {} per connection)",
        if n == 1 { "" } else { "s" },
        t::MAX_QPS
    ))
}

/// The ports NCCL uses: those `NCCL_IB_HCA` selects, all without it.
fn used_ports(inv: &Inventory) -> Vec<(&RdmaDevice, &Port)> {
    let list = inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse);
    inv.rdma
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .filter(|(d, p)| {
            list.as_ref()
                .is_none_or(|l| l.selects(&d.name, Some(p.num)))
        })
        .collect()
}

fn names(ports: &[(&RdmaDevice, &Port)]) -> String {
    ports
        .iter()
        .map(|(d, p)| p.subject(&d.name))
        .collect::<Vec<_>>()
        .join(", ")
}

fn service_level(s: &Setting, n: i64, inv: &Inventory) -> Judged {
    let ports = used_ports(inv);
    let (ib, roce): (Vec<_>, Vec<_>) = ports.iter().partition(|(_, p)| p.is_infiniband());
    let roce: Vec<_> = roce.into_iter().filter(|(_, p)| p.is_ethernet()).collect();
    let fix = "Remove NCCL_IB_SL, or set the service level the fabric's QoS gives NCCL";
    if n == t::UNSET {
        return Judged::Means(
            "unset: the communicator's traffic class if the application gives one, else service level 0".into(),
        );
    }
    if !(0..=15).contains(&n) {
        let b = n as u8;
        return problem(
            IB_SL_BAD,
            true,
            s,
            format!(
                "{}: service levels are 0-15 on InfiniBand and 0-7 (the 802.1p priority) on RoCE, and NCCL passes {n} to every queue pair unchecked: the driver keeps the low bits (mlx5: SL {} on InfiniBand, priority {} on RoCE), not the level meant",
                from(s),
                b & 15,
                b & 7
            ),
            fix,
            None,
        );
    }
    if n > 7 && !roce.is_empty() {
        return problem(
            IB_SL_BAD,
            false,
            s,
            format!(
                "{}: on the RoCE ports NCCL uses ({}) the service level is the 802.1p priority of VLAN-tagged frames, 0-7: mlx5 keeps its low 3 bits, so NCCL's tagged traffic carries priority {}",
                from(s),
                names(&roce),
                n & 7
            ),
            fix,
            None,
        );
    }
    let mut means = Vec::new();
    if !ib.is_empty() {
        means.push(format!(
            "NCCL's InfiniBand queue pairs use service level {n}, which the subnet manager maps to a virtual lane"
        ));
    }
    if !roce.is_empty() {
        means.push(format!(
            "on RoCE it is the 802.1p priority ({n}) of VLAN-tagged frames, which counts under PCP trust; untagged RoCE carries none"
        ));
    }
    if means.is_empty() {
        means.push(format!("NCCL's queue pairs use service level {n}"));
    }
    Judged::Means(means.join("; "))
}

fn traffic_class(s: &Setting, n: i64, inv: &Inventory) -> Judged {
    let fifo = s.name == "NCCL_IB_FIFO_TC";
    let whose = if fifo {
        "NCCL's control messages (the clear-to-send FIFO; NCCL reads it from 2.22)"
    } else {
        "NCCL's RoCE packets"
    };
    if !t::tc_in_range(n) {
        let b = n as u8;
        return problem(
            IB_TC_BAD,
            true,
            s,
            format!(
                "{}: NCCL keeps a traffic class in 8 bits (0-255), so {n} becomes {b}: {whose} carry DSCP {}, not the class meant",
                from(s),
                b >> 2
            ),
            &format!(
                "Remove {}, or set the class the fabric carries lossless (0-255; DSCP = TC >> 2)",
                s.name
            ),
            None,
        );
    }
    if n == t::UNSET {
        return Judged::Means(if fifo {
            "unset: the control messages use NCCL_IB_TC's class".into()
        } else {
            "unset: the communicator's traffic class if the application gives one, else 0 (DSCP 0)"
                .into()
        });
    }
    let used = used_ports(inv);
    let on = if !used.is_empty() && used.iter().all(|(_, p)| p.is_infiniband()) {
        format!(
            "; the ports NCCL uses are InfiniBand ({}), where NCCL does not set it",
            names(&used)
        )
    } else {
        String::new()
    };
    Judged::Means(format!(
        "{whose} carry traffic class {n}: DSCP {} (TC >> 2) and ECN bits {}; the port and the switches must carry DSCP {} on a lossless priority{on}",
        n >> 2,
        n & 3,
        n >> 2
    ))
}

fn adaptive_routing(n: i64) -> Judged {
    Judged::Means(match n {
        t::AR_DEFAULT => {
            "NCCL's own choice: on for InfiniBand ports, off for RoCE ones".to_owned()
        }
        0 => "off on every port: NCCL sends each message as one RDMA write with immediate data (on InfiniBand it is on by default)".to_owned(),
        _ => "on for every port: NCCL sends a message above NCCL_IB_AR_THRESHOLD (8 KiB) as an RDMA write followed by a separate write with immediate data, so that a fabric routing packets adaptively completes it only once all of it has landed".to_owned(),
    })
}

/// NCCL_IB_PCI_RELAXED_ORDERING (src/transport/net_ib: 2, the default, registers with
/// IBV_ACCESS_RELAXED_ORDERING where the verbs have it; 1 insists on it; 0 never). NCCL's own
/// documentation: Relaxed Ordering "can greatly help the performance of InfiniBand networks in
/// virtualized environments" (Azure's NDv4 images set it to 1): off in a VM, a warning.
fn relaxed_ordering(s: &Setting, n: i64, inv: &Inventory) -> Judged {
    match n {
        0 if inv.virtual_pci.is_some() => problem(
            IB_RELAXED_ORDERING_OFF,
            false,
            s,
            format!(
                "{}: NCCL registers its buffers without PCIe Relaxed Ordering on a virtual machine, where the hypervisor's IOMMU and PCIe path serialise strictly ordered writes: NCCL's InfiniBand bandwidth drops (NCCL: Relaxed Ordering \"can greatly help the performance of InfiniBand networks in virtualized environments\")",
                from(s)
            ),
            "Remove NCCL_IB_PCI_RELAXED_ORDERING (NCCL's default, 2, uses Relaxed Ordering where the verbs offer it), or set it to 1 as the cloud's images do",
            None,
        ),
        0 => Judged::Means("off: NCCL registers its buffers strictly ordered (on bare metal the cost is small; in a VM it is large)".to_owned()),
        1 => Judged::Means("forced on: NCCL registers every buffer with IBV_ACCESS_RELAXED_ORDERING and fails where the verbs lack it (rdma-core 28 and later have it)".to_owned()),
        t::RELAXED_DEFAULT => Judged::Means("NCCL's default: Relaxed Ordering where the verbs offer it".to_owned()),
        _ => Judged::Means(format!("{n} is not 0, 1 or 2: NCCL takes any value but 0 and 1 as its default, Relaxed Ordering where the verbs offer it")),
    }
}

/// NCCL_P2P_LEVEL, read as NCCL_NET_GDR_LEVEL is (src/graph/paths.cc `ncclGetLevel`): LOC or 0
/// turns peer-to-peer between the node's GPUs off, NVLink included, so their traffic goes
/// through host memory (the SHM transport); the other levels are shown.
fn p2p_level(s: &Setting) -> Judged {
    use crate::nccl::params::{LevelValue, gdr_level};
    let v = s.value.as_str();
    let off = v == "LOC"
        || matches!(gdr_level(v), LevelValue::Numbered(_))
            && crate::nccl::params::nccl_int(v).0 == 0;
    if off {
        return problem(
            P2P_OFF,
            false,
            s,
            format!(
                "{}: NCCL never moves data between the node's GPUs peer to peer, over NVLink or PCIe: every transfer within the node goes through host memory (the SHM transport), at a fraction of NVLink's bandwidth",
                from(s)
            ),
            "Remove NCCL_P2P_LEVEL (NCCL picks peer-to-peer where the GPUs reach each other), unless a platform known to corrupt P2P needs it (then say why beside the line)",
            None,
        );
    }
    Judged::Means(match v {
        "NVL" | "NVB" => "peer to peer only between GPUs that NVLink joins (NVB: through another GPU's NVLink too); PCIe pairs go through host memory".to_owned(),
        "C2C" => "peer to peer over NVLink and NVLink-C2C only".to_owned(),
        "PIX" | "PXB" | "PXN" | "P2C" | "PHB" | "SYS" => format!("peer to peer between GPUs up to {v} apart (NVLink pairs always)"),
        _ => match gdr_level(v) {
            LevelValue::Numbered(l) => format!("an old-style number: up to {}", l.describe()),
            _ => "not a level NCCL knows (names are upper case): NCCL ignores it and keeps its own choice".to_owned(),
        },
    })
}

/// `NCCL_IB_GDR_LEVEL`, which no release since 2.4 reads.
fn leftover_gdr_level(s: &Setting, inv: &Inventory) -> Finding {
    let now = match inv.nccl.get("NCCL_NET_GDR_LEVEL") {
        Some(n) => format!(
            "NCCL_NET_GDR_LEVEL={} from {} is what NCCL reads",
            n.value,
            n.origin.describe()
        ),
        None => "NCCL_NET_GDR_LEVEL is not set, so NCCL's default (PXB) applies".into(),
    };
    Finding::warn(
        IB_GDR_LEVEL_LEFTOVER,
        subject(s),
        format!(
            "{}: NCCL has not read NCCL_IB_GDR_LEVEL since 2.4, when NCCL_NET_GDR_LEVEL replaced it; {now}",
            from(s)
        ),
    )
    .with([s.evidence()])
    .fix(
        undo(
            s,
            "Remove NCCL_IB_GDR_LEVEL; to change where NCCL uses GPUDirect RDMA, set NCCL_NET_GDR_LEVEL (LOC, PIX, PXB, PHB or SYS)".into(),
            "None: NCCL ignores the line already.",
            None,
        ),
    )
}
