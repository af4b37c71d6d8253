//! The kernel: release, command line, modules, the NVIDIA driver's view, kernel config, the
//! peer-memory clients registered with the RDMA core.

use super::{Fact, Problem, list};
use crate::model::ReadError;
use crate::model::health::KernelLog;
use crate::parse::kernel::{self as pk, KernelVersion, NvidiaVersion, Param};
use crate::root::Root;
use std::collections::BTreeMap;

pub const PROC_MODULES: &str = "/proc/modules";
pub const PROC_CMDLINE: &str = "/proc/cmdline";
pub const NVIDIA_VERSION: &str = "/proc/driver/nvidia/version";
pub const MEMORY_PEERS: &str = "/sys/kernel/mm/memory_peers";
pub const NUMA_NODES: &str = "/sys/devices/system/node";
/// The kernel's log, one record a read (live roots).
pub const KMSG: &str = "/dev/kmsg";
/// What a capture keeps of the kernel's log: the records gdrdoctor judges.
pub const RECORDED_LOG: &str = "/gdrdoctor/kernel-log";
/// At most this many records are read (a ring of 16 MiB holds about 150,000).
const LOG_RECORDS_MAX: usize = 400_000;

/// How a module is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The state column of `/proc/modules` (`Live`, `Loading`, `Unloading`), if listed there.
    pub proc_state: Option<String>,
    /// `/sys/module/<name>` exists: loaded, or built in (built-ins are not in /proc/modules).
    pub sys_module: bool,
}

impl Module {
    pub fn builtin(&self) -> bool {
        self.proc_state.is_none() && self.sys_module
    }

    pub fn live(&self) -> bool {
        self.proc_state.as_deref().is_none_or(|s| s == "Live")
    }
}

#[derive(Debug, Clone)]
pub struct KernelConfig {
    pub path: String,
    pub options: BTreeMap<String, Option<String>>,
}

impl KernelConfig {
    /// `Some(true)` for `=y`/`=m`, `Some(false)` for "is not set" or absent.
    pub fn enabled(&self, name: &str) -> bool {
        matches!(self.options.get(name), Some(Some(v)) if v == "y" || v == "m")
    }

    pub fn shown(&self, name: &str) -> String {
        match self.options.get(name) {
            Some(Some(v)) => format!("{name}={v}"),
            Some(None) => format!("# {name} is not set"),
            None => format!("{name} absent"),
        }
    }
}

#[derive(Debug)]
pub struct Kernel {
    /// `/proc/sys/kernel/osrelease`, or the release in `/proc/version`.
    pub release: Fact<String>,
    /// `/proc/uptime`'s first field, in seconds: how long the counters have counted.
    pub uptime: Fact<f64>,
    pub version: Option<KernelVersion>,
    pub hostname: Option<String>,
    /// The machine's model, from DMI (`/sys/class/dmi/id`): vendor and product, and the board.
    /// Serial numbers and UUIDs are never read into it.
    pub product: Option<String>,
    pub board: Option<String>,
    /// DMI's `sys_vendor` and `product_name` as the firmware wrote them, apart: a cloud's
    /// instance type (`Amazon EC2`, `p4d.24xlarge`, which aws-ofi-nccl matches its platform
    /// table against), QEMU's machine (`QEMU`, `Standard PC (Q35 + ICH9, 2009)`).
    pub sys_vendor: Option<String>,
    pub product_name: Option<String>,
    /// Whether `/proc/cpuinfo`'s flags carry `hypervisor` (x86: CPUID.1:ECX bit 31, which a
    /// hypervisor sets for its guests and hardware never does); `None` without a flags line
    /// (other architectures, an unreadable file).
    pub hypervisor_flag: Fact<bool>,
    pub cmdline: Fact<Vec<Param>>,
    pub modules_file: Fact<()>,
    pub modules: BTreeMap<String, Module>,
    /// `/proc/driver/nvidia/version`; its absence means the NVIDIA module is not loaded.
    pub nvidia: Fact<NvidiaVersion>,
    /// `/proc/config.gz` or `/boot/config-<release>`, when readable.
    pub config: Option<KernelConfig>,
    pub config_tried: Vec<String>,
    /// Peer-memory clients registered with the RDMA core (`nv_mem` from nvidia_peermem), with
    /// their `version` file.
    pub memory_peers: BTreeMap<String, Fact<String>>,
    /// `x86_64`, `aarch64`, ... as far as the node tells, with where it was read.
    pub arch: Option<(String, String)>,
    /// `/sys/module/<m>/version` of the drivers reports name (out-of-tree modules have one).
    pub driver_versions: BTreeMap<&'static str, Fact<String>>,
    /// The CPUs of each NUMA node (`/sys/devices/system/node/node<N>/cpulist`): where a
    /// device's `numa_node` is -1 (VMs, some single-socket boards), its NUMA affinity is the
    /// nodes its `local_cpulist` touches, as `nvidia-smi topo -m` shows it.
    pub numa_nodes: BTreeMap<u32, Vec<(u32, u32)>>,
    /// The kernel's log (`/dev/kmsg` live, [`RECORDED_LOG`] in a capture): the records that
    /// say a GPU, NIC or PCIe link failed.
    pub log: KernelLog,
}

/// Modules whose version a report shows.
const VERSIONED: [&str; 6] = [
    "nvidia",
    "nvidia_peermem",
    "amdgpu",
    "amd_peer_mem",
    "mlx5_core",
    "ib_core",
];

pub const PROC_CPUINFO: &str = "/proc/cpuinfo";

/// The first CPU's flags line of `/proc/cpuinfo`, and whether it names `hypervisor`. Only the
/// first 16 KiB are read (the first CPU's block is about 2 KiB; a 224-CPU file is 300 KiB), so a
/// capture keeps no more than that.
fn hypervisor_flag(root: &Root) -> Fact<bool> {
    let raw = root
        .read_prefix(PROC_CPUINFO, 16 * 1024)
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    let flags = raw.as_ref().ok().and_then(|text| pk::cpuinfo_flags(text));
    Fact {
        path: PROC_CPUINFO.into(),
        value: flags.as_ref().map(|f| f.iter().any(|x| x == "hypervisor")),
        raw: raw.map(|_| match &flags {
            Some(f) if f.iter().any(|x| x == "hypervisor") => {
                format!("flags: hypervisor among {} flags", f.len())
            }
            Some(f) => format!("flags: {} flags, no hypervisor", f.len()),
            None => "no flags line".to_owned(),
        }),
    }
}

impl Kernel {
    pub fn load(root: &Root, problems: &mut Vec<Problem>) -> Kernel {
        // The kernel keeps utsname fields to 64 bytes of printable text; anything else in a
        // capture is not a release.
        let mut release = Fact::read(root, "/proc/sys/kernel/osrelease".into(), |s| {
            is_uts_field(s).then(|| s.to_owned())
        });
        problems.extend(release.as_problem(true));
        if release.value.is_none() {
            let from_version = Fact::read(root, "/proc/version".into(), |s| {
                pk::release_from_proc_version(s).filter(|r| is_uts_field(r))
            });
            if from_version.value.is_some() {
                release = from_version;
            }
        }
        let version = release.value().and_then(|r| pk::kernel_version(r));
        let hostname = root
            .read_text("/proc/sys/kernel/hostname")
            .ok()
            .filter(|h| is_uts_field(h));
        // DMI strings are free text from the firmware: printable, bounded, or not at all.
        let dmi = |attr: &str| {
            root.read_text(&format!("/sys/class/dmi/id/{attr}"))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| {
                    !s.is_empty()
                        && s.len() <= 64
                        && s.chars().all(|c| !c.is_control())
                        && !["To Be Filled By O.E.M.", "Default string", "Not Specified"]
                            .contains(&s.as_str())
                })
        };
        let join = |a: Option<String>, b: Option<String>| match (a, b) {
            (Some(a), Some(b)) if b.starts_with(&a) => Some(b),
            (Some(a), Some(b)) => Some(format!("{a} {b}")),
            (a, b) => a.or(b),
        };
        let (sys_vendor, product_name) = (dmi("sys_vendor"), dmi("product_name"));
        let product = join(sys_vendor.clone(), product_name.clone());
        let board = join(dmi("board_vendor"), dmi("board_name"));
        let cmdline = Fact::read(root, PROC_CMDLINE.into(), |s| Some(pk::cmdline(s)));

        let modules_file = Fact::read(root, PROC_MODULES.into(), |_| Some(()));
        let mut modules: BTreeMap<String, Module> = BTreeMap::new();
        if let Ok(text) = &modules_file.raw {
            for m in pk::proc_modules(text) {
                modules.insert(
                    m.name,
                    Module {
                        proc_state: Some(m.state),
                        sys_module: false,
                    },
                );
            }
        }
        for name in list(root, "/sys/module", problems) {
            if pk::is_module_name(&name) {
                modules
                    .entry(name)
                    .or_insert(Module {
                        proc_state: None,
                        sys_module: false,
                    })
                    .sys_module = true;
            }
        }

        let nvidia = Fact::read(root, NVIDIA_VERSION.into(), pk::nvidia_version);

        let mut config_tried = vec!["/proc/config.gz".to_owned()];
        let mut config = read_config_gz(root, "/proc/config.gz", problems);
        if config.is_none() {
            if let Some(r) = release.value() {
                let path = format!("/boot/config-{r}");
                if !r.contains('/') {
                    config = root.read_text(&path).ok().map(|text| KernelConfig {
                        path: path.clone(),
                        options: pk::kernel_config(&text),
                    });
                    config_tried.push(path);
                }
            }
        }

        let mut memory_peers = BTreeMap::new();
        for name in list(root, MEMORY_PEERS, problems) {
            let fact = Fact::read(root, format!("{MEMORY_PEERS}/{name}/version"), |s| {
                Some(s.to_owned())
            });
            memory_peers.insert(name, fact);
        }

        let arch = Self::arch(root, config.as_ref());
        let driver_versions = VERSIONED
            .into_iter()
            .filter(|m| modules.get(*m).is_some_and(|m| m.sys_module))
            .map(|m| {
                (
                    m,
                    Fact::read(root, format!("/sys/module/{m}/version"), |s| {
                        (!s.is_empty() && s.len() < 64).then(|| s.to_owned())
                    }),
                )
            })
            .collect();
        let numa_nodes = list(root, NUMA_NODES, problems)
            .into_iter()
            .filter_map(|name| {
                let id = name.strip_prefix("node")?.parse::<u32>().ok()?;
                // A list the kernel did not write is left out: this only fills a column.
                let cpus = root
                    .read_text(&format!("{NUMA_NODES}/{name}/cpulist"))
                    .ok()
                    .and_then(|s| crate::parse::cpulist::parse(&s))?;
                Some((id, cpus))
            })
            .collect();
        let uptime = Fact::read(root, "/proc/uptime".into(), |s| {
            s.split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
                .filter(|u| u.is_finite() && *u >= 0.0)
        });
        Kernel {
            log: read_log(root, ""),
            uptime,
            release,
            version,
            hostname,
            product,
            board,
            sys_vendor,
            product_name,
            hypervisor_flag: hypervisor_flag(root),
            cmdline,
            modules_file,
            modules,
            nvidia,
            config,
            config_tried,
            memory_peers,
            arch,
            driver_versions,
            numa_nodes,
        }
    }

    /// The machine architecture: `/proc/sys/kernel/arch` (Linux 6.1+), else the kernel config.
    fn arch(root: &Root, config: Option<&KernelConfig>) -> Option<(String, String)> {
        if let Ok(a) = root.read_text("/proc/sys/kernel/arch") {
            if !a.is_empty()
                && a.len() < 32
                && a.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Some((a, "/proc/sys/kernel/arch".into()));
            }
        }
        let config = config?;
        [
            ("CONFIG_X86_64", "x86_64"),
            ("CONFIG_ARM64", "aarch64"),
            ("CONFIG_PPC64", "ppc64le"),
        ]
        .into_iter()
        .find(|(opt, _)| config.enabled(opt))
        .map(|(opt, arch)| {
            (
                arch.to_owned(),
                format!("{} {}", config.path, config.shown(opt)),
            )
        })
    }

    pub fn module(&self, name: &str) -> Option<&Module> {
        self.modules.get(name)
    }

    /// Evidence for whether a module is present: the /proc/modules line or /sys/module dir.
    pub fn module_evidence(&self, name: &str) -> crate::model::Evidence {
        let value = match self.modules.get(name) {
            Some(Module {
                proc_state: Some(state),
                ..
            }) => format!("{name} listed ({state})"),
            Some(m) if m.sys_module => format!("not listed; /sys/module/{name} exists (built in)"),
            _ => match &self.modules_file.raw {
                Ok(_) => format!("{name} not listed, no /sys/module/{name}"),
                Err(e) => format!("<{}>", e.reason()),
            },
        };
        crate::model::Evidence {
            path: PROC_MODULES.into(),
            value,
        }
    }

    pub fn cmdline_param(&self, key: &str) -> Option<&Param> {
        // The kernel applies parameters in order; the last one wins.
        self.cmdline.value()?.iter().rev().find(|p| p.key == key)
    }
}

/// A utsname field as the kernel keeps it (`__NEW_UTS_LEN` = 64): non-empty printable text.
fn is_uts_field(s: &str) -> bool {
    !s.is_empty() && s.len() <= 64 && s.chars().all(|c| c.is_ascii_graphic() || c == ' ')
}

/// /proc/config.gz, decompressed with a bound: a hostile capture's gzip bomb stops at 16 MiB.
fn read_config_gz(root: &Root, path: &str, problems: &mut Vec<Problem>) -> Option<KernelConfig> {
    use std::io::Read;
    const MAX_DECOMPRESSED: u64 = 16 << 20;
    let bytes = match root.read_limited(path, 4 << 20) {
        Ok(b) => b,
        Err(e) if e.is_not_found() => return None,
        Err(e) => {
            problems.push(Problem::from_error(&e));
            return None;
        }
    };
    let mut text = String::new();
    let mut decoder = flate2::read::GzDecoder::new(&bytes[..]).take(MAX_DECOMPRESSED + 1);
    if let Err(e) = decoder.read_to_string(&mut text) {
        problems.push(Problem {
            path: path.into(),
            message: format!("cannot decompress: {e}"),
        });
        return None;
    }
    if text.len() as u64 > MAX_DECOMPRESSED {
        problems.push(Problem {
            path: path.into(),
            message: "decompresses to more than 16 MiB; ignored".into(),
        });
        return None;
    }
    Some(KernelConfig {
        path: path.into(),
        options: pk::kernel_config(&text),
    })
}

/// The kernel's log: live, every record `/dev/kmsg` holds, keeping those
/// [`crate::parse::kmsg::kept`] says may be events; in a capture, the copy at `prefix` +
/// [`RECORDED_LOG`] (`prefix`: a sample's folder).
pub fn read_log(root: &Root, prefix: &str) -> KernelLog {
    use crate::parse::kmsg::{LogFile, Record, kept};
    if !root.is_live() {
        let path = format!("{prefix}{RECORDED_LOG}");
        // The copy's records are /dev/kmsg's, and are shown as such: the report on a capture
        // equals the live one.
        return match root.read_text(&path) {
            Ok(text) => match LogFile::parse(&text) {
                Some(LogFile::Read {
                    total,
                    last_seq,
                    records,
                }) => KernelLog::Read {
                    path: KMSG.into(),
                    total,
                    last_seq,
                    records,
                },
                Some(LogFile::Unreadable { reason, needs_root }) => KernelLog::Unreadable {
                    path: KMSG.into(),
                    reason,
                    needs_root,
                },
                None => KernelLog::Unreadable {
                    reason: format!("{path}: not a kernel log written by gdrdoctor capture"),
                    path,
                    needs_root: false,
                },
            },
            Err(e) if e.is_not_found() => KernelLog::NotCaptured { path },
            Err(e) => KernelLog::Unreadable {
                path,
                reason: e.to_string(),
                needs_root: false,
            },
        };
    }
    match root.read_records(KMSG, LOG_RECORDS_MAX) {
        Ok(raw) => {
            let all: Vec<Record> = raw.iter().filter_map(|r| Record::parse(r)).collect();
            KernelLog::Read {
                path: KMSG.into(),
                total: all.len(),
                last_seq: all.last().map(|r| r.seq),
                records: all.into_iter().filter(kept).collect(),
            }
        }
        Err(e) => {
            let needs_root = matches!(e, ReadError::PermissionDenied { .. });
            let reason = if needs_root {
                let restrict = root
                    .read_text("/proc/sys/kernel/dmesg_restrict")
                    .map(|v| format!("kernel.dmesg_restrict={}", v.trim()))
                    .unwrap_or_else(|_| "kernel.dmesg_restrict".into());
                format!("{e}: reading the kernel log needs root or CAP_SYSLOG ({restrict})")
            } else {
                e.to_string()
            };
            KernelLog::Unreadable {
                path: KMSG.into(),
                reason,
                needs_root,
            }
        }
    }
}
