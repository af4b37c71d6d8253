//! NCCL's own run, as `nccl verify` and the `nccl-verify` check read it: what the child did and
//! saw ([`ChildAnswer`]), where the library came from ([`Search`]), NCCL's log with its
//! explanation, and the topology dump ([`Run`]); or why NCCL was not run ([`NcclVerify`]). The
//! run is `probe::nccl`'s; nothing here knows how it runs.

pub mod explain;

use explain::Explanation;
use serde::{Deserialize, Serialize};

/// The library run: NCCL on NVIDIA GPUs (with CUDA), or AMD's RCCL on AMD GPUs (with HIP), which
/// exports the same `nccl*` C API and prints the same log lines.
pub use crate::parse::nccl_topo::Library;
use std::collections::BTreeMap;

/// One library the child tried and could not load.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tried {
    pub library: String,
    pub error: String,
}

/// A GPU of the communicator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankGpu {
    pub rank: u32,
    pub bus_id: String,
    /// The CUDA ordinal NCCL was given.
    pub ordinal: i32,
}

/// How the child's run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Outcome {
    /// The all-reduce's sum was right in every element of every rank.
    Ok { elements: u64 },
    /// Some elements were wrong: how many, and the first.
    Wrong {
        elements: u64,
        wrong: u64,
        rank: u32,
        index: u64,
        expected: i64,
        got: i64,
    },
    /// An NCCL call failed.
    NcclError {
        call: String,
        code: i32,
        error: String,
        detail: Option<String>,
    },
    /// CUDA could not give NCCL what it needs (the library, a GPU, memory, a stream).
    CudaError { call: String, error: String },
    /// HIP could not give RCCL what it needs (the library, a GPU, memory, a stream).
    HipError { call: String, error: String },
    /// No candidate library loaded (`tried` says why each did not).
    NoLibrary,
    /// A library loaded that lacks an NCCL call every release since 2.4 (and every RCCL) exports.
    MissingSymbol { library: String, symbol: String },
    /// The spec could not be read.
    BadSpec { error: String },
    /// Only the library's version was asked (`gdrdoctor nccl`): it loaded, and nothing ran.
    Loaded,
}

/// What the child did and saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildAnswer {
    /// The file NCCL was loaded from (the loader's own record of it).
    pub library: Option<String>,
    pub tried: Vec<Tried>,
    /// `ncclGetVersion`, as a release: `2.28.9`.
    pub version: Option<String>,
    pub version_code: Option<i32>,
    pub cuda_library: Option<String>,
    pub cuda_driver_version: Option<i32>,
    /// RCCL's run: the libamdhip64 used and `hipDriverGetVersion` (absent for NCCL's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip_library: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hip_driver_version: Option<i32>,
    pub gpus: Vec<RankGpu>,
    pub outcome: Outcome,
    pub init_ms: Option<f64>,
    pub all_reduce_ms: Option<f64>,
    pub total_ms: f64,
    /// Calls that failed after the answer was known (destroying a communicator).
    pub cleanup_errors: Vec<String>,
}

/// Where a candidate library came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub library: String,
    /// `option` (--library), `environment` (GDRDOCTOR_LIBNCCL, GDRDOCTOR_LIBRCCL), `loader` (the
    /// dynamic loader's `libnccl.so.2` or `librccl.so.1`: LD_LIBRARY_PATH, the ld.so cache, the
    /// system directories), `rocm` (RCCL in ROCm's directories: `/opt/rocm/lib`,
    /// `/opt/rocm-X.Y.Z/lib`), `pip-wheel` (`nvidia/nccl/lib`, or for RCCL PyTorch's ROCm
    /// wheel's `torch/lib` and ROCm's `_rocm_sdk_libraries*/lib`, under a `sys.path` entry of the
    /// python3 on PATH).
    pub source: &'static str,
}

/// The libraries to try, in order, and what the search saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Search {
    pub candidates: Vec<Candidate>,
    /// How the pip wheel was looked for: the python3 that answered and what it had, or why
    /// it was not looked for.
    pub python: String,
}

/// NCCL's log, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Log {
    /// Where it is kept (`--log-dir`), or null when it was a temporary file.
    pub path: Option<String>,
    pub bytes: u64,
    pub lines: u64,
    pub nccl_lines: u64,
    /// Why there is no explanation, when there is none (no log written, not NCCL's output).
    pub note: Option<String>,
}

/// NCCL's topology dump (`NCCL_TOPO_DUMP_FILE`), kept as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopoDump {
    pub path: Option<String>,
    pub bytes: u64,
    /// Its first [`TOPO_KEPT`] bytes.
    pub text: String,
    pub truncated: bool,
}

/// The topology dump kept: a node of 8 GPUs and 8 NICs writes about 10 KiB.
pub const TOPO_KEPT: u64 = 1 << 20;

/// Whether NCCL was run, and what it did: what the runs hand the `nccl-verify` check.
#[derive(Debug, Clone)]
pub enum NcclVerify {
    /// Not run, and why; `no_gpu`: there is no NVIDIA or AMD GPU (gpu-driver says why).
    NotRun {
        reason: String,
        no_gpu: bool,
    },
    Ran(Box<Run>),
}

impl NcclVerify {
    pub const NOT_ASKED: &str = "not asked (--nccl-verify runs it; it takes seconds)";

    pub fn not_run(reason: impl Into<String>) -> NcclVerify {
        NcclVerify::NotRun {
            reason: reason.into(),
            no_gpu: false,
        }
    }

    pub fn run(&self) -> Option<&Run> {
        match self {
            NcclVerify::Ran(r) => Some(r),
            NcclVerify::NotRun { .. } => None,
        }
    }
}

/// One run of NCCL, as the parent saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// `nccl`, or `rccl` on a node of AMD GPUs.
    pub library: Library,
    pub search: Search,
    pub gpus: Vec<String>,
    /// `one-rank` (one GPU) or `all-reduce` (several, over NCCL's network).
    pub mode: &'static str,
    /// The NCCL variables set for the child.
    pub env: BTreeMap<String, String>,
    /// `NAME=value` of variables removed from the child's environment (the GPU-hiding ones).
    pub cleared_env: Vec<String>,
    pub timeout_s: f64,
    pub cut_by_deadline: Option<f64>,
    pub answer: Option<ChildAnswer>,
    /// The file the library is, its links resolved (`libnccl.so.2` ->
    /// `/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.9`).
    pub library_file: Option<String>,
    /// Why the child gave no answer (it could not start, hung, crashed, answered garbage).
    pub error: Option<String>,
    pub log: Log,
    #[serde(skip)]
    pub explanation: Option<Explanation>,
    pub topology_dump: Option<TopoDump>,
    pub elapsed_ms: f64,
}

impl Run {
    /// The candidate that loaded: the child tried them in order and lists the ones that failed.
    pub fn used(&self) -> Option<&Candidate> {
        let a = self.answer.as_ref()?;
        a.library.as_ref()?;
        self.search.candidates.get(a.tried.len())
    }

    /// The child was killed at a deadline.
    pub fn timed_out(&self) -> bool {
        self.error
            .as_deref()
            .is_some_and(|e| e.contains("did not finish"))
    }
}
