//! The fix for a GPU too far from its NICs inside a VM: the provider's topology file.

use crate::inventory::Inventory;
use crate::model::Fix;

/// The fix for a VM: the provider's topology file (named in /etc/nccl.conf, or set by the
/// network plugin), else the provider's file or a passthrough layout that mirrors the host.
pub(super) fn vm_fix(inv: &Inventory, vm: &crate::inventory::vm::Virtual) -> Fix {
    use crate::inventory::vm::Naming;
    let missing = inv
        .nccl
        .topology
        .as_ref()
        .filter(|t| matches!(t.state, crate::inventory::nccl::TopoState::Missing))
        .map(|t| t.path.clone());
    let safety = "Changes what every NCCL job on the node reads; a file for another VM size pairs the wrong GPUs and NICs: use the provider's file for this size.";
    match &vm.provider {
        Some(p) if p.naming == Naming::Plugin => plugin_file_fix(inv, p, safety),
        Some(p) => {
            let (summary, fetch) = if p.present {
                (
                    format!(
                        "Point NCCL at {}'s topology file, which is on this node ({}, from {}): add NCCL_TOPO_FILE={} to /etc/nccl.conf",
                        p.size, p.path, p.source, p.path
                    ),
                    None,
                )
            } else {
                (
                    format!(
                        "Install {}'s topology file ({}) as {} (the provider's HPC image does) and name it in /etc/nccl.conf: NCCL_TOPO_FILE={}{}",
                        p.size,
                        p.source,
                        p.path,
                        p.path,
                        missing
                            .as_ref()
                            .map(|m| format!(" (NCCL_TOPO_FILE names {m}, which is not there)"))
                            .unwrap_or_default()
                    ),
                    Some(format!(
                        "# install {} as {} (Azure/azhpc-images, directory topology/)",
                        p.source.rsplit('/').next().unwrap_or(&p.source),
                        p.path
                    )),
                )
            };
            let mut fix = Fix::new(summary, safety);
            if let Some(f) = fetch {
                fix = fix.manual(f);
            }
            let fix = fix.nccl_conf("NCCL_TOPO_FILE", &p.path);
            let fix = if p.present { fix } else { fix.requires(&p.path) };
            fix.manual("gdrdoctor check --select pcie-placement,nccl-config   # then: NCCL's tree from the file")
        }
        None => Fix::new(
            format!(
                "Get your provider's NCCL topology file for this VM size (or dump one with NCCL_TOPO_DUMP_FILE on a node of this size where GPUDirect RDMA works) and name it in /etc/nccl.conf with NCCL_TOPO_FILE{}; on a hypervisor of your own, pass each GPU and its NIC through behind one emulated switch, as the host pairs them",
                missing
                    .as_ref()
                    .map(|m| format!(" (it names {m} now, which is not there)"))
                    .unwrap_or_default()
            ),
            safety,
        )
        .manual("# NCCL_TOPO_FILE=/path/to/provider-topo.xml   in /etc/nccl.conf")
        .manual("# QEMU: -device pcie-root-port,id=rp0 -device x3130-upstream,bus=rp0,id=up0 -device xio3130-downstream,bus=up0,id=dn0 -device xio3130-downstream,bus=up0,id=dn1, then the GPU on dn0 and its NIC on dn1 (QEMU docs/pcie.txt)"),
    }
}

/// The fix where the network plugin names the provider's file itself (aws-ofi-nccl): the file
/// missing, the plugin not loaded, or NCCL_TOPO_FILE set elsewhere.
fn plugin_file_fix(inv: &Inventory, p: &crate::inventory::vm::ProviderFile, safety: &str) -> Fix {
    let setting = inv.nccl.get("NCCL_TOPO_FILE");
    let loaded = inv.nccl.plugin.aws_ofi().is_some();
    let summary = match (p.present, loaded, setting) {
        (false, _, _) => format!(
            "Install aws-ofi-nccl with its topology files (the EFA installer does): {} ({}) is not on this node, and aws-ofi-nccl sets NCCL_TOPO_FILE to it itself on {}",
            p.path, p.source, p.size
        ),
        (true, false, _) => format!(
            "Make NCCL load aws-ofi-nccl (see nccl-config): it sets NCCL_TOPO_FILE to {} ({}) itself on {}, and that file is on this node",
            p.path, p.source, p.size
        ),
        (true, true, Some(s)) => format!(
            "Remove NCCL_TOPO_FILE={} ({}): aws-ofi-nccl sets NCCL_TOPO_FILE to {} itself only when it is unset",
            s.value,
            s.origin.describe(),
            p.path
        ),
        (true, true, None) => format!(
            "aws-ofi-nccl sets NCCL_TOPO_FILE to {} ({}) itself: see nccl-config for why NCCL does not read it",
            p.path, p.source
        ),
    };
    Fix::new(summary, safety)
        .manual(format!(
            "ls -l {}   # aws-ofi-nccl's file for this instance type",
            crate::checks::sh(&p.path)
        ))
        .manual("gdrdoctor check --select pcie-placement,nccl-config   # then: NCCL's tree from the file")
}
