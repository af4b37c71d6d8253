//! NCCL (libnccl.so.2), or AMD's RCCL (librccl.so.1), loaded with dlopen, and only in
//! `gdrdoctor nccl-child` (src/probe/nccl/child.rs): the ten calls that make a communicator over
//! the node's GPUs and run one all-reduce on it. Signatures and constants from NCCL's public
//! header (src/nccl.h.in), unchanged since 2.4 for everything used here except
//! `ncclGetLastError` (2.13) and `ncclCommGetAsyncError` (2.6), which are looked up as optional.
//! RCCL exports the same functions under the same names from its own copy of that header
//! (ROCm/rccl src/nccl.h.in), with a `hipStream_t` where NCCL takes a `cudaStream_t`: both are
//! opaque pointers, and `ncclGetVersion` gives the NCCL release RCCL is built on (RCCL 2.22.3:
//! 22203).

use super::chain;
use super::gpu::Stream;
use super::ibverbs::Registrable;
use crate::model::nccl::Library as Which;
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_void};

/// Replaces the loader's `libnccl.so.2` as the first library to try: the tests' stand-in, or a
/// site's NCCL in an odd place.
pub const ENV: &str = "GDRDOCTOR_LIBNCCL";
pub const SONAME: &str = "libnccl.so.2";
/// The same for RCCL: `librccl.so.1` is the name ROCm's package installs (`librccl.so` is the
/// development link).
pub const RCCL_ENV: &str = "GDRDOCTOR_LIBRCCL";
pub const RCCL_SONAME: &str = "librccl.so.1";

/// The variable that replaces the loader's name, and that name, for one library.
pub fn names(which: Which) -> (&'static str, &'static str) {
    match which {
        Which::Nccl => (ENV, SONAME),
        Which::Rccl => (RCCL_ENV, RCCL_SONAME),
    }
}

type NcclResult = c_int;
/// `ncclComm_t`, an opaque pointer.
type RawComm = *mut c_void;

const NCCL_SUCCESS: NcclResult = 0;
/// `ncclInt32` of `ncclDataType_t`.
const NCCL_INT32: c_int = 2;
/// `ncclSum` of `ncclRedOp_t`.
const NCCL_SUM: c_int = 0;
/// `NCCL_UNIQUE_ID_BYTES`.
const UNIQUE_ID_BYTES: usize = 128;

/// `ncclUniqueId`: 128 opaque bytes, passed to `ncclCommInitRank` by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    internal: [c_char; UNIQUE_ID_BYTES],
}

struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> NcclResult,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> NcclResult,
    comm_init_rank: unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> NcclResult,
    comm_init_all: unsafe extern "C" fn(*mut RawComm, c_int, *const c_int) -> NcclResult,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        RawComm,
        *mut c_void,
    ) -> NcclResult,
    group_start: unsafe extern "C" fn() -> NcclResult,
    group_end: unsafe extern "C" fn() -> NcclResult,
    comm_destroy: unsafe extern "C" fn(RawComm) -> NcclResult,
    get_error_string: unsafe extern "C" fn(NcclResult) -> *const c_char,
    /// 2.6+: an error of the communicator's background work (the network proxy).
    comm_get_async_error: Option<unsafe extern "C" fn(RawComm, *mut NcclResult) -> NcclResult>,
    /// 2.13+: NCCL's own words for the last error (it ignores the communicator argument).
    get_last_error: Option<unsafe extern "C" fn(RawComm) -> *const c_char>,
}

impl Api {
    fn load(lib: &Library) -> Result<Api, &'static str> {
        Ok(Api {
            get_version: required!(lib, "ncclGetVersion"),
            get_unique_id: required!(lib, "ncclGetUniqueId"),
            comm_init_rank: required!(lib, "ncclCommInitRank"),
            comm_init_all: required!(lib, "ncclCommInitAll"),
            all_reduce: required!(lib, "ncclAllReduce"),
            group_start: required!(lib, "ncclGroupStart"),
            group_end: required!(lib, "ncclGroupEnd"),
            comm_destroy: required!(lib, "ncclCommDestroy"),
            get_error_string: required!(lib, "ncclGetErrorString"),
            comm_get_async_error: optional!(lib, "ncclCommGetAsyncError"),
            get_last_error: optional!(lib, "ncclGetLastError"),
        })
    }
}

/// A call that did not return `ncclSuccess`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclError {
    pub call: String,
    pub code: i32,
    /// `ncclGetErrorString`: `unhandled system error (run with NCCL_DEBUG=INFO for details)`.
    pub error: String,
    /// `ncclGetLastError`: what went wrong, in NCCL's words, when the library has it.
    pub detail: Option<String>,
}

/// Why a candidate library could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadError {
    /// No candidate loaded: each name with the loader's message.
    NotFound(Vec<(String, String)>),
    /// The file loaded but lacks a function every NCCL since 2.4 exports.
    MissingSymbol { library: String, symbol: String },
}

/// libnccl, loaded. It stays loaded until the process exits, as libcuda does: NCCL's threads
/// outlive any communicator the child destroys.
pub struct Nccl {
    api: Api,
    pub path: String,
    /// The names tried before it that did not load, each with the loader's message: which
    /// candidate was used follows from how many there are.
    pub tried: Vec<(String, String)>,
}

/// A communicator; destroyed with [`Nccl::destroy`] (the child exits right after either way).
pub struct Comm(RawComm);

impl Nccl {
    /// The first of `names` that loads (dlopen's rules for a bare name: LD_LIBRARY_PATH, the
    /// ld.so cache, the system directories), with every symbol looked up.
    pub fn open(names: &[String]) -> Result<Nccl, LoadError> {
        let mut tried = Vec::new();
        for name in names {
            // SAFETY: loading libnccl runs its constructors, which set up only their own state;
            // this happens in the nccl-child process alone, so a misbehaving library cannot take
            // the report down with it.
            match unsafe { Library::new(name) } {
                Ok(lib) => {
                    let path = super::symbol_file(&lib, b"ncclGetVersion\0")
                        .unwrap_or_else(|| name.clone());
                    let api = Api::load(&lib).map_err(|symbol| LoadError::MissingSymbol {
                        library: path.clone(),
                        symbol: symbol.into(),
                    })?;
                    std::mem::forget(lib);
                    return Ok(Nccl { api, path, tried });
                }
                Err(e) => tried.push((name.clone(), chain(&e))),
            }
        }
        Err(LoadError::NotFound(tried))
    }

    fn text(p: *const c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: NCCL returns NUL-terminated strings it owns (static or thread-local).
        let s = unsafe { CStr::from_ptr(p) }
            .to_string_lossy()
            .trim()
            .to_owned();
        (!s.is_empty()).then_some(s)
    }

    fn check(&self, call: &str, code: NcclResult) -> Result<(), NcclError> {
        if code == NCCL_SUCCESS {
            return Ok(());
        }
        // SAFETY: both take a plain value; the last-error call ignores its argument.
        let error = Self::text(unsafe { (self.api.get_error_string)(code) })
            .unwrap_or_else(|| format!("ncclResult_t {code}"));
        let detail = self
            .api
            .get_last_error
            .and_then(|f| Self::text(unsafe { f(std::ptr::null_mut()) }));
        Err(NcclError {
            call: call.into(),
            code,
            error,
            detail,
        })
    }

    /// `ncclGetVersion`: 22809 for 2.28.9 (see [`version_text`]).
    pub fn version(&self) -> Result<i32, NcclError> {
        let mut v: c_int = 0;
        // SAFETY: a valid out-pointer.
        self.check("ncclGetVersion", unsafe { (self.api.get_version)(&mut v) })?;
        Ok(v)
    }

    /// A communicator of one rank (`ncclGetUniqueId`, `ncclCommInitRank`), on the device whose
    /// context is current on this thread.
    pub fn init_one(&self) -> Result<Comm, NcclError> {
        let mut id = UniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: a valid out-pointer to a struct of NCCL_UNIQUE_ID_BYTES.
        self.check("ncclGetUniqueId", unsafe {
            (self.api.get_unique_id)(&mut id)
        })?;
        let mut comm: RawComm = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; the id is passed by value as the header declares.
        self.check("ncclCommInitRank", unsafe {
            (self.api.comm_init_rank)(&mut comm, 1, id, 0)
        })?;
        Ok(Comm(comm))
    }

    /// `ncclCommInitAll` over CUDA ordinals: rank i on `devices[i]`.
    pub fn init_all(&self, devices: &[i32]) -> Result<Vec<Comm>, NcclError> {
        let mut comms: Vec<RawComm> = vec![std::ptr::null_mut(); devices.len()];
        let n = c_int::try_from(devices.len()).unwrap_or(c_int::MAX);
        // SAFETY: `comms` has room for one communicator per device, `devices` is `n` ints.
        self.check("ncclCommInitAll", unsafe {
            (self.api.comm_init_all)(comms.as_mut_ptr(), n, devices.as_ptr())
        })?;
        Ok(comms.into_iter().map(Comm).collect())
    }

    pub fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        self.check("ncclGroupStart", unsafe { (self.api.group_start)() })
    }

    pub fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: no arguments.
        self.check("ncclGroupEnd", unsafe { (self.api.group_end)() })
    }

    /// A sum of `count` int32 from `send` into `recv` (device memory) on `stream`. Buffers and
    /// stream are taken as the GPU runtime's own (CUDA's, HIP's), so no raw pointer comes in from
    /// outside src/ffi; buffers smaller than `count` int32 are refused before the call.
    pub fn all_reduce_i32<M: Registrable + ?Sized, S: Stream + ?Sized>(
        &self,
        send: &M,
        recv: &M,
        count: usize,
        comm: &Comm,
        stream: &S,
    ) -> Result<(), NcclError> {
        let bytes = count.saturating_mul(4);
        if send.size() < bytes || recv.size() < bytes {
            return Err(NcclError {
                call: "ncclAllReduce (not called)".into(),
                code: -1,
                error: format!(
                    "buffers of {} and {} bytes for {count} int32",
                    send.size(),
                    recv.size()
                ),
                detail: None,
            });
        }
        // SAFETY: both buffers are device allocations of at least `count` int32 on the
        // communicator's GPU (checked above), and the stream belongs to that GPU.
        self.check("ncclAllReduce", unsafe {
            (self.api.all_reduce)(
                send.addr() as *const c_void,
                recv.addr() as *mut c_void,
                count,
                NCCL_INT32,
                NCCL_SUM,
                comm.0,
                stream.raw(),
            )
        })
    }

    /// The communicator's background error, when NCCL can tell (2.6+).
    pub fn async_error(&self, comm: &Comm) -> Result<(), NcclError> {
        let Some(f) = self.api.comm_get_async_error else {
            return Ok(());
        };
        let mut e: NcclResult = NCCL_SUCCESS;
        // SAFETY: a live communicator and a valid out-pointer.
        self.check("ncclCommGetAsyncError", unsafe { f(comm.0, &mut e) })?;
        self.check("ncclCommGetAsyncError (the communicator's error)", e)
    }

    pub fn destroy(&self, comm: Comm) -> Result<(), NcclError> {
        // SAFETY: a communicator NCCL gave us, destroyed once (`Comm` is consumed).
        self.check("ncclCommDestroy", unsafe {
            (self.api.comm_destroy)(comm.0)
        })
    }
}

/// `22809` -> `2.28.9`; `2804` -> `2.8.4` (NCCL_VERSION in nccl.h: the old encoding up to 2.8).
pub fn version_text(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, code % 10000 / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, code % 1000 / 100, code % 100)
    }
}

/// A failed NCCL call, as the run reports it.
impl From<NcclError> for crate::model::nccl::Outcome {
    fn from(e: NcclError) -> crate::model::nccl::Outcome {
        crate::model::nccl::Outcome::NcclError {
            call: e.call,
            code: e.code,
            error: e.error,
            detail: e.detail,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn version_codes() {
        assert_eq!(super::version_text(22809), "2.28.9");
        assert_eq!(super::version_text(21903), "2.19.3");
        assert_eq!(super::version_text(2804), "2.8.4");
        assert_eq!(super::version_text(2407), "2.4.7");
    }
}
