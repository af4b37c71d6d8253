//! The ethtool ioctl (`SIOCETHTOOL`) for what gdrdoctor reads of a netdev: the pause
//! parameters (`ETHTOOL_GPAUSEPARAM`) and the driver's statistics (`ETHTOOL_GSSET_INFO`,
//! `ETHTOOL_GSTRINGS` and `ETHTOOL_GSTATS` on `ETH_SS_STATS`, what `ethtool -S` prints). Each
//! returns the kernel's struct as bytes (src/parse/ethtool reads them). These are the "get"
//! commands net/ethtool/ioctl.c lets any user run.
//!
//! Layouts: include/uapi/linux/ethtool.h. The string and statistics commands write as many
//! entries as the driver has *when they run*, whatever length the caller passed
//! (`ethtool_get_strings`, `ethtool_get_stats`): so the count is asked first, a count over the
//! caller's limit is refused before anything is allocated, and the buffer is made for the
//! limit, not for the count, so that a driver whose count grows between the two calls (mlx5
//! adds per-priority counters when PFC is turned on) still writes inside it.

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
/// The driver's statistics: the string set `ethtool -S` reads.
pub const ETH_SS_STATS: u32 = 1;
/// `ETH_GSTRING_LEN`: each name is 32 bytes, NUL-padded.
pub const GSTRING_LEN: usize = 32;
/// `struct ethtool_pauseparam`: cmd, autoneg, rx_pause, tx_pause (u32 each).
pub const PAUSE_LEN: usize = 16;
/// The headers of `struct ethtool_gstrings` (cmd, string_set, len) and `ethtool_stats` (cmd,
/// n_stats).
pub const GSTRINGS_HDR: usize = 12;
pub const STATS_HDR: usize = 8;
/// IFNAMSIZ: a netdev name and its NUL.
const IFNAMSIZ: usize = 16;

/// Why the kernel's answer is not here.
#[derive(Debug)]
pub enum Error {
    /// The system call failed: the errno says why (`EOPNOTSUPP`: the driver has no such
    /// operation; `ENODEV`: no such netdev).
    Os(io::Error),
    /// The driver claims more entries than the caller takes: refused, nothing allocated.
    TooMany { count: u32, max: u32 },
    /// Not a name a netdev can have.
    Name,
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Os(e)
    }
}

/// `ETHTOOL_GPAUSEPARAM` on `ifname`: `struct ethtool_pauseparam` as the kernel wrote it.
pub fn pause(ifname: &str) -> Result<[u8; PAUSE_LEN], Error> {
    let mut buf = [0u8; PAUSE_LEN];
    buf[..4].copy_from_slice(&ETHTOOL_GPAUSEPARAM.to_ne_bytes());
    // The kernel writes back exactly this struct.
    ioctl(ifname, &mut buf)?;
    Ok(buf)
}

/// How many statistics the driver has (`ETHTOOL_GSSET_INFO` for `ETH_SS_STATS`); `EOPNOTSUPP`
/// when it has none (the kernel clears the set's bit).
pub fn stats_count(ifname: &str) -> Result<u32, Error> {
    // struct ethtool_sset_info: cmd, reserved, sset_mask (u64), then one u32 per bit of the
    // mask that the driver has: one bit asked, at most one u32 written.
    let mut buf = [0u8; 20];
    buf[..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
    buf[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    ioctl(ifname, &mut buf)?;
    let mask = u64::from_ne_bytes(buf[8..16].try_into().unwrap_or_default());
    if mask & (1 << ETH_SS_STATS) == 0 {
        return Err(Error::Os(io::Error::from_raw_os_error(libc::EOPNOTSUPP)));
    }
    Ok(u32::from_ne_bytes(
        buf[16..20].try_into().unwrap_or_default(),
    ))
}

/// `ETHTOOL_GSTRINGS` for `ETH_SS_STATS`: `struct ethtool_gstrings` and its names, at most
/// `max` of them. Trimmed to what the kernel says it wrote.
pub fn stat_names(ifname: &str, max: u32) -> Result<Vec<u8>, Error> {
    let count = stats_count(ifname)?;
    if count > max {
        return Err(Error::TooMany { count, max });
    }
    let mut buf = vec![0u8; GSTRINGS_HDR + max as usize * GSTRING_LEN];
    buf[..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    buf[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    buf[8..12].copy_from_slice(&count.to_ne_bytes());
    ioctl(ifname, &mut buf)?;
    let written = u32::from_ne_bytes(buf[8..12].try_into().unwrap_or_default()).min(max);
    buf.truncate(GSTRINGS_HDR + written as usize * GSTRING_LEN);
    Ok(buf)
}

/// `ETHTOOL_GSTATS`: `struct ethtool_stats` and its values, at most `max` of them. Trimmed to
/// what the kernel says it wrote.
pub fn stat_values(ifname: &str, max: u32) -> Result<Vec<u8>, Error> {
    let count = stats_count(ifname)?;
    if count > max {
        return Err(Error::TooMany { count, max });
    }
    let mut buf = vec![0u8; STATS_HDR + max as usize * 8];
    buf[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    buf[4..8].copy_from_slice(&count.to_ne_bytes());
    ioctl(ifname, &mut buf)?;
    let written = u32::from_ne_bytes(buf[4..8].try_into().unwrap_or_default()).min(max);
    buf.truncate(STATS_HDR + written as usize * 8);
    Ok(buf)
}

/// A socket to carry the ioctl: an IPv4 datagram socket, as ethtool(8) opens; a generic
/// netlink one where IPv4 is not built in (the ioctl reaches the netdev through any socket).
fn socket() -> io::Result<OwnedFd> {
    let tries = [
        (libc::AF_INET, libc::SOCK_DGRAM, 0),
        (libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_GENERIC),
    ];
    let mut last = io::Error::from_raw_os_error(libc::EAFNOSUPPORT);
    for (family, kind, protocol) in tries {
        // SAFETY: socket(2) takes no pointer; a descriptor it returns is ours alone.
        let fd = unsafe { libc::socket(family, kind | libc::SOCK_CLOEXEC, protocol) };
        if fd >= 0 {
            // SAFETY: `fd` was just opened and nothing else owns it.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        last = io::Error::last_os_error();
    }
    Err(last)
}

/// `SIOCETHTOOL` on `ifname` with `data` (whose first u32 is the command) as the struct the
/// kernel reads and writes. Private: every caller above sizes `data` for all the kernel can
/// write for its command.
fn ioctl(ifname: &str, data: &mut [u8]) -> Result<(), Error> {
    let name = ifname.as_bytes();
    if name.is_empty() || name.len() >= IFNAMSIZ || name.contains(&0) {
        return Err(Error::Name);
    }
    // SAFETY: struct ifreq is plain data; all zeros is a valid value.
    let mut ifr: libc::ifreq = unsafe { zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = data.as_mut_ptr().cast();
    let fd = socket()?;
    loop {
        // SAFETY: `ifr` is a valid ifreq whose name is NUL-terminated; `ifru_data` points at
        // `data`, which is valid for writes for the call and, by every caller, large enough
        // for all the kernel writes for the command in its first word (see the module's
        // comment for the counts the kernel decides itself).
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &raw mut ifr) };
        if rc >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(Error::Os(e));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback device has no pause parameters and no driver statistics; a netdev that
    /// does not exist is ENODEV; a name no netdev can have is not sent.
    #[test]
    fn loopback_and_nothing() {
        let errno = |r: Result<_, Error>| match r {
            Err(Error::Os(e)) => e.raw_os_error(),
            other => panic!("{other:?}"),
        };
        assert_eq!(errno(pause("lo").map(|_| ())), Some(libc::EOPNOTSUPP));
        assert_eq!(errno(stats_count("lo").map(|_| ())), Some(libc::EOPNOTSUPP));
        assert_eq!(
            errno(stat_names("lo", 10).map(|_| ())),
            Some(libc::EOPNOTSUPP)
        );
        assert_eq!(
            errno(pause("gdrdoctor-no0").map(|_| ())),
            Some(libc::ENODEV)
        );
        assert!(matches!(pause("sixteen-chars-ab"), Err(Error::Name)));
        assert!(matches!(pause(""), Err(Error::Name)));
        assert!(matches!(pause("a\0b"), Err(Error::Name)));
    }
}
