//! The network plugin NCCL loads (issue 29): found as NCCL looks for it, named with its
//! version, and judged where the node needs one (EFA), where it cannot load, and where the
//! settings it documents turn GPUDirect RDMA off.

use super::{
    NET_PLUGIN, NET_PLUGIN_BROKEN, NET_PLUGIN_MISSING, NET_PLUGIN_SETTING, NET_PLUGIN_UNFOUND,
};
use crate::inventory::Inventory;
use crate::inventory::nccl_plugin::{
    Candidate, DEFAULT_PLUGIN, EFA_INSTALLER_LIBFABRIC, Found, Kind, NetPlugin, State,
    UnusedInstall,
};
use crate::model::{Evidence, Finding, Fix, Status};

pub(super) fn judge(inv: &Inventory) -> Vec<Finding> {
    let p = &inv.nccl.plugin;
    let efa = inv.rdma.iter().filter(|d| d.is_efa()).count();
    let mut out = Vec::new();
    match &p.state {
        State::Found { at, kind } => {
            if efa > 0 && !matches!(kind, Kind::AwsOfi { .. }) {
                out.push(missing(inv, efa, Some(at)));
            } else {
                out.push(found(inv, at, kind, efa));
            }
            if let Kind::AwsOfi { version } = kind {
                out.extend(libfabric(p));
                out.extend(settings(inv, version));
            }
        }
        State::NotFound | State::Disabled if efa > 0 => out.push(missing(inv, efa, None)),
        State::NotFound => {
            if let Some(s) = &p.setting {
                out.push(
                    Finding::warn(
                        NET_PLUGIN_UNFOUND,
                        format!("NCCL_NET_PLUGIN={}", s.value),
                        format!(
                            "NCCL_NET_PLUGIN={} ({}) names a plugin NCCL does not find ({}): NCCL logs that at INFO and uses its own transport",
                            s.value,
                            s.origin.describe(),
                            tried(&p.tried)
                        ),
                    )
                    .with([s.evidence()])
                    .fix(Fix::new("Install the plugin NCCL_NET_PLUGIN names where the loader finds it, or remove the setting", "Changes the network every NCCL job uses.").manual("ldconfig -p | grep libnccl-net")),
                );
            }
        }
        State::Disabled => {}
    }
    out
}

/// `libnccl-net.so (every release), libnccl-net-ofi.so (2.22 and later)`.
fn tried(c: &[Candidate]) -> String {
    c.iter()
        .map(|c| format!("{} ({})", c.name, c.releases))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `NCCL_NET_PLUGIN unset, so libnccl-net.so` or `NCCL_NET_PLUGIN=ofi from ...`.
fn why_this_name(p: &NetPlugin) -> String {
    match &p.setting {
        Some(s) => format!("NCCL_NET_PLUGIN={} from {}", s.value, s.origin.describe()),
        None => "NCCL_NET_PLUGIN unset: NCCL opens libnccl-net.so".to_owned(),
    }
}

fn found_evidence(at: &Found) -> Evidence {
    Evidence {
        path: at.real.clone(),
        value: format!("opened as {} (found through {})", at.path, at.via),
    }
}

fn found(inv: &Inventory, at: &Found, kind: &Kind, efa: usize) -> Finding {
    let p = &inv.nccl.plugin;
    let (what, does) = match kind {
        Kind::AwsOfi { version } => (
            format!("aws-ofi-nccl {version}"),
            if efa > 0 {
                format!(
                    "NCCL reaches the node's {efa} EFA devices through it (libfabric's efa provider); NCCL_IB_* settings do not apply to them"
                )
            } else {
                "it asks libfabric for a provider; the node has no EFA device".to_owned()
            },
        ),
        Kind::IbExt => (
            "NVIDIA's IBext plugin (nccl-rdma-sharp-plugins)".to_owned(),
            "NCCL uses it in place of its own InfiniBand/RoCE transport, over the same devices"
                .to_owned(),
        ),
        Kind::Unidentified => (
            "an external network plugin".to_owned(),
            "NCCL uses it before its own transport; gdrdoctor does not know what it decides"
                .to_owned(),
        ),
    };
    let mut f = Finding::pass(
        NET_PLUGIN,
        "network plugin",
        format!(
            "{what} is the network plugin NCCL loads: {} ({}; found through {}): {does}",
            at.real,
            why_this_name(p),
            at.via
        ),
    )
    .with([found_evidence(at)]);
    if let Some(s) = &p.setting {
        f = f.with([s.evidence()]);
    }
    f
}

/// The node's EFA devices and no aws-ofi-nccl for NCCL: it runs over TCP sockets.
fn missing(inv: &Inventory, efa: usize, other: Option<&Found>) -> Finding {
    let p = &inv.nccl.plugin;
    let why = match (&p.state, other) {
        (State::Disabled, _) => "NCCL_NET_PLUGIN=none turns every external plugin off".to_owned(),
        (_, Some(at)) => format!("the plugin NCCL loads, {}, is not aws-ofi-nccl", at.real),
        _ => format!(
            "NCCL finds no network plugin ({}; tried {} in the loader's path)",
            why_this_name(p),
            tried(&p.tried)
        ),
    };
    let fix = match &p.unused_install {
        Some(u) => loader_fix(p, u),
        None => Fix::new(
            "Install aws-ofi-nccl (the EFA installer does, under /opt/amazon/ofi-nccl) where NCCL finds it",
            "Changes the network every NCCL job on the node uses.",
        ),
    };
    // What NCCL's own transport carries instead: the node's other RDMA devices, or sockets.
    let others: Vec<&str> = crate::nccl::effective::carrying(inv)
        .into_iter()
        .map(|i| inv.rdma[i].name.as_str())
        .collect();
    let instead = if others.is_empty() {
        "so NCCL runs over TCP sockets, without GPUDirect RDMA".to_owned()
    } else {
        format!(
            "so NCCL carries its traffic over {} instead (see pcie-placement for what they are)",
            others.join(", ")
        )
    };
    let mut f = Finding::fail(
        NET_PLUGIN_MISSING,
        "network plugin",
        format!(
            "the node's {efa} EFA devices are reachable only through aws-ofi-nccl, and {why}: NCCL's own transport skips EFA (net_ib opens InfiniBand and Ethernet ports only), {instead}"
        ),
    )
    .evidence(
        crate::inventory::rdma::CLASS_INFINIBAND,
        format!("{efa} EFA devices (driver efa)"),
    )
    .fix(fix);
    if let Some(s) = &p.setting {
        f = f.with([s.evidence()]);
    }
    f
}

/// The ld.so.conf.d file that puts an installed aws-ofi-nccl on the loader's path.
const LOADER_CONF: &str = "/etc/ld.so.conf.d/aws-ofi-nccl.conf";

/// aws-ofi-nccl installed where the loader does not look: its directory on the loader's path,
/// which works with every NCCL release. Not `NCCL_NET_PLUGIN=<path>`: NCCL 2.4 to 2.21 make any
/// value X into `libnccl-net-X.so`, so a path names no file there; only 2.22 and later open a
/// path (the release rule in crate::inventory::nccl_plugin). Each command is guarded, so that a
/// second run changes nothing.
fn loader_fix(p: &NetPlugin, u: &UnusedInstall) -> Fix {
    let dir = &u.dir;
    // The names NCCL will try that the directory holds.
    let holds = |name: &str| {
        (name == DEFAULT_PLUGIN && u.default_name)
            || (name == "libnccl-net-ofi.so" && u.library.ends_with("/libnccl-net-ofi.so"))
    };
    let setting_finds = p.tried.iter().any(|c| holds(&c.name));
    let ofi = match &p.setting {
        // libnccl-net.so is missing: every release makes `ofi` into libnccl-net-ofi.so.
        None if !setting_finds => format!(
            "; {dir} has no {DEFAULT_PLUGIN}, the name NCCL opens when NCCL_NET_PLUGIN is unset, so set NCCL_NET_PLUGIN=ofi, which every release makes into libnccl-net-ofi.so"
        ),
        Some(s) if !setting_finds => format!(
            "; NCCL_NET_PLUGIN={} ({}) names {}, none of them in {dir}: set it to ofi{}",
            s.value,
            s.origin.describe(),
            tried(&p.tried),
            if u.default_name { " or remove it" } else { "" }
        ),
        _ => String::new(),
    };
    let mut fix = Fix::new(
        format!(
            "Make NCCL load aws-ofi-nccl, which is installed at {}: name its directory in {LOADER_CONF} and rebuild the loader's cache, which every NCCL release searches{ofi}. Not NCCL_NET_PLUGIN={}: NCCL 2.4 to 2.21 make any value X into libnccl-net-X.so, so a path there names no file",
            u.library, u.library
        ),
        "Changes the network every NCCL job on the node uses; adds one directory to every program's library search.",
    )
    .guarded(
        crate::model::FixClass::Persistent,
        format!("echo {dir} > {LOADER_CONF} && ldconfig"),
        format!("grep -qxF {dir} {LOADER_CONF} 2>/dev/null && ldconfig -p | grep -qF '=> {dir}/'"),
    );
    match &p.setting {
        None if !setting_finds => {
            fix = fix.nccl_conf("NCCL_NET_PLUGIN", "ofi");
        }
        Some(s) if !setting_finds => {
            fix = fix.manual(format!(
                "edit NCCL_NET_PLUGIN where it is set ({}): ofi{}",
                s.origin.describe(),
                if u.default_name { ", or remove it" } else { "" }
            ));
        }
        _ => {}
    }
    fix.manual("ldconfig -p | grep -e libnccl-net -e libfabric")
}

/// libfabric, which aws-ofi-nccl needs to load at all.
fn libfabric(p: &NetPlugin) -> Option<Finding> {
    if p.libfabric.is_some() {
        return None;
    }
    Some(
        Finding::fail(
            NET_PLUGIN_BROKEN,
            "network plugin",
            format!(
                "aws-ofi-nccl needs libfabric.so.1, which is neither in the loader's path nor in {EFA_INSTALLER_LIBFABRIC}/lib: dlopen of the plugin fails (NCCL logs \"NET/Plugin: ... libfabric.so.1: cannot open shared object file\") and NCCL falls back to its own transport"
            ),
        )
        .evidence(EFA_INSTALLER_LIBFABRIC, "<no libfabric.so.1>")
        .fix(
            Fix::new(
                "Install libfabric with the efa provider (the EFA installer puts it in /opt/amazon/efa/lib)",
                "Changes the network every NCCL job on the node uses.",
            )
            .manual("ldconfig -p | grep libfabric"),
        ),
    )
}

/// `1.7.4-aws` -> (1, 7, 4).
fn version(v: &str) -> Option<(u32, u32, u32)> {
    let mut parts = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// The settings aws-ofi-nccl documents (doc/efa-env-var.md) and those libfabric reads that
/// turn GPUDirect RDMA off, as NCCL's environment holds them (NCCL sets nccl.conf's lines as
/// environment variables before it loads the plugin).
fn settings(inv: &Inventory, plugin_version: &str) -> Vec<Finding> {
    let n = &inv.nccl;
    let product = n.plugin.product_name.as_deref().unwrap_or("");
    let p4_p5 = product.starts_with("p4d") || product.starts_with("p5");
    let v = version(plugin_version);
    let mut out = Vec::new();
    let mut bad = |status: Status, name: &str, why: String| {
        let s = n.get(name);
        let subject = s.map_or_else(|| name.to_owned(), |s| format!("{name}={}", s.value));
        let mut f =
            Finding::new(NET_PLUGIN_SETTING, status, subject, why).with(s.map(|s| s.evidence()));
        if s.is_none() {
            f = f.evidence("aws-ofi-nccl doc/efa-env-var.md", format!("{name} not set"));
        }
        out.push(f.fix(
            Fix::new(
                format!("Set or remove {name} as aws-ofi-nccl {plugin_version} needs it (its doc/efa-env-var.md)"),
                "Changes what every NCCL job on the node does over EFA.",
            )
            .manual(format!("grep -n {name} /etc/nccl.conf")),
        ));
    };
    if n.value("FI_HMEM_DISABLE_P2P")
        .is_some_and(|x| x.trim() != "0")
    {
        bad(Status::Fail, "FI_HMEM_DISABLE_P2P", "libfabric never registers GPU memory with the device (efa_hmem.c: ofi_hmem_p2p_disabled), so aws-ofi-nccl reports no GPUDirect RDMA; on the instance types it requires GDR it refuses to start".into());
    }
    if n.value("FI_EFA_USE_DEVICE_RDMA") == Some("0") {
        bad(Status::Warn, "FI_EFA_USE_DEVICE_RDMA", "turns the EFA device's RDMA off: libfabric emulates RDMA over sends, and aws-ofi-nccl's RDMA protocol (p5 and later) refuses emulated writes".into());
    }
    if let Some(pv) = n.value("FI_PROVIDER").filter(|x| *x != "efa") {
        bad(
            Status::Warn,
            "FI_PROVIDER",
            format!(
                "names libfabric provider {pv}: aws-ofi-nccl selects efa only when FI_PROVIDER is unset or efa (src/platform-aws.cpp PlatformAWS::init), so NCCL's traffic may not use EFA"
            ),
        );
    }
    if n.get("RDMAV_FORK_SAFE").is_some() {
        bad(Status::Warn, "RDMAV_FORK_SAFE", "rdma-core's variable, which aws-ofi-nccl's documentation says not to use (FI_EFA_FORK_SAFE is libfabric's): on recent kernels it can break registration".into());
    }
    if let Some((maj, min, patch)) = v {
        let below = |a: u32, b: u32, c: u32| (maj, min, patch) < (a, b, c);
        if p4_p5 && below(1, 7, 0) && n.value("FI_EFA_USE_DEVICE_RDMA") != Some("1") {
            bad(
                Status::Warn,
                "FI_EFA_USE_DEVICE_RDMA",
                format!(
                    "aws-ofi-nccl {plugin_version} (before 1.7.0) needs FI_EFA_USE_DEVICE_RDMA=1 on p4 and p5 instances for GPUDirect RDMA over EFA"
                ),
            );
        }
        if product.starts_with("p5") && below(1, 7, 2) {
            bad(
                Status::Warn,
                "aws-ofi-nccl",
                format!(
                    "aws-ofi-nccl {plugin_version} is older than the 1.7.2 p5.48xlarge needs (doc/efa-env-var.md: recommend 1.7.3 or later)"
                ),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions() {
        assert_eq!(super::version("1.7.4-aws"), Some((1, 7, 4)));
        assert_eq!(super::version("1.14.0"), Some((1, 14, 0)));
        assert_eq!(super::version("x"), None);
    }
}
