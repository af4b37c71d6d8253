//! The one-node test on what [`super::open_and_register`] opened: a queue pair connected to
//! itself (RC), or on an EFA device two SRD queue pairs ([`super::srd`]); a transfer host ->
//! buffer under test and one back, both verified, then the bandwidth each way.

use super::srd::{Choice, NoSrd};
use super::transfer::{StepError, mismatch, one, pattern, round2, stream_ops};
use super::{DEPTH, Failed, Opened, Target, fail};
use crate::ffi::hostmem::HostBuffer;
use crate::ffi::ibverbs::{Cq, Loopback, MemoryRegion, Pd, Qp};
use crate::gdr::{Bandwidth, FailureKind, NicSpec, PairResult, PairSpec, errno_meaning, os_error};
use crate::model::gdr::Transport;
use std::time::{Duration, Instant};

pub(super) fn loopback(
    spec: &PairSpec,
    res: &mut PairResult,
    o: &Opened,
    target: &Target,
    deadline: Instant,
) -> Result<(), Failed> {
    match o.choice {
        Choice::Srd(efa) => super::srd::loopback(spec, res, o, efa, target, deadline),
        Choice::Rc(no_srd) => rc(spec, res, o, no_srd.as_ref(), target, deadline),
    }
}

/// An RC queue pair connected to itself, RDMA WRITEs: every device but EFA.
fn rc(
    spec: &PairSpec,
    res: &mut PairResult,
    o: &Opened,
    no_srd: Option<&NoSrd>,
    target: &Target,
    deadline: Instant,
) -> Result<(), Failed> {
    // Checked by the caller before anything was opened.
    let Some(nic) = &spec.nic else {
        return Err(fail(FailureKind::NoRdmaDevice, "NIC", "no RDMA device"));
    };
    let size = spec.size.max(4096) as usize;
    let (src, dst) = host_buffers(size)?;
    let (src_mr, dst_mr) = register_hosts(o.pd, (&src, &dst), nic, o.access)?;
    let cq = o
        .ctx
        .create_cq((DEPTH * 2) as i32)
        .map_err(|e| fail(FailureKind::QpFailed, "ibv_create_cq", e.to_string()))?;
    res.transport = Some(Transport::Rc);
    let qp = match o.pd.create_qp(&cq, DEPTH) {
        Ok(qp) => qp,
        // A device that offers no RC (the EFA provider: rdma-core providers/efa/verbs.c
        // `efa_create_qp`, "Unsupported QP type") was not known to be EFA: say why it did not
        // run over SRD instead, never that the node is broken.
        Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) && no_srd.is_some() => {
            return Err(super::srd::no_rc(nic, &e, no_srd));
        }
        Err(e) => return Err(fail(FailureKind::QpFailed, "ibv_create_qp", e.to_string())),
    };
    let to_self = Loopback {
        port: nic.port,
        gid: o.gid,
        lid: o.port.lid,
        mtu: o.port.active_mtu,
    };
    qp.connect_to_self(to_self)
        .map_err(|e| fail(FailureKind::QpFailed, "connect the QP to itself", e))?;
    let lanes = Lanes {
        mover: &qp,
        cq: &cq,
        src: Lane::of(src.addr(), &src_mr),
        dst: Lane::of(dst.addr(), &dst_mr),
        target: Lane::of(o.target_addr, o.target_mr),
        size,
        deadline,
    };
    exercise(&lanes, spec, res, (&src, &dst), target)
    // Everything is released in reverse order of creation as the guards go out of scope: QP,
    // CQ, the host regions and buffers, the target's region, the PD, the context.
}

/// The host source and destination buffers.
pub(super) fn host_buffers(size: usize) -> Result<(HostBuffer, HostBuffer), Failed> {
    let host =
        || HostBuffer::new(size).map_err(|e| fail(FailureKind::Memory, "host allocation", e));
    Ok((host()?, host()?))
}

/// The transfers both ways, verified, then the bandwidth; recorded in `res`.
pub(super) fn exercise(
    lanes: &Lanes,
    spec: &PairSpec,
    res: &mut PairResult,
    hosts: (&HostBuffer, &HostBuffer),
    target: &Target,
) -> Result<(), Failed> {
    let op = lanes.mover.transport().operation();
    let names = (
        format!("{op} host -> {}", target.name()),
        format!("{op} {} -> host", target.name()),
    );
    verify(lanes, hosts, target, &names)?;
    res.verified_bytes = Some(lanes.size as u64);
    res.bandwidth = Some(bandwidth(lanes, spec, &names)?);
    Ok(())
}

/// The two host buffers registered with the NIC, with the access the transport needs.
pub(super) fn register_hosts<'s>(
    pd: &'s Pd<'_>,
    (src, dst): (&'s HostBuffer, &'s HostBuffer),
    nic: &NicSpec,
    access: i32,
) -> Result<(MemoryRegion<'s>, MemoryRegion<'s>), Failed> {
    match (pd.reg_mr(src, access), pd.reg_mr(dst, access)) {
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

/// A registered buffer as a work request names it: its address and keys.
#[derive(Clone, Copy)]
pub(super) struct Lane {
    pub addr: u64,
    pub lkey: u32,
    pub rkey: u32,
}

impl Lane {
    pub(super) fn of(addr: u64, mr: &MemoryRegion) -> Lane {
        Lane {
            addr,
            lkey: mr.lkey(),
            rkey: mr.rkey(),
        }
    }
    /// The same buffer from `offset` on.
    fn at(self, offset: usize) -> Lane {
        Lane {
            addr: self.addr + offset as u64,
            ..self
        }
    }
}

/// What moves bytes from one registered buffer to another: RC's RDMA WRITE through
/// `ibv_post_send`, or an SRD QP's WRITE or READ ([`super::srd`]).
pub(super) trait Mover {
    fn transport(&self) -> Transport;
    /// The most bytes one work request may carry (EFA: `max_rdma_size`).
    fn max_len(&self) -> usize;
    /// Posts one signalled work request, `id`, moving `len` bytes from `from` to `to`.
    fn post(&self, id: u64, from: Lane, to: Lane, len: u32) -> Result<(), String>;
}

impl Mover for Qp<'_> {
    fn transport(&self) -> Transport {
        Transport::Rc
    }
    fn max_len(&self) -> usize {
        u32::MAX as usize
    }
    fn post(&self, id: u64, from: Lane, to: Lane, len: u32) -> Result<(), String> {
        self.post_write(id, from.addr, from.lkey, len, to.addr, to.rkey)
    }
}

/// The loopback's mover and the three buffers it moves between: host source, the buffer under
/// test, host destination.
pub(super) struct Lanes<'a> {
    pub mover: &'a dyn Mover,
    pub cq: &'a Cq<'a>,
    pub src: Lane,
    pub dst: Lane,
    pub target: Lane,
    pub size: usize,
    pub deadline: Instant,
}

impl Lanes<'_> {
    /// The work requests one whole buffer takes (more than one where it exceeds `max_len`).
    fn pieces(&self) -> u64 {
        self.size.div_ceil(self.mover.max_len().max(1)) as u64
    }

    /// Offset and length of work request `i` of a stream that goes round the buffer.
    fn piece(&self, i: u64) -> (usize, u32) {
        let max = self.mover.max_len().max(1);
        let offset = (i % self.pieces()) as usize * max;
        (offset, max.min(self.size - offset) as u32)
    }

    /// Bytes moved by the first `n` work requests of such a stream.
    fn bytes(&self, n: u64) -> u64 {
        let whole = n / self.pieces() * self.size as u64;
        whole
            + (0..n % self.pieces())
                .map(|i| u64::from(self.piece(i).1))
                .sum::<u64>()
    }

    fn post(&self, from: Lane, to: Lane) -> impl Fn(u64) -> Result<(), String> + '_ {
        move |i| {
            let (offset, len) = self.piece(i);
            self.mover.post(i, from.at(offset), to.at(offset), len)
        }
    }

    /// The whole buffer and its completions: one work request where one may carry it (RC,
    /// always), else one per piece.
    fn transfer(&self, from: Lane, to: Lane) -> Result<(), StepError> {
        let verb = self.mover.transport().verb();
        let pieces = self.pieces();
        if pieces == 1 {
            // One work request of the whole buffer, wr_id 1, as the test has always posted.
            let size = self.size as u32;
            let one_wr = |id| self.mover.post(id, from, to, size);
            return one(&one_wr, self.cq, verb, self.deadline);
        }
        let post = self.post(from, to);
        let (done, _) = stream_ops(&post, self.cq, verb, pieces, Duration::MAX, self.deadline)?;
        if done < pieces {
            return Err((
                FailureKind::Timeout,
                format!("{done} of {pieces} {verb}s completed before the deadline"),
            ));
        }
        Ok(())
    }

    /// Work requests back to back for at most `duration`: how many, in how many seconds, and
    /// the bytes they moved.
    fn stream(
        &self,
        from: Lane,
        to: Lane,
        iters: u32,
        duration: Duration,
    ) -> Result<(u64, f64, u64), StepError> {
        let verb = self.mover.transport().verb();
        let post = self.post(from, to);
        let iters = u64::from(iters.max(1));
        let (n, secs) = stream_ops(&post, self.cq, verb, iters, duration, self.deadline)?;
        Ok((n, secs, self.bytes(n)))
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
    l.transfer(l.src, l.target)
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
    l.transfer(l.target, l.dst)
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

/// As many work requests as fit in half the duration each way, at most `iters`.
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
        (Ok((n1, t1, b1)), Ok((n2, t2, b2))) => {
            let gbps = |bytes: u64, t: f64| {
                if t > 0.0 {
                    bytes as f64 * 8.0 / t / 1e9
                } else {
                    0.0
                }
            };
            Ok(Bandwidth {
                to_target_gbps: round2(gbps(b1, t1)),
                from_target_gbps: round2(gbps(b2, t2)),
                message_bytes: l.size.min(l.mover.max_len()) as u64,
                messages: n1 + n2,
            })
        }
        (Err((kind, msg)), _) => Err(fail(kind, format!("{to} (bandwidth run)"), msg)),
        (_, Err((kind, msg))) => Err(fail(kind, format!("{from} (bandwidth run)"), msg)),
    }
}
