//! The structures of <infiniband/verbs.h> (rdma-core) the write test passes and reads, the sizes
//! and offsets `tests/verbs_layout.rs` compares with the real header ([`layout`]), and the
//! constants it uses.

use std::ffi::{c_int, c_uint, c_void};
use std::mem::offset_of;

// -- the structures --------------------------------------------------------------------------

/// `union ibv_gid`: the program's one GID type, laid out as the union is (16 bytes, 8-aligned).
pub use crate::parse::rdma::Gid;

/// `struct ibv_port_attr` (the fields before `flags` are the `_compat_` ones the exported
/// `ibv_query_port` fills).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PortAttr {
    pub state: c_uint,
    pub max_mtu: c_uint,
    pub active_mtu: c_uint,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
    /// Room for fields newer libraries add at the end.
    pub _reserved: [u32; 8],
}

/// `struct ibv_mr`: only read, through the pointer the library returns.
#[repr(C)]
pub struct Mr {
    pub context: *mut c_void,
    pub pd: *mut c_void,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// The start of `struct ibv_qp`, up to `qp_num`.
#[repr(C)]
pub struct QpHead {
    pub context: *mut c_void,
    pub qp_context: *mut c_void,
    pub pd: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct QpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct QpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut c_void,
    pub recv_cq: *mut c_void,
    pub srq: *mut c_void,
    pub cap: QpCap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobalRoute {
    pub dgid: Gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct AhAttr {
    pub grh: GlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct QpAttr {
    pub qp_state: c_uint,
    pub cur_qp_state: c_uint,
    pub path_mtu: c_uint,
    pub path_mig_state: c_uint,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: QpCap,
    pub ah_attr: AhAttr,
    pub alt_ah_attr: AhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr`, with its unions as the `rdma` member plus padding to their full size.
#[repr(C)]
pub struct SendWr {
    pub wr_id: u64,
    pub next: *mut SendWr,
    pub sg_list: *mut Sge,
    pub num_sge: c_int,
    pub opcode: c_uint,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub rdma_remote_addr: u64,
    pub rdma_rkey: u32,
    /// The rest of the `wr` union (its `atomic` member is 32 bytes).
    pub _wr_rest: [u32; 5],
    pub xrc_remote_srqn: u32,
    /// The `bind_mw` / `tso` union (48 bytes).
    pub _bind: [u64; 6],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct Wc {
    pub wr_id: u64,
    pub status: c_uint,
    pub opcode: c_uint,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

type PollCq = unsafe extern "C" fn(*mut c_void, c_int, *mut Wc) -> c_int;
type PostSend = unsafe extern "C" fn(*mut c_void, *mut SendWr, *mut *mut SendWr) -> c_int;

/// `struct ibv_context_ops`: 32 function pointers; `poll_cq` is the 12th, `post_send` the 26th.
#[repr(C)]
pub struct ContextOps {
    pub _before_poll_cq: [*mut c_void; 11],
    pub poll_cq: Option<PollCq>,
    pub _before_post_send: [*mut c_void; 13],
    pub post_send: Option<PostSend>,
    pub _after: [*mut c_void; 6],
}

/// The start of `struct ibv_context`.
#[repr(C)]
pub struct ContextHead {
    pub device: *mut c_void,
    pub ops: ContextOps,
}

/// The sizes and offsets of the structures above (see [`super::layout`]).
pub(super) fn base_layout() -> Vec<(&'static str, usize)> {
    vec![
        (
            "sizeof(struct ibv_port_attr)",
            std::mem::size_of::<PortAttr>() - 32,
        ),
        ("ibv_port_attr.state", offset_of!(PortAttr, state)),
        ("ibv_port_attr.active_mtu", offset_of!(PortAttr, active_mtu)),
        ("ibv_port_attr.lid", offset_of!(PortAttr, lid)),
        ("ibv_port_attr.phys_state", offset_of!(PortAttr, phys_state)),
        ("ibv_port_attr.link_layer", offset_of!(PortAttr, link_layer)),
        ("ibv_mr.lkey", offset_of!(Mr, lkey)),
        ("ibv_mr.rkey", offset_of!(Mr, rkey)),
        ("ibv_qp.qp_num", offset_of!(QpHead, qp_num)),
        (
            "sizeof(struct ibv_qp_init_attr)",
            std::mem::size_of::<QpInitAttr>(),
        ),
        ("ibv_qp_init_attr.cap", offset_of!(QpInitAttr, cap)),
        ("ibv_qp_init_attr.qp_type", offset_of!(QpInitAttr, qp_type)),
        (
            "ibv_qp_init_attr.sq_sig_all",
            offset_of!(QpInitAttr, sq_sig_all),
        ),
        ("sizeof(union ibv_gid)", std::mem::size_of::<Gid>()),
        ("_Alignof(union ibv_gid)", std::mem::align_of::<Gid>()),
        ("sizeof(struct ibv_ah_attr)", std::mem::size_of::<AhAttr>()),
        ("ibv_ah_attr.dlid", offset_of!(AhAttr, dlid)),
        ("ibv_ah_attr.is_global", offset_of!(AhAttr, is_global)),
        ("ibv_ah_attr.port_num", offset_of!(AhAttr, port_num)),
        (
            "ibv_global_route.sgid_index",
            offset_of!(GlobalRoute, sgid_index),
        ),
        (
            "ibv_global_route.hop_limit",
            offset_of!(GlobalRoute, hop_limit),
        ),
        ("sizeof(struct ibv_qp_attr)", std::mem::size_of::<QpAttr>()),
        ("ibv_qp_attr.path_mtu", offset_of!(QpAttr, path_mtu)),
        ("ibv_qp_attr.dest_qp_num", offset_of!(QpAttr, dest_qp_num)),
        (
            "ibv_qp_attr.qp_access_flags",
            offset_of!(QpAttr, qp_access_flags),
        ),
        ("ibv_qp_attr.ah_attr", offset_of!(QpAttr, ah_attr)),
        ("ibv_qp_attr.pkey_index", offset_of!(QpAttr, pkey_index)),
        (
            "ibv_qp_attr.max_rd_atomic",
            offset_of!(QpAttr, max_rd_atomic),
        ),
        (
            "ibv_qp_attr.min_rnr_timer",
            offset_of!(QpAttr, min_rnr_timer),
        ),
        ("ibv_qp_attr.port_num", offset_of!(QpAttr, port_num)),
        ("ibv_qp_attr.rnr_retry", offset_of!(QpAttr, rnr_retry)),
        ("ibv_qp_attr.rate_limit", offset_of!(QpAttr, rate_limit)),
        ("sizeof(struct ibv_sge)", std::mem::size_of::<Sge>()),
        ("sizeof(struct ibv_send_wr)", std::mem::size_of::<SendWr>()),
        ("ibv_send_wr.sg_list", offset_of!(SendWr, sg_list)),
        ("ibv_send_wr.num_sge", offset_of!(SendWr, num_sge)),
        ("ibv_send_wr.opcode", offset_of!(SendWr, opcode)),
        ("ibv_send_wr.send_flags", offset_of!(SendWr, send_flags)),
        (
            "ibv_send_wr.wr.rdma.remote_addr",
            offset_of!(SendWr, rdma_remote_addr),
        ),
        ("ibv_send_wr.wr.rdma.rkey", offset_of!(SendWr, rdma_rkey)),
        (
            "ibv_send_wr.qp_type.xrc.remote_srqn",
            offset_of!(SendWr, xrc_remote_srqn),
        ),
        ("sizeof(struct ibv_wc)", std::mem::size_of::<Wc>()),
        ("ibv_wc.status", offset_of!(Wc, status)),
        ("ibv_wc.byte_len", offset_of!(Wc, byte_len)),
        ("ibv_wc.qp_num", offset_of!(Wc, qp_num)),
        (
            "ibv_context.ops.poll_cq",
            offset_of!(ContextHead, ops) + offset_of!(ContextOps, poll_cq),
        ),
        (
            "ibv_context.ops.post_send",
            offset_of!(ContextHead, ops) + offset_of!(ContextOps, post_send),
        ),
        (
            "sizeof(struct ibv_context_ops)",
            std::mem::size_of::<ContextOps>(),
        ),
    ]
}

// -- constants from verbs.h ------------------------------------------------------------------

pub const ACCESS_LOCAL_WRITE: c_int = 1;
pub const ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const QPT_RC: c_uint = 2;
/// `IBV_QPT_DRIVER`: a provider's own QP type (EFA's SRD, created through libefa).
pub const QPT_DRIVER: c_uint = 0xff;
pub const QPS_INIT: c_uint = 1;
pub const QPS_RTR: c_uint = 2;
pub const QPS_RTS: c_uint = 3;
pub const WR_RDMA_WRITE: c_uint = 0;
pub const SEND_SIGNALED: c_uint = 1 << 1;
pub const PORT_ACTIVE: c_uint = 4;
pub const LINK_LAYER_ETHERNET: u8 = 2;
pub(super) const QP_STATE: c_int = 1;
pub(super) const QP_ACCESS_FLAGS: c_int = 1 << 3;
pub(super) const QP_PKEY_INDEX: c_int = 1 << 4;
pub(super) const QP_PORT: c_int = 1 << 5;
pub(super) const QP_QKEY: c_int = 1 << 6;
pub(super) const QP_AV: c_int = 1 << 7;
pub(super) const QP_PATH_MTU: c_int = 1 << 8;
pub(super) const QP_TIMEOUT: c_int = 1 << 9;
pub(super) const QP_RETRY_CNT: c_int = 1 << 10;
pub(super) const QP_RNR_RETRY: c_int = 1 << 11;
pub(super) const QP_RQ_PSN: c_int = 1 << 12;
pub(super) const QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub(super) const QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub(super) const QP_SQ_PSN: c_int = 1 << 16;
pub(super) const QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub(super) const QP_DEST_QPN: c_int = 1 << 20;

/// `ibv_wc_status_str`'s words for the statuses a write test meets.
pub fn wc_status_name(status: c_uint) -> String {
    const NAMES: [&str; 24] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
        "IBV_WC_TM_ERR",
        "IBV_WC_TM_RNDV_INCOMPLETE",
    ];
    NAMES
        .get(status as usize)
        .map(|s| (*s).to_owned())
        .unwrap_or_else(|| format!("wc status {status}"))
}

/// `IBV_MTU_4096` (5) as bytes.
pub fn mtu_bytes(mtu: c_uint) -> u32 {
    match mtu {
        1..=5 => 128 << mtu,
        _ => 0,
    }
}
