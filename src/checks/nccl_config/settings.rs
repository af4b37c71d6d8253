//! The settings that change GPUDirect RDMA, one by one: where NCCL's reading of a value turns
//! RDMA or GDR off, or names devices the node lacks.

use super::{
    CONF_LINE_IGNORED, DMABUF_DISABLED, GDR_C2C_OFF, GDR_LEVEL_IGNORED, GDR_LEVEL_OFF,
    GDR_READ_OFF, HCA_UNMATCHED, IB_DISABLED, NET_NOT_IB, has_peermem, undo,
};
use crate::inventory::Inventory;
use crate::inventory::nccl::Setting;
use crate::model::{Finding, Fix};
use crate::nccl::params::{self, GdrLimit, HcaList, LevelValue};

/// One setting against the node: findings only where NCCL's reading of it works against GDR.
pub(super) fn judge(s: &Setting, inv: &Inventory) -> Vec<Finding> {
    let subject = format!("{}={}", s.name, s.value);
    let ev = [s.evidence()];
    let (n, whole) = params::nccl_int(&s.value);
    let mut out = Vec::new();
    match s.name.as_str() {
        "NCCL_IB_DISABLE" if n != 0 && !inv.rdma.is_empty() => out.push(
            Finding::fail(
                IB_DISABLED,
                subject,
                format!(
                    "NCCL reads {n} from {}: it does not use the node's {} RDMA device{}, falls back to sockets and never uses GPUDirect RDMA",
                    s.origin.describe(),
                    inv.rdma.len(),
                    if inv.rdma.len() == 1 { "" } else { "s" }
                ),
            )
            .with(ev)
            .fix(undo(s, format!("Remove {} so NCCL uses InfiniBand/RoCE", s.name), "Jobs that relied on sockets (a node without a working fabric) would try the RDMA devices instead.", None)),
        ),
        "NCCL_IB_DISABLE" if !whole && !s.value.is_empty() => out.push(
            Finding::warn(
                CONF_LINE_IGNORED,
                subject,
                format!("NCCL reads {:?} as the number {n} (strtoll): InfiniBand stays {}", s.value, if n == 0 { "on" } else { "off" }),
            )
            .with(ev)
            .fix(undo(s, format!("Write {} as a number (0 or 1)", s.name), "None: it states what NCCL already does.", Some(&n.to_string()))),
        ),
        "NCCL_NET" if s.value.eq_ignore_ascii_case("Socket") && !inv.rdma.is_empty() => out.push(
            Finding::fail(
                NET_NOT_IB,
                subject,
                format!("NCCL must use its socket network ({}): no GPUDirect RDMA over the node's RDMA devices", s.origin.describe()),
            )
            .with(ev)
            .fix(undo(s, "Remove NCCL_NET (NCCL then picks IB when the devices work)".into(), "Jobs get the RDMA network instead of sockets.", None)),
        ),
        "NCCL_NET" if !s.value.eq_ignore_ascii_case("IB") && !s.value.eq_ignore_ascii_case("Socket") => out.push(
            Finding::warn(
                NET_NOT_IB,
                subject,
                format!("NCCL must use the network plugin named {:?}: whether it uses GPUDirect RDMA is the plugin's matter, which gdrdoctor cannot see; if no loaded plugin has that name, NCCL fails to start", s.value),
            )
            .with(ev)
            .fix(Fix::new("Check that the plugin (NCCL_NET_PLUGIN) is installed and reports GPUDirect RDMA: `gdrdoctor nccl explain` on a job's NCCL_DEBUG=INFO log", "None: a check only.").manual("NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET ... | gdrdoctor nccl explain -")),
        ),
        "NCCL_NET_GDR_LEVEL" => match params::gdr_level(&s.value) {
            LevelValue::Ignored => out.push(
                Finding::warn(
                    GDR_LEVEL_IGNORED,
                    subject,
                    format!("NCCL compares {:?} with its path type names exactly (upper case: LOC, PIX, PXB, PHB, SYS) and otherwise reads a number only if it starts with a digit: it ignores this value and keeps its default (PXB)", s.value),
                )
                .with(ev)
                .fix(undo(s, format!("Write the level NCCL reads: {}", s.value.to_ascii_uppercase()), "Changes where jobs use GPUDirect RDMA, as was intended.", Some(&s.value.to_ascii_uppercase()))),
            ),
            LevelValue::Named(GdrLimit::Never) | LevelValue::Numbered(GdrLimit::Never) => out.push(
                Finding::fail(
                    GDR_LEVEL_OFF,
                    subject,
                    format!("NCCL_NET_GDR_LEVEL={} is nearer than any NIC can be (PIX is the nearest): NCCL never uses GPUDirect RDMA", s.value),
                )
                .with(ev)
                .fix(undo(s, "Remove it (NCCL's default is PXB), or set the level the GPU-NIC pairs need (gdrdoctor topo)".into(), "Changes where jobs use GPUDirect RDMA.", None)),
            ),
            _ => {}
        },
        "NCCL_NET_GDR_READ" if whole && n == 0 => out.push(
            Finding::warn(
                GDR_READ_OFF,
                subject,
                "NCCL's sends stage GPU memory through host memory (GPUDirect RDMA only for receives)",
            )
            .with(ev)
            .fix(undo(s, "Remove it: NCCL enables GDR reads itself on Ampere and later".into(), "Sends read GPU memory over PCIe: measure with the GDR write test.", None)),
        ),
        "NCCL_DMABUF_ENABLE" if n == 0 && !has_peermem(inv) => out.push(
            Finding::fail(
                DMABUF_DISABLED,
                subject,
                "NCCL does not register GPU memory through DMA-BUF, and this node has no peer-memory module (nvidia_peermem) either: no GPUDirect RDMA path is left (see peer-memory)",
            )
            .with(ev)
            .with([inv.kernel.module_evidence("nvidia_peermem")])
            .fix(undo(s, "Remove NCCL_DMABUF_ENABLE=0 (or load nvidia_peermem)".into(), "Jobs register GPU memory through DMA-BUF, the kernel's own path.", None)),
        ),
        "NCCL_IB_HCA" => out.extend(hca(s, inv)),
        "NCCL_NET_GDR_C2C" => out.extend(gdr_c2c(s, inv)),
        _ => {}
    }
    out
}

/// `NCCL_NET_GDR_C2C` where GPUs reach their NICs over NVLink-C2C: 0 (or a value NCCL reads
/// as 0) turns GPUDirect RDMA off for them from 2.26 on, where 2.27 and later would use it by
/// default. Releases before 2.26 do not read it.
fn gdr_c2c(s: &Setting, inv: &Inventory) -> Option<Finding> {
    use crate::nccl::c2c::{self, Era};
    let judged = crate::nccl::effective::judge_under(
        inv,
        crate::nccl::effective::Policy {
            limit: GdrLimit::Upto(crate::model::Level::Pxb),
            source: crate::nccl::effective::PolicySource::Config,
        },
    );
    let gpus: Vec<String> = judged
        .gpus
        .iter()
        .filter(|g| g.c2c.is_some())
        .map(|g| g.gpu.to_string())
        .collect();
    let (n, whole) = params::nccl_int(&s.value);
    if gpus.is_empty() || !whole || n != 0 {
        return None;
    }
    let release = judged.release;
    if release.is_some_and(|v| Era::of(v) == Era::Before26) {
        return None;
    }
    let input = c2c::Input {
        value: Some(s.value.clone()),
        level: None,
    };
    let eras: Vec<String> = [Era::V26, Era::V27, Era::V29]
        .iter()
        .filter(|e| release.is_none_or(|v| Era::of(v) == **e))
        .map(|e| c2c::decide(*e, &input).describe(&input))
        .collect();
    let which = match release {
        Some(v) => format!(
            "NCCL {v} ({})",
            inv.nccl
                .release
                .as_ref()
                .map(|r| r.path.as_str())
                .unwrap_or("the release stated")
        ),
        None => "NCCL 2.26 and later (the node's release is not known)".to_owned(),
    };
    Some(
        Finding::fail(
            GDR_C2C_OFF,
            format!("{}={}", s.name, s.value),
            format!(
                "{}={} from {}: {which} turns GPUDirect RDMA over NVLink-C2C off, so the GPUs {} reach their NICs through host memory ({})",
                s.name,
                s.value,
                s.origin.describe(),
                gpus.join(", "),
                eras.join("; ")
            ),
        )
        .with([s.evidence()])
        .with(inv.nccl.release.as_ref().map(|r| crate::model::Evidence {
            path: r.path.clone(),
            value: format!("NCCL {} {}", r.version, r.value),
        }))
        .fix(undo(
            s,
            "Set NCCL_NET_GDR_C2C=1: NCCL then uses GPUDirect RDMA over C2C to the NICs of each GPU's own CPU (the default from 2.27)".into(),
            "Jobs use GPUDirect RDMA over C2C; measure with a job's NCCL_DEBUG=INFO log (gdrdoctor nccl explain).",
            Some("1"),
        )),
    )
}

fn hca(s: &Setting, inv: &Inventory) -> Option<Finding> {
    let list = HcaList::parse(&s.value);
    if inv.rdma.is_empty() {
        // The setting expects devices the node does not have: the missing driver or NIC is
        // rdma-link's finding; this one says the job's configuration counted on them.
        let named: Vec<&str> = list.entries.iter().map(|e| e.name.as_str()).collect();
        return (!list.exclude && !named.is_empty()).then(|| {
            Finding::warn(
                HCA_UNMATCHED,
                format!("{}={}", s.name, s.value),
                format!(
                    "names {} but the node has no RDMA device: NCCL falls back to sockets (see rdma-link for why the devices are missing)",
                    named.join(", ")
                ),
            )
            .with([s.evidence()])
            .evidence(crate::inventory::rdma::CLASS_INFINIBAND, "(no devices)")
            .fix(
                Fix::new(
                    "Bring up the RDMA devices this setting names (rdma-link's fix), or drop the setting on nodes without them",
                    "Changes which NICs jobs use.",
                )
                .manual("ls /sys/class/infiniband"),
            )
        });
    }
    let names: Vec<&str> = inv.rdma.iter().map(|d| d.name.as_str()).collect();
    let unmatched = list.unmatched(&names);
    let selected = crate::nccl::effective::nics(inv);
    let node = format!("this node has {}", names.join(", "));
    if selected.is_empty() {
        return Some(
            Finding::fail(
                HCA_UNMATCHED,
                format!("{}={}", s.name, s.value),
                format!("selects none of the node's RDMA devices ({node}): NCCL finds no InfiniBand device, falls back to sockets and never uses GPUDirect RDMA"),
            )
            .with([s.evidence()])
            .evidence(crate::inventory::rdma::CLASS_INFINIBAND, names.join(" "))
            .fix(undo(s, format!("Name this node's devices, exactly: NCCL_IB_HCA=={}", names.join(",")), "Changes which NICs jobs use.", None)),
        );
    }
    if !unmatched.is_empty() && !list.exclude {
        let missing: Vec<String> = unmatched
            .iter()
            .map(|e| match e.port {
                Some(p) => format!("{}:{p}", e.name),
                None => e.name.clone(),
            })
            .collect();
        return Some(
            Finding::warn(
                HCA_UNMATCHED,
                format!("{}={}", s.name, s.value),
                format!(
                    "names {} that the node lacks ({node}); NCCL uses {} of them",
                    missing.join(", "),
                    selected
                        .iter()
                        .map(|&i| inv.rdma[i].name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .with([s.evidence()])
            .evidence(crate::inventory::rdma::CLASS_INFINIBAND, names.join(" "))
            .fix(Fix::new("Drop the names this node does not have, or check that no device is missing (rdma-link)", "Changes which NICs jobs use.").manual("ls /sys/class/infiniband")),
        );
    }
    None
}
