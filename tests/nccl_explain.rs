//! `gdrdoctor nccl explain`: real NCCL logs from public threads (fixtures/nccl-logs, each with
//! its source and the cause the thread established in FIXTURE.md), and bad input of every kind.
#![allow(clippy::disallowed_methods)] // tests read the repository and their own temp files

use crate::common::*;
use std::io::Write;

const DIR: &str = "fixtures/nccl-logs";

/// Every log, with the exit code and the causes (in order) the explanation must give: what the
/// thread established, as FIXTURE.md tells it.
struct Case {
    name: &'static str,
    exit: i32,
    causes: &'static [&'static str],
    /// Codes the explanation must name.
    codes: &'static [&'static str],
    /// Text the human explanation must hold, and text it must not.
    says: &'static [&'static str],
    not_says: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "aibrix-758-ray-pxn-gdr1",
        exit: 0,
        causes: &[],
        codes: &[],
        says: &["rings `use ring ... GDR 1`", "NCCL 2.24 or later"],
        not_says: &[],
    },
    Case {
        name: "aks-rdma-infiniband-36-level-sys",
        exit: 0,
        causes: &[],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "aws-k8s-tester-473-efa-sockets",
        exit: 1,
        causes: &["sockets"],
        codes: &["rdma-no-device"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "aws-ofi-nccl-715-ib-disable",
        exit: 1,
        causes: &["plugin-failed"],
        codes: &["rdma-no-device"],
        says: &[
            "node algo-1:",
            "aws-ofi-nccl (NET/OFI) failed to initialize",
            "is not the cause",
            "the network plugin aws-ofi-nccl (NET/OFI) failed to initialize, and NCCL went on without it",
        ],
        not_says: &["Unset NCCL_IB_DISABLE", "NCCL decided against"],
    },
    Case {
        name: "aws-ofi-nccl-889-plugin-init-failed",
        exit: 1,
        causes: &["plugin-failed"],
        codes: &["uverbs-missing"],
        says: &[
            "node ip-10-36-29-253:",
            "GDR disabled on GDR-supported instance type",
            "\nno NET connection in the log: the network plugin aws-ofi-nccl (NET/OFI) failed to initialize, and NCCL went on without it\n",
        ],
        // The plugin failed: NCCL decided nothing.
        not_says: &[
            "no host in the log",
            "NCCL decided against",
            "NCCL's decision",
        ],
    },
    Case {
        name: "awsome-distributed-ai-386-ray-efa",
        exit: 1,
        causes: &["plugin-failed"],
        codes: &["rdma-no-device"],
        says: &[
            "node ini-worker-ray-worker-p5:",
            "network Socket; plugin aws-ofi-nccl\n",
        ],
        not_says: &["repeated", "across cluster"],
    },
    Case {
        name: "deeplearningexamples-383-level-phb",
        exit: 1,
        causes: &["distance", "distance"],
        codes: &["gpu-nic-too-far"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-1151-distance",
        exit: 1,
        causes: &["distance"],
        codes: &["gpu-nic-too-far"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-1412-no-gdrdma",
        exit: 1,
        causes: &["not-explained"],
        codes: &["peermem-not-loaded"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-1453-ibext-gdrdma",
        exit: 0,
        causes: &[],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-1653-wsl-single-node",
        exit: 3,
        causes: &["sockets"],
        codes: &["libibverbs-missing"],
        says: &["GPUDirect RDMA not exercised", "nNodes 1"],
        not_says: &[],
    },
    Case {
        name: "nccl-1657-link-local-gid",
        exit: 1,
        causes: &["not-explained"],
        codes: &[],
        says: &[
            "NCCL 2.20 or later",
            "GID 0 (NCCL_IB_GID_INDEX=0 in the environment), a link-local GID",
        ],
        not_says: &[],
    },
    Case {
        name: "nccl-1676-nvidia-peermem-unseen",
        exit: 1,
        causes: &["no-peer-memory"],
        codes: &["peermem-not-registered"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-1737-completion-errors",
        exit: 1,
        causes: &[],
        codes: &["acs-redirect-on-path"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-226-aws-sockets",
        exit: 1,
        causes: &["sockets", "sockets"],
        codes: &["rdma-no-device"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-392-roce-partial",
        exit: 1,
        causes: &["not-explained"],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-451-container-cannot-open",
        exit: 1,
        causes: &["sockets"],
        codes: &["uverbs-no-access"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-707-gdrdma-ib",
        exit: 0,
        causes: &[],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-897-gdr-one-side",
        exit: 1,
        causes: &["gdr-one-side"],
        codes: &["peermem-not-loaded"],
        says: &[
            "(no prefix: host and rank unknown)",
            "missing on the node of rank 2",
        ],
        not_says: &[],
    },
    Case {
        name: "nccl-899-no-module",
        exit: 1,
        causes: &["no-peer-memory", "not-explained"],
        codes: &["peermem-not-loaded"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-941-container-no-device",
        exit: 1,
        causes: &["sockets"],
        codes: &["rdma-no-device"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-988-ibext-2-12-no-decision",
        exit: 1,
        causes: &[],
        codes: &[],
        says: &[
            "needs NCCL 2.12.9: no DMA-BUF path before 2.13",
            "nvidia_peermem",
        ],
        not_says: &[],
    },
    Case {
        name: "nccl-tests-133-roce-gdrdma",
        exit: 0,
        causes: &[],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-tests-245-aws-ofi",
        exit: 1,
        causes: &["plugin-disabled"],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nccl-tests-36-gdr-read-off",
        exit: 1,
        causes: &["gdr-read-off"],
        codes: &[],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "nv_peer_memory-56-distance",
        exit: 1,
        causes: &["distance", "distance"],
        codes: &["gpu-nic-too-far"],
        says: &[],
        not_says: &[],
    },
    Case {
        name: "rccl-tests-163-mi50-single-node",
        exit: 3,
        causes: &["sockets"],
        codes: &["libibverbs-missing"],
        says: &[
            "node z292: RCCL 2.21.5-HEAD:9a0e6a1",
            "NCCL_DMABUF_ENABLE=1",
            "every rank on z292",
        ],
        not_says: &[],
    },
    Case {
        name: "rocm-systems-4203-topo-expl-no-prefix",
        exit: 1,
        causes: &["distance", "distance"],
        codes: &["gpu-nic-too-far"],
        says: &[
            "3 without NCCL's prefix",
            "node (no prefix: host and rank unknown)",
        ],
        not_says: &[],
    },
    Case {
        name: "training-on-eks-gdr0-other-rank",
        exit: 1,
        causes: &["gdr-off-elsewhere"],
        codes: &[],
        says: &[
            "all 24 NET connections in the log used GPUDirect RDMA",
            "GDR off on another rank: get that rank's log",
            "plugin aws-ofi-nccl",
        ],
        not_says: &["NCCL decided against"],
    },
    Case {
        name: "training-on-eks-ofi-no-provider",
        exit: 1,
        causes: &["plugin-failed"],
        codes: &[],
        says: &[
            "node llama-3-8b-node-0-0: NCCL 2.27.3+cuda12.9",
            "aws-ofi-nccl (NET/OFI) failed to initialize",
            "Unable to find a protocol that worked",
        ],
        not_says: &["no host", "NCCL_IB_DISABLE"],
    },
    Case {
        name: "vllm-2734-ray-single-node",
        exit: 3,
        causes: &["sockets"],
        codes: &["rdma-no-device"],
        says: &["plugin IBext\n", "GPUDirect RDMA not exercised"],
        not_says: &["repeated", "[32m"],
    },
];

fn explain(args: &[&str]) -> std::process::Output {
    let mut all = vec!["nccl", "explain"];
    all.extend_from_slice(args);
    gdrdoctor(&all)
}

fn log(name: &str) -> String {
    format!("{DIR}/{name}.log")
}

#[test]
fn every_log_is_listed_and_documented() {
    let doc = std::fs::read_to_string(crate_dir().join(DIR).join("FIXTURE.md")).unwrap();
    let mut names = Vec::new();
    for e in std::fs::read_dir(crate_dir().join(DIR)).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if let Some(stem) = name.strip_suffix(".log") {
            names.push(stem.to_owned());
        }
    }
    names.sort();
    let listed: Vec<String> = CASES.iter().map(|c| c.name.to_owned()).collect();
    assert_eq!(names, listed, "fixtures/nccl-logs and CASES differ");
    for n in &names {
        assert!(
            doc.contains(&format!("`{n}.log`")),
            "{n}.log is not in FIXTURE.md"
        );
    }
    assert!(names.len() >= 15);
}

/// The explanation of every real log, snapshotted, with the causes the thread established.
#[test]
fn real_logs() {
    for case in CASES {
        let out = explain(&[&log(case.name)]);
        assert_eq!(code(&out), case.exit, "{}:\n{}", case.name, stdout(&out));
        insta::assert_snapshot!(case.name, stdout(&out));
        let j = json(&explain(&["--format", "json", &log(case.name)]));
        let causes: Vec<&str> = j["diagnoses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["cause"].as_str().unwrap())
            .collect();
        assert_eq!(causes, case.causes, "{}", case.name);
        let text = j.to_string();
        for c in case.codes {
            assert!(
                text.contains(&format!("\"code\":\"{c}\"")),
                "{}: no {c}",
                case.name
            );
        }
        assert_eq!(j["verdict"]["exit_code"], case.exit, "{}", case.name);
        let human = stdout(&out);
        for t in case.says {
            assert!(human.contains(t), "{}: no {t:?} in\n{human}", case.name);
        }
        for t in case.not_says {
            assert!(!human.contains(t), "{}: {t:?} in\n{human}", case.name);
        }
    }
}

#[test]
fn json_for_a_few() {
    for name in [
        "nv_peer_memory-56-distance",
        "nccl-1676-nvidia-peermem-unseen",
        "nccl-tests-36-gdr-read-off",
    ] {
        let out = explain(&["--format", "json", &log(name)]);
        insta::assert_json_snapshot!(format!("{name}.json"), json(&out));
    }
}

/// Every field of every fixture's JSON is in docs/nccl-explain-json.md.
#[test]
fn json_fields_are_documented() {
    let mut outputs: Vec<serde_json::Value> = CASES
        .iter()
        .map(|case| json(&explain(&["--format", "json", &log(case.name)])))
        .collect();
    // No public log in the fixtures has GRAPH path lines: one from the one-GPU machine
    // (NCCL 2.28.9, REFERENCE.md section 9).
    let graph = temp_log(b"h:1:2 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'\nh:1:2 [0] NCCL INFO GPU/0-60 :GPU/0-60 (0/5000.0/LOC) CPU/0-ffffffffffffff (1/48.0/PHB) NET/0-0 (3/1.2/PHB) \n");
    outputs.push(json(&explain(&[
        "--format",
        "json",
        graph.path().to_str().unwrap(),
    ])));
    let fields = Fields {
        // Environment variable names are data, not fields.
        data_keys: &[(".env", Some("NAME"))],
        ..Fields::default()
    };
    let fields = assert_json_documented("docs/nccl-explain-json.md", &fields, &outputs);
    assert!(fields.contains("nodes[].paths[].path"));
    assert!(fields.contains("nodes[].gpu_nic[].distance_name"));
    assert!(fields.contains("diagnoses[].see[].code"));
}

/// Many inputs make one explanation: a job's log is often one file per node.
#[test]
fn several_files_stdin_and_gzip() {
    let a = log("nccl-tests-133-roce-gdrdma");
    let b = log("nv_peer_memory-56-distance");
    let j = json(&explain(&["--format", "json", &a, &b]));
    assert_eq!(j["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(j["verdict"]["net_connections"], 6);
    assert_eq!(j["verdict"]["exit_code"], 1);

    // gzip, told by its magic bytes, not its name.
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("job.log.gz");
    let mut e = flate2::write::GzEncoder::new(
        std::fs::File::create(&gz).unwrap(),
        flate2::Compression::default(),
    );
    e.write_all(&std::fs::read(crate_dir().join(&b)).unwrap())
        .unwrap();
    e.finish().unwrap();
    let plain = stdout(&explain(&[&b]));
    let zipped = explain(&[gz.to_str().unwrap()]);
    assert_eq!(code(&zipped), 1);
    assert_eq!(
        stdout(&zipped).lines().skip(1).collect::<Vec<_>>(),
        plain.lines().skip(1).collect::<Vec<_>>()
    );
    assert!(stdout(&zipped).lines().next().unwrap().contains(", gzip"));

    // Standard input.
    let mut child = Gdrdoctor::new()
        .args(["nccl", "explain", "-"])
        .command()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(crate_dir().join(&b)).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 1);
    assert!(stdout(&out).starts_with("-: 32 lines"), "{}", stdout(&out));
}

fn temp_log(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    f
}

#[test]
fn not_an_nccl_log_is_exit_2() {
    // Binary junk: every byte value, some newlines.
    let junk: Vec<u8> = (0..200_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let f = temp_log(&junk);
    let out = explain(&[f.path().to_str().unwrap()]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("no `NCCL INFO` or `NCCL WARN` line"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "");
    // A program's output with no NCCL in it; an empty file.
    for text in ["# Avg bus bandwidth    : 33.3227\nhello\n", ""] {
        let f = temp_log(text.as_bytes());
        assert_eq!(code(&explain(&[f.path().to_str().unwrap()])), 2);
    }
    // A directory: refused before reading, said as such (tests/hostile_inputs.rs has the FIFO
    // and /dev/zero).
    let out = explain(&["fixtures"]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("cannot read fixtures: a directory, not a regular file"),
        "{}",
        stderr(&out)
    );
    // A file that is not there: could not run.
    let out = explain(&["fixtures/nccl-logs/no-such.log"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("cannot read fixtures/nccl-logs/no-such.log"));
    // --root makes no sense here.
    assert_eq!(
        code(&gdrdoctor(&[
            "--root",
            fixture("h200x2-vm"),
            "nccl",
            "explain",
            &log("nccl-1151-distance")
        ])),
        2
    );
}

/// Junk around real lines: the lines still count, the rest is skipped and said so.
#[test]
fn partial_answers_from_bad_input() {
    let real = std::fs::read(crate_dir().join(log("nv_peer_memory-56-distance"))).unwrap();
    let mut bytes = Vec::new();
    // A 1 MiB line (no newline for a long way), binary bytes, a line cut in the middle of a
    // multi-byte character, and lines from an NCCL that words things differently.
    bytes.extend(std::iter::repeat_n(b'x', 1 << 20));
    bytes.push(b'\n');
    bytes.extend_from_slice(b"\xff\xfe\x00binary\x80\n");
    bytes.extend_from_slice(&real);
    bytes.extend_from_slice(
        "node9:1:2 [0] NCCL INFO GPU Direct RDMA Engaged for GPU/0-1b000 via NET/7 (hops 3 of 4)\n"
            .as_bytes(),
    );
    bytes.extend_from_slice(
        "node9:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/\u{e9}".as_bytes()
            [..71]
            .as_ref(),
    );
    bytes.push(b'\n');
    bytes.extend(std::iter::repeat_n(b'y', (1 << 20) + 5));
    let f = temp_log(&bytes);
    let out = explain(&["--format", "json", f.path().to_str().unwrap()]);
    assert_eq!(code(&out), 1);
    let j = json(&out);
    assert_eq!(j["inputs"][0]["long_lines_skipped"], 2);
    assert_eq!(j["unrecognised"]["count"], 3, "{j:#}");
    assert_eq!(j["verdict"]["without_gdr"], 4);
    let human = stdout(&explain(&[f.path().to_str().unwrap()]));
    assert!(human.contains("2 too long (skipped)"), "{human}");
    assert!(
        human.contains("about GDR in no known wording, skipped"),
        "{human}"
    );
    assert!(human.contains("GPU Direct RDMA Engaged"), "{human}");
}

#[test]
fn settings_are_still_the_default() {
    let plain = gdrdoctor(&["--root", fixture("h200x2-vm"), "nccl"]);
    let named = gdrdoctor(&["--root", fixture("h200x2-vm"), "nccl", "settings"]);
    assert_eq!(code(&plain), 0);
    assert_eq!(stdout(&plain), stdout(&named));
    assert!(stdout(&plain).contains("NCCL_SOCKET_IFNAME"));
}

/// What no public log in the fixtures shows, in lines NCCL prints (each in the wording of the
/// source named): the ring GDR flag of another rank, GDR through another NIC of the same GPU,
/// a plugin warning whose location is a C++ signature, `#` comments of a pasted configuration.
#[test]
fn evidence_beyond_the_fixtures() {
    let run = |text: &str| {
        let f = temp_log(text.as_bytes());
        let out = explain(&["--format", "json", f.path().to_str().unwrap()]);
        let human = stdout(&explain(&[f.path().to_str().unwrap()]));
        (code(&out), json(&out), human)
    };
    let causes = |j: &serde_json::Value| -> Vec<String> {
        j["diagnoses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["cause"].as_str().unwrap().to_owned())
            .collect()
    };
    // 2.24+ src/transport/generic.cc: the flag combined over every rank; this node's own
    // connections all used GDR.
    let (exit, j, human) = run(
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
         n1:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n\
         n1:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 0\n",
    );
    assert_eq!(
        (exit, causes(&j)),
        (1, vec!["gdr-off-elsewhere".to_owned()])
    );
    assert!(human.contains("get that rank's log"), "{human}");
    // GDR 1 on a node whose connections used it: nothing to add.
    let (exit, j, _) = run(
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
         n1:1:2 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1\n",
    );
    assert_eq!((exit, causes(&j).len()), (0, 0));
    // The same GPU (rank 0) did GDR through NIC 0 and not through NIC 1: its memory path works.
    let (exit, j, human) = run(
        "n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n\
         n1:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [send] via NET/IB/1\n",
    );
    assert_eq!((exit, causes(&j)), (1, vec!["nic-specific".to_owned()]));
    assert!(
        human.contains("the same GPU (rank 0) did GDR through NIC 0"),
        "{human}"
    );
    assert!(!human.contains("peermem-not-loaded"), "{human}");
    // aws-ofi-nccl 1.13+ (C++) names its function with the signature; the host still reads.
    let (exit, j, human) = run(
        "ip-10-1-2-3:79:2547 [0] int nccl_net_ofi_create_plugin(nccl_net_ofi_plugin_t**):208 NCCL WARN NET/OFI Failed to initialize sendrecv protocol\n\
         ip-10-1-2-3:79:2547 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n\
         ip-10-1-2-3:79:2547 [0] NCCL INFO Using network Socket\n",
    );
    assert_eq!((exit, causes(&j)), (1, vec!["plugin-failed".to_owned()]));
    assert!(human.contains("node ip-10-1-2-3:"), "{human}");
    assert!(!human.contains("Unset NCCL_IB_DISABLE"), "{human}");
    // A pasted configuration: its `#` comments quote NCCL and are no log line.
    let (exit, j, human) = run(
        "# export NCCL_IB_DISABLE=1  # else: NCCL WARN NET/OFI aws-ofi-nccl initialization failed\n\
         # VALIDATED!!  NCCL INFO Dmabuf feature disabled without NCCL_DMABUF_ENABLE=1\n\
         n1:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n",
    );
    assert_eq!((exit, causes(&j).len()), (0, 0));
    assert_eq!(j["inputs"][0]["commented"], 2);
    assert!(j["warnings"].as_array().unwrap().is_empty(), "{j:#}");
    assert!(
        human.contains("2 lines in `#` comments (skipped)"),
        "{human}"
    );
    // Ray's suffix with real escape bytes.
    let (_, j, _) = run(
        "\u{1b}[36m(RayWorkerWrapper pid=1)\u{1b}[0m n1:1:2 [0] NCCL INFO Using network IB\u{1b}[32m [repeated 7x across cluster]\u{1b}[0m\n",
    );
    assert_eq!(j["nodes"][0]["networks"][0], "IB");
    // Connections inside the node on two hosts: an excerpt of a run across nodes, not a
    // single-node run.
    let (exit, _, _) = run(
        "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n\
         b:1:2 [0] NCCL INFO Channel 00/0 : 8[0] -> 9[1] via P2P/IPC\n",
    );
    assert_eq!(exit, 1);
    let (exit, _, human) = run("a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n");
    assert_eq!(exit, 3, "{human}");
    // Only comments: nothing NCCL printed, exit 2.
    let f = temp_log(b"# NCCL WARN something\n");
    assert_eq!(code(&explain(&[f.path().to_str().unwrap()])), 2);
}

/// Issue 42: `--follow` on a log written line by line prints a rank's transport verdict as soon
/// as its lines arrive, before the writer ends (NVIDIA/nccl#1412's log, `fixtures/nccl-logs`),
/// and ends with the whole explanation once the file stops growing for --idle seconds.
#[test]
fn follow_prints_a_ranks_verdict_before_the_writer_ends() {
    use std::io::{BufRead as _, Write as _};
    let log =
        std::fs::read_to_string(crate_dir().join("fixtures/nccl-logs/nccl-1412-no-gdrdma.log"))
            .unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let first = lines.iter().position(|l| l.contains("via NET/")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.log");
    let mut w = std::fs::File::create(&path).unwrap();
    let mut child = Gdrdoctor::new()
        .args([
            "nccl",
            "explain",
            "--follow",
            "--idle",
            "3",
            path.to_str().unwrap(),
        ])
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    for l in &lines[..=first] {
        writeln!(w, "{l}").unwrap();
        w.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The writer has not finished: the verdict of the rank whose line arrived is already out,
    // and gdrdoctor still follows the file.
    let is_verdict =
        |l: &String| l.starts_with("swat1-04 rank ") && l.ends_with("-> NIC 3 over IB: no GDR");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut seen = Vec::new();
    while !seen.iter().any(is_verdict) {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(_) => panic!("no verdict while the writer runs: {seen:?}"),
        }
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "it ended before the log did"
    );
    assert_eq!(seen.iter().filter(|l| is_verdict(l)).count(), 1, "{seen:?}");
    for l in &lines[first + 1..] {
        writeln!(w, "{l}").unwrap();
    }
    w.flush().unwrap();
    let started = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(status.code(), Some(1), "no GDR: not ready");
    let rest: Vec<String> = rx.iter().collect();
    // The other ranks' verdicts came as their lines did, then the whole explanation.
    assert!(
        rest.iter().filter(|l| is_verdict(l)).count() >= 1,
        "{rest:?}"
    );
    assert!(
        rest.iter().any(|l| l.starts_with("node swat1-04")),
        "{rest:?}"
    );
}
