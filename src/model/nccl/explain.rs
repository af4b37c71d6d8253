//! What `nccl explain` answers: the types the explanation is made of, as `report::nccl`
//! prints them and docs/nccl-explain-json.md documents their JSON. The explanation of a log is
//! built in `nccl::explain`; `nccl verify`'s run keeps one of NCCL's own log.

use serde::Serialize;
use std::collections::BTreeMap;

/// A log with no `NCCL INFO` or `NCCL WARN` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotNcclLog {
    pub inputs: Vec<Input>,
}

impl std::fmt::Display for NotNcclLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
        write!(
            f,
            "{}: no `NCCL INFO` or `NCCL WARN` line in {} lines: not the output of a job run with NCCL_DEBUG=INFO",
            names.join(", "),
            self.inputs.iter().map(|i| i.lines).sum::<u64>()
        )?;
        if let Some(e) = self.inputs.iter().find_map(|i| i.error.as_ref()) {
            write!(f, " (reading stopped: {e})")?;
        }
        Ok(())
    }
}

/// One input, as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    pub name: String,
    pub gzip: bool,
    /// Bytes read (after decompression).
    pub bytes: u64,
    pub lines: u64,
    /// `NCCL INFO` and `NCCL WARN` lines, and the message bodies read without NCCL's prefix.
    pub nccl_lines: u64,
    /// Of them, message bodies quoted without NCCL's `host:pid:tid [dev] NCCL INFO` prefix
    /// (`9[1a000] -> 2[6b000] [send] via NET/IB/0/GDRDMA`): who printed them is unknown.
    pub unprefixed: u64,
    /// Lines that quote NCCL inside a `#` comment (a pasted configuration or script): skipped.
    pub commented: u64,
    /// Lines longer than `nccl::explain::MAX_LINE`, skipped.
    pub long_lines_skipped: u64,
    /// Why reading stopped early, if it did (a corrupt gzip stream, a read error).
    pub error: Option<String>,
}

/// Lines about GDR that no known wording matched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Unrecognised {
    pub count: u64,
    pub examples: Vec<String>,
}

/// What the log says, and why GDR was or was not used.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub schema: u32,
    pub inputs: Vec<Input>,
    pub nodes: Vec<Node>,
    pub diagnoses: Vec<Diagnosis>,
    pub warnings: Vec<Warning>,
    pub hints: Vec<String>,
    pub unrecognised: Unrecognised,
    /// Distinct things past the memory bounds, counted and not kept.
    pub dropped: u64,
    pub verdict: Verdict,
}

/// One node (a host name in the log's prefixes).
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    pub name: String,
    pub nccl: NcclVersion,
    pub networks: Vec<String>,
    pub plugins: Vec<String>,
    pub nics: Vec<Nic>,
    pub gpu_nic: Vec<GpuNic>,
    pub env: BTreeMap<String, String>,
    /// What NCCL said of networks it could not use: `NET/IB : No device found`, `Failed to
    /// initialize NET plugin IB`, a plugin turning GDR off.
    pub network_notes: Vec<String>,
    pub dmabuf_gpus: Vec<u32>,
    /// `Connected all rings, use ring PXN x GDR y` (2.24+): y as NCCL printed it.
    pub rings_gdr: Vec<i64>,
    pub connections: Vec<ConnGroup>,
    /// Connections that stayed inside the node (`via P2P/...`, `via SHM/...`): counted.
    pub intra_node_connections: u64,
    /// `nNodes` of the node's communicator lines (2.20+): `[1]` for a single-node run.
    pub communicator_nodes: Vec<u32>,
    /// What GDR needs on this node, by its library and release, where its lines leave GDR
    /// unverified: the peer-memory module before NCCL 2.13 (no DMA-BUF path), RCCL's opt-in
    /// DMA-BUF path or AMD's peer memory, libibverbs.
    pub requirements: Vec<String>,
    /// NCCL's path from each GPU to each network device (NCCL_DEBUG_SUBSYS=GRAPH); absent when
    /// the log has no GRAPH path line.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<NetPath>,
}

/// One GPU -> NET path from NCCL's GRAPH lines: the distance NCCL itself uses.
#[derive(Debug, Clone, Serialize)]
pub struct NetPath {
    /// The GPU as printed (`0-60`, `3B000`).
    pub gpu: String,
    /// Its PCI address, read from NCCL's number (`0000:00:06.0`).
    pub bus_id: Option<String>,
    /// The NET node as printed (`0-0`, `2`).
    pub net: String,
    /// NCCL's index of the network device (the `N` of `HCA N` and `NET/IB/N`).
    pub nic: Option<u32>,
    pub hops: u32,
    /// GB/s, as NCCL rates the path.
    pub bandwidth: f64,
    /// The path type: `PIX`, `PXB`, `PHB`, `SYS`, `PXN`, ... After NCCL turned GDR off for the
    /// pair, the path through the CPU (`PHB` or farther).
    pub path: String,
    /// How many lines said this (every rank prints it).
    pub lines: u64,
}

/// A PCI address from NCCL's number for it (`60`, `0-3b000`, `CE000`): src/misc/utils.cc
/// `int64ToBusId` prints `%04lx:%02lx:%02lx.%01lx` of id>>20, id>>12, id>>4 and id, masked.
pub fn bus_id_of(nccl_id: &str) -> Option<String> {
    let local = nccl_id.rsplit('-').next().unwrap_or(nccl_id);
    let id = u64::from_str_radix(local, 16).ok()?;
    let text = format!(
        "{:04x}:{:02x}:{:02x}.{:01x}",
        id >> 20,
        (id & 0xff000) >> 12,
        (id & 0xff0) >> 4,
        id & 0xf
    );
    crate::parse::pci::Bdf::parse(&text).map(|b| b.to_string())
}

/// The NIC index NCCL printed: `0`, a net id `1` (hex), or `0-1` (2.29: system id and local
/// id).
pub fn nic_index(nic: &str) -> Option<u32> {
    let local = nic.rsplit('-').next().unwrap_or(nic);
    u32::from_str_radix(local, 16).ok()
}

/// Which NCCL wrote the node's lines.
#[derive(Debug, Clone, Serialize)]
pub struct NcclVersion {
    /// `NCCL`, or `RCCL` (AMD's port: its version banner, `ROCr version`, its DMA-BUF line).
    pub library: &'static str,
    /// `2.18.5+cuda12.2`, when a version line says so.
    pub version: Option<String>,
    /// `log` (the node's own version line), `log-unprefixed` (a version line without a host,
    /// taken for every node), `wording` (inferred from how the lines are phrased), `unknown`.
    pub source: &'static str,
    /// With `wording`: the releases the lines fit, `2.12-2.20`.
    pub range: Option<String>,
    /// Every version line of the node, when there are several.
    pub all: Vec<String>,
}

/// A NIC as NCCL listed it, with its GDR decision.
#[derive(Debug, Clone, Serialize)]
pub struct Nic {
    pub net: String,
    pub index: u32,
    pub name: String,
    pub port: Option<u32>,
    /// `IB`, `RoCE`, `IB/SHARP`; for a socket, its address.
    pub link: Option<String>,
    /// `enabled`, `disabled`, or `not-printed`.
    pub gdr: &'static str,
    /// NCCL's reason as printed: `no module`, `nvidia-peermem`, `DMABUF`, ...
    pub reason: Option<String>,
    /// 2.4 prints the decision per GPU: which.
    pub gpu: Option<String>,
}

/// One GPU-NIC GDR decision with its distance.
#[derive(Debug, Clone, Serialize)]
pub struct GpuNic {
    pub gpu: String,
    pub nic: String,
    pub gdr: bool,
    pub distance: u32,
    pub distance_name: String,
    pub level: u32,
    pub level_name: String,
    /// `default` (NCCL's own), `environment` (NCCL_NET_GDR_LEVEL), or `not-default`.
    pub level_source: &'static str,
    /// 2.4-2.5 compare `distance >= level`, later releases `distance > level`.
    pub comparison: &'static str,
    pub read: Option<bool>,
    pub mode: Option<String>,
    pub pxn_via: Option<String>,
    /// How many lines said this (every rank prints it).
    pub lines: u64,
}

/// One rank's connections through one NIC, all with GDR or all without.
#[derive(Debug, Clone, Serialize)]
pub struct ConnGroup {
    /// The CUDA device of the printing thread (`[2]` in the prefix).
    pub cuda_dev: Option<u32>,
    pub rank: u32,
    /// What NCCL printed in brackets after the rank, when it is a bus id.
    pub bus: Option<String>,
    pub net: String,
    pub nic: u32,
    pub gdr: bool,
    pub sends: u64,
    pub receives: u64,
    pub channels: Vec<u32>,
    pub peers: Vec<u32>,
    pub more_peers: bool,
    pub proxies: Vec<u32>,
    pub pci: bool,
}

/// A gdrdoctor check and finding code that explains a cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct See {
    pub check: &'static str,
    pub code: &'static str,
}

pub const fn see(check: &'static str, code: &'static str) -> See {
    See { check, code }
}

/// Why GDR was not used somewhere.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    /// The nodes it applies to (the same cause on many nodes is one diagnosis).
    pub nodes: Vec<String>,
    /// `distance`, `level-from-env`, `no-peer-memory`, `sockets`, `plugin-disabled`,
    /// `plugin-failed`, `gdr-read-off`, `gdr-one-side`, `gdr-off-elsewhere`, `nic-specific`,
    /// `not-explained`.
    pub cause: &'static str,
    /// What it is about: `GPU 18000 -> NIC 0`, `NIC 0 'mlx5_0'`, `network Socket`.
    pub subject: String,
    /// What NCCL printed, and what it means.
    pub message: String,
    /// The gdrdoctor checks and codes that explain it, most likely first; empty when the cause
    /// is the job's own setting or a plugin's decision, outside any check.
    pub see: Vec<See>,
    pub fix: String,
    /// NET connections without GDR that this explains (0: NCCL's decision, with no connection
    /// line in the log).
    pub connections: u64,
    /// The ranks those connections belong to.
    pub ranks: Vec<u32>,
}

/// An `NCCL WARN` line, with the same ones counted.
#[derive(Debug, Clone, Serialize)]
pub struct Warning {
    pub text: String,
    pub count: u64,
    pub nodes: Vec<String>,
    pub meaning: Option<String>,
    pub see: Vec<See>,
}

/// The answer.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub net_connections: u64,
    pub with_gdr: u64,
    pub without_gdr: u64,
    /// 0: every NET connection used GDR; 1: some did not (or nothing says it did); 3: not
    /// exercised: no NET connection, and the communicators stayed on one node.
    pub exit_code: u8,
    pub summary: String,
}
