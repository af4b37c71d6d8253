//! `nccl-verify` (off by default: `check --nccl-verify`): NCCL itself, run on the node's GPUs,
//! says whether it uses GPUDirect RDMA, and whether it sees the node as gdrdoctor does
//! (src/probe/nccl/ runs it, src/nccl/compare/ compares). This check judges what the run
//! left in the runs (crate::model::Runs), against the findings `rdma-link` and `peer-memory` produced in
//! the same report.

use super::Rule;
use super::{Check, Context, Meta};
use crate::model::Action;
use crate::model::nccl::{NcclVerify, Run};
use crate::model::{Code, Finding};
use crate::nccl::compare::{OwnView, Verification, codes};

pub struct NcclVerifyCheck;

const CODES: &[Code] = &[
    codes::USES_GDR,
    codes::NO_GDR,
    codes::GDR_UNKNOWN,
    codes::AGREES,
    codes::DISAGREES,
    codes::ERROR,
    codes::ALL_REDUCE_WRONG,
    codes::LIBRARY_MISSING,
    codes::VERIFY_FAILED,
    codes::VERIFY_CUT_SHORT,
    codes::VERIFY_NOT_RUN,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(codes::USES_GDR, Action::None),
    Rule::new(codes::NO_GDR, Action::FixInPlace),
    Rule::new(codes::GDR_UNKNOWN, Action::None),
    Rule::new(codes::AGREES, Action::None),
    Rule::new(codes::DISAGREES, Action::FixInPlace),
    Rule::new(codes::ERROR, Action::ResetGpu),
    Rule::new(codes::ALL_REDUCE_WRONG, Action::ReplacePart),
    Rule::new(codes::LIBRARY_MISSING, Action::None),
    Rule::new(codes::VERIFY_FAILED, Action::None),
    Rule::new(codes::VERIFY_CUT_SHORT, Action::None),
    Rule::new(codes::VERIFY_NOT_RUN, Action::None),
];

const META: Meta = Meta {
    id: "nccl-verify",
    title: "NCCL itself uses GPUDirect RDMA, and sees the node as gdrdoctor does",
    codes: CODES,
    actions: ACTIONS,
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
                let f = Finding::skip(codes::VERIFY_NOT_RUN, "node", reason.clone())
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
