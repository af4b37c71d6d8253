//! The write test over SRD, for AWS EFA. EFA offers no RC queue pair (rdma-core
//! providers/efa/verbs.c `efa_create_qp`: any type but UD is EOPNOTSUPP), only SRD through
//! libefa; so on an EFA device the test asks libefa what the device offers
//! (`efadv_query_device`), creates two SRD QPs on the pair's PD and CQ, and has one post to the
//! other through an address handle to the port's own GID, moving the same bytes as the RC test
//! by RDMA WRITE, or by RDMA READ on a device that offers no WRITE. Two QPs, not one addressed
//! to itself: rdma-core's own SRD tests (tests/test_efa_srd.py) address another QP on the same
//! device, and no source says an SRD QP may be its own destination.
//!
//! The choice is made before anything is registered, because an EFA device registers only the
//! remote access its RDMA operations allow (the efa driver's `efa_reg_mr`: any other access
//! flag is EOPNOTSUPP), so the buffers' access flags follow from it.

use super::loopback::{Lane, Lanes, Mover, exercise, host_buffers, register_hosts};
use super::{ACCESS, DEPTH, Failed, Opened, Target, fail};
use crate::ffi::efa::{self, DeviceAttr, Efa};
use crate::ffi::ibverbs::{self, Ah, AhAttr, Context, GlobalRoute, LoadError};
use crate::ffi::ibverbs::{SrdOp, SrdQp, SrdWr};
use crate::gdr::{FailureKind, NicSpec, PairResult, PairSpec, os_error};
use crate::model::gdr::{EfaInfo, Transport};
use std::time::Instant;

/// `IBV_LINK_LAYER_UNSPECIFIED` (verbs.h): what an EFA port says.
const LINK_LAYER_UNSPECIFIED: u8 = 0;

/// The QKEY both QPs take at INIT and every work request names: any value works if both
/// agree; this is perftest's (`DEF_QKEY`) and rdma-core's tests' (`SRD_QKEY`).
const QKEY: u32 = 0x1111_1111;

/// An EFA device as libefa describes it, and the operation the test posts on it.
pub struct EfaDevice {
    pub lib: Efa,
    pub attr: DeviceAttr,
    pub op: SrdOp,
}

/// How the pair's bytes move.
pub enum Choice {
    /// A reliable-connected QP connected to itself; for a device whose driver sysfs did not
    /// give, why it is not SRD (said if it then offers no RC).
    Rc(Option<NoSrd>),
    Srd(EfaDevice),
}

/// Why a device of unknown driver was not run over SRD.
pub enum NoSrd {
    /// libefa cannot be loaded, or lacks a call: the reason, with what to install.
    Library(String),
    /// Its port's link layer is not EFA's, or libefa answered that it is not an EFA device.
    NotEfa(String),
}

impl Choice {
    /// The access every buffer is registered with: RC's local write, remote write and remote
    /// read; on EFA local write and the one remote access the operation needs.
    pub fn access(&self) -> i32 {
        match self {
            Choice::Rc(_) => ACCESS,
            Choice::Srd(d) => {
                ibverbs::ACCESS_LOCAL_WRITE
                    | match d.op {
                        SrdOp::Write => ibverbs::ACCESS_REMOTE_WRITE,
                        SrdOp::Read => ibverbs::ACCESS_REMOTE_READ,
                    }
            }
        }
    }
}

/// The transport for `nic`: RC, as always, on a device whose driver is not efa (libefa is not
/// even loaded); SRD on an efa device. On a device whose driver sysfs did not give (one named
/// with `--nic`, a two-node rail), the port's link layer (`IBV_LINK_LAYER_*`) decides whether
/// libefa is asked: an EFA port leaves it unspecified (the efa driver's `efa_port_link_layer`),
/// where the InfiniBand, RoCE and iWARP devices' ports say InfiniBand or Ethernet (the kernel's
/// `rdma_port_get_link_layer`), so an RC device runs exactly as before, without libefa. Then
/// SRD if libefa says it is EFA (the one call that tells, `efadv_query_device`), else RC.
pub fn choose(
    nic: &NicSpec,
    (driver, link_layer): (Option<&str>, u8),
    ctx: &Context,
    res: &mut PairResult,
) -> Result<Choice, Failed> {
    let known = match driver {
        Some("efa") => true,
        Some(_) => return Ok(Choice::Rc(None)),
        None if link_layer != LINK_LAYER_UNSPECIFIED => {
            let why = format!(
                "its port's link layer is {}, where an EFA port's is unspecified",
                super::register::link_layer(link_layer)
            );
            return Ok(Choice::Rc(Some(NoSrd::NotEfa(why))));
        }
        None => false,
    };
    let lib = match Efa::load() {
        Ok(lib) => lib,
        Err(e) if known => {
            return Err(fail(
                FailureKind::EfaLibrary,
                "dlopen libefa",
                format!(
                    "{} (EFA) offers no RC queue pair, and its SRD queue pairs come from libefa: {}",
                    nic.device,
                    library_error(&e)
                ),
            ));
        }
        Err(e) => return Ok(Choice::Rc(Some(NoSrd::Library(library_error(&e))))),
    };
    let attr = match lib.query_device(ctx) {
        Ok(a) => a,
        Err(e) if !known => {
            let says = if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                "says it is not an EFA device"
            } else {
                "cannot tell whether it is an EFA device"
            };
            let why = format!(
                "libefa ({}) {says} (efadv_query_device: {})",
                lib.path,
                os_error(&e)
            );
            return Ok(Choice::Rc(Some(NoSrd::NotEfa(why))));
        }
        Err(e) => {
            return Err(fail(
                FailureKind::QpFailed,
                "efadv_query_device",
                format!(
                    "{} (driver efa): {} ({})",
                    nic.device,
                    os_error(&e),
                    lib.path
                ),
            ));
        }
    };
    res.efa = Some(EfaInfo {
        library: lib.path.clone(),
        device_caps: attr.device_caps,
        max_rdma_size: attr.max_rdma_size,
        max_sq_wr: attr.max_sq_wr,
    });
    // WRITE where the device has it (as the RC test), else READ, which moves the same bytes.
    let op = if attr.device_caps & efa::CAPS_RDMA_WRITE != 0 {
        SrdOp::Write
    } else if attr.device_caps & efa::CAPS_RDMA_READ != 0 {
        SrdOp::Read
    } else {
        return Err(fail(
            FailureKind::EfaNoRdma,
            "efadv_query_device",
            format!(
                "{} (EFA) offers neither RDMA write nor read (efadv_query_device device_caps {:#x}): the write test cannot run over SRD; aws-ofi-nccl's traffic still crosses it through libfabric, whose efa provider emulates RDMA with messages on such a device (prov/efa/src/rdm/efa_rdm_rma.c)",
                nic.device, attr.device_caps
            ),
        ));
    };
    res.transport = Some(transport(op));
    Ok(Choice::Srd(EfaDevice { lib, attr, op }))
}

fn transport(op: SrdOp) -> Transport {
    match op {
        SrdOp::Write => Transport::SrdWrite,
        SrdOp::Read => Transport::SrdRead,
    }
}

/// Why libefa cannot be used, and what to install.
fn library_error(e: &LoadError) -> String {
    match e {
        LoadError::NotFound { tried, message } => format!(
            "{} not found (tried {}: {message}): install rdma-core's libefa (Debian and Ubuntu: ibverbs-providers; RHEL: libibverbs; the EFA installer puts it in /opt/amazon/efa/lib)",
            efa::SONAME,
            tried.join(", ")
        ),
        LoadError::MissingSymbol { library, symbol } => format!(
            "{library} does not export {symbol} (libefa older than rdma-core 26): update rdma-core's libefa (ibverbs-providers, libibverbs, or the EFA installer)"
        ),
    }
}

/// A device not known to be EFA that offers no RC queue pair: said, with why it did not run
/// over SRD instead; never a failure of the node.
pub fn no_rc(nic: &NicSpec, e: &std::io::Error, no_srd: Option<&NoSrd>) -> Failed {
    let offers = format!(
        "{} offers no RC queue pair (ibv_create_qp: {})",
        nic.device,
        os_error(e)
    );
    match no_srd {
        Some(NoSrd::Library(why)) => fail(
            FailureKind::EfaLibrary,
            "ibv_create_qp (RC)",
            format!(
                "{offers}, as an EFA device, whose test runs over SRD queue pairs from libefa: {why}"
            ),
        ),
        Some(NoSrd::NotEfa(why)) => fail(
            FailureKind::NoRc,
            "ibv_create_qp (RC)",
            format!("{offers}, and {why}: the write test knows no other transport for it"),
        ),
        None => fail(
            FailureKind::NoRc,
            "ibv_create_qp (RC)",
            format!("{offers}: the write test knows no other transport for it"),
        ),
    }
}

/// Two SRD QPs on the pair's PD and one CQ, the first posting to the second through an address
/// handle to the port's own GID; then the transfers, verified, and the bandwidth.
pub(super) fn loopback(
    spec: &PairSpec,
    res: &mut PairResult,
    o: &Opened,
    efa: &EfaDevice,
    target: &Target,
    deadline: Instant,
) -> Result<(), Failed> {
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
    // EFA's GID table has one entry, the device's own address (the efa driver's
    // efa_query_port: gid_tbl_len 1); an address handle to it is the loopback's destination.
    let gid = o.ctx.query_gid(nic.port, 0).map_err(|e| {
        let what = format!("{} port {} GID 0: {e}", nic.device, nic.port);
        fail(FailureKind::OpenFailed, "ibv_query_gid", what)
    })?;
    if let Some(p) = res.port.as_mut() {
        p.gid = Some(format!("0: {gid}"));
    }
    let (sender, receiver) = qps(o, efa, &cq, nic.port)?;
    let ah =
        o.pd.create_ah(AhAttr {
            grh: GlobalRoute {
                dgid: gid,
                sgid_index: 0,
                hop_limit: 0xff,
                ..GlobalRoute::default()
            },
            // The kernel builds an EFA address handle from the GRH's dgid alone, which it
            // copies only when is_global is set (the efa driver's efa_create_ah).
            is_global: 1,
            port_num: nic.port,
            ..AhAttr::default()
        })
        .map_err(|e| fail(FailureKind::QpFailed, "ibv_create_ah", e))?;
    let mover = Srd {
        qp: &sender,
        ah: &ah,
        remote_qpn: receiver.num(),
        op: efa.op,
        // 0 says nothing; the test's buffer is then one work request.
        max_len: match efa.attr.max_rdma_size {
            0 => size,
            n => n as usize,
        },
    };
    let lanes = Lanes {
        mover: &mover,
        cq: &cq,
        src: Lane::of(src.addr(), &src_mr),
        dst: Lane::of(dst.addr(), &dst_mr),
        target: Lane::of(o.target_addr, o.target_mr),
        size,
        deadline,
    };
    exercise(&lanes, spec, res, (&src, &dst), target)
    // Released in reverse order: the AH, both QPs, the CQ, the host regions, what the engine
    // opened.
}

/// The sending QP and the one it addresses, both in RTS.
fn qps<'p>(
    o: &'p Opened,
    efa: &EfaDevice,
    cq: &ibverbs::Cq,
    port: u8,
) -> Result<(SrdQp<'p>, SrdQp<'p>), Failed> {
    // No deeper than the device's send queue (efadv max_sq_wr; 0 says nothing).
    let depth = match efa.attr.max_sq_wr {
        0 => DEPTH,
        n => DEPTH.min(n),
    };
    let create = || {
        efa.lib
            .create_srd_qp(o.pd, cq, depth, efa.op.send_ops_flag())
            .map_err(|e| fail(FailureKind::QpFailed, "efadv_create_qp_ex (SRD)", e))
    };
    let (sender, receiver) = (create()?, create()?);
    for qp in [&sender, &receiver] {
        qp.to_rts(port, QKEY, 0)
            .map_err(|e| fail(FailureKind::QpFailed, "move the SRD QPs to RTS", e))?;
    }
    Ok((sender, receiver))
}

/// The sending SRD QP, the address handle and the QP number it addresses, and the operation.
struct Srd<'a> {
    qp: &'a SrdQp<'a>,
    ah: &'a Ah<'a>,
    remote_qpn: u32,
    op: SrdOp,
    max_len: usize,
}

impl Mover for Srd<'_> {
    fn transport(&self) -> Transport {
        transport(self.op)
    }
    fn max_len(&self) -> usize {
        self.max_len
    }
    /// A WRITE sends the local `from` to the remote `to`; a READ fetches the remote `from` into
    /// the local `to`: either way the bytes go from `from` to `to`.
    fn post(&self, id: u64, from: Lane, to: Lane, len: u32) -> Result<(), String> {
        let (local, remote) = match self.op {
            SrdOp::Write => (from, to),
            SrdOp::Read => (to, from),
        };
        let wr = SrdWr {
            op: self.op,
            id,
            lkey: local.lkey,
            laddr: local.addr,
            len,
            rkey: remote.rkey,
            raddr: remote.addr,
            remote_qpn: self.remote_qpn,
            qkey: QKEY,
        };
        self.qp.post(&wr, self.ah)
    }
}
