//! `gdrdoctor nccl verify` and `check --nccl-verify` on a machine without GPUs: the real binary
//! and its real `nccl-child`, over the stand-ins for NCCL (tests/stubs/nccl.c: NCCL 2.28's log
//! lines and topology dump, int32 sums on host memory, faults switched on by FAKE_NCCL_*), CUDA
//! and NVML, on fixtures whose GPUs the CUDA stand-in is told about. What NCCL itself does on a
//! GPU is for tests/gpu-machine/nccl-verify.sh.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// A PATH whose python3 answers with `sys_path` (none at all when `None`), so that the pip wheel
/// search sees only what the test made.
fn python(dir: &Path, sys_path: Option<&[&Path]>) -> String {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    if let Some(entries) = sys_path {
        let list: Vec<String> = entries.iter().map(|p| p.display().to_string()).collect();
        let script = bin.join("python3");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho '{}'\n",
                serde_json::to_string(&list).unwrap()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin.display().to_string()
}

/// gdrdoctor with the stand-in CUDA and NVML (GPUs at `gpus`), NCCL as `nccl` (the stand-in
/// unless the test says otherwise), a python3 of its own, and `env`.
struct Run {
    tmp: tempfile::TempDir,
    env: Vec<(String, String)>,
}

impl Run {
    fn new(gpus: &str) -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let path = python(tmp.path(), Some(&[]));
        let count = gpus.split(',').count().to_string();
        Run {
            tmp,
            env: vec![
                ("PATH".into(), format!("{path}:/usr/bin:/bin")),
                (
                    "GDRDOCTOR_LIBNCCL".into(),
                    stub("nccl", &[]).display().to_string(),
                ),
                (
                    "GDRDOCTOR_LIBCUDA".into(),
                    stub("cuda", &[]).display().to_string(),
                ),
                (
                    "GDRDOCTOR_LIBNVML".into(),
                    stub("nvml", &[]).display().to_string(),
                ),
                ("GDRDOCTOR_LIBHIP".into(), MISSING.into()),
                ("GDRDOCTOR_LIBHSA".into(), MISSING.into()),
                ("FAKE_CUDA_BUSIDS".into(), gpus.into()),
                ("FAKE_CUDA_COUNT".into(), count),
            ],
        }
    }
    /// The 2x H200 VM: no RDMA device, two GPUs (the all-reduce over NCCL's network).
    fn h200() -> Run {
        Run::new("0000:00:06.0,0000:00:07.0")
    }
    /// One GPU with mlx5_0 under the same switch (PIX), IB in the stand-in.
    fn pix() -> Run {
        Run::new("0000:03:00.0")
            .set("FAKE_NCCL_NET", "IB")
            .set("FAKE_NCCL_NICS", "mlx5_0@0000:04:00.0")
    }
    /// The MI300X node (four AMD GPUs, each beside a bnxt_re NIC): RCCL's stand-in
    /// (tests/stubs/rccl.c) and HIP's and HSA's; no NCCL, CUDA or NVML.
    fn mi300x() -> Run {
        let tmp = tempfile::tempdir().unwrap();
        let path = python(tmp.path(), Some(&[]));
        Run {
            tmp,
            env: vec![
                ("PATH".into(), format!("{path}:/usr/bin:/bin")),
                (
                    "GDRDOCTOR_LIBRCCL".into(),
                    stub("rccl", &[]).display().to_string(),
                ),
                ("GDRDOCTOR_LIBNCCL".into(), MISSING.into()),
                ("GDRDOCTOR_LIBCUDA".into(), MISSING.into()),
                ("GDRDOCTOR_LIBNVML".into(), MISSING.into()),
                (
                    "GDRDOCTOR_LIBHIP".into(),
                    stub("hip", &[]).display().to_string(),
                ),
                (
                    "GDRDOCTOR_LIBHSA".into(),
                    stub("hsa", &[]).display().to_string(),
                ),
                ("FAKE_NCCL_VERSION".into(), "22203".into()),
                ("FAKE_NCCL_NET".into(), "IB".into()),
                (
                    "FAKE_NCCL_NICS".into(),
                    "bnxt_re0@0000:24:00.0,bnxt_re1@0000:26:00.0,bnxt_re2@0000:44:00.0,bnxt_re3@0000:46:00.0".into(),
                ),
            ],
        }
    }
    fn set(mut self, k: &str, v: &str) -> Run {
        self.env.retain(|(n, _)| n != k);
        self.env.push((k.into(), v.into()));
        self
    }
    fn unset(mut self, k: &str) -> Run {
        self.env.retain(|(n, _)| n != k);
        self
    }
    fn command(&self, root: &str, args: &[&str]) -> Command {
        self.command_at(Path::new(fixture(root)), args)
    }
    /// [`Run::command`] on a root given by its path.
    fn command_at(&self, root: &Path, args: &[&str]) -> Command {
        Gdrdoctor::new()
            .root_at(root)
            .args(args)
            .env_remove("GDRDOCTOR_LIBNCCL")
            .env_remove("GDRDOCTOR_LIBRCCL")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("NCCL_DMABUF_ENABLE")
            .env_remove("NCCL_DEBUG")
            .env_remove("NCCL_NVLS_ENABLE")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .command()
    }
    /// `nccl verify --format json`: the exit code and the document.
    fn verify(&self, root: &str, extra: &[&str]) -> (i32, Value) {
        let mut args = vec!["nccl", "verify", "--format", "json"];
        args.extend(extra);
        let out = self.command(root, &args).output().unwrap();
        (code(&out), json(&out))
    }
    fn config(&self, text: &str) -> PathBuf {
        let p = self.tmp.path().join("config.yaml");
        std::fs::write(&p, text).unwrap();
        p
    }
}

/// `(code, status)` of every finding.
fn findings(doc: &Value) -> Vec<(String, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn finding<'a>(doc: &'a Value, code: &str) -> &'a Value {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {doc:#}"))
}

fn answer(doc: &Value) -> &str {
    doc["answer"]["text"].as_str().unwrap()
}

#[test]
fn sockets_on_a_node_without_rdma_agree_with_rdma_link() {
    // Two GPUs: one communicator, P2P and SHM off (the stand-in refuses otherwise), an all-reduce
    // over NET/Socket, summed right; NCCL's Socket fallback is the rdma-no-device verdict.
    let (code, doc) = Run::h200().verify("h200x2-vm", &[]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [
            ("nccl-no-gdr".into(), "fail".into()),
            ("nccl-agrees".into(), "pass".into())
        ]
    );
    assert_eq!(
        answer(&doc),
        format!(
            "NCCL 2.28.9 ({}) falls back to NET/Socket: no RDMA device (NET/IB : No device found)",
            stub("nccl", &[]).display()
        )
    );
    assert_eq!(doc["answer"]["network"], "Socket");
    assert_eq!(doc["answer"]["uses_gdr"], false);
    let run = &doc["run"];
    assert_eq!(run["mode"], "all-reduce");
    assert_eq!(run["answer"]["outcome"]["result"], "ok");
    for (k, v) in [
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET,GRAPH,ENV"),
        ("NCCL_NVLS_ENABLE", "0"),
        ("NCCL_P2P_DISABLE", "1"),
        ("NCCL_SHM_DISABLE", "1"),
    ] {
        assert_eq!(run["env"][k], v, "{k}");
    }
    assert!(run["env"]["NCCL_TOPO_DUMP_FILE"].is_string());
    let no_gdr = finding(&doc, "nccl-no-gdr");
    assert!(
        no_gdr["message"]
            .as_str()
            .unwrap()
            .contains("the all-reduce over 2 rank(s) summed right"),
        "{no_gdr:#}"
    );
    // The fix is rdma-link's, through nccl explain's diagnosis.
    assert!(
        no_gdr["fix"].to_string().contains("rdma-no-device"),
        "{no_gdr:#}"
    );
    let agree = finding(&doc, "nccl-agrees")["message"].as_str().unwrap();
    assert!(agree.contains("the network (NET/Socket"), "{agree}");
    assert!(agree.contains("the RDMA NICs (none)"), "{agree}");
}

#[test]
fn gdr_on_a_pix_nic_agrees_with_placement_and_peer_memory() {
    let (code, doc) = Run::pix().verify("placement-pix", &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [
            ("nccl-uses-gdr".into(), "pass".into()),
            ("nccl-agrees".into(), "pass".into())
        ]
    );
    assert!(
        answer(&doc).ends_with("on this node uses GDR on mlx5_0"),
        "{}",
        answer(&doc)
    );
    assert_eq!(doc["run"]["mode"], "one-rank");
    assert!(doc["run"]["env"].get("NCCL_P2P_DISABLE").is_none());
    let facts: Vec<(&str, bool)> = doc["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["fact"].as_str().unwrap(), c["agree"] == true))
        .collect();
    for fact in ["network", "nics", "hca-gdr", "gpu-nic"] {
        assert!(facts.contains(&(fact, true)), "{fact}: {facts:?}");
    }
    assert!(!facts.iter().any(|(_, a)| !a), "{facts:?}");
    // The human report ends with the answer.
    let out = Run::pix()
        .command("placement-pix", &["nccl", "verify"])
        .output()
        .unwrap();
    assert_eq!(crate::common::code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.trim_end().ends_with("on this node uses GDR on mlx5_0"),
        "{text}"
    );
    assert!(text.contains("a one-rank communicator"), "{text}");
}

#[test]
fn nccl_turning_gdr_off_where_gdrdoctor_expects_it_is_a_disagreement() {
    let (code, doc) = Run::pix()
        .set("FAKE_NCCL_GDR", "0")
        .verify("placement-pix", &[]);
    assert_eq!(code, 1, "{doc:#}");
    let codes = findings(&doc);
    assert!(
        codes.contains(&("nccl-no-gdr".into(), "fail".into())),
        "{codes:?}"
    );
    let differ: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "nccl-disagrees")
        .collect();
    assert!(!differ.is_empty(), "{codes:?}");
    assert!(differ.iter().all(|f| f["status"] == "warn"));
    let hca = differ
        .iter()
        .find(|f| f["subject"] == "mlx5_0 GDR")
        .unwrap_or_else(|| panic!("{differ:#?}"));
    let m = hca["message"].as_str().unwrap();
    assert!(
        m.contains("NCCL: GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"),
        "{m}"
    );
    assert!(m.contains("gdrdoctor: GDR expected"), "{m}");
}

#[test]
fn the_wrong_sum_is_caught() {
    let (code, doc) = Run::h200()
        .set("FAKE_NCCL_WRONG", "1")
        .verify("h200x2-vm", &[]);
    assert_eq!(code, 1, "{doc:#}");
    let f = finding(&doc, "nccl-all-reduce-wrong");
    assert_eq!(f["status"], "fail");
    let m = f["message"].as_str().unwrap();
    // Rank 0, the middle element of 1 Mi: (524288 % 1000 + 1) * (1 + 2) = 867, and one more.
    assert!(
        m.contains("1 of 2097152 int32 elements differ; the first, rank 0 element 524288: 868 instead of 867"),
        "{m}"
    );
    assert_eq!(doc["run"]["answer"]["outcome"]["result"], "wrong");
}

#[test]
fn an_init_failure_is_nccls_error_with_its_own_words() {
    let (code, doc) = Run::h200()
        .set("FAKE_NCCL_INIT", "2")
        .verify("h200x2-vm", &[]);
    assert_eq!(code, 1, "{doc:#}");
    let f = finding(&doc, "nccl-error");
    assert_eq!(f["status"], "fail");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("ncclCommInitAll returned 2 (unhandled system error"),
        "{m}"
    );
    assert!(m.contains(": NET/IB : Got async event : port error"), "{m}");
    assert!(
        answer(&doc).contains("failed: ncclCommInitAll"),
        "{}",
        answer(&doc)
    );
    assert!(!findings(&doc).iter().any(|(c, _)| c == "nccl-uses-gdr"));
}

#[test]
fn a_hang_is_killed_at_the_deadline_and_is_unknown() {
    let run = Run::h200().set("FAKE_NCCL_HANG", "1");
    let config = run.config("timeouts: {nccl_verify_s: 1}\n");
    let log = run.tmp.path().join("log");
    let ((code, doc), took) = in_time(Duration::from_secs(8), || {
        run.verify(
            "h200x2-vm",
            &[
                "--config",
                config.to_str().unwrap(),
                "--log-dir",
                log.to_str().unwrap(),
            ],
        )
    });
    assert!(took.last().unwrap() < &Duration::from_secs(8), "{took:?}");
    assert_eq!(code, 2, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [("nccl-verify-failed".into(), "unknown".into())]
    );
    let m = finding(&doc, "nccl-verify-failed")["message"]
        .as_str()
        .unwrap();
    assert!(
        m.contains("did not finish within 1 s; it was killed"),
        "{m}"
    );
    assert!(m.contains("NCCL hung"), "{m}");
    assert_eq!(doc["answer"]["uses_gdr"], Value::Null);
    // --log-dir kept what NCCL wrote before it hung.
    let kept = std::fs::read_to_string(log.join("nccl.log")).unwrap();
    assert!(kept.contains("stub: hanging in init"), "{kept}");
}

/// The same hang under `--deadline`: the run is cut short by the operator's bound, which is
/// not a verdict on NCCL, and says so (`nccl-verify-cut-short`, not `nccl-verify-failed`).
#[test]
fn a_hang_cut_by_the_deadline_says_so() {
    let run = Run::h200().set("FAKE_NCCL_HANG", "1");
    let ((code, doc), took) = in_time(Duration::from_secs(6), || {
        run.verify("h200x2-vm", &["--deadline", "2"])
    });
    assert!(took.last().unwrap() < &Duration::from_secs(6), "{took:?}");
    assert_eq!(code, 2, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [("nccl-verify-cut-short".into(), "unknown".into())]
    );
    let m = finding(&doc, "nccl-verify-cut-short")["message"]
        .as_str()
        .unwrap();
    assert!(m.contains("cut short by the --deadline of 2 s"), "{m}");
}

#[test]
fn a_crash_is_reported_with_its_signal() {
    let (code, doc) = Run::h200()
        .set("FAKE_NCCL_CRASH", "1")
        .verify("h200x2-vm", &[]);
    assert_eq!(code, 2, "{doc:#}");
    let f = finding(&doc, "nccl-verify-failed");
    assert_eq!(f["status"], "unknown");
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("SIGSEGV"), "{m}");
    // The log up to the crash is still read.
    assert!(
        f["evidence"]
            .to_string()
            .contains("lines from NCCL before it stopped"),
        "{f:#}"
    );
}

#[test]
fn no_library_names_the_packages_to_install() {
    let (code, doc) = Run::h200()
        .set("GDRDOCTOR_LIBNCCL", MISSING)
        .verify("h200x2-vm", &[]);
    assert_eq!(code, 2, "{doc:#}");
    let f = finding(&doc, "nccl-library-missing");
    assert_eq!(f["status"], "unknown");
    let text = f.to_string();
    assert!(text.contains("pip install nvidia-nccl-cu12"), "{text}");
    assert!(text.contains("libnccl2"), "{text}");
    assert!(text.contains(MISSING), "{text}");
}

/// A directory with the stand-in as `libnccl.so.2` (and the pip wheel's layout under it).
fn installed(dir: &Path, under: &str) -> PathBuf {
    let lib = dir.join(under);
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(stub("nccl", &[]), lib.join("libnccl.so.2")).unwrap();
    lib
}

#[test]
fn the_library_is_found_by_the_loader_and_in_the_pip_wheel() {
    // LD_LIBRARY_PATH: the dynamic loader's own search for libnccl.so.2.
    let run = Run::h200().unset("GDRDOCTOR_LIBNCCL");
    let lib = installed(run.tmp.path(), "ld");
    let run = run.set("LD_LIBRARY_PATH", lib.to_str().unwrap());
    let (code, doc) = run.verify("h200x2-vm", &[]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["run"]["search"]["candidates"][0]["source"], "loader");
    assert_eq!(
        doc["run"]["library_file"],
        lib.join("libnccl.so.2")
            .canonicalize()
            .unwrap()
            .to_str()
            .unwrap()
    );
    // No libnccl.so.2 for the loader: the NVIDIA wheel's nvidia/nccl/lib under a sys.path entry
    // of the python3 on PATH.
    let run = Run::h200().unset("GDRDOCTOR_LIBNCCL");
    let site = run.tmp.path().join("site-packages");
    let wheel = installed(&site, "nvidia/nccl/lib");
    let path = python(run.tmp.path(), Some(&[Path::new("/nonexistent"), &site]));
    let run = run.set("PATH", &format!("{path}:/usr/bin:/bin"));
    let (code, doc) = run.verify("h200x2-vm", &[]);
    assert_eq!(code, 1, "{doc:#}");
    let candidates = &doc["run"]["search"]["candidates"];
    assert_eq!(candidates[0]["library"], "libnccl.so.2");
    assert_eq!(candidates[1]["source"], "pip-wheel");
    assert_eq!(
        candidates[1]["library"],
        wheel.join("libnccl.so.2").to_str().unwrap()
    );
    assert!(
        finding(&doc, "nccl-no-gdr")["evidence"]
            .to_string()
            .contains("libnccl (pip-wheel)"),
        "{doc:#}"
    );
    // --library: that file alone.
    let (code, doc) = Run::h200().unset("GDRDOCTOR_LIBNCCL").verify(
        "h200x2-vm",
        &["--library", stub("nccl", &[]).to_str().unwrap()],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["run"]["search"]["candidates"][0]["source"], "option");
}

#[test]
fn check_runs_it_only_when_asked() {
    let run = Run::h200();
    let report = |extra: &[&str]| {
        let mut args = vec!["check", "--gpu-probe", "--format", "json"];
        args.extend(extra);
        let out = run.command("h200x2-vm", &args).output().unwrap();
        (code(&out), json(&out))
    };
    // Not asked: left out of the report (no extra skipped check on every node), unless named.
    let (_, off) = report(&[]);
    assert!(
        !off["checks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == "nccl-verify")
    );
    assert!(off["inventory"].get("nccl_verify").is_none());
    let (_, named) = report(&["--select", "nccl-verify"]);
    let c = check(&named, "nccl-verify");
    assert_eq!(c["status"], "skip");
    assert_eq!(c["findings"][0]["code"], "nccl-verify-not-run");
    assert!(
        c["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("--nccl-verify runs it")
    );
    let (code, on) = report(&["--nccl-verify"]);
    assert_eq!(code, 1);
    let c = check(&on, "nccl-verify");
    assert_eq!(c["status"], "fail", "{c:#}");
    let codes: Vec<&str> = c["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(codes, ["nccl-no-gdr", "nccl-agrees"]);
    let inv = &on["inventory"]["nccl_verify"];
    assert_eq!(inv["collective"], "nccl");
    assert_eq!(inv["version"], "2.28.9");
    assert_eq!(inv["network"], "Socket");
    assert_eq!(inv["mode"], "all-reduce");
    // A hang in check: unknown, never a pass, and the rest of the report stands.
    let run = Run::h200().set("FAKE_NCCL_HANG", "1");
    let config = run.config("timeouts: {nccl_verify_s: 1}\n");
    let out = run
        .command("h200x2-vm", &[])
        .arg("--config")
        .arg(&config)
        .args(["check", "--gpu-probe", "--nccl-verify", "--format", "json"])
        .output()
        .unwrap();
    crate::common::code(&out);
    let doc = json(&out);
    let c = check(&doc, "nccl-verify");
    assert_eq!(c["status"], "unknown", "{c:#}");
    assert_eq!(c["findings"][0]["code"], "nccl-verify-failed");
}

#[test]
fn nccls_topology_dump_is_held_against_sysfs() {
    // As dumped by the stand-in: the GPU and mlx5_0 under one switch, PIX as placement says.
    let (_, doc) = Run::pix().verify("placement-pix", &[]);
    let facts: Vec<(String, String, Value)> = doc["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["fact"].as_str().unwrap().starts_with("topo-"))
        .map(|c| {
            (
                c["fact"].as_str().unwrap().to_owned(),
                c["nccl"].as_str().unwrap().to_owned(),
                c["agree"].clone(),
            )
        })
        .collect();
    assert_eq!(
        facts,
        [
            ("topo-gpus".into(), "0000:03:00.0".into(), Value::Bool(true)),
            ("topo-nics".into(), "mlx5_0".into(), Value::Bool(true)),
            ("topo-gpu-nic".into(), "PIX".into(), Value::Bool(true)),
        ]
    );
    // Sockets on the VM: no RDMA NIC on either side, both GPUs found.
    let (_, doc) = Run::h200().verify("h200x2-vm", &[]);
    let agree: Vec<(&str, &Value)> = doc["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["fact"].as_str().unwrap(), &c["agree"]))
        .collect();
    assert!(
        agree.contains(&("topo-gpus", &Value::Bool(true))),
        "{agree:?}"
    );
    assert!(
        agree.contains(&("topo-nics", &Value::Bool(true))),
        "{agree:?}"
    );
    // NCCL's tree with the NIC and GPU straight under the CPU: PHB against sysfs's PIX, a
    // disagreement naming both.
    let (code, doc) = Run::pix()
        .set("FAKE_NCCL_FLAT", "1")
        .verify("placement-pix", &[]);
    assert_eq!(code, 1, "{doc:#}");
    let differ = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "nccl-disagrees")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(
        differ["subject"],
        "GPU 0000:03:00.0 -> mlx5_0 in NCCL's topology"
    );
    let m = differ["message"].as_str().unwrap();
    assert!(m.contains("NCCL: PHB; gdrdoctor: PIX"), "{m}");
    assert!(
        differ["fix"].to_string().contains("pcie-placement"),
        "{differ:#}"
    );
}

#[test]
fn nccl_on_a_vm_with_its_topology_file_agrees_with_check() {
    // Issue 25: the Azure ND A100 v4 VM whose nccl.conf names the image's topology file. In
    // sysfs its GPUs and NICs are on separate host bridges (NODE: no GDR at PXB); on the tree
    // NCCL builds from the file GPU0 and mlx5_0 are PIX, and `check` passes them. NCCL using
    // GDR there at PIX is what gdrdoctor expects too, not a disagreement. (The stand-in prints
    // every GPU with every NIC at one path type, so the copy keeps GPU0 and mlx5_0 only.)
    let (_dir, root) = fixture_copy("azure-ndv4-vm-topo");
    for entry in std::fs::read_dir(root.join("sys/bus/pci/devices")).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name != "0001:00:00.0" && name != "0101:00:00.0" {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    for entry in std::fs::read_dir(root.join("sys/class/infiniband")).unwrap() {
        let entry = entry.unwrap();
        if entry.file_name() != "mlx5_0" {
            std::fs::remove_file(entry.path()).unwrap();
        }
    }
    let run = Run::new("0001:00:00.0")
        .set("FAKE_NCCL_NET", "IB")
        .set("FAKE_NCCL_NICS", "mlx5_0@0101:00:00.0");
    let out = run
        .command_at(&root, &["nccl", "verify", "--format", "json"])
        .output()
        .unwrap();
    let (code, doc) = (crate::common::code(&out), json(&out));
    let codes = findings(&doc);
    assert!(!codes.iter().any(|(c, _)| c == "nccl-disagrees"), "{doc:#}");
    assert_eq!(code, 0, "{doc:#}");
    let pairs: Vec<&Value> = doc["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["fact"] == "gpu-nic" || c["fact"] == "topo-gpu-nic")
        .collect();
    assert_eq!(pairs.len(), 2, "{doc:#}");
    for p in pairs {
        assert_eq!(p["agree"], true, "{p:#}");
        let ours = p["gdrdoctor"].as_str().unwrap();
        assert!(
            ours.starts_with("PIX in NCCL's topology file (NODE in sysfs)"),
            "{ours}"
        );
    }
}

// -- RCCL on AMD GPUs: the same run, with the stand-in librccl and HIP ------------------------

/// The MI300X fixture cut to its first `pairs` GPU-NIC pairs (GPU 0000:23:00.0 beside bnxt_re0,
/// 0000:25:00.0 beside bnxt_re1, all four under one switch): the stand-in prints every GPU with
/// every NIC at one path type, PIX, which the pairs of the other switch are not.
fn mi300x(pairs: usize) -> (tempfile::TempDir, PathBuf, String) {
    let (dir, root) = fixture_copy("amd-mi300x-roce");
    let all = [
        ("0000:23:00.0", "0000:24:00.0", "bnxt_re0", "ens1f0np0"),
        ("0000:25:00.0", "0000:26:00.0", "bnxt_re1", "ens2f0np0"),
        ("0000:43:00.0", "0000:44:00.0", "bnxt_re2", "ens3f0np0"),
        ("0000:45:00.0", "0000:46:00.0", "bnxt_re3", "ens4f0np0"),
    ];
    for (gpu, nic, ib, net) in &all[pairs..] {
        for p in [
            format!("sys/bus/pci/devices/{gpu}"),
            format!("sys/bus/pci/devices/{nic}"),
            format!("sys/class/infiniband/{ib}"),
            format!("sys/class/net/{net}"),
        ] {
            std::fs::remove_file(root.join(p)).unwrap();
        }
    }
    let nics = all[..pairs]
        .iter()
        .map(|(_, nic, ib, _)| format!("{ib}@{nic}"))
        .collect::<Vec<_>>()
        .join(",");
    (dir, root, nics)
}

impl Run {
    /// RCCL's run on a cut of the MI300X fixture ([`mi300x`]), with `NCCL_DMABUF_ENABLE=1`
    /// (what `gdrdoctor nccl` writes there): the JSON report.
    fn verify_mi300x(&self, pairs: usize, extra: &[&str]) -> (i32, Value) {
        let (_dir, root, nics) = mi300x(pairs);
        let mut args = vec!["nccl", "verify", "--format", "json"];
        args.extend(extra);
        let out = self
            .command_at(&root, &args)
            .env("FAKE_NCCL_NICS", nics)
            .output()
            .unwrap();
        (code(&out), json(&out))
    }
}

#[test]
fn rccl_on_amd_gpus_runs_and_agrees() {
    // Two GPUs: RCCL's all-reduce over its network, summed right, GDR on both bnxt_re NICs'
    // side as the DMA-BUF path predicts; everything the two sides have is the same.
    let run = Run::mi300x().set("NCCL_DMABUF_ENABLE", "1");
    let (code, doc) = run.verify_mi300x(2, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [
            ("nccl-uses-gdr".into(), "pass".into()),
            ("nccl-agrees".into(), "pass".into())
        ]
    );
    assert_eq!(
        answer(&doc),
        format!(
            "RCCL 2.22.3 ({}) on this node uses GDR on bnxt_re0",
            stub("rccl", &[]).display()
        )
    );
    assert_eq!(doc["answer"]["version"], "2.22.3");
    let run = &doc["run"];
    assert_eq!(run["library"], "rccl");
    assert_eq!(run["mode"], "all-reduce");
    assert_eq!(run["answer"]["outcome"]["result"], "ok");
    assert_eq!(run["answer"]["version_code"], 22203);
    assert_eq!(
        run["answer"]["hip_library"],
        stub("hip", &[]).to_str().unwrap()
    );
    assert_eq!(run["answer"]["cuda_library"], Value::Null);
    // HIP's ordinals of the GPUs, by bus id.
    let ordinals: Vec<(&str, i64)> = run["answer"]["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["bus_id"].as_str().unwrap(),
                g["ordinal"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ordinals, [("0000:23:00.0", 0), ("0000:25:00.0", 1)]);
    // RCCL's own switches off (the stand-in refuses to start without them).
    for (k, v) in [
        ("NCCL_P2P_DISABLE", "1"),
        ("NCCL_SHM_DISABLE", "1"),
        ("RCCL_MSCCL_ENABLE", "0"),
        ("RCCL_MSCCLPP_ENABLE", "0"),
    ] {
        assert_eq!(run["env"][k], v, "{k}");
    }
    // RCCL's banner read from its log.
    let nccl = &doc["explanation"]["nodes"][0]["nccl"];
    assert_eq!(nccl["library"], "RCCL");
    assert!(
        nccl["version"].as_str().unwrap().starts_with("2.22.3"),
        "{nccl}"
    );
    // The human report names RCCL and HIP's library, not NCCL and CUDA.
    let (_dir, root, nics) = mi300x(2);
    let out = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .set("FAKE_NCCL_NICS", &nics)
        .command_at(&root, &["nccl", "verify"])
        .output()
        .unwrap();
    assert_eq!(crate::common::code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("RCCL 2.22.3 ("), "{text}");
    assert!(text.contains("; GDRDOCTOR_LIBRCCL) on 2 GPUs"), "{text}");
    assert!(
        text.contains("the all-reduce goes through RCCL's network"),
        "{text}"
    );
    assert!(text.contains("RCCL against gdrdoctor:"), "{text}");
    assert!(!text.contains("NCCL 2."), "{text}");
}

#[test]
fn rccl_on_one_amd_gpu_is_a_one_rank_communicator() {
    let (code, doc) = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .verify_mi300x(1, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["run"]["mode"], "one-rank");
    assert!(doc["run"]["env"].get("RCCL_MSCCL_ENABLE").is_none());
    assert!(
        answer(&doc).ends_with("on this node uses GDR on bnxt_re0"),
        "{}",
        answer(&doc)
    );
}

#[test]
fn rccl_without_its_dmabuf_opt_in_does_not_use_gdr() {
    // RCCL's DMA-BUF path is opt-in: without NCCL_DMABUF_ENABLE=1 on a node with no AMD
    // peer-memory module (the stand-in's default, as RCCL does there), no NIC can reach GPU
    // memory. The cause is the opt-in, not the node.
    let (code, doc) = Run::mi300x().verify_mi300x(2, &[]);
    assert_eq!(code, 1, "{doc:#}");
    // gdrdoctor expects it too: the two sides agree, and the finding is RCCL's answer.
    assert_eq!(
        findings(&doc),
        [
            ("nccl-no-gdr".into(), "fail".into()),
            ("nccl-agrees".into(), "pass".into())
        ]
    );
    let f = finding(&doc, "nccl-no-gdr");
    let m = f["message"].as_str().unwrap();
    assert!(m.starts_with("RCCL 2.22.3 ("), "{m}");
    assert!(m.contains("does not use GDR"), "{m}");
    assert!(
        m.contains("its DMA-BUF path was off (opt-in: NCCL_DMABUF_ENABLE=1)"),
        "{m}"
    );
    let fix = f["fix"]["summary"].as_str().unwrap();
    assert!(fix.starts_with("Set NCCL_DMABUF_ENABLE=1"), "{fix}");
    let hca = doc["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["fact"] == "hca-gdr")
        .unwrap();
    assert_eq!(hca["agree"], true, "{hca:#}");
    assert!(
        hca["gdrdoctor"]
            .as_str()
            .unwrap()
            .contains("which RCCL takes only with NCCL_DMABUF_ENABLE=1, not set"),
        "{hca:#}"
    );
}

#[test]
fn rccl_summing_wrong_is_caught() {
    let (code, doc) = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .set("FAKE_NCCL_WRONG", "1")
        .verify_mi300x(2, &[]);
    assert_eq!(code, 1, "{doc:#}");
    let f = finding(&doc, "nccl-all-reduce-wrong");
    assert_eq!(f["status"], "fail");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("'s all-reduce over 2 rank(s) summed wrong: 1 of 2097152 int32 elements differ; the first, rank 0 element 524288: 868 instead of 867"),
        "{m}"
    );
    assert!(m.starts_with("RCCL 2.22.3 ("), "{m}");
    assert_eq!(doc["run"]["answer"]["outcome"]["result"], "wrong");
}

#[test]
fn no_rccl_names_rocms_package() {
    // Not installed: a finding with the fix (ROCm's rccl package), exit 2, never a panic.
    let (code, doc) = Run::mi300x()
        .set("GDRDOCTOR_LIBRCCL", MISSING)
        .verify_mi300x(2, &[]);
    assert_eq!(code, 2, "{doc:#}");
    assert_eq!(
        findings(&doc),
        [("nccl-library-missing".into(), "unknown".into())]
    );
    let f = finding(&doc, "nccl-library-missing");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.starts_with("no RCCL library could be loaded: tried "),
        "{m}"
    );
    assert!(m.contains(MISSING), "{m}");
    let text = f["fix"].to_string();
    assert!(text.contains("apt-get install rccl"), "{text}");
    assert!(text.contains("dnf install rccl"), "{text}");
    assert!(!text.contains("libnccl2"), "{text}");
    assert!(
        answer(&doc).starts_with("no RCCL library"),
        "{}",
        answer(&doc)
    );
    // No HIP either: RCCL loads, the runtime does not (the finding says HIP, not CUDA).
    let (code, doc) = Run::mi300x()
        .set("GDRDOCTOR_LIBHIP", MISSING)
        .verify_mi300x(2, &["--no-gpu-probe"]);
    assert_eq!(code, 2, "{doc:#}");
    let f = finding(&doc, "nccl-verify-failed");
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("could not be run: HIP: dlopen: "), "{m}");
    assert_eq!(doc["run"]["answer"]["outcome"]["result"], "hip-error");
    // A HIP without the stream calls: the symbol named.
    let (code, doc) = Run::mi300x()
        .set(
            "GDRDOCTOR_LIBHIP",
            stub("hip", &["hipStreamCreate"]).to_str().unwrap(),
        )
        .verify_mi300x(2, &["--no-gpu-probe"]);
    assert_eq!(code, 2, "{doc:#}");
    let m = finding(&doc, "nccl-verify-failed")["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(m.contains("lacks hipStreamCreate"), "{m}");
}

/// RCCL as ROCm and PyTorch install it: the loader's `librccl.so.1`, PyTorch's ROCm wheel
/// (`torch/lib/librccl.so`) and ROCm's wheel of libraries (`_rocm_sdk_libraries_*/lib`).
#[test]
fn rccl_is_found_by_the_loader_and_in_the_wheels() {
    let lib_in = |dir: &Path, under: &str, name: &str| {
        let lib = dir.join(under);
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::copy(stub("rccl", &[]), lib.join(name)).unwrap();
        lib.join(name)
    };
    let run = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .unset("GDRDOCTOR_LIBRCCL");
    let ld = lib_in(run.tmp.path(), "rocm/lib", "librccl.so.1");
    let run = run.set("LD_LIBRARY_PATH", ld.parent().unwrap().to_str().unwrap());
    let (code, doc) = run.verify_mi300x(2, &[]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["run"]["search"]["candidates"][0]["library"],
        "librccl.so.1"
    );
    assert_eq!(doc["run"]["search"]["candidates"][0]["source"], "loader");
    assert_eq!(
        doc["run"]["library_file"],
        ld.canonicalize().unwrap().to_str().unwrap()
    );
    // No librccl.so.1 for the loader: the wheels under the python3's sys.path.
    let run = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .unset("GDRDOCTOR_LIBRCCL");
    let site = run.tmp.path().join("site-packages");
    let torch = lib_in(&site, "torch/lib", "librccl.so");
    let sdk = lib_in(
        &site,
        "_rocm_sdk_libraries_gfx94X_dcgpu/lib",
        "librccl.so.1",
    );
    let path = python(run.tmp.path(), Some(&[Path::new("/nonexistent"), &site]));
    let run = run.set("PATH", &format!("{path}:/usr/bin:/bin"));
    let (code, doc) = run.verify_mi300x(2, &[]);
    assert_eq!(code, 0, "{doc:#}");
    let candidates: Vec<(&str, &str)> = doc["run"]["search"]["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["library"].as_str().unwrap(),
                c["source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        candidates,
        [
            ("librccl.so.1", "loader"),
            (torch.to_str().unwrap(), "pip-wheel"),
            (sdk.to_str().unwrap(), "pip-wheel"),
        ]
    );
    assert_eq!(doc["run"]["library_file"], torch.to_str().unwrap());
    assert!(
        finding(&doc, "nccl-uses-gdr")["evidence"]
            .to_string()
            .contains("librccl (pip-wheel)"),
        "{doc:#}"
    );
    let python = doc["run"]["search"]["python"].as_str().unwrap();
    assert!(
        python.contains("2 sys.path entries, 2 with torch/lib/librccl.so"),
        "{python}"
    );
}

#[test]
fn check_runs_rccl_on_amd_gpus() {
    let (_dir, root, nics) = mi300x(2);
    let out = Run::mi300x()
        .set("NCCL_DMABUF_ENABLE", "1")
        .set("FAKE_NCCL_NICS", &nics)
        .command_at(
            &root,
            &["check", "--gpu-probe", "--nccl-verify", "--format", "json"],
        )
        .output()
        .unwrap();
    crate::common::code(&out);
    let doc = json(&out);
    let c = check(&doc, "nccl-verify");
    assert_eq!(c["status"], "pass", "{c:#}");
    assert!(
        c["findings"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("RCCL 2.22.3 ("),
        "{c:#}"
    );
    let inv = &doc["inventory"]["nccl_verify"];
    assert_eq!(inv["collective"], "rccl");
    assert_eq!(inv["version"], "2.22.3");
    assert_eq!(inv["mode"], "all-reduce");
    assert_eq!(inv["library_source"], "environment");
}

/// `gdrdoctor nccl` asks RCCL's version as it asks NCCL's (on a live node of AMD GPUs): a child
/// that loads the first library of the search that loads and calls `ncclGetVersion`, nothing
/// else (no GPU, no HIP). RCCL answers the NCCL release it is built on.
#[test]
fn rccls_version_is_asked_of_the_library() {
    let spec = serde_json::json!({
        "library": "rccl",
        "libraries": [MISSING, stub("rccl", &[])],
        "gpus": [],
        "elements": 0,
        "version_only": true,
    })
    .to_string();
    let out = Gdrdoctor::new()
        .args(["nccl-child", "--spec", &spec])
        .env("FAKE_NCCL_VERSION", "22203")
        .env("GDRDOCTOR_LIBHIP", MISSING)
        .command()
        .output()
        .unwrap();
    let text = stdout(&out);
    let answer: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("gdrdoctor-answer: "))
        .map(|a| serde_json::from_str(a).unwrap())
        .unwrap_or_else(|| panic!("{text}\n{}", stderr(&out)));
    assert_eq!(answer["outcome"]["result"], "loaded", "{answer:#}");
    assert_eq!(answer["version"], "2.22.3");
    assert_eq!(answer["library"], stub("rccl", &[]).to_str().unwrap());
    assert_eq!(answer["tried"][0]["library"], MISSING);
    assert!(answer.get("hip_library").is_none(), "{answer:#}");
}
