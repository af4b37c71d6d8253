//! What a failure between two nodes means: a rail impossible before any packet (link layers,
//! GID families), a connect that found no way to the peer's GID, a completion error named by
//! what it says of the peer; and the same failure as the other node sees it.

use super::Endpoint;
use crate::ffi::ibverbs::Gid;
use crate::gdr::engine::Failed;
use crate::gdr::{Failure, FailureKind};

pub(super) fn failure(
    kind: FailureKind,
    step: impl Into<String>,
    message: impl Into<String>,
) -> Failure {
    Failure {
        kind,
        step: step.into(),
        message: message.into(),
    }
}

pub(super) fn from_failed((kind, step, message): Failed) -> Failure {
    failure(kind, step, message)
}

/// The same failure, as seen from the other node.
pub(super) fn on_peer(f: &Failure, peer: &str) -> Failure {
    failure(f.kind, format!("{} (on {peer})", f.step), f.message.clone())
}

/// What makes a rail impossible before a packet is sent, named.
pub(super) fn compatible(mine: &Endpoint, theirs: &Endpoint, peer_host: &str) -> Option<Failure> {
    if mine.link_layer != theirs.link_layer {
        return Some(failure(
            FailureKind::QpFailed,
            "rail pairing",
            format!(
                "this port is {}, {peer_host}'s is {}: no path between them (pair rails of the same fabric: NCCL_IB_HCA or --rails)",
                mine.link_layer, theirs.link_layer
            ),
        ));
    }
    if let (Some(a), Some(b)) = (mine.gid, theirs.gid) {
        let (fa, fb) = (gid_family(&a), gid_family(&b));
        if fa != fb {
            return Some(failure(
                FailureKind::QpFailed,
                "GID",
                format!(
                    "this side's GID {} (index {}) is {fa}, {peer_host}'s {} (index {}) is {fb}: RoCE v2 cannot route between the two families (pin the same kind of GID on both: --gid-index, NCCL_IB_GID_INDEX)",
                    gid_text(&a),
                    mine.gid_index.map(|i| i.to_string()).unwrap_or_default(),
                    gid_text(&b),
                    theirs.gid_index.map(|i| i.to_string()).unwrap_or_default()
                ),
            ));
        }
    }
    None
}

/// A GID as an operator reads it: `::ffff:10.0.0.1` for the IPv4 ones RoCE v2 uses.
pub(super) fn gid_text(g: &[u8; 16]) -> String {
    match Gid(*g).ipv4() {
        Some(v4) => format!("::ffff:{v4}"),
        None => Gid(*g).to_string(),
    }
}

/// `IPv4`, `IPv6 link-local` or `IPv6`: what a RoCE GID's address is, by the program's one
/// rule (crate::parse::rdma::Gid::family).
pub(super) fn gid_family(g: &[u8; 16]) -> &'static str {
    use crate::parse::rdma::GidFamily;
    match Gid(*g).family() {
        GidFamily::Ipv4 => "IPv4",
        GidFamily::LinkLocal => "IPv6 link-local",
        GidFamily::Ipv6 => "IPv6",
        GidFamily::Unused => "unused (all zeros)",
    }
}

/// A connect that failed at RTR on RoCE: the kernel could not resolve the peer's GID to a MAC
/// address. It resolves it with the rail's netdev as the output interface, and a route lookup
/// bound to an interface that finds no route assumes the address is on that link (seen in the
/// lab, tests/lab/scenarios/two-node-faults.sh): a missing route alone does not fail, the
/// rails then work if they share a segment. What fails is the neighbour (ARP) request nobody
/// answers, and the kernel gives up after about a second: ETIMEDOUT. ENETUNREACH (a route
/// that says unreachable) is the other answer.
pub(super) fn explain_connect(f: Failure, theirs: &Endpoint, peer_host: &str) -> Failure {
    if f.message.contains("to RTR") && theirs.gid.is_some() {
        let gid = theirs.gid.map(|g| gid_text(&g)).unwrap_or_default();
        let why = if f.message.contains("os error 110") || f.message.contains("timed out") {
            format!(
                "this node found no MAC address for {peer_host}'s GID {gid}: nobody on this rail's link answered the kernel's ARP (neighbour) request for it within about a second (the two rails are on different subnets of a routed fabric and this node has no route to the peer's, they are on different VLANs or segments, or {peer_host}'s rail interface does not answer)"
            )
        } else {
            format!(
                "this node cannot reach {peer_host}'s GID {gid} (no route to its subnet from this port's GID: rails on different subnets, or the peer's address is not on this rail's network)"
            )
        };
        return failure(f.kind, f.step, format!("{}: {why}", f.message));
    }
    f
}

/// A completion error, with what it means between two nodes.
pub(super) fn explain_completion(f: Failure, peer_host: &str) -> Failure {
    let why = if f.message.contains("IBV_WC_RETRY_EXC_ERR") {
        Some(format!(
            "{peer_host}'s NIC never acknowledged: its GID is not reachable on this rail, a switch port on the path is down, or the path drops packets this large (MTU)"
        ))
    } else if f.message.contains("IBV_WC_REM_ACCESS_ERR") {
        Some(format!(
            "{peer_host}'s NIC refused the WRITE into its buffer: its registration (rkey, address, length or access flags) does not cover it"
        ))
    } else if f.message.contains("IBV_WC_RNR_RETRY_EXC_ERR") {
        Some(format!("{peer_host}'s queue pair was not ready to receive"))
    } else if f.kind == FailureKind::Timeout {
        Some(format!(
            "no completion and no error: packets to {peer_host} vanish (a path MTU larger than a link carries, or PFC pausing the link)"
        ))
    } else {
        None
    };
    match why {
        Some(w) => failure(f.kind, f.step, format!("{}: {w}", f.message)),
        None => f,
    }
}
