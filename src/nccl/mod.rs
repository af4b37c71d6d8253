//! NCCL, as gdrdoctor models it, and the three `gdrdoctor nccl` commands.
//!
//! NCCL's decision model, the one judge every view asks ("how far is this NIC, and does NCCL
//! use GPUDirect RDMA at that distance"): [`params`] (what NCCL makes of its parameters'
//! values; [`transport`] for the settings of its InfiniBand/RoCE transport and sockets),
//! [`levels`] (how each release numbers path types), [`tree`] (the PCI tree NCCL
//! builds from a topology file) and [`effective`] (the settings in force, the NICs used, each
//! GPU's nearest NICs: `effective::judge`, which the checks, the pictures, the fleet view and
//! `nccl verify` all call). The sysfs distance it starts from is `crate::placement`'s, which
//! stays below: the GDR test's plan and the topology views use it without NCCL's policy.
//!
//! `gdrdoctor nccl`: the NCCL settings that follow from what the checks found, instead of the
//! ones users guess (nccl#718, nccl#1131). Each setting comes with the evidence it came from,
//! and a setting the node does not need is left out, with the reason ([`settings`]).
//!
//! `gdrdoctor nccl explain` goes the other way: it reads what NCCL decided from its own log
//! (`parse::nccl_log` parses a line, [`explain`] gathers and diagnoses).
//!
//! `gdrdoctor nccl verify` asks NCCL itself: [`verify`] runs it on the node's GPUs in a child,
//! [`compare`] holds what it said against the findings of gdrdoctor's own checks, one fact at
//! a time.
//!
//! The parsers of NCCL's files are in `parse/` (`nccl_conf`, `nccl_log`, `nccl_topo`,
//! `nccl_dump`); what the commands print is in `report::nccl`.

pub mod c2c;
pub mod compare;
pub mod effective;
pub mod explain;
pub mod gid;
pub mod levels;
pub mod params;
pub mod transport;
pub mod tree;

use crate::inventory::Inventory;
use crate::parse::nccl_topo::Library;
use crate::placement::Level;

/// One setting, or a note on why it is not set.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub name: &'static str,
    /// `None`: deliberately not set.
    pub value: Option<String>,
    /// Why, with the evidence: comment lines.
    pub why: Vec<String>,
}

/// The NCCL release on the node, as far as gdrdoctor knows it: what `ncclGetVersion` of the
/// library NCCL's own run would load answers (`gdrdoctor nccl` on the live node), what the
/// operator states (`--nccl-version`), or why it is not known (a captured root holds no
/// library to ask). On a node of AMD GPUs the library is RCCL, whose `ncclGetVersion` is the
/// NCCL release it is built on (RCCL 2.22.3: 22203).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Release {
    Known {
        /// `2.28.9`.
        version: String,
        /// Where it was learnt: `ncclGetVersion of /usr/lib/.../libnccl.so.2.28.9`.
        from: String,
        library: Library,
    },
    Unknown {
        why: String,
        library: Library,
    },
}

impl Release {
    /// The release as a version, when known.
    pub fn version(&self) -> Option<crate::parse::nccl_log::Version> {
        match self {
            Release::Known { version, .. } => crate::parse::nccl_log::Version::parse(version),
            Release::Unknown { .. } => None,
        }
    }

    /// (major, minor) of a known release.
    pub fn major_minor(&self) -> Option<(u32, u32)> {
        let Release::Known { version, .. } = self else {
            return None;
        };
        let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
        Some((parts.next()??, parts.next()??))
    }

    /// `NCCL 2.28.9 (ncclGetVersion of ...)`, `RCCL 2.22.3 (...)`, or why the version is not
    /// known.
    pub fn describe(&self) -> String {
        match self {
            Release::Known {
                version,
                from,
                library,
            } => format!("{} {version} ({from})", library.name()),
            Release::Unknown { why, library } => {
                format!("{}'s version is not known: {why}", library.name())
            }
        }
    }
}

/// The settings this node needs, each with why, then what NCCL already reads for each.
pub fn settings(inv: &Inventory, gdr_level: Level, release: &Release) -> Vec<Setting> {
    // The levels NCCL will use: on its tree when a topology file is in effect (issue 16),
    // judged against the level NCCL runs with by default (the site's `thresholds.gdr_level`):
    // NCCL_NET_GDR_LEVEL is proposed only where that is not enough.
    let judged = effective::judge_release(
        inv,
        effective::Policy {
            limit: params::GdrLimit::Upto(gdr_level),
            source: effective::PolicySource::Config,
        },
        release.version(),
    );
    let nearest: Vec<Near> = judged
        .gpus
        .iter()
        .map(|g| (g.gpu, g.nearest.as_ref()))
        .collect();
    let (hca, ports) = ib_hca(inv, &nearest);
    let mut out = vec![
        hca,
        ib_gid_index(inv, &ports, release),
        net_gdr_level(inv, &judged, &nearest, gdr_level),
    ];
    out.extend(net_gdr_c2c(&judged, release));
    out.push(socket_ifname(inv));
    if inv.nccl.library == Library::Rccl {
        out.push(rccl_dmabuf(inv));
    }
    agree_with_conf(inv, &mut out);
    out
}

/// The AMD kernel options the DMA-BUF path needs (perftest's ROCm path and the peer-memory
/// check test the same two).
const AMD_DMABUF_OPTIONS: [&str; 2] = ["CONFIG_DMABUF_MOVE_NOTIFY", "CONFIG_PCI_P2PDMA"];

/// NCCL_DMABUF_ENABLE for RCCL, whose DMA-BUF path is opt-in (ROCm/rccl src/misc/rocmwrap.cc:
/// `Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1`; NCCL's is on by default): set to 1
/// where the DMA-BUF path is the one available, left alone where AMD's peer-memory module is
/// loaded or the kernel lacks what DMA-BUF needs.
fn rccl_dmabuf(inv: &Inventory) -> Setting {
    let name = "NCCL_DMABUF_ENABLE";
    let legacy = ["amd_peer_mem", "amdp2p"]
        .into_iter()
        .find(|m| inv.kernel.module(m).is_some_and(|m| m.live()));
    if let Some(m) = legacy {
        return Setting {
            name,
            value: None,
            why: vec![format!(
                "RCCL's peer-memory path is there ({m} is loaded): its opt-in DMA-BUF path is not needed"
            )],
        };
    }
    let Some(c) = &inv.kernel.config else {
        return Setting {
            name,
            value: None,
            why: vec![format!(
                "RCCL's DMA-BUF path is opt-in, and whether this kernel has what it needs is not known: its config is unreadable (tried {})",
                inv.kernel.config_tried.join(", ")
            )],
        };
    };
    let missing: Vec<String> = AMD_DMABUF_OPTIONS
        .iter()
        .filter(|o| !c.enabled(o))
        .map(|o| format!("{}: {}", c.path, c.shown(o)))
        .collect();
    if missing.is_empty() {
        Setting {
            name,
            value: Some("1".to_owned()),
            why: vec![
                "RCCL's DMA-BUF path is opt-in (without it RCCL prints `Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1`) and no AMD peer-memory module is loaded".to_owned(),
                format!("{}: {}; {}", c.path, c.shown(AMD_DMABUF_OPTIONS[0]), c.shown(AMD_DMABUF_OPTIONS[1])),
            ],
        }
    } else {
        Setting {
            name,
            value: None,
            why: vec![format!(
                "RCCL's DMA-BUF path needs a kernel with {}: {} (peer-memory check: amd-no-gdr-path)",
                AMD_DMABUF_OPTIONS.join(" and "),
                missing.join("; ")
            )],
        }
    }
}

/// A GPU and the NICs nearest to it, as the judge placed them.
type Near<'a> = (crate::parse::pci::Bdf, Option<&'a effective::Nearest>);

/// NCCL_IB_HCA: the RDMA devices nearest to some GPU, with an ACTIVE port; and those ports
/// (device, port, why).
fn ib_hca(inv: &Inventory, nearest: &[Near]) -> (Setting, Vec<(String, u32, String)>) {
    if effective::network(inv) == effective::Network::AwsOfi {
        let efa = inv.rdma.iter().filter(|d| d.is_efa()).count();
        let setting = Setting {
            name: "NCCL_IB_HCA",
            value: None,
            why: vec![format!(
                "not set: NCCL reaches the node's {efa} EFA devices through aws-ofi-nccl {} (libfabric's efa provider); NCCL_IB_HCA selects the devices of NCCL's own InfiniBand/RoCE transport, which NCCL does not use while the plugin loads",
                inv.nccl.plugin.aws_ofi().unwrap_or_default()
            )],
        };
        return (setting, Vec::new());
    }
    let narrow = crate::placement::narrow(inv);
    let front_end = crate::placement::front_end(inv);
    let mut hca: Vec<(String, u32, String)> = Vec::new();
    let mut why = Vec::new();
    let mut inactive = Vec::new();
    let mut left_narrow: Vec<usize> = Vec::new();
    let mut left_front: Vec<usize> = Vec::new();
    for (gpu, near) in nearest {
        let Some(near) = near else { continue };
        for c in &near.nics {
            if narrow.iter().any(|(i, ..)| *i == c.nic) {
                if !left_narrow.contains(&c.nic) {
                    left_narrow.push(c.nic);
                }
                continue;
            }
            if front_end.contains(&c.nic) {
                if !left_front.contains(&c.nic) {
                    left_front.push(c.nic);
                }
                continue;
            }
            let dev = &inv.rdma[c.nic];
            for p in &dev.ports {
                let key = (dev.name.clone(), p.num);
                if hca.iter().any(|(d, n, _)| (d, n) == (&key.0, &key.1)) {
                    continue;
                }
                if p.is_active() {
                    hca.push((
                        dev.name.clone(),
                        p.num,
                        format!("{} (ACTIVE), nearest to GPU {gpu} at {}", p.dir, near.level),
                    ));
                } else if !inactive.contains(&key) {
                    inactive.push(key);
                }
            }
        }
    }
    for (_, _, w) in &hca {
        why.push(w.clone());
    }
    for (d, n) in &inactive {
        why.push(format!("{d} port {n} is not ACTIVE: left out"));
    }
    for i in &left_front {
        let d = &inv.rdma[*i];
        let id = d
            .pci
            .and_then(|b| inv.function(b))
            .map(|f| format!(" ({}, {:04x}:{:04x})", f.bdf, f.vendor, f.device))
            .unwrap_or_default();
        why.push(format!(
            "{}{id}: a BlueField DPU's port beside the node's ConnectX rails: the front end (storage, the tenant network), not a rail: left out",
            d.name
        ));
    }
    for (i, bw, widest) in narrow.iter().filter(|(i, ..)| left_narrow.contains(i)) {
        why.push(format!(
            "{}: a narrow function ({}, under a quarter of the node's widest NIC at {widest:.1} GB/s): a management or storage function, not a rail: left out",
            inv.rdma[*i].name,
            bw.describe()
        ));
    }
    let setting = Setting {
        name: "NCCL_IB_HCA",
        value: (!hca.is_empty()).then(|| {
            format!(
                "={}",
                hca.iter()
                    .map(|(d, n, _)| format!("{d}:{n}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        }),
        why: if hca.is_empty() {
            let mut w = vec!["no GPU has an RDMA device with an ACTIVE port nearby (see pcie-placement, rdma-link): nothing to name".to_owned()];
            // The narrow functions left out, said.
            w.extend(why.into_iter().filter(|l| l.contains("a narrow function")));
            w
        } else {
            let mut w = vec![
                "'=' makes NCCL match these names exactly (mlx5_1 does not also match mlx5_10)"
                    .to_owned(),
            ];
            w.extend(why);
            w
        },
    };
    (setting, hca)
}

/// NCCL_IB_GID_INDEX, by the node's NCCL release: from 2.21 NCCL picks the GID itself and NVIDIA
/// advises leaving it unset (NVIDIA/nccl issues 890, 1573), so it is pinned only where NCCL's own
/// pick ([`gid`]) is wrong on a port used; before 2.21 (index 0 by default), and where the
/// release is not known, the pin of [`gid_pin`] is written, with what 2.21 and later would pick.
fn ib_gid_index(inv: &Inventory, hca: &[(String, u32, String)], release: &Release) -> Setting {
    let pin = gid_pin(inv, hca);
    let ports: Vec<(&crate::inventory::RdmaDevice, &crate::inventory::Port)> = hca
        .iter()
        .filter_map(|(d, n, _)| {
            let dev = inv.rdma.iter().find(|x| &x.name == d)?;
            Some((dev, dev.ports.iter().find(|p| p.num == *n)?))
        })
        .collect();
    let picks = gid::picks(ports, &gid::Wants::of(&inv.nccl));
    if picks.is_empty() {
        return pin;
    }
    let wrong = picks.iter().filter(|(_, p)| p.wrong.is_some()).count();
    // The picks to list: every one, or those that are wrong or differ from the pin.
    let differs = |p: &gid::Pick| {
        p.wrong.is_some()
            || pin
                .value
                .as_deref()
                .is_some_and(|v| v != p.index.to_string())
    };
    let lines = |who: &str, all: bool| -> Vec<String> {
        picks
            .iter()
            .filter(|(_, p)| all || differs(p))
            .map(|(port, p)| {
                format!(
                    "{port}: {who} {}{}",
                    p.shown,
                    p.wrong
                        .as_deref()
                        .map(|w| format!(": wrong, {w}"))
                        .unwrap_or_default()
                )
            })
            .collect()
    };
    let advice = "NVIDIA advises leaving NCCL_IB_GID_INDEX unset from 2.21, when NCCL began to pick the RoCE GID itself (NCCL issues 890, 1573)";
    let mut why = Vec::new();
    let value = match release.major_minor().map(|v| v >= gid::SINCE) {
        Some(true) if wrong == 0 => {
            why.push(format!(
                "not set: {} picks the RoCE GID itself, right on every RoCE port used; {advice}",
                release.describe()
            ));
            why.extend(lines("NCCL picks", true));
            None
        }
        Some(true) => {
            why.push(format!(
                "{} picks the RoCE GID itself, and its pick is wrong on {wrong} of the {} RoCE ports used, so {}",
                release.describe(),
                picks.len(),
                if pin.value.is_some() {
                    "this pin overrides it (otherwise, it would be left unset as NVIDIA advises)"
                } else {
                    "a pin is needed, but no single index fits every port (below); NCCL_IB_ADDR_RANGE set to the ports' own subnet keeps NCCL's pick off other netdevs' addresses without one"
                }
            ));
            why.extend(lines("NCCL picks", false));
            why.extend(pin.why);
            pin.value
        }
        Some(false) => {
            why.push(format!(
                "{} predates 2.21: without NCCL_IB_GID_INDEX it uses GID index 0 on every port",
                release.describe()
            ));
            why.extend(pin.why);
            pin.value
        }
        None => {
            let same = !picks.iter().any(|(_, p)| differs(p));
            let later = format!(
                "2.21 and later would pick wrong on {wrong} of the {} RoCE ports used",
                picks.len()
            );
            let what = match (&pin.value, same, wrong) {
                (Some(_), true, _) => "this pin is for older releases, and it is the index 2.21 and later pick themselves on every port used".to_owned(),
                (Some(_), _, 0) => "this pin is for older releases".to_owned(),
                (Some(_), _, _) => format!("this pin is for older releases, and it corrects {later}"),
                (None, _, 0) => "no single index fits every port (below)".to_owned(),
                (None, _, _) => format!("no single index fits every port (below); {later}"),
            };
            why.push(format!(
                "the node's NCCL release is not known (above); {advice}: {what}"
            ));
            why.extend(lines("NCCL 2.21 and later pick", false));
            why.extend(pin.why);
            pin.value
        }
    };
    Setting {
        name: "NCCL_IB_GID_INDEX",
        value,
        why,
    }
}

/// NCCL_IB_GID_INDEX: the RoCE v2 index, when it is the same on every RoCE port used.
fn gid_pin(inv: &Inventory, hca: &[(String, u32, String)]) -> Setting {
    let mut indices: Vec<(String, Option<u32>)> = Vec::new();
    for (d, n, _) in hca {
        if let Some(p) = inv
            .rdma
            .iter()
            .find(|x| &x.name == d)
            .and_then(|x| x.ports.iter().find(|p| p.num == *n))
            .filter(|p| p.is_ethernet())
        {
            // Named by what it is: an IPv6 table (roce-ipv6-only) has no IPv4 GID to name.
            let index = p.roce_v2_gid_index();
            let family = index
                .and_then(|i| p.gids.iter().find(|g| g.index == i))
                .map(|g| {
                    if g.gid.ipv4().is_some() {
                        "IPv4"
                    } else {
                        "IPv6"
                    }
                })
                .unwrap_or("IPv4");
            indices.push((format!("{d} port {n}: RoCE v2 {family} GID"), index));
        }
    }
    let distinct: std::collections::BTreeSet<Option<u32>> =
        indices.iter().map(|(_, i)| *i).collect();
    match (
        indices.is_empty(),
        distinct.len(),
        distinct.iter().next().copied().flatten(),
    ) {
        (true, _, _) => Setting {
            name: "NCCL_IB_GID_INDEX",
            value: None,
            why: vec!["no RoCE port is used (InfiniBand needs no GID index)".into()],
        },
        (false, 1, Some(i)) => Setting {
            name: "NCCL_IB_GID_INDEX",
            value: Some(i.to_string()),
            why: indices
                .iter()
                .map(|(p, _)| format!("{p} at index {i}"))
                .collect(),
        },
        _ => {
            let mut w = vec!["WARNING: not set: the RoCE v2 GID is not at the same index on every port used, so one NCCL_IB_GID_INDEX would be wrong for some; unset, NCCL 2.21 and later pick a GID per port themselves (earlier releases use index 0)".to_owned()];
            w.extend(indices.iter().map(|(p, i)| {
                let port = p.split(": ").next().unwrap_or(p);
                match i {
                    Some(i) => format!("{port}: index {i}"),
                    None => format!("{port}: no RoCE v2 GID (see rdma-gid)"),
                }
            }));
            Setting {
                name: "NCCL_IB_GID_INDEX",
                value: None,
                why: w,
            }
        }
    }
}

/// NCCL_NET_GDR_C2C, on a node whose GPUs reach their NICs over NVLink-C2C, by release
/// (`c2c`): 1 on 2.26, which leaves it off; nothing from 2.27, whose default it is; 1 where the
/// release is not known (needed on 2.26, the default after, ignored before). Before 2.26 NCCL
/// has no such setting: GDR there needs NCCL_NET_GDR_LEVEL=PHB (through PCIe), or a newer NCCL.
fn net_gdr_c2c(judged: &effective::Judgement, release: &Release) -> Option<Setting> {
    use c2c::Era;
    let gpus: Vec<String> = judged
        .gpus
        .iter()
        .filter(|g| g.c2c.is_some())
        .map(|g| g.gpu.to_string())
        .collect();
    if gpus.is_empty() {
        return None;
    }
    let over = format!(
        "GPUs {} reach their nearest NICs over NVLink-C2C (NCCL's P2C)",
        gpus.join(", ")
    );
    let (value, why) = match judged.release.map(Era::of) {
        Some(Era::Before26) => (
            None,
            format!(
                "not set: {} has no NCCL_NET_GDR_C2C; {over}, and it uses GPUDirect RDMA there only with NCCL_NET_GDR_LEVEL=PHB (through PCIe): NCCL 2.27 and later use it over C2C by default",
                release.describe()
            ),
        ),
        Some(Era::V26) => (
            Some("1".to_owned()),
            format!(
                "{over}; {} leaves NCCL_NET_GDR_C2C off by default (0), and without it runs them without GPUDirect RDMA",
                release.describe()
            ),
        ),
        Some(Era::V27 | Era::V29) => (
            None,
            format!(
                "not set: {over}, and {} uses GPUDirect RDMA over C2C by default (NCCL_NET_GDR_C2C=1 is its default)",
                release.describe()
            ),
        ),
        None => (
            Some("1".to_owned()),
            format!(
                "{over}; {}: NCCL 2.26 needs this to use GPUDirect RDMA over C2C, 2.27 and later have it by default, earlier releases ignore it",
                release.describe()
            ),
        ),
    };
    Some(Setting {
        name: "NCCL_NET_GDR_C2C",
        value,
        why: vec![why],
    })
}

/// NCCL_NET_GDR_LEVEL: only when some GPU's nearest NIC is beyond the default, over PCIe (a GPU
/// that reaches its NICs over NVLink-C2C is NCCL_NET_GDR_C2C's: [`net_gdr_c2c`]; a level
/// there also forces GDR through PCIe on 2.26 to 2.28).
/// A GPU whose nearest NICs are all narrow or front-end functions (never rails: [`ib_hca`] leaves
/// them out) is not judged: a level taken from them would open GDR through the CPU for NICs NCCL
/// is told not to use.
fn net_gdr_level(
    inv: &Inventory,
    judged: &effective::Judgement,
    nearest: &[Near],
    gdr_level: Level,
) -> Setting {
    let c2c_gpus: Vec<crate::parse::pci::Bdf> = judged
        .gpus
        .iter()
        .filter(|g| g.c2c.is_some())
        .map(|g| g.gpu)
        .collect();
    let narrow = crate::placement::narrow(inv);
    let front_end = crate::placement::front_end(inv);
    let not_rail = |nic: usize| narrow.iter().any(|(i, ..)| *i == nic) || front_end.contains(&nic);
    let only_not_rails = |n: &Option<&effective::Nearest>| {
        n.is_some_and(|n| !n.nics.is_empty() && n.nics.iter().all(|c| not_rail(c.nic)))
    };
    let left_out: Vec<crate::parse::pci::Bdf> = nearest
        .iter()
        .filter(|(g, n)| !c2c_gpus.contains(g) && only_not_rails(n))
        .map(|(g, _)| *g)
        .collect();
    let nearest: Vec<Near> = nearest
        .iter()
        .filter(|(g, _)| !c2c_gpus.contains(g) && !left_out.contains(g))
        .copied()
        .collect();
    let nearest = nearest.as_slice();
    if nearest.is_empty() && !left_out.is_empty() {
        return Setting {
            name: "NCCL_NET_GDR_LEVEL",
            value: None,
            why: vec![format!(
                "not set: the nearest NICs of {} are narrow or front-end functions, not rails (left out of NCCL_IB_HCA): no level is taken from them",
                if left_out.len() == judged.gpus.len() {
                    "every GPU".to_owned()
                } else {
                    format!(
                        "GPUs {}",
                        left_out
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            )],
        };
    }
    if nearest.is_empty() && !c2c_gpus.is_empty() {
        return Setting {
            name: "NCCL_NET_GDR_LEVEL",
            value: None,
            why: vec!["not set: every GPU reaches its NICs over NVLink-C2C, which NCCL_NET_GDR_C2C decides; a level would force GDR through PCIe (mode PCI) on NCCL 2.26 to 2.28".into()],
        };
    }
    let beyond = |level| judged.verdict(level) == effective::Verdict::NoGdr;
    // The value is
    // NCCL's name for the level: sysfs's NODE is PHB in NCCL's tree, and NCCL ignores
    // NCCL_NET_GDR_LEVEL=NODE (issue 16).
    let worst = nearest
        .iter()
        .filter_map(|(_, n)| n.as_ref().map(|n| n.level))
        .max();
    match worst {
        Some(level) if beyond(level) => {
            let shown = params::level_for_nccl(level);
            Setting {
                name: "NCCL_NET_GDR_LEVEL",
                value: Some(params::nccl_view(level).as_str().to_owned()),
                why: {
                    let mut w = vec![format!(
                        "a GPU's nearest NIC is at {shown}, beyond NCCL's default PXB: without this NCCL runs that GPU without GPUDirect RDMA. Trade-off: GDR through the CPU ({shown}) can be slower than staging on some platforms; measure with `gdrdoctor gdr-test` before relying on it"
                    )];
                    w.extend(nearest.iter().filter_map(|(g, n)| {
                        n.filter(|n| beyond(n.level)).map(|n| {
                            format!(
                                "GPU {g}: nearest NIC at {}",
                                params::level_for_nccl(n.level)
                            )
                        })
                    }));
                    w
                },
            }
        }
        Some(level) => Setting {
            name: "NCCL_NET_GDR_LEVEL",
            value: None,
            why: vec![format!(
                "not needed: every GPU has a NIC within {} (the farthest nearest NIC is at {})",
                gdr_level,
                params::level_for_nccl(level)
            )],
        },
        None => Setting {
            name: "NCCL_NET_GDR_LEVEL",
            value: None,
            why: vec!["no GPU-NIC pair to judge".into()],
        },
    }
}

/// NCCL_SOCKET_IFNAME: an up interface for bootstrap that is not an RDMA port's netdev
/// (`nccl-config` proposes it too, in place of a value that names no interface).
pub fn socket_ifname(inv: &Inventory) -> Setting {
    let rdma_netdevs: Vec<&str> = inv
        .rdma
        .iter()
        .flat_map(|d| {
            d.ports
                .iter()
                .filter_map(|p| p.netdev.as_ref().map(|n| n.name.as_str()))
        })
        .collect();
    let candidates: Vec<&crate::inventory::net::NetIf> = inv
        .netdevs
        .iter()
        .filter(|n| {
            n.is_up() && n.kind.value() != Some(&772) && !rdma_netdevs.contains(&n.name.as_str())
        })
        .collect();
    let pick = candidates
        .iter()
        .find(|n| !n.virtual_device)
        .or_else(|| candidates.first());
    match pick {
        Some(n) => Setting {
            name: "NCCL_SOCKET_IFNAME",
            value: Some(format!("={}", n.name)),
            why: vec![
                format!("{}/{}/operstate = up; {}", crate::inventory::net::CLASS_NET, n.name, if n.virtual_device { "a virtual interface (no physical one is up)" } else { "a physical interface" }),
                format!("not an RDMA port's netdev ({})", if rdma_netdevs.is_empty() { "none".to_owned() } else { rdma_netdevs.join(", ") }),
            ],
        },
        None => Setting {
            name: "NCCL_SOCKET_IFNAME",
            value: None,
            why: vec!["no interface is up besides loopback and the RDMA ports' netdevs: NCCL will pick one itself".into()],
        },
    }
}

/// Says, for each setting, what NCCL already reads for it on this node (nccl.conf, the
/// declared environment): the same value, or the line a new value would change (issue 16).
fn agree_with_conf(inv: &Inventory, out: &mut [Setting]) {
    for s in out.iter_mut() {
        let Some(have) = inv.nccl.get(s.name) else {
            continue;
        };
        let at = have.origin.describe();
        s.why.push(match &s.value {
            Some(v) if *v == have.value => format!("already so: {at} sets {}={v}", s.name),
            Some(v) => format!(
                "{at} sets {}={} now: this changes that line to {v}",
                s.name, have.value
            ),
            None => format!(
                "{at} sets {}={}: gdrdoctor would not set it (remove that line, or keep it knowingly)",
                s.name, have.value
            ),
        });
    }
}

/// The files NCCL reads on this node that gdrdoctor could not (`nccl-config` reports each as
/// `nccl-conf-unreadable`): (path, why). What they set is unknown to the settings.
pub fn unread(inv: &Inventory) -> Vec<(String, String)> {
    use crate::inventory::nccl::{SourceState, TopoState};
    let mut out: Vec<(String, String)> = inv
        .nccl
        .sources
        .iter()
        .filter_map(|s| match &s.state {
            SourceState::Unreadable(e) => Some((s.path.clone(), e.reason())),
            SourceState::NotRead(why) => Some((s.path.clone(), why.clone())),
            SourceState::Absent | SourceState::Read(_) => None,
        })
        .collect();
    out.extend(
        inv.nccl
            .problems
            .iter()
            .map(|p| (p.path.clone(), p.message.clone())),
    );
    if let Some(t) = &inv.nccl.topology {
        if let TopoState::Unreadable(e) = &t.state {
            out.push((t.path.clone(), e.reason()));
        }
    }
    out
}
