//! `NCCL_SOCKET_IFNAME` against the node's interfaces (`/sys/class/net`, read through the root,
//! so a capture is judged as the node was). NCCL takes the interfaces whose names its list
//! selects, that are running and have an IPv4 or IPv6 address (src/os/linux.cc
//! `ncclOsFindInterfaces`; running since 2.28), bootstraps over the first
//! (src/bootstrap.cc `bootstrapNetInit`) and gives its InfiniBand/RoCE transport that address
//! (src/transport/net_ib/init.cc). A list that selects none fails both: "Bootstrap : no socket
//! interface found", "NET/IB : No IP interface found" (issue 28: `bogus0` passed before).

use super::remove_or;
use super::{CONF_LINE_IGNORED, SOCKET_IFNAME_DOWN, SOCKET_IFNAME_UNMATCHED};
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
        .collect();
    Judged::Means(format!(
        "it selects {taken}{}; NCCL bootstraps over the first of them that has an IPv4 or IPv6 address (addresses are not in sysfs: `ip -br addr` shows them)",
        if skipped.is_empty() {
            String::new()
        } else {
            format!(" and skips {}, not up", skipped.join(", "))
        }
    ))
}
