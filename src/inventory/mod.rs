//! What is on the node: typed facts, read once through a [`Root`], before any check runs.
//!
//! Checks never read files; they judge these facts. Each fact that a check may judge keeps the
//! path it came from and the raw text, so every finding can show its evidence, and a file that
//! could not be read or parsed stays visible as such instead of turning into a default.

pub mod access;
pub mod gdr;
pub mod gpu;
pub mod iommu;
pub mod kernel;
pub mod nccl;
pub mod net;
pub mod pci;
pub mod rdma;
pub mod vm;

use crate::config::Config;
use crate::gpu::{GpuSession, Runtime, SkipReason};
use crate::parse::pci::Bdf;
use crate::root::Root;
use std::collections::{BTreeMap, BTreeSet};

pub use gdr::GdrTest;
pub use iommu::Iommu;
pub use kernel::Kernel;
pub use pci::{Gpu, GpuVendor, PciFunction};
pub use rdma::{Port, RdmaDevice};

// A fact, a problem and a read error are model types (crate::model): the run results that keep
// them (the access probe's) sit below the inventory. Reading one through the root is the
// inventory's.
pub use crate::model::{Fact, Problem, UNSAFE_NAME};

impl<T> Fact<T> {
    pub fn read(root: &Root, path: String, parse: impl FnOnce(&str) -> Option<T>) -> Fact<T> {
        let raw = root.read_text(&path);
        let value = raw.as_ref().ok().and_then(|s| parse(s));
        Fact { path, raw, value }
    }
}

/// What to read beyond the static facts.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Probe this process's access to RDMA (device nodes, memlock, libibverbs). Live roots only.
    pub access: bool,
    /// Ask the GPU libraries (NVML, CUDA, HIP) in a child process. Live roots only; `None`
    /// skips it (`--no-gpu-probe`, `capture`).
    pub gpu_probe: Option<crate::gpu::ProbeCommand>,
    /// Run the GPU probe with a captured root too (`check --gpu-probe`): the root is the
    /// host's, seen from a container that has the host's GPUs.
    pub gpu_probe_on_root: bool,
}

#[derive(Debug)]
pub struct Inventory {
    pub live: bool,
    pub kernel: Kernel,
    pub pci: BTreeMap<Bdf, PciFunction>,
    pub gpus: Vec<Gpu>,
    pub rdma: Vec<RdmaDevice>,
    pub rdma_class: Result<(), Problem>,
    pub iommu: Iommu,
    /// PCI functions that could not be identified (no readable vendor/device/class).
    pub unidentified: Vec<Problem>,
    pub problems: Vec<Problem>,
    pub access: Option<access::Access>,
    /// The KFD topology, read when there is an AMD GPU.
    pub kfd: Option<Result<gpu::Kfd, Problem>>,
    /// What the GPU libraries said (live), or why they were not asked.
    pub gpu_runtime: crate::gpu::Runtime,
    /// The GDR write test's outcomes (live), filled in after loading, since it needs placement.
    pub gdr_test: GdrTest,
    /// Network interfaces, `/sys/class/net`.
    pub netdevs: Vec<net::NetIf>,
    /// What NCCL reads besides sysfs: its configuration files, the declared environment, the
    /// topology file.
    pub nccl: nccl::Nccl,
    /// The GPUs and NICs are virtual PCI (a VM that hides the host's switches), and how.
    pub virtual_pci: Option<vm::Virtual>,
    /// NCCL's own run (`--nccl-verify`, `nccl verify`), filled in after loading, once the GPU
    /// workers have ended.
    pub nccl_verify: crate::nccl::verify::NcclVerify,
}

/// The GPU probe, still running in its child.
impl Inventory {
    pub fn load(root: &Root, config: &Config, options: Options) -> Inventory {
        let (mut inv, session) = Inventory::load_pending(root, config, options);
        if let Some(mut s) = session {
            inv.gpu_runtime = s.probe();
            s.finish(crate::gpu::FINISH_GRACE);
        }
        inv
    }

    /// Like [`Inventory::load`], but returns the GPU session as it runs: the caller runs the
    /// GDR write test on its workers, then asks it for the probe ([`GpuSession::probe`]) and
    /// ends it. Until then `gpu_runtime` reads as not asked.
    pub fn load_pending(
        root: &Root,
        config: &Config,
        options: Options,
    ) -> (Inventory, Option<GpuSession>) {
        // A check's time is almost all system calls (about 1200 files on a large node), so the
        // two independent halves are read on two threads: kernel and RDMA, and the PCI bus.
        let (mut problems, kernel, ((rdma, rdma_class), netdevs, nccl), (mut pci, unidentified)) =
            std::thread::scope(|s| {
                let other = s.spawn(|| {
                    let mut problems = Vec::new();
                    let kernel = Kernel::load(root, &mut problems);
                    let rdma = rdma::load(root, &mut problems);
                    let netdevs = net::load(root, &mut problems);
                    let nccl = nccl::load(root, &config.nccl);
                    (problems, kernel, (rdma, netdevs, nccl))
                });
                let mut pci_problems = Vec::new();
                let scanned = pci::scan(root, config, &mut pci_problems);
                let (mut problems, kernel, rdma) = other
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e));
                problems.extend(pci_problems);
                (problems, kernel, rdma, scanned)
            });
        if let Some(why) = root.unread_problem() {
            problems.push(Problem {
                path: crate::root::UNREAD.into(),
                message: format!("what the capture could not read is unknown: {why}"),
            });
        }
        problems.sort_by(|a, b| a.path.cmp(&b.path));
        let gpus = pci::classify_gpus(root, &pci, config, &kernel);
        let has = |v: GpuVendor| gpus.iter().any(|g| g.vendor == v);
        let (nvidia, amd) = (has(GpuVendor::Nvidia), has(GpuVendor::Amd));
        let kfd = amd.then(|| gpu::kfd(root, &mut problems));
        // The GPU probe takes from milliseconds to seconds (CUDA creates a context per GPU);
        // it runs in its own process while the rest of the details are read.
        let here = root.is_live() || options.gpu_probe_on_root;
        let session = match (&options.gpu_probe, nvidia || amd, here) {
            (_, false, _) => Err(SkipReason::NoGpu),
            (_, true, false) => Err(SkipReason::Offline),
            (None, true, true) => Err(SkipReason::Disabled),
            (Some(cmd), true, true) => {
                let mut cmd = cmd.clone();
                cmd.ask.nvml &= nvidia;
                cmd.ask.cuda &= nvidia;
                cmd.ask.hip &= amd;
                let targets = gpus
                    .iter()
                    .filter_map(|g| {
                        let runtime = match g.vendor {
                            GpuVendor::Nvidia => crate::gpu::worker::Runtime::Cuda,
                            GpuVendor::Amd => crate::gpu::worker::Runtime::Hip,
                            GpuVendor::Other => return None,
                        };
                        Some(crate::gpu::Target {
                            bdf: g.bdf,
                            runtime,
                            visible: g.uuid.clone(),
                        })
                    })
                    .collect();
                Ok(GpuSession::start(&cmd, targets))
            }
        };

        // Details (full config space, NUMA, link, IOMMU group) only for the functions a check
        // looks at: GPUs, RDMA NICs and every bridge above them. Reading 4 KiB of config space
        // costs about a millisecond per function on real hardware; a node has hundreds.
        let mut wanted: BTreeSet<Bdf> = BTreeSet::new();
        let endpoints = gpus
            .iter()
            .map(|g| g.bdf)
            .chain(rdma.iter().filter_map(|d| d.pci));
        for bdf in endpoints {
            if let Some(f) = pci.get(&bdf) {
                wanted.extend(crate::parse::pci::path_functions(&f.path));
            }
        }
        let wanted: Vec<(Bdf, String)> = wanted
            .into_iter()
            .filter_map(|b| pci.get(&b).map(|f| (b, f.path.clone())))
            .collect();
        let (first, second) = wanted.split_at(wanted.len() / 2);
        let load = |part: &[(Bdf, String)]| {
            part.iter()
                .map(|(b, path)| (*b, pci::PciDetail::load(root, path)))
                .collect::<Vec<_>>()
        };
        let details = std::thread::scope(|s| {
            let other = s.spawn(|| load(second));
            let mut done = load(first);
            done.extend(
                other
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
            );
            done
        });
        for (bdf, detail) in details {
            problems.extend(detail.problems.iter().cloned());
            if let Some(f) = pci.get_mut(&bdf) {
                f.detail = Some(detail);
            }
        }
        let iommu = Iommu::load(root, &pci);
        let virtual_pci = vm::detect(root, &pci, &gpus, &rdma, kernel.product.as_deref());
        let access = (options.access && root.is_live()).then(|| access::load(root, &rdma));
        let (gpu_runtime, session) = match session {
            // A capture may hold NVML's answer on the node: its NVML facts stand offline.
            Err(SkipReason::Offline) if nvidia => match gpu::recorded_nvml(root, &mut problems) {
                Some(r) => (Runtime::Recorded(Box::new(r)), None),
                None => (
                    Runtime::Skipped {
                        reason: SkipReason::Offline,
                    },
                    None,
                ),
            },
            Err(reason) => (Runtime::Skipped { reason }, None),
            Ok(session) => (
                Runtime::Skipped {
                    reason: SkipReason::Disabled,
                },
                Some(session),
            ),
        };
        let inv = Inventory {
            live: root.is_live(),
            kernel,
            pci,
            gpus,
            rdma,
            rdma_class,
            iommu,
            unidentified,
            problems,
            access,
            kfd,
            gpu_runtime,
            netdevs,
            nccl,
            virtual_pci,
            nccl_verify: crate::nccl::verify::NcclVerify::not_run(
                crate::nccl::verify::NcclVerify::NOT_ASKED,
            ),
            gdr_test: GdrTest::Skipped(if root.is_live() {
                "not asked".into()
            } else {
                "a captured root: the test moves bytes on the live node".into()
            }),
        };
        (inv, session)
    }

    /// Every problem the inventory recorded: its own, the unidentified functions', and each
    /// RDMA device's and port's; sorted, without repeats.
    pub fn all_problems(&self) -> Vec<Problem> {
        let mut problems = self.problems.clone();
        problems.extend(self.unidentified.iter().cloned());
        problems.extend(self.nccl.problems.iter().cloned());
        for d in &self.rdma {
            problems.extend(d.problems.iter().cloned());
            for p in &d.ports {
                problems.extend(p.problems.iter().cloned());
            }
        }
        problems.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
        problems.dedup();
        problems
    }

    /// What the placement and NCCL's GDR decision (`topo`, the pictures) stand on and could not
    /// be read: the PCI tree and NUMA nodes (anything under /sys but the PCIe link files, which
    /// `pcie-link` judges), the RDMA class, the RDMA devices left without a PCI function by it,
    /// NCCL's configuration and topology files, and the NVML answer a capture records. Sorted,
    /// without repeats.
    pub fn placement_problems(&self) -> Vec<Problem> {
        use nccl::{SourceState, TopoState};
        const LINK: &[&str] = &[
            "current_link_speed",
            "current_link_width",
            "max_link_speed",
            "max_link_width",
        ];
        let mut problems: Vec<Problem> = self
            .problems
            .iter()
            .filter(|p| {
                let sys = p.path == "/sys" || p.path.starts_with("/sys/");
                let link = p.path.rsplit('/').next().is_some_and(|f| LINK.contains(&f));
                (sys && !link) || p.path == crate::gpu::RECORDED_NVML
            })
            .cloned()
            .collect();
        problems.extend(self.unidentified.iter().cloned());
        if let Err(p) = &self.rdma_class {
            problems.push(p.clone());
        }
        for d in self.rdma.iter().filter(|d| d.pci.is_none()) {
            problems.extend(d.problems.iter().cloned());
        }
        problems.extend(self.nccl.problems.iter().cloned());
        for s in &self.nccl.sources {
            match &s.state {
                SourceState::Unreadable(e) => problems.push(Problem::from_error(e)),
                SourceState::NotRead(why) => problems.push(Problem {
                    path: s.path.clone(),
                    message: why.clone(),
                }),
                SourceState::Absent | SourceState::Read(_) => {}
            }
        }
        if let Some(t) = &self.nccl.topology {
            if let TopoState::Unreadable(e) = &t.state {
                problems.push(Problem::from_error(e));
            }
        }
        problems.sort_by(|a, b| (&a.path, &a.message).cmp(&(&b.path, &b.message)));
        problems.dedup();
        problems
    }

    pub fn function(&self, bdf: Bdf) -> Option<&PciFunction> {
        self.pci.get(&bdf)
    }
}

/// Reads the names in a directory, turning a missing directory into an empty list and anything
/// else into a problem.
pub(crate) fn list(root: &Root, path: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    match root.read_dir(path) {
        Ok(listing) => {
            for bad in &listing.invalid {
                problems.push(Problem::unsafe_name(
                    crate::root::join(path, bad),
                    "name (not UTF-8)",
                ));
            }
            listing.names
        }
        Err(e) if e.is_not_found() => Vec::new(),
        Err(e) => {
            problems.push(Problem::from_error(&e));
            Vec::new()
        }
    }
}
