//! WRITEs (and SRD's READs) and their completions, and the pattern they carry: what the
//! one-node loopback and a rail between two nodes both move bytes with.

use super::DEPTH;
use crate::ffi::ibverbs::{self, Cq, Qp, Wc};
use crate::gdr::FailureKind;
use std::time::{Duration, Instant};

/// Rounded to hundredths, as the reports show rates and times.
pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// xorshift64: a cheap, seedable pattern in which every 8-byte word differs.
pub(crate) fn pattern(buf: &mut [u8], mut x: u64) {
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// The first differing byte, and how many differ.
pub(crate) fn mismatch(expected: &[u8], got: &[u8]) -> Option<String> {
    let first = expected.iter().zip(got).position(|(a, b)| a != b)?;
    let count = expected.iter().zip(got).filter(|(a, b)| a != b).count();
    Some(format!(
        "{count} of {} bytes differ, the first at offset {first} (expected {:#04x}, got {:#04x})",
        expected.len(),
        expected[first],
        got[first]
    ))
}

pub(crate) type StepError = (FailureKind, String);

/// One WRITE and its completion.
#[allow(clippy::too_many_arguments)]
pub(crate) fn one_write(
    qp: &Qp,
    cq: &Cq,
    laddr: u64,
    lkey: u32,
    raddr: u64,
    rkey: u32,
    size: usize,
    deadline: Instant,
) -> Result<(), StepError> {
    let post = |id| qp.post_write(id, laddr, lkey, size as u32, raddr, rkey);
    one(&post, cq, "WRITE", deadline)
}

/// Posts one work request (`post(1)`) and waits for its completion: a WRITE (RC, SRD) or a
/// READ (SRD), `verb` in the messages.
pub(crate) fn one(post: Post, cq: &Cq, verb: &str, deadline: Instant) -> Result<(), StepError> {
    post(1).map_err(|e| (FailureKind::QpFailed, e))?;
    let mut wc = [Wc::default(); 4];
    loop {
        let n = cq
            .poll(&mut wc)
            .map_err(|e| (FailureKind::CompletionError, e))?;
        if n > 0 {
            return check_wc(&wc[..n]);
        }
        if Instant::now() > deadline {
            return Err((
                FailureKind::Timeout,
                format!(
                    "no completion before the deadline: the {verb} never finished (a port that cannot reach itself, or a stuck peer-memory mapping)"
                ),
            ));
        }
        std::hint::spin_loop();
    }
}

/// Posts work request number `i` (its wr_id).
pub(crate) type Post<'a> = &'a dyn Fn(u64) -> Result<(), String>;

fn check_wc(wc: &[Wc]) -> Result<(), StepError> {
    match wc.iter().find(|w| w.status != 0) {
        Some(w) => Err((
            FailureKind::CompletionError,
            format!(
                "completion with {} (vendor error {:#x})",
                ibverbs::wc_status_name(w.status),
                w.vendor_err
            ),
        )),
        None => Ok(()),
    }
}

/// WRITEs back to back with up to DEPTH in flight, until `iters` or `duration`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stream(
    qp: &Qp,
    cq: &Cq,
    laddr: u64,
    lkey: u32,
    raddr: u64,
    rkey: u32,
    size: usize,
    iters: u32,
    duration: Duration,
    deadline: Instant,
) -> Result<(u64, f64), StepError> {
    let post = |id| qp.post_write(id, laddr, lkey, size as u32, raddr, rkey);
    let iters = u64::from(iters.max(1));
    stream_ops(&post, cq, "WRITE", iters, duration, deadline)
}

/// Work requests `post(0)`, `post(1)`, ... back to back with up to DEPTH in flight, until
/// `iters` or `duration`: how many completed, in how many seconds. Completions are checked for
/// their status only: an EFA device reports an RDMA READ's with opcode SEND (rdma-core
/// providers/efa/verbs.c `efa_process_cqe`).
pub(crate) fn stream_ops(
    post: Post,
    cq: &Cq,
    verb: &str,
    iters: u64,
    duration: Duration,
    deadline: Instant,
) -> Result<(u64, f64), StepError> {
    let start = Instant::now();
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [Wc::default(); 16];
    loop {
        let time_left = start.elapsed() < duration;
        while posted - done < u64::from(DEPTH) && posted < iters && time_left {
            post(posted).map_err(|e| (FailureKind::QpFailed, e))?;
            posted += 1;
        }
        if done == posted {
            break;
        }
        let n = cq
            .poll(&mut wc)
            .map_err(|e| (FailureKind::CompletionError, e))?;
        check_wc(&wc[..n])?;
        done += n as u64;
        if n == 0 && Instant::now() > deadline {
            return Err((
                FailureKind::Timeout,
                format!("{done} of {posted} {verb}s completed before the deadline"),
            ));
        }
    }
    Ok((done, start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pattern_and_mismatch() {
        let mut a = vec![0u8; 4096];
        super::pattern(&mut a, 12345);
        assert!(a.chunks(8).collect::<std::collections::HashSet<_>>().len() > 500);
        let mut b = a.clone();
        assert_eq!(super::mismatch(&a, &b), None);
        b[100] ^= 0xff;
        let m = super::mismatch(&a, &b).unwrap();
        assert!(
            m.starts_with("1 of 4096 bytes differ, the first at offset 100"),
            "{m}"
        );
    }
}
