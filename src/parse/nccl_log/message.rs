//! The messages after `NCCL INFO`: one function per wording, each citing the NCCL source that
//! prints it and the releases whose wording it matches.

use super::*;

static VIA: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b" via "));

/// Every word of [`GDR_WORDS`] has `DMA`, `NET/` or `PXN` in it: three scans tell most lines
/// apart before the words themselves are looked for.
static GDR_HINTS: LazyLock<[memmem::Finder<'static>; 3]> = LazyLock::new(|| {
    [
        memmem::Finder::new(b"DMA"),
        memmem::Finder::new(b"NET/"),
        memmem::Finder::new(b"PXN"),
    ]
});

fn about_gdr(m: &str) -> bool {
    GDR_HINTS.iter().any(|f| f.find(m.as_bytes()).is_some())
        && GDR_WORDS.iter().any(|w| m.contains(w))
}

/// Words that put a line about GDR or the network: one NCCL does not phrase the way this
/// parser knows is reported as unrecognised, not silently dropped.
const GDR_WORDS: &[&str] = &[
    "GPU Direct RDMA",
    "GDRDMA",
    "via NET/",
    "DMA-BUF is",
    "use ring PXN",
];

pub(super) fn classify(m: &str) -> (Event<'_>, Era) {
    let parsed = match m.as_bytes().first() {
        Some(b'C') if m.starts_with("Channel ") => connection(m),
        Some(b'R') if m.starts_with("Ring ") => connection(m),
        Some(b'N') if m.starts_with("NET/") => net(m),
        Some(b'N') if m.starts_with("NCCL version ") => version(m).map(|e| (e, Era::ANY)),
        Some(b'N') if m.starts_with("NCCL_") => env(m).map(|e| (e, Era::ANY)),
        Some(b'R') if m.starts_with("RCCL version") => version(m).map(|e| (e, Era::ANY)),
        Some(b'R') if m.starts_with("ROCr version ") => Some((Event::Rocr, Era::ANY)),
        Some(b'G') if m.starts_with("GPU Direct RDMA ") => gpu_gdr(m, None),
        Some(b'G') if m.starts_with("GPU/") => gpu_paths(m),
        Some(b'U') if m.starts_with("Using network ") => Some((
            Event::Network {
                name: m["Using network ".len()..].trim(),
            },
            // src/init.cc `initNet`, 2.6+.
            Era::since(6),
        )),
        // src/plugin/net.cc, 2.27+: the network a communicator got, and each one NCCL
        // initialized.
        Some(b'A') if m.starts_with("Assigned NET plugin ") => Some((
            Event::Network {
                name: m["Assigned NET plugin ".len()..]
                    .trim()
                    .trim_end_matches(" to comm")
                    .trim(),
            },
            Era::since(27),
        )),
        Some(b'I') if m.starts_with("Initialized NET plugin ") => {
            Some((Event::Other, Era::since(27)))
        }
        Some(b'C') if m.starts_with("CUDA Dev ") => nic_distance(m),
        Some(b'C') if m.starts_with("Connected all rings, use ring PXN ") => rings_gdr(m),
        Some(b'C') if m.starts_with("Current version of ROCm does not support dmabuf") => {
            Some((Event::RcclDmabufOff { text: m }, Era::ANY))
        }
        Some(b'D') if m.starts_with("DMA-BUF is available on GPU device ") => m
            ["DMA-BUF is available on GPU device ".len()..]
            .trim()
            .parse()
            .ok()
            // src/init.cc `dmaBufSupported`, 2.13+.
            .map(|d| (Event::DmaBufAvailable { cuda_dev: d }, Era::since(13))),
        Some(b'D') if m.starts_with("Dmabuf feature disabled without ") => {
            Some((Event::RcclDmabufOff { text: m }, Era::ANY))
        }
        // src/plugin/net.cc, 2.28+ (INFO; before, only `Failed to initialize any NET plugin`).
        Some(b'F') if m.starts_with("Failed to initialize NET plugin ") => Some((
            Event::NetInitFailed {
                name: m["Failed to initialize NET plugin ".len()..].trim(),
            },
            Era::since(28),
        )),
        Some(b'F') if m.starts_with("Failed to open libibverbs") => {
            Some((Event::NoVerbs, Era::ANY))
        }
        Some(b'F') if m.starts_with("Found /") && m.contains("memory_peers/amdkfd") => Some((
            Event::PeerMemFound {
                path: m["Found ".len()..].trim(),
            },
            Era::ANY,
        )),
        Some(b'P') if m.starts_with("P2P plugin ") => Some((
            // HPC-X's nccl-rdma-sharp-plugins, src/ib_plugin.c: `P2P plugin %s`.
            Event::Plugin {
                name: m["P2P plugin ".len()..].trim(),
            },
            Era::ANY,
        )),
        Some(b'c') | Some(b'n') if m.starts_with("comm ") || m.starts_with("ncclCommInit") => {
            comm_init(m)
        }
        _ => None,
    };
    match parsed {
        Some(p) => p,
        None if about_gdr(m) => (Event::Unrecognised, Era::ANY),
        None => (Event::Other, Era::ANY),
    }
}

fn version(m: &str) -> Option<Event<'_>> {
    super::version(m)
}

/// `NET/<name> : ...`: devices, GDR per HCA, the 2.4-2.5 per-GPU GDR lines, plugins.
fn net(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = &m["NET/".len()..];
    // aws-ofi-nccl prints `NET/OFI <text>` with no colon (src/nccl_ofi_ofiutils.cpp).
    if let Some(text) = rest.strip_prefix("OFI ") {
        return Some(
            if text.contains("disabling GDR") || text.contains("GDR disabled") {
                (Event::PluginGdrOff { text: m }, Era::ANY)
            } else {
                (Event::Plugin { name: OFI_PLUGIN }, Era::ANY)
            },
        );
    }
    let (net, what) = rest.split_once(" : ").or_else(|| rest.split_once(": "))?;
    let net = net.trim();
    if let Some(devs) = what.strip_prefix("Using") {
        return Some((
            Event::NetDevices {
                net,
                devices: net_devices(net, devs),
            },
            Era::ANY,
        ));
    }
    if what.starts_with("No device found") {
        return Some((Event::NoDevice { net }, Era::ANY));
    }
    if what.starts_with("GPU Direct RDMA ") {
        return hca_gdr(net, what).or_else(|| gpu_gdr(what, Some(net)));
    }
    if what.contains(" qpn ") {
        return qp_gid(what);
    }
    Some((Event::Other, Era::ANY))
}

/// aws-ofi-nccl's name for itself (it prints `NET/OFI ...` lines: src/nccl_ofi_net.cpp).
pub const OFI_PLUGIN: &str = "aws-ofi-nccl";

/// A queue pair's line (src/transport/net_ib.cc, NET subsystem): `Dev 0 Port 1 qpn 1047 mtu 5
/// GID 3 (0/A0A0A0AFFFF0000)` (2.12-2.18); `... query_ece={...} GID ...` (2.19); `NCCL Dev 0
/// IbDev 0 Port 1 qpn ...` (2.20 and later). Lines without a GID (InfiniBand: `LID 4`) only
/// date the log.
fn qp_gid(what: &str) -> Option<(Event<'_>, Era)> {
    let era = if what.starts_with("NCCL Dev ") || what.contains(" IbDev ") {
        Era::since(20)
    } else if what.contains("query_ece=") {
        Era::minors(19, 20)
    } else {
        Era::ANY
    };
    let dev = what
        .strip_prefix("NCCL Dev ")
        .or_else(|| what.strip_prefix("Dev "))
        .and_then(|r| r.split_ascii_whitespace().next())
        .unwrap_or("?");
    let Some((_, gid)) = what.split_once(" GID ") else {
        return Some((Event::Other, era));
    };
    let (index, rest) = gid.split_once(" (")?;
    let (prefix, _) = rest.split_once('/')?;
    Some((
        Event::QpGid {
            dev,
            index: index.trim().parse().ok()?,
            prefix,
        },
        era,
    ))
}

/// `[0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB ...` or `[0]ib0:192.168.11.1<0>`.
fn net_devices<'a>(net: &str, list: &'a str) -> Vec<NetDevice<'a>> {
    let list = list.split(';').next().unwrap_or(list);
    let mut out = Vec::new();
    for word in list.split_ascii_whitespace() {
        let Some((index, rest)) = word
            .strip_prefix('[')
            .and_then(|w| w.split_once(']'))
            .and_then(|(i, r)| Some((i.parse::<u32>().ok()?, r)))
        else {
            continue;
        };
        if rest.is_empty() {
            continue;
        }
        let dev = if net == "Socket" {
            // src/transport/net_socket.cc: `[%d]%s:%s` (interface, address).
            match rest.split_once(':') {
                Some((name, addr)) => NetDevice {
                    index,
                    name,
                    port: None,
                    link: Some(addr),
                },
                None => NetDevice {
                    index,
                    name: rest,
                    port: None,
                    link: None,
                },
            }
        } else {
            // src/transport/net_ib.cc: `[%d]%s:%d/%s` (device, port, IB or RoCE).
            let (name, after) = rest.split_once(':').unwrap_or((rest, ""));
            let (port, link) = after.split_once('/').unwrap_or((after, ""));
            NetDevice {
                index,
                name,
                port: port.parse().ok(),
                link: (!link.is_empty()).then_some(link),
            }
        };
        out.push(dev);
    }
    out
}

/// The per-HCA line.
///
/// - 2.4 src/transport/net_ib.cc: `NET/IB : GPU Direct RDMA Disabled for GPU %d[%d] / HCA %d
///   '%s' (no module or not supported by GPU)`
/// - 2.5-2.12 src/transport/net_ib.cc: `NET/IB : GPU Direct RDMA Disabled for HCA %d '%s' (no
///   module)`
/// - 2.13+ src/graph/topo.cc `ncclTopoPopulateNics` (and earlier `ncclTopoGetSystem`):
///   `NET/%s : GPU Direct RDMA %s for HCA %d '%s'` (Enabled or Disabled)
/// - HPC-X nccl-rdma-sharp-plugins src/p2p_plugin.c: `NET/IB : GPU Direct RDMA
///   (nvidia-peermem) enabled for HCA %d '%s` and `(DMABUF) enabled` (no closing quote)
fn hca_gdr<'a>(net: &'a str, what: &'a str) -> Option<(Event<'a>, Era)> {
    let rest = what.strip_prefix("GPU Direct RDMA ")?;
    let (enabled, plugin_via, rest) = if let Some(r) = rest.strip_prefix("Enabled for ") {
        (true, None, r)
    } else if let Some(r) = rest.strip_prefix("Disabled for ") {
        (false, None, r)
    } else if let Some(r) = rest.strip_prefix("(nvidia-peermem) enabled for ") {
        (true, Some(HcaVia::PeerMem), r)
    } else if let Some(r) = rest.strip_prefix("(DMABUF) enabled for ") {
        (true, Some(HcaVia::DmaBuf), r)
    } else {
        return None;
    };
    // 2.4: per GPU, with the HCA's name.
    let (gpu, rest) = match rest.strip_prefix("GPU ") {
        Some(r) => {
            let (g, r) = r.split_once(" / ")?;
            (Some(g), r)
        }
        None => (None, rest),
    };
    let rest = rest.strip_prefix("HCA ")?;
    let (index, rest) = rest.split_once(' ')?;
    let index = index.parse().ok()?;
    let rest = rest.strip_prefix('\'')?;
    // A quoted line may carry the quoter's own quote after NCCL's (`'mlx5_0''`).
    let (name, suffix) = match rest.split_once('\'') {
        Some((n, s)) => (n, s.trim().trim_matches('\'')),
        None => (rest.trim_end(), ""),
    };
    let (via, era) = match (plugin_via, suffix, gpu) {
        (Some(v), _, _) => (v, Era::ANY),
        (None, "(no module or not supported by GPU)", Some(_)) => {
            (HcaVia::NoModuleOrGpu, Era::minors(4, 5))
        }
        (None, "(no module)", None) => (HcaVia::NoModule, Era::minors(5, 13)),
        (None, "", None) => (HcaVia::Unstated, Era::since(13)),
        _ => return None,
    };
    Some((
        Event::HcaGdr {
            net,
            enabled,
            index,
            name,
            via,
            gpu,
        },
        era,
    ))
}

/// The per GPU-NIC line with the distance (NET subsystem; GRAPH too from 2.27).
///
/// - 2.4 src/transport/net.cc `netGetGdrSupport`: `NET/%s : GPU Direct RDMA Disabled for GPU
///   %d[%d] / HCA %d (distance %d >= %d)`; `Enabled ... (distance %d < %d), read %d`
/// - 2.5 src/transport/net.cc: the same with `GPU %lx` (the bus id)
/// - 2.6-2.20 src/graph/paths.cc `ncclTopoCheckGdr`: `GPU Direct RDMA Disabled for GPU %lx /
///   HCA %d (distance %d > %d)`; `Enabled ... (distance %d <= %d), read %d`
/// - 2.21-2.23: `GPU %lx / HCA %lx` (a net id); 2.24-2.28: `GPU %d / HCA %lx` (the rank);
///   2.26-2.28 append ` mode %s` to the enabled line
/// - 2.29: `GPU Direct RDMA Disabled for GPU/%ld-%ld (rank %d) - NET/%ld-%ld ([ using PXN via
///   GPU/%ld-%ld, ]distance %d > %d)`; `Enabled ... (distance %d <= %d, read %d, mode %s)`
/// - 2.30: printed at TRACE level only, so never in an INFO log.
fn gpu_gdr<'a>(m: &'a str, net: Option<&'a str>) -> Option<(Event<'a>, Era)> {
    let rest = m.strip_prefix("GPU Direct RDMA ")?;
    let (enabled, rest) = if let Some(r) = rest.strip_prefix("Enabled for ") {
        (true, r)
    } else if let Some(r) = rest.strip_prefix("Disabled for ") {
        (false, r)
    } else {
        return None;
    };
    if let Some(r) = rest.strip_prefix("GPU/") {
        return gpu_gdr_229(enabled, r);
    }
    let rest = rest.strip_prefix("GPU ")?;
    let (gpu, rest) = rest.split_once(" / HCA ")?;
    let (hca, rest) = rest.split_once(" (distance ")?;
    let mut words = rest.split_ascii_whitespace();
    let distance: u32 = words.next()?.parse().ok()?;
    let op = words.next()?;
    let level_word = words.next()?;
    let level: u32 = level_word.trim_end_matches([')', ',']).parse().ok()?;
    let inclusive = match (enabled, op) {
        (false, ">=") | (true, "<") => true,
        (false, ">") | (true, "<=") => false,
        _ => return None,
    };
    let tail = rest.split_once(')').map(|(_, t)| t).unwrap_or("");
    let read = tail
        .split_once("read ")
        .and_then(|(_, r)| r.split_ascii_whitespace().next())
        .and_then(|r| r.trim_end_matches(',').parse::<u32>().ok())
        .map(|r| r != 0);
    let mode = tail
        .split_once("mode ")
        .and_then(|(_, r)| r.split_ascii_whitespace().next());
    let era = if inclusive {
        // `GPU %d[%d]` in 2.4, `GPU %lx` in 2.5; both print `NET/x : ` first.
        if gpu.contains('[') {
            Era::minors(4, 5)
        } else {
            Era::minors(5, 6)
        }
    } else if net.is_some() {
        return None;
    } else if mode.is_some() {
        Era::new(Version::new(2, 26, 0), Version::new(2, 29, 0))
    } else if looks_like_bus_id(gpu) {
        Era::minors(6, 24)
    } else {
        Era::minors(24, 29)
    };
    Some((
        Event::GpuGdr(GpuGdr {
            enabled,
            gpu,
            hca: hca.trim(),
            distance,
            level,
            inclusive,
            read,
            mode,
            pxn_via: None,
        }),
        era,
    ))
}

/// 2.29's form, after `GPU/`: `0-1b000 (rank 3) - NET/0-0 (distance 7 > 5)`.
fn gpu_gdr_229(enabled: bool, r: &str) -> Option<(Event<'_>, Era)> {
    let (gpu_id, rest) = r.split_once(" - NET/")?;
    let (hca, rest) = rest.split_once(" (")?;
    let (pxn_via, rest) = match rest.trim_start().strip_prefix("using PXN via GPU/") {
        Some(p) => {
            let (via, r) = p.split_once(", ")?;
            (Some(via), r)
        }
        None => (None, rest.trim_start()),
    };
    let rest = rest.strip_prefix("distance ")?;
    let mut words = rest.split_ascii_whitespace();
    let distance = words.next()?.parse().ok()?;
    let op = words.next()?;
    let level = words.next()?.trim_end_matches([')', ',']).parse().ok()?;
    match (enabled, op) {
        (false, ">") | (true, "<=") => {}
        _ => return None,
    }
    let read = rest
        .split_once("read ")
        .and_then(|(_, x)| x.split([',', ')']).next())
        .and_then(|x| x.trim().parse::<u32>().ok())
        .map(|x| x != 0);
    let mode = rest
        .split_once("mode ")
        .and_then(|(_, x)| x.split(')').next())
        .map(str::trim);
    Some((
        Event::GpuGdr(GpuGdr {
            enabled,
            gpu: gpu_id.trim(),
            hca: hca.trim(),
            distance,
            level,
            inclusive: false,
            read,
            mode,
            pxn_via,
        }),
        Era::minors(29, 30),
    ))
}

/// A PCI bus id as NCCL prints it (`%lx`: `1a000`, `ca000`), as opposed to a rank or CUDA
/// device number: hexadecimal, with the function's `000` at the end.
fn looks_like_bus_id(s: &str) -> bool {
    s.len() >= 4 && s.ends_with("000") && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// 2.4 src/transport/net.cc `netGetDevices`... `CUDA Dev %d[%d], %s NIC distance : ` then one
/// ` %s` per NIC from `pathDists` (PIX PXB PHB NODE SYS).
fn nic_distance(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("CUDA Dev ")?;
    let (gpu, rest) = rest.split_once(", ")?;
    let (net, levels) = rest.split_once(" NIC distance :")?;
    Some((
        Event::NicDistance {
            gpu,
            net: net.trim(),
            levels: levels.split_ascii_whitespace().collect(),
        },
        Era::minors(3, 6),
    ))
}

/// The connection lines of src/transport/net.cc (`send`/`recv` setup):
///
/// - 2.4: `Ring %02d : %d -> %d [send] via NET/%s/%d%s`
/// - 2.5-2.6: `Ring %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s`
/// - 2.7: `Channel %02d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d%s`; 2.8-2.11 add `/Shared`
/// - 2.12-2.17: `Channel %02d/%d : %d[%lx] -> %d[%lx] [send] via NET/%s/%d(%d)%s%s` (the
///   proxy rank in parentheses for PXN)
/// - 2.18+: `%d[%d]` (the NVML device instead of the bus id); 2.26+ add `(PCI)`
///
/// The suffixes are `/GDRDMA`, then `(PCI)`, then `/Shared`.
fn connection(m: &str) -> Option<(Event<'_>, Era)> {
    let via = VIA.find(m.as_bytes())?;
    let target = m[via + 5..].trim_end();
    let Some(target) = target.strip_prefix("NET/") else {
        // P2P, SHM, COLLNET: not a NET connection.
        return Some((Event::IntraNode, Era::ANY));
    };
    let head = &m[..via];
    let (word, rest) = head.split_once(' ')?;
    let (chan, rest) = rest.split_once(" : ")?;
    let (channel, conn_index) = match chan.split_once('/') {
        Some((c, i)) => (c.parse().ok()?, Some(i.parse::<u32>().ok()?)),
        None => (chan.parse().ok()?, None),
    };
    let (conn, era) = pair(rest, target)?;
    let era = match (word, conn_index, conn.from_dev) {
        ("Ring", _, None) => Era::minors(3, 5),
        ("Ring", _, Some(_)) => Era::minors(5, 7),
        ("Channel", None, _) => Era::minors(7, 12),
        ("Channel", Some(_), Some(d)) if looks_like_bus_id(d) => Era::minors(12, 18),
        ("Channel", Some(_), _) => Era::since(18),
        _ => return None,
    }
    .intersect(era)?;
    Some((
        Event::Connection(Connection {
            channel: Some(channel),
            ..conn
        }),
        era,
    ))
}

/// A connection body quoted without its `Channel NN :` head: `9[1a000] -> 2[6b000] [send] via
/// NET/IB/0/GDRDMA` (NVIDIA/nccl#897). The bracket tells the releases as the full line does:
/// a bus id 2.5-2.17, a device number 2.18 and later, none 2.4.
pub(super) fn headless_connection(m: &str) -> Option<(Event<'_>, Era)> {
    let via = VIA.find(m.as_bytes())?;
    let target = m[via + 5..].trim_end().strip_prefix("NET/")?;
    let (conn, era) = pair(&m[..via], target)?;
    let era = match conn.from_dev {
        None => Era::minors(3, 5),
        Some(d) if looks_like_bus_id(d) => Era::minors(5, 18),
        Some(_) => Era::since(18),
    }
    .intersect(era)?;
    Some((Event::Connection(conn), era))
}

/// `a[x] -> b[y] [send]` and the target after `via NET/`: the connection without its channel,
/// and the releases its suffixes allow (`(PCI)` is 2.26+).
fn pair<'a>(rest: &'a str, target: &'a str) -> Option<(Connection<'a>, Era)> {
    let (from, rest) = rest.split_once(" -> ")?;
    let (to, dir) = rest.rsplit_once(' ')?;
    let dir = match dir {
        "[send]" => Dir::Send,
        "[receive]" => Dir::Receive,
        _ => return None,
    };
    let (from, from_dev) = rank_and_dev(from)?;
    let (to, to_dev) = rank_and_dev(to.trim())?;
    let mut t = target;
    let shared = strip_end(&mut t, "/Shared");
    let pci = strip_end(&mut t, "(PCI)");
    let gdr = strip_end(&mut t, "/GDRDMA");
    let (net, dev) = t.rsplit_once('/')?;
    let (dev, proxy) = match dev.strip_suffix(')').and_then(|d| d.split_once('(')) {
        Some((d, p)) => (d.parse().ok()?, Some(p.parse().ok()?)),
        None => (dev.parse().ok()?, None),
    };
    let era = if pci { Era::since(26) } else { Era::ANY };
    Some((
        Connection {
            channel: None,
            from,
            to,
            from_dev,
            to_dev,
            dir,
            net,
            dev,
            proxy,
            gdr,
            pci,
            shared,
        },
        era,
    ))
}

fn strip_end(s: &mut &str, suffix: &str) -> bool {
    match s.strip_suffix(suffix) {
        Some(rest) => {
            *s = rest;
            true
        }
        None => false,
    }
}

/// A GPU's paths (src/graph/paths.cc `printNodePaths`, called by `ncclTopoPrintPaths` after
/// NCCL computed and trimmed its topology; INFO under NCCL_DEBUG_SUBSYS=GRAPH):
///
/// - 2.6-2.20: `%s/%lX :` then ` %s/%lX (%d/%f/%s)` per node (`GPU/49000 :... NET/2
///   (4/24.000000/PXB)`)
/// - 2.21-2.22: the header as before, the entries `%s/%lx-%lx (%d/%.1f/%s)` (system id and
///   local id: `GPU/5000 :GPU/0-4000 (2/370.8/NVL) ... NET/0-1 (5/24.0/PHB)`)
/// - 2.23 on: the header `%s/%lx-%lx :` too (`GPU/0-60 :GPU/0-60 (0/5000.0/LOC) ...`)
///
/// 2.5 printed the path type as a number (`%d/%d/%d`): not read, as its numbering is not the
/// distance numbering of the GDR lines. NCCL cuts the line at 1024 bytes; the entries before a
/// cut are kept.
fn gpu_paths(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("GPU/")?;
    let (gpu, list) = rest.split_once(" :")?;
    if gpu.is_empty() || !gpu.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
        return None;
    }
    let mut paths = Vec::new();
    let mut truncated = false;
    let mut words = list.split_ascii_whitespace();
    while let Some(target) = words.next() {
        let entry = (|| {
            let (kind, id) = target.split_once('/')?;
            let inner = words.next()?.strip_prefix('(')?.strip_suffix(')')?;
            let mut fields = inner.split('/');
            let hops = fields.next()?.parse().ok()?;
            let bw = fields.next()?.parse().ok()?;
            let path = fields.next()?;
            let named = !path.is_empty() && path.bytes().all(|b| b.is_ascii_uppercase());
            (fields.next().is_none() && named && !kind.is_empty()).then_some(PathTo {
                kind,
                id,
                hops,
                bw,
                path,
            })
        })();
        match entry {
            Some(e) => paths.push(e),
            None => {
                truncated = true;
                break;
            }
        }
    }
    if paths.is_empty() {
        return None;
    }
    let era = match (gpu.contains('-'), paths.iter().any(|p| p.id.contains('-'))) {
        (true, _) => Era::since(23),
        (false, true) => Era::minors(21, 23),
        (false, false) => Era::minors(6, 21),
    };
    Some((
        Event::GpuPaths {
            gpu,
            paths,
            truncated,
        },
        era,
    ))
}

/// `3[3]`, `3[1a000]` or `3`.
fn rank_and_dev(s: &str) -> Option<(u32, Option<&str>)> {
    match s.split_once('[') {
        Some((r, d)) => Some((r.trim().parse().ok()?, Some(d.strip_suffix(']')?))),
        None => Some((s.trim().parse().ok()?, None)),
    }
}

fn rings_gdr(m: &str) -> Option<(Event<'_>, Era)> {
    let rest = m.strip_prefix("Connected all rings, use ring PXN ")?;
    let (pxn, gdr) = rest.split_once(" GDR ")?;
    Some((
        Event::RingsGdr {
            pxn: pxn.trim().parse().ok()?,
            gdr: gdr.trim().parse().ok()?,
        },
        Era::since(24),
    ))
}

/// `NCCL_X set by environment to V` (src/include/param.h, src/misc/param.cc, ncclGetLevel in
/// src/graph/paths.cc; integers end with a dot) and `NCCL_IB_HCA set to V` (net_ib.cc).
fn env(m: &str) -> Option<Event<'_>> {
    let (name, rest) = m.split_once(' ')?;
    if !name
        .bytes()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    {
        return None;
    }
    let value = rest
        .strip_prefix("set by environment to ")
        .or_else(|| rest.strip_prefix("set to "))?
        .trim();
    let value = value.strip_suffix('.').unwrap_or(value);
    Some(Event::Env { name, value })
}

/// The words of `s` as [`str::split_ascii_whitespace`] cuts them, found byte by byte: the
/// communicator lines, one per rank and communicator and each different, are cut into some
/// twenty words each (issue 43).
pub(super) fn ascii_words(s: &str) -> impl Iterator<Item = &str> {
    // A byte above the space is never ASCII whitespace: one comparison for nearly every byte.
    let space = |b: u8| b <= b' ' && b.is_ascii_whitespace();
    let b = s.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < b.len() && space(b[at]) {
            at += 1;
        }
        let start = at;
        while at < b.len() && !space(b[at]) {
            at += 1;
        }
        // Both ends are at an ASCII byte or an end of `s`: character boundaries.
        s.get(start..at).filter(|w| !w.is_empty())
    })
}

/// `comm 0x55cc8aa86c70 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1c000 commId 0x... - Init
/// START` and its variants (src/init.cc).
fn comm_init(m: &str) -> Option<(Event<'_>, Era)> {
    comm_init_words(ascii_words(m))
}

/// [`comm_init`] of a line already cut into words (a test cuts it with the standard library's
/// splitter, to compare).
pub(super) fn comm_init_words<'a>(
    mut words: impl Iterator<Item = &'a str>,
) -> Option<(Event<'a>, Era)> {
    // One pass over the words, `key value` pairs: the first of each key counts.
    let (mut rank, mut nranks, mut cuda_dev, mut bus_id) = (None, None, None, None);
    let mut nnodes = None;
    let mut prev = words.next()?;
    for w in words {
        // Every key is 4 to 7 bytes long: the other words are passed over at once.
        if (4..=7).contains(&prev.len()) {
            match prev {
                "rank" if rank.is_none() => rank = w.parse().ok(),
                "nranks" | "nRanks" if nranks.is_none() => nranks = w.parse().ok(),
                "cudaDev" if cuda_dev.is_none() => cuda_dev = w.parse().ok(),
                "busId" if bus_id.is_none() => bus_id = Some(w),
                "nNodes" if nnodes.is_none() => nnodes = w.parse().ok(),
                _ => {}
            }
        }
        prev = w;
    }
    Some((
        Event::CommInit {
            rank: rank?,
            nranks: nranks?,
            cuda_dev,
            bus_id,
            nnodes,
        },
        // src/init.cc prints `nNodes` from 2.20.
        if nnodes.is_some() {
            Era::since(20)
        } else {
            Era::ANY
        },
    ))
}
