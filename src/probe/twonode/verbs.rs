//! The RDMA side of a rail on a real NIC: the write engine opens the NIC and registers the
//! buffer (crate::gdr::engine, as for the one-node test), then a queue pair connected to the
//! peer's moves the bytes.

use super::explanation::failure;
use super::{Endpoint, Fabric, Rail, RailSide, Settings};
use crate::ffi::ibverbs::{self, Cq, Gid, Qp, Remote};
use crate::gdr::engine::{self, Failed, Opened, Target};
use crate::gdr::wire;
use crate::gdr::{Failure, FailureKind, Memory, PairResult, PairSpec};
use std::time::{Duration, Instant};

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
            // The two-node test runs RC only. No driver given: an RC device runs as before, and
            // an EFA one (told by its link layer and libefa, engine::srd::choose) still fails
            // at its RC QP.
            nic_driver: None,
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
