//! `gdr-test` (live only): RDMA WRITEs between GPU memory and host memory through each GPU's
//! nearest NIC, every byte verified, bandwidth measured (src/gdr); on an AWS EFA device, which
//! offers no RC queue pair, over SRD with RDMA WRITE or READ. The check judges the outcomes the
//! write test left in the runs (crate::model::Runs).

use super::Rule;
use super::{Check, Context, Meta};
use crate::gdr::{Failure, FailureKind, PairResult};
use crate::model::Action;

use crate::model::gdr::{Expected, GdrOutcome as Outcome, GdrTest, LIBEFA, Transport};
use crate::model::{Code, Evidence, Finding, Fix, Status};

pub struct GdrTestCheck;

const PASS: Code = Code {
    id: "gdr-test-pass",
    summary: "RDMA WRITEs both ways between the buffer and the NIC, every byte verified, at the expected rate",
};

const SLOW: Code = Code {
    id: "gdr-test-slow",
    summary: "the data arrived intact, but slower than the configured fraction of the expected rate",
};

const REGISTER_FAILED: Code = Code {
    id: "gdr-test-register-failed",
    summary: "the buffer could not be registered with the NIC on any path (DMA-BUF, peer memory)",
};

const NO_REG_DMABUF: Code = Code {
    id: "gdr-test-no-reg-dmabuf",
    summary: "libibverbs lacks ibv_reg_dmabuf_mr (rdma-core older than 34): no DMA-BUF path",
};

const COMPLETION_ERROR: Code = Code {
    id: "gdr-test-completion-error",
    summary: "a WRITE completed with an error status",
};

const DATA_MISMATCH: Code = Code {
    id: "gdr-test-data-mismatch",
    summary: "the bytes that arrived differ from the bytes written",
};

const CUT_SHORT: Code = Code {
    id: "gdr-test-cut-short",
    summary: "--deadline ended the run before the pair's test could finish (or start): unknown",
};

const TIMEOUT: Code = Code {
    id: "gdr-test-timeout",
    summary: "the test did not finish before its deadline",
};

const PORT_DOWN: Code = Code {
    id: "gdr-test-port-down",
    summary: "the NIC port to test through is not ACTIVE",
};

const NO_LIBIBVERBS: Code = Code {
    id: "gdr-test-no-libibverbs",
    summary: "libibverbs.so.1 cannot be loaded",
};

const LIBIBVERBS_TOO_OLD: Code = Code {
    id: "gdr-test-libibverbs-too-old",
    summary: "libibverbs lacks a call the test needs",
};

const NO_UVERBS: Code = Code {
    id: "gdr-test-no-uverbs",
    summary: "libibverbs finds no verbs devices at all (ib_uverbs not loaded)",
};

const NO_PROVIDER: Code = Code {
    id: "gdr-test-no-provider",
    summary: "libibverbs has no provider for the NIC's driver",
};

const NO_ACCESS: Code = Code {
    id: "gdr-test-no-access",
    summary: "the NIC's /dev/infiniband/uverbs* cannot be opened by this process",
};

const SETUP_FAILED: Code = Code {
    id: "gdr-test-setup-failed",
    summary: "opening the device, a PD, CQ or QP, or connecting the QP failed",
};

const NO_LIBEFA: Code = Code {
    id: "gdr-test-no-libefa",
    summary: "an EFA device (no RC queue pair), and libefa.so.1 cannot be loaded or lacks a call: no SRD queue pair to test with",
};

const EFA_NO_RDMA: Code = Code {
    id: "gdr-test-efa-no-rdma",
    summary: "the EFA device offers neither RDMA write nor read: the test cannot run over SRD",
};

const NO_RC: Code = Code {
    id: "gdr-test-no-rc",
    summary: "the device offers no RC queue pair and libefa says it is not EFA: no transport the test knows",
};

const MEMORY: Code = Code {
    id: "gdr-test-memory",
    summary: "the buffer under test could not be allocated or exported (GPU runtime)",
};

const ERROR: Code = Code {
    id: "gdr-test-error",
    summary: "the test process crashed or answered garbage",
};

const NO_RDMA_DEVICE: Code = Code {
    id: "gdr-test-no-rdma-device",
    summary: "no RDMA device on this node: no pair to test (see rdma-link)",
};

const NO_GPU: Code = Code {
    id: "gdr-test-no-gpu",
    summary: "no GPU on this node: no pair to test (see gpu-driver)",
};

const NOT_RUN: Code = Code {
    id: "gdr-test-not-run",
    summary: "a GPU with no way to test it (no memory API for its vendor)",
};

const SKIPPED: Code = Code {
    id: "gdr-test-skipped",
    summary: "the test was not run (--no-gdr-test, or no GPU and no NIC)",
};

const CODES: &[Code] = &[
    PASS,
    SLOW,
    REGISTER_FAILED,
    NO_REG_DMABUF,
    COMPLETION_ERROR,
    DATA_MISMATCH,
    CUT_SHORT,
    TIMEOUT,
    PORT_DOWN,
    NO_LIBIBVERBS,
    LIBIBVERBS_TOO_OLD,
    NO_UVERBS,
    NO_PROVIDER,
    NO_ACCESS,
    SETUP_FAILED,
    NO_LIBEFA,
    EFA_NO_RDMA,
    NO_RC,
    MEMORY,
    ERROR,
    NO_RDMA_DEVICE,
    NO_GPU,
    NOT_RUN,
    SKIPPED,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(PASS, Action::None),
    Rule::new(SLOW, Action::None),
    Rule::new(REGISTER_FAILED, Action::FixInPlace),
    Rule::new(NO_REG_DMABUF, Action::FixInPlace),
    Rule::new(COMPLETION_ERROR, Action::ResetGpu),
    Rule::new(DATA_MISMATCH, Action::ResetGpu),
    Rule::new(CUT_SHORT, Action::None),
    Rule::new(TIMEOUT, Action::ResetGpu),
    Rule::new(PORT_DOWN, Action::ReplacePart),
    Rule::new(NO_LIBIBVERBS, Action::FixInPlace),
    Rule::new(LIBIBVERBS_TOO_OLD, Action::FixInPlace),
    Rule::new(NO_UVERBS, Action::FixInPlace),
    Rule::new(NO_PROVIDER, Action::FixInPlace),
    Rule::new(NO_ACCESS, Action::FixInPlace),
    Rule::new(SETUP_FAILED, Action::FixInPlace),
    Rule::new(NO_LIBEFA, Action::None),
    Rule::new(EFA_NO_RDMA, Action::None),
    Rule::new(NO_RC, Action::None),
    Rule::new(MEMORY, Action::ResetGpu),
    Rule::new(ERROR, Action::None),
    Rule::new(NO_RDMA_DEVICE, Action::None),
    Rule::new(NO_GPU, Action::None),
    Rule::new(NOT_RUN, Action::None),
    Rule::new(SKIPPED, Action::None),
];

const META: Meta = Meta {
    id: "gdr-test",
    title: "GPUDirect RDMA WRITEs per GPU-NIC pair, verified",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/gdr-test/README.md"),
    live_only: true,
    reads: &[],
};

impl Check for GdrTestCheck {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let fraction = cx.config.thresholds.gdr_min_bw_fraction;
        match &cx.runs.gdr_test {
            GdrTest::Skipped(reason) => vec![
                Finding::skip(SKIPPED, "node", format!("not run: {reason}"))
                    .evidence("gdrdoctor gdr-pair", format!("<not run: {reason}>")),
            ],
            GdrTest::Ran {
                outcomes,
                not_planned,
            } => {
                let mut out: Vec<Finding> =
                    outcomes.iter().flat_map(|o| judge(o, fraction)).collect();
                for n in not_planned {
                    out.push(
                        Finding::skip(NOT_RUN, n.subject.clone(), n.reason.clone())
                            .evidence("gdrdoctor gdr-pair", "<not run>"),
                    );
                }
                if out.is_empty() {
                    // Nothing was testable: say which side is missing, and let the check that
                    // judges it decide the verdict.
                    let (no_gpu, no_nic) = (cx.inv.gpus.is_empty(), cx.inv.rdma.is_empty());
                    let (code, message, prerequisites): (_, _, &[&'static str]) = match (
                        no_gpu, no_nic,
                    ) {
                        (true, true) => (
                            NO_GPU,
                            "no GPU and no RDMA device on this node: no pair to test (see gpu-driver, rdma-link)",
                            &["gpu-driver", "rdma-link"],
                        ),
                        (true, false) => (
                            NO_GPU,
                            "no GPU to test (see gpu-driver; `gdrdoctor gdr-test --memory host` tests the NICs alone)",
                            &["gpu-driver"],
                        ),
                        _ => (
                            NO_RDMA_DEVICE,
                            "no RDMA device on this node: no pair to test, nothing to write through (see rdma-link)",
                            &["rdma-link"],
                        ),
                    };
                    out.push(
                        Finding::skip(code, "node", message)
                            .evidence(
                                crate::inventory::pci::PCI_DEVICES,
                                format!(
                                    "{} GPUs, {} RDMA devices",
                                    cx.inv.gpus.len(),
                                    cx.inv.rdma.len()
                                ),
                            )
                            .prerequisites(prerequisites),
                    );
                }
                out
            }
        }
    }
}

fn subject(o: &Outcome) -> String {
    match &o.nic {
        Some(n) => format!("{} <-> {n}", o.subject),
        None => o.subject.clone(),
    }
}

/// What was done and seen, as evidence: the child's steps.
fn evidence(o: &Outcome, r: &PairResult) -> Vec<Evidence> {
    let mut ev: Vec<Evidence> = r
        .memory_steps
        .iter()
        .map(|s| Evidence {
            path: "buffer".into(),
            value: s.clone(),
        })
        .collect();
    if let Some(lib) = &r.verbs_library {
        ev.push(Evidence {
            path: lib.clone(),
            value: "libibverbs".into(),
        });
    }
    if let (Some(p), Some(nic)) = (&r.port, &o.nic) {
        ev.push(Evidence {
            path: nic.clone(),
            value: format!(
                "{} {}, MTU {}{}{}",
                p.link_layer,
                p.state,
                p.active_mtu,
                if p.link_layer == "InfiniBand" {
                    format!(", LID {:#x}", p.lid)
                } else {
                    String::new()
                },
                p.gid
                    .as_ref()
                    .map(|g| format!(", GID {g}"))
                    .unwrap_or_default()
            ),
        });
    }
    if let Some(e) = &r.efa {
        ev.push(Evidence {
            path: e.library.clone(),
            value: format!(
                "libefa: efadv_query_device device_caps {:#x}, max_rdma_size {}, max_sq_wr {}",
                e.device_caps, e.max_rdma_size, e.max_sq_wr
            ),
        });
    }
    if let Some(t) = r.transport {
        ev.push(Evidence {
            path: "transport".into(),
            value: match t {
                Transport::Rc => "RC: one queue pair connected to itself, RDMA WRITE".into(),
                Transport::SrdWrite | Transport::SrdRead => format!(
                    "SRD (EFA, libefa): two queue pairs, one posting to the other, {}",
                    t.operation().trim_start_matches("SRD ")
                ),
            },
        });
    }
    for reg in &r.registrations {
        ev.push(Evidence {
            path: format!("registration ({})", reg.path),
            value: if reg.ok {
                "ok".into()
            } else {
                format!(
                    "{}{}",
                    reg.error.clone().unwrap_or_default(),
                    reg.meaning
                        .as_ref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                )
            },
        });
    }
    ev
}

fn judge(o: &Outcome, fraction: f64) -> Vec<Finding> {
    let subject = subject(o);
    let level = o.level.map(|l| format!(" ({l})")).unwrap_or_default();
    let cut = |why: &str| {
        vec![
            Finding::unknown(CUT_SHORT, subject.clone(), format!("{why}: cut short by --deadline, which bounds the whole run; this says nothing about the pair (run `gdrdoctor gdr-test` with more time)"))
                .evidence("gdrdoctor gdr-pair", format!("<{why}>")),
        ]
    };
    if o.cut_short {
        match &o.result {
            Err(e) => return cut(e),
            Ok(r)
                if r.failure
                    .as_ref()
                    .is_some_and(|f| f.kind == crate::gdr::FailureKind::Timeout) =>
            {
                return cut(&r
                    .failure
                    .as_ref()
                    .map(|f| f.message.clone())
                    .unwrap_or_default());
            }
            Ok(_) => {}
        }
    }
    let r = match &o.result {
        Ok(r) => r,
        Err(e) if e.contains("did not finish") => {
            return vec![Finding::fail(TIMEOUT, subject, format!("{e}: a call never returned (a peer-memory module or provider stuck in the kernel; see dmesg)"))
                .evidence("gdrdoctor gdr-pair", format!("<{e}>"))
                .fix(dmesg_fix())];
        }
        Err(e) => {
            return vec![
                Finding::fail(ERROR, subject, e.clone())
                    .evidence("gdrdoctor gdr-pair", format!("<{e}>"))
                    .fix(dmesg_fix()),
            ];
        }
    };
    let ev = evidence(o, r);
    let dmabuf_symbol_missing = r.registrations.iter().any(|a| {
        a.path == "dmabuf"
            && a.error
                .as_deref()
                .is_some_and(|e| e.contains("ibv_reg_dmabuf_mr"))
            && a.errno.is_none()
            && !a.ok
    });
    match &r.failure {
        None => passed(o, r, &subject, &level, fraction, ev, dmabuf_symbol_missing),
        Some(f) => vec![failed(o, r, f, subject, ev, dmabuf_symbol_missing)],
    }
}

/// A pair whose WRITEs all completed and verified: its bandwidth against the rate expected of
/// it, and a note when the dma-buf path was missing but peer memory worked.
fn passed(
    o: &Outcome,
    r: &PairResult,
    subject: &str,
    level: &str,
    fraction: f64,
    ev: Vec<Evidence>,
    dmabuf_symbol_missing: bool,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let path = r.path.as_deref().unwrap_or("?");
    let bw = r.bandwidth.as_ref();
    let verb = r.transport.map_or("WRITE", Transport::verb);
    let speeds = bw
        .map(|b| {
            format!(
                "{} Gb/s into the buffer, {} Gb/s out ({} {verb}s of {})",
                b.to_target_gbps,
                b.from_target_gbps,
                b.messages,
                crate::parse::bytes(b.message_bytes)
            )
        })
        .unwrap_or_default();
    let verified = r
        .verified_bytes
        .map(crate::parse::bytes)
        .unwrap_or_default();
    // RC, the test's transport everywhere but EFA, goes unsaid, as it always did.
    let over = match r.transport {
        Some(t @ (Transport::SrdWrite | Transport::SrdRead)) => format!(", {}", t.operation()),
        _ => String::new(),
    };
    let base = format!("{path} path{level}{over}: {verified} verified both ways; {speeds}");
    let slowest = bw.map(|b| b.to_target_gbps.min(b.from_target_gbps));
    match (&o.expected, slowest, o.software) {
        (_, _, true) => out.push(Finding::pass(PASS, subject, format!("{base}; bandwidth not judged: a software RDMA device runs at the CPU's pace")).with(ev.clone())),
        (Some(Expected { gbps, limited_by }), Some(got), false) if got < gbps * fraction => out.push(
            Finding::warn(
                SLOW,
                subject,
                format!("{base}; below {:.0}% of the {gbps:.0} Gb/s expected ({limited_by})", fraction * 100.0),
            )
            .with(ev.clone())
            .fix(
                Fix::new(
                    "Find what slows the pair: placement (pcie-placement, acs), link training (pcie-link), IOMMU translation (iommu), or a NIC or GPU throttled; compare with the host-memory baseline",
                    "Read-only commands; the test only moves its own buffers.",
                )
                .manual(format!("gdrdoctor gdr-test --memory host --nic {}", o.nic_device.as_deref().unwrap_or("")))
                .manual("gdrdoctor check --select pcie-placement,acs,pcie-link,iommu -v"),
            ),
        ),
        (Some(Expected { gbps, limited_by }), Some(_), false) => out.push(Finding::pass(PASS, subject, format!("{base}; expected {gbps:.0} Gb/s ({limited_by})")).with(ev.clone())),
        _ => out.push(Finding::pass(PASS, subject, format!("{base}; no expected rate known")).with(ev.clone())),
    }
    if dmabuf_symbol_missing {
        out.push(no_reg_dmabuf(
            subject,
            Status::Warn,
            "the peer-memory path worked instead",
            ev,
        ));
    }
    out
}

/// A pair that failed at a step of the test: the finding for that step, with its fix.
fn failed(
    o: &Outcome,
    r: &PairResult,
    f: &Failure,
    subject: String,
    ev: Vec<Evidence>,
    dmabuf_symbol_missing: bool,
) -> Finding {
    let step = &f.step;
    let message = format!("{step}: {}", f.message);
    match f.kind {
        FailureKind::NoRdmaDevice => Finding::skip(NO_RDMA_DEVICE, subject, format!("{}; the GPU side ran: {}", f.message, r.memory_steps.join("; "))).with(ev),
        FailureKind::Memory if o.memory == crate::gdr::Memory::HostDmabuf => Finding::fail(MEMORY, subject, message).with(ev).fix(
            Fix::new("Give the node a source of host dma-bufs: the udmabuf driver (CONFIG_UDMABUF), or a DRM device that exports dumb buffers", "Loading udmabuf only adds a character device.")
                .modprobe("udmabuf"),
        ),
        FailureKind::Memory => Finding::fail(MEMORY, subject, message).with(ev).fix(
            Fix::new("Fix the GPU runtime first (see the gpu check)", "Read-only commands.").manual("gdrdoctor check --select gpu -v"),
        ),
        FailureKind::VerbsMissing => Finding::fail(NO_LIBIBVERBS, subject, message).with(ev).fix(
            Fix::new("Install rdma-core's libibverbs and the providers", "Installs user-space packages only.")
                .manual("apt-get install libibverbs1 ibverbs-providers   # Debian/Ubuntu")
                .manual("dnf install libibverbs   # RHEL and derivatives"),
        ),
        FailureKind::VerbsSymbolMissing => Finding::fail(LIBIBVERBS_TOO_OLD, subject, message).with(ev).fix(
            Fix::new("Update rdma-core (libibverbs)", "Installs user-space packages only.").manual("apt-get install --only-upgrade libibverbs1 ibverbs-providers"),
        ),
        FailureKind::DeviceList => Finding::fail(NO_UVERBS, subject, message).with(ev).fix(
            Fix::new("Load the verbs user-space interface", "Loading a module does not disturb running traffic.")
                .modprobe("ib_uverbs")
                .load_at_boot("ib_uverbs"),
        ),
        FailureKind::ProviderMissing => Finding::fail(NO_PROVIDER, subject, message).with(ev).fix(
            Fix::new("Install the libibverbs provider for the NIC's driver (rdma-core's ibverbs-providers, or the vendor's)", "Installs user-space packages only.")
                .manual("apt-get install ibverbs-providers; ls /etc/libibverbs.d/"),
        ),
        FailureKind::NoAccess => Finding::fail(NO_ACCESS, subject, message).with(ev).fix(
            Fix::new("Let the process open /dev/infiniband/uverbs* (rdma-core's udev rules make them 0666), or run as root", "Changes device permissions for every user of the node.")
                .manual("ls -l /dev/infiniband/")
                .runtime("chmod 0666 /dev/infiniband/uverbs*"),
        ),
        FailureKind::OpenFailed | FailureKind::QpFailed => Finding::fail(SETUP_FAILED, subject, message).with(ev).fix(dmesg_fix()),
        // An EFA device (or one without RC) the test cannot run on says nothing of the node:
        // unknown, never a failure (issue 38).
        FailureKind::EfaLibrary => Finding::unknown(NO_LIBEFA, subject, message).with(ev).evidence(LIBEFA, "<cannot be loaded or lacks a call>").fix(
            Fix::new("Install rdma-core's libefa, the EFA device's provider and direct verbs (the EFA installer's is in /opt/amazon/efa/lib)", "Installs user-space packages only.")
                .manual("apt-get install ibverbs-providers   # Debian/Ubuntu: libefa.so.1")
                .manual("dnf install libibverbs   # RHEL and derivatives: libefa.so.1")
                .manual("ls -l /opt/amazon/efa/lib/libefa.so.1   # the EFA installer's copy"),
        ),
        FailureKind::EfaNoRdma => Finding::unknown(EFA_NO_RDMA, subject, message).with(ev).fix(
            Fix::new("Nothing on the node gives the device RDMA: see how NCCL reaches it instead (aws-ofi-nccl and libfabric)", "Read-only commands.")
                .manual("gdrdoctor check --select nccl-config,peer-memory -v"),
        ),
        FailureKind::NoRc => Finding::unknown(NO_RC, subject, message).with(ev).fix(
            Fix::new("Find out which driver and provider the device has: the test needs RC, or SRD on an EFA device", "Read-only commands.")
                .manual("rdma dev show; ls -l /sys/class/infiniband/*/device/driver"),
        ),
        FailureKind::PortNotActive => Finding::fail(PORT_DOWN, subject, message).with(ev).fix(
            Fix::new("Bring the port up (see rdma-link: cable, switch port, subnet manager, netdev)", "Read-only commands.").manual("rdma link show; ibstat"),
        ),
        FailureKind::RegisterFailed if dmabuf_symbol_missing && r.registrations.iter().all(|a| !a.ok) => {
            no_reg_dmabuf(&subject, Status::Fail, "and no other path worked", ev)
        }
        FailureKind::RegisterFailed => Finding::fail(REGISTER_FAILED, subject, message).with(ev).fix(register_fix(r)),
        FailureKind::CompletionError => Finding::fail(COMPLETION_ERROR, subject, message).with(ev).fix(dmesg_fix()),
        FailureKind::Timeout => Finding::fail(TIMEOUT, subject, message).with(ev).fix(dmesg_fix()),
        FailureKind::DataMismatch => Finding::fail(DATA_MISMATCH, subject, message).with(ev).fix(
            Fix::new(
                "Do not run GPU jobs over this pair: data is corrupted in flight. Check ACS/IOMMU (acs, iommu), PCIe errors (AER in dmesg), and update the NIC firmware and GPU driver",
                "Read-only commands.",
            )
            .manual("dmesg | grep -i -E 'aer|pcie bus error|xid' | tail -30"),
        ),
    }
}

fn no_reg_dmabuf(subject: &str, status: Status, consequence: &str, ev: Vec<Evidence>) -> Finding {
    Finding::new(
        NO_REG_DMABUF,
        status,
        subject.to_owned(),
        format!("libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34), so GPU memory cannot be registered through DMA-BUF; {consequence}"),
    )
    .with(ev)
    .fix(
        Fix::new("Install rdma-core 34 or later (libibverbs1, ibverbs-providers)", "Installs user-space packages only; running jobs keep the library they loaded.")
            .manual("apt-get install --only-upgrade libibverbs1 ibverbs-providers"),
    )
}

fn dmesg_fix() -> Fix {
    Fix::new(
        "Look at what the kernel says about the NIC and GPU drivers, then rerun the test alone",
        "Read-only commands.",
    )
    .manual("dmesg | tail -50")
    .manual("gdrdoctor gdr-test -v")
}

/// The fix for a registration failure, from what the attempts' errnos mean.
fn register_fix(r: &PairResult) -> Fix {
    let errnos: Vec<(String, i32)> = r
        .registrations
        .iter()
        .filter_map(|a| Some((a.path.clone(), a.errno?)))
        .collect();
    let has = |path: &str, e: i32| errnos.iter().any(|(p, n)| p == path && *n == e);
    if errnos.iter().any(|(_, e)| *e == libc::ENOMEM) {
        return Fix::new(
            "Raise the locked-memory limit for the jobs (and this test): unlimited, as NVIDIA and every cloud recommend",
            "Raising RLIMIT_MEMLOCK lets processes pin more memory; it is the norm on GPU nodes.",
        )
        .manual("ulimit -l")
        .edit(crate::model::edit::Edit::Write {
            file: "/etc/security/limits.d/90-memlock.conf".into(),
            lines: vec!["* soft memlock unlimited".into(), "* hard memlock unlimited".into()],
        });
    }
    if has("peermem", libc::EFAULT) || has("peermem", libc::EINVAL) {
        return Fix::new(
            "Give the RDMA stack a way to reach GPU memory: the DMA-BUF path (open NVIDIA kernel modules, kernel >= 5.12, a NIC driver with dma-buf MRs) or nvidia_peermem on an RDMA stack with the peer-memory API",
            "Loading nvidia-peermem does not disturb running jobs.",
        )
        .modprobe("nvidia-peermem")
        .manual("gdrdoctor check --select peer-memory -v");
    }
    Fix::new("See the errno of each attempt in the evidence; the peer-memory check says which path this node should have", "Read-only commands.")
        .manual("gdrdoctor check --select peer-memory,rdma-access -v")
}
