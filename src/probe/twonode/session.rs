//! The session between the two nodes: the control connection (listen or connect, then the
//! token proved by [`wire`]), the hellos, and each rail in lockstep with the peer, every
//! message of it one [`Step`] each way ([`exchange`], [`receive`]).

use super::explanation::{
    compatible, explain_completion, explain_connect, failure, from_failed, on_peer,
};
use super::{
    DEFAULT_PORT, Direction, Endpoint, Fabric, Hello, Rail, RailResult, RailSide, Report, Role,
    Settings, Step,
};
use crate::ffi::ibverbs;
use crate::gdr::wire::{self, Channel, WireError};
use crate::gdr::{Failure, FailureKind, Memory, NicSpec};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What [`expect`] takes of one kind of step: `kind!(Open)` is the content of a `Step::Open`.
macro_rules! kind {
    ($variant:ident) => {
        |s: Step| match s {
            Step::$variant(t) => Some(t),
            _ => None,
        }
    };
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
fn swap<M: Serialize + DeserializeOwned>(
    ch: &mut Channel,
    role: Role,
    mine: &M,
    until: Instant,
    what: &str,
) -> Result<M, WireError> {
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

/// The one step of the lockstep: a [`Step`] each way ([`swap`]), the peer's of the kind that
/// `pick` takes ([`kind!`]).
fn exchange<T>(
    ch: &mut Channel,
    role: Role,
    mine: &Step,
    until: Instant,
    what: &str,
    pick: impl FnOnce(Step) -> Option<T>,
) -> Result<T, WireError> {
    expect(swap(ch, role, mine, until, what)?, what, pick)
}

/// The peer's next step, of the kind that `pick` takes, where only the peer speaks.
fn receive<T>(
    ch: &mut Channel,
    until: Instant,
    what: &str,
    pick: impl FnOnce(Step) -> Option<T>,
) -> Result<T, WireError> {
    expect(ch.recv(until, what)?, what, pick)
}

/// What `pick` takes of the peer's step; a step of another kind means the two sides are out of
/// step, and the run ends, named, rather than either misreading the other.
fn expect<T>(got: Step, what: &str, pick: impl FnOnce(Step) -> Option<T>) -> Result<T, WireError> {
    let kind = got.kind();
    pick(got).ok_or_else(|| WireError::Malformed {
        what: what.into(),
        detail: format!("a {kind} step out of order: the two sides are not in step"),
    })
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
    let theirs: Hello = match swap(ch, role, &hello, until, "hello") {
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
            report.rails.push(RailResult::unpaired(
                i,
                local.clone(),
                None,
                (me, them),
                why,
            ));
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
            let none = Rail {
                nic: NicSpec {
                    device: "(none)".into(),
                    port: 0,
                    gid_index: None,
                },
                gpu: None,
                memory: p.memory,
                subject: "no rail".into(),
            };
            report.rails.push(RailResult::unpaired(
                i,
                none,
                Some(p.clone()),
                (me, them),
                why,
            ));
        }
    }
    report
}

/// A name from the peer, at most 255 characters (a fully qualified host name is at most 253),
/// the rest as `…`. Shown through the one sanitizer later, like any string from the peer.
pub(super) fn bounded_name(name: &str) -> String {
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
    let theirs = exchange(
        ch,
        role,
        &Step::Open(mine.clone()),
        until,
        "the peer's rail",
        kind!(Open),
    )?;
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
    let peer_connected = exchange(
        ch,
        role,
        &Step::Connected(connected.clone()),
        until,
        "the peer's connection",
        kind!(Connected),
    )?;
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
    match receive(ch, until, "the peer's verification", kind!(Verified))? {
        Ok(()) => dir.verified_bytes = Some(len),
        Err(f) => {
            dir.failure = Some(on_peer(&f, peer_host));
            return Ok(());
        }
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
    let seed = match receive(ch, until, "the peer's WRITE", kind!(Wrote))? {
        Ok(seed) => seed,
        Err(f) => {
            dir.failure = Some(on_peer(&f, peer_host));
            return Ok(());
        }
    };
    let verified = side.check(seed, len).map_err(from_failed);
    ch.send(&Step::Verified(verified.clone()), until)?;
    if let Err(f) = verified {
        dir.failure = Some(f);
        return Ok(());
    }
    dir.verified_bytes = Some(len);
    match receive(ch, until, "the peer's bandwidth run", kind!(Measured))? {
        Ok((g, l)) => {
            dir.gbps = Some(g);
            dir.latency_us = Some(l);
        }
        Err(f) => dir.failure = Some(on_peer(&f, peer_host)),
    }
    Ok(())
}
