//! One request to the kernel's rtnetlink and its reply, as bytes: what `RTM_GETDCB` needs
//! (src/parse/dcbnl builds the request and reads the reply). A socket per request, so no
//! answer to an earlier one can be waiting in it.
//!
//! The reply is waited for at most `timeout` (`SO_RCVTIMEO`): a kernel that does not answer
//! is an error, never a hang. Only the kernel's datagrams count (`nl_pid` 0): another process
//! that sends to this socket's address is ignored.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};
use std::time::{Duration, Instant};

/// The largest reply read: a dcbnl reply with a full APP table (64 DSCP entries and the PCP
/// ones) is under 2 KiB; netlink's own default message is a page.
pub const MAX_REPLY: usize = 64 << 10;

/// Sends `request` (one netlink message) to the kernel over `NETLINK_ROUTE` and returns the
/// first datagram the kernel sends back, within `timeout`.
pub fn route_request(request: &[u8], timeout: Duration) -> io::Result<Vec<u8>> {
    let fd = socket()?;
    let deadline = Instant::now() + timeout;
    send(&fd, request)?;
    let mut buf = vec![0u8; MAX_REPLY];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(timed_out(timeout));
        }
        set_receive_timeout(&fd, left)?;
        match receive(&fd, &mut buf) {
            Ok((n, 0)) if n > buf.len() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a reply of {n} bytes, more than the {MAX_REPLY} read"),
                ));
            }
            Ok((n, 0)) => {
                buf.truncate(n);
                return Ok(buf);
            }
            // Not the kernel's: not an answer.
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(timed_out(timeout)),
            Err(e) => return Err(e),
        }
    }
}

fn timed_out(timeout: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("the kernel did not answer within {:?}", timeout),
    )
}

fn socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointer; a descriptor it returns is ours alone.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn kernel_address() -> libc::sockaddr_nl {
    // SAFETY: sockaddr_nl is plain data; all zeros is a valid value (pid 0 = the kernel).
    let mut addr: libc::sockaddr_nl = unsafe { zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    addr
}

fn send(fd: &OwnedFd, request: &[u8]) -> io::Result<()> {
    let addr = kernel_address();
    loop {
        // SAFETY: the buffer and the address are valid for the lengths given, for the call.
        let n = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
                (&raw const addr).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n >= 0 {
            return if n as usize == request.len() {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("{n} of {} bytes sent", request.len()),
                ))
            };
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn set_receive_timeout(fd: &OwnedFd, left: Duration) -> io::Result<()> {
    // At least a microsecond: a zero timeval means "wait for ever".
    let micros = left.as_micros().clamp(1, 3_600_000_000);
    let tv = libc::timeval {
        tv_sec: (micros / 1_000_000) as libc::time_t,
        tv_usec: (micros % 1_000_000) as libc::suseconds_t,
    };
    // SAFETY: the option value is a timeval, valid for its size, for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&raw const tv).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// One datagram: its full length (`MSG_TRUNC`: more than `buf` when it did not fit) and the
/// sender's port id (0 = the kernel).
fn receive(fd: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, u32)> {
    let mut from = kernel_address();
    from.nl_pid = u32::MAX;
    let mut from_len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
    // SAFETY: `buf` and `from` are valid for writes of the lengths given, for the call.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_TRUNC,
            (&raw mut from).cast(),
            &mut from_len,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let from_netlink = from_len as usize >= size_of::<libc::sockaddr_nl>()
        && from.nl_family == libc::AF_NETLINK as libc::sa_family_t;
    Ok((
        n as usize,
        if from_netlink { from.nl_pid } else { u32::MAX },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `RTM_GETLINK` for the loopback device (ifindex 1, present in every namespace):
    /// a reply comes from the kernel, as bytes, well within the timeout.
    #[test]
    fn the_kernel_answers() {
        let mut m = Vec::new();
        m.extend_from_slice(&32u32.to_ne_bytes());
        m.extend_from_slice(&18u16.to_ne_bytes()); // RTM_GETLINK
        m.extend_from_slice(&1u16.to_ne_bytes()); // NLM_F_REQUEST
        m.extend_from_slice(&9u32.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        // struct ifinfomsg: family, pad, type, index 1, flags, change.
        m.extend_from_slice(&[0, 0, 0, 0]);
        m.extend_from_slice(&1i32.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        let t = Instant::now();
        let reply = route_request(&m, Duration::from_secs(1)).unwrap();
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(reply.len() >= 16);
        // The same sequence number, and RTM_NEWLINK (16) or an error (2).
        assert_eq!(u32::from_ne_bytes(reply[8..12].try_into().unwrap()), 9);
        let kind = u16::from_ne_bytes([reply[4], reply[5]]);
        assert!(kind == 16 || kind == 2, "{kind}");
    }

    /// A request the kernel does not answer (not a request: no NLM_F_REQUEST) times out.
    #[test]
    fn no_answer_times_out() {
        let mut m = Vec::new();
        m.extend_from_slice(&16u32.to_ne_bytes());
        m.extend_from_slice(&3u16.to_ne_bytes()); // NLMSG_DONE, no flags: ignored
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&[0; 8]);
        let t = Instant::now();
        let e = route_request(&m, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() >= Duration::from_millis(200));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
