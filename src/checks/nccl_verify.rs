//! `nccl-verify` (off by default: `check --nccl-verify`): NCCL itself, run on the node's GPUs,
//! says whether it uses GPUDirect RDMA, and whether it sees the node as gdrdoctor does
//! (src/nccl/verify/ runs it, src/nccl/compare/ compares). This check judges what the run
//! left in the runs (crate::model::Runs), against the findings `rdma-link` and `peer-memory` produced in
//! the same report.

use super::{Check, Context, Meta};
use crate::model::{Code, Finding};
use crate::nccl::compare::{OwnView, Verification};
use crate::probe::nccl::{NcclVerify, Run};

pub struct NcclVerifyCheck;

const CODES: &[Code] = &[
    Code {
        id: "nccl-uses-gdr",
        summary: "NCCL uses GPUDirect RDMA for every GPU on this node",
    },
    Code {
        id: "nccl-no-gdr",
        summary: "NCCL does not use GPUDirect RDMA for some GPU (sockets, no GPU memory path, a GPU-NIC distance beyond its level)",
    },
    Code {
        id: "nccl-gdr-unknown",
        summary: "NCCL's log does not say whether it uses GPUDirect RDMA for some GPU",
    },
    Code {
        id: "nccl-agrees",
        summary: "NCCL sees the network, the NICs, their GDR and the GPU-NIC paths as gdrdoctor does",
    },
    Code {
        id: "nccl-disagrees",
        summary: "NCCL and gdrdoctor differ on a fact: the network, the NICs, a NIC's GDR decision, a GPU-NIC path",
    },
    Code {
        id: "nccl-error",
        summary: "an NCCL call failed (communicator init, the all-reduce)",
    },
    Code {
        id: "nccl-all-reduce-wrong",
        summary: "NCCL's all-reduce summed wrong: data was corrupted between the GPUs",
    },
    Code {
        id: "nccl-library-missing",
        summary: "no libnccl.so.2 could be loaded (the loader's, the pip wheel's)",
    },
    Code {
        id: "nccl-verify-failed",
        summary: "NCCL could not be run: its child hung, crashed, or CUDA could not be used",
    },
    Code {
        id: "nccl-verify-cut-short",
        summary: "--deadline ended NCCL's run before it finished (or left no time to start it)",
    },
    Code {
        id: "nccl-verify-not-run",
        summary: "NCCL was not run: not asked (--nccl-verify), a captured root, --no-gpu-probe, or no NVIDIA GPU",
    },
];

const META: Meta = Meta {
    id: "nccl-verify",
    title: "NCCL itself uses GPUDirect RDMA, and sees the node as gdrdoctor does",
    codes: CODES,
    readme: include_str!("../../checks/nccl-verify/README.md"),
    live_only: false,
    // gdrdoctor's side of the comparison: the network and NICs (`rdma-link`), the GPU memory
    // path (`peer-memory`).
    reads: &["rdma-link", "peer-memory"],
};

impl Check for NcclVerifyCheck {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        match &cx.runs.nccl_verify {
            NcclVerify::NotRun { reason, no_gpu } => {
                let f = Finding::skip("nccl-verify-not-run", "node", reason.clone())
                    .evidence("gdrdoctor nccl-child", format!("<not run: {reason}>"));
                vec![if *no_gpu {
                    f.prerequisites(&["gpu-driver"])
                } else {
                    f
                }]
            }
            NcclVerify::Ran(run) => verification(cx, run).findings,
        }
    }
}

/// NCCL's run against the findings of the checks this one reads.
pub(super) fn verification(cx: &Context, run: &Run) -> Verification {
    let own = OwnView {
        rdma_link: cx.findings_of("rdma-link"),
        peer_memory: cx.findings_of("peer-memory"),
    };
    crate::nccl::compare::verify(cx.inv, cx.config, &own, run)
}
