//! `nccl-config`: what NCCL itself is told on this node (the declared job environment,
//! `NCCL_CONF_FILE` or `~/.nccl.conf`, `/etc/nccl.conf`, the topology file), shown with where
//! each setting comes from, and judged where it turns GPUDirect RDMA off or points at nothing;
//! and the settings of NCCL's InfiniBand/RoCE transport and sockets, judged against NCCL's own
//! ranges and the node's interfaces (issue 28).

use super::Rule;
use super::{Check, Context, Meta};
use crate::inventory::Inventory;
use crate::inventory::nccl::{Origin, Setting, SourceState};
use crate::model::Action;
use crate::model::{Code, Finding, Fix};
use crate::nccl::params;

mod gid;
mod ifname;
mod plugin;
mod settings;
mod sources;
mod topology;
mod transport;

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

const GDR_C2C_OFF: Code = Code {
    id: "nccl-gdr-c2c-off",
    summary: "NCCL_NET_GDR_C2C=0 on a node whose GPUs reach their NICs over NVLink-C2C: NCCL runs them without GPUDirect RDMA",
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

const TRANSPORT_SETTING: Code = Code {
    id: "nccl-transport-setting",
    summary: "a setting of NCCL's InfiniBand/RoCE transport or its sockets, its value, where NCCL reads it and what NCCL does with it",
};

const IB_TIMEOUT_BAD: Code = Code {
    id: "nccl-ib-timeout-bad",
    summary: "NCCL_IB_TIMEOUT is 0 (queue pairs never time out: a lost packet hangs the job) or outside the verbs field's 0-31",
};

const IB_RETRY_CNT_BAD: Code = Code {
    id: "nccl-ib-retry-cnt-bad",
    summary: "NCCL_IB_RETRY_CNT is outside the verbs field's 0-7, or 0 (the first lost packet fails the job)",
};

const IB_QPS_BAD: Code = Code {
    id: "nccl-ib-qps-bad",
    summary: "NCCL_IB_QPS_PER_CONNECTION is below 1 or above the 128 queue pairs a connection holds",
};

const IB_SL_BAD: Code = Code {
    id: "nccl-ib-sl-bad",
    summary: "NCCL_IB_SL is not a service level of the ports NCCL uses (0-15 on InfiniBand, 0-7 on RoCE)",
};

const IB_TC_BAD: Code = Code {
    id: "nccl-ib-tc-bad",
    summary: "NCCL_IB_TC or NCCL_IB_FIFO_TC is outside the 8-bit traffic class (0-255)",
};

const IB_GDR_LEVEL_LEFTOVER: Code = Code {
    id: "nccl-ib-gdr-level-leftover",
    summary: "NCCL_IB_GDR_LEVEL is set, which NCCL has ignored since 2.4 (NCCL_NET_GDR_LEVEL replaced it)",
};

const SOCKET_IFNAME_UNMATCHED: Code = Code {
    id: "nccl-socket-ifname-unmatched",
    summary: "NCCL_SOCKET_IFNAME matches none of the node's interfaces (or names interfaces it lacks)",
};

const SOCKET_IFNAME_DOWN: Code = Code {
    id: "nccl-socket-ifname-down",
    summary: "NCCL_SOCKET_IFNAME matches only interfaces that are not up",
};

const IB_RELAXED_ORDERING_OFF: Code = Code {
    id: "nccl-ib-relaxed-ordering-off",
    summary: "NCCL_IB_PCI_RELAXED_ORDERING=0 in a VM, where Relaxed Ordering is what keeps NCCL's InfiniBand bandwidth",
};

const P2P_OFF: Code = Code {
    id: "nccl-p2p-off",
    summary: "NCCL_P2P_LEVEL=LOC (or 0): NCCL never moves data between the node's GPUs peer to peer, but through host memory",
};

const SOCKET_IFNAME_LOOPBACK: Code = Code {
    id: "nccl-socket-ifname-loopback",
    summary: "NCCL_SOCKET_IFNAME selects the loopback interface: NCCL bootstraps over 127.0.0.1 and no other node reaches it",
};

const SOCKET_IFNAME_NO_ADDRESS: Code = Code {
    id: "nccl-socket-ifname-no-address",
    summary: "NCCL_SOCKET_IFNAME selects only interfaces without an address, which NCCL never takes",
};

const NET_PLUGIN: Code = Code {
    id: "nccl-net-plugin",
    summary: "the network plugin NCCL loads, its version, where the loader finds it, and what it reaches",
};

const NET_PLUGIN_MISSING: Code = Code {
    id: "nccl-net-plugin-missing",
    summary: "the node's EFA devices need aws-ofi-nccl, and NCCL loads no such plugin: it runs over TCP sockets",
};

const NET_PLUGIN_UNFOUND: Code = Code {
    id: "nccl-net-plugin-unfound",
    summary: "NCCL_NET_PLUGIN names a plugin the loader does not find: NCCL uses its own transport",
};

const NET_PLUGIN_BROKEN: Code = Code {
    id: "nccl-net-plugin-broken",
    summary: "the plugin NCCL finds cannot load (a library it needs is missing): NCCL falls back to its own transport",
};

const NET_PLUGIN_SETTING: Code = Code {
    id: "nccl-net-plugin-setting",
    summary: "a setting the plugin documents (or libfabric reads) that turns GPUDirect RDMA off, or one its version needs and lacks",
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
    GDR_C2C_OFF,
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
    TRANSPORT_SETTING,
    IB_TIMEOUT_BAD,
    IB_RETRY_CNT_BAD,
    IB_QPS_BAD,
    IB_SL_BAD,
    IB_TC_BAD,
    IB_GDR_LEVEL_LEFTOVER,
    SOCKET_IFNAME_UNMATCHED,
    SOCKET_IFNAME_DOWN,
    SOCKET_IFNAME_LOOPBACK,
    SOCKET_IFNAME_NO_ADDRESS,
    IB_RELAXED_ORDERING_OFF,
    P2P_OFF,
    NET_PLUGIN,
    NET_PLUGIN_MISSING,
    NET_PLUGIN_UNFOUND,
    NET_PLUGIN_BROKEN,
    NET_PLUGIN_SETTING,
    NO_GPU,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(DEFAULTS, Action::None),
    Rule::new(SETTING, Action::None),
    Rule::new(IB_DISABLED, Action::FixInPlace),
    Rule::new(NET_NOT_IB, Action::FixInPlace),
    Rule::new(GDR_LEVEL_OFF, Action::FixInPlace),
    Rule::new(GDR_LEVEL_IGNORED, Action::FixInPlace),
    Rule::new(GDR_C2C_OFF, Action::FixInPlace),
    Rule::new(GDR_READ_OFF, Action::FixInPlace),
    Rule::new(DMABUF_DISABLED, Action::FixInPlace),
    Rule::new(HCA_UNMATCHED, Action::FixInPlace),
    Rule::new(GID_INDEX_OK, Action::None),
    Rule::new(GID_INDEX_BAD, Action::FixInPlace),
    Rule::new(GID_INDEX_STACKED, Action::FixInPlace),
    Rule::new(CONF_LINE_IGNORED, Action::FixInPlace),
    Rule::new(CONF_UNREADABLE, Action::None),
    Rule::new(TOPO_FILE_OK, Action::None),
    Rule::new(TOPO_FILE_MISSING, Action::FixInPlace),
    Rule::new(TOPO_FILE_INVALID, Action::FixInPlace),
    Rule::new(TOPO_FILE_UNREADABLE, Action::None),
    Rule::new(TOPO_FILE_STALE, Action::FixInPlace),
    Rule::new(TOPO_FILE_INCOMPLETE, Action::FixInPlace),
    Rule::new(TOPO_FILE_GDR_OFF, Action::FixInPlace),
    Rule::new(TRANSPORT_SETTING, Action::None),
    Rule::new(IB_TIMEOUT_BAD, Action::FixInPlace),
    Rule::new(IB_RETRY_CNT_BAD, Action::FixInPlace),
    Rule::new(IB_QPS_BAD, Action::FixInPlace),
    Rule::new(IB_SL_BAD, Action::FixInPlace),
    Rule::new(IB_TC_BAD, Action::FixInPlace),
    Rule::new(IB_GDR_LEVEL_LEFTOVER, Action::FixInPlace),
    Rule::new(SOCKET_IFNAME_UNMATCHED, Action::FixInPlace),
    Rule::new(SOCKET_IFNAME_DOWN, Action::FixInPlace),
    Rule::new(SOCKET_IFNAME_LOOPBACK, Action::FixInPlace),
    Rule::new(SOCKET_IFNAME_NO_ADDRESS, Action::FixInPlace),
    Rule::new(IB_RELAXED_ORDERING_OFF, Action::FixInPlace),
    Rule::new(P2P_OFF, Action::FixInPlace),
    Rule::new(NET_PLUGIN, Action::None),
    Rule::new(NET_PLUGIN_MISSING, Action::FixInPlace),
    Rule::new(NET_PLUGIN_UNFOUND, Action::FixInPlace),
    Rule::new(NET_PLUGIN_BROKEN, Action::FixInPlace),
    Rule::new(NET_PLUGIN_SETTING, Action::None),
    Rule::new(NO_GPU, Action::None),
];

const META: Meta = Meta {
    id: "nccl-config",
    title: "NCCL's own settings keep GPUDirect RDMA on",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../../checks/nccl-config/README.md"),
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
            .filter(|f| f.code == SETTING.id || f.code == TRANSPORT_SETTING.id)
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
                .filter(|f| f.code != SETTING.id && f.code != TRANSPORT_SETTING.id)
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
        out.extend(sources::judge(inv));
        out.extend(plugin::judge(inv));
        for (name, what) in params::GDR_PARAMS {
            let Some(s) = n.get(name) else { continue };
            out.push(shown(s, what, inv));
            out.extend(settings::judge(s, inv));
        }
        out.extend(gid::judge(inv));
        out.extend(topology::judge(inv));
        out.extend(transport::judge(inv));
        if !out.iter().any(|f| f.status != crate::model::Status::Pass)
            && !out.iter().any(|f| {
                f.code == SETTING.id
                    || f.code == TOPO_FILE_OK.id
                    || f.code == TRANSPORT_SETTING.id
                    || f.code == NET_PLUGIN.id
            })
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
    shown_as(SETTING, s, what, inv)
}

/// A setting shown under `code`: `NAME=value from ORIGIN: what`, and the later definitions
/// NCCL ignores.
fn shown_as(code: Code, s: &Setting, what: &str, inv: &Inventory) -> Finding {
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
        code,
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
/// A line is commented out, not deleted (NCCL skips a line that starts with `#`); a
/// replacement takes the place of the first definition, the one NCCL keeps.
pub(super) fn undo(s: &Setting, summary: String, safety: &str, replacement: Option<&str>) -> Fix {
    let fix = Fix::new(summary, safety);
    match &s.origin {
        Origin::File { path, .. } => match replacement {
            Some(r) => fix.edit(crate::model::edit::Edit::Set {
                file: path.clone(),
                key: s.name.clone(),
                value: r.to_owned(),
            }),
            None => fix.edit(crate::model::edit::Edit::Unset {
                file: path.clone(),
                key: s.name.clone(),
            }),
        },
        o => fix.manual(format!(
            "# remove {} from {} (the job environment the site sets)",
            s.name,
            o.describe()
        )),
    }
}

/// Has the node a peer-memory path besides DMA-BUF (nvidia_peermem registered or loaded)?
/// What NCCL makes of one transport setting: the meaning, said when nothing is wrong, or the
/// findings (`transport`, `ifname`).
enum Judged {
    Means(String),
    Problems(Vec<Finding>),
}

/// The fix of an `NCCL_SOCKET_IFNAME` line that names no interface (`ifname`).
fn remove_or(s: &Setting, summary: String, replacement: Option<&str>) -> Fix {
    undo(
        s,
        summary,
        "Changes the interface every NCCL job on the node bootstraps over; every node of a job must reach the others through it.",
        replacement,
    )
}

fn has_peermem(inv: &Inventory) -> bool {
    inv.kernel
        .memory_peers
        .keys()
        .any(|k| k.starts_with("nv_mem"))
        || ["nvidia_peermem", "nv_peer_mem"]
            .iter()
            .any(|m| inv.kernel.module(m).is_some_and(|m| m.live()))
}
