//! The GPUDirect RDMA write test: per GPU-NIC pair, GPU memory registered with the NIC, RDMA
//! WRITEs through a queue pair connected to itself, both directions, every byte verified, and
//! the bandwidth measured. What `ib_write_bw --use_cuda` proves, automatic and per pair.
//!
//! Each pair runs in a child process with a deadline, like the GPU probe: on GPU memory in the
//! GPU's worker (crate::probe::gpu::worker), on host memory in a child of its own (`gdrdoctor
//! gdr-pair`). A peer-memory module that hangs an `ibv_reg_mr`, or a provider that never
//! completes a WRITE, costs the deadline and becomes a finding; the child's exit frees every
//! resource.

pub mod engine;
pub mod wire;

// What a pair is asked and what it finds are model types (crate::model::gdr): the GPU worker,
// the inventory and the reports name them without importing the test that fills them in.
pub use crate::model::gdr::{
    Bandwidth, Failure, FailureKind, Memory, NicSpec, PairResult, PairRunner, PairSpec, PortInfo,
    Registration,
};

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
