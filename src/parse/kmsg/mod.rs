//! The kernel's log as `/dev/kmsg` gives it, one record a read: `LEVEL,SEQ,USEC,FLAGS;TEXT`
//! (Documentation/ABI/testing/dev-kmsg; kernel/printk/printk.c, info_print_ext_header), and
//! the events in it that say a GPU, an RDMA NIC or a PCIe link on their paths failed:
//! - NVIDIA's Xid reports, `NVRM: Xid (PCI:0000:18:00): 79, pid=..., GPU has fallen off the
//!   bus.` (the open kernel modules' nv_report_error; older drivers print `(0000:18:00)`);
//! - mlx5 command timeouts and health reports (drivers/net/ethernet/mellanox/mlx5/core/cmd.c
//!   `wait_func`, `cmd_work_handler`; health.c `print_health_info`, `poll_health`);
//! - AER's `PCIe Bus Error: severity=...` and the error names after it (drivers/pci/pcie/aer.c
//!   `aer_print_error`, `__aer_print_error`): "Corrected", "Uncorrected (Non-Fatal)",
//!   "Uncorrected (Fatal)", "Uncorrectable (...)" and "Correctable" in kernels from 6.10;
//! - `... available PCIe bandwidth, limited by 8.0 GT/s PCIe x4 link at 0000:00:1c.0 ...`
//!   (drivers/pci/pci.c `__pcie_print_link_status`), printed when a driver probes its device;
//! - peer-memory failures: nvidia-peermem's `peer_err` lines (`nvidia-peermem nv_mem_get_pages:
//!   ... ERROR ...`) and the module loader's `nvidia_peermem: Unknown symbol ...`;
//! - NVIDIA's driver failing to initialise a GPU: `NVRM: GPU 0000:02:00.0: RmInitAdapter failed!
//!   (0x22:0x56:884)` and the `rm_init_adapter failed, device minor number 0` after it
//!   (NVIDIA/open-gpu-kernel-modules at df1c9a3, src/nvidia/arch/nvalloc/unix/src/osinit.c and
//!   kernel-open/common/inc/os-interface.h `NV_DEV_PRINTF`), and the proprietary module's refusal
//!   of a GPU only the open kernel modules drive, `NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID:
//!   10de:2c58)` + `NVRM: installed in this system requires use of the NVIDIA open kernel
//!   modules.` (one printk with an embedded newline; only the closed module prints it, so its
//!   form is the one users posted: NVIDIA/open-gpu-kernel-modules#862 and the others named in
//!   [`nvrm`]).
//!
//! The file a capture keeps (`/gdrdoctor/kernel-log`) holds the matching records in the same
//! form under a header that says how the log was read ([`LogFile`]).

use super::pci::Bdf;

mod nvrm;
pub use nvrm::RmInitStatus;
use nvrm::{NVIDIA_GPU, REFUSAL, gpu_named, open_module_refusal, rm_init_adapter};

/// One record of the kernel's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The syslog level, 0 (emerg) to 7 (debug).
    pub level: u8,
    pub seq: u64,
    /// Microseconds since boot (the monotonic clock, as `dmesg` shows them).
    pub usec: u64,
    pub text: String,
}

impl Record {
    /// `LEVEL,SEQ,USEC,FLAGS;TEXT` (the facility is in LEVEL's high bits; continuation lines, `
    /// KEY=value`, are not records). Non-printable bytes arrive escaped as `\xNN`, so a record
    /// is one line.
    pub fn parse(line: &str) -> Option<Record> {
        let (head, text) = line.split_once(';')?;
        let mut f = head.split(',');
        let prival: u32 = f.next()?.trim().parse().ok()?;
        let seq = f.next()?.parse().ok()?;
        let usec = f.next()?.parse().ok()?;
        Some(Record {
            level: (prival & 7) as u8,
            seq,
            usec,
            // The dictionary (` SUBSYSTEM=pci`, ` DEVICE=+pci:...`) follows on lines of its own.
            text: text
                .split('\n')
                .next()
                .unwrap_or("")
                .trim_end_matches('\r')
                .to_owned(),
        })
    }

    /// The record as `/dev/kmsg` gives it (kernel facility, no flags).
    pub fn line(&self) -> String {
        format!("{},{},{},-;{}", self.level, self.seq, self.usec, self.text)
    }

    /// `[ 1234.567890]`, as `dmesg` shows the time.
    pub fn stamp(&self) -> String {
        format!(
            "[{:>5}.{:06}]",
            self.usec / 1_000_000,
            self.usec % 1_000_000
        )
    }
}

/// What a severity line of AER says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PcieSeverity {
    Corrected,
    NonFatal,
    Fatal,
}

impl PcieSeverity {
    pub fn noun(self) -> &'static str {
        match self {
            PcieSeverity::Corrected => "corrected",
            PcieSeverity::NonFatal => "uncorrected (non-fatal)",
            PcieSeverity::Fatal => "uncorrected (fatal)",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// An NVIDIA Xid with its number.
    Xid(u32),
    /// An mlx5 firmware command that timed out.
    NicCommandTimeout,
    /// mlx5's health poller or fatal-error reporter found the firmware in trouble.
    NicHealth,
    /// A send queue of the NIC's netdev stopped completing (`TX timeout detected`).
    NicTxTimeout,
    /// An AER report, with the error names the kernel printed after it (`RxErr`, `BadTLP`, ...).
    Pcie(PcieSeverity, Vec<String>),
    /// The kernel found a device's bandwidth limited by a slower link on its path (at probe).
    BandwidthLimited { at: Option<Bdf> },
    /// The peer-memory module (nvidia-peermem) failed to load or to pin GPU memory.
    PeerMemory,
    /// NVIDIA's proprietary module refused a GPU that only the open kernel modules drive, with
    /// the PCI ID it printed (`10de:2c58`).
    OpenModuleRequired { pci_id: Option<String> },
    /// NVIDIA's driver could not initialise a GPU: `RmInitAdapter failed! (...)`.
    RmInitAdapter(RmInitStatus),
    /// `rm_init_adapter failed, device minor number N`, printed after an `RmInitAdapter
    /// failed!`: with that line's status when it came before on the same GPU.
    RmInitAdapterMinor { status: Option<RmInitStatus> },
    /// The driver's own report of a GPU that fell off the bus, without an Xid: `NVRM: The NVIDIA
    /// GPU 0000:b3:00.0 (PCI ID: 10de:26b5) installed in this system has fallen off the bus and
    /// is not responding to commands.` (NVIDIA/NVSentinel#155 saw it with no Xid 79 beside it).
    FallenOffBus,
}

/// A record that says something about a device on the GPU-NIC paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The device the record is about (the one that printed it, or the GPU of an Xid).
    pub device: Option<Bdf>,
    pub record: Record,
}

/// The MIG instances an Xid names (`GPU-I:05`, `GPU-I:01 GPU-CI:02`), as printed.
pub fn xid_instance(text: &str) -> Option<String> {
    let inside = text.strip_prefix("NVRM: Xid (")?.split_once("): ")?.0;
    let words: Vec<&str> = inside
        .split_whitespace()
        .skip(1)
        .filter(|w| {
            (w.starts_with("GPU-I:") || w.starts_with("GPU-CI:"))
                && w.len() <= 12
                && w.split_once(':')
                    .is_some_and(|(_, n)| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    (!words.is_empty()).then(|| words.join(" "))
}

/// A GPU that fell off the bus, as the driver says it outside an Xid (see
/// [`EventKind::FallenOffBus`]): the GPU the record names (`The NVIDIA GPU ADDR`, or NV_DEV_PRINTF's
/// `NVRM: GPU ADDR: `), `Some(None)` when it names none.
fn fallen_off(text: &str) -> Option<Option<Bdf>> {
    if !text.starts_with("NVRM:")
        || !text.contains("fallen off the bus")
        || text.starts_with("NVRM: Xid")
    {
        return None;
    }
    let named = nvrm::gpu_named(text).map(|(b, _)| b).or_else(|| {
        let rest = text.strip_prefix("NVRM: GPU ")?;
        Bdf::parse(rest.split_once(": ")?.0)
    });
    Some(named)
}

/// `driver 0000:3b:00.0: message` (dev_printk's prefix): the device and the message.
/// netdev_printk adds the interface: `mlx5_core 0000:3b:00.0 ens3np0: TX timeout detected`.
fn dev_prefix(text: &str) -> Option<(&str, Bdf, &str)> {
    let (driver, rest) = text.split_once(' ')?;
    let (addr, msg) = rest.split_once(": ")?;
    let addr = addr.split(' ').next()?;
    Some((driver, Bdf::parse(addr)?, msg))
}

/// `NVRM: Xid (PCI:0000:18:00): 79, ...` or `NVRM: Xid (0000:18:00): 79, ...`: the GPU (function
/// 0) and the number.
/// On a MIG GPU the parenthesis carries the GPU instance (and compute instance) after the
/// address: `NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...` (NVIDIA's A100 memory error
/// management guide; open-gpu-kernel-modules prints `PCI:%04x:%02x:%02x GPU-I:%02u GPU-CI:%02u`).
fn xid(text: &str) -> Option<(Option<Bdf>, u32)> {
    let rest = text.strip_prefix("NVRM: Xid ")?;
    let (addr, rest) = match rest.strip_prefix('(') {
        Some(r) => {
            let (inside, after) = r.split_once("): ")?;
            let inside = inside.strip_prefix("PCI:").unwrap_or(inside);
            let addr = inside.split_whitespace().next().unwrap_or("");
            (Bdf::parse(&format!("{addr}.0")), after)
        }
        None => (None, rest),
    };
    let num: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((addr, num.parse().ok()?))
}

/// `severity=Corrected, type=...` -> the severity.
fn severity(msg: &str) -> Option<PcieSeverity> {
    let s = msg.split_once("severity=")?.1;
    if s.starts_with("Correct") {
        Some(PcieSeverity::Corrected)
    } else if s.starts_with("Uncorrect") {
        Some(if s.contains("Non-Fatal") {
            PcieSeverity::NonFatal
        } else {
            PcieSeverity::Fatal
        })
    } else {
        None
    }
}

/// `   [ 0] RxErr                  (First)` -> `RxErr`.
fn error_name(msg: &str) -> Option<String> {
    let rest = msg.trim_start().strip_prefix('[')?;
    let (num, name) = rest.split_once(']')?;
    num.trim().parse::<u32>().ok()?;
    let name = name.split_whitespace().next()?;
    Some(name.to_owned())
}

fn mlx5(driver: &str, msg: &str) -> Option<EventKind> {
    if driver != "mlx5_core" {
        return None;
    }
    let lower = msg.to_ascii_lowercase();
    if lower.contains("timeout")
        && (lower.contains("wait_func")
            || lower.contains("cmd_work_handler")
            || lower.contains("command"))
    {
        return Some(EventKind::NicCommandTimeout);
    }
    if lower.contains("tx timeout detected") {
        return Some(EventKind::NicTxTimeout);
    }
    const HEALTH: [&str; 6] = [
        "health compromised",
        "health issue observed",
        "print_health_info",
        "fatal error",
        "fw_fatal",
        "health recovery",
    ];
    HEALTH
        .iter()
        .any(|h| lower.contains(h))
        .then_some(EventKind::NicHealth)
}

fn peer_memory(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let module = lower.starts_with("nvidia-peermem")
        || lower.starts_with("nvidia_peermem")
        || lower.starts_with("nv_peer_mem")
        || lower.starts_with("nv_mem_");
    module
        && ["error", "unknown symbol", "fail", "disagrees about version"]
            .iter()
            .any(|w| lower.contains(w))
}

/// `... limited by 8.0 GT/s PCIe x4 link at 0000:00:1c.0 (capable of ...)` -> 0000:00:1c.0.
fn limited_at(msg: &str) -> Option<Option<Bdf>> {
    let rest = msg.split_once("available PCIe bandwidth, limited by ")?.1;
    let at = rest
        .split_once(" link at ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .and_then(|a| Bdf::parse(a.trim_end_matches([',', ')'])));
    Some(at)
}

/// The events among `records`, in their order. An AER report takes the error names printed
/// after it by the same device.
pub fn events(records: &[Record]) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    // The GPU the last `NVRM: The NVIDIA GPU ...` record named, for a refusal whose second line
    // came as a record of its own.
    let mut named: Option<(Bdf, Option<String>)> = None;
    // Each GPU's last `RmInitAdapter failed!` status, for the `rm_init_adapter failed` after it.
    let mut last_status: std::collections::BTreeMap<Option<Bdf>, RmInitStatus> = Default::default();
    for r in records {
        let text = r.text.as_str();
        if let Some(own) = open_module_refusal(text) {
            let (device, pci_id) = match own.or_else(|| named.take()) {
                Some((bdf, id)) => (Some(bdf), id),
                None => (None, None),
            };
            out.push(Event {
                kind: EventKind::OpenModuleRequired { pci_id },
                device,
                record: r.clone(),
            });
            continue;
        }
        if let Some(own) = fallen_off(text) {
            // Its lines split into records: the GPU the first named.
            let device = own.or_else(|| named.take().map(|(b, _)| b));
            out.push(Event {
                kind: EventKind::FallenOffBus,
                device,
                record: r.clone(),
            });
            continue;
        }
        if text.starts_with(NVIDIA_GPU) {
            named = gpu_named(text);
            continue;
        }
        if let Some((bdf, status)) = rm_init_adapter(text) {
            let kind = match status {
                Some(s) => {
                    last_status.insert(bdf, s);
                    EventKind::RmInitAdapter(s)
                }
                None => EventKind::RmInitAdapterMinor {
                    status: last_status.get(&bdf).copied(),
                },
            };
            out.push(Event {
                kind,
                device: bdf,
                record: r.clone(),
            });
            continue;
        }
        if let Some((device, code)) = xid(text) {
            out.push(Event {
                kind: EventKind::Xid(code),
                device,
                record: r.clone(),
            });
            continue;
        }
        if peer_memory(text) {
            out.push(Event {
                kind: EventKind::PeerMemory,
                device: None,
                record: r.clone(),
            });
            continue;
        }
        let Some((driver, bdf, msg)) = dev_prefix(text) else {
            continue;
        };
        let kind = if msg.contains("PCIe Bus Error") {
            severity(msg).map(|s| EventKind::Pcie(s, Vec::new()))
        } else if let Some(name) = error_name(msg) {
            // A name line belongs to the last AER report of the same device.
            if let Some(Event {
                kind: EventKind::Pcie(_, names),
                device: Some(d),
                ..
            }) = out.last_mut()
            {
                if *d == bdf && !names.contains(&name) {
                    names.push(name);
                }
            }
            None
        } else if let Some(at) = limited_at(msg) {
            Some(EventKind::BandwidthLimited { at })
        } else {
            mlx5(driver, msg)
        };
        if let Some(kind) = kind {
            out.push(Event {
                kind,
                device: Some(bdf),
                record: r.clone(),
            });
        }
    }
    out
}

/// Whether a record could be part of an event (an event itself or an AER error-name line): what
/// a capture keeps of the log.
pub fn kept(record: &Record) -> bool {
    let text = record.text.as_str();
    if xid(text).is_some()
        || fallen_off(text).is_some()
        || peer_memory(text)
        || text.contains(REFUSAL)
        || text.starts_with(NVIDIA_GPU)
        || rm_init_adapter(text).is_some()
    {
        return true;
    }
    dev_prefix(text).is_some_and(|(driver, _, msg)| {
        msg.contains("PCIe Bus Error")
            || error_name(msg).is_some()
            || limited_at(msg).is_some()
            || mlx5(driver, msg).is_some()
    })
}

/// The file a capture keeps: `# gdrdoctor kernel-log` and how the log was read, then the kept
/// records as `/dev/kmsg` gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum LogFile {
    /// Read: the number of records read, the last sequence number, the kept records.
    Read {
        total: usize,
        last_seq: Option<u64>,
        records: Vec<Record>,
    },
    /// The node's log could not be read, and why.
    Unreadable { reason: String, needs_root: bool },
}

const MAGIC: &str = "# gdrdoctor kernel-log";

impl LogFile {
    pub fn render(&self) -> String {
        match self {
            LogFile::Read {
                total,
                last_seq,
                records,
            } => {
                let mut s = format!(
                    "{MAGIC}: the records of /dev/kmsg that gdrdoctor judges\n# read: {total} records, last sequence {}\n",
                    last_seq.map_or_else(|| "none".to_owned(), |q| q.to_string())
                );
                for r in records {
                    s.push_str(&r.line());
                    s.push('\n');
                }
                s
            }
            LogFile::Unreadable { reason, needs_root } => format!(
                "{MAGIC}: the records of /dev/kmsg that gdrdoctor judges\n# unreadable{}: {reason}\n",
                if *needs_root { " (needs root)" } else { "" }
            ),
        }
    }

    /// The file as [`LogFile::render`] writes it; `None` when it is not one. Records that do not
    /// parse are left out (a hand-edited copy).
    pub fn parse(text: &str) -> Option<LogFile> {
        let mut lines = text.lines();
        if !lines.next()?.starts_with(MAGIC) {
            return None;
        }
        let head = lines.next()?;
        if let Some(rest) = head.strip_prefix("# unreadable") {
            let needs_root = rest.starts_with(" (needs root)");
            let reason = rest.split_once(": ").map_or("", |(_, r)| r).to_owned();
            return Some(LogFile::Unreadable { reason, needs_root });
        }
        let rest = head.strip_prefix("# read: ")?;
        let (total, rest) = rest.split_once(" records, last sequence ")?;
        let total = total.parse().ok()?;
        let last_seq = rest.trim().parse().ok();
        let records = lines.filter_map(Record::parse).collect();
        Some(LogFile::Read {
            total,
            last_seq,
            records,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, text: &str) -> Record {
        Record {
            level: 3,
            seq,
            usec: seq * 1000,
            text: text.into(),
        }
    }

    #[test]
    fn a_record_as_dev_kmsg_gives_it() {
        let r = Record::parse(
            "6,1234,5678901,-;NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.\n",
        )
        .unwrap();
        assert_eq!((r.level, r.seq, r.usec), (6, 1234, 5_678_901));
        assert_eq!(r.stamp(), "[    5.678901]");
        // The facility is in the high bits of the first field (a user message, facility 1).
        assert_eq!(Record::parse("12,7,0,-;x").unwrap().level, 4);
        assert_eq!(Record::parse(" SUBSYSTEM=pci"), None);
        let r = Record::parse("3,9,10,-;e1000e 0000:05:00.0: PCIe Bus Error\n SUBSYSTEM=pci\n DEVICE=+pci:0000:05:00.0\n").unwrap();
        assert_eq!(r.text, "e1000e 0000:05:00.0: PCIe Bus Error");
        assert_eq!(Record::parse("junk;x"), None);
    }

    #[test]
    fn xid_with_and_without_pci() {
        // NVIDIA/open-gpu-kernel-modules#1151 (an RTX 5080, driver 580-series).
        let e = events(&[rec(
            1,
            "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        )]);
        assert_eq!(e[0].kind, EventKind::Xid(79));
        assert_eq!(e[0].device, Bdf::parse("0000:2b:00.0"));
        // An older driver (pastebin xJaypMZt): no `PCI:`.
        let e = events(&[rec(1, "NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007")]);
        assert_eq!(
            (e[0].kind.clone(), e[0].device),
            (EventKind::Xid(3), Bdf::parse("0000:01:00.0"))
        );
        assert!(events(&[rec(1, "NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014")]).is_empty());
    }

    #[test]
    fn an_aer_report_takes_its_error_names() {
        let log = [
            rec(
                1,
                "pcieport 0000:00:02.0: AER: Corrected error message received from 0000:05:00.0",
            ),
            rec(
                2,
                "e1000e 0000:05:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
            ),
            rec(
                3,
                "e1000e 0000:05:00.0:   device [8086:10d3] error status/mask=00000001/00002000",
            ),
            rec(
                4,
                "e1000e 0000:05:00.0:    [ 0] RxErr                  (First)",
            ),
            rec(
                5,
                "pcieport 0000:02:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)",
            ),
            rec(
                6,
                "pcieport 0000:02:00.0:    [14] CmpltTO                (First)",
            ),
            rec(
                7,
                "pcieport 0000:02:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Receiver ID)",
            ),
        ];
        let e = events(&log);
        assert_eq!(e.len(), 3);
        assert_eq!(
            e[0].kind,
            EventKind::Pcie(PcieSeverity::Corrected, vec!["RxErr".into()])
        );
        assert_eq!(e[0].device, Bdf::parse("0000:05:00.0"));
        assert_eq!(
            e[1].kind,
            EventKind::Pcie(PcieSeverity::NonFatal, vec!["CmpltTO".into()])
        );
        assert_eq!(e[2].kind, EventKind::Pcie(PcieSeverity::Fatal, vec![]));
        assert!(log.iter().skip(1).all(|r| r.seq == 3 || kept(r)));
    }

    #[test]
    fn mlx5_bandwidth_and_peer_memory() {
        let e = events(&[
            rec(
                1,
                "mlx5_core 0000:3b:00.0: wait_func:1134:(pid 2121): CREATE_MKEY(0x200) timeout. Will cause a leak of a command resource",
            ),
            rec(
                2,
                "mlx5_core 0000:3b:00.0: poll_health:801:(pid 0): device's health compromised - reached miss count",
            ),
            rec(
                3,
                "mlx5_core 0000:3b:00.0: 63.008 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x8 link at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)",
            ),
            rec(
                4,
                "nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)",
            ),
            rec(
                5,
                "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
            ),
            // NVIDIA/NVSentinel#1334: netdev_printk's prefix carries the interface.
            rec(6, "mlx5_core 0000:3b:00.0 ens3np0: TX timeout detected"),
        ]);
        let kinds: Vec<_> = e.iter().map(|e| e.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                EventKind::NicCommandTimeout,
                EventKind::NicHealth,
                EventKind::BandwidthLimited {
                    at: Bdf::parse("0000:3a:00.0")
                },
                EventKind::PeerMemory,
                EventKind::NicTxTimeout,
            ]
        );
        assert_eq!(e[4].device, Bdf::parse("0000:3b:00.0"));
    }

    /// The lab guest's own kernel (Debian 6.1 under QEMU) logging three injected AER errors
    /// (tests/lab/kernel-log/aer-inject.dmesg.txt, `dmesg` as it printed them): the events are
    /// the three reports, each with its device, severity and error name, and nothing else of the
    /// boot's 500-odd lines.
    #[test]
    fn a_real_kernels_aer_reports() {
        let text = include_str!("../../../tests/lab/kernel-log/aer-inject.dmesg.txt");
        let records: Vec<Record> = text
            .lines()
            .enumerate()
            .filter_map(|(k, l)| {
                let (stamp, msg) = l.strip_prefix('[')?.split_once("] ")?;
                let (s, us) = stamp.trim().split_once('.')?;
                Some(Record {
                    level: 3,
                    seq: k as u64,
                    usec: s.parse::<u64>().ok()? * 1_000_000 + us.parse::<u64>().ok()?,
                    text: msg.to_owned(),
                })
            })
            .collect();
        assert!(records.len() > 400);
        let e = events(&records);
        let got: Vec<(String, EventKind)> = e
            .iter()
            .map(|e| (e.device.unwrap().to_string(), e.kind.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "0000:02:00.0".into(),
                    EventKind::Pcie(PcieSeverity::NonFatal, vec!["CmpltTO".into()])
                ),
                (
                    "0000:03:00.0".into(),
                    EventKind::Pcie(PcieSeverity::Corrected, vec!["RxErr".into()])
                ),
                (
                    "0000:05:00.0".into(),
                    EventKind::Pcie(PcieSeverity::NonFatal, vec!["CmpltTO".into()])
                ),
            ]
        );
        // What a capture keeps: the three reports and their name lines, nothing of the boot.
        assert_eq!(records.iter().filter(|r| kept(r)).count(), 6);
    }

    #[test]
    fn the_file_round_trips() {
        let f = LogFile::Read {
            total: 812,
            last_seq: Some(811),
            records: vec![rec(40, "NVRM: Xid (PCI:0000:18:00): 48, pid=1, DBE")],
        };
        assert_eq!(LogFile::parse(&f.render()), Some(f));
        let u = LogFile::Unreadable {
            reason: "/dev/kmsg: permission denied".into(),
            needs_root: true,
        };
        assert_eq!(LogFile::parse(&u.render()), Some(u));
        assert_eq!(LogFile::parse("not ours\n"), None);
        assert_eq!(LogFile::parse(""), None);
    }
}
