//! Data Direct on a DMA-based system (issue 38): each ConnectX-8 Data Direct DMA function
//! (15b3:2100) as its NIC's second PCIe path, beside the GPU it serves, and whether NCCL will
//! use it.
//!
//! NCCL 2.27.3 added it to its IB transport ("Add support for DirectNIC (CX8)"): for each mlx5
//! device it calls `mlx5dv_get_data_direct_sysfs_path` (libmlx5, symbol version MLX5_1.25, which
//! rdma-core 54 brought: debian/ibverbs-providers.symbols), loaded by `dlopen("libmlx5.so")`
//! then `"libmlx5.so.1"` (src/misc/mlx5dvsymbols.cc), and with `NCCL_IB_DATA_DIRECT` (default 1)
//! exposes the NIC through the DMA function's PCIe path (`mlx5_0_dma`), registering memory with
//! DMA-BUF (src/transport/net_ib.cc). With it 0, or without the symbol, NCCL reaches the NIC
//! through its own function, which on a Grace system means over NVLink-C2C to the CPU: still
//! GPUDirect RDMA from 2.27 (NCCL's P2C), but not the direct path the platform is built for.

use super::grace::nic_name;
use crate::inventory::Inventory;
use crate::inventory::grace::{
    Complex, DATA_DIRECT_SYMBOL, DmaComplex, Grace, LIBMLX5_NAMES, Pairing,
};
use crate::model::{Code, Evidence, Finding, Fix};
use crate::parse::nccl_log::Version;

pub(super) const FOUND: Code = Code {
    id: "data-direct-found",
    summary: "a ConnectX-8 Data Direct DMA function, paired with its NIC and the GPU it serves",
};

pub(super) const OFF: Code = Code {
    id: "data-direct-off",
    summary: "NCCL will not use Data Direct (NCCL_IB_DATA_DIRECT=0, or a release before 2.27.3): it reaches the NICs over NVLink-C2C instead",
};

pub(super) const NO_LIBMLX5: Code = Code {
    id: "data-direct-no-libmlx5",
    summary: "libmlx5 (rdma-core 54 or later) with mlx5dv_get_data_direct_sysfs_path is not on the loader's path: NCCL cannot use Data Direct",
};

/// The release that brought Data Direct to NCCL's IB transport.
const NCCL_DATA_DIRECT: Version = Version::new(2, 27, 3);

/// `failed`: the addresses (ports and DMA functions) the ACS judgement failed, whose
/// complexes do not yet route the DMA function's traffic as NVIDIA requires.
pub(super) fn run(inv: &Inventory, g: &Grace, failed: &[crate::parse::pci::Bdf]) -> Vec<Finding> {
    let complexes: Vec<&DmaComplex> = g
        .complexes
        .iter()
        .filter_map(|c| match c {
            Complex::Dma(d) => Some(d),
            _ => None,
        })
        .collect();
    let Some(lib) = g.libmlx5.as_ref().filter(|_| !complexes.is_empty()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // NCCL's side, for the node.
    let setting = inv.nccl.get("NCCL_IB_DATA_DIRECT");
    let release = inv.nccl.release.as_ref();
    let off = if let Some(s) =
        setting.filter(|s| crate::parse::nccl_conf::nccl_int(&s.value).0 == 0)
    {
        Some(
            Finding::warn(
                OFF,
                format!("{}={}", s.name, s.value),
                format!(
                    "{}={} from {} (NCCL reads it as 0): NCCL does not reach the NICs through their Data Direct DMA functions, but through the NICs' own functions over NVLink-C2C (still GPUDirect RDMA from 2.27, not the direct PCIe path of the DMA-based complexes)",
                    s.name,
                    s.value,
                    s.origin.describe()
                ),
            )
            .with([s.evidence()])
            .fix(crate::checks::nccl_config::undo(
                s,
                "Remove NCCL_IB_DATA_DIRECT=0: NCCL 2.27.3 and later then use each ConnectX-8's Data Direct DMA function (the default, 1)".into(),
                "Jobs move their NIC traffic to the Data Direct path; measure with a job's NCCL_DEBUG=INFO log (\"Data Direct DMA Interface is detected\").",
                None,
            )),
        )
    } else {
        release.filter(|r| r.version < NCCL_DATA_DIRECT).map(|r| {
            Finding::warn(
                OFF,
                format!("NCCL {}", r.version),
                format!(
                    "NCCL {} predates Data Direct ({NCCL_DATA_DIRECT} added it to the IB transport): NCCL reaches the NICs through their own functions over NVLink-C2C, not through the Data Direct DMA functions",
                    r.version
                ),
            )
            .evidence(r.path.clone(), format!("NCCL {} {}", r.version, r.value))
            .fix(
                Fix::new(
                    format!("Install NCCL {NCCL_DATA_DIRECT} or later (libnccl2), or run jobs with a container that carries it"),
                    "A new NCCL changes every job's collectives on the node; test a job before rolling it out.",
                )
                .manual(format!("# apt install libnccl2 (>= {NCCL_DATA_DIRECT}) from NVIDIA's CUDA repository, or use a container with NCCL {NCCL_DATA_DIRECT}+")),
            )
        })
    };
    let lib_evidence = match &lib.found {
        Some((path, real, via)) => Evidence {
            path: path.clone(),
            value: match lib.data_direct {
                Some(true) => format!(
                    "exports {DATA_DIRECT_SYMBOL} (MLX5_1.25) -> {real} (found through {via})"
                ),
                Some(false) => {
                    format!("no {DATA_DIRECT_SYMBOL} in it -> {real} (found through {via})")
                }
                None => format!("<unreadable> -> {real} (found through {via})"),
            },
        },
        None => Evidence {
            path: LIBMLX5_NAMES.join(", "),
            value: "<on none of the loader's directories>".into(),
        },
    };
    let no_lib = match (&lib.found, lib.data_direct) {
        (Some(_), Some(true)) => None,
        (found, _) => {
            let what = match (found, lib.data_direct) {
                (None, _) => "no libmlx5 on the loader's path".to_owned(),
                (Some((p, _, _)), Some(false)) => format!(
                    "{p} lacks {DATA_DIRECT_SYMBOL} (symbol version MLX5_1.25, rdma-core 54)"
                ),
                (Some((p, _, _)), _) => format!("{p} could not be read"),
            };
            Some(
                Finding::warn(
                    NO_LIBMLX5,
                    "libmlx5",
                    format!("{what}: NCCL looks the call up to find each NIC's Data Direct function, so without it NCCL reaches the NICs over NVLink-C2C instead"),
                )
                .with([lib_evidence.clone()])
                .fix(
                    Fix::new(
                        "Install rdma-core 54 or later (Ubuntu: ibverbs-providers; or DOCA-OFED), whose libmlx5 exports mlx5dv_get_data_direct_sysfs_path",
                        "Replaces the RDMA user-space libraries every RDMA application on the node loads; restart the jobs after.",
                    )
                    .manual("# apt install ibverbs-providers (rdma-core >= 54), or install DOCA-OFED; then: ldconfig -p | grep libmlx5"),
                ),
            )
        }
    };
    let unused = off.is_some() || no_lib.is_some();
    for d in complexes {
        let ready = [d.root_port, d.toward_dma, d.toward_gpu, d.dma]
            .iter()
            .all(|b| !failed.contains(b));
        out.push(found(
            inv,
            g,
            d,
            (unused, ready),
            &lib_evidence,
            setting,
            release,
        ));
    }
    out.extend(off);
    out.extend(no_lib);
    out
}

/// One DMA function: its NIC, its GPU, and whether NCCL will use it.
fn found(
    inv: &Inventory,
    g: &Grace,
    d: &DmaComplex,
    (unused, ready): (bool, bool),
    lib: &Evidence,
    setting: Option<&crate::inventory::nccl_setting::Setting>,
    release: Option<&crate::inventory::nccl_release::Installed>,
) -> Finding {
    let dma = inv.function(d.dma);
    let mut evidence = vec![Evidence {
        path: dma.map_or_else(|| d.dma.to_string(), |f| f.path.clone()),
        value: format!(
            "{} ConnectX-8 Data Direct DMA function{}",
            dma.map(|f| f.ids()).unwrap_or_default(),
            dma.and_then(|f| f.driver.as_deref())
                .map(|n| format!(", driver {n}"))
                .unwrap_or_default()
        ),
    }];
    evidence.extend(g.vpd.get(&d.dma).map(|v| v.evidence()));
    let names = |b: &[crate::parse::pci::Bdf]| {
        b.iter()
            .map(|b| nic_name(inv, *b))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let nic = match &d.nic {
        Pairing::Vpd { pfs, .. } => {
            evidence.extend(
                pfs.iter()
                    .filter_map(|b| g.vpd.get(b))
                    .map(|v| v.evidence()),
            );
            format!(
                "the Data Direct interface of {}, paired by the VPD keyword V3 they share (as rdma_topo pairs them)",
                names(pfs)
            )
        }
        Pairing::Numa {
            node,
            candidates,
            why,
        } => format!(
            "the Data Direct interface of one of the ConnectX NICs on NUMA node {} ({}): which one is not known, {why} (rdma_topo pairs them by the VPD keyword V3)",
            node.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            if candidates.is_empty() {
                "none found".to_owned()
            } else {
                names(candidates)
            }
        ),
        Pairing::Unmatched { v3 } => format!(
            "a Data Direct interface whose VPD V3 {v3} no ConnectX NIC function shares (rdma_topo: \"V3 UUID matching failed\"): its NIC's own function is missing or unbound"
        ),
    };
    let nccl = if unused {
        "NCCL will not use it (see the warnings below)".to_owned()
    } else {
        let how = match setting {
            Some(s) => format!("{}={}", s.name, s.value),
            None => "NCCL_IB_DATA_DIRECT unset (1 by default)".to_owned(),
        };
        let which = release.map_or_else(
            || format!("NCCL {NCCL_DATA_DIRECT} and later (the node's release is not known)"),
            |r| format!("NCCL {}", r.version),
        );
        let acs = if ready {
            ""
        } else {
            "; but its complex's ACS or IOMMU group is not yet as rdma_topo requires (see the failures above), so its traffic still crosses the root port"
        };
        format!(
            "{which} reaches the NIC through it, with DMA-BUF registrations: {how}, libmlx5 exports {DATA_DIRECT_SYMBOL}{acs}"
        )
    };
    evidence.push(lib.clone());
    let message = format!(
        "{nic}, serving GPU {} below the same Grace root port {}: {nccl}",
        d.gpu, d.root_port
    );
    let subject = format!("DMA function {}", d.dma);
    // A V3 no NIC function shares is where rdma_topo stops ("Unexpected topology structure").
    if matches!(d.nic, Pairing::Unmatched { .. }) {
        return Finding::unknown(super::grace::UNRECOGNISED, subject, message).with(evidence);
    }
    Finding::pass(FOUND, subject, message).with(evidence)
}
