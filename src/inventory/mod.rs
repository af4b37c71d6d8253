//! What is on the node: typed facts, read once through a [`Root`], before any check runs.
//!
//! Checks never read files; they judge these facts. Each fact that a check may judge keeps the
//! path it came from and the raw text, so every finding can show its evidence, and a file that
//! could not be read or parsed stays visible as such instead of turning into a default.

pub mod c2c;
pub mod gpu;
pub mod grace;
pub mod iommu;
pub mod jobs;
pub mod kernel;
pub mod nccl;
pub mod nccl_plugin;
pub mod nccl_release;
pub mod nccl_setting;
pub mod net;
pub mod ofed_qos;
pub mod pci;
pub mod rdma;
pub mod vlan;
pub mod vm;

use crate::config::Config;
use crate::parse::pci::Bdf;
use crate::root::Root;
use std::collections::BTreeMap;

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
        Fact::read_small(root, path, crate::root::DEFAULT_READ_LIMIT, parse)
    }

    /// [`Fact::read`] of a file that holds at most `limit` bytes ([`Root::read_text_limited`]).
    pub fn read_small(
        root: &Root,
        path: String,
        limit: u64,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Fact<T> {
        let raw = root.read_text_limited(&path, limit);
        let value = raw.as_ref().ok().and_then(|s| parse(s));
        Fact { path, raw, value }
    }
}

/// The most a counter file holds: a 64-bit number and its newline are 21 bytes.
pub const COUNTER_LIMIT: u64 = 64;
/// The most an AER statistics table holds: a line per error type (about 20 today) of a name and
/// a 64-bit count.
pub const AER_TABLE_LIMIT: u64 = 4096;

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
    /// The KFD topology, read when there is an AMD GPU.
    pub kfd: Option<Result<gpu::Kfd, Problem>>,
    /// Network interfaces, `/sys/class/net`.
    pub netdevs: Vec<net::NetIf>,
    /// What NCCL reads besides sysfs: its configuration files, the declared environment, the
    /// topology file.
    pub nccl: nccl::Nccl,
    /// The GPUs and NICs are virtual PCI (a VM that hides the host's switches), and how.
    pub virtual_pci: Option<vm::Virtual>,
    /// The node's last jobs, as the Slurm Epilog kept them (the `job-history` check's).
    pub jobs: crate::model::jobs::History,
    /// A Grace or Vera system as rdma-core's rdma_topo models it (its complexes, the role of each
    /// port), which the `acs` check judges by rdma_topo's values; `None` on every other node.
    pub grace: Option<grace::Grace>,
}

/// How the inventory reads: on two threads (one `check`, whose time is almost all system calls;
/// a live node's details on up to 8, [`Threads::spread`]), or all on the calling thread
/// (`fleet`, which already reads one capture per core: there the second thread only added its
/// start and stop, twice per capture).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Threads {
    #[default]
    Two,
    One,
}

impl Threads {
    /// `a` and `b`, on two threads unless `One`; a panic in either goes on in the caller.
    fn both<A: Send, B: Send>(
        self,
        a: impl FnOnce() -> A + Send,
        b: impl FnOnce() -> B + Send,
    ) -> (A, B) {
        if self == Threads::One {
            return (a(), b());
        }
        std::thread::scope(|s| {
            let other = s.spawn(b);
            let a = a();
            let b = other
                .join()
                .unwrap_or_else(|e| std::panic::resume_unwind(e));
            (a, b)
        })
    }

    /// `f` over `items`, in order: on the calling thread when `One`; else in as many slices as
    /// threads. A captured root's reads are page-cache copies, two threads are plenty; a live
    /// node's config space reads wait on the device (or, on a cloud VM, on the hypervisor), so
    /// there up to 8 threads read at once.
    fn spread<T: Sync, R: Send>(
        self,
        live: bool,
        items: &[T],
        f: impl Fn(&T) -> R + Sync,
    ) -> Vec<R> {
        let threads = match self {
            Threads::One => 1,
            Threads::Two if live => items.len().min(8),
            Threads::Two => 2,
        };
        if threads <= 1 || items.len() <= 1 {
            return items.iter().map(&f).collect();
        }
        let per = items.len().div_ceil(threads);
        let f = &f;
        std::thread::scope(|s| {
            let mut slices = items.chunks(per);
            let first = slices.next().unwrap_or_default();
            let others: Vec<_> = slices
                .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<R>>()))
                .collect();
            let mut out: Vec<R> = first.iter().map(f).collect();
            for h in others {
                out.extend(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
            }
            out
        })
    }
}

/// The node read as far as its GPUs ([`Inventory::begin`]): what the GPU probe needs to start,
/// so that it runs while the rest is read ([`Partial::finish`]).
#[derive(Debug)]
pub struct Partial {
    pub gpus: Vec<Gpu>,
    live: bool,
    threads: Threads,
    kernel: Kernel,
    pci: BTreeMap<Bdf, PciFunction>,
    rdma: Vec<RdmaDevice>,
    rdma_class: Result<(), Problem>,
    unidentified: Vec<Problem>,
    problems: Vec<Problem>,
    kfd: Option<Result<gpu::Kfd, Problem>>,
    netdevs: Vec<net::NetIf>,
    nccl: nccl::Nccl,
}

impl Inventory {
    /// Everything the checks judge, read through `root`. Nothing is run: what only a run can
    /// learn is the probe stage's (`crate::probe`).
    pub fn load(root: &Root, config: &Config) -> Inventory {
        Inventory::begin(root, config).finish(root)
    }

    /// The first half of [`Inventory::load`]: the kernel, RDMA, the network, NCCL's files and
    /// the PCI bus, up to which GPUs there are. The GPU probe starts from it, and takes from
    /// milliseconds to seconds (CUDA creates a context per GPU): it runs in its own process
    /// while [`Partial::finish`] reads the rest.
    pub fn begin(root: &Root, config: &Config) -> Partial {
        Inventory::begin_on(root, config, Threads::Two)
    }

    /// [`Inventory::begin`] on `threads`, which [`Partial::finish`] reads on too.
    pub fn begin_on(root: &Root, config: &Config, threads: Threads) -> Partial {
        // A check's time is almost all system calls (about 1200 files on a large node), so the
        // two independent halves are read on two threads: kernel and RDMA, and the PCI bus.
        let (
            (mut problems, kernel, ((rdma, rdma_class), netdevs, mut nccl)),
            (pci_problems, scanned),
        ) = threads.both(
            || {
                let mut problems = Vec::new();
                let kernel = Kernel::load(root, &mut problems);
                let rdma = rdma::load(root, &mut problems);
                let netdevs = net::load(root, &mut problems, &rdma.0);
                let nccl = nccl::load(root, &config.nccl, &kernel);
                (problems, kernel, (rdma, netdevs, nccl))
            },
            || {
                let mut pci_problems = Vec::new();
                let scanned = pci::scan(root, config, &mut pci_problems);
                (pci_problems, scanned)
            },
        );
        problems.extend(pci_problems);
        let (pci, unidentified) = scanned;
        if let Some(why) = root.unread_problem() {
            problems.push(Problem {
                path: crate::root::UNREAD.into(),
                message: format!("what the capture could not read is unknown: {why}"),
            });
        }
        problems.sort_by(|a, b| a.path.cmp(&b.path));
        let gpus = pci::classify_gpus(root, &pci, config, &kernel);
        let amd = gpus.iter().any(|g| g.vendor == GpuVendor::Amd);
        // A node of AMD GPUs runs RCCL, which reads NCCL's files its own way (its topology
        // file's version is 2).
        if amd && gpus.iter().all(|g| g.vendor == GpuVendor::Amd) {
            nccl.library = crate::parse::nccl_topo::Library::Rccl;
        }
        let kfd = amd.then(|| gpu::kfd(root, &mut problems));
        Partial {
            gpus,
            live: root.is_live(),
            threads,
            kernel,
            pci,
            rdma,
            rdma_class,
            unidentified,
            problems,
            kfd,
            netdevs,
            nccl,
        }
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
                (sys && !link) || p.path == crate::model::gpu::RECORDED_NVML
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

    /// What NVML said of the GPUs, once the probe (or a capture's record of it) has: their
    /// NVLink-C2C links, which NCCL takes from NVML too.
    pub fn learn(&mut self, runtime: &crate::model::gpu::Runtime) {
        use crate::model::gpu::Runtime;
        let (nvml, source) = match runtime {
            Runtime::Probed(p) => (
                p.nvml.as_ref(),
                "NVML (nvmlDeviceGetFieldValues)".to_owned(),
            ),
            Runtime::Recorded(r) => (r.probe.nvml.as_ref(), r.path.clone()),
            _ => return,
        };
        if let Some(n) = nvml.and_then(|n| n.ready()) {
            c2c::apply_nvml(&mut self.gpus, &n.devices, &source);
        }
    }
}

impl Partial {
    /// The second half of [`Inventory::load`]: the details of the functions the checks look
    /// at, the IOMMU, and whether the PCI is virtual.
    pub fn finish(self, root: &Root) -> Inventory {
        let Partial {
            gpus,
            live,
            threads,
            kernel,
            mut pci,
            rdma,
            rdma_class,
            unidentified,
            mut problems,
            kfd,
            netdevs,
            nccl,
        } = self;
        // Details (config space, NUMA, link, IOMMU group) only for the functions a check looks
        // at: GPUs, RDMA NICs and every bridge above them. Reading 4 KiB of config space costs
        // about a millisecond per function on real hardware and 19 ms for a GPU passed through to
        // a cloud VM; a node has hundreds of functions. The extended space only where a check
        // uses it (pci::ConfigSpan).
        let mut wanted: BTreeMap<Bdf, pci::ConfigSpan> = BTreeMap::new();
        let endpoints = gpus
            .iter()
            .map(|g| g.bdf)
            .chain(rdma.iter().filter_map(|d| d.pci));
        // On a Grace or Vera system, every function rdma_topo looks at: all its root ports and
        // ConnectX/BlueField switch ports (it sets ACS on each), the NICs' functions and the
        // Data Direct DMA functions (IOMMU groups, ATS, VPD). No other node has any.
        let signature = grace::signature(&pci);
        let rdma_topo = signature
            .as_ref()
            .map(|_| grace::functions(&pci))
            .unwrap_or_default();
        for bdf in endpoints.chain(rdma_topo) {
            if let Some(f) = pci.get(&bdf) {
                let path = crate::parse::pci::path_functions(&f.path);
                for (i, b) in path.iter().enumerate() {
                    let span = if signature.is_some() || i + 1 < path.len() {
                        pci::ConfigSpan::Extended
                    } else {
                        pci::ConfigSpan::Standard
                    };
                    let at = wanted.entry(*b).or_insert(span);
                    if span == pci::ConfigSpan::Extended {
                        *at = span;
                    }
                }
            }
        }
        let wanted: Vec<(Bdf, String, pci::ConfigSpan)> = wanted
            .into_iter()
            .filter_map(|(b, span)| pci.get(&b).map(|f| (b, f.path.clone(), span)))
            .collect();
        let details = threads.spread(live, &wanted, |(b, path, span)| {
            (*b, pci::PciDetail::load(root, path, *span))
        });
        for (bdf, detail) in details {
            problems.extend(detail.problems.iter().cloned());
            if let Some(f) = pci.get_mut(&bdf) {
                f.detail = Some(detail);
            }
        }
        let iommu = Iommu::load(root, &pci);
        let virtual_pci = vm::detect(root, &pci, &gpus, &rdma, &kernel, &nccl);
        let grace = signature.map(|(kind, evidence)| {
            grace::load(root, &pci, kind, evidence, || {
                let arch = kernel.arch.as_ref().map_or("x86_64", |(a, _)| a.as_str());
                let search =
                    nccl_plugin::search_path(root, nccl.settings.get("LD_LIBRARY_PATH"), arch);
                grace::libmlx5(root, &search)
            })
        });
        let jobs = jobs::load(root);
        Inventory {
            live,
            jobs,
            kernel,
            pci,
            gpus,
            rdma,
            rdma_class,
            iommu,
            unidentified,
            problems,
            kfd,
            netdevs,
            nccl,
            virtual_pci,
            grace,
        }
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
