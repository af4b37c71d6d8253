//! Differential test against pciutils: for every configuration-space dump we have (pciutils' own
//! test dumps, and the config files of the real captures), gdrdoctor's decoding of the PCI
//! Express port type and of ACS equals what `lspci -F FILE -vvv` prints for the same bytes.
#![allow(clippy::disallowed_methods)] // tests read dumps, not a node

use crate::common::*;
use gdrdoctor::parse::pci::{acs, acs_flags, express};
use std::process::Command;

/// One device's dump: the file lspci reads it from, its slot, its bytes.
struct Dump {
    file: std::path::PathBuf,
    slot: String,
    bytes: Vec<u8>,
}

/// Devices in an `lspci -F` file: a `BB:DD.F ...` line, then `OFF: xx xx ...` hex rows.
fn parse_dump_file(path: &std::path::Path) -> Vec<Dump> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut out: Vec<Dump> = Vec::new();
    for line in text.lines() {
        let is_slot = line.len() > 8
            && line.as_bytes()[2] == b':'
            && line.as_bytes()[5] == b'.'
            && !line.starts_with('\t');
        if is_slot
            && line[..7]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            out.push(Dump {
                file: path.to_owned(),
                slot: line[..7].to_owned(),
                bytes: Vec::new(),
            });
            continue;
        }
        let Some((off, hex)) = line.split_once(": ") else {
            continue;
        };
        if !(2..=3).contains(&off.len()) || !off.bytes().all(|b| b.is_ascii_hexdigit()) {
            continue;
        }
        let Some(dev) = out.last_mut() else { continue };
        let off = usize::from_str_radix(off, 16).unwrap();
        let bytes: Vec<u8> = hex
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        if dev.bytes.len() < off + bytes.len() {
            dev.bytes.resize(off + bytes.len(), 0);
        }
        dev.bytes[off..off + bytes.len()].copy_from_slice(&bytes);
    }
    out
}

/// A binary `config` file from a capture, written as an `lspci -F` file.
fn dump_from_config(config: &std::path::Path, dir: &std::path::Path, n: usize) -> Dump {
    let bytes = std::fs::read(config).unwrap();
    let name = config
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap();
    let slot = name[5..].to_owned(); // 0000:03:00.0 -> 03:00.0
    let mut text = format!(
        "{slot} Class 0000: Device {:02x}{:02x}:{:02x}{:02x}\n",
        bytes[1], bytes[0], bytes[3], bytes[2]
    );
    let wide = bytes.len() > 256;
    for (i, row) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        text += &if wide {
            format!("{:03x}: {}\n", i * 16, hex.join(" "))
        } else {
            format!("{:02x}: {}\n", i * 16, hex.join(" "))
        };
    }
    let file = dir.join(format!("dump{n}.txt"));
    std::fs::write(&file, text).unwrap();
    Dump { file, slot, bytes }
}

/// What lspci says: (`Express (vN) Type`, `ACSCap` flags, `ACSCtl` flags).
fn lspci(d: &Dump) -> (Option<(u8, String)>, Option<String>, Option<String>) {
    let out = Command::new("lspci")
        .arg("-F")
        .arg(&d.file)
        .args(["-vvv", "-s", &d.slot])
        .output()
        .expect("lspci (pciutils) is needed for this test: apt-get install pciutils");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut express = None;
    let (mut cap, mut ctl) = (None, None);
    for line in text.lines() {
        if let Some(rest) = line.split_once("Express (v").map(|(_, r)| r) {
            let (ver, rest) = rest.split_once(") ").unwrap();
            let kind = rest.split([',', '(']).next().unwrap().trim().to_owned();
            express = Some((ver.parse().unwrap(), kind));
        } else if let Some(v) = line.trim().strip_prefix("ACSCap:") {
            cap = Some(v.trim().to_owned());
        } else if let Some(v) = line.trim().strip_prefix("ACSCtl:") {
            ctl = Some(v.trim().to_owned());
        }
    }
    (express, cap, ctl)
}

fn ours(d: &Dump) -> (Option<(u8, String)>, Option<String>, Option<String>) {
    let e = express(&d.bytes).map(|e| (e.version, e.port_type.lspci_name().to_owned()));
    let a = acs(&d.bytes);
    (
        e,
        a.map(|a| acs_flags(a.capability)),
        a.map(|a| acs_flags(a.control)),
    )
}

#[test]
fn port_type_and_acs_match_lspci() {
    let tmp = tempfile::tempdir().unwrap();
    let mut dumps = Vec::new();
    for e in std::fs::read_dir(home().join("fixtures/pciutils")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "txt") {
            dumps.extend(parse_dump_file(&p));
        }
    }
    // Every config file of the real captures (the lab's switch and root ports with ACS).
    // And the synthetic 8-GPU node's: switch ports with ACS, written by fixtures/synth.
    for name in ["lab-switch-pt", "h200x2-vm", "healthy-8gpu-roce"] {
        // The captures are archives: their config files unpacked into a directory.
        let unpacked = tempfile::tempdir().unwrap();
        let root = fixture_path(name);
        let root = if root.is_dir() {
            root
        } else {
            let ok = Command::new("tar")
                .arg("xzf")
                .arg(&root)
                .arg("-C")
                .arg(unpacked.path())
                .args(["--wildcards", "*/config"])
                .status()
                .unwrap();
            assert!(ok.success(), "{name}: tar");
            unpacked.path().to_owned()
        };
        let found = Command::new("find")
            .arg(root.join("sys/devices"))
            .args(["-name", "config", "-type", "f"])
            .output()
            .unwrap();
        for line in String::from_utf8(found.stdout).unwrap().lines() {
            let n = dumps.len();
            dumps.push(dump_from_config(std::path::Path::new(line), tmp.path(), n));
        }
    }
    assert!(dumps.len() >= 20, "only {} dumps", dumps.len());
    let mut with_acs = 0;
    let mut failures = Vec::new();
    for d in &dumps {
        let theirs = lspci(d);
        let mine = ours(d);
        if mine.1.is_some() {
            with_acs += 1;
        }
        if theirs != mine {
            failures.push(format!(
                "{} {}: lspci {theirs:?}, gdrdoctor {mine:?}",
                d.file.display(),
                d.slot
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        with_acs >= 10,
        "the dumps hold {with_acs} ACS capabilities; the test needs some"
    );
}
