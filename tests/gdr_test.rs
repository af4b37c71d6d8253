//! The GDR write test's fault paths on a machine without an RDMA NIC: the real engine, in its
//! real child process, over a stand-in libibverbs (tests/stubs/ibverbs.c, built against the
//! real verbs.h) whose WRITEs are memcpy and whose faults are switched on by FAKE_IBV_*; GPU
//! memory from the CUDA stand-in. The real thing runs in the lab (rxe, tests/lab/scenarios/gdr-*)
//! and on the GPU machine (tests/gpu-machine/gdr-test.sh).
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use gdrdoctor::deadline::Deadline;
use gdrdoctor::gdr::{FailureKind, Memory, NicSpec, PairResult, PairSpec};
use gdrdoctor::model::gdr::GdrOutcome as Outcome;
use gdrdoctor::probe::gdr_test::Planned;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub(crate) fn spec(memory: Memory) -> PairSpec {
    PairSpec {
        gpu: memory.is_gpu().then(|| "0000:00:06.0".to_owned()),
        nic: Some(NicSpec {
            device: "fake0".into(),
            port: 1,
            gid_index: None,
        }),
        memory,
        size: 1 << 16,
        iters: 64,
        duration_ms: 50,
        deadline_ms: 2000,
        nic_driver: None,
    }
}

/// Runs one pair in the real child, with the stand-in libraries and `env`.
pub(crate) fn pair(spec: &PairSpec, verbs: Option<PathBuf>, env: &[(&str, &str)]) -> PairResult {
    let out = Gdrdoctor::new()
        .args(["gdr-pair", "--spec", &serde_json::to_string(spec).unwrap()])
        .lib("IBVERBS", verbs.unwrap_or_else(|| stub("ibverbs", &[])))
        .lib("CUDA", stub("cuda", &[]))
        .envs(env.iter().copied())
        .output();
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)))
}

pub(crate) fn failure(r: &PairResult) -> (FailureKind, String) {
    let f = r
        .failure
        .as_ref()
        .unwrap_or_else(|| panic!("no failure: {r:?}"));
    (f.kind, format!("{}: {}", f.step, f.message))
}

#[test]
fn host_memory_passes_with_data_verified() {
    let r = pair(&spec(Memory::Host), None, &[]);
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!(r.path.as_deref(), Some("host"));
    assert_eq!(r.verified_bytes, Some(1 << 16));
    let b = r.bandwidth.unwrap();
    assert!(b.to_target_gbps > 0.0 && b.from_target_gbps > 0.0);
    assert_eq!(b.messages, 128, "64 each way");
    let port = r.port.unwrap();
    assert_eq!(
        (
            port.state.as_str(),
            port.link_layer.as_str(),
            port.active_mtu,
            port.lid
        ),
        ("ACTIVE", "InfiniBand", 4096, 1)
    );
}

#[test]
fn gpu_memory_falls_back_from_dmabuf_to_peermem_and_says_why() {
    let r = pair(&spec(Memory::Cuda), None, &[]);
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!(r.path.as_deref(), Some("peermem"));
    let dmabuf = &r.registrations[0];
    assert_eq!(
        (dmabuf.path.as_str(), dmabuf.ok, dmabuf.errno),
        ("dmabuf", false, Some(95))
    );
    assert!(
        dmabuf.error.as_deref().unwrap().contains("EOPNOTSUPP"),
        "{dmabuf:?}"
    );
    assert!(
        dmabuf
            .meaning
            .as_deref()
            .unwrap()
            .contains("does not register dma-bufs")
    );
    assert!(
        r.memory_steps.iter().any(|s| s.contains("SYNC_MEMOPS set")),
        "{:?}",
        r.memory_steps
    );
    assert!(
        r.memory_steps
            .iter()
            .any(|s| s.contains("dma-buf exported")),
        "{:?}",
        r.memory_steps
    );
    // A NIC driver that takes dma-bufs: the DMA-BUF path is used.
    let r = pair(&spec(Memory::Cuda), None, &[("FAKE_IBV_DMABUF_ERRNO", "0")]);
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!(r.path.as_deref(), Some("dmabuf"));
}

#[test]
fn registration_failures_are_explained() {
    // No peer-memory client: the dma-buf refused, then EFAULT on the GPU pointer.
    let r = pair(&spec(Memory::Cuda), None, &[("FAKE_IBV_REG_ERRNO", "14")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::RegisterFailed);
    assert!(
        msg.contains("peermem: ibv_reg_mr: Bad address (EFAULT, errno 14)"),
        "{msg}"
    );
    assert!(msg.contains("no peer-memory client"), "{msg}");
    // ENOMEM on host memory: the memlock limit.
    let r = pair(&spec(Memory::Host), None, &[("FAKE_IBV_HOST_ERRNO", "12")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::RegisterFailed);
    assert!(msg.contains("RLIMIT_MEMLOCK"), "{msg}");
    // rdma-core < 34: no ibv_reg_dmabuf_mr; the attempt says so without an errno.
    let old = stub("ibverbs", &["ibv_reg_dmabuf_mr"]);
    let r = pair(&spec(Memory::Cuda), Some(old), &[]);
    assert_eq!(r.path.as_deref(), Some("peermem"));
    assert!(
        r.registrations[0]
            .error
            .as_deref()
            .unwrap()
            .contains("rdma-core older than 34")
    );
}

#[test]
fn completion_errors_and_corruption_are_caught() {
    let r = pair(&spec(Memory::Host), None, &[("FAKE_IBV_WC_STATUS", "12")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::CompletionError);
    assert!(msg.contains("IBV_WC_RETRY_EXC_ERR"), "{msg}");
    // One flipped byte in the first WRITE (host -> GPU) is found and located.
    let r = pair(&spec(Memory::Cuda), None, &[("FAKE_IBV_CORRUPT", "1")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::DataMismatch);
    assert!(msg.contains("RDMA WRITE host -> GPU"), "{msg}");
    assert!(
        msg.contains("1 of 65536 bytes differ, the first at offset 32768"),
        "{msg}"
    );
}

#[test]
fn a_write_that_never_completes_times_out() {
    let mut s = spec(Memory::Host);
    s.deadline_ms = 300;
    let start = Instant::now();
    let r = pair(&s, None, &[("FAKE_IBV_DROP", "1")]);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::Timeout);
    assert!(msg.contains("no completion before the deadline"), "{msg}");
}

#[test]
fn device_and_library_problems() {
    let r = pair(&spec(Memory::Host), None, &[("FAKE_IBV_PORT_STATE", "1")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::PortNotActive);
    assert!(msg.contains("fake0 port 1 is DOWN"), "{msg}");
    let r = pair(&spec(Memory::Host), None, &[("FAKE_IBV_OPEN_ERRNO", "13")]);
    assert_eq!(failure(&r).0, FailureKind::NoAccess);
    assert!(failure(&r).1.contains("EACCES"));
    let r = pair(&spec(Memory::Host), None, &[("FAKE_IBV_NO_DEVICES", "1")]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::ProviderMissing);
    assert!(msg.contains("lists no fake0"), "{msg}");
    let r = pair(
        &spec(Memory::Host),
        Some("/nonexistent/libibverbs.so.1".into()),
        &[],
    );
    assert_eq!(failure(&r).0, FailureKind::VerbsMissing);
    let r = pair(
        &spec(Memory::Host),
        Some(stub("ibverbs", &["ibv_create_qp"])),
        &[],
    );
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::VerbsSymbolMissing);
    assert!(msg.contains("ibv_create_qp"), "{msg}");
}

#[test]
fn gpu_side_runs_without_a_nic() {
    // What the GPU machine shows: no RDMA device, yet the CUDA side ran.
    let mut s = spec(Memory::Cuda);
    s.nic = None;
    let r = pair(&s, None, &[]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::NoRdmaDevice);
    assert!(msg.contains("no RDMA device on this node"), "{msg}");
    assert!(
        r.memory_steps
            .iter()
            .any(|s| s.starts_with("cuMemAlloc 64 KiB")),
        "{:?}",
        r.memory_steps
    );
    // Missing CUDA is a memory failure, not a crash.
    let out = Gdrdoctor::new()
        .args(["gdr-pair", "--spec", &serde_json::to_string(&s).unwrap()])
        .lib("CUDA", "/nonexistent/libcuda.so.1")
        .output();
    let r: PairResult = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(failure(&r).0, FailureKind::Memory);
}

// -- the check's verdicts and fixes, from outcomes -------------------------------------------

pub(crate) fn judged(outcomes: Vec<Outcome>) -> Vec<gdrdoctor::model::Finding> {
    let root = gdrdoctor::root::Root::open(&fixture_path("h200x2-vm")).unwrap();
    let config = gdrdoctor::config::Config::default();
    let (mut inv, mut runs) = gdrdoctor::probe::load(&root, &config, Default::default());
    inv.live = true; // the check is live-only; these outcomes stand for a live run
    runs.gdr_test = gdrdoctor::model::gdr::GdrTest::Ran {
        outcomes,
        not_planned: vec![],
    };
    let sel = gdrdoctor::checks::Selection {
        select: vec!["gdr-test".into()],
        skip: vec![],
    };
    let results = gdrdoctor::checks::run(&inv, &runs, &config, &sel);
    results
        .into_iter()
        .find(|c| c.id == "gdr-test")
        .unwrap()
        .findings
}

pub(crate) fn outcome(
    s: PairSpec,
    result: Result<PairResult, String>,
    expected: Option<f64>,
) -> Outcome {
    Outcome {
        gpu: None,
        subject: "GPU 0000:00:06.0".into(),
        nic: Some("fake0 port 1".into()),
        nic_device: s.nic.as_ref().map(|n| n.device.clone()),
        memory: s.memory,
        level: Some(gdrdoctor::placement::Level::Pix),
        expected: expected.map(|gbps| gdrdoctor::model::gdr::Expected {
            gbps,
            limited_by: "fake0 port rate".into(),
        }),
        software: false,
        result,
        cut_short: false,
    }
}

#[test]
fn the_check_judges_what_the_child_saw() {
    let s = spec(Memory::Cuda);
    let ok = pair(&s, None, &[]);
    let f = judged(vec![outcome(s.clone(), Ok(ok.clone()), Some(1e6))]);
    assert_eq!(f[0].code, "gdr-test-slow", "{f:?}");
    assert!(
        f[0].message
            .contains("below 60% of the 1000000 Gb/s expected"),
        "{}",
        f[0].message
    );
    let f = judged(vec![outcome(s.clone(), Ok(ok), Some(0.001))]);
    assert_eq!(
        (f[0].code, f[0].status),
        ("gdr-test-pass", gdrdoctor::model::Status::Pass)
    );
    assert!(
        f[0].message
            .starts_with("peermem path (PIX): 64 KiB verified both ways"),
        "{}",
        f[0].message
    );

    let efault = pair(&s, None, &[("FAKE_IBV_REG_ERRNO", "14")]);
    let f = judged(vec![outcome(s.clone(), Ok(efault), None)]);
    assert_eq!(f[0].code, "gdr-test-register-failed");
    let fix = serde_json::to_string(&f[0].fix).unwrap();
    assert!(fix.contains("modprobe nvidia-peermem"), "{fix}");

    let enomem = pair(&spec(Memory::Host), None, &[("FAKE_IBV_HOST_ERRNO", "12")]);
    let f = judged(vec![outcome(spec(Memory::Host), Ok(enomem), None)]);
    assert!(
        serde_json::to_string(&f[0].fix)
            .unwrap()
            .contains("memlock unlimited")
    );

    // rdma-core < 34 and no peer memory: the distinct finding, failing.
    let old = stub("ibverbs", &["ibv_reg_dmabuf_mr"]);
    let r = pair(&s, Some(old.clone()), &[("FAKE_IBV_REG_ERRNO", "14")]);
    let f = judged(vec![outcome(s.clone(), Ok(r), None)]);
    assert_eq!(
        (f[0].code, f[0].status),
        ("gdr-test-no-reg-dmabuf", gdrdoctor::model::Status::Fail)
    );
    // ... with peer memory working: a pass, and the same finding as a warning.
    let r = pair(&s, Some(old), &[]);
    let f = judged(vec![outcome(s.clone(), Ok(r), None)]);
    let codes: Vec<_> = f.iter().map(|x| (x.code, x.status)).collect();
    assert!(
        codes.contains(&("gdr-test-no-reg-dmabuf", gdrdoctor::model::Status::Warn)),
        "{codes:?}"
    );

    let r = pair(&s, None, &[("FAKE_IBV_CORRUPT", "1")]);
    assert_eq!(
        judged(vec![outcome(s.clone(), Ok(r), None)])[0].code,
        "gdr-test-data-mismatch"
    );
    // The parent's kill at the deadline, and a crash.
    let f = judged(vec![outcome(
        s.clone(),
        Err("the GDR test did not finish within 13 s; it was killed".into()),
        None,
    )]);
    assert_eq!(f[0].code, "gdr-test-timeout");
    let f = judged(vec![outcome(
        s,
        Err("the GDR test was killed by signal 11 (SIGSEGV)".into()),
        None,
    )]);
    assert_eq!(f[0].code, "gdr-test-error");
    // Every finding carries evidence, and every failure a fix.
    for x in &f {
        assert!(!x.evidence.is_empty());
    }
}

#[test]
fn a_hung_pair_is_killed_by_the_parent() {
    let (_dir, exe) = script("sleep 30");
    let mut s = spec(Memory::Host);
    s.deadline_ms = 10; // the parent allows the deadline plus 3 s
    let p = Planned {
        gpu: None,
        subject: "host memory".into(),
        nic: Some("fake0 port 1".into()),
        level: None,
        expected: None,
        software: false,
        spec: s,
    };
    let start = Instant::now();
    let out = gdrdoctor::probe::gdr_test::run(vec![p], &exe, Deadline::none(), None);
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    let e = out[0].result.as_ref().unwrap_err();
    assert!(e.contains("did not finish within 3.01 s"), "{e}");
    assert!(!out[0].cut_short);
    assert_eq!(judged(out)[0].code, "gdr-test-timeout");
}

/// --deadline: a pair that hangs is killed when the run's deadline comes, long before its own
/// (10 s) limit, and judged unknown (cut short), not a failure of the pair; a pair with no time
/// left is not started at all.
#[test]
fn the_run_deadline_cuts_pairs_short_as_unknown() {
    let (_dir, exe) = script("sleep 30");
    let planned = |gpu: &str, nic: &str| {
        let mut s = spec(Memory::Host);
        s.deadline_ms = 10_000;
        s.gpu = Some(gpu.into());
        s.nic.as_mut().unwrap().device = nic.into();
        Planned {
            gpu: None,
            subject: format!("GPU {gpu}"),
            nic: Some(format!("{nic} port 1")),
            level: None,
            expected: None,
            software: false,
            spec: s,
        }
    };
    // Two pairs sharing a NIC: two waves. The first hangs until the deadline; the second then
    // has no time left.
    let bound = Duration::from_millis(1500);
    let (out, took) = in_time(bound, || {
        gdrdoctor::probe::gdr_test::run(
            vec![
                planned("0000:01:00.0", "fake0"),
                planned("0000:02:00.0", "fake0"),
            ],
            &exe,
            Deadline::after(1.5),
            None,
        )
    });
    let last = took[took.len() - 1];
    assert!(last < bound, "{took:?}");
    // It waited for the deadline: load only makes a run longer, so this needs no second try.
    assert!(last > Duration::from_millis(900), "{took:?}");
    assert!(out.iter().all(|o| o.cut_short), "{out:?}");
    assert!(
        out[1]
            .result
            .as_ref()
            .unwrap_err()
            .contains("not run: the --deadline of 1.5 s")
    );
    let f = judged(out);
    assert_eq!(f.len(), 2, "{f:?}");
    for finding in &f {
        assert_eq!(finding.code, "gdr-test-cut-short");
        assert_eq!(finding.status, gdrdoctor::model::Status::Unknown);
        assert!(
            finding.message.contains("cut short by --deadline"),
            "{}",
            finding.message
        );
    }
}

#[test]
fn gdr_test_command_end_to_end() {
    let run = |extra: &[(&str, &str)]| {
        Gdrdoctor::new()
            .args([
                "gdr-test", "--memory", "host", "--nic", "fake0:1", "--size", "64K", "--format",
                "json",
            ])
            .verbs()
            .envs(extra.iter().copied())
            .output()
    };
    let out = run(&[]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let r = json(&out);
    assert_eq!(
        r["inventory"]["gdr_test"][0]["result"]["verified_bytes"],
        65536
    );
    let start = Instant::now();
    let out = run(&[("FAKE_IBV_PORT_STATE", "1")]);
    assert_eq!(code(&out), 1);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert!(stdout(&out).contains("gdr-test-port-down"));
    // The same run as Prometheus gauges: the pair passed, and its bandwidth per direction.
    let prom = Gdrdoctor::new()
        .args([
            "gdr-test",
            "--memory",
            "host",
            "--nic",
            "fake0:1",
            "--size",
            "64K",
            "--format",
            "prometheus",
        ])
        .verbs()
        .output();
    let text = stdout(&prom);
    assert!(
        text.contains(
            "gdrdoctor_gdr_pair_ok{gpu=\"\",nic=\"fake0\",port=\"1\",memory=\"host\"} 1\n"
        ),
        "{text}"
    );
    for direction in ["to_target", "from_target"] {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with("gdrdoctor_gdr_pair_bandwidth_bytes_per_second{")
                    && l.contains(&format!("direction=\"{direction}\""))
            })
            .unwrap_or_else(|| panic!("no {direction} bandwidth in\n{text}"));
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v > 0.0, "{line}");
    }
    // Not on a captured root, and a size that is not a multiple of 4 KiB is refused.
    let out = gdrdoctor(&["--root", fixture("h200x2-vm"), "gdr-test"]);
    assert_eq!(code(&out), 2);
    let out = gdrdoctor(&["gdr-test", "--size", "1000"]);
    assert_eq!(code(&out), 2);
}

/// What stops the write test before its first WRITE, or spoils a WRITE, end to end through
/// `gdr-test` with the stand-in libibverbs: each its own finding, so that the operator is told
/// which part of the stack to fix.
#[test]
fn each_broken_layer_is_its_own_finding() {
    let verbs = || stub("ibverbs", &[]).display().to_string();
    /// (what, libibverbs, the stand-in's settings, the finding's code)
    type Case = (
        &'static str,
        String,
        &'static [(&'static str, &'static str)],
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "no libibverbs",
            MISSING.into(),
            &[],
            "gdr-test-no-libibverbs",
        ),
        (
            "a libibverbs without ibv_create_qp",
            stub("ibverbs", &["ibv_create_qp"]).display().to_string(),
            &[],
            "gdr-test-libibverbs-too-old",
        ),
        (
            "no device listed: no provider for the NIC's driver",
            verbs(),
            &[("FAKE_IBV_NO_DEVICES", "1")],
            "gdr-test-no-provider",
        ),
        (
            "ibv_open_device: ENOSYS, no uverbs",
            verbs(),
            &[("FAKE_IBV_OPEN_ERRNO", "38")],
            "gdr-test-no-uverbs",
        ),
        (
            "ibv_open_device: EACCES",
            verbs(),
            &[("FAKE_IBV_OPEN_ERRNO", "13")],
            "gdr-test-no-access",
        ),
        (
            "ibv_open_device: EIO",
            verbs(),
            &[("FAKE_IBV_OPEN_ERRNO", "5")],
            "gdr-test-setup-failed",
        ),
        (
            "completions with IBV_WC_LOC_PROT_ERR",
            verbs(),
            &[("FAKE_IBV_WC_STATUS", "4")],
            "gdr-test-completion-error",
        ),
    ];
    let mut wrong = Vec::new();
    for (what, lib, env, want) in &cases {
        let out = Gdrdoctor::new()
            .args([
                "gdr-test", "--memory", "host", "--nic", "fake0", "--size", "64K", "--format",
                "json",
            ])
            .lib("IBVERBS", lib)
            .envs(env.iter().copied())
            .output();
        let got = codes(&json(&out));
        if !got.contains(&(want.to_string(), "fail".into())) {
            wrong.push(format!("{what}: no failing {want} in {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    // The GPU side: a buffer that could not be allocated is the GPU runtime's to fix.
    let s = spec(Memory::Cuda);
    let r = pair(
        &s,
        None,
        &[("GDRDOCTOR_LIBCUDA", "/nonexistent/libcuda.so.1")],
    );
    let f = judged(vec![outcome(s, Ok(r), None)]);
    assert_eq!(f[0].code, "gdr-test-memory", "{f:?}");
    // Asked not to run: skipped, and why.
    let out = gdrdoctor(&[
        "check",
        "--select",
        "gdr-test",
        "--no-gdr-test",
        "--format",
        "json",
    ]);
    let r = json(&out);
    let f = &findings_with(&r, "gdr-test-skipped")[0];
    assert_eq!(f["message"], "not run: --no-gdr-test", "{f}");
}

/// Every field of `inventory.gdr_test` that a pass or a failure produces is documented, an SRD
/// pair's on an EFA device (tests/gdr_test_efa.rs) among them.
#[test]
fn gdr_test_fields_are_documented() {
    let fake0 = |env: &[(&'static str, &'static str)]| Gdrdoctor::new().verbs().envs(env.to_vec());
    let runs: Vec<serde_json::Value> = [
        ("fake0", fake0(&[])),
        ("fake0", fake0(&[("FAKE_IBV_HOST_ERRNO", "12")])),
        ("rdmap79s0", Gdrdoctor::new().efa()),
    ]
    .into_iter()
    .map(|(nic, command)| {
        let out = command
            .args([
                "gdr-test", "--memory", "host", "--nic", nic, "--size", "64K", "--format", "json",
            ])
            .output();
        json(&out)["inventory"]["gdr_test"].clone()
    })
    .collect();
    let fields = Fields {
        prefix: "inventory.gdr_test",
        ..Fields::default()
    };
    let fields = assert_json_documented("docs/report-json.md", &fields, &runs);
    assert!(fields.contains("inventory.gdr_test[].result.bandwidth.to_target_gbps"));
    assert!(fields.contains("inventory.gdr_test[].result.failure.kind"));
    assert!(fields.contains("inventory.gdr_test[].result.efa.device_caps"));
}

/// Which pairs run: each GPU with its nearest NIC(s) by default, every pair with `--pairs all`,
/// one per NIC for host memory; RoCE ports use the RoCE v2 IPv4 GID rdma-gid found.
#[test]
fn pairs_follow_placement() {
    let root = gdrdoctor::root::Root::open(&fixture_path("healthy-8gpu-roce")).unwrap();
    let config = gdrdoctor::config::Config::default();
    let inv = gdrdoctor::inventory::Inventory::load(&root, &config);
    let opts = gdrdoctor::probe::gdr_test::Options::default();
    let (near, not) = gdrdoctor::probe::gdr_test::plan(&inv, &opts);
    assert!(not.is_empty());
    // Each switch holds two GPUs and two NICs: every GPU has two nearest NICs at PIX.
    assert_eq!(near.len(), 16, "{near:#?}");
    for p in &near {
        assert_eq!(p.level, Some(gdrdoctor::placement::Level::Pix), "{p:?}");
        assert_eq!(p.spec.memory, Memory::Cuda);
        let nic = p.spec.nic.as_ref().unwrap();
        assert_eq!((nic.port, nic.gid_index), (1, Some(3)));
        // 400 Gb/s ports behind Gen5 x16 links: the port is the limit.
        assert_eq!(p.expected.as_ref().unwrap().gbps, 400.0, "{:?}", p.expected);
    }
    let all = gdrdoctor::probe::gdr_test::plan(
        &inv,
        &gdrdoctor::probe::gdr_test::Options {
            all_pairs: true,
            ..Default::default()
        },
    )
    .0;
    assert_eq!(all.len(), 64);
    let host = gdrdoctor::probe::gdr_test::plan(
        &inv,
        &gdrdoctor::probe::gdr_test::Options {
            memory: Some(Memory::Host),
            ..Default::default()
        },
    )
    .0;
    assert_eq!(host.len(), 8);
    assert!(host.iter().all(|p| p.gpu.is_none() && p.spec.gpu.is_none()));
    // A declared accelerator of another vendor cannot be tested with GPU memory: said, not run.
    let root = gdrdoctor::root::Root::open(&fixture_path("lab-switch-pt")).unwrap();
    let (config, _) = gdrdoctor::config::Config::load(
        Some(&crate_dir().join("fixtures/lab-switch-pt/config.yaml")),
        &gdrdoctor::checks::NAMES,
    )
    .unwrap();
    let inv = gdrdoctor::inventory::Inventory::load(&root, &config);
    let (planned, not) = gdrdoctor::probe::gdr_test::plan(&inv, &opts);
    assert!(planned.is_empty());
    assert!(not[0].reason.contains("--memory host"), "{not:?}");
}

// -- the GPU workers: one CUDA start per GPU for the probe and the pairs ----------------------

/// An executable that runs the real gdrdoctor with the stand-in libraries (and `extra`, shell
/// lines run first), as the GPU session's children.
fn wrapped(dir: &std::path::Path, log: &std::path::Path, extra: &str) -> PathBuf {
    let exe = dir.join("gdrdoctor-with-stubs");
    std::fs::write(
        &exe,
        format!(
            "#!/bin/sh\n{extra}\nexport GDRDOCTOR_LIBCUDA={} GDRDOCTOR_LIBIBVERBS={} GDRDOCTOR_LIBNVML={} FAKE_CUDA_LOG={} GDRDOCTOR_LIBEFA={MISSING}\nexec {} \"$@\"\n",
            stub("cuda", &[]).display(),
            stub("ibverbs", &[]).display(),
            stub("nvml", &[]).display(),
            log.display(),
            env!("CARGO_BIN_EXE_gdrdoctor"),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    exe
}

fn targets() -> Vec<gdrdoctor::probe::gpu::Target> {
    use gdrdoctor::parse::pci::Bdf;
    vec![
        gdrdoctor::probe::gpu::Target {
            bdf: Bdf::parse("0000:00:06.0").unwrap(),
            runtime: gdrdoctor::probe::gpu::worker::Runtime::Cuda,
            visible: Some("GPU-c783c174-2489-07fb-69e0-b646a5b7d417".into()),
        },
        gdrdoctor::probe::gpu::Target {
            bdf: Bdf::parse("0000:00:07.0").unwrap(),
            runtime: gdrdoctor::probe::gpu::worker::Runtime::Cuda,
            visible: None,
        },
    ]
}

fn gpu_pair(gpu: &str) -> Planned {
    let mut s = spec(Memory::Cuda);
    s.gpu = Some(gpu.into());
    Planned {
        gpu: gdrdoctor::parse::pci::Bdf::parse(gpu),
        subject: format!("GPU {gpu}"),
        nic: Some("fake0 port 1".into()),
        level: None,
        expected: None,
        software: false,
        spec: s,
    }
}

/// The probe and every pair on a GPU share one process and one `cuInit`; its primary context is
/// created once and lives until the worker ends (the stand-in logs each call). Before issue 14
/// the probe and each pair started CUDA in processes of their own.
#[test]
fn one_cuda_start_per_gpu_for_the_probe_and_its_pairs() {
    use gdrdoctor::probe::gpu::{Ask, GpuSession, ProbeCommand, Runtime};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cuda.log");
    let exe = wrapped(dir.path(), &log, "");
    let cmd = ProbeCommand {
        exe: exe.clone(),
        timeout: Duration::from_secs(20),
        ask: Ask::FULL,
        cut_by_deadline: None,
    };
    let mut session = GpuSession::start(&cmd, targets());
    // Two pairs per GPU, all through the one NIC: four waves, two per worker.
    let planned = [
        "0000:00:06.0",
        "0000:00:07.0",
        "0000:00:06.0",
        "0000:00:07.0",
    ]
    .into_iter()
    .map(gpu_pair)
    .collect();
    let outcomes = gdrdoctor::probe::gdr_test::run(planned, &exe, Deadline::none(), Some(&session));
    assert_eq!(outcomes.len(), 4);
    for o in &outcomes {
        let r = o.result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.failure, None, "{r:?}");
        assert_eq!(r.verified_bytes, Some(1 << 16));
        assert!(
            r.memory_steps[0].starts_with("cuInit: "),
            "{:?}",
            r.memory_steps
        );
    }
    let Runtime::Probed(p) = session.probe() else {
        panic!("no probe")
    };
    let cuda = p.cuda.as_ref().unwrap().ready().unwrap();
    let buses: Vec<&str> = cuda
        .devices
        .iter()
        .filter_map(|d| d.bus_id.as_deref())
        .collect();
    assert_eq!(buses, ["0000:00:06.0", "0000:00:07.0"]);
    assert!(
        cuda.devices
            .iter()
            .all(|d| matches!(d.export, gdrdoctor::model::gpu::Export::Exported { .. }))
    );
    assert!(p.nvml.as_ref().unwrap().ready().is_some());
    assert!(p.failed.is_empty(), "{:?}", p.failed);
    session.finish(Duration::from_secs(5));

    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let inits: Vec<&&str> = lines.iter().filter(|l| l.starts_with("cuInit ")).collect();
    assert_eq!(inits.len(), 2, "one cuInit per GPU, nothing else:\n{text}");
    // The GPU whose UUID the driver gave sees itself alone; the other sees what it was given.
    assert!(
        inits
            .iter()
            .any(|l| l.ends_with("visible=GPU-c783c174-2489-07fb-69e0-b646a5b7d417")),
        "{text}"
    );
    assert!(inits.iter().any(|l| l.ends_with("visible=-")), "{text}");
    // Per worker: the context is destroyed once, at its end, never between pairs.
    for pid in inits.iter().map(|l| l.split_whitespace().nth(1).unwrap()) {
        let mine: Vec<&&str> = lines
            .iter()
            .filter(|l| l.contains(&format!(" {pid} ")))
            .collect();
        let destroys = mine.iter().filter(|l| l.starts_with("destroy")).count();
        assert!(destroys <= 1, "{text}");
        if destroys == 1 {
            assert!(mine.last().unwrap().starts_with("destroy"), "{text}");
        }
    }
}

/// A GPU whose worker hangs costs only its own answers: the other GPU's probe and pair stand,
/// and the hung one is unknown (killed at its deadline), never a pass.
#[test]
fn a_hung_gpu_costs_only_its_own_results() {
    use gdrdoctor::probe::gpu::{Ask, GpuSession, ProbeCommand, Runtime};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cuda.log");
    let exe = wrapped(
        dir.path(),
        &log,
        "case \"$*\" in *0000:00:07.0*) exec sleep 30;; esac",
    );
    let cmd = ProbeCommand {
        exe: exe.clone(),
        timeout: Duration::from_millis(1500),
        ask: Ask::FULL,
        cut_by_deadline: None,
    };
    let start = Instant::now();
    let mut session = GpuSession::start(&cmd, targets());
    let Runtime::Probed(p) = session.probe() else {
        panic!("the answering GPU must keep the probe")
    };
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    let cuda = p.cuda.as_ref().unwrap().ready().unwrap();
    assert_eq!(cuda.devices.len(), 1);
    assert_eq!(cuda.devices[0].bus_id.as_deref(), Some("0000:00:06.0"));
    assert_eq!(p.failed.len(), 1, "{:?}", p.failed);
    assert_eq!(p.failed[0].part, "0000:00:07.0");
    assert!(
        p.failed[0].error.contains("did not finish"),
        "{:?}",
        p.failed
    );
    assert!(p.failed[0].error.contains("Xid"), "{:?}", p.failed);
    let outcomes = gdrdoctor::probe::gdr_test::run(
        vec![gpu_pair("0000:00:06.0"), gpu_pair("0000:00:07.0")],
        &exe,
        Deadline::none(),
        Some(&session),
    );
    assert_eq!(outcomes[0].result.as_ref().unwrap().failure, None);
    let e = outcomes[1].result.as_ref().unwrap_err();
    assert!(e.contains("did not finish"), "{e}");
    let f = judged(outcomes);
    assert_eq!(f[0].code, "gdr-test-pass");
    assert_eq!(f[1].code, "gdr-test-timeout");
    session.finish(Duration::from_secs(2));
}

/// A worker whose library cannot be loaded still answers the probe and every pair, with the
/// reason, answers a line that is not a pair with a failure naming it, and ends with its input.
#[test]
fn a_worker_without_its_library_answers_with_the_reason() {
    use std::io::Write as _;
    let pair = serde_json::to_string(&spec(Memory::Cuda)).unwrap();
    let mut child = Gdrdoctor::new()
        .args([
            "gpu-worker",
            "--spec",
            r#"{"gpu":"0000:00:06.0","runtime":"cuda","export":true}"#,
        ])
        .lib("CUDA", "/nonexistent/libcuda.so.1")
        .command()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{pair}\nnot json").unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = stdout(&out);
    let answers: Vec<&str> = text
        .lines()
        .map(|l| l.strip_prefix(gdrdoctor::child::ANSWER).expect(l))
        .collect();
    assert_eq!(answers.len(), 3, "{text}");
    let probe: gdrdoctor::probe::gpu::worker::WorkerProbe =
        serde_json::from_str(answers[0]).unwrap();
    assert!(
        matches!(
            probe.cuda,
            Some(gdrdoctor::model::gpu::Lib::NotFound { .. })
        ),
        "{probe:?}"
    );
    let (kind, msg) = failure(&serde_json::from_str(answers[1]).unwrap());
    assert_eq!(kind, FailureKind::Memory);
    assert!(
        msg.starts_with("libcuda: cannot load /nonexistent/libcuda.so.1"),
        "{msg}"
    );
    let (_, msg) = failure(&serde_json::from_str(answers[2]).unwrap());
    assert!(msg.contains("unreadable pair spec"), "{msg}");
}
