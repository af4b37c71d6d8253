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

use super::engine::{self, Failed, Opened, Target};
use super::wire::{self, Channel, WireError};
use super::{Failure, FailureKind, Memory, NicSpec, PairResult, PairSpec};
use crate::ffi::ibverbs::{self, Cq, Gid, Qp, Remote};
use serde::{Deserialize, Serialize};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// perftest listens on 18515; one above it, so that both can run on a node at once.
pub const DEFAULT_PORT: u16 = 18516;
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

/// The control connection's deadlines.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    /// Waiting for the peer to connect (listener) or to accept (connector), and the handshake.
    pub connect: Duration,
}

/// Listens on `addr` for one peer until `wait` passes, proves the token with it, and closes
/// the listening socket: one peer per run, never more.
pub fn listen(addr: &str, token: &[u8], wait: Duration) -> Result<Channel, WireError> {
    let until = crate::deadline::later(Instant::now(), wait);
    let listener = TcpListener::bind(addr).map_err(|e| WireError::Io {
        what: format!("listen on {addr}"),
        error: e.to_string(),
    })?;
    listener.set_nonblocking(true).map_err(|e| WireError::Io {
        what: "listen".into(),
        error: e.to_string(),
    })?;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= until {
                    return Err(WireError::Timeout {
                        what: format!("connection on {addr}"),
                        waited: wait,
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(WireError::Io {
                    what: format!("accept on {addr}"),
                    error: e.to_string(),
                });
            }
        }
    };
    // The one peer: nobody else can connect from here on.
    drop(listener);
    let _ = stream.set_nonblocking(false);
    // The handshake has its own deadline, not what is left of --wait: a peer that connects and
    // says nothing must not hold the listener for minutes.
    wire::accept(stream, token, Instant::now() + HANDSHAKE)
}

/// How long the handshake may take once connected: four small frames, one round trip each.
pub const HANDSHAKE: Duration = Duration::from_secs(10);

/// The local address a listener binds: `ADDR:PORT`, `ADDR` or `:PORT`; default all addresses.
pub fn listen_addr(arg: Option<&str>) -> String {
    match arg {
        None | Some("") => format!("0.0.0.0:{DEFAULT_PORT}"),
        Some(a) if a.starts_with(':') => format!("0.0.0.0{a}"),
        Some(a) if a.parse::<std::net::SocketAddr>().is_ok() => a.into(),
        Some(a) if a.parse::<std::net::Ipv6Addr>().is_ok() => {
            // A bare IPv6 address.
            format!("[{a}]:{DEFAULT_PORT}")
        }
        Some(a)
            if a.rsplit_once(':')
                .is_some_and(|(_, p)| p.parse::<u16>().is_ok()) =>
        {
            a.into()
        }
        Some(a) => format!("{a}:{DEFAULT_PORT}"),
    }
}

/// `HOST[:PORT]` with the default port.
pub fn peer_addr(arg: &str) -> String {
    listen_addr(Some(arg))
}

/// Connects to the listener at `addr` (retrying while it is not yet up: the two sides of a
/// job start in any order) and proves the token.
pub fn connect(addr: &str, token: &[u8], wait: Duration) -> Result<Channel, WireError> {
    let until = crate::deadline::later(Instant::now(), wait);
    let mut last = String::new();
    loop {
        let addrs: Vec<_> = match addr.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                return Err(WireError::Io {
                    what: format!("resolve {addr}"),
                    error: e.to_string(),
                });
            }
        };
        for a in &addrs {
            let left = until.saturating_duration_since(Instant::now());
            match TcpStream::connect_timeout(
                a,
                left.clamp(Duration::from_millis(10), Duration::from_secs(3)),
            ) {
                Ok(s) => return wire::connect(s, token, Instant::now() + HANDSHAKE),
                Err(e) => last = format!("{a}: {e}"),
            }
        }
        if Instant::now() >= until {
            return Err(WireError::Io {
                what: format!(
                    "connect to {addr} (tried for {:.0} s; is `gdrdoctor gdr-test --listen` running there, and the port open?)",
                    wait.as_secs_f64()
                ),
                error: last,
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Sends ours and receives theirs: the connector speaks first, so that both never wait.
fn exchange<T: Serialize + serde::de::DeserializeOwned>(
    ch: &mut Channel,
    role: Role,
    mine: &T,
    until: Instant,
    what: &str,
) -> Result<T, WireError> {
    match role {
        Role::Connector => {
            ch.send(mine, until)?;
            ch.recv(until, what)
        }
        Role::Listener => {
            let theirs = ch.recv(until, what)?;
            ch.send(mine, until)?;
            Ok(theirs)
        }
    }
}

fn failure(kind: FailureKind, step: impl Into<String>, message: impl Into<String>) -> Failure {
    Failure {
        kind,
        step: step.into(),
        message: message.into(),
    }
}

fn from_failed((kind, step, message): Failed) -> Failure {
    failure(kind, step, message)
}

/// The same failure, as seen from the other node.
fn on_peer(f: &Failure, peer: &str) -> Failure {
    failure(f.kind, format!("{} (on {peer})", f.step), f.message.clone())
}

/// Runs the whole test over an authenticated channel: the hellos, then every rail.
pub fn run(
    ch: &mut Channel,
    role: Role,
    host: &str,
    rails: &[Rail],
    settings: Settings,
    fabric: &dyn Fabric,
) -> Report {
    let mut report = Report::new(host, role, settings.clone());
    report.peer_addr = ch.peer_addr().map(|a| a.to_string());
    let hello = Hello {
        host: host.into(),
        rails: rails.to_vec(),
        settings,
    };
    let until = Instant::now() + Duration::from_secs(30);
    let theirs: Hello = match exchange(ch, role, &hello, until, "hello") {
        Ok(h) => h,
        Err(e) => {
            report.fail(&e);
            return report;
        }
    };
    // This side's limits, lowered where the peer's are lower: never raised by the peer.
    report.settings = report.settings.bounded_by(&theirs.settings);
    // The peer's name is repeated in every direction and failure of every rail: at most a host
    // name's length of it (a 200 KiB name in a hello once became hundreds of MB of report).
    let peer_host = bounded_name(&theirs.host);
    report.peer = Some(peer_host.clone());
    let settings = report.settings.clone();
    for (i, local) in rails.iter().enumerate() {
        let (me, them) = (format!("{host} {}", local.label()), peer_host.clone());
        let Some(peer) = theirs.rails.get(i) else {
            let why = failure(
                FailureKind::NoRdmaDevice,
                "rail pairing",
                format!(
                    "{peer_host} has {} rail(s), this node {}: rail {i} ({}) has no partner (list the same number of NICs on both, in the same order: NCCL_IB_HCA or --rails)",
                    theirs.rails.len(),
                    rails.len(),
                    local.label()
                ),
            );
            let mut out = Direction::new(me.clone(), them.clone());
            out.failure = Some(why.clone());
            let mut inc = Direction::new(them, me);
            inc.failure = Some(why);
            report.rails.push(RailResult {
                index: i,
                local: local.clone(),
                peer: None,
                setup: PairResult::default(),
                peer_path: None,
                path_mtu: None,
                notes: Vec::new(),
                outgoing: out,
                incoming: inc,
            });
            continue;
        };
        let them = format!("{peer_host} {}", peer.label());
        let mut result = None;
        let mut lost = None;
        let setup = fabric.open(local, &settings, &mut |side| match rail(
            ch, role, side, &settings, &me, &them, &peer_host,
        ) {
            Ok(r) => result = Some(r),
            Err(e) => lost = Some(e),
        });
        if let Some(e) = lost {
            report.fail(&e);
            break;
        }
        let Some((out, inc, peer_path, path_mtu, notes)) = result else {
            // The fabric never called the session: a bug in it; say so rather than hang.
            report.error = Some(format!("rail {i}: the session did not run"));
            report.error_class = Some("setup".into());
            break;
        };
        report.rails.push(RailResult {
            index: i,
            local: local.clone(),
            peer: Some(peer.clone()),
            setup,
            peer_path,
            path_mtu,
            notes,
            outgoing: out,
            incoming: inc,
        });
    }
    if rails.is_empty() && theirs.rails.is_empty() && report.error.is_none() {
        report.error = Some(format!(
            "neither {host} nor {peer_host} has an RDMA device (a NIC port) to test through (see rdma-link; --rails names them)"
        ));
        report.error_class = Some("setup".into());
    }
    // Rails the peer has and this node does not: the peer reports them; named here too.
    if report.error.is_none() && theirs.rails.len() > rails.len() {
        for (i, p) in theirs.rails.iter().enumerate().skip(rails.len()) {
            let why = failure(
                FailureKind::NoRdmaDevice,
                "rail pairing",
                format!(
                    "{peer_host}'s rail {i} ({}) has no partner on this node ({} rail(s))",
                    p.label(),
                    rails.len()
                ),
            );
            let me = format!("{host} (no rail {i})");
            let them = format!("{peer_host} {}", p.label());
            let mut out = Direction::new(me.clone(), them.clone());
            out.failure = Some(why.clone());
            let mut inc = Direction::new(them, me);
            inc.failure = Some(why);
            report.rails.push(RailResult {
                index: i,
                local: Rail {
                    nic: NicSpec {
                        device: "(none)".into(),
                        port: 0,
                        gid_index: None,
                    },
                    gpu: None,
                    memory: p.memory,
                    subject: "no rail".into(),
                },
                peer: Some(p.clone()),
                setup: PairResult::default(),
                peer_path: None,
                path_mtu: None,
                notes: Vec::new(),
                outgoing: out,
                incoming: inc,
            });
        }
    }
    report
}

/// A name from the peer, at most 255 characters (a fully qualified host name is at most 253),
/// the rest as `…`. Shown through the one sanitizer later, like any string from the peer.
fn bounded_name(name: &str) -> String {
    const MAX: usize = 255;
    if name.chars().count() <= MAX {
        return name.to_owned();
    }
    let mut cut: String = name.chars().take(MAX - 1).collect();
    cut.push('…');
    cut
}

type RailOutcome = (
    Direction,
    Direction,
    Option<String>,
    Option<u32>,
    Vec<String>,
);

/// One rail in lockstep with the peer. A failure of the rail is in the directions; a failure
/// of the control connection is the error.
fn rail(
    ch: &mut Channel,
    role: Role,
    side: Result<&mut dyn RailSide, Failure>,
    settings: &Settings,
    me: &str,
    them: &str,
    peer_host: &str,
) -> Result<RailOutcome, WireError> {
    // The listener's settings are the connector's: a peer's value.
    let until = crate::deadline::later(
        Instant::now(),
        Duration::from_millis(settings.rail_timeout_ms),
    );
    let mut out = Direction::new(me.into(), them.into());
    let mut inc = Direction::new(them.into(), me.into());
    let mut notes = Vec::new();
    let both = |out: &mut Direction, inc: &mut Direction, f: Failure| {
        out.failure = Some(f.clone());
        inc.failure = Some(f);
    };
    let (mine, side) = match side {
        Ok(s) => (Ok(s.endpoint()), Some(s)),
        Err(f) => (Err(f), None),
    };
    let theirs = match exchange(
        ch,
        role,
        &Step::Open(mine.clone()),
        until,
        "the peer's rail",
    )? {
        Step::Open(t) => t,
        other => return Err(unexpected("the peer's rail", &other)),
    };
    let (mine, theirs, side) = match (mine, theirs, side) {
        (Ok(m), Ok(t), Some(s)) => (m, t, s),
        (Err(f), _, _) => {
            both(&mut out, &mut inc, f);
            return Ok((out, inc, None, None, notes));
        }
        (_, Err(f), _) => {
            both(&mut out, &mut inc, on_peer(&f, peer_host));
            return Ok((out, inc, None, None, notes));
        }
        (Ok(_), Ok(t), None) => {
            // Not reachable (an endpoint comes from a side), but answered rather than trusted.
            let f = failure(
                FailureKind::OpenFailed,
                "rail",
                "no local side to test with",
            );
            both(&mut out, &mut inc, f);
            return Ok((out, inc, Some(t.path), None, notes));
        }
    };
    let peer_path = Some(theirs.path.clone());
    if theirs.memory == Memory::Host || theirs.memory == Memory::HostDmabuf {
        notes.push(format!(
            "{peer_host} registered host memory ({}): GPU memory on that side is not tested",
            theirs.path
        ));
    }

    // What can be judged before any packet: the link layers, the GID families, the MTUs.
    let mut early = compatible(&mine, &theirs, peer_host);
    let mtu = mine.active_mtu.min(theirs.active_mtu);
    if mine.active_mtu != theirs.active_mtu {
        notes.push(format!(
            "path MTU {} (this port's active MTU {}, {peer_host}'s {}): the queue pairs use the smaller; a larger one would be dropped by the smaller side, silently (rx_length_errors), and the WRITEs would hang",
            ibverbs::mtu_bytes(mtu),
            ibverbs::mtu_bytes(mine.active_mtu),
            ibverbs::mtu_bytes(theirs.active_mtu)
        ));
    }
    let len = mine.size.min(theirs.size);
    let connected = match early.take() {
        Some(f) => Err(f),
        None => side
            .connect(&theirs, mtu)
            .map_err(|f| explain_connect(from_failed(f), &theirs, peer_host)),
    };
    let peer_connected = match exchange(
        ch,
        role,
        &Step::Connected(connected.clone()),
        until,
        "the peer's connection",
    )? {
        Step::Connected(c) => c,
        other => return Err(unexpected("the peer's connection", &other)),
    };
    match (connected, peer_connected) {
        (Err(f), _) => {
            both(&mut out, &mut inc, f);
            return Ok((out, inc, peer_path, Some(ibverbs::mtu_bytes(mtu)), notes));
        }
        (_, Err(f)) => {
            both(&mut out, &mut inc, on_peer(&f, peer_host));
            return Ok((out, inc, peer_path, Some(ibverbs::mtu_bytes(mtu)), notes));
        }
        (Ok(()), Ok(())) => {}
    }

    // The connector writes first, then the listener.
    let order = match role {
        Role::Connector => [true, false],
        Role::Listener => [false, true],
    };
    for writing in order {
        if writing {
            write_phase(ch, side, &theirs, len, settings, until, &mut out, peer_host)?;
        } else {
            target_phase(ch, side, len, until, &mut inc, peer_host)?;
        }
    }
    Ok((out, inc, peer_path, Some(ibverbs::mtu_bytes(mtu)), notes))
}

fn unexpected(what: &str, got: &Step) -> WireError {
    let kind = match got {
        Step::Open(_) => "Open",
        Step::Connected(_) => "Connected",
        Step::Wrote(_) => "Wrote",
        Step::Verified(_) => "Verified",
        Step::Measured(_) => "Measured",
    };
    WireError::Malformed {
        what: what.into(),
        detail: format!("a {kind} step out of order: the two sides are not in step"),
    }
}

/// The writer's half of one direction: the verified WRITE, then bandwidth and latency.
#[allow(clippy::too_many_arguments)]
fn write_phase(
    ch: &mut Channel,
    side: &mut dyn RailSide,
    theirs: &Endpoint,
    len: u64,
    settings: &Settings,
    until: Instant,
    dir: &mut Direction,
    peer_host: &str,
) -> Result<(), WireError> {
    let seed = u64::from_le_bytes(wire::nonce()?[..8].try_into().unwrap_or([7; 8])) | 1;
    let wrote = side
        .fill(seed)
        .and_then(|()| side.write(theirs, len, until))
        .map(|()| seed)
        .map_err(|f| explain_completion(from_failed(f), peer_host));
    ch.send(&Step::Wrote(wrote.clone()), until)?;
    if let Err(f) = wrote {
        dir.failure = Some(f);
        return Ok(());
    }
    match ch.recv(until, "the peer's verification")? {
        Step::Verified(Ok(())) => dir.verified_bytes = Some(len),
        Step::Verified(Err(f)) => {
            dir.failure = Some(on_peer(&f, peer_host));
            return Ok(());
        }
        other => return Err(unexpected("the peer's verification", &other)),
    }
    let measured = side
        .bandwidth(theirs, len, settings, until)
        .and_then(|g| Ok((g, side.latency(theirs, settings.latency_iters, until)?)))
        .map_err(|f| explain_completion(from_failed(f), peer_host));
    ch.send(&Step::Measured(measured.clone()), until)?;
    match measured {
        Ok((g, l)) => {
            dir.gbps = Some(g);
            dir.latency_us = Some(l);
        }
        Err(f) => dir.failure = Some(f),
    }
    Ok(())
}

/// The target's half: wait for the WRITE, verify what landed, then wait for the figures.
fn target_phase(
    ch: &mut Channel,
    side: &mut dyn RailSide,
    len: u64,
    until: Instant,
    dir: &mut Direction,
    peer_host: &str,
) -> Result<(), WireError> {
    let seed = match ch.recv(until, "the peer's WRITE")? {
        Step::Wrote(Ok(seed)) => seed,
        Step::Wrote(Err(f)) => {
            dir.failure = Some(on_peer(&f, peer_host));
            return Ok(());
        }
        other => return Err(unexpected("the peer's WRITE", &other)),
    };
    let verified = side.check(seed, len).map_err(from_failed);
    ch.send(&Step::Verified(verified.clone()), until)?;
    if let Err(f) = verified {
        dir.failure = Some(f);
        return Ok(());
    }
    dir.verified_bytes = Some(len);
    match ch.recv(until, "the peer's bandwidth run")? {
        Step::Measured(Ok((g, l))) => {
            dir.gbps = Some(g);
            dir.latency_us = Some(l);
        }
        Step::Measured(Err(f)) => dir.failure = Some(on_peer(&f, peer_host)),
        other => return Err(unexpected("the peer's bandwidth run", &other)),
    }
    Ok(())
}

/// What makes a rail impossible before a packet is sent, named.
fn compatible(mine: &Endpoint, theirs: &Endpoint, peer_host: &str) -> Option<Failure> {
    if mine.link_layer != theirs.link_layer {
        return Some(failure(
            FailureKind::QpFailed,
            "rail pairing",
            format!(
                "this port is {}, {peer_host}'s is {}: no path between them (pair rails of the same fabric: NCCL_IB_HCA or --rails)",
                mine.link_layer, theirs.link_layer
            ),
        ));
    }
    if let (Some(a), Some(b)) = (mine.gid, theirs.gid) {
        let (fa, fb) = (gid_family(&a), gid_family(&b));
        if fa != fb {
            return Some(failure(
                FailureKind::QpFailed,
                "GID",
                format!(
                    "this side's GID {} (index {}) is {fa}, {peer_host}'s {} (index {}) is {fb}: RoCE v2 cannot route between the two families (pin the same kind of GID on both: --gid-index, NCCL_IB_GID_INDEX)",
                    gid_text(&a),
                    mine.gid_index.map(|i| i.to_string()).unwrap_or_default(),
                    gid_text(&b),
                    theirs.gid_index.map(|i| i.to_string()).unwrap_or_default()
                ),
            ));
        }
    }
    None
}

/// A GID as an operator reads it: `::ffff:10.0.0.1` for the IPv4 ones RoCE v2 uses.
fn gid_text(g: &[u8; 16]) -> String {
    match Gid(*g).ipv4() {
        Some(v4) => format!("::ffff:{v4}"),
        None => Gid(*g).to_string(),
    }
}

/// `IPv4`, `IPv6 link-local` or `IPv6`: what a RoCE GID's address is, by the program's one
/// rule (crate::parse::rdma::Gid::family).
fn gid_family(g: &[u8; 16]) -> &'static str {
    use crate::parse::rdma::GidFamily;
    match Gid(*g).family() {
        GidFamily::Ipv4 => "IPv4",
        GidFamily::LinkLocal => "IPv6 link-local",
        GidFamily::Ipv6 => "IPv6",
        GidFamily::Unused => "unused (all zeros)",
    }
}

/// A connect that failed at RTR on RoCE: the kernel could not resolve the peer's GID to a MAC
/// address. It resolves it with the rail's netdev as the output interface, and a route lookup
/// bound to an interface that finds no route assumes the address is on that link (seen in the
/// lab, tests/lab/scenarios/two-node-faults.sh): a missing route alone does not fail, the
/// rails then work if they share a segment. What fails is the neighbour (ARP) request nobody
/// answers, and the kernel gives up after about a second: ETIMEDOUT. ENETUNREACH (a route
/// that says unreachable) is the other answer.
fn explain_connect(f: Failure, theirs: &Endpoint, peer_host: &str) -> Failure {
    if f.message.contains("to RTR") && theirs.gid.is_some() {
        let gid = theirs.gid.map(|g| gid_text(&g)).unwrap_or_default();
        let why = if f.message.contains("os error 110") || f.message.contains("timed out") {
            format!(
                "this node found no MAC address for {peer_host}'s GID {gid}: nobody on this rail's link answered the kernel's ARP (neighbour) request for it within about a second (the two rails are on different subnets of a routed fabric and this node has no route to the peer's, they are on different VLANs or segments, or {peer_host}'s rail interface does not answer)"
            )
        } else {
            format!(
                "this node cannot reach {peer_host}'s GID {gid} (no route to its subnet from this port's GID: rails on different subnets, or the peer's address is not on this rail's network)"
            )
        };
        return failure(f.kind, f.step, format!("{}: {why}", f.message));
    }
    f
}

/// A completion error, with what it means between two nodes.
fn explain_completion(f: Failure, peer_host: &str) -> Failure {
    let why = if f.message.contains("IBV_WC_RETRY_EXC_ERR") {
        Some(format!(
            "{peer_host}'s NIC never acknowledged: its GID is not reachable on this rail, a switch port on the path is down, or the path drops packets this large (MTU)"
        ))
    } else if f.message.contains("IBV_WC_REM_ACCESS_ERR") {
        Some(format!(
            "{peer_host}'s NIC refused the WRITE into its buffer: its registration (rkey, address, length or access flags) does not cover it"
        ))
    } else if f.message.contains("IBV_WC_RNR_RETRY_EXC_ERR") {
        Some(format!("{peer_host}'s queue pair was not ready to receive"))
    } else if f.kind == FailureKind::Timeout {
        Some(format!(
            "no completion and no error: packets to {peer_host} vanish (a path MTU larger than a link carries, or PFC pausing the link)"
        ))
    } else {
        None
    };
    match why {
        Some(w) => failure(f.kind, f.step, format!("{}: {w}", f.message)),
        None => f,
    }
}

/// The rail order NCCL uses: NCCL_IB_HCA's list (`mlx5_0:1,mlx5_1:1`, `=` exact), or none
/// (an exclusion list, `^mlx5_2`, or unset: the NICs in name order).
pub fn nccl_order(value: Option<&str>) -> Result<Vec<super::plan::NicArg>, String> {
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
    opts: &super::plan::Options,
    order: &[super::plan::NicArg],
) -> Vec<Rail> {
    let mut o = opts.clone();
    if !order.is_empty() {
        o.nics = order.to_vec();
    }
    let host = super::plan::Options {
        memory: Some(match opts.memory {
            Some(m @ (Memory::Host | Memory::HostDmabuf)) => m,
            _ => Memory::Host,
        }),
        ..o.clone()
    };
    let (on_host, _) = super::plan::plan(inv, &host);
    let (on_gpu, _) = if opts.memory.is_some_and(|m| !m.is_gpu()) {
        (Vec::new(), Vec::new())
    } else {
        super::plan::plan(inv, &o)
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

/// The verbs engine: each rail in this process, through [`engine::run_pair_with`] (the same
/// opening, registration order and explanations as the one-node test).
pub struct Verbs;

impl Fabric for Verbs {
    fn open(
        &self,
        rail: &Rail,
        settings: &Settings,
        session: &mut dyn FnMut(Result<&mut dyn RailSide, Failure>),
    ) -> PairResult {
        let spec = PairSpec {
            gpu: rail.gpu.clone(),
            nic: Some(rail.nic.clone()),
            memory: rail.memory,
            size: settings.size,
            iters: settings.iters,
            duration_ms: settings.duration_ms,
            deadline_ms: settings.rail_timeout_ms,
        };
        let mut called = false;
        let memory = rail.memory;
        let mut result = engine::run_pair_with(&spec, &mut |res, opened, target, _deadline| {
            called = true;
            let cq = match opened.ctx.create_cq((engine::DEPTH * 2) as i32) {
                Ok(c) => c,
                Err(e) => {
                    session(Err(failure(
                        FailureKind::QpFailed,
                        "ibv_create_cq",
                        e.to_string(),
                    )));
                    return Ok(());
                }
            };
            let qp = match opened.pd.create_qp(&cq, engine::DEPTH) {
                Ok(q) => q,
                Err(e) => {
                    session(Err(failure(
                        FailureKind::QpFailed,
                        "ibv_create_qp",
                        e.to_string(),
                    )));
                    return Ok(());
                }
            };
            // A random first packet sequence number, as perftest does.
            let psn = wire::nonce()
                .map(|n| u32::from_le_bytes([n[0], n[1], n[2], 0]))
                .unwrap_or(0);
            let mut side = VerbsSide {
                opened,
                target,
                cq: &cq,
                qp: &qp,
                port: rail.nic.port,
                psn,
                size: spec.size.max(4096),
                memory,
                path: res.path.clone().unwrap_or_else(|| "host".into()),
            };
            session(Ok(&mut side));
            // Released in reverse order: the QP, then the CQ, then what the engine opened.
            Ok(())
        });
        if !called {
            let f = result.failure.clone().unwrap_or_else(|| {
                failure(FailureKind::OpenFailed, "open the rail", "no reason given")
            });
            session(Err(f));
        }
        // The session's outcome is in the directions; the setup keeps what opening did.
        if called {
            result.failure = None;
        }
        result
    }
}

/// One side of a rail on a real NIC.
struct VerbsSide<'a, 'o, 't> {
    opened: &'a Opened<'o>,
    target: &'a Target<'t>,
    cq: &'a Cq<'a>,
    qp: &'a Qp<'a>,
    port: u8,
    psn: u32,
    size: u64,
    memory: Memory,
    path: String,
}

impl RailSide for VerbsSide<'_, '_, '_> {
    fn endpoint(&mut self) -> Endpoint {
        let p = &self.opened.port;
        Endpoint {
            qpn: self.qp.num(),
            psn: self.psn,
            lid: p.lid,
            gid: self.opened.gid.map(|(_, g)| g.0),
            gid_index: self.opened.gid.map(|(i, _)| i),
            link_layer: if p.link_layer == ibverbs::LINK_LAYER_ETHERNET {
                "Ethernet".into()
            } else {
                "InfiniBand".into()
            },
            active_mtu: p.active_mtu,
            addr: self.opened.target_addr,
            rkey: self.opened.target_mr.rkey(),
            size: self.size,
            path: self.path.clone(),
            memory: self.memory,
        }
    }

    fn connect(&mut self, peer: &Endpoint, mtu: u32) -> Result<(), Failed> {
        let roce = self.opened.gid.is_some();
        self.qp
            .connect(Remote {
                port: self.port,
                sgid_index: self.opened.gid.map(|(i, _)| i),
                dgid: if roce { peer.gid.map(Gid) } else { None },
                dlid: peer.lid,
                mtu,
                dest_qpn: peer.qpn,
                // perftest's hop limit: the path may cross routers.
                hop_limit: 64,
                rq_psn: peer.psn,
                sq_psn: self.psn,
            })
            .map_err(|e| engine::fail(FailureKind::QpFailed, "connect the QP to the peer's", e))
    }

    fn fill(&mut self, seed: u64) -> Result<(), Failed> {
        let mut buf = vec![0u8; self.size as usize];
        engine::pattern(&mut buf, seed);
        self.target
            .write(&buf)
            .map_err(|e| engine::fail(FailureKind::Memory, "fill the buffer", e))
    }

    fn write(&mut self, peer: &Endpoint, len: u64, deadline: Instant) -> Result<(), Failed> {
        engine::one_write(
            self.qp,
            self.cq,
            self.opened.target_addr,
            self.opened.target_mr.lkey(),
            peer.addr,
            peer.rkey,
            len as usize,
            deadline,
        )
        .map_err(|(k, m)| engine::fail(k, format!("RDMA WRITE {} -> peer", self.target.name()), m))
    }

    fn check(&mut self, seed: u64, len: u64) -> Result<(), Failed> {
        let mut want = vec![0u8; self.size as usize];
        engine::pattern(&mut want, seed);
        let mut got = vec![0u8; len as usize];
        self.target
            .read(&mut got)
            .map_err(|e| engine::fail(FailureKind::Memory, "read the buffer back", e))?;
        match engine::mismatch(&want[..len as usize], &got) {
            None => Ok(()),
            Some(m) => Err(engine::fail(
                FailureKind::DataMismatch,
                format!("RDMA WRITE peer -> {}", self.target.name()),
                format!(
                    "the {} holds different bytes than the peer wrote: {m}",
                    self.target.name()
                ),
            )),
        }
    }

    fn bandwidth(
        &mut self,
        peer: &Endpoint,
        len: u64,
        settings: &Settings,
        deadline: Instant,
    ) -> Result<f64, Failed> {
        let (n, secs) = engine::stream(
            self.qp,
            self.cq,
            self.opened.target_addr,
            self.opened.target_mr.lkey(),
            peer.addr,
            peer.rkey,
            len as usize,
            settings.iters,
            Duration::from_millis(settings.duration_ms.max(1)),
            deadline,
        )
        .map_err(|(k, m)| engine::fail(k, "bandwidth run", m))?;
        let gbps = if secs > 0.0 {
            n as f64 * len as f64 * 8.0 / secs / 1e9
        } else {
            0.0
        };
        Ok(engine::round2(gbps))
    }

    fn latency(&mut self, peer: &Endpoint, iters: u32, deadline: Instant) -> Result<f64, Failed> {
        let mut times = Vec::with_capacity(iters as usize);
        for _ in 0..iters.max(1) {
            let t = Instant::now();
            engine::one_write(
                self.qp,
                self.cq,
                self.opened.target_addr,
                self.opened.target_mr.lkey(),
                peer.addr,
                peer.rkey,
                64,
                deadline,
            )
            .map_err(|(k, m)| engine::fail(k, "latency run", m))?;
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(engine::round2(median(&mut times)))
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    const TOKEN: &[u8] = b"a-token-of-twenty-bytes";

    /// Both nodes' buffers, by rkey: a stand-in fabric where a WRITE is a copy.
    type Memory_ = Arc<Mutex<HashMap<u32, Vec<u8>>>>;

    /// What a stand-in side does wrong.
    #[derive(Clone, Default)]
    struct Faults {
        open: Option<&'static str>,
        connect: Option<&'static str>,
        wc: Option<&'static str>,
        corrupt: bool,
        mtu: Option<u32>,
        gid: Option<[u8; 16]>,
        link_layer: Option<&'static str>,
        /// The bandwidth run takes this long (a slow peer).
        slow: Option<Duration>,
        /// The side leaves (drops its control connection) at this rail.
        leave_at_rail: Option<usize>,
    }

    struct Stub {
        mem: Memory_,
        rkey_base: u32,
        faults: Faults,
        opened: std::cell::Cell<usize>,
    }

    struct StubSide<'a> {
        stub: &'a Stub,
        rkey: u32,
        size: u64,
    }

    fn ipv4_gid(last: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&[10, 0, 0, last]);
        g
    }

    impl RailSide for StubSide<'_> {
        fn endpoint(&mut self) -> Endpoint {
            let f = &self.stub.faults;
            Endpoint {
                qpn: self.rkey,
                psn: 1,
                lid: 0,
                gid: Some(f.gid.unwrap_or(ipv4_gid(self.rkey as u8))),
                gid_index: Some(1),
                link_layer: f.link_layer.unwrap_or("Ethernet").into(),
                active_mtu: f.mtu.unwrap_or(5),
                addr: 0x1000,
                rkey: self.rkey,
                size: self.size,
                path: "host".into(),
                memory: Memory::Host,
            }
        }
        fn connect(&mut self, _peer: &Endpoint, _mtu: u32) -> Result<(), Failed> {
            match self.stub.faults.connect {
                Some(m) => Err(engine::fail(FailureKind::QpFailed, "connect", m)),
                None => Ok(()),
            }
        }
        fn fill(&mut self, seed: u64) -> Result<(), Failed> {
            let mut m = self.stub.mem.lock().unwrap();
            let b = m.entry(self.rkey).or_default();
            b.resize(self.size as usize, 0);
            engine::pattern(b, seed);
            Ok(())
        }
        fn write(&mut self, peer: &Endpoint, len: u64, _d: Instant) -> Result<(), Failed> {
            if let Some(w) = self.stub.faults.wc {
                return Err(engine::fail(
                    FailureKind::CompletionError,
                    "RDMA WRITE",
                    format!("completion with {w} (vendor error 0x0)"),
                ));
            }
            let mut m = self.stub.mem.lock().unwrap();
            let mut data = m[&self.rkey][..len as usize].to_vec();
            if self.stub.faults.corrupt {
                data[10] ^= 1;
            }
            let dst = m.entry(peer.rkey).or_default();
            dst.resize(peer.size as usize, 0);
            dst[..len as usize].copy_from_slice(&data);
            Ok(())
        }
        fn check(&mut self, seed: u64, len: u64) -> Result<(), Failed> {
            let m = self.stub.mem.lock().unwrap();
            let mut want = vec![0u8; self.size as usize];
            engine::pattern(&mut want, seed);
            let got = m.get(&self.rkey).cloned().unwrap_or_default();
            match engine::mismatch(&want[..len as usize], &got[..len as usize]) {
                None => Ok(()),
                Some(x) => Err(engine::fail(FailureKind::DataMismatch, "verify", x)),
            }
        }
        fn bandwidth(
            &mut self,
            _p: &Endpoint,
            _len: u64,
            _s: &Settings,
            _d: Instant,
        ) -> Result<f64, Failed> {
            if let Some(d) = self.stub.faults.slow {
                std::thread::sleep(d);
            }
            Ok(12.5)
        }
        fn latency(&mut self, _p: &Endpoint, _n: u32, _d: Instant) -> Result<f64, Failed> {
            Ok(3.0)
        }
    }

    impl Fabric for Stub {
        fn open(
            &self,
            rail: &Rail,
            settings: &Settings,
            session: &mut dyn FnMut(Result<&mut dyn RailSide, Failure>),
        ) -> PairResult {
            let n = self.opened.get();
            self.opened.set(n + 1);
            let mut res = PairResult {
                path: Some("host".into()),
                ..PairResult::default()
            };
            if let Some(m) = self.faults.open {
                let f = failure(FailureKind::PortNotActive, "ibv_query_port", m);
                res.failure = Some(f.clone());
                session(Err(f));
                return res;
            }
            let _ = rail;
            let mut side = StubSide {
                stub: self,
                rkey: self.rkey_base + n as u32,
                size: settings.size,
            };
            session(Ok(&mut side));
            res
        }
    }

    fn rails(names: &[&str]) -> Vec<Rail> {
        names
            .iter()
            .map(|n| Rail {
                nic: NicSpec {
                    device: (*n).into(),
                    port: 1,
                    gid_index: None,
                },
                gpu: None,
                memory: Memory::Host,
                subject: "host memory".into(),
            })
            .collect()
    }

    fn settings() -> Settings {
        Settings {
            size: 8192,
            rail_timeout_ms: 3000,
            ..Settings::default()
        }
    }

    /// Runs a listener and a connector on loopback TCP over the stand-in fabric.
    fn two(
        a_rails: &[&str],
        a: Faults,
        b_rails: &[&str],
        b: Faults,
        b_token: &'static [u8],
    ) -> (Report, Report) {
        let mem: Memory_ = Arc::default();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (ra, rb) = (rails(a_rails), rails(b_rails));
        let mem2 = mem.clone();
        let listener = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let stub = Stub {
                mem: mem2,
                rkey_base: 100,
                faults: a,
                opened: 0.into(),
            };
            let until = Instant::now() + Duration::from_secs(5);
            let mut ch = match wire::accept(s, TOKEN, until) {
                Ok(c) => c,
                Err(e) => {
                    let mut r = Report::new("node-a", Role::Listener, settings());
                    r.fail(&e);
                    return r;
                }
            };
            match stub.faults.leave_at_rail {
                Some(0) => {
                    drop(ch);
                    Report::new("node-a", Role::Listener, settings())
                }
                _ => run(&mut ch, Role::Listener, "node-a", &ra, settings(), &stub),
            }
        });
        let stub = Stub {
            mem,
            rkey_base: 200,
            faults: b,
            opened: 0.into(),
        };
        let b_report = match connect(&addr.to_string(), b_token, Duration::from_secs(5)) {
            Ok(mut ch) => run(&mut ch, Role::Connector, "node-b", &rb, settings(), &stub),
            Err(e) => {
                let mut r = Report::new("node-b", Role::Connector, settings());
                r.fail(&e);
                r
            }
        };
        (listener.join().unwrap(), b_report)
    }

    #[test]
    fn two_rails_pass_both_ways_with_data_verified() {
        let (a, b) = two(
            &["mlx5_0", "mlx5_1"],
            Faults::default(),
            &["mlx5_2", "mlx5_3"],
            Faults::default(),
            TOKEN,
        );
        for r in [&a, &b] {
            assert_eq!(r.error, None, "{r:?}");
            assert_eq!(r.rails.len(), 2);
            assert_eq!(r.exit_code(), 0, "{r:?}");
            for rail in &r.rails {
                assert_eq!(rail.outgoing.verified_bytes, Some(8192));
                assert_eq!(rail.incoming.verified_bytes, Some(8192));
                assert_eq!(rail.outgoing.gbps, Some(12.5));
                assert_eq!(rail.incoming.latency_us, Some(3.0));
                assert_eq!(rail.path_mtu, Some(4096));
            }
        }
        // Rail i with rail i: the names say which NIC wrote into which.
        assert_eq!(a.rails[1].outgoing.from, "node-a mlx5_1 port 1");
        assert_eq!(a.rails[1].outgoing.to, "node-b mlx5_3 port 1");
        assert_eq!(b.rails[1].incoming.from, "node-a mlx5_1 port 1");
        assert_eq!(a.peer.as_deref(), Some("node-b"));
        assert_eq!(a.settings, settings());
    }

    #[test]
    fn corrupted_data_is_caught_by_the_target_and_told_to_the_writer() {
        let bad = Faults {
            corrupt: true,
            ..Faults::default()
        };
        let (a, b) = two(&["mlx5_0"], Faults::default(), &["mlx5_0"], bad, TOKEN);
        // The connector (b) wrote wrong bytes: a found them, b hears of it.
        let f = a.rails[0].incoming.failure.as_ref().unwrap();
        assert_eq!(f.kind, FailureKind::DataMismatch);
        let f = b.rails[0].outgoing.failure.as_ref().unwrap();
        assert!(f.step.contains("(on node-a)"), "{f:?}");
        // The other direction still ran and passed.
        assert!(a.rails[0].outgoing.passed() && b.rails[0].incoming.passed());
        assert_eq!((a.exit_code(), b.exit_code()), (1, 1));
    }

    #[test]
    fn completion_errors_are_explained() {
        for (wc, want) in [
            (
                "IBV_WC_REM_ACCESS_ERR",
                "node-a's NIC refused the WRITE into its buffer: its registration",
            ),
            ("IBV_WC_RETRY_EXC_ERR", "node-a's NIC never acknowledged"),
        ] {
            let bad = Faults {
                wc: Some(wc),
                ..Faults::default()
            };
            let (a, b) = two(&["r0"], Faults::default(), &["r0"], bad, TOKEN);
            let f = b.rails[0].outgoing.failure.as_ref().unwrap();
            assert!(f.message.contains(want), "{f:?}");
            let f = a.rails[0].incoming.failure.as_ref().unwrap();
            assert!(
                f.step.contains("(on node-b)") && f.message.contains(wc),
                "{f:?}"
            );
        }
    }

    #[test]
    fn a_port_down_on_one_side_is_named_on_both() {
        let down = Faults {
            open: Some("mlx5_0 port 1 is DOWN"),
            ..Faults::default()
        };
        let (a, b) = two(&["mlx5_0"], down, &["mlx5_0"], Faults::default(), TOKEN);
        assert_eq!(
            a.rails[0].outgoing.failure.as_ref().unwrap().kind,
            FailureKind::PortNotActive
        );
        let f = b.rails[0].incoming.failure.as_ref().unwrap();
        assert_eq!(f.step, "ibv_query_port (on node-a)");
        assert!(f.message.contains("DOWN"));
        assert_eq!(b.exit_code(), 1);
    }

    #[test]
    fn mtus_that_differ_meet_at_the_smaller_and_say_so() {
        let small = Faults {
            mtu: Some(3), // IBV_MTU_1024: a 1500-byte Ethernet MTU
            ..Faults::default()
        };
        let (a, b) = two(&["r0"], small, &["r0"], Faults::default(), TOKEN);
        for r in [&a, &b] {
            assert_eq!(r.rails[0].path_mtu, Some(1024), "{r:?}");
            assert!(
                r.rails[0].notes.iter().any(|n| n.contains("path MTU 1024")),
                "{r:?}"
            );
            assert_eq!(r.exit_code(), 0);
        }
    }

    #[test]
    fn gid_families_and_link_layers_that_cannot_meet_are_named_before_any_packet() {
        let mut v6 = [0u8; 16];
        v6[..2].copy_from_slice(&[0xfe, 0x80]);
        let (a, _) = two(
            &["r0"],
            Faults {
                gid: Some(v6),
                ..Faults::default()
            },
            &["r0"],
            Faults::default(),
            TOKEN,
        );
        let f = a.rails[0].outgoing.failure.as_ref().unwrap();
        assert!(
            f.message.contains("IPv6 link-local") && f.message.contains("IPv4"),
            "{f:?}"
        );
        let (a, _) = two(
            &["r0"],
            Faults {
                link_layer: Some("InfiniBand"),
                ..Faults::default()
            },
            &["r0"],
            Faults::default(),
            TOKEN,
        );
        let f = a.rails[0].outgoing.failure.as_ref().unwrap();
        assert!(f.message.contains("no path between them"), "{f:?}");
    }

    /// The two-node test names GID families by the program's one rule: fe80::/10 is
    /// link-local, whatever follows the first 10 bits (it once said so while the rdma-gid check
    /// called fe80:0:0:1:: IPv6).
    #[test]
    fn gid_families_follow_the_one_rule() {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xfe, 0x80]);
        g[7] = 1;
        assert_eq!(gid_family(&g), "IPv6 link-local");
        assert_eq!(
            crate::parse::rdma::Gid(g).family(),
            crate::parse::rdma::GidFamily::LinkLocal
        );
        assert_eq!(gid_family(&ipv4_gid(7)), "IPv4");
        assert_eq!(gid_text(&ipv4_gid(7)), "::ffff:10.0.0.7");
    }

    #[test]
    fn an_unreachable_gid_is_explained_at_connect() {
        let bad = Faults {
            connect: Some("ibv_modify_qp to RTR: Network is unreachable (ENETUNREACH)"),
            ..Faults::default()
        };
        let (a, b) = two(&["r0"], Faults::default(), &["r0"], bad, TOKEN);
        let f = b.rails[0].outgoing.failure.as_ref().unwrap();
        assert!(
            f.message
                .contains("cannot reach node-a's GID ::ffff:10.0.0.100"),
            "{f:?}"
        );
        assert!(
            a.rails[0]
                .incoming
                .failure
                .as_ref()
                .unwrap()
                .step
                .contains("(on node-b)")
        );
    }

    #[test]
    fn an_unanswered_neighbour_request_is_explained_at_connect() {
        // What a real kernel (6.1, rxe) answers at RTR when the peer's rail address is on
        // another subnet and nobody on the link answers for it: not ENETUNREACH (a lookup bound
        // to the rail's netdev assumes the address on-link) but the address resolution's
        // timeout.
        let bad = Faults {
            connect: Some("ibv_modify_qp to RTR: Connection timed out (os error 110)"),
            ..Faults::default()
        };
        let (a, b) = two(&["r0"], Faults::default(), &["r0"], bad, TOKEN);
        let f = b.rails[0].outgoing.failure.as_ref().unwrap();
        assert!(
            f.message
                .contains("no MAC address for node-a's GID ::ffff:10.0.0.100"),
            "{f:?}"
        );
        assert!(f.message.contains("ARP"), "{f:?}");
        assert!(!f.message.contains("no route to its subnet"), "{f:?}");
        assert!(a.rails[0].incoming.failure.is_some());
    }

    #[test]
    fn rails_without_a_partner_fail_named() {
        let (a, b) = two(
            &["r0", "r1"],
            Faults::default(),
            &["r0"],
            Faults::default(),
            TOKEN,
        );
        assert_eq!(a.rails.len(), 2);
        assert!(a.rails[0].passed());
        let f = a.rails[1].outgoing.failure.as_ref().unwrap();
        assert!(
            f.message.contains("node-b has 1 rail(s), this node 2"),
            "{f:?}"
        );
        assert_eq!(b.rails.len(), 2, "{b:?}");
        assert!(
            b.rails[1]
                .outgoing
                .failure
                .as_ref()
                .unwrap()
                .message
                .contains("no partner on this node")
        );
        assert_eq!((a.exit_code(), b.exit_code()), (1, 1));
    }

    #[test]
    fn a_wrong_token_stops_both_before_any_rail_opens() {
        let (a, b) = two(
            &["r0"],
            Faults::default(),
            &["r0"],
            Faults::default(),
            b"not-the-same-token!!",
        );
        assert_eq!(a.error_class.as_deref(), Some("auth"), "{a:?}");
        assert_eq!(b.error_class.as_deref(), Some("auth"), "{b:?}");
        assert!(a.rails.is_empty() && b.rails.is_empty());
        assert_eq!((a.exit_code(), b.exit_code()), (2, 2));
    }

    #[test]
    fn a_peer_that_leaves_or_stalls_mid_test_ends_the_run_named() {
        let (_, b) = two(
            &["r0"],
            Faults {
                leave_at_rail: Some(0),
                ..Faults::default()
            },
            &["r0"],
            Faults::default(),
            TOKEN,
        );
        assert_eq!(b.error_class.as_deref(), Some("lost"), "{b:?}");
        assert_eq!(b.exit_code(), 2);
        // A writer whose bandwidth run outlasts the rail's deadline: the target stops waiting.
        let t0 = Instant::now();
        let (a, _) = two(
            &["r0"],
            Faults::default(),
            &["r0"],
            Faults {
                slow: Some(Duration::from_millis(4000)),
                ..Faults::default()
            },
            TOKEN,
        );
        assert_eq!(a.error_class.as_deref(), Some("lost"), "{a:?}");
        assert!(
            a.error
                .as_deref()
                .unwrap()
                .contains("the peer's bandwidth run"),
            "{a:?}"
        );
        assert!(t0.elapsed() < Duration::from_secs(8));
    }

    /// A peer's settings only ever lower this side's: a connector that asks for a rail
    /// timeout of ten minutes and then stalls costs the listener its own rail timeout (1 s
    /// here), not the peer's; both sides run at the smaller values, so they stay in step.
    #[test]
    fn a_peers_settings_only_lower_this_sides() {
        let mine = Settings {
            size: 8192,
            rail_timeout_ms: 1000,
            iters: 10,
            ..Settings::default()
        };
        let greedy = Settings {
            size: 1 << 40,
            rail_timeout_ms: 600_000,
            iters: u32::MAX,
            duration_ms: u64::MAX,
            latency_iters: u32::MAX,
        };
        let session = mine.bounded_by(&greedy);
        assert_eq!(session, mine.clone());
        assert_eq!(greedy.bounded_by(&mine), session, "both sides agree");
        // A peer's smaller values are taken; a size is kept a multiple of 4 KiB, at least 4 KiB.
        let small = Settings {
            size: 100,
            rail_timeout_ms: 10,
            ..mine.clone()
        };
        assert_eq!(mine.bounded_by(&small).size, 4096);
        assert_eq!(mine.bounded_by(&small).rail_timeout_ms, 10);
        assert_eq!(bounded_name("node-b"), "node-b");
        assert_eq!(bounded_name(&"x".repeat(100_000)).chars().count(), 255);

        // The listener (node-a) with its own 1 s; the connector asks for 600 s and its
        // bandwidth run takes 4 s: the listener stops waiting after its own second.
        let mem: Memory_ = Arc::default();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mem2 = mem.clone();
        let listener = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            let stub = Stub {
                mem: mem2,
                rkey_base: 100,
                faults: Faults::default(),
                opened: 0.into(),
            };
            let mut ch = wire::accept(s, TOKEN, Instant::now() + HANDSHAKE).unwrap();
            let t0 = Instant::now();
            let r = run(
                &mut ch,
                Role::Listener,
                "node-a",
                &rails(&["r0"]),
                mine,
                &stub,
            );
            (r, t0.elapsed())
        });
        let stub = Stub {
            mem,
            rkey_base: 200,
            faults: Faults {
                slow: Some(Duration::from_millis(4000)),
                ..Faults::default()
            },
            opened: 0.into(),
        };
        let mut ch = connect(&addr.to_string(), TOKEN, Duration::from_secs(5)).unwrap();
        let b = run(
            &mut ch,
            Role::Connector,
            "node-b",
            &rails(&["r0"]),
            greedy,
            &stub,
        );
        let (a, took) = listener.join().unwrap();
        assert_eq!(a.settings.rail_timeout_ms, 1000, "{a:?}");
        assert_eq!(b.settings.rail_timeout_ms, 1000, "{b:?}");
        assert_eq!(a.error_class.as_deref(), Some("lost"), "{a:?}");
        assert!(took < Duration::from_millis(3000), "{took:?}");
    }

    #[test]
    fn nccl_ib_hca_gives_the_rail_order() {
        let names = |v| {
            nccl_order(v)
                .unwrap()
                .into_iter()
                .map(|n| (n.name, n.port))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(Some("=mlx5_2:1,mlx5_0")),
            [("mlx5_2".to_owned(), Some(1)), ("mlx5_0".to_owned(), None)]
        );
        // An exclusion list orders nothing: the NICs by name.
        assert!(names(Some("^mlx5_1")).is_empty());
        assert!(names(None).is_empty());
        assert!(nccl_order(Some("mlx5_0:x")).is_err());
    }

    #[test]
    fn addresses_default_the_port() {
        assert_eq!(listen_addr(None), "0.0.0.0:18516");
        assert_eq!(listen_addr(Some(":9000")), "0.0.0.0:9000");
        assert_eq!(listen_addr(Some("10.0.0.1")), "10.0.0.1:18516");
        assert_eq!(listen_addr(Some("10.0.0.1:7")), "10.0.0.1:7");
        assert_eq!(peer_addr("node-b"), "node-b:18516");
        assert_eq!(peer_addr("node-b:1234"), "node-b:1234");
        assert_eq!(peer_addr("fe80::1"), "[fe80::1]:18516");
    }
}
