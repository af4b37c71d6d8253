//! `NCCL_SOCKET_IFNAME` against the node's interfaces (`/sys/class/net`, read through the root,
//! so a capture is judged as the node was). NCCL takes the interfaces whose names its list
//! selects, that are running and have an IPv4 or IPv6 address (src/os/linux.cc
//! `ncclOsFindInterfaces`; running since 2.28), bootstraps over the first
//! (src/bootstrap.cc `bootstrapNetInit`) and gives its InfiniBand/RoCE transport that address
//! (src/transport/net_ib/init.cc). A list that selects none fails both: "Bootstrap : no socket
//! interface found", "NET/IB : No IP interface found" (issue 28: `bogus0` passed before).

use super::remove_or;
use super::{
    CONF_LINE_IGNORED, SOCKET_IFNAME_DOWN, SOCKET_IFNAME_LOOPBACK, SOCKET_IFNAME_NO_ADDRESS,
    SOCKET_IFNAME_UNMATCHED,
};
use crate::inventory::Inventory;
use crate::inventory::nccl::Setting;
use crate::inventory::net::{CLASS_NET, NetIf};
use crate::model::Finding;
use crate::nccl::params::IfList;

/// What NCCL's own pick is when it has no list (src/misc/socket.cc `ncclFindInterfaces`).
const NCCL_PICKS: &str =
    "ib* first, then any interface but docker*, lo and virbr*, then docker*, lo, virbr*";

/// Whether NCCL counts the interface as running: the kernel sets IFF_RUNNING when the
/// operational state is up or unknown (net/core/dev.c `dev_get_flags`, `netif_oper_up`):
/// loopback and some virtual interfaces say `unknown`.
fn running(n: &NetIf) -> bool {
    n.operstate
        .value()
        .is_some_and(|s| s == "up" || s == "unknown")
}

/// The loopback interface (ARPHRD_LOOPBACK 772, or `lo` where the type could not be read).
fn loopback(n: &NetIf) -> bool {
    n.kind.value().map_or(n.name == "lo", |k| *k == 772)
}

/// Known to have no address (the root's /proc/net read, and nothing on it there).
fn no_address(n: &NetIf) -> bool {
    n.addressed.as_ref().is_some_and(|a| !a.any())
}

fn state(n: &NetIf) -> String {
    format!(
        "{} ({})",
        n.name,
        n.operstate
            .value()
            .map(String::as_str)
            .unwrap_or("state unknown")
    )
}

pub(super) fn judge(s: &Setting, inv: &Inventory) -> super::Judged {
    use super::Judged;
    let subject = format!("{}={}", s.name, s.value);
    let from = format!("{}={} from {}", s.name, s.value, s.origin.describe());
    // NCCL reads the list only when it is longer than one character (`strlen(env) > 1`).
    if s.value.len() <= 1 {
        return Judged::Problems(vec![
            Finding::warn(
                CONF_LINE_IGNORED,
                subject,
                format!(
                    "{from}: NCCL reads NCCL_SOCKET_IFNAME only when it is longer than one character, so it ignores this value and picks the interface itself ({NCCL_PICKS})"
                ),
            )
            .with([s.evidence()])
            .fix(remove_or(
                s,
                "Name the interface in full (=eth0 for exactly eth0), or remove the line".into(),
                None,
            )),
        ]);
    }
    let all: Vec<&NetIf> = inv.netdevs.iter().collect();
    if all.is_empty() {
        return Judged::Means(format!(
            "gdrdoctor read no interface under {CLASS_NET}, so it cannot say which of them NCCL takes"
        ));
    }
    let list = IfList::parse(&s.value);
    let matched: Vec<&NetIf> = all
        .iter()
        .copied()
        .filter(|n| list.selects(&n.name, None))
        .collect();
    let up: Vec<&NetIf> = matched.iter().copied().filter(|n| running(n)).collect();
    let existing = all.iter().map(|n| state(n)).collect::<Vec<_>>().join(", ");
    let proposal = crate::nccl::socket_ifname(inv).value;
    let ev = |f: Finding| {
        f.with([s.evidence()]).evidence(
            CLASS_NET,
            all.iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        )
    };
    let fix_summary = |what: &str| match &proposal {
        Some(p) => format!(
            "{what}: NCCL_SOCKET_IFNAME={p} (an interface that is up and not an RDMA port's netdev), or remove the line so NCCL picks one"
        ),
        None => format!("{what}, or remove the line so NCCL picks one ({NCCL_PICKS})"),
    };
    if matched.is_empty() {
        return Judged::Problems(vec![
            ev(Finding::fail(
                SOCKET_IFNAME_UNMATCHED,
                subject,
                format!(
                    "{from} matches none of the node's interfaces ({existing}): NCCL finds no socket interface, so its bootstrap fails (\"Bootstrap : no socket interface found\") and its InfiniBand/RoCE transport finds no IP interface (\"NET/IB : No IP interface found\"): every job's communicator fails to start"
                ),
            ))
            .fix(remove_or(
                s,
                fix_summary("Name an interface this node has"),
                proposal.as_deref(),
            )),
        ]);
    }
    let matched_text = matched
        .iter()
        .map(|n| state(n))
        .collect::<Vec<_>>()
        .join(", ");
    if up.is_empty() {
        return Judged::Problems(vec![
            ev(Finding::fail(
                SOCKET_IFNAME_DOWN,
                subject,
                format!(
                    "{from} matches only {matched_text}, which {} not up: NCCL (2.28 and later) takes running interfaces only and finds none, so its bootstrap fails (\"Bootstrap : no socket interface found\"); earlier releases take it and cannot connect over it. The node's interfaces: {existing}",
                    if matched.len() == 1 { "is" } else { "are" }
                ),
            ))
            .fix(remove_or(
                s,
                fix_summary("Bring the interface up (ip link set IF up), or name one that is up"),
                None,
            )),
        ]);
    }
    // NCCL lists interfaces in getifaddrs' order, the kernel's interface index (lo is 1), and
    // bootstraps over the first (src/bootstrap.cc `bootstrapNetInit` asks for one).
    let ev_addr = |f: Finding| {
        up.iter().fold(ev(f), |f, n| match &n.addressed {
            Some(a) => f.evidence(
                crate::inventory::net::PROC_ROUTE,
                format!("{}: {}", n.name, a.shown()),
            ),
            None => f,
        })
    };
    let lo: Vec<&NetIf> = up.iter().copied().filter(|n| loopback(n)).collect();
    if !lo.is_empty() {
        let only = lo.len() == up.len();
        let text = if only {
            format!(
                "{from} selects only {}, the loopback interface (the node's interfaces: {existing}): NCCL bootstraps over 127.0.0.1, which no other node can reach, so every job across nodes fails its bootstrap; jobs within the node alone run",
                state(lo[0])
            )
        } else {
            format!(
                "{from} selects {} among {}: NCCL takes the first in the kernel's interface order, and the loopback interface is the first (index 1), so it bootstraps over 127.0.0.1 and jobs across nodes fail",
                state(lo[0]),
                up.iter().map(|n| state(n)).collect::<Vec<_>>().join(", ")
            )
        };
        let f = if only {
            Finding::fail(SOCKET_IFNAME_LOOPBACK, subject, text)
        } else {
            Finding::warn(SOCKET_IFNAME_LOOPBACK, subject, text)
        };
        return Judged::Problems(vec![ev(f).fix(remove_or(
            s,
            fix_summary("Select the interface other nodes reach this one on, never lo (an exclusion list such as ^ens also selects lo: add lo to it, ^ens,lo)"),
            proposal.as_deref(),
        ))]);
    }
    let addressed: Vec<&NetIf> = up.iter().copied().filter(|n| !no_address(n)).collect();
    if addressed.is_empty() {
        return Judged::Problems(vec![
            ev_addr(Finding::fail(
                SOCKET_IFNAME_NO_ADDRESS,
                subject,
                format!(
                    "{from} selects {}, up but without an IPv4 or IPv6 address: NCCL takes only interfaces that have one, finds none, and its bootstrap fails (\"Bootstrap : no socket interface found\"). The node's interfaces: {existing}",
                    up.iter().map(|n| state(n)).collect::<Vec<_>>().join(", ")
                ),
            ))
            .fix(remove_or(
                s,
                fix_summary("Give the interface its address (the node's network configuration), or name one that has an address"),
                None,
            )),
        ]);
    }
    let up = addressed;
    let missing: Vec<String> = if list.exclude {
        Vec::new()
    } else {
        let names: Vec<&str> = all.iter().map(|n| n.name.as_str()).collect();
        list.unmatched(&names)
            .iter()
            .map(|e| e.name.clone())
            .collect()
    };
    let taken = up.iter().map(|n| state(n)).collect::<Vec<_>>().join(", ");
    if !missing.is_empty() {
        return Judged::Problems(vec![
            ev(Finding::warn(
                SOCKET_IFNAME_UNMATCHED,
                subject,
                format!(
                    "{from} names {} that the node lacks (its interfaces: {existing}); NCCL takes {taken}",
                    missing.join(", ")
                ),
            ))
            .fix(remove_or(
                s,
                "Drop the names this node does not have, or check that no interface is missing (ip link)".into(),
                None,
            )),
        ]);
    }
    let skipped: Vec<String> = matched
        .iter()
        .filter(|n| !running(n))
        .map(|n| state(n))
        .chain(
            matched
                .iter()
                .filter(|n| running(n) && no_address(n))
                .map(|n| format!("{} (no address)", n.name)),
        )
        .collect();
    let addresses = if up.iter().all(|n| n.addressed.is_some()) {
        format!(
            " ({})",
            up.iter()
                .map(|n| format!(
                    "{}: {}",
                    n.name,
                    n.addressed.as_ref().map(|a| a.shown()).unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )
    } else {
        " (addresses are not in sysfs and /proc/net/route could not be read: `ip -br addr` shows them)".to_owned()
    };
    Judged::Means(format!(
        "it selects {taken}{}; NCCL bootstraps over the first of them that has an IPv4 or IPv6 address{addresses}",
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" and skips {}", skipped.join(", "))
        }
    ))
}
