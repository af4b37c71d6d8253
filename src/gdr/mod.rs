//! The GPUDirect RDMA write test: per GPU-NIC pair, GPU memory registered with the NIC, RDMA
//! WRITEs through a queue pair connected to itself, both directions, every byte verified, and
//! the bandwidth measured. What `ib_write_bw --use_cuda` proves, automatic and per pair.
//!
//! Each pair runs in a child process (`gdrdoctor gdr-pair`) with a deadline, like the GPU probe:
//! a peer-memory module that hangs an `ibv_reg_mr`, or a provider that never completes a WRITE,
//! costs the deadline and becomes a finding; the child's exit frees every resource.

pub mod engine;
pub mod plan;

use serde::{Deserialize, Serialize};

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
    /// Gb/s of RDMA WRITEs into the buffer under test (host -> GPU for GPU memory).
    pub to_target_gbps: f64,
    /// Gb/s out of it (GPU -> host).
    pub from_target_gbps: f64,
    pub message_bytes: u64,
    /// WRITEs completed, both directions.
    pub messages: u64,
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
    pub failure: Option<Failure>,
    pub elapsed_ms: u64,
}

/// The child's side.
pub fn child_main(spec_json: &str) -> String {
    let result = match serde_json::from_str::<PairSpec>(spec_json) {
        Ok(spec) => engine::run_pair(&spec),
        Err(e) => PairResult {
            failure: Some(Failure {
                kind: FailureKind::Memory,
                step: "spec".into(),
                message: format!("unreadable pair spec: {e}"),
            }),
            ..PairResult::default()
        },
    };
    serde_json::to_string(&result).unwrap_or_default()
}

/// `EOPNOTSUPP`: the symbolic name of the errnos registration and open calls return.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::EBADF => "EBADF",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => "errno",
    }
}

/// `Operation not supported (EOPNOTSUPP)`.
pub fn os_error(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => {
            let text = e.to_string();
            let text = text.split(" (os error").next().unwrap_or(&text).to_owned();
            format!("{text} ({}, errno {n})", errno_name(n))
        }
        None => e.to_string(),
    }
}

/// What errno means for a registration on each path: the explanation an operator needs.
pub fn errno_meaning(path: &str, errno: i32) -> Option<&'static str> {
    Some(match (path, errno) {
        ("dmabuf", libc::EOPNOTSUPP) => {
            "the NIC driver does not register dma-bufs (no reg_user_mr_dmabuf)"
        }
        ("dmabuf", libc::EINVAL) => {
            "the NIC driver refused the dma-buf (offset, length or access not supported)"
        }
        ("dmabuf", libc::EBADF) => "the fd is not a dma-buf",
        ("peermem", libc::EFAULT | libc::EINVAL) => {
            "no peer-memory client claimed the GPU address: nvidia_peermem (or amd_peer_mem) is not loaded, or not registered with this RDMA stack"
        }
        (_, libc::ENOMEM) => {
            "RLIMIT_MEMLOCK too low for the pinning (ulimit -l), or the GPU's BAR1 is exhausted"
        }
        (_, libc::EPERM | libc::EACCES) => "not permitted: device access or access flags",
        (_, libc::EOPNOTSUPP) => "not supported by the NIC driver",
        _ => return None,
    })
}
