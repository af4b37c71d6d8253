//! The GDR write test on an AWS EFA device (issue 38), which offers no RC queue pair: the real
//! engine in its real child, over the stand-in libibverbs with its device as EFA
//! (tests/stubs/ibverbs.c, FAKE_IBV_EFA: `rdmap79s0`, RC refused with EOPNOTSUPP as the efa
//! provider refuses it) and the stand-in libefa (tests/stubs/efa.c), whose SRD QPs move the
//! bytes through their `struct ibv_qp_ex` builders. The test runs over SRD with RDMA WRITE, or
//! READ where the device has no WRITE, and says unknown, never fail, where it cannot run there.
//! What real EFA hardware does is not shown here: no EFA device is at hand.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use crate::gdr_test::{failure, judged, outcome, pair, spec};
use gdrdoctor::gdr::{FailureKind, Memory, PairResult, PairSpec};
use gdrdoctor::model::Status;
use gdrdoctor::model::gdr::Transport;
use std::path::PathBuf;

/// A pair on the EFA device, whose driver the inventory gives as `efa`.
fn efa_spec(memory: Memory) -> PairSpec {
    let mut s = spec(memory);
    s.nic.as_mut().unwrap().device = "rdmap79s0".into();
    s.nic_driver = Some("efa".into());
    s
}

/// One pair on the EFA device with `libefa` (the stand-in when `None`) and the settings `env`.
fn efa_pair(s: &PairSpec, libefa: Option<PathBuf>, env: &[(&str, &str)]) -> PairResult {
    let libefa = libefa.unwrap_or_else(|| stub("efa", &[]));
    let libefa = libefa.display().to_string();
    let mut all = vec![("FAKE_IBV_EFA", "1"), ("GDRDOCTOR_LIBEFA", libefa.as_str())];
    all.extend(env);
    pair(s, None, &all)
}

/// `gdrdoctor gdr-test` on host memory through the EFA device named on the command line (not in
/// this machine's sysfs, so its driver is unknown and libefa is asked), with `env`.
fn efa_command(libefa: bool, env: &[(&str, &str)]) -> (i32, serde_json::Value) {
    let mut c = Gdrdoctor::new()
        .args([
            "gdr-test",
            "--memory",
            "host",
            "--nic",
            "rdmap79s0",
            "--size",
            "64K",
            "--format",
            "json",
        ])
        .efa()
        .envs(env.iter().copied());
    if !libefa {
        c = c.lib("EFA", MISSING);
    }
    let out = c.output();
    (code(&out), json(&out))
}

/// RDMA WRITE offered: two SRD QPs, one writing through the other, every byte verified both
/// ways and the bandwidth measured; the port as EFA shows it (no link layer, one GID).
#[test]
fn efa_with_rdma_write_runs_over_srd() {
    for memory in [Memory::Cuda, Memory::Host] {
        let r = efa_pair(&efa_spec(memory), None, &[]);
        assert_eq!(r.failure, None, "{r:?}");
        assert_eq!(r.transport, Some(Transport::SrdWrite));
        assert_eq!(r.verified_bytes, Some(1 << 16));
        let efa = r.efa.as_ref().unwrap();
        assert_eq!((efa.device_caps, efa.max_rdma_size), (0xf, 1 << 30));
        assert!(efa.library.ends_with("libefa.so"), "{efa:?}");
        let b = r.bandwidth.as_ref().unwrap();
        assert!(b.to_target_gbps > 0.0 && b.from_target_gbps > 0.0, "{b:?}");
        assert_eq!((b.messages, b.message_bytes), (128, 1 << 16));
        let port = r.port.as_ref().unwrap();
        assert_eq!(port.link_layer, "Unspecified");
        assert_eq!(
            port.gid.as_deref(),
            Some("0: fe80:0000:0000:0000:0efa:0000:0000:004f"),
            "{port:?}"
        );
    }
    // GPU memory through the peer-memory path, as the efa driver's p2p provider gives it.
    let r = efa_pair(&efa_spec(Memory::Cuda), None, &[]);
    assert_eq!(r.path.as_deref(), Some("peermem"));
}

/// A buffer larger than one RDMA work request may carry (max_rdma_size) goes in pieces, each
/// verified: 64 KiB in 16 KiB WRITEs.
#[test]
fn srd_transfers_are_cut_to_max_rdma_size() {
    let env = [("FAKE_EFA_MAX_RDMA", "16384")];
    let r = efa_pair(&efa_spec(Memory::Cuda), None, &env);
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!(r.verified_bytes, Some(1 << 16));
    let b = r.bandwidth.unwrap();
    assert_eq!((b.messages, b.message_bytes), (128, 16384));
    // One flipped byte in the first piece is found, and located in the buffer.
    let env = [("FAKE_EFA_MAX_RDMA", "16384"), ("FAKE_IBV_CORRUPT", "1")];
    let (kind, msg) = failure(&efa_pair(&efa_spec(Memory::Cuda), None, &env));
    assert_eq!(kind, FailureKind::DataMismatch);
    // The first piece's middle byte: offset 8192 of the buffer.
    assert!(
        msg.contains("SRD RDMA WRITE host -> GPU") && msg.contains("the first at offset 8192"),
        "{msg}"
    );
}

/// RDMA READ only (EFA's first generation): the QP reads the source into the destination, so
/// the same bytes move host -> GPU and GPU -> host, verified; the buffers are registered with
/// remote read alone (the stand-in refuses remote write, as the efa driver does).
#[test]
fn efa_with_rdma_read_only_runs_over_srd_reads() {
    let env = [("FAKE_EFA_CAPS", "0x1")];
    let r = efa_pair(&efa_spec(Memory::Cuda), None, &env);
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!(r.transport, Some(Transport::SrdRead));
    assert_eq!(r.verified_bytes, Some(1 << 16));
    assert_eq!(r.efa.as_ref().unwrap().device_caps, 0x1);
    assert_eq!(r.bandwidth.as_ref().unwrap().messages, 128);
    // A flipped byte in the first READ (host -> GPU) is found, and named as a READ.
    let env = [("FAKE_EFA_CAPS", "0x1"), ("FAKE_IBV_CORRUPT", "1")];
    let (kind, msg) = failure(&efa_pair(&efa_spec(Memory::Cuda), None, &env));
    assert_eq!(kind, FailureKind::DataMismatch);
    assert!(msg.contains("SRD RDMA READ host -> GPU"), "{msg}");
    // Completions with an error status fail the pair, as over RC.
    let env = [("FAKE_EFA_CAPS", "0x1"), ("FAKE_IBV_WC_STATUS", "12")];
    let (kind, msg) = failure(&efa_pair(&efa_spec(Memory::Host), None, &env));
    assert_eq!(kind, FailureKind::CompletionError);
    assert!(msg.contains("IBV_WC_RETRY_EXC_ERR"), "{msg}");
}

/// The verdict of a whole `check` on the healthy p5 EFA fixture, as a live run, with `outcome`
/// as the write test's one pair.
fn verdict_with(outcome: gdrdoctor::model::gdr::GdrOutcome) -> serde_json::Value {
    let root = gdrdoctor::root::Root::open(&fixture_path("aws-p5-efa")).unwrap();
    let config = gdrdoctor::config::Config::default();
    let (mut inv, mut runs) = gdrdoctor::probe::load(&root, &config, Default::default());
    inv.live = true; // the write test is live-only; this outcome stands for a live run
    runs.gdr_test = gdrdoctor::model::gdr::GdrTest::Ran {
        outcomes: vec![outcome],
        not_planned: vec![],
    };
    let all = gdrdoctor::checks::Selection {
        select: vec![],
        skip: vec![],
    };
    let results = gdrdoctor::checks::run(&inv, &runs, &config, &all);
    let options = gdrdoctor::report::Options {
        strict: false,
        root_display: "aws-p5-efa".into(),
    };
    let report = gdrdoctor::report::build(&inv, &runs, results, &options);
    serde_json::to_value(&report.verdict).unwrap()
}

/// Neither RDMA WRITE nor READ: the test cannot run over SRD, which is unknown, never a
/// failure: on an otherwise healthy EFA node the verdict stays ready (exit 0), where a pair
/// that failed would make it not ready.
#[test]
fn efa_without_rdma_is_unknown_never_a_failure() {
    let env = [("FAKE_EFA_CAPS", "0x6")];
    let s = efa_spec(Memory::Cuda);
    let r = efa_pair(&s, None, &env);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::EfaNoRdma);
    assert!(
        msg.contains(
            "rdmap79s0 (EFA) offers neither RDMA write nor read (efadv_query_device device_caps 0x6)"
        ),
        "{msg}"
    );
    let f = judged(vec![outcome(s.clone(), Ok(r.clone()), None)]);
    assert_eq!(
        (f[0].code, f[0].status),
        ("gdr-test-efa-no-rdma", Status::Unknown),
        "{f:?}"
    );
    let v = verdict_with(outcome(s.clone(), Ok(r), None));
    assert_eq!(
        (&v["state"], &v["exit_code"]),
        (&"ready-unverified".into(), &0.into()),
        "{v:#}"
    );
    // The same node with a pair that failed at setup: not ready, exit 1.
    let mut broken = efa_pair(&s, None, &[]);
    broken.failure = Some(gdrdoctor::gdr::Failure {
        kind: FailureKind::QpFailed,
        step: "efadv_create_qp_ex (SRD)".into(),
        message: "efadv_create_qp_ex: Invalid argument (errno 22)".into(),
    });
    let v = verdict_with(outcome(s, Ok(broken), None));
    assert_eq!(v["exit_code"], 1, "{v:#}");
    assert!(
        f[0].evidence
            .iter()
            .any(|e| e.value.contains("device_caps 0x6")),
        "{f:?}"
    );
    // End to end, the device named on the command line: libefa says it is EFA. With the write
    // test the only check, an unknown leaves nothing verified (exit 1, `nothing-verified`), not
    // a node found broken.
    let (c, r) = efa_command(true, &env);
    assert_eq!(c, 1, "{:#}", r["checks"]);
    assert_eq!(
        r["verdict"]["state"], "nothing-verified",
        "{:#}",
        r["verdict"]
    );
    let found = findings_with(&r, "gdr-test-efa-no-rdma");
    assert_eq!(found[0]["status"], "unknown", "{found:?}");
    assert_eq!(
        r["inventory"]["gdr_test"][0]["result"]["efa"]["device_caps"],
        6
    );
}

/// No libefa (or one without a call the test needs): unknown, with the package to install.
#[test]
fn efa_without_libefa_is_unknown_and_names_the_package() {
    let s = efa_spec(Memory::Cuda);
    let r = efa_pair(&s, Some(MISSING.into()), &[]);
    let (kind, msg) = failure(&r);
    assert_eq!(kind, FailureKind::EfaLibrary);
    assert!(msg.contains("libefa.so.1 not found"), "{msg}");
    assert!(msg.contains("ibverbs-providers"), "{msg}");
    assert!(msg.contains("/opt/amazon/efa/lib"), "{msg}");
    let f = judged(vec![outcome(s.clone(), Ok(r), None)]);
    assert_eq!(
        (f[0].code, f[0].status),
        ("gdr-test-no-libefa", Status::Unknown)
    );
    let fix = serde_json::to_string(&f[0].fix).unwrap();
    assert!(fix.contains("apt-get install ibverbs-providers"), "{fix}");
    // A libefa without efadv_create_qp_ex.
    let old = stub("efa", &["efadv_create_qp_ex"]);
    let (kind, msg) = failure(&efa_pair(&s, Some(old), &[]));
    assert_eq!(kind, FailureKind::EfaLibrary);
    assert!(msg.contains("does not export efadv_create_qp_ex"), "{msg}");
    // End to end: a device whose driver is unknown refuses RC, and no libefa can say more.
    let (_, r) = efa_command(false, &[]);
    assert_eq!(
        r["verdict"]["state"], "nothing-verified",
        "{:#}",
        r["verdict"]
    );
    let found = findings_with(&r, "gdr-test-no-libefa");
    assert_eq!(found[0]["status"], "unknown", "{found:?}");
    let m = found[0]["message"].as_str().unwrap();
    assert!(
        m.contains("rdmap79s0 offers no RC queue pair (ibv_create_qp: Operation not supported (EOPNOTSUPP, errno 95))"),
        "{m}"
    );
    assert!(m.contains("ibverbs-providers"), "{m}");
}

/// A device that refuses RC and is not EFA: no transport the test knows, unknown. Its link layer
/// (InfiniBand) says it is not EFA, and libefa is not even asked; on a port whose link layer is
/// unspecified, as EFA's, libefa is asked and may say no.
#[test]
fn a_device_without_rc_that_is_not_efa_is_unknown() {
    let out = Gdrdoctor::new()
        .args([
            "gdr-test", "--memory", "host", "--nic", "fake0", "--size", "64K", "--format", "json",
        ])
        .verbs()
        .env("FAKE_IBV_NO_RC", "1")
        .output();
    let r = json(&out);
    assert_eq!(
        r["verdict"]["state"], "nothing-verified",
        "{:#}",
        r["verdict"]
    );
    let f = findings_with(&r, "gdr-test-no-rc");
    assert_eq!(f[0]["status"], "unknown", "{f:?}");
    let m = f[0]["message"].as_str().unwrap();
    assert!(
        m.contains("fake0 offers no RC queue pair")
            && m.contains(
                "its port's link layer is InfiniBand, where an EFA port's is unspecified"
            ),
        "{m}"
    );
    let (_, r) = efa_command(true, &[("FAKE_EFA_QUERY_ERRNO", "95")]);
    let f = findings_with(&r, "gdr-test-no-rc");
    let m = f[0]["message"].as_str().unwrap();
    assert!(
        m.contains("says it is not an EFA device (efadv_query_device: Operation not supported (EOPNOTSUPP, errno 95))"),
        "{m}"
    );
    // A device the inventory names efa, about which libefa's query fails: that is broken.
    let env = [("FAKE_EFA_QUERY_ERRNO", "22")];
    let (kind, msg) = failure(&efa_pair(&efa_spec(Memory::Host), None, &env));
    assert_eq!(kind, FailureKind::QpFailed);
    assert!(
        msg.starts_with("efadv_query_device: rdmap79s0 (driver efa): Invalid argument"),
        "{msg}"
    );
}

/// SRD end to end through `gdrdoctor gdr-test`: the report says which transport ran.
#[test]
fn gdr_test_says_which_transport_ran() {
    let (c, r) = efa_command(true, &[]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    let result = &r["inventory"]["gdr_test"][0]["result"];
    assert_eq!(result["transport"], "srd-write", "{result:#}");
    assert_eq!(result["verified_bytes"], 65536);
    let pass = &findings_with(&r, "gdr-test-pass")[0];
    let m = pass["message"].as_str().unwrap();
    assert!(
        m.starts_with("host path, SRD RDMA WRITE: 64 KiB verified both ways"),
        "{m}"
    );
    assert!(
        pass.to_string()
            .contains("two queue pairs, one posting to the other, RDMA WRITE")
    );
    // READ only.
    let (c, r) = efa_command(true, &[("FAKE_EFA_CAPS", "0x1")]);
    assert_eq!(c, 0, "{:#}", r["checks"]);
    assert_eq!(
        r["inventory"]["gdr_test"][0]["result"]["transport"],
        "srd-read"
    );
    let m = findings_with(&r, "gdr-test-pass")[0]["message"].to_string();
    assert!(
        m.contains("SRD RDMA READ") && m.contains("READs of 64 KiB"),
        "{m}"
    );
    // The same stand-ins' other device, not EFA: RC, as before.
    let out = Gdrdoctor::new()
        .args([
            "gdr-test", "--memory", "host", "--nic", "fake0", "--size", "64K", "--format", "json",
        ])
        .verbs()
        .lib("EFA", stub("efa", &[]))
        .output();
    assert_eq!(code(&out), 0);
    assert_eq!(
        json(&out)["inventory"]["gdr_test"][0]["result"]["transport"],
        "rc"
    );
}

/// A device the inventory names with another driver (mlx5_core) runs RC as it always did:
/// libefa is not asked, even where RC then fails.
#[test]
fn a_known_driver_other_than_efa_runs_rc_as_before() {
    let mut s = spec(Memory::Host);
    s.nic_driver = Some("mlx5_core".into());
    let r = pair(
        &s,
        None,
        &[("GDRDOCTOR_LIBEFA", "/nonexistent/libefa.so.1")],
    );
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!((r.transport, r.efa.as_ref()), (Some(Transport::Rc), None));
    // Were that device to refuse RC, it fails at its QP as before: no SRD, no unknown.
    let libefa = stub("efa", &[]).display().to_string();
    let env = [
        ("FAKE_IBV_NO_RC", "1"),
        ("GDRDOCTOR_LIBEFA", libefa.as_str()),
    ];
    let (kind, msg) = failure(&pair(&s, None, &env));
    assert_eq!(kind, FailureKind::QpFailed);
    assert!(msg.starts_with("ibv_create_qp: "), "{msg}");
}

/// The check's pass on an SRD pair names the transport and the operation.
#[test]
fn the_check_names_srd_in_its_pass() {
    let s = efa_spec(Memory::Cuda);
    let r = efa_pair(&s, None, &[("FAKE_EFA_CAPS", "0x1")]);
    let f = judged(vec![outcome(s, Ok(r), Some(0.001))]);
    assert_eq!((f[0].code, f[0].status), ("gdr-test-pass", Status::Pass));
    assert!(
        f[0].message
            .starts_with("peermem path (PIX), SRD RDMA READ: 64 KiB verified both ways"),
        "{}",
        f[0].message
    );
    assert!(f[0].message.contains("READs of 64 KiB"), "{}", f[0].message);
    let transport = f[0]
        .evidence
        .iter()
        .find(|e| e.path == "transport")
        .unwrap();
    assert!(transport.value.contains("RDMA READ"), "{transport:?}");
}

/// The plan gives each pair its NIC's driver from the inventory: `efa` on an EFA node, so the
/// child goes to SRD without trying RC; `mlx5_core` on a ConnectX node, so it never asks libefa.
#[test]
fn the_plan_names_each_nic_driver() {
    let config = gdrdoctor::config::Config::default();
    let opts = gdrdoctor::probe::gdr_test::Options::default();
    for (fixture, driver) in [("aws-p5-efa", "efa"), ("healthy-8gpu-roce", "mlx5_core")] {
        let root = gdrdoctor::root::Root::open(&fixture_path(fixture)).unwrap();
        let inv = gdrdoctor::inventory::Inventory::load(&root, &config);
        let (planned, _) = gdrdoctor::probe::gdr_test::plan(&inv, &opts);
        assert!(!planned.is_empty(), "{fixture}");
        for p in &planned {
            assert_eq!(
                p.spec.nic_driver.as_deref(),
                Some(driver),
                "{fixture}: {p:?}"
            );
        }
    }
}
