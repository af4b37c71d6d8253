//! The session's lockstep and its failures, on loopback TCP over a stand-in fabric.

use super::explanation::{failure, gid_family, gid_text};
use super::session::bounded_name;
use super::*;
use crate::gdr::engine::{self, Failed};
use crate::gdr::{FailureKind, NicSpec, wire};
use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
