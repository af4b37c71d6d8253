//! The write test between two nodes, as each side reports it: this node's rails, the settings
//! the session ran at, and per rail the two directions ([`Report`]). The session is
//! `probe::twonode`'s; the reports (`report::twonode`) and `fleet` read these without importing it.

use super::gdr::{Failure, Memory, NicSpec, PairResult};
use serde::{Deserialize, Serialize};

/// Bumped when the report's JSON changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

/// One rail of this node: a NIC port and the buffer the other node writes into.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rail {
    pub nic: NicSpec,
    /// The GPU whose memory is the buffer (its PCI address), when it is GPU memory.
    pub gpu: Option<String>,
    pub memory: Memory,
    /// How reports name the buffer: `GPU 0000:3b:00.0 (NVIDIA H100)`, `host memory`.
    pub subject: String,
}

impl Rail {
    /// `mlx5_0 port 1`.
    pub fn label(&self) -> String {
        format!("{} port {}", self.nic.device, self.nic.port)
    }
}

/// What the run moves, and how long a rail may take. Each side has its own (its command line
/// and config); the session's are [`Settings::bounded_by`] the peer's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settings {
    /// Buffer and message size, bytes.
    pub size: u64,
    /// Most WRITEs per direction in the bandwidth run.
    pub iters: u32,
    /// Longest bandwidth run per direction, milliseconds.
    pub duration_ms: u64,
    /// Single WRITEs timed one after the other for the latency figure.
    pub latency_iters: u32,
    /// Everything on one rail, from opening the NIC to the last message, within this.
    pub rail_timeout_ms: u64,
}

impl Settings {
    /// The session's settings: the smaller of this side's and the peer's, field by field, so
    /// that a peer's values only ever lower this side's limits. A peer that authenticated may
    /// still be wrong or hostile: one that asked for a rail timeout of days held the listener
    /// until --deadline when the listener adopted the connector's settings (issue 25). Both
    /// sides compute the same, so they stay in step. The size stays a multiple of 4 KiB of at
    /// least 4 KiB, as `--size` is.
    pub fn bounded_by(&self, peer: &Settings) -> Settings {
        Settings {
            size: (self.size.min(peer.size) / 4096 * 4096).max(4096),
            iters: self.iters.min(peer.iters),
            duration_ms: self.duration_ms.min(peer.duration_ms),
            latency_iters: self.latency_iters.min(peer.latency_iters),
            rail_timeout_ms: self.rail_timeout_ms.min(peer.rail_timeout_ms),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            size: 1 << 20,
            iters: 5000,
            duration_ms: 400,
            latency_iters: 100,
            rail_timeout_ms: 30_000,
        }
    }
}

/// One direction of one rail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// `node-a mlx5_0 port 1`.
    pub from: String,
    pub to: String,
    /// Bytes written and verified in the target's buffer.
    pub verified_bytes: Option<u64>,
    pub gbps: Option<f64>,
    /// The time from posting one small WRITE to its completion (the remote NIC's
    /// acknowledgement: one round trip), median, microseconds.
    pub latency_us: Option<f64>,
    pub failure: Option<Failure>,
}

impl Direction {
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.verified_bytes.is_some()
    }
}

/// One rail: this node's NIC port and the peer's of the same index, both directions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RailResult {
    pub index: usize,
    pub local: Rail,
    pub peer: Option<Rail>,
    /// What opening this side's NIC and registering its buffer did (memory steps,
    /// registrations, the path that worked, the port).
    pub setup: PairResult,
    /// The peer's registration path (dmabuf, peermem, host).
    pub peer_path: Option<String>,
    /// The MTU the queue pairs were connected at, bytes.
    pub path_mtu: Option<u32>,
    /// What an operator should know that is not a failure (an MTU that differs, host memory).
    pub notes: Vec<String>,
    /// This node writing into the peer.
    pub outgoing: Direction,
    /// The peer writing into this node.
    pub incoming: Direction,
}

impl RailResult {
    pub fn passed(&self) -> bool {
        self.outgoing.passed() && self.incoming.passed()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Listener,
    Connector,
}

/// What one side of a two-node run found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: String,
    pub schema_version: u32,
    pub host: String,
    pub role: Role,
    /// The other node: its name as it says it, and its address.
    pub peer: Option<String>,
    pub peer_addr: Option<String>,
    pub settings: Settings,
    pub rails: Vec<RailResult>,
    /// The control connection failed (could not connect, authenticate, or lost it): the test
    /// did not run, or not to its end.
    pub error: Option<String>,
    /// `lost`, `auth`, `protocol`, `setup`: the kind of `error`.
    pub error_class: Option<String>,
}

impl Report {
    pub fn new(host: &str, role: Role, settings: Settings) -> Report {
        Report {
            schema: "gdrdoctor.two-node".into(),
            schema_version: SCHEMA_VERSION,
            host: host.into(),
            role,
            peer: None,
            peer_addr: None,
            settings,
            rails: Vec::new(),
            error: None,
            error_class: None,
        }
    }
    /// 0: every direction of every rail passed; 1: one failed; 2: the test could not run.
    pub fn exit_code(&self) -> u8 {
        if self.error.is_some() || self.rails.is_empty() {
            2
        } else if self.rails.iter().all(RailResult::passed) {
            0
        } else {
            1
        }
    }
}
