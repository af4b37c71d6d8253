//! What gdrdoctor asks of a GPU's runtime library, whichever vendor's: the library itself
//! ([`GpuLibrary`]: CUDA's and HIP's sessions), one GPU opened for the write test
//! ([`OpenedGpu`]), and memory on it ([`DeviceMemory`]: allocate, export a dma-buf, write,
//! read, free on drop). The write engine (crate::gdr::engine), the GPU worker
//! (crate::probe::gpu::worker) and the peer-memory registration use these and never name a vendor.

use super::ibverbs::Registrable;
use crate::model::gdr::Memory;
use crate::model::gpu::Lib;
use crate::parse::pci::Bdf;

/// A GPU runtime library loaded and initialised (libcuda, libamdhip64): what a GPU worker and a
/// one-pair child start from, once per process.
pub trait GpuLibrary: Sized {
    /// `CUDA`, `HIP`: how messages name the runtime.
    const NAME: &'static str;
    /// `libcuda`, `libamdhip64`: the step a pair names when the library cannot be used.
    const LIBRARY: &'static str;
    /// The lookup by bus id (`cuDeviceGetByPCIBusId`): the step a pair names when the runtime
    /// does not list its GPU, or, in a one-pair child, cannot open it.
    const BY_BUS_ID: &'static str;
    /// The step a GPU worker names when [`GpuLibrary::gpu`] fails: the worker has found its
    /// GPU in the runtime's list already, so what failed is taking hold of it.
    const HOLD: &'static str;
    /// What the probe says of the library, and of one of its GPUs.
    type Facts;
    type Device;
    /// One GPU opened for the write test.
    type Gpu<'s>: OpenedGpu
    where
        Self: 's;

    /// dlopen, every symbol the probe needs, and the library's initialisation; `Err`: why it
    /// cannot be used.
    fn open() -> Result<Self, Lib<()>>;
    /// The library's ordinal of the GPU at `bus`: the GPUs it lists, compared by bus id.
    /// `None` when it does not list it.
    fn ordinal_of(&self, bus: Bdf) -> Option<i32>;
    /// What the library says of one GPU; with `export`, the dma-buf export probe on it.
    fn device(&self, ordinal: i32, export: bool) -> Self::Device;
    /// The library's facts around a list of its GPUs.
    fn describe(&self, devices: Vec<Self::Device>) -> Self::Facts;
    /// The calls the write test needs beyond the probe's; the first one missing.
    fn write_test_symbols(&self) -> Result<(), Lib<()>>;
    /// What starting the library did, for every pair's steps (`cuInit: ... (CUDA 13.0)`).
    fn started(&self) -> Vec<String>;
    /// Opens the GPU at a PCI address (`0000:3b:00.0`) for the write test.
    fn gpu(&self, bus: &str) -> Result<Self::Gpu<'_>, String>;
}

/// A GPU opened for the write test: held for as long as this lives.
pub trait OpenedGpu {
    /// The memory a pair asks of it (`cuda`, `hip`).
    fn memory(&self) -> Memory;
    /// What opening it saw (its name and attributes), for every pair's steps.
    fn opened(&self) -> Option<String>;
    /// Allocates `len` bytes on it.
    fn alloc(&self, len: usize) -> Allocation<'_>;
}

/// An allocation: the memory and the step that says what was allocated (`cuMemAlloc 1 MiB at
/// 0x...`), or the call that failed (`cuMemAlloc`) and why.
pub type Allocation<'g> = Result<(Box<dyn DeviceMemory + 'g>, String), (&'static str, String)>;

/// Memory on a GPU, freed on drop. Registrable with a NIC by its address (the peer-memory
/// path) or by a dma-buf it exports.
pub trait DeviceMemory: Registrable {
    /// A dma-buf of the whole allocation: the fd and the allocation's offset in it. Close it
    /// with [`DeviceMemory::close_dmabuf`].
    fn export_dmabuf(&self) -> Result<(i32, u64), String>;
    /// Closes an fd [`DeviceMemory::export_dmabuf`] returned.
    fn close_dmabuf(&self, fd: i32);
    /// Copies `data` from the host to the start of the allocation.
    fn write(&self, data: &[u8]) -> Result<(), String>;
    /// Copies the start of the allocation to the host.
    fn read(&self, out: &mut [u8]) -> Result<(), String>;
}

/// What `nccl verify`'s child asks of a GPU runtime beyond the write test's: CUDA's for NCCL,
/// HIP's for RCCL. Each GPU by PCI address, made current on this thread, device memory, a stream
/// to hand the library, and the copies ([`DeviceMemory`]). The child (crate::probe::nccl) uses
/// these and never names a vendor.
pub trait CollectiveRuntime: GpuLibrary {
    /// The call that makes a GPU current (`cuCtxSetCurrent`, `hipSetDevice`), as failures name it.
    const MAKE_CURRENT: &'static str;
    /// The call that waits for a stream (`cuStreamSynchronize`, `hipStreamSynchronize`).
    const SYNCHRONIZE: &'static str;
    type CommGpu<'s>: CollectiveGpu
    where
        Self: 's;

    /// The library's file, as the loader names it.
    fn library(&self) -> String;
    /// `cuDriverGetVersion`, `hipDriverGetVersion`.
    fn driver_version(&self) -> Option<i32>;
    /// The calls the child needs beyond the write test's (streams); the first one missing.
    fn collective_symbols(&self) -> Result<(), Lib<()>>;
    /// The GPU at a PCI address (`0000:3b:00.0`), made current on this thread.
    fn collective_gpu(&self, bus: &str) -> Result<Self::CommGpu<'_>, String>;
}

/// One GPU of a communicator.
pub trait CollectiveGpu {
    type Buffer<'g>: DeviceMemory
    where
        Self: 'g;
    type Stream<'g>: Stream
    where
        Self: 'g;

    /// Makes it current on this thread again.
    fn make_current(&self) -> Result<(), String>;
    /// The runtime's device ordinal: what `ncclCommInitAll` takes.
    fn ordinal(&self) -> i32;
    /// `len` bytes of device memory on it, freed on drop.
    fn buffer(&self, len: usize) -> Result<Self::Buffer<'_>, String>;
    /// A stream of it, destroyed on drop.
    fn stream(&self) -> Result<Self::Stream<'_>, String>;
}

/// A stream of one GPU. Its handle (what NCCL and RCCL are given) is [`sealed::RawStream`]'s,
/// for the library calls of src/ffi.
pub trait Stream: sealed::RawStream {
    /// Waits for everything queued on it.
    fn synchronize(&self) -> Result<(), String>;
}

pub(crate) mod sealed {
    /// The raw handle of a stream (`CUstream`, `hipStream_t`): for ffi's own calls alone.
    pub trait RawStream {
        fn raw(&self) -> *mut std::ffi::c_void;
    }
}
