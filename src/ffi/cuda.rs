//! The CUDA driver API (libcuda.so.1), loaded with dlopen: the ~15 calls that say whether a GPU
//! can do GPUDirect RDMA and prove that it exports dma-bufs. Signatures from cuda.h (driver
//! API, stable since CUDA 11; the `_v2` names are the ones cuda.h maps the plain names to).

use super::gpu::{
    Allocation, CollectiveGpu, CollectiveRuntime, DeviceMemory, GpuLibrary, OpenedGpu, Stream,
    sealed::RawStream,
};
use super::{Loaded, buffer_text, candidates, close_fd, fd_target, open};
use crate::model::gdr::Memory;
use crate::model::gpu::{Cuda, CudaDevice, Export, Lib, PROBE_BYTES};
use crate::parse::pci::Bdf;
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};

pub const ENV: &str = "GDRDOCTOR_LIBCUDA";
pub const SONAME: &str = "libcuda.so.1";

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuDevicePtr = c_ulonglong;
type CuStream = *mut c_void;

const CUDA_SUCCESS: CuResult = 0;
const CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
const CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED: c_int = 124;
const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;

/// The calls every probe needs; any one missing makes the library unusable.
struct Api {
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    driver_get_version: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    device_get_pci_bus_id: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_get_name: unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult,
    device_get_attribute: unsafe extern "C" fn(*mut c_int, c_int, CuDevice) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    primary_ctx_release: unsafe extern "C" fn(CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    /// Optional: older drivers lack it, and then nothing explains an error code by name.
    get_error_name: Option<unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>,
    /// Optional: CUDA 11.7 added it; without it there is no dma-buf export.
    get_handle_for_address_range: Option<
        unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, c_int, c_ulonglong) -> CuResult,
    >,
    /// For the GDR write test: the GPU by bus id, copies, and synchronous memory operations.
    device_get_by_pci_bus_id:
        Option<unsafe extern "C" fn(*mut CuDevice, *const c_char) -> CuResult>,
    memcpy_htod: Option<unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult>,
    memcpy_dtoh: Option<unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult>,
    pointer_set_attribute:
        Option<unsafe extern "C" fn(*const c_void, c_int, CuDevicePtr) -> CuResult>,
    /// For `nccl verify`: a stream per GPU for NCCL's all-reduce (a `cudaStream_t` is a
    /// `CUstream`).
    stream_create: Option<unsafe extern "C" fn(*mut CuStream, c_uint) -> CuResult>,
    stream_synchronize: Option<unsafe extern "C" fn(CuStream) -> CuResult>,
    stream_destroy: Option<unsafe extern "C" fn(CuStream) -> CuResult>,
}

impl Api {
    fn load(lib: &Library) -> Result<Api, &'static str> {
        Ok(Api {
            init: required!(lib, "cuInit"),
            driver_get_version: required!(lib, "cuDriverGetVersion"),
            device_get_count: required!(lib, "cuDeviceGetCount"),
            device_get: required!(lib, "cuDeviceGet"),
            device_get_pci_bus_id: required!(lib, "cuDeviceGetPCIBusId"),
            device_get_name: required!(lib, "cuDeviceGetName"),
            device_get_attribute: required!(lib, "cuDeviceGetAttribute"),
            primary_ctx_retain: required!(lib, "cuDevicePrimaryCtxRetain"),
            primary_ctx_release: match optional!(lib, "cuDevicePrimaryCtxRelease_v2") {
                Some(f) => f,
                None => required!(lib, "cuDevicePrimaryCtxRelease"),
            },
            ctx_set_current: required!(lib, "cuCtxSetCurrent"),
            mem_alloc: required!(lib, "cuMemAlloc_v2"),
            mem_free: required!(lib, "cuMemFree_v2"),
            get_error_name: optional!(lib, "cuGetErrorName"),
            get_handle_for_address_range: optional!(lib, "cuMemGetHandleForAddressRange"),
            device_get_by_pci_bus_id: optional!(lib, "cuDeviceGetByPCIBusId"),
            memcpy_htod: optional!(lib, "cuMemcpyHtoD_v2"),
            memcpy_dtoh: optional!(lib, "cuMemcpyDtoH_v2"),
            pointer_set_attribute: optional!(lib, "cuPointerSetAttribute"),
            stream_create: optional!(lib, "cuStreamCreate"),
            stream_synchronize: optional!(lib, "cuStreamSynchronize"),
            stream_destroy: optional!(lib, "cuStreamDestroy_v2"),
        })
    }

    /// `CUDA_ERROR_NO_DEVICE`, or the number when the library cannot name it.
    fn name(&self, code: CuResult) -> String {
        if let Some(f) = self.get_error_name {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: `s` is a valid out-pointer; on success it points to a static string.
            if unsafe { f(code, &mut s) } == CUDA_SUCCESS && !s.is_null() {
                return unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
            }
        }
        format!("CUresult {code}")
    }

    fn check(&self, call: &str, code: CuResult) -> Result<(), String> {
        if code == CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("{call}: {}", self.name(code)))
        }
    }
}

/// Loads libcuda, initialises it and asks every GPU it sees; with `export`, also allocates
/// [`PROBE_BYTES`] on each, exports them as a dma-buf, and releases both. (`gdrdoctor
/// probe-gpu`: the whole node in one process, the baseline the per-GPU workers are measured
/// against.)
pub fn probe(export: bool) -> Lib<Cuda> {
    let session = match Session::open() {
        Ok(s) => s,
        Err(e) => return e.cast(),
    };
    let count = match session.count() {
        Ok(n) => n,
        Err(e) => return e.cast(),
    };
    // One thread per GPU: creating a context takes a few hundred milliseconds per GPU, and
    // contexts on different GPUs are created in parallel by the driver.
    let devices = std::thread::scope(|s| {
        let session = &session;
        let handles: Vec<_> = (0..count.max(0))
            .map(|ordinal| s.spawn(move || session.device(ordinal, export)))
            .collect();
        handles
            .into_iter()
            .zip(0..)
            .map(|(h, ordinal)| h.join().unwrap_or_else(|_| panicked(ordinal)))
            .collect()
    });
    Lib::Ready(session.describe(devices))
}

fn device(api: &Api, ordinal: c_int, export: bool) -> CudaDevice {
    let mut errors = Vec::new();
    let mut d = CudaDevice {
        ordinal,
        bus_id: None,
        name: None,
        gdr_supported: None,
        dmabuf_supported: None,
        export: Export::NotTried {
            reason: "export probe not asked for".into(),
        },
        errors: Vec::new(),
    };
    let mut dev: CuDevice = 0;
    if let Err(e) = api.check("cuDeviceGet", unsafe {
        (api.device_get)(&mut dev, ordinal)
    }) {
        d.errors.push(e);
        d.export = Export::NotTried {
            reason: "cuDeviceGet failed".into(),
        };
        return d;
    }
    let mut buf = [0u8; 64];
    let len = buf.len() as c_int;
    match api.check("cuDeviceGetPCIBusId", unsafe {
        (api.device_get_pci_bus_id)(buf.as_mut_ptr().cast(), len, dev)
    }) {
        Ok(()) => d.bus_id = buffer_text(&buf),
        Err(e) => errors.push(e),
    }
    let mut buf = [0u8; 256];
    let len = buf.len() as c_int;
    match api.check("cuDeviceGetName", unsafe {
        (api.device_get_name)(buf.as_mut_ptr().cast(), len, dev)
    }) {
        Ok(()) => d.name = buffer_text(&buf),
        Err(e) => errors.push(e),
    }
    let attribute = |attr: c_int, errors: &mut Vec<String>| {
        let mut v: c_int = 0;
        match api.check(&format!("cuDeviceGetAttribute({attr})"), unsafe {
            (api.device_get_attribute)(&mut v, attr, dev)
        }) {
            Ok(()) => Some(v != 0),
            Err(e) => {
                errors.push(e);
                None
            }
        }
    };
    d.gdr_supported = attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED, &mut errors);
    d.dmabuf_supported = attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, &mut errors);
    d.export = if !export {
        Export::NotTried {
            reason: "export probe not asked for".into(),
        }
    } else {
        match (api.get_handle_for_address_range, d.dmabuf_supported) {
            (None, _) => Export::NotTried {
                reason:
                    "cuMemGetHandleForAddressRange is not exported (CUDA driver older than 11.7)"
                        .into(),
            },
            (Some(_), Some(false)) => Export::NotTried {
                reason: "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0".into(),
            },
            (Some(get_handle), _) => export_probe(api, dev, get_handle),
        }
    };
    d.errors = errors;
    d
}

fn panicked(ordinal: c_int) -> CudaDevice {
    CudaDevice {
        ordinal,
        bus_id: None,
        name: None,
        gdr_supported: None,
        dmabuf_supported: None,
        export: Export::NotTried {
            reason: "the probe thread for this device panicked".into(),
        },
        errors: vec!["the probe thread for this device panicked".into()],
    }
}

type GetHandle =
    unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize, c_int, c_ulonglong) -> CuResult;

/// Primary context (as NCCL and perftest use it), allocate, export, close the fd, free, release.
fn export_probe(api: &Api, dev: CuDevice, get_handle: GetHandle) -> Export {
    let failed = |call: &str, code: CuResult| Export::Failed {
        call: call.into(),
        error: api.name(code),
    };
    let mut ctx: CuContext = std::ptr::null_mut();
    let code = unsafe { (api.primary_ctx_retain)(&mut ctx, dev) };
    if code != CUDA_SUCCESS {
        return failed("cuDevicePrimaryCtxRetain", code);
    }
    let result = (|| {
        let code = unsafe { (api.ctx_set_current)(ctx) };
        if code != CUDA_SUCCESS {
            return failed("cuCtxSetCurrent", code);
        }
        let mut ptr: CuDevicePtr = 0;
        let bytes = PROBE_BYTES as usize;
        let code = unsafe { (api.mem_alloc)(&mut ptr, bytes) };
        if code != CUDA_SUCCESS {
            return failed("cuMemAlloc_v2", code);
        }
        let mut fd: c_int = -1;
        let code = unsafe {
            get_handle(
                (&mut fd as *mut c_int).cast(),
                ptr,
                bytes,
                CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        };
        let outcome = if code != CUDA_SUCCESS {
            failed("cuMemGetHandleForAddressRange", code)
        } else if fd < 0 {
            Export::Failed {
                call: "cuMemGetHandleForAddressRange".into(),
                error: format!("returned CUDA_SUCCESS but fd {fd}"),
            }
        } else {
            let target = fd_target(fd);
            close_fd(fd);
            Export::Exported {
                bytes: PROBE_BYTES,
                fd_target: target,
            }
        };
        let code = unsafe { (api.mem_free)(ptr) };
        match outcome {
            Export::Exported { .. } if code != CUDA_SUCCESS => failed("cuMemFree_v2", code),
            outcome => outcome,
        }
    })();
    unsafe {
        (api.ctx_set_current)(std::ptr::null_mut());
        (api.primary_ctx_release)(dev);
    }
    result
}

// -- the GDR write test's side: one GPU, one buffer -------------------------------------------

/// libcuda loaded and initialised: what the probe and the GDR write test both start from,
/// once per process.
pub struct Session {
    api: Api,
    pub path: String,
    pub driver_version: i32,
}

/// Why CUDA cannot be used: a [`Lib`] without facts.
pub type SessionError = Lib<()>;

const CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: c_int = 6;

impl Session {
    /// dlopen, every symbol the probe needs, `cuInit`, `cuDriverGetVersion`.
    pub fn open() -> Result<Session, SessionError> {
        let names = candidates(ENV, &[SONAME]);
        let Loaded { lib, path } = open(&names, b"cuInit\0")
            .map_err(|(tried, message)| Lib::NotFound { tried, message })?;
        let api = Api::load(&lib).map_err(|symbol| Lib::MissingSymbol {
            library: path.clone(),
            symbol: symbol.into(),
        })?;
        let failed = |call: &str, code: CuResult| Lib::Failed {
            library: path.clone(),
            call: call.into(),
            code: code.into(),
            error: api.name(code),
        };
        // SAFETY: plain calls with valid out-pointers.
        let code = unsafe { (api.init)(0) };
        if code != CUDA_SUCCESS {
            return Err(failed("cuInit", code));
        }
        let mut version = 0;
        let code = unsafe { (api.driver_get_version)(&mut version) };
        if code != CUDA_SUCCESS {
            return Err(failed("cuDriverGetVersion", code));
        }
        // The library stays loaded until the process exits: unloading libcuda while its
        // threads run has crashed processes, and every process that loads it ends soon.
        std::mem::forget(lib);
        Ok(Session {
            api,
            path,
            driver_version: version,
        })
    }

    /// `cuDeviceGetCount`.
    pub fn count(&self) -> Result<i32, SessionError> {
        let mut count: c_int = 0;
        // SAFETY: a valid out-pointer.
        let code = unsafe { (self.api.device_get_count)(&mut count) };
        if code != CUDA_SUCCESS {
            return Err(Lib::Failed {
                library: self.path.clone(),
                call: "cuDeviceGetCount".into(),
                code: code.into(),
                error: self.api.name(code),
            });
        }
        Ok(count)
    }

    /// The calls `nccl verify` needs beyond the write test's; the first one missing.
    pub fn nccl_symbols(&self) -> Result<(), SessionError> {
        self.write_test_symbols()?;
        for (present, symbol) in [
            (self.api.stream_create.is_some(), "cuStreamCreate"),
            (self.api.stream_synchronize.is_some(), "cuStreamSynchronize"),
            (self.api.stream_destroy.is_some(), "cuStreamDestroy_v2"),
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

    /// The GPU at a PCI address (`0000:3b:00.0`), its primary context retained and made
    /// current: CUDA ordinals follow CUDA_VISIBLE_DEVICES, bus ids do not.
    pub fn gpu(&self, bus_id: &str) -> Result<Gpu<'_>, String> {
        let c = std::ffi::CString::new(bus_id).map_err(|e| e.to_string())?;
        let mut dev: CuDevice = 0;
        let get = self
            .api
            .device_get_by_pci_bus_id
            .ok_or("cuDeviceGetByPCIBusId missing")?;
        // SAFETY: valid out-pointer and NUL-terminated string.
        self.api.check("cuDeviceGetByPCIBusId", unsafe {
            get(&mut dev, c.as_ptr())
        })?;
        let mut ctx: CuContext = std::ptr::null_mut();
        self.api.check("cuDevicePrimaryCtxRetain", unsafe {
            (self.api.primary_ctx_retain)(&mut ctx, dev)
        })?;
        let gpu = Gpu {
            s: self,
            dev,
            ctx,
            bus: bus_id.to_owned(),
        };
        gpu.make_current()?;
        Ok(gpu)
    }
}

impl GpuLibrary for Session {
    const NAME: &'static str = "CUDA";
    const LIBRARY: &'static str = "libcuda";
    const BY_BUS_ID: &'static str = "cuDeviceGetByPCIBusId";
    const HOLD: &'static str = "cuDevicePrimaryCtxRetain";
    type Facts = Cuda;
    type Device = CudaDevice;
    type Gpu<'s> = Gpu<'s>;

    fn open() -> Result<Session, SessionError> {
        Session::open()
    }

    /// Any spelling of a PCI address: the devices CUDA lists, compared by bus id.
    fn ordinal_of(&self, bus: Bdf) -> Option<i32> {
        let count = self.count().ok()?;
        (0..count.max(0)).find(|&ordinal| {
            let mut dev: CuDevice = 0;
            let mut buf = [0u8; 64];
            // SAFETY: valid out-pointers; the ordinal is below CUDA's own count.
            let got = unsafe { (self.api.device_get)(&mut dev, ordinal) };
            let named = got == CUDA_SUCCESS
                && unsafe { (self.api.device_get_pci_bus_id)(buf.as_mut_ptr().cast(), 64, dev) }
                    == CUDA_SUCCESS;
            named && buffer_text(&buf).and_then(|s| Bdf::parse(s.trim())) == Some(bus)
        })
    }

    fn device(&self, ordinal: c_int, export: bool) -> CudaDevice {
        device(&self.api, ordinal, export)
    }

    fn describe(&self, devices: Vec<CudaDevice>) -> Cuda {
        Cuda {
            library: self.path.clone(),
            driver_version: self.driver_version,
            dmabuf_export_symbol: self.api.get_handle_for_address_range.is_some(),
            devices,
        }
    }

    fn write_test_symbols(&self) -> Result<(), SessionError> {
        for (present, symbol) in [
            (
                self.api.device_get_by_pci_bus_id.is_some(),
                "cuDeviceGetByPCIBusId",
            ),
            (self.api.memcpy_htod.is_some(), "cuMemcpyHtoD_v2"),
            (self.api.memcpy_dtoh.is_some(), "cuMemcpyDtoH_v2"),
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

    /// `cuInit: /usr/lib/.../libcuda.so.580.159.04 (CUDA 13.0)`.
    fn started(&self) -> Vec<String> {
        vec![format!(
            "cuInit: {} (CUDA {}.{})",
            self.path,
            self.driver_version / 1000,
            self.driver_version % 1000 / 10
        )]
    }

    fn gpu(&self, bus: &str) -> Result<Gpu<'_>, String> {
        Session::gpu(self, bus)
    }
}

/// NCCL's runtime in `nccl verify`'s child.
impl CollectiveRuntime for Session {
    const MAKE_CURRENT: &'static str = "cuCtxSetCurrent";
    const SYNCHRONIZE: &'static str = "cuStreamSynchronize";
    type CommGpu<'s> = Gpu<'s>;

    fn library(&self) -> String {
        self.path.clone()
    }

    fn driver_version(&self) -> Option<i32> {
        Some(self.driver_version)
    }

    fn collective_symbols(&self) -> Result<(), SessionError> {
        self.nccl_symbols()
    }

    /// Its primary context retained and made current.
    fn collective_gpu(&self, bus: &str) -> Result<Gpu<'_>, String> {
        Session::gpu(self, bus)
    }
}

impl CollectiveGpu for Gpu<'_> {
    type Buffer<'g>
        = DeviceBuffer<'g>
    where
        Self: 'g;
    type Stream<'g>
        = GpuStream<'g>
    where
        Self: 'g;

    fn make_current(&self) -> Result<(), String> {
        Gpu::make_current(self)
    }

    fn ordinal(&self) -> i32 {
        Gpu::ordinal(self)
    }

    fn buffer(&self, len: usize) -> Result<DeviceBuffer<'_>, String> {
        Gpu::alloc(self, len).map(|(b, _)| b)
    }

    fn stream(&self) -> Result<GpuStream<'_>, String> {
        Gpu::stream(self)
    }
}

/// A GPU whose primary context is retained (released on drop).
pub struct Gpu<'a> {
    s: &'a Session,
    dev: CuDevice,
    ctx: CuContext,
    /// The PCI address it was opened by.
    bus: String,
}

impl Drop for Gpu<'_> {
    fn drop(&mut self) {
        // SAFETY: the context was retained in `Session::gpu` and is released once.
        unsafe {
            (self.s.api.ctx_set_current)(std::ptr::null_mut());
            (self.s.api.primary_ctx_release)(self.dev);
        }
    }
}

impl Gpu<'_> {
    /// Makes the retained primary context current on this thread again (the export probe
    /// unsets it when it is done).
    pub fn make_current(&self) -> Result<(), String> {
        // SAFETY: the context was retained in `Session::gpu` and is still held.
        self.s.api.check("cuCtxSetCurrent", unsafe {
            (self.s.api.ctx_set_current)(self.ctx)
        })
    }

    /// Its CUDA ordinal (a `CUdevice` is one): what `ncclCommInitAll` takes.
    pub fn ordinal(&self) -> i32 {
        self.dev
    }

    /// A stream in this GPU's primary context (made current first), destroyed on drop.
    pub fn stream(&self) -> Result<GpuStream<'_>, String> {
        self.make_current()?;
        let create = self.s.api.stream_create.ok_or("cuStreamCreate missing")?;
        let mut stream: CuStream = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; flags 0 is CU_STREAM_DEFAULT.
        self.s
            .api
            .check("cuStreamCreate", unsafe { create(&mut stream, 0) })?;
        Ok(GpuStream { gpu: self, stream })
    }

    pub fn name(&self) -> Option<String> {
        let mut buf = [0u8; 256];
        let len = buf.len() as c_int;
        (unsafe { (self.s.api.device_get_name)(buf.as_mut_ptr().cast(), len, self.dev) }
            == CUDA_SUCCESS)
            .then(|| buffer_text(&buf))
            .flatten()
    }

    fn attribute(&self, attr: c_int) -> Option<i32> {
        let mut v: c_int = 0;
        (unsafe { (self.s.api.device_get_attribute)(&mut v, attr, self.dev) } == CUDA_SUCCESS)
            .then_some(v)
    }

    pub fn dmabuf_supported(&self) -> Option<bool> {
        self.attribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)
            .map(|v| v != 0)
    }

    pub fn gdr_supported(&self) -> Option<bool> {
        self.attribute(CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)
            .map(|v| v != 0)
    }

    /// `cuMemAlloc`, with `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set so that copies and RDMA to it
    /// are ordered (as perftest does for GPUDirect). Returns the buffer and whether the
    /// attribute was set.
    pub fn alloc(&self, len: usize) -> Result<(DeviceBuffer<'_>, bool), String> {
        let mut ptr: CuDevicePtr = 0;
        self.s.api.check("cuMemAlloc_v2", unsafe {
            (self.s.api.mem_alloc)(&mut ptr, len)
        })?;
        let buf = DeviceBuffer {
            gpu: self,
            ptr,
            len,
        };
        let mut sync = false;
        if let Some(set) = self.s.api.pointer_set_attribute {
            let one: c_uint = 1;
            self.s
                .api
                .check("cuPointerSetAttribute(SYNC_MEMOPS)", unsafe {
                    set(
                        (&one as *const c_uint).cast(),
                        CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                        ptr,
                    )
                })?;
            sync = true;
        }
        Ok((buf, sync))
    }
}

impl OpenedGpu for Gpu<'_> {
    fn memory(&self) -> Memory {
        Memory::Cuda
    }

    /// `0000:3b:00.0: NVIDIA H100; GPU_DIRECT_RDMA_SUPPORTED=1, DMA_BUF_SUPPORTED=1`.
    fn opened(&self) -> Option<String> {
        Some(format!(
            "{}: {}; GPU_DIRECT_RDMA_SUPPORTED={}, DMA_BUF_SUPPORTED={}",
            self.bus,
            self.name().unwrap_or_default(),
            flag(self.gdr_supported()),
            flag(self.dmabuf_supported())
        ))
    }

    /// In its primary context, made current first (the export probe unsets it).
    fn alloc(&self, len: usize) -> Allocation<'_> {
        self.make_current().map_err(|e| ("cuCtxSetCurrent", e))?;
        let (b, sync) = Gpu::alloc(self, len).map_err(|e| ("cuMemAlloc", e))?;
        let step = format!(
            "cuMemAlloc {} at {:#x}{}",
            crate::parse::bytes(len as u64),
            b.ptr,
            if sync {
                "; CU_POINTER_ATTRIBUTE_SYNC_MEMOPS set"
            } else {
                ""
            }
        );
        Ok((Box::new(b), step))
    }
}

fn flag(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "1",
        Some(false) => "0",
        None => "?",
    }
}

/// A stream of one GPU, destroyed on drop.
pub struct GpuStream<'a> {
    gpu: &'a Gpu<'a>,
    stream: CuStream,
}

impl RawStream for GpuStream<'_> {
    /// The handle to give NCCL.
    fn raw(&self) -> *mut c_void {
        self.stream
    }
}

impl Stream for GpuStream<'_> {
    fn synchronize(&self) -> Result<(), String> {
        self.gpu.make_current()?;
        let f = self
            .gpu
            .s
            .api
            .stream_synchronize
            .ok_or("cuStreamSynchronize missing")?;
        // SAFETY: a stream we created and have not destroyed.
        self.gpu
            .s
            .api
            .check("cuStreamSynchronize", unsafe { f(self.stream) })
    }
}

impl Drop for GpuStream<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.gpu.s.api.stream_destroy {
            // SAFETY: created by us, destroyed once.
            unsafe { f(self.stream) };
        }
    }
}

/// Device memory, freed on drop.
pub struct DeviceBuffer<'a> {
    gpu: &'a Gpu<'a>,
    pub ptr: u64,
    pub len: usize,
}

impl super::ibverbs::sealed::Sealed for DeviceBuffer<'_> {}

// The allocation lives until drop (cuMemFree): the peer-memory path registers it.
impl super::ibverbs::Registrable for DeviceBuffer<'_> {
    fn addr(&self) -> u64 {
        self.ptr
    }
    fn size(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by us, freed once.
        unsafe { (self.gpu.s.api.mem_free)(self.ptr) };
    }
}

impl DeviceMemory for DeviceBuffer<'_> {
    /// The fd for the whole buffer, at offset 0.
    fn export_dmabuf(&self) -> Result<(i32, u64), String> {
        let f =
            self.gpu.s.api.get_handle_for_address_range.ok_or(
                "cuMemGetHandleForAddressRange is not exported (CUDA driver older than 11.7)",
            )?;
        let mut fd: c_int = -1;
        self.gpu
            .s
            .api
            .check("cuMemGetHandleForAddressRange", unsafe {
                f(
                    (&mut fd as *mut c_int).cast(),
                    self.ptr,
                    self.len,
                    CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                    0,
                )
            })?;
        if fd < 0 {
            return Err(format!("cuMemGetHandleForAddressRange returned fd {fd}"));
        }
        Ok((fd, 0))
    }

    fn close_dmabuf(&self, fd: i32) {
        close_fd(fd);
    }

    fn write(&self, data: &[u8]) -> Result<(), String> {
        DeviceBuffer::write(self, data)
    }

    fn read(&self, out: &mut [u8]) -> Result<(), String> {
        DeviceBuffer::read(self, out)
    }
}

/// The copies, for `nccl verify` too.
impl DeviceBuffer<'_> {
    pub fn write(&self, data: &[u8]) -> Result<(), String> {
        let f = self
            .gpu
            .s
            .api
            .memcpy_htod
            .ok_or("cuMemcpyHtoD_v2 missing")?;
        let n = data.len().min(self.len);
        // SAFETY: `n` bytes of `data` into our allocation of at least `n` bytes.
        self.gpu.s.api.check("cuMemcpyHtoD_v2", unsafe {
            f(self.ptr, data.as_ptr().cast(), n)
        })
    }

    pub fn read(&self, out: &mut [u8]) -> Result<(), String> {
        let f = self
            .gpu
            .s
            .api
            .memcpy_dtoh
            .ok_or("cuMemcpyDtoH_v2 missing")?;
        let n = out.len().min(self.len);
        self.gpu.s.api.check("cuMemcpyDtoH_v2", unsafe {
            f(out.as_mut_ptr().cast(), self.ptr, n)
        })
    }
}
