//! The parent's side of the write test: which pairs, with what, and running them (pairs that
//! share no device at the same time, each in a child with a deadline).

use crate::inventory::{Gpu, GpuVendor, Inventory, RdmaDevice};
use crate::model::gdr::{Expected, GdrOutcome, NotPlanned};
use crate::model::gdr::{Memory, NicSpec, PairResult, PairRunner, PairSpec};
use crate::parse::pci::Bdf;
use crate::placement::Level;
use std::path::PathBuf;
use std::time::Duration;

/// `--nic NAME[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicArg {
    pub name: String,
    pub port: Option<u8>,
}

impl std::str::FromStr for NicArg {
    type Err = String;
    fn from_str(s: &str) -> Result<NicArg, String> {
        let (name, port) = match s.split_once(':') {
            Some((n, p)) => (
                n,
                Some(
                    p.parse::<u8>()
                        .map_err(|_| format!("{p:?} is not a port number"))?,
                ),
            ),
            None => (s, None),
        };
        if name.is_empty() || name.contains('/') || name.len() > 64 {
            return Err(format!("{name:?} is not an RDMA device name"));
        }
        Ok(NicArg {
            name: name.to_owned(),
            port,
        })
    }
}

#[derive(Debug, Clone)]
pub struct Options {
    /// `None`: each GPU's own memory (CUDA for NVIDIA, HIP for AMD).
    pub memory: Option<Memory>,
    /// Every GPU with every NIC, not only the nearest.
    pub all_pairs: bool,
    pub gpus: Vec<Bdf>,
    pub nics: Vec<NicArg>,
    pub gid_index: Option<u32>,
    pub size: u64,
    pub iters: u32,
    pub duration_ms: u64,
    pub deadline_ms: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            memory: None,
            all_pairs: false,
            gpus: Vec::new(),
            nics: Vec::new(),
            gid_index: None,
            size: 1 << 20,
            iters: 5000,
            duration_ms: 400,
            deadline_ms: 10_000,
        }
    }
}

/// One pair to test, or why it cannot be.
#[derive(Debug, Clone)]
pub struct Planned {
    pub gpu: Option<Bdf>,
    /// How reports name the GPU (`GPU 0000:3b:00.0 (NVIDIA H100)`) or the buffer (`host memory`).
    pub subject: String,
    /// `mlx5_0 port 1`.
    pub nic: Option<String>,
    pub level: Option<Level>,
    pub spec: PairSpec,
    pub expected: Option<Expected>,
    /// A software RDMA device (rxe, siw): its bandwidth is the CPU's, not judged.
    pub software: bool,
}

fn pcie_gbps(speed_gts: f64, width: u32) -> f64 {
    // 8b/10b up to 5 GT/s, 128b/130b for 8-32 GT/s, FLIT (about 242/256) at 64 GT/s.
    let encoding = if speed_gts <= 5.0 {
        0.8
    } else if speed_gts <= 32.0 {
        128.0 / 130.0
    } else {
        242.0 / 256.0
    };
    speed_gts * f64::from(width) * encoding
}

fn link_gbps(inv: &Inventory, bdf: Option<Bdf>) -> Option<f64> {
    let d = inv.function(bdf?)?.detail.as_ref()?;
    Some(pcie_gbps(
        *d.link.current_speed.value()?,
        *d.link.current_width.value()?,
    ))
}

fn expected(
    inv: &Inventory,
    gpu: Option<Bdf>,
    dev: &RdmaDevice,
    port: Option<&crate::inventory::Port>,
) -> Option<Expected> {
    let mut limits: Vec<(f64, String)> = Vec::new();
    if let Some(rate) = port.and_then(|p| p.rate.value()) {
        limits.push((*rate, format!("{} port rate {rate} Gb/s", dev.name)));
    }
    if let Some(g) = link_gbps(inv, dev.pci) {
        limits.push((g, format!("{} PCIe link {:.0} Gb/s", dev.name, g)));
    }
    if let Some(g) = link_gbps(inv, gpu) {
        limits.push((g, format!("GPU PCIe link {:.0} Gb/s", g)));
    }
    limits
        .into_iter()
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(gbps, limited_by)| Expected { gbps, limited_by })
}

/// The port to test through: the first ACTIVE one (RoCE with a usable GID, or InfiniBand),
/// else the first port, so that a down port is tested, and named, rather than skipped.
fn pick_port(dev: &RdmaDevice) -> Option<&crate::inventory::Port> {
    dev.ports
        .iter()
        .find(|p| p.is_active() && (p.is_infiniband() || p.roce_v2_gid_index().is_some()))
        .or_else(|| dev.ports.iter().find(|p| p.is_active()))
        .or_else(|| dev.ports.first())
}

fn memory_for(g: &Gpu) -> Option<Memory> {
    match g.vendor {
        GpuVendor::Nvidia => Some(Memory::Cuda),
        GpuVendor::Amd => Some(Memory::Hip),
        GpuVendor::Other => None,
    }
}

fn nic_spec<'a>(
    d: &'a RdmaDevice,
    opts: &Options,
) -> (NicSpec, Option<&'a crate::inventory::Port>) {
    let port_arg = opts
        .nics
        .iter()
        .find(|n| n.name == d.name)
        .and_then(|n| n.port);
    let port = match port_arg {
        Some(n) => d.ports.iter().find(|p| p.num == u32::from(n)),
        None => pick_port(d),
    };
    let gid_index = opts
        .gid_index
        .or_else(|| port.and_then(|p| p.roce_v2_gid_index()));
    (
        NicSpec {
            device: d.name.clone(),
            port: port_arg
                .or_else(|| port.and_then(|p| u8::try_from(p.num).ok()))
                .unwrap_or(1),
            gid_index,
        },
        port,
    )
}

pub fn plan(inv: &Inventory, opts: &Options) -> (Vec<Planned>, Vec<NotPlanned>) {
    let mut planned = Vec::new();
    let mut not = Vec::new();
    // The NIC's driver goes with it: `efa` runs the pair over SRD (crate::gdr::engine::srd).
    let spec = |gpu: Option<&Gpu>, nic: Option<(NicSpec, Option<String>)>, memory| PairSpec {
        gpu: gpu.map(|g| g.bdf.to_string()),
        nic_driver: nic.as_ref().and_then(|(_, d)| d.clone()),
        nic: nic.map(|(n, _)| n),
        memory,
        size: opts.size,
        iters: opts.iters,
        duration_ms: opts.duration_ms,
        deadline_ms: opts.deadline_ms,
    };
    // The NICs: from sysfs, or named on the command line (a device sysfs does not show is still
    // tried, so that the test can name what libibverbs says about it).
    let wanted =
        |d: &RdmaDevice| opts.nics.is_empty() || opts.nics.iter().any(|n| n.name == d.name);
    let devices: Vec<(usize, &RdmaDevice)> = inv
        .rdma
        .iter()
        .enumerate()
        .filter(|(_, d)| wanted(d))
        .collect();
    let nic_spec = |d| nic_spec(d, opts);
    let extra: Vec<NicSpec> = opts
        .nics
        .iter()
        .filter(|n| !inv.rdma.iter().any(|d| d.name == n.name))
        .map(|n| NicSpec {
            device: n.name.clone(),
            port: n.port.unwrap_or(1),
            gid_index: opts.gid_index,
        })
        .collect();
    let label = |n: &NicSpec| format!("{} port {}", n.device, n.port);

    // Host memory: one run per NIC, no GPU.
    if let Some(m @ (Memory::Host | Memory::HostDmabuf)) = opts.memory {
        for (_, d) in &devices {
            let (n, port) = nic_spec(d);
            planned.push(Planned {
                gpu: None,
                subject: format!("{} memory", m.as_str()),
                nic: Some(label(&n)),
                level: None,
                expected: expected(inv, None, d, port),
                software: d.is_software(),
                spec: spec(None, Some((n, d.driver.clone())), m),
            });
        }
        for n in extra {
            planned.push(Planned {
                gpu: None,
                subject: format!("{} memory", m.as_str()),
                nic: Some(label(&n)),
                level: None,
                expected: None,
                software: false,
                spec: spec(None, Some((n, None)), m),
            });
        }
        return (planned, not);
    }

    let nearest = crate::placement::nearest(inv);
    for g in inv
        .gpus
        .iter()
        .filter(|g| opts.gpus.is_empty() || opts.gpus.contains(&g.bdf))
    {
        let memory = match opts.memory.or_else(|| memory_for(g)) {
            Some(m) => m,
            None => {
                not.push(NotPlanned {
                    subject: g.subject(),
                    reason: format!(
                        "no GPU memory API for vendor {} (a declared accelerator): `gdrdoctor gdr-test --memory host` tests its NIC alone",
                        inv.function(g.bdf).map(|f| format!("{:04x}", f.vendor)).unwrap_or_default()
                    ),
                });
                continue;
            }
        };
        if devices.is_empty() && extra.is_empty() {
            // No NIC to write through: nothing to test, and no GPU work for it (the probe's
            // export already says whether the GPU side works). The check names rdma-link.
            continue;
        }
        let near = nearest
            .iter()
            .find(|(b, _)| *b == g.bdf)
            .and_then(|(_, n)| n.as_ref());
        for (i, d) in &devices {
            let route = d.pci.and_then(|p| crate::placement::route(inv, g.bdf, p));
            let is_near = near.is_none_or(|n| n.nics.iter().any(|(j, _)| j == i));
            if !(opts.all_pairs || is_near || !opts.nics.is_empty()) {
                continue;
            }
            let (n, port) = nic_spec(d);
            planned.push(Planned {
                gpu: Some(g.bdf),
                subject: g.subject(),
                nic: Some(label(&n)),
                level: route.map(|r| r.level),
                expected: expected(inv, Some(g.bdf), d, port),
                software: d.is_software(),
                spec: spec(Some(g), Some((n, d.driver.clone())), memory),
            });
        }
        for n in &extra {
            planned.push(Planned {
                gpu: Some(g.bdf),
                subject: g.subject(),
                nic: Some(label(n)),
                level: None,
                expected: None,
                software: false,
                spec: spec(Some(g), Some((n.clone(), None)), memory),
            });
        }
    }
    (planned, not)
}

impl Planned {
    /// What the inventory keeps of a pair once its child has answered.
    fn outcome(self, result: Result<PairResult, String>, cut_short: bool) -> GdrOutcome {
        GdrOutcome {
            gpu: self.gpu,
            subject: self.subject,
            nic: self.nic,
            nic_device: self.spec.nic.map(|n| n.device),
            memory: self.spec.memory,
            level: self.level,
            expected: self.expected,
            software: self.software,
            result,
            cut_short,
        }
    }
}

/// Runs the pairs: those that share no GPU and no NIC at the same time, each in its own child.
/// Groups pairs into waves: within a wave no two pairs share a GPU or a NIC, so they can run at
/// the same time without measuring each other. Indices into `specs`, in order.
pub fn waves(specs: &[&PairSpec]) -> Vec<Vec<usize>> {
    let mut pending: Vec<usize> = (0..specs.len()).collect();
    let mut out = Vec::new();
    while !pending.is_empty() {
        let mut busy: Vec<String> = Vec::new();
        let (mut wave, mut rest) = (Vec::new(), Vec::new());
        for i in pending {
            let s = specs[i];
            let keys: Vec<String> = s
                .gpu
                .iter()
                .map(|g| format!("gpu:{g}"))
                .chain(s.nic.as_ref().map(|n| format!("nic:{}", n.device)))
                .collect();
            if keys.iter().any(|k| busy.contains(k)) {
                rest.push(i);
            } else {
                busy.extend(keys);
                wave.push(i);
            }
        }
        out.push(wave);
        pending = rest;
    }
    out
}

/// Runs the pairs, wave by wave (see [`waves`]): a pair on GPU memory on its GPU's worker in
/// `gpus` (the GPU session, which keeps CUDA or HIP open between its pairs and the probe), a
/// pair on host memory in a child of its own.
pub fn run(
    planned: Vec<Planned>,
    exe: &std::path::Path,
    deadline: crate::deadline::Deadline,
    gpus: Option<&(dyn PairRunner + Sync)>,
) -> Vec<GdrOutcome> {
    let specs: Vec<&PairSpec> = planned.iter().map(|p| &p.spec).collect();
    let waves = waves(&specs);
    let mut slots: Vec<Option<Planned>> = planned.into_iter().map(Some).collect();
    let mut done: Vec<(usize, GdrOutcome)> = Vec::new();
    for wave in waves {
        let batch: Vec<(usize, Planned)> = wave
            .into_iter()
            .filter_map(|i| slots[i].take().map(|p| (i, p)))
            .collect();
        let results: Vec<(usize, GdrOutcome)> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .into_iter()
                .map(|(i, mut p)| {
                    let exe: PathBuf = exe.to_owned();
                    s.spawn(move || {
                        // The child enforces the deadline itself between steps; the parent's
                        // kill, a little later, covers a call that never returns (a
                        // peer-memory module stuck in ibv_reg_mr, cuInit on a dead GPU).
                        let wanted = Duration::from_millis(p.spec.deadline_ms) + KILL_GRACE;
                        let budget = deadline.budget(wanted);
                        if budget.cut && budget.limit < MIN_PAIR_TIME {
                            let result = Err(format!(
                                "not run: the --deadline of {} s left no time for it",
                                deadline.seconds()
                            ));
                            return (i, p.outcome(result, true));
                        }
                        if budget.cut {
                            let own = budget
                                .limit
                                .saturating_sub(KILL_GRACE.min(budget.limit / 2));
                            p.spec.deadline_ms = own.as_millis() as u64;
                        }
                        let result = match gpus {
                            Some(g) if p.spec.memory.is_gpu() => g.pair(&p.spec, budget.limit),
                            _ => run_one(&exe, &p.spec, budget.limit),
                        };
                        let cut = budget.cut;
                        (i, p.outcome(result, cut))
                    })
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
        done.extend(results);
    }
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, o)| o).collect()
}

/// How much later than the child's own deadline the parent kills it.
const KILL_GRACE: Duration = Duration::from_secs(3);
/// Below this a pair cannot even load its libraries: it is not started.
const MIN_PAIR_TIME: Duration = Duration::from_millis(250);

fn run_one(
    exe: &std::path::Path,
    spec: &PairSpec,
    timeout: Duration,
) -> Result<PairResult, String> {
    let json = serde_json::to_string(spec).map_err(|e| e.to_string())?;
    let line = crate::child::run(
        exe,
        &["gdr-pair", "--spec", &json],
        crate::model::gpu::HIDING_ENV,
        timeout,
        "the GDR test",
    )?;
    serde_json::from_str(&line).map_err(|e| format!("the GDR test's answer is unreadable ({e})"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn pcie_rates() {
        // Gen5 x16: 32 GT/s * 16 * 128/130 = 504 Gb/s; Gen3 x8: 63 Gb/s; Gen1 x1: 2 Gb/s.
        assert_eq!(super::pcie_gbps(32.0, 16).round(), 504.0);
        assert_eq!(super::pcie_gbps(8.0, 8).round(), 63.0);
        assert_eq!(super::pcie_gbps(2.5, 1), 2.0);
    }

    #[test]
    fn pairs_sharing_a_device_never_run_together() {
        use super::{Memory, NicSpec, PairSpec};
        let spec = |gpu: &str, nic: &str| PairSpec {
            gpu: Some(gpu.into()),
            nic: Some(NicSpec {
                device: nic.into(),
                port: 1,
                gid_index: None,
            }),
            memory: Memory::Cuda,
            size: 4096,
            iters: 1,
            duration_ms: 1,
            deadline_ms: 1,
            nic_driver: None,
        };
        // Two GPUs, each with two nearest NICs of one switch (as in healthy-8gpu-roce).
        let s = [
            spec("g0", "n0"),
            spec("g0", "n1"),
            spec("g1", "n0"),
            spec("g1", "n1"),
        ];
        let refs: Vec<&PairSpec> = s.iter().collect();
        let w = super::waves(&refs);
        assert_eq!(w, vec![vec![0, 3], vec![1, 2]]);
        for wave in &w {
            for (a, b) in wave.iter().flat_map(|a| wave.iter().map(move |b| (*a, *b))) {
                if a != b {
                    assert!(s[a].gpu != s[b].gpu && s[a].nic != s[b].nic);
                }
            }
        }
    }

    #[test]
    fn nic_args() {
        let a: super::NicArg = "mlx5_0:2".parse().unwrap();
        assert_eq!((a.name.as_str(), a.port), ("mlx5_0", Some(2)));
        assert!("mlx5_0:x".parse::<super::NicArg>().is_err());
        assert!("../x".parse::<super::NicArg>().is_err());
    }
}
