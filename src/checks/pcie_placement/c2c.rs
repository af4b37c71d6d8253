//! A GPU that reaches its nearest NICs over NVLink-C2C (Grace): judged by NCCL's C2C rule for
//! the node's release (issue 38).

use super::{GPU_NIC_C2C, GPU_NIC_C2C_NO_GDR, GPU_NIC_C2C_RELEASE_UNKNOWN, evidence, nic_list};
use crate::inventory::Inventory;
use crate::model::{Evidence, Finding, Fix};
use crate::nccl::effective::{self, Basis, Nearest};

/// A GPU that reaches its nearest NICs over NVLink-C2C: NCCL's C2C rule for the node's release
/// and settings (`nccl::c2c`), the sysfs level beside it. A fix names what that release needs:
/// NCCL_NET_GDR_C2C=1 on 2.26, the setting that turned it off from 2.27, a newer NCCL before
/// 2.26; never a PCIe switch, which a superchip does not have.
pub(super) fn judge_c2c(
    inv: &Inventory,
    subject: &str,
    n: &Nearest,
    decision: &Result<crate::nccl::c2c::Decision, Vec<crate::nccl::c2c::Decision>>,
    j: &effective::Judgement,
    basis: Basis,
) -> Finding {
    use crate::nccl::c2c::Era;
    let nics = nic_list(inv, n);
    let plural = if n.nics.len() > 1 { "s" } else { "" };
    let sysfs = n
        .sysfs_levels()
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join("/");
    let release = match &inv.nccl.release {
        Some(r) => format!("NCCL {} ({} {})", r.version, r.path, r.value),
        None => "the node's NCCL release is not known (no libnccl.so.2 on the loader's path, no libnccl2 in dpkg's lists, no nccl.h; config nccl.version states it)".to_owned(),
    };
    let input = &j.c2c_input;
    let route = format!(
        "nearest NIC{plural} {nics} over NVLink-C2C to the GPU's CPU (NCCL's P2C; {sysfs} in sysfs)"
    );
    let mut ev = evidence(inv, n, basis);
    if let Some(c) = inv
        .gpus
        .iter()
        .find(|g| g.bdf == n.gpu)
        .and_then(|g| g.c2c.as_ref())
    {
        ev.insert(0, c.evidence.clone());
    }
    if let Some(r) = &inv.nccl.release {
        ev.push(Evidence {
            path: r.path.clone(),
            value: format!("NCCL {} {}", r.version, r.value),
        });
    }
    for name in ["NCCL_NET_GDR_C2C", "NCCL_NET_GDR_LEVEL"] {
        if let Some(s) = inv.nccl.get(name) {
            ev.push(s.evidence());
        }
    }
    let d = match decision {
        Ok(d) => d,
        Err(all) => {
            let each: Vec<String> = all.iter().map(|d| d.describe(input)).collect();
            return Finding::unknown(
                GPU_NIC_C2C_RELEASE_UNKNOWN,
                subject.to_owned(),
                format!(
                    "{route}: whether NCCL uses GPUDirect RDMA there depends on its release, and {release}: {}",
                    each.join("; ")
                ),
            )
            .with(ev)
            .fix(
                Fix::new(
                    "State the NCCL release the node's jobs run (config nccl.version), or install NCCL on the node (libnccl2) so that gdrdoctor reads it",
                    "Read-only: it only tells gdrdoctor which release decides.",
                )
                .manual("# /etc/gdrdoctor/config.yaml: nccl: {version: \"2.27.3\"}"),
            );
        }
    };
    if d.gdr {
        return Finding::pass(
            GPU_NIC_C2C,
            subject.to_owned(),
            format!("{route}: {}; {release}", d.describe(input)),
        )
        .with(ev);
    }
    let (summary, cmds): (String, Vec<String>) = match d.era {
        Era::Before26 => (
            "Run NCCL 2.27 or later, which uses GPUDirect RDMA over C2C by default (2.26 with NCCL_NET_GDR_C2C=1); or accept GDR through PCIe with NCCL_NET_GDR_LEVEL=PHB".to_owned(),
            vec!["# per job: a container or wheel with NCCL >= 2.27, or export NCCL_NET_GDR_LEVEL=PHB".to_owned()],
        ),
        Era::V26 => (
            "Set NCCL_NET_GDR_C2C=1 (NCCL 2.26 leaves it off by default): NCCL then uses GPUDirect RDMA over C2C".to_owned(),
            vec!["# per job: export NCCL_NET_GDR_C2C=1".to_owned()],
        ),
        Era::V27 | Era::V29 => (
            "Remove NCCL_NET_GDR_C2C=0 (see nccl-config): NCCL uses GPUDirect RDMA over C2C by default from 2.27".to_owned(),
            vec!["gdrdoctor check --select nccl-config   # where the setting comes from".to_owned()],
        ),
    };
    let mut fix = Fix::new(
        summary,
        "Changes how every NCCL job on the node moves GPU memory to the NICs; GDR over C2C is NVIDIA's default for Grace systems from NCCL 2.27.",
    );
    if d.era == Era::V26 && inv.nccl.get("NCCL_NET_GDR_C2C").is_none() {
        fix = fix.nccl_conf("NCCL_NET_GDR_C2C", 1);
    }
    for c in cmds {
        fix = fix.manual(c);
    }
    Finding::fail(
        GPU_NIC_C2C_NO_GDR,
        subject.to_owned(),
        format!(
            "{route}: {}; {release}: NCCL silently runs this GPU without GPUDirect RDMA, staging through host memory",
            d.describe(input)
        ),
    )
    .with(ev)
    .fix(fix)
}
