//! What an SRD queue pair needs of libibverbs. AWS EFA offers no RC queue pair, only UD and SRD,
//! and SRD's RDMA READ and WRITE go only through the extended QP's work-request builders
//! (`struct ibv_qp_ex`, IBVERBS_1.6): the EFA provider's `ibv_post_send` accepts sends alone
//! (rdma-core providers/efa/verbs.c `efa_post_send_validate_wr`). Here: those builders, an
//! address handle, SRD's state machine. libefa creates the QP itself (crate::ffi::efa).
//!
//! Every builder is `static inline` in verbs.h (`ibv_wr_start` is `qp->wr_start(qp)`), so they
//! are called through the function pointers at their offsets in `struct ibv_qp_ex`, which
//! tests/verbs_layout.rs checks against the real header.

use super::{AhAttr, Pd, Qp, QpAttr, QpCap, QpHead, errno_or};
use super::{QP_PKEY_INDEX, QP_PORT, QP_QKEY, QP_SQ_PSN, QP_STATE, QPS_INIT, QPS_RTR, QPS_RTS};
use super::{SEND_SIGNALED, Verbs};
use std::ffi::{c_int, c_uint, c_void};
use std::mem::offset_of;

/// `struct ibv_qp_init_attr_ex` (verbs.h): what `efadv_create_qp_ex` takes. Its first 64 bytes
/// are `struct ibv_qp_init_attr`.
#[repr(C)]
pub struct QpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: QpCap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
    /// `IBV_QP_INIT_ATTR_*`: which of the fields below are set.
    pub comp_mask: u32,
    pub pd: *mut c_void,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf`: u8 function, u8 key_len, u8 *key, u64 fields_mask.
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    /// `IBV_QP_EX_WITH_*`: the work requests the QP will build.
    pub send_ops_flags: u64,
}

/// `IBV_QP_INIT_ATTR_PD`, `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` (verbs.h `enum ibv_qp_init_attr_mask`).
pub const QP_INIT_ATTR_PD: u32 = 1;
pub const QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
/// `IBV_QP_EX_WITH_RDMA_WRITE`, `IBV_QP_EX_WITH_RDMA_READ` (verbs.h
/// `enum ibv_qp_create_send_ops_flags`).
pub const QP_EX_WITH_RDMA_WRITE: u64 = 1;
pub const QP_EX_WITH_RDMA_READ: u64 = 1 << 4;

type WrVoid = unsafe extern "C" fn(*mut QpEx);
type WrRdma = unsafe extern "C" fn(*mut QpEx, u32, u64);
type WrUdAddr = unsafe extern "C" fn(*mut QpEx, *mut c_void, u32, u32);
type WrSge = unsafe extern "C" fn(*mut QpEx, u32, u64, u32);
type WrComplete = unsafe extern "C" fn(*mut QpEx) -> c_int;

/// `struct ibv_qp_ex` (verbs.h) up to `wr_abort`: fields were only ever appended
/// (`wr_atomic_write` and `wr_flush` came last), so these offsets hold for every libibverbs
/// with IBVERBS_1.6. Only read through the pointer the library returns, never allocated here.
#[repr(C)]
pub struct QpEx {
    /// `struct ibv_qp qp_base` (160 bytes on LP64).
    pub _qp_base: [u64; 20],
    pub comp_mask: u64,
    /// Written before each work request; completions carry it back.
    pub wr_id: u64,
    /// `IBV_SEND_*` for the next work request.
    pub wr_flags: c_uint,
    /// wr_atomic_cmp_swp, wr_atomic_fetch_add, wr_bind_mw, wr_local_inv.
    pub _before_rdma_read: [*mut c_void; 4],
    pub wr_rdma_read: Option<WrRdma>,
    pub wr_rdma_write: Option<WrRdma>,
    /// wr_rdma_write_imm, wr_send, wr_send_imm, wr_send_inv, wr_send_tso.
    pub _before_ud_addr: [*mut c_void; 5],
    pub wr_set_ud_addr: Option<WrUdAddr>,
    /// wr_set_xrc_srqn, wr_set_inline_data, wr_set_inline_data_list.
    pub _before_sge: [*mut c_void; 3],
    pub wr_set_sge: Option<WrSge>,
    pub _wr_set_sge_list: *mut c_void,
    pub wr_start: Option<WrVoid>,
    pub wr_complete: Option<WrComplete>,
    pub wr_abort: Option<WrVoid>,
}

/// The sizes and offsets of this file, named as tests/stubs/verbs_layout.c prints them.
pub(super) fn layout() -> Vec<(&'static str, usize)> {
    vec![
        ("sizeof(struct ibv_qp)", offset_of!(QpEx, comp_mask)),
        ("ibv_qp_ex.wr_id", offset_of!(QpEx, wr_id)),
        ("ibv_qp_ex.wr_flags", offset_of!(QpEx, wr_flags)),
        ("ibv_qp_ex.wr_rdma_read", offset_of!(QpEx, wr_rdma_read)),
        ("ibv_qp_ex.wr_rdma_write", offset_of!(QpEx, wr_rdma_write)),
        ("ibv_qp_ex.wr_set_ud_addr", offset_of!(QpEx, wr_set_ud_addr)),
        ("ibv_qp_ex.wr_set_sge", offset_of!(QpEx, wr_set_sge)),
        ("ibv_qp_ex.wr_start", offset_of!(QpEx, wr_start)),
        ("ibv_qp_ex.wr_complete", offset_of!(QpEx, wr_complete)),
        ("ibv_qp_ex.wr_abort", offset_of!(QpEx, wr_abort)),
        (
            "sizeof(struct ibv_qp_init_attr_ex)",
            std::mem::size_of::<QpInitAttrEx>(),
        ),
        (
            "ibv_qp_init_attr_ex.comp_mask",
            offset_of!(QpInitAttrEx, comp_mask),
        ),
        ("ibv_qp_init_attr_ex.pd", offset_of!(QpInitAttrEx, pd)),
        (
            "ibv_qp_init_attr_ex.max_tso_header",
            offset_of!(QpInitAttrEx, max_tso_header),
        ),
        (
            "ibv_qp_init_attr_ex.rx_hash_conf",
            offset_of!(QpInitAttrEx, rx_hash_conf),
        ),
        (
            "ibv_qp_init_attr_ex.source_qpn",
            offset_of!(QpInitAttrEx, source_qpn),
        ),
        (
            "ibv_qp_init_attr_ex.send_ops_flags",
            offset_of!(QpInitAttrEx, send_ops_flags),
        ),
        ("ibv_qp_attr.qkey", offset_of!(QpAttr, qkey)),
        ("ibv_qp_attr.sq_psn", offset_of!(QpAttr, sq_psn)),
    ]
}

/// An address handle (`ibv_create_ah`): where an SRD work request goes.
pub struct Ah<'a> {
    verbs: &'a Verbs,
    ah: *mut c_void,
}

impl Drop for Ah<'_> {
    fn drop(&mut self) {
        if let Some(destroy) = self.verbs.destroy_ah {
            // SAFETY: created by ibv_create_ah on a PD that outlives it; destroyed once.
            unsafe { destroy(self.ah) };
        }
    }
}

impl<'a> Pd<'a> {
    /// `ibv_create_ah`. `Err` names the call, or the library that lacks it.
    pub fn create_ah(&self, mut attr: AhAttr) -> Result<Ah<'_>, String> {
        let verbs = self.ctx.verbs;
        let (Some(create), Some(_)) = (verbs.create_ah, verbs.destroy_ah) else {
            return Err(format!(
                "{} does not export ibv_create_ah and ibv_destroy_ah",
                verbs.path
            ));
        };
        // SAFETY: `attr` is a whole `struct ibv_ah_attr`, read during the call only; the PD is
        // live.
        let ah = unsafe { create(self.pd, &mut attr) };
        if ah.is_null() {
            return Err(format!(
                "ibv_create_ah: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Ah { verbs, ah })
    }

    /// Takes ownership of a QP that libefa created on this PD (it is destroyed with
    /// `ibv_destroy_qp` like any other), and finds its builders (`ibv_qp_to_qp_ex`).
    pub(in crate::ffi) fn adopt_srd(&'a self, raw: *mut QpHead) -> Result<SrdQp<'a>, String> {
        let qp = Qp { pd: self, qp: raw };
        let Some(to_ex) = self.ctx.verbs.qp_to_qp_ex else {
            return Err(format!(
                "{} does not export ibv_qp_to_qp_ex (IBVERBS_1.6, rdma-core 21)",
                self.ctx.verbs.path
            ));
        };
        // SAFETY: `raw` is the live QP just created on this PD; the call only reads it.
        let ex = unsafe { to_ex(raw) };
        if ex.is_null() {
            // libibverbs/verbs.c: NULL unless the QP was created with send_ops_flags.
            return Err(
                "ibv_qp_to_qp_ex returned NULL: the QP has no work-request builders".into(),
            );
        }
        Ok(SrdQp { qp, ex })
    }
}

/// The RDMA operation an SRD QP posts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrdOp {
    Write,
    Read,
}

impl SrdOp {
    /// `IBV_QP_EX_WITH_*` for a QP that posts it.
    pub fn send_ops_flag(self) -> u64 {
        match self {
            SrdOp::Write => QP_EX_WITH_RDMA_WRITE,
            SrdOp::Read => QP_EX_WITH_RDMA_READ,
        }
    }
}

/// One SRD work request: the local buffer (`wr_set_sge`; the source of a WRITE, the
/// destination of a READ), the remote one, and the QP it is addressed to.
#[derive(Debug, Clone, Copy)]
pub struct SrdWr {
    pub op: SrdOp,
    pub id: u64,
    pub lkey: u32,
    pub laddr: u64,
    pub len: u32,
    pub rkey: u32,
    pub raddr: u64,
    pub remote_qpn: u32,
    pub qkey: u32,
}

/// An SRD QP (created by libefa) and its `struct ibv_qp_ex`.
pub struct SrdQp<'a> {
    qp: Qp<'a>,
    ex: *mut QpEx,
}

impl SrdQp<'_> {
    pub fn num(&self) -> u32 {
        self.qp.num()
    }

    /// RESET -> INIT -> RTR -> RTS with the masks the efa kernel driver requires of an SRD QP
    /// (efa_verbs.c `srd_qp_state_table`: INIT needs exactly PKEY_INDEX, PORT and QKEY, RTR
    /// nothing, RTS SQ_PSN; any RC attribute is EOPNOTSUPP), P_Key index 0 and the QKEY the
    /// senders name in `wr_set_ud_addr`.
    pub fn to_rts(&self, port: u8, qkey: u32, sq_psn: u32) -> Result<(), String> {
        let mut a = QpAttr {
            qp_state: QPS_INIT,
            pkey_index: 0,
            port_num: port,
            qkey,
            ..QpAttr::default()
        };
        self.qp
            .modify(&mut a, QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_QKEY, "INIT")?;
        let mut a = QpAttr {
            qp_state: QPS_RTR,
            ..QpAttr::default()
        };
        self.qp.modify(&mut a, QP_STATE, "RTR")?;
        let mut a = QpAttr {
            qp_state: QPS_RTS,
            sq_psn,
            ..QpAttr::default()
        };
        self.qp.modify(&mut a, QP_STATE | QP_SQ_PSN, "RTS")
    }

    /// One signalled work request through the builders, in the order rdma-core's own tests and
    /// perftest use: start, wr_id and wr_flags, the opcode's builder, the destination, the local
    /// buffer, complete. `wr_flags` is written before the builder, which is where the EFA
    /// provider checks it (verbs.c `efa_send_wr_alloc`: "Non signaled WRs not supported").
    pub fn post(&self, wr: &SrdWr, ah: &Ah) -> Result<(), String> {
        let ex = self.ex;
        // SAFETY: `ex` is this live QP's `struct ibv_qp_ex` (ibv_qp_to_qp_ex); the fields are
        // read through the raw pointer, as the provider filled them at creation.
        let (start, builder, set_ud_addr, set_sge, complete) = unsafe {
            (
                (*ex).wr_start,
                match wr.op {
                    SrdOp::Write => (*ex).wr_rdma_write,
                    SrdOp::Read => (*ex).wr_rdma_read,
                },
                (*ex).wr_set_ud_addr,
                (*ex).wr_set_sge,
                (*ex).wr_complete,
            )
        };
        let (Some(start), Some(set_ud_addr), Some(set_sge), Some(complete)) =
            (start, set_ud_addr, set_sge, complete)
        else {
            return Err(
                "the provider's ibv_qp_ex lacks wr_start, wr_set_ud_addr, wr_set_sge or wr_complete"
                    .into(),
            );
        };
        let Some(builder) = builder else {
            // The EFA provider leaves a builder NULL unless send_ops_flags asked for it.
            return Err(format!(
                "the provider's ibv_qp_ex has no wr_rdma_{}",
                if wr.op == SrdOp::Write {
                    "write"
                } else {
                    "read"
                }
            ));
        };
        // SAFETY: the builders are the provider's, called in the documented order on a QP in
        // RTS; the AH outlives the call, and the buffers are registered regions that outlive
        // the work request's completion (the caller polls for it before releasing them).
        let rc = unsafe {
            start(ex);
            std::ptr::addr_of_mut!((*ex).wr_id).write(wr.id);
            std::ptr::addr_of_mut!((*ex).wr_flags).write(SEND_SIGNALED);
            builder(ex, wr.rkey, wr.raddr);
            set_ud_addr(ex, ah.ah, wr.remote_qpn, wr.qkey);
            set_sge(ex, wr.lkey, wr.laddr, wr.len);
            complete(ex)
        };
        if rc != 0 {
            return Err(format!("ibv_wr_complete: {}", errno_or(rc)));
        }
        Ok(())
    }
}
