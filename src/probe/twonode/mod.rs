//! The write test between two nodes (issue 18): this node's NIC writes into the other node's
//! buffer (a GPU's memory where there is one, else host memory), and the other way, rail by
//! rail, every byte verified, then bandwidth and latency each way.
//!
//! The two sides meet over the control connection of [`super::wire`] (authenticated by a shared
//! token). Each side brings its own limits and the session runs at the smaller of the two,
//! field by field (a peer can only lower this side's); both list their rails (NIC ports in NCCL_IB_HCA
//! order, or `--rails`) and rail i is paired with rail i. Per rail, in lockstep: each side opens
//! its NIC and registers its buffer, they exchange what a queue pair needs (QPN, PSN, GID, LID,
//! rkey, address, size, active MTU), connect at the smaller of the two MTUs, then the connector
//! writes and the listener verifies, the listener writes and the connector verifies, then the
//! bandwidth and latency runs, each way. Each side reports the two directions of every rail.
//!
//! The RDMA part is behind [`RailSide`] and [`Fabric`], so that the session's lockstep and its
//! failures are tested on loopback TCP without an RDMA device (tests/twonode.rs).
//!
//! Here: the run's types and this node's rails. [`session`]: the control connection and the
//! lockstep over it; [`explanation`]: what a failure between two nodes means; [`verbs`]: a rail
//! on a real NIC.

mod explanation;
mod session;
mod verbs;

pub use session::{HANDSHAKE, connect, listen, listen_addr, peer_addr, run};
pub use verbs::Verbs;

use crate::gdr::engine::Failed;
use crate::gdr::wire::WireError;
use crate::model::gdr::{Failure, Memory, PairResult};
use serde::{Deserialize, Serialize};
use std::time::Instant;

// What a run reports is model data (crate::model::twonode): the reports and fleet read it.
pub use crate::model::twonode::{
    Direction, Rail, RailResult, Report, Role, SCHEMA_VERSION, Settings,
};

/// perftest listens on 18515; one above it, so that both can run on a node at once.
pub const DEFAULT_PORT: u16 = 18516;

/// The first message each way: who is speaking and what it brings.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Hello {
    host: String,
    rails: Vec<Rail>,
    settings: Settings,
}

/// What a queue pair on one side needs of the other (perftest exchanges the same).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub qpn: u32,
    pub psn: u32,
    pub lid: u16,
    /// RoCE: the GID the QP sends from, and its index.
    pub gid: Option<[u8; 16]>,
    pub gid_index: Option<u8>,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: String,
    /// `IBV_MTU_*` (1..5) of the port.
    pub active_mtu: u32,
    pub addr: u64,
    pub rkey: u32,
    pub size: u64,
    /// The registration path of the buffer: dmabuf, peermem or host.
    pub path: String,
    pub memory: Memory,
}

/// The per-rail lockstep messages.
#[derive(Debug, Clone, Serialize, Deserialize)]
enum Step {
    Open(Result<Endpoint, Failure>),
    Connected(Result<(), Failure>),
    /// The writer's WRITE completed (the seed of the pattern it wrote), or why not.
    Wrote(Result<u64, Failure>),
    /// The target's verdict on what landed in its buffer.
    Verified(Result<(), Failure>),
    /// The writer's bandwidth (Gb/s) and latency (µs), or why not.
    Measured(Result<(f64, f64), Failure>),
}

impl Step {
    /// Its name, for a step that came out of order.
    fn kind(&self) -> &'static str {
        match self {
            Step::Open(_) => "Open",
            Step::Connected(_) => "Connected",
            Step::Wrote(_) => "Wrote",
            Step::Verified(_) => "Verified",
            Step::Measured(_) => "Measured",
        }
    }
}

// The steps of the session build the model's results: these constructors are the session's.
impl Direction {
    fn new(from: String, to: String) -> Direction {
        Direction {
            from,
            to,
            verified_bytes: None,
            gbps: None,
            latency_us: None,
            failure: None,
        }
    }
}

impl RailResult {
    /// A rail without a partner on the other node: both directions fail with `why`.
    fn unpaired(
        index: usize,
        local: Rail,
        peer: Option<Rail>,
        (me, them): (String, String),
        why: Failure,
    ) -> RailResult {
        let mut outgoing = Direction::new(me.clone(), them.clone());
        outgoing.failure = Some(why.clone());
        let mut incoming = Direction::new(them, me);
        incoming.failure = Some(why);
        RailResult {
            index,
            local,
            peer,
            setup: PairResult::default(),
            peer_path: None,
            path_mtu: None,
            notes: Vec::new(),
            outgoing,
            incoming,
        }
    }
}

impl Report {
    /// The report of a run whose control connection never came up.
    pub fn failed(host: &str, role: Role, settings: Settings, addr: &str, e: &WireError) -> Report {
        let mut r = Report::new(host, role, settings);
        r.peer_addr = Some(addr.into());
        r.fail(e);
        r
    }
    fn fail(&mut self, e: &WireError) {
        self.error = Some(e.to_string());
        self.error_class = Some(e.class().into());
    }
}

/// One side of one rail, ready to move bytes: what [`Fabric::open`] hands the session.
pub trait RailSide {
    fn endpoint(&mut self) -> Endpoint;
    /// Connects this side's QP to the peer's at `mtu` (`IBV_MTU_*`).
    fn connect(&mut self, peer: &Endpoint, mtu: u32) -> Result<(), Failed>;
    /// Fills this side's buffer with the pattern of `seed`.
    fn fill(&mut self, seed: u64) -> Result<(), Failed>;
    /// WRITEs `len` bytes of this side's buffer into the peer's, and waits for the completion.
    fn write(&mut self, peer: &Endpoint, len: u64, deadline: Instant) -> Result<(), Failed>;
    /// Compares the first `len` bytes of this side's buffer with the pattern of `seed`.
    fn check(&mut self, seed: u64, len: u64) -> Result<(), Failed>;
    /// Gb/s of WRITEs back to back into the peer's buffer.
    fn bandwidth(
        &mut self,
        peer: &Endpoint,
        len: u64,
        settings: &Settings,
        deadline: Instant,
    ) -> Result<f64, Failed>;
    /// Median µs from posting one small WRITE to its completion.
    fn latency(&mut self, peer: &Endpoint, iters: u32, deadline: Instant) -> Result<f64, Failed>;
}

/// What opens a rail: the verbs engine ([`Verbs`]), or a stand-in in the tests.
pub trait Fabric {
    /// Opens `rail` (the NIC, the buffer, its registration) and calls `session` once: with the
    /// side ready, or with why it could not be opened. Returns what opening it did.
    fn open(
        &self,
        rail: &Rail,
        settings: &Settings,
        session: &mut dyn FnMut(Result<&mut dyn RailSide, Failure>),
    ) -> PairResult;
}

/// The rail order NCCL uses: NCCL_IB_HCA's list (`mlx5_0:1,mlx5_1:1`, `=` exact), or none
/// (an exclusion list, `^mlx5_2`, or unset: the NICs in name order).
pub fn nccl_order(value: Option<&str>) -> Result<Vec<super::gdr_test::NicArg>, String> {
    let Some(v) = value
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.starts_with('^'))
    else {
        return Ok(Vec::new());
    };
    v.trim_start_matches('=')
        .split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(|x| x.parse().map_err(|e| format!("NCCL_IB_HCA {v:?}: {e}")))
        .collect()
}

/// This node's rails in rail order: `order` (`--rails`, or NCCL_IB_HCA) when given, else the
/// NICs by name. Each NIC's buffer is the memory of the GPU placement puts nearest to it (the
/// GPU whose traffic it carries); a NIC without one, or a node without GPUs, uses host memory,
/// and the report says so.
pub fn rails(
    inv: &crate::inventory::Inventory,
    opts: &super::gdr_test::Options,
    order: &[super::gdr_test::NicArg],
) -> Vec<Rail> {
    let mut o = opts.clone();
    if !order.is_empty() {
        o.nics = order.to_vec();
    }
    let host = super::gdr_test::Options {
        memory: Some(match opts.memory {
            Some(m @ (Memory::Host | Memory::HostDmabuf)) => m,
            _ => Memory::Host,
        }),
        ..o.clone()
    };
    let (on_host, _) = super::gdr_test::plan(inv, &host);
    let (on_gpu, _) = if opts.memory.is_some_and(|m| !m.is_gpu()) {
        (Vec::new(), Vec::new())
    } else {
        super::gdr_test::plan(inv, &o)
    };
    let mut rails: Vec<Rail> = Vec::new();
    for h in on_host {
        let Some(nic) = h.spec.nic.clone() else {
            continue;
        };
        let chosen = on_gpu
            .iter()
            .find(|g| g.spec.nic.as_ref().is_some_and(|n| n.device == nic.device))
            .unwrap_or(&h);
        rails.push(Rail {
            nic: chosen.spec.nic.clone().unwrap_or(nic),
            gpu: chosen.spec.gpu.clone(),
            memory: chosen.spec.memory,
            subject: chosen.subject.clone(),
        });
    }
    let rank = |r: &Rail| {
        order
            .iter()
            .position(|n| n.name == r.nic.device)
            .unwrap_or(usize::MAX)
    };
    rails.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.nic.device.cmp(&b.nic.device)));
    rails
}

#[cfg(test)]
mod tests;
