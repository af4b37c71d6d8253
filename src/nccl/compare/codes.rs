//! The codes of the `nccl-verify` check. They live here, beside the comparison that builds
//! most of their findings; the check lists them (`checks/nccl_verify.rs`).

use crate::model::Code;

pub(crate) const USES_GDR: Code = Code {
    id: "nccl-uses-gdr",
    summary: "NCCL uses GPUDirect RDMA for every GPU on this node",
};

pub(crate) const NO_GDR: Code = Code {
    id: "nccl-no-gdr",
    summary: "NCCL does not use GPUDirect RDMA for some GPU (sockets, no GPU memory path, a GPU-NIC distance beyond its level)",
};

pub(crate) const GDR_UNKNOWN: Code = Code {
    id: "nccl-gdr-unknown",
    summary: "NCCL's log does not say whether it uses GPUDirect RDMA for some GPU",
};

pub(crate) const AGREES: Code = Code {
    id: "nccl-agrees",
    summary: "NCCL sees the network, the NICs, their GDR and the GPU-NIC paths as gdrdoctor does",
};

pub(crate) const DISAGREES: Code = Code {
    id: "nccl-disagrees",
    summary: "NCCL and gdrdoctor differ on a fact: the network, the NICs, a NIC's GDR decision, a GPU-NIC path",
};

pub(crate) const ERROR: Code = Code {
    id: "nccl-error",
    summary: "an NCCL call failed (communicator init, the all-reduce)",
};

pub(crate) const ALL_REDUCE_WRONG: Code = Code {
    id: "nccl-all-reduce-wrong",
    summary: "NCCL's all-reduce summed wrong: data was corrupted between the GPUs",
};

pub(crate) const LIBRARY_MISSING: Code = Code {
    id: "nccl-library-missing",
    summary: "no libnccl.so.2 (librccl.so.1 on AMD GPUs) could be loaded (the loader's, ROCm's, the pip wheels')",
};

pub(crate) const VERIFY_FAILED: Code = Code {
    id: "nccl-verify-failed",
    summary: "NCCL (RCCL on AMD GPUs) could not be run: its child hung, crashed, or CUDA (HIP) could not be used",
};

pub(crate) const VERIFY_CUT_SHORT: Code = Code {
    id: "nccl-verify-cut-short",
    summary: "--deadline ended NCCL's run before it finished (or left no time to start it)",
};

pub(crate) const VERIFY_NOT_RUN: Code = Code {
    id: "nccl-verify-not-run",
    summary: "NCCL was not run: not asked (--nccl-verify), a captured root, --no-gpu-probe, or no NVIDIA or AMD GPU",
};
