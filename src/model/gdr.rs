//! The GDR write test's pairs, as plain data: what one pair is asked to do ([`PairSpec`]) and
//! what it found ([`PairResult`]); and the whole test's outcome per pair ([`GdrTest`]). The
//! child that runs a pair writes its result as JSON, the parent reads it back, and the checks
//! and reports read it: every field is documented in docs/report-json.md. Nothing here knows how
//! a pair runs.

use super::Level;
use crate::parse::pci::Bdf;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// libefa's SONAME (rdma-core providers/efa/CMakeLists.txt), which the write test loads on an
/// EFA device (crate::ffi::efa) and the check names.
pub const LIBEFA: &str = "libefa.so.1";

/// One NIC port to test through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicSpec {
    pub device: String,
    pub port: u8,
    /// RoCE: the GID index to use (the RoCE v2 IPv4 one gdrdoctor found); InfiniBand: none.
    pub gid_index: Option<u32>,
}

/// What one child tests.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PairSpec {
    /// The GPU's PCI address, for GPU memory.
    pub gpu: Option<String>,
    /// `None`: no RDMA device on the node; the GPU side still runs (allocation, export).
    pub nic: Option<NicSpec>,
    pub memory: Memory,
    /// Buffer and message size, bytes.
    pub size: u64,
    /// Most WRITEs per direction for the bandwidth run.
    pub iters: u32,
    /// Longest bandwidth run per direction, milliseconds.
    pub duration_ms: u64,
    /// Everything, registration to the last completion, must finish within this.
    pub deadline_ms: u64,
    /// The NIC's kernel driver as the inventory found it (`mlx5_core`, `efa`); `None` for a
    /// device sysfs does not show (named with `--nic`). `efa` runs the test over SRD: EFA offers
    /// no RC queue pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic_driver: Option<String>,
}

/// Where the buffer under test lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Memory {
    /// Host memory: the baseline (the NIC's own loopback, no GPU involved).
    Host,
    /// Host memory exported as a dma-buf by the kernel's udmabuf driver: does the NIC driver
    /// register dma-bufs at all?
    HostDmabuf,
    /// NVIDIA GPU memory (CUDA).
    Cuda,
    /// AMD GPU memory (HIP).
    Hip,
}

impl Memory {
    pub fn as_str(self) -> &'static str {
        match self {
            Memory::Host => "host",
            Memory::HostDmabuf => "host-dmabuf",
            Memory::Cuda => "cuda",
            Memory::Hip => "hip",
        }
    }
    pub fn is_gpu(self) -> bool {
        matches!(self, Memory::Cuda | Memory::Hip)
    }
}

/// One registration attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// `dmabuf` (ibv_reg_dmabuf_mr), `peermem` (ibv_reg_mr on a GPU pointer), `host`.
    pub path: String,
    pub ok: bool,
    /// The errno, when the call set one.
    pub errno: Option<i32>,
    /// What failed, in the library's words.
    pub error: Option<String>,
    /// What that errno usually means on this path.
    pub meaning: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortInfo {
    pub state: String,
    pub link_layer: String,
    pub active_mtu: u32,
    pub lid: u16,
    pub gid: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    /// Gb/s into the buffer under test (host -> GPU for GPU memory), by RDMA WRITE or, over
    /// SRD without WRITE, READ.
    pub to_target_gbps: f64,
    /// Gb/s out of it (GPU -> host).
    pub from_target_gbps: f64,
    pub message_bytes: u64,
    /// Work requests completed, both directions (each of at most `message_bytes`).
    pub messages: u64,
}

/// The queue pair the bytes moved through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// A reliable-connected QP connected to itself, RDMA WRITEs (every device but EFA).
    Rc,
    /// Two SRD QPs of an EFA device (libefa), one posting RDMA WRITEs to the other's buffers.
    SrdWrite,
    /// The same with RDMA READs, on an EFA device that offers READ but not WRITE: the QP reads
    /// from the source into the destination, so the same bytes move the same ways.
    SrdRead,
}

impl Transport {
    /// `RDMA WRITE`, `SRD RDMA READ`: what the steps are named after.
    pub fn operation(self) -> &'static str {
        match self {
            Transport::Rc => "RDMA WRITE",
            Transport::SrdWrite => "SRD RDMA WRITE",
            Transport::SrdRead => "SRD RDMA READ",
        }
    }
    /// `WRITE` or `READ`.
    pub fn verb(self) -> &'static str {
        match self {
            Transport::Rc | Transport::SrdWrite => "WRITE",
            Transport::SrdRead => "READ",
        }
    }
}

/// What libefa said of an EFA device (`efadv_query_device`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EfaInfo {
    /// The libefa file loaded.
    pub library: String,
    /// `EFADV_DEVICE_ATTR_CAPS_*`: 0x1 RDMA READ, 0x8 RDMA WRITE (rdma-core efadv.h).
    pub device_caps: u32,
    /// The largest RDMA READ or WRITE one work request may carry, bytes.
    pub max_rdma_size: u32,
    /// The deepest send queue an SRD QP may have.
    pub max_sq_wr: u32,
}

/// Why a pair did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    NoRdmaDevice,
    Memory,
    VerbsMissing,
    VerbsSymbolMissing,
    DeviceList,
    ProviderMissing,
    NoAccess,
    OpenFailed,
    PortNotActive,
    RegisterFailed,
    QpFailed,
    CompletionError,
    Timeout,
    DataMismatch,
    /// An EFA device, and libefa.so.1 cannot be loaded (or lacks a call): no SRD QP.
    EfaLibrary,
    /// An EFA device that offers neither RDMA WRITE nor READ: SRD cannot move the bytes.
    EfaNoRdma,
    /// A device that offers no RC queue pair and is not EFA: no transport the test knows.
    NoRc,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    /// The step: `cuMemAlloc`, `ibv_open_device`, `RDMA WRITE host -> GPU`...
    pub step: String,
    pub message: String,
}

/// What one child found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct PairResult {
    /// The GPU side, in order: allocation, attributes, export.
    pub memory_steps: Vec<String>,
    pub verbs_library: Option<String>,
    pub port: Option<PortInfo>,
    pub registrations: Vec<Registration>,
    /// The registration path that worked for the buffer under test.
    pub path: Option<String>,
    /// Bytes verified end to end, each direction.
    pub verified_bytes: Option<u64>,
    pub bandwidth: Option<Bandwidth>,
    /// The queue pair used (or tried); absent before one was chosen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Transport>,
    /// An EFA device's capabilities, as libefa gave them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa: Option<EfaInfo>,
    pub failure: Option<Failure>,
    pub elapsed_ms: u64,
}

/// Something that runs a pair on GPU memory: the GPU session, whose per-GPU workers keep CUDA
/// or HIP open between pairs (crate::probe::gpu::GpuSession). The write test's plan drives it without
/// knowing what it is, so that the plan and the GPU session need not import each other.
pub trait PairRunner {
    /// Runs one pair on its GPU; the answer must come within `timeout`. `Err`: why there is
    /// no answer (the worker hung, crashed, or could not be started).
    fn pair(&self, spec: &PairSpec, timeout: Duration) -> Result<PairResult, String>;
}

/// Whether the GDR write test ran, and what it found.
#[derive(Debug, Clone)]
pub enum GdrTest {
    Skipped(String),
    Ran {
        outcomes: Vec<GdrOutcome>,
        not_planned: Vec<NotPlanned>,
    },
}

/// One pair: what was tested, and what its child said (or why it said nothing).
#[derive(Debug, Clone)]
pub struct GdrOutcome {
    pub gpu: Option<Bdf>,
    /// How reports name the GPU (`GPU 0000:3b:00.0 (NVIDIA H100)`) or the buffer (`host memory`).
    pub subject: String,
    /// `mlx5_0 port 1`.
    pub nic: Option<String>,
    /// The RDMA device's name alone (`mlx5_0`), for the fixes' commands.
    pub nic_device: Option<String>,
    pub memory: Memory,
    pub level: Option<Level>,
    pub expected: Option<Expected>,
    /// A software RDMA device (rxe, siw): its bandwidth is the CPU's, not judged.
    pub software: bool,
    pub result: Result<PairResult, String>,
    /// `--deadline` shortened this pair's time limit (or left none): a timeout then says
    /// nothing about the pair.
    pub cut_short: bool,
}

/// The rate a pair should reach, and what limits it.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    pub gbps: f64,
    pub limited_by: String,
}

/// Why there is nothing to run for a GPU.
#[derive(Debug, Clone)]
pub struct NotPlanned {
    pub subject: String,
    pub reason: String,
}
