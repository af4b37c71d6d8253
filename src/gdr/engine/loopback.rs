//! The one-node test on what [`super::open_and_register`] opened: a queue pair connected to
//! itself, a WRITE host -> buffer under test and one back, both verified, then the bandwidth
//! each way.

use super::transfer::{StepError, mismatch, one_write, pattern, round2, stream};
use super::{ACCESS, DEPTH, Failed, Opened, Target, fail};
use crate::ffi::hostmem::HostBuffer;
use crate::ffi::ibverbs::{Cq, Loopback, MemoryRegion, Pd, Qp};
use crate::gdr::{Bandwidth, FailureKind, NicSpec, PairResult, PairSpec, errno_meaning, os_error};
use std::time::{Duration, Instant};

pub(super) fn loopback(
    spec: &PairSpec,
    res: &mut PairResult,
    o: &Opened,
    target: &Target,
    deadline: Instant,
) -> Result<(), Failed> {
    // Checked by the caller before anything was opened.
    let Some(nic) = &spec.nic else {
        return Err(fail(FailureKind::NoRdmaDevice, "NIC", "no RDMA device"));
    };
    let size = spec.size.max(4096) as usize;
    let host =
        || HostBuffer::new(size).map_err(|e| fail(FailureKind::Memory, "host allocation", e));
    let (src, dst) = (host()?, host()?);
    let (src_mr, dst_mr) = register_hosts(o.pd, (&src, &dst), nic)?;
    let cq = o
        .ctx
        .create_cq((DEPTH * 2) as i32)
        .map_err(|e| fail(FailureKind::QpFailed, "ibv_create_cq", e.to_string()))?;
    let qp =
        o.pd.create_qp(&cq, DEPTH)
            .map_err(|e| fail(FailureKind::QpFailed, "ibv_create_qp", e.to_string()))?;
    let to_self = Loopback {
        port: nic.port,
        gid: o.gid,
        lid: o.port.lid,
        mtu: o.port.active_mtu,
    };
    qp.connect_to_self(to_self)
        .map_err(|e| fail(FailureKind::QpFailed, "connect the QP to itself", e))?;
    let lanes = Lanes {
        qp: &qp,
        cq: &cq,
        src: Lane::of(src.addr(), &src_mr),
        dst: Lane::of(dst.addr(), &dst_mr),
        target: Lane::of(o.target_addr, o.target_mr),
        size,
        deadline,
    };
    let names = (
        format!("RDMA WRITE host -> {}", target.name()),
        format!("RDMA WRITE {} -> host", target.name()),
    );
    verify(&lanes, (&src, &dst), target, &names)?;
    res.verified_bytes = Some(size as u64);
    res.bandwidth = Some(bandwidth(&lanes, spec, &names)?);
    // Everything is released in reverse order of creation as the guards go out of scope: QP,
    // CQ, the host regions and buffers, the target's region, the PD, the context.
    Ok(())
}

/// The two host buffers registered with the NIC.
fn register_hosts<'s>(
    pd: &'s Pd<'_>,
    (src, dst): (&'s HostBuffer, &'s HostBuffer),
    nic: &NicSpec,
) -> Result<(MemoryRegion<'s>, MemoryRegion<'s>), Failed> {
    match (pd.reg_mr(src, ACCESS), pd.reg_mr(dst, ACCESS)) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(e), _) | (_, Err(e)) => {
            let meaning = e
                .raw_os_error()
                .and_then(|n| errno_meaning("host", n))
                .unwrap_or("");
            Err(fail(
                FailureKind::RegisterFailed,
                "ibv_reg_mr (host buffers)",
                format!(
                    "host memory cannot be registered with {}: {} {meaning}",
                    nic.device,
                    os_error(&e)
                ),
            ))
        }
    }
}

/// A registered buffer as a WRITE names it: its address and keys.
#[derive(Clone, Copy)]
struct Lane {
    addr: u64,
    lkey: u32,
    rkey: u32,
}

impl Lane {
    fn of(addr: u64, mr: &MemoryRegion) -> Lane {
        Lane {
            addr,
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        }
    }
}

/// The loopback's queue pair and the three buffers it writes between: host source, the buffer
/// under test, host destination.
struct Lanes<'a> {
    qp: &'a Qp<'a>,
    cq: &'a Cq<'a>,
    src: Lane,
    dst: Lane,
    target: Lane,
    size: usize,
    deadline: Instant,
}

impl Lanes<'_> {
    /// One WRITE of the whole buffer and its completion.
    fn write(&self, from: Lane, to: Lane) -> Result<(), StepError> {
        let (qp, cq) = (self.qp, self.cq);
        let (laddr, lkey, raddr, rkey) = (from.addr, from.lkey, to.addr, to.rkey);
        one_write(qp, cq, laddr, lkey, raddr, rkey, self.size, self.deadline)
    }

    /// WRITEs back to back for at most `duration`: how many, in how many seconds.
    fn stream(
        &self,
        from: Lane,
        to: Lane,
        iters: u32,
        duration: Duration,
    ) -> Result<(u64, f64), StepError> {
        let (qp, cq) = (self.qp, self.cq);
        let (laddr, lkey, raddr, rkey) = (from.addr, from.lkey, to.addr, to.rkey);
        let (size, deadline) = (self.size, self.deadline);
        stream(
            qp, cq, laddr, lkey, raddr, rkey, size, iters, duration, deadline,
        )
    }
}

/// A random pattern host -> buffer under test, read back; then buffer under test -> host,
/// compared.
fn verify(
    l: &Lanes,
    (src, dst): (&HostBuffer, &HostBuffer),
    target: &Target,
    (to, from): &(String, String),
) -> Result<(), Failed> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37_79b9_7f4a_7c15)
        | 1;
    let mut expected = vec![0u8; l.size];
    pattern(&mut expected, seed);
    src.write(&expected);
    let zeros = vec![0u8; l.size];
    target
        .write(&zeros)
        .map_err(|e| fail(FailureKind::Memory, "clear the buffer under test", e))?;
    l.write(l.src, l.target)
        .map_err(|(kind, msg)| fail(kind, to, msg))?;
    let mut back = vec![0u8; l.size];
    target
        .read(&mut back)
        .map_err(|e| fail(FailureKind::Memory, "read the buffer under test back", e))?;
    if let Some(m) = mismatch(&expected, &back) {
        return Err(fail(
            FailureKind::DataMismatch,
            to,
            format!(
                "the {} holds different bytes than were written: {m}",
                target.name()
            ),
        ));
    }
    l.write(l.target, l.dst)
        .map_err(|(kind, msg)| fail(kind, from, msg))?;
    dst.read(&mut back);
    if let Some(m) = mismatch(&expected, &back) {
        return Err(fail(
            FailureKind::DataMismatch,
            from,
            format!(
                "the host received different bytes than the {} held: {m}",
                target.name()
            ),
        ));
    }
    Ok(())
}

/// As many WRITEs as fit in half the duration each way, at most `iters`.
fn bandwidth(
    l: &Lanes,
    spec: &PairSpec,
    (to, from): &(String, String),
) -> Result<Bandwidth, Failed> {
    let half = Duration::from_millis(spec.duration_ms.max(2) / 2);
    let a = l.stream(l.src, l.target, spec.iters, half);
    let b = match &a {
        Ok(_) => l.stream(l.target, l.dst, spec.iters, half),
        Err(e) => Err(e.clone()),
    };
    match (a, b) {
        (Ok((n1, t1)), Ok((n2, t2))) => {
            let gbps = |n: u64, t: f64| {
                if t > 0.0 {
                    (n * l.size as u64) as f64 * 8.0 / t / 1e9
                } else {
                    0.0
                }
            };
            Ok(Bandwidth {
                to_target_gbps: round2(gbps(n1, t1)),
                from_target_gbps: round2(gbps(n2, t2)),
                message_bytes: l.size as u64,
                messages: n1 + n2,
            })
        }
        (Err((kind, msg)), _) => Err(fail(kind, format!("{to} (bandwidth run)"), msg)),
        (_, Err((kind, msg))) => Err(fail(kind, format!("{from} (bandwidth run)"), msg)),
    }
}
