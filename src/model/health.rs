//! Link health: the counters that say a link is failing, what each one means, and what was read
//! of them. The inventory reads the files [`WATCHED`] names (nothing else: a read of an mlx5
//! PMA counter asks the firmware); a sample window reads them again; the `link-health` check
//! judges the growth.

use super::Fact;
use crate::parse::counters::AerTable;
use std::collections::BTreeMap;

/// Where a counter lives, relative to its port or netdev.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Place {
    /// `/sys/class/infiniband/DEV/ports/N/counters/` (the IB PMA counters).
    Pma,
    /// `/sys/class/infiniband/DEV/ports/N/hw_counters/` (the driver's transport counters).
    Hw,
    /// `/sys/class/net/IF/` (carrier changes).
    Netdev,
    /// `/sys/class/net/IF/statistics/`.
    NetdevStats,
}

impl Place {
    pub fn dir(self) -> &'static str {
        match self {
            Place::Pma => "counters",
            Place::Hw => "hw_counters",
            Place::Netdev => "",
            Place::NetdevStats => "statistics",
        }
    }
}

/// What a counter's growth says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sign {
    /// The link went down and came back: any growth in a window is a flap.
    Flap,
    /// Bits or packets damaged on the wire (a cable, a transceiver, a port): symbol errors,
    /// CRC errors, link recoveries.
    Wire,
    /// RDMA transfers retried or out of sequence: loss somewhere on the path (a lossy queue, a
    /// congested or failing link), what NCCL feels as slow collectives.
    Retry,
}

impl Sign {
    pub fn noun(self) -> &'static str {
        match self {
            Sign::Flap => "link flaps",
            Sign::Wire => "link errors",
            Sign::Retry => "transport retries",
        }
    }
}

/// A counter gdrdoctor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watched {
    pub place: Place,
    pub name: &'static str,
    pub sign: Sign,
}

const fn w(place: Place, name: &'static str, sign: Sign) -> Watched {
    Watched { place, name, sign }
}

/// The counters read on every port (the files a driver lacks are left out, not reported).
/// Sources: the kernel's Documentation/ABI/stable/sysfs-class-infiniband (PMA),
/// drivers/infiniband/hw/mlx5/counters.c, drivers/infiniband/sw/rxe/rxe_hw_counters.c and
/// drivers/infiniband/hw/efa/efa_verbs.c (hw),
/// Documentation/ABI/testing/sysfs-class-net and sysfs-class-net-statistics (netdev).
/// Congestion counters (port_xmit_wait, CNPs, ECN marks) are not here: they say the fabric is
/// busy, not that a link fails, and node_exporter's infiniband collector exports them.
pub const WATCHED: &[Watched] = &[
    w(Place::Pma, "link_downed", Sign::Flap),
    w(Place::Pma, "link_error_recovery", Sign::Wire),
    w(Place::Pma, "symbol_error", Sign::Wire),
    w(Place::Pma, "port_rcv_errors", Sign::Wire),
    w(Place::Pma, "port_rcv_remote_physical_errors", Sign::Wire),
    w(Place::Pma, "local_link_integrity_errors", Sign::Wire),
    w(Place::Pma, "excessive_buffer_overrun_errors", Sign::Wire),
    w(Place::Pma, "port_xmit_discards", Sign::Wire),
    // mlx5 (and bnxt_re, irdma where they share the names).
    w(Place::Hw, "local_ack_timeout_err", Sign::Retry),
    w(Place::Hw, "packet_seq_err", Sign::Retry),
    w(Place::Hw, "out_of_sequence", Sign::Retry),
    w(Place::Hw, "implied_nak_seq_err", Sign::Retry),
    w(Place::Hw, "rnr_nak_retry_err", Sign::Retry),
    w(Place::Hw, "req_transport_retries_exceeded", Sign::Retry),
    w(Place::Hw, "roce_slow_restart", Sign::Retry),
    // rxe.
    w(Place::Hw, "link_downed", Sign::Flap),
    w(Place::Hw, "retry_exceeded_err", Sign::Retry),
    w(Place::Hw, "rcvd_seq_err", Sign::Retry),
    w(Place::Hw, "completer_retry_err", Sign::Retry),
    w(Place::Hw, "out_of_seq_request", Sign::Retry),
    // efa (drivers/infiniband/hw/efa/efa_verbs.c EFA_DEFINE_PORT_STATS): received packets the
    // device dropped (SRD resends them: loss NCCL feels as slow collectives), and RDMA read work
    // requests completed in error.
    w(Place::Hw, "rx_drops", Sign::Retry),
    w(Place::Hw, "rdma_read_wr_err", Sign::Retry),
    // The netdev under a RoCE port.
    w(Place::Netdev, "carrier_changes", Sign::Flap),
    w(Place::NetdevStats, "rx_crc_errors", Sign::Wire),
    w(Place::NetdevStats, "rx_errors", Sign::Wire),
    w(Place::NetdevStats, "tx_errors", Sign::Wire),
];

/// One counter as read.
#[derive(Debug, Clone)]
pub struct Counter {
    pub watched: Watched,
    pub value: Fact<u64>,
}

/// A port's counters, in [`WATCHED`]'s order; those its driver lacks are not here.
#[derive(Debug, Clone, Default)]
pub struct PortCounters {
    pub counters: Vec<Counter>,
}

impl PortCounters {
    pub fn get(&self, watched: &Watched) -> Option<&Counter> {
        self.counters.iter().find(|c| c.watched == *watched)
    }
}

/// A PCI function's AER statistics (Linux 4.19+, AER-capable functions only).
#[derive(Debug, Clone)]
pub struct Aer {
    pub correctable: Fact<AerTable>,
    pub nonfatal: Fact<AerTable>,
    pub fatal: Fact<AerTable>,
}

impl Aer {
    /// The three tables with their severity's name.
    pub fn tables(&self) -> [(&'static str, &Fact<AerTable>); 3] {
        [
            ("fatal", &self.fatal),
            ("non-fatal", &self.nonfatal),
            ("correctable", &self.correctable),
        ]
    }

    /// The tables whose total grew from `self` (the earlier reading) to `after`: the severity,
    /// both tables, and the later reading's path.
    pub fn grew<'a>(
        &'a self,
        after: &'a Aer,
    ) -> Vec<(&'static str, &'a AerTable, &'a AerTable, &'a str)> {
        self.tables()
            .into_iter()
            .zip(after.tables())
            .filter_map(|((severity, b), (_, a))| {
                let (bv, av) = (b.value()?, a.value()?);
                grew(bv.total, av.total).map(|_| (severity, bv, av, a.path.as_str()))
            })
            .collect()
    }

    /// The function shows no AER statistics (an old kernel, no AER capability).
    pub fn absent(&self) -> bool {
        self.tables().iter().all(|(_, t)| t.is_missing())
    }
}

/// The second reading of a sample window (`check --sample SECONDS`): every port's counters and
/// every path function's AER tables, read again once the window had passed.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Seconds between the inventory's reading and this one (the window asked for, or longer
    /// when the runs between them took longer).
    pub seconds: f64,
    /// The window was cut short by `--deadline` (the growth then covers less than asked).
    pub cut: bool,
    /// By RDMA device and port number.
    pub ports: Vec<(String, u32, PortCounters)>,
    /// By PCI function.
    pub aer: Vec<(crate::parse::pci::Bdf, Aer)>,
    /// The kernel's log read again (its records after the first reading's are the window's).
    pub kernel_log: Option<KernelLog>,
    /// A window's second reading, or the last run's reading (a baseline).
    pub kind: SampleKind,
    /// The RoCE netdevs' pause statistics (the driver statistics kept by
    /// [`crate::model::qos::kept_stat`]) read again, by netdev: what roce-lossless judges
    /// pause storms and stray pauses by.
    pub pause: BTreeMap<String, Vec<(String, u64)>>,
}

/// Where a capture's sample and a baseline keep the pause statistics, below their folder.
pub const RECORDED_PAUSE: &str = "/gdrdoctor/pause.json";

impl Sample {
    /// The growth of `netdev`'s statistic `name` between the two readings (`ours`: the
    /// inventory's answer): `(before, after)` when it grew.
    pub fn pause_growth(
        &self,
        netdev: &str,
        ours: &[(String, u64)],
        name: &str,
    ) -> Option<(u64, u64)> {
        let theirs = self.pause.get(netdev)?;
        let find = |list: &[(String, u64)]| list.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
        let (ours, theirs) = (find(ours)?, find(theirs)?);
        let (before, after) = self.order(&ours, &theirs);
        grew(*before, *after)
    }
}

/// What a [`Sample`] is to the inventory's reading.
#[derive(Debug, Clone, PartialEq)]
pub enum SampleKind {
    /// Read `seconds` after the inventory's reading: the later of the two.
    Window,
    /// Read by the last run (`check --baseline FILE`), `seconds` before this one: the earlier of
    /// the two. `kernel_last_seq`: the last kernel log record that run had read.
    SinceLastRun {
        path: String,
        kernel_last_seq: Option<u64>,
    },
}

impl Sample {
    /// The sample is the earlier reading (a baseline), the inventory the later.
    pub fn is_earlier(&self) -> bool {
        matches!(self.kind, SampleKind::SinceLastRun { .. })
    }

    /// (before, after) of two readings of one thing: `ours` is the inventory's.
    pub fn order<'a, T>(&self, ours: &'a T, theirs: &'a T) -> (&'a T, &'a T) {
        if self.is_earlier() {
            (theirs, ours)
        } else {
            (ours, theirs)
        }
    }

    /// `the 5.0 s window`, `the 10 min since the last run (/var/lib/gdrdoctor/baseline.tar.gz)`.
    pub fn span(&self) -> String {
        match &self.kind {
            SampleKind::Window => format!(
                "the {:.1} s window{}",
                self.seconds,
                if self.cut {
                    " (cut short by --deadline)"
                } else {
                    ""
                }
            ),
            SampleKind::SinceLastRun { path, .. } => {
                let s = self.seconds.max(0.0);
                let span = if s < 120.0 {
                    format!("{s:.0} s")
                } else if s < 7200.0 {
                    format!("{:.0} min", s / 60.0)
                } else {
                    format!("{:.1} h", s / 3600.0)
                };
                format!("the {span} since the last run ({path})")
            }
        }
    }

    pub fn port(&self, dev: &str, num: u32) -> Option<&PortCounters> {
        self.ports
            .iter()
            .find(|(d, n, _)| d == dev && *n == num)
            .map(|(_, _, c)| c)
    }

    pub fn aer(&self, bdf: crate::parse::pci::Bdf) -> Option<&Aer> {
        self.aer.iter().find(|(b, _)| *b == bdf).map(|(_, a)| a)
    }
}

/// A counter that grew between two readings.
#[derive(Debug, Clone)]
pub struct Growth {
    pub watched: Watched,
    pub was: u64,
    pub now: u64,
    /// The second reading's file.
    pub path: String,
}

impl Growth {
    pub fn by(&self) -> u64 {
        self.now - self.was
    }
}

/// How two readings of one counter compare, the one rule every counter gdrdoctor judges goes by
/// (port counters, AER totals, the RoCE netdevs' pause statistics): `(was, now)` when it grew. A
/// counter that went back was reset (a driver reload, `perfquery -R`): no growth, never a
/// negative one.
pub fn grew(was: u64, now: u64) -> Option<(u64, u64)> {
    (now > was).then_some((was, now))
}

/// The counters of `before` that grew by `after`, in [`WATCHED`]'s order. A counter that went
/// back was reset (a driver reload, `perfquery -R`): no growth.
pub fn growth(before: &PortCounters, after: &PortCounters) -> Vec<Growth> {
    before
        .counters
        .iter()
        .filter_map(|b| {
            let a = after.get(&b.watched)?;
            let (was, now) = grew(*b.value.value()?, *a.value.value()?)?;
            Some(Growth {
                watched: b.watched,
                was,
                now,
                path: a.value.path.clone(),
            })
        })
        .collect()
}

/// `link_downed +2, carrier_changes +4`.
pub fn growth_text(grew: &[Growth]) -> String {
    grew.iter()
        .map(|g| format!("{} +{}", g.watched.name, g.by()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kernel's log as gdrdoctor read it: the records it judges (events on the GPU-NIC paths,
/// see [`crate::parse::kmsg`]), or why it could not be read.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelLog {
    /// Read from `path` (`/dev/kmsg`, or a capture's copy): `total` records since boot (or as
    /// many as the ring still holds), the last one's sequence number, the kept records.
    Read {
        path: String,
        total: usize,
        last_seq: Option<u64>,
        records: Vec<crate::parse::kmsg::Record>,
    },
    /// `path` could not be read; `needs_root` when only root (CAP_SYSLOG) may read it.
    Unreadable {
        path: String,
        reason: String,
        needs_root: bool,
    },
    /// A captured root without the log (captured by a gdrdoctor before the kernel-log check).
    NotCaptured { path: String },
}

impl KernelLog {
    pub fn path(&self) -> &str {
        match self {
            KernelLog::Read { path, .. }
            | KernelLog::Unreadable { path, .. }
            | KernelLog::NotCaptured { path } => path,
        }
    }

    /// The events among the records read (none when unread).
    pub fn events(&self) -> Vec<crate::parse::kmsg::Event> {
        match self {
            KernelLog::Read { records, .. } => crate::parse::kmsg::events(records),
            _ => Vec::new(),
        }
    }

    /// What a capture writes of it; `None` for a log a capture did not have.
    pub fn file(&self) -> Option<crate::parse::kmsg::LogFile> {
        use crate::parse::kmsg::LogFile;
        match self {
            KernelLog::Read {
                total,
                last_seq,
                records,
                ..
            } => Some(LogFile::Read {
                total: *total,
                last_seq: *last_seq,
                records: records.clone(),
            }),
            KernelLog::Unreadable {
                reason, needs_root, ..
            } => Some(LogFile::Unreadable {
                reason: reason.clone(),
                needs_root: *needs_root,
            }),
            KernelLog::NotCaptured { .. } => None,
        }
    }
}
