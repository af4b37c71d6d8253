//! `.tar.gz` captures read in place, and `gdrdoctor fleet` over many captures: the small fleet
//! (generated as fixtures/fleet/nodeNN.tar.gz; expected cross-node findings snapshotted), archive
//! captures equal to their directories, and a hostile-archive corpus refused capture by capture.
#![allow(clippy::disallowed_methods)] // tests read the repository, not a node

use crate::common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[test]
fn the_small_fleet_shows_what_differs() {
    let out = gdrdoctor(&["fleet", fixture("fleet"), "--format", "json"]);
    assert_eq!(
        code(&out),
        1,
        "cross-node findings make the fleet not clean"
    );
    let r = json(&out);
    assert_eq!(r["summary"]["captures"], 8);
    assert_eq!(r["summary"]["ready"], 8);
    let codes: Vec<&str> = r["cross"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "fleet-gid-index-differs",
            "fleet-gpu-driver-differs",
            "fleet-nic-firmware-differs",
            "fleet-placement-differs",
            "fleet-peermem-differs"
        ]
    );
    // The A100 node is alone in its model: compared with nothing.
    assert!(
        r["cross"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["model"] == "Supermicro SYS-821GE-TNHR")
    );
    insta::assert_snapshot!("fleet-json", stdout(&out));
    let human = gdrdoctor(&["fleet", fixture("fleet")]);
    insta::assert_snapshot!("fleet-human", stdout(&human));
    let csv = stdout(&gdrdoctor(&["fleet", fixture("fleet"), "--format", "csv"]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 9);
    assert!(lines[0].starts_with("capture,hostname,product,board,kernel"));
    assert!(
        lines[4].contains("gpu-node04") && lines[4].contains("nvidia 570.124.06 (open)"),
        "{}",
        lines[4]
    );
    // One job or four: the same output.
    let one = stdout(&gdrdoctor(&[
        "fleet",
        fixture("fleet"),
        "--format",
        "json",
        "--jobs",
        "1",
    ]));
    let four = stdout(&gdrdoctor(&[
        "fleet",
        fixture("fleet"),
        "--format",
        "json",
        "--jobs",
        "4",
    ]));
    assert_eq!(one, four);
}

/// `gdrdoctor capture X.tar.gz`, then `check --root X.tar.gz`: the same report as the directory.
#[test]
fn archive_captures_read_in_place_equal_their_directories() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "healthy-8gpu-roce",
        "h200x2-vm",
        "iommu-translated",
        "amd-mi300x-roce",
    ] {
        let archive = dir.path().join(format!("{name}.tar.gz"));
        // The real capture is committed as an archive: its directory is that archive unpacked.
        let (_unpacked, src) = if CAPTURES.contains(&name) {
            let (d, root) = fixture_copy(name);
            (Some(d), root)
        } else {
            (None, fixture_path(name))
        };
        let src = src.to_str().unwrap();
        let out = gdrdoctor(&["--root", src, "capture", archive.to_str().unwrap()]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let strip = |mut v: serde_json::Value| {
            v.as_object_mut().unwrap().remove("root");
            v
        };
        let from_dir = strip(json(&gdrdoctor(&[
            "--root", src, "check", "--format", "json",
        ])));
        let from_tar = strip(json(&gdrdoctor(&[
            "--root",
            archive.to_str().unwrap(),
            "check",
            "--format",
            "json",
        ])));
        assert_eq!(from_dir, from_tar, "{name}");
    }
    // Nothing was extracted: the temp dir holds the archives only.
    let entries: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries.len(), 4, "{entries:?}");
}

// -- the hostile-archive corpus --------------------------------------------------------------

/// A tar member with raw bytes for its name: the tar crate's own path setters refuse `..`.
fn raw_member(kind: tar::EntryType, name: &[u8], link: &[u8], data: &[u8]) -> Vec<u8> {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    {
        let old = h.as_old_mut();
        old.name[..name.len()].copy_from_slice(name);
        old.linkname[..link.len()].copy_from_slice(link);
    }
    h.set_cksum();
    let mut out = h.as_bytes().to_vec();
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
    out
}

fn tar_gz(members: &[Vec<u8>]) -> Vec<u8> {
    let mut tar = Vec::new();
    // Every hostile capture is otherwise a root: it has a sys/ directory.
    tar.extend(raw_member(tar::EntryType::Directory, b"sys/", b"", b""));
    for m in members {
        tar.extend_from_slice(m);
    }
    tar.extend(vec![0u8; 1024]);
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).unwrap();
    gz.finish().unwrap()
}

fn corpus(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    use tar::EntryType as T;
    let mut cases: Vec<(&str, Vec<u8>, &'static str)> = vec![
        (
            "traversal",
            tar_gz(&[raw_member(
                T::Regular,
                b"sys/../../etc/passwd",
                b"",
                b"root:x:0:0\n",
            )]),
            "climbs out with '..'",
        ),
        (
            "absolute",
            tar_gz(&[raw_member(T::Regular, b"/etc/passwd", b"", b"root:x:0:0\n")]),
            "has an absolute path",
        ),
        (
            "link-escape",
            tar_gz(&[raw_member(T::Symlink, b"sys/class", b"../../../etc", b"")]),
            "leads out of the capture",
        ),
        (
            "link-absolute",
            tar_gz(&[raw_member(T::Symlink, b"sys/class", b"/etc", b"")]),
            "points to the absolute path",
        ),
        (
            "device",
            tar_gz(&[raw_member(T::Char, b"sys/mem", b"", b"")]),
            "is a device file",
        ),
        (
            "fifo",
            tar_gz(&[raw_member(T::Fifo, b"sys/fifo", b"", b"")]),
            "is a FIFO",
        ),
        (
            "hardlink",
            tar_gz(&[raw_member(T::Link, b"sys/passwd", b"etc/passwd", b"")]),
            "is a hard link",
        ),
        (
            "oversized",
            tar_gz(&[raw_member(
                T::Regular,
                b"sys/big",
                b"",
                &vec![b'x'; 2 << 20],
            )]),
            "over the 1048576-byte read limit",
        ),
    ];
    // Truncated: a real capture cut in half.
    let real = dir.join("real.tar.gz");
    assert_eq!(
        code(&gdrdoctor(&[
            "--root",
            fixture("healthy-8gpu-roce"),
            "capture",
            real.to_str().unwrap()
        ])),
        0
    );
    let bytes = std::fs::read(&real).unwrap();
    cases.push((
        "truncated",
        bytes[..bytes.len() / 2].to_vec(),
        "truncated or corrupt",
    ));
    let mut out = Vec::new();
    for (name, data, why) in cases {
        let p = dir.join(format!("{name}.tar.gz"));
        std::fs::write(&p, data).unwrap();
        out.push((p, why));
    }
    // A gzip bomb: 300 MiB of zeros, about 300 KB compressed (gzip -1 by the system's gzip).
    let bomb = dir.join("bomb.tar.gz");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "head -c 314572800 /dev/zero | gzip -1 > {}",
            bomb.display()
        ))
        .status()
        .unwrap();
    assert!(status.success());
    out.push((bomb, "expands beyond 256 MiB"));
    out
}

#[test]
fn hostile_archives_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = corpus(dir.path());
    for (path, why) in &cases {
        let out = gdrdoctor(&["--root", path.to_str().unwrap(), "check"]);
        assert_eq!(code(&out), 2, "{}: {}", path.display(), stdout(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&path.display().to_string()),
            "names the capture: {err}"
        );
        assert!(err.contains("capture refused"), "{err}");
        assert!(
            err.contains(why),
            "{}: expected {why:?} in {err}",
            path.display()
        );
    }
    // In a fleet, each is reported with its reason and the good capture still counts.
    let real = dir.path().join("real.tar.gz");
    let mut args: Vec<String> = vec![
        "fleet".into(),
        "--format".into(),
        "json".into(),
        real.display().to_string(),
    ];
    args.extend(cases.iter().map(|(p, _)| p.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let r = json(&gdrdoctor(&refs));
    assert_eq!(r["summary"]["ready"], 1);
    assert_eq!(r["summary"]["unreadable"], cases.len());
    for n in r["nodes"].as_array().unwrap().iter().skip(1) {
        assert!(
            n["unreadable"]
                .as_str()
                .unwrap()
                .contains("capture refused"),
            "{n}"
        );
    }
    // Nothing was written anywhere: the temp dir holds exactly what the test put there, and no
    // member name appeared on this machine.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), cases.len() + 1, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".tar.gz")));
    assert!(!dir.path().join("etc").exists() && !Path::new("etc/passwd").exists());
}

/// A capture of `mib` members of 1 MiB of zeros each under sys/ (each within the member limit):
/// a few hundred KB on disk, `mib` MiB in memory once read.
fn zeros_capture(path: &Path, mib: usize) {
    let gz = flate2::write::GzEncoder::new(
        std::fs::File::create(path).unwrap(),
        flate2::Compression::fast(),
    );
    let mut tar = tar::Builder::new(gz);
    let zeros = vec![0u8; 1 << 20];
    for k in 0..mib {
        let mut h = tar::Header::new_gnu();
        h.set_size(zeros.len() as u64);
        h.set_mode(0o644);
        tar.append_data(&mut h, format!("sys/zeros/{k:04}"), zeros.as_slice())
            .unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap();
}

#[test]
fn fleet_jobs_share_one_memory_budget() {
    // Eight jobs at once over six gzip bombs (300 MiB each: each held up to the 256 MiB cap
    // before it is refused), two honest but big captures (200 MiB, within the cap) and a real
    // one. Each job used to be capped on its own: 8 x 256 MiB. The run's budget (512 MiB) now
    // bounds them all together; the big honest ones wait for room instead of being refused.
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.tar.gz");
    let out = gdrdoctor(&[
        "--root",
        fixture("healthy-8gpu-roce"),
        "capture",
        real.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (bomb, big) = (
        dir.path().join("bomb.tar.gz"),
        dir.path().join("big.tar.gz"),
    );
    zeros_capture(&bomb, 300);
    zeros_capture(&big, 200);
    let mut captures: Vec<PathBuf> = Vec::new();
    for k in 0..6 {
        let p = dir.path().join(format!("bomb{k}.tar.gz"));
        std::fs::hard_link(&bomb, &p).unwrap();
        captures.push(p);
    }
    for k in 0..2 {
        let p = dir.path().join(format!("big{k}.tar.gz"));
        std::fs::hard_link(&big, &p).unwrap();
        captures.push(p);
    }
    captures.push(real);
    let mut args = vec!["fleet", "-j", "8", "--format", "json"];
    args.extend(captures.iter().map(|p| p.to_str().unwrap()));
    // Under 640 MiB, or the jobs' archives are not bounded together.
    let ran = Gdrdoctor::new()
        .args(&args)
        .within(Duration::from_secs(300), 639)
        .run();
    assert_eq!(ran.code, 1, "bombs make the fleet not clean");
    let r: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let nodes = r["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 9);
    for n in &nodes[..6] {
        let why = n["unreadable"].as_str().unwrap_or_else(|| panic!("{n}"));
        assert!(
            why.contains("capture refused") && why.contains("expands beyond 256 MiB"),
            "{why}"
        );
    }
    for n in &nodes[6..8] {
        assert!(
            n.get("unreadable").is_none(),
            "never refused for others' size: {n}"
        );
        assert_eq!(n["gpus"], 0, "{n}");
    }
    assert_eq!(nodes[8]["ready"], true, "{}", nodes[8]);
    assert_eq!(r["summary"]["unreadable"], 6);
}

#[test]
fn fleet_inputs_directories_globs_and_missing() {
    // A glob the shell did not expand, a directory of captures, and a path that is neither.
    let out = gdrdoctor(&["fleet", "fixtures/fleet/node0?.tar.gz", "--format", "csv"]);
    assert_eq!(stdout(&out).lines().count(), 9);
    let out = gdrdoctor(&[
        "fleet",
        "fixtures/pciutils",
        fixture("healthy-8gpu-roce"),
        "--format",
        "json",
    ]);
    let r = json(&out);
    assert_eq!(r["summary"]["unreadable"], 1);
    assert!(
        r["nodes"][0]["unreadable"]
            .as_str()
            .unwrap()
            .contains("neither a capture nor a directory of captures")
    );
    assert_eq!(code(&gdrdoctor(&["fleet"])), 2, "captures are required");
    assert_eq!(
        code(&gdrdoctor(&[
            "--root",
            fixture("fleet/node01"),
            "fleet",
            "x"
        ])),
        2
    );
}

/// Every field of the fleet JSON is named in docs/fleet.md.
#[test]
fn fleet_json_is_documented() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.tar.gz"), b"not gzip").unwrap();
    let bad = dir.path().join("bad.tar.gz");
    // A two-node report whose one rail fails both ways, and a JSON file that is not one: the
    // `two_node` member with every field.
    let report = dir.path().join("a.json");
    std::fs::write(
        &report,
        serde_json::to_vec(&failing_two_node_report()).unwrap(),
    )
    .unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, br#"{"schema": "gdrdoctor.report"}"#).unwrap();
    let r = json(&gdrdoctor(&[
        "fleet",
        fixture("fleet"),
        bad.to_str().unwrap(),
        report.to_str().unwrap(),
        other.to_str().unwrap(),
        "--format",
        "json",
    ]));
    assert_eq!(r["two_node"]["failed"], 2, "{r}");
    assert_eq!(
        r["two_node"]["unreadable"].as_array().unwrap().len(),
        1,
        "{r}"
    );
    let fields = Fields {
        // Maps keyed by data (finding codes, statuses, values) are documented as maps.
        data_keys: &[
            ("codes", None),
            ("problems", None),
            ("values", None),
            ("nccl", None),
        ],
        keys_only: true,
        ..Fields::default()
    };
    assert_json_documented("docs/fleet.md", &fields, &[r]);
}

/// Two nodes of one model whose nccl.conf differ (issue 16): one cross-node finding per setting
/// that differs, naming the nodes and the values; a topology file of one name but other content
/// differs too; a pinned GID index equal to the one `gdrdoctor nccl` picks is no difference, a
/// pin elsewhere is.
#[test]
fn fleet_compares_nccl_settings() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    std::fs::create_dir(&caps).unwrap();
    let node = |n: &str, conf: &str, topo: &str| {
        let root = caps.join(n);
        copy_to(&format!("fleet/{n}"), &root);
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/nccl.conf"), conf).unwrap();
        std::fs::write(root.join("etc/topo.xml"), topo).unwrap();
    };
    let topo = |busid: &str| {
        format!(
            "<system version=\"1\">\n  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\">\n    <pci busid=\"{busid}\" class=\"0x020000\"/>\n  </cpu>\n</system>\n"
        )
    };
    // node01 and node02 are alike in everything the fleet compares but nccl.conf.
    node(
        "node01",
        "NCCL_TOPO_FILE=/etc/topo.xml\nNCCL_IB_HCA==mlx5_0\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_IB_GID_INDEX=3\n",
        &topo("0000:18:00.0"),
    );
    node(
        "node02",
        "NCCL_TOPO_FILE=/etc/topo.xml\nNCCL_IB_HCA==mlx5_1\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_DMABUF_ENABLE=0\n",
        &topo("0000:2a:00.0"),
    );
    let out = gdrdoctor(&["fleet", caps.to_str().unwrap(), "--format", "json"]);
    let r = json(&out);
    let cross = r["cross"].as_array().unwrap();
    let nccl: Vec<&serde_json::Value> = cross
        .iter()
        .filter(|c| c["code"] == "fleet-nccl-setting-differs")
        .collect();
    let aspects: Vec<&str> = nccl.iter().map(|c| c["aspect"].as_str().unwrap()).collect();
    assert_eq!(
        aspects,
        ["NCCL_TOPO_FILE", "NCCL_IB_HCA", "NCCL_DMABUF_ENABLE"],
        "{cross:#?}"
    );
    let hca = nccl[1]["message"].as_str().unwrap();
    assert!(
        hca.contains("=mlx5_0 on 1 node(s) (e.g. gpu-node01)")
            && hca.contains("=mlx5_1 on 1 node(s) (e.g. gpu-node02)"),
        "{hca}"
    );
    let dmabuf = nccl[2]["message"].as_str().unwrap();
    assert!(
        dmabuf.contains("(unset) on 1 node(s) (e.g. gpu-node01)")
            && dmabuf.contains("0 on 1 node(s) (e.g. gpu-node02)"),
        "{dmabuf}"
    );
    let file = nccl[0]["message"].as_str().unwrap();
    assert!(
        file.matches("/etc/topo.xml (content ").count() == 2,
        "{file}"
    );
    // node01 pins 3, the index gdrdoctor nccl picks on node02: no GID difference.
    assert!(
        !cross.iter().any(|c| c["code"] == "fleet-gid-index-differs"),
        "{cross:#?}"
    );
    assert_eq!(code(&out), 1);

    // A pin at 5 where node02's choice is 3: the GID index differs, naming both.
    std::fs::remove_dir_all(caps.join("node01")).unwrap();
    node(
        "node01",
        "NCCL_TOPO_FILE=/etc/topo.xml\nNCCL_IB_HCA==mlx5_1\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_DMABUF_ENABLE=0\nNCCL_IB_GID_INDEX=5\n",
        &topo("0000:2a:00.0"),
    );
    let r = json(&gdrdoctor(&[
        "fleet",
        caps.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let cross = r["cross"].as_array().unwrap();
    let codes: Vec<&str> = cross.iter().map(|c| c["code"].as_str().unwrap()).collect();
    assert_eq!(codes, ["fleet-gid-index-differs"], "{cross:#?}");
    let gid = cross[0]["message"].as_str().unwrap();
    assert!(
        gid.contains("5 on 1 node(s) (e.g. gpu-node01)")
            && gid.contains("3 on 1 node(s) (e.g. gpu-node02)"),
        "{gid}"
    );
}

/// `node-a`'s report of a test with `node-b` whose one rail failed both ways.
fn failing_two_node_report() -> gdrdoctor::probe::twonode::Report {
    use gdrdoctor::gdr::{Failure, FailureKind, Memory, NicSpec, PairResult};
    use gdrdoctor::probe::twonode::{Direction, Rail, RailResult, Report, Role, Settings};
    let rail = Rail {
        nic: NicSpec {
            device: "mlx5_0".into(),
            port: 1,
            gid_index: Some(3),
        },
        gpu: None,
        memory: Memory::Host,
        subject: "host memory".into(),
    };
    let failed = Direction {
        from: "node-a mlx5_0 port 1".into(),
        to: "node-b mlx5_0 port 1".into(),
        verified_bytes: None,
        gbps: None,
        latency_us: None,
        failure: Some(Failure {
            kind: FailureKind::CompletionError,
            step: "RDMA WRITE".into(),
            message: "completion with IBV_WC_RETRY_EXC_ERR".into(),
        }),
    };
    let mut r = Report::new("node-a", Role::Connector, Settings::default());
    r.peer = Some("node-b".into());
    r.rails.push(RailResult {
        index: 0,
        local: rail.clone(),
        peer: Some(rail),
        setup: PairResult::default(),
        peer_path: None,
        path_mtu: None,
        notes: vec![],
        outgoing: failed.clone(),
        incoming: failed,
    });
    r
}

/// Issue 25, the cause of `gdrdoctor nccl`'s item in `fleet`: a node whose /etc/nccl.conf is
/// there but cannot be read was compared as if it set nothing ("(unset)", like its siblings
/// without one), so the fleet saw no difference. What it may set is unknown, and says so.
#[test]
fn an_unreadable_nccl_conf_is_not_unset() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    std::fs::create_dir(&caps).unwrap();
    for n in ["node01", "node02"] {
        copy_to(&format!("fleet/{n}"), &caps.join(n));
    }
    std::fs::create_dir_all(caps.join("node02/etc/nccl.conf")).unwrap();
    let r = json(&gdrdoctor(&[
        "fleet",
        caps.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let cross = r["cross"].as_array().unwrap();
    let hca = cross
        .iter()
        .find(|c| c["code"] == "fleet-nccl-setting-differs" && c["aspect"] == "NCCL_IB_HCA")
        .unwrap_or_else(|| panic!("{cross:#?}"));
    let m = hca["message"].as_str().unwrap();
    assert!(
        m.contains("(unset) on 1 node(s) (e.g. gpu-node01)")
            && m.contains(
                "(unknown: /etc/nccl.conf could not be read) on 1 node(s) (e.g. gpu-node02)"
            ),
        "{m}"
    );
}

/// Two nodes of one model whose RoCE QoS differs (PFC on 3 against PFC on 4): the fleet names
/// the difference and the nodes on each side (issue 28).
#[test]
fn fleet_compares_the_roce_qos() {
    let dir = tempfile::tempdir().unwrap();
    let caps = dir.path().join("caps");
    std::fs::create_dir(&caps).unwrap();
    copy_to("roce-lossless-ok", &caps.join("a"));
    copy_to("roce-pfc-off-on-nccl-priority", &caps.join("b"));
    std::fs::write(caps.join("b/proc/sys/kernel/hostname"), "gpu-node-02\n").unwrap();
    let r = json(&gdrdoctor(&[
        "fleet",
        caps.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let nodes = r["nodes"].as_array().unwrap();
    let qos: Vec<&str> = nodes
        .iter()
        .map(|n| n["roce_qos"].as_str().unwrap())
        .collect();
    assert_eq!(
        qos,
        ["trust dscp, PFC on 3", "trust dscp, PFC on 4"],
        "{r:#}"
    );
    let cross: Vec<&serde_json::Value> = r["cross"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["code"] == "fleet-roce-qos-differs")
        .collect();
    assert_eq!(cross.len(), 1, "{r:#}");
    let m = cross[0]["message"].as_str().unwrap();
    assert!(
        m.contains("trust dscp, PFC on 3 on 1 node(s) (e.g. gpu-node-01)")
            && m.contains("trust dscp, PFC on 4 on 1 node(s) (e.g. gpu-node-02)"),
        "{m}"
    );
}
