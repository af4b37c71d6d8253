//! One GPU's verdict: what sysfs says of it (does it answer on the bus, its BAR, AMD's render
//! node and KFD entry), what the driver libraries say (`runtime`), and the worst problem found
//! speaking for it, or a pass that says what was verified.

use super::runtime::{amd_runtime, nvidia_runtime};
use super::{
    BAR_SMALL, BAR_UNKNOWN, NOT_RESPONDING, NOT_SEEN_BY_DRIVER, PROBE_FAILED, READY, bar_fix,
    bound_to, not_seen_fix,
};
use crate::inventory::gpu::KFD_NODES;
use crate::inventory::{Gpu, GpuVendor, Inventory};
use crate::model::gpu::Probe;
use crate::model::gpu::Runtime;
use crate::model::{Evidence, Finding};
use crate::parse::bytes;

/// One GPU: every problem found, or a pass that says what was verified.
pub(super) fn judge(
    inv: &Inventory,
    runtime: &Runtime,
    g: &Gpu,
    probe: Option<&Probe>,
    min_bar: u64,
) -> Finding {
    let mut evidence = Vec::new();
    let mut facts: Vec<String> = Vec::new();
    let mut problems: Vec<Finding> = Vec::new();
    problems.extend(not_responding(inv, g));
    let bar_known = sysfs_bar(g, min_bar, &mut facts, &mut evidence, &mut problems);
    if g.vendor == GpuVendor::Amd && bound_to(inv, g, "amdgpu") {
        amd_nodes(inv, g, &mut facts, &mut evidence, &mut problems);
    }
    problems.extend(probe_failures(runtime, probe, g));
    if let Some(p) = probe {
        match g.vendor {
            GpuVendor::Nvidia => {
                nvidia_runtime(inv, g, p, min_bar, &mut facts, &mut evidence, &mut problems)
            }
            GpuVendor::Amd => amd_runtime(g, p, &mut facts, &mut evidence, &mut problems),
            GpuVendor::Other => {}
        }
        if !p.cleared_env.is_empty() {
            evidence.push(Evidence {
                path: "environment".into(),
                value: format!(
                    "{} (removed for the probe, which asks every GPU)",
                    p.cleared_env.join(" ")
                ),
            });
        }
    }
    verdict(runtime, g, problems, facts, evidence, bar_known)
}

/// A GPU that does not answer config reads is gone from the bus whatever sysfs still lists for
/// it (driver link, BARs): the kernel keeps those from when it did answer.
fn not_responding(inv: &Inventory, g: &Gpu) -> Option<Finding> {
    let dead = inv.function(g.bdf).and_then(|f| f.not_responding())?;
    Some(
        Finding::fail(
            NOT_RESPONDING,
            g.subject(),
            "its config space reads all ones (vendor ID 0xffff) while sysfs still lists it: the GPU does not answer on the PCIe bus (fell off the bus, or held in reset), so nothing can use its memory",
        )
        .with(dead)
        .fix(crate::checks::not_responding_fix(g.bdf, "GPU")),
    )
}

/// BAR1 (VRAM BAR on AMD) from sysfs: the same on a live node and on its capture. Whether it
/// could be read, for the pass's "no BAR information".
fn sysfs_bar(
    g: &Gpu,
    min_bar: u64,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) -> bool {
    let subject = g.subject();
    let bar_name = if g.vendor == GpuVendor::Nvidia {
        "BAR1"
    } else {
        "VRAM BAR"
    };
    let mut bar_known = false;
    if let Some(a) = &g.aperture {
        match a.value() {
            Some(ap) => {
                bar_known = true;
                evidence.push(Evidence {
                    path: a.path.clone(),
                    value: ap.describe(),
                });
                if ap.size < min_bar {
                    let unassigned = ap.size == 0;
                    problems.push(
                        Finding::fail(
                            BAR_SMALL,
                            subject.clone(),
                            if unassigned {
                                format!("no prefetchable BAR assigned: the platform did not map {bar_name}, so no NIC can reach its memory")
                            } else {
                                format!("{bar_name} is {}, below the {} threshold: GPUDirect RDMA maps every registered GPU buffer through it, and registrations fail once it is full", bytes(ap.size), bytes(min_bar))
                            },
                        )
                        .evidence(a.path.clone(), ap.describe())
                        .fix(bar_fix(g.vendor, g.bdf)),
                    );
                } else {
                    facts.push(format!("{bar_name} {}", bytes(ap.size)));
                }
            }
            None => problems.push(match a.nonsense() {
                // A region misread would put another region in BAR1's place: unknown.
                Some(bad) => Finding::unknown(
                    BAR_UNKNOWN,
                    subject.clone(),
                    format!(
                        "cannot tell its {bar_name}: {} makes no sense, {bad}",
                        a.path
                    ),
                )
                .evidence(a.path.clone(), bad),
                None => Finding::unknown(
                    BAR_UNKNOWN,
                    subject.clone(),
                    format!("cannot read its BARs: {}", a.problem().unwrap_or_default()),
                )
                .with([a.evidence()]),
            }),
        }
    }
    bar_known
}

/// AMD: the render node ROCm opens, and the KFD topology it enumerates (offline too).
fn amd_nodes(
    inv: &Inventory,
    g: &Gpu,
    facts: &mut Vec<String>,
    evidence: &mut Vec<Evidence>,
    problems: &mut Vec<Finding>,
) {
    let subject = g.subject();
    let drm_path = inv
        .function(g.bdf)
        .map(|f| format!("{}/drm", f.path))
        .unwrap_or_default();
    match &g.drm {
        Some(Ok(nodes)) => match nodes.iter().find(|n| n.starts_with("renderD")) {
            Some(render) => {
                facts.push(format!("render node {render}"));
                evidence.push(Evidence {
                    path: drm_path,
                    value: nodes.join(" "),
                });
            }
            None => problems.push(
                Finding::fail(
                    NOT_SEEN_BY_DRIVER,
                    subject.clone(),
                    "bound to amdgpu but it has no render node (renderD*): amdgpu did not finish bringing it up, and ROCm cannot open it".to_string(),
                )
                .evidence(drm_path, if nodes.is_empty() { "<empty>".into() } else { nodes.join(" ") })
                .fix(not_seen_fix(g.vendor, g.bdf)),
            ),
        },
        Some(Err(e)) if e.is_not_found() => problems.push(
            Finding::fail(
                NOT_SEEN_BY_DRIVER,
                subject.clone(),
                "bound to amdgpu but it has no DRM device: amdgpu did not finish bringing it up, and ROCm cannot open it".to_string(),
            )
            .evidence(e.path(), format!("<{}>", e.reason()))
            .fix(not_seen_fix(g.vendor, g.bdf)),
        ),
        Some(Err(e)) => problems.push(
            Finding::unknown(NOT_SEEN_BY_DRIVER, subject.clone(), format!("cannot read its DRM nodes: {}", e.reason()))
                .evidence(e.path(), format!("<{}>", e.reason())),
        ),
        None => {}
    }
    match &inv.kfd {
        Some(Ok(kfd)) => match kfd.nodes.get(&g.bdf) {
            Some(path) => {
                facts.push("in the KFD topology".into());
                evidence.push(Evidence {
                    path: path.clone(),
                    value: format!("GPU node for {}", g.bdf),
                });
            }
            None => problems.push(
                Finding::fail(
                    NOT_SEEN_BY_DRIVER,
                    subject.clone(),
                    "bound to amdgpu but not in the KFD topology: ROCm cannot use it".to_string(),
                )
                .evidence(KFD_NODES, format!("{} GPU nodes, none at {}", kfd.nodes.len(), g.bdf))
                .fix(not_seen_fix(g.vendor, g.bdf)),
            ),
        },
        Some(Err(e)) => problems.push(
            Finding::fail(
                NOT_SEEN_BY_DRIVER,
                subject.clone(),
                format!("bound to amdgpu but there is no KFD topology ({}): the kernel's compute interface (CONFIG_HSA_AMD) is off or failed, so ROCm sees no GPU", e.message),
            )
            .evidence(e.path.clone(), format!("<{}>", e.message))
            .fix(not_seen_fix(g.vendor, g.bdf)),
        ),
        None => {}
    }
}

/// The probe's failures that leave this GPU unknown: its own worker's, or the whole probe's.
fn probe_failures(runtime: &Runtime, probe: Option<&Probe>, g: &Gpu) -> Vec<Finding> {
    let subject = g.subject();
    let mut problems = Vec::new();
    if let Some(e) = probe.and_then(|p| p.failure(g.bdf)) {
        // Its worker hung, crashed or could not use the library the others used: this GPU
        // alone is unknown; the rest of the probe stands.
        problems.push(
            Finding::unknown(
                PROBE_FAILED,
                subject.clone(),
                format!("the GPU libraries gave no answer for it: {e}"),
            )
            .evidence("gdrdoctor gpu-worker", format!("<{e}>")),
        );
    }
    if let Runtime::Failed { error } = runtime {
        // Nothing answered (hung, crashed, or cut short by --deadline): what sysfs says of the
        // GPU stands, but the driver's view is unknown, never a pass.
        problems.push(
            Finding::unknown(
                PROBE_FAILED,
                subject.clone(),
                format!("the GPU libraries gave no answer: {error}"),
            )
            .evidence("gdrdoctor probe-gpu", format!("<{error}>")),
        );
    }
    problems
}

/// The worst problem speaks for the GPU; the others follow in its message. Without one, a pass
/// that says what was verified.
fn verdict(
    runtime: &Runtime,
    g: &Gpu,
    mut problems: Vec<Finding>,
    mut facts: Vec<String>,
    evidence: Vec<Evidence>,
    bar_known: bool,
) -> Finding {
    problems.sort_by_key(|f| std::cmp::Reverse(f.status));
    let mut rest = problems.into_iter();
    match rest.next() {
        Some(mut worst) => {
            for other in rest {
                worst
                    .message
                    .push_str(&format!("; also {}: {}", other.code, other.message));
                worst.evidence.extend(other.evidence);
                if worst.fix.is_none() {
                    worst.fix = other.fix;
                }
            }
            worst
        }
        None => {
            if !bar_known && g.aperture.is_none() {
                facts.push("no BAR information".into());
            }
            let asked = |ready: bool| {
                if ready {
                    ""
                } else {
                    " (its driver libraries could not be used: see above)"
                }
            };
            let verified = match (runtime, g.vendor) {
                (Runtime::Probed(p), GpuVendor::Nvidia) => asked(
                    p.nvml.as_ref().is_some_and(|l| l.ready().is_some())
                        && p.cuda.as_ref().is_some_and(|l| l.ready().is_some()),
                ),
                (Runtime::Probed(p), _) => {
                    asked(p.hip.as_ref().is_some_and(|l| l.ready().is_some()))
                }
                (Runtime::Recorded(_), GpuVendor::Nvidia) => {
                    " (NVML as the capture recorded it; CUDA not asked: see gpu-probe-skipped)"
                }
                (Runtime::Recorded(_), _) => {
                    " (the driver libraries were not asked: see gpu-probe-skipped)"
                }
                (Runtime::Failed { .. }, _) => " (the GPU probe failed: see above)",
                (Runtime::Skipped { .. }, _) => {
                    " (the driver libraries were not asked: see gpu-probe-skipped)"
                }
            };
            Finding::pass(
                READY,
                g.subject(),
                format!("{}{verified}", facts.join("; ")),
            )
            .with(evidence)
        }
    }
}
