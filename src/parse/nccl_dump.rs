//! NCCL's topology as it dumped it (`NCCL_TOPO_DUMP_FILE`, written by src/graph/xml.cc
//! `ncclTopoDumpXmlToFile`): which GPUs and NICs NCCL found, where in the PCI tree, and the
//! GPU-NIC distance that follows from the tree by NCCL's own rule (src/graph/paths.cc: PIX
//! through one PCI switch, PXB through several, PHB through the CPU, SYS across CPUs).
//!
//! Only what `nccl verify` compares is read: `<cpu numaid=...>`, `<pci busid=...>`,
//! `<gpu dev=... rank=... gdr=...>` and `<net name=... dev=... port=... gdr=...>`. The file is
//! NCCL's own output in gdrdoctor's own directory; anything else in it is skipped.

use std::collections::BTreeMap;

/// Where a device hangs in the tree: its CPU (NUMA domain) and the `<pci>` nodes above it,
/// outermost first, its own last.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Place {
    pub cpu: Option<String>,
    pub pci: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpGpu {
    /// The bus id of its own `<pci>` node, lower case as NCCL writes it.
    pub bus_id: Option<String>,
    pub rank: Option<u32>,
    /// `gdr="1"`: NCCL considers the GPU able to do GPUDirect RDMA.
    pub gdr: Option<bool>,
    pub place: Place,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpNet {
    pub name: String,
    pub dev: Option<u32>,
    pub port: Option<u32>,
    /// `gdr="1"`: NCCL enabled GPUDirect RDMA on this NIC.
    pub gdr: Option<bool>,
    /// The bus id of the `<pci>` node its `<nic>` sits in; none for a NIC without a PCI device
    /// of its own (a virtual interface, NCCL hangs it on the CPU).
    pub bus_id: Option<String>,
    pub place: Place,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dump {
    pub gpus: Vec<DumpGpu>,
    pub nets: Vec<DumpNet>,
}

/// `key="value"` pairs of one tag's text (after its name).
fn attributes(text: &str) -> BTreeMap<&str, &str> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while let Some(eq) = rest.find("=\"") {
        let key = rest[..eq].trim();
        let after = &rest[eq + 2..];
        let Some(end) = after.find('"') else { break };
        if !key.is_empty() && !key.contains(char::is_whitespace) {
            out.insert(key, &after[..end]);
        }
        rest = &after[end + 1..];
    }
    out
}

/// Reads a dump; `None` when it holds no `<system>` (not NCCL's topology).
pub fn parse(text: &str) -> Option<Dump> {
    if !text.contains("<system") {
        return None;
    }
    let mut dump = Dump::default();
    // The open elements: name and, for cpu and pci, the attribute that identifies them.
    let mut stack: Vec<(String, Option<String>)> = Vec::new();
    let place = |stack: &[(String, Option<String>)]| Place {
        cpu: stack
            .iter()
            .rev()
            .find(|(n, _)| n == "cpu")
            .and_then(|(_, id)| id.clone()),
        pci: stack
            .iter()
            .filter(|(n, _)| n == "pci")
            .filter_map(|(_, id)| id.clone())
            .collect(),
    };
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        let Some(close) = rest[open..].find('>') else {
            break;
        };
        let tag = &rest[open + 1..open + close];
        rest = &rest[open + close + 1..];
        if tag.starts_with('?') || tag.starts_with('!') {
            continue;
        }
        if let Some(name) = tag.strip_prefix('/') {
            if let Some(i) = stack.iter().rposition(|(n, _)| n == name.trim()) {
                stack.truncate(i);
            }
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let (name, attrs) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
        let attrs = attributes(attrs);
        let num = |k: &str| attrs.get(k).and_then(|v| v.trim().parse::<u32>().ok());
        let flag = |k: &str| attrs.get(k).map(|v| v.trim() == "1");
        match name {
            "gpu" => {
                let p = place(&stack);
                dump.gpus.push(DumpGpu {
                    bus_id: p.pci.last().map(|b| b.to_ascii_lowercase()),
                    rank: num("rank"),
                    gdr: flag("gdr"),
                    place: p,
                });
            }
            "net" => {
                let p = place(&stack);
                // A `<nic>` inside a `<pci>` is that device's; one straight under a CPU has none.
                let own_pci = stack.iter().rev().nth(1).is_some_and(|(n, _)| n == "pci")
                    && stack.last().is_some_and(|(n, _)| n == "nic");
                dump.nets.push(DumpNet {
                    name: attrs.get("name").copied().unwrap_or("").to_owned(),
                    dev: num("dev"),
                    port: num("port"),
                    gdr: flag("gdr"),
                    bus_id: if own_pci {
                        p.pci.last().map(|b| b.to_ascii_lowercase())
                    } else {
                        None
                    },
                    place: p,
                });
            }
            _ => {}
        }
        if !self_closing {
            let id = match name {
                "cpu" => attrs.get("numaid").map(|s| (*s).to_owned()),
                "pci" => attrs.get("busid").map(|s| (*s).to_owned()),
                _ => None,
            };
            stack.push((name.to_owned(), id));
        }
    }
    Some(dump)
}

/// The distance NCCL's tree gives a GPU and a NIC: `PIX` (one PCI switch between them), `PXB`
/// (several), `PHB` (through their CPU), `SYS` (across CPUs). The devices' own `<pci>` nodes are
/// not switches; a NIC without a PCI device of its own hangs on the CPU (PHB).
pub fn level(gpu: &DumpGpu, net: &DumpNet) -> &'static str {
    if gpu.place.cpu.is_none() || gpu.place.cpu != net.place.cpu {
        return "SYS";
    }
    let above = |p: &Place, own: bool| -> Vec<String> {
        let n = p.pci.len().saturating_sub(usize::from(own));
        p.pci[..n].to_vec()
    };
    let g = above(&gpu.place, gpu.bus_id.is_some());
    let n = above(&net.place, net.bus_id.is_some());
    let shared = g.iter().zip(&n).take_while(|(a, b)| a == b).count();
    if shared == 0 {
        return "PHB";
    }
    // The switches on the way: each side's below the shared one, and the shared one itself.
    if (g.len() - shared) + (n.len() - shared) + 1 == 1 {
        "PIX"
    } else {
        "PXB"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of a dump of an 8-GPU node (GPU and NIC under one switch), abridged from NCCL
    /// 2.2x output published with NVIDIA/nccl issues.
    const DUMP: &str = r#"<system version="1">
  <cpu host_hash="0x9f1c" numaid="0" affinity="ffffffff,00000000" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:15:01.0" class="0x060400" vendor="0x1000" device="0xc030" subsystem_vendor="0x1000" subsystem_device="0x100b" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="0" sm="90" rank="0" gdr="1">
          <nvlink target="0000:f4:00.0" count="5" tclass="0x068000"/>
        </gpu>
      </pci>
      <pci busid="0000:19:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
        <nic>
          <net name="mlx5_0" dev="0" speed="400000" port="1" latency="0.000000" guid="0xa87cb10003e1a258" maxconn="131072" gdr="1"/>
        </nic>
      </pci>
    </pci>
    <pci busid="0000:27:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
      <pci busid="0000:28:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">
        <pci busid="0000:29:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
          <nic>
            <net name="mlx5_1" dev="1" speed="400000" port="1" latency="0.000000" guid="0x6c35" maxconn="131072" gdr="0"/>
          </nic>
        </pci>
      </pci>
      <pci busid="0000:2A:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">
        <gpu dev="1" sm="90" rank="1" gdr="1"/>
      </pci>
    </pci>
    <nic>
      <net name="eth0" dev="2" speed="10000" port="0" latency="0.000000" maxconn="65536" gdr="0"/>
    </nic>
  </cpu>
  <cpu host_hash="0x9f1c" numaid="1" affinity="00000000,ffffffff" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">
    <pci busid="0000:9a:00.0" class="0x020000" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">
      <nic>
        <net name="mlx5_4" dev="4" speed="400000" port="1" latency="0.000000" guid="0x11" maxconn="131072" gdr="1"/>
      </nic>
    </pci>
  </cpu>
</system>
"#;

    #[test]
    fn devices_and_their_places() {
        let d = parse(DUMP).unwrap();
        let gpus: Vec<(Option<&str>, Option<u32>, Option<bool>)> = d
            .gpus
            .iter()
            .map(|g| (g.bus_id.as_deref(), g.rank, g.gdr))
            .collect();
        assert_eq!(
            gpus,
            [
                (Some("0000:18:00.0"), Some(0), Some(true)),
                (Some("0000:2a:00.0"), Some(1), Some(true))
            ]
        );
        type Seen<'a> = (&'a str, Option<&'a str>, Option<bool>, Option<&'a str>);
        let nets: Vec<Seen> = d
            .nets
            .iter()
            .map(|n| {
                (
                    n.name.as_str(),
                    n.bus_id.as_deref(),
                    n.gdr,
                    n.place.cpu.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            nets,
            [
                ("mlx5_0", Some("0000:19:00.0"), Some(true), Some("0")),
                ("mlx5_1", Some("0000:29:00.0"), Some(false), Some("0")),
                ("eth0", None, Some(false), Some("0")),
                ("mlx5_4", Some("0000:9a:00.0"), Some(true), Some("1")),
            ]
        );
    }

    #[test]
    fn levels_by_nccls_rule() {
        let d = parse(DUMP).unwrap();
        let (g0, g1) = (&d.gpus[0], &d.gpus[1]);
        let net = |name: &str| d.nets.iter().find(|n| n.name == name).unwrap();
        assert_eq!(level(g0, net("mlx5_0")), "PIX");
        assert_eq!(level(g1, net("mlx5_1")), "PXB");
        assert_eq!(level(g0, net("mlx5_1")), "PHB");
        assert_eq!(level(g0, net("eth0")), "PHB");
        assert_eq!(level(g0, net("mlx5_4")), "SYS");
    }

    #[test]
    fn not_a_dump_and_broken_dumps() {
        assert_eq!(parse(""), None);
        assert_eq!(parse("\u{0}\u{1}binary"), None);
        // Cut short, unbalanced, attributes without quotes: what can be read is.
        let d = parse("<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu rank=x gdr=\"1\"/></pci></cpu><cpu><pci busid=\"0000:02:00.0\"><nic><net name=\"mlx5_0\" gdr").unwrap();
        assert_eq!(d.gpus.len(), 1);
        assert_eq!(d.gpus[0].rank, None);
        assert!(d.nets.is_empty());
        let d = parse("<system></pci></pci><gpu/>").unwrap();
        assert_eq!(d.gpus[0].bus_id, None);
    }
}
