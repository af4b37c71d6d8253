//! What the runs above the facts found: the GPU probe, the access probe, the GDR write test,
//! NCCL's own run and the kernel's answers on the RoCE netdevs' QoS. The probe stage (`crate::probe`) runs them and fills this in; the checks and
//! the reports read it beside the inventory, which holds only what was read off the node.

use super::access::Access;
use super::gdr::GdrTest;
use super::gpu::{Runtime, SkipReason};
use super::health::Sample;
use super::nccl::NcclVerify;
use super::qos::Qos;

#[derive(Debug)]
pub struct Runs {
    /// What the GPU libraries said (live), NVML's answer as a capture recorded it, or why
    /// neither.
    pub gpu: Runtime,
    /// This process's access to RDMA: live roots only, when `rdma-access` runs.
    pub access: Option<Access>,
    /// The GDR write test's outcomes (live); it needs the placement, so it runs after loading.
    pub gdr_test: GdrTest,
    /// NCCL's own run (`--nccl-verify`, `nccl verify`), once the GPU workers have ended.
    pub nccl_verify: NcclVerify,
    /// The second reading of the link-health counters (`--sample`), live roots only.
    pub sample: Option<Sample>,
    /// Why a second reading that was asked for (`--sample`, `--baseline`) is not there: the
    /// report says what was judged over instead.
    pub span_note: Option<String>,
    /// `--baseline FILE`: whether this run's reading was written for the next (`Err`: why not).
    pub baseline_saved: Option<Result<(), String>>,
    /// dcbnl's and ethtool's answers on the RoCE ports' netdevs: asked of the live kernel, or
    /// as a capture recorded them.
    pub qos: Qos,
}

impl Runs {
    /// Nothing run yet, each run saying why as a report shows it; `live`: the root is the
    /// running system.
    pub fn none(live: bool) -> Runs {
        Runs {
            gpu: Runtime::Skipped {
                reason: SkipReason::Disabled,
            },
            access: None,
            gdr_test: GdrTest::Skipped(if live {
                "not asked".into()
            } else {
                "a captured root: the test moves bytes on the live node".into()
            }),
            nccl_verify: NcclVerify::not_run(NcclVerify::NOT_ASKED),
            sample: None,
            span_note: None,
            baseline_saved: None,
            qos: Qos::NotRead("not asked".into()),
        }
    }
}
