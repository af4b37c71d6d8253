//! HIP (libamdhip64) and HSA (libhsa-runtime64), loaded with dlopen: the AMD side of the GPU
//! probe, of the GDR write test, and of `nccl verify`'s child when it runs RCCL. Built against
//! the documented ABI (hip_runtime_api.h, hsa.h, hsa_ext_amd.h of ROCm 6) and tested with the
//! stand-in library (tests/stubs/hip.c) only: no AMD GPU was at hand (see README).

use super::gpu::{
    Allocation, CollectiveGpu, CollectiveRuntime, DeviceMemory, GpuLibrary, OpenedGpu, Stream,
    sealed::RawStream,
};
use super::{Loaded, buffer_text, candidates, fd_target, open};
use crate::model::gdr::Memory;
use crate::model::gpu::{Export, Hip, HipDevice, HsaLib, Lib, PROBE_BYTES};
use crate::parse::pci::Bdf;
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};

pub const ENV_HIP: &str = "GDRDOCTOR_LIBHIP";
pub const ENV_HSA: &str = "GDRDOCTOR_LIBHSA";
/// ROCm puts its libraries in /opt/rocm/lib and, usually, that directory in ld.so.conf.d.
pub const HIP_NAMES: &[&str] = &[
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
    "/opt/rocm/lib/libamdhip64.so",
];
pub const HSA_NAMES: &[&str] = &[
    "libhsa-runtime64.so.1",
    "libhsa-runtime64.so",
    "/opt/rocm/lib/libhsa-runtime64.so.1",
];

type HipError = c_int;
type HsaStatus = c_int;
const HIP_SUCCESS: HipError = 0;
const HSA_STATUS_SUCCESS: HsaStatus = 0;

struct HipApi {
    init: unsafe extern "C" fn(c_uint) -> HipError,
    driver_get_version: unsafe extern "C" fn(*mut c_int) -> HipError,
    get_device_count: unsafe extern "C" fn(*mut c_int) -> HipError,
    device_get: unsafe extern "C" fn(*mut c_int, c_int) -> HipError,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError,
    device_get_pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError,
    set_device: unsafe extern "C" fn(c_int) -> HipError,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> HipError,
    free: unsafe extern "C" fn(*mut c_void) -> HipError,
    get_error_name: Option<unsafe extern "C" fn(HipError) -> *const c_char>,
}

struct HsaApi {
    init: unsafe extern "C" fn() -> HsaStatus,
    export_dmabuf: unsafe extern "C" fn(*const c_void, usize, *mut c_int, *mut u64) -> HsaStatus,
    close_dmabuf: unsafe extern "C" fn(c_int) -> HsaStatus,
    status_string: Option<unsafe extern "C" fn(HsaStatus, *mut *const c_char) -> HsaStatus>,
}

impl HipApi {
    fn load(lib: &Library) -> Result<HipApi, &'static str> {
        Ok(HipApi {
            init: required!(lib, "hipInit"),
            driver_get_version: required!(lib, "hipDriverGetVersion"),
            get_device_count: required!(lib, "hipGetDeviceCount"),
            device_get: required!(lib, "hipDeviceGet"),
            device_get_name: required!(lib, "hipDeviceGetName"),
            device_get_pci_bus_id: required!(lib, "hipDeviceGetPCIBusId"),
            set_device: required!(lib, "hipSetDevice"),
            malloc: required!(lib, "hipMalloc"),
            free: required!(lib, "hipFree"),
            get_error_name: optional!(lib, "hipGetErrorName"),
        })
    }

    fn name(&self, code: HipError) -> String {
        if let Some(f) = self.get_error_name {
            // SAFETY: hipGetErrorName returns a static string (or null) for any code.
            let s = unsafe { f(code) };
            if !s.is_null() {
                return unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
            }
        }
        format!("hipError_t {code}")
    }
}

impl HsaApi {
    fn load(lib: &Library) -> Result<HsaApi, &'static str> {
        Ok(HsaApi {
            init: required!(lib, "hsa_init"),
            export_dmabuf: required!(lib, "hsa_amd_portable_export_dmabuf"),
            close_dmabuf: required!(lib, "hsa_amd_portable_close_dmabuf"),
            status_string: optional!(lib, "hsa_status_string"),
        })
    }

    fn name(&self, code: HsaStatus) -> String {
        if let Some(f) = self.status_string {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: `s` is a valid out-pointer; on success it points to a static string.
            if unsafe { f(code, &mut s) } == HSA_STATUS_SUCCESS && !s.is_null() {
                return unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
            }
        }
        format!("hsa_status_t {code:#x}")
    }
}

/// Loads HIP (and HSA for the export), initialises them and asks every GPU HIP sees; with
/// `export`, allocates [`PROBE_BYTES`] on each and exports it as a dma-buf.
pub fn probe(export: bool) -> Lib<Hip> {
    let session = match Session::open() {
        Ok(s) => s,
        Err(e) => return e.cast(),
    };
    let count = match session.count() {
        Ok(n) => n,
        Err(e) => return e.cast(),
    };
    let devices = (0..count.max(0))
        .map(|ordinal| session.device(ordinal, export))
        .collect();
    Lib::Ready(session.describe(devices))
}

fn load_hsa() -> (Lib<HsaLib>, Option<HsaApi>) {
    let Loaded { lib, path } = match open(&candidates(ENV_HSA, HSA_NAMES), b"hsa_init\0") {
        Ok(l) => l,
        Err((tried, message)) => return (Lib::NotFound { tried, message }, None),
    };
    let api = match HsaApi::load(&lib) {
        Ok(api) => api,
        Err(symbol) => {
            return (
                Lib::MissingSymbol {
                    library: path,
                    symbol: symbol.into(),
                },
                None,
            );
        }
    };
    // SAFETY: hsa_init takes no arguments and is reference-counted (HIP has called it too).
    let code = unsafe { (api.init)() };
    if code != HSA_STATUS_SUCCESS {
        let error = api.name(code);
        return (
            Lib::Failed {
                library: path,
                call: "hsa_init".into(),
                code: code.into(),
                error,
            },
            None,
        );
    }
    std::mem::forget(lib);
    (Lib::Ready(HsaLib { library: path }), Some(api))
}

fn device(api: &HipApi, hsa: Option<&HsaApi>, ordinal: c_int, export: bool) -> HipDevice {
    let mut errors = Vec::new();
    let mut buf = [0u8; 64];
    let bus_id = match unsafe {
        (api.device_get_pci_bus_id)(buf.as_mut_ptr().cast(), buf.len() as c_int, ordinal)
    } {
        HIP_SUCCESS => buffer_text(&buf),
        code => {
            errors.push(format!("hipDeviceGetPCIBusId: {}", api.name(code)));
            None
        }
    };
    let mut dev: c_int = 0;
    let mut name = None;
    match unsafe { (api.device_get)(&mut dev, ordinal) } {
        HIP_SUCCESS => {
            let mut buf = [0u8; 256];
            match unsafe { (api.device_get_name)(buf.as_mut_ptr().cast(), buf.len() as c_int, dev) }
            {
                HIP_SUCCESS => name = buffer_text(&buf),
                code => errors.push(format!("hipDeviceGetName: {}", api.name(code))),
            }
        }
        code => errors.push(format!("hipDeviceGet: {}", api.name(code))),
    }
    let export = match (export, hsa) {
        (false, _) => Export::NotTried {
            reason: "export probe not asked for".into(),
        },
        (true, None) => Export::NotTried {
            reason: "libhsa-runtime64 is not usable (see hip.hsa)".into(),
        },
        (true, Some(hsa)) => export_probe(api, hsa, ordinal),
    };
    HipDevice {
        ordinal,
        bus_id,
        name,
        export,
        errors,
    }
}

fn export_probe(api: &HipApi, hsa: &HsaApi, ordinal: c_int) -> Export {
    let hip_failed = |call: &str, code: HipError| Export::Failed {
        call: call.into(),
        error: api.name(code),
    };
    let code = unsafe { (api.set_device)(ordinal) };
    if code != HIP_SUCCESS {
        return hip_failed("hipSetDevice", code);
    }
    let mut ptr: *mut c_void = std::ptr::null_mut();
    let bytes = PROBE_BYTES as usize;
    let code = unsafe { (api.malloc)(&mut ptr, bytes) };
    if code != HIP_SUCCESS {
        return hip_failed("hipMalloc", code);
    }
    let mut fd: c_int = -1;
    let mut offset: u64 = 0;
    let code = unsafe { (hsa.export_dmabuf)(ptr, bytes, &mut fd, &mut offset) };
    let outcome = if code != HSA_STATUS_SUCCESS {
        Export::Failed {
            call: "hsa_amd_portable_export_dmabuf".into(),
            error: hsa.name(code),
        }
    } else if fd < 0 {
        Export::Failed {
            call: "hsa_amd_portable_export_dmabuf".into(),
            error: format!("returned HSA_STATUS_SUCCESS but fd {fd}"),
        }
    } else {
        let target = fd_target(fd);
        // SAFETY: the fd came from the export above; HSA closes it.
        unsafe { (hsa.close_dmabuf)(fd) };
        Export::Exported {
            bytes: PROBE_BYTES,
            fd_target: target,
        }
    };
    let code = unsafe { (api.free)(ptr) };
    match outcome {
        Export::Exported { .. } if code != HIP_SUCCESS => hip_failed("hipFree", code),
        outcome => outcome,
    }
}

// -- the GDR write test's side: one AMD GPU, one buffer ---------------------------------------

type HipMemcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> HipError;
type HipDeviceGetByPciBusId = unsafe extern "C" fn(*mut c_int, *const c_char) -> HipError;
/// `hipStream_t`, an opaque pointer.
type HipStreamT = *mut c_void;

/// The stream calls of `nccl verify`'s child (hip_runtime_api.h): `hipStreamCreate`,
/// `hipStreamSynchronize`, `hipStreamDestroy`.
#[derive(Clone, Copy)]
struct StreamApi {
    create: unsafe extern "C" fn(*mut HipStreamT) -> HipError,
    synchronize: unsafe extern "C" fn(HipStreamT) -> HipError,
    destroy: unsafe extern "C" fn(HipStreamT) -> HipError,
}

impl StreamApi {
    fn load(lib: &Library) -> Result<StreamApi, &'static str> {
        Ok(StreamApi {
            create: required!(lib, "hipStreamCreate"),
            synchronize: required!(lib, "hipStreamSynchronize"),
            destroy: required!(lib, "hipStreamDestroy"),
        })
    }
}
const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;

/// HIP (and HSA, for dma-buf export) loaded and initialised: what the probe and the GDR write
/// test both start from, once per process. Unverified on AMD hardware: built against the
/// documented ABI.
pub struct Session {
    api: HipApi,
    /// Only the write test needs these two.
    memcpy: Option<HipMemcpy>,
    by_bus_id: Option<HipDeviceGetByPciBusId>,
    /// Only `nccl verify`'s child needs these: the symbol missing, when one is.
    streams: Result<StreamApi, &'static str>,
    hsa_state: Lib<HsaLib>,
    hsa: Option<HsaApi>,
    driver_version: Option<i32>,
    pub path: String,
}

impl Session {
    /// dlopen, every symbol the probe needs, `hipInit`, and HSA for the export. A libamdhip64
    /// already in the process (RCCL's own, in `nccl verify`'s child) comes first, unless
    /// GDRDOCTOR_LIBHIP names one.
    pub fn open() -> Result<Session, Lib<()>> {
        let mut names = candidates(ENV_HIP, HIP_NAMES);
        if std::env::var_os(ENV_HIP).is_none_or(|v| v.is_empty()) {
            if let Some(path) = super::loaded("libamdhip64") {
                names.insert(0, path);
            }
        }
        let Loaded { lib, path } = open(&names, b"hipInit\0")
            .map_err(|(tried, message)| Lib::NotFound { tried, message })?;
        let api = HipApi::load(&lib).map_err(|symbol| Lib::MissingSymbol {
            library: path.clone(),
            symbol: symbol.into(),
        })?;
        // SAFETY: the types match hip_runtime_api.h.
        let memcpy: Option<HipMemcpy> = unsafe { lib.get(b"hipMemcpy\0") }.ok().map(|s| *s);
        let by_bus_id: Option<HipDeviceGetByPciBusId> =
            unsafe { lib.get(b"hipDeviceGetByPCIBusId\0") }
                .ok()
                .map(|s| *s);
        let streams = StreamApi::load(&lib);
        // SAFETY (every call below): out-pointers are ours and valid.
        let code = unsafe { (api.init)(0) };
        if code != HIP_SUCCESS {
            return Err(Lib::Failed {
                library: path,
                call: "hipInit".into(),
                code: code.into(),
                error: api.name(code),
            });
        }
        let mut version: c_int = 0;
        let driver_version =
            (unsafe { (api.driver_get_version)(&mut version) } == HIP_SUCCESS).then_some(version);
        let (hsa_state, hsa) = load_hsa();
        std::mem::forget(lib);
        Ok(Session {
            api,
            memcpy,
            by_bus_id,
            streams,
            hsa_state,
            hsa,
            driver_version,
            path,
        })
    }

    /// `hipGetDeviceCount`.
    pub fn count(&self) -> Result<i32, Lib<()>> {
        let mut count: c_int = 0;
        // SAFETY: a valid out-pointer.
        let code = unsafe { (self.api.get_device_count)(&mut count) };
        if code != HIP_SUCCESS {
            return Err(Lib::Failed {
                library: self.path.clone(),
                call: "hipGetDeviceCount".into(),
                code: code.into(),
                error: self.api.name(code),
            });
        }
        Ok(count)
    }

    /// Makes the GPU at `bus_id` current and allocates `len` bytes on it.
    fn alloc(&self, bus_id: &str, len: usize) -> Result<HipBuffer<'_>, String> {
        let dev = self.by_bus(bus_id)?;
        self.set_device(dev)?;
        self.malloc(len)
    }

    /// HIP's ordinal of the GPU at `bus_id` (`hipDeviceGetByPCIBusId`).
    fn by_bus(&self, bus_id: &str) -> Result<c_int, String> {
        let c = std::ffi::CString::new(bus_id).map_err(|e| e.to_string())?;
        let by_bus_id = self.by_bus_id.ok_or("hipDeviceGetByPCIBusId missing")?;
        let mut dev: c_int = -1;
        // SAFETY: a valid out-pointer and a NUL-terminated string.
        let code = unsafe { by_bus_id(&mut dev, c.as_ptr()) };
        if code != HIP_SUCCESS {
            return Err(format!("hipDeviceGetByPCIBusId: {}", self.api.name(code)));
        }
        Ok(dev)
    }

    /// `hipSetDevice`: the device of this thread's later calls.
    fn set_device(&self, dev: c_int) -> Result<(), String> {
        // SAFETY: a plain value; HIP checks the ordinal.
        let code = unsafe { (self.api.set_device)(dev) };
        if code != HIP_SUCCESS {
            return Err(format!("hipSetDevice: {}", self.api.name(code)));
        }
        Ok(())
    }

    /// `hipMalloc` of `len` bytes on the current device.
    fn malloc(&self, len: usize) -> Result<HipBuffer<'_>, String> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let code = unsafe { (self.api.malloc)(&mut ptr, len) };
        if code != HIP_SUCCESS {
            return Err(format!("hipMalloc: {}", self.api.name(code)));
        }
        Ok(HipBuffer { s: self, ptr, len })
    }
}

/// One AMD GPU for the write test: HIP finds it by bus id and makes it current at each
/// allocation (hipDeviceGetByPCIBusId, hipSetDevice), so opening it holds nothing.
pub struct Gpu<'a> {
    s: &'a Session,
    bus: String,
}

impl GpuLibrary for Session {
    const NAME: &'static str = "HIP";
    const LIBRARY: &'static str = "libamdhip64";
    const BY_BUS_ID: &'static str = "hipDeviceGetByPCIBusId";
    const HOLD: &'static str = "hipSetDevice";
    type Facts = Hip;
    type Device = HipDevice;
    type Gpu<'s> = Gpu<'s>;

    fn open() -> Result<Session, Lib<()>> {
        Session::open()
    }

    fn ordinal_of(&self, bus: Bdf) -> Option<i32> {
        let count = self.count().ok()?;
        (0..count.max(0)).find(|&ordinal| {
            let mut buf = [0u8; 64];
            // SAFETY: a buffer of the stated length; the ordinal is below HIP's own count.
            let code = unsafe {
                (self.api.device_get_pci_bus_id)(
                    buf.as_mut_ptr().cast(),
                    buf.len() as c_int,
                    ordinal,
                )
            };
            code == HIP_SUCCESS && buffer_text(&buf).and_then(|s| Bdf::parse(s.trim())) == Some(bus)
        })
    }

    fn device(&self, ordinal: c_int, export: bool) -> HipDevice {
        device(&self.api, self.hsa.as_ref(), ordinal, export)
    }

    /// With HSA's state: the library the dma-buf export needs.
    fn describe(&self, devices: Vec<HipDevice>) -> Hip {
        Hip {
            library: self.path.clone(),
            driver_version: self.driver_version,
            hsa: self.hsa_state.clone(),
            devices,
        }
    }

    fn write_test_symbols(&self) -> Result<(), Lib<()>> {
        for (present, symbol) in [
            (self.memcpy.is_some(), "hipMemcpy"),
            (self.by_bus_id.is_some(), "hipDeviceGetByPCIBusId"),
        ] {
            if !present {
                return Err(Lib::MissingSymbol {
                    library: self.path.clone(),
                    symbol: symbol.into(),
                });
            }
        }
        Ok(())
    }

    /// Nothing to say: starting HIP is in the probe's facts.
    fn started(&self) -> Vec<String> {
        Vec::new()
    }

    fn gpu(&self, bus: &str) -> Result<Gpu<'_>, String> {
        Ok(Gpu {
            s: self,
            bus: bus.to_owned(),
        })
    }
}

impl OpenedGpu for Gpu<'_> {
    fn memory(&self) -> Memory {
        Memory::Hip
    }

    fn opened(&self) -> Option<String> {
        None
    }

    fn alloc(&self, len: usize) -> Allocation<'_> {
        let b = self.s.alloc(&self.bus, len).map_err(|e| ("hipMalloc", e))?;
        let step = format!(
            "hipMalloc {} on {}",
            crate::parse::bytes(len as u64),
            self.bus
        );
        Ok((Box::new(b), step))
    }
}

/// Device memory from hipMalloc, freed on drop.
pub struct HipBuffer<'a> {
    s: &'a Session,
    ptr: *mut c_void,
    pub len: usize,
}

impl super::ibverbs::sealed::Sealed for HipBuffer<'_> {}

// The allocation lives until drop (hipFree): the peer-memory path registers it.
impl super::ibverbs::Registrable for HipBuffer<'_> {
    fn addr(&self) -> u64 {
        self.ptr as u64
    }
    fn size(&self) -> usize {
        self.len
    }
}

impl Drop for HipBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by us, freed once.
        unsafe { (self.s.api.free)(self.ptr) };
    }
}

impl DeviceMemory for HipBuffer<'_> {
    /// `hsa_amd_portable_export_dmabuf`: the fd and the buffer's offset in it.
    fn export_dmabuf(&self) -> Result<(i32, u64), String> {
        let hsa = self
            .s
            .hsa
            .as_ref()
            .ok_or("libhsa-runtime64 with hsa_amd_portable_export_dmabuf is not available")?;
        let (mut fd, mut offset) = (-1, 0u64);
        let code = unsafe { (hsa.export_dmabuf)(self.ptr, self.len, &mut fd, &mut offset) };
        if code != HSA_STATUS_SUCCESS || fd < 0 {
            return Err(format!(
                "hsa_amd_portable_export_dmabuf: {}",
                hsa.name(code)
            ));
        }
        Ok((fd, offset))
    }

    /// `hsa_amd_portable_close_dmabuf`.
    fn close_dmabuf(&self, fd: i32) {
        if let Some(hsa) = &self.s.hsa {
            // SAFETY: the fd came from export_dmabuf.
            unsafe { (hsa.close_dmabuf)(fd) };
        }
    }

    fn write(&self, data: &[u8]) -> Result<(), String> {
        let memcpy = self.s.memcpy.ok_or("hipMemcpy missing")?;
        let n = data.len().min(self.len);
        match unsafe { memcpy(self.ptr, data.as_ptr().cast(), n, HIP_MEMCPY_HOST_TO_DEVICE) } {
            HIP_SUCCESS => Ok(()),
            code => Err(format!(
                "hipMemcpy(HostToDevice): {}",
                self.s.api.name(code)
            )),
        }
    }

    fn read(&self, out: &mut [u8]) -> Result<(), String> {
        let memcpy = self.s.memcpy.ok_or("hipMemcpy missing")?;
        let n = out.len().min(self.len);
        match unsafe {
            memcpy(
                out.as_mut_ptr().cast(),
                self.ptr,
                n,
                HIP_MEMCPY_DEVICE_TO_HOST,
            )
        } {
            HIP_SUCCESS => Ok(()),
            code => Err(format!(
                "hipMemcpy(DeviceToHost): {}",
                self.s.api.name(code)
            )),
        }
    }
}

// -- `nccl verify`'s side: RCCL's GPUs, buffers and streams ------------------------------------

/// RCCL's runtime in `nccl verify`'s child. Unverified on AMD hardware: built against the
/// documented ABI, tested with the stand-in library.
impl CollectiveRuntime for Session {
    const MAKE_CURRENT: &'static str = "hipSetDevice";
    const SYNCHRONIZE: &'static str = "hipStreamSynchronize";
    type CommGpu<'s> = CommGpu<'s>;

    fn library(&self) -> String {
        self.path.clone()
    }

    fn driver_version(&self) -> Option<i32> {
        self.driver_version
    }

    fn collective_symbols(&self) -> Result<(), Lib<()>> {
        self.write_test_symbols()?;
        self.streams
            .map(|_| ())
            .map_err(|symbol| Lib::MissingSymbol {
                library: self.path.clone(),
                symbol: symbol.into(),
            })
    }

    /// Found by bus id and made current: HIP has no context to hold, only the thread's device.
    fn collective_gpu(&self, bus: &str) -> Result<CommGpu<'_>, String> {
        let ordinal = self.by_bus(bus)?;
        self.set_device(ordinal)?;
        Ok(CommGpu { s: self, ordinal })
    }
}

/// One AMD GPU of RCCL's communicator: its HIP ordinal, made current before each call that
/// works on the current device.
pub struct CommGpu<'a> {
    s: &'a Session,
    ordinal: c_int,
}

impl CollectiveGpu for CommGpu<'_> {
    type Buffer<'g>
        = HipBuffer<'g>
    where
        Self: 'g;
    type Stream<'g>
        = HipStream<'g>
    where
        Self: 'g;

    fn make_current(&self) -> Result<(), String> {
        self.s.set_device(self.ordinal)
    }

    fn ordinal(&self) -> i32 {
        self.ordinal
    }

    fn buffer(&self, len: usize) -> Result<HipBuffer<'_>, String> {
        self.make_current()?;
        self.s.malloc(len)
    }

    /// `hipStreamCreate` on this GPU (made current first).
    fn stream(&self) -> Result<HipStream<'_>, String> {
        let api = self
            .s
            .streams
            .map_err(|symbol| format!("{symbol} missing"))?;
        self.make_current()?;
        let mut stream: HipStreamT = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let code = unsafe { (api.create)(&mut stream) };
        if code != HIP_SUCCESS {
            return Err(format!("hipStreamCreate: {}", self.s.api.name(code)));
        }
        Ok(HipStream {
            s: self.s,
            api,
            stream,
        })
    }
}

/// A HIP stream, destroyed on drop.
pub struct HipStream<'a> {
    s: &'a Session,
    api: StreamApi,
    stream: HipStreamT,
}

impl RawStream for HipStream<'_> {
    /// The handle to give RCCL.
    fn raw(&self) -> *mut c_void {
        self.stream
    }
}

impl Stream for HipStream<'_> {
    fn synchronize(&self) -> Result<(), String> {
        // SAFETY: a stream we created and have not destroyed.
        let code = unsafe { (self.api.synchronize)(self.stream) };
        if code != HIP_SUCCESS {
            return Err(format!("hipStreamSynchronize: {}", self.s.api.name(code)));
        }
        Ok(())
    }
}

impl Drop for HipStream<'_> {
    fn drop(&mut self) {
        // SAFETY: created by us, destroyed once.
        unsafe { (self.api.destroy)(self.stream) };
    }
}
