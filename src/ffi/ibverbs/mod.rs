//! libibverbs for the GDR write test: the ~20 exported calls, the two inline ones reached through
//! `ibv_context.ops` (`post_send`, `poll_cq`), and the structures they take, laid out as
//! <infiniband/verbs.h> (rdma-core) lays them out. `tests/verbs_layout.rs` compiles a C program
//! against the real header and compares every size and offset used here with [`layout`].
//!
//! Every resource is owned by a guard whose `Drop` releases it, so every path (success, error,
//! panic) frees QPs, CQs, MRs, PDs and contexts in the right order.

use super::{Loaded, candidates, open};
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

pub const ENV: &str = "GDRDOCTOR_LIBIBVERBS";
pub use crate::model::access::SONAME;

mod srd;
mod structs;
pub use srd::{Ah, QpEx, QpInitAttrEx, SrdOp, SrdQp, SrdWr};
pub use srd::{
    QP_EX_WITH_RDMA_READ, QP_EX_WITH_RDMA_WRITE, QP_INIT_ATTR_PD, QP_INIT_ATTR_SEND_OPS_FLAGS,
};
use structs::base_layout;
pub use structs::*;

/// Every size and offset this module relies on, named as the C program in
/// tests/stubs/verbs_layout.c prints them.
pub fn layout() -> Vec<(&'static str, usize)> {
    let mut all = base_layout();
    all.extend(srd::layout());
    all
}

// -- the library -----------------------------------------------------------------------------

type GetDeviceList = unsafe extern "C" fn(*mut c_int) -> *mut *mut c_void;
type FreeDeviceList = unsafe extern "C" fn(*mut *mut c_void);
type GetDeviceName = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type OpenDevice = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type CloseDevice = unsafe extern "C" fn(*mut c_void) -> c_int;
type QueryPort = unsafe extern "C" fn(*mut c_void, u8, *mut PortAttr) -> c_int;
type QueryGid = unsafe extern "C" fn(*mut c_void, u8, c_int, *mut Gid) -> c_int;
type AllocPd = unsafe extern "C" fn(*mut c_void) -> *mut c_void;
type DeallocPd = unsafe extern "C" fn(*mut c_void) -> c_int;
type RegMr = unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int) -> *mut Mr;
type RegDmabufMr = unsafe extern "C" fn(*mut c_void, u64, usize, u64, c_int, c_int) -> *mut Mr;
type DeregMr = unsafe extern "C" fn(*mut Mr) -> c_int;
type CreateCq =
    unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut c_void, c_int) -> *mut c_void;
type DestroyCq = unsafe extern "C" fn(*mut c_void) -> c_int;
type CreateQp = unsafe extern "C" fn(*mut c_void, *mut QpInitAttr) -> *mut QpHead;
type ModifyQp = unsafe extern "C" fn(*mut QpHead, *mut QpAttr, c_int) -> c_int;
type DestroyQp = unsafe extern "C" fn(*mut QpHead) -> c_int;
type CreateAh = unsafe extern "C" fn(*mut c_void, *mut AhAttr) -> *mut c_void;
type DestroyAh = unsafe extern "C" fn(*mut c_void) -> c_int;
type QpToQpEx = unsafe extern "C" fn(*mut QpHead) -> *mut QpEx;

/// The exported calls. `reg_dmabuf_mr` is optional: rdma-core added it in 34 (IBVERBS_1.12).
/// So are the three only an SRD queue pair needs (an EFA device, [`srd`]): a library without
/// them still runs the RC test as before.
pub struct Verbs {
    pub path: String,
    get_device_list: GetDeviceList,
    free_device_list: FreeDeviceList,
    get_device_name: GetDeviceName,
    open_device: OpenDevice,
    close_device: CloseDevice,
    query_port: QueryPort,
    query_gid: QueryGid,
    alloc_pd: AllocPd,
    dealloc_pd: DeallocPd,
    reg_mr: RegMr,
    reg_dmabuf_mr: Option<RegDmabufMr>,
    dereg_mr: DeregMr,
    create_cq: CreateCq,
    destroy_cq: DestroyCq,
    create_qp: CreateQp,
    modify_qp: ModifyQp,
    destroy_qp: DestroyQp,
    /// `ibv_create_ah`, `ibv_destroy_ah` (IBVERBS_1.0).
    create_ah: Option<CreateAh>,
    destroy_ah: Option<DestroyAh>,
    /// `ibv_qp_to_qp_ex` (IBVERBS_1.6, rdma-core 21; libibverbs/verbs.c): the builders of a QP
    /// created with send_ops_flags.
    qp_to_qp_ex: Option<QpToQpEx>,
}

/// Why libibverbs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LoadError {
    NotFound { tried: Vec<String>, message: String },
    MissingSymbol { library: String, symbol: String },
}

macro_rules! sym {
    ($lib:expr, $path:expr, $name:literal) => {
        // SAFETY: the type at the use site matches the prototype in verbs.h.
        match unsafe { $lib.get(concat!($name, "\0").as_bytes()) } {
            Ok(s) => *s,
            Err(_) => {
                return Err(LoadError::MissingSymbol {
                    library: $path.clone(),
                    symbol: $name.into(),
                })
            }
        }
    };
}

impl Verbs {
    pub fn load() -> Result<Verbs, LoadError> {
        let Loaded { lib, path } = open(&candidates(ENV, &[SONAME]), b"ibv_get_device_list\0")
            .map_err(|(tried, message)| LoadError::NotFound { tried, message })?;
        let v = Verbs {
            get_device_list: sym!(lib, path, "ibv_get_device_list"),
            free_device_list: sym!(lib, path, "ibv_free_device_list"),
            get_device_name: sym!(lib, path, "ibv_get_device_name"),
            open_device: sym!(lib, path, "ibv_open_device"),
            close_device: sym!(lib, path, "ibv_close_device"),
            query_port: sym!(lib, path, "ibv_query_port"),
            query_gid: sym!(lib, path, "ibv_query_gid"),
            alloc_pd: sym!(lib, path, "ibv_alloc_pd"),
            dealloc_pd: sym!(lib, path, "ibv_dealloc_pd"),
            reg_mr: sym!(lib, path, "ibv_reg_mr"),
            // SAFETY: as in `sym!`.
            reg_dmabuf_mr: unsafe { lib.get(b"ibv_reg_dmabuf_mr\0") }.ok().map(|s| *s),
            dereg_mr: sym!(lib, path, "ibv_dereg_mr"),
            create_cq: sym!(lib, path, "ibv_create_cq"),
            destroy_cq: sym!(lib, path, "ibv_destroy_cq"),
            create_qp: sym!(lib, path, "ibv_create_qp"),
            modify_qp: sym!(lib, path, "ibv_modify_qp"),
            destroy_qp: sym!(lib, path, "ibv_destroy_qp"),
            // SAFETY: as in `sym!`; each is optional (see the struct).
            create_ah: unsafe { lib.get(b"ibv_create_ah\0") }.ok().map(|s| *s),
            // SAFETY: as in `sym!`.
            destroy_ah: unsafe { lib.get(b"ibv_destroy_ah\0") }.ok().map(|s| *s),
            // SAFETY: as in `sym!`.
            qp_to_qp_ex: unsafe { lib.get(b"ibv_qp_to_qp_ex\0") }.ok().map(|s| *s),
            path,
        };
        // Providers stay loaded with the library until the process (the test child) exits.
        std::mem::forget(lib);
        Ok(v)
    }

    pub fn has_reg_dmabuf_mr(&self) -> bool {
        self.reg_dmabuf_mr.is_some()
    }

    /// The devices libibverbs has a provider for; `Err` with errno when the list fails.
    pub fn device_names(&self) -> Result<Vec<String>, std::io::Error> {
        let mut n: c_int = 0;
        // SAFETY: valid out-pointer; a null return means failure with errno set.
        let list = unsafe { (self.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        let mut names = Vec::new();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: the list holds `n` device pointers until it is freed.
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            // SAFETY: a NUL-terminated name owned by the device, copied before the free.
            let p = unsafe { (self.get_device_name)(dev) };
            if !p.is_null() {
                names.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
            }
        }
        // SAFETY: freed exactly once.
        unsafe { (self.free_device_list)(list) };
        Ok(names)
    }

    /// Opens a device by name. `Ok(None)`: no provider lists it.
    pub fn open(&self, name: &str) -> Result<Option<Context<'_>>, std::io::Error> {
        let mut n: c_int = 0;
        // SAFETY: as in `device_names`.
        let list = unsafe { (self.get_device_list)(&mut n) };
        if list.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        let mut found = None;
        for i in 0..usize::try_from(n).unwrap_or(0) {
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            let p = unsafe { (self.get_device_name)(dev) };
            if !p.is_null() && unsafe { CStr::from_ptr(p) }.to_bytes() == name.as_bytes() {
                found = Some(dev);
                break;
            }
        }
        let result = match found {
            None => Ok(None),
            Some(dev) => {
                // SAFETY: `dev` is from the live list; the context outlives the list.
                let ctx = unsafe { (self.open_device)(dev) };
                if ctx.is_null() {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(Some(Context { verbs: self, ctx }))
                }
            }
        };
        unsafe { (self.free_device_list)(list) };
        result
    }
}

/// An open device context.
pub struct Context<'a> {
    verbs: &'a Verbs,
    ctx: *mut c_void,
}

impl Drop for Context<'_> {
    fn drop(&mut self) {
        // SAFETY: opened by us, closed once, after every child resource (they borrow us).
        unsafe { (self.verbs.close_device)(self.ctx) };
    }
}

fn errno_or(rc: c_int) -> std::io::Error {
    // Verbs return either -1 with errno or the errno itself.
    if rc > 0 {
        std::io::Error::from_raw_os_error(rc)
    } else {
        std::io::Error::last_os_error()
    }
}

impl<'a> Context<'a> {
    pub fn query_port(&self, port: u8) -> Result<PortAttr, std::io::Error> {
        let mut attr = PortAttr::default();
        // SAFETY: `attr` is larger than the compat structure the call fills.
        let rc = unsafe { (self.verbs.query_port)(self.ctx, port, &mut attr) };
        if rc != 0 {
            return Err(errno_or(rc));
        }
        Ok(attr)
    }

    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid, std::io::Error> {
        let mut gid = Gid::default();
        let rc = unsafe { (self.verbs.query_gid)(self.ctx, port, index as c_int, &mut gid) };
        if rc != 0 {
            return Err(errno_or(rc));
        }
        Ok(gid)
    }

    pub fn alloc_pd(&self) -> Result<Pd<'_>, std::io::Error> {
        let pd = unsafe { (self.verbs.alloc_pd)(self.ctx) };
        if pd.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Pd { ctx: self, pd })
    }

    pub fn create_cq(&self, cqe: i32) -> Result<Cq<'_>, std::io::Error> {
        let cq = unsafe {
            (self.verbs.create_cq)(self.ctx, cqe, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if cq.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Cq { ctx: self, cq })
    }

    /// The `struct ibv_context *`, for libefa's direct verbs (crate::ffi::efa).
    pub(in crate::ffi) fn raw(&self) -> *mut c_void {
        self.ctx
    }

    fn ops(&self) -> &ContextOps {
        // SAFETY: `ctx` points to a live `struct ibv_context`, whose `ops` follow `device`.
        unsafe { &(*(self.ctx as *const ContextHead)).ops }
    }
}

pub struct Pd<'a> {
    ctx: &'a Context<'a>,
    pd: *mut c_void,
}

impl Drop for Pd<'_> {
    fn drop(&mut self) {
        unsafe { (self.ctx.verbs.dealloc_pd)(self.pd) };
    }
}

/// Memory that may be registered with a NIC by its address: a range that stays mapped, where
/// it is, for as long as the value lives. Sealed: only ffi's own buffers are (host memory, and
/// device memory from CUDA or HIP), so that [`Pd::reg_mr`] can be safe.
pub trait Registrable: sealed::Sealed {
    /// The start of the range, as the NIC is given it: a host or a GPU virtual address.
    fn addr(&self) -> u64;
    /// Its length, bytes.
    fn size(&self) -> usize;
}

pub(crate) mod sealed {
    /// Implemented by ffi's buffers alone.
    pub trait Sealed {}
}

impl<'a> Pd<'a> {
    /// The `struct ibv_pd *` and its context's, for libefa (crate::ffi::efa).
    pub(in crate::ffi) fn raw(&self) -> *mut c_void {
        self.pd
    }
    pub(in crate::ffi) fn context(&self) -> &'a Context<'a> {
        self.ctx
    }

    /// `ibv_reg_mr` on memory of ours: host memory, or (the peermem path) a GPU's. The region
    /// borrows the memory, so that it cannot be freed while the NIC may still reach it.
    pub fn reg_mr<'s, M: Registrable + ?Sized>(
        &'s self,
        mem: &'s M,
        access: c_int,
    ) -> Result<MemoryRegion<'s>, std::io::Error> {
        // SAFETY: a `Registrable` keeps `addr..addr + size` mapped while it lives, and the
        // region, which borrows it, is deregistered before it can go.
        let mr = unsafe {
            (self.ctx.verbs.reg_mr)(self.pd, mem.addr() as *mut c_void, mem.size(), access)
        };
        if mr.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(MemoryRegion { pd: self, mr })
    }

    /// `ibv_reg_dmabuf_mr`; `None` when the library predates it.
    pub fn reg_dmabuf_mr(
        &self,
        offset: u64,
        len: usize,
        iova: u64,
        fd: i32,
        access: c_int,
    ) -> Option<Result<MemoryRegion<'_>, std::io::Error>> {
        let f = self.ctx.verbs.reg_dmabuf_mr?;
        // SAFETY: the fd is a dma-buf the caller keeps open until registration returns; the
        // kernel holds its own reference afterwards.
        let mr = unsafe { f(self.pd, offset, len, iova, fd, access) };
        Some(if mr.is_null() {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(MemoryRegion { pd: self, mr })
        })
    }

    pub fn create_qp(&self, cq: &Cq<'_>, depth: u32) -> Result<Qp<'_>, std::io::Error> {
        let mut init = QpInitAttr {
            qp_context: std::ptr::null_mut(),
            send_cq: cq.cq,
            recv_cq: cq.cq,
            srq: std::ptr::null_mut(),
            cap: QpCap {
                max_send_wr: depth,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QPT_RC,
            sq_sig_all: 0,
        };
        let qp = unsafe { (self.ctx.verbs.create_qp)(self.pd, &mut init) };
        if qp.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Qp { pd: self, qp })
    }
}

pub struct MemoryRegion<'a> {
    pd: &'a Pd<'a>,
    mr: *mut Mr,
}

impl MemoryRegion<'_> {
    pub fn lkey(&self) -> u32 {
        unsafe { (*self.mr).lkey }
    }
    pub fn rkey(&self) -> u32 {
        unsafe { (*self.mr).rkey }
    }
}

impl Drop for MemoryRegion<'_> {
    fn drop(&mut self) {
        unsafe { (self.pd.ctx.verbs.dereg_mr)(self.mr) };
    }
}

pub struct Cq<'a> {
    ctx: &'a Context<'a>,
    cq: *mut c_void,
}

impl Drop for Cq<'_> {
    fn drop(&mut self) {
        unsafe { (self.ctx.verbs.destroy_cq)(self.cq) };
    }
}

impl Cq<'_> {
    /// The `struct ibv_cq *`, for libefa (crate::ffi::efa).
    pub(in crate::ffi) fn raw(&self) -> *mut c_void {
        self.cq
    }

    /// `ibv_poll_cq` through the context's ops. `Err` when the provider has no `poll_cq`.
    pub fn poll(&self, wc: &mut [Wc]) -> Result<usize, String> {
        let f = self
            .ctx
            .ops()
            .poll_cq
            .ok_or("the provider has no poll_cq")?;
        let n = unsafe { f(self.cq, wc.len() as c_int, wc.as_mut_ptr()) };
        if n < 0 {
            return Err(format!("ibv_poll_cq returned {n}"));
        }
        Ok(n as usize)
    }
}

pub struct Qp<'a> {
    pd: &'a Pd<'a>,
    qp: *mut QpHead,
}

impl Drop for Qp<'_> {
    fn drop(&mut self) {
        unsafe { (self.pd.ctx.verbs.destroy_qp)(self.qp) };
    }
}

/// Where a QP connected to itself sends: its own GID (RoCE) or LID (InfiniBand).
#[derive(Debug, Clone, Copy)]
pub struct Loopback {
    pub port: u8,
    pub gid: Option<(u8, Gid)>,
    pub lid: u16,
    pub mtu: c_uint,
}

/// The QP at the other end of a connection, and the path to it.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    /// This side's port.
    pub port: u8,
    /// RoCE (or a routed InfiniBand fabric): this side's GID index and the other side's GID.
    pub sgid_index: Option<u8>,
    pub dgid: Option<Gid>,
    /// InfiniBand: the other port's LID.
    pub dlid: u16,
    /// `IBV_MTU_*`: the path MTU, no larger than either port's active MTU.
    pub mtu: c_uint,
    pub dest_qpn: u32,
    pub hop_limit: u8,
    /// The first packet sequence number this side expects, and the one it sends.
    pub rq_psn: u32,
    pub sq_psn: u32,
}

impl Qp<'_> {
    pub fn num(&self) -> u32 {
        unsafe { (*self.qp).qp_num }
    }

    fn modify(&self, attr: &mut QpAttr, mask: c_int, what: &str) -> Result<(), String> {
        let rc = unsafe { (self.pd.ctx.verbs.modify_qp)(self.qp, attr, mask) };
        if rc != 0 {
            return Err(format!("ibv_modify_qp to {what}: {}", errno_or(rc)));
        }
        Ok(())
    }

    /// RESET -> INIT -> RTR -> RTS, connected to itself.
    pub fn connect_to_self(&self, to: Loopback) -> Result<(), String> {
        self.connect(Remote {
            port: to.port,
            sgid_index: to.gid.map(|(i, _)| i),
            dgid: to.gid.map(|(_, g)| g),
            dlid: to.lid,
            mtu: to.mtu,
            dest_qpn: self.num(),
            // One hop: the packets never leave the port.
            hop_limit: 1,
            rq_psn: 0,
            sq_psn: 0,
        })
    }

    /// RESET -> INIT -> RTR -> RTS, connected to another QP (on this node or another).
    pub fn connect(&self, to: Remote) -> Result<(), String> {
        let mut a = QpAttr {
            qp_state: QPS_INIT,
            port_num: to.port,
            pkey_index: 0,
            qp_access_flags: (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ)
                as c_uint,
            ..QpAttr::default()
        };
        self.modify(
            &mut a,
            QP_STATE | QP_PKEY_INDEX | QP_PORT | QP_ACCESS_FLAGS,
            "INIT",
        )?;
        let mut ah = AhAttr {
            dlid: to.dlid,
            port_num: to.port,
            ..AhAttr::default()
        };
        if let (Some(index), Some(gid)) = (to.sgid_index, to.dgid) {
            ah.is_global = 1;
            ah.grh = GlobalRoute {
                dgid: gid,
                sgid_index: index,
                hop_limit: to.hop_limit,
                ..GlobalRoute::default()
            };
        }
        let mut a = QpAttr {
            qp_state: QPS_RTR,
            path_mtu: to.mtu,
            dest_qp_num: to.dest_qpn,
            rq_psn: to.rq_psn,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ah_attr: ah,
            ..QpAttr::default()
        };
        self.modify(
            &mut a,
            QP_STATE
                | QP_AV
                | QP_PATH_MTU
                | QP_DEST_QPN
                | QP_RQ_PSN
                | QP_MAX_DEST_RD_ATOMIC
                | QP_MIN_RNR_TIMER,
            "RTR",
        )?;
        let mut a = QpAttr {
            qp_state: QPS_RTS,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            sq_psn: to.sq_psn,
            max_rd_atomic: 1,
            ..QpAttr::default()
        };
        self.modify(
            &mut a,
            QP_STATE | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_SQ_PSN | QP_MAX_QP_RD_ATOMIC,
            "RTS",
        )
    }

    /// One signalled RDMA WRITE of `len` bytes from `(laddr, lkey)` to `(raddr, rkey)`.
    pub fn post_write(
        &self,
        id: u64,
        laddr: u64,
        lkey: u32,
        len: u32,
        raddr: u64,
        rkey: u32,
    ) -> Result<(), String> {
        let f = self
            .pd
            .ctx
            .ops()
            .post_send
            .ok_or("the provider has no post_send")?;
        let mut sge = Sge {
            addr: laddr,
            length: len,
            lkey,
        };
        let mut wr = SendWr {
            wr_id: id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
            opcode: WR_RDMA_WRITE,
            send_flags: SEND_SIGNALED,
            imm_data: 0,
            rdma_remote_addr: raddr,
            rdma_rkey: rkey,
            _wr_rest: [0; 5],
            xrc_remote_srqn: 0,
            _bind: [0; 6],
        };
        let mut bad: *mut SendWr = std::ptr::null_mut();
        // SAFETY: `wr` and `sge` live across the call; the provider copies them into its queue.
        let rc = unsafe { f(self.qp.cast(), &mut wr, &mut bad) };
        if rc != 0 {
            return Err(format!("ibv_post_send: {}", errno_or(rc)));
        }
        Ok(())
    }
}

/// Loads libibverbs for a quick look (rdma-access): the library's error text, if any.
pub fn describe(e: &LoadError) -> String {
    match e {
        LoadError::NotFound { message, .. } => message.clone(),
        LoadError::MissingSymbol { library, symbol } => {
            format!("{library} does not export {symbol}")
        }
    }
}
