//! The kernel's QoS answers on the RoCE netdevs (dcbnl over rtnetlink, the ethtool ioctl), read
//! live on this machine's kernel, and the file a capture keeps them in
//! (`/gdrdoctor/qos.json`, docs/qos-json.md): written by a live capture, read back by a check of
//! the copy as it was written, and carried by a copy of the copy.
#![allow(clippy::disallowed_methods)] // tests read what they wrote, not a node

use crate::common::*;
use gdrdoctor::config::Config;
use gdrdoctor::model::qos::{ErrorKind, Qos, QosAnswers, RECORDED_QOS};
use gdrdoctor::probe::qos;
use gdrdoctor::root::Root;
use std::path::Path;

/// The capture's record, as text and as read back.
fn record(capture: &Path) -> (String, QosAnswers) {
    let text = std::fs::read_to_string(capture.join(RECORDED_QOS.trim_start_matches('/')))
        .expect("a live capture writes gdrdoctor/qos.json");
    let answers = QosAnswers::parse(text.as_bytes()).unwrap();
    (text, answers)
}

fn capture(args: &[&str], out: &Path) {
    let mut all = args.to_vec();
    all.extend(["capture", out.to_str().unwrap()]);
    let o = gdrdoctor(&all);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

/// What a check of `root` has for the runs' QoS.
fn loaded(root: &Path) -> Qos {
    let root = Root::open(root).unwrap();
    let (inv, runs) = gdrdoctor::probe::load_captured(&root, &Config::default());
    assert!(
        !inv.problems.iter().any(|p| p.path == RECORDED_QOS),
        "{:?}",
        inv.problems
    );
    runs.qos
}

/// Every netdev of this machine, by name, with its driver (none for lo, ifb, veth's peers...).
fn netdevs() -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let driver = std::fs::read_link(e.path().join("device/driver"))
                .ok()
                .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()));
            (name, driver)
        })
        .collect();
    out.sort();
    out
}

/// A live capture records what the kernel answered for the RoCE netdevs (none on a machine
/// without RDMA: an empty record, so that its copy says "none asked", not "never recorded");
/// the file is the one the reader reads back, byte for byte, and a check of the copy has it
/// as recorded.
#[test]
fn a_live_capture_records_the_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("live");
    capture(&[], &out);
    let (text, answers) = record(&out);
    assert!(text.starts_with("{\n  \"version\": 1,\n"), "{text}");
    assert_eq!(answers.to_json(), text);
    // The netdevs asked are the RoCE ports' of this node, as its inventory has them.
    let live = Root::live();
    let (inv, _) = gdrdoctor::probe::load_captured(&live, &Config::default());
    let roce = qos::roce_netdevs(&inv);
    assert_eq!(
        answers.netdevs.keys().cloned().collect::<Vec<_>>(),
        roce.iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(loaded(&out), Qos::Recorded(answers));
}

/// This kernel's answers for every netdev it has, asked for real: the loopback device (no
/// dcbnl_ops in any kernel) and a virtio-net NIC answer dcbnl with EOPNOTSUPP, a typed "no
/// DCB"; a virtio-net NIC has driver statistics, read for real. Recorded in a capture, they
/// read back exactly, and a copy of that capture carries them unchanged.
#[test]
fn this_kernels_answers_round_trip() {
    let netdevs = netdevs();
    let answers = qos::read(netdevs.iter().map(|(n, _)| n.as_str()));
    let lo = &answers.netdevs["lo"];
    assert_eq!(lo.dcb.as_ref().unwrap_err().kind, ErrorKind::NotSupported);
    assert_eq!(
        lo.ethtool.pause.as_ref().unwrap_err().kind,
        ErrorKind::NotSupported
    );
    for (name, driver) in &netdevs {
        let q = &answers.netdevs[name];
        eprintln!(
            "{name} ({}): dcb {:?}; pause {:?}; {} statistics kept",
            driver.as_deref().unwrap_or("no driver"),
            q.dcb.as_ref().map_err(|e| e.kind),
            q.ethtool.pause.as_ref().map_err(|e| e.kind),
            q.ethtool.stats.as_ref().map_or(0, |s| s.len()),
        );
        if driver.as_deref() == Some("virtio_net") {
            assert_eq!(q.dcb.as_ref().unwrap_err().kind, ErrorKind::NotSupported);
            // virtio_net's statistics (drivers/net/virtio_net.c): `rx_drops` among them.
            let stats = q.ethtool.stats.as_ref().unwrap();
            assert!(stats.iter().any(|(n, _)| n == "rx_drops"), "{stats:?}");
        }
    }
    // Into a capture of this machine, in place of its own record.
    let tmp = tempfile::tempdir().unwrap();
    let first = tmp.path().join("first");
    capture(&[], &first);
    let file = first.join(RECORDED_QOS.trim_start_matches('/'));
    std::fs::write(&file, answers.to_json()).unwrap();
    assert_eq!(loaded(&first), Qos::Recorded(answers.clone()));
    // A copy of the copy carries the record as it was, and reads the same.
    let second = tmp.path().join("second");
    capture(&["--root", first.to_str().unwrap()], &second);
    assert_eq!(record(&second).0, answers.to_json());
    assert_eq!(loaded(&second), Qos::Recorded(answers));
}

/// A record the reader cannot take is a problem that names it, never a crash or an answer;
/// a capture without one (made before it was recorded) has none, and says why.
#[test]
fn a_bad_or_missing_record() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("c");
    capture(&[], &out);
    let file = out.join(RECORDED_QOS.trim_start_matches('/'));
    std::fs::write(&file, r#"{"version": 9, "netdevs": {}}"#).unwrap();
    let root = Root::open(&out).unwrap();
    let (inv, runs) = gdrdoctor::probe::load_captured(&root, &Config::default());
    let p = inv
        .problems
        .iter()
        .find(|p| p.path == RECORDED_QOS)
        .expect("a problem naming the record");
    assert!(p.message.contains("version 9"), "{}", p.message);
    assert!(matches!(runs.qos, Qos::NotRead(_)));
    std::fs::remove_file(&file).unwrap();
    let Qos::NotRead(why) = loaded(&out) else {
        panic!("no record, no answers")
    };
    assert!(why.contains("made before"), "{why}");
}

/// The example in docs/qos-json.md is a record gdrdoctor reads, and writes back as it stands.
#[test]
fn the_documented_example_is_a_record() {
    let doc = std::fs::read_to_string(crate_dir().join("docs/qos-json.md")).unwrap();
    let start = doc.find("```json\n").expect("an example") + "```json\n".len();
    let example = &doc[start..start + doc[start..].find("```").unwrap()];
    let answers = QosAnswers::parse(example.as_bytes()).unwrap();
    assert_eq!(answers.to_json(), example);
    let mlx5 = &answers.netdevs["enp1s0f0np0"];
    let pfc = mlx5.dcb.as_ref().unwrap().pfc.as_ref().unwrap();
    assert_eq!(pfc.priorities(), vec![3]);
    assert_eq!(mlx5.ethtool.stat("rx_prio3_pause"), Some(9));
    assert!(
        answers.netdevs["eth0"]
            .dcb
            .as_ref()
            .unwrap_err()
            .not_supported()
    );
}
