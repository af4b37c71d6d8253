//! One pair, in the child: the buffer under test, the NIC, registration, loopback WRITEs both
//! ways, verification, bandwidth. Every resource is a guard dropped in reverse order on every
//! return path.

use super::{
    Bandwidth, Failure, FailureKind, Memory, NicSpec, PairResult, PairSpec, PortInfo, Registration,
    errno_meaning,
};
use crate::ffi::gpu::{DeviceMemory, GpuLibrary, OpenedGpu};
use crate::ffi::hostmem::HostBuffer;
use crate::ffi::ibverbs::{self, Context, Cq, Gid, Loopback, MemoryRegion, Pd, Qp, Verbs, Wc};
use crate::ffi::{cuda, hip, udmabuf};
use std::time::{Duration, Instant};

pub const ACCESS: i32 =
    ibverbs::ACCESS_LOCAL_WRITE | ibverbs::ACCESS_REMOTE_WRITE | ibverbs::ACCESS_REMOTE_READ;
/// WRITEs in flight during the bandwidth run (perftest's default tx depth is 128; 32 keeps
/// the send queue small and is enough to saturate a loopback).
pub(crate) const DEPTH: u32 = 32;

/// The buffer under test.
pub enum Target<'a> {
    Host(HostBuffer),
    Udma(udmabuf::HostDmabuf),
    /// A GPU's memory (CUDA, HIP).
    Gpu(Box<dyn DeviceMemory + 'a>),
}

impl Target<'_> {
    pub fn addr(&self) -> u64 {
        match self {
            Target::Host(b) => b.addr(),
            Target::Udma(u) => u.addr(),
            Target::Gpu(b) => b.addr(),
        }
    }
    pub fn write(&self, data: &[u8]) -> Result<(), String> {
        match self {
            Target::Host(b) => {
                b.write(data);
                Ok(())
            }
            Target::Udma(u) => {
                u.write(data);
                Ok(())
            }
            Target::Gpu(b) => b.write(data),
        }
    }
    pub fn read(&self, out: &mut [u8]) -> Result<(), String> {
        match self {
            Target::Host(b) => {
                b.read(out);
                Ok(())
            }
            Target::Udma(u) => {
                u.read(out);
                Ok(())
            }
            Target::Gpu(b) => b.read(out),
        }
    }
    pub fn name(&self) -> &'static str {
        match self {
            Target::Host(_) | Target::Udma(_) => "host buffer",
            Target::Gpu(_) => "GPU",
        }
    }
    /// `ibv_reg_mr` on the buffer itself (host memory, or a GPU's through peer memory); `None`
    /// for a host dma-buf, which is registered as a dma-buf only.
    fn reg_mr<'s>(&'s self, pd: &'s Pd<'_>) -> Option<std::io::Result<MemoryRegion<'s>>> {
        match self {
            Target::Host(b) => Some(pd.reg_mr(b, ACCESS)),
            Target::Gpu(b) => Some(pd.reg_mr(&**b, ACCESS)),
            Target::Udma(_) => None,
        }
    }
}

struct Run {
    res: PairResult,
    start: Instant,
    deadline: Instant,
}

impl Run {
    fn fail(
        mut self,
        kind: FailureKind,
        step: impl Into<String>,
        message: impl Into<String>,
    ) -> PairResult {
        self.res.failure = Some(Failure {
            kind,
            step: step.into(),
            message: message.into(),
        });
        self.done()
    }
    fn done(mut self) -> PairResult {
        self.res.elapsed_ms = self.start.elapsed().as_millis() as u64;
        self.res
    }
}

/// The GPU a pair's buffer lives on, opened once: a worker (crate::gpu::worker) keeps it open
/// between its pairs, so that CUDA (or HIP) starts once per GPU, not once per pair.
pub enum GpuSide<'a> {
    /// Host memory, or nothing opened.
    None,
    Gpu {
        gpu: &'a dyn OpenedGpu,
        /// What opening it did and saw (`cuInit: ...`, the attributes), for every pair's steps.
        steps: &'a [String],
    },
}

/// What runs on the registered buffer under test: the one-node loopback below, or a rail
/// between two nodes (super::twonode). Its arguments: the result so far, what was opened, the
/// buffer, the deadline.
pub type Body<'b> =
    &'b mut dyn FnMut(&mut PairResult, &Opened, &Target, Instant) -> Result<(), Failed>;

/// One pair in a process of its own (`gdrdoctor gdr-pair`): opens what the buffer needs, then
/// [`run_pair_on`].
pub fn run_pair(spec: &PairSpec) -> PairResult {
    run_pair_with(spec, &mut |res, o, t, deadline| {
        loopback(spec, res, o, t, deadline)
    })
}

/// Opens what the buffer needs (CUDA, HIP or nothing), then [`run_pair_on_with`].
pub fn run_pair_with(spec: &PairSpec, body: Body) -> PairResult {
    match spec.memory {
        Memory::Host | Memory::HostDmabuf => run_pair_on_with(spec, &GpuSide::None, body),
        Memory::Cuda => run_pair_on_library::<cuda::Session>(spec, body),
        Memory::Hip => run_pair_on_library::<hip::Session>(spec, body),
    }
}

/// Opens the GPU runtime `L` and the pair's GPU with it, then [`run_pair_on_with`].
fn run_pair_on_library<L: GpuLibrary>(spec: &PairSpec, body: Body) -> PairResult {
    let start = Instant::now();
    let failed = |kind, step: &str, message: String, steps: Vec<String>| PairResult {
        memory_steps: steps,
        failure: Some(Failure {
            kind,
            step: step.into(),
            message,
        }),
        elapsed_ms: start.elapsed().as_millis() as u64,
        ..PairResult::default()
    };
    let Some(bus) = spec.gpu.as_deref() else {
        let why = format!("{} memory needs a GPU", L::NAME);
        return failed(FailureKind::Memory, "spec", why, vec![]);
    };
    let library = match open_library::<L>() {
        Ok(l) => l,
        Err(e) => return failed(FailureKind::Memory, L::LIBRARY, e, vec![]),
    };
    let mut steps = library.started();
    let gpu = match library.gpu(bus) {
        Ok(g) => g,
        Err(e) => return failed(FailureKind::Memory, L::BY_BUS_ID, e, steps),
    };
    steps.extend(gpu.opened());
    let mut r = run_pair_on_with(
        spec,
        &GpuSide::Gpu {
            gpu: &gpu,
            steps: &steps,
        },
        body,
    );
    r.elapsed_ms = start.elapsed().as_millis() as u64;
    r
}

/// A GPU runtime library with everything the write test calls, initialised.
pub fn open_library<L: GpuLibrary>() -> Result<L, String> {
    let library = L::open().map_err(|e| e.reason())?;
    library.write_test_symbols().map_err(|e| e.reason())?;
    Ok(library)
}

/// One pair on a GPU already opened (or host memory): the buffer, its dma-buf, the NIC,
/// registration, WRITEs both ways, verification, bandwidth.
pub fn run_pair_on(spec: &PairSpec, side: &GpuSide) -> PairResult {
    run_pair_on_with(spec, side, &mut |res, o, t, deadline| {
        loopback(spec, res, o, t, deadline)
    })
}

/// The buffer under test and its dma-buf on a GPU already opened (or host memory), the NIC,
/// registration, then `body` on what was opened.
pub fn run_pair_on_with(spec: &PairSpec, side: &GpuSide, body: Body) -> PairResult {
    let start = Instant::now();
    let mut run = Run {
        res: PairResult::default(),
        start,
        // From the spec: in the two-node test, a peer's `rail_timeout_ms`.
        deadline: crate::deadline::later(start, Duration::from_millis(spec.deadline_ms)),
    };
    let size = spec.size.max(4096) as usize;
    let target = match (spec.memory, side) {
        (Memory::Host, _) => match HostBuffer::new(size) {
            Ok(b) => {
                run.res.memory_steps.push(format!(
                    "host buffer of {}",
                    crate::parse::bytes(size as u64)
                ));
                Target::Host(b)
            }
            Err(e) => return run.fail(FailureKind::Memory, "host allocation", e),
        },
        (Memory::HostDmabuf, _) => match udmabuf::HostDmabuf::create(size) {
            Ok(u) => {
                run.res.memory_steps.push(format!(
                    "{} of host memory as a dma-buf from {}",
                    crate::parse::bytes(size as u64),
                    u.source
                ));
                Target::Udma(u)
            }
            Err(e) => return run.fail(FailureKind::Memory, "host dma-buf", e),
        },
        (m, GpuSide::Gpu { gpu, steps }) if gpu.memory() == m => {
            run.res.memory_steps.extend(steps.iter().cloned());
            match gpu.alloc(size) {
                Ok((b, step)) => {
                    run.res.memory_steps.push(step);
                    Target::Gpu(b)
                }
                Err((call, e)) => return run.fail(FailureKind::Memory, call, e),
            }
        }
        (m, _) => {
            return run.fail(
                FailureKind::Memory,
                "spec",
                format!(
                    "{} memory asked of a process that did not open that GPU",
                    m.as_str()
                ),
            );
        }
    };

    // The GPU side's dma-buf, exported before any NIC is involved.
    let mut dmabuf: Option<Result<(i32, u64, bool), String>> = match &target {
        Target::Gpu(b) => Some(b.export_dmabuf().map(|(fd, off)| (fd, off, true))),
        Target::Udma(u) => Some(Ok((u.fd, 0, false))),
        Target::Host(_) => None,
    };
    match &dmabuf {
        Some(Ok((fd, _, true))) => run
            .res
            .memory_steps
            .push(format!("dma-buf exported ({})", crate::ffi::fd_target(*fd))),
        Some(Err(e)) => run
            .res
            .memory_steps
            .push(format!("dma-buf export failed: {e}")),
        _ => {}
    }
    let result = with_nic(spec, run, &target, &dmabuf, body);
    if let (Some(Ok((fd, _, true))), Target::Gpu(b)) = (dmabuf.take(), &target) {
        b.close_dmabuf(fd);
    }
    result
}

/// A step that failed: its kind, its name, what happened.
pub type Failed = (FailureKind, String, String);

pub fn fail(kind: FailureKind, step: impl Into<String>, message: impl Into<String>) -> Failed {
    (kind, step.into(), message.into())
}

/// What the steps up to a registered buffer opened, for the test that follows: the one-node
/// loopback below, or a rail between two nodes (super::rail).
pub struct Opened<'a> {
    pub pd: &'a Pd<'a>,
    pub ctx: &'a Context<'a>,
    pub port: ibverbs::PortAttr,
    pub gid: Option<(u8, Gid)>,
    pub target_mr: &'a MemoryRegion<'a>,
    pub target_addr: u64,
}

/// Loads libibverbs, opens the NIC, checks its port and GID, and registers the buffer under
/// test (dma-buf first where there is one, then peer memory or host memory), recording each
/// step in `res`; then runs `body` on what it opened. Every resource is released when this
/// returns, in reverse order of creation.
pub fn open_and_register<R>(
    nic: &NicSpec,
    size: usize,
    res: &mut PairResult,
    target: &Target,
    dmabuf: &Option<Result<(i32, u64, bool), String>>,
    body: impl FnOnce(&mut PairResult, &Opened, &Target) -> Result<R, Failed>,
) -> Result<R, Failed> {
    let verbs = match Verbs::load() {
        Ok(v) => v,
        Err(ibverbs::LoadError::NotFound { tried, message }) => {
            return Err(fail(
                FailureKind::VerbsMissing,
                "dlopen libibverbs",
                format!("{}: {message}", tried.join(", ")),
            ));
        }
        Err(ibverbs::LoadError::MissingSymbol { library, symbol }) => {
            return Err(fail(
                FailureKind::VerbsSymbolMissing,
                "dlsym",
                format!("{library} does not export {symbol}"),
            ));
        }
    };
    res.verbs_library = Some(verbs.path.clone());
    let ctx = match verbs.open(&nic.device) {
        Ok(Some(c)) => c,
        Ok(None) => {
            let listed = verbs
                .device_names()
                .map(|n| n.join(", "))
                .unwrap_or_default();
            return Err(fail(
                FailureKind::ProviderMissing,
                "ibv_get_device_list",
                format!(
                    "libibverbs lists no {} (it lists: {}): no provider for its driver is installed",
                    nic.device,
                    if listed.is_empty() {
                        "nothing"
                    } else {
                        &listed
                    }
                ),
            ));
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => {
            return Err(fail(
                FailureKind::NoAccess,
                "ibv_open_device",
                format!(
                    "{}: {} (the /dev/infiniband/uverbs* node)",
                    nic.device,
                    super::os_error(&e)
                ),
            ));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            return Err(fail(
                FailureKind::DeviceList,
                "ibv_get_device_list",
                format!("{e}: ib_uverbs is not loaded"),
            ));
        }
        Err(e) => {
            return Err(fail(
                FailureKind::OpenFailed,
                "ibv_open_device",
                format!("{}: {e}", nic.device),
            ));
        }
    };
    let port = match ctx.query_port(nic.port) {
        Ok(p) => p,
        Err(e) => {
            return Err(fail(
                FailureKind::OpenFailed,
                "ibv_query_port",
                format!("{} port {}: {e}", nic.device, nic.port),
            ));
        }
    };
    let roce = port.link_layer == ibverbs::LINK_LAYER_ETHERNET;
    let gid = match (roce, nic.gid_index) {
        (true, Some(i)) => match ctx.query_gid(nic.port, i) {
            Ok(g) => Some((i as u8, g)),
            Err(e) => {
                return Err(fail(
                    FailureKind::OpenFailed,
                    "ibv_query_gid",
                    format!("{} port {} GID {i}: {e}", nic.device, nic.port),
                ));
            }
        },
        (true, None) => {
            return Err(fail(
                FailureKind::OpenFailed,
                "GID",
                format!(
                    "{} port {} is RoCE but has no RoCE v2 GID to use (see rdma-gid)",
                    nic.device, nic.port
                ),
            ));
        }
        (false, _) => None,
    };
    res.port = Some(PortInfo {
        state: port_state(port.state),
        link_layer: if roce {
            "Ethernet".into()
        } else {
            "InfiniBand".into()
        },
        active_mtu: ibverbs::mtu_bytes(port.active_mtu),
        lid: port.lid,
        gid: gid.map(|(i, g)| format!("{i}: {g}")),
    });
    if port.state != ibverbs::PORT_ACTIVE {
        return Err(fail(
            FailureKind::PortNotActive,
            "ibv_query_port",
            format!(
                "{} port {} is {}, not ACTIVE: nothing can be sent through it",
                nic.device,
                nic.port,
                port_state(port.state)
            ),
        ));
    }
    let pd = match ctx.alloc_pd() {
        Ok(p) => p,
        Err(e) => return Err(fail(FailureKind::OpenFailed, "ibv_alloc_pd", e.to_string())),
    };

    // Register the buffer under test: dma-buf first where there is one, then the peer-memory
    // path for GPU memory; host memory directly.
    let target_addr = target.addr();
    let mut target_mr: Option<MemoryRegion> = None;
    let mut attempts: Vec<Registration> = Vec::new();
    if let Some(d) = dmabuf {
        let attempt = match d {
            Ok((fd, offset, _)) => {
                match pd.reg_dmabuf_mr(*offset, size, target_addr, *fd, ACCESS) {
                    None => Registration {
                        path: "dmabuf".into(),
                        ok: false,
                        errno: None,
                        error: Some(format!(
                            "{} does not export ibv_reg_dmabuf_mr (rdma-core older than 34)",
                            verbs.path
                        )),
                        meaning: Some("libibverbs too old for the DMA-BUF path".into()),
                    },
                    Some(Ok(mr)) => {
                        target_mr = Some(mr);
                        Registration {
                            path: "dmabuf".into(),
                            ok: true,
                            errno: None,
                            error: None,
                            meaning: None,
                        }
                    }
                    Some(Err(e)) => Registration {
                        path: "dmabuf".into(),
                        ok: false,
                        errno: e.raw_os_error(),
                        error: Some(format!("ibv_reg_dmabuf_mr: {}", super::os_error(&e))),
                        meaning: e
                            .raw_os_error()
                            .and_then(|n| errno_meaning("dmabuf", n))
                            .map(str::to_owned),
                    },
                }
            }
            Err(e) => Registration {
                path: "dmabuf".into(),
                ok: false,
                errno: None,
                error: Some(format!("no dma-buf to register: {e}")),
                meaning: None,
            },
        };
        attempts.push(attempt);
    }
    let direct = if target_mr.is_none() {
        target.reg_mr(&pd)
    } else {
        None
    };
    if let Some(registered) = direct {
        let path = if matches!(target, Target::Host(_)) {
            "host"
        } else {
            "peermem"
        };
        match registered {
            Ok(mr) => {
                target_mr = Some(mr);
                attempts.push(Registration {
                    path: path.into(),
                    ok: true,
                    errno: None,
                    error: None,
                    meaning: None,
                });
            }
            Err(e) => attempts.push(Registration {
                path: path.into(),
                ok: false,
                errno: e.raw_os_error(),
                error: Some(format!("ibv_reg_mr: {}", super::os_error(&e))),
                meaning: e
                    .raw_os_error()
                    .and_then(|n| errno_meaning(path, n))
                    .map(str::to_owned),
            }),
        }
    }
    res.path = attempts.iter().find(|a| a.ok).map(|a| a.path.clone());
    res.registrations = attempts;
    let Some(target_mr) = target_mr else {
        let why: Vec<String> = res
            .registrations
            .iter()
            .map(|a| {
                format!(
                    "{}: {}{}",
                    a.path,
                    a.error.clone().unwrap_or_default(),
                    a.meaning
                        .as_ref()
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        return Err(fail(
            FailureKind::RegisterFailed,
            "memory registration",
            format!(
                "the {} cannot be registered with {}: {}",
                target.name(),
                nic.device,
                why.join("; ")
            ),
        ));
    };
    let opened = Opened {
        pd: &pd,
        ctx: &ctx,
        port,
        gid,
        target_mr: &target_mr,
        target_addr,
    };
    body(res, &opened, target)
}

fn with_nic(
    spec: &PairSpec,
    mut run: Run,
    target: &Target,
    dmabuf: &Option<Result<(i32, u64, bool), String>>,
    body: Body,
) -> PairResult {
    let Some(nic) = &spec.nic else {
        return run.fail(
            FailureKind::NoRdmaDevice,
            "NIC",
            "no RDMA device on this node: nothing to write through",
        );
    };
    let size = spec.size.max(4096) as usize;
    let deadline = run.deadline;
    match open_and_register(nic, size, &mut run.res, target, dmabuf, |res, o, target| {
        body(res, o, target, deadline)
    }) {
        Ok(()) => run.done(),
        Err((kind, step, message)) => run.fail(kind, step, message),
    }
}

/// The one-node test on what [`open_and_register`] opened: a QP connected to itself, WRITEs
/// host -> buffer and back, verified, then the bandwidth each way.
fn loopback(
    spec: &PairSpec,
    res: &mut PairResult,
    o: &Opened,
    target: &Target,
    deadline: Instant,
) -> Result<(), Failed> {
    let (pd, ctx, port, gid, target_mr, target_addr) =
        (o.pd, o.ctx, &o.port, o.gid, o.target_mr, o.target_addr);
    // Checked by the caller before anything was opened.
    let Some(nic) = &spec.nic else {
        return Err(fail(FailureKind::NoRdmaDevice, "NIC", "no RDMA device"));
    };

    let size = spec.size.max(4096) as usize;
    let src = match HostBuffer::new(size) {
        Ok(b) => b,
        Err(e) => return Err(fail(FailureKind::Memory, "host allocation", e)),
    };
    let dst = match HostBuffer::new(size) {
        Ok(b) => b,
        Err(e) => return Err(fail(FailureKind::Memory, "host allocation", e)),
    };
    let (src_mr, dst_mr) = match (pd.reg_mr(&src, ACCESS), pd.reg_mr(&dst, ACCESS)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            let meaning = e
                .raw_os_error()
                .and_then(|n| errno_meaning("host", n))
                .unwrap_or("");
            return Err(fail(
                FailureKind::RegisterFailed,
                "ibv_reg_mr (host buffers)",
                format!(
                    "host memory cannot be registered with {}: {} {meaning}",
                    nic.device,
                    super::os_error(&e)
                ),
            ));
        }
    };
    let cq = match ctx.create_cq((DEPTH * 2) as i32) {
        Ok(c) => c,
        Err(e) => return Err(fail(FailureKind::QpFailed, "ibv_create_cq", e.to_string())),
    };
    let qp = match pd.create_qp(&cq, DEPTH) {
        Ok(q) => q,
        Err(e) => return Err(fail(FailureKind::QpFailed, "ibv_create_qp", e.to_string())),
    };
    let loopback = Loopback {
        port: nic.port,
        gid,
        lid: port.lid,
        mtu: port.active_mtu,
    };
    if let Err(e) = qp.connect_to_self(loopback) {
        return Err(fail(FailureKind::QpFailed, "connect the QP to itself", e));
    }

    // Verify: a random pattern host -> target, read back; then target -> host, compared.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x9e37_79b9_7f4a_7c15)
        | 1;
    let mut expected = vec![0u8; size];
    pattern(&mut expected, seed);
    src.write(&expected);
    let zeros = vec![0u8; size];
    if let Err(e) = target.write(&zeros) {
        return Err(fail(FailureKind::Memory, "clear the buffer under test", e));
    }
    let to = format!("RDMA WRITE host -> {}", target.name());
    let from = format!("RDMA WRITE {} -> host", target.name());
    if let Err((kind, msg)) = one_write(
        &qp,
        &cq,
        src.addr(),
        src_mr.lkey(),
        target_addr,
        target_mr.rkey(),
        size,
        deadline,
    ) {
        return Err(fail(kind, to, msg));
    }
    let mut back = vec![0u8; size];
    if let Err(e) = target.read(&mut back) {
        return Err(fail(
            FailureKind::Memory,
            "read the buffer under test back",
            e,
        ));
    }
    if let Some(m) = mismatch(&expected, &back) {
        return Err(fail(
            FailureKind::DataMismatch,
            to,
            format!(
                "the {} holds different bytes than were written: {m}",
                target.name()
            ),
        ));
    }
    if let Err((kind, msg)) = one_write(
        &qp,
        &cq,
        target_addr,
        target_mr.lkey(),
        dst.addr(),
        dst_mr.rkey(),
        size,
        deadline,
    ) {
        return Err(fail(kind, from, msg));
    }
    dst.read(&mut back);
    if let Some(m) = mismatch(&expected, &back) {
        return Err(fail(
            FailureKind::DataMismatch,
            from,
            format!(
                "the host received different bytes than the {} held: {m}",
                target.name()
            ),
        ));
    }
    res.verified_bytes = Some(size as u64);

    // Bandwidth: as many WRITEs as fit in half the duration each way, at most `iters`.
    let half = Duration::from_millis(spec.duration_ms.max(2) / 2);
    let a = stream(
        &qp,
        &cq,
        src.addr(),
        src_mr.lkey(),
        target_addr,
        target_mr.rkey(),
        size,
        spec.iters,
        half,
        deadline,
    );
    let b = match &a {
        Ok(_) => stream(
            &qp,
            &cq,
            target_addr,
            target_mr.lkey(),
            dst.addr(),
            dst_mr.rkey(),
            size,
            spec.iters,
            half,
            deadline,
        ),
        Err(e) => Err(e.clone()),
    };
    match (a, b) {
        (Ok((n1, t1)), Ok((n2, t2))) => {
            let gbps = |n: u64, t: f64| {
                if t > 0.0 {
                    (n * size as u64) as f64 * 8.0 / t / 1e9
                } else {
                    0.0
                }
            };
            res.bandwidth = Some(Bandwidth {
                to_target_gbps: round2(gbps(n1, t1)),
                from_target_gbps: round2(gbps(n2, t2)),
                message_bytes: size as u64,
                messages: n1 + n2,
            });
        }
        (Err((kind, msg)), _) => return Err(fail(kind, format!("{to} (bandwidth run)"), msg)),
        (_, Err((kind, msg))) => return Err(fail(kind, format!("{from} (bandwidth run)"), msg)),
    }
    // Everything is released in reverse order of creation as the guards go out of scope: QP,
    // CQ, the host regions and buffers, the target's region, the PD, the context.
    Ok(())
}

pub(crate) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub(crate) fn port_state(s: u32) -> String {
    match s {
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "NOP",
    }
    .into()
}

/// xorshift64: a cheap, seedable pattern in which every 8-byte word differs.
pub(crate) fn pattern(buf: &mut [u8], mut x: u64) {
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// The first differing byte, and how many differ.
pub(crate) fn mismatch(expected: &[u8], got: &[u8]) -> Option<String> {
    let first = expected.iter().zip(got).position(|(a, b)| a != b)?;
    let count = expected.iter().zip(got).filter(|(a, b)| a != b).count();
    Some(format!(
        "{count} of {} bytes differ, the first at offset {first} (expected {:#04x}, got {:#04x})",
        expected.len(),
        expected[first],
        got[first]
    ))
}

pub(crate) type StepError = (FailureKind, String);

/// One WRITE and its completion.
#[allow(clippy::too_many_arguments)]
pub(crate) fn one_write(
    qp: &Qp,
    cq: &Cq,
    laddr: u64,
    lkey: u32,
    raddr: u64,
    rkey: u32,
    size: usize,
    deadline: Instant,
) -> Result<(), StepError> {
    qp.post_write(1, laddr, lkey, size as u32, raddr, rkey)
        .map_err(|e| (FailureKind::QpFailed, e))?;
    let mut wc = [Wc::default(); 4];
    loop {
        let n = cq
            .poll(&mut wc)
            .map_err(|e| (FailureKind::CompletionError, e))?;
        if n > 0 {
            return check_wc(&wc[..n]);
        }
        if Instant::now() > deadline {
            return Err((FailureKind::Timeout, "no completion before the deadline: the WRITE never finished (a port that cannot reach itself, or a stuck peer-memory mapping)".into()));
        }
        std::hint::spin_loop();
    }
}

fn check_wc(wc: &[Wc]) -> Result<(), StepError> {
    match wc.iter().find(|w| w.status != 0) {
        Some(w) => Err((
            FailureKind::CompletionError,
            format!(
                "completion with {} (vendor error {:#x})",
                ibverbs::wc_status_name(w.status),
                w.vendor_err
            ),
        )),
        None => Ok(()),
    }
}

/// WRITEs back to back with up to DEPTH in flight, until `iters` or `duration`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn stream(
    qp: &Qp,
    cq: &Cq,
    laddr: u64,
    lkey: u32,
    raddr: u64,
    rkey: u32,
    size: usize,
    iters: u32,
    duration: Duration,
    deadline: Instant,
) -> Result<(u64, f64), StepError> {
    let start = Instant::now();
    let (mut posted, mut done) = (0u64, 0u64);
    let iters = u64::from(iters.max(1));
    let mut wc = [Wc::default(); 16];
    loop {
        let time_left = start.elapsed() < duration;
        while posted - done < u64::from(DEPTH) && posted < iters && time_left {
            qp.post_write(posted, laddr, lkey, size as u32, raddr, rkey)
                .map_err(|e| (FailureKind::QpFailed, e))?;
            posted += 1;
        }
        if done == posted {
            break;
        }
        let n = cq
            .poll(&mut wc)
            .map_err(|e| (FailureKind::CompletionError, e))?;
        check_wc(&wc[..n])?;
        done += n as u64;
        if n == 0 && Instant::now() > deadline {
            return Err((
                FailureKind::Timeout,
                format!("{} of {posted} WRITEs completed before the deadline", done),
            ));
        }
    }
    Ok((done, start.elapsed().as_secs_f64()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pattern_and_mismatch() {
        let mut a = vec![0u8; 4096];
        super::pattern(&mut a, 12345);
        assert!(a.chunks(8).collect::<std::collections::HashSet<_>>().len() > 500);
        let mut b = a.clone();
        assert_eq!(super::mismatch(&a, &b), None);
        b[100] ^= 0xff;
        let m = super::mismatch(&a, &b).unwrap();
        assert!(
            m.starts_with("1 of 4096 bytes differ, the first at offset 100"),
            "{m}"
        );
    }
}
