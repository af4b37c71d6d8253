//! `nccl-config`: what NCCL itself is told on this node (the declared job environment,
//! `NCCL_CONF_FILE` or `~/.nccl.conf`, `/etc/nccl.conf`, the topology file), shown with where
//! each setting comes from, and judged where it turns GPUDirect RDMA off or points at nothing.

use super::{Check, Context, Meta};
use crate::inventory::Inventory;
use crate::inventory::nccl::{Origin, Setting, SourceState, TopoState};
use crate::model::{Code, Evidence, Finding, Fix, FixClass};
use crate::nccl::params::{self, GdrLimit, HcaList, LevelValue};
use crate::parse::nccl_topo::{BusidMatch, PciKind, busid_matches};
use crate::parse::rdma::{GidFamily, GidType};

pub struct NcclConfig;

const DEFAULTS: Code = Code {
    id: "nccl-defaults",
    summary: "NCCL is given none of the settings that change GPUDirect RDMA: its defaults apply",
};

const SETTING: Code = Code {
    id: "nccl-setting",
    summary: "a setting that changes GPUDirect RDMA, its value and where NCCL reads it",
};

const IB_DISABLED: Code = Code {
    id: "nccl-ib-disabled",
    summary: "NCCL_IB_DISABLE turns InfiniBand/RoCE off: NCCL uses sockets and no GPUDirect RDMA",
};

const NET_NOT_IB: Code = Code {
    id: "nccl-net-not-ib",
    summary: "NCCL_NET names a network other than NCCL's InfiniBand/RoCE one",
};

const GDR_LEVEL_OFF: Code = Code {
    id: "nccl-gdr-level-off",
    summary: "NCCL_NET_GDR_LEVEL is below PIX: NCCL never uses GPUDirect RDMA",
};

const GDR_LEVEL_IGNORED: Code = Code {
    id: "nccl-gdr-level-ignored",
    summary: "NCCL_NET_GDR_LEVEL holds a value NCCL does not read: it keeps its default",
};

const GDR_READ_OFF: Code = Code {
    id: "nccl-gdr-read-off",
    summary: "NCCL_NET_GDR_READ=0: sends never read GPU memory directly",
};

const DMABUF_DISABLED: Code = Code {
    id: "nccl-dmabuf-disabled",
    summary: "NCCL_DMABUF_ENABLE=0 on a node whose only GPUDirect RDMA path is DMA-BUF",
};

const HCA_UNMATCHED: Code = Code {
    id: "nccl-hca-unmatched",
    summary: "NCCL_IB_HCA names RDMA devices the node lacks (or selects none of its devices)",
};

const GID_INDEX_OK: Code = Code {
    id: "nccl-gid-index-ok",
    summary: "the pinned NCCL_IB_GID_INDEX is a RoCE v2 GID on every RoCE port NCCL uses",
};

const GID_INDEX_BAD: Code = Code {
    id: "nccl-gid-index-bad",
    summary: "the pinned NCCL_IB_GID_INDEX is empty, beyond the table or RoCE v1 on a port NCCL uses",
};

const GID_INDEX_STACKED: Code = Code {
    id: "nccl-gid-index-stacked",
    summary: "the pinned NCCL_IB_GID_INDEX is the RoCE v2 GID of a netdev stacked on a port's own (a vxlan on a bond), not the port's own",
};

const CONF_LINE_IGNORED: Code = Code {
    id: "nccl-conf-line-ignored",
    summary: "a line of an NCCL configuration file does not set what it looks like it sets",
};

const CONF_UNREADABLE: Code = Code {
    id: "nccl-conf-unreadable",
    summary: "an NCCL configuration file (or the user whose file it is) could not be read",
};

const TOPO_FILE_OK: Code = Code {
    id: "nccl-topo-file-ok",
    summary: "the topology file NCCL reads parses, and names the node's GPUs and NICs",
};

const TOPO_FILE_MISSING: Code = Code {
    id: "nccl-topo-file-missing",
    summary: "NCCL_TOPO_FILE names a file that is not there: NCCL quietly reads sysfs instead",
};

const TOPO_FILE_INVALID: Code = Code {
    id: "nccl-topo-file-invalid",
    summary: "NCCL cannot load the topology file: every job's communicator fails to start",
};

const TOPO_FILE_UNREADABLE: Code = Code {
    id: "nccl-topo-file-unreadable",
    summary: "gdrdoctor cannot read or judge the topology file (permissions, size, nesting, bytes)",
};

const TOPO_FILE_STALE: Code = Code {
    id: "nccl-topo-file-stale",
    summary: "the topology file names GPUs or NICs this node does not have",
};

const TOPO_FILE_INCOMPLETE: Code = Code {
    id: "nccl-topo-file-incomplete",
    summary: "the topology file misses GPUs or NICs of this node: NCCL places those from sysfs",
};

const TOPO_FILE_GDR_OFF: Code = Code {
    id: "nccl-topo-file-gdr-off",
    summary: "the topology file says gdr=\"0\" for a GPU or NIC: NCCL keeps it and never uses GPUDirect RDMA there",
};

const NO_GPU: Code = Code {
    id: "nccl-no-gpu",
    summary: "no GPU, so no NCCL setting to judge",
};

const CODES: &[Code] = &[
    DEFAULTS,
    SETTING,
    IB_DISABLED,
    NET_NOT_IB,
    GDR_LEVEL_OFF,
    GDR_LEVEL_IGNORED,
    GDR_READ_OFF,
    DMABUF_DISABLED,
    HCA_UNMATCHED,
    GID_INDEX_OK,
    GID_INDEX_BAD,
    GID_INDEX_STACKED,
    CONF_LINE_IGNORED,
    CONF_UNREADABLE,
    TOPO_FILE_OK,
    TOPO_FILE_MISSING,
    TOPO_FILE_INVALID,
    TOPO_FILE_UNREADABLE,
    TOPO_FILE_STALE,
    TOPO_FILE_INCOMPLETE,
    TOPO_FILE_GDR_OFF,
    NO_GPU,
];

const META: Meta = Meta {
    id: "nccl-config",
    title: "NCCL's own settings keep GPUDirect RDMA on",
    codes: CODES,
    readme: include_str!("../../checks/nccl-config/README.md"),
    live_only: false,
    reads: &[],
};

impl Check for NcclConfig {
    fn meta(&self) -> &'static Meta {
        &META
    }

    /// `NCCL's defaults (...)`, or the settings in force and the topology file in a line.
    fn summary(&self, _cx: &Context, passed: &[&Finding]) -> String {
        let mut parts: Vec<String> = passed
            .iter()
            .filter(|f| f.code == SETTING.id)
            .map(|f| f.subject.clone())
            .collect();
        if let Some(d) = passed.iter().find(|f| f.code == DEFAULTS.id) {
            return d.message.clone();
        }
        let settings = match parts.len() {
            0 => String::new(),
            n => format!(
                "{n} setting{}: {}",
                if n == 1 { "" } else { "s" },
                parts.join(", ")
            ),
        };
        parts.clear();
        parts.extend(
            passed
                .iter()
                .filter(|f| f.code != SETTING.id)
                .map(|f| f.message.split(':').next().unwrap_or("").to_owned()),
        );
        if parts.is_empty() {
            settings
        } else if settings.is_empty() {
            parts.join("; ")
        } else {
            format!("{settings}; {}", parts.join("; "))
        }
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let inv = cx.inv;
        if inv.gpus.is_empty() {
            return vec![
                Finding::skip(NO_GPU, "node", "no GPU (see gpu-driver)")
                    .evidence(crate::inventory::pci::PCI_DEVICES, "no GPU")
                    .prerequisites(&["gpu-driver"]),
            ];
        }
        let n = &inv.nccl;
        let mut out = Vec::new();
        out.extend(sources(inv));
        for (name, what) in params::GDR_PARAMS {
            let Some(s) = n.get(name) else { continue };
            out.push(shown(s, what, inv));
            out.extend(judge(s, inv));
        }
        out.extend(gid_pin(inv));
        out.extend(topology(inv));
        if !out.iter().any(|f| f.status != crate::model::Status::Pass)
            && !out
                .iter()
                .any(|f| f.code == SETTING.id || f.code == TOPO_FILE_OK.id)
        {
            out.push(defaults(inv));
        }
        out
    }
}

/// The files NCCL reads and what they hold, for a defaults finding's evidence.
fn defaults(inv: &Inventory) -> Finding {
    let read: Vec<String> = inv
        .nccl
        .sources
        .iter()
        .filter_map(|s| match &s.state {
            SourceState::Read(f) => Some(format!(
                "{} ({} line{}, none about GPUDirect RDMA)",
                s.path,
                f.lines.len(),
                if f.lines.len() == 1 { "" } else { "s" }
            )),
            _ => None,
        })
        .collect();
    let message = if read.is_empty() {
        "NCCL's defaults: no /etc/nccl.conf, no declared job environment, no topology file"
            .to_owned()
    } else {
        format!("NCCL's defaults: {}", read.join(", "))
    };
    let mut f = Finding::pass(DEFAULTS, "node", message);
    for s in &inv.nccl.sources {
        let value = match &s.state {
            SourceState::Absent => "<not there>".to_owned(),
            SourceState::Read(c) => format!("{} settings", c.lines.len()),
            SourceState::NotRead(why) => format!("<not read: {why}>"),
            SourceState::Unreadable(e) => format!("<{}>", e.reason()),
        };
        f = f.evidence(s.path.clone(), value);
    }
    f
}

/// A GDR-relevant setting, shown with its origin and the definitions NCCL ignores.
fn shown(s: &Setting, what: &str, inv: &Inventory) -> Finding {
    let ignored: Vec<String> = inv
        .nccl
        .shadowed
        .iter()
        .filter(|x| x.name == s.name)
        .map(|x| format!("{}={} at {}", x.name, x.value, x.origin.short()))
        .collect();
    let also = if ignored.is_empty() {
        String::new()
    } else {
        format!(
            "; NCCL ignores the later {} (the first definition wins)",
            ignored.join(", ")
        )
    };
    let mut f = Finding::pass(
        SETTING,
        format!("{}={}", s.name, s.value),
        format!(
            "{}={} from {}: {what}{also}",
            s.name,
            s.value,
            s.origin.describe()
        ),
    )
    .with([s.evidence()]);
    for x in inv.nccl.shadowed.iter().filter(|x| x.name == s.name) {
        f = f.with([x.evidence()]);
    }
    f
}

/// A fix that removes or replaces the line (or the environment variable) a setting came from.
fn undo(s: &Setting, summary: String, safety: &str, replacement: Option<&str>) -> Fix {
    let fix = Fix::new(summary, safety);
    match &s.origin {
        Origin::File { path, line, .. } => {
            let path_q = super::sh(path);
            match replacement {
                Some(r) => fix.cmd(
                    FixClass::Persistent,
                    format!("sed -i '{line}s/.*/{}={r}/' {path_q}", s.name),
                ),
                None => fix.cmd(
                    FixClass::Persistent,
                    format!("sed -i '{line}d' {path_q}   # {}={}", s.name, s.value),
                ),
            }
        }
        o => fix.manual(format!(
            "# remove {} from {} (the job environment the site sets)",
            s.name,
            o.describe()
        )),
    }
}

/// Has the node a peer-memory path besides DMA-BUF (nvidia_peermem registered or loaded)?
fn has_peermem(inv: &Inventory) -> bool {
    inv.kernel
        .memory_peers
        .keys()
        .any(|k| k.starts_with("nv_mem"))
        || ["nvidia_peermem", "nv_peer_mem"]
            .iter()
            .any(|m| inv.kernel.module(m).is_some_and(|m| m.live()))
}

fn judge(s: &Setting, inv: &Inventory) -> Vec<Finding> {
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
        _ => {}
    }
    out
}

fn hca(s: &Setting, inv: &Inventory) -> Option<Finding> {
    if inv.rdma.is_empty() {
        return None;
    }
    let list = HcaList::parse(&s.value);
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

/// A pinned `NCCL_IB_GID_INDEX` against the GID table of every RoCE port NCCL uses.
fn gid_pin(inv: &Inventory) -> Vec<Finding> {
    let Some(s) = inv.nccl.get("NCCL_IB_GID_INDEX") else {
        return Vec::new();
    };
    let (index, _) = params::nccl_int(&s.value);
    if index < 0 {
        // NCCL's default: its own pick per port.
        return Vec::new();
    }
    let list = inv.nccl.value("NCCL_IB_HCA").map(HcaList::parse);
    let v6 = params::wants_ipv6(inv.nccl.value("NCCL_IB_ADDR_FAMILY"));
    let mut bad = Vec::new();
    let mut good = Vec::new();
    // Ports where the pin is a RoCE v2 GID, but of a netdev stacked on the port's own: the
    // port's own index, when it has one.
    let mut stacked: Vec<(String, Option<u32>)> = Vec::new();
    // The index `gdrdoctor nccl` would pin on each port (the port's own netdev first).
    let mut chosen = std::collections::BTreeSet::new();
    let mut ev: Vec<Evidence> = vec![s.evidence()];
    for d in &inv.rdma {
        for p in d.ports.iter().filter(|p| p.is_ethernet()) {
            if list
                .as_ref()
                .is_some_and(|l| !l.selects(&d.name, Some(p.num)))
            {
                continue;
            }
            let subject = p.subject(&d.name);
            chosen.insert(p.roce_v2_gid_index());
            let slot = format!("{}/gids/{index}", p.dir);
            if index as u64 >= p.gid_slots as u64 {
                bad.push(format!(
                    "{subject}: beyond its table of {} slots",
                    p.gid_slots
                ));
                ev.push(Evidence {
                    path: format!("{}/gids", p.dir),
                    value: format!("{} slots", p.gid_slots),
                });
                continue;
            }
            match p.gids.iter().find(|g| u64::from(g.index) == index as u64) {
                None => {
                    bad.push(format!("{subject}: slot {index} is empty"));
                    ev.push(Evidence {
                        path: slot,
                        value: "0000:0000:0000:0000:0000:0000:0000:0000".into(),
                    });
                }
                Some(g) if g.gid_type.value() != Some(&GidType::RoceV2) => {
                    bad.push(format!(
                        "{subject}: slot {index} is {} ({})",
                        g.gid_type
                            .value()
                            .map(|_| "RoCE v1")
                            .unwrap_or("of unknown type"),
                        g.gid.address()
                    ));
                    ev.push(Evidence {
                        path: slot,
                        value: format!("{} ({})", g.gid, g.gid_type.shown()),
                    });
                }
                Some(g) => {
                    let family_ok = match g.gid.family() {
                        GidFamily::Ipv4 => !v6,
                        GidFamily::Ipv6 | GidFamily::LinkLocal => v6,
                        GidFamily::Unused => false,
                    };
                    let on = g
                        .ndev
                        .value()
                        .map(|n| format!(" on {n}"))
                        .unwrap_or_default();
                    // The pin lands on another netdev's GID (a vxlan or macvlan stacked on the
                    // port's bond): valid here, but its address is that netdev's, which differs
                    // from node to node, and the port's own is elsewhere (issue 16).
                    let own = p.netdev.as_ref().map(|n| n.name.as_str());
                    if let (Some(own), Some(other)) = (own, g.ndev.value()) {
                        if other != own {
                            let own_index = p
                                .gids
                                .iter()
                                .find(|e| {
                                    e.gid_type.value() == Some(&GidType::RoceV2)
                                        && e.ndev.value().map(String::as_str) == Some(own)
                                        && (e.gid.family() == GidFamily::Ipv4) != v6
                                })
                                .map(|e| e.index);
                            stacked.push((
                                format!(
                                    "{subject}: GID {index} is RoCE v2 {} on {other}, not on the port's own netdev {own}; {}",
                                    g.gid.address(),
                                    match own_index {
                                        Some(i) => format!("{own}'s own RoCE v2 GID is at index {i}"),
                                        None => format!("{own} has no RoCE v2 GID of its own"),
                                    }
                                ),
                                own_index,
                            ));
                        }
                    }
                    good.push(format!(
                        "{subject}: RoCE v2 {}{on}{}",
                        g.gid.address(),
                        if family_ok {
                            ""
                        } else {
                            " (not the address family NCCL is set to)"
                        }
                    ));
                    ev.push(Evidence {
                        path: slot,
                        value: format!("{} ({})", g.gid, g.gid_type.shown()),
                    });
                }
            }
        }
    }
    let subject = format!("{}={}", s.name, s.value);
    if !bad.is_empty() {
        return vec![
            Finding::fail(
                GID_INDEX_BAD,
                subject,
                format!(
                    "NCCL uses GID {index} on every RoCE port ({}), and it is not a RoCE v2 GID on {} of them: {}. NCCL's queue pairs there fail to connect or go unrouted",
                    s.origin.describe(),
                    bad.len(),
                    bad.join("; ")
                ),
            )
            .with(ev)
            .fix(undo(
                s,
                format!("Remove {} (NCCL then picks the RoCE v2 GID per port; `gdrdoctor nccl` says whether one index fits every port)", s.name),
                "Changes the GID jobs use on every port; jobs across nodes must agree on RoCE v2.",
                None,
            )),
        ];
    }
    if !stacked.is_empty() {
        // One index that every port NCCL uses would get by the rule: the pin to write instead.
        let replacement = match (chosen.len(), chosen.iter().next()) {
            (1, Some(Some(i))) => Some(i.to_string()),
            _ => None,
        };
        let summary = match &replacement {
            Some(i) => format!(
                "Pin the port's own GID instead: {}={i} (or remove the pin; `gdrdoctor nccl` says whether one index fits every port)",
                s.name
            ),
            None => format!(
                "Remove {} (the ports' own GIDs are not at one index, so no pin fits every port; NCCL then picks per port, and `gdrdoctor nccl` says which index each port's own netdev has)",
                s.name
            ),
        };
        return vec![
            Finding::warn(
                GID_INDEX_STACKED,
                subject,
                format!(
                    "NCCL uses GID {index} on every RoCE port ({}); on {} of them it belongs to a netdev stacked on the port's own, whose address differs from node to node, so jobs across nodes may not agree on it: {}",
                    s.origin.describe(),
                    stacked.len(),
                    stacked
                        .iter()
                        .map(|(m, _)| m.as_str())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            )
            .with(ev)
            .fix(undo(
                s,
                summary,
                "Changes the GID jobs use on every port; jobs across nodes must agree on RoCE v2.",
                replacement.as_deref(),
            )),
        ];
    }
    if good.is_empty() {
        return Vec::new();
    }
    vec![
        Finding::pass(
            GID_INDEX_OK,
            subject,
            format!(
                "GID {index} is RoCE v2 on every RoCE port NCCL uses: {}",
                good.join("; ")
            ),
        )
        .with(ev),
    ]
}

/// The files NCCL reads, and their lines that do not do what they seem to.
fn sources(inv: &Inventory) -> Vec<Finding> {
    let n = &inv.nccl;
    let mut out = Vec::new();
    for s in &n.sources {
        if let SourceState::Unreadable(e) = &s.state {
            out.push(
                Finding::unknown(
                    CONF_UNREADABLE,
                    s.path.clone(),
                    format!(
                        "NCCL reads {}, and gdrdoctor cannot: {}",
                        s.path,
                        e.reason()
                    ),
                )
                .evidence(s.path.clone(), format!("<{}>", e.reason())),
            );
        }
        if let SourceState::NotRead(why) = &s.state {
            out.push(
                Finding::unknown(
                    CONF_UNREADABLE,
                    s.path.clone(),
                    format!(
                        "NCCL_CONF_FILE names {}: {why}; what it sets is unknown",
                        s.path
                    ),
                )
                .evidence(s.path.clone(), format!("<{why}>")),
            );
        }
    }
    for p in &n.problems {
        out.push(
            Finding::unknown(
                CONF_UNREADABLE,
                p.path.clone(),
                format!("{}: {}", p.path, p.message),
            )
            .evidence(p.path.clone(), format!("<{}>", p.message)),
        );
    }
    for (path, o) in &n.odd {
        let meant = o
            .meant
            .as_deref()
            .map(|m| format!(" (meant: {m})"))
            .unwrap_or_default();
        let fix = match (o.why, o.meant.as_deref()) {
            (_, Some(m)) if o.text.contains('=') => {
                let value = o.text.split_once('=').map(|(_, v)| v).unwrap_or("");
                let value = value.trim().trim_matches(|c| c == '"' || c == '\'');
                Fix::new(
                    format!("Write the line as NCCL reads it: {m}={value}"),
                    "Changes what every NCCL job on the node reads, as the line intended.",
                )
                .cmd(
                    FixClass::Persistent,
                    format!(
                        "sed -i '{}s/.*/{m}={}/' {}",
                        o.line,
                        value.replace('/', "\\/"),
                        super::sh(path)
                    ),
                )
            }
            _ => Fix::new(
                "Write the line as NAME=value with no spaces, quotes or 'export', or remove it",
                "Changes what every NCCL job on the node reads.",
            )
            .manual(format!("sed -n '{}p' {}", o.line, super::sh(path))),
        };
        out.push(
            Finding::warn(
                CONF_LINE_IGNORED,
                format!("{path} line {}", o.line),
                format!(
                    "{}: {}{meant}",
                    crate::sanitize::quoted(&o.text),
                    o.why.explain()
                ),
            )
            .evidence(path.clone(), format!("line {}: {}", o.line, o.text))
            .fix(fix),
        );
    }
    // NCCL_CONF_FILE is read from the environment before any file: set in a file, it is inert.
    for s in n
        .settings
        .values()
        .chain(&n.shadowed)
        .filter(|s| s.name == "NCCL_CONF_FILE" && !s.origin.is_environment())
    {
        out.push(
            Finding::warn(
                CONF_LINE_IGNORED,
                format!("{}={}", s.name, s.value),
                format!(
                    "set in {}: NCCL reads NCCL_CONF_FILE from the environment only, before any file, so this line changes nothing",
                    s.origin.describe()
                ),
            )
            .with([s.evidence()])
            .fix(undo(s, "Set NCCL_CONF_FILE in the job environment instead (the Slurm TaskProlog, a module file), or remove the line".into(), "None.", None)),
        );
    }
    out
}

/// The topology file: can NCCL load it, and does it describe this node?
fn topology(inv: &Inventory) -> Vec<Finding> {
    let Some(t) = &inv.nccl.topology else {
        return Vec::new();
    };
    let by = match &t.named_by {
        Some(s) => format!("NCCL_TOPO_FILE ({})", s.origin.describe()),
        None => "NCCL's default location".to_owned(),
    };
    let mut named: Vec<Evidence> = t.named_by.iter().map(Setting::evidence).collect();
    let subject = t.path.clone();
    match &t.state {
        TopoState::Missing => vec![
            Finding::warn(
                TOPO_FILE_MISSING,
                subject,
                format!("{by} names {}, which is not there: NCCL logs that at INFO only and builds its tree from sysfs (see pcie-placement)", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), "<not found>")
            .fix(Fix::new(format!("Install the file NCCL_TOPO_FILE names at {}, or remove the setting", t.path), "Changes the tree every NCCL job builds.").manual(format!("ls -l {}", super::sh(&t.path)))),
        ],
        TopoState::Relative => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names the relative path {}: NCCL opens it from each job's working directory, so what it reads is unknown", t.path),
            )
            .with(named),
        ],
        TopoState::Unreadable(e) => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names {}, which gdrdoctor cannot read: {}", t.path, e.reason()),
            )
            .with(named)
            .evidence(t.path.clone(), format!("<{}>", e.reason())),
        ],
        TopoState::Invalid(e) if e.nccl_refuses => vec![
            Finding::fail(
                TOPO_FILE_INVALID,
                subject,
                format!("{by} names {}, which NCCL cannot load ({e}): communicator initialisation fails, so every NCCL job on the node fails to start", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), format!("line {}: {}", e.line, e.message))
            .fix(Fix::new("Replace the file with the provider's (or a dump NCCL wrote with NCCL_TOPO_DUMP_FILE), or remove NCCL_TOPO_FILE", "Changes the tree every NCCL job builds.").manual(format!("sed -n '{}p' {}", e.line, super::sh(&t.path)))),
        ],
        TopoState::Invalid(e) => vec![
            Finding::unknown(
                TOPO_FILE_UNREADABLE,
                subject,
                format!("{by} names {}, which gdrdoctor will not judge ({e})", t.path),
            )
            .with(named)
            .evidence(t.path.clone(), format!("line {}: {}", e.line, e.message)),
        ],
        TopoState::Parsed { topology, .. } => {
            let refusals = topology.refusals();
            if let Some((line, why)) = refusals.first() {
                named.push(Evidence {
                    path: t.path.clone(),
                    value: format!("line {line}: {why}"),
                });
                return vec![
                    Finding::fail(
                        TOPO_FILE_INVALID,
                        subject,
                        format!("{by} names {}, which NCCL refuses: {why}; communicator initialisation fails, so every NCCL job on the node fails to start", t.path),
                    )
                    .with(named)
                    .fix(Fix::new("Replace the file with one for NCCL (version 1, as NCCL_TOPO_DUMP_FILE writes it), or remove NCCL_TOPO_FILE", "Changes the tree every NCCL job builds.").manual(format!("head -3 {}", super::sh(&t.path)))),
                ];
            }
            matched(inv, t, topology, &by, named)
        }
    }
}

/// The file against the node: what it names that the node lacks, what it misses, GDR it turns
/// off.
fn matched(
    inv: &Inventory,
    t: &crate::inventory::nccl::Topo,
    topo: &crate::parse::nccl_topo::Topology,
    by: &str,
    named: Vec<Evidence>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let line_ev = |line: usize, what: String| Evidence {
        path: t.path.clone(),
        value: format!("line {line}: {what}"),
    };
    // Devices of the file: GPUs and NICs by bus ID (and NICs by net name).
    let node_has = |busid: &str| {
        inv.pci
            .keys()
            .any(|b| busid_matches(busid, *b) == BusidMatch::Exact)
    };
    let mut stale = Vec::new();
    let mut stale_ev = Vec::new();
    for p in &topo.pcis {
        let Some(busid) = p.busid.as_deref() else {
            continue;
        };
        let named_nic = p.nets.iter().any(|n| {
            n.name
                .as_deref()
                .is_some_and(|name| inv.rdma.iter().any(|d| d.name == name))
        });
        let kind = match p.kind {
            PciKind::Gpu => "GPU",
            PciKind::Nic => "NIC",
            _ => continue,
        };
        if !node_has(busid) && !named_nic {
            stale.push(format!("{kind} {busid} (line {})", p.line));
            stale_ev.push(line_ev(p.line, format!("{kind} {busid}: not on this node")));
        }
    }
    let used = crate::nccl::effective::nics(inv);
    let mut missing = Vec::new();
    let mut missing_ev = Vec::new();
    for g in &inv.gpus {
        if topo.pci_by_busid(&g.bdf.to_string()).is_none() {
            let case = topo.pcis.iter().find(|p| {
                p.busid
                    .as_deref()
                    .is_some_and(|b| busid_matches(b, g.bdf) == BusidMatch::Differently)
            });
            missing.push(match case {
                Some(p) => format!(
                    "GPU {} (line {} writes {}: NCCL compares bus IDs exactly, in lower case)",
                    g.bdf,
                    p.line,
                    p.busid.as_deref().unwrap_or("")
                ),
                None => format!("GPU {}", g.bdf),
            });
            if let Some(f) = inv.function(g.bdf) {
                missing_ev.push(Evidence {
                    path: f.path.clone(),
                    value: "GPU: not in the topology file".into(),
                });
            }
        }
    }
    for &i in &used {
        let d = &inv.rdma[i];
        let by_name = topo.net_by_name(&d.name).is_some();
        let by_busid = d
            .pci
            .is_some_and(|b| topo.pci_by_busid(&b.to_string()).is_some());
        if !by_name && !by_busid {
            missing.push(format!(
                "NIC {}{}",
                d.name,
                d.pci.map(|b| format!(" {b}")).unwrap_or_default()
            ));
            missing_ev.push(Evidence {
                path: d.class_path(),
                value: "RDMA device: not in the topology file".into(),
            });
        }
    }
    // gdr="0" in the file: NCCL sets the attribute only when it is absent
    // (src/graph/topo.cc xmlInitAttrInt), so the file's 0 stands.
    let mut off = Vec::new();
    let mut off_ev = Vec::new();
    for p in &topo.pcis {
        if let Some((line, Some(g))) = &p.gpu {
            if params::nccl_int(g).0 == 0 {
                off.push(format!(
                    "GPU {} (line {line})",
                    p.busid.as_deref().unwrap_or("?")
                ));
                off_ev.push(line_ev(*line, format!("<gpu gdr=\"{g}\">")));
            }
        }
        for n in &p.nets {
            if let Some(g) = &n.gdr {
                if params::nccl_int(g).0 == 0 {
                    off.push(format!(
                        "NIC {} (line {})",
                        n.name.as_deref().unwrap_or("?"),
                        n.line
                    ));
                    off_ev.push(line_ev(n.line, format!("<net gdr=\"{g}\">")));
                }
            }
        }
    }
    if !off.is_empty() {
        out.push(
            Finding::fail(
                TOPO_FILE_GDR_OFF,
                t.path.clone(),
                format!("the file says gdr=\"0\" for {}: NCCL keeps a value the file sets, so it never uses GPUDirect RDMA with them (a dump taken where peer memory was missing carries this)", off.join(", ")),
            )
            .with(named.clone())
            .with(off_ev)
            .fix(Fix::new("Remove the gdr attributes from the file (NCCL then detects GPUDirect RDMA itself), or use the provider's file", "Changes what every NCCL job on the node uses.").manual(format!("grep -n 'gdr=\"0\"' {}", super::sh(&t.path)))),
        );
    }
    if !stale.is_empty() {
        out.push(
            Finding::warn(
                TOPO_FILE_STALE,
                t.path.clone(),
                format!("the file names {} that this node does not have: it was written for another node or VM size (NCCL drops what it cannot find, and places this node's devices from sysfs)", stale.join(", ")),
            )
            .with(named.clone())
            .with(stale_ev)
            .fix(Fix::new("Use the topology file made for this node's model or VM size", "Changes the tree every NCCL job builds.").manual(format!("grep -n busid {}", super::sh(&t.path)))),
        );
    }
    if !missing.is_empty() {
        out.push(
            Finding::warn(
                TOPO_FILE_INCOMPLETE,
                t.path.clone(),
                format!("the file misses {}: NCCL places {} from sysfs (see pcie-placement for where that puts them)", missing.join(", "), if missing.len() == 1 { "it" } else { "them" }),
            )
            .with(named.clone())
            .with(missing_ev)
            .fix(Fix::new("Use a topology file that names every GPU and NIC of this node", "Changes the tree every NCCL job builds.").manual("gdrdoctor topo   # the node's GPUs and NICs")),
        );
    }
    if out.is_empty() {
        let gpus = inv.gpus.len();
        let nics = used.len();
        out.push(
            Finding::pass(
                TOPO_FILE_OK,
                t.path.clone(),
                format!(
                    "topology file {}: NCCL loads it ({by}) and finds {gpus} GPU{} and {nics} NIC{} of this node in it",
                    t.path,
                    if gpus == 1 { "" } else { "s" },
                    if nics == 1 { "" } else { "s" }
                ),
            )
            .with(named)
            .evidence(t.path.clone(), format!("{} cpu, {} pci elements", topo.cpus.len(), topo.pcis.len())),
        );
    }
    out
}
