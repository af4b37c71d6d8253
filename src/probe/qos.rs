//! The kernel's answers on the RoCE ports' netdevs that no file holds: dcbnl's DCB
//! configuration over rtnetlink (`DCB_CMD_IEEE_GET`, and `DCB_CMD_GDCBX` when the IEEE reply
//! has no DCBX mode) and ethtool's pause parameters and driver statistics. All are "get"
//! requests any user may make (net/dcb/dcbnl.c `dcb_doit` asks CAP_NET_ADMIN for the set
//! commands only; net/ethtool/ioctl.c lets anyone get these), each bounded by [`TIMEOUT`].
//!
//! They are asked of the live kernel only. A capture records the answers
//! ([`RECORDED_QOS`], written by `gdrdoctor capture`), and a check of the copy reads them
//! there ([`recorded`]), so that the copy's report is the node's.

use crate::inventory::Inventory;
use crate::model::Problem;
use crate::model::qos::{
    ErrorKind, Ethtool, NetdevQos, Qos, QosAnswers, QueryError, RECORDED_QOS, kept_stat,
};
use crate::parse::dcbnl::{self, Dcb, ReplyError};
use crate::parse::ethtool as pe;
use crate::root::Root;
use crate::sys::ethtool as se;
use crate::sys::netlink;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// How long the kernel has to answer one dcbnl request (it answers within the send: this
/// only bounds a kernel that does not).
pub const TIMEOUT: Duration = Duration::from_secs(1);

/// The most driver statistics read of one netdev: mlx5 on a large host has several thousand
/// (about a hundred per channel). A driver claiming more is refused before anything is
/// allocated for it.
pub const MAX_STATS: u32 = 1 << 16;

/// The netdevs of the RoCE ports (an RDMA port on Ethernet with a netdev), each once.
pub fn roce_netdevs(inv: &Inventory) -> BTreeSet<String> {
    inv.rdma
        .iter()
        .flat_map(|d| &d.ports)
        .filter(|p| p.is_ethernet())
        .filter_map(|p| p.netdev.as_ref().map(|n| n.name.clone()))
        .collect()
}

/// What the runs know of the netdevs' QoS: asked of the live kernel for the RoCE ports'
/// netdevs (`ask`), or as a capture recorded it. What stops a recorded file being read is a
/// problem of the inventory, naming it.
pub fn load(root: &Root, inv: &mut Inventory, ask: bool) -> Qos {
    if !root.is_live() {
        return recorded(root, &mut inv.problems);
    }
    if !ask {
        return Qos::NotRead("not asked".into());
    }
    Qos::Live(read(roce_netdevs(inv).iter().map(String::as_str)))
}

/// The answers for each of `netdevs`.
pub fn read<'a>(netdevs: impl IntoIterator<Item = &'a str>) -> QosAnswers {
    QosAnswers {
        netdevs: netdevs
            .into_iter()
            .map(|n| (n.to_owned(), read_netdev(n)))
            .collect(),
    }
}

/// One netdev's answers.
pub fn read_netdev(netdev: &str) -> NetdevQos {
    NetdevQos {
        dcb: dcb(netdev),
        ethtool: ethtool(netdev),
    }
}

/// Each request its own sequence number, so that a reply answers the request it follows.
fn next_seq() -> u32 {
    static SEQ: AtomicU32 = AtomicU32::new(1);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// dcbnl's answer for `netdev`: `DCB_CMD_IEEE_GET`; the DCBX mode comes with it where the
/// driver has `getdcbx`, and is asked alone (`DCB_CMD_GDCBX`) only where it did not.
pub fn dcb(netdev: &str) -> Result<Dcb, QueryError> {
    let seq = next_seq();
    let reply = ask(dcbnl::DCB_CMD_IEEE_GET, netdev, seq)?;
    let mut dcb = dcbnl::parse_ieee(&reply, seq, netdev).map_err(reply_error)?;
    if dcb.dcbx.is_none() {
        let seq = next_seq();
        // No `getdcbx` is EOPNOTSUPP here: the mode is then unknown, not an error of the rest.
        dcb.dcbx = ask(dcbnl::DCB_CMD_GDCBX, netdev, seq)
            .ok()
            .and_then(|r| dcbnl::parse_dcbx(&r, seq).ok().flatten());
    }
    Ok(dcb)
}

fn ask(cmd: u8, netdev: &str, seq: u32) -> Result<Vec<u8>, QueryError> {
    let Some(request) = dcbnl::request(cmd, netdev, seq) else {
        return Err(bad_name(netdev));
    };
    netlink::route_request(&request, TIMEOUT).map_err(|e| io_error(&e))
}

fn bad_name(netdev: &str) -> QueryError {
    QueryError::new(
        ErrorKind::NoDevice,
        format!(
            "{}: no netdev can have this name",
            crate::sanitize::quoted(netdev)
        ),
    )
}

fn reply_error(e: ReplyError) -> QueryError {
    match e {
        ReplyError::Kernel(errno) => {
            QueryError::errno(errno, std::io::Error::from_raw_os_error(errno).to_string())
        }
        ReplyError::Malformed(why) => QueryError::new(ErrorKind::Malformed, why),
    }
}

fn io_error(e: &std::io::Error) -> QueryError {
    match (e.raw_os_error(), e.kind()) {
        (Some(errno), _) => QueryError::errno(errno, e.to_string()),
        (None, std::io::ErrorKind::TimedOut) => QueryError::new(ErrorKind::TimedOut, e.to_string()),
        (None, std::io::ErrorKind::InvalidData) => {
            QueryError::new(ErrorKind::Malformed, e.to_string())
        }
        (None, _) => QueryError::new(ErrorKind::Failed, e.to_string()),
    }
}

fn sys_error(e: se::Error, netdev: &str) -> QueryError {
    match e {
        se::Error::Os(e) => io_error(&e),
        se::Error::TooMany { count, max } => QueryError::new(
            ErrorKind::TooLarge,
            format!("the driver claims {count} statistics; gdrdoctor reads at most {max}"),
        ),
        se::Error::Name => bad_name(netdev),
    }
}

/// ethtool's answers for `netdev`: the pause parameters, and the driver statistics that
/// [`kept_stat`] keeps.
pub fn ethtool(netdev: &str) -> Ethtool {
    let malformed = |why: String| QueryError::new(ErrorKind::Malformed, why);
    let pause = se::pause(netdev)
        .map_err(|e| sys_error(e, netdev))
        .and_then(|raw| pe::pause(&raw).map_err(malformed));
    // A driver whose set changed between the names and the values (mlx5 adds a priority's
    // counters when PFC is turned on for it) is read once more.
    let stats = stats(netdev).or_else(|e| match e.kind {
        ErrorKind::Malformed => stats(netdev),
        _ => Err(e),
    });
    Ethtool { pause, stats }
}

/// The driver's statistics that [`kept_stat`] keeps, names paired with values.
fn stats(netdev: &str) -> Result<Vec<(String, u64)>, QueryError> {
    let malformed = |why: String| QueryError::new(ErrorKind::Malformed, why);
    let max = MAX_STATS as usize;
    let names = se::stat_names(netdev, MAX_STATS).map_err(|e| sys_error(e, netdev))?;
    let names = pe::stat_names(&names, max).map_err(malformed)?;
    let values = se::stat_values(netdev, MAX_STATS).map_err(|e| sys_error(e, netdev))?;
    let values = pe::stat_values(&values, max).map_err(malformed)?;
    let mut stats = pe::stats(names, values).map_err(malformed)?;
    stats.retain(|(name, _)| kept_stat(name));
    Ok(stats)
}

/// The answers as `gdrdoctor capture` recorded them on the node ([`RECORDED_QOS`]), on a
/// captured root. A capture without the file (one made before gdrdoctor recorded them) has
/// none; a file that cannot be read or is not such a record is a problem naming it.
pub fn recorded(root: &Root, problems: &mut Vec<Problem>) -> Qos {
    let bytes = match root.read(RECORDED_QOS) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => {
            return Qos::NotRead(format!(
                "the capture has no {} (a capture made before gdrdoctor recorded the netdevs' QoS)",
                RECORDED_QOS.trim_start_matches('/')
            ));
        }
        Err(e) => {
            problems.push(Problem::from_error(&e));
            return Qos::NotRead(format!("{RECORDED_QOS} could not be read"));
        }
    };
    match QosAnswers::parse(&bytes) {
        Ok(a) => Qos::Recorded(a),
        Err(e) => {
            problems.push(Problem {
                path: RECORDED_QOS.to_owned(),
                message: format!(
                    "not the QoS answers as `gdrdoctor capture` writes them ({})",
                    crate::sanitize::quoted(&e)
                ),
            });
            Qos::NotRead(format!("{RECORDED_QOS} is not a QoS record"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback device, in every network namespace, has no dcbnl_ops: the kernel answers
    /// EOPNOTSUPP (`dcb_doit`), as it does for virtio-net and veth. A typed "no DCB", never
    /// a panic or a pass.
    #[test]
    fn loopback_has_no_dcb() {
        let e = dcb("lo").unwrap_err();
        assert_eq!(e.kind, ErrorKind::NotSupported, "{e:?}");
        assert_eq!(e.errno, Some(libc::EOPNOTSUPP));
        assert!(e.not_supported());
        let eth = ethtool("lo");
        assert_eq!(eth.pause.unwrap_err().kind, ErrorKind::NotSupported);
        assert_eq!(eth.stats.unwrap_err().kind, ErrorKind::NotSupported);
    }

    /// Every netdev of the machine the tests run on, whatever its drivers: each query answers
    /// or fails with a kernel errno, never as `malformed` (a reply laid out otherwise than this
    /// code reads it). `GDRDOCTOR_PRINT_QOS=1` prints the answers as a capture keeps them (how
    /// the GPU machine's NIC was read: docs/verified/gpu-machine/).
    #[test]
    fn every_netdev_here_answers_in_the_kernels_layout() {
        let root = Root::live();
        let Ok(listing) = root.read_dir("/sys/class/net") else {
            return;
        };
        let answers = read(listing.names.iter().map(String::as_str));
        if std::env::var_os("GDRDOCTOR_PRINT_QOS").is_some() {
            println!("{}", serde_json::to_string_pretty(&answers).unwrap());
        }
        for (name, q) in &answers.netdevs {
            let errors = [
                q.dcb.as_ref().err(),
                q.ethtool.pause.as_ref().err(),
                q.ethtool.stats.as_ref().err(),
            ];
            for e in errors.into_iter().flatten() {
                assert_ne!(e.kind, ErrorKind::Malformed, "{name}: {e:?}");
            }
        }
    }

    #[test]
    fn no_such_netdev() {
        let q = read_netdev("gdrdoctor-no0");
        assert_eq!(q.dcb.unwrap_err().kind, ErrorKind::NoDevice);
        assert_eq!(q.ethtool.pause.unwrap_err().kind, ErrorKind::NoDevice);
        assert_eq!(q.ethtool.stats.unwrap_err().kind, ErrorKind::NoDevice);
        let bad = read_netdev("no/such\u{1b}");
        assert_eq!(bad.dcb.as_ref().unwrap_err().kind, ErrorKind::NoDevice);
        assert!(!bad.dcb.unwrap_err().message.contains('\u{1b}'));
    }
}
