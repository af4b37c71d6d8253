//! `gdrdoctor nccl verify`: NCCL itself, run on this node's GPUs, says whether it uses
//! GPUDirect RDMA here; what it says is then compared with gdrdoctor's own view ([`compare`]).
//! On a node of AMD GPUs the library is RCCL, AMD's port of NCCL to HIP: the same C API, the
//! same log, the same run, with HIP where NCCL has CUDA.
//!
//! Two sides, as for the GPU probe (src/gpu): this process never loads a vendor library. It
//! finds the library to use ([`search`]: `--library`, the dynamic loader's `libnccl.so.2` or
//! `librccl.so.1`, ROCm's directories for RCCL, the pip wheels of the python3 on PATH), and starts
//! `gdrdoctor nccl-child` with a deadline and NCCL's log sent to a file: `NCCL_DEBUG=INFO`,
//! `NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH,ENV` (the network, each NIC's GDR decision, the GPU-NIC
//! paths, the settings NCCL read), `NCCL_TOPO_DUMP_FILE`, and always `NCCL_NVLS_ENABLE=0` (never
//! NVLink multicast). The child loads the library and the GPU runtime (CUDA, HIP), takes the GPUs
//! by PCI address, and makes one communicator over all of them: with one GPU a one-rank
//! communicator, which still makes NCCL load its network, judge each NIC and compute its
//! GPU-NIC paths; with two or more, `ncclCommInitAll` and an all-reduce with P2P and SHM off, so
//! that NCCL's network carries it, the sum checked element by element. The parent then reads
//! NCCL's log through the `nccl explain` parser and keeps the topology dump's text.
//!
//! [`compare`]: super::compare
//!
//! The run is in two files: [`run`] is the parent (finding the library, starting the child,
//! reading what NCCL wrote), `child` the child (loading the library and the runtime, the
//! all-reduce). This file holds what they hand each other and what the run leaves for the
//! comparison.

mod child;
mod run;

pub use child::child_main;
pub use run::{RCCL_WHEEL_PATHS, WHEEL_PATH, run, run_on, search, version};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

/// What the child is asked to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    /// NCCL (with CUDA) or RCCL (with HIP).
    #[serde(default)]
    pub library: Library,
    /// Libraries to try in order; the first that loads is used.
    pub libraries: Vec<String>,
    /// The GPUs by PCI address, in rank order.
    pub gpus: Vec<String>,
    /// int32 elements per rank in the all-reduce.
    pub elements: u64,
    /// Load the library and answer its version, nothing else (`gdrdoctor nccl`).
    #[serde(default)]
    pub version_only: bool,
}

/// The all-reduce's buffer: 4 MiB of int32 per rank, enough for NCCL to split it over its
/// channels and chunks, small next to any GPU's memory.
pub const ELEMENTS: u64 = 1 << 20;

/// How to run NCCL.
#[derive(Debug, Clone)]
pub struct Options {
    /// This binary (the child is `gdrdoctor nccl-child`).
    pub exe: PathBuf,
    /// NCCL, or RCCL on a node of AMD GPUs.
    pub which: Library,
    pub library: Option<PathBuf>,
    pub timeout: Duration,
    /// `--deadline` (seconds) when it made `timeout` shorter than configured.
    pub cut_by_deadline: Option<f64>,
    /// Keep NCCL's log and topology dump here instead of a temporary directory.
    pub log_dir: Option<PathBuf>,
    pub elements: u64,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e5).round() / 100.0
}

// What the run leaves is model data (crate::model::nccl): the check and the comparison read it
// without importing the run.
pub use crate::model::nccl::{
    Candidate, ChildAnswer, Library, Log, NcclVerify, Outcome, RankGpu, Run, Search, TOPO_KEPT,
    TopoDump, Tried,
};
