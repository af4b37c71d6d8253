//! `rdma-access` (live only): can a process on this node actually use RDMA? Device nodes,
//! locked-memory limit, libibverbs and a provider for every device.

use super::Rule;
use super::{Check, Context, Meta};
use crate::model::Action;
use crate::model::access::{Access, CLASS_VERBS, DEV_INFINIBAND, ListError, SONAME};
use crate::model::{Code, Finding, Fix};

pub struct RdmaAccess;

const UVERBS_OK: Code = Code {
    id: "uverbs-ok",
    summary: "every RDMA device has a verbs device node this process can open",
};

const UVERBS_MISSING: Code = Code {
    id: "uverbs-missing",
    summary: "an RDMA device has no /dev/infiniband/uverbs* node",
};

const UVERBS_NO_ACCESS: Code = Code {
    id: "uverbs-no-access",
    summary: "a verbs device node exists but this process cannot open it",
};

const MEMLOCK_OK: Code = Code {
    id: "memlock-ok",
    summary: "RLIMIT_MEMLOCK is unlimited",
};

const MEMLOCK_LIMITED: Code = Code {
    id: "memlock-limited",
    summary: "RLIMIT_MEMLOCK is finite: large registrations may fail",
};

const MEMLOCK_LOW: Code = Code {
    id: "memlock-low",
    summary: "RLIMIT_MEMLOCK is below the threshold: ibv_reg_mr fails with ENOMEM",
};

const MEMLOCK_UNKNOWN: Code = Code {
    id: "memlock-unknown",
    summary: "the locked-memory limit could not be read",
};

const LIBIBVERBS_OK: Code = Code {
    id: "libibverbs-ok",
    summary: "libibverbs loads, with ibv_reg_dmabuf_mr",
};

const LIBIBVERBS_MISSING: Code = Code {
    id: "libibverbs-missing",
    summary: "libibverbs.so.1 cannot be loaded",
};

const LIBIBVERBS_NO_DMABUF: Code = Code {
    id: "libibverbs-no-dmabuf",
    summary: "libibverbs lacks ibv_reg_dmabuf_mr (rdma-core < 34): no DMA-BUF path",
};

const PROVIDER_MISSING: Code = Code {
    id: "rdma-provider-missing",
    summary: "libibverbs has no provider for an RDMA device, so userspace cannot open it",
};

const CODES: &[Code] = &[
    UVERBS_OK,
    UVERBS_MISSING,
    UVERBS_NO_ACCESS,
    MEMLOCK_OK,
    MEMLOCK_LIMITED,
    MEMLOCK_LOW,
    MEMLOCK_UNKNOWN,
    LIBIBVERBS_OK,
    LIBIBVERBS_MISSING,
    LIBIBVERBS_NO_DMABUF,
    PROVIDER_MISSING,
];

/// What a warn, fail or unknown finding of each code asks of the node (docs/actions.md says
/// why; `checks::Rule`).
const ACTIONS: &[Rule] = &[
    Rule::new(UVERBS_OK, Action::None),
    Rule::new(UVERBS_MISSING, Action::FixInPlace),
    Rule::new(UVERBS_NO_ACCESS, Action::FixInPlace),
    Rule::new(MEMLOCK_OK, Action::None),
    Rule::new(MEMLOCK_LIMITED, Action::FixInPlace),
    Rule::new(MEMLOCK_LOW, Action::FixInPlace),
    Rule::new(MEMLOCK_UNKNOWN, Action::None),
    Rule::new(LIBIBVERBS_OK, Action::None),
    Rule::new(LIBIBVERBS_MISSING, Action::FixInPlace),
    Rule::new(LIBIBVERBS_NO_DMABUF, Action::FixInPlace),
    Rule::new(PROVIDER_MISSING, Action::FixInPlace),
];

const META: Meta = Meta {
    id: "rdma-access",
    title: "RDMA usable from a process: device nodes, memlock, libibverbs",
    codes: CODES,
    actions: ACTIONS,
    readme: include_str!("../../checks/rdma-access/README.md"),
    live_only: true,
    reads: &[],
};

impl Check for RdmaAccess {
    fn meta(&self) -> &'static Meta {
        &META
    }

    fn run(&self, cx: &Context) -> Vec<Finding> {
        let Some(access) = &cx.runs.access else {
            // The engine probes access whenever this check runs on a live root; reaching this is a bug.
            return vec![
                Finding::unknown(MEMLOCK_UNKNOWN, "node", "access facts were not probed")
                    .evidence("/proc/self/limits", "<not read>"),
            ];
        };
        let mut out = Vec::new();
        out.extend(uverbs(cx, access));
        out.push(memlock(cx, access));
        out.extend(library(cx, access));
        out
    }
}

fn uverbs(cx: &Context, access: &Access) -> Vec<Finding> {
    let mut out = Vec::new();
    for dev in &cx.inv.rdma {
        let node = access
            .uverbs
            .iter()
            .find(|u| u.ibdev.as_deref() == Some(dev.name.as_str()));
        match node {
            None => out.push(
                Finding::fail(UVERBS_MISSING, dev.name.clone(), format!("{} has no verbs device node: userspace (NCCL, perftest) cannot open it", dev.name))
                    .evidence(CLASS_VERBS, access.uverbs.iter().map(|u| format!("{}->{}", u.name, u.ibdev.as_deref().unwrap_or("?"))).collect::<Vec<_>>().join(" "))
                    .fix(
                        Fix::new("Load ib_uverbs; in a container, pass the device nodes in", "Loading ib_uverbs is harmless.")
                            .modprobe("ib_uverbs")
                            .manual("# containers: --device=/dev/infiniband (docker) or the RDMA device plugin (Kubernetes)"),
                    ),
            ),
            Some(u) => match &u.open {
                Ok(()) => out.push(
                    Finding::pass(UVERBS_OK, dev.name.clone(), format!("{DEV_INFINIBAND}/{} opens read-write", u.name)).evidence(format!("{DEV_INFINIBAND}/{}", u.name), "opened"),
                ),
                Err(e) => out.push(
                    Finding::fail(UVERBS_NO_ACCESS, dev.name.clone(), format!("cannot open {}: {}", e.path(), e.reason()))
                        .evidence(e.path().to_owned(), format!("<{}>", e.reason()))
                        .fix(
                            Fix::new("Let this user open the verbs device (rdma-core's udev rules make it 0666), or pass it into the container", "Widening device permissions lets every local user register memory with the NIC.")
                                .manual(format!("ls -l {DEV_INFINIBAND}/"))
                                .manual("# containers: --device=/dev/infiniband/uverbsN, or the RDMA device plugin"),
                        ),
                ),
            },
        }
    }
    if let Some(e) = &access.uverbs_error {
        out.push(
            Finding::fail(
                UVERBS_MISSING,
                "node",
                format!("cannot list verbs devices: {e}"),
            )
            .evidence(e.path().to_owned(), format!("<{}>", e.reason())),
        );
    }
    out
}

fn memlock(cx: &Context, access: &Access) -> Finding {
    let fact = &access.memlock;
    let Some(limit) = fact.value() else {
        return Finding::unknown(
            MEMLOCK_UNKNOWN,
            "this process",
            format!(
                "cannot read the locked-memory limit: {}",
                fact.problem().unwrap_or_default()
            ),
        )
        .with([fact.evidence()]);
    };
    let min = cx.config.thresholds.memlock_min_mib;
    let fix = Fix::new(
        "Raise the locked-memory limit to unlimited for the jobs (and for this service)",
        "Lets processes pin memory without bound; the scheduler's cgroup memory limits still apply.",
    )
    .edit(crate::model::edit::Edit::Write {
            file: "/etc/security/limits.d/90-rdma-memlock.conf".into(),
            lines: vec!["* soft memlock unlimited".into(), "* hard memlock unlimited".into()],
        })
    .manual("# slurmd: LimitMEMLOCK=infinity in its systemd unit, and PropagateResourceLimitsExcept=MEMLOCK in slurm.conf");
    match limit.soft {
        None => Finding::pass(MEMLOCK_OK, "this process", "RLIMIT_MEMLOCK is unlimited").with([fact.evidence()]),
        Some(bytes) if bytes < min << 20 => Finding::fail(
            MEMLOCK_LOW,
            "this process",
            format!("RLIMIT_MEMLOCK is {} KiB (< {min} MiB): registering RDMA buffers fails with ENOMEM", bytes >> 10),
        )
        .with([fact.evidence()])
        .fix(fix),
        Some(bytes) => Finding::warn(MEMLOCK_LIMITED, "this process", format!("RLIMIT_MEMLOCK is {} MiB: NVIDIA and the clouds recommend unlimited for RDMA", bytes >> 20)).with([fact.evidence()]).fix(fix),
    }
}

fn library(cx: &Context, access: &Access) -> Vec<Finding> {
    let probe = &access.verbs;
    let lib_evidence = |v: String| crate::model::Evidence {
        path: format!("dlopen({SONAME})"),
        value: v,
    };
    if let Err(e) = &probe.library {
        return vec![
            Finding::fail(LIBIBVERBS_MISSING, "this process", format!("{SONAME} cannot be loaded ({e}): no RDMA from userspace, and NCCL falls back to TCP sockets"))
                .with([lib_evidence(e.clone())])
                .fix(
                    Fix::new("Install rdma-core's libibverbs and providers", "Installing packages changes nothing that runs.")
                        .persistent("if command -v apt-get >/dev/null; then apt-get install -y libibverbs1 ibverbs-providers; else dnf install -y libibverbs rdma-core; fi"),
                ),
        ];
    }
    let mut out = Vec::new();
    let version = access
        .rdma_core
        .as_ref()
        .map(|(v, file)| format!("rdma-core {v} ({file})"))
        .unwrap_or_else(|| SONAME.to_owned());
    if probe.reg_dmabuf_mr {
        out.push(
            Finding::pass(
                LIBIBVERBS_OK,
                "this process",
                format!("{version} loads and exports ibv_reg_dmabuf_mr"),
            )
            .with([lib_evidence("loaded; ibv_reg_dmabuf_mr present".into())]),
        );
    } else {
        out.push(
            Finding::warn(LIBIBVERBS_NO_DMABUF, "this process", format!("{version} has no ibv_reg_dmabuf_mr (added in rdma-core 34): the DMA-BUF path cannot be used from userspace"))
                .with([lib_evidence("loaded; ibv_reg_dmabuf_mr absent".into())])
                .fix(Fix::new("Upgrade rdma-core to 34 or later", "A package upgrade; restart RDMA users afterwards.").persistent("if command -v apt-get >/dev/null; then apt-get install -y --only-upgrade libibverbs1 ibverbs-providers; else dnf upgrade -y libibverbs rdma-core; fi")),
        );
    }
    match &probe.devices {
        Some(Ok(names)) => {
            for dev in cx.inv.rdma.iter().filter(|d| !names.contains(&d.name)) {
                out.push(
                    Finding::fail(
                        PROVIDER_MISSING,
                        dev.name.clone(),
                        format!("libibverbs lists no {} (it lists: {}): no provider for its driver ({}) is installed", dev.name, if names.is_empty() { "nothing".into() } else { names.join(", ") }, dev.driver.as_deref().unwrap_or("unknown")),
                    )
                    .with([lib_evidence(format!("ibv_get_device_list: {}", names.join(" ")))])
                    .fix(Fix::new("Install the rdma-core providers", "Installing packages changes nothing that runs.").persistent("if command -v apt-get >/dev/null; then apt-get install -y ibverbs-providers; else dnf install -y libibverbs; fi")),
                );
            }
        }
        // No verbs subsystem: every device already has its uverbs-missing finding above.
        Some(Err(ListError::NoVerbsSubsystem)) => {}
        Some(Err(ListError::Other(e))) => out.push(
            Finding::fail(PROVIDER_MISSING, "this process", e.clone())
            .with([lib_evidence(e.clone())])
            .fix(
                Fix::new("Find out why libibverbs cannot list devices (its providers print why on stderr)", "Read-only commands.")
                    .manual("ibv_devices; ls /etc/libibverbs.d/ /usr/lib/*/libibverbs/"),
            ),
        ),
        None => {}
    }
    out
}

#[cfg(test)]
mod tests {
    //! The live-only facts cannot come from a capture, so these tests load a fixture's
    //! inventory and put the access facts in by hand: every branch of the judgement, without an
    //! RDMA NIC on the test machine.
    use super::*;
    use crate::config::Config;
    use crate::inventory::{Fact, Inventory};
    use crate::model::Runs;
    use crate::model::Status;
    use crate::model::access::{UverbsNode, Verbs as Probe};
    use crate::parse::kernel::Limit;
    use crate::root::{ReadError, Root};

    fn run(access: Access) -> Vec<Finding> {
        let dir = crate::test_fixtures::fixture_path("healthy-4gpu-ib-peermem");
        let root = Root::captured(&dir).unwrap();
        let config = Config::default();
        let inv = Inventory::load(&root, &config);
        let mut runs = Runs::none(false);
        runs.access = Some(access);
        RdmaAccess.run(&Context {
            inv: &inv,
            runs: &runs,
            config: &config,
            earlier: &[],
        })
    }

    fn access(uverbs: Vec<UverbsNode>, memlock: Option<u64>, verbs: Probe) -> Access {
        let raw = format!(
            "Max locked memory {} {} bytes",
            memlock.map_or("unlimited".into(), |b| b.to_string()),
            memlock.map_or("unlimited".into(), |b| b.to_string())
        );
        Access {
            uverbs,
            uverbs_error: None,
            rdma_cm: true,
            memlock: Fact {
                path: "/proc/self/limits".into(),
                raw: Ok(raw),
                value: Some(Limit {
                    soft: memlock,
                    hard: memlock,
                }),
            },
            verbs,
            rdma_core: Some((
                50,
                "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.50.0".into(),
            )),
        }
    }

    fn node(i: usize, open: Result<(), ReadError>) -> UverbsNode {
        UverbsNode {
            name: format!("uverbs{i}"),
            ibdev: Some(format!("mlx5_{i}")),
            open,
        }
    }

    fn verbs(devices: &[&str]) -> Probe {
        Probe {
            library: Ok(()),
            reg_dmabuf_mr: true,
            devices: Some(Ok(devices.iter().map(|d| d.to_string()).collect())),
        }
    }

    fn codes(f: &[Finding]) -> Vec<(&str, Status)> {
        f.iter().map(|f| (f.code, f.status)).collect()
    }

    const ALL: [&str; 4] = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"];

    #[test]
    fn all_good() {
        let f = run(access(
            (0..4).map(|i| node(i, Ok(()))).collect(),
            None,
            verbs(&ALL),
        ));
        assert!(
            f.iter().all(|f| f.status == Status::Pass),
            "{:?}",
            codes(&f)
        );
        assert_eq!(f.iter().filter(|f| f.code == "uverbs-ok").count(), 4);
        assert!(
            f.iter()
                .any(|f| f.code == "libibverbs-ok" && f.message.contains("rdma-core 50"))
        );
    }

    #[test]
    fn device_nodes_missing_or_closed() {
        let denied = Err(ReadError::PermissionDenied {
            path: "/dev/infiniband/uverbs1".into(),
        });
        let f = run(access(
            vec![node(0, Ok(())), node(1, denied)],
            None,
            verbs(&ALL),
        ));
        let c = codes(&f);
        assert!(c.contains(&("uverbs-no-access", Status::Fail)), "{c:?}");
        assert_eq!(
            c.iter()
                .filter(|(code, _)| *code == "uverbs-missing")
                .count(),
            2,
            "mlx5_2 and mlx5_3 have no node"
        );
        assert!(
            f.iter()
                .all(|f| f.status <= Status::Pass || f.fix.is_some())
        );
    }

    #[test]
    fn memlock_thresholds() {
        let nodes = || (0..4).map(|i| node(i, Ok(()))).collect();
        let low = run(access(nodes(), Some(64 << 10), verbs(&ALL)));
        assert!(codes(&low).contains(&("memlock-low", Status::Fail)));
        let finite = run(access(nodes(), Some(8 << 30), verbs(&ALL)));
        assert!(codes(&finite).contains(&("memlock-limited", Status::Warn)));
        let f = finite.iter().find(|f| f.code == "memlock-limited").unwrap();
        assert_eq!(
            f.evidence[0].value,
            "Max locked memory 8589934592 8589934592 bytes"
        );
    }

    #[test]
    fn library_missing_old_or_without_providers() {
        let nodes = || (0..4).map(|i| node(i, Ok(()))).collect();
        let missing = Probe {
            library: Err("libibverbs.so.1: cannot open shared object file".into()),
            reg_dmabuf_mr: false,
            devices: None,
        };
        assert!(
            codes(&run(access(nodes(), None, missing)))
                .contains(&("libibverbs-missing", Status::Fail))
        );
        let old = Probe {
            reg_dmabuf_mr: false,
            ..verbs(&ALL)
        };
        assert!(
            codes(&run(access(nodes(), None, old)))
                .contains(&("libibverbs-no-dmabuf", Status::Warn))
        );
        let f = run(access(nodes(), None, verbs(&["mlx5_0", "mlx5_1"])));
        let missing: Vec<&str> = f
            .iter()
            .filter(|f| f.code == "rdma-provider-missing")
            .map(|f| f.subject.as_str())
            .collect();
        assert_eq!(missing, ["mlx5_2", "mlx5_3"]);
        let failed = Probe {
            devices: Some(Err(ListError::Other(
                "ibv_get_device_list failed: EPERM".into(),
            ))),
            ..verbs(&[])
        };
        let f = run(access(nodes(), None, failed));
        assert!(
            f.iter()
                .any(|f| f.code == "rdma-provider-missing" && f.fix.is_some())
        );
        // ib_uverbs not loaded: no device nodes, and libibverbs says ENOSYS. One finding per
        // device, no second one from the library.
        let none = Probe {
            devices: Some(Err(ListError::NoVerbsSubsystem)),
            ..verbs(&[])
        };
        let f = run(access(Vec::new(), None, none));
        assert_eq!(f.iter().filter(|f| f.code == "uverbs-missing").count(), 4);
        assert!(!f.iter().any(|f| f.code == "rdma-provider-missing"));
        let f = run(access(
            nodes(),
            None,
            Probe {
                devices: Some(Err(ListError::Other("x".into()))),
                ..verbs(&[])
            },
        ));
        assert!(
            f.iter()
                .any(|f| f.code == "rdma-provider-missing" && f.fix.is_some())
        );
    }
}
