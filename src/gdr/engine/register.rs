//! Up to a registered buffer: libibverbs, the NIC, its port and GID, and the buffer under test
//! registered with it (its dma-buf first where there is one, then the buffer itself: peer
//! memory for a GPU's, host memory directly), every step recorded in the pair's result.

use super::srd::{self, Choice};
use super::{Failed, Target, fail};
use crate::ffi::ibverbs::{self, Context, Gid, MemoryRegion, Pd, PortAttr, Verbs};
use crate::gdr::{
    FailureKind, NicSpec, PairResult, PortInfo, Registration, errno_meaning, os_error,
};

/// What the steps up to a registered buffer opened, for the test that follows: the one-node
/// loopback below, or a rail between two nodes (super::rail).
pub struct Opened<'a> {
    pub pd: &'a Pd<'a>,
    pub ctx: &'a Context<'a>,
    pub port: ibverbs::PortAttr,
    pub gid: Option<(u8, Gid)>,
    pub target_mr: &'a MemoryRegion<'a>,
    pub target_addr: u64,
    /// RC, or SRD on an EFA device (super::srd), chosen before registration.
    pub choice: &'a Choice,
    /// What every buffer is registered with, for that transport.
    pub access: i32,
}

/// The buffer under test's dma-buf: its fd, the buffer's offset in it, and whether it was
/// exported for this pair (and is closed after it); or why the export failed. `None`: a buffer
/// without one (host memory).
pub type Dmabuf = Option<Result<(i32, u64, bool), String>>;

/// Loads libibverbs, opens the NIC, checks its port and GID, chooses the transport (RC; SRD on
/// an EFA device, `driver` being the NIC's kernel driver when sysfs gave it), and registers the
/// buffer under test, recording each step in `res`; then runs `body` on what it opened. Every
/// resource is released when this returns, in reverse order of creation.
pub fn open_and_register<R>(
    nic: &NicSpec,
    driver: Option<&str>,
    size: usize,
    res: &mut PairResult,
    target: &Target,
    dmabuf: &Dmabuf,
    body: impl FnOnce(&mut PairResult, &Opened, &Target) -> Result<R, Failed>,
) -> Result<R, Failed> {
    let verbs = load()?;
    res.verbs_library = Some(verbs.path.clone());
    let ctx = open_device(&verbs, nic)?;
    let (port, gid) = active_port(&ctx, nic, res)?;
    let pd = ctx
        .alloc_pd()
        .map_err(|e| fail(FailureKind::OpenFailed, "ibv_alloc_pd", e.to_string()))?;
    let choice = srd::choose(nic, (driver, port.link_layer), &ctx, res)?;
    let access = choice.access();
    let how = (verbs.path.as_str(), access);
    let target_mr = register(&pd, how, nic, size, target, dmabuf, res)?;
    let opened = Opened {
        pd: &pd,
        ctx: &ctx,
        port,
        gid,
        target_mr: &target_mr,
        target_addr: target.addr(),
        choice: &choice,
        access,
    };
    body(res, &opened, target)
}

fn load() -> Result<Verbs, Failed> {
    Verbs::load().map_err(|e| match e {
        ibverbs::LoadError::NotFound { tried, message } => fail(
            FailureKind::VerbsMissing,
            "dlopen libibverbs",
            format!("{}: {message}", tried.join(", ")),
        ),
        ibverbs::LoadError::MissingSymbol { library, symbol } => fail(
            FailureKind::VerbsSymbolMissing,
            "dlsym",
            format!("{library} does not export {symbol}"),
        ),
    })
}

/// The NIC by name, or why libibverbs cannot open it.
fn open_device<'v>(verbs: &'v Verbs, nic: &NicSpec) -> Result<Context<'v>, Failed> {
    match verbs.open(&nic.device) {
        Ok(Some(c)) => Ok(c),
        Ok(None) => {
            let listed = verbs
                .device_names()
                .map(|n| n.join(", "))
                .unwrap_or_default();
            Err(fail(
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
            ))
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => Err(fail(
            FailureKind::NoAccess,
            "ibv_open_device",
            format!(
                "{}: {} (the /dev/infiniband/uverbs* node)",
                nic.device,
                os_error(&e)
            ),
        )),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => Err(fail(
            FailureKind::DeviceList,
            "ibv_get_device_list",
            format!("{e}: ib_uverbs is not loaded"),
        )),
        Err(e) => Err(fail(
            FailureKind::OpenFailed,
            "ibv_open_device",
            format!("{}: {e}", nic.device),
        )),
    }
}

/// The port's attributes and, on RoCE, the GID to send from; recorded in `res`. `Err` also for
/// a port that is not ACTIVE.
fn active_port(
    ctx: &Context,
    nic: &NicSpec,
    res: &mut PairResult,
) -> Result<(PortAttr, Option<(u8, Gid)>), Failed> {
    let port = ctx.query_port(nic.port).map_err(|e| {
        fail(
            FailureKind::OpenFailed,
            "ibv_query_port",
            format!("{} port {}: {e}", nic.device, nic.port),
        )
    })?;
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
        link_layer: link_layer(port.link_layer).into(),
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
    Ok((port, gid))
}

/// Registers the buffer under test: its dma-buf first where there is one, then the buffer
/// itself (the peer-memory path for GPU memory; host memory directly). Every attempt is
/// recorded in `res`, and the path that worked.
fn register<'s>(
    pd: &'s Pd<'_>,
    (verbs, access): (&str, i32),
    nic: &NicSpec,
    size: usize,
    target: &'s Target,
    dmabuf: &Dmabuf,
    res: &mut PairResult,
) -> Result<MemoryRegion<'s>, Failed> {
    let mut target_mr: Option<MemoryRegion> = None;
    let mut attempts: Vec<Registration> = Vec::new();
    if let Some(d) = dmabuf {
        let attempt = match d {
            Ok((fd, offset, _)) => {
                match pd.reg_dmabuf_mr(*offset, size, target.addr(), *fd, access) {
                    None => Registration {
                        path: "dmabuf".into(),
                        ok: false,
                        errno: None,
                        error: Some(format!(
                            "{verbs} does not export ibv_reg_dmabuf_mr (rdma-core older than 34)"
                        )),
                        meaning: Some("libibverbs too old for the DMA-BUF path".into()),
                    },
                    Some(r) => attempt("dmabuf", "ibv_reg_dmabuf_mr", r, &mut target_mr),
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
        target.reg_mr(pd, access)
    } else {
        None
    };
    if let Some(r) = direct {
        let path = if matches!(target, Target::Host(_)) {
            "host"
        } else {
            "peermem"
        };
        attempts.push(attempt(path, "ibv_reg_mr", r, &mut target_mr));
    }
    res.path = attempts.iter().find(|a| a.ok).map(|a| a.path.clone());
    res.registrations = attempts;
    target_mr.ok_or_else(|| {
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
        fail(
            FailureKind::RegisterFailed,
            "memory registration",
            format!(
                "the {} cannot be registered with {}: {}",
                target.name(),
                nic.device,
                why.join("; ")
            ),
        )
    })
}

/// One registration attempt on `path` by `call`, as the report shows it; the region, when it
/// worked, goes to `mr`.
fn attempt<'s>(
    path: &str,
    call: &str,
    result: std::io::Result<MemoryRegion<'s>>,
    mr: &mut Option<MemoryRegion<'s>>,
) -> Registration {
    match result {
        Ok(region) => {
            *mr = Some(region);
            Registration {
                path: path.into(),
                ok: true,
                errno: None,
                error: None,
                meaning: None,
            }
        }
        Err(e) => Registration {
            path: path.into(),
            ok: false,
            errno: e.raw_os_error(),
            error: Some(format!("{call}: {}", os_error(&e))),
            meaning: e
                .raw_os_error()
                .and_then(|n| errno_meaning(path, n))
                .map(str::to_owned),
        },
    }
}

/// `IBV_LINK_LAYER_*` as the report names it: an EFA port says nothing (UNSPECIFIED, the efa
/// driver's efa_port_link_layer), as did InfiniBand ports of kernels before link layers.
pub(super) fn link_layer(l: u8) -> &'static str {
    match l {
        ibverbs::LINK_LAYER_ETHERNET => "Ethernet",
        0 => "Unspecified",
        _ => "InfiniBand",
    }
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
