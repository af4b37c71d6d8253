//! libefa, rdma-core's library of AWS EFA's direct verbs (providers/efa), loaded at run time:
//! `efadv_query_device` (what the device offers: RDMA READ, RDMA WRITE, the largest RDMA
//! transfer) and `efadv_create_qp_ex` (an SRD queue pair: EFA offers no RC). Both are in libefa's
//! oldest symbol version that has them, EFA_1.1 (providers/efa/libefa.map; rdma-core 26), and
//! each has one version, so a plain lookup finds it. The structures are checked against the
//! real <infiniband/efadv.h> by tests/verbs_layout.rs ([`layout`]).
//!
//! libefa is the EFA provider itself (its SONAME is libefa.so.1, and libibverbs loads the same
//! file for an EFA device), so on a working EFA node it is already in the process when the
//! device is opened; dlopen then returns that copy.

use super::ibverbs::{Context, Cq, LoadError, Pd, QPT_DRIVER, QpCap, QpHead, QpInitAttrEx};
use super::ibverbs::{QP_INIT_ATTR_PD, QP_INIT_ATTR_SEND_OPS_FLAGS, SrdQp};
use super::{Loaded, candidates, open};
use std::ffi::{c_int, c_void};
use std::mem::{offset_of, size_of};

pub const ENV: &str = "GDRDOCTOR_LIBEFA";
pub use crate::model::gdr::LIBEFA as SONAME;
/// Where the EFA installer puts its rdma-core (its prefix, /opt/amazon/efa), for a node whose
/// loader configuration does not name that directory.
pub const EFA_INSTALLER: &str = "/opt/amazon/efa/lib/libefa.so.1";

/// `EFADV_DEVICE_ATTR_CAPS_RDMA_READ` and `_RDMA_WRITE` (efadv.h; WRITE added in 2023, c4a2ed065).
/// These are libefa's bits, not the kernel's (efa-abi.h numbers them differently).
pub const CAPS_RDMA_READ: u32 = 1 << 0;
pub const CAPS_RDMA_WRITE: u32 = 1 << 3;
/// `EFADV_QP_DRIVER_TYPE_SRD` (efadv.h).
pub const QP_DRIVER_TYPE_SRD: u32 = 0;

/// `struct efadv_device_attr` (efadv.h), 32 bytes. `inline_buf_size_ex` was `reserved[2]` before
/// rdma-core 2026; the offsets have not changed since device_caps and max_rdma_size were added
/// (2019).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct DeviceAttr {
    pub comp_mask: u64,
    pub max_sq_wr: u32,
    pub max_rq_wr: u32,
    pub max_sq_sge: u16,
    pub max_rq_sge: u16,
    pub inline_buf_size: u16,
    pub inline_buf_size_ex: u16,
    /// `EFADV_DEVICE_ATTR_CAPS_*`.
    pub device_caps: u32,
    /// The largest byte count of one RDMA READ or WRITE work request.
    pub max_rdma_size: u32,
}

/// `struct efadv_qp_init_attr` (efadv.h) as every libefa with `efadv_create_qp_ex` accepts it:
/// the first 16 bytes (newer headers append `wr_flags`; an older library rejects a longer
/// `inlen` unless the extra bytes are zero, verbs.c `is_ext_cleared`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct QpInitAttr {
    /// Must be 0.
    pub comp_mask: u64,
    pub driver_qp_type: u32,
    /// `reserved[4]` in older headers; `flags` (u16), `sl` (u8), `reserved` (u8) in newer ones.
    pub _flags_sl_reserved: [u8; 4],
}

/// The sizes and offsets this module relies on, named as tests/stubs/efa_layout.c prints them.
pub fn layout() -> Vec<(&'static str, usize)> {
    vec![
        ("sizeof(struct efadv_device_attr)", size_of::<DeviceAttr>()),
        (
            "efadv_device_attr.max_sq_wr",
            offset_of!(DeviceAttr, max_sq_wr),
        ),
        (
            "efadv_device_attr.max_sq_sge",
            offset_of!(DeviceAttr, max_sq_sge),
        ),
        (
            "efadv_device_attr.inline_buf_size",
            offset_of!(DeviceAttr, inline_buf_size),
        ),
        (
            "efadv_device_attr.device_caps",
            offset_of!(DeviceAttr, device_caps),
        ),
        (
            "efadv_device_attr.max_rdma_size",
            offset_of!(DeviceAttr, max_rdma_size),
        ),
        (
            "sizeof(struct efadv_qp_init_attr), up to 16",
            size_of::<QpInitAttr>(),
        ),
        (
            "efadv_qp_init_attr.driver_qp_type",
            offset_of!(QpInitAttr, driver_qp_type),
        ),
    ]
}

type QueryDevice = unsafe extern "C" fn(*mut c_void, *mut DeviceAttr, u32) -> c_int;
type CreateQpEx =
    unsafe extern "C" fn(*mut c_void, *mut QpInitAttrEx, *mut QpInitAttr, u32) -> *mut QpHead;

/// libefa's two calls.
pub struct Efa {
    /// The file the loader found.
    pub path: String,
    query_device: QueryDevice,
    create_qp_ex: CreateQpEx,
}

impl Efa {
    /// `$GDRDOCTOR_LIBEFA` when set, else libefa.so.1 where the loader finds it, else the EFA
    /// installer's copy.
    pub fn load() -> Result<Efa, LoadError> {
        let Loaded { lib, path } = open(
            &candidates(ENV, &[SONAME, EFA_INSTALLER]),
            b"efadv_query_device\0",
        )
        .map_err(|(tried, message)| LoadError::NotFound { tried, message })?;
        let symbols = || -> Result<Efa, &'static str> {
            Ok(Efa {
                path: path.clone(),
                query_device: required!(lib, "efadv_query_device"),
                create_qp_ex: required!(lib, "efadv_create_qp_ex"),
            })
        };
        let efa = symbols().map_err(|symbol| LoadError::MissingSymbol {
            library: path.clone(),
            symbol: symbol.to_owned(),
        })?;
        // Kept loaded, as libibverbs is: it is the EFA provider of the devices already open.
        std::mem::forget(lib);
        Ok(efa)
    }

    /// `efadv_query_device` with the whole structure (inlen 32): RDMA_READ, RDMA_WRITE and
    /// max_rdma_size are filled only when `inlen` reaches max_rdma_size (verbs.c
    /// `efadv_query_device`). `Err`: the errno it returned, EOPNOTSUPP for a device that is
    /// not EFA (the one call that tells).
    pub fn query_device(&self, ctx: &Context) -> Result<DeviceAttr, std::io::Error> {
        let mut attr = DeviceAttr::default();
        // SAFETY: `attr` is a whole `struct efadv_device_attr` and `inlen` says so; the call
        // writes at most `inlen` bytes of it, and only reads the live context.
        let rc =
            unsafe { (self.query_device)(ctx.raw(), &mut attr, size_of::<DeviceAttr>() as u32) };
        // 0, or a positive errno; never -1 with errno set.
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc.saturating_abs()));
        }
        Ok(attr)
    }

    /// An SRD QP on `pd` whose send and receive completions go to `cq`, able to post `ops`
    /// (`IBV_QP_EX_WITH_*`), at most `depth` in flight. `Err`: the call that failed and why.
    pub fn create_srd_qp<'p>(
        &self,
        pd: &'p Pd<'p>,
        cq: &Cq,
        depth: u32,
        ops: u64,
    ) -> Result<SrdQp<'p>, String> {
        let mut attr = QpInitAttrEx {
            qp_context: std::ptr::null_mut(),
            // The EFA provider requires both (verbs.c efa_check_qp_attr).
            send_cq: cq.raw(),
            recv_cq: cq.raw(),
            srq: std::ptr::null_mut(),
            cap: QpCap {
                max_send_wr: depth,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: QPT_DRIVER,
            sq_sig_all: 0,
            // PD is mandatory; SEND_OPS_FLAGS makes the provider fill the builders.
            comp_mask: QP_INIT_ATTR_PD | QP_INIT_ATTR_SEND_OPS_FLAGS,
            pd: pd.raw(),
            xrcd: std::ptr::null_mut(),
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: std::ptr::null_mut(),
            rx_hash_conf: [0; 3],
            source_qpn: 0,
            send_ops_flags: ops,
        };
        let mut efa = QpInitAttr {
            driver_qp_type: QP_DRIVER_TYPE_SRD,
            ..QpInitAttr::default()
        };
        // SAFETY: both structures are whole and live during the call, `inlen` is the size of
        // ours; the context, PD and CQ are live and outlive the QP (it borrows the PD).
        let qp = unsafe {
            (self.create_qp_ex)(
                pd.context().raw(),
                &mut attr,
                &mut efa,
                size_of::<QpInitAttr>() as u32,
            )
        };
        if qp.is_null() {
            let e = std::io::Error::last_os_error();
            return Err(format!("efadv_create_qp_ex: {}", os_error(&e)));
        }
        pd.adopt_srd(qp)
    }
}

/// `Operation not supported (EOPNOTSUPP, errno 95)`-like text, without crate::gdr's helper
/// (a lower floor may not import it): the library's words and the errno.
fn os_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => format!(
            "{} (errno {n})",
            e.to_string().split(" (os error").next().unwrap_or_default()
        ),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// libefa as this machine has it (rdma-core's, where libibverbs-dev's ibverbs-providers is
    /// installed): both calls found under the names this module looks up; without it, the error
    /// names every file tried.
    #[test]
    fn load_this_machine() {
        // libibverbs-dev (tests/all.sh installs it) brings ibverbs-providers, which has libefa.
        if std::path::Path::new("/usr/include/infiniband/efadv.h").exists() {
            assert!(Efa::load().is_ok(), "{:?}", Efa::load().err());
        }
        match Efa::load() {
            Ok(efa) => assert!(efa.path.contains("libefa"), "{}", efa.path),
            Err(LoadError::NotFound { tried, .. }) => {
                assert!(tried.iter().any(|t| t.contains("libefa")), "{tried:?}")
            }
            Err(e) => panic!("{e:?}"),
        }
    }
}
